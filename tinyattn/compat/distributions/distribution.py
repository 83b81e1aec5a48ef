"""``torch.distributions.distribution``: ``Distribution``."""

from . import Distribution  # noqa: F401

__all__ = ["Distribution"]
