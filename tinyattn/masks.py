"""Attention masks as the reference and the fast layer both take them: checked once, then split.

A boolean mask marks with ``True`` the keys that may be attended; a float mask is added to the
scores (and may need a gradient). ``checked_mask`` turns what a user passed into a tensor on the
query's device that broadcasts to the scores; ``split_mask`` hands a float mask on as a graph
input and a boolean one as an array of allowed keys.
"""

import numpy as np

from . import backend
from .engine import Tensor


def as_tensor(mask, like, name):
    """``mask`` (a tensor or a backend array) as a tensor on ``like``'s device."""
    if backend.is_array(mask):
        mask = Tensor._wrap(mask)
    if not isinstance(mask, Tensor):
        raise TypeError(f"{name}: expected a boolean or float tensor, got {type(mask).__name__}")
    if mask.device != like.device:
        raise ValueError(f"{name} is on device {mask.device!r}, the query on {like.device!r}; move it with .to(device)")
    return mask


def check_broadcast(mask, scores_shape):
    """A ``ValueError`` naming both shapes unless ``mask`` broadcasts to ``scores_shape``; a ``(B, Lk)``
    boolean mask (one row of keys per sequence) is pointed to ``F.padding_mask``."""
    try:
        broadcast = np.broadcast_shapes(mask.shape, scores_shape)
    except ValueError:
        broadcast = None
    if broadcast != tuple(scores_shape):
        hint = ""
        if mask.ndim == 2 and mask.shape == (scores_shape[0], scores_shape[-1]) and len(scores_shape) > 2:
            hint = (f"; a (B, Lk) mask of keys per sequence must be shaped (B, 1, 1, Lk): "
                    f"F.padding_mask(lengths, {scores_shape[-1]}) builds it, or index it as mask[:, None, None, :]")
        raise ValueError(
            f"attn_mask of shape {mask.shape} cannot be broadcast to the attention scores of shape "
            f"{tuple(scores_shape)} (…, Lq, Lk){hint}"
        )


def checked_mask(attn_mask, query, scores_shape):
    """``attn_mask`` as a tensor on the query's device that broadcasts to ``scores_shape``; a float
    mask in the query's dtype. ``None`` stays ``None``."""
    if attn_mask is None:
        return None
    attn_mask = as_tensor(attn_mask, query, "attn_mask")
    check_broadcast(attn_mask, scores_shape)
    if attn_mask.dtype != np.bool_ and attn_mask.dtype.kind != "f":
        raise TypeError(f"attn_mask must be boolean or floating point, got dtype {attn_mask.dtype}")
    if attn_mask.dtype.kind == "f" and attn_mask.dtype != query.dtype:
        attn_mask = attn_mask.to(query.dtype)  # a float64 NumPy-made mask must not turn float32 work float64
    return attn_mask


def split_mask(attn_mask):
    """``(float_mask, allowed)``: a float mask as a tuple of zero or one input tensors (it may need a
    gradient), a boolean one as the array of allowed keys (or ``None``)."""
    if attn_mask is None:
        return (), None
    if attn_mask.dtype == np.bool_:
        return (), attn_mask._data
    return (attn_mask,), None


def layer_mask(attn_mask, layer):
    """A layer's ``attn_mask`` (``per_batch_mask``), refused where it can only be PyTorch's convention read the
    other way: a 2-D boolean ``(Lq, Lk)`` mask, the same for every sequence, under which some query may attend no
    key. PyTorch's boolean masks mark the *masked* keys, so its causal mask (``True`` above the diagonal) leaves the
    last query no key, and its ``(B, S)`` padding mask, where ``B == Lq`` lets it broadcast, leaves each unpadded
    sequence's row none; a shared mask that silences a query in every sequence has no other use. Masks per sequence
    (3-D, 4-D) keep the rule that a query with no key gives zeros (an empty sequence)."""
    attn_mask = per_batch_mask(attn_mask)
    allowed = getattr(attn_mask, "_data", attn_mask)
    if (getattr(allowed, "dtype", None) == np.bool_ and allowed.ndim == 2 and allowed.shape[-1]
            and not allowed.any(-1).all()):
        raise ValueError(
            f"{layer}: the boolean attn_mask of shape {tuple(allowed.shape)} leaves a query no key to attend in every "
            "sequence. tinyattn's boolean masks mark with True the keys that MAY be attended; PyTorch's mark the "
            "masked ones, so a PyTorch-style mask must be inverted (~mask), or given to tinyattn.compat's layers, "
            "which take PyTorch's conventions. To silence a query on purpose, use a float mask with -inf there.")
    return attn_mask


def per_batch_mask(attn_mask):
    """A 3-D ``(B, Lq, Lk)`` mask as ``(B, 1, Lq, Lk)``, the same for every head; others as they are."""
    if getattr(attn_mask, "ndim", None) == 3:  # (anything else, a list say, goes on to checked_mask's error)
        return attn_mask[:, None]
    return attn_mask
