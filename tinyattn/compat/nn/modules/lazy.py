"""``torch.nn.modules.lazy``: the lazy modules' mixin (none yet), the classes of ``compat.nn`` at PyTorch's path."""

from ...scope import missing

__all__ = []


def __getattr__(name):
    raise missing(__name__, name)
