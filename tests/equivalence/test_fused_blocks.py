"""The Transformer layers' fused residual blocks (``tinyattn/fast/blocks.py``), each against the
reference definition it replaces (the layer not compiled).

- ``TransformerEncoderLayer`` and ``TransformerDecoderLayer`` compiled (``ta.compile``) against the
  same layer not compiled (``SelfAttentionBlock`` and ``FeedForwardBlock`` in the one graph, neither
  in the other): the output and the gradients of the input, of ``memory`` and of every parameter,
  in float64, pre- and post-norm, with every kind of mask (padding, boolean 2-D and 3-D, a float
  mask that needs no gradient, causal), in eval mode or with dropout 0; fully masked rows stay
  finite.
- The same layers, compiled, against ``torch.nn.TransformerEncoderLayer`` / ``TransformerDecoderLayer`` with
  copied weights, with causal and padding masks.
- Central finite differences in float64 on ``SelfAttentionBlock.apply`` and
  ``FeedForwardBlock.apply`` themselves, every input needing a gradient.
- Where a block would not compute what the layer's parts do, the compiled layer runs the composed nodes and
  still agrees with the layer not compiled: kept attention weights, dropout in training, a float
  mask that needs a gradient (which it gets), an activation other than ReLU and GELU, a replaced norm
  or projection (whose own forward runs), attention or a norm without biases; a layer whose ``_sa_block`` or
  ``_ff_block`` is overridden is not compiled at all (its parts are).
- Parameters (or an input) that need no gradient get none; the others agree with the composed run.
- Gradient arrays: no two share memory, none shares it with the upstream gradient, which stays
  unchanged; a second backward raises without ``retain_graph``, and with it adds the same
  gradients again, exactly.
- float32 in, float32 out and float32 gradients.
"""

import itertools
import math

import numpy as np
import pytest
import torch
from graph_checks import EXACT, assert_same, grad_of, leaf, node_types
from hypothesis import example, given
from hypothesis import strategies as st
from torch_parity import assert_parameter_grads_match, host, load_from_torch

import tinyattn as ta
import tinyattn.nn as nn
import tinyattn.nn.functional as F
from tinyattn.fast import FeedForwardBlock, SelfAttentionBlock
from tinyattn.testing import gradcheck

DEVICES = ["cpu", "strict", pytest.param("cuda", marks=pytest.mark.cuda)]  # cuda: skipped without a GPU
KINDS = ["encoder", "decoder"]
LAYERS = {"encoder": nn.TransformerEncoderLayer, "decoder": nn.TransformerDecoderLayer}
TORCH_LAYERS = {"encoder": torch.nn.TransformerEncoderLayer, "decoder": torch.nn.TransformerDecoderLayer}
BLOCKS = {"SelfAttentionBlock", "FeedForwardBlock"}


def randomized(module, rng):
    """``module`` in float64 with every parameter drawn afresh (non-zero biases, LayerNorm affine)."""
    module.double()
    for p in module.parameters():
        p.data = rng.standard_normal(p.shape) * 0.5
    return module


def make_layer(kind, d_model, nhead, rng, device, cls=None, **options):
    """An encoder or decoder layer (or one of class ``cls``), float64, its parameters drawn from ``rng``."""
    return randomized((cls or LAYERS[kind])(d_model, nhead, **options), rng).to(device)


def layer_inputs(kind, B, L, S, E, rng, device):
    """The leaves a layer reads, float64 and needing gradients: ``[src (B, L, E)]`` or
    ``[tgt (B, L, E), memory (B, S, E)]``."""
    shapes = [(B, L, E)] + ([(B, S, E)] if kind == "decoder" else [])
    return [leaf(rng.standard_normal(shape), device) for shape in shapes]


def call(layer, inputs, self_mask=None, is_causal=False, memory_mask=None):
    """The layer on ``inputs``; ``self_mask`` and ``is_causal`` go to its self-attention."""
    if len(inputs) == 1:
        return layer(inputs[0], src_mask=self_mask, is_causal=is_causal)
    return layer(*inputs, tgt_mask=self_mask, memory_mask=memory_mask, tgt_is_causal=is_causal)


def run(layer, inputs, upstream, fused, extra=(), **masks):
    """``(node types, [output, gradients of inputs, of the layer's parameters, of extra]))`` of ``layer``
    compiled (``fused``) or as it is, with dropout drawn from one seed."""
    layer.zero_grad()
    for t in (*inputs, *extra):
        t.grad = None
    ta.manual_seed(0)
    out = call(ta.compile(layer) if fused else layer, inputs, **masks)
    types = node_types(out)
    out.backward(upstream)
    return types, [out.numpy()] + [grad_of(t) for t in (*inputs, *layer.parameters(), *extra)]


def fused_matches_composed(layer, inputs, upstream, extra=(), **masks):
    """Runs ``layer`` compiled and as it is; asserts the two agree and the second has no block node.
    Returns the first run's node types and its results."""
    types, fused = run(layer, inputs, upstream, True, extra, **masks)
    composed_types, composed = run(layer, inputs, upstream, False, extra, **masks)
    assert not BLOCKS & composed_types
    assert_same(fused, composed)
    return types, fused


def self_mask(kind, B, L, rng, device):
    """Our self-attention mask of ``kind`` (``True`` = may attend; a float one needs no gradient);
    queries without any key happen (padding length 0, blank rows of a 3-D mask or of a float one; a 2-D boolean
    mask with a blank row is refused by the layers, as PyTorch's convention read the other way)."""
    if kind == "none":
        return None
    if kind == "padding":
        return F.padding_mask(rng.integers(0, L + 1, size=B), L).to(device)  # (B, 1, 1, L)
    if kind in ("bool2d", "bool3d"):
        allowed = rng.random((L, L) if kind == "bool2d" else (B, L, L)) < 0.6  # 3-D: per batch element
        if kind == "bool2d":
            allowed[np.arange(L), rng.integers(L, size=L)] = True  # every query some key
        elif rng.random() < 0.5:
            allowed[..., rng.integers(L), :] = False  # a query with no key
        return ta.tensor(allowed, device=device)
    additive = rng.standard_normal((L, L))  # float2d
    additive[rng.random((L, L)) < 0.3] = -math.inf
    if rng.random() < 0.5:
        additive[rng.integers(L)] = -math.inf
    return leaf(additive, device, requires_grad=False)


# ----------------------------------------------------------------------------- fused against composed


@st.composite
def layer_cases(draw):
    return dict(
        B=draw(st.integers(1, 2)), L=draw(st.integers(1, 5)), S=draw(st.integers(1, 4)), H=draw(st.integers(1, 3)),
        D=draw(st.integers(1, 3)), ff=draw(st.integers(1, 6)), eps=draw(st.sampled_from([1e-5, 1e-2])),
        mask=draw(st.sampled_from(["none", "padding", "bool2d", "bool3d", "float2d"])),
        is_causal=draw(st.booleans()), memory_padding=draw(st.booleans()), eval=draw(st.booleans()),
        seed=draw(st.integers(0, 2**31 - 1)),
    )


def layer_case(B=1, L=1, S=1, H=1, D=1, ff=1, eps=1e-5, mask="none", is_causal=False, memory_padding=False,
               eval=False, seed=0):
    return dict(B=B, L=L, S=S, H=H, D=D, ff=ff, eps=eps, mask=mask, is_causal=is_causal,
                memory_padding=memory_padding, eval=eval, seed=seed)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("norm_first", [False, True])
@given(case=layer_cases())
@example(case=layer_case())  # one position, one feature: LayerNorm of a constant row
@example(case=layer_case(B=2, L=4, H=2, D=3, ff=5, mask="padding", is_causal=True, eval=True, seed=3))
@example(case=layer_case(B=2, L=5, S=3, H=3, D=2, ff=4, mask="float2d", is_causal=True, memory_padding=True, seed=5))
def test_fused_layer_matches_composed(device, kind, norm_first, case):
    B, L, S, H, D = (case[n] for n in "BLSHD")
    E = H * D
    rng = np.random.default_rng(case["seed"])
    layer = make_layer(kind, E, H, rng, device, dim_feedforward=case["ff"], dropout=0.1 if case["eval"] else 0.0,
                       layer_norm_eps=case["eps"], norm_first=norm_first)
    if case["eval"]:
        layer.eval()  # otherwise training mode, with dropout 0
    inputs = layer_inputs(kind, B, L, S, E, rng, device)
    masks = dict(self_mask=self_mask(case["mask"], B, L, rng, device), is_causal=case["is_causal"])
    if kind == "decoder" and case["memory_padding"]:
        masks["memory_mask"] = F.padding_mask(rng.integers(1, S + 1, size=B), S).to(device)
    upstream = ta.tensor(rng.standard_normal((B, L, E)), device=device)
    types, _ = fused_matches_composed(layer, inputs, upstream, **masks)
    assert BLOCKS <= types


# ----------------------------------------------------------------------------- against PyTorch


@st.composite
def torch_cases(draw):
    return dict(
        B=draw(st.integers(1, 2)), L=draw(st.integers(1, 5)), S=draw(st.integers(1, 4)), H=draw(st.integers(1, 2)),
        D=draw(st.integers(1, 3)), ff=draw(st.integers(1, 6)), eps=draw(st.sampled_from([1e-5, 1e-2])),
        masks=draw(st.sampled_from(["causal", "padding", "causal+padding"])), seed=draw(st.integers(0, 2**31 - 1)),
    )


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("norm_first", [False, True])
@given(case=torch_cases())
def test_fused_layer_matches_torch(device, kind, norm_first, case):
    B, L, S, H, D = (case[n] for n in "BLSHD")
    E = H * D
    rng = np.random.default_rng(case["seed"])
    options = dict(dim_feedforward=case["ff"], dropout=0.0, layer_norm_eps=case["eps"], norm_first=norm_first)
    theirs = TORCH_LAYERS[kind](E, H, batch_first=True, **options).double()
    with torch.no_grad():
        for p in theirs.parameters():  # non-zero biases and LayerNorm affine too
            p.copy_(torch.tensor(rng.standard_normal(tuple(p.shape)) * 0.5))
    ours = ta.compile(load_from_torch(LAYERS[kind](E, H, **options), theirs, device))

    # torch's boolean masks mean True = NOT allowed, ours True = may attend; key 0 stays visible (torch: NaN)
    causal = "causal" in case["masks"]
    padding = np.arange(L)[None, :] < rng.integers(1, L + 1, size=B)[:, None]  # (B, L) True = a real token
    memory_padding = np.arange(S)[None, :] < rng.integers(1, S + 1, size=B)[:, None]  # (B, S)
    with_padding = "padding" in case["masks"]
    torch_causal = torch.tensor(~np.tril(np.ones((L, L), dtype=bool))) if causal else None
    torch_padding = torch.tensor(~padding) if with_padding else None
    our_padding = ta.tensor(padding[:, None, None, :], device=device) if with_padding else None  # (B, 1, 1, L)
    x, memory, upstream = (rng.standard_normal(s) for s in [(B, L, E), (B, S, E), (B, L, E)])

    t_x, t_memory = torch.tensor(x, requires_grad=True), torch.tensor(memory, requires_grad=True)
    if kind == "encoder":
        t_out = theirs(t_x, src_mask=torch_causal, src_key_padding_mask=torch_padding)
    else:
        t_out = theirs(t_x, t_memory, tgt_mask=torch_causal, tgt_key_padding_mask=torch_padding,
                       memory_key_padding_mask=torch.tensor(~memory_padding) if with_padding else None)
    (t_out * torch.tensor(upstream)).sum().backward()

    inputs = [leaf(x, device)] + ([leaf(memory, device)] if kind == "decoder" else [])
    our_memory_padding = ta.tensor(memory_padding[:, None, None, :], device=device) if with_padding else None
    out = call(ours, inputs, self_mask=our_padding, is_causal=causal, memory_mask=our_memory_padding)
    assert BLOCKS <= node_types(out)
    out.backward(ta.tensor(upstream, device=device))

    np.testing.assert_allclose(out.numpy(), t_out.detach().numpy(), rtol=1e-9, atol=1e-10)
    np.testing.assert_allclose(host(inputs[0].grad), t_x.grad.numpy(), rtol=1e-9, atol=1e-10)
    if kind == "decoder":
        np.testing.assert_allclose(host(inputs[1].grad), t_memory.grad.numpy(), rtol=1e-9, atol=1e-10)
    assert_parameter_grads_match(ours, theirs)


TORCH_GELUS = {"gelu": ("gelu", "gelu"), "gelu_tanh": (nn.GELU(approximate="tanh"),
                                                     torch.nn.GELU(approximate="tanh"))}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("form", sorted(TORCH_GELUS))
def test_gelu_layer_matches_torch(kind, norm_first, form):
    """A GELU layer (BERT's: eps 1e-12, a key padding mask) with both blocks fused against PyTorch's."""
    B, L, S, H, E = 2, 5, 3, 2, 6
    rng = np.random.default_rng(70)
    ours_activation, their_activation = TORCH_GELUS[form]
    options = dict(dim_feedforward=7, dropout=0.0, layer_norm_eps=1e-12, norm_first=norm_first)
    theirs = TORCH_LAYERS[kind](E, H, batch_first=True, activation=their_activation, **options).double()
    with torch.no_grad():
        for p in theirs.parameters():
            p.copy_(torch.tensor(rng.standard_normal(tuple(p.shape)) * 0.5))
    ours = ta.compile(load_from_torch(LAYERS[kind](E, H, activation=ours_activation, **options), theirs, "cpu"))
    padding = np.arange(L)[None, :] < np.array([L, 3])[:, None]  # (B, L) True = a real token
    x, memory, upstream = (rng.standard_normal(s) for s in [(B, L, E), (B, S, E), (B, L, E)])
    t_x, t_memory = torch.tensor(x, requires_grad=True), torch.tensor(memory, requires_grad=True)
    if kind == "encoder":
        t_out = theirs(t_x, src_key_padding_mask=torch.tensor(~padding))
    else:
        t_out = theirs(t_x, t_memory, tgt_key_padding_mask=torch.tensor(~padding))
    (t_out * torch.tensor(upstream)).sum().backward()
    inputs = [leaf(x, "cpu")] + ([leaf(memory, "cpu")] if kind == "decoder" else [])
    out = call(ours, inputs, self_mask=ta.tensor(padding[:, None, None, :]))
    assert BLOCKS <= node_types(out)
    out.backward(ta.tensor(upstream))
    np.testing.assert_allclose(out.numpy(), t_out.detach().numpy(), rtol=1e-9, atol=1e-10)
    np.testing.assert_allclose(inputs[0].grad, t_x.grad.numpy(), rtol=1e-9, atol=1e-10)
    if kind == "decoder":
        np.testing.assert_allclose(inputs[1].grad, t_memory.grad.numpy(), rtol=1e-9, atol=1e-10)
    assert_parameter_grads_match(ours, theirs)


# ----------------------------------------------------------------------------- finite differences


def self_attention_block_inputs(B, L, H, D, rng, device):
    """``x (B, L, E)``, norm weight and bias ``(E,)``, ``w_q, w_k, w_v (E, E)``, ``b_q, b_k, b_v (E,)``,
    ``w_o (E, E)``, ``b_o (E,)``, every one needing a gradient."""
    E = H * D
    shapes = [(B, L, E), (E,), (E,), (E, E), (E, E), (E, E), (E,), (E,), (E,), (E, E), (E,)]
    return [leaf(rng.standard_normal(shape) * (1.0 if i == 0 else 0.5), device) for i, shape in enumerate(shapes)]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("mask", ["none", "bool", "causal", "float_and_causal"])
def test_gradcheck_self_attention_block(device, norm_first, mask):
    B, L, H, D = 2, 3, 2, 2
    rng = np.random.default_rng(10)
    inputs = self_attention_block_inputs(B, L, H, D, rng, device)
    attn_mask = allowed = None
    if mask == "bool":
        allowed = rng.random((B, 1, L, L)) < 0.7
        allowed[:, :, :, 0] = True
        allowed[1, 0, 2] = False  # query 2 of batch element 1 attends nothing
        allowed = ta.backend.to_device(allowed, device)
    elif mask == "float_and_causal":
        additive = rng.standard_normal((L, L))
        additive[2, :] = [-math.inf, 0.3, -math.inf]
        attn_mask = ta.backend.to_device(additive, device)
    options = dict(num_heads=H, norm_first=norm_first, eps=1e-5, attn_mask=attn_mask, allowed=allowed,
                   is_causal=mask in ("causal", "float_and_causal"))

    def block(*args):
        out = SelfAttentionBlock.apply(*args, **options)
        assert out.shape == (B, L, H * D) and (isinstance(out._ctx, SelfAttentionBlock) or not ta.is_grad_enabled())
        return out

    assert gradcheck(block, inputs)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("shape", [(2, 3, 4), (5, 4)])  # x (…, E)
@pytest.mark.parametrize("activation", ["relu", "gelu", "gelu_tanh"])
def test_gradcheck_feed_forward_block(device, norm_first, shape, activation):
    rng = np.random.default_rng(11)
    E, F_ = shape[-1], 5
    shapes = [shape, (E,), (E,), (F_, E), (F_,), (E, F_), (E,)]  # x, norm weight, bias, w1, b1, w2, b2
    inputs = [leaf(rng.standard_normal(s) * (1.0 if i == 0 else 0.5), device) for i, s in enumerate(shapes)]

    def block(*args):
        out = FeedForwardBlock.apply(*args, norm_first=norm_first, eps=1e-5, activation=activation)
        assert out.shape == shape and (isinstance(out._ctx, FeedForwardBlock) or not ta.is_grad_enabled())
        return out

    assert gradcheck(block, inputs)


# ----------------------------------------------------------------------------- fallbacks to the composed nodes
#
# Each layer below is changed before it is compiled (a compiled copy holds its own attributes).


class Recording:
    """A module mixin that counts its calls (in one list, which a compiled copy shares) and scales its output: a
    block that skipped its forward would show."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.seen = []

    @property
    def calls(self):
        return len(self.seen)

    def forward(self, input):
        self.seen.append(input.shape)
        return super().forward(input) * 1.5


class RecordingLayerNorm(Recording, nn.LayerNorm):
    pass


class RecordingLinear(Recording, nn.Linear):
    pass


class Recorder:
    """Replaces ``owner.name`` (a ``forward`` or a layer's ``_sa_block``) on the instance, the way to
    record activations without hooks, and counts its calls."""

    def __init__(self, owner, name):
        self.calls, self.inner = 0, getattr(owner, name)
        setattr(owner, name, self)

    def __call__(self, *args, **kwargs):
        self.calls += 1
        return self.inner(*args, **kwargs)


class HalvedSelfAttention:
    """A layer mixin whose ``_sa_block`` halves the library's: an override the layer must honour."""

    def _sa_block(self, x, attn_mask, is_causal):
        return super()._sa_block(x, attn_mask, is_causal) * 0.5


class HalvedFeedForward:
    """A layer mixin whose ``_ff_block`` halves the library's."""

    def _ff_block(self, x):
        return super()._ff_block(x) * 0.5


OVERRIDDEN = {
    (kind, mixin.__name__): type(f"{mixin.__name__}{cls.__name__}", (mixin, cls), {})
    for kind, cls in LAYERS.items() for mixin in (HalvedSelfAttention, HalvedFeedForward)
}

# how: (the nodes the run with the blocks allowed must have, the block nodes it must not have)
FALLBACKS = {
    "keep_attn_weights": ({"FeedForwardBlock"}, {"SelfAttentionBlock"}),
    "dropout_in_training": (set(), BLOCKS),
    "float_mask_needing_grad": ({"FeedForwardBlock", "PackedSelfAttention"}, {"SelfAttentionBlock"}),
    "tanh_activation": ({"SelfAttentionBlock"}, {"FeedForwardBlock"}),
    "norm1_subclass": ({"FeedForwardBlock"}, {"SelfAttentionBlock"}),
    "linear1_subclass": ({"SelfAttentionBlock"}, {"FeedForwardBlock"}),
    "out_proj_subclass": ({"FeedForwardBlock", "PackedSelfAttention"}, {"SelfAttentionBlock"}),
    "attention_without_bias": ({"FeedForwardBlock", "PackedSelfAttention"}, {"SelfAttentionBlock"}),
    "ff_norm_without_bias": ({"SelfAttentionBlock"}, {"FeedForwardBlock"}),
    "sa_block_overridden": ({"PackedSelfAttention"}, BLOCKS),  # not compiled: its own class, its parts compiled
    "ff_block_overridden": ({"PackedSelfAttention"}, BLOCKS),
    "norm1_forward_on_instance": ({"FeedForwardBlock"}, {"SelfAttentionBlock"}),
    "out_proj_forward_on_instance": ({"FeedForwardBlock", "PackedSelfAttention"}, {"SelfAttentionBlock"}),
    "linear2_forward_on_instance": ({"SelfAttentionBlock"}, {"FeedForwardBlock"}),
    "sa_block_on_instance": ({"FeedForwardBlock"}, {"SelfAttentionBlock"}),
    "norm1_without_affine": ({"FeedForwardBlock"}, {"SelfAttentionBlock"}),
}


def fallback_layer(how, kind, norm_first, seed, device):
    """``(layer, the replaced part that records its calls or None)``: a layer that the blocks cannot run."""
    E, H, ff = 6, 2, 5
    options = dict(dim_feedforward=ff, dropout=0.3 if how == "dropout_in_training" else 0.0, norm_first=norm_first,
                   activation=ta.tanh if how == "tanh_activation" else "relu")
    cls = None
    if how.endswith("block_overridden"):
        cls = OVERRIDDEN[kind, "HalvedSelfAttention" if how.startswith("sa") else "HalvedFeedForward"]
    rng = np.random.default_rng(seed)
    layer = make_layer(kind, E, H, rng, device, cls=cls, **options)
    layer.keep_attn_weights = how == "keep_attn_weights"
    recorder = None
    if how == "norm1_subclass":
        layer.norm1 = recorder = randomized(RecordingLayerNorm(E), rng).to(device)
    elif how == "linear1_subclass":
        layer.linear1 = recorder = randomized(RecordingLinear(E, ff), rng).to(device)
    elif how == "out_proj_subclass":
        layer.self_attn.out_proj = recorder = randomized(RecordingLinear(E, E), rng).to(device)
    elif how == "attention_without_bias":
        layer.self_attn = randomized(nn.MultiHeadAttention(E, H, bias=False), rng).to(device)
    elif how == "ff_norm_without_bias":
        norm = randomized(nn.LayerNorm(E, bias=False), rng).to(device)
        setattr(layer, "norm2" if kind == "encoder" else "norm3", norm)  # the feed-forward block's norm
    elif how == "norm1_forward_on_instance":
        recorder = Recorder(layer.norm1, "forward")
    elif how == "out_proj_forward_on_instance":
        recorder = Recorder(layer.self_attn.out_proj, "forward")
    elif how == "linear2_forward_on_instance":
        recorder = Recorder(layer.linear2, "forward")
    elif how == "sa_block_on_instance":
        recorder = Recorder(layer, "_sa_block")
    elif how == "norm1_without_affine":
        layer.norm1 = nn.LayerNorm(E, elementwise_affine=False).double().to(device)
    return layer, recorder


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("how", sorted(FALLBACKS))
def test_fallback_to_composed_nodes(device, kind, norm_first, how):
    B, L, S, E = 2, 4, 3, 6
    layer, recorder = fallback_layer(how, kind, norm_first, 20, device)
    rng = np.random.default_rng(21)
    inputs = layer_inputs(kind, B, L, S, E, rng, device)
    if how == "float_mask_needing_grad":
        additive = rng.standard_normal((L, L))
        additive[1, 2] = -math.inf
        mask = leaf(additive, device)
    else:
        mask = F.padding_mask([L, 2], L).to(device)
    upstream = ta.tensor(rng.standard_normal((B, L, E)), device=device)
    extra = (mask,) if mask.requires_grad else ()
    calls = recorder.calls if recorder is not None else 0

    types, fused = fused_matches_composed(layer, inputs, upstream, extra, self_mask=mask, is_causal=True)
    present, absent = FALLBACKS[how]
    assert present <= types and not absent & types, f"{how}: node types {sorted(types)}"
    if recorder is not None:
        assert recorder.calls == calls + 2  # its own forward ran in each of the two runs
    if how == "keep_attn_weights":  # (kept by the compiled copy, then by the layer itself)
        weights = layer.attn_weights if kind == "encoder" else layer.self_attn_weights
        assert weights is not None and weights.shape == (B, 2, L, L)
        compiled = ta.compile(layer)
        call(compiled, inputs, self_mask=mask, is_causal=True)
        weights = compiled.attn_weights if kind == "encoder" else compiled.self_attn_weights
        assert weights is not None and weights.shape == (B, 2, L, L)
    if how == "float_mask_needing_grad":
        assert fused[-1] is not None and (fused[-1] != 0).any()  # compared with the composed run's above
    if how.endswith("block_overridden"):  # the override changed the result: it was not bypassed
        assert type(ta.compile(layer)) is type(layer)
        plain, _ = fallback_layer("none", kind, norm_first, 20, device)
        assert not np.allclose(call(plain, inputs, self_mask=mask, is_causal=True).numpy(), fused[0])


# ----------------------------------------------------------------------------- parameters that need no gradient


FROZEN = {
    "norm1_and_linear2": ("norm1.", "linear2."),  # linear2 frozen: the block skips ∂W2 = ∂sᵀ A
    "scattered": ("self_attn.q_proj.", "self_attn.out_proj.bias", "linear1.weight", "norm2.bias"),
    "every_parameter": ("",),
    "the_input": (),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("frozen", sorted(FROZEN))
@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_parameters_that_need_no_gradient_get_none(device, kind, norm_first, frozen, activation):
    B, L, S, H, E = 2, 3, 4, 2, 4
    rng = np.random.default_rng(30)
    layer = make_layer(kind, E, H, rng, device, dim_feedforward=6, dropout=0.0, norm_first=norm_first,
                       activation=activation)
    inputs = layer_inputs(kind, B, L, S, E, rng, device)
    names = [name for name, _ in layer.named_parameters()]
    for name, p in layer.named_parameters():
        if name.startswith(FROZEN[frozen]):
            p.requires_grad_(False)
    if frozen == "the_input":
        inputs[0].requires_grad_(False)
    upstream = ta.tensor(rng.standard_normal((B, L, E)), device=device)
    types, fused = fused_matches_composed(layer, inputs, upstream,
                                          self_mask=F.padding_mask([3, 1], L).to(device), is_causal=True)
    assert BLOCKS <= types
    expected = [t.requires_grad for t in inputs] + [p.requires_grad for p in layer.parameters()]
    labels = ["input", "memory"][: len(inputs)] + names
    assert [g is not None for g in fused[1:]] == expected, list(zip(labels, expected))
    assert any(not e for e in expected) and any(expected)


# ----------------------------------------------------------------------------- gradient arrays and backward twice


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("activation", ["relu", "gelu", ta.tanh])  # tanh: the self-attention block's output meets a sum
@pytest.mark.parametrize("B, L", [(1, 1), (2, 3)])
def test_gradients_share_no_memory_and_upstream_is_unchanged(kind, norm_first, activation, B, L):
    E, H, S = 4, 2, 2
    rng = np.random.default_rng(40)
    layer = make_layer(kind, E, H, rng, "cpu", dim_feedforward=6, dropout=0.0, norm_first=norm_first,
                       activation=activation)
    inputs = layer_inputs(kind, B, L, S, E, rng, "cpu")
    upstream = rng.standard_normal((B, L, E))
    kept = upstream.copy()
    out = call(ta.compile(layer), inputs, is_causal=True)
    assert "SelfAttentionBlock" in node_types(out)
    assert ("FeedForwardBlock" in node_types(out)) == (activation in ("relu", "gelu"))
    out.backward(upstream)
    np.testing.assert_array_equal(upstream, kept)
    arrays = [("upstream", upstream)] + [(f"input {i}", t.grad) for i, t in enumerate(inputs)]
    arrays += [(name, p.grad) for name, p in layer.named_parameters()]
    for (name_a, a), (name_b, b) in itertools.combinations(arrays, 2):
        assert not np.shares_memory(a, b), f"{name_a} and {name_b} share memory"


def run_block(block, norm_first, B, L, upstream_of):
    """``(inputs, upstream)`` after a backward through the block alone on the cpu (so that it gets
    the caller's array itself, not a sum), with the upstream gradient ``upstream_of(shape)``."""
    H, D = 2, 2
    rng = np.random.default_rng(41)
    if block == "self_attention":
        inputs = self_attention_block_inputs(B, L, H, D, rng, "cpu")
        out = SelfAttentionBlock.apply(*inputs, num_heads=H, norm_first=norm_first, eps=1e-5, attn_mask=None,
                                       allowed=None, is_causal=True)
    else:
        E, F_ = H * D, 3
        shapes = [(B, L, E), (E,), (E,), (F_, E), (F_,), (E, F_), (E,)]
        inputs = [leaf(rng.standard_normal(s), "cpu") for s in shapes]
        out = FeedForwardBlock.apply(*inputs, norm_first=norm_first, eps=1e-5)
    upstream = upstream_of(out.shape)
    out.backward(upstream)
    return inputs, upstream


UPSTREAM_LAYOUTS = {
    "contiguous": lambda a: a,
    "fortran": np.asfortranarray,
    "broadcast": lambda a: np.broadcast_to(a[:1], a.shape),  # read-only, stride 0 along the batch
}


@pytest.mark.parametrize("block", ["self_attention", "feed_forward"])
@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("B, L", [(1, 1), (2, 3)])
@pytest.mark.parametrize("layout", sorted(UPSTREAM_LAYOUTS))
def test_block_gradients_share_no_memory_and_upstream_is_unchanged(block, norm_first, B, L, layout):
    values = np.random.default_rng(42).standard_normal((B, L, 4))
    upstream = UPSTREAM_LAYOUTS[layout](values.copy())
    kept = upstream.copy()
    inputs, _ = run_block(block, norm_first, B, L, lambda shape: upstream)
    np.testing.assert_array_equal(upstream, kept)
    arrays = [("upstream", upstream)] + [(f"input {i}", t.grad) for i, t in enumerate(inputs)]
    for (name_a, a), (name_b, b) in itertools.combinations(arrays, 2):
        assert not np.shares_memory(a, b), f"{name_a} and {name_b} share memory"
    reference, _ = run_block(block, norm_first, B, L, lambda shape: np.ascontiguousarray(kept))
    assert_same([t.grad for t in inputs], [t.grad for t in reference])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("norm_first", [False, True])
def test_backward_twice(device, kind, norm_first):
    B, L, S, H, E = 2, 3, 2, 2, 4
    rng = np.random.default_rng(50)
    layer = ta.compile(make_layer(kind, E, H, rng, device, dim_feedforward=6, dropout=0.0, norm_first=norm_first))
    inputs = layer_inputs(kind, B, L, S, E, rng, device)
    upstream = ta.tensor(rng.standard_normal((B, L, E)), device=device)
    leaves = [*inputs, *layer.parameters()]
    memory = inputs[1] if kind == "decoder" else None

    out = call(layer, inputs, is_causal=True)
    assert BLOCKS <= node_types(out)
    out.backward(upstream)
    with pytest.raises(RuntimeError, match="second time"):
        out.backward(upstream)

    layer.zero_grad()
    for t in inputs:
        t.grad = None
    out = call(layer, inputs, is_causal=True)
    out.backward(upstream, retain_graph=True)
    once = [host(t.grad) for t in leaves]
    for times in (2, 3):  # the third walk: the saved arrays came through the second unchanged
        out.backward(upstream, retain_graph=times == 2)
        for t, g in zip(leaves, once):
            if t is memory:  # two gradients (keys', values') per walk, summed in another order: rounding
                np.testing.assert_allclose(host(t.grad), times * g, **EXACT)
            else:  # one gradient per walk: g + g + g is exactly 3 g
                np.testing.assert_array_equal(host(t.grad), times * g)


# ----------------------------------------------------------------------------- float32


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("activation", ["relu", "gelu", nn.GELU(approximate="tanh")], ids=["relu", "gelu", "tanh"])
def test_float32_in_float32_out(device, kind, norm_first, activation):
    """float32 throughout; the fused GELU (its float32 Φ kernel) within float32 rounding of the reference (scipy)."""
    B, L, S, H, E = 2, 4, 3, 2, 8
    ta.manual_seed(60)
    layer = LAYERS[kind](E, H, dim_feedforward=12, dropout=0.0, norm_first=norm_first, activation=activation)
    layer = layer.to(device)
    rng = np.random.default_rng(60)
    shapes = [(B, L, E)] + ([(B, S, E)] if kind == "decoder" else [])
    inputs = [leaf(rng.standard_normal(s).astype(np.float32), device) for s in shapes]
    additive = leaf(rng.standard_normal((L, L)), device, requires_grad=False)  # float64: cast to float32, no gradient
    upstream = ta.tensor(rng.standard_normal((B, L, E)).astype(np.float32), device=device)
    results = []
    for fused in (True, False):
        types, result = run(layer, inputs, upstream, fused, self_mask=additive, is_causal=True)
        assert (BLOCKS <= types) == fused
        results.append(result)
        assert all(a.dtype == np.float32 for a in result), [a.dtype for a in result]
    assert_same(*results, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("how", ["norm1_weight", "feed_forward_norm_bias", "attention_kdim"])
def test_parts_that_do_not_fit_raise_the_composed_nodes_error(kind, how):
    """A part the composed nodes refuse (a norm parameter of another shape, attention whose keys have
    another width) is refused with the same message by the compiled layer and the layer."""
    rng = np.random.default_rng(30)
    E, H = 6, 2
    layer = make_layer(kind, E, H, rng, "cpu", dim_feedforward=5, dropout=0.0)
    if how == "norm1_weight":
        layer.norm1.weight = nn.Parameter(np.ones(1))  # broadcasts, but is not normalized_shape
    elif how == "feed_forward_norm_bias":
        getattr(layer, "norm2" if kind == "encoder" else "norm3").bias = nn.Parameter(np.zeros((1, E)))
    else:
        layer.self_attn = nn.MultiHeadAttention(E, H, kdim=4, vdim=4).double()
    inputs = layer_inputs(kind, 2, 3, 4, E, rng, "cpu")
    messages = []
    for module in (ta.compile(layer), layer):
        with pytest.raises(ValueError) as error:
            call(module, inputs)
        messages.append(str(error.value))
    assert messages[0] == messages[1]


@pytest.mark.parametrize("norm_first", [False, True])
def test_blocks_skip_the_products_of_frozen_parameters(norm_first):
    """A block's backward hands ``None`` for every weight and bias that needs no gradient (their
    products are not run), and the same gradients as before for the rest."""
    rng = np.random.default_rng(40)
    inputs = self_attention_block_inputs(2, 3, 2, 2, rng, "cpu")
    options = dict(num_heads=2, norm_first=norm_first, eps=1e-5, attn_mask=None, allowed=None, is_causal=True)
    upstream = rng.standard_normal((2, 3, 4))
    all_grads = SelfAttentionBlock.apply(*inputs, **options)._ctx.backward(upstream)
    frozen = {3, 7, 9, 10}  # W_q, b_k, W_o, b_o
    for i in frozen:
        inputs[i].requires_grad_(False)
    grads = SelfAttentionBlock.apply(*inputs, **options)._ctx.backward(upstream)
    for i, (g, reference) in enumerate(zip(grads, all_grads)):
        assert (g is None) == (i in frozen), i
        if g is not None:
            np.testing.assert_array_equal(g, reference)

    E, hidden = 4, 5
    x = leaf(rng.standard_normal((2, 3, E)), "cpu")
    shapes = [(E,), (E,), (hidden, E), (hidden,), (E, hidden), (E,)]  # norm weight and bias, W1, b1, W2, b2
    params = [leaf(rng.standard_normal(shape), "cpu") for shape in shapes]
    all_grads = FeedForwardBlock.apply(x, *params, norm_first=norm_first, eps=1e-5)._ctx.backward(upstream)
    for p in params[2:5:2]:  # W1, W2
        p.requires_grad_(False)
    grads = FeedForwardBlock.apply(x, *params, norm_first=norm_first, eps=1e-5)._ctx.backward(upstream)
    for i, (g, reference) in enumerate(zip(grads, all_grads)):
        assert (g is None) == (i in {3, 5}), i
        if g is not None:
            np.testing.assert_array_equal(g, reference)


@pytest.mark.parametrize("norm_first", [True, False], ids=["pre-norm", "post-norm"])
@pytest.mark.parametrize("block, watched", [
    ("self-attention", ["src (post-norm)", "norm1.weight", "self_attn.out_proj.weight"]),
    ("feed-forward", ["norm2.weight", "linear1.weight", "linear2.weight"]),
])
def test_in_place_change_to_an_array_a_block_keeps_is_refused(block, watched, norm_first):
    """Each input whose array a block's backward reads (``saved_inputs``) is watched by its version
    counter: changed in place after the forward, the backward refuses instead of a wrong gradient."""
    for name in watched:
        if name.endswith("(post-norm)") and norm_first:
            continue  # pre-norm, the block keeps norm(x), not x
        ta.manual_seed(0)
        layer = ta.compile(nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, norm_first=norm_first,
                                                      dtype=np.float64))
        src = ta.randn(2, 3, 8, dtype=np.float64, requires_grad=True)
        out = layer(src)
        assert type(out._ctx).__name__ == "FeedForwardBlock"
        assert type(out._ctx.edges[0]).__name__ == "SelfAttentionBlock"
        target = src if name.startswith("src") else dict(layer.named_parameters())[name]
        with ta.no_grad():
            target.add_(1.0)  # an in-place write: the version moves on
        node = "FeedForwardBlock" if block == "feed-forward" else "SelfAttentionBlock"
        with pytest.raises(RuntimeError, match=f"{node} saved for its backward was modified"):
            out.backward(np.ones(out.shape))


def test_a_gelu_block_run_without_its_slope_refuses_backward_by_name():
    """``for_backward=False`` (``feed_forward_block`` passes it only when no graph is recorded) keeps no GELU
    slope; a backward through such a node says so instead of failing inside NumPy."""
    layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, activation="gelu")
    x = ta.randn(2, 3, 8, requires_grad=True)
    norm, linear1, linear2 = layer.norm2, layer.linear1, layer.linear2
    y = FeedForwardBlock.apply(x, norm.weight, norm.bias, linear1.weight, linear1.bias, linear2.weight,
                               linear2.bias, norm_first=False, eps=norm.eps, activation="gelu", for_backward=False)
    with pytest.raises(RuntimeError, match="for_backward=False"):
        y.sum().backward()
