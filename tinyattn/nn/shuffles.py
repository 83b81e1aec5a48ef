"""Floor 4: rearrangements of channels and positions (``pixel_shuffle``, ``pixel_unshuffle``,
``channel_shuffle``), each one ``reshape``, one ``permute`` and one ``reshape``: no arithmetic, so the gradient
is the inverse rearrangement.

>>> import tinyattn as ta
>>> import tinyattn.nn.functional as F
>>> F.pixel_shuffle(ta.arange(4.0).reshape(1, 4, 1, 1), 2)
tensor([[[[0., 1.],
          [2., 3.]]]])
"""

__all__ = ["pixel_shuffle", "pixel_unshuffle", "channel_shuffle"]


def _positive(name, argument, value):
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise ValueError(f"{name}: {argument} must be a positive integer, got {value!r}")
    return value


def pixel_shuffle(input, upscale_factor):
    """``(*, C·r², H, W) -> (*, C, H·r, W·r)``: each channel's ``r²`` sub-pixels laid out as an ``r × r``
    block (Shi et al., 2016).

    >>> import tinyattn as ta
    >>> pixel_shuffle(ta.zeros(2, 8, 3, 3), 2).shape
    (2, 2, 6, 6)
    """
    r = _positive("pixel_shuffle", "upscale_factor", upscale_factor)
    if input.ndim < 3 or input.shape[-3] % (r * r):
        raise RuntimeError(f"pixel_shuffle expects its input's channel dimension (-3) to be divisible by the square "
                           f"of upscale_factor ({r * r}), but input.shape = {input.shape}")
    *batch, channels, height, width = input.shape
    c = channels // (r * r)
    x = input.reshape(*batch, c, r, r, height, width)  # (*, C, r, r, H, W)
    n = len(batch)
    x = x.permute(*range(n), n, n + 3, n + 1, n + 4, n + 2)  # (*, C, H, r, W, r)
    return x.reshape(*batch, c, height * r, width * r)  # (*, C, H·r, W·r)


def pixel_unshuffle(input, downscale_factor):
    """``(*, C, H·r, W·r) -> (*, C·r², H, W)``: ``pixel_shuffle``'s inverse.

    >>> import tinyattn as ta
    >>> pixel_unshuffle(ta.zeros(2, 2, 6, 6), 2).shape
    (2, 8, 3, 3)
    """
    r = _positive("pixel_unshuffle", "downscale_factor", downscale_factor)
    if input.ndim < 3 or input.shape[-2] % r or input.shape[-1] % r:
        raise RuntimeError(f"pixel_unshuffle expects its input's height and width to be divisible by "
                           f"downscale_factor ({r}), but input.shape = {input.shape}")
    *batch, channels, height, width = input.shape
    x = input.reshape(*batch, channels, height // r, r, width // r, r)  # (*, C, H, r, W, r)
    n = len(batch)
    x = x.permute(*range(n), n, n + 2, n + 4, n + 1, n + 3)  # (*, C, r, r, H, W)
    return x.reshape(*batch, channels * r * r, height // r, width // r)  # (*, C·r², H, W)


def channel_shuffle(input, groups):
    """``(N, C, *)``'s channels (``*``: at least one dimension), seen as ``groups`` rows of ``C / groups``, read
    column by column (ShuffleNet, Zhang et al., 2018): ``(N, g, C/g, *) -> (N, C/g, g, *) -> (N, C, *)``.

    >>> import tinyattn as ta
    >>> channel_shuffle(ta.arange(4.0).reshape(1, 4, 1), 2).reshape(4)
    tensor([0., 2., 1., 3.])
    """
    g = _positive("channel_shuffle", "groups", groups)
    if input.ndim < 3:
        raise RuntimeError(f"channel_shuffle expects input with > 2 dims, but got input of shape {input.shape}")
    if input.shape[1] % g:
        raise RuntimeError(f"channel_shuffle: the number of channels (dimension 1 of input {input.shape}) must be "
                           f"divisible by groups ({g})")
    n, channels, *rest = input.shape
    x = input.reshape(n, g, channels // g, *rest).transpose(1, 2)  # (N, C/g, g, *)
    return x.reshape(n, channels, *rest)

