"""Scaled dot-product attention and the mask helpers (being written)."""


def scaled_dot_product_attention(*args, **kwargs):
    raise NotImplementedError


def causal_mask(*args, **kwargs):
    raise NotImplementedError


def padding_mask(*args, **kwargs):
    raise NotImplementedError
