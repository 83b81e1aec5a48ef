"""Scaled dot-product attention and the mask helpers.

    scores  = query @ keyᵀ · scale  (+ attn_mask, when it is a float mask)     # (…, Lq, Lk)
    weights = softmax(scores) over the keys a query may attend                  # (…, Lq, Lk)
    output  = dropout(weights) @ value                                          # (…, Lq, Ev)

``scale`` defaults to ``1/√E``. A **boolean** mask marks with ``True`` the keys that may be
attended; a **float** mask is added to the scores (``-inf`` forbids a key, and the mask may
require a gradient); ``is_causal=True`` lets query ``i`` attend keys ``j <= i``. A mask and
``is_causal`` together: a key is attended only where both allow it. A query row with no key
left gives zeros (output, weights and gradients), never NaN.

The function body below is the reference definition, node by node (``_attention``). While fast
paths are on, ``routes.attention`` may send it to a fused node of ``tinyattn.fast`` instead, each
proven equal to the definition by the test suite's equivalence table:

- ``need_weights=True``: the definition's nodes, with ``fast.MaskedSoftmax`` as the softmax (the
  returned weights stay part of the graph: a loss may depend on them).
- ``need_weights=False``: one ``fast.Attention`` node with its backward written out by hand.
- ``need_weights=False``, no dropout, at least ``blocked_attention_min_keys`` keys (513): the
  memory-efficient ``fast.BlockedAttention``, which visits the keys a block at a time with a
  running softmax and never holds the whole ``(…, Lq, Lk)`` scores.

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

from .. import _checks as check
from .. import backend, fast, routes
from ..masks import checked_mask, split_mask
from ..tensor import Tensor
from . import functional as F  # functional imports this module last, when its own names (softmax, dropout) exist


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

    ``need_weights=False`` returns ``None`` for the weights and, when there is no dropout, at
    least ``blocked_attention_min_keys`` keys (``ta.use_fast_paths``) and one floating dtype
    throughout, takes the memory-efficient path (``BlockedAttention``), which never holds the whole
    ``(…, Lq, Lk)`` scores. With dropout it stays on the whole-matrix path: the blocked backward would need the
    same random mask again, block by block, and the library has no per-block seeded generator.

    >>> import tinyattn as ta
    >>> q = ta.tensor([[[1.0, 0.0], [0.0, 1.0]]])             # (1, Lq=2, E=2)
    >>> out, w = scaled_dot_product_attention(q, q, q, is_causal=True)
    >>> w.numpy().round(2)                                    # row 0 sees only key 0
    array([[[1.  , 0.  ],
            [0.33, 0.67]]], dtype=float32)
    """
    check.attention_inputs("scaled_dot_product_attention", ("query", query), ("key", key), ("value", value))
    check.one_dtype("scaled_dot_product_attention", ("query", query), ("key", key))
    check.one_dtype("scaled_dot_product_attention", ("query", query), ("value", value))
    scale = check.attention_scale(query, scale)
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
    dropout_p = float(dropout_p)  # a NumPy float64 would promote float32 work
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else float(scale)
    scores_shape = _broadcast_batch(query, key) + (query.shape[-2], key.shape[-2])  # (…, Lq, Lk)
    attn_mask = checked_mask(attn_mask, query, scores_shape)
    route = routes.attention(query, key, value, attn_mask, dropout_p, need_weights)
    if route == "blocked":
        block_size = routes.settings.attention_block_size
        return fast.blocked_attention(query, key, value, attn_mask, is_causal, scale, block_size), None
    if route == "fused":
        float_mask, allowed = split_mask(attn_mask)
        options = dict(allowed=allowed, is_causal=is_causal, scale=scale, dropout_p=dropout_p)
        return fast.Attention.apply(query, key, value, *float_mask, **options), None  # one node
    output, weights = _attention(query, key, value, attn_mask, dropout_p, is_causal, scale,
                                 fast_softmax=route == "masked softmax")
    return output, (weights if need_weights else None)


def _broadcast_batch(*tensors):
    """The broadcast leading shape ``(…)`` of tensors shaped ``(…, L, E)``."""
    try:
        return tuple(np.broadcast_shapes(*(t.shape[:-2] for t in tensors)))
    except ValueError:
        shapes = ", ".join(str(t.shape) for t in tensors)
        raise ValueError(f"scaled_dot_product_attention: leading dimensions of {shapes} cannot be broadcast") from None


def _attention(query, key, value, attn_mask, dropout_p, is_causal, scale, fast_softmax=False):
    """The definition: ``weights = softmax(q kᵀ·scale + mask)``, dropout, ``output = weights @ v``.
    ``fast_softmax``: the softmax is ``fast.MaskedSoftmax`` (the same numbers, fewer passes)."""
    Lq, Lk = query.shape[-2], key.shape[-2]
    scores = (query * scale) @ key.transpose(-2, -1)  # (…, Lq, Lk); scaling the queries is the cheaper side
    allowed = None  # boolean, broadcasting to (…, Lq, Lk): True where a key may be attended
    if attn_mask is not None and attn_mask.dtype == np.bool_:
        allowed = attn_mask._data
    elif attn_mask is not None:
        scores = scores + attn_mask  # (…, Lq, Lk); -inf forbids a key
    if is_causal:
        causal = causal_mask(Lq, Lk, query.device)._data  # (Lq, Lk): key j <= query i
        allowed = causal if allowed is None else allowed & causal
    if fast_softmax:
        weights = fast.MaskedSoftmax.apply(scores, *(() if allowed is None else (Tensor._wrap(allowed),)))
    else:
        weights = _softmax_over_allowed(scores, allowed)  # (…, Lq, Lk)
    if dropout_p > 0.0:
        weights = F.dropout(weights, dropout_p)  # (…, Lq, Lk)
    output = weights @ value  # (…, Lq, Ev)
    return output, weights


def _softmax_over_allowed(scores, allowed):
    """``F.softmax`` over the keys, forbidden keys scored ``-inf`` (their weight is 0). A query with no
    key left would divide 0 by 0: its row is zeroed instead (weights, and so its gradients)."""
    if allowed is not None:
        scores = scores.masked_fill(Tensor._wrap(~allowed), -math.inf)  # (…, Lq, Lk)
    empty = (scores._data == -math.inf).all(axis=-1, keepdims=True)  # (…, Lq, 1): rows with no key
    if not empty.any():
        return F.softmax(scores, dim=-1)
    empty = Tensor._wrap(empty)
    return F.softmax(scores.masked_fill(empty, 0.0), dim=-1).masked_fill(empty, 0.0)


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
        lengths = lengths._data
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
