"""Floor 5: modules that rearrange without arithmetic: ``Unflatten``, ``PixelShuffle``, ``PixelUnshuffle``,
``ChannelShuffle`` (``nn.shuffles``' functions), with PyTorch's arguments and ``repr``.

>>> import tinyattn as ta
>>> from tinyattn import nn
>>> nn.Sequential(nn.Flatten(), nn.Unflatten(1, (2, 6)))(ta.zeros(4, 3, 4)).shape
(4, 2, 6)
"""

from . import functional as F
from .module import Module


class Unflatten(Module):
    """Dimension ``dim`` split into ``unflattened_size`` (``Flatten``'s inverse).

    >>> import tinyattn as ta
    >>> Unflatten(-1, (2, 3))(ta.zeros(5, 6)).shape
    (5, 2, 3)
    """

    def __init__(self, dim, unflattened_size):
        super().__init__()
        if not isinstance(dim, int) or isinstance(dim, bool):
            raise TypeError(f"Unflatten: dim must be an int, got {type(dim).__name__}")
        if not isinstance(unflattened_size, (tuple, list)):
            raise TypeError(f"Unflatten: unflattened_size must be a tuple or list of ints, got "
                            f"{type(unflattened_size).__name__}")
        self.dim, self.unflattened_size = dim, unflattened_size

    def forward(self, input):
        return input.unflatten(self.dim, tuple(self.unflattened_size))

    def extra_repr(self):
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"


class PixelShuffle(Module):
    """``(*, C·r², H, W) -> (*, C, H·r, W·r)`` with ``r = upscale_factor`` (``F.pixel_shuffle``).

    >>> import tinyattn as ta
    >>> PixelShuffle(3)(ta.zeros(1, 9, 4, 4)).shape
    (1, 1, 12, 12)
    """

    def __init__(self, upscale_factor):
        super().__init__()
        self.upscale_factor = upscale_factor

    def forward(self, input):
        return F.pixel_shuffle(input, self.upscale_factor)

    def extra_repr(self):
        return f"upscale_factor={self.upscale_factor}"


class PixelUnshuffle(Module):
    """``(*, C, H·r, W·r) -> (*, C·r², H, W)`` with ``r = downscale_factor`` (``F.pixel_unshuffle``).

    >>> import tinyattn as ta
    >>> PixelUnshuffle(3)(ta.zeros(1, 1, 12, 12)).shape
    (1, 9, 4, 4)
    """

    def __init__(self, downscale_factor):
        super().__init__()
        self.downscale_factor = downscale_factor

    def forward(self, input):
        return F.pixel_unshuffle(input, self.downscale_factor)

    def extra_repr(self):
        return f"downscale_factor={self.downscale_factor}"


class ChannelShuffle(Module):
    """The channels of ``(N, C, *)`` in ``groups`` groups, interleaved (``F.channel_shuffle``).

    >>> import tinyattn as ta
    >>> ChannelShuffle(2)(ta.arange(4.0).reshape(1, 4, 1)).reshape(4)
    tensor([0., 2., 1., 3.])
    """

    def __init__(self, groups):
        super().__init__()
        self.groups = groups

    def forward(self, input):
        return F.channel_shuffle(input, self.groups)

    def extra_repr(self):
        return f"groups={self.groups}"
