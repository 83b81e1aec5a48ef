"""Every keyword torch accepts, compat accepts: for each name compat implements in ``torch``, ``torch.Tensor``,
``torch.nn.functional`` and ``torch.linalg``, the keyword parameters of torch's signature against compat's.

torch's Python functions have a signature. Its builtins have none: their keywords are the argument names of
the ATen operator schemas they are generated from (``aten::add.Tensor(Tensor self, Tensor other, *, Scalar
alpha=1)``, ``self`` being ``input`` in the function form), and without a schema the first lines of their
docstring (``add(input, other, *, alpha=1, out=None) -> Tensor``). The docstrings alone would mislead: some
name arguments that torch refuses (``Tensor.div(value)`` takes ``other``).
``out=`` is left out everywhere (the out-variant schemas too): compat writes no results into given tensors
(a function given ``out=`` raises ``TypeError``). The exemptions below are the only other differences, each
with its reason.
"""

import inspect
import re
import types

import pytest
import torch
import torch.nn.functional as TF

import tinyattn.compat as compat
import tinyattn.compat.nn.functional as CF

# (namespace, name) -> keywords torch accepts that compat does not, and why
EXEMPT = {
    ("F", "softmax"): ({"_stacklevel"}, "a private argument of torch's warning machinery"),
    ("F", "log_softmax"): ({"_stacklevel"}, "a private argument of torch's warning machinery"),
    ("F", "relu"): ({"inplace"}, "compat.nn.functional's relu has no in-place form yet (use torch.relu_)"),
    ("Tensor", "expand"): ({"implicit"}, "a TorchScript-internal flag that changes nothing in eager code"),
    # names an ATen schema gives that torch's own Python binding refuses (checked by calling torch)
    ("Tensor", "to"): ({"other"}, "t.to(other=u) raises in torch: its binding names the argument differently"),
    ("torch", "searchsorted"): ({"values"}, "torch.searchsorted(s, values=v) raises in torch"),
}
# keywords about memory layout and pinned memory (compat's arrays have one layout and no pinned memory; it
# accepts them where scripts pass them, ``to``, ``cuda``, nowhere else), and ``out_dtype``, the float32 result
# of the float16 matrix products on a CUDA GPU (compat's products keep their inputs' dtype)
UNSUPPORTED_KEYWORDS = {"memory_format", "layout", "pin_memory", "out_dtype"}


def _doc_keywords(obj, name):
    """The keyword names in the signature lines that open ``obj``'s docstring, or ``None`` without any."""
    found, keywords = False, set()
    for line in (obj.__doc__ or "").strip().splitlines():
        head = line.strip().split(" -> ")[0]
        match = re.fullmatch(rf"(?:torch\.)?(?:Tensor\.|linalg\.)?{re.escape(name)}\((.*)\)", head)
        if not match:
            if found:
                break
            continue
        found = True
        for part in match.group(1).split(","):
            part = part.strip().split("=")[0].split(":")[0].strip()
            if part and not part.startswith("*") and part.isidentifier():
                keywords.add(part)
    return keywords if found else None


def _signature_keywords(obj):
    try:
        parameters = inspect.signature(obj).parameters.values()
    except (TypeError, ValueError):
        return None
    if any(p.kind is p.VAR_KEYWORD for p in parameters):
        return "any"
    return {p.name for p in parameters if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)} - {"self"}


def _schema_keywords(space, name):
    """The argument names of the ATen operator ``name``'s overloads that take a tensor first (the schemas its
    Python binding is generated from), ``input`` for that tensor in a function and none for it in a method;
    ``None`` where there is no such operator."""
    try:
        schemas = torch._C._jit_get_schemas_for_operator(f"aten::{name}")
    except RuntimeError:
        return None
    schemas = [s for s in schemas if s.arguments and s.arguments[0].name in ("self", "input")
               and str(s.arguments[0].type) == "Tensor" and "out" not in s.overload_name.split("_")]
    if not schemas:
        return None
    names = {argument.name for schema in schemas for argument in schema.arguments[1:] if not argument.is_out}
    return names | {"input"} if space == "torch" else names


def torch_keywords(space, name):
    """The keywords torch's ``name`` accepts in ``space`` ("torch", "Tensor", "F"), or ``None`` if unknown."""
    owner = {"torch": torch, "Tensor": torch.Tensor, "F": TF, "linalg": torch.linalg}[space]
    obj = getattr(owner, name)
    keywords = _signature_keywords(obj)
    if keywords is not None:
        return None if keywords == "any" else keywords
    if space in ("torch", "Tensor"):
        keywords = _schema_keywords(space, name)
        if keywords is not None:
            return keywords
    if space == "Tensor" and callable(getattr(torch, name, None)) and not isinstance(getattr(torch, name), type):
        from_function = torch_keywords("torch", name)
        if from_function is not None:
            return from_function - {"input"}
    keywords = _doc_keywords(obj, name)
    if keywords is None and name.endswith("_") and hasattr(owner, name[:-1]):  # torch.exp_: exp's keywords
        return torch_keywords(space, name[:-1])
    return keywords


def _implemented():
    for space, ours, theirs in (("torch", compat, torch), ("Tensor", compat.Tensor, torch.Tensor), ("F", CF, TF),
                                ("linalg", compat.linalg, torch.linalg)):
        for name in dir(ours):
            if name.startswith("_") or not hasattr(theirs, name):
                continue
            try:
                mine = getattr(ours, name)
            except AttributeError:
                continue
            other = getattr(theirs, name)
            if any(isinstance(o, (type, types.ModuleType)) or not callable(o) for o in (mine, other)):
                continue
            if getattr(mine, "refusal", None) is not None:
                continue
            yield space, name


IMPLEMENTED = sorted(_implemented())


def test_the_walk_finds_the_everyday_names():
    for entry in [("torch", "add"), ("torch", "exp_"), ("Tensor", "sum"), ("Tensor", "clamp_min_"),
                  ("F", "cross_entropy")]:
        assert entry in IMPLEMENTED


def test_the_docstring_parser_reads_torch_builtins():
    assert torch_keywords("torch", "add") == {"input", "other", "alpha"}
    assert torch_keywords("Tensor", "div") == {"other", "rounding_mode"}
    assert torch_keywords("torch", "relu_") == {"input"}
    assert _doc_keywords(torch.Tensor.div, "div") == {"value", "rounding_mode"}  # (the docstring's own words)
    assert _doc_keywords(torch.add, "add") == {"input", "other", "alpha", "out"}


@pytest.mark.parametrize("space, name", IMPLEMENTED)
def test_every_keyword_torch_accepts_compat_accepts(space, name):
    expected = torch_keywords(space, name)
    if expected is None:
        pytest.skip(f"torch's {name} has neither a signature nor one in its docstring")
    owner = {"torch": compat, "Tensor": compat.Tensor, "F": CF, "linalg": compat.linalg}[space]
    accepted = _signature_keywords(getattr(owner, name))
    if accepted is None or accepted == "any":
        pytest.skip(f"compat's {name} takes any keyword")
    exempt, _ = EXEMPT.get((space, name), (set(), ""))
    assert (space, name) not in EXEMPT or EXEMPT[space, name][0] <= expected, "a stale exemption"
    missing = expected - accepted - {"out"} - UNSUPPORTED_KEYWORDS - exempt
    assert not missing, f"{space}.{name}: torch accepts {sorted(missing)}, compat's signature {sorted(accepted)}"


def test_the_keywords_exempted_as_refused_by_torch_are_refused_by_torch():
    x = torch.ones(3)
    with pytest.raises(TypeError):
        torch.searchsorted(x, values=x)
    with pytest.raises(TypeError):
        x.to(other=x)


def test_torch_names_for_the_native_parameters_work():
    x = compat.tensor([[1.0, -2.0, 3.0], [4.0, 5.0, -6.0]])
    assert compat.exp(input=x).shape == (2, 3)
    assert compat.matmul(input=x, other=x.T).shape == (2, 2)
    assert x.reshape(shape=(3, 2)).shape == (3, 2) and compat.reshape(x, shape=(6,)).shape == (6,)
    assert x.permute(dims=(1, 0)).shape == (3, 2) and x.view(size=(6,)).shape == (6,)
    assert x.new_zeros(size=(4,)).shape == (4,) and x.expand(size=(2, 2, 3)).shape == (2, 2, 3)
    assert [t.shape for t in compat.tensor_split(x, sections=3, dim=1)] == [(2, 1)] * 3
    assert [t.shape for t in x.split(split_size=1)] == [(1, 3)] * 2
    assert compat.split(tensor=x, split_size_or_sections=1)[0].shape == (1, 3)
    assert compat.dot(compat.ones(2), tensor=compat.ones(2)).item() == 2
    assert compat.concatenate([x, x], axis=0).shape == (4, 3)
    assert (compat.max(x, other=-x) == x.abs()).all() and (x.min(other=-x) == -x.abs()).all()
    assert compat.gather(x, 1, compat.tensor([[0], [1]]), sparse_grad=False).tolist() == [[1.0], [5.0]]
    y = compat.zeros(3)
    y.copy_(other=compat.ones(3), non_blocking=True)
    assert y.tolist() == [1.0, 1.0, 1.0]
    with pytest.raises(TypeError, match="input"):
        compat.exp(input=x, x=x)


@pytest.mark.parametrize("call", [lambda t, x: t.add(x, 1, out=x), lambda t, x: t.exp(x, out=x),
                                  lambda t, x: t.cat([x, x], out=x.clone()), lambda t, x: t.matmul(x, x, out=x.clone()),
                                  lambda t, x: t.sum(x, 0, out=x), lambda t, x: t.clamp_min(x, 0.0, out=x)])
def test_out_is_refused_in_words(call):
    x = torch.ones(2, 2)
    call(torch, x)  # torch takes it
    with pytest.raises(TypeError, match="does not write results into a given tensor"):
        call(compat, compat.ones(2, 2))


@pytest.mark.parametrize("method", ["view", "reshape", "expand", "new_zeros", "permute", "repeat"])
def test_methods_taking_sizes_take_them_as_torch_in_every_spelling(method):
    args = {"permute": (1, 0), "repeat": (1, 2), "expand": (3, 2, 3)}.get(method, (3, 2))
    keyword = {"view": "size", "reshape": "shape", "expand": "size", "new_zeros": "size", "permute": "dims",
               "repeat": "repeats"}[method]
    shapes = []
    for lib in (torch, compat):
        x = lib.ones(2, 3)
        calls = [getattr(x, method)(*args), getattr(x, method)(args), getattr(x, method)(**{keyword: args})]
        shapes.append([tuple(t.shape) for t in calls])
    assert shapes[1] == shapes[0]
