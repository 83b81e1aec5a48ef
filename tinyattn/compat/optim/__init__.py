"""``torch.optim``: the native optimizers, which already follow PyTorch (parameter groups, subclassable)."""

from ...optim import SGD, Adam, AdamW, Optimizer
from . import lr_scheduler

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "lr_scheduler"]


def __getattr__(name):
    raise AttributeError(f"tinyattn.compat.optim has no `{name}` yet")
