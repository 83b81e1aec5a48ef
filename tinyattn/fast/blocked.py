"""Memory-efficient attention: keys a tile at a time with a running softmax (FlashAttention-2).

Only an ``(…, Lq, block)`` tile of the scores exists at a time, never the whole ``(…, Lq, Lk)``;
backward recomputes each tile's probabilities. It is ``fast.attention``'s one tiled kernel with a
schedule of several key tiles per query run (``router.attention_schedule``). ``fast.router`` decides when
it runs (by default from 513 keys on, with no dropout and the weights not asked for); the equivalence
table proves it equal to the reference attention.
"""

from .. import ops
from ..engine import Function
from ..masks import split_mask
from . import attention, router
from .nodes import attention_reference


def blocked_attention(query, key, value, attn_mask, is_causal, scale, block_size=None):
    """The memory-efficient path. ``block_size`` (keys per tile): ``router.key_block_size`` when ``None``."""
    if block_size is None:
        block_size = router.key_block_size(query, key, value)
    block_size = int(block_size)
    if block_size < 1:
        raise ValueError(f"block_size must be a positive number of keys, got {block_size}")
    float_mask, allowed = split_mask(attn_mask)  # a float mask is an input: it may need a gradient
    return BlockedAttention.apply(
        query, key, value, *float_mask, allowed=allowed, is_causal=is_causal, scale=scale, block_size=block_size
    )


class BlockedAttention(Function):
    """Attention over tiles of keys combined by the online softmax (FlashAttention-2, on arrays).

    ``forward(query, key, value, attn_mask=None, *, allowed, is_causal, scale, block_size)``:
    ``attn_mask`` a float mask added to the scores, ``allowed`` a boolean one (``True`` = may
    attend). It is ``fast.attention``'s tiled kernel with a schedule of ``block_size`` keys per tile
    (``router.attention_schedule``): for each key block ``b``, with ``S_b = Q·scale K_bᵀ + mask_b`` (forbidden
    keys ``-inf``) and per query row a running max ``m``, denominator ``l`` and sum ``acc``:

        m' = max(m, rowmax S_b)     l = l·exp(m - m') + Σ exp(S_b - m')
        acc = acc·exp(m - m') + exp(S_b - m') V_b          output = acc / l,   lse = m + log l

    Only ``Q·scale, K, V``, the output and ``lse`` (log-sum-exp per row) are kept. Backward
    recomputes each block's probabilities: with ``D = rowsum(dO ∘ O)``,

        P = exp(S_b - lse)   dV_b = Pᵀ dO   dP = dO V_bᵀ   dS = P ∘ (dP - D)
        dQ += dS K_b · scale   dK_b = dSᵀ Q · scale   dmask_b = dS (summed to the mask's shape)

    A row with no key allowed keeps ``l = 0``: its output is 0 and its ``lse`` is ``+inf``, so
    its ``P`` (and every gradient through it) is 0. With ``is_causal`` query ``i`` attends keys
    ``j <= i``: key block ``[j0, j1)`` meets only queries ``j0:``, and blocks past the last query
    are skipped. A tile holds at most ``(…, Lq, block_size)`` scores, and no step holds more than two such
    float arrays (and, with a boolean mask, one boolean array of that size).
    """

    saves_output = True  # backward reads the output (``self.arrays.out``; see Function)

    def forward(self, query, key, value, attn_mask=None, *, allowed, is_causal, scale, block_size):
        self.allowed, self.is_causal, self.scale = allowed, is_causal, scale
        self.dropout_p, self.rng_state = 0.0, None  # (no dropout here: for ``reference``)
        block_size = max(1, min(block_size, key.shape[-2]))
        self.schedule = router.attention_schedule(query, key, value, is_causal, key_block=block_size)
        self.block_size = block_size
        out, self.arrays = attention.attention(query, key, value, attn_mask, allowed, is_causal, scale, 0.0,
                                               self.schedule)
        return out

    def reference(self, query, key, value, attn_mask=None):
        """The output from the reference attention's lines, for ``create_graph`` (see ``fast.nodes``)."""
        return attention_reference(self, query, key, value, attn_mask)

    def backward(self, grad):
        needs = self.needs_grads()
        mask_grad = len(needs) > 3 and needs[3]
        schedule = self.schedule
        if mask_grad:  # a broadcast mask's gradient sums over the batch: the router may cut it otherwise
            arrays = self.arrays
            schedule = router.attention_schedule(arrays.query, arrays.key, arrays.value, self.is_causal,
                                                 key_block=self.block_size, mask_grad=True)
        grads = attention.attention_backward(grad, self.arrays, schedule, self.scale,
                                             mask_shape=self.parents[3].shape if mask_grad else None)
        return tuple(ops.sum_to(g, p.shape) if need else None for g, p, need in zip(grads, self.parents, needs))
