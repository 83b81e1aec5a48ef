"""``torch.distributions.independent``: ``Independent``."""

from . import Independent  # noqa: F401

__all__ = ["Independent"]
