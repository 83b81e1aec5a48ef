"""``torch.nn.init``: fill a parameter in place, without recording a graph."""

import math

from ...engine import no_grad


@no_grad
def normal_(tensor, mean=0.0, std=1.0):
    return tensor.normal_(mean, std)


@no_grad
def uniform_(tensor, a=0.0, b=1.0):
    return tensor.uniform_(a, b)


@no_grad
def zeros_(tensor):
    return tensor.zero_()


@no_grad
def ones_(tensor):
    return tensor.fill_(1.0)


@no_grad
def constant_(tensor, val):
    return tensor.fill_(val)


@no_grad
def xavier_uniform_(tensor, gain=1.0):
    """Uniform in ``±gain·√(6 / (fan_in + fan_out))`` (Glorot and Bengio)."""
    fan_out, fan_in = _fans(tensor)
    bound = gain * math.sqrt(6.0 / (fan_in + fan_out))
    return tensor.uniform_(-bound, bound)


@no_grad
def xavier_normal_(tensor, gain=1.0):
    """Normal with standard deviation ``gain·√(2 / (fan_in + fan_out))`` (Glorot and Bengio)."""
    fan_out, fan_in = _fans(tensor)
    return tensor.normal_(0.0, gain * math.sqrt(2.0 / (fan_in + fan_out)))


def calculate_gain(nonlinearity, param=None):
    """torch's recommended gain for a nonlinearity (``relu``: √2, ``tanh``: 5/3, ``leaky_relu``: √(2 / (1 + a²)))."""
    if nonlinearity in ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
                        "conv_transpose3d", "sigmoid"):
        return 1
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        slope = 0.01 if param is None else param
        if isinstance(slope, bool) or not isinstance(slope, (int, float)):
            raise ValueError(f"negative_slope {slope} not a valid number")
        return math.sqrt(2.0 / (1 + slope**2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"Unsupported nonlinearity {nonlinearity}")


def _kaiming_std(tensor, a, mode, nonlinearity):
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"Mode {mode} not supported, please use one of fan_in, fan_out")
    fan_out, fan_in = _fans(tensor)
    return calculate_gain(nonlinearity, a) / math.sqrt(fan_in if mode == "fan_in" else fan_out)


@no_grad
def kaiming_uniform_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    """Uniform in ``±√3 · gain / √fan`` (He et al.)."""
    bound = math.sqrt(3.0) * _kaiming_std(tensor, a, mode, nonlinearity)
    return tensor.uniform_(-bound, bound)


@no_grad
def kaiming_normal_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    """Normal with standard deviation ``gain / √fan`` (He et al.)."""
    return tensor.normal_(0.0, _kaiming_std(tensor, a, mode, nonlinearity))


@no_grad
def trunc_normal_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """Normal ``(mean, std)`` restricted to ``[a, b]`` (draws outside are drawn again)."""
    values = tensor.detach().clone().normal_(mean, std)
    outside = (values < a) | (values > b)
    while bool(outside.any()):
        values = values.masked_fill(outside, 0.0) + outside * values.detach().clone().normal_(mean, std)
        outside = (values < a) | (values > b)
    return tensor.copy_(values)


def _fans(tensor):
    """PyTorch's ``(fan_out, fan_in)`` of a weight ``(out, in, *receptive field)``."""
    if tensor.ndim < 2:
        raise ValueError("Fan in and fan out can not be computed for tensor with fewer than 2 dimensions")
    receptive = math.prod(tensor.shape[2:])
    return tensor.shape[0] * receptive, tensor.shape[1] * receptive


def __getattr__(name):
    raise AttributeError(f"tinyattn.compat.nn.init has no `{name}` yet")
