"""``torch.nn.init``: fill a parameter in place, without recording a graph."""

import math

from ...tensor import no_grad


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


def _fans(tensor):
    """PyTorch's ``(fan_out, fan_in)`` of a weight ``(out, in, *receptive field)``."""
    receptive = math.prod(tensor.shape[2:])
    return tensor.shape[0] * receptive, tensor.shape[1] * receptive


def __getattr__(name):
    raise AttributeError(f"tinyattn.compat.nn.init has no `{name}` yet")
