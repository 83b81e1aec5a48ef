"""``torch.nn.utils``."""

from ...nn.utils import clip_grad_norm_

__all__ = ["clip_grad_norm_"]


def __getattr__(name):
    raise AttributeError(f"tinyattn.compat.nn.utils has no `{name}` yet")
