"""PyTorch's own op tests: every in-scope entry of torch's OpInfo database run on ``tinyattn.compat``, sample by sample.

For each entry (``tests/opinfo`` says which are in scope, by family, and why the others are not) and each check:

* ``value``: the function form and the method form (where torch has them) on every float64 sample (integer or
  boolean for the entries that take no floats), against torch: the same dtypes, shapes and values;
* ``grad``: the gradient under a random upstream gradient (``autograd.grad``), where the entry supports autograd;
* ``fd``: the same gradient against central finite differences of compat's own function, along a random
  direction (the calculus oracle, independent of torch);
* ``gradgrad``: the gradient of that gradient dotted with a random vector, where it supports gradgrad;
* ``jvp``: ``func.jvp`` with random tangents, where it supports forward AD;
* ``vmap``: ``func.vmap`` over a batch of two (the sample and its values reversed) against the two torch results;
* ``float32``, ``float16``: the values (and the dtype that comes out) on the samples in those dtypes, where the
  entry supports them, at their tolerances.

The default profiles run a few samples of each entry (evenly spaced through its list); the thorough profile
(``TINYATTN_PROFILE=thorough``) runs them all. A check a family's ``KNOWN`` lists is a strict xfail with its reason;
a sample a family's ``REFUSED`` lists is refused on purpose, and the test checks that it is refused with that error.
"""

import functools
import os
import re

import numpy as np
import opinfo
import pytest
import torch  # the test extra installs torch and expecttest, which op_db's module imports: nothing here skips
from torch.testing._internal.common_methods_invocations import op_db

import tinyattn.compat as tc

# importing torch's test utilities freezes torch.backends' flags for the whole process (a setting of torch's own
# suite); the compat project tests set them as scripts do, so the flags are unfrozen again
torch.backends.flags_frozen.__globals__["__allow_nonbracketed_mutation_flag"] = True

CHECKS = ("value", "grad", "fd", "gradgrad", "jvp", "vmap", "float32", "float16")
SAMPLES_PER_CHECK = None if os.environ.get("TINYATTN_PROFILE") == "thorough" else 4
TOLERANCES = {torch.float64: (1e-7, 1e-7), torch.float32: (1e-4, 1e-5), torch.float16: (1e-2, 1e-2)}
GRAD_TOLERANCE = (1e-6, 1e-6)
# entries whose values are drawn or left uninitialised: their shapes and dtypes are compared, nothing else
NOT_DETERMINED = {"randn", "randn_like", "rand_like", "randint", "randint_like", "empty", "empty_like", "new_empty",
                  "nn.functional.dropout"}
PROPERTIES = {"T", "mT"}
# entries whose OpInfo ``op`` wraps torch's function (its arguments in another order, a clone first): ours, alike
ADAPTED = {
    "einsum": lambda operands, equation: tc.einsum(equation, operands),
    "where": lambda input, condition, other: tc.where(condition, input, other),
    "zero_": lambda input: tc.zero_(input.clone()),
    "nn.functional.embedding": lambda weight, input, **options: tc.nn.functional.embedding(input, weight, **options),
    "nn.functional.embedding_bag": lambda weight, input, *args, **options: tc.nn.functional.embedding_bag(
        input, weight, *args, **options),
}


def drawn(key, sample):
    """Whether the sample's values are drawn (attention's dropout): its shapes and dtypes are compared, no more."""
    return key in NOT_DETERMINED or sample.kwargs.get("dropout_p", 0) > 0
DTYPES = {torch.float64: np.float64, torch.float32: np.float32, torch.float16: np.float16, torch.int64: np.int64,
          torch.int32: np.int32, torch.int16: np.int16, torch.int8: np.int8, torch.uint8: np.uint8,
          torch.bool: np.bool_}

ENTRIES = {opinfo.op_key(op): op for op in op_db if (opinfo.scope(opinfo.op_key(op)) or ("",))[0] == "in"}


def value_dtype(op):
    """float64 where the entry supports it, else its first of int64, int32, bool, uint8 (integer and logical ops)."""
    supported = op.supported_dtypes("cpu")
    for dtype in (torch.float64, torch.int64, torch.int32, torch.bool, torch.uint8):
        if dtype in supported:
            return dtype
    return torch.float64


def differentiable(op):
    return op.supports_autograd and torch.float64 in op.supported_dtypes("cpu")


def family(key):
    return opinfo.FAMILIES[opinfo.scope(key)[1]]


def params():
    for key in sorted(ENTRIES):
        for check in CHECKS:
            reason = family(key).KNOWN.get((key, check))
            marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
            yield pytest.param(key, check, marks=marks, id=f"{key}-{check}")


# ----------------------------------------------------------------------------- samples, and torch's values as ours


_SAMPLES = {}


def samples(op, dtype, requires_grad):
    """The entry's samples (a few of them, evenly spaced, outside the thorough profile), made once."""
    key = (opinfo.op_key(op), dtype, requires_grad)
    if key not in _SAMPLES:
        every = list(op.sample_inputs("cpu", dtype, requires_grad=requires_grad))
        if SAMPLES_PER_CHECK is not None and len(every) > SAMPLES_PER_CHECK:
            step = len(every) / SAMPLES_PER_CHECK
            every = [every[int(i * step)] for i in range(SAMPLES_PER_CHECK)]
        _SAMPLES[key] = every
    return _SAMPLES[key]


def ours(value, leaves=None):
    """A torch value as compat's: tensors (their leaves recorded in ``leaves``, by id), dtypes, sizes, containers."""
    if isinstance(value, torch.Tensor):
        made = tc.tensor(value.detach().numpy().copy(), requires_grad=value.requires_grad)
        if leaves is not None and value.requires_grad:
            leaves[id(value)] = made
        return made
    if isinstance(value, torch.dtype):
        return DTYPES[value]
    if isinstance(value, torch.Size):
        return tuple(value)
    if isinstance(value, torch.device):
        return str(value)
    if isinstance(value, torch.nn.PairwiseDistance):  # a sample's distance_function: the same distance, ours
        return functools.partial(tc.nn.functional.pairwise_distance, p=value.norm, eps=value.eps,
                                 keepdim=value.keepdim)
    if isinstance(value, (list, tuple)) and not hasattr(value, "_fields"):
        return type(value)(ours(v, leaves) for v in value)
    if isinstance(value, dict):
        return {k: ours(v, leaves) for k, v in value.items()}
    return value


def flat(value):
    """The tensors and scalars of an output, in order (tuples, lists and named tuples opened)."""
    if isinstance(value, (list, tuple)):
        return [leaf for v in value for leaf in flat(v)]
    return [value]


def as_array(value):
    if isinstance(value, torch.Tensor):
        return value.detach().numpy(force=True)
    if isinstance(value, tc.Tensor.__mro__[1]):  # a native or compat tensor
        return np.asarray(value.detach().numpy())
    return value


def torch_leaves(sample):
    """The sample's tensors that require a gradient, in the order ``ours`` meets them."""
    found = []

    def walk(value):
        if isinstance(value, torch.Tensor):
            if value.requires_grad and value.dtype.is_floating_point:
                found.append(value)
        elif isinstance(value, (list, tuple)):
            for v in value:
                walk(v)
        elif isinstance(value, dict):
            for v in value.values():
                walk(v)

    walk([sample.input, list(sample.args), sample.kwargs])
    return found


# ----------------------------------------------------------------------------- the forms of an entry in compat


def resolve(name):
    """compat's function for a torch name (``nn.functional.pad``, ``linalg.vector_norm``, ``add``)."""
    target = tc
    for part in name.split("."):
        target = getattr(target, part)
    return target


def has_function_form(op):
    if op.name in PROPERTIES or op.name.startswith("__"):
        return False
    target = torch
    for part in op.name.split("."):
        target = getattr(target, part, None)
        if target is None:
            return False
    return not isinstance(target, torch.dtype)  # torch.float is a dtype, not a function


def forms(op):
    """The ways to call the entry in compat: ``[(label, call(input, *args, **kwargs))]``, functions first."""
    found = []
    if op.name in ADAPTED:
        found.append(("function", ADAPTED[op.name]))
    elif has_function_form(op):
        found.append(("function", lambda x, *a, **k: resolve(op.name)(x, *a, **k)))
    if op.name in PROPERTIES:
        found.append(("property", lambda x: getattr(x, op.name)))
    elif op.method_variant is not None or op.name.startswith("__") or not found and hasattr(torch.Tensor, op.name):
        found.append(("method", lambda x, *a, **k: getattr(x, op.name)(*a, **k)))  # (item: a method alone)
    return found


def torch_call(op, sample, form="function"):
    if form == "method" and op.method_variant is not None:
        return op.method_variant(sample.input, *sample.args, **sample.kwargs)
    return op(sample.input, *sample.args, **sample.kwargs)


def refused(key, error):
    """Whether ``error`` is the entry's refusal on purpose (its REFUSED line)."""
    expected = family(key).REFUSED.get(key)
    return expected is not None and isinstance(error, expected[0]) and re.search(expected[1], str(error))


def call_ours(key, call, sample, leaves=None):
    """compat's result on the sample, or None where the family refuses the sample on purpose."""
    x, args, kwargs = ours(sample.input, leaves), ours(list(sample.args), leaves), ours(sample.kwargs, leaves)
    try:
        return call(x, *args, **kwargs), (x, args, kwargs)
    except Exception as error:  # noqa: BLE001 (a refusal on purpose is any error type the family names)
        if refused(key, error):
            return None, None
        raise


def assert_same(theirs, mine, tolerance, where, shapes_only=False):
    theirs, mine = flat(theirs), flat(mine)
    assert len(mine) == len(theirs), f"{where}: {len(mine)} outputs, torch gives {len(theirs)}"
    for i, (t, m) in enumerate(zip(theirs, mine)):
        t, m = as_array(t), as_array(m)
        if isinstance(t, np.ndarray):
            assert isinstance(m, np.ndarray), f"{where}, output {i}: {type(m).__name__}, torch gives a tensor"
            assert m.dtype == t.dtype, f"{where}, output {i}: dtype {m.dtype}, torch gives {t.dtype}"
            assert m.shape == t.shape, f"{where}, output {i}: shape {m.shape}, torch gives {t.shape}"
            if not shapes_only:
                np.testing.assert_allclose(m.astype(np.float64) if m.dtype == np.float16 else m, t, *tolerance,
                                           equal_nan=True, err_msg=f"{where}, output {i}")
        elif not shapes_only:
            assert m == t or (m != m and t != t), f"{where}, output {i}: {m!r}, torch gives {t!r}"


def differentiable_outputs(theirs, mine):
    pairs = [(t, m) for t, m in zip(flat(theirs), flat(mine))
             if isinstance(t, torch.Tensor) and t.requires_grad and t.dtype.is_floating_point]
    return [t for t, _ in pairs], [m for _, m in pairs]


# ----------------------------------------------------------------------------- the checks


# entries whose indices among tied elements torch leaves unspecified (its sort is unstable by default): their index
# outputs are compared by the elements they pick, which any right answer shares
TIED_INDICES = {"sort", "argsort", "mode"}


def picked(key, sample, out):
    """``out`` with its indices replaced by the input's elements at them (for ``TIED_INDICES``' entries)."""
    if key not in TIED_INDICES or sample.input.ndim == 0:
        return out
    x = sample.input.detach().numpy()
    dim = sample.args[0] if sample.args else sample.kwargs.get("dim", -1)
    if key == "argsort":
        return np.take_along_axis(x, as_array(out), axis=dim)
    values, indices = (as_array(o) for o in flat(out))
    keepdim = sample.args[1] if len(sample.args) > 1 else sample.kwargs.get("keepdim", False)
    if key == "mode" and not keepdim:
        return [values, np.take_along_axis(x, np.expand_dims(indices, dim), axis=dim).squeeze(dim)]
    return [values, np.take_along_axis(x, indices, axis=dim)]


def check_value(op, key, dtype=None):
    dtype = dtype or value_dtype(op)
    tolerance = TOLERANCES.get(dtype, (0, 0))
    for n, sample in enumerate(samples(op, dtype, requires_grad=False)):
        for form, call in forms(op):
            mine, _ = call_ours(key, call, sample)
            if mine is None:
                continue
            theirs = torch_call(op, sample, form)
            assert_same(picked(key, sample, theirs), picked(key, sample, mine), tolerance,
                        f"{key} ({form}), sample {n}: {sample.summary()}", shapes_only=drawn(key, sample))


def gradient_pairs(op, key, sample, create_graph):
    """torch's and compat's outputs, leaves and first-order gradients under the same random upstream gradient."""
    if drawn(key, sample):
        return None
    leaves = {}
    call = forms(op)[0][1]
    mine, _ = call_ours(key, call, sample, leaves)
    if mine is None:
        return None
    theirs = torch_call(op, sample, forms(op)[0][0])
    t_out, m_out = differentiable_outputs(theirs, mine)
    t_leaves = torch_leaves(sample)
    if not t_out or not t_leaves:
        return None
    rng = np.random.default_rng(len(key))
    upstream = [rng.standard_normal(t.shape) for t in t_out]
    t_grads = torch.autograd.grad(t_out, t_leaves, [torch.tensor(u) for u in upstream], allow_unused=True,
                                  create_graph=create_graph)
    m_leaves = [leaves[id(t)] for t in t_leaves]
    m_grads = tc.autograd.grad(m_out, m_leaves, [tc.tensor(u) for u in upstream], allow_unused=True,
                               create_graph=create_graph)
    return t_leaves, m_leaves, t_grads, m_grads


def assert_grads(t_grads, m_grads, where):
    """Gradients equal, a missing one (None) counting as zeros on either side (the other's within rounding)."""
    for i, (t, m) in enumerate(zip(t_grads, m_grads)):
        if t is None or m is None:
            present, who = (t, "torch") if m is None else (m, "tinyattn")
            assert present is None or np.allclose(as_array(present), 0, atol=GRAD_TOLERANCE[1]), (
                f"{where}, input {i}: only {who} has a nonzero gradient")
            continue
        assert_same(t, m, GRAD_TOLERANCE, f"{where}, input {i}")


def check_grad(op, key):
    if not differentiable(op) or key in NOT_DETERMINED:
        pytest.skip("the entry does not support autograd")
    for n, sample in enumerate(samples(op, torch.float64, requires_grad=True)):
        pairs = gradient_pairs(op, key, sample, create_graph=False)
        if pairs is not None:
            assert_grads(pairs[2], pairs[3], f"{key}, sample {n}: {sample.summary()}")


def check_fd(op, key):
    if not differentiable(op) or key in NOT_DETERMINED:
        pytest.skip("the entry does not support autograd")
    rng = np.random.default_rng(len(key) + 3)
    for n, sample in enumerate(samples(op, torch.float64, requires_grad=True)):
        if torch_leaves(sample) and not drawn(key, sample):
            fd_of_sample(op, key, sample, rng, f"{key} (finite differences), sample {n}: {sample.summary()}")


def fd_of_sample(op, key, sample, rng, where, eps=1e-6):
    """compat's gradient along a random direction against central differences of compat's function."""
    leaves = {}
    call = forms(op)[0][1]
    mine, arguments = call_ours(key, call, sample, leaves)
    # float64 outputs alone: central differences of a float32 or float16 result (``x.float()``) measure its rounding
    positions = [] if mine is None else [i for i, o in enumerate(flat(mine)) if getattr(o, "requires_grad", False)
                                         and o.dtype == np.float64]
    if not positions:
        return
    outputs = [flat(mine)[i] for i in positions]
    m_leaves = [leaves[id(t)] for t in torch_leaves(sample)]
    upstream = [rng.standard_normal(o.shape) for o in outputs]
    directions = [rng.standard_normal(x.shape) for x in m_leaves]
    grads = tc.autograd.grad(outputs, m_leaves, [tc.tensor(u) for u in upstream], allow_unused=True)
    analytic = sum(float(np.sum(as_array(g) * d)) for g, d in zip(grads, directions) if g is not None)

    def loss(step):
        originals = [x.detach().numpy().copy() for x in m_leaves]
        with tc.no_grad():
            for x, d in zip(m_leaves, directions):
                x.data.copy_(tc.tensor(x.detach().numpy() + step * d))
            results = flat(call(arguments[0], *arguments[1], **arguments[2]))
            out = [results[i] for i in positions]
            value = sum(float(np.sum(as_array(o) * u)) for o, u in zip(out, upstream))  # before a view sees the undo
            for x, original in zip(m_leaves, originals):
                x.data.copy_(tc.tensor(original))
        return value

    numeric = (loss(eps) - loss(-eps)) / (2 * eps)
    if np.isnan(numeric) and np.isnan(analytic):
        return  # the function is NaN there (a negative base to a fractional power): nothing to difference
    assert abs(analytic - numeric) <= 1e-5 + 1e-4 * abs(numeric), (
        f"{where}: the gradient gives {analytic!r} along a random direction, central differences (eps {eps}) "
        f"give {numeric!r}")


def check_gradgrad(op, key):
    if not (differentiable(op) and op.supports_gradgrad) or key in NOT_DETERMINED:
        pytest.skip("the entry does not support gradgrad")
    for n, sample in enumerate(samples(op, torch.float64, requires_grad=True)):
        pairs = gradient_pairs(op, key, sample, create_graph=True)
        if pairs is None:
            continue
        t_leaves, m_leaves, t_grads, m_grads = pairs
        rng = np.random.default_rng(len(key) + 1)
        kept = [i for i, t in enumerate(t_grads) if t is not None and t.requires_grad]
        if not kept:
            continue
        vectors = [rng.standard_normal(t_grads[i].shape) for i in kept]
        t_dot = sum((t_grads[i] * torch.tensor(v)).sum() for i, v in zip(kept, vectors))
        m_dot = sum((m_grads[i] * tc.tensor(v)).sum() for i, v in zip(kept, vectors))
        t_second = torch.autograd.grad(t_dot, t_leaves, allow_unused=True)
        m_second = (tc.autograd.grad(m_dot, m_leaves, allow_unused=True) if m_dot.requires_grad
                    else [None] * len(m_leaves))  # a gradient that is constant in the inputs
        assert_grads(t_second, m_second, f"{key} (second order), sample {n}: {sample.summary()}")


def substituted(value, replacement):
    """``value`` with each leaf tensor (by id) replaced by ``replacement[id]``."""
    if isinstance(value, torch.Tensor):
        return replacement.get(id(value), value)
    if isinstance(value, (list, tuple)) and not hasattr(value, "_fields"):
        return type(value)(substituted(v, replacement) for v in value)
    if isinstance(value, dict):
        return {k: substituted(v, replacement) for k, v in value.items()}
    return value


def check_jvp(op, key):
    if not (differentiable(op) and op.supports_forward_ad) or key in NOT_DETERMINED:
        pytest.skip("the entry does not support forward AD")
    rng = np.random.default_rng(len(key) + 2)
    for n, sample in enumerate(samples(op, torch.float64, requires_grad=True)):
        if torch_leaves(sample) and not drawn(key, sample):
            jvp_of_sample(op, key, sample, rng, f"{key} (jvp), sample {n}: {sample.summary()}")


def jvp_of_sample(op, key, sample, rng, where):
    """torch's and compat's ``jvp`` of the entry's first form in the sample's differentiable tensors."""
    form, call = forms(op)[0]
    t_leaves = torch_leaves(sample)
    primals = [t.detach() for t in t_leaves]
    tangents = [rng.standard_normal(t.shape) for t in t_leaves]
    ids = [id(t) for t in t_leaves]
    structure = [sample.input, list(sample.args), sample.kwargs]
    converted, position = ours(structure), {i: n for n, i in enumerate(ids)}

    def torch_f(*xs):
        s = substituted(structure, dict(zip(ids, xs)))
        out = torch_call(op, type(sample)(s[0], args=tuple(s[1]), kwargs=s[2]), form)
        return tuple(o for o in flat(out) if isinstance(o, torch.Tensor) and o.dtype.is_floating_point)

    def our_f(*xs):
        mine = swap(structure, converted, position, xs)
        out = call(mine[0], *mine[1], **mine[2])
        return tuple(o for o in flat(out) if hasattr(o, "dtype") and np.dtype(o.dtype).kind == "f")

    t_out, t_tan = torch.func.jvp(torch_f, tuple(primals), tuple(torch.tensor(t) for t in tangents))
    try:
        m_out, m_tan = tc.func.jvp(our_f, tuple(tc.tensor(p.numpy()) for p in primals),
                                   tuple(tc.tensor(t) for t in tangents))
    except Exception as error:  # noqa: BLE001
        if refused(key, error):
            return
        raise
    assert_same(t_out, m_out, GRAD_TOLERANCE, where)
    assert_same(t_tan, m_tan, GRAD_TOLERANCE, where + " tangent")


def swap(torch_value, our_value, where, replacements):
    """``our_value`` (``ours(torch_value)``) with the tensors that stand for primals replaced by ``replacements``."""
    if isinstance(torch_value, torch.Tensor):
        return replacements[where[id(torch_value)]] if id(torch_value) in where else our_value
    if isinstance(torch_value, (list, tuple)) and not hasattr(torch_value, "_fields"):
        return type(our_value)(swap(t, o, where, replacements) for t, o in zip(torch_value, our_value))
    if isinstance(torch_value, dict):
        return {k: swap(torch_value[k], our_value[k], where, replacements) for k in torch_value}
    return our_value


def check_vmap(op, key):
    if key in NOT_DETERMINED:
        pytest.skip("the entry's values are drawn")
    (form, call) = forms(op)[0]
    checked = 0
    dtype = value_dtype(op)
    for n, sample in enumerate(samples(op, dtype, requires_grad=False)):
        if not isinstance(sample.input, torch.Tensor) or drawn(key, sample):
            continue
        x = sample.input
        second = x.flip(tuple(range(x.ndim))) if x.ndim else x
        theirs = [flat(torch_call(op, type(sample)(v, args=sample.args, kwargs=sample.kwargs), form))
                  for v in (x, second)]
        if not all(isinstance(o, torch.Tensor) for o in theirs[0]):
            continue  # vmap returns tensors only
        expected = [torch.stack([a, b]) for a, b in zip(*theirs)]
        args, kwargs = ours(list(sample.args)), ours(sample.kwargs)
        batched = tc.tensor(torch.stack([x, second]).numpy())
        try:
            mine = tc.vmap(functools.partial(call_with, call, args, kwargs))(batched)
        except Exception as error:  # noqa: BLE001
            if refused(key, error):
                continue
            raise
        assert_same(expected, mine, TOLERANCES.get(dtype, (0, 0)), f"{key} (vmap), sample {n}: {sample.summary()}")
        checked += 1
    if not checked:
        pytest.skip("no sample has a tensor input")


def call_with(call, args, kwargs, x):
    return call(x, *args, **kwargs)


@pytest.mark.parametrize(("key", "check"), list(params()))
def test_opinfo(key, check):
    op = ENTRIES[key]
    if check == "value":
        check_value(op, key)
    elif check in ("float32", "float16"):
        dtype = getattr(torch, check)
        if dtype not in op.supported_dtypes("cpu"):
            pytest.skip(f"torch does not support {check} for this entry")
        check_value(op, key, dtype)
    else:
        checks = {"grad": check_grad, "fd": check_fd, "gradgrad": check_gradgrad, "jvp": check_jvp, "vmap": check_vmap}
        checks[check](op, key)


def test_every_entry_is_classified():
    unclassified = [opinfo.op_key(op) for op in op_db if opinfo.scope(opinfo.op_key(op)) is None]
    assert not unclassified, f"op_db entries in no family and not out of scope: {unclassified}"


def test_every_known_failure_names_an_entry_in_its_family():
    for name, module in opinfo.FAMILIES.items():
        for key, check in module.KNOWN:
            assert key in module.ENTRIES and check in CHECKS, f"{name}.KNOWN: ({key!r}, {check!r})"
        for key in module.REFUSED:
            assert key in module.ENTRIES, f"{name}.REFUSED: {key!r}"
