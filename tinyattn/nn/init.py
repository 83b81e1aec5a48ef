"""Initialisation: fill a parameter in place, without recording a graph (PyTorch's ``torch.nn.init``).

Each function draws from the backend's generator (``ta.manual_seed``) and returns the tensor it filled.

>>> import tinyattn as ta
>>> _ = ta.manual_seed(0)
>>> layer = ta.nn.Linear(64, 32)
>>> w = ta.nn.init.kaiming_uniform_(layer.weight, nonlinearity="relu")   # ±√6/√64 = ±0.306
>>> bool(w.abs().max() <= 6 ** 0.5 / 8), w is layer.weight, w.requires_grad
(True, True, True)
"""

import math

from ..engine import no_grad


@no_grad
def normal_(tensor, mean=0.0, std=1.0):
    """Draws from the normal distribution ``N(mean, std²)``.

    >>> import tinyattn as ta
    >>> x = ta.nn.init.normal_(ta.zeros(1000), std=0.1)
    >>> bool(abs(x.std().item() - 0.1) < 0.01)
    True
    """
    return tensor.normal_(mean, std)


@no_grad
def uniform_(tensor, a=0.0, b=1.0):
    """Draws from the uniform distribution on ``[a, b)``.

    >>> import tinyattn as ta
    >>> x = ta.nn.init.uniform_(ta.zeros(1000), -2.0, 2.0)
    >>> bool(x.min() >= -2.0), bool(x.max() < 2.0)
    (True, True)
    """
    return tensor.uniform_(a, b)


@no_grad
def zeros_(tensor):
    """Fills with zeros.

    >>> import tinyattn as ta
    >>> ta.nn.init.zeros_(ta.ones(3))
    tensor([0., 0., 0.])
    """
    return tensor.zero_()


@no_grad
def ones_(tensor):
    """Fills with ones.

    >>> import tinyattn as ta
    >>> ta.nn.init.ones_(ta.zeros(3))
    tensor([1., 1., 1.])
    """
    return tensor.fill_(1.0)


@no_grad
def constant_(tensor, val):
    """Fills with ``val``.

    >>> import tinyattn as ta
    >>> ta.nn.init.constant_(ta.zeros(2), 0.5)
    tensor([0.5, 0.5])
    """
    return tensor.fill_(val)


@no_grad
def xavier_uniform_(tensor, gain=1.0):
    """Uniform in ``±gain·√(6 / (fan_in + fan_out))`` (Glorot and Bengio).

    >>> import tinyattn as ta
    >>> w = ta.nn.init.xavier_uniform_(ta.zeros(20, 30))    # bound √(6/50) = 0.346
    >>> bool(w.abs().max() <= (6 / 50) ** 0.5)
    True
    """
    fan_out, fan_in = _fans(tensor)
    bound = gain * math.sqrt(6.0 / (fan_in + fan_out))
    return tensor.uniform_(-bound, bound)


@no_grad
def xavier_normal_(tensor, gain=1.0):
    """Normal with standard deviation ``gain·√(2 / (fan_in + fan_out))`` (Glorot and Bengio).

    >>> import tinyattn as ta
    >>> w = ta.nn.init.xavier_normal_(ta.zeros(200, 300))   # std √(2/500) = 0.063
    >>> bool(abs(w.std().item() - 0.063) < 0.003)
    True
    """
    fan_out, fan_in = _fans(tensor)
    return tensor.normal_(0.0, gain * math.sqrt(2.0 / (fan_in + fan_out)))


def calculate_gain(nonlinearity, param=None):
    """PyTorch's recommended gain for a nonlinearity (``relu``: √2, ``tanh``: 5/3, ``leaky_relu``: √(2 / (1 + a²))).

    >>> import tinyattn as ta
    >>> ta.nn.init.calculate_gain("relu"), ta.nn.init.calculate_gain("tanh")
    (1.4142135623730951, 1.6666666666666667)
    """
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
    """Uniform in ``±√3 · gain / √fan`` (He et al.); ``mode`` picks the fan (``fan_in`` or ``fan_out``).

    >>> import tinyattn as ta
    >>> w = ta.nn.init.kaiming_uniform_(ta.zeros(16, 64), nonlinearity="relu")   # bound √3·√2/8 = 0.306
    >>> bool(w.abs().max() <= 3 ** 0.5 * 2 ** 0.5 / 8)
    True
    """
    bound = math.sqrt(3.0) * _kaiming_std(tensor, a, mode, nonlinearity)
    return tensor.uniform_(-bound, bound)


@no_grad
def kaiming_normal_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    """Normal with standard deviation ``gain / √fan`` (He et al.).

    >>> import tinyattn as ta
    >>> w = ta.nn.init.kaiming_normal_(ta.zeros(400, 100), nonlinearity="relu")   # std √2/10 = 0.141
    >>> bool(abs(w.std().item() - 0.141) < 0.005)
    True
    """
    return tensor.normal_(0.0, _kaiming_std(tensor, a, mode, nonlinearity))


@no_grad
def trunc_normal_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """Normal ``(mean, std)`` restricted to ``[a, b]`` (draws outside are drawn again).

    >>> import tinyattn as ta
    >>> w = ta.nn.init.trunc_normal_(ta.zeros(1000), std=1.0, a=-0.5, b=0.5)
    >>> bool(w.min() >= -0.5), bool(w.max() <= 0.5)
    (True, True)
    """
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


__all__ = ["normal_", "uniform_", "zeros_", "ones_", "constant_", "xavier_uniform_", "xavier_normal_",
           "calculate_gain", "kaiming_uniform_", "kaiming_normal_", "trunc_normal_"]
