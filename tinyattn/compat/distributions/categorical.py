"""``torch.distributions.categorical``: ``Categorical``."""

from . import Categorical  # noqa: F401

__all__ = ["Categorical"]
