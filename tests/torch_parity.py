"""Helpers shared by the tests that compare tinyattn modules with PyTorch's, weights copied through interop."""

import numpy as np

from tinyattn import backend
from tinyattn.interop import from_torch, to_torch


def host(array):
    """A NumPy copy of a backend array, from any device."""
    return backend.to_numpy(array)


def load_from_torch(ours, torch_module, device):
    """Copy ``torch_module``'s weights into ``ours`` (as float64) through ``from_torch``, then move it to ``device``."""
    ours.double()
    ours.load_state_dict(from_torch({k: v.detach().numpy() for k, v in torch_module.state_dict().items()}))
    return ours.to(device)


def assert_parameter_grads_match(ours, torch_module, rtol=1e-9, atol=1e-10):
    """Our parameter gradients, renamed to torch's layout by ``to_torch``, against torch's."""
    mapped = to_torch({name: host(p.grad) for name, p in ours.named_parameters()})
    theirs = dict(torch_module.named_parameters())
    assert sorted(mapped) == sorted(theirs)
    for name, grad in mapped.items():
        np.testing.assert_allclose(grad, theirs[name].grad.numpy(), rtol=rtol, atol=atol, err_msg=name)
