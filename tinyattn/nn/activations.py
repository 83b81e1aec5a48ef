"""Floor 4: ``torch.nn.functional``'s activations, each composed from the primitives in ``tinyattn.ops``.

Every function here is written from ``where``, ``exp``, ``log``, ``tanh``, ``sigmoid`` and arithmetic, so that its
gradient, JVP, batching rule and second derivative come from theirs. Where a branch that is not taken would
overflow (``exp`` of a large input), its input is first replaced by a harmless value (the "double where"), so that
no ``inf`` or ``NaN`` reaches the gradient of the branch that is taken. Names, arguments and defaults are PyTorch's;
``inplace=`` is accepted and ignored (the result is always a new tensor).

>>> import tinyattn as ta
>>> import tinyattn.nn.functional as F
>>> F.leaky_relu(ta.tensor([-1.0, 2.0]), 0.1)
tensor([-0.1,  2. ])
"""

import numpy as np

from .. import backend, ops
from ..engine import Tensor

__all__ = ["relu6", "leaky_relu", "elu", "celu", "selu", "silu", "mish", "hardswish", "hardsigmoid", "hardtanh",
           "hardshrink", "softshrink", "tanhshrink", "threshold", "logsigmoid", "softsign", "softplus", "glu",
           "prelu", "rrelu", "tanh", "sigmoid"]


def _non_positive(input):
    """``min(x, 0)``, for the inputs of ``exp`` in the negative branch (the positive branch never reads it)."""
    return ops.where(input > 0, 0.0, input)


def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):
    """``min_val`` below ``min_val``, ``max_val`` above ``max_val``, ``x`` between; the gradient passes strictly
    between the bounds, as in PyTorch.

    >>> import tinyattn as ta
    >>> hardtanh(ta.tensor([-2.0, 0.5, 3.0]))
    tensor([-1. ,  0.5,  1. ])
    """
    if min_val > max_val:
        raise ValueError(f"hardtanh: min_val ({min_val}) cannot be greater than max_val ({max_val})")
    return ops.where(input <= min_val, min_val, ops.where(input >= max_val, max_val, input))


def relu6(input, inplace=False):
    """``min(max(x, 0), 6)`` (``hardtanh(x, 0, 6)``).

    >>> import tinyattn as ta
    >>> relu6(ta.tensor([-1.0, 3.0, 8.0]))
    tensor([0., 3., 6.])
    """
    return hardtanh(input, 0.0, 6.0)


def leaky_relu(input, negative_slope=0.01, inplace=False):
    """``x`` where ``x > 0``, else ``negative_slope · x``.

    >>> import tinyattn as ta
    >>> leaky_relu(ta.tensor([-2.0, 2.0]), 0.5)
    tensor([-1.,  2.])
    """
    return ops.where(input > 0, input, input * negative_slope)


def elu(input, alpha=1.0, inplace=False):
    """``x`` where ``x > 0``, else ``alpha · (eˣ - 1)``.

    >>> import tinyattn as ta
    >>> [round(v, 4) for v in elu(ta.tensor([-1.0, 2.0])).tolist()]
    [-0.6321, 2.0]
    """
    return ops.where(input > 0, input, alpha * (_non_positive(input).exp() - 1))


def celu(input, alpha=1.0, inplace=False):
    """``max(0, x) + min(0, alpha · (e^(x/alpha) - 1))``.

    >>> import tinyattn as ta
    >>> [round(v, 4) for v in celu(ta.tensor([-1.0, 2.0]), alpha=2.0).tolist()]
    [-0.7869, 2.0]
    """
    if alpha == 0:
        raise ValueError("celu: alpha must not be 0 (it divides the input)")
    return ops.where(input > 0, input, alpha * ((_non_positive(input) / alpha).exp() - 1))


SELU_ALPHA = 1.6732632423543772848170429916717
SELU_SCALE = 1.0507009873554804934193349852946


def selu(input, inplace=False):
    """``scale · elu(x, alpha)`` with the self-normalising constants ``alpha ≈ 1.6733``, ``scale ≈ 1.0507``
    (Klambauer et al., 2017).

    >>> import tinyattn as ta
    >>> [round(v, 4) for v in selu(ta.tensor([-1.0, 1.0])).tolist()]
    [-1.1113, 1.0507]
    """
    return SELU_SCALE * elu(input, SELU_ALPHA)


def silu(input, inplace=False):
    """``x · σ(x)`` (swish).

    >>> import tinyattn as ta
    >>> [round(v, 4) for v in silu(ta.tensor([-1.0, 1.0])).tolist()]
    [-0.2689, 0.7311]
    """
    return input * input.sigmoid()


def softplus(input, beta=1.0, threshold=20.0):
    """``log(1 + e^(beta·x)) / beta``, and ``x`` itself where ``beta · x > threshold`` (where the two agree to
    float precision), as in PyTorch.

    >>> import tinyattn as ta
    >>> [round(v, 4) for v in softplus(ta.tensor([0.0, 30.0])).tolist()]
    [0.6931, 30.0]
    """
    scaled = input * beta
    linear = scaled > threshold
    safe = ops.where(linear, 0.0, scaled)  # the log branch never sees an input that overflows exp
    return ops.where(linear, input, (1 + safe.exp()).log() / beta)


def mish(input, inplace=False):
    """``x · tanh(softplus(x))`` (Misra, 2019).

    >>> import tinyattn as ta
    >>> [round(v, 4) for v in mish(ta.tensor([-1.0, 1.0])).tolist()]
    [-0.3034, 0.8651]
    """
    return input * softplus(input).tanh()


def hardsigmoid(input, inplace=False):
    """``relu6(x + 3) / 6``: 0 below -3, 1 above 3, linear between.

    >>> import tinyattn as ta
    >>> hardsigmoid(ta.tensor([-4.0, 0.0, 4.0]))
    tensor([0. , 0.5, 1. ])
    """
    return relu6(input + 3) / 6


def hardswish(input, inplace=False):
    """``x · relu6(x + 3) / 6`` (Howard et al., 2019).

    >>> import tinyattn as ta
    >>> hardswish(ta.tensor([-4.0, 1.0, 4.0])).tolist()
    [-0.0, 0.6666666865348816, 4.0]
    """
    return input * hardsigmoid(input)


def hardshrink(input, lambd=0.5):
    """``x`` where ``|x| > lambd``, else 0.

    >>> import tinyattn as ta
    >>> hardshrink(ta.tensor([-1.0, 0.2, 1.0]))
    tensor([-1.,  0.,  1.])
    """
    return ops.where((input > lambd) | (input < -lambd), input, 0.0)


def softshrink(input, lambd=0.5):
    """``x - lambd`` above ``lambd``, ``x + lambd`` below ``-lambd``, 0 between.

    >>> import tinyattn as ta
    >>> softshrink(ta.tensor([-1.0, 0.2, 1.0]))
    tensor([-0.5,  0. ,  0.5])
    """
    if lambd < 0:
        raise ValueError(f"softshrink: lambd must be at least 0, got {lambd}")
    return ops.where(input > lambd, input - lambd, ops.where(input < -lambd, input + lambd, 0.0))


def tanhshrink(input):
    """``x - tanh(x)``.

    >>> import tinyattn as ta
    >>> [round(v, 4) for v in tanhshrink(ta.tensor([1.0])).tolist()]
    [0.2384]
    """
    return input - input.tanh()


def threshold(input, threshold, value, inplace=False):
    """``x`` where ``x > threshold``, else ``value``.

    >>> import tinyattn as ta
    >>> threshold(ta.tensor([-1.0, 2.0]), 0.5, 9.0)
    tensor([9., 2.])
    """
    return ops.where(input > threshold, input, value)


def logsigmoid(input):
    """``log σ(x)``: ``-log(1 + e^(-x))`` for ``x > 0`` and ``x - log(1 + e^x)`` otherwise, so that ``e`` is only
    ever raised to a power ``≤ 0``: finite for any finite ``x`` (and the gradient at 0 is ½, as in PyTorch).

    >>> import tinyattn as ta
    >>> [round(v, 4) for v in logsigmoid(ta.tensor([-1000.0, 0.0])).tolist()]
    [-1000.0, -0.6931]
    """
    negative = _non_positive(input)
    positive = ops.where(input > 0, input, 0.0)
    return ops.where(input > 0, -(1 + (-positive).exp()).log(), negative - (1 + negative.exp()).log())


def softsign(input):
    """``x / (1 + |x|)``.

    >>> import tinyattn as ta
    >>> softsign(ta.tensor([-1.0, 3.0]))
    tensor([-0.5 ,  0.75])
    """
    return input / (1 + input.abs())


def tanh(input):
    """``tanh(x)`` (``torch.nn.functional.tanh``).

    >>> import tinyattn as ta
    >>> tanh(ta.tensor([0.0]))
    tensor([0.])
    """
    return ops.tanh(input)


def sigmoid(input):
    """``σ(x) = 1 / (1 + e^(-x))`` (``torch.nn.functional.sigmoid``).

    >>> import tinyattn as ta
    >>> sigmoid(ta.tensor([0.0]))
    tensor([0.5])
    """
    return ops.sigmoid(input)


def glu(input, dim=-1):
    """Gated linear unit: the input split in halves ``a, b`` along ``dim``, then ``a · σ(b)`` (Dauphin et al., 2017).

    >>> import tinyattn as ta
    >>> glu(ta.tensor([[2.0, 0.0]]))
    tensor([[1.]])
    """
    if input.ndim == 0:
        raise RuntimeError("glu does not support scalars because halving size must be even")
    dim = dim + input.ndim if dim < 0 else dim
    size = input.shape[dim]
    if size % 2:
        raise RuntimeError(f"Halving dimension must be even, but dimension {dim} is size {size}")
    a, b = ops.split(input, size // 2, dim)
    return a * b.sigmoid()


def prelu(input, weight):
    """``x`` where ``x > 0``, else ``weight · x``; ``weight``: one slope, or one per channel (dimension 1).

    >>> import tinyattn as ta
    >>> prelu(ta.tensor([[-2.0, -2.0]]), ta.tensor([0.5, 0.25]))
    tensor([[-1. , -0.5]])
    """
    if not isinstance(weight, Tensor):
        raise TypeError(f"prelu: weight must be a tensor, got {type(weight).__name__}")
    count = int(np.prod(weight.shape))
    if count != 1:
        channels = input.shape[1] if input.ndim >= 2 else (input.shape[0] if input.ndim == 1 else 1)
        if weight.ndim != 1 or count != channels:
            raise RuntimeError(
                f"prelu: the weight has {count} slopes (shape {weight.shape}); expected 1 or one per channel "
                f"({channels}, dimension 1 of input {input.shape})"
            )
        if input.ndim >= 2:
            weight = weight.reshape(count, *([1] * (input.ndim - 2)))  # (C, 1, …): over dimension 1
    elif weight.ndim > input.ndim:
        weight = weight.reshape(())
    return ops.where(input > 0, input, weight * input)


def rrelu(input, lower=1.0 / 8, upper=1.0 / 3, training=False, inplace=False):
    """Randomized leaky ReLU (Xu et al., 2015): ``x`` where ``x ≥ 0``, else ``a · x``. While ``training``, each
    element draws its own slope ``a ~ U(lower, upper)`` from the library's generator; otherwise
    ``a = (lower + upper) / 2``.

    >>> import tinyattn as ta
    >>> rrelu(ta.tensor([-3.0, 2.0]), 0.25, 0.75)
    tensor([-1.5,  2. ])
    """
    if not 0 <= lower <= upper:
        raise ValueError(f"rrelu: expected 0 <= lower <= upper, got lower={lower}, upper={upper}")
    if not training:
        return leaky_relu(input, (lower + upper) / 2)
    uniform = backend.random_uniform(input._data.shape, input.dtype, input.device)  # over the array as it lies
    slope = Tensor._wrap(lower + (upper - lower) * uniform, input)  # (…): one slope per element
    return ops.where(input >= 0, input, slope * input)
