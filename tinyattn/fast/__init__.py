"""The fast layer: fused nodes, residual blocks, blocked attention and the array kernels they share.

Nothing here is needed to understand what a layer computes: each fused node replaces a run of
nodes of a reference definition (``nn.functional``, ``nn.sdpa``, ``nn.attention``,
``nn.transformer``) with fewer passes over memory, and the test suite's equivalence table proves
it equal to that definition, values and gradients (the encoder on real tokens alone, a route with no
gradients, has its own: ``tests/equivalence/test_real_tokens.py``). ``tinyattn.routes`` decides when one runs
(``ta.explain`` prints where and why); ``ta.use_fast_paths(False)`` turns them all off.

    kernels.py      array-level steps (LayerNorm rows, ReLU and GELU rows, masked softmax, attention in
                    pieces of query rows and keys or sentence by sentence, projections)
    activations.py  GELU's kernels (normal CDF, both forms, and its backward) and a float32 erf
    nodes.py        Linear, Normalize, CrossEntropy, MaskedSoftmax, SplitHeads, MergeHeads,
                    InProjection, Attention, PackedSelfAttention
    blocked.py      BlockedAttention: keys a block at a time, with a running softmax
    blocks.py       SelfAttentionBlock, FeedForwardBlock: a Transformer layer's residual blocks; an
                    encoder stack on a padded batch's real tokens alone
    parallel.py     a small thread pool: a large pass goes in pieces of rows over every core

This package sits beside ``nn.functional`` and never imports the layers (``tinyattn.nn``).
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
    InProjection,
    Linear,
    MaskedSoftmax,
    MergeHeads,
    Normalize,
    PackedSelfAttention,
    SplitHeads,
    merge_heads,
    packed_self_attention,
    split_heads,
)
