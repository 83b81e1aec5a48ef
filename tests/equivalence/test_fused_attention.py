"""The fused attention nodes, each against the composed form it replaces.

- ``Attention`` (the compiled ``F.scaled_dot_product_attention(..., need_weights=False)``, ``ta.compile``)
  against the reference definition, which returns the weights (scale, transpose, product, softmax over the
  allowed keys, dropout, product): output and every gradient, float mask included, with dropout drawn from
  the same seed; float64 finite differences; fully masked rows give zeros, never NaN; float32
  stays float32.
- ``InProjection`` against three ``F.linear`` and a split into heads, for every subset of
  inputs that needs a gradient and for upstream gradients laid out in different ways.
- compiled ``MultiHeadAttention`` self-attention (``InProjection`` + ``PackedSelfAttention``) against the
  module not compiled and against ``torch.nn.MultiheadAttention``; a compiled ``TransformerEncoderLayer`` with
  and without ``keep_attn_weights``.
"""

import math

import numpy as np
import pytest
import torch
from graph_checks import assert_same, grad_of, leaf, node_types
from hypothesis import example, given
from hypothesis import strategies as st
from torch_parity import assert_parameter_grads_match, host, load_from_torch

import tinyattn as ta
import tinyattn.nn as nn
import tinyattn.nn.functional as F
from tinyattn import testing as tt
from tinyattn.fast import Attention, InProjection, PackedSelfAttention, attention, packed_self_attention, router, tuning
from tinyattn.testing import gradcheck

DEVICES = ["cpu", "strict", pytest.param("cuda", marks=pytest.mark.cuda)]  # cuda: skipped without a GPU
sdpa = ta.compile(F.scaled_dot_product_attention)  # the fused form


# ----------------------------------------------------------------------------- Attention vs composed


@st.composite
def sdpa_cases(draw):
    """Leading dims that broadcast between q, k, v; a mask broadcasting to (…, Lq, Lk); options."""
    q_lead, k_lead, v_lead = draw(tt.broadcastable_shapes(num_shapes=3, min_dims=0, max_dims=2, max_side=3))
    Lq, Lk, E, Ev = draw(st.integers(1, 5)), draw(st.integers(1, 6)), draw(st.integers(1, 4)), draw(st.integers(1, 3))
    scores_shape = tuple(np.broadcast_shapes(q_lead, k_lead)) + (Lq, Lk)
    mask_shape = [n if draw(st.booleans()) else 1 for n in scores_shape]  # e.g. (B, 1, 1, Lk), (Lq, 1)
    mask_shape = tuple(mask_shape[draw(st.integers(0, len(mask_shape) - 1)):])  # e.g. (Lk,), (Lq, Lk)
    return dict(
        q=q_lead + (Lq, E), k=k_lead + (Lk, E), v=v_lead + (Lk, Ev), mask_shape=mask_shape,
        kind=draw(st.sampled_from(["none", "bool", "float", "float_inf"])), blank_row=draw(st.booleans()),
        is_causal=draw(st.booleans()), scale=draw(st.sampled_from([None, 0.3, 1.7])),
        seed=draw(st.integers(0, 2**31 - 1)),
    )


def make_inputs(case):
    """q, k, v, the mask (or ``None``) and an upstream gradient for the output, on the host (float64)."""
    rng = np.random.default_rng(case["seed"])
    q, k, v = (rng.standard_normal(case[name]) for name in "qkv")
    shape, kind, mask = case["mask_shape"], case["kind"], None
    if kind == "bool":
        mask = rng.random(shape) < 0.7
    elif kind.startswith("float"):
        mask = rng.standard_normal(shape)
        if kind == "float_inf":
            mask[rng.random(shape) < 0.3] = -math.inf
    if mask is not None and case["blank_row"] and mask.ndim >= 2:  # one query row with no key at all
        mask[..., rng.integers(shape[-2]), :] = False if kind == "bool" else -math.inf
    out_shape = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2]) + (q.shape[-2], v.shape[-1])
    return q, k, v, mask, rng.standard_normal(out_shape)


def run_sdpa(q, k, v, mask, upstream, device, need_weights, compiled=True, **options):
    """Output, node and the gradients of q, k, v and the mask (``None`` for a boolean one), of the compiled
    function or of the reference."""
    inputs = [leaf(a, device) for a in (q, k, v)]
    mask_ = None if mask is None else leaf(mask, device, requires_grad=mask.dtype != bool)
    function = sdpa if compiled else F.scaled_dot_product_attention
    out, weights = function(*inputs, attn_mask=mask_, need_weights=need_weights, **options)
    assert (weights is None) == (not need_weights)
    ctx, kept = out._ctx, upstream.copy()
    out.backward(ta.backend.to_device(upstream, device))
    np.testing.assert_array_equal(upstream, kept)  # the caller's gradient is never written to
    grads = [grad_of(t) for t in inputs] + [grad_of(mask_) if mask_ is not None and mask_.requires_grad else None]
    return [out.numpy()] + grads, ctx


def sdpa_case(q, k, v, mask_shape, kind, blank_row=False, is_causal=False, scale=None, seed=0):
    return dict(q=q, k=k, v=v, mask_shape=mask_shape, kind=kind, blank_row=blank_row, is_causal=is_causal,
                scale=scale, seed=seed)


FULL_FLOAT_MASK = sdpa_case((2, 3, 2), (2, 4, 2), (1, 4, 3), (2, 3, 4), "float_inf", blank_row=True, scale=0.5)
PADDING_STYLE_MASK = sdpa_case((2, 2, 3, 2), (1, 2, 5, 2), (2, 1, 5, 2), (2, 1, 1, 5), "bool", is_causal=True)
KEY_MASK = sdpa_case((4, 2), (1, 3, 2), (3, 3), (3,), "bool", is_causal=True, scale=1.7, seed=1)


@pytest.mark.parametrize("device", DEVICES)
@given(case=sdpa_cases())
@example(case=FULL_FLOAT_MASK)  # the mask's gradient is dS itself, before dS is scaled in place
@example(case=PADDING_STYLE_MASK)
@example(case=KEY_MASK)
def test_fused_attention_matches_composed(device, case):
    q, k, v, mask, upstream = make_inputs(case)
    options = dict(is_causal=case["is_causal"], scale=case["scale"])
    fused, fused_node = run_sdpa(q, k, v, mask, upstream, device, need_weights=False, **options)
    assert isinstance(fused_node, Attention), f"fused path made a {type(fused_node).__name__} node"
    for need_weights in (False, True):  # the definition, with the weights or without
        composed, composed_node = run_sdpa(q, k, v, mask, upstream, device, need_weights, compiled=False, **options)
        assert not isinstance(composed_node, Attention)
        assert_same(fused, composed)
    with_weights, node = run_sdpa(q, k, v, mask, upstream, device, need_weights=True, **options)
    assert not isinstance(node, Attention)  # the compiled form, asked for the weights: the definition
    assert_same(with_weights, composed)


@pytest.mark.parametrize("device", DEVICES)
@given(case=sdpa_cases())
@example(case=FULL_FLOAT_MASK)
@example(case=PADDING_STYLE_MASK)
def test_fused_attention_dropout_matches_composed_with_the_same_seed(device, case):
    q, k, v, mask, upstream = make_inputs(case)
    options = dict(is_causal=case["is_causal"], scale=case["scale"], dropout_p=0.3)
    ta.manual_seed(case["seed"])
    fused, fused_node = run_sdpa(q, k, v, mask, upstream, device, need_weights=False, **options)
    ta.manual_seed(case["seed"])
    composed, _ = run_sdpa(q, k, v, mask, upstream, device, need_weights=True, compiled=False, **options)
    assert isinstance(fused_node, Attention)
    assert_same(fused, composed)


@pytest.mark.parametrize("device", DEVICES)
def test_fused_attention_dropout_drops(device):
    """The dropout test above can fail: dropout changes the result, and another seed another way."""
    rng = np.random.default_rng(0)
    q, k, v = rng.standard_normal((2, 4, 3)), rng.standard_normal((2, 5, 3)), rng.standard_normal((2, 5, 2))
    outputs = {}
    for seed, p in [(0, 0.0), (0, 0.3), (1, 0.3), (0, 0.3)]:
        ta.manual_seed(seed)
        args = [leaf(a, device, requires_grad=False) for a in (q, k, v)]
        outputs.setdefault((seed, p), []).append(sdpa(*args, dropout_p=p, need_weights=False)[0].numpy())
    np.testing.assert_array_equal(*outputs[0, 0.3])  # the same seed, the same draw
    assert not np.allclose(outputs[0, 0.3][0], outputs[0, 0.0][0])
    assert not np.allclose(outputs[0, 0.3][0], outputs[1, 0.3][0])


# ----------------------------------------------------------------------------- finite differences


def fused(q, k, v, attn_mask=None, **options):
    out, weights = sdpa(q, k, v, attn_mask=attn_mask, need_weights=False, **options)
    assert weights is None and (isinstance(out._ctx, Attention) or not ta.is_grad_enabled())  # one node
    return out


@pytest.mark.parametrize("device", DEVICES)
def test_gradcheck_fused_float_mask_with_fully_masked_row(device):
    rng = np.random.default_rng(1)
    q = leaf(rng.standard_normal((2, 1, 3, 2)), device)  # (B, 1, Lq, E)
    k = leaf(rng.standard_normal((1, 2, 4, 2)), device)  # (1, H, Lk, E)
    v = leaf(rng.standard_normal((1, 2, 4, 3)), device)  # (1, H, Lk, Ev)
    mask = rng.standard_normal((3, 4))
    mask[0] = -math.inf  # query 0 may attend nothing
    mask[2, 1] = -math.inf
    mask = leaf(mask, device)  # broadcast over B and H: its gradient sums
    assert gradcheck(lambda q, k, v, m: fused(q, k, v, m, scale=0.8), [q, k, v, mask])


@pytest.mark.parametrize("device", DEVICES)
def test_gradcheck_fused_bool_mask_and_causal(device):
    rng = np.random.default_rng(2)
    q, k, v = (leaf(rng.standard_normal(s), device) for s in [(2, 3, 4), (1, 5, 4), (2, 5, 3)])
    allowed = rng.random((2, 3, 5)) < 0.7
    allowed[:, :, 0] = True
    allowed[1, 2, :3] = False  # causal forbids keys 3, 4 of query 2: it attends nothing
    mask = ta.tensor(allowed, device=device)
    assert gradcheck(lambda q, k, v: fused(q, k, v, mask, is_causal=True), [q, k, v])


@pytest.mark.parametrize("device", DEVICES)
def test_gradcheck_fused_dropout_with_a_fixed_seed(device):
    rng = np.random.default_rng(3)
    q, k, v = (leaf(rng.standard_normal(s), device) for s in [(2, 3, 2), (2, 4, 2), (2, 4, 2)])
    mask = leaf(rng.standard_normal((4,)), device)

    def attend(q, k, v, mask):
        ta.manual_seed(7)  # the same dropout mask at every evaluation
        return fused(q, k, v, mask, dropout_p=0.4)

    assert gradcheck(attend, [q, k, v, mask])


@pytest.mark.parametrize("device", DEVICES)
def test_gradcheck_packed_self_attention(device):
    rng = np.random.default_rng(4)
    qkv = leaf(rng.standard_normal((3, 2, 2, 3, 2)), device)  # (3, B, H, L, D)
    mask = rng.standard_normal((2, 1, 3, 3))  # (B, 1, L, L)
    mask[1, 0, 1] = -math.inf
    mask = leaf(mask, device)

    def attend(qkv, mask):
        out = packed_self_attention(qkv, mask, is_causal=True)
        assert out.shape == (2, 3, 4) and (isinstance(out._ctx, PackedSelfAttention) or not ta.is_grad_enabled())
        return out

    assert gradcheck(attend, [qkv, mask])


# ----------------------------------------------------------------------------- invariants


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("how", ["bool", "causal_and_bool", "float_inf", "whole_batch_element"])
def test_fused_fully_masked_rows_are_zero_never_nan(device, how):
    rng = np.random.default_rng(5)
    q, k, v = (leaf(rng.standard_normal(s), device) for s in [(2, 3, 4), (2, 4, 4), (2, 4, 3)])
    blank = (0, 1)  # (batch, query) rows with no key
    if how in ("bool", "causal_and_bool"):
        allowed = rng.random((2, 3, 4)) < 0.7
        allowed[..., 0] = True
        allowed[0, 1, : 2 if how == "causal_and_bool" else 4] = False  # causal takes keys 2, 3 of query 1
        mask = ta.tensor(allowed, device=device)
    elif how == "float_inf":
        additive = rng.standard_normal((2, 3, 4))
        additive[0, 1] = -math.inf
        mask = leaf(additive, device)
    else:
        additive = rng.standard_normal((2, 1, 4))
        additive[0] = -math.inf  # batch element 0 has no key for any query
        mask, blank = leaf(additive, device), (0, slice(None))
    out = fused(q, k, v, mask, is_causal=how == "causal_and_bool")
    out.backward(ta.tensor(rng.standard_normal(out.shape), device=device))
    assert np.isfinite(out.numpy()).all()
    assert (out.numpy()[blank] == 0).all() and (out.numpy()[1] != 0).all()  # batch element 1 attends
    assert (host(q.grad)[blank] == 0).all()
    for t in (q, k, v) + ((mask,) if mask.requires_grad else ()):
        assert np.isfinite(host(t.grad)).all() and (host(t.grad) != 0).any()
    if mask.requires_grad:
        assert (host(mask.grad)[blank] == 0).all()
    if how == "whole_batch_element":  # no key of batch element 0 is attended: its keys and values get nothing
        assert (host(k.grad)[0] == 0).all() and (host(v.grad)[0] == 0).all()


@pytest.mark.parametrize("device", DEVICES)
def test_fused_float32_in_float32_out(device):
    rng = np.random.default_rng(6)
    q, k, v = (leaf(rng.standard_normal(s).astype(np.float32), device) for s in [(2, 3, 4), (2, 5, 4), (2, 5, 3)])
    mask = leaf(rng.standard_normal((3, 5)).astype(np.float32), device)
    out = fused(q, k, v, mask, is_causal=True, dropout_p=0.3)
    out.backward(ta.tensor(rng.standard_normal(out.shape).astype(np.float32), device=device))
    assert out.dtype == np.float32
    assert all(t.grad.dtype == np.float32 for t in (q, k, v, mask))

    wide_mask = leaf(rng.standard_normal((3, 5)), device)  # float64: cast to the queries' float32, still fused
    out = fused(q, k, v, wide_mask)
    out.backward(ta.tensor(rng.standard_normal(out.shape).astype(np.float32), device=device))
    assert out.dtype == np.float32 and wide_mask.grad.dtype == np.float64


# ----------------------------------------------------------------------------- Σ dP·P as rowsum(G ∘ O)

# Three of the router's schedules, and a layout that takes each (q, k, v leading shapes, piece_elements)
BACKWARD_PATHS = {
    "one tile": ((2, 3), (2, 3), (2, 3), None),
    "batch slices": ((2, 3), (2, 3), (2, 3), 64),  # a slice's 6 × 7 scores fit a piece
    "query runs": ((2, 3), (1, 3), (2, 1), 16),  # K, V broadcast: runs of queries, then of keys
}


def schedule_kind(schedule):
    return "one tile" if schedule.one_tile else "query runs" if schedule.key_units else "batch slices"


def scores_pass_backward(grad, q, k, v, weights, keep, scale, mask_shape):
    """``attention_backward``'s gradients with each row's ``Σ_k dP·P`` summed over the scores themselves."""
    dropped = weights if keep is None else weights * keep
    grad_p = grad @ v.swapaxes(-1, -2) * (1 if keep is None else keep)  # dP
    grad_s = weights * (grad_p - (grad_p * weights).sum(-1, keepdims=True))  # dS
    grad_mask = None if mask_shape is None else ta.ops.sum_to(grad_s, mask_shape)
    return grad_s @ k * scale, grad_s.swapaxes(-1, -2) @ q * scale, dropped.swapaxes(-1, -2) @ grad, grad_mask


@pytest.mark.parametrize("path", sorted(BACKWARD_PATHS))
@given(seed=st.integers(0, 2**31 - 1), kind=st.sampled_from(["none", "bool", "float_inf"]),
       dropout=st.sampled_from([0.0, 0.4]), causal=st.booleans())
def test_attention_backward_reads_each_rows_sum_from_the_output(monkeypatch, path, seed, kind, dropout, causal):
    """``attention_backward`` takes each row's ``Σ_k dP·P`` as ``rowsum(G ∘ O)``: on every path the gradients
    (and the mask's) are those of the sum over the scores, to round-off; with the output changed, they change (it
    is read); the nodes hand their forward's output to it."""

    q_lead, k_lead, v_lead, piece_elements = BACKWARD_PATHS[path]
    rng = np.random.default_rng(seed)
    Lq, Lk, E, Ev = 6, 7, 3, 2
    shapes = (q_lead + (Lq, E), k_lead + (Lk, E), v_lead + (Lk, Ev))
    q, k, v = (rng.standard_normal(shape) for shape in shapes)
    mask = allowed = None
    if kind == "bool":
        allowed = rng.random((2, 1, Lq, Lk)) < 0.7
        allowed[0, 0, 1] = False  # a row with no key
    elif kind == "float_inf":
        mask = np.where(rng.random((Lq, Lk)) < 0.3, -math.inf, rng.standard_normal((Lq, Lk)))
    with tuning.tuned(piece_elements=piece_elements or tuning.values.piece_elements):
        schedule = router.attention_schedule(q, k, v)
        out, arrays = attention.attention(q, k, v, mask, allowed, causal, 0.7, dropout, schedule)
        weights, keep = arrays.weights, arrays.keep
        grad = rng.standard_normal(out.shape)
        mask_shape = None if mask is None else mask.shape

        def backward(output):
            arrays.out = output
            return attention.attention_backward(grad, arrays, schedule, 0.7, mask_shape)

        from_output, changed = backward(out), backward(out + rng.standard_normal(out.shape))
    scanned = scores_pass_backward(grad, q, k, v, weights, keep, 0.7, mask_shape)
    assert schedule_kind(schedule) == path
    for a, b in zip(scanned, from_output):
        if a is None:
            assert b is None
        else:
            np.testing.assert_allclose(b, a, rtol=1e-10, atol=1e-12)
    assert not np.allclose(changed[0], scanned[0])  # dQ reads dS, which reads the output's row sums

    recorded = []
    original = attention.attention_backward
    monkeypatch.setattr(attention, "attention_backward",
                        lambda *args, **kw: recorded.append(args[1].out) or original(*args, **kw))  # the output
    tq, tk, tv = (leaf(a, "cpu") for a in (q, k, v))
    result = fused(tq, tk, tv, None if mask is None else ta.tensor(mask), is_causal=causal)
    result.backward(ta.tensor(rng.standard_normal(result.shape)))
    assert len(recorded) == 1 and recorded[0] is result._data  # Attention passes its output


def test_packed_self_attention_and_the_block_pass_their_attention_output(monkeypatch):
    recorded = []
    original = attention.attention_backward
    monkeypatch.setattr(attention, "attention_backward",
                        lambda *args, **kw: recorded.append(args[1].out) or original(*args, **kw))  # the output
    rng = np.random.default_rng(3)
    ta.manual_seed(0)
    mha = ta.compile(nn.MultiHeadAttention(8, 2))
    x = leaf(rng.standard_normal((2, 5, 8), dtype=np.float32), "cpu")
    out, _ = mha(x, need_weights=False)
    out.backward(ta.tensor(rng.standard_normal(out.shape, dtype=np.float32)))
    layer = ta.compile(nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0))
    y = layer(x)
    y.backward(ta.tensor(rng.standard_normal(y.shape, dtype=np.float32)))
    assert len(recorded) == 2 and all(o is not None and o.shape == (2, 2, 5, 4) for o in recorded)
    merged = out._ctx.parents[0].numpy()  # PackedSelfAttention's output, (B, L, H·D), before out_proj
    np.testing.assert_array_equal(recorded[0], merged.reshape(2, 5, 2, 4).transpose(0, 2, 1, 3))
    self_attn = layer.self_attn  # the block's attention output, from the projections and F's attention
    q, k, v = (proj(x).reshape(2, 5, 2, 4).permute(0, 2, 1, 3) for proj in (self_attn.q_proj, self_attn.k_proj,
                                                                             self_attn.v_proj))
    expected, _ = F.scaled_dot_product_attention(q, k, v, need_weights=False)
    np.testing.assert_allclose(recorded[1], expected.numpy(), rtol=1e-5, atol=1e-6)


# ----------------------------------------------------------------------------- InProjection


@st.composite
def in_projection_cases(draw):
    bias = draw(st.booleans())
    n_inputs = 7 if bias else 4  # x, w_q, w_k, w_v (, b_q, b_k, b_v)
    return dict(
        B=draw(st.integers(1, 3)), L=draw(st.integers(1, 4)), H=draw(st.integers(1, 3)), D=draw(st.integers(1, 3)),
        E=draw(st.integers(1, 4)), bias=bias,
        needs=draw(st.lists(st.booleans(), min_size=n_inputs, max_size=n_inputs).filter(any)),
        seed=draw(st.integers(0, 2**31 - 1)),
    )


def split_projection(x, w_q, w_k, w_v, b_q=None, b_k=None, b_v=None, *, num_heads):
    """The composed form: three ``F.linear``, each split into heads, stacked: ``(3, B, H, L, D)``."""
    B, L, _ = x.shape
    heads = [F.linear(x, w, b).reshape(B, L, num_heads, -1).transpose(1, 2) for w, b in
             [(w_q, b_q), (w_k, b_k), (w_v, b_v)]]  # (B, L, H·D) -> (B, H, L, D), three times
    return ta.stack(heads)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("layout", ["contiguous", "as_projection", "fortran"])  # of the upstream gradient
@given(case=in_projection_cases())
def test_in_projection_matches_three_linear(device, layout, case):
    B, L, H, D, E = (case[n] for n in "BLHDE")
    rng = np.random.default_rng(case["seed"])
    arrays = [rng.standard_normal((B, L, E))] + [rng.standard_normal((H * D, E)) for _ in range(3)]
    arrays += [rng.standard_normal(H * D) for _ in range(3)] if case["bias"] else []
    upstream = rng.standard_normal((3, B, H, L, D))
    if layout == "as_projection":  # the memory layout of InProjection's own output
        upstream = np.ascontiguousarray(upstream.transpose(1, 3, 0, 2, 4)).transpose(2, 0, 3, 1, 4)
    elif layout == "fortran":
        upstream = np.asfortranarray(upstream)
    kept = upstream.copy()

    results = []
    for fn in (InProjection.apply, split_projection):
        inputs = [leaf(a, device, requires_grad=n) for a, n in zip(arrays, case["needs"])]
        out = fn(*inputs, num_heads=H)
        assert out.shape == (3, B, H, L, D)
        if fn is InProjection.apply:
            assert isinstance(out._ctx, InProjection)
        out.backward(ta.backend.to_device(upstream, device))
        results.append([out.numpy()] + [grad_of(t) for t in inputs])
    assert_same(*results)
    assert [g is not None for g in results[0][1:]] == case["needs"]
    np.testing.assert_array_equal(upstream, kept)  # the caller's gradient is never written to


# ----------------------------------------------------------------------------- MultiHeadAttention


def randomized(module, rng):
    """``module`` in float64 with every parameter drawn afresh (non-zero biases, LayerNorm affine)."""
    module.double()
    for p in module.parameters():
        p.data = rng.standard_normal(p.shape) * 0.5
    return module


def mha_mask(kind, B, L, rng, device):
    """Our ``attn_mask`` of ``kind``; fully masked rows happen (padding length 0, blank rows)."""
    if kind == "none":
        return None
    if kind == "padding":
        return F.padding_mask(rng.integers(0, L + 1, size=B), L).to(device)  # (B, 1, 1, L)
    if kind == "bool2d":
        return ta.tensor(rng.random((L, L)) < 0.7, device=device)
    if kind == "bool3d":
        return ta.tensor(rng.random((B, L, L)) < 0.7, device=device)  # per batch element: (B, 1, L, L)
    additive = rng.standard_normal((L, L) if kind == "float2d" else (B, 1, 1, L))
    additive[rng.random(additive.shape) < 0.2] = -math.inf
    return leaf(additive, device)


@st.composite
def mha_cases(draw):
    return dict(
        B=draw(st.integers(1, 2)), L=draw(st.integers(1, 5)), H=draw(st.integers(1, 3)), D=draw(st.integers(1, 2)),
        bias=draw(st.booleans()), is_causal=draw(st.booleans()),
        mask=draw(st.sampled_from(["none", "padding", "bool2d", "bool3d", "float2d", "float4d"])),
        seed=draw(st.integers(0, 2**31 - 1)),
    )


@pytest.mark.parametrize("device", DEVICES)
@given(case=mha_cases())
def test_mha_fused_self_attention_matches_composed(device, case):
    B, L, H, D = (case[n] for n in "BLHD")
    rng = np.random.default_rng(case["seed"])
    mha = randomized(nn.MultiHeadAttention(H * D, H, bias=case["bias"]), rng).to(device)
    compiled = ta.compile(mha)
    x = leaf(rng.standard_normal((B, L, H * D)), device)
    mask = mha_mask(case["mask"], B, L, rng, device)
    upstream = ta.tensor(rng.standard_normal((B, L, H * D)), device=device)

    results = []
    for module, need_weights in ((compiled, False), (mha, False), (compiled, True)):
        x.grad = None
        if mask is not None:
            mask.grad = None
        mha.zero_grad()
        out, weights = module(x, x, x, attn_mask=mask, is_causal=case["is_causal"], need_weights=need_weights)
        assert (weights is None) == (not need_weights)
        if module is compiled and not need_weights:  # out_proj(PackedSelfAttention(InProjection(x)))
            attention = out._ctx.parents[0]._ctx
            assert isinstance(out._ctx, ta.fast.Linear) and isinstance(attention, PackedSelfAttention)
            assert isinstance(attention.parents[0]._ctx, InProjection)
        else:  # the reference forward (compiled: its projections fused)
            assert not {"PackedSelfAttention", "InProjection", "Attention"} & node_types(out)
        out.backward(upstream)
        results.append([out.numpy(), grad_of(x)] + [grad_of(p) for _, p in mha.named_parameters()]
                       + [grad_of(mask) if mask is not None and mask.requires_grad else None])
    assert_same(results[0], results[1])
    assert_same(results[2], results[1])


@pytest.mark.parametrize("device", DEVICES)
def test_mha_fused_dropout_in_training_matches_composed_with_the_same_seed(device):
    rng = np.random.default_rng(8)
    mha = randomized(nn.MultiHeadAttention(6, 2, dropout=0.3), rng).to(device).train()
    x = leaf(rng.standard_normal((2, 4, 6)), device)
    upstream = ta.tensor(rng.standard_normal((2, 4, 6)), device=device)
    results = []
    for module, need_weights in ((ta.compile(mha), False), (mha, True)):
        x.grad = None
        mha.zero_grad()
        ta.manual_seed(3)
        out, weights = module(x, x, x, is_causal=True, need_weights=need_weights)
        assert ("PackedSelfAttention" in node_types(out)) == (not need_weights)
        out.backward(upstream)
        results.append([out.numpy(), grad_of(x)] + [grad_of(p) for p in mha.parameters()])
    assert (weights.numpy()[np.broadcast_to(np.tril(np.ones((4, 4), dtype=bool)), weights.shape)] == 0).any()
    assert_same(*results)


@st.composite
def torch_mha_cases(draw):
    return dict(
        B=draw(st.integers(1, 2)), L=draw(st.integers(1, 5)), H=draw(st.integers(1, 2)), D=draw(st.integers(1, 3)),
        bias=draw(st.booleans()),
        mask=draw(st.sampled_from(["none", "bool2d", "padding", "float2d", "causal", "causal+padding"])),
        seed=draw(st.integers(0, 2**31 - 1)),
    )


def torch_and_our_masks(kind, B, L, rng, device):
    """(ours, is_causal, torch attn_mask, torch key_padding_mask); torch's boolean masks mean True = NOT
    allowed, the opposite of ours. Key 0 stays visible (torch gives NaN on a row with no key)."""
    causal = np.tril(np.ones((L, L), dtype=bool))
    padding = np.arange(L)[None, :] < rng.integers(1, L + 1, size=B)[:, None]  # (B, L) True = may attend
    our_padding = ta.tensor(padding[:, None, None, :], device=device)  # (B, 1, 1, L)
    if kind == "none":
        return None, False, None, None
    if kind == "bool2d":
        allowed = rng.random((L, L)) < 0.6
        allowed[:, 0] = True
        return ta.tensor(allowed, device=device), False, torch.tensor(~allowed), None
    if kind == "padding":
        return our_padding, False, None, torch.tensor(~padding)
    if kind == "float2d":
        additive = rng.standard_normal((L, L))
        return ta.tensor(additive, device=device), False, torch.tensor(additive), None
    if kind == "causal":
        return None, True, torch.tensor(~causal), None
    return our_padding, True, torch.tensor(~causal), torch.tensor(~padding)


@pytest.mark.parametrize("device", DEVICES)
@given(case=torch_mha_cases())
def test_mha_fused_self_attention_matches_torch(device, case):
    B, L, H, D = (case[n] for n in "BLHD")
    E = H * D
    rng = np.random.default_rng(case["seed"])
    torch.manual_seed(case["seed"])
    theirs = torch.nn.MultiheadAttention(E, H, bias=case["bias"], batch_first=True).double()
    with torch.no_grad():
        for p in theirs.parameters():  # non-zero biases too
            p.copy_(torch.tensor(rng.standard_normal(tuple(p.shape)) * 0.5))
    ours = ta.compile(load_from_torch(nn.MultiHeadAttention(E, H, bias=case["bias"]), theirs, device))
    x = rng.standard_normal((B, L, E))
    mask, is_causal, torch_mask, key_padding = torch_and_our_masks(case["mask"], B, L, rng, device)
    upstream = rng.standard_normal((B, L, E))

    t_x = torch.tensor(x, requires_grad=True)
    t_out, _ = theirs(t_x, t_x, t_x, attn_mask=torch_mask, key_padding_mask=key_padding, need_weights=False)
    (t_out * torch.tensor(upstream)).sum().backward()

    x_ = leaf(x, device)
    out, weights = ours(x_, attn_mask=mask, is_causal=is_causal, need_weights=False)
    assert weights is None and {"PackedSelfAttention", "InProjection"} <= node_types(out)
    out.backward(ta.tensor(upstream, device=device))

    np.testing.assert_allclose(out.numpy(), t_out.detach().numpy(), rtol=1e-9, atol=1e-10)
    np.testing.assert_allclose(host(x_.grad), t_x.grad.numpy(), rtol=1e-9, atol=1e-10)
    assert_parameter_grads_match(ours, theirs)


# ----------------------------------------------------------------------------- TransformerEncoderLayer


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("norm_first", [False, True])
@given(B=st.integers(1, 2), L=st.integers(1, 4), H=st.integers(1, 2), D=st.integers(1, 2),
       mask_kind=st.sampled_from(["none", "padding", "bool3d", "float2d"]), is_causal=st.booleans(),
       seed=st.integers(0, 2**31 - 1))
def test_encoder_layer_fused_matches_keep_attn_weights(device, norm_first, B, L, H, D, mask_kind, is_causal, seed):
    rng = np.random.default_rng(seed)
    layer = nn.TransformerEncoderLayer(H * D, H, dim_feedforward=5, dropout=0.0, activation="gelu",
                                       norm_first=norm_first)
    layer = randomized(layer, rng).to(device).eval()
    compiled = ta.compile(layer)
    src = leaf(rng.standard_normal((B, L, H * D)), device)
    mask = mha_mask(mask_kind, B, L, rng, device)
    upstream = ta.tensor(rng.standard_normal((B, L, H * D)), device=device)

    results = []
    for module, keep in ((compiled, False), (compiled, True), (layer, False)):
        module.keep_attn_weights = keep
        layer.zero_grad()
        src.grad = None
        if mask is not None:
            mask.grad = None
        out = module(src, src_mask=mask, is_causal=is_causal)
        types = node_types(out)
        if keep:  # the weights are kept: the attention composed (the projections fused)
            assert not types & {"SelfAttentionBlock", "PackedSelfAttention", "InProjection"}
        elif module is layer:  # not compiled: every node the reference's
            assert not types & {"SelfAttentionBlock", "FeedForwardBlock", "PackedSelfAttention", "Linear"}
        elif mask is not None and mask.requires_grad:  # the mask's gradient: attention's own fused nodes
            assert {"PackedSelfAttention", "InProjection"} <= types and "SelfAttentionBlock" not in types
        else:
            assert "SelfAttentionBlock" in types
        assert (module.attn_weights is not None) == keep
        out.backward(upstream)
        results.append([out.numpy(), grad_of(src)] + [grad_of(p) for _, p in layer.named_parameters()]
                       + [grad_of(mask) if mask is not None and mask.requires_grad else None])
    assert_same(results[0], results[2])
    assert_same(results[1], results[2])


def test_a_leafs_gradient_is_its_own_array_and_stays_as_later_calls_run(monkeypatch):
    """The compiled attention makes a leaf input's gradient as an array of its own (not a view of the fast floor's
    kept memory), which the engine then keeps as the leaf's ``.grad`` uncopied; later calls, which reuse that
    memory for their own arrays, leave it as it was, and a second backward adds into it."""
    attention = ta.compile(F.scaled_dot_product_attention)
    rng = np.random.default_rng(0)
    q, k, v = (ta.tensor(rng.standard_normal((2, 4, 128, 64), dtype=np.float32), requires_grad=True)
               for _ in range(3))  # 128 KiB each: past fast.buffers' smallest kept array
    g = ta.tensor(rng.standard_normal((2, 4, 128, 64), dtype=np.float32))
    from tinyattn import engine

    given = {}
    accumulate = engine._accumulate_leaf
    monkeypatch.setattr(engine, "_accumulate_leaf",
                        lambda t, grad, unshared=False: given.update({id(t): grad}) or accumulate(t, grad, unshared))
    attention(q, k, v, need_weights=False)[0].backward(g)
    assert all(t.grad is given[id(t)] for t in (q, k, v))  # the node's own arrays, taken uncopied
    first = [t.grad.copy() for t in (q, k, v)]
    for _ in range(2):  # other calls through the same kernels and memory
        attention(v, q, k, need_weights=False)[0].sum().backward()
        attention(k * 1, v * 1, q * 1, need_weights=False)[0].sum()
    for t in (q, k, v):
        t.grad = None
    attention(q, k, v, need_weights=False)[0].backward(g)
    again = [t.grad.copy() for t in (q, k, v)]
    attention(q, k, v, need_weights=False)[0].backward(g)
    for t, one, same in zip((q, k, v), first, again):
        np.testing.assert_array_equal(same, one)
        np.testing.assert_allclose(t.grad, 2 * one, rtol=1e-6, atol=1e-6)
