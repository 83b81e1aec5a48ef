"""Floor 5, the fast layer: fused nodes, residual blocks, blocked attention, the array kernels they share,
and the router that says when each runs.

Nothing here is needed to understand what a layer computes: each fused node replaces a run of nodes
of a reference definition (``tinyattn.nn``) with fewer passes over memory, and the test suite's
equivalence table proves it equal to that definition, values and gradients. Importing this package
registers its rows into the table of ``tinyattn.dispatch`` (``table.register``); ``ta.explain``
prints which route each module takes and why; ``ta.use_fast_paths(False)`` turns them all off.

    router.py       every decision, each ``why_not_*`` with its reason; ``explain``
    table.py        the rows of the table: for each reference unit, the router's test and the fused form
    tuning.py       the thresholds and sizes, private: the router alone reads them
    nodes.py        Linear, Normalize, CrossEntropy, MaskedSoftmax, SplitHeads, MergeHeads, InProjection,
                    Attention, PackedSelfAttention
    attention.py    attention on arrays: one tiled kernel (a tile's forward, a tile's backward) that runs
                    whatever schedule the router gives (one tile, batch slices, query runs, key blocks
                    combined by the online softmax, sequences back to back)
    blocked.py      BlockedAttention: the tiled kernel with several key tiles per query run
    blocks.py       SelfAttentionBlock, FeedForwardBlock: a Transformer layer's residual blocks; an
                    encoder stack on a padded batch's real tokens alone
    kernels.py      array-level steps (LayerNorm rows, ReLU and GELU rows, masked softmax, projections)
    activations.py  GELU's kernels (normal CDF, both forms, and its backward) and a float32 erf
    parallel.py     a thread pool: runs the pieces of a pass over every core where the router says so
    buffers.py      the large arrays' memory, kept per thread and handed out again once free
    gradients.py    a leaf keeps a fresh gradient as its ``.grad`` instead of a copy (the engine's one slot)

It imports the reference layer (to know its classes), never the other way round.
"""

from . import gradients, table
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
    InProjection,
    Linear,
    MaskedSoftmax,
    MergeHeads,
    Normalize,
    PackedSelfAttention,
    SplitHeads,
    packed_self_attention,
)
from .router import explain  # noqa: F401

table.register()
gradients.install()  # the engine's slot for a leaf's gradient (tensor.LEAF_ACCUMULATOR)
