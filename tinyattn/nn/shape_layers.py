"""Floor 5: modules that reshape or resize: ``Unflatten``, ``PixelShuffle``, ``PixelUnshuffle``, ``ChannelShuffle``
(``nn.shuffles``' functions, no arithmetic) and ``Upsample`` with its two fixed-mode forms (``nn.interpolation``),
with PyTorch's arguments and ``repr``.

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


class Upsample(Module):
    """The spatial dimensions of ``(N, C, …)`` resized to ``size`` or by ``scale_factor`` (``F.interpolate``, in
    ``mode`` ``"nearest"``, ``"nearest-exact"``, ``"linear"``, ``"bilinear"``, ``"bicubic"`` or ``"trilinear"``).

    >>> import tinyattn as ta
    >>> Upsample(scale_factor=2, mode="bilinear")
    Upsample(scale_factor=2.0, mode='bilinear')
    >>> Upsample(scale_factor=2)(ta.zeros(1, 3, 4, 5)).shape
    (1, 3, 8, 10)
    """

    def __init__(self, size=None, scale_factor=None, mode="nearest", align_corners=None, recompute_scale_factor=None):
        super().__init__()
        self.name = type(self).__name__
        self.size = size
        if isinstance(scale_factor, tuple):
            self.scale_factor = tuple(float(factor) for factor in scale_factor)
        else:
            self.scale_factor = float(scale_factor) if scale_factor else None
        self.mode, self.align_corners, self.recompute_scale_factor = mode, align_corners, recompute_scale_factor

    def forward(self, input):
        return F.interpolate(input, self.size, self.scale_factor, self.mode, self.align_corners,
                             recompute_scale_factor=self.recompute_scale_factor)

    def extra_repr(self):
        info = f"scale_factor={self.scale_factor!r}" if self.scale_factor is not None else f"size={self.size!r}"
        return info + f", mode={self.mode!r}"


class UpsamplingNearest2d(Upsample):
    """``Upsample(size, scale_factor, mode="nearest")`` of ``(N, C, H, W)``.

    >>> import tinyattn as ta
    >>> UpsamplingNearest2d(scale_factor=2)(ta.ones(1, 1, 1, 1))
    tensor([[[[1., 1.],
              [1., 1.]]]])
    """

    def __init__(self, size=None, scale_factor=None):
        super().__init__(size, scale_factor, mode="nearest")


class UpsamplingBilinear2d(Upsample):
    """``Upsample(size, scale_factor, mode="bilinear", align_corners=True)`` of ``(N, C, H, W)``.

    >>> import tinyattn as ta
    >>> UpsamplingBilinear2d(size=(1, 3))(ta.tensor([[[[0.0, 2.0]]]]))
    tensor([[[[0., 1., 2.]]]])
    """

    def __init__(self, size=None, scale_factor=None):
        super().__init__(size, scale_factor, mode="bilinear", align_corners=True)
