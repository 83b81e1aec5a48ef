"""``torch.nn.utils``: gradient clipping, parameters as one vector, and ``rnn`` (padding sequences).

>>> import tinyattn.compat as torch
>>> w = torch.nn.Parameter(torch.ones(3))
>>> (w * torch.tensor([1.0, -5.0, 2.0])).sum().backward()
>>> torch.nn.utils.clip_grad_value_([w], clip_value=1.5)
>>> w.grad
tensor([ 1. , -1.5,  1.5])
"""

import warnings

from ....nn.utils import clip_grad_norm_
from ....ops import cat
from ... import _tensor
from . import rnn  # noqa: F401

__all__ = ["clip_grad_norm_", "clip_grad_norm", "clip_grad_value_", "parameters_to_vector", "vector_to_parameters",
           "rnn"]


def _parameters(parameters):
    return [parameters] if isinstance(parameters, _tensor._NativeTensor) else list(parameters)


def clip_grad_norm(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """The deprecated name of ``clip_grad_norm_`` (torch warns, then clips)."""
    warnings.warn("torch.nn.utils.clip_grad_norm is now deprecated in favor of torch.nn.utils.clip_grad_norm_.",
                  FutureWarning, stacklevel=2)
    return clip_grad_norm_(parameters, max_norm, norm_type)


def clip_grad_value_(parameters, clip_value, foreach=None):
    """Clamp every gradient to ``[-clip_value, clip_value]``, in place."""
    clip_value = float(clip_value)
    for p in _parameters(parameters):
        if p._grad is not None:
            p._grad.clip(-clip_value, clip_value, out=p._grad)


def parameters_to_vector(parameters):
    """The parameters, flattened and joined into one 1-D tensor (differentiable)."""
    return _tensor.as_compat(cat([p.reshape(-1) for p in _parameters(parameters)]))


def vector_to_parameters(vec, parameters):
    """Copy consecutive slices of ``vec`` into the parameters' values."""
    if not isinstance(vec, _tensor._NativeTensor) or vec.ndim != 1:
        raise TypeError(f"expected vec to be a 1-D Tensor, but got {type(vec).__name__}")
    start = 0
    for p in _parameters(parameters):
        n = p.numel()
        p._data[...] = vec._data[start:start + n].reshape(p.shape)
        start += n


def __getattr__(name):
    raise AttributeError(f"tinyattn.compat.nn.utils has no `{name}` yet")
