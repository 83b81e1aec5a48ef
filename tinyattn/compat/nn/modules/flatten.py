"""``torch.nn.modules.flatten``: flattening and unflattening, the classes of ``compat.nn`` at PyTorch's path."""

from ...scope import missing
from .. import Flatten, Unflatten  # noqa: F401

__all__ = ["Flatten", "Unflatten"]


def __getattr__(name):
    raise missing(__name__, name)
