"""``torch.nn.utils``' parametrizations, weight and spectral norm (both forms), total norms and fusion, beside
torch with copied weights and buffers, in float64: the same values, state-dict keys, gradients (under a random
upstream gradient) and power-iteration buffers."""

import warnings

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import tinyattn.compat as tc

SIZES = st.tuples(st.integers(1, 5), st.integers(1, 5))


def pair(in_features, out_features, seed):
    """A torch Linear and a compat Linear with the same float64 weights."""
    torch.manual_seed(seed)
    theirs = torch.nn.Linear(in_features, out_features).double()
    ours = tc.nn.Linear(in_features, out_features).double()
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
    return theirs, ours


def run(theirs, ours, x, upstream):
    """Outputs and the gradients of every parameter and of the input, for both."""
    t_x, o_x = torch.tensor(x, requires_grad=True), tc.tensor(x, requires_grad=True)
    t_out, o_out = theirs(t_x), ours(o_x)
    t_out.backward(torch.tensor(upstream))
    o_out.backward(tc.tensor(upstream))
    np.testing.assert_allclose(o_out.detach().numpy(), t_out.detach().numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(o_x.grad.numpy(), t_x.grad.numpy(), rtol=1e-9, atol=1e-11)
    t_grads = {n: p.grad.numpy() for n, p in theirs.named_parameters()}
    o_grads = {n: p.grad.numpy() for n, p in ours.named_parameters()}
    assert sorted(o_grads) == sorted(t_grads)
    for name in t_grads:
        np.testing.assert_allclose(o_grads[name], t_grads[name], rtol=1e-9, atol=1e-11, err_msg=name)


@settings(deadline=None)
@given(sizes=SIZES, dim=st.sampled_from([0, 1, None]), seed=st.integers(0, 2**31 - 1))
def test_weight_norm_parametrization_is_torchs(sizes, dim, seed):
    theirs, ours = pair(*sizes, seed)
    torch.nn.utils.parametrizations.weight_norm(theirs, dim=dim)
    tc.nn.utils.parametrizations.weight_norm(ours, dim=dim)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    for key, value in theirs.state_dict().items():
        np.testing.assert_allclose(ours.state_dict()[key], value.numpy(), rtol=1e-12)
    rng = np.random.default_rng(seed)
    run(theirs, ours, rng.standard_normal((3, sizes[0])), rng.standard_normal((3, sizes[1])))


@settings(deadline=None)
@given(sizes=SIZES, steps=st.integers(1, 3), iterations=st.integers(1, 3), seed=st.integers(0, 2**31 - 1))
def test_spectral_norm_parametrization_is_torchs_given_its_buffers(sizes, steps, iterations, seed):
    theirs, ours = pair(*sizes, seed)
    torch.nn.utils.parametrizations.spectral_norm(theirs, n_power_iterations=iterations)
    tc.nn.utils.parametrizations.spectral_norm(ours, n_power_iterations=iterations)
    assert sorted(ours.state_dict()) == sorted(theirs.state_dict())
    ours.load_state_dict({k: v.numpy() for k, v in theirs.state_dict().items()})  # torch's random u and v
    rng = np.random.default_rng(seed)
    for _ in range(steps):  # each training-mode call moves u and v by the power iteration
        theirs.zero_grad()
        ours.zero_grad()
        run(theirs, ours, rng.standard_normal((2, sizes[0])), rng.standard_normal((2, sizes[1])))
    for key, value in theirs.state_dict().items():
        np.testing.assert_allclose(ours.state_dict()[key], value.numpy(), rtol=1e-9, atol=1e-12, err_msg=key)
    theirs.eval()
    ours.eval()
    np.testing.assert_allclose(ours.weight.detach().numpy(), theirs.weight.detach().numpy(), rtol=1e-9, atol=1e-12)


@settings(deadline=None)
@given(sizes=SIZES, seed=st.integers(0, 2**31 - 1))
def test_the_hook_forms_are_torchs(sizes, seed):
    rng = np.random.default_rng(seed)
    for name in ("weight_norm", "spectral_norm"):
        theirs, ours = pair(*sizes, seed)
        with warnings.catch_warnings(record=True) as t_warnings:
            warnings.simplefilter("always")
            getattr(torch.nn.utils, name)(theirs)
        with warnings.catch_warnings(record=True) as o_warnings:
            warnings.simplefilter("always")
            getattr(tc.nn.utils, name)(ours)
        assert [str(w.message) for w in o_warnings] == [str(w.message) for w in t_warnings]
        assert list(ours.state_dict()) == list(theirs.state_dict())
        ours.load_state_dict({k: v.numpy() for k, v in theirs.state_dict().items()})
        for _ in range(2):
            theirs.zero_grad()
            ours.zero_grad()
            run(theirs, ours, rng.standard_normal((2, sizes[0])), rng.standard_normal((2, sizes[1])))
        getattr(torch.nn.utils, "remove_" + name)(theirs)
        getattr(tc.nn.utils, "remove_" + name)(ours)
        assert list(ours.state_dict()) == list(theirs.state_dict())
        np.testing.assert_allclose(ours.weight.detach().numpy(), theirs.weight.detach().numpy(), rtol=1e-9)


class Symmetric(torch.nn.Module):
    def forward(self, x):
        return x.triu() + x.triu(1).transpose(0, 1)


class OurSymmetric(tc.nn.Module):
    def forward(self, x):
        return x.triu() + x.triu(1).transpose(0, 1)


@settings(deadline=None)
@given(n=st.integers(1, 5), seed=st.integers(0, 2**31 - 1), leave=st.booleans())
def test_register_and_remove_a_parametrization_as_torch(n, seed, leave):
    theirs, ours = pair(n, n, seed)
    torch.nn.utils.parametrize.register_parametrization(theirs, "weight", Symmetric())
    tc.nn.utils.parametrize.register_parametrization(ours, "weight", OurSymmetric())
    assert type(ours).__name__ == type(theirs).__name__ == "ParametrizedLinear"
    assert list(ours.state_dict()) == list(theirs.state_dict())
    rng = np.random.default_rng(seed)
    run(theirs, ours, rng.standard_normal((2, n)), rng.standard_normal((2, n)))
    with tc.nn.utils.parametrize.cached():
        assert ours.weight is ours.weight
    torch.nn.utils.parametrize.remove_parametrizations(theirs, "weight", leave_parametrized=leave)
    tc.nn.utils.parametrize.remove_parametrizations(ours, "weight", leave_parametrized=leave)
    assert type(ours).__name__ == "Linear" and list(ours.state_dict()) == list(theirs.state_dict())
    np.testing.assert_allclose(ours.weight.detach().numpy(), theirs.weight.detach().numpy(), rtol=1e-12)
    assert not tc.nn.utils.parametrize.is_parametrized(ours)


@given(shapes=st.lists(st.tuples(st.integers(1, 4), st.integers(1, 3)), min_size=1, max_size=4),
       norm_type=st.sampled_from([1.0, 2.0, 3.0, float("inf")]), max_norm=st.floats(0.01, 10.0),
       seed=st.integers(0, 2**31 - 1))
def test_get_total_norm_and_clip_grads_with_norm_are_torchs(shapes, norm_type, max_norm, seed):
    rng = np.random.default_rng(seed)
    arrays = [rng.standard_normal(shape) for shape in shapes]
    t_norm = torch.nn.utils.get_total_norm([torch.tensor(a) for a in arrays], norm_type)
    o_norm = tc.nn.utils.get_total_norm([tc.tensor(a) for a in arrays], norm_type)
    np.testing.assert_allclose(float(o_norm), float(t_norm), rtol=1e-12)
    t_params = [torch.nn.Parameter(torch.zeros(a.shape, dtype=torch.float64)) for a in arrays]
    o_params = [tc.nn.Parameter(tc.zeros(a.shape, dtype=tc.float64)) for a in arrays]
    for t, o, a in zip(t_params, o_params, arrays):
        t.grad, o.grad = torch.tensor(a), tc.tensor(a)
    torch.nn.utils.clip_grads_with_norm_(t_params, max_norm, t_norm)
    tc.nn.utils.clip_grads_with_norm_(o_params, max_norm, o_norm)
    for t, o in zip(t_params, o_params):
        np.testing.assert_allclose(o.grad.numpy(), t.grad.numpy(), rtol=1e-12)


def test_orthogonal_and_memory_formats_are_refused_with_what_to_do():
    with pytest.raises(NotImplementedError, match="nn.init.orthogonal_"):
        tc.nn.utils.parametrizations.orthogonal(tc.nn.Linear(2, 2))
    with pytest.raises(NotImplementedError, match="memory formats"):
        tc.nn.utils.convert_conv2d_weight_memory_format(tc.nn.Linear(2, 2), None)
