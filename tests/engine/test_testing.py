"""The checker checked: ``gradcheck`` must catch wrong gradients and leave its inputs as it found them."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import tinyattn as ta
from tinyattn import testing as tt


class HalfSquare(ta.Function):
    """x² with a wrong backward (x instead of 2x): the bug gradcheck exists to find."""

    def forward(self, x):
        self.x = x
        return x * x

    def backward(self, grad):
        return (grad * self.x,)


class WrongShape(ta.Function):
    def forward(self, x):
        return x.sum()

    def backward(self, grad):
        return (grad,)  # should be broadcast to x's shape


def test_gradcheck_names_input_element_values_and_tolerances():
    a = ta.tensor(np.array([1.0, 2.0]), requires_grad=True)
    x = ta.tensor(np.array([[0.5, 1.0], [1.5, 2.0]]), requires_grad=True)
    with pytest.raises(tt.GradcheckError) as error:
        tt.gradcheck(lambda a, x: a.tanh().sum() + HalfSquare.apply(x), [a, x])
    message = str(error.value)
    assert "input 1" in message and "element (0, 0)" in message
    assert "analytic gradient" in message and "numeric" in message and "atol" in message and "rtol" in message
    assert isinstance(error.value, AssertionError)


def test_gradcheck_catches_a_gradient_of_the_wrong_shape():
    x = ta.tensor(np.ones(3), requires_grad=True)
    with pytest.raises(tt.GradcheckError, match=r"shape \(\) .* expected the input's shape \(3,\)"):
        tt.gradcheck(lambda x: WrongShape.apply(x), [x])


def test_gradcheck_wants_float64():
    x = ta.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(TypeError, match="input 0 has dtype float32.*float64"):
        tt.gradcheck(lambda x: x * x, [x])
    with pytest.raises(ValueError, match="no input has requires_grad"):
        tt.gradcheck(lambda x: x * x, [ta.tensor(np.ones(2))])


def test_gradcheck_on_every_device_with_several_outputs_and_constants(device):
    x = ta.tensor(np.array([[0.5, -1.0, 2.0]]), requires_grad=True, device=device)
    c = ta.tensor(np.array([3.0, 4.0, 5.0]), device=device)  # a constant: not checked
    assert tt.gradcheck(lambda x, c: (*(x * c).exp().split(1, dim=1), x.sum()), [x, c])


def test_gradcheck_leaves_data_and_grad_as_it_found_them(device):
    x = ta.tensor(np.array([0.3, 0.7]), requires_grad=True, device=device)
    data = x.data
    x.grad = ta.tensor(np.array([9.0, 9.0]), device=device).data
    tt.gradcheck(lambda x: x.sqrt(), [x])
    assert x.data is data
    np.testing.assert_array_equal(x.numpy(), [0.3, 0.7])
    np.testing.assert_array_equal(ta.tensor(x.grad).numpy(), [9.0, 9.0])


def test_gradcheck_uses_a_random_upstream_gradient():
    """Under ``sum()`` softmax's gradient is zero, so a wrong backward of zero would pass; not here."""

    class Frozen(ta.Function):
        def forward(self, x):
            e = np.exp(x - x.max())
            return e / e.sum()

        def backward(self, grad):
            return (grad * 0,)

    x = ta.tensor(np.array([0.1, 0.5, -0.3]), requires_grad=True)
    with pytest.raises(tt.GradcheckError):
        tt.gradcheck(lambda x: Frozen.apply(x), [x])


@given(shape=tt.shapes(), data=st.data())
def test_strategies_respect_their_bounds(shape, data):
    signed = data.draw(tt.arrays(shape, low=0.1, high=2.0))
    positive = data.draw(tt.positive_arrays(shape, dtype=np.float32))
    distinct = data.draw(tt.distinct_arrays(shape))
    assert signed.shape == positive.shape == distinct.shape == shape
    assert np.all((np.abs(signed) >= 0.1) & (np.abs(signed) <= 2.0))
    assert positive.dtype == np.float32 and np.all((positive >= 0.1) & (positive <= 2.0))
    gaps = np.diff(np.sort(distinct.ravel()))
    assert np.all(gaps >= 0.25 - 1e-12) and not np.any(distinct == 0)
    shapes = data.draw(tt.broadcastable_shapes(3))
    np.broadcast_shapes(*shapes)  # raises if they do not broadcast
