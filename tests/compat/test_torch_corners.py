"""Corners of torch's API that scripts reach: the softmaxes' implicit ``dim``, ``F``'s in-place activations,
``gumbel_softmax``, ``nn.attention``'s kernel choice, ``nn.Buffer``, refused data parallelism; beside torch."""

import warnings

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import array_shapes, arrays

import tinyattn.compat as tc

FLOATS = st.floats(-3, 3, allow_nan=False, width=64)


@given(x=arrays(np.float64, array_shapes(min_dims=1, max_dims=4, max_side=3), elements=FLOATS),
       name=st.sampled_from(["softmax", "log_softmax"]))
def test_the_implicit_softmax_dim_and_its_warning_are_torchs(x, name):
    with warnings.catch_warnings(record=True) as theirs:
        warnings.simplefilter("always")
        expected = getattr(torch.nn.functional, name)(torch.tensor(x)).numpy()
    with warnings.catch_warnings(record=True) as ours:
        warnings.simplefilter("always")
        got = getattr(tc.nn.functional, name)(tc.tensor(x)).numpy()
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)
    assert [str(w.message) for w in ours] == [str(w.message) for w in theirs]


@given(x=arrays(np.float64, (2, 3), elements=FLOATS),
       case=st.sampled_from([("relu_", ()), ("elu_", (0.5,)), ("celu_", (1.5,)), ("selu_", ()),
                             ("leaky_relu_", (0.2,)), ("hardtanh_", (-0.5, 0.5)), ("threshold_", (0.1, -1.0))]))
def test_the_in_place_activations_write_torchs_values_into_their_input(x, case):
    name, args = case
    t, o = torch.tensor(x), tc.tensor(x)
    t_out, o_out = getattr(torch.nn.functional, name)(t, *args), getattr(tc.nn.functional, name)(o, *args)
    assert o_out is o and t_out is t
    np.testing.assert_allclose(o.numpy(), t.numpy(), rtol=1e-12, atol=1e-15)


@given(seed=st.integers(0, 2**31 - 1), tau=st.floats(0.3, 3.0), hard=st.booleans(), dim=st.sampled_from([0, -1]))
def test_gumbel_softmax_samples_the_simplex_and_passes_the_soft_gradient(seed, tau, hard, dim):
    tc.manual_seed(seed)
    rng = np.random.default_rng(seed)
    logits = tc.tensor(rng.standard_normal((3, 4)), requires_grad=True)
    y = tc.nn.functional.gumbel_softmax(logits, tau=tau, hard=hard, dim=dim)
    np.testing.assert_allclose(y.detach().numpy().sum(dim), 1.0, rtol=1e-12)
    if hard:  # one-hot in value, the soft sample's gradient (straight-through)
        assert set(np.unique(y.detach().numpy())) <= {0.0, 1.0}
        upstream = rng.standard_normal((3, 4))
        y.backward(tc.tensor(upstream))
        tc.manual_seed(seed)
        logits2 = tc.tensor(logits.detach().numpy(), requires_grad=True)
        soft = tc.nn.functional.gumbel_softmax(logits2, tau=tau, hard=False, dim=dim)
        soft.backward(tc.tensor(upstream))
        np.testing.assert_allclose(logits.grad.numpy(), logits2.grad.numpy(), rtol=1e-10, atol=1e-12)


def test_gumbel_softmax_draws_the_categorical_distribution_of_its_logits():
    tc.manual_seed(0)
    logits = tc.tensor(np.log([0.2, 0.3, 0.5])).expand(20000, 3)
    counts = tc.nn.functional.gumbel_softmax(logits, hard=True).numpy().mean(0)
    np.testing.assert_allclose(counts, [0.2, 0.3, 0.5], atol=0.02)  # 20000 draws: sd < 0.004


def test_sdpa_kernel_accepts_torchs_backends_and_changes_nothing():
    q = tc.randn(1, 2, 3, 4)
    plain = tc.nn.functional.scaled_dot_product_attention(q, q, q)
    with tc.nn.attention.sdpa_kernel([tc.nn.attention.SDPBackend.FLASH_ATTENTION, tc.nn.attention.SDPBackend.MATH]):
        chosen = tc.nn.functional.scaled_dot_product_attention(q, q, q)
    assert np.array_equal(plain.numpy(), chosen.numpy())
    assert [b.name for b in tc.nn.attention.SDPBackend] == list(torch.nn.attention.SDPBackend.__members__)
    with pytest.raises(TypeError, match="SDPBackend"):
        with tc.nn.attention.sdpa_kernel(["flash"]):
            pass


def test_buffers_register_as_torchs_do():
    def build(nn, lib):
        m = nn.Module()
        m.steps = nn.Buffer(lib.zeros(2))
        m.table = nn.Buffer(lib.ones(3), persistent=False)
        m.weight = nn.Parameter(lib.ones(1))
        return m

    theirs, ours = build(torch.nn, torch), build(tc.nn, tc)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert [n for n, _ in ours.named_buffers()] == [n for n, _ in theirs.named_buffers()]
    assert isinstance(ours.steps, tc.Tensor) and not isinstance(ours.steps, tc.nn.Buffer)


def test_data_parallel_is_refused_with_what_to_do():
    with pytest.raises(NotImplementedError, match="torch.nn.parallel.DataParallel is not supported"):
        tc.nn.DataParallel(tc.nn.Linear(2, 2))
