"""``torch.nn.modules.fold``: folding and unfolding, the classes of ``compat.nn`` at PyTorch's path."""

from ...scope import missing
from .. import Fold, Unfold  # noqa: F401

__all__ = ["Fold", "Unfold"]


def __getattr__(name):
    raise missing(__name__, name)
