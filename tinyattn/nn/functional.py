"""Floor 4: the functional forms of the layers (softmax, layer_norm, cross_entropy, ...)."""

from .sdpa import causal_mask, padding_mask, scaled_dot_product_attention  # noqa: F401
