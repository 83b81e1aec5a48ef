"""``torch.autograd.variable``: ``Variable``, the wrapper older scripts import from here."""

__all__ = ["Variable"]


def Variable(data, requires_grad=False, volatile=False):
    """``Variable(t)``: the tensor itself, as in torch since 0.4 (``requires_grad=True`` sets it on ``t``;
    ``volatile`` has no effect there either: use ``torch.no_grad()``)."""
    if requires_grad:
        data.requires_grad_(True)
    return data
