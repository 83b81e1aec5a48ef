"""``torch.nn.utils``: gradient clipping, parameters as one vector, and ``rnn`` (padded and packed sequences).

>>> import tinyattn.compat as torch
>>> w = torch.nn.Parameter(torch.ones(3))
>>> (w * torch.tensor([1.0, -5.0, 2.0])).sum().backward()
>>> torch.nn.utils.clip_grad_value_([w], clip_value=1.5)
>>> w.grad
tensor([ 1. , -1.5,  1.5])
"""

import inspect
import math
import warnings

import numpy as np

from ....creation import tensor
from ....engine import Tensor as _NativeTensor
from ....nn import parametrizations as _parametrizations
from ....nn.utils import clip_grad_norm_ as _native_clip_grad_norm_
from ....ops import cat
from ...core.tensor import as_compat
from ...refusals import refused
from ...scope import missing
from . import parametrizations, parametrize, rnn, stateless  # noqa: F401
from .fusion import fuse_conv_bn_eval, fuse_conv_bn_weights, fuse_linear_bn_eval, fuse_linear_bn_weights  # noqa: F401

__all__ = ["clip_grad_norm_", "clip_grad_norm", "clip_grad_value_", "parameters_to_vector", "vector_to_parameters",
           "rnn", "parametrize", "parametrizations", "stateless", "weight_norm", "remove_weight_norm",
           "spectral_norm", "remove_spectral_norm", "get_total_norm", "clip_grads_with_norm_", "skip_init",
           "convert_conv2d_weight_memory_format", "convert_conv3d_weight_memory_format", "fuse_conv_bn_eval",
           "fuse_conv_bn_weights", "fuse_linear_bn_eval", "fuse_linear_bn_weights"]


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


def get_total_norm(tensors, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """The ``norm_type``-norm of the norms of ``tensors`` (all of them as one vector), a 0-d tensor, as torch's.

    >>> import tinyattn.compat as torch
    >>> torch.nn.utils.get_total_norm([torch.tensor([3.0]), torch.tensor([4.0])])
    tensor(5.)
    """
    tensors = _parameters(tensors)
    if not tensors:
        return as_compat(tensor(0.0))
    norm_type = float(norm_type)
    norms = [t.detach().abs().max() if norm_type == math.inf else (t.detach().abs() ** norm_type).sum()
             for t in tensors]
    total = max(norms, key=float) if norm_type == math.inf else sum(norms[1:], norms[0]) ** (1.0 / norm_type)
    if error_if_nonfinite and not math.isfinite(float(total)):
        raise RuntimeError(f"The total norm of order {norm_type} for gradients from `parameters` is non-finite, so "
                           "it cannot be clipped. To disable this error and scale the gradients by the non-finite "
                           "norm anyway, set `error_if_nonfinite=False`")
    return as_compat(total)


def clip_grads_with_norm_(parameters, max_norm, total_norm, foreach=None):
    """Scale the gradients by ``max_norm / (total_norm + 1e-6)`` where that is below 1 (the second half of
    ``clip_grad_norm_``, given the norm ``get_total_norm`` computed)."""
    coefficient = float(max_norm) / (float(total_norm) + 1e-6)
    if coefficient < 1.0:
        for p in _parameters(parameters):
            if p._grad is not None:
                p._grad *= coefficient


def weight_norm(module, name="weight", dim=0):
    """torch's deprecated hook form of weight normalisation (``<name>_g``, ``<name>_v``); warns as torch does."""
    warnings.warn("`torch.nn.utils.weight_norm` is deprecated in favor of "
                  "`torch.nn.utils.parametrizations.weight_norm`.", FutureWarning, stacklevel=2)
    return _parametrizations.weight_norm_hook(module, name, dim)


def remove_weight_norm(module, name="weight"):
    """Undo ``weight_norm``."""
    return _parametrizations.remove_weight_norm_hook(module, name)


def spectral_norm(module, name="weight", n_power_iterations=1, eps=1e-12, dim=None):
    """torch's hook form of spectral normalisation (``<name>_orig``, ``<name>_u``, ``<name>_v``)."""
    return _parametrizations.spectral_norm_hook(module, name, n_power_iterations, eps, dim)


def remove_spectral_norm(module, name="weight"):
    """Undo ``spectral_norm``."""
    return _parametrizations.remove_spectral_norm_hook(module, name)


def skip_init(module_cls, *args, **kwargs):
    """``module_cls(*args, **kwargs)``. torch builds it on the meta device to skip the initialisation, leaving its
    values undefined; here the initialisation runs, which gives values as undefined to the caller, at its cost."""
    if "device" not in inspect.signature(module_cls).parameters:
        raise RuntimeError("Module must support a 'device' arg to skip initialization")
    return module_cls(*args, **kwargs)


_MEMORY_FORMATS = ("memory formats (channels_last): a NumPy array's strides are NumPy's own; tinyattn has no "
                   "layout to convert")
convert_conv2d_weight_memory_format = refused("torch.nn.utils.convert_conv2d_weight_memory_format", _MEMORY_FORMATS)
convert_conv3d_weight_memory_format = refused("torch.nn.utils.convert_conv3d_weight_memory_format", _MEMORY_FORMATS)


def __getattr__(name):
    raise missing(__name__, name)
