"""Floor 5: dropout beyond ``Dropout`` as modules (``nn.dropouts``' functions): whole channels at once
(``Dropout1d/2d/3d``) and alpha dropout (``AlphaDropout``, ``FeatureAlphaDropout``), each the identity after
``eval()``. ``inplace=`` is accepted and shown; the result is always a new tensor.

>>> import tinyattn as ta
>>> from tinyattn import nn
>>> nn.Dropout2d(0.2)
Dropout2d(p=0.2, inplace=False)
"""

import numbers

from . import functional as F
from .module import Module


class _DropoutNd(Module):
    """A dropout module: ``p``, ``inplace`` and ``function(input, p, training)``."""

    function = None

    def __init__(self, p=0.5, inplace=False):
        super().__init__()
        if not isinstance(p, numbers.Real) or not 0 <= p <= 1:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p!r}")
        self.p, self.inplace = p, inplace

    def forward(self, input):
        return type(self).function(input, self.p, self.training)

    def extra_repr(self):
        return f"p={self.p}, inplace={self.inplace}"


class Dropout1d(_DropoutNd):
    """Zeroes whole channels of ``(N, C, L)`` or ``(C, L)`` with probability ``p`` while training
    (``F.dropout1d``).

    >>> import tinyattn as ta
    >>> Dropout1d(1.0)(ta.ones(1, 2, 2))
    tensor([[[0., 0.],
             [0., 0.]]])
    """

    function = F.dropout1d


class Dropout2d(_DropoutNd):
    """Zeroes whole channels of ``(N, C, H, W)`` with probability ``p`` while training (``F.dropout2d``).

    >>> import tinyattn as ta
    >>> Dropout2d().eval()(ta.ones(1, 1, 1, 2))
    tensor([[[[1., 1.]]]])
    """

    function = F.dropout2d


class Dropout3d(_DropoutNd):
    """Zeroes whole channels of ``(N, C, D, H, W)`` or ``(C, D, H, W)`` with probability ``p`` while training
    (``F.dropout3d``).

    >>> import tinyattn as ta
    >>> Dropout3d().eval()(ta.ones(1, 1, 1, 2))
    tensor([[[[1., 1.]]]])
    """

    function = F.dropout3d


class AlphaDropout(_DropoutNd):
    """Alpha dropout while training, for SELU networks: keeps a zero-mean, unit-variance input so
    (``F.alpha_dropout``).

    >>> import tinyattn as ta
    >>> AlphaDropout(0.5).eval()(ta.tensor([1.0, -1.0]))
    tensor([ 1., -1.])
    """

    function = F.alpha_dropout


class FeatureAlphaDropout(_DropoutNd):
    """Alpha dropout of whole channels of ``(N, C, …)`` while training (``F.feature_alpha_dropout``).

    >>> import tinyattn as ta
    >>> FeatureAlphaDropout(0.5).eval()(ta.ones(1, 2))
    tensor([[1., 1.]])
    """

    function = F.feature_alpha_dropout
