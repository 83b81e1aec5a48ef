"""``torch.distributions.dirichlet``: ``Dirichlet``."""

from . import Dirichlet  # noqa: F401

__all__ = ["Dirichlet"]
