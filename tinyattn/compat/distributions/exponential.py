"""``torch.distributions.exponential``: ``Exponential``."""

from . import Exponential  # noqa: F401

__all__ = ["Exponential"]
