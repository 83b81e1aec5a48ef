"""Floor 5, the fast layer: ``ta.compile`` and the fused forms it swaps in — fused nodes, residual blocks,
blocked attention, the array kernels they share, and the router that says when each runs.

Nothing here is needed to understand what a layer computes, and nothing here runs unless asked for: a model
runs its reference definitions (``tinyattn.nn``) until ``ta.compile(model)`` returns its compiled copy. Each
fused node replaces a run of nodes of a reference definition with fewer passes over memory, and the test
suite's equivalence table proves it equal to that definition, values and gradients, first and second order.
``ta.explain`` prints what each module of a compiled model runs and why.

    compile.py      ta.compile: the fused forms of modules and functions, each falling back to its reference
    router.py       every decision, each ``why_not_*`` with its reason; ``explain``
    tuning.py       the thresholds and sizes, private: the router alone reads them
    nodes.py        Linear, Normalize, CrossEntropy, InProjection, Attention, HeadsAttention, PackedSelfAttention
    attention.py    attention on arrays: one tiled kernel (a tile's forward, a tile's backward) that runs
                    whatever schedule the router gives (one tile, batch slices, query runs, key blocks
                    combined by the online softmax, sequences back to back)
    blocked.py      BlockedAttention: the tiled kernel with several key tiles per query run
    blocks.py       SelfAttentionBlock, FeedForwardBlock: a Transformer layer's residual blocks; an
                    encoder stack on a padded batch's real tokens alone
    kernels.py      array-level steps (LayerNorm rows, ReLU and GELU rows, softmax, projections)
    activations.py  GELU's kernels (normal CDF, both forms, and its backward)
    parallel.py     a thread pool: runs the pieces of a pass over every core where the router says so
    buffers.py      the large arrays' memory, kept per thread and handed out again once free

It imports the reference layer (to know its classes), never the other way round.
"""

from .blocked import BlockedAttention, blocked_attention  # noqa: F401
from .blocks import (  # noqa: F401
    FeedForwardBlock,
    SelfAttentionBlock,
    encoder_on_real_tokens,
    feed_forward_block,
    self_attention_block,
)
from .nodes import (  # noqa: F401
    Attention,
    CrossEntropy,
    HeadsAttention,
    InProjection,
    Linear,
    Normalize,
    PackedSelfAttention,
    packed_self_attention,
)
from .router import explain  # noqa: F401
