"""``torch.nn.functional``: the native functions, and ``scaled_dot_product_attention`` returning one tensor."""

from ...nn import functional as _native
from ...nn.functional import scaled_dot_product_attention as _native_sdpa
from ..refusals import refused

for _name in _native.__all__:
    globals()[_name] = getattr(_native, _name)

__all__ = [*_native.__all__]


def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean",
                  label_smoothing=0.0):
    """PyTorch's argument order (``weight`` third) for the native ``F.cross_entropy``."""
    return _native.cross_entropy(input, target, ignore_index, reduction, label_smoothing, weight=weight,
                                 size_average=size_average, reduce=reduce)


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                                 enable_gqa=False):
    """PyTorch's: the attention output alone (a boolean ``attn_mask`` already means ``True`` = may attend)."""
    if enable_gqa:
        raise NotImplementedError("scaled_dot_product_attention: enable_gqa=True is not supported")
    output, _ = _native_sdpa(query, key, value, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal,
                             scale=scale, need_weights=False)
    return output


def _with_indices(pool):
    def pool_with_indices(input, *args, **kwargs):
        return pool(input, *args, **{**kwargs, "return_indices": True})

    pool_with_indices.__name__ = pool_with_indices.__qualname__ = f"{pool.__name__}_with_indices"
    pool_with_indices.__doc__ = f"``{pool.__name__}(…, return_indices=True)``: ``(values, indices)``."
    return pool_with_indices


max_pool1d_with_indices = _with_indices(_native.max_pool1d)
max_pool2d_with_indices = _with_indices(_native.max_pool2d)
max_pool3d_with_indices = _with_indices(_native.max_pool3d)
adaptive_max_pool1d_with_indices = _with_indices(_native.adaptive_max_pool1d)
adaptive_max_pool2d_with_indices = _with_indices(_native.adaptive_max_pool2d)
adaptive_max_pool3d_with_indices = _with_indices(_native.adaptive_max_pool3d)


fractional_max_pool2d = fractional_max_pool2d_with_indices = refused(
    "torch.nn.functional.fractional_max_pool2d", "pooling over pseudo-random regions is not built; use max_pool2d or "
    "adaptive_max_pool2d")
fractional_max_pool3d = fractional_max_pool3d_with_indices = refused(
    "torch.nn.functional.fractional_max_pool3d", "pooling over pseudo-random regions is not built; use max_pool3d or "
    "adaptive_max_pool3d")


def __getattr__(name):
    raise AttributeError(f"tinyattn.compat.nn.functional has no `{name}` yet")
