"""``torch.distributions.normal``: ``Normal``."""

from . import Normal  # noqa: F401

__all__ = ["Normal"]
