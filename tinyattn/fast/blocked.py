"""Memory-efficient attention: keys a block at a time with a running softmax (FlashAttention-2).

Only an ``(…, Lq, block)`` piece of the scores exists at a time, never the whole ``(…, Lq, Lk)``;
backward recomputes each block's probabilities. ``fast.router`` decides when it runs (by default from
513 keys on, with no dropout and the weights not asked for); the equivalence table proves it equal
to the reference attention.
"""

import math

import numpy as np

from .. import backend, ops
from ..masks import split_mask
from ..tensor import Function
from . import kernels, parallel
from .nodes import attention_reference
from .tuning import values as tuning


def blocked_attention(query, key, value, attn_mask, is_causal, scale, block_size=None):
    """The memory-efficient path. ``block_size`` (keys per block) defaults to ``tuning.attention_max_block``, fewer
    (down to 64) when the whole batch's ``(…, Lq, block)`` scores would pass ``tuning.attention_block_elements``."""
    if block_size is None:
        batch = np.broadcast_shapes(query.shape[:-2], key.shape[:-2], value.shape[:-2])
        rows = math.prod(batch) * query.shape[-2]  # batch · Lq
        most = tuning.attention_block_elements // max(rows, 1)
        block_size = min(tuning.attention_max_block, max(64, most))  # 64: BLAS needs some width
    block_size = int(block_size)
    if block_size < 1:
        raise ValueError(f"block_size must be a positive number of keys, got {block_size}")
    float_mask, allowed = split_mask(attn_mask)  # a float mask is an input: it may need a gradient
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


def _add_product(target, a, b, xp, first):
    """``target += a @ b``, summed to ``target``'s shape over the axes it broadcasts along. ``first``:
    ``target`` is still all zeros, so a product of its very shape is written straight into it."""
    if first and target.shape == np.broadcast_shapes(a.shape[:-2], b.shape[:-2]) + (a.shape[-2], b.shape[-1]):
        xp.matmul(a, b, out=target)
    else:
        target += ops.sum_to(a @ b, target.shape)


def _flat(array):
    """``(…, R, C) -> (N, R, C)``, the leading axes as one: a view of an array made contiguous here."""
    return array.reshape((-1,) + array.shape[-2:])


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
    are skipped. Where Q, K and V share their batch (NumPy arrays), the pass goes a few whole batch
    slices at a time over ``fast.parallel``'s pool, each piece through every key block, its products
    on one BLAS thread (``_forward_in_slices``, ``_backward_in_slices``). Otherwise every product
    works on the whole batch at once (every leading index, e.g. each head) on the BLAS's own threads,
    and only a block's elementwise work (the running softmax's update, backward's ``P`` and ``dS``)
    goes over the pool. Either way the pieces depend on the shape alone, the same whether pooled or
    not. A block holds at most ``(…, Lq, block_size)`` scores, and no step holds more than two such
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
        self.above_diagonal = xp.triu(xp.ones((self.block_size,) * 2, dtype=bool), 1) if is_causal else None

        self.out = xp.zeros(self.batch + (Lq, Ev), dtype=dtype)  # acc, then acc / l
        row_max = xp.full(self.batch + (Lq, 1), -math.inf, dtype=dtype)  # m
        denominator = xp.zeros(self.batch + (Lq, 1), dtype=dtype)  # l
        if self._in_slices():
            self._forward_in_slices(xp, row_max, denominator)
        else:
            self._forward_whole_batch(xp, row_max, denominator)
        attended = denominator > 0  # (…, Lq, 1)
        safe_denominator = xp.where(attended, denominator, 1)
        self.out /= safe_denominator  # a row with no key: 0 / 1 = 0
        self.lse = xp.where(attended, row_max + xp.log(safe_denominator), math.inf)  # (…, Lq, 1)
        return self.out

    def _forward_whole_batch(self, xp, row_max, denominator):
        """Each key block over the whole batch: its products on the BLAS's threads, the running softmax's
        update a few batch slices at a time over the pool (rows are independent)."""
        whole = (self.query, self.key, self.mask, self.allowed, self.batch)
        self._forward_blocks(xp, whole, self.value, row_max, denominator, self.out, self._pooled(xp))

    def _forward_in_slices(self, xp, row_max, denominator):
        """A few batch slices at a time over the pool, each piece through every key block: its products
        (one BLAS thread per pool thread) and its running softmax, while the piece's scores are in the cache."""
        value, out, row_max, denominator = (_flat(a) for a in (self.value, self.out, row_max, denominator))

        def attend(n0, n1):  # batch slices n0:n1
            self._forward_blocks(xp, self._part(n0, n1), value[n0:n1], row_max[n0:n1], denominator[n0:n1],
                                 out[n0:n1], lambda step, *arrays: step(*arrays, xp))

        with parallel.one_blas_thread():
            parallel.run(attend, self._slice_ranges(), self.query, out.shape[0] * out.shape[1] * self.key.shape[-2])

    def _forward_blocks(self, xp, part, value, row_max, denominator, out, elementwise):
        """Every key block of the forward over ``part`` (``_scores``'s: the whole batch, or a few flattened
        slices) and the matching ``value``, ``row_max`` (m), ``denominator`` (l) and ``out`` (acc):
        ``S_b``, the running softmax's update (``elementwise(step, *arrays)`` runs it) and
        ``acc += exp(S_b - m') V_b``."""
        Lq, Lk = self.query.shape[-2], self.key.shape[-2]
        buffer = self._buffer(xp, math.prod(part[-1]))  # one block's scores, reused by every block
        for start, stop, first_row in self._blocks(Lq, Lk):
            rows = (Ellipsis, slice(first_row, Lq), slice(None))
            probs = self._scores(xp, part, start, stop, first_row, buffer)  # (…, R, b)
            acc = out[rows]  # (…, R, Ev), a view
            elementwise(_online_softmax_step, probs, row_max[rows], denominator[rows], acc)
            # the first block covers every row, and acc is 0 until it comes
            _add_product(acc, probs, value[..., start:stop, :], xp, first=start == 0)

    def reference(self, query, key, value, attn_mask=None):
        """The output from the reference attention's lines, for ``create_graph`` (see ``fast.nodes``)."""
        return attention_reference(query, key, value, attn_mask, self.allowed, self.is_causal, self.scale)

    def backward(self, grad):
        xp = backend.namespace(grad)
        needs = self.needs_grads()
        D = kernels.rows_dot(grad, self.out)  # (…, Lq, 1): rowsum(dO ∘ O)
        grads = [xp.zeros(t.shape, dtype=grad.dtype) if need else None for t, need in zip(self.parents, needs)]
        grad_mask = _at_least_2d(grads[3]) if len(grads) > 3 else None  # a view: accumulating fills grads[3]
        if grad_mask is None and self._in_slices():
            self._backward_in_slices(xp, grad, D, grads[:3])
        else:
            whole = (self.query, self.key, self.mask, self.allowed, self.batch)
            self._backward_blocks(xp, whole, self.value, grad, self.lse, D, grads[:3] + [grad_mask], self._pooled(xp))
        if grads[0] is not None:
            grads[0] *= self.scale  # dQ
        return tuple(grads)

    def _backward_in_slices(self, xp, grad, D, grads):
        """Backward a few batch slices at a time over the pool, as ``_forward_in_slices``: a slice's
        gradients of Q, K and V come from that slice alone, so the pieces write disjoint parts."""
        grad, D, lse, value = (_flat(a) for a in (grad, D, self.lse, self.value))  # (N, Lq or Lk, ·)
        grads = [None if g is None else _flat(g) for g in grads]  # views of zeros

        def backward(n0, n1):  # batch slices n0:n1
            self._backward_blocks(xp, self._part(n0, n1), value[n0:n1], grad[n0:n1], lse[n0:n1], D[n0:n1],
                                  [None if g is None else g[n0:n1] for g in grads] + [None],
                                  lambda step, *arrays: step(*arrays, xp))

        with parallel.one_blas_thread():
            parallel.run(backward, self._slice_ranges(), self.query, grad.shape[0] * grad.shape[1] * self.key.shape[-2])

    def _backward_blocks(self, xp, part, value, grad, lse, D, grads, elementwise):
        """Every key block of the backward over ``part`` (as ``_forward_blocks``) and the matching ``value``,
        ``grad`` (dO), ``lse``, ``D`` and ``grads`` (dQ, dK, dV, dmask, each ``None`` or zeros to fill): ``P``
        and ``dS`` (``elementwise(step, *arrays)`` runs them), then each gradient's product."""
        (query, key, *_), (grad_query, grad_key, grad_value, grad_mask) = part, grads
        Lq, Lk, slices = self.query.shape[-2], self.key.shape[-2], math.prod(part[-1])
        probs_buffer, grad_scores_buffer = self._buffer(xp, slices), self._buffer(xp, slices)
        for start, stop, first_row in self._blocks(Lq, Lk):
            rows, keys = (Ellipsis, slice(first_row, Lq), slice(None)), (Ellipsis, slice(start, stop), slice(None))
            probs = self._scores(xp, part, start, stop, first_row, probs_buffer)  # (…, R, b)
            grad_out = grad[rows]  # (…, R, Ev)
            grad_scores = _view(grad_scores_buffer, probs.shape)
            xp.matmul(grad_out, value[keys].swapaxes(-1, -2), out=grad_scores)  # dP = dO V_bᵀ
            elementwise(_probs_and_grad_scores_step, probs, grad_scores, lse[rows], D[rows])  # P, dS = P ∘ (dP - D)
            if grad_value is not None:  # dV_b = Pᵀ dO (each block of keys comes once)
                _add_product(grad_value[keys], probs.swapaxes(-1, -2), grad_out, xp, first=True)
            if grad_query is not None:  # dQ += dS K_b (· scale, once at the end); the first block covers every row
                _add_product(grad_query[rows], grad_scores, key[keys], xp, first=start == 0)
            if grad_key is not None:  # dK_b = dSᵀ (Q · scale)
                _add_product(grad_key[keys], grad_scores.swapaxes(-1, -2), query[rows], xp, first=True)
            if grad_mask is not None:  # dmask_b += dS, summed over the axes the mask broadcasts
                block = _block_index(grad_mask, first_row, start, stop)
                grad_mask[block] += ops.sum_to(grad_scores, grad_mask[block].shape)

    def _pooled(self, xp):
        """``elementwise(step, *arrays)`` for the whole batch: ``step`` over pieces of the flattened batch
        slices (``_by_slices``), on the pool when it pays."""
        return lambda step, *arrays: self._by_slices(step, [_flat(a) for a in arrays], xp)

    def _in_slices(self):
        """Whether the pass goes a few whole batch slices at a time (``_forward_in_slices``): NumPy arrays
        (CuPy wants few large kernels), and Q, K and V each of the whole batch (no axis broadcast among them)."""
        return (type(self.query) is np.ndarray
                and self.query.shape[:-2] == self.key.shape[:-2] == self.value.shape[:-2] == self.batch)

    def _slice_ranges(self):
        """Pieces of the flattened batch, each about ``piece_elements`` scores per block (the shape alone decides)."""
        return parallel.pieces(math.prod(self.batch), self.query.shape[-2] * self.block_size)

    def _part(self, n0, n1):
        """``(query, key, mask, allowed, batch)`` of the flattened batch slices ``n0:n1``, as ``_scores`` takes them."""
        query, key = _flat(self.query)[n0:n1], _flat(self.key)[n0:n1]  # (n, Lq, E), (n, Lk, E)
        return query, key, self._mask_part(self.mask, n0, n1), self._mask_part(self.allowed, n0, n1), (n1 - n0,)

    def _mask_part(self, mask, n0, n1):
        """The part ``(n or 1, Lq or 1, Lk or 1)`` of a mask ``(…, Lq or 1, Lk or 1)`` that covers the
        flattened batch slices ``n0:n1``: the mask itself when it is the same for every slice, else a copy."""
        if mask is None or all(n == 1 for n in mask.shape[:-2]):
            return None if mask is None else mask.reshape((1,) + mask.shape[-2:])
        every_slice = np.broadcast_to(mask, self.batch + mask.shape[-2:])  # a view
        return every_slice[np.unravel_index(np.arange(n0, n1), self.batch)]  # (n, ·, ·)

    @staticmethod
    def _by_slices(step, arrays, xp):
        """``step(*arrays, xp)`` over pieces of the batch slices: every array is ``(N, R, ·)``, its first
        axis the flattened batch (the first one a block's scores ``(N, R, b)``). The pieces are about
        ``piece_elements`` scores each, cut by the shape alone, and go over the pool when it pays; each
        row's work reads only its own row, and the same pieces run pooled or not: the same bits."""
        if type(arrays[0]) is not np.ndarray:  # CuPy (and the strict backend): the whole at once
            step(*arrays, xp)
            return
        N, R, b = arrays[0].shape
        parallel.run(lambda n0, n1: step(*[a[n0:n1] for a in arrays], xp), parallel.pieces(N, R * b), arrays[0])

    def _blocks(self, Lq, Lk):
        """``(start, stop, first_row)`` for each block of keys; causal attention skips the queries
        (``:first_row``) and the blocks (``start >= Lq``) that the block cannot reach."""
        for start in range(0, Lk, self.block_size):
            if self.is_causal and start >= Lq:
                return
            yield start, min(start + self.block_size, Lk), start if self.is_causal else 0

    def _buffer(self, xp, slices):
        """Room for one block of scores over ``slices`` batch slices, ``(slices, Lq, block_size)``."""
        return xp.empty(slices * self.query.shape[-2] * self.block_size, dtype=self.query.dtype)

    def _scores(self, xp, part, start, stop, first_row, buffer):
        """``S_b = Q[first_row:] K[start:stop]ᵀ·scale + mask``, forbidden keys ``-inf``, over ``part``
        (``(query, key, mask, allowed, batch)``: the whole batch, or a few slices of it): a
        ``(batch…, R, b)`` array in ``buffer``."""
        query, key, mask, allowed, batch = part
        q, k = query[..., first_row:, :], key[..., start:stop, :]  # (…, R, E), (…, b, E)
        scores = _view(buffer, batch + (q.shape[-2], k.shape[-2]))
        if np.broadcast_shapes(q.shape[:-2], k.shape[:-2]) == batch:
            xp.matmul(q, k.swapaxes(-1, -2), out=scores)
        else:  # V alone brings leading axes: the scores are the same along them
            scores[...] = q @ k.swapaxes(-1, -2)
        if mask is not None:
            scores += mask[_block_index(mask, first_row, start, stop)]
        if allowed is not None:
            xp.copyto(scores, -math.inf, where=~allowed[_block_index(allowed, first_row, start, stop)])
        if self.is_causal:  # query first_row + r may not attend key start + c > first_row + r
            corner = scores[..., : stop - start, :]  # (…, ≤b, b): the rows that cross the diagonal
            xp.copyto(corner, -math.inf, where=self.above_diagonal[: corner.shape[-2], : stop - start])
        return scores


def _online_softmax_step(probs, row_max, denominator, acc, xp):
    """One key block's update of the running softmax, in place, for some batch slices: ``probs``
    ``(n, R, b)`` holds ``S_b`` and becomes ``exp(S_b - m')``; ``row_max`` (m), ``denominator`` (l)
    ``(n, R, 1)`` and ``acc`` ``(n, R, Ev)`` are rescaled to the new maximum ``m'``."""
    new_max = xp.maximum(row_max, probs.max(axis=-1, keepdims=True))  # (n, R, 1)
    shift = xp.where(new_max > -math.inf, new_max, 0)  # a row with no key yet: exp(-inf - 0) = 0
    rescale = xp.exp(row_max - shift)  # exp(m - m'); 0 while m = -inf
    probs -= shift
    xp.exp(probs, out=probs)  # exp(S_b - m')
    denominator *= rescale
    denominator += kernels.row_sums(probs)
    acc *= rescale
    row_max[...] = new_max


def _probs_and_grad_scores_step(probs, grad_scores, lse, D, xp):
    """Backward's elementwise work on one key block, in place, for some batch slices (``(n, R, b)``
    arrays, ``lse`` and ``D`` ``(n, R, 1)``): ``probs``: ``S_b`` -> ``P = exp(S_b - lse)``;
    ``grad_scores``: ``dP`` -> ``dS = P ∘ (dP - D)``."""
    probs -= lse
    xp.exp(probs, out=probs)
    grad_scores -= D
    grad_scores *= probs
