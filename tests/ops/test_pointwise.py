"""The elementwise family (``tinyattn/pointwise.py``) where PyTorch's OpInfo samples do not look: dtypes of integer
and float16 inputs, integer division by zero, the exact remainders, the tails the stable formulas are for, and the
gradients of the step functions in each input's shape."""

import numpy as np
import pytest

import tinyattn as ta

torch = pytest.importorskip("torch")

UNARY_FLOAT = ["exp", "log", "sqrt", "tanh", "sigmoid", "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh",
               "asinh", "acosh", "atanh", "exp2", "expm1", "log1p", "log2", "log10", "logit", "erf", "erfc", "erfinv",
               "reciprocal", "rsqrt", "sinc", "deg2rad", "rad2deg"]


@pytest.mark.parametrize("name", UNARY_FLOAT)
def test_integers_give_float32_and_float16_stays_float16(name):
    fn = getattr(ta, name)
    assert fn(ta.tensor([0, 1])).dtype == np.float32
    assert fn(ta.tensor(np.array([0.25, 0.5], dtype=np.float16))).dtype == np.float16


@pytest.mark.parametrize("call", [
    lambda a, b: a // b,
    lambda a, b: ta.div(a, b, rounding_mode="floor"),
    lambda a, b: ta.div(a, b, rounding_mode="trunc"),
    lambda a, b: ta.fmod(a, b),
    lambda a, b: a % b,
])
def test_integer_division_by_zero_raises_as_torch_does(call):
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        call(ta.tensor([1, 2]), ta.tensor([1, 0]))


@pytest.mark.parametrize("mode", ["floor", "trunc"])
def test_a_rounded_quotient_gives_zero_gradients_in_each_input_shape(mode):
    a = ta.tensor(np.array([[1.5], [-2.5], [7.0]]), requires_grad=True)  # (3, 1)
    b = ta.tensor(np.array([2.0, -3.0]), requires_grad=True)  # (2,)
    out = ta.div(a, b, rounding_mode=mode)  # (3, 2)
    expected = torch.div(torch.tensor(a.data), torch.tensor(b.data), rounding_mode=mode)
    np.testing.assert_array_equal(out.numpy(), expected.numpy())
    upstream = ta.tensor(np.random.default_rng(0).standard_normal((3, 2)))
    grad_a, grad_b = ta.autograd.grad(out, [a, b], upstream)
    assert grad_a.shape == (3, 1) and grad_b.shape == (2,)
    assert not grad_a.numpy().any() and not grad_b.numpy().any()


@pytest.mark.parametrize(("ours", "theirs", "args"), [
    (ta.fmod, torch.fmod, ([1.0, -1.0, 1e10, -4.0], [0.1, 0.1, 3.7, 2.0])),
    (ta.remainder, torch.remainder, ([1.0, -1.0, 1e10, 5.5], [0.1, 0.1, 3.7, -2.0])),
    (ta.asinh, torch.asinh, ([-1e200, -1e-10, 1e-10, 3e8],)),
    (ta.acosh, torch.acosh, ([1.0, 1.0 + 1e-12, 1e10, 1e200],)),
    (ta.atanh, torch.atanh, ([-1.0, 1e-12, 0.999999],)),
    (ta.sinh, torch.sinh, ([-1e-12, 1e-12, 20.0],)),
    (ta.expm1, torch.expm1, ([1e-17, -1e-10, 3.0],)),
    (ta.log1p, torch.log1p, ([1e-17, -1e-10, 3.0],)),
    (ta.erfc, torch.erfc, ([-3.0, 5.0, 10.0],)),
    (ta.logaddexp, torch.logaddexp, ([np.inf, -np.inf, 1000.0, -np.inf], [np.inf, -np.inf, 1000.0, 3.0])),
    (ta.xlogy, torch.xlogy, ([0.0, 0.0, 2.0], [0.0, np.nan, 3.0])),
    (ta.copysign, torch.copysign, ([1.0, 2.0, -3.0], [-0.0, 0.0, 1.0])),
    (ta.sinc, torch.sinc, ([0.0, 1e-12, 0.5],)),
])
def test_float64_values_in_the_tails_match_torch(ours, theirs, args):
    mine = ours(*[ta.tensor(np.array(a)) for a in args]).numpy()
    expected = theirs(*[torch.tensor(a, dtype=torch.float64) for a in args]).numpy()
    np.testing.assert_allclose(mine, expected, rtol=1e-13, atol=0, equal_nan=True)


def test_round_to_decimals_matches_torch_and_has_a_zero_gradient():
    x = ta.tensor(np.array([1.23456, -2.0005, 1234.5, 150.0]), requires_grad=True)
    for decimals in (-2, 0, 3):
        out = ta.round(x, decimals=decimals)
        np.testing.assert_array_equal(out.numpy(), torch.round(torch.tensor(x.data), decimals=decimals).numpy())
        assert not ta.autograd.grad(out, [x], ta.ones(4, dtype=ta.float64))[0].numpy().any()


def test_add_and_sub_take_alpha_as_function_and_method():
    a, b = ta.tensor([1.0, 2.0]), ta.tensor([10.0, 20.0])
    assert ta.add(a, b, alpha=2).tolist() == a.add(b, alpha=2).tolist() == [21.0, 42.0]
    assert ta.sub(a, b, alpha=0.5).tolist() == a.sub(b, alpha=0.5).tolist() == [-4.0, -8.0]
    assert ta.rsub(a, b, alpha=2).tolist() == [8.0, 16.0]
