"""Attention on arrays: one tiled kernel, forward and backward, whatever the schedule.

    S = Q·scale Kᵀ + mask  (…, Lq, Lk)    P = softmax(S) over the allowed keys    O = (P ∘ M) V  (…, Lq, Ev)

with ``M`` dropout's scaled keep-mask (or none). The scores are cut into *tiles*: some batch slices' queries
``q0:q1`` against their keys ``k0:k1``. A schedule (``fast.router.attention_schedule``, a ``router.TileSchedule``)
lists the tiles, grouped into *units*: a unit is a basic index of the batch axes and its tiles, in order, and
owns its rows of the output and of the gradients, so the units of a pass may run at once (over
``fast.parallel``'s pool, where the schedule says so, each unit's products on one BLAS thread where it says
that too). The kernel decides nothing: ``attention`` runs ``forward_tile`` on every tile of every unit, and
``attention_backward`` runs ``backward_tile``.

The schedules the router gives, each a way of cutting the same ``(…, Lq, Lk)``:

    one tile            the whole array at once (small attention, and CuPy: few large calls)
    batch slices        a few whole slices per unit, one tile each (their scores fit a core's cache)
    query runs          a run of query rows of every slice per unit, all keys in one tile (large slices,
                        or a batch broadcast among Q, K and V); backward adds a pass by runs of keys
    key blocks          several key tiles per unit (per batch slices, or the whole batch), combined by the
                        online softmax: no step holds more than one tile's scores
    sequences           sequences laid back to back (``cu_seqlens``): sequence ``b``'s rows against its own keys

A unit of one tile per row (every schedule but key blocks) takes the softmax of its tile at once
(``kernels.softmax_into``) and keeps ``P`` for backward. A unit of several key tiles keeps, per query row,
a running maximum ``m``, denominator ``l`` and sum ``acc`` (FlashAttention-2's recurrence, Dao 2023):

    m' = max(m, rowmax S_b)     l = l·exp(m - m') + Σ exp(S_b - m')     acc = acc·exp(m - m') + exp(S_b - m') V_b
    O = acc / l                 lse = m + log l                          (a row with no key: O = 0, lse = +inf)

and keeps ``lse``; its backward recomputes each tile's ``P = exp(S_b - lse)``. The softmax of one tile is that
recurrence over a single block. Backward, with ``G = ∂L/∂O`` and ``D = rowsum(G ∘ O)`` (``kernels.rows_dot``):

    dP = (G Vᵀ) ∘ M    dS = P ∘ (dP - D)    dQ = dS K·scale    dK = dSᵀ (Q·scale)    dV = (P ∘ M)ᵀ G    dmask = dS

each tile adding its part (``dQ`` over a unit's key tiles, ``dK`` and ``dV`` over its query tiles).
"""

import math

import numpy as np

from .. import backend, ops
from . import buffers, parallel
from .kernels import row_sums, rows_dot, softmax_into, split_heads, split_packed_heads


def _part(mask, batch_ndim, index):
    """The part of a mask that broadcasts to ``(batch…, Lq, Lk)`` covering the batch slices ``index`` (a basic
    index, ``()`` for the whole batch): an axis of size 1 is kept as it is, to broadcast."""
    if mask is None or not index:
        return mask
    mask = mask.reshape((1,) * (batch_ndim + 2 - mask.ndim) + mask.shape)  # (…, Lq or 1, Lk or 1)
    return mask[tuple(i if n != 1 else 0 if type(i) is not slice else slice(None)
                      for n, i in zip(mask.shape[:-2], index))]


def _tile_of(mask, q0, q1, k0, k1):
    """The part of a mask ``(…, Lq or 1, Lk or 1)`` (or fewer axes) covering queries ``q0:q1`` and keys ``k0:k1``."""
    if mask is None:
        return None
    if mask.ndim < 2:
        return mask if mask.ndim == 0 or mask.shape[-1] == 1 else mask[..., k0:k1]
    rows = slice(q0, q1) if mask.shape[-2] != 1 else slice(None)
    keys = slice(k0, k1) if mask.shape[-1] != 1 else slice(None)
    return mask[..., rows, keys]


def _rows(array, start, stop):
    """``array[..., start:stop, :]``, or ``array`` itself when those are all its rows."""
    if array is None or (start == 0 and stop == array.shape[-2]):
        return array
    return array[..., start:stop, :]


def _block(array, q0, q1, k0, k1):
    """``array[..., q0:q1, k0:k1]``, or ``array`` itself when that is all of it."""
    if array is None or (q0 == 0 and k0 == 0 and q1 == array.shape[-2] and k1 == array.shape[-1]):
        return array
    return array[..., q0:q1, k0:k1]


def _product(target, a, b, xp, first=True):
    """``target = a @ b`` (``first``) or ``target += a @ b``, summed to ``target``'s shape over the axes it
    broadcasts along; ``a @ b`` itself, a fresh array, when ``target`` is ``None``."""
    if target is None:
        return a @ b  # (NumPy's matmul is slower with out=None than `@`)
    batch = a.shape[:-2]
    if b.shape[:-2] != batch:
        batch = _broadcast(batch, b.shape[:-2])
    if first and target.shape[:-2] == batch:
        xp.matmul(a, b, out=target)
    elif first:
        target[...] = ops.sum_to(a @ b, target.shape)
    else:
        target += ops.sum_to(a @ b, target.shape)
    return target


def _batch_of(a, b):
    """The batch shape of ``a @ b``: their leading axes broadcast."""
    return _broadcast(a.shape[:-2], b.shape[:-2])


def _broadcast(batch, other):
    """Two batch shapes broadcast: at once when they are equal, the common case (``np.broadcast_shapes``
    allocates)."""
    return batch if other == batch else tuple(np.broadcast_shapes(batch, other))


class Arrays:
    """One attention pass's arrays: the whole pass's, or a unit's (``cut``: views of its batch slices).

    ``query`` is ``Q·scale``; ``weights`` is ``P (…, Lq, Lk)`` where the schedule keeps it, ``lse (…, Lq, 1)``
    the log-sum-exp where it keeps that; ``out`` the output ``O``; ``keep`` dropout's scaled keep-mask. The
    online softmax's ``row_max`` (m) and ``denominator`` (l), and in backward the gradients, are set on it too.
    ``attention`` returns the whole pass's, which is what ``attention_backward`` reads."""

    NAMES = ("query", "key", "value", "keep", "weights", "lse", "out", "row_max", "denominator", "grad", "grad_query",
             "grad_key", "grad_value", "grad_scores")

    query = key = value = keep = weights = lse = out = row_max = denominator = None
    grad = grad_query = grad_key = grad_value = grad_scores = attn_mask = allowed = grad_mask = D = None
    whole = None  # the tile that is all of a unit's queries and keys, (0, Lq, 0, Lk): its arrays are that tile's rows
    direct = False  # Q, K and V of one batch shape: a whole tile's products go straight into their arrays (nothing
    # summed over broadcast axes, no _product)

    def __init__(self, xp, is_causal, batch_ndim, query=None, key=None, value=None, keep=None, attn_mask=None,
                 allowed=None):
        self.xp, self.is_causal, self.batch_ndim = xp, is_causal, batch_ndim
        self.query, self.key, self.value, self.keep, self.attn_mask, self.allowed = (query, key, value, keep,
                                                                                     attn_mask, allowed)
        if query is not None:
            query_shape, key_shape = query.shape, key.shape
            self.whole = (0, query_shape[-2], 0, key_shape[-2])
            self.direct = query_shape[:-2] == key_shape[:-2] == value.shape[:-2]

    def cut(self, index):
        """The arrays of the batch slices ``index`` (views); itself for the whole batch (``()``)."""
        if not index:
            return self
        unit = Arrays(self.xp, self.is_causal, self.batch_ndim)
        unit.whole, unit.direct = self.whole, self.direct  # (a unit cuts the batch axes alone)
        for name in self.NAMES:
            array = getattr(self, name)
            setattr(unit, name, None if array is None else array[index])
        unit.attn_mask = _part(self.attn_mask, self.batch_ndim, index)
        unit.allowed = _part(self.allowed, self.batch_ndim, index)
        unit.grad_mask = self.grad_mask  # (a mask gradient is accumulated by a schedule of one unit)
        return unit


def _views(a, tile):
    """``(Q·scale, K, V, G)`` of one tile of ``a`` (a unit's arrays) that is not all of it (``a.whole``, whose rows are
    the arrays themselves: no views, nor below any other array's part, ``x if whole else _rows(x, …)``): its rows of
    each, views (``(…, R, E)``, ``(…, C, E)``, ``(…, C, Ev)``, ``(…, R, Ev)``)."""
    q0, q1, k0, k1 = tile
    grad = None if a.grad is None else a.grad[..., q0:q1, :]
    return a.query[..., q0:q1, :], a.key[..., k0:k1, :], a.value[..., k0:k1, :], grad


def _scores(a, tile, q, k, target):
    """``S = Q·scale Kᵀ + mask`` of one tile of ``a`` (a unit's arrays; ``q``, ``k`` the tile's rows of ``Q·scale``
    and ``K``), forbidden keys ``-inf``, into ``target`` (a view of ``P``, or a scratch array), or a fresh array when
    ``target`` is ``None``; returns it."""
    xp = a.xp
    q0, q1, k0, k1 = tile
    k_t = k.swapaxes(-1, -2)  # (…, E, C)
    if target is None:
        scores = q @ k_t  # (…, R, C)
    elif _batch_of(q, k_t) == target.shape[:-2]:
        scores = xp.matmul(q, k_t, out=target)
    else:  # V alone brings leading axes: the scores are the same along them
        target[...] = q @ k_t
        scores = target
    if a.attn_mask is not None:
        scores += _tile_of(a.attn_mask, *tile)  # the mask broadcasts to the scores (checked by the caller)
    if a.allowed is not None:
        xp.copyto(scores, -math.inf, where=~_tile_of(a.allowed, *tile))
    crossing = min(q1, k1 - 1) - q0 if a.is_causal else 0  # the tile's first rows that see keys past themselves
    if crossing > 0:  # query i may attend key j <= i
        rows = scores if crossing == q1 - q0 else scores[..., :crossing, :]  # (…, c, C)
        xp.copyto(rows, -math.inf, where=xp.arange(k0, k1) > xp.arange(q0, q0 + crossing)[:, None])
    return scores


def _scratch(a, shape, slot):
    """A unit's scratch array of ``shape``, made at its first tile and reused by the next (``slot``: which one)."""
    scratch = a.__dict__.setdefault("scratch", {})  # (a unit's own: units that share one never run at once)
    buffer = scratch.get(slot)
    size = math.prod(shape)
    if buffer is None or buffer.size < size:
        buffer = scratch[slot] = buffers.empty(a.xp, (size,), a.query.dtype)
    return buffer[:size].reshape(shape)


def _tile_shape(a, tile):
    q0, q1, k0, k1 = tile
    return _batch_of(a.query, a.key) + (q1 - q0, k1 - k0)


# ----------------------------------------------------------------------------- forward


def attention(query, key, value, attn_mask, allowed, is_causal, scale, dropout_p, schedule, out=None):
    """``(O, arrays)``: ``O = dropout(masked softmax(Q·scale Kᵀ + mask)) V`` ``(…, Lq, Ev)`` (written into ``out``
    when given, e.g. a view laid out as merged heads), cut as ``schedule`` says, and the pass's ``Arrays``, which
    ``attention_backward`` reads (``arrays.weights``: ``P (…, Lq, Lk)`` where the schedule keeps it; ``arrays.keep``:
    dropout's scaled keep-mask, or ``None``). ``attn_mask`` is added to the scores, ``allowed`` (boolean, ``True`` =
    may attend) and ``is_causal`` forbid keys; all broadcast."""
    xp = backend.namespace(query)
    query_shape, key_shape = query.shape, key.shape
    Lq, Lk = query_shape[-2], key_shape[-2]
    batch = query_shape[:-2]
    if key_shape[:-2] != batch:
        batch = _broadcast(batch, key_shape[:-2])
    keep = None
    if dropout_p:  # F.dropout's draw over the weights (backend.dropout_mask: the same draw)
        keep = backend.dropout_mask(batch + (Lq, Lk), dropout_p, query.dtype, backend.device_of(query))
    if type(scale) is not float:  # (a NumPy scalar of another dtype would promote Q·scale; a float takes Q's dtype)
        scale = query.dtype.type(scale)
    if schedule.one_tile and math.prod(batch) * Lq * Lk * query.itemsize < buffers.SMALLEST_KEPT:  # small: fresh arrays
        a = Arrays(xp, is_causal, len(batch), query * scale, key, value, keep, attn_mask, allowed)  # Q·scale
        a.weights, a.out = forward_tile(a, schedule.units[0][1][0], True, out)
        return a.out, a
    made = out is None
    if made:
        out = buffers.empty(xp, _broadcast(batch, value.shape[:-2]) + (Lq, value.shape[-1]), query.dtype)  # O
    by_slices = not schedule.one_tile and all(index for index, _ in schedule.units)  # each unit scales its own
    scaled = buffers.empty(xp, query.shape, query.dtype)  # Q·scale (the cheaper side): here, or by each unit
    if not by_slices:
        xp.multiply(query, scale, out=scaled)
    a = Arrays(xp, is_causal, len(batch), scaled, key, value, keep, attn_mask, allowed)
    if schedule.one_tile:  # the whole array as one tile: no cuts
        a.weights = buffers.empty(xp, batch + (Lq, Lk), query.dtype)  # P
        a.weights, a.out = forward_tile(a, schedule.units[0][1][0], True, out)
        return a.out, a
    online = schedule.keeps == "lse"
    if schedule.keeps == "weights":
        a.weights = buffers.empty(xp, batch + (Lq, Lk), query.dtype)  # P, kept for backward
    if online and made:
        out[...] = 0  # (key blocks past the last query are never reached)
    a.out = out
    if online:
        a.row_max = xp.full(batch + (Lq, 1), -math.inf, dtype=query.dtype)  # m
        a.denominator = xp.zeros(batch + (Lq, 1), dtype=query.dtype)  # l

    def run(first, last):  # units first:last
        for index, tiles in schedule.units[first:last]:
            unit = a.cut(index)
            if by_slices:
                xp.multiply(query[index], scale, out=unit.query)  # Q·scale of the unit's slices
            for number, tile in enumerate(tiles):
                forward_tile(unit, tile, number == 0)

    _run(run, schedule.units, schedule.pooled, schedule.one_blas_thread)
    if online:
        attended = a.denominator > 0  # (…, Lq, 1)
        safe_denominator = xp.where(attended, a.denominator, 1)
        out /= safe_denominator  # a row with no key: 0 / 1 = 0
        a.lse = xp.where(attended, a.row_max + xp.log(safe_denominator), math.inf)  # (…, Lq, 1)
        a.row_max = a.denominator = None
    a.__dict__.pop("scratch", None)
    return out, a


def _run(task, units, pooled, one_blas_thread):
    """``task(first, last)`` over ``units``: on the pool where ``pooled``, each unit's products on one BLAS thread
    where ``one_blas_thread`` (the schedule's choices)."""
    if len(units) == 1 and not one_blas_thread:  # one unit: here, at once
        task(0, 1)
        return
    ranges = [(i, i + 1) for i in range(len(units))]
    if one_blas_thread:
        with parallel.one_blas_thread():
            parallel.run(task, ranges, pooled)
    else:
        parallel.run(task, ranges, pooled)


def forward_tile(a, tile, first, out=None):
    """One tile's forward on a unit's arrays ``a``; returns ``(P or exp(S - m'), O or acc)``.

    Without a running maximum (``a.row_max``), the tile holds every key its rows attend: ``P = softmax(S)`` at once
    (into ``a.weights``, or a fresh array), ``O = (P ∘ M) V`` (into ``a.out``, ``out``, or a fresh array).
    With one, the tile is one key block of its rows: the online softmax's update of ``m``, ``l`` and ``acc``
    (``a.out``); ``first``: the unit's first tile, which covers all its rows (``acc`` is 0 until it comes)."""
    xp = a.xp
    q0, q1, k0, k1 = tile
    whole = tile == a.whole
    query, key, value, _ = (a.query, a.key, a.value, None) if whole else _views(a, tile)
    if a.row_max is None:
        probs = _scores(a, tile, query, key, a.weights if whole else _block(a.weights, *tile))  # S (…, R, C)
        if probs.size:
            softmax_into(probs, probs)  # P
        dropped = probs if a.keep is None else probs * (a.keep if whole else _block(a.keep, *tile))  # P̃ = P ∘ M
        target = a.out if out is None else out
        if whole and a.direct:  # O = P̃ V, straight into its array (or a fresh one)
            return probs, dropped @ value if target is None else xp.matmul(dropped, value, out=target)
        return probs, _product(target if whole else _rows(target, q0, q1), dropped, value, xp)  # O = P̃ V
    probs = _scores(a, tile, query, key, _scratch(a, _tile_shape(a, tile), 0))  # S_b (…, R, C)
    m, l, acc = (_rows(array, q0, q1) for array in (a.row_max, a.denominator, a.out))  # (…, R, 1), (…, R, Ev)
    new_max = xp.maximum(m, probs.max(axis=-1, keepdims=True))  # m'
    shift = xp.where(new_max > -math.inf, new_max, 0)  # a row with no key yet: exp(-inf - 0) = 0
    rescale = xp.exp(m - shift)  # exp(m - m'); 0 while m = -inf
    probs -= shift
    xp.exp(probs, out=probs)  # exp(S_b - m')
    l *= rescale
    l += row_sums(probs)
    acc *= rescale
    m[...] = new_max
    return probs, _product(acc, probs, value, xp, first)  # acc += exp(S_b - m') V_b


# ----------------------------------------------------------------------------- backward


def attention_backward(grad, a, schedule, scale, mask_shape=None, out=None, fresh=(False, False, False)):
    """``(dQ, dK, dV, dmask)`` of ``attention`` for ``grad = ∂L/∂O`` (laid out as the output ``a.out``) and the
    pass's arrays ``a``, cut as ``schedule`` says (the forward's, or the router's answer for backward), before any
    sum over broadcast axes (each of ``grad``'s leading shape; written into ``out = (dQ, dK, dV)`` when given);
    ``dmask`` is ``None`` unless ``mask_shape`` is given. ``fresh``: which of ``dQ, dK, dV`` are made as arrays of
    their own rather than in ``fast.buffers``' memory (a gradient a leaf will keep as its ``.grad``: the engine
    takes an array that owns its memory as it is, and copies a view).

    ``D = rowsum(G ∘ O)`` is each row's ``Σ_k dP·P`` (Dao et al. 2022): ``Σ_k (G_i·V_k) M_ik P_ik = G_i · O_i``,
    a sum over ``Ev`` per row instead of a pass over the scores (``kernels.rows_dot``)."""
    a.grad = grad
    if schedule.one_tile:  # the whole array as one tile: into ``out``, or fresh arrays
        if out is not None:
            a.grad_query, a.grad_key, a.grad_value = out
        grad_scores, grad_query, grad_key, grad_value = backward_tile(a, schedule.units[0][1][0], True, True)
        grad_query *= scale  # dQ = dS K·scale
        grad_mask = None if mask_shape is None else ops.sum_to(grad_scores, mask_shape)
        a.grad = a.D = a.grad_query = a.grad_key = a.grad_value = None
        return grad_query, grad_key, grad_value, grad_mask
    xp = backend.namespace(grad)
    lead, (Lq, E), (Lk, Ev) = grad.shape[:-2], a.query.shape[-2:], a.value.shape[-2:]
    online = schedule.keeps == "lse"
    if out is None:  # fast.buffers' memory from its size on, or arrays of their own (``fresh``)
        out = tuple(xp.empty(lead + (n, size), grad.dtype) if own else buffers.empty(xp, lead + (n, size), grad.dtype)
                    for (n, size), own in zip(((Lq, E), (Lk, E), (Lk, Ev)), fresh))
        if online:  # (key blocks past the last query are never reached)
            for array in out:
                array[...] = 0
    a.grad_query, a.grad_key, a.grad_value = out
    two_passes = bool(schedule.key_units)
    if not online and (two_passes or mask_shape is not None):
        a.grad_scores = buffers.empty(xp, lead + (Lq, Lk), grad.dtype)  # dS, whole: for dmask, or the keys' pass
    if online and mask_shape is not None:
        a.grad_mask = xp.zeros(mask_shape, dtype=grad.dtype)
        a.grad_mask = a.grad_mask.reshape((1,) * (2 - a.grad_mask.ndim) + a.grad_mask.shape)  # (…, Lq or 1, Lk or 1)

    if not schedule.units[0][0]:  # units of the whole batch (runs of queries) share one D
        a.D = rows_dot(grad, a.out)

    def run(first, last):  # units first:last
        for index, tiles in schedule.units[first:last]:
            unit = a.cut(index)
            for number, tile in enumerate(tiles):
                backward_tile(unit, tile, number == 0, not two_passes)

    def run_keys(first, last):  # the keys' pass: dK and dV from dS, a run of keys at a time
        for index, tiles in schedule.key_units[first:last]:
            unit = a.cut(index)
            for tile in tiles:
                backward_tile(unit, tile, True, True, queries=False)

    _run(run, schedule.units, schedule.pooled, schedule.one_blas_thread)
    if two_passes:
        _run(run_keys, schedule.key_units, schedule.key_pooled, schedule.one_blas_thread)
    a.grad_query *= scale  # dQ = dS K·scale
    grad_mask = None
    if mask_shape is not None:
        grad_mask = a.grad_mask.reshape(mask_shape) if online else ops.sum_to(a.grad_scores, mask_shape)
    grads = (a.grad_query, a.grad_key, a.grad_value, grad_mask)
    a.grad = a.grad_query = a.grad_key = a.grad_value = a.grad_scores = a.grad_mask = a.D = None
    a.__dict__.pop("scratch", None)
    return grads


def backward_tile(a, tile, first, keys, queries=True):
    """One tile's backward on a unit's arrays ``a``; returns ``(dS, dQ, dK, dV)`` of the tile (fresh arrays where
    ``a`` has no gradient arrays to write into).

    ``P`` is the kept weights' tile, or recomputed from the log-sum-exp, ``exp(S - lse)``; ``dS = P ∘ (dP - D)``
    with ``dP = (G Vᵀ) ∘ M`` is computed, or read from ``a.grad_scores`` in the keys' pass (``queries=False``).
    Then ``dQ (+)= dS K`` (``first``: the unit's first tile, covering all its rows, writes it; scaled at the end),
    and, with ``keys``, ``dK = dSᵀ (Q·scale)``, ``dV = (P ∘ M)ᵀ G`` (each key tile comes once per unit)."""
    xp = a.xp
    q0, q1, k0, k1 = tile
    whole = tile == a.whole
    query, key, value, grad = (a.query, a.key, a.value, a.grad) if whole else _views(a, tile)
    if a.lse is None:
        probs = a.weights if whole else _block(a.weights, *tile)  # P (…, R, C)
    else:
        probs = _scores(a, tile, query, key, _scratch(a, _tile_shape(a, tile), 0))
        probs -= _rows(a.lse, q0, q1)
        xp.exp(probs, out=probs)  # P = exp(S - lse)
    if queries:
        target = a.grad_scores if whole else _block(a.grad_scores, *tile)
        if target is None and a.lse is not None:
            target = _scratch(a, _batch_of(grad, value) + probs.shape[-2:], 1)
        value_t = value.swapaxes(-1, -2)  # (…, Ev, C)
        grad_scores = grad @ value_t if target is None else _product(target, grad, value_t, xp)  # G Vᵀ
        if a.keep is not None:
            grad_scores *= _block(a.keep, *tile)  # dP
        grad_scores -= rows_dot_of(a) if whole else _rows(rows_dot_of(a), q0, q1)
        grad_scores *= probs  # dS = P ∘ (dP - D)
        if a.grad_mask is not None:  # dmask += dS, summed over the axes the mask broadcasts
            part = _tile_of(a.grad_mask, *tile)
            part += ops.sum_to(grad_scores, part.shape)
        if whole and first and a.direct:  # dS K, straight into its array (or a fresh one); so dV and dK below
            target = a.grad_query
            grad_query = grad_scores @ key if target is None else xp.matmul(grad_scores, key, out=target)
        else:
            grad_query = _product(a.grad_query if whole else _rows(a.grad_query, q0, q1), grad_scores, key, xp,
                                  first)  # dS K
    else:
        grad_scores, grad_query = _block(a.grad_scores, *tile), None
    grad_key = grad_value = None
    if keys:
        dropped = probs if a.keep is None else probs * (a.keep if whole else _block(a.keep, *tile))  # P̃
        dropped_t, grad_scores_t = dropped.swapaxes(-1, -2), grad_scores.swapaxes(-1, -2)
        if whole and a.direct:
            target_value, target_key = a.grad_value, a.grad_key
            grad_value = dropped_t @ grad if target_value is None else xp.matmul(dropped_t, grad, out=target_value)
            grad_key = grad_scores_t @ query if target_key is None else xp.matmul(grad_scores_t, query, out=target_key)
        else:
            grad_value = _product(a.grad_value if whole else _rows(a.grad_value, k0, k1), dropped_t, grad,
                                  xp)  # dV = P̃ᵀ G
            grad_key = _product(a.grad_key if whole else _rows(a.grad_key, k0, k1), grad_scores_t, query,
                                xp)  # dK = dSᵀ (Q·scale)
    return grad_scores, grad_query, grad_key, grad_value


def rows_dot_of(a):
    """``D = rowsum(G ∘ O)`` ``(…, Lq, 1)`` of a unit's arrays, computed at its first tile and kept for the next."""
    if a.D is None:
        a.D = rows_dot(a.grad, a.out)
    return a.D


# ----------------------------------------------------------------------------- heads packed and merged


def packed_attention(qkv, attn_mask, allowed, is_causal, scale, dropout_p, schedule):
    """``(O, arrays)``: attention over packed ``qkv (3, B, H, L, D)``, its output with the heads merged
    ``(B, L, H·D)`` (a fresh array, written in that layout) and the pass's ``Arrays``. Masks as ``attention``'s."""
    _, B, H, L, D = qkv.shape
    xp = backend.namespace(qkv)
    if B * L * H * D * qkv.itemsize < buffers.SMALLEST_KEPT:  # (fast.buffers' own test, first: a small one is plain)
        merged = xp.empty((B, L, H * D), qkv.dtype)
    else:
        merged = buffers.empty(xp, (B, L, H * D), qkv.dtype)
    _, arrays = attention(qkv[0], qkv[1], qkv[2], attn_mask, allowed, is_causal, scale, dropout_p, schedule,
                          out=split_heads(merged, H))  # heads written straight into (B, L, H·D)
    return merged, arrays  # (B, L, H·D)


def packed_attention_backward(grad, arrays, schedule, scale, mask_shape=None):
    """``(dqkv, dmask)`` of ``packed_attention`` for ``grad = ∂L/∂O (B, L, H·D)`` (or its rows ``(B·L, H·D)``):
    ``dqkv (3, B, H, L, D)`` a view of a fresh ``(B, L, 3·H·D)`` array (``kernels.split_packed_heads``), the layout
    ``InProjection``'s output has, so that its backward reads it as ``(B·L, 3·H·D)`` rows without a copy;
    ``dmask`` ``None`` unless ``mask_shape`` is given."""
    B, H, L, D = arrays.query.shape
    grad = split_heads(grad.reshape(B, L, H * D), H)  # (B, H, L, D), a view laid out as the output
    grad_qkv = split_packed_heads(buffers.empty(backend.namespace(grad), (B, L, 3 * H * D), grad.dtype), H)
    *_, grad_mask = attention_backward(grad, arrays, schedule, scale, mask_shape,
                                       out=(grad_qkv[0], grad_qkv[1], grad_qkv[2]))  # written in place
    return grad_qkv, grad_mask  # (3, B, H, L, D)


def attention_by_sequences(query, key, value, schedule, scale, out):
    """Self-attention of sequences laid back to back, each within itself: ``query``, ``key``, ``value`` ``(H, T, D)``
    (views, any strides), ``schedule`` the router's ``sequence_schedule`` of their cumulative lengths (one unit per
    sequence, its rows against its own keys); ``O = softmax(Q·scale Kᵀ) V`` per sequence and head, written into
    ``out (H, T, D)`` (a view laid out as its reader wants) and returned. No mask, no dropout, nothing kept:
    inference on the real tokens of a padded batch (``blocks.SelfAttentionBlock`` with ``cu_seqlens``), where it
    gives what attention over the padded batch with its padding mask gives, without the padding's rows and columns
    in the products."""
    attention(query, key, value, None, None, False, scale, 0.0, schedule, out=out)
    return out
