"""``torch.nn.modules.normalization``: the normalisation layers, the classes of ``compat.nn`` at PyTorch's path."""

from ...scope import missing
from .. import GroupNorm, LayerNorm, LocalResponseNorm, RMSNorm  # noqa: F401

__all__ = ["GroupNorm", "LayerNorm", "LocalResponseNorm", "RMSNorm"]


def __getattr__(name):
    raise missing(__name__, name)
