"""``torch.distributions.poisson``: ``Poisson``."""

from . import Poisson  # noqa: F401

__all__ = ["Poisson"]
