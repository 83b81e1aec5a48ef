"""Every differentiable operation, proven by a factory: the registry's ``torch`` table, three oracles.

Each row (``registry.Spec``) names an operation, a hypothesis strategy that draws a *case* (the float
inputs, which all get ``requires_grad=True``, and keyword options such as ``dim``, masks
or index arrays), our call, and PyTorch's call. From the table:

1. ``test_matches_torch``: values and gradients (under a random upstream gradient) agree
   with PyTorch, in float64 (tight) and float32 (loose), on every device; along the way
   the invariants no oracle shows: float32 in -> float32 out and float32 gradients,
   inputs and upstream gradients never mutated, gradients never aliasing each other, the
   upstream gradient or the inputs;
2. ``test_gradcheck``: float64 gradients agree with central finite differences.

A new operation costs one row in ``tests/registry.py`` (and a strategy in ``tests/cases.py`` if its options are
new).
"""

import operator

import numpy as np
import pytest
import torch
from cases import two
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from registry import convert, table

import tinyattn as ta
from tinyattn import backend
from tinyattn import testing as tt

# the device fixture only names a device, so sharing it across generated examples is safe
TOLERANCES = {  # dtype -> (value rtol, value atol, grad rtol, grad atol)
    np.float64: (1e-9, 1e-12, 1e-9, 1e-12),
    np.float32: (1e-4, 1e-5, 1e-3, 1e-4),
}


SPECS = table("torch")
IDS = [spec.name for spec in SPECS]


# ----------------------------------------------------------------------------- running a case


def _run_ours(spec, arrays, options, dtype, device):
    inputs = [ta.tensor(a.astype(dtype), requires_grad=True, device=device) for a in arrays]
    make = lambda a: ta.tensor(a, device=device)  # noqa: E731
    out = spec.ours(*inputs, **{k: convert(v, make) for k, v in options.items()})
    return inputs, (tuple(out) if isinstance(out, (tuple, list)) else (out,))


def _run_theirs(spec, arrays, options, dtype):
    inputs = [torch.tensor(a.astype(dtype), requires_grad=True) for a in arrays]
    out = spec.theirs(*inputs, **{k: convert(v, torch.from_numpy) for k, v in options.items()})
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
    options = {k: convert(v, make) for k, v in options.items()}
    assert tt.gradcheck(lambda *xs: spec.ours(*xs, **options), inputs)


# ----------------------------------------------------------------------------- around the table


@pytest.mark.parametrize("op", [operator.lt, operator.le, operator.gt, operator.ge, operator.eq, operator.ne],
                         ids=["<", "<=", ">", ">=", "==", "!="])
@given(case=two(lambda s: hnp.arrays(np.float64, s, elements=st.sampled_from([-1.0, 0.0, 0.5]))),
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
