"""``torch.autograd``: PyTorch-style custom operations (``Function``, with a ``ctx``), the native ones, and
the old ``Variable`` wrapper that scripts written before torch 0.4 still call."""

from ..autograd import Function, FunctionCtx

__all__ = ["Function", "FunctionCtx", "Variable"]


def Variable(data, requires_grad=False, volatile=False):
    """``Variable(t)``: the tensor itself, as in torch since 0.4 (``requires_grad=True`` sets it on ``t``;
    ``volatile`` has no effect there either: use ``torch.no_grad()``)."""
    if requires_grad:
        data.requires_grad_(True)
    return data


def __getattr__(name):
    raise AttributeError(f"tinyattn.compat.autograd has no `{name}` yet")
