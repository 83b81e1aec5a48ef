"""``torch.optim.lr_scheduler``: the native schedulers."""

from ...optim.lr_scheduler import LambdaLR

__all__ = ["LambdaLR"]


def __getattr__(name):
    raise AttributeError(f"tinyattn.compat.optim.lr_scheduler has no `{name}` yet")
