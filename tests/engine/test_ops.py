"""Every differentiable operation, proven by a factory: one table of specs, three oracles.

Each ``Spec`` names an operation, a hypothesis strategy that draws a *case* (the float
inputs, which all get ``requires_grad=True``, and keyword options such as ``dim``, masks
or index arrays), our call, and PyTorch's call. From the table:

1. ``test_matches_torch``: values and gradients (under a random upstream gradient) agree
   with PyTorch, in float64 (tight) and float32 (loose), on every device; along the way
   the invariants no oracle shows: float32 in -> float32 out and float32 gradients,
   inputs and upstream gradients never mutated, gradients never aliasing each other, the
   upstream gradient or the inputs;
2. ``test_gradcheck``: float64 gradients agree with central finite differences.

A new operation costs one ``Spec`` line (and a strategy if its options are new).
"""

import math
import operator
from typing import NamedTuple

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import tinyattn as ta
from tinyattn import backend
from tinyattn import testing as tt

# the device fixture only names a device, so sharing it across generated examples is safe
SMALL = dict(max_dims=3, max_side=3)
TOLERANCES = {  # dtype -> (value rtol, value atol, grad rtol, grad atol)
    np.float64: (1e-9, 1e-12, 1e-9, 1e-12),
    np.float32: (1e-4, 1e-5, 1e-3, 1e-4),
}


class Spec(NamedTuple):
    name: str
    case: object  # strategy of (list of float64 arrays, dict of options)
    ours: object  # (*tensors, **options) -> tensor or tuple of tensors
    theirs: object  # the same in PyTorch
    gradcheck: bool = True  # False where the operation has kinks the case does not avoid


# ----------------------------------------------------------------------------- case strategies


def _one(shapes=None, elements=tt.arrays):
    """One input array, no options."""
    shapes = tt.shapes(**SMALL) if shapes is None else shapes
    return shapes.flatmap(elements).map(lambda x: ([x], {}))


def _two(first=tt.arrays, second=tt.arrays):
    """Two arrays of mutually broadcastable shapes."""
    return tt.broadcastable_shapes(2, **SMALL).flatmap(
        lambda s: st.tuples(first(s[0]), second(s[1]))
    ).map(lambda xy: (list(xy), {}))


NUMBERS = st.sampled_from([-1.5, 0.5, 2.0, 3])


def _with_scalar(elements=tt.arrays, numbers=NUMBERS):
    """One array and a Python number ``c``."""
    return st.tuples(_one(elements=elements), numbers).map(lambda pair: (pair[0][0], {"c": pair[1]}))


def _dims(ndim, draw):
    """A dim option: None, an int (possibly negative) or a tuple of distinct dims."""
    if ndim == 0:
        return draw(st.sampled_from([None, 0, -1]))
    as_int = st.integers(-ndim, ndim - 1)
    as_tuple = st.lists(st.integers(0, ndim - 1), min_size=1, max_size=ndim, unique=True).flatmap(
        lambda ds: st.tuples(*[st.sampled_from([d, d - ndim]) for d in ds])
    )
    return draw(st.none() | as_int | as_tuple)


def _reduced_count(shape, dim):
    if dim is None:
        return math.prod(shape)
    dims = (dim,) if isinstance(dim, int) else dim
    return math.prod(shape[d] for d in dims) if shape else 1


@st.composite
def reduction(draw, elements=tt.arrays, corrections=False):
    shape = draw(tt.shapes(**SMALL))
    dim = _dims(len(shape), draw)
    options = {"dim": dim, "keepdim": draw(st.booleans())}
    if corrections:  # var: keep N - correction > 0
        options["correction"] = draw(st.integers(0, min(2, _reduced_count(shape, dim) - 1)))
    return [draw(elements(shape))], options


def _ties(shape):
    """Arrays with many equal elements: ties for amax."""
    return hnp.arrays(np.float64, shape, elements=st.sampled_from([-1.0, 0.5, 1.0]))


@st.composite
def matmul_case(draw):
    """Any operands NumPy's matmul accepts: 1-D, 2-D, batched with broadcasting."""
    shapes = draw(hnp.mutually_broadcastable_shapes(signature=np.matmul.signature, max_dims=2, max_side=3))
    a_shape, b_shape = shapes.input_shapes
    return [draw(tt.arrays(a_shape)), draw(tt.arrays(b_shape))], {}


@st.composite
def reshape_case(draw):
    shape = draw(tt.shapes(**SMALL))
    target = list(draw(st.permutations(list(shape) + [1] * draw(st.integers(0, 1)))))
    if target and draw(st.booleans()):
        target[draw(st.integers(0, len(target) - 1))] = -1
    return [draw(tt.arrays(shape))], {"shape": tuple(target)}


@st.composite
def transpose_case(draw):
    shape = draw(tt.shapes(min_dims=1, **SMALL))
    n = len(shape)
    return [draw(tt.arrays(shape))], {"dim0": draw(st.integers(-n, n - 1)), "dim1": draw(st.integers(-n, n - 1))}


@st.composite
def permute_case(draw):
    shape = draw(tt.shapes(**SMALL))
    dims = draw(st.permutations(range(len(shape))))
    dims = tuple(d - len(shape) if draw(st.booleans()) else d for d in dims)
    return [draw(tt.arrays(shape))], {"dims": dims}


@st.composite
def unsqueeze_case(draw):
    shape = draw(tt.shapes(**SMALL))
    return [draw(tt.arrays(shape))], {"dim": draw(st.integers(-len(shape) - 1, len(shape)))}


@st.composite
def squeeze_case(draw):
    shape = draw(tt.shapes(max_dims=3, max_side=2))  # many size-1 dims
    return [draw(tt.arrays(shape))], {"dim": _dims(len(shape), draw)}


@st.composite
def expand_case(draw):
    shape = draw(tt.shapes(**SMALL))
    lead = draw(st.lists(st.integers(1, 3), max_size=2))
    rest = [draw(st.sampled_from([n, -1] if n != 1 else [1, 2, 3, -1])) for n in shape]
    return [draw(tt.arrays(shape))], {"size": tuple(lead + rest)}


@st.composite
def flatten_case(draw):
    shape = draw(tt.shapes(min_dims=1, **SMALL))
    n = len(shape)
    start = draw(st.integers(0, n - 1))
    end = draw(st.integers(start, n - 1))
    start, end = (start - n if draw(st.booleans()) else start), (end - n if draw(st.booleans()) else end)
    return [draw(tt.arrays(shape))], {"start_dim": start, "end_dim": end}


@st.composite
def basic_index_case(draw):
    """Integers (possibly negative), slices with positive steps, and ``None``."""
    shape = draw(tt.shapes(min_dims=1, **SMALL))
    index = []
    for n in shape[: draw(st.integers(1, len(shape)))]:
        bound = st.none() | st.integers(-n, n)
        index.append(draw(st.integers(-n, n - 1) | st.builds(slice, bound, bound, st.none() | st.integers(1, 2))))
    if draw(st.booleans()):
        index.insert(draw(st.integers(0, len(index))), None)
    return [draw(tt.arrays(shape))], {"index": tuple(index)}


@st.composite
def advanced_index_case(draw):
    """Integer arrays (with repeats and negative entries): alone, along one dim, or a pair."""
    shape = draw(tt.shapes(min_dims=1, **SMALL))
    length = draw(st.integers(1, 5))
    indices = lambda n: hnp.arrays(np.int64, length, elements=st.integers(-n, n - 1))  # noqa: E731
    form = draw(st.sampled_from(["alone", "along", "pair"] if len(shape) >= 2 else ["alone", "along"]))
    if form == "alone":
        index = draw(indices(shape[0]))
    elif form == "along":
        dim = draw(st.integers(0, len(shape) - 1))
        index = (slice(None),) * dim + (draw(indices(shape[dim])),)
    else:
        index = (draw(indices(shape[0])), draw(indices(shape[1])))
    return [draw(tt.arrays(shape))], {"index": index}


@st.composite
def mask_index_case(draw):
    """A boolean mask over the leading dims selects elements (or rows)."""
    shape = draw(tt.shapes(min_dims=1, **SMALL))
    mask = draw(hnp.arrays(np.bool_, shape[: draw(st.integers(1, len(shape)))]))
    return [draw(tt.arrays(shape))], {"index": mask}


@st.composite
def masked_fill_case(draw):
    shape = draw(tt.shapes(**SMALL))
    mask_shape = draw(hnp.broadcastable_shapes(shape, max_dims=len(shape), max_side=3))
    mask = draw(hnp.arrays(np.bool_, mask_shape))
    value = draw(st.sampled_from([-1e4, 0.0, 2.5]))  # -1e9 would drown finite differences in rounding
    return [draw(tt.arrays(shape))], {"mask": mask, "value": value}


@st.composite
def where_case(draw, with_number=False):
    """``where(condition, a, b)`` with three broadcastable shapes; or ``a`` and a number ``c``."""
    c_shape, a_shape, b_shape = draw(tt.broadcastable_shapes(3, **SMALL))
    options = {"condition": draw(hnp.arrays(np.bool_, c_shape))}
    if with_number:
        return [draw(tt.arrays(a_shape))], {**options, "c": draw(st.sampled_from([-2.0, 0.5]))}
    return [draw(tt.arrays(a_shape)), draw(tt.arrays(b_shape))], options


@st.composite
def cat_case(draw):
    shape = list(draw(tt.shapes(min_dims=1, **SMALL)))
    dim = draw(st.integers(-len(shape), len(shape) - 1))
    arrays = []
    for _ in range(draw(st.integers(1, 3))):
        shape[dim] = draw(st.integers(1, 3))
        arrays.append(draw(tt.arrays(tuple(shape))))
    return arrays, {"dim": dim}


@st.composite
def stack_case(draw):
    shape = draw(tt.shapes(**SMALL))
    arrays = [draw(tt.arrays(shape)) for _ in range(draw(st.integers(1, 3)))]
    return arrays, {"dim": draw(st.integers(-len(shape) - 1, len(shape)))}


@st.composite
def split_case(draw):
    shape = draw(tt.shapes(min_dims=1, max_dims=3, max_side=4))
    dim = draw(st.integers(-len(shape), len(shape) - 1))
    length = shape[dim]
    if draw(st.booleans()):
        sections = draw(st.integers(1, length + 1))
    else:
        cuts = sorted(draw(st.lists(st.integers(1, length - 1), max_size=2, unique=True))) if length > 1 else []
        sections = [b - a for a, b in zip([0] + cuts, cuts + [length])]
    return [draw(tt.arrays(shape))], {"sections": sections, "dim": dim}


@st.composite
def chunk_case(draw):
    shape = draw(tt.shapes(min_dims=1, max_dims=3, max_side=4))
    dim = draw(st.integers(-len(shape), len(shape) - 1))
    return [draw(tt.arrays(shape))], {"chunks": draw(st.integers(1, 4)), "dim": dim}


# ----------------------------------------------------------------------------- the table

SPECS = [
    Spec("add", _two(), lambda a, b: a + b, lambda a, b: a + b),
    Spec("sub", _two(), lambda a, b: a - b, lambda a, b: a - b),
    Spec("mul", _two(), lambda a, b: a * b, lambda a, b: a * b),
    Spec("div", _two(), lambda a, b: a / b, lambda a, b: a / b),
    Spec("pow", _two(tt.positive_arrays, tt.arrays), lambda a, b: a**b, lambda a, b: a**b),
    Spec("radd", _with_scalar(), lambda x, c: c + x, lambda x, c: c + x),
    Spec("rsub", _with_scalar(), lambda x, c: c - x, lambda x, c: c - x),
    Spec("rmul", _with_scalar(), lambda x, c: c * x, lambda x, c: c * x),
    Spec("rdiv", _with_scalar(), lambda x, c: c / x, lambda x, c: c / x),
    Spec("div_scalar", _with_scalar(), lambda x, c: x / c, lambda x, c: x / c),
    Spec("pow_scalar", _with_scalar(tt.positive_arrays), lambda x, c: x**c, lambda x, c: x**c),
    Spec("square", _one(), lambda x: x**2, lambda x: x**2),
    Spec("rpow", _with_scalar(numbers=st.sampled_from([0.5, 2.0, 3])), lambda x, c: c**x, lambda x, c: c**x),
    Spec("matmul", matmul_case(), lambda a, b: a @ b, lambda a, b: a @ b),
    Spec("neg", _one(), lambda x: -x, lambda x: -x),
    Spec("exp", _one(), ta.exp, torch.exp),
    Spec("log", _one(elements=tt.positive_arrays), ta.log, torch.log),
    Spec("sqrt", _one(elements=tt.positive_arrays), ta.sqrt, torch.sqrt),
    Spec("tanh", _one(), lambda x: x.tanh(), torch.tanh),
    Spec("sigmoid", _one(elements=lambda s: tt.arrays(s, high=6.0)), lambda x: x.sigmoid(), torch.sigmoid),
    Spec("relu", _one(), lambda x: x.relu(), torch.relu),
    Spec("abs", _one(), lambda x: x.abs(), torch.abs),
    Spec("sum", reduction(), lambda x, dim, keepdim: x.sum(dim, keepdim), lambda x, dim, keepdim: x.sum(dim, keepdim)),
    Spec("mean", reduction(), lambda x, dim, keepdim: x.mean(dim=dim, keepdim=keepdim),
         lambda x, dim, keepdim: x.mean(dim=dim, keepdim=keepdim)),
    Spec("amax", reduction(tt.distinct_arrays), lambda x, dim, keepdim: x.amax(dim, keepdim),
         lambda x, dim, keepdim: x.amax(() if dim is None else dim, keepdim)),
    Spec("amax_ties", reduction(_ties), lambda x, dim, keepdim: x.amax(dim, keepdim),
         lambda x, dim, keepdim: x.amax(() if dim is None else dim, keepdim), gradcheck=False),
    Spec("var", reduction(corrections=True), lambda x, **o: x.var(**o), lambda x, **o: x.var(**o)),
    Spec("reshape", reshape_case(), lambda x, shape: x.reshape(shape), lambda x, shape: x.reshape(shape)),
    Spec("view", reshape_case(), lambda x, shape: x.view(*shape), lambda x, shape: x.view(shape)),
    Spec("transpose", transpose_case(), lambda x, **o: x.transpose(**o), lambda x, **o: x.transpose(**o)),
    Spec("T", _one(tt.shapes(min_dims=2, max_dims=2)), lambda x: x.T, lambda x: x.T),
    Spec("permute", permute_case(), lambda x, dims: x.permute(*dims), lambda x, dims: x.permute(dims)),
    Spec("unsqueeze", unsqueeze_case(), lambda x, dim: x.unsqueeze(dim), lambda x, dim: x.unsqueeze(dim)),
    Spec("squeeze", squeeze_case(), lambda x, dim: x.squeeze(dim),
         lambda x, dim: x.squeeze() if dim is None else x.squeeze(dim)),
    Spec("expand", expand_case(), lambda x, size: x.expand(*size), lambda x, size: x.expand(size)),
    Spec("flatten", flatten_case(), lambda x, **o: x.flatten(**o), lambda x, **o: x.flatten(**o)),
    Spec("getitem_basic", basic_index_case(), lambda x, index: x[index], lambda x, index: x[index]),
    Spec("getitem_array", advanced_index_case(), lambda x, index: x[index], lambda x, index: x[index]),
    Spec("getitem_mask", mask_index_case(), lambda x, index: x[index], lambda x, index: x[index]),
    Spec("masked_fill", masked_fill_case(), lambda x, mask, value: x.masked_fill(mask, value),
         lambda x, mask, value: x.masked_fill(mask, value)),
    Spec("where", where_case(), lambda a, b, condition: ta.where(condition, a, b),
         lambda a, b, condition: torch.where(condition, a, b)),
    Spec("where_scalar", where_case(with_number=True),
         lambda a, condition, c: (ta.where(condition, a, c), ta.where(condition, c, a)),
         lambda a, condition, c: (torch.where(condition, a, c), torch.where(condition, c, a))),
    Spec("cat", cat_case(), lambda *xs, dim: ta.cat(xs, dim), lambda *xs, dim: torch.cat(xs, dim)),
    Spec("stack", stack_case(), lambda *xs, dim: ta.stack(xs, dim), lambda *xs, dim: torch.stack(xs, dim)),
    Spec("split", split_case(), lambda x, sections, dim: x.split(sections, dim),
         lambda x, sections, dim: x.split(sections, dim)),
    Spec("chunk", chunk_case(), lambda x, **o: x.chunk(**o), lambda x, **o: x.chunk(**o)),
    Spec("to_float64", _one(), lambda x: x.to(ta.float64) * x.double(), lambda x: x.to(torch.float64) * x.double()),
]
IDS = [spec.name for spec in SPECS]


# ----------------------------------------------------------------------------- running a case


def _convert(value, make):
    """Option values: arrays become tensors through ``make``, tuples are converted inside."""
    if isinstance(value, np.ndarray):
        return make(value)
    if isinstance(value, tuple):
        return tuple(_convert(v, make) for v in value)
    return value


def _run_ours(spec, arrays, options, dtype, device):
    inputs = [ta.tensor(a.astype(dtype), requires_grad=True, device=device) for a in arrays]
    make = lambda a: ta.tensor(a, device=device)  # noqa: E731
    out = spec.ours(*inputs, **{k: _convert(v, make) for k, v in options.items()})
    return inputs, (tuple(out) if isinstance(out, (tuple, list)) else (out,))


def _run_theirs(spec, arrays, options, dtype):
    inputs = [torch.tensor(a.astype(dtype), requires_grad=True) for a in arrays]
    out = spec.theirs(*inputs, **{k: _convert(v, torch.from_numpy) for k, v in options.items()})
    return inputs, (tuple(out) if isinstance(out, (tuple, list)) else (out,))


def _shares_memory(a, b):
    xp = backend.namespace(a)
    if backend.device_of(a) == "cuda":
        # CuPy's exact check (element addresses read back through a kernel) called every pair "shared" on an
        # H200, separate allocations included; comparing the arrays' memory bounds is exact enough here
        return bool(xp.may_share_memory(a, b))
    return bool(xp.shares_memory(a, b))


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["float64", "float32"])
@pytest.mark.parametrize("spec", SPECS, ids=IDS)
@given(data=st.data())
def test_matches_torch(spec, dtype, device, data):
    arrays, options = data.draw(spec.case, label="case")
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="seed"))
    rtol, atol, grad_rtol, grad_atol = TOLERANCES[dtype]
    out_dtype = np.float64 if spec.name == "to_float64" else dtype

    inputs, outs = _run_ours(spec, arrays, options, dtype, device)
    their_inputs, their_outs = _run_theirs(spec, arrays, options, dtype)
    assert len(outs) == len(their_outs)
    for ours, theirs in zip(outs, their_outs):
        assert ours.shape == tuple(theirs.shape)
        assert ours.dtype == out_dtype, f"{dtype.__name__} in, {ours.dtype} out"
        np.testing.assert_allclose(ours.numpy(), theirs.detach().numpy(), rtol=rtol, atol=atol)

    upstream = [rng.standard_normal(o.shape).astype(out_dtype) for o in outs]
    upstream_dev = [backend.to_device(u.copy(), device) for u in upstream]
    for k, (o, u) in enumerate(zip(outs, upstream_dev)):
        o.backward(u, retain_graph=k < len(outs) - 1)
    torch.autograd.backward(their_outs, [torch.from_numpy(u.copy()) for u in upstream])

    for i, (t, theirs, original) in enumerate(zip(inputs, their_inputs, arrays)):
        assert t.grad is not None, f"input {i} got no gradient"
        assert type(t.grad) is type(t.data), f"input {i}: gradient on another device"
        assert tuple(t.grad.shape) == t.shape and t.grad.dtype == dtype, f"input {i}: {t.grad.shape} {t.grad.dtype}"
        np.testing.assert_allclose(backend.to_numpy(t.grad), theirs.grad.numpy(), rtol=grad_rtol, atol=grad_atol,
                                   err_msg=f"gradient of input {i}")
        np.testing.assert_array_equal(t.numpy(), original.astype(dtype), err_msg=f"input {i} was mutated")
    for u_dev, u in zip(upstream_dev, upstream):
        np.testing.assert_array_equal(backend.to_numpy(u_dev), u, err_msg="the upstream gradient was mutated")
    grads = [t.grad for t in inputs]
    for i, g in enumerate(grads):
        others = grads[i + 1:] + upstream_dev + [t.data for t in inputs]
        assert not any(_shares_memory(g, other) for other in others), f"the gradient of input {i} aliases"


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.cuda)])  # strict: test_engine_testing
@pytest.mark.parametrize("spec", [s for s in SPECS if s.gradcheck], ids=[s.name for s in SPECS if s.gradcheck])
@given(data=st.data())
def test_gradcheck(spec, device, data):
    arrays, options = data.draw(spec.case, label="case")
    inputs = [ta.tensor(a, requires_grad=True, device=device) for a in arrays]
    make = lambda a: ta.tensor(a, device=device)  # noqa: E731
    options = {k: _convert(v, make) for k, v in options.items()}
    assert tt.gradcheck(lambda *xs: spec.ours(*xs, **options), inputs)


# ----------------------------------------------------------------------------- around the table


@pytest.mark.parametrize("op", [operator.lt, operator.le, operator.gt, operator.ge, operator.eq, operator.ne],
                         ids=["<", "<=", ">", ">=", "==", "!="])
@given(case=_two(lambda s: hnp.arrays(np.float64, s, elements=st.sampled_from([-1.0, 0.0, 0.5]))),
       scalar=st.booleans())
def test_comparisons_match_torch_and_carry_no_gradient(op, device, case, scalar):
    (a, b), _ = case
    x = ta.tensor(a, requires_grad=True, device=device)
    other = 0.5 if scalar else ta.tensor(b, requires_grad=True, device=device)
    expected = op(torch.from_numpy(a), 0.5 if scalar else torch.from_numpy(b))
    result = op(x, other)
    assert result.dtype == ta.bool and not result.requires_grad and result.device == device
    np.testing.assert_array_equal(result.numpy(), expected.numpy())


FUNCTION_FORMS = [
    ("exp", ()), ("log", ()), ("sqrt", ()), ("tanh", ()), ("sigmoid", ()), ("relu", ()), ("abs", ()),
    ("sum", (1,)), ("mean", (0,)), ("amax", (1,)), ("var", (1,)), ("reshape", ((6,),)), ("transpose", (0, 1)),
    ("permute", ((1, 0),)), ("unsqueeze", (0,)), ("squeeze", ()), ("expand", ((2, 2, 3),)), ("flatten", ()),
    ("split", (1,)), ("chunk", (2,)), ("matmul", (None,)),
]


@pytest.mark.parametrize("name, args", FUNCTION_FORMS, ids=[name for name, _ in FUNCTION_FORMS])
def test_function_form_equals_method(name, args):
    x = ta.tensor(np.arange(1.0, 7.0).reshape(2, 3))
    args = tuple(x.T if a is None else a for a in args)
    as_function, as_method = getattr(ta, name)(x, *args), getattr(x, name)(*args)
    as_function = as_function if isinstance(as_function, tuple) else (as_function,)
    as_method = as_method if isinstance(as_method, tuple) else (as_method,)
    for f, m in zip(as_function, as_method, strict=True):
        np.testing.assert_array_equal(f.numpy(), m.numpy())


def test_amax_shares_the_gradient_among_ties_like_torch():
    x = ta.tensor(np.array([[1.0, 3.0, 3.0], [2.0, 2.0, 2.0]]), requires_grad=True)
    x.amax(1).backward(ta.tensor(np.array([1.0, 3.0])))
    np.testing.assert_array_equal(x.grad, [[0.0, 0.5, 0.5], [1.0, 1.0, 1.0]])


@pytest.mark.parametrize("name, operator_form", [
    ("add", operator.add), ("sub", operator.sub), ("mul", operator.mul), ("div", operator.truediv),
    ("pow", operator.pow), ("matmul", operator.matmul),
])
def test_arithmetic_function_forms_equal_operators(name, operator_form):
    a, b = ta.tensor(np.array([[1.0, 2.0], [3.0, 4.0]])), ta.tensor(np.array([[0.5, 1.5], [2.0, 0.25]]))
    np.testing.assert_array_equal(getattr(ta, name)(a, b).numpy(), operator_form(a, b).numpy())
    np.testing.assert_array_equal(ta.neg(a).numpy(), (-a).numpy())


def test_masked_fill_takes_a_number_or_a_0d_value_only():
    x, mask = ta.zeros(2, 3), ta.tensor([[True, False, True], [False, True, False]])
    with pytest.raises(RuntimeError, match=r"masked_fill: value must be a number or a 0-d tensor, got shape \(3,\)"):
        x.masked_fill(mask, ta.ones(3))
    assert x.masked_fill(mask, ta.tensor(2.0)).numpy().sum() == 6.0
