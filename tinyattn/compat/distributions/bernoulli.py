"""``torch.distributions.bernoulli``: ``Bernoulli``."""

from . import Bernoulli  # noqa: F401

__all__ = ["Bernoulli"]
