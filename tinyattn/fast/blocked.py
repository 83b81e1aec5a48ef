"""Memory-efficient attention: keys a block at a time with a running softmax (FlashAttention-2).

Only an ``(…, Lq, block)`` piece of the scores exists at a time, never the whole ``(…, Lq, Lk)``;
backward recomputes each block's probabilities. ``routes`` decides when it runs (by default from
512 keys on, with no dropout and the weights not asked for); the equivalence table proves it equal
to the reference attention.
"""

import math

import numpy as np

from .. import backend, ops
from ..masks import split_mask
from ..tensor import Function
from . import kernels

BLOCK_SIZE = 1024  # the most keys per block
BLOCK_ELEMENTS = 1 << 22  # and at most this many scores per block over the whole batch: 16 MiB in float32


def blocked_attention(query, key, value, attn_mask, is_causal, scale, block_size=None):
    """The memory-efficient path. ``block_size`` (keys per block) defaults to ``BLOCK_SIZE``, fewer
    (down to 64) when the whole batch's ``(…, Lq, block)`` scores would pass ``BLOCK_ELEMENTS``."""
    if block_size is None:
        batch = np.broadcast_shapes(query.shape[:-2], key.shape[:-2], value.shape[:-2])
        rows = math.prod(batch) * query.shape[-2]  # batch · Lq
        block_size = min(BLOCK_SIZE, max(64, BLOCK_ELEMENTS // max(rows, 1)))  # 64: BLAS needs some width
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
            denominator[rows] += kernels.row_sums(probs)
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
