"""``torch.distributions.uniform``: ``Uniform``."""

from . import Uniform  # noqa: F401

__all__ = ["Uniform"]
