"""``torch.utils``: ``data`` (datasets, samplers and the loader) and ``checkpoint`` (gradient checkpointing)."""

from . import checkpoint, data  # noqa: F401

__all__ = ["checkpoint", "data"]


def __getattr__(name):
    raise AttributeError(f"tinyattn.compat.utils has no `{name}` yet")
