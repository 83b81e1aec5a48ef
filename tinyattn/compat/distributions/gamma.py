"""``torch.distributions.gamma``: ``Gamma``."""

from . import Gamma  # noqa: F401

__all__ = ["Gamma"]
