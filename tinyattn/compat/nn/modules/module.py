"""``torch.nn.modules.module``: the base class, the classes of ``compat.nn`` at PyTorch's path."""

from ...scope import missing
from .. import Module  # noqa: F401

__all__ = ["Module"]


def __getattr__(name):
    raise missing(__name__, name)
