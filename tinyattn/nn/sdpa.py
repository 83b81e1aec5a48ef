"""Scaled dot-product attention and the mask helpers.

    scores  = query @ keyᵀ · scale  (+ attn_mask, when it is a float mask)     # (…, Lq, Lk)
    weights = softmax(scores) over the keys a query may attend                  # (…, Lq, Lk)
    output  = dropout(weights) @ value                                          # (…, Lq, Ev)

``scale`` defaults to ``1/√E``. A **boolean** mask marks with ``True`` the keys that may be
attended; a **float** mask is added to the scores (``-inf`` forbids a key, and the mask may
require a gradient); ``is_causal=True`` lets query ``i`` attend keys ``j <= i``. A mask and
``is_causal`` together: a key is attended only where both allow it. A query row with no key
left gives zeros (output, weights and gradients), never NaN; ``MaskedSoftmax`` is the fused
operation that guarantees it.

>>> import tinyattn as ta
>>> import tinyattn.nn.functional as F
>>> q = ta.randn(2, 3, 4)                       # (B, Lq, E)
>>> kv = ta.randn(2, 5, 4)                      # (B, Lk, E)
>>> out, w = F.scaled_dot_product_attention(q, kv, kv, attn_mask=F.padding_mask([5, 2], 5)[:, 0])
>>> out.shape, w.shape
((2, 3, 4), (2, 3, 5))
>>> w.numpy()[1, :, 2:].max()                   # keys past the second sequence's length get no weight
np.float32(0.0)
"""

import math
import numbers

import numpy as np

from .. import backend
from ..tensor import Function, Tensor
from . import functional as F  # functional imports this module last, when its own names (dropout) exist


class MaskedSoftmax(Function):
    """Softmax over the last axis among the allowed entries; a row with none allowed is 0.

    ``forward(scores, allowed=None)``: ``allowed`` is a boolean array that broadcasts to
    ``scores`` (``True`` = may attend); entries equal to ``-inf`` are never allowed either.

        y = exp(s - max) / Σ exp(s - max)   over the allowed entries, 0 elsewhere
        ∂L/∂s = y · (g - Σ g·y)

    Rows whose entries are all forbidden have ``y = 0``, so their gradient is 0 too.

    >>> import tinyattn as ta
    >>> s = ta.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    >>> allowed = ta.tensor([[True, True, False], [False, False, False]])
    >>> MaskedSoftmax.apply(s, allowed).numpy().round(4)
    array([[0.2689, 0.7311, 0.    ],
           [0.    , 0.    , 0.    ]], dtype=float32)
    """

    def forward(self, scores, allowed=None):
        xp = backend.namespace(scores)
        keep = scores > -math.inf
        if allowed is not None:
            keep = keep & allowed  # (…, Lq, Lk)
        masked = xp.where(keep, scores, -math.inf)
        row_max = masked.max(axis=-1, keepdims=True)  # (…, Lq, 1); -inf on a row with no key
        row_max = xp.where(row_max > -math.inf, row_max, 0)
        exps = xp.exp(masked - row_max)  # exp(-inf) = 0 at forbidden keys
        total = exps.sum(axis=-1, keepdims=True)  # (…, Lq, 1); 0 on a row with no key
        self.out = exps / xp.where(total > 0, total, 1)
        return self.out

    def backward(self, grad):
        y = self.out
        return (y * (grad - (grad * y).sum(axis=-1, keepdims=True)),) + (None,) * (len(self.parents) - 1)


def _as_tensor(mask, like, name):
    """``mask`` (a tensor or a backend array) as a tensor on ``like``'s device."""
    if backend.is_array(mask):
        mask = Tensor._wrap(mask)
    if not isinstance(mask, Tensor):
        raise TypeError(f"{name}: expected a boolean or float tensor, got {type(mask).__name__}")
    if mask.device != like.device:
        raise ValueError(f"{name} is on device {mask.device!r}, the query on {like.device!r}; move it with .to(device)")
    return mask


def _check_broadcast(mask, scores_shape):
    try:
        broadcast = np.broadcast_shapes(mask.shape, scores_shape)
    except ValueError:
        broadcast = None
    if broadcast != tuple(scores_shape):
        raise ValueError(
            f"attn_mask of shape {mask.shape} cannot be broadcast to the attention scores of shape "
            f"{tuple(scores_shape)} (…, Lq, Lk)"
        )


def scaled_dot_product_attention(
    query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, need_weights=True
):
    """``softmax(query @ keyᵀ · scale + mask) @ value`` → ``(output, weights or None)``.

    ``query (…, Lq, E)``, ``key (…, Lk, E)``, ``value (…, Lk, Ev)``; leading dimensions
    broadcast. ``attn_mask``: boolean (``True`` = may attend) or float (added to the scores),
    broadcasting to ``(…, Lq, Lk)``. ``is_causal``: query ``i`` attends keys ``j <= i`` (top-left
    aligned when ``Lq != Lk``), combined with ``attn_mask`` when both are given. ``scale``:
    ``1/√E`` by default. ``dropout_p``: dropout on the weights (applied whenever it is > 0, as
    in PyTorch; modules pass 0 in eval mode); the returned weights are the ones that multiplied
    ``value``, after dropout. A query with no key left to attend gets zeros, never NaN.

    ``need_weights=False`` returns ``None`` for the weights. For now it computes the same
    matrix; the memory-efficient path that never holds the whole ``(…, Lq, Lk)`` scores will
    take its place in ``_attention`` without changing this signature.

    >>> import tinyattn as ta
    >>> q = ta.tensor([[[1.0, 0.0], [0.0, 1.0]]])             # (1, Lq=2, E=2)
    >>> out, w = scaled_dot_product_attention(q, q, q, is_causal=True)
    >>> w.numpy().round(2)                                    # row 0 sees only key 0
    array([[[1.  , 0.  ],
            [0.33, 0.67]]], dtype=float32)
    """
    for name, t in (("query", query), ("key", key), ("value", value)):
        if not isinstance(t, Tensor) or t.ndim < 2:
            shape = t.shape if isinstance(t, Tensor) else type(t).__name__
            raise ValueError(f"scaled_dot_product_attention: {name} must be a tensor of shape (…, L, E), got {shape}")
    if query.shape[-1] != key.shape[-1]:
        raise ValueError(
            f"scaled_dot_product_attention: query {query.shape} and key {key.shape} must share the last size E"
        )
    if key.shape[-2] != value.shape[-2]:
        raise ValueError(
            f"scaled_dot_product_attention: key {key.shape} and value {value.shape} must share the length Lk"
        )
    if not (isinstance(dropout_p, numbers.Real) and 0.0 <= dropout_p <= 1.0):
        raise ValueError(f"scaled_dot_product_attention: dropout_p must be in [0, 1], got {dropout_p}")
    output, weights = _attention(query, key, value, attn_mask, dropout_p, is_causal, scale)
    return output, (weights if need_weights else None)


def _attention(query, key, value, attn_mask, dropout_p, is_causal, scale):
    """The whole-matrix path: scores, masked softmax, dropout, weighted sum of values."""
    xp = backend.namespace(query.data)
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else float(scale)
    Lq, Lk = query.shape[-2], key.shape[-2]
    scores = (query @ key.transpose(-2, -1)) * scale  # (…, Lq, Lk)

    allowed = None  # boolean (…, Lq, Lk)-broadcastable: True where a key may be attended
    if attn_mask is not None:
        attn_mask = _as_tensor(attn_mask, query, "attn_mask")
        _check_broadcast(attn_mask, scores.shape)
        if attn_mask.dtype == np.bool_:
            allowed = attn_mask.data
        elif attn_mask.dtype.kind == "f":
            scores = scores + attn_mask  # (…, Lq, Lk); -inf forbids a key
        else:
            raise TypeError(f"attn_mask must be boolean or floating point, got dtype {attn_mask.dtype}")
    if is_causal:
        causal = xp.tril(xp.ones((Lq, Lk), dtype=bool))  # (Lq, Lk): key j <= query i
        allowed = causal if allowed is None else allowed & causal

    if allowed is None:
        weights = MaskedSoftmax.apply(scores)  # (…, Lq, Lk)
    else:
        weights = MaskedSoftmax.apply(scores, Tensor._wrap(allowed))  # (…, Lq, Lk)
    if dropout_p > 0.0:
        weights = F.dropout(weights, dropout_p)  # (…, Lq, Lk)
    output = weights @ value  # (…, Lq, Ev)
    return output, weights


def causal_mask(Lq, Lk=None, device="cpu"):
    """Boolean ``(Lq, Lk)`` mask, ``True`` where key ``j <= i`` (query ``i`` may attend it).

    >>> causal_mask(2, 3).numpy()
    array([[ True, False, False],
           [ True,  True, False]])
    """
    Lk = Lq if Lk is None else Lk
    xp = backend.namespace_for(device)
    return Tensor._wrap(xp.tril(xp.ones((Lq, Lk), dtype=bool)))  # (Lq, Lk)


def padding_mask(lengths, max_len):
    """Boolean ``(B, 1, 1, max_len)`` mask, ``True`` at the positions ``< lengths[b]``.

    ``lengths``: a 1-D integer tensor (the mask lands on its device), array or list. The
    shape broadcasts over heads and queries to ``(B, H, Lq, Lk)``.

    >>> padding_mask([1, 3], 3)[:, 0, 0].numpy()
    array([[ True, False, False],
           [ True,  True,  True]])
    """
    if isinstance(lengths, Tensor):
        lengths = lengths.data
    elif not backend.is_array(lengths):
        lengths = np.asarray(lengths)
    if lengths.ndim != 1 or lengths.dtype.kind not in "iu":
        raise ValueError(
            f"padding_mask: lengths must be a 1-D integer sequence, got shape {tuple(lengths.shape)} "
            f"and dtype {lengths.dtype}"
        )
    xp = backend.namespace(lengths)
    positions = xp.arange(max_len)  # (max_len,)
    return Tensor._wrap((positions[None, :] < lengths[:, None])[:, None, None, :])  # (B, 1, 1, max_len)
