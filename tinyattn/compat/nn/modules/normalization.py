"""``torch.nn.modules.normalization``: the normalisation layers, the classes of ``compat.nn`` at PyTorch's path."""

from .. import GroupNorm, LayerNorm, LocalResponseNorm, RMSNorm  # noqa: F401

__all__ = ["GroupNorm", "LayerNorm", "LocalResponseNorm", "RMSNorm"]


def __getattr__(name):
    raise AttributeError(f"tinyattn.compat.nn.modules.normalization has no `{name}` yet")
