"""``torch.autograd.variable``: ``Variable``, the wrapper older scripts import from here."""

from . import Variable  # noqa: F401

__all__ = ["Variable"]
