"""``torch.autograd``: PyTorch-style custom operations (``Function``, with a ``ctx``), the native ones."""

from ..autograd import Function, FunctionCtx

__all__ = ["Function", "FunctionCtx"]


def __getattr__(name):
    raise AttributeError(f"tinyattn.compat.autograd has no `{name}` yet")
