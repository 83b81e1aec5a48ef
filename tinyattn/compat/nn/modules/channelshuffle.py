"""``torch.nn.modules.channelshuffle``: the channel shuffle, the classes of ``compat.nn`` at PyTorch's path."""

from ...scope import missing
from .. import ChannelShuffle  # noqa: F401

__all__ = ["ChannelShuffle"]


def __getattr__(name):
    raise missing(__name__, name)
