"""The comparison family's edges that torch's OpInfo samples do not reach: results with no gradient under ``vmap``
when an unbatched operand has more dimensions than one example, or another ``vmap`` level batches it (against torch
and a loop); compat's methods on a batched tensor; clamp's gradient to tensor bounds at ``min == max`` and at
``min > max``; ``maximum``'s split of a tie's gradient and its NaN; ``masked_fill``'s refusal of a value that is no
number.
"""

import numpy as np
import pytest
import torch

import tinyattn as ta
import tinyattn.compat as tc

pytestmark = pytest.mark.filterwarnings("ignore:There is a performance drop")  # torch.func's fallback for isin

X = np.array([[0.5, -1.0, 2.0], [3.0, 0.0, -2.0]])  # a batch of two (3,) examples
Y = np.arange(12.0).reshape(4, 3) - 5.0  # unbatched, with more dimensions than one example

NO_GRAD = {
    "lt": lambda lib, x, y: lib.lt(x, y), "eq": lambda lib, x, y: x == y,
    "isclose": lambda lib, x, y: lib.isclose(x, y),
    "logical_xor": lambda lib, x, y: lib.logical_xor(x, y), "signbit": lambda lib, x, y: lib.signbit(x - y),
    "isin": lambda lib, x, y: lib.isin(x, y), "fmax": lambda lib, x, y: lib.fmax(x, y),
}


@pytest.mark.parametrize("name", sorted(NO_GRAD))
def test_vmap_over_an_operand_with_more_dimensions(name):
    f = NO_GRAD[name]
    expected = torch.func.vmap(lambda x: f(torch, x, torch.tensor(Y)))(torch.tensor(X)).numpy()
    mine = ta.func.vmap(lambda x: f(ta, x, ta.tensor(Y)))(ta.tensor(X)).numpy()
    assert mine.dtype == expected.dtype and mine.shape == expected.shape
    np.testing.assert_array_equal(mine, expected)


@pytest.mark.parametrize("name", sorted(NO_GRAD))
def test_nested_vmap_pairs_every_example_with_every_other(name):
    f = NO_GRAD[name]
    mine = ta.func.vmap(lambda x: ta.func.vmap(lambda y: f(ta, x, y))(ta.tensor(X)))(ta.tensor(X)).numpy()
    loop = np.stack([np.stack([f(torch, torch.tensor(x), torch.tensor(y)).numpy() for y in X]) for x in X])
    np.testing.assert_array_equal(mine, loop)


@pytest.mark.parametrize("method", ["isnan", "isinf", "isfinite", "logical_not", "signbit", "isreal"])
def test_compat_methods_keep_the_batch(method):
    for data in (X, X.astype(np.int64)):
        mine = tc.vmap(lambda x: getattr(x, method)())(tc.tensor(data)).numpy()
        np.testing.assert_array_equal(mine, getattr(torch.tensor(data), method)().numpy())


@pytest.mark.parametrize(("low", "high"), [(0.5, 0.5), (1.0, -1.0), (-0.5, 1.5)])
def test_clamp_gradients_to_tensor_bounds_as_torch(low, high):
    x = np.array([-2.0, 0.5, 1.0, 3.0])
    grads = []
    for lib in (torch, ta):
        leaves = [lib.tensor(v, requires_grad=True, dtype=lib.float64) for v in (x, np.full(4, low), np.full(4, high))]
        lib.clamp(*leaves).backward(lib.tensor(np.arange(1.0, 5.0), dtype=lib.float64))
        grads.append([np.asarray(leaf.grad) for leaf in leaves])
    for theirs, mine in zip(*grads):
        np.testing.assert_array_equal(mine, theirs)


def test_maximum_splits_a_tie_and_keeps_nan():
    a, b = ta.tensor([1.0, 2.0, np.nan], requires_grad=True), ta.tensor([1.0, 3.0, 0.0], requires_grad=True)
    out = ta.maximum(a, b)
    out.backward(ta.tensor([2.0, 3.0, 5.0]))
    assert np.isnan(out.numpy()[2]) and out.numpy()[0] == 1.0
    np.testing.assert_array_equal(a.grad[:2], [1.0, 0.0])  # half of the upstream each at the tie
    np.testing.assert_array_equal(b.grad[:2], [1.0, 3.0])


@pytest.mark.parametrize("value", [None, "2", [1.0]])
def test_masked_fill_refuses_a_value_that_is_no_number(value):
    for x in (ta.zeros(2), tc.zeros(2)):
        with pytest.raises(TypeError, match="masked_fill: value must be a number"):
            x.masked_fill(x == 0, value)
