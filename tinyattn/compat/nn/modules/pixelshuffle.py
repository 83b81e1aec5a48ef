"""``torch.nn.modules.pixelshuffle``: the pixel shuffles, the classes of ``compat.nn`` at PyTorch's path."""

from .. import PixelShuffle, PixelUnshuffle  # noqa: F401

__all__ = ["PixelShuffle", "PixelUnshuffle"]


def __getattr__(name):
    raise AttributeError(f"tinyattn.compat.nn.modules.pixelshuffle has no `{name}` yet")
