"""``torch.nn.modules.module``: the base class, the classes of ``compat.nn`` at PyTorch's path."""

from .. import Module  # noqa: F401

__all__ = ["Module"]


def __getattr__(name):
    raise AttributeError(f"tinyattn.compat.nn.modules.module has no `{name}` yet")
