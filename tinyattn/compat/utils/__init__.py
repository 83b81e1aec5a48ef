"""``torch.utils``: ``data`` (datasets, samplers and the loader)."""

from . import data  # noqa: F401

__all__ = ["data"]


def __getattr__(name):
    raise AttributeError(f"tinyattn.compat.utils has no `{name}` yet")
