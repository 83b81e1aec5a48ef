"""Every fast route against the reference definition it replaces, in one table.

Each row of ``TABLE`` is ``(name, fast, reference, inputs)``: ``inputs(data, variant)`` draws a case
(float64 leaves and the arguments), ``fast(case)`` runs under ``ta.use_fast_paths(True)`` and
returns the output, checking that the fast node it names is in the graph, and ``reference(case)``
runs under ``ta.use_fast_paths(False)``. Both see one random upstream gradient; the output and the
gradient of every leaf (inputs, parameters, a float mask) must agree to float64 rounding.
Attention rows run over every mask kind, the layer rows over both norm orders as well (and the
GELU layers over both GELU forms and two eps, with a drawn mask kind); dropout is off throughout
(the routes with dropout draw the same numbers but are proven by the layer tests).
The reference itself is checked against PyTorch and by finite differences in tests/nn and
tests/attention.
"""

from collections.abc import Callable
from typing import NamedTuple

import numpy as np
import pytest
from graph_checks import assert_same, grad_of, node_types
from hypothesis import given
from hypothesis import strategies as st

import tinyattn as ta
import tinyattn.nn as nn
import tinyattn.nn.functional as F
from tinyattn import dispatch, fast
from tinyattn.fast import router, tuning

TOLERANCE = dict(rtol=1e-9, atol=1e-11)
MASK_KINDS = ["none", "bool", "float", "padding", "causal", "bool+causal", "fully-masked rows"]


class Pair(NamedTuple):
    name: str
    fast: Callable
    reference: Callable
    inputs: Callable  # (data, variant) -> case dict with "leaves"
    variants: tuple = (None,)


def leaf(rng, *shape):
    return ta.tensor(rng.standard_normal(shape), requires_grad=True)


def seeded(data):
    return np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="seed"))


def expect_node(out, name):
    assert name in node_types(out), f"{name} is not in the graph: {sorted(node_types(out))}"
    return out


# ----------------------------------------------------------------------------- masks


def attention_mask(rng, kind, B, Lq, Lk, float_grad=True):
    """``(attn_mask, is_causal)`` of ``kind`` for scores ``(B, H, Lq, Lk)``."""
    if kind in ("none", "causal"):
        return None, kind == "causal"
    if kind == "float":
        return ta.tensor(rng.standard_normal((Lq, Lk)), requires_grad=float_grad), False
    if kind == "padding":
        return F.padding_mask(rng.integers(1, Lk + 1, size=B), Lk), False
    allowed = rng.random((B, 1, Lq, Lk)) < 0.6
    if kind == "fully-masked rows":
        allowed[:, :, rng.integers(0, Lq)] = False  # a query with no key at all: zeros, never NaN
    else:
        allowed[..., 0] = True
    return ta.tensor(allowed), kind == "bool+causal"


# ----------------------------------------------------------------------------- ops


def linear_case(data, bias):
    rng = seeded(data)
    batch = data.draw(st.lists(st.integers(1, 3), max_size=2), label="batch")
    n_in, n_out = data.draw(st.integers(1, 5)), data.draw(st.integers(1, 5))
    x, w = leaf(rng, *batch, n_in), leaf(rng, n_out, n_in)
    b = leaf(rng, n_out) if bias else None
    return dict(args=(x, w, b), leaves=[x, w, b])


def layer_norm_case(data, affine):
    rng = seeded(data)
    shape = data.draw(st.lists(st.integers(1, 4), min_size=1, max_size=3), label="shape")
    ndim = data.draw(st.integers(1, len(shape)), label="ndim")
    x = leaf(rng, *shape)
    normalized = tuple(shape[len(shape) - ndim:])
    w, b = (leaf(rng, *normalized), leaf(rng, *normalized)) if affine else (None, None)
    return dict(args=(x, normalized, w, b), leaves=[x, w, b])


def cross_entropy_case(data, reduction):
    rng = seeded(data)
    N, C = data.draw(st.integers(1, 4)), data.draw(st.integers(2, 5))
    extra = data.draw(st.lists(st.integers(1, 3), max_size=1), label="d")
    logits = leaf(rng, N, C, *extra)
    target = rng.integers(0, C, size=(N, *extra))
    target[rng.random(target.shape) < 0.3] = -100  # some ignored (never all: the mean's 0/0 is NaN)
    target.reshape(-1)[0] = 0
    smoothing = data.draw(st.sampled_from([0.0, 0.1]), label="label_smoothing")
    kwargs = dict(reduction=reduction, label_smoothing=smoothing)
    return dict(args=(logits, ta.tensor(target)), kwargs=kwargs, leaves=[logits])


def masked_softmax_case(data, kind):
    rng = seeded(data)
    shape = (data.draw(st.integers(1, 3)), data.draw(st.integers(1, 4)), data.draw(st.integers(1, 5)))
    scores = ta.tensor(rng.standard_normal(shape) * 3, requires_grad=True)
    allowed = None
    if kind != "none":
        allowed = rng.random(shape) < 0.6
        if kind == "fully-masked rows":
            allowed[:, 0] = False
    return dict(scores=scores, allowed=allowed, leaves=[scores])


def reference_masked_softmax(case):
    return F._softmax_over_allowed(case["scores"], case["allowed"])


def fast_masked_softmax(case):
    allowed = () if case["allowed"] is None else (ta.tensor(case["allowed"]),)
    return fast.MaskedSoftmax.apply(case["scores"], *allowed)


# ----------------------------------------------------------------------------- attention


def attention_case(data, kind):
    rng = seeded(data)
    B, H = data.draw(st.integers(1, 2)), data.draw(st.integers(1, 2))
    Lq, Lk, E, Ev = (data.draw(st.integers(1, 5), label=name) for name in ("Lq", "Lk", "E", "Ev"))
    q, k, v = leaf(rng, B, H, Lq, E), leaf(rng, B, H, Lk, E), leaf(rng, B, H, Lk, Ev)
    mask, is_causal = attention_mask(rng, kind, B, Lq, Lk)
    block_size = data.draw(st.integers(1, 4), label="block_size")
    kwargs = dict(attn_mask=mask, is_causal=is_causal)
    leaves = [q, k, v] + ([mask] if mask is not None and mask.requires_grad else [])
    return dict(args=(q, k, v), kwargs=kwargs, block_size=block_size, leaves=leaves)


def sdpa(case, need_weights, expected=None):
    out, weights = F.scaled_dot_product_attention(*case["args"], need_weights=need_weights, **case["kwargs"])
    if expected:
        expect_node(out, expected)
    return out if weights is None else out + weights.sum(-1, keepdim=True)  # the weights' gradient counts too


def blocked_sdpa(case):
    with tuning.tuned(blocked_attention_min_keys=0, attention_block_size=case["block_size"]):
        return sdpa(case, False, "BlockedAttention")


def mha_case(data, kind, cross=False):
    rng = seeded(data)
    B, L, H = data.draw(st.integers(1, 2)), data.draw(st.integers(1, 5)), data.draw(st.integers(1, 2))
    E = H * data.draw(st.integers(1, 3))
    ta.manual_seed(int(rng.integers(2**31)))
    module = nn.MultiHeadAttention(E, H, bias=data.draw(st.booleans(), label="bias")).double()
    x = leaf(rng, B, L, E)
    memory = leaf(rng, B, data.draw(st.integers(1, 5), label="S"), E) if cross else x
    mask, is_causal = attention_mask(rng, kind, B, L, memory.shape[1])
    leaves = [x] + ([memory] if cross else []) + list(module.parameters())
    leaves += [mask] if mask is not None and mask.requires_grad else []
    return dict(module=module, args=(x, memory, memory), kwargs=dict(attn_mask=mask, is_causal=is_causal),
                leaves=leaves)


def mha(case, need_weights, expected=None):
    out, weights = case["module"](*case["args"], need_weights=need_weights, **case["kwargs"])
    if expected:
        expect_node(out, expected)
    return out if weights is None else out + weights.sum((1, 3))[..., None]


# ----------------------------------------------------------------------------- Transformer layers


def layer_case(data, variant, decoder=False, activation="relu", eps=1e-5):
    kind, norm_first = variant
    rng = seeded(data)
    B, L, H = data.draw(st.integers(1, 2)), data.draw(st.integers(1, 5)), data.draw(st.integers(1, 2))
    E = H * data.draw(st.integers(1, 3))
    layer_type = nn.TransformerDecoderLayer if decoder else nn.TransformerEncoderLayer
    ta.manual_seed(int(rng.integers(2**31)))
    layer = layer_type(E, H, dim_feedforward=data.draw(st.integers(1, 6)), dropout=0.0, norm_first=norm_first,
                       activation=activation, layer_norm_eps=eps)
    layer = layer.double()
    x = leaf(rng, B, L, E)
    mask, is_causal = attention_mask(rng, kind, B, L, L, float_grad=False)
    if decoder:
        memory = leaf(rng, B, data.draw(st.integers(1, 5), label="S"), E)
        memory_mask = F.padding_mask(rng.integers(1, memory.shape[1] + 1, size=B), memory.shape[1])
        args = (x, memory)
        kwargs = dict(tgt_mask=mask, memory_mask=memory_mask if kind == "padding" else None, tgt_is_causal=is_causal)
        leaves = [x, memory]
    else:
        args, kwargs, leaves = (x,), dict(src_mask=mask, is_causal=is_causal), [x]
    return dict(module=layer, args=args, kwargs=kwargs, leaves=leaves + list(layer.parameters()))


def run_layer(case, expected=()):
    out = case["module"](*case["args"], **case["kwargs"])
    for name in expected:
        expect_node(out, name)
    return out


LAYER_VARIANTS = tuple((kind, norm_first) for kind in MASK_KINDS for norm_first in (False, True))
# GELU layers: both forms, both norm orders, BERT's eps and PyTorch's default; the mask kind is drawn
GELUS = {"gelu": "gelu", "gelu_tanh": nn.GELU(approximate="tanh")}
GELU_VARIANTS = tuple((form, norm_first, eps) for form in GELUS for norm_first in (False, True)
                      for eps in (1e-12, 1e-5))


def gelu_layer_case(data, variant, decoder=False):
    form, norm_first, eps = variant
    kind = data.draw(st.sampled_from(MASK_KINDS), label="mask")
    return layer_case(data, (kind, norm_first), decoder, GELUS[form], eps)


def run_gelu_layer(case):
    out = run_layer(case, ("SelfAttentionBlock", "FeedForwardBlock"))
    feed_forward = [n for n in node_types_of(out) if type(n).__name__ == "FeedForwardBlock"]
    assert [n.activation for n in feed_forward] == [router.feed_forward_activation(case["module"].activation)]
    return out


def node_types_of(out):
    """The nodes of ``out``'s graph themselves (``graph_checks.node_types`` gives their names)."""
    nodes, stack = {}, [out._ctx]
    while stack:
        ctx = stack.pop()
        if ctx is not None and id(ctx) not in nodes:
            nodes[id(ctx)] = ctx
            stack.extend(p._ctx for p in ctx.parents)
    return list(nodes.values())


def pooled_layer_case(data, variant, decoder=False):
    """A layer large enough that its products split over the pool (m·n·k over ``tuning.blas_one_thread_mnk``:
    80 rows × 64 wide, 128 hidden), ReLU post-norm or GELU pre-norm, the mask kind drawn; an encoder layer, or a
    decoder layer with a memory of 12 positions."""
    activation, norm_first = variant
    rng = seeded(data)
    kind = data.draw(st.sampled_from(MASK_KINDS), label="mask")
    ta.manual_seed(int(rng.integers(2**31)))
    layer_type = nn.TransformerDecoderLayer if decoder else nn.TransformerEncoderLayer
    layer = layer_type(64, 4, dim_feedforward=128, dropout=0.0, norm_first=norm_first, activation=activation).double()
    x = leaf(rng, 2, 40, 64)
    mask, is_causal = attention_mask(rng, kind, 2, 40, 40, float_grad=False)
    if decoder:
        memory = leaf(rng, 2, 12, 64)
        return dict(module=layer, args=(x, memory), kwargs=dict(tgt_mask=mask, tgt_is_causal=is_causal),
                    leaves=[x, memory] + list(layer.parameters()))
    return dict(module=layer, args=(x,), kwargs=dict(src_mask=mask, is_causal=is_causal),
                leaves=[x] + list(layer.parameters()))


def run_layer_products_on_pool(case):
    """The layer's blocks with their products over the pool (``pool_min_elements=0``: every block asks for it)."""
    with tuning.tuned(pool_min_elements=0):
        out = run_layer(case, ("SelfAttentionBlock", "FeedForwardBlock"))
    blocks = [n for n in node_types_of(out) if type(n).__name__ in ("SelfAttentionBlock", "FeedForwardBlock")]
    assert len(blocks) == 2 and all(n.on_pool for n in blocks)  # backward keeps the choice
    return out


TABLE = [
    Pair("linear", lambda c: fast.Linear.apply(*(a for a in c["args"] if a is not None)),
         lambda c: F.linear(*c["args"]), linear_case, (True, False)),
    Pair("layer_norm",
         lambda c: expect_node(F.layer_norm(*c["args"]), "Normalize"),
         lambda c: F.layer_norm(*c["args"]), layer_norm_case, (True, False)),
    Pair("cross_entropy",
         lambda c: expect_node(F.cross_entropy(*c["args"], **c["kwargs"]), "CrossEntropy"),
         lambda c: F.cross_entropy(*c["args"], **c["kwargs"]), cross_entropy_case, ("mean", "sum", "none")),
    Pair("masked_softmax", fast_masked_softmax, reference_masked_softmax, masked_softmax_case,
         ("none", "bool", "fully-masked rows")),
    Pair("attention_with_weights", lambda c: sdpa(c, True, "MaskedSoftmax"), lambda c: sdpa(c, True),
         attention_case, tuple(MASK_KINDS)),
    Pair("attention_fused", lambda c: sdpa(c, False, "Attention"), lambda c: sdpa(c, False),
         attention_case, tuple(MASK_KINDS)),
    Pair("attention_blocked", blocked_sdpa, lambda c: sdpa(c, False), attention_case, tuple(MASK_KINDS)),
    Pair("multi_head_self_attention_packed", lambda c: mha(c, False, "PackedSelfAttention"),
         lambda c: mha(c, False), mha_case, tuple(MASK_KINDS)),
    Pair("multi_head_attention_split_heads", lambda c: mha(c, True, "SplitHeads"), lambda c: mha(c, True),
         lambda data, kind: mha_case(data, kind, cross=True), tuple(MASK_KINDS)),
    Pair("encoder_layer_blocks", lambda c: run_layer(c, ("SelfAttentionBlock", "FeedForwardBlock")),
         run_layer, layer_case, LAYER_VARIANTS),
    Pair("decoder_layer_blocks", lambda c: run_layer(c, ("SelfAttentionBlock", "FeedForwardBlock")),
         run_layer, lambda data, variant: layer_case(data, variant, decoder=True), LAYER_VARIANTS),
    Pair("encoder_layer_gelu_blocks", run_gelu_layer, run_layer, gelu_layer_case, GELU_VARIANTS),
    Pair("encoder_layer_blocks_products_on_pool", run_layer_products_on_pool, run_layer, pooled_layer_case,
         (("relu", False), ("gelu", True))),
    Pair("decoder_layer_blocks_products_on_pool", run_layer_products_on_pool, run_layer,
         lambda data, variant: pooled_layer_case(data, variant, decoder=True), (("gelu", False),)),
    Pair("decoder_layer_gelu_blocks", run_gelu_layer, run_layer,
         lambda data, variant: gelu_layer_case(data, variant, decoder=True), GELU_VARIANTS[::2]),
]

CASES = [pytest.param(pair, variant, id=f"{pair.name}-{variant}") for pair in TABLE for variant in pair.variants]

# Each row of the fast layer's table (tinyattn.dispatch) and where it is proven equal to the reference: a pair
# above, or (two rows with no graph to compare) a test of its own.
PROVEN = {
    "fast.Linear": "linear", "fast.Normalize": "layer_norm", "fast.CrossEntropy": "cross_entropy",
    "fast.MaskedSoftmax": "masked_softmax", "fast.BlockedAttention": "attention_blocked",
    "fast.SplitHeads": "multi_head_attention_split_heads", "fast.MergeHeads": "multi_head_attention_split_heads",
    "fast.Attention": "attention_fused",
    "fast.InProjection + fast.PackedSelfAttention": "multi_head_self_attention_packed",
    "fast.SelfAttentionBlock, fast.FeedForwardBlock (encoder layer)": "encoder_layer_blocks",
    "fast.SelfAttentionBlock, fast.FeedForwardBlock (decoder layer)": "decoder_layer_blocks",
    "fast.encoder_on_real_tokens": "test_real_tokens.py::test_real_tokens_alone_equal_the_reference",
    **{f"the reference lines, no fused node inside ({kind})": "test_reference_lines.py::"
       "test_calls_after_a_create_graph_backward_run_the_reference_lines_and_equal_the_reference"
       for kind in ("multi-head attention", "encoder layer", "decoder layer")},
}


def test_every_row_of_the_table_is_proven_here_or_named():
    """A fast route without its row in the equivalence table is a defect: every row of the table that the
    reference layer consults maps to a pair above or to a test that exists."""
    pairs = {pair.name for pair in TABLE}
    rows = [row for unit in list(dispatch._TABLE) for row in dispatch.rows(unit)]
    assert len(rows) >= 12
    for row in rows:
        proof = PROVEN[row.name]
        if "::" in proof:
            module, test = proof.split("::")
            assert test in open(__file__.replace("test_equivalence.py", module)).read()
        else:
            assert proof in pairs, row.name


def run(fn, case, fast_paths, upstream_seed):
    leaves = [t for t in case["leaves"] if t is not None]
    for t in leaves:
        t.grad = None
    with ta.use_fast_paths(fast_paths):
        out = fn(case)
    upstream = np.random.default_rng(upstream_seed).standard_normal(out.shape)
    out.backward(ta.tensor(upstream))
    return [out.numpy()] + [grad_of(t) for t in leaves]


@pytest.mark.parametrize("pair, variant", CASES)
@given(data=st.data())
def test_fast_route_equals_reference(pair, variant, data):
    case = pair.inputs(data, variant)
    seed = data.draw(st.integers(0, 2**32 - 1), label="upstream seed")
    assert_same(run(pair.fast, case, True, seed), run(pair.reference, case, False, seed), **TOLERANCE)


def test_the_reference_runs_no_fast_node():
    """With fast paths off, a Transformer layer's graph holds none of ``tinyattn.fast``'s nodes."""
    fast_nodes = {name for name in dir(fast) if isinstance(getattr(fast, name), type)}
    layer = nn.TransformerDecoderLayer(8, 2, dim_feedforward=16)
    with ta.use_fast_paths(False):
        out = layer(ta.randn(2, 3, 8, requires_grad=True), ta.randn(2, 4, 8), tgt_is_causal=True)
        loss = F.cross_entropy(F.linear(out, ta.randn(5, 8)).reshape(-1, 5), ta.tensor(np.zeros(6, dtype=np.int64)))
    assert not fast_nodes & node_types(loss)
    assert {"Softmax", "LayerNorm", "MatMul"} <= node_types(loss)
    dot = ta.viz.to_dot(loss)  # the picture a reader draws of it names the mathematics too
    assert "Softmax" in dot and "LayerNorm" in dot and "Normalize" not in dot
