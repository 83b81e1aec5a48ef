"""Floor 4: dropout beyond ``F.dropout``: whole channels at once (``dropout1d``, ``dropout2d``, ``dropout3d``)
and the self-normalising alpha dropout (``alpha_dropout``, ``feature_alpha_dropout``).

Each draws a keep-mask ``keep ~ Bernoulli(1 - p)`` from the library's generator and multiplies, so its gradient is
the mask's. The *feature* forms draw one value per channel, ``(N, C, 1, …)``, and broadcast it over the positions
(Tompson et al., 2015). Alpha dropout (Klambauer et al., 2017) sets the dropped values to SELU's negative
saturation ``-α'`` (``α' = λα ≈ 1.7581``) and then ``a · x + b`` restores zero mean and unit variance:
``a = ((1 - p)(1 + p α'²))^(-1/2)``, ``b = a α' p``.

>>> import tinyattn as ta
>>> import tinyattn.nn.functional as F
>>> F.dropout2d(ta.ones(1, 2, 3), p=0.5, training=False)
tensor([[[1., 1., 1.],
         [1., 1., 1.]]])
"""

import math
import numbers

from .. import backend
from ..engine import Tensor

__all__ = ["dropout1d", "dropout2d", "dropout3d", "alpha_dropout", "feature_alpha_dropout"]

SELU_SATURATION = 1.0507009873554804934193349852946 * 1.6732632423543772848170429916717  # α' = λα


def _keep_mask(input, p, feature):
    """``keep``: 1 with probability ``1 - p``, else 0, in the input's dtype; ``(N, C, 1, …)`` with ``feature``
    (one draw per channel of ``input (N, C, …)``), else the input's shape."""
    shape = tuple(input.shape[:2]) + (1,) * (input.ndim - 2) if feature else tuple(input.shape)
    uniform = backend.random_uniform(shape, input.dtype, input.device)
    return Tensor._wrap((uniform >= p).astype(input.dtype))


def _checked_p(name, p):
    if not isinstance(p, numbers.Real) or not 0 <= p <= 1:
        raise ValueError(f"{name}: dropout probability has to be between 0 and 1, but got {p!r}")
    return float(p)


def _dropout(input, p, training, feature, alpha, name):
    """The common body: identity when not training, ``p == 0`` or the input is empty; the masked input otherwise."""
    p = _checked_p(name, p)
    if not training or p == 0 or input._data.size == 0:
        return input
    if p == 1:
        return input * 0.0
    keep = _keep_mask(input, p, feature)
    if not alpha:
        return input * (keep / (1 - p))  # inverted dropout: the kept values scaled by 1 / (1 - p)
    a = 1 / math.sqrt((SELU_SATURATION ** 2 * p + 1) * (1 - p))
    return input * (keep * a) + ((keep - 1) * (SELU_SATURATION * a) + SELU_SATURATION * a * p)  # a·x+b, a·(-α')+b


def _feature_dropout(input, p, training, batched_ndim, alpha, name):
    """``_dropout`` over whole channels of ``input`` ``(N, C, …)`` with ``batched_ndim`` dimensions, or
    ``(C, …)`` with one fewer (unbatched: one batch added and taken away again)."""
    if input.ndim not in (batched_ndim - 1, batched_ndim):
        raise RuntimeError(f"{name}: Expected {batched_ndim - 1}D or {batched_ndim}D input, but received a "
                           f"{input.ndim}D input")
    if input.ndim == batched_ndim - 1:
        return _dropout(input.unsqueeze(0), p, training, True, alpha, name).squeeze(0)
    return _dropout(input, p, training, True, alpha, name)


def dropout1d(input, p=0.5, training=True, inplace=False):
    """Zeroes whole channels of ``input`` ``(N, C, L)`` or ``(C, L)``, each with probability ``p``, and scales
    the rest by ``1 / (1 - p)``; the identity when not ``training``.

    >>> import tinyattn as ta
    >>> dropout1d(ta.ones(2, 3), p=1.0)
    tensor([[0., 0., 0.],
            [0., 0., 0.]])
    """
    return _feature_dropout(input, p, training, 3, False, "dropout1d")


def dropout2d(input, p=0.5, training=True, inplace=False):
    """Zeroes whole channels of ``input`` ``(N, C, H, W)`` (or ``(N, C, L)``, as PyTorch reads a 3-d input), each
    with probability ``p``, and scales the rest by ``1 / (1 - p)``; the identity when not ``training``.

    >>> import tinyattn as ta
    >>> dropout2d(ta.ones(1, 2, 1, 1), p=0.0)
    tensor([[[[1.]],
    <BLANKLINE>
             [[1.]]]])
    """
    if input.ndim < 2:
        raise RuntimeError(f"dropout2d: Expected a 3D or 4D input (N, C, H, W), but received a {input.ndim}D input")
    return _dropout(input, p, training, True, False, "dropout2d")


def dropout3d(input, p=0.5, training=True, inplace=False):
    """Zeroes whole channels of ``input`` ``(N, C, D, H, W)`` or ``(C, D, H, W)``, each with probability ``p``,
    and scales the rest by ``1 / (1 - p)``; the identity when not ``training``.

    >>> import tinyattn as ta
    >>> dropout3d(ta.ones(1, 1, 1, 2), training=False)
    tensor([[[[1., 1.]]]])
    """
    return _feature_dropout(input, p, training, 5, False, "dropout3d")


def alpha_dropout(input, p=0.5, training=False, inplace=False):
    """Alpha dropout: each element dropped with probability ``p`` to SELU's saturation ``-α'``, then ``a · x + b``
    so that a zero-mean, unit-variance input keeps its mean and variance; the identity when not ``training``.

    >>> import tinyattn as ta
    >>> alpha_dropout(ta.zeros(3), p=0.5, training=False)
    tensor([0., 0., 0.])
    """
    return _dropout(input, p, training, False, True, "alpha_dropout")


def feature_alpha_dropout(input, p=0.5, training=False, inplace=False):
    """Alpha dropout of whole channels of ``input`` ``(N, C, …)``: one draw per channel, as ``dropout2d``.

    >>> import tinyattn as ta
    >>> feature_alpha_dropout(ta.ones(1, 2), p=0.5)
    tensor([[1., 1.]])
    """
    if input.ndim < 2:
        raise RuntimeError(f"feature_alpha_dropout: expected an input (N, C, …) of 2 or more dimensions, got "
                           f"{input.ndim}D")
    return _dropout(input, p, training, True, True, "feature_alpha_dropout")
