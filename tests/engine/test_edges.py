"""The engine's edges, each against torch: no tensor holds a NumPy scalar, every creator and random draw takes
float16 as torch's CPU float16 does, and the lenient conversions raise torch's errors.

* NumPy's arithmetic on 0-d arrays gives NumPy scalars; ``Tensor._wrap`` (every result passes through it) makes
  them 0-d arrays again, so ``t.numpy()`` is an array whatever op made ``t``.
* NumPy's generators draw float32 and float64 alone; the backend draws float32 for float16 and rounds (a uniform
  draw floored to float16's grid, so that it stays below 1).
* ``full(size, None)`` is not NaN and ``full(size, "2")`` is not 2.0: torch raises ``TypeError`` for both.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import tinyattn as ta
import tinyattn.compat as tc
import tinyattn.nn as nn
import tinyattn.nn.functional as F

torch = pytest.importorskip("torch")

TORCH_DTYPES = {np.float16: torch.float16, np.float32: torch.float32, np.float64: torch.float64,
                np.int64: torch.int64, np.int32: torch.int32, np.bool_: torch.bool}
shapes = hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4)


# ----------------------------------------------------------------------------- no tensor holds a NumPy scalar

# (name, the op on compat tensors, the op on torch tensors); each takes two 0-d tensors
ZERO_D_OPS = [
    ("floor_divide", lambda a, b: tc.floor_divide(a, b), lambda a, b: torch.floor_divide(a, b)),
    ("//", lambda a, b: a // b, lambda a, b: a // b),
    ("%", lambda a, b: a % b, lambda a, b: a % b),
    ("logical_and", lambda a, b: tc.logical_and(a, b), lambda a, b: torch.logical_and(a, b)),
    ("logical_not", lambda a, b: a.logical_not(), lambda a, b: a.logical_not()),
    ("isfinite", lambda a, b: tc.isfinite(a), lambda a, b: torch.isfinite(a)),
    ("isnan", lambda a, b: tc.isnan(a), lambda a, b: torch.isnan(a)),
    ("<", lambda a, b: a < b, lambda a, b: a < b),
    ("float", lambda a, b: a.float(), lambda a, b: a.float()),
    ("half", lambda a, b: a.half(), lambda a, b: a.half()),
    ("double", lambda a, b: a.double(), lambda a, b: a.double()),
    ("long", lambda a, b: a.long(), lambda a, b: a.long()),
    ("bool", lambda a, b: a.bool(), lambda a, b: a.bool()),
    ("sign", lambda a, b: a.sign(), lambda a, b: a.sign()),
    ("sum", lambda a, b: a.sum(), lambda a, b: a.sum()),
]


@pytest.mark.parametrize(("name", "ours", "theirs"), ZERO_D_OPS, ids=[op[0] for op in ZERO_D_OPS])
@settings(max_examples=20, deadline=None)
@given(dtype=st.sampled_from([np.float32, np.float64, np.int64]),
       a=st.integers(-50, 50), b=st.integers(1, 9))
def test_zero_d_results_hold_arrays(name, ours, theirs, dtype, a, b):
    """A 0-d result is a 0-d array, of torch's dtype and value."""
    mine = ours(tc.tensor(np.asarray(a, dtype)), tc.tensor(np.asarray(b, dtype)))
    expected = theirs(torch.tensor(np.asarray(a, dtype)), torch.tensor(np.asarray(b, dtype))).numpy()
    assert isinstance(mine.numpy(), np.ndarray), f"{name}: {type(mine.numpy()).__name__}"
    assert isinstance(mine.data, ta.Tensor) and mine.numpy().shape == ()
    np.testing.assert_array_equal(mine.numpy(), expected)
    assert mine.numpy().dtype == expected.dtype


def test_wrap_makes_a_numpy_scalar_an_array():
    """The cause, once: ``Tensor._wrap``, through which every op's result passes, holds a 0-d array."""
    t = ta.Tensor._wrap(np.float32(1.5))
    assert type(t.data) is np.ndarray and t.data.shape == () and t.dtype == np.float32
    assert type((ta.tensor(7) // ta.tensor(2)).data) is np.ndarray


# ----------------------------------------------------------------------------- float16 draws and creators


@settings(max_examples=15, deadline=None)
@given(shape=shapes)
def test_float16_draws(shape):
    """Every random creator takes float16, as torch's CPU creators do: same dtype, same shape."""
    like, torch_like = ta.zeros(shape, dtype=np.float16), torch.zeros(shape, dtype=torch.float16)
    cases = [
        (ta.randn(shape, dtype=np.float16), torch.randn(shape, dtype=torch.float16)),
        (ta.rand(shape, dtype=np.float16), torch.rand(shape, dtype=torch.float16)),
        (ta.randn_like(like), torch.randn_like(torch_like)),
        (ta.rand_like(like), torch.rand_like(torch_like)),
        (ta.randint_like(like, 3, 9), torch.randint_like(torch_like, 3, 9)),
        (ta.randint(0, 5, shape, dtype=np.float16), torch.randint(0, 5, shape, dtype=torch.float16)),
        (ta.zeros(shape, dtype=np.float16).normal_(), torch.zeros(shape, dtype=torch.float16).normal_()),
        (ta.zeros(shape, dtype=np.float16).uniform_(), torch.zeros(shape, dtype=torch.float16).uniform_()),
        (F.dropout(ta.ones(shape, dtype=np.float16), 0.5), torch.nn.functional.dropout(torch.ones(shape).half(), 0.5)),
    ]
    for mine, theirs in cases:
        assert mine.dtype == np.float16 and mine.shape == tuple(theirs.shape)


def test_float16_uniform_stays_below_one():
    """A float32 draw rounded to float16 may reach 1; the draw is floored to float16's grid instead."""
    ta.manual_seed(0)
    u = ta.rand(200_000, dtype=np.float16).numpy()
    assert u.dtype == np.float16 and u.min() >= 0 and u.max() < 1
    assert abs(float(u.astype(np.float64).mean()) - 0.5) < 0.01


@settings(max_examples=10, deadline=None)
@given(in_features=st.integers(1, 5), out_features=st.integers(1, 5))
def test_float16_linear(in_features, out_features):
    """``nn.Linear(..., dtype=float16)`` draws its initial parameters in float16, as torch's."""
    layer = nn.Linear(in_features, out_features, dtype=np.float16)
    theirs = torch.nn.Linear(in_features, out_features, dtype=torch.float16)
    assert layer.weight.dtype == layer.bias.dtype == np.float16
    assert layer.weight.shape == tuple(theirs.weight.shape)
    out = layer(ta.ones(2, in_features, dtype=np.float16))
    assert out.dtype == np.float16 and out.shape == (2, out_features)


FLOAT16_CREATORS = {
    "zeros": lambda m: m.zeros(2, 3, dtype=m.float16), "ones": lambda m: m.ones(3, dtype=m.float16),
    "full": lambda m: m.full((2,), 1.5, dtype=m.float16), "eye": lambda m: m.eye(3, dtype=m.float16),
    "arange": lambda m: m.arange(0, 2, 0.5, dtype=m.float16),
    "linspace": lambda m: m.linspace(0, 1, 5, dtype=m.float16),
    "logspace": lambda m: m.logspace(0, 2, 3, dtype=m.float16),
    "scalar_tensor": lambda m: m.scalar_tensor(2, dtype=m.float16),
    "half": lambda m: m.arange(3).half(), "to": lambda m: m.arange(3).to(m.float16),
    "empty": lambda m: m.empty(2, dtype=m.float16),
}


@pytest.mark.parametrize("name", FLOAT16_CREATORS)
def test_float16_creators(name):
    mine, theirs = FLOAT16_CREATORS[name](tc), FLOAT16_CREATORS[name](torch)
    assert mine.dtype == np.float16 and mine.shape == tuple(theirs.shape)
    if name != "empty":  # (torch's is uninitialised)
        np.testing.assert_array_equal(mine.numpy(), theirs.numpy())


# ----------------------------------------------------------------------------- lenient conversions raise torch's errors


BAD_VALUES = [None, "2", [1.0], object()]
# (name, the call on a module (compat or torch) and a bad value)
LENIENT = [
    ("full", lambda m, v: m.full((2,), v)),
    ("full_like", lambda m, v: m.full_like(m.zeros(2), v)),
    ("new_full", lambda m, v: m.zeros(2).new_full((2,), v)),
    ("fill_", lambda m, v: m.zeros(2).fill_(v)),
    ("scalar_tensor", lambda m, v: m.scalar_tensor(v)),
    ("linspace", lambda m, v: m.linspace(0, v, 3)),
    ("logspace", lambda m, v: m.logspace(v, 1, 3)),
    ("arange", lambda m, v: m.arange(v)),
    ("zeros", lambda m, v: m.zeros(v)),
    ("eye", lambda m, v: m.eye(v)),
    ("randn", lambda m, v: m.randn(v)),
]


@pytest.mark.parametrize(("name", "call"), LENIENT, ids=[case[0] for case in LENIENT])
@pytest.mark.parametrize("value", BAD_VALUES, ids=["None", "str", "list", "object"])
def test_lenient_conversions_raise_torchs_error(name, call, value):
    """Where torch refuses a value (``None``, a string…) with ``TypeError``, tinyattn refuses it the same way."""
    try:
        call(torch, value)
    except Exception as error:  # noqa: BLE001 (torch's error type is the expected one)
        expected = type(error)
    else:
        pytest.skip(f"torch accepts {name}({value!r})")
    with pytest.raises(expected):
        call(tc, value)


@settings(max_examples=20, deadline=None)
@given(value=st.one_of(st.booleans(), st.integers(-5, 5), st.floats(-5, 5)), shape=shapes)
def test_full_infers_torchs_dtype(value, shape):
    """Good values pass: bool gives bool, int int64, float float32, as torch infers them."""
    mine, theirs = ta.full(shape, value), torch.full(shape, value)
    assert mine.dtype == TORCH_TO_NUMPY[theirs.dtype] and mine.shape == tuple(theirs.shape)
    np.testing.assert_array_equal(mine.numpy(), theirs.numpy())


TORCH_TO_NUMPY = {v: k for k, v in TORCH_DTYPES.items()}


@pytest.mark.parametrize("write", [lambda t: t.fill_(2.0), lambda t: t.zero_()], ids=["fill_", "zero_"])
def test_fill_in_the_graph_ignores_the_old_values(write):
    """A fill of a tensor in the graph does not read its old values: an infinite one gives no NaN (torch's)."""
    values = [float("inf"), -float("inf"), 1.0]
    x, tx = tc.tensor(values, requires_grad=True), torch.tensor(values, requires_grad=True)
    y, ty = write(x * 1), write(tx * 1)
    np.testing.assert_array_equal(y.detach().numpy(), ty.detach().numpy())
    upstream = np.array([0.5, -2.0, 3.0])  # a gradient of zeros under any upstream: not ones alone
    y.backward(tc.tensor(upstream, dtype=tc.float32))
    ty.backward(torch.tensor(upstream, dtype=torch.float32))
    np.testing.assert_array_equal(x.grad.numpy(), tx.grad.numpy())
