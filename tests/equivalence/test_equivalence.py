"""Every fused form ``ta.compile`` swaps in, against the reference it replaces, in one table.

Each row of ``TABLE`` is ``(name, compiles, fast, reference, inputs)``: ``compiles`` is the ``nn`` class or the
``F`` function whose fused form (``tinyattn.fast.compile.MODULES`` / ``FUNCTIONS``) the row proves;
``inputs(data, variant)`` draws a case (float64 leaves, the arguments and the plain module, if any);
``fast(case)`` runs the compiled form (``ta.compile(module)`` or ``ta.compile(F.fn)``) and checks that the fused
node it names is in the graph; ``reference(case)`` runs the plain module or function. Both see one random
upstream gradient; the output and the gradient of every leaf (inputs, parameters, a float mask) must agree to
float64 rounding, and so must the second order: the gradient of ``Σ grad · v`` (a random ``v`` per leaf) with
respect to every leaf, through ``ta.autograd.grad(..., create_graph=True)``.
Attention rows run over every mask kind, the layer rows over both norm orders as well (and the GELU layers
over both GELU forms and two eps, with a drawn mask kind); dropout is off throughout (dropout in training is
proven by ``test_compile.py``'s model test). ``TransformerEncoder``'s fused form is an inference path (the real
tokens alone, no graph): its row compares values, and its training path (each layer's blocks) has a row of its
own. ``test_every_fused_form_has_a_row`` fails for a fused form without one.
The reference itself is checked against PyTorch and by finite differences in tests/nn and tests/attention.
"""

import math
from collections.abc import Callable
from typing import NamedTuple
from unittest import mock

import numpy as np
import pytest
from graph_checks import assert_same, grad_of, node_types
from hypothesis import assume, given
from hypothesis import strategies as st
from torch_parity import host

import tinyattn as ta
import tinyattn.nn as nn
import tinyattn.nn.functional as F
from tinyattn import fast
from tinyattn.fast import router, tuning
from tinyattn.fast.compile import FUNCTIONS, MODULES

TOLERANCE = dict(rtol=1e-9, atol=1e-11)
MASK_KINDS = ["none", "bool", "float", "padding", "causal", "bool+causal", "fully-masked rows"]
COMPILED_FORMS = "tinyattn.fast.compile"  # the module (``tinyattn.fast.compile`` the attribute is the function)


class Row(NamedTuple):
    name: str
    compiles: object  # the nn class or F function whose fused form this row proves
    fast: Callable  # case -> output of the compiled form (its fused node checked)
    reference: Callable  # case -> output of the plain module or function
    inputs: Callable  # (data, variant) -> case dict with "leaves"
    variants: tuple = (None,)
    inference: bool = False  # no graph: values only


def leaf(rng, *shape):
    return ta.tensor(rng.standard_normal(shape), requires_grad=True)


def seeded(data):
    return np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="seed"))


def expect_node(out, name):
    assert name in node_types(out), f"{name} is not in the graph: {sorted(node_types(out))}"
    return out


def compiled(fn):
    """The fused form of the library function ``fn`` (``ta.compile(fn)``), which must be another function."""
    form = ta.compile(fn)
    assert form is FUNCTIONS[fn] and form is not fn
    return form


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


# ----------------------------------------------------------------------------- functions


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


def sdpa(function, case, expected=None):
    out, weights = function(*case["args"], need_weights=False, **case["kwargs"])
    assert weights is None
    return out if expected is None else expect_node(out, expected)


def blocked_sdpa(case):
    with tuning.tuned(blocked_attention_min_keys=0, attention_block_size=case["block_size"]):
        return sdpa(compiled(F.scaled_dot_product_attention), case, "BlockedAttention")


# ----------------------------------------------------------------------------- modules


def compiled_module(case):
    """``ta.compile`` of the case's module: a copy whose class is the fused form, on the same parameters."""
    module = case["module"]
    copy = ta.compile(module)
    assert type(copy) is MODULES[type(module)] and copy is not module
    assert all(a is b for a, b in zip(copy.parameters(), module.parameters()))
    return copy


def run_module(case, compile_it=False, expected=()):
    module = compiled_module(case) if compile_it else case["module"]
    out = module(*case["args"], **case.get("kwargs", {}))
    out = out[0] + (0.0 if out[1] is None else out[1].sum((1, 3))[..., None]) if isinstance(out, tuple) else out
    for name in expected:
        expect_node(out, name)
    return out


def linear_module_case(data, bias):
    rng = seeded(data)
    n_in, n_out = data.draw(st.integers(1, 5)), data.draw(st.integers(1, 5))
    ta.manual_seed(int(rng.integers(2**31)))
    module = nn.Linear(n_in, n_out, bias=bias).double()
    x = leaf(rng, *data.draw(st.lists(st.integers(1, 3), max_size=2), label="batch"), n_in)
    return dict(module=module, args=(x,), leaves=[x] + list(module.parameters()))


def layer_norm_module_case(data, affine):
    rng = seeded(data)
    shape = data.draw(st.lists(st.integers(1, 4), min_size=1, max_size=3), label="shape")
    normalized = tuple(shape[len(shape) - data.draw(st.integers(1, len(shape)), label="ndim"):])
    module = nn.LayerNorm(normalized, eps=data.draw(st.sampled_from([1e-5, 1e-2]), label="eps"),
                          elementwise_affine=affine != "none", bias=affine == "both").double()
    for p in module.parameters():  # away from ones and zeros, so that each one shows
        p.data = rng.standard_normal(p.shape)
    x = leaf(rng, *shape)
    return dict(module=module, args=(x,), leaves=[x] + list(module.parameters()))


def mha_case(data, kind, cross=False, need_weights=False):
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
    return dict(module=module, args=(x, memory, memory),
                kwargs=dict(attn_mask=mask, is_causal=is_causal, need_weights=need_weights), leaves=leaves)


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


BLOCKS = ("SelfAttentionBlock", "FeedForwardBlock")
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
    out = run_module(case, True, BLOCKS)
    feed_forward = [n for n in graph_nodes(out) if type(n).__name__ == "FeedForwardBlock"]
    assert [n.activation for n in feed_forward] == [router.feed_forward_activation(case["module"].activation)]
    return out


def graph_nodes(out):
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
    """The compiled layer's blocks with their products over the pool (``pool_min_elements=0``: every block asks
    for it)."""
    with tuning.tuned(pool_min_elements=0):
        out = run_module(case, True, BLOCKS)
    blocks = [n for n in graph_nodes(out) if type(n).__name__ in BLOCKS]
    assert len(blocks) == 2 and all(n.on_pool for n in blocks)  # backward keeps the choice
    return out


def encoder_case(data, variant):
    """A post-norm encoder of one to three layers (ReLU or GELU, a final norm or none, even heads: PyTorch's
    nested-tensor conditions) on a padded batch; ``"real tokens"``: inference, the input needing no gradient;
    ``"training"``: the graph recorded (the layers' blocks, dropout 0), input and parameters needing gradients."""
    rng = seeded(data)
    H = data.draw(st.sampled_from([2, 4]), label="heads")
    E = H * data.draw(st.integers(1, 3), label="head size")
    activation = data.draw(st.sampled_from(["relu", "gelu"]), label="activation")
    ta.manual_seed(int(rng.integers(2**31)))
    layer = nn.TransformerEncoderLayer(E, H, dim_feedforward=data.draw(st.integers(1, 6), label="ff"), dropout=0.0,
                                       activation=activation)
    norm = nn.LayerNorm(E) if data.draw(st.booleans(), label="final norm") else None
    encoder = nn.TransformerEncoder(layer, data.draw(st.integers(1, 3), label="layers"), norm=norm).double()
    for p in encoder.parameters():  # non-zero biases, a final norm whose bias shows at the padding
        p.data = rng.standard_normal(p.shape) * 0.5
    B, L = data.draw(st.integers(1, 3), label="B"), data.draw(st.integers(1, 6), label="L")
    lengths = data.draw(st.lists(st.integers(0, L), min_size=B, max_size=B), label="lengths")
    inference = variant == "real tokens"
    x = ta.tensor(rng.standard_normal((B, L, E)), requires_grad=not inference)
    leaves = [] if inference else [x] + list(encoder.parameters())
    return dict(module=encoder.eval() if inference else encoder, args=(x,),
                kwargs=dict(mask=F.padding_mask(lengths, L)), leaves=leaves)


def encoder_on_real_tokens(case):
    """The compiled encoder in inference: ``fast.encoder_on_real_tokens`` runs (once), zeros at the padding."""
    spy = mock.patch(f"{COMPILED_FORMS}.encoder_on_real_tokens", wraps=fast.encoder_on_real_tokens)
    with spy as real_tokens:
        out = run_module(case, True)
    assert real_tokens.call_count == 1
    return out


# ----------------------------------------------------------------------------- the table


TABLE = [
    Row("linear", F.linear, lambda c: expect_node(compiled(F.linear)(*c["args"]), "Linear"),
        lambda c: F.linear(*c["args"]), linear_case, (True, False)),
    Row("layer_norm", F.layer_norm, lambda c: expect_node(compiled(F.layer_norm)(*c["args"]), "Normalize"),
        lambda c: F.layer_norm(*c["args"]), layer_norm_case, (True, False)),
    Row("cross_entropy", F.cross_entropy,
        lambda c: expect_node(compiled(F.cross_entropy)(*c["args"], **c["kwargs"]), "CrossEntropy"),
        lambda c: F.cross_entropy(*c["args"], **c["kwargs"]), cross_entropy_case, ("mean", "sum", "none")),
    Row("attention_fused", F.scaled_dot_product_attention,
        lambda c: sdpa(compiled(F.scaled_dot_product_attention), c, "Attention"),
        lambda c: sdpa(F.scaled_dot_product_attention, c), attention_case, tuple(MASK_KINDS)),
    Row("attention_blocked", F.scaled_dot_product_attention, blocked_sdpa,
        lambda c: sdpa(F.scaled_dot_product_attention, c), attention_case, tuple(MASK_KINDS)),
    Row("linear_module", nn.Linear, lambda c: run_module(c, True, ("Linear",)), run_module, linear_module_case,
        (True, False)),
    Row("layer_norm_module", nn.LayerNorm, lambda c: run_module(c, True, ("Normalize",)), run_module,
        layer_norm_module_case, ("both", "weight", "none")),
    Row("multi_head_self_attention_packed", nn.MultiHeadAttention,
        lambda c: run_module(c, True, ("InProjection", "PackedSelfAttention")), run_module, mha_case,
        tuple(MASK_KINDS)),
    Row("multi_head_cross_attention", nn.MultiHeadAttention,  # projections fused, every head's attention one node
        lambda c: run_module(c, True, ("Linear", "HeadsAttention")), run_module,
        lambda data, kind: mha_case(data, kind, cross=True), tuple(MASK_KINDS)),
    Row("multi_head_attention_weights", nn.MultiHeadAttention,  # its reference composition, projections fused
        lambda c: run_module(c, True, ("Linear",)), run_module,
        lambda data, kind: mha_case(data, kind, cross=True, need_weights=True), tuple(MASK_KINDS)),
    Row("encoder_layer_blocks", nn.TransformerEncoderLayer, lambda c: run_module(c, True, BLOCKS), run_module,
        layer_case, LAYER_VARIANTS),
    Row("decoder_layer_blocks", nn.TransformerDecoderLayer, lambda c: run_module(c, True, BLOCKS), run_module,
        lambda data, variant: layer_case(data, variant, decoder=True), LAYER_VARIANTS),
    Row("encoder_layer_gelu_blocks", nn.TransformerEncoderLayer, run_gelu_layer, run_module, gelu_layer_case,
        GELU_VARIANTS),
    Row("decoder_layer_gelu_blocks", nn.TransformerDecoderLayer, run_gelu_layer, run_module,
        lambda data, variant: gelu_layer_case(data, variant, decoder=True), GELU_VARIANTS[::2]),
    Row("encoder_layer_blocks_products_on_pool", nn.TransformerEncoderLayer, run_layer_products_on_pool, run_module,
        pooled_layer_case, (("relu", False), ("gelu", True))),
    Row("decoder_layer_blocks_products_on_pool", nn.TransformerDecoderLayer, run_layer_products_on_pool, run_module,
        lambda data, variant: pooled_layer_case(data, variant, decoder=True), (("gelu", False),)),
    Row("encoder_real_tokens", nn.TransformerEncoder, encoder_on_real_tokens, run_module, encoder_case,
        ("real tokens",), inference=True),
    Row("encoder_training_blocks", nn.TransformerEncoder, lambda c: run_module(c, True, BLOCKS), run_module,
        encoder_case, ("training",)),
]

CASES = [pytest.param(row, variant, id=f"{row.name}-{variant}") for row in TABLE for variant in row.variants]
GRAPH_CASES = [case for case in CASES if not case.values[0].inference]


def test_every_fused_form_has_a_row():
    """A fused form without its row in the table is a defect: every module class and every function that
    ``ta.compile`` swaps (``fast.compile.MODULES``, ``FUNCTIONS``) is proven by a row above."""
    proven = {row.compiles for row in TABLE}
    assert len(MODULES) >= 6 and len(FUNCTIONS) >= 4
    for form in [*MODULES, *FUNCTIONS]:
        assert form in proven, f"{getattr(form, '__name__', form)} has a fused form but no row in the table"
    assert {nn.TransformerEncoder} == {row.compiles for row in TABLE if row.inference}


def first_order(fn, case, upstream_seed):
    """The output and every leaf's gradient under a random upstream gradient (``backward``)."""
    leaves = [t for t in case["leaves"] if t is not None]
    for t in leaves:
        t.grad = None
    if not leaves:  # inference: no graph
        with ta.no_grad():
            return [host(fn(case)._data)]
    out = fn(case)
    upstream = np.random.default_rng(upstream_seed).standard_normal(out.shape)
    out.backward(ta.tensor(upstream))
    return [out.numpy()] + [grad_of(t) for t in leaves]


def second_order(fn, case, seed):
    """The gradient of ``Σ_leaves grad · v`` with respect to every leaf, ``grad`` the leaves' gradients under a
    random upstream gradient (with ``create_graph=True``), ``v`` a random direction per leaf; a leaf its gradients
    do not depend on gets zeros."""
    leaves = [t for t in case["leaves"] if t is not None]
    out = fn(case)
    rng = np.random.default_rng(seed)
    upstream = ta.tensor(rng.standard_normal(out.shape))
    grads = ta.autograd.grad(out, leaves, grad_outputs=upstream, create_graph=True, allow_unused=True)
    directions = [ta.tensor(rng.standard_normal(t.shape)) for t in leaves]
    total = sum((g * v).sum() for g, v in zip(grads, directions) if g is not None)
    if not getattr(total, "requires_grad", False):
        return [np.zeros(t.shape) for t in leaves]
    second = ta.autograd.grad(total, leaves, allow_unused=True)
    return [np.zeros(t.shape) if g is None else host(g._data) for g, t in zip(second, leaves)]


def smallest_spread(row, case):
    """The smallest standard deviation of a row that a layer norm of the reference run normalizes (rows of one
    value, as with one feature, left out: their output is exact). Below it the norm's derivatives amplify
    round-off by ``1/σ`` (first order) and ``1/σ²`` (second): two forms equal to rounding part there."""
    spreads, definition = [], F.layer_norm_definition

    def recording(input, ndim, weight, bias, eps):
        rows = host(input._data).reshape(-1, math.prod(input.shape[input.ndim - ndim:]))
        spread = rows.std(axis=1)
        spreads.extend(spread[(rows != rows[:, :1]).any(axis=1)])
        return definition(input, ndim, weight, bias, eps)

    with mock.patch.object(F, "layer_norm_definition", recording), ta.no_grad():
        row.reference(case)
    return min(spreads, default=math.inf)


@pytest.mark.parametrize("row, variant", CASES)
@given(data=st.data())
def test_compiled_form_equals_reference(row, variant, data):
    case = row.inputs(data, variant)
    assume(smallest_spread(row, case) > 1e-3)
    seed = data.draw(st.integers(0, 2**32 - 1), label="upstream seed")
    assert_same(first_order(row.fast, case, seed), first_order(row.reference, case, seed), **TOLERANCE)


@pytest.mark.parametrize("row, variant", GRAPH_CASES)
@given(data=st.data())
def test_compiled_form_equals_reference_second_order(row, variant, data):
    case = row.inputs(data, variant)
    assume(smallest_spread(row, case) > 0.05)
    seed = data.draw(st.integers(0, 2**32 - 1), label="upstream seed")
    fast_second = second_order(row.fast, case, seed)
    assert_same(fast_second, second_order(row.reference, case, seed), **TOLERANCE)


def test_the_second_order_comparison_can_fail():
    """The second-order check sees a wrong second derivative: a node whose backward is right but whose
    recomputation (what ``create_graph`` differentiates) is not gives other numbers."""
    rng = np.random.default_rng(0)
    x = ta.tensor(rng.standard_normal((3, 4)), requires_grad=True)
    w = ta.tensor(rng.standard_normal((5, 4)), requires_grad=True)
    case = dict(args=(x, w, None), leaves=[x, w])
    right = second_order(lambda c: F.linear(*c["args"]), case, 1)
    wrong = second_order(lambda c: F.linear(c["args"][0] * c["args"][0], c["args"][1]), case, 1)
    assert any(not np.allclose(a, b) for a, b in zip(right, wrong))


def test_the_reference_runs_no_fast_node():
    """A model that is not compiled holds none of ``tinyattn.fast``'s nodes, whatever it is called with."""
    fast_nodes = {name for name in dir(fast) if isinstance(getattr(fast, name), type)}
    layer = nn.TransformerDecoderLayer(8, 2, dim_feedforward=16).eval()
    out = layer(ta.randn(2, 3, 8, requires_grad=True), ta.randn(2, 4, 8), tgt_is_causal=True)
    loss = F.cross_entropy(F.linear(out, ta.randn(5, 8)).reshape(-1, 5), ta.tensor(np.zeros(6, dtype=np.int64)))
    attended, _ = F.scaled_dot_product_attention(*(ta.randn(2, 600, 4, requires_grad=True) for _ in range(3)),
                                                 need_weights=False)  # long keys: the blocked path, if compiled
    assert not fast_nodes & (node_types(loss) | node_types(attended))
    assert {"Softmax", "LayerNorm", "MatMul"} <= node_types(loss)
    dot = ta.viz.to_dot(loss)  # the picture a reader draws of it names the mathematics too
    assert "Softmax" in dot and "LayerNorm" in dot and "Normalize" not in dot
