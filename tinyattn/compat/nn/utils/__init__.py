"""``torch.nn.utils``: gradient clipping, parameters as one vector, and ``rnn`` (padded and packed sequences).

>>> import tinyattn.compat as torch
>>> w = torch.nn.Parameter(torch.ones(3))
>>> (w * torch.tensor([1.0, -5.0, 2.0])).sum().backward()
>>> torch.nn.utils.clip_grad_value_([w], clip_value=1.5)
>>> w.grad
tensor([ 1. , -1.5,  1.5])
"""

import math
import warnings

import numpy as np

from ....creation import tensor
from ....engine import Tensor as _NativeTensor
from ....nn.utils import clip_grad_norm_ as _native_clip_grad_norm_
from ....ops import cat
from ...core.tensor import as_compat
from . import rnn  # noqa: F401

__all__ = ["clip_grad_norm_", "clip_grad_norm", "clip_grad_value_", "parameters_to_vector", "vector_to_parameters",
           "rnn"]


def _parameters(parameters):
    return [parameters] if isinstance(parameters, _NativeTensor) else list(parameters)


def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """Scale all gradients together so that their joint norm is at most ``max_norm`` (the native
    ``clip_grad_norm_``); returns the norm before clipping as a 0-d tensor of the gradients' dtype, as torch
    does. With ``error_if_nonfinite`` a NaN or infinite norm raises instead of clipping."""
    parameters = _parameters(parameters)
    grads = [p._grad for p in parameters if p._grad is not None]
    dtype = grads[0].dtype if grads else np.float32
    if error_if_nonfinite and grads:
        norms = [float(np.linalg.norm(np.asarray(g, dtype=np.float64).ravel(), ord=float(norm_type)))
                 for g in grads]
        total = max(norms) if float(norm_type) == math.inf else math.hypot(*norms)
        if not math.isfinite(total):
            raise RuntimeError(f"The total norm of order {float(norm_type)} for gradients from `parameters` is "
                               "non-finite, so it cannot be clipped. To disable this error and scale the gradients "
                               "by the non-finite norm anyway, set `error_if_nonfinite=False`")
    total = _native_clip_grad_norm_(parameters, max_norm, norm_type)
    return as_compat(tensor(total, dtype=dtype))


def clip_grad_norm(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """The deprecated name of ``clip_grad_norm_`` (torch warns, then clips)."""
    warnings.warn("torch.nn.utils.clip_grad_norm is now deprecated in favor of torch.nn.utils.clip_grad_norm_.",
                  FutureWarning, stacklevel=2)
    return clip_grad_norm_(parameters, max_norm, norm_type, error_if_nonfinite)


def clip_grad_value_(parameters, clip_value, foreach=None):
    """Clamp every gradient to ``[-clip_value, clip_value]``, in place."""
    clip_value = float(clip_value)
    for p in _parameters(parameters):
        if p._grad is not None:
            p._grad.clip(-clip_value, clip_value, out=p._grad)


def parameters_to_vector(parameters):
    """The parameters, flattened and joined into one 1-D tensor (differentiable)."""
    return as_compat(cat([p.reshape(-1) for p in _parameters(parameters)]))


def vector_to_parameters(vec, parameters):
    """Copy consecutive slices of ``vec`` into the parameters' values."""
    if not isinstance(vec, _NativeTensor) or vec.ndim != 1:
        raise TypeError(f"expected vec to be a 1-D Tensor, but got {type(vec).__name__}")
    start = 0
    for p in _parameters(parameters):
        n = p.numel()
        p._data[...] = vec._data[start:start + n].reshape(p.shape)
        start += n


def __getattr__(name):
    raise AttributeError(f"tinyattn.compat.nn.utils has no `{name}` yet")
