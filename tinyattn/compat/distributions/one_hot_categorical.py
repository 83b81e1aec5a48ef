"""``torch.distributions.one_hot_categorical``: ``OneHotCategorical``."""

from . import OneHotCategorical  # noqa: F401

__all__ = ["OneHotCategorical"]
