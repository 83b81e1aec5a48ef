"""``ta.nn.init`` against ``torch.nn.init``: the deterministic fills equal torch's; the random ones have torch's
distribution properties (orthogonality, the zeros per column, bounds), come from ``generator`` where one is given
(and then leave the library's stream alone); the deprecated aliases warn as torch's do."""

import math
import warnings

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import tinyattn as ta
import tinyattn.compat as tc
from tinyattn.nn import init


@given(rows=st.integers(1, 6), cols=st.integers(1, 6))
def test_eye_is_torchs(rows, cols):
    ours = init.eye_(ta.zeros(rows, cols)).numpy()
    assert np.array_equal(ours, torch.nn.init.eye_(torch.zeros(rows, cols)).numpy())


@given(shape=st.sampled_from([(4, 2, 3), (6, 3, 3, 3), (4, 4, 1, 3, 5), (2, 5, 4)]), groups=st.sampled_from([1, 2]))
def test_dirac_is_torchs(shape, groups):
    ours = init.dirac_(ta.ones(*shape), groups=groups).numpy()
    assert np.array_equal(ours, torch.nn.init.dirac_(torch.ones(*shape), groups=groups).numpy())


@given(shape=st.sampled_from([(3, 5), (5, 3), (4, 4), (2, 3, 4), (6, 2, 2)]), gain=st.floats(0.5, 2.0),
       seed=st.integers(0, 2**31 - 1))
def test_orthogonal_gives_torchs_semi_orthogonal_matrices(shape, gain, seed):
    ta.manual_seed(seed)
    w = init.orthogonal_(ta.zeros(*shape, dtype=ta.float64), gain=gain).numpy().reshape(shape[0], -1)
    gram = w @ w.T if w.shape[0] <= w.shape[1] else w.T @ w
    np.testing.assert_allclose(gram, gain**2 * np.eye(len(gram)), atol=1e-12)
    t = torch.nn.init.orthogonal_(torch.zeros(*shape, dtype=torch.float64), gain=gain).reshape(shape[0], -1)
    t_gram = (t @ t.T if t.shape[0] <= t.shape[1] else t.T @ t).numpy()
    np.testing.assert_allclose(gram, t_gram, atol=1e-12)


@given(rows=st.integers(1, 12), cols=st.integers(1, 5), sparsity=st.floats(0.0, 1.0), seed=st.integers(0, 2**31 - 1))
def test_sparse_zeroes_as_many_rows_per_column_as_torch(rows, cols, sparsity, seed):
    ta.manual_seed(seed)
    torch.manual_seed(seed)
    ours = init.sparse_(ta.zeros(rows, cols, dtype=ta.float64), sparsity, std=1.0).numpy()
    theirs = torch.nn.init.sparse_(torch.zeros(rows, cols, dtype=torch.float64), sparsity, std=1.0).numpy()
    assert ((ours == 0).sum(0) == (theirs == 0).sum(0)).all()
    assert ((ours == 0).sum(0) == math.ceil(sparsity * rows)).all()


@pytest.mark.parametrize("name", ["normal_", "uniform_", "xavier_uniform_", "xavier_normal_", "kaiming_uniform_",
                                  "kaiming_normal_", "trunc_normal_", "orthogonal_", "sparse_"])
def test_a_generator_gives_its_own_draws_and_leaves_the_librarys_stream(name):
    extra = (0.3,) if name == "sparse_" else ()
    ta.manual_seed(7)
    expected_next = ta.randn(3).numpy()
    ta.manual_seed(7)
    a = getattr(init, name)(ta.zeros(4, 5), *extra, generator=np.random.default_rng(1)).numpy()
    assert np.array_equal(ta.randn(3).numpy(), expected_next)  # the library's stream did not move
    b = getattr(init, name)(ta.zeros(4, 5), *extra, generator=np.random.default_rng(1)).numpy()
    assert np.array_equal(a, b) and a.any()
    c = getattr(tc.nn.init, name)(tc.zeros(4, 5), *extra, generator=tc.Generator().manual_seed(1)).numpy()
    assert np.array_equal(a, c)  # compat's torch.Generator is the NumPy generator behind it
    with pytest.raises(TypeError, match="generator must be"):
        getattr(init, name)(ta.zeros(4, 5), *extra, generator=3)


@pytest.mark.parametrize("name", ["normal", "uniform", "constant", "xavier_uniform", "xavier_normal",
                                  "kaiming_uniform", "kaiming_normal", "eye", "dirac", "orthogonal", "sparse"])
def test_the_deprecated_aliases_warn_as_torchs_and_fill_as_the_new_ones(name):
    args = {"constant": (0.5,), "sparse": (0.5,)}.get(name, ())
    shape = (2, 2, 3) if name == "dirac" else (3, 3)
    with warnings.catch_warnings(record=True) as theirs:
        warnings.simplefilter("always")
        getattr(torch.nn.init, name)(torch.zeros(*shape), *args)
    with warnings.catch_warnings(record=True) as ours:
        warnings.simplefilter("always")
        filled = getattr(tc.nn.init, name)(tc.zeros(*shape), *args)
    assert [(w.category, str(w.message)) for w in ours] == [(w.category, str(w.message)) for w in theirs]
    assert filled.shape == shape
