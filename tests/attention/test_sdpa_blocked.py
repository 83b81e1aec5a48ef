"""The memory-efficient attention path (``BlockedAttention``, which the compiled
``F.scaled_dot_product_attention`` takes for long keys) against the whole-matrix definition.

Oracles: the definition (itself checked against PyTorch in ``test_sdpa.py``) for the
output and every gradient, with the blocked path forced on small inputs and blocks of 2–4 keys
(several blocks and a ragged last one); ``tinyattn.testing.gradcheck`` (calculus); invariants
(fully masked rows give exact zeros, no ``(…, Lq, Lk)`` array is ever allocated, the path is
taken only where it should be).
"""

import math
import tracemalloc

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from torch_parity import host

import tinyattn as ta
import tinyattn.nn.functional as F
from tinyattn.fast import Attention, BlockedAttention, blocked_attention, tuning
from tinyattn.testing import gradcheck

sdpa = ta.compile(F.scaled_dot_product_attention)  # the compiled form: the blocked path for long keys


def blocked_path(block_size):
    """Send every call of ``sdpa`` with ``need_weights=False`` and without dropout down the blocked path."""
    return tuning.tuned(blocked_attention_min_keys=0, attention_block_size=block_size)


def some_axes_one(draw, shape):
    """``shape`` with a random subset of its axes set to 1 (it still broadcasts back)."""
    return tuple(n if draw(st.booleans()) else 1 for n in shape)


@st.composite
def blocked_cases(draw):
    """Shapes (leading axes broadcasting between q, k, v and the mask), a mask, options, a block size."""
    lead = tuple(draw(st.lists(st.integers(1, 2), min_size=0, max_size=2)))
    Lq, Lk, E, Ev = draw(st.integers(1, 8)), draw(st.integers(5, 9)), draw(st.integers(1, 4)), draw(st.integers(1, 3))
    q_lead, k_lead, v_lead = (some_axes_one(draw, lead) for _ in range(3))
    kind = draw(st.sampled_from(["none", "bool", "float", "float_inf"]))
    scores_shape = (*np.broadcast_shapes(q_lead, k_lead), Lq, Lk)
    mask_shape = list(some_axes_one(draw, scores_shape))[draw(st.integers(0, len(lead))):]
    if draw(st.integers(0, 3)):  # mostly keep the key axis, whose slicing per block is the interesting case
        mask_shape[-1] = Lk
    return dict(
        q_shape=(*q_lead, Lq, E), k_lead=k_lead, v_lead=v_lead, Lk=Lk, Ev=Ev,
        kind=kind, mask_shape=tuple(mask_shape), is_causal=draw(st.booleans()),
        scale=draw(st.sampled_from([None, 0.4, 1.3])), block_size=draw(st.integers(2, 4)),
        dtype=draw(st.sampled_from([np.float64, np.float32])), empty_rows=draw(st.booleans()),
        seed=draw(st.integers(0, 2**31 - 1)),
    )


def make_inputs(case):
    """Host arrays q, k, v, the mask (or None) and the upstream gradient of the output."""
    rng = np.random.default_rng(case["seed"])
    dtype, mask_shape = case["dtype"], case["mask_shape"]
    q = rng.standard_normal(case["q_shape"])
    k = rng.standard_normal((*case["k_lead"], case["Lk"], case["q_shape"][-1]))
    v = rng.standard_normal((*case["v_lead"], case["Lk"], case["Ev"]))
    mask = None
    if case["kind"] == "bool":
        mask = rng.random(mask_shape) < 0.7
        if case["empty_rows"]:
            mask[(rng.random(mask_shape[:-1]) < 0.4)] = False  # some query rows may attend nothing
    elif case["kind"].startswith("float"):
        mask = rng.standard_normal(mask_shape)
        if case["kind"] == "float_inf":
            mask[rng.random(mask_shape) < 0.3] = -math.inf
            if case["empty_rows"]:
                mask[(rng.random(mask_shape[:-1]) < 0.4)] = -math.inf
    out_shape = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2]) + (q.shape[-2], case["Ev"])
    upstream = rng.standard_normal(out_shape)
    cast = lambda a: a if a is None or a.dtype == bool else a.astype(dtype)
    return cast(q), cast(k), cast(v), cast(mask), cast(upstream)


def attend(q, k, v, mask, upstream, case, device, blocked):
    """Output and gradients (q, k, v, and the float mask) of one attention call, on the host."""
    leaves = [ta.tensor(a, requires_grad=True, device=device) for a in (q, k, v)]
    attn_mask = None
    if mask is not None:
        attn_mask = ta.tensor(mask, requires_grad=mask.dtype != bool, device=device)
        if attn_mask.requires_grad:
            leaves.append(attn_mask)
    if blocked:
        with blocked_path(case["block_size"]):
            out, weights = sdpa(
                *leaves[:3], attn_mask=attn_mask, is_causal=case["is_causal"], scale=case["scale"], need_weights=False
            )
        assert weights is None and isinstance(out._ctx, BlockedAttention)
    else:
        out, _ = F.scaled_dot_product_attention(
            *leaves[:3], attn_mask=attn_mask, is_causal=case["is_causal"], scale=case["scale"]
        )
        assert not isinstance(out._ctx, BlockedAttention)
    out.backward(ta.tensor(upstream, device=device))
    return out.numpy(), [host(t.grad) for t in leaves]


def allowed_keys(mask, case):
    """Boolean ``(…, Lq, Lk)``: where a query may attend a key (mask and causality together)."""
    Lq, Lk = case["q_shape"][-2], case["Lk"]
    allowed = np.ones((Lq, Lk), dtype=bool)
    if mask is not None:
        allowed = allowed & (mask if mask.dtype == bool else mask > -math.inf)
    if case["is_causal"]:
        allowed = allowed & np.tril(np.ones((Lq, Lk), dtype=bool))
    return allowed


@given(case=blocked_cases())
def test_blocked_path_matches_the_whole_matrix_path(device, case):
    q, k, v, mask, upstream = make_inputs(case)
    out, grads = attend(q, k, v, mask, upstream, case, device, blocked=True)
    expected_out, expected_grads = attend(q, k, v, mask, upstream, case, device, blocked=False)

    tol = dict(rtol=1e-10, atol=1e-12) if case["dtype"] == np.float64 else dict(rtol=2e-4, atol=2e-5)
    assert out.dtype == case["dtype"] and all(g.dtype == case["dtype"] for g in grads)
    np.testing.assert_allclose(out, expected_out, **tol)
    for name, got, expected in zip(["query", "key", "value", "attn_mask"], grads, expected_grads):
        assert got.shape == expected.shape, name
        assert np.isfinite(got).all(), name
        np.testing.assert_allclose(got, expected, err_msg=name, **tol)

    # a query row with no key to attend: exact zeros in the output and in the query's gradient
    empty = np.broadcast_to(~allowed_keys(mask, case).any(-1), out.shape[:-1])  # (…, Lq)
    assert (out[empty] == 0).all()
    if grads[0].shape[:-1] == empty.shape:  # a broadcast query sums gradients over the rows it served
        assert (grads[0][empty] == 0).all()


@pytest.mark.parametrize("kind", ["none", "bool", "float", "float_inf"])
@pytest.mark.parametrize("is_causal", [False, True])
@pytest.mark.parametrize("lengths", [(6, 9), (9, 5)])
def test_every_mask_kind_with_and_without_causality(device, kind, is_causal, lengths):
    """The property test's corners, each one for sure: (B, H, Lq, Lk) with a (B, 1, Lq, Lk) mask."""
    Lq, Lk = lengths
    case = dict(q_shape=(2, 2, Lq, 3), k_lead=(2, 2), v_lead=(2, 2), Lk=Lk, Ev=2, kind=kind, mask_shape=(2, 1, Lq, Lk),
                is_causal=is_causal, scale=None, block_size=2, dtype=np.float64, empty_rows=True, seed=Lq + Lk)
    q, k, v, mask, upstream = make_inputs(case)
    out, grads = attend(q, k, v, mask, upstream, case, device, blocked=True)
    expected_out, expected_grads = attend(q, k, v, mask, upstream, case, device, blocked=False)
    np.testing.assert_allclose(out, expected_out, rtol=1e-10, atol=1e-12)
    for got, expected in zip(grads, expected_grads):
        np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("how", ["bool", "causal_and_bool", "float_inf"])
def test_fully_masked_rows_give_exact_zeros(device, how, dtype):
    """A query row with nothing to attend, in a call spanning three blocks of keys."""
    rng = np.random.default_rng(0)
    q, k, v = (ta.tensor(rng.standard_normal(s).astype(dtype), requires_grad=True, device=device)
               for s in [(2, 4, 3), (2, 7, 3), (2, 7, 2)])
    mask, is_causal = rng.random((2, 4, 7)) < 0.8, how == "causal_and_bool"
    if how == "bool":
        mask[0, 1] = False
    elif how == "causal_and_bool":
        mask[0, 1, :2] = False  # causality forbids keys 2.. of query 1; the mask forbids 0 and 1
    else:
        mask = rng.standard_normal((2, 4, 7)).astype(dtype)
        mask[0, 1] = -math.inf
    mask = ta.tensor(mask, requires_grad=how == "float_inf", device=device)
    with blocked_path(3):
        out, _ = sdpa(q, k, v, attn_mask=mask, is_causal=is_causal, need_weights=False)
    assert isinstance(out._ctx, BlockedAttention)
    out.backward(ta.tensor(rng.standard_normal(out.shape).astype(dtype), device=device))
    assert (out.numpy()[0, 1] == 0).all() and np.isfinite(out.numpy()).all()
    assert (host(q.grad)[0, 1] == 0).all()
    for t in (q, k, v) + ((mask,) if mask.requires_grad else ()):
        assert np.isfinite(host(t.grad)).all() and t.grad.dtype == dtype
    if mask.requires_grad:
        assert (host(mask.grad)[0, 1] == 0).all()


def test_gradcheck_through_the_blocked_path(device):
    rng = np.random.default_rng(1)
    q = ta.tensor(rng.standard_normal((2, 1, 3, 2)), requires_grad=True, device=device)  # (B, 1, Lq, E)
    k = ta.tensor(rng.standard_normal((1, 2, 5, 2)), requires_grad=True, device=device)  # (1, H, Lk, E)
    v = ta.tensor(rng.standard_normal((1, 2, 5, 2)), requires_grad=True, device=device)
    additive = rng.standard_normal((3, 5))
    additive[0, 1] = additive[2, 4] = -math.inf
    additive[1, :] = -math.inf  # a row with nothing to attend
    float_mask = ta.tensor(additive, requires_grad=True, device=device)
    allowed = ta.tensor(rng.random((2, 1, 3, 5)) < 0.7, device=device)

    def attend(q, k, v, float_mask):
        with blocked_path(2):
            plain = sdpa(q, k, v, attn_mask=float_mask, scale=0.9, need_weights=False)[0]
            causal = sdpa(q, k, v, attn_mask=allowed, is_causal=True, need_weights=False)[0]
        assert not ta.is_grad_enabled() or isinstance(plain._ctx, BlockedAttention)  # finite differences: no graph
        return plain, causal

    assert gradcheck(attend, [q, k, v, float_mask])


def test_the_path_is_chosen_by_need_weights_dropout_dtype_and_length(device):
    with tuning.tuned(blocked_attention_min_keys=6):
        chosen_paths(device)


def chosen_paths(device):
    rng = np.random.default_rng(2)
    q, k, v = (ta.tensor(rng.standard_normal(s).astype(np.float32), requires_grad=True, device=device)
               for s in [(2, 3, 4), (2, 6, 4), (2, 6, 4)])
    blocked = lambda out: isinstance(out._ctx, BlockedAttention)
    assert blocked(sdpa(q, k, v, need_weights=False)[0])
    out, weights = sdpa(q, k, v)  # the weights are wanted: the definition
    assert not blocked(out) and weights is not None and weights.shape == (2, 3, 6)
    assert not blocked(sdpa(q, k, v, dropout_p=0.2, need_weights=False)[0])
    assert isinstance(sdpa(q, k[:, :5], v[:, :5], need_weights=False)[0]._ctx, Attention)  # too short: whole scores
    with pytest.raises(RuntimeError, match="query is float32 and key is float64"):  # refused, as in PyTorch
        sdpa(q, k.double(), v, need_weights=False)
    assert not blocked(F.scaled_dot_product_attention(q, k, v, need_weights=False)[0])  # not compiled: the definition


def test_default_block_size_and_threshold(device):
    """Without forcing: 1100 keys (several default blocks, the last one ragged) take the blocked path."""
    rng = np.random.default_rng(4)
    q, k, v = (rng.standard_normal(s) for s in [(2, 1, 37, 8), (2, 1, 1100, 8), (2, 1, 1100, 5)])
    mask = rng.random((37, 1100)) < 0.9
    upstream = rng.standard_normal((2, 1, 37, 5))
    case = dict(is_causal=True, scale=None, block_size=tuning.values.attention_max_block)
    leaves = [ta.tensor(a, requires_grad=True, device=device) for a in (q, k, v)]
    out, _ = sdpa(*leaves, attn_mask=ta.tensor(mask, device=device), is_causal=True, need_weights=False)
    most = tuning.values.attention_max_block
    assert isinstance(out._ctx, BlockedAttention) and most < 1100 and 1100 % most
    out.backward(ta.tensor(upstream, device=device))
    expected_out, expected_grads = attend(q, k, v, mask, upstream, case, device, blocked=False)
    np.testing.assert_allclose(out.numpy(), expected_out, rtol=1e-10, atol=1e-12)
    for leaf, expected in zip(leaves, expected_grads):
        np.testing.assert_allclose(host(leaf.grad), expected, rtol=1e-10, atol=1e-12)


def test_never_allocates_the_score_matrix():
    """Peak traced memory of forward + backward stays far below one (Lq, Lk) array of scores."""
    rng = np.random.default_rng(3)
    L, E = 2048, 16
    q, k, v = (ta.tensor(rng.standard_normal((L, E)).astype(np.float32), requires_grad=True) for _ in range(3))
    upstream = ta.tensor(rng.standard_normal((L, E)).astype(np.float32))
    scores_bytes = L * L * 4
    with blocked_path(64):
        tracemalloc.start()
        try:
            out, _ = sdpa(q, k, v, is_causal=True, need_weights=False)
            out.backward(upstream)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert isinstance(k.grad, np.ndarray) and np.isfinite(k.grad).all()
    assert peak < scores_bytes / 8, f"peak {peak} bytes, one score matrix is {scores_bytes}"


def test_block_size_must_be_positive():
    q = ta.zeros(2, 3)
    with pytest.raises(ValueError, match="block_size"):
        blocked_attention(q, q, q, None, False, 1.0, block_size=0)
