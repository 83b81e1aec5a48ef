"""``torch.distributions.laplace``: ``Laplace``."""

from . import Laplace  # noqa: F401

__all__ = ["Laplace"]
