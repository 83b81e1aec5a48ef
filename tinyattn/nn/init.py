"""Initialisation: fill a parameter in place, without recording a graph (PyTorch's ``torch.nn.init``).

Each function draws from the backend's generator (``ta.manual_seed``), or from ``generator`` (a
``numpy.random.Generator``) where one is given, and returns the tensor it filled.

>>> import tinyattn as ta
>>> _ = ta.manual_seed(0)
>>> layer = ta.nn.Linear(64, 32)
>>> w = ta.nn.init.kaiming_uniform_(layer.weight, nonlinearity="relu")   # ±√6/√64 = ±0.306
>>> bool(w.abs().max() <= 6 ** 0.5 / 8), w is layer.weight, w.requires_grad
(True, True, True)
"""

import math

import numpy as np

from .. import backend
from ..creation import tensor as _tensor_of
from ..engine import no_grad


def _fill_with_draws(tensor, generator, draw):
    """``tensor`` filled with ``draw(rng, shape)`` (float64 NumPy draws) from ``generator``, on its device."""
    if not isinstance(generator, np.random.Generator):
        raise TypeError(f"generator must be a numpy.random.Generator or None, got {type(generator).__name__}")
    values = draw(generator, tuple(tensor.shape)).astype(tensor.dtype)
    return tensor.copy_(_tensor_of(values, device=tensor.device))


def _normal(tensor, mean, std, generator):
    if generator is None:
        return tensor.normal_(mean, std)
    return _fill_with_draws(tensor, generator, lambda rng, shape: rng.normal(mean, std, shape))


def _uniform(tensor, a, b, generator):
    if generator is None:
        return tensor.uniform_(a, b)
    return _fill_with_draws(tensor, generator, lambda rng, shape: rng.uniform(a, b, shape))


@no_grad
def normal_(tensor, mean=0.0, std=1.0, generator=None):
    """Draws from the normal distribution ``N(mean, std²)``.

    >>> import tinyattn as ta
    >>> x = ta.nn.init.normal_(ta.zeros(1000), std=0.1)
    >>> bool(abs(x.std().item() - 0.1) < 0.01)
    True
    """
    return _normal(tensor, mean, std, generator)


@no_grad
def uniform_(tensor, a=0.0, b=1.0, generator=None):
    """Draws from the uniform distribution on ``[a, b)``.

    >>> import tinyattn as ta
    >>> x = ta.nn.init.uniform_(ta.zeros(1000), -2.0, 2.0)
    >>> bool(x.min() >= -2.0), bool(x.max() < 2.0)
    (True, True)
    """
    return _uniform(tensor, a, b, generator)


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
def xavier_uniform_(tensor, gain=1.0, generator=None):
    """Uniform in ``±gain·√(6 / (fan_in + fan_out))`` (Glorot and Bengio).

    >>> import tinyattn as ta
    >>> w = ta.nn.init.xavier_uniform_(ta.zeros(20, 30))    # bound √(6/50) = 0.346
    >>> bool(w.abs().max() <= (6 / 50) ** 0.5)
    True
    """
    fan_out, fan_in = _fans(tensor)
    bound = gain * math.sqrt(6.0 / (fan_in + fan_out))
    return _uniform(tensor, -bound, bound, generator)


@no_grad
def xavier_normal_(tensor, gain=1.0, generator=None):
    """Normal with standard deviation ``gain·√(2 / (fan_in + fan_out))`` (Glorot and Bengio).

    >>> import tinyattn as ta
    >>> w = ta.nn.init.xavier_normal_(ta.zeros(200, 300))   # std √(2/500) = 0.063
    >>> bool(abs(w.std().item() - 0.063) < 0.003)
    True
    """
    fan_out, fan_in = _fans(tensor)
    return _normal(tensor, 0.0, gain * math.sqrt(2.0 / (fan_in + fan_out)), generator)


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
    return _uniform(tensor, -bound, bound, generator)


@no_grad
def kaiming_normal_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    """Normal with standard deviation ``gain / √fan`` (He et al.).

    >>> import tinyattn as ta
    >>> w = ta.nn.init.kaiming_normal_(ta.zeros(400, 100), nonlinearity="relu")   # std √2/10 = 0.141
    >>> bool(abs(w.std().item() - 0.141) < 0.005)
    True
    """
    return _normal(tensor, 0.0, _kaiming_std(tensor, a, mode, nonlinearity), generator)


@no_grad
def trunc_normal_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """Normal ``(mean, std)`` restricted to ``[a, b]`` (draws outside are drawn again).

    >>> import tinyattn as ta
    >>> w = ta.nn.init.trunc_normal_(ta.zeros(1000), std=1.0, a=-0.5, b=0.5)
    >>> bool(w.min() >= -0.5), bool(w.max() <= 0.5)
    (True, True)
    """
    values = _normal(tensor.detach().clone(), mean, std, generator)
    outside = (values < a) | (values > b)
    while bool(outside.any()):
        values = values.masked_fill(outside, 0.0) + outside * _normal(values.detach().clone(), mean, std, generator)
        outside = (values < a) | (values > b)
    return tensor.copy_(values)


@no_grad
def eye_(tensor):
    """Fills a 2-D tensor with the identity matrix (ones on the diagonal, also where it is not square).

    >>> import tinyattn as ta
    >>> ta.nn.init.eye_(ta.zeros(2, 3))
    tensor([[1., 0., 0.],
            [0., 1., 0.]])
    """
    if tensor.ndim != 2:
        raise ValueError(f"eye_: only 2-D tensors are supported, got shape {tuple(tensor.shape)}")
    return tensor.copy_(_tensor_of(np.eye(*tensor.shape, dtype=tensor.dtype), device=tensor.device))


@no_grad
def dirac_(tensor, groups=1):
    """Fills a ``(out, in, *kernel)`` convolution weight (3-, 4- or 5-D) with the Dirac delta: each of the first
    ``min(out/groups, in)`` output channels of every group passes its input channel through at the kernel's centre.

    >>> import tinyattn as ta
    >>> ta.nn.init.dirac_(ta.zeros(2, 2, 3))[:, :, 1]
    tensor([[1., 0.],
            [0., 1.]])
    """
    if tensor.ndim not in (3, 4, 5):
        raise ValueError(f"dirac_: only 3, 4 and 5-D tensors are supported, got shape {tuple(tensor.shape)}")
    if tensor.shape[0] % groups != 0:
        raise ValueError(f"dirac_: dim 0 ({tensor.shape[0]}) must be divisible by groups ({groups})")
    out_per_group = tensor.shape[0] // groups
    values = np.zeros(tensor.shape, dtype=tensor.dtype)
    centre = tuple(k // 2 for k in tensor.shape[2:])
    for g in range(groups):
        for d in range(min(out_per_group, tensor.shape[1])):
            values[(g * out_per_group + d, d, *centre)] = 1
    return tensor.copy_(_tensor_of(values, device=tensor.device))


@no_grad
def orthogonal_(tensor, gain=1, generator=None):
    """Fills with a (semi-)orthogonal matrix (Saxe et al.): the ``Q`` of a normal draw's QR decomposition, its signs
    fixed by ``R``'s diagonal, times ``gain``; dimensions after the first are flattened.

    >>> import tinyattn as ta
    >>> w = ta.nn.init.orthogonal_(ta.zeros(3, 5))
    >>> bool(((w @ w.T) - ta.eye(3)).abs().max() < 1e-5)
    True
    """
    if tensor.ndim < 2:
        raise ValueError("Only tensors with 2 or more dimensions are supported")
    if tensor.numel() == 0:
        return tensor
    rows, cols = tensor.shape[0], tensor.numel() // tensor.shape[0]
    flat = backend.to_numpy(_normal(tensor.new_zeros(rows, cols).double(), 0.0, 1.0, generator)._data)
    flat = flat.T if rows < cols else flat
    q, r = np.linalg.qr(flat)
    q = q * np.sign(np.diag(r))
    q = q.T if rows < cols else q
    return tensor.copy_(_tensor_of((gain * q).reshape(tensor.shape).astype(tensor.dtype), device=tensor.device))


@no_grad
def sparse_(tensor, sparsity, std=0.01, generator=None):
    """Fills a 2-D tensor as a sparse matrix (Martens): normal draws ``N(0, std²)``, then in every column the
    fraction ``sparsity`` of its rows set to zero (the tensor stays dense).

    >>> import tinyattn as ta
    >>> w = ta.nn.init.sparse_(ta.zeros(10, 3), sparsity=0.3)
    >>> (w == 0).sum(0).tolist()
    [3, 3, 3]
    """
    if tensor.ndim != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    rows, cols = tensor.shape
    zeros_per_column = int(math.ceil(sparsity * rows))
    _normal(tensor, 0.0, std, generator)
    keep = np.ones((rows, cols), dtype=bool)
    for column in range(cols):  # each column's zeroed rows: the smallest of its uniform draws' ranks
        draws = backend.to_numpy(_uniform(tensor.new_zeros(rows).double(), 0.0, 1.0, generator)._data)
        keep[np.argsort(draws, kind="stable")[:zeros_per_column], column] = False
    return tensor.mul_(_tensor_of(keep.astype(tensor.dtype), device=tensor.device))


def _fans(tensor):
    """PyTorch's ``(fan_out, fan_in)`` of a weight ``(out, in, *receptive field)``."""
    if tensor.ndim < 2:
        raise ValueError("Fan in and fan out can not be computed for tensor with fewer than 2 dimensions")
    receptive = math.prod(tensor.shape[2:])
    return tensor.shape[0] * receptive, tensor.shape[1] * receptive


__all__ = ["normal_", "uniform_", "zeros_", "ones_", "constant_", "xavier_uniform_", "xavier_normal_",
           "calculate_gain", "kaiming_uniform_", "kaiming_normal_", "trunc_normal_", "eye_", "dirac_", "orthogonal_",
           "sparse_"]
