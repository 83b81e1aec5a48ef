"""``torch.nn.modules.linear``: the linear layers, the classes of ``compat.nn`` at PyTorch's path."""

from ...scope import missing
from .. import Bilinear, Identity, LazyLinear, Linear  # noqa: F401

__all__ = ["Bilinear", "Identity", "LazyLinear", "Linear"]


def __getattr__(name):
    raise missing(__name__, name)
