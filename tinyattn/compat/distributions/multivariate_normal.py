"""``torch.distributions.multivariate_normal``: ``MultivariateNormal``."""

from . import MultivariateNormal  # noqa: F401

__all__ = ["MultivariateNormal"]
