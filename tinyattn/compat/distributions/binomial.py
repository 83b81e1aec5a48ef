"""``torch.distributions.binomial``: ``Binomial``."""

from . import Binomial  # noqa: F401

__all__ = ["Binomial"]
