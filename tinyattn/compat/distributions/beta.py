"""``torch.distributions.beta``: ``Beta``."""

from . import Beta  # noqa: F401

__all__ = ["Beta"]
