"""Floor 4: normalisation beyond ``layer_norm`` (``rms_norm``, ``group_norm``, ``batch_norm``, ``instance_norm``,
``normalize``), each composed from the primitives in ``tinyattn.ops``.

Each standardises over some axes, ``x̂ = (x - mean) / √(var + eps)`` with the biased variance (or divides by a
root mean square or a norm), then applies a per-channel ``weight`` and ``bias``. float16 inputs are computed in
float32 and rounded back, as PyTorch does on the CPU (a float16 square overflows at 256).

>>> import tinyattn as ta
>>> import tinyattn.nn.functional as F
>>> [round(v, 4) for v in F.rms_norm(ta.tensor([[3.0, 4.0]]), (2,), eps=0.0)[0].tolist()]
[0.8485, 1.1314]
"""

import numbers

import numpy as np

from ..ops_extra import clamp
from .distances import p_norm
from .padding import pad

__all__ = ["rms_norm", "group_norm", "batch_norm", "instance_norm", "local_response_norm", "normalize"]


def _in_float32(function, input, *tensors):
    """``function(input, *tensors)`` computed in float32 and rounded back to float16."""
    widened = [None if t is None else t.to(np.float32) for t in tensors]
    return function(input.to(np.float32), *widened).to(np.float16)


def _channel_shape(input):
    """``(C, 1, …)``: a per-channel vector's shape, to broadcast over ``input (N, C, …)`` from dimension 1."""
    return (input.shape[1],) + (1,) * (input.ndim - 2)


def _affine(output, weight, bias, shape):
    """``output · weight + bias``, each reshaped to ``shape`` where given."""
    if weight is not None:
        output = output * weight.reshape(*shape)
    if bias is not None:
        output = output + bias.reshape(*shape)
    return output


def rms_norm(input, normalized_shape, weight=None, eps=None):
    """``y = x / √(mean(x²) + eps) · weight`` over the trailing ``normalized_shape`` (Zhang and Sennrich, 2019);
    ``eps`` defaults to the machine epsilon of the input's dtype, as in PyTorch.

    >>> import tinyattn as ta
    >>> rms_norm(ta.tensor([[1.0, 1.0]]), (2,))
    tensor([[1., 1.]])
    """
    normalized_shape = (normalized_shape,) if isinstance(normalized_shape, numbers.Integral) else tuple(
        normalized_shape)
    ndim = len(normalized_shape)
    if ndim == 0 or input.ndim < ndim or tuple(input.shape[input.ndim - ndim:]) != normalized_shape:
        raise ValueError(f"rms_norm: expected an input whose trailing dimensions are {normalized_shape}, got shape "
                         f"{input.shape}")
    if weight is not None and tuple(weight.shape) != normalized_shape:
        raise ValueError(f"rms_norm: weight has shape {weight.shape}, expected normalized_shape {normalized_shape}")
    eps = float(np.finfo(input.dtype).eps) if eps is None else float(eps)
    if input.dtype == np.float16:
        widened = None if weight is None else weight.to(np.float32)
        return rms_norm(input.to(np.float32), normalized_shape, widened, eps).to(np.float16)
    axes = tuple(range(input.ndim - ndim, input.ndim))
    output = input / ((input * input).mean(axes, keepdim=True) + eps).sqrt()
    return output if weight is None else output * weight


def _standardized(x, axes, eps):
    """``(x - mean) / √(var + eps)`` over ``axes``, the biased variance; also the mean and the variance."""
    mean = x.mean(axes, keepdim=True)
    centered = x - mean
    variance = (centered * centered).mean(axes, keepdim=True)
    return centered / (variance + eps).sqrt(), mean, variance


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5):
    """The channels of ``input (N, C, …)`` split into ``num_groups`` groups, each sample's group standardised
    over its channels and positions, then ``· weight + bias`` per channel (Wu and He, 2018).

    >>> import tinyattn as ta
    >>> group_norm(ta.tensor([[1.0, 3.0]]), 1, eps=0.0)
    tensor([[-1.,  1.]])
    """
    if input.ndim < 2:
        raise RuntimeError(f"group_norm: expected an input of at least 2 dimensions (N, C, …), got {input.shape}")
    channels = input.shape[1]
    if channels % num_groups:
        raise RuntimeError(f"Expected number of channels in input to be divisible by num_groups, but got input of "
                           f"shape {input.shape} and num_groups={num_groups}")
    if input.dtype == np.float16:
        return _in_float32(lambda x, w, b: group_norm(x, num_groups, w, b, eps), input, weight, bias)
    per_group = int(np.prod(input.shape[1:], dtype=np.int64)) // num_groups
    grouped = input.reshape(input.shape[0], num_groups, per_group)  # (N, G, C/G · …)
    normalized, _, _ = _standardized(grouped, (2,), eps)
    output = normalized.reshape(*input.shape)  # (N, C, …)
    return _affine(output, weight, bias, _channel_shape(input))


def _update_running(running, value, momentum):
    """``running ← (1 - momentum) · running + momentum · value``, in place and outside the graph. Inside ``vmap``
    (``value`` batched, the running statistics not) there is no one value to move toward: refused, as
    ``torch.func.vmap`` refuses it."""
    if value._data.ndim != value.ndim:
        raise RuntimeError("batch_norm: the running statistics cannot be updated in place inside vmap (they are not "
                           "batched); pass running_mean=None and running_var=None, or training=False")
    running._data[...] = (1 - momentum) * running._data + momentum * value.detach()._data.reshape(running.shape)


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False, momentum=0.1, eps=1e-5):
    """Each channel (dimension 1 of ``input (N, C, …)``) standardised over the batch and the positions, then
    ``· weight + bias`` (Ioffe and Szegedy, 2015). ``training``: with the batch's mean and biased variance, and
    the running statistics (where given) moved toward the batch's mean and unbiased variance by ``momentum``;
    otherwise with the running statistics.

    >>> import tinyattn as ta
    >>> batch_norm(ta.tensor([[1.0], [3.0]]), None, None, training=True, eps=0.0)
    tensor([[-1.],
            [ 1.]])
    """
    if input.dtype == np.float16:
        widened = [None if t is None else t.to(np.float32) for t in (weight, bias)]  # (the running statistics
        # stay themselves, to be updated in place)
        return batch_norm(input.to(np.float32), running_mean, running_var, *widened, training=training,
                          momentum=momentum, eps=eps).to(np.float16)
    if input._data.size == 0:  # nothing to normalise (and no statistics to gather)
        return input.reshape(input.shape)
    shape = _channel_shape(input) if input.ndim >= 2 else input.shape[:1]
    axes = tuple(d for d in range(input.ndim) if d != 1)
    if training:
        count = int(np.prod([input.shape[d] for d in axes], dtype=np.int64))
        if count <= 1 and input.ndim >= 2:
            raise ValueError(f"Expected more than 1 value per channel when training, got input size {input.shape}")
        output, mean, variance = _standardized(input, axes, eps)
        if running_mean is not None:
            _update_running(running_mean, mean, momentum)
        if running_var is not None:
            _update_running(running_var, variance * (count / max(count - 1, 1)), momentum)
    else:
        if running_mean is None or running_var is None:
            raise ValueError("batch_norm: running_mean and running_var must be given when training is False")
        output = (input - running_mean.reshape(*shape)) / (running_var.reshape(*shape) + eps).sqrt()
    return _affine(output, weight, bias, shape)


def instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None, use_input_stats=True,
                  momentum=0.1, eps=1e-5):
    """Each sample's channel in ``input (N, C, …)`` standardised over its positions, then ``· weight + bias``
    (Ulyanov et al., 2016). ``use_input_stats=False``: with the running statistics instead; with it and running
    statistics given, they move toward the instances' mean statistics (unbiased variance) by ``momentum``.

    >>> import tinyattn as ta
    >>> instance_norm(ta.tensor([[[1.0, 3.0]]]), eps=0.0)
    tensor([[[-1.,  1.]]])
    """
    if input.ndim < 3:
        raise ValueError(f"instance_norm: expected an input of at least 3 dimensions (N, C, …), got {input.shape}")
    if input.dtype == np.float16:
        widened = [None if t is None else t.to(np.float32) for t in (weight, bias)]  # (the running statistics
        # stay themselves, to be updated in place)
        return instance_norm(input.to(np.float32), running_mean, running_var, *widened, use_input_stats, momentum,
                             eps).to(np.float16)
    shape = _channel_shape(input)
    if not use_input_stats:
        output = (input - running_mean.reshape(*shape)) / (running_var.reshape(*shape) + eps).sqrt()
        return _affine(output, weight, bias, shape)
    axes = tuple(range(2, input.ndim))
    output, mean, variance = _standardized(input, axes, eps)  # mean, variance: (N, C, 1, …)
    count = int(np.prod(input.shape[2:], dtype=np.int64))
    if running_mean is not None:
        _update_running(running_mean, mean.mean(0), momentum)
    if running_var is not None:
        _update_running(running_var, (variance * (count / max(count - 1, 1))).mean(0), momentum)
    return _affine(output, weight, bias, shape)


def local_response_norm(input, size, alpha=1e-4, beta=0.75, k=1.0):
    """Each channel of ``input (N, C, …)`` divided by ``(k + α/n · Σ x²)^β``, the sum over the ``n = size``
    channels around it (Krizhevsky et al., 2012), zeros past the edges: ``size // 2`` before, ``(size - 1) // 2``
    after, as PyTorch pads them.

    >>> import tinyattn as ta
    >>> local_response_norm(ta.tensor([[[2.0], [0.0]]]), size=1, alpha=1.0, beta=1.0)
    tensor([[[0.4],
             [0. ]]])
    """
    if input.ndim < 3:
        raise ValueError(f"Expected 3D or higher dimensionality input (got {input.ndim} dimensions)")
    if input._data.size == 0:
        return input
    channels = input.shape[1]
    squares = pad(input * input, (0, 0) * (input.ndim - 2) + (size // 2, (size - 1) // 2))  # (N, C + size - 1, …)
    window = squares[:, 0:channels]
    for offset in range(1, size):  # the sum over the window, one shifted slice at a time
        window = window + squares[:, offset:offset + channels]  # (N, C, …)
    return input / (window * (alpha / size) + k) ** beta


def normalize(input, p=2.0, dim=1, eps=1e-12, out=None):
    """``x / max(‖x‖_p, eps)`` along ``dim``: each vector scaled to unit ``p``-norm.

    >>> import tinyattn as ta
    >>> normalize(ta.tensor([[3.0, 4.0]]))
    tensor([[0.6, 0.8]])
    """
    if out is not None:
        raise TypeError("normalize: out= is not supported (tinyattn returns a new tensor)")
    if input.ndim == 0:
        return normalize(input.reshape(1), p, 0, eps).reshape(())
    norm = clamp(p_norm(input, p, dim, keepdim=True), min=eps)
    return input / norm
