"""``torch.nn.modules.pixelshuffle``: the pixel shuffles, the classes of ``compat.nn`` at PyTorch's path."""

from ...scope import missing
from .. import PixelShuffle, PixelUnshuffle  # noqa: F401

__all__ = ["PixelShuffle", "PixelUnshuffle"]


def __getattr__(name):
    raise missing(__name__, name)
