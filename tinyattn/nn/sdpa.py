"""Scaled dot-product attention and the mask helpers.

    scores  = query @ keyᵀ · scale  (+ attn_mask, when it is a float mask)     # (…, Lq, Lk)
    weights = softmax(scores) over the keys a query may attend                  # (…, Lq, Lk)
    output  = dropout(weights) @ value                                          # (…, Lq, Ev)

``scale`` defaults to ``1/√E``. A **boolean** mask marks with ``True`` the keys that may be
attended; a **float** mask is added to the scores (``-inf`` forbids a key, and the mask may
require a gradient); ``is_causal=True`` lets query ``i`` attend keys ``j <= i``. A mask and
``is_causal`` together: a key is attended only where both allow it. A query row with no key
left gives zeros (output, weights and gradients), never NaN.

Three paths compute it, each checked against the others:

- ``need_weights=True``: the composed path (``_attention``): scale, product, the fused
  ``MaskedSoftmax``, dropout and product as separate graph nodes, so that the returned weights
  are part of the graph (a loss may depend on them).
- ``need_weights=False``: one ``Attention`` node with its backward written out by hand (fewer
  nodes, fewer passes, only the weights kept). ``PackedSelfAttention`` is the same node for
  multi-head self-attention, taking queries, keys and values packed by one GEMM.
- ``need_weights=False``, no dropout, at least ``_BLOCKED_MIN_KEYS`` keys: the memory-efficient
  ``BlockedAttention``: keys are visited a block at a time with a running softmax, and backward
  recomputes each block's probabilities, so only an ``(Lq, block)`` piece of the scores exists
  at a time, never the whole ``(…, Lq, Lk)``.

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
from .. import backend, ops
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
        self.out = _masked_softmax(scores, allowed)  # a fresh array
        return self.out

    def backward(self, grad):
        return (_masked_softmax_backward(grad, self.out),) + (None,) * (len(self.parents) - 1)


def _masked_softmax(scores, allowed, scratch=False):
    """Softmax of ``scores`` over the last axis among the ``allowed`` entries (``None``: all), as a
    fresh array; forbidden entries and rows with none allowed get 0. ``scratch=True`` lets it
    write the mask into ``scores`` instead of into a copy.

    The shift that keeps ``exp`` from overflowing is the largest score of the whole array, not of
    each row: NumPy's maximum along short rows costs more than all the exponentials at the sizes
    attention meets (7 µs against 1.5 µs for 128 rows of 16). Softmax does not change when a row
    is shifted, so every weight above ``eps`` of its row's largest comes out as exactly as with
    the row's own maximum (smaller ones, in a row far below the array's maximum, may come out 0
    where PyTorch gives a tiny number). A row whose entries all lie far below that maximum
    could underflow: any row whose sum falls under ``tiny / eps`` of the dtype (1e-31 in float32:
    its largest score more than about 71 below the array's) is redone with its own maximum, which
    also leaves a row with no key at exactly 0. (Such rows cost a second pass over themselves.)
    """
    xp = backend.namespace(scores)
    Lk = scores.shape[-1]
    if allowed is not None and scratch:
        xp.copyto(scores, -math.inf, where=~allowed)  # (…, Lq, Lk); a forbidden key scores -inf
    elif allowed is not None:
        scores = xp.where(allowed, scores, -math.inf)
    rows = scores.reshape(math.prod(scores.shape[:-1]), Lk)  # (R, Lk), kept: the redo below reads it
    if rows.size == 0:
        return xp.zeros(scores.shape, dtype=scores.dtype)
    lowest, tiny = _finfo(scores.dtype)
    weights = rows - xp.maximum(rows.max(), lowest)  # (R, Lk), a fresh array; all -inf: shift by lowest
    xp.exp(weights, out=weights)  # exp(-inf) = 0 at forbidden keys
    total = F.row_sums(weights)  # (R, 1)
    if not total.min() >= tiny:  # rows far below the largest score, with no key, or NaN: redo them alone
        low = ~(total[:, 0] >= tiny)  # (a NaN anywhere makes the whole array's maximum NaN: each row then
        # gets its own, and the NaN stays in its row, as PyTorch keeps it)
        redo = rows[low]  # (r, Lk), a copy
        redo -= xp.maximum(redo.max(axis=1, keepdims=True), lowest)
        xp.exp(redo, out=redo)
        weights[low] = redo
        total[low] = F.row_sums(redo)  # at least 1 (the row's maximum gives exp(0)), or 0 with no key
        total = xp.maximum(total, tiny)  # a row with no key: 0 / tiny = 0
    weights /= total
    return weights.reshape(scores.shape)


_FINFO = {}


def _finfo(dtype):
    """``(lowest finite, tiny / eps)`` of a floating dtype, cached (``np.finfo`` costs a microsecond).

    A row sum of at least ``tiny / eps`` (1e-31 in float32) keeps every entry that matters to the
    normalised row, one above ``eps`` of the sum, a normal number: its exponential lost nothing."""
    if dtype not in _FINFO:
        info = np.finfo(dtype)
        _FINFO[dtype] = (dtype.type(info.min), dtype.type(info.tiny / info.eps))
    return _FINFO[dtype]


def _masked_softmax_backward(grad, y, out=None):
    """``∂L/∂s = y · (g - Σ g·y)`` for the softmax ``y`` of ``s``, into ``out`` (``out=grad``: in
    place) or a fresh array."""
    xp = backend.namespace(grad)
    dot = F.row_sums(grad * y)  # (…, Lq, 1): Σ g·y
    grad_scores = xp.subtract(grad, dot, out=out)
    grad_scores *= y
    return grad_scores


class Attention(Function):
    """The whole-matrix path as one node, for when the weights are not returned.

    ``forward(query, key, value, attn_mask=None, *, allowed, is_causal, scale, dropout_p)``:
    ``attn_mask`` a float mask added to the scores, ``allowed`` a boolean one (``True`` = may
    attend); ``dropout_p`` > 0 drops weights as ``F.dropout`` does (same generator, same draw).

        S = Q Kᵀ·scale + mask   (…, Lq, Lk)      P = masked softmax(S)      P̃ = P ∘ M / (1 - p)
        O = P̃ V                 (…, Lq, Ev)

    and backward, with ``G = ∂L/∂O``:

        dV = P̃ᵀ G    dP = (G Vᵀ) ∘ M / (1 - p)    dS = P ∘ (dP - Σ_k dP·P)
        dQ = dS K · scale    dK = dSᵀ Q · scale    dmask = dS

    each summed back over the leading axes its input broadcast along. It replaces five nodes
    (scale, transpose, product, masked softmax, product) and keeps ``P`` (and ``M``) besides its
    inputs; the test suite checks it against that composed form.
    """

    def forward(self, query, key, value, attn_mask=None, *, allowed, is_causal, scale, dropout_p):
        self.query, self.key, self.value, self.scale = query, key, value, scale
        self.weights, self.keep = _attention_weights(query, key, attn_mask, allowed, is_causal, scale, dropout_p)
        return _dropped(self.weights, self.keep) @ value  # (…, Lq, Ev)

    def backward(self, grad):
        needs = [p.requires_grad for p in self.parents]
        grads = _attention_backward(grad, self.query, self.key, self.value, self.weights, self.keep, self.scale,
                                    mask_shape=self.parents[3].shape if len(needs) > 3 and needs[3] else None)
        return tuple(ops.sum_to(g, p.shape) if need else None for g, p, need in zip(grads, self.parents, needs))


class PackedSelfAttention(Function):
    """``Attention`` for multi-head self-attention: queries, keys and values arrive packed as one
    ``qkv (3, B, H, L, D)`` (``InProjection``'s output) and the heads leave merged, ``(B, L, H·D)``
    (``_packed_attention``). ``forward(qkv, attn_mask=None, *, allowed, is_causal, scale, dropout_p)``
    as ``Attention``'s.

    The gradient goes back packed the same way, laid out as ``qkv`` is, so that the projection's
    backward sees it as one ``(B·L, 3·H·D)`` matrix without a copy.
    """

    def forward(self, qkv, attn_mask=None, *, allowed, is_causal, scale, dropout_p):
        self.qkv, self.scale = qkv, scale
        merged, self.weights, self.keep = _packed_attention(qkv, attn_mask, allowed, is_causal, scale, dropout_p)
        return merged  # (B, L, H·D)

    def backward(self, grad):
        needs_mask = len(self.parents) > 1 and self.parents[1].requires_grad
        return _packed_attention_backward(grad, self.qkv, self.weights, self.keep, self.scale,
                                          mask_shape=self.parents[1].shape if needs_mask else None)


def _packed_attention(qkv, attn_mask, allowed, is_causal, scale, dropout_p):
    """``(O, P, M)``: attention over packed ``qkv (3, B, H, L, D)``, its output with the heads merged
    ``(B, L, H·D)`` (a fresh array), the weights ``P (B, H, L, L)`` and dropout's keep-mask ``M`` (or
    ``None``). Masks as ``Attention``'s."""
    query, key, value = qkv[0], qkv[1], qkv[2]  # (B, H, L, D) views
    weights, keep = _attention_weights(query, key, attn_mask, allowed, is_causal, scale, dropout_p)
    heads = _dropped(weights, keep) @ value  # (B, H, L, D)
    B, H, L, D = heads.shape
    return heads.transpose(0, 2, 1, 3).reshape(B, L, H * D), weights, keep  # (B, L, H·D), a copy


def _packed_attention_backward(grad, qkv, weights, keep, scale, mask_shape=None):
    """``(dqkv, dmask)`` of ``_packed_attention`` for ``grad = ∂L/∂O (B, L, H·D)``: ``dqkv (3, B, H, L, D)``
    a view of a fresh ``(B, L, 3, H, D)`` array, the layout ``InProjection``'s output has, so that
    its backward reads it as ``(B·L, 3·H·D)`` rows without a copy; ``dmask`` ``None`` unless
    ``mask_shape`` is given."""
    _, B, H, L, D = qkv.shape
    grad = grad.reshape(B, L, H, D).transpose(0, 2, 1, 3)  # (B, H, L, D), a view
    grads = _attention_backward(grad, qkv[0], qkv[1], qkv[2], weights, keep, scale, mask_shape)
    grad_qkv = backend.namespace(grad).empty((B, L, 3, H, D), dtype=grads[0].dtype).transpose(2, 0, 3, 1, 4)
    grad_qkv[0], grad_qkv[1], grad_qkv[2] = grads[:3]  # (3, B, H, L, D)
    return grad_qkv, grads[3]


def _attention_weights(query, key, attn_mask, allowed, is_causal, scale, dropout_p):
    """``(P, M)``: the attention weights ``(…, Lq, Lk)`` and the dropout's scaled keep-mask, or ``None``."""
    Lq, Lk = query.shape[-2], key.shape[-2]
    scores = (query * scale) @ key.swapaxes(-1, -2)  # (…, Lq, Lk), a fresh array; scaling Q is the cheaper side
    if attn_mask is not None:
        scores += attn_mask  # the mask broadcasts to the scores (checked by the caller)
    if is_causal:
        causal = causal_mask(Lq, Lk, backend.device_of(query)).data  # (Lq, Lk): key j <= query i
        allowed = causal if allowed is None else allowed & causal
    weights = _masked_softmax(scores, allowed, scratch=True)  # (…, Lq, Lk), a fresh array
    keep = None
    if dropout_p > 0.0:  # F.dropout's draw, kept as a mask for backward
        uniform = backend.random_uniform(weights.shape, weights.dtype, backend.device_of(weights))
        keep = (uniform >= dropout_p).astype(weights.dtype) * (0.0 if dropout_p == 1 else 1 / (1 - dropout_p))
    return weights, keep


def _dropped(weights, keep):
    return weights if keep is None else weights * keep


def _attention_backward(grad, query, key, value, weights, keep, scale, mask_shape=None):
    """``(dQ, dK, dV, dmask)`` of ``O = dropout(masked softmax(Q Kᵀ·scale + mask)) V``, before any
    sum over broadcast axes; ``dmask`` is ``None`` unless ``mask_shape`` is given."""
    grad_value = _dropped(weights, keep).swapaxes(-1, -2) @ grad  # dV = P̃ᵀ G  (…, Lk, Ev)
    grad_weights = grad @ value.swapaxes(-1, -2)  # G Vᵀ  (…, Lq, Lk), a fresh array
    if keep is not None:
        grad_weights *= keep  # dP
    grad_scores = _masked_softmax_backward(grad_weights, weights, out=grad_weights)  # dS (…, Lq, Lk), in place
    grad_mask = None
    if mask_shape is not None:
        grad_mask = ops.sum_to(grad_scores, mask_shape)
        if grad_mask is grad_scores:
            grad_mask = grad_scores.copy()  # dS is scaled in place below
    grad_scores *= scale
    grad_query = grad_scores @ key  # (…, Lq, E)
    grad_key = grad_scores.swapaxes(-1, -2) @ query  # (…, Lk, E)
    return grad_query, grad_key, grad_value, grad_mask


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

    ``need_weights=False`` returns ``None`` for the weights and, when there is no dropout, at
    least ``_BLOCKED_MIN_KEYS`` keys and one floating dtype throughout, takes the
    memory-efficient path (``BlockedAttention``), which never holds the whole ``(…, Lq, Lk)``
    scores. With dropout it stays on the whole-matrix path: the blocked backward would need the
    same random mask again, block by block, and the library has no per-block seeded generator.

    >>> import tinyattn as ta
    >>> q = ta.tensor([[[1.0, 0.0], [0.0, 1.0]]])             # (1, Lq=2, E=2)
    >>> out, w = scaled_dot_product_attention(q, q, q, is_causal=True)
    >>> w.numpy().round(2)                                    # row 0 sees only key 0
    array([[[1.  , 0.  ],
            [0.33, 0.67]]], dtype=float32)
    """
    check.attention_inputs("scaled_dot_product_attention", ("query", query), ("key", key), ("value", value))
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
    attn_mask = _checked_mask(attn_mask, query, scores_shape)
    if not need_weights and _one_float_dtype(query, key, value, attn_mask):
        if dropout_p == 0.0 and key.shape[-2] >= _BLOCKED_MIN_KEYS:
            return _blocked_attention(query, key, value, attn_mask, is_causal, scale), None
        float_mask, allowed = _split_mask(attn_mask)
        options = dict(allowed=allowed, is_causal=is_causal, scale=scale, dropout_p=dropout_p)
        return Attention.apply(query, key, value, *float_mask, **options), None  # one node
    output, weights = _attention(query, key, value, attn_mask, dropout_p, is_causal, scale)
    return output, (weights if need_weights else None)


def packed_self_attention(qkv, attn_mask=None, dropout_p=0.0, is_causal=False):
    """Multi-head self-attention from packed ``qkv (3, B, H, L, D)`` to merged heads ``(B, L, H·D)``,
    weights not returned: ``PackedSelfAttention``, one node. ``attn_mask`` as in
    ``scaled_dot_product_attention``, broadcasting to ``(B, H, L, L)``; ``scale = 1/√D``."""
    _, B, H, L, D = qkv.shape
    attn_mask = _checked_mask(attn_mask, qkv, (B, H, L, L))
    float_mask, allowed = _split_mask(attn_mask)
    return PackedSelfAttention.apply(
        qkv, *float_mask, allowed=allowed, is_causal=is_causal, scale=1.0 / math.sqrt(D), dropout_p=float(dropout_p)
    )  # (B, L, H·D)


def _checked_mask(attn_mask, query, scores_shape):
    """``attn_mask`` as a tensor on the query's device that broadcasts to ``scores_shape``; a float
    mask in the query's dtype. ``None`` stays ``None``."""
    if attn_mask is None:
        return None
    attn_mask = _as_tensor(attn_mask, query, "attn_mask")
    _check_broadcast(attn_mask, scores_shape)
    if attn_mask.dtype != np.bool_ and attn_mask.dtype.kind != "f":
        raise TypeError(f"attn_mask must be boolean or floating point, got dtype {attn_mask.dtype}")
    if attn_mask.dtype.kind == "f" and attn_mask.dtype != query.dtype:
        attn_mask = attn_mask.to(query.dtype)  # a float64 NumPy-made mask must not turn float32 work float64
    return attn_mask


def _split_mask(attn_mask):
    """``(float_mask, allowed)``: a float mask as a tuple of zero or one input tensors (it may need a
    gradient), a boolean one as the array of allowed keys (or ``None``)."""
    if attn_mask is None:
        return (), None
    if attn_mask.dtype == np.bool_:
        return (), attn_mask.data
    return (attn_mask,), None


def _broadcast_batch(*tensors):
    """The broadcast leading shape ``(…)`` of tensors shaped ``(…, L, E)``."""
    try:
        return tuple(np.broadcast_shapes(*(t.shape[:-2] for t in tensors)))
    except ValueError:
        shapes = ", ".join(str(t.shape) for t in tensors)
        raise ValueError(f"scaled_dot_product_attention: leading dimensions of {shapes} cannot be broadcast") from None


def _one_float_dtype(query, key, value, attn_mask):
    """True when query, key, value (and a float mask) share one floating dtype: no promotion needed."""
    dtypes = {query.dtype, key.dtype, value.dtype}
    if attn_mask is not None and attn_mask.dtype != np.bool_:
        dtypes.add(attn_mask.dtype)
    return len(dtypes) == 1 and query.dtype.kind == "f"


def _attention(query, key, value, attn_mask, dropout_p, is_causal, scale):
    """The whole-matrix path: scores, masked softmax, dropout, weighted sum of values."""
    Lq, Lk = query.shape[-2], key.shape[-2]
    scores = (query * scale) @ key.transpose(-2, -1)  # (…, Lq, Lk); scaling the queries is the cheaper side

    allowed = None  # boolean (…, Lq, Lk)-broadcastable: True where a key may be attended
    if attn_mask is not None:
        if attn_mask.dtype == np.bool_:
            allowed = attn_mask.data
        else:
            scores = scores + attn_mask  # (…, Lq, Lk); -inf forbids a key
    if is_causal:
        causal = causal_mask(Lq, Lk, query.device).data  # (Lq, Lk): key j <= query i
        allowed = causal if allowed is None else allowed & causal

    if allowed is None:
        weights = MaskedSoftmax.apply(scores)  # (…, Lq, Lk)
    else:
        weights = MaskedSoftmax.apply(scores, Tensor._wrap(allowed))  # (…, Lq, Lk)
    if dropout_p > 0.0:
        weights = F.dropout(weights, dropout_p)  # (…, Lq, Lk)
    output = weights @ value  # (…, Lq, Ev)
    return output, weights


# ----------------------------------------------------------------------------- memory-efficient path

_BLOCK_SIZE = 1024  # the most keys per block
_BLOCK_ELEMENTS = 1 << 22  # and at most this many scores per block over the whole batch: 16 MiB in float32
_BLOCKED_MIN_KEYS = 512  # from here on the blocked path is as fast (measured at L = 512, 4096) and far leaner


def _blocked_attention(query, key, value, attn_mask, is_causal, scale, block_size=None):
    """The memory-efficient path. ``block_size`` (keys per block) defaults to ``_BLOCK_SIZE``, fewer
    (down to 64) when the whole batch's ``(…, Lq, block)`` scores would pass ``_BLOCK_ELEMENTS``."""
    if block_size is None:
        rows = math.prod(_broadcast_batch(query, key, value)) * query.shape[-2]  # batch · Lq
        block_size = min(_BLOCK_SIZE, max(64, _BLOCK_ELEMENTS // max(rows, 1)))  # 64: BLAS needs some width
    block_size = int(block_size)
    if block_size < 1:
        raise ValueError(f"block_size must be a positive number of keys, got {block_size}")
    float_mask, allowed = _split_mask(attn_mask)  # a float mask is an input: it may need a gradient
    return BlockedAttention.apply(
        query, key, value, *float_mask, allowed=allowed, is_causal=is_causal, scale=scale, block_size=block_size
    )


def _block_index(mask, row_start, key_start, key_stop):
    """The index of the part of a mask ``(…, Lq or 1, Lk or 1)`` that covers queries ``row_start:``
    and keys ``key_start:key_stop``; an axis of size 1 is kept whole, to broadcast."""
    rows = slice(row_start, None) if mask.shape[-2] != 1 else slice(None)
    keys = slice(key_start, key_stop) if mask.shape[-1] != 1 else slice(None)
    return Ellipsis, rows, keys


def _at_least_2d(mask):
    """A mask as ``(…, Lq or 1, Lk or 1)``: a mask of shape ``(Lk,)`` or ``()`` gains leading 1s."""
    return None if mask is None else mask.reshape((1,) * (2 - mask.ndim) + tuple(mask.shape))


def _view(buffer, shape):
    """The front of a flat scratch ``buffer`` as a contiguous array of ``shape``."""
    return buffer[: math.prod(shape)].reshape(shape)


class BlockedAttention(Function):
    """Attention over blocks of keys with a running softmax (FlashAttention-2, on arrays).

    ``forward(query, key, value, attn_mask=None, *, allowed, is_causal, scale, block_size)``:
    ``attn_mask`` a float mask added to the scores, ``allowed`` a boolean one (``True`` = may
    attend). For each block ``b`` of keys, with ``S_b = Q K_bᵀ·scale + mask_b`` (forbidden keys
    ``-inf``) and per query row a running max ``m``, denominator ``l`` and sum ``acc``:

        m' = max(m, rowmax S_b)     l = l·exp(m - m') + Σ exp(S_b - m')
        acc = acc·exp(m - m') + exp(S_b - m') V_b          output = acc / l,   lse = m + log l

    Only ``Q·scale, K, V``, the output and ``lse`` (log-sum-exp per row) are kept. Backward
    recomputes each block's probabilities: with ``D = rowsum(dO ∘ O)``,

        P = exp(S_b - lse)   dV_b = Pᵀ dO   dP = dO V_bᵀ   dS = P ∘ (dP - D)
        dQ += dS K_b · scale   dK_b = dSᵀ Q · scale   dmask_b = dS (summed to the mask's shape)

    A row with no key allowed keeps ``l = 0``: its output is 0 and its ``lse`` is ``+inf``, so
    its ``P`` (and every gradient through it) is 0. With ``is_causal`` query ``i`` attends keys
    ``j <= i``: key block ``[j0, j1)`` meets only queries ``j0:``, and blocks past the last query
    are skipped. Every step works on the whole batch at once (every leading index, e.g. each
    head): a block holds ``(…, Lq, block_size)`` scores, and no step holds more than two such
    float arrays (and, with a boolean mask, one boolean array of that size).
    """

    def forward(self, query, key, value, attn_mask=None, *, allowed, is_causal, scale, block_size):
        xp = backend.namespace(query)
        dtype = query.dtype
        self.batch = tuple(np.broadcast_shapes(query.shape[:-2], key.shape[:-2], value.shape[:-2]))
        Lq, Lk, Ev = query.shape[-2], key.shape[-2], value.shape[-1]
        self.query = query * scale  # (…, Lq, E), a fresh array, scaled once
        self.key, self.value = xp.ascontiguousarray(key), xp.ascontiguousarray(value)  # (…, Lk, E), (…, Lk, Ev)
        self.mask, self.allowed = _at_least_2d(attn_mask), _at_least_2d(allowed)  # (…, Lq or 1, Lk or 1)
        self.is_causal, self.scale, self.block_size = is_causal, scale, max(1, min(block_size, Lk))
        self.scores_cover_batch = tuple(np.broadcast_shapes(query.shape[:-2], key.shape[:-2])) == self.batch
        self.above_diagonal = xp.triu(xp.ones((self.block_size,) * 2, dtype=bool), 1) if is_causal else None

        self.out = xp.zeros(self.batch + (Lq, Ev), dtype=dtype)  # acc, then acc / l
        row_max = xp.full(self.batch + (Lq, 1), -math.inf, dtype=dtype)  # m
        denominator = xp.zeros(self.batch + (Lq, 1), dtype=dtype)  # l
        scores_buffer = self._buffer(xp)  # one block's scores, reused by every block
        for start, stop, first_row in self._blocks(Lq, Lk):
            rows = (Ellipsis, slice(first_row, Lq), slice(None))
            probs = self._scores(xp, start, stop, first_row, scores_buffer)  # (…, R, b)
            new_max = xp.maximum(row_max[rows], probs.max(axis=-1, keepdims=True))  # (…, R, 1)
            shift = xp.where(new_max > -math.inf, new_max, 0)  # a row with no key yet: exp(-inf - 0) = 0
            rescale = xp.exp(row_max[rows] - shift)  # exp(m - m'); 0 while m = -inf
            probs -= shift
            xp.exp(probs, out=probs)  # exp(S_b - m')
            denominator[rows] *= rescale
            denominator[rows] += F.row_sums(probs)
            acc = self.out[rows]  # (…, R, Ev), a view
            acc *= rescale
            acc += probs @ self.value[..., start:stop, :]
            row_max[rows] = new_max
        attended = denominator > 0  # (…, Lq, 1)
        safe_denominator = xp.where(attended, denominator, 1)
        self.out /= safe_denominator  # a row with no key: 0 / 1 = 0
        self.lse = xp.where(attended, row_max + xp.log(safe_denominator), math.inf)  # (…, Lq, 1)
        return self.out

    def backward(self, grad):
        xp = backend.namespace(grad)
        needs = [p.requires_grad for p in self.parents]
        dtype, Lq, Lk = grad.dtype, self.query.shape[-2], self.key.shape[-2]
        D = xp.einsum("...k,...k->...", grad, self.out)[..., None]  # (…, Lq, 1): rowsum(dO ∘ O), no temporary
        grads = [xp.zeros(t.shape, dtype=dtype) if need else None for t, need in zip(self.parents, needs)]
        grad_query, grad_key, grad_value = grads[:3]
        grad_mask = _at_least_2d(grads[3]) if len(grads) > 3 else None  # a view: accumulating fills grads[3]
        probs_buffer, grad_scores_buffer = self._buffer(xp), self._buffer(xp)
        for start, stop, first_row in self._blocks(Lq, Lk):
            rows, keys = (Ellipsis, slice(first_row, Lq), slice(None)), (Ellipsis, slice(start, stop), slice(None))
            probs = self._scores(xp, start, stop, first_row, probs_buffer)  # (…, R, b)
            probs -= self.lse[rows]
            xp.exp(probs, out=probs)  # P = exp(S_b - lse)
            grad_out = grad[rows]  # (…, R, Ev)
            if grad_value is not None:  # dV_b += Pᵀ dO, summed over the axes V broadcasts along
                grad_value[keys] += ops.sum_to(probs.swapaxes(-1, -2) @ grad_out, grad_value[keys].shape)
            grad_scores = _view(grad_scores_buffer, probs.shape)
            xp.matmul(grad_out, self.value[keys].swapaxes(-1, -2), out=grad_scores)  # dP = dO V_bᵀ
            grad_scores -= D[rows]
            grad_scores *= probs  # dS = P ∘ (dP - D)
            if grad_query is not None:  # dQ += dS K_b (· scale, once at the end)
                grad_query[rows] += ops.sum_to(grad_scores @ self.key[keys], grad_query[rows].shape)
            if grad_key is not None:  # dK_b += dSᵀ (Q · scale)
                grad_key[keys] += ops.sum_to(grad_scores.swapaxes(-1, -2) @ self.query[rows], grad_key[keys].shape)
            if grad_mask is not None:  # dmask_b += dS, summed over the axes the mask broadcasts
                block = _block_index(grad_mask, first_row, start, stop)
                grad_mask[block] += ops.sum_to(grad_scores, grad_mask[block].shape)
        if grad_query is not None:
            grad_query *= self.scale
        return tuple(grads)

    def _blocks(self, Lq, Lk):
        """``(start, stop, first_row)`` for each block of keys; causal attention skips the queries
        (``:first_row``) and the blocks (``start >= Lq``) that the block cannot reach."""
        for start in range(0, Lk, self.block_size):
            if self.is_causal and start >= Lq:
                return
            yield start, min(start + self.block_size, Lk), start if self.is_causal else 0

    def _buffer(self, xp):
        """Room for one block of scores over the whole batch, ``(…, Lq, block_size)``."""
        return xp.empty(math.prod(self.batch) * self.query.shape[-2] * self.block_size, dtype=self.query.dtype)

    def _scores(self, xp, start, stop, first_row, buffer):
        """``S_b = Q[first_row:] K[start:stop]ᵀ·scale + mask`` over the whole batch, forbidden keys
        ``-inf``: a ``(…, R, b)`` array in ``buffer``."""
        q, k = self.query[..., first_row:, :], self.key[..., start:stop, :]  # (…, R, E), (…, b, E)
        shape = self.batch + (q.shape[-2], k.shape[-2])
        scores = _view(buffer, shape)
        if self.scores_cover_batch:
            xp.matmul(q, k.swapaxes(-1, -2), out=scores)
        else:  # V alone brings leading axes: the scores are the same along them
            scores[...] = q @ k.swapaxes(-1, -2)
        if self.mask is not None:
            scores += self.mask[_block_index(self.mask, first_row, start, stop)]
        if self.allowed is not None:
            xp.copyto(scores, -math.inf, where=~self.allowed[_block_index(self.allowed, first_row, start, stop)])
        if self.is_causal:  # query first_row + r may not attend key start + c > first_row + r
            corner = scores[..., : stop - start, :]  # (…, ≤b, b): the rows that cross the diagonal
            xp.copyto(corner, -math.inf, where=self.above_diagonal[: corner.shape[-2], : stop - start])
        return scores


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
