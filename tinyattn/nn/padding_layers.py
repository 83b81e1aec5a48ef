"""Floor 5: the padding modules, each ``F.pad`` in one mode over the last 1, 2 or 3 dimensions, with PyTorch's
names, arguments and ``repr``.

``padding``: one int for every side, or ``(left, right)``, ``(left, right, top, bottom)``,
``(left, right, top, bottom, front, back)``; a negative amount crops. Inputs are ``(N, C, …)`` or unbatched
``(C, …)``.

>>> import tinyattn as ta
>>> from tinyattn import nn
>>> nn.ReflectionPad1d((2, 1))(ta.tensor([[1.0, 2.0, 3.0]]))
tensor([[3., 2., 1., 2., 3., 2.]])
"""

import numbers

from . import functional as F
from .module import Module


class _PadNd(Module):
    """``F.pad(input, padding, mode)`` over the last ``ndim`` dimensions of an ``(N, C, …)`` or ``(C, …)`` input."""

    ndim = None
    mode = None

    def __init__(self, padding):
        super().__init__()
        if isinstance(padding, numbers.Integral):
            padding = (int(padding),) * (2 * self.ndim)
        padding = tuple(padding)
        if len(padding) != 2 * self.ndim:
            raise ValueError(f"{type(self).__name__}: padding must be an int or a tuple of {2 * self.ndim} ints, got "
                             f"{padding}")
        self.padding = padding

    def forward(self, input):
        if input.ndim not in (self.ndim + 1, self.ndim + 2):
            raise ValueError(f"{type(self).__name__}: expected {self.ndim + 1}D or {self.ndim + 2}D input, got "
                             f"{input.ndim}D input of shape {input.shape}")
        return F.pad(input, self.padding, self.mode, getattr(self, "value", None))

    def extra_repr(self):
        return f"{self.padding}"


class _ConstantPadNd(_PadNd):
    mode = "constant"

    def __init__(self, padding, value):
        super().__init__(padding)
        self.value = value

    def extra_repr(self):
        return f"padding={self.padding}, value={self.value}"


class ConstantPad1d(_ConstantPadNd):
    """Pads the last dimension with ``value``.

    >>> import tinyattn as ta
    >>> ConstantPad1d((1, 0), 9.0)(ta.tensor([[1.0]]))
    tensor([[9., 1.]])
    """

    ndim = 1


class ConstantPad2d(_ConstantPadNd):
    """Pads the last two dimensions with ``value``.

    >>> import tinyattn as ta
    >>> ConstantPad2d(1, 0.0)(ta.ones(1, 1, 1)).shape
    (1, 3, 3)
    """

    ndim = 2


class ConstantPad3d(_ConstantPadNd):
    """Pads the last three dimensions with ``value``.

    >>> import tinyattn as ta
    >>> ConstantPad3d(1, 0.0)(ta.ones(1, 1, 1, 1)).shape
    (1, 3, 3, 3)
    """

    ndim = 3


class _ZeroPadNd(_ConstantPadNd):
    def __init__(self, padding):
        super().__init__(padding, 0.0)

    def extra_repr(self):
        return f"{self.padding}"


class ZeroPad1d(_ZeroPadNd):
    """Pads the last dimension with zeros.

    >>> import tinyattn as ta
    >>> ZeroPad1d(1)(ta.tensor([[1.0]]))
    tensor([[0., 1., 0.]])
    """

    ndim = 1


class ZeroPad2d(_ZeroPadNd):
    """Pads the last two dimensions with zeros.

    >>> import tinyattn as ta
    >>> ZeroPad2d((1, 0, 0, 1))(ta.ones(1, 1, 1))
    tensor([[[0., 1.],
             [0., 0.]]])
    """

    ndim = 2


class ZeroPad3d(_ZeroPadNd):
    """Pads the last three dimensions with zeros.

    >>> import tinyattn as ta
    >>> ZeroPad3d(1)(ta.ones(1, 1, 1, 1)).shape
    (1, 3, 3, 3)
    """

    ndim = 3


class ReflectionPad1d(_PadNd):
    """Pads the last dimension with its mirror image about the edge (the edge not repeated).

    >>> import tinyattn as ta
    >>> ReflectionPad1d(1)(ta.tensor([[1.0, 2.0]]))
    tensor([[2., 1., 2., 1.]])
    """

    ndim, mode = 1, "reflect"


class ReflectionPad2d(_PadNd):
    """Pads the last two dimensions with their mirror image about the edges.

    >>> import tinyattn as ta
    >>> ReflectionPad2d(1)(ta.ones(1, 2, 2)).shape
    (1, 4, 4)
    """

    ndim, mode = 2, "reflect"


class ReflectionPad3d(_PadNd):
    """Pads the last three dimensions with their mirror image about the edges.

    >>> import tinyattn as ta
    >>> ReflectionPad3d(1)(ta.ones(1, 2, 2, 2)).shape
    (1, 4, 4, 4)
    """

    ndim, mode = 3, "reflect"


class ReplicationPad1d(_PadNd):
    """Pads the last dimension by repeating its edge values.

    >>> import tinyattn as ta
    >>> ReplicationPad1d((2, 0))(ta.tensor([[1.0, 2.0]]))
    tensor([[1., 1., 1., 2.]])
    """

    ndim, mode = 1, "replicate"


class ReplicationPad2d(_PadNd):
    """Pads the last two dimensions by repeating their edge values.

    >>> import tinyattn as ta
    >>> ReplicationPad2d(1)(ta.ones(1, 1, 1)).shape
    (1, 3, 3)
    """

    ndim, mode = 2, "replicate"


class ReplicationPad3d(_PadNd):
    """Pads the last three dimensions by repeating their edge values.

    >>> import tinyattn as ta
    >>> ReplicationPad3d(1)(ta.ones(1, 1, 1, 1)).shape
    (1, 3, 3, 3)
    """

    ndim, mode = 3, "replicate"


class CircularPad1d(_PadNd):
    """Pads the last dimension by wrapping around.

    >>> import tinyattn as ta
    >>> CircularPad1d(1)(ta.tensor([[1.0, 2.0, 3.0]]))
    tensor([[3., 1., 2., 3., 1.]])
    """

    ndim, mode = 1, "circular"


class CircularPad2d(_PadNd):
    """Pads the last two dimensions by wrapping around.

    >>> import tinyattn as ta
    >>> CircularPad2d(1)(ta.ones(1, 2, 2)).shape
    (1, 4, 4)
    """

    ndim, mode = 2, "circular"


class CircularPad3d(_PadNd):
    """Pads the last three dimensions by wrapping around.

    >>> import tinyattn as ta
    >>> CircularPad3d(1)(ta.ones(1, 2, 2, 2)).shape
    (1, 4, 4, 4)
    """

    ndim, mode = 3, "circular"
