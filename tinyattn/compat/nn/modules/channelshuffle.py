"""``torch.nn.modules.channelshuffle``: the channel shuffle, the classes of ``compat.nn`` at PyTorch's path."""

from .. import ChannelShuffle  # noqa: F401

__all__ = ["ChannelShuffle"]


def __getattr__(name):
    raise AttributeError(f"tinyattn.compat.nn.modules.channelshuffle has no `{name}` yet")
