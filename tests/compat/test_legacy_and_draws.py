"""The older spellings public scripts still use, the random draws with parameters and the process-level settings,
beside torch: the same dtypes, shapes, values and warnings where torch's are deterministic; the distributions'
moments (within six standard errors) where they are draws."""

import copy
import warnings

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import tinyattn.compat as tc


@pytest.mark.parametrize("args", [([0],), ([1, 2.5],), (2, 3), (4,), (), ([[1, 2], [3, 4]],)])
def test_the_legacy_constructor_is_torchs(args):
    theirs, ours = torch.Tensor(*args), tc.Tensor(*args)
    assert ours.shape == tuple(theirs.shape) and ours.dtype == np.float32
    if args and not isinstance(args[0], int):
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


@pytest.mark.parametrize("dtype", ["float64", "int64", "float32"])
def test_new_gives_the_tensors_dtype(dtype):
    t, o = torch.zeros(2, dtype=getattr(torch, dtype)), tc.zeros(2, dtype=getattr(tc, dtype))
    for args in ((3,), (2, 2), ([1, 2],)):
        theirs, ours = t.new(*args), o.new(*args)
        assert ours.shape == tuple(theirs.shape) and str(ours.dtype) == dtype
        if isinstance(args[0], list):
            np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


@given(alpha=st.floats(-3, 3), name=st.sampled_from(["add", "add_", "sub", "sub_"]))
def test_the_deprecated_alpha_first_order_is_torchs(alpha, name):
    t, o = torch.ones(3, dtype=torch.float64), tc.ones(3, dtype=tc.float64)
    with warnings.catch_warnings(record=True) as theirs:
        warnings.simplefilter("always")
        t_out = getattr(t, name)(alpha, torch.arange(3.0, dtype=torch.float64))
    with warnings.catch_warnings(record=True) as ours:
        warnings.simplefilter("always")
        o_out = getattr(o, name)(alpha, tc.arange(3.0, dtype=tc.float64))
    np.testing.assert_allclose(o_out.numpy(), t_out.numpy(), rtol=1e-15)
    np.testing.assert_allclose(o.numpy(), t.numpy(), rtol=1e-15)
    # torch warns once per process (its C++ warning), compat at each call as Python's filters decide
    assert [str(w.message).split(":")[0] for w in ours] == [f"This overload of {name} is deprecated"]
    assert all(str(v.message).startswith(str(w.message)) for w, v in zip(ours, theirs))


def test_iteration_deepcopy_and_python_2_operators_are_torchs():
    t, o = torch.arange(6.0).reshape(2, 3), tc.arange(6.0).reshape(2, 3)
    assert [r.tolist() for r in o] == [r.tolist() for r in t]
    with pytest.raises(TypeError, match="iteration over a 0-d tensor"):
        iter(tc.tensor(1.0))
    p = tc.nn.Parameter(tc.ones(2))
    p.grad = tc.full((2,), 3.0)
    q = copy.deepcopy(p)
    assert q is not p and type(q) is type(p) and q.requires_grad and q.grad.tolist() == [3.0, 3.0]
    q.data.add_(1.0)
    assert p.tolist() == [1.0, 1.0]
    with pytest.raises(RuntimeError, match="graph leaves"):
        copy.deepcopy(p * 2)
    assert o.__div__(2.0).tolist() == t.__div__(2.0).tolist()
    assert o.__nonzero__ is not None and bool(tc.tensor([1.0]).__nonzero__()) is True
    with pytest.raises(TypeError, match="item deletion"):
        del o[0]


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "int32", "uint8", "bool", "float16"])
def test_typename_and_the_typed_constructors_are_torchs(dtype):
    assert tc.typename(tc.zeros(1, dtype=getattr(tc, dtype))) == torch.typename(torch.zeros(1, dtype=getattr(torch,
                                                                                                               dtype)))
    for name in ("ByteTensor", "CharTensor", "ShortTensor", "FloatTensor", "LongTensor"):
        assert str(getattr(tc, name)([1, 2]).dtype) == str(getattr(torch, name)([1, 2]).dtype).split(".")[1]


def test_process_settings_answer_as_torch():
    tc.set_num_threads(3)
    assert tc.get_num_threads() == 3
    with pytest.raises(RuntimeError, match="positive"):
        tc.set_num_threads(0)
    assert tc.version.cuda is None and torch.version.cuda is None
    assert issubclass(tc.OutOfMemoryError, RuntimeError) and issubclass(torch.OutOfMemoryError, RuntimeError)
    assert tc.is_autocast_enabled() is False and torch.is_autocast_enabled() is False
    g = tc.default_generator.manual_seed(3)
    assert g is tc.default_generator and g.initial_seed() == 3
    with pytest.raises(NotImplementedError, match="set_default_tensor_type"):
        tc.set_default_tensor_type("torch.cuda.FloatTensor")


def within(draws, mean, variance):
    """The mean of ``draws`` within six standard errors of ``mean``."""
    assert abs(draws.mean() - mean) <= 6 * np.sqrt(variance / draws.size) + 1e-12


@given(seed=st.integers(0, 2**31 - 1), p=st.floats(0.05, 0.95), rate=st.floats(0.1, 8.0))
def test_the_draws_have_their_distributions_moments(seed, p, rate):
    tc.manual_seed(seed)
    n = 4000
    within(tc.bernoulli(tc.full((n,), p)).numpy(), p, p * (1 - p))
    within(tc.zeros(n).bernoulli_(p).numpy(), p, p * (1 - p))
    within(tc.poisson(tc.full((n,), rate)).numpy(), rate, rate)
    within(tc.binomial(tc.full((n,), 10.0), tc.full((n,), p)).numpy(), 10 * p, 10 * p * (1 - p))
    within(tc.normal(tc.full((n,), rate), 2.0).numpy(), rate, 4.0)
    within(tc.zeros(n, dtype=tc.float64).exponential_(rate).numpy(), 1 / rate, 1 / rate**2)
    within(tc.zeros(n, dtype=tc.float64).geometric_(p).numpy(), 1 / p, (1 - p) / p**2)
    within(np.log(tc.zeros(n, dtype=tc.float64).log_normal_(0.5, 0.25).numpy()), 0.5, 0.0625)
    draws = tc.zeros(n).random_(3, 7).numpy()
    assert set(np.unique(draws)) <= {3, 4, 5, 6}


def test_a_generator_gives_the_same_draws_and_the_shapes_are_torchs():
    a = tc.normal(tc.zeros(2, 3), tc.ones(3), generator=tc.Generator().manual_seed(1))
    b = tc.normal(tc.zeros(2, 3), tc.ones(3), generator=tc.Generator().manual_seed(1))
    assert np.array_equal(a.numpy(), b.numpy()) and a.shape == tuple(torch.normal(torch.zeros(2, 3),
                                                                                  torch.ones(3)).shape)
    assert tc.normal(0.0, 1.0, size=(4, 2)).shape == tuple(torch.normal(0.0, 1.0, size=(4, 2)).shape)
    assert tc.bernoulli(tc.full((2, 2), 0.5, dtype=tc.float64)).dtype == np.float64
