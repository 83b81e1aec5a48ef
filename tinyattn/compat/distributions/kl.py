"""``torch.distributions.kl``: ``kl_divergence`` and ``register_kl``."""

from . import kl_divergence, register_kl  # noqa: F401

__all__ = ["kl_divergence", "register_kl"]
