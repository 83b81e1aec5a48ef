"""Scaled dot-product attention: PyTorch parity, finite differences, and the mask invariants.

Oracles: ``torch.nn.functional.scaled_dot_product_attention`` plus a torch reference for the
weights and every gradient (parity); ``tinyattn.testing.gradcheck`` (calculus); invariants
(masked keys never leak, causal outputs never see the future, rows sum to 1 or 0, fully
masked rows give zeros, permutation equivariance, float32 stays float32).

The tests of the output run on the definition and on ``ta.compile(F.scaled_dot_product_attention)`` (the
``route`` fixture): compiled, a call without the weights (``need_weights=False``) runs the fused nodes; one
that asks for the weights runs the definition.
"""

import math

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from torch_parity import host

import tinyattn as ta
import tinyattn.nn.functional as F
from tinyattn import backend
from tinyattn.fast.kernels import softmax_into
from tinyattn.testing import gradcheck


def leaf(array, device, requires_grad=True):
    return ta.tensor(array, requires_grad=requires_grad, device=device)


@st.composite
def attention_cases(draw):
    """Shapes, a mask kind and options for one attention call; every query keeps key 0."""
    lead = draw(st.lists(st.integers(1, 2), min_size=0, max_size=2))
    Lq, Lk, E, Ev = draw(st.integers(1, 5)), draw(st.integers(1, 6)), draw(st.integers(1, 5)), draw(st.integers(1, 4))
    kind = draw(st.sampled_from(["none", "bool", "float", "float_inf"]))
    # the mask broadcasts: some of its axes are 1, some leading axes are dropped
    mask_shape = [n if draw(st.booleans()) else 1 for n in (*lead, Lq, Lk)]
    mask_shape = mask_shape[draw(st.integers(0, len(lead))):]
    mask_shape[-1] = Lk  # keys stay distinct so that key 0 can be kept
    return dict(
        lead=tuple(lead), Lq=Lq, Lk=Lk, E=E, Ev=Ev, kind=kind, mask_shape=tuple(mask_shape),
        is_causal=draw(st.booleans()), scale=draw(st.sampled_from([None, 0.3, 1.7])),
        seed=draw(st.integers(0, 2**31 - 1)),
    )


def make_inputs(case):
    """Random q, k, v and the mask, on the host; each query row may attend key 0."""
    rng = np.random.default_rng(case["seed"])
    lead, Lq, Lk = case["lead"], case["Lq"], case["Lk"]
    q = rng.standard_normal((*lead, Lq, case["E"]))
    k = rng.standard_normal((*lead, Lk, case["E"]))
    v = rng.standard_normal((*lead, Lk, case["Ev"]))
    mask = None
    if case["kind"] == "bool":
        mask = rng.random(case["mask_shape"]) < 0.6
        mask[..., 0] = True
    elif case["kind"].startswith("float"):
        mask = rng.standard_normal(case["mask_shape"])
        if case["kind"] == "float_inf":
            mask[(rng.random(case["mask_shape"]) < 0.4)] = -math.inf
            mask[..., 0] = rng.standard_normal(mask[..., 0].shape)
    return q, k, v, mask


def torch_attention(q, k, v, mask, is_causal, scale):
    """Torch's SDPA for the output; the same masked softmax spelled out in torch for the weights."""
    if is_causal:  # torch's SDPA takes a mask or is_causal, not both: fold the causal mask in
        causal = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool).tril()
        if mask is None:
            mask = causal
        elif mask.dtype == torch.bool:
            mask = mask & causal
        else:
            mask = mask.masked_fill(~causal, -math.inf)
    scores = q @ k.transpose(-2, -1) * (1 / math.sqrt(q.shape[-1]) if scale is None else scale)
    if mask is not None:
        scores = scores.masked_fill(~mask, -math.inf) if mask.dtype == torch.bool else scores + mask
    weights = torch.softmax(scores, dim=-1)
    output = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale)
    return output, weights


@given(case=attention_cases(), need_weights=st.booleans())
def test_matches_torch(device, route, case, need_weights):
    q, k, v, mask = make_inputs(case)
    rng = np.random.default_rng(case["seed"] + 1)

    tq, tk, tv = (torch.tensor(a, requires_grad=True) for a in (q, k, v))
    tmask = None if mask is None else torch.tensor(mask, requires_grad=mask.dtype == np.float64)
    t_out, t_w = torch_attention(tq, tk, tv, tmask, case["is_causal"], case["scale"])
    np.testing.assert_allclose(t_out.detach().numpy(), (t_w @ tv).detach().numpy(), rtol=1e-9, atol=1e-10)
    g_out, g_w = rng.standard_normal(t_out.shape), rng.standard_normal(t_w.shape)
    loss = (t_out * torch.tensor(g_out)).sum()
    (loss + (t_w * torch.tensor(g_w)).sum() if need_weights else loss).backward()

    q_, k_, v_ = (leaf(a, device) for a in (q, k, v))
    mask_ = None if mask is None else leaf(mask, device, requires_grad=mask.dtype == np.float64)
    out, w = route(F.scaled_dot_product_attention)(
        q_, k_, v_, attn_mask=mask_, is_causal=case["is_causal"], scale=case["scale"], need_weights=need_weights
    )
    (out * ta.tensor(g_out, device=device)).sum().backward(retain_graph=True)
    if need_weights:
        (w * ta.tensor(g_w, device=device)).sum().backward()
        np.testing.assert_allclose(w.numpy(), t_w.detach().numpy(), rtol=1e-9, atol=1e-10)
    else:
        assert w is None
        assert route is not ta.compile or type(out.grad_fn).__name__ == "Attention"  # compiled: the fused node ran

    np.testing.assert_allclose(out.numpy(), t_out.detach().numpy(), rtol=1e-9, atol=1e-10)
    for ours, theirs in [(q_, tq), (k_, tk), (v_, tv)] + ([(mask_, tmask)] if mask_ is not None and
                                                          mask_.requires_grad else []):
        np.testing.assert_allclose(host(ours.grad), theirs.grad.numpy(), rtol=1e-9, atol=1e-10)


@given(
    shape=st.tuples(st.integers(1, 3), st.integers(1, 5), st.integers(1, 6)),
    seed=st.integers(0, 2**31 - 1),
    dtype=st.sampled_from([np.float64, np.float32]),
    spread=st.sampled_from([1.0, 50.0, 80.0, 400.0, 1e3, 1e5]),  # 80, 400: around float32, float64 underflow
)
def test_the_softmax_kernel_with_rows_far_apart_matches_a_per_row_reference(device, shape, seed, dtype, spread):
    """The fused attention's softmax (``fast.kernels.softmax_into``) shifts by the largest score of the whole
    array: rows far below it (offsets up to ``spread``, far past exp's range) must still come out as a per-row
    softmax, and rows with no key as 0."""
    rng = np.random.default_rng(seed)
    scores = rng.standard_normal(shape) + rng.uniform(-spread, spread, shape[:-1] + (1,))  # one offset per row
    allowed = rng.random(shape) < 0.7
    allowed[rng.random(shape[:-1]) < 0.2] = False  # some rows with no key at all
    scores = scores.astype(dtype)

    masked = ta.tensor(np.where(allowed, scores, -np.inf), device=device)._data
    out = backend.to_numpy(softmax_into(masked, backend.namespace(masked).empty_like(masked)))

    masked = np.where(allowed, scores.astype(np.float64), -np.inf)
    row_max = masked.max(-1, keepdims=True)
    exps = np.exp(masked - np.where(np.isfinite(row_max), row_max, 0))
    totals = exps.sum(-1, keepdims=True)
    expected = np.where(totals > 0, exps / np.where(totals > 0, totals, 1), 0)
    tol = dict(rtol=1e-12, atol=1e-14) if dtype == np.float64 else dict(rtol=2e-5, atol=1e-6)
    assert out.dtype == dtype and np.isfinite(out).all()
    np.testing.assert_allclose(out, expected, **tol)


def test_a_whole_row_pushed_down_by_a_float_mask_stays_a_softmax_as_in_pytorch(device):
    """An additive mask of -1e4 on every key of a row shifts the whole row: its softmax is unchanged,
    as in PyTorch, not zeros (only -inf forbids a key)."""
    scores = np.array([[[0.5, 1.0, -0.5], [2.0, 0.0, 1.0]]], dtype=np.float32)
    mask = np.array([[0.0, 0.0, 0.0], [-1e4, -1e4, -1e4]], dtype=np.float32)
    q = leaf(scores * np.float32(np.sqrt(3)), device)  # q kᵀ/√3 = scores
    kv = leaf(np.eye(3, dtype=np.float32)[None], device)
    for sdpa in (F.scaled_dot_product_attention, ta.compile(F.scaled_dot_product_attention)):  # the definition,
        out, _ = sdpa(q, kv, kv, attn_mask=ta.tensor(mask, device=device), need_weights=False)  # the fused node
        t_w = torch.softmax(torch.tensor(scores + mask), -1)  # v = I: the output is the weights
        np.testing.assert_allclose(out.numpy(), t_w.numpy(), rtol=1e-5, atol=1e-6)
        unshifted = np.exp(scores[0, 1]) / np.exp(scores[0, 1]).sum()  # shifting a whole row changes nothing
        np.testing.assert_allclose(out.numpy()[0, 1], unshifted, rtol=1e-5)


# ----------------------------------------------------------------------------- finite differences


def test_gradcheck_with_fully_masked_row_and_float_mask(device, route):
    sdpa = route(F.scaled_dot_product_attention)
    rng = np.random.default_rng(0)
    q, k, v = (leaf(rng.standard_normal(s), device) for s in [(2, 3, 4), (2, 5, 4), (2, 5, 3)])
    allowed = rng.random((2, 3, 5)) < 0.7
    allowed[:, :, 0] = True
    allowed[1, 2] = False  # one query with nothing to attend
    bool_mask = ta.tensor(allowed, device=device)
    float_mask = leaf(rng.standard_normal((1, 3, 5)), device)  # broadcast over the batch: its gradient sums

    def attend(q, k, v, float_mask):
        out, w = sdpa(q, k, v, attn_mask=float_mask, scale=0.8)
        masked_out, masked_w = sdpa(q, k, v, attn_mask=bool_mask, is_causal=True)
        alone = sdpa(q, k, v, attn_mask=float_mask, scale=0.8, need_weights=False)[0]  # (compiled: fused)
        masked_alone = sdpa(q, k, v, attn_mask=bool_mask, is_causal=True, need_weights=False)[0]
        return out, w, masked_out, masked_w, alone, masked_alone

    assert gradcheck(attend, [q, k, v, float_mask])


def test_gradcheck_broadcast_leading_dims_and_inf_mask(device, route):
    sdpa = route(F.scaled_dot_product_attention)
    rng = np.random.default_rng(1)
    q = leaf(rng.standard_normal((2, 1, 3, 2)), device)  # (B, 1, Lq, E)
    k = leaf(rng.standard_normal((1, 2, 4, 2)), device)  # (1, H, Lk, E)
    v = leaf(rng.standard_normal((1, 2, 4, 3)), device)
    mask = rng.standard_normal((3, 4))
    mask[0, :] = -math.inf  # a query row forbidden everywhere by -inf
    mask[1, 2] = -math.inf
    mask = leaf(mask, device)

    def attend(q, k, v, m):  # with the weights, and the output alone (compiled: the fused node)
        return (*sdpa(q, k, v, attn_mask=m), sdpa(q, k, v, attn_mask=m, need_weights=False)[0])

    assert gradcheck(attend, [q, k, v, mask])


# ----------------------------------------------------------------------------- invariants


@given(case=attention_cases(), data=st.data())
def test_values_at_masked_keys_never_leak(device, route, case, data):
    """Changing key and value rows that every query has masked changes nothing."""
    q, k, v, _ = make_inputs(case)
    Lk = case["Lk"]
    hidden = np.array([False] + [data.draw(st.booleans()) for _ in range(Lk - 1)])  # key 0 stays visible
    allowed = ta.tensor(~hidden, device=device)  # (Lk,) broadcasts over everything
    rng = np.random.default_rng(case["seed"] + 2)
    k2, v2 = k.copy(), v.copy()
    k2[..., hidden, :] = rng.standard_normal(k2[..., hidden, :].shape) * 100
    v2[..., hidden, :] = rng.standard_normal(v2[..., hidden, :].shape) * 100
    outs = [
        route(F.scaled_dot_product_attention)(leaf(q, device), leaf(kk, device), leaf(vv, device), attn_mask=allowed,
                                              is_causal=case["is_causal"], need_weights=False)[0].numpy()
        for kk, vv in [(k, v), (k2, v2)]
    ]
    np.testing.assert_allclose(outs[0], outs[1], rtol=1e-12, atol=1e-12)


@given(case=attention_cases(), data=st.data())
def test_causal_output_never_sees_the_future(device, route, case, data):
    """Output rows 0..t, and their gradients, are blind to query, key, value rows after t."""
    sdpa = route(F.scaled_dot_product_attention)
    q, k, v, _ = make_inputs(dict(case, Lk=case["Lq"]))
    L = case["Lq"]
    t = data.draw(st.integers(0, L - 1))
    rng = np.random.default_rng(case["seed"] + 3)
    q2, k2, v2 = q.copy(), k.copy(), v.copy()
    for a in (q2, k2, v2):
        a[..., t + 1:, :] = rng.standard_normal(a[..., t + 1:, :].shape) * 10
    outs = [sdpa(leaf(a, device), leaf(b, device), leaf(c, device), is_causal=True, need_weights=False)[0]
            for a, b, c in [(q, k, v), (q2, k2, v2)]]
    np.testing.assert_allclose(outs[0].numpy()[..., :t + 1, :], outs[1].numpy()[..., :t + 1, :], rtol=1e-12,
                               atol=1e-12)

    # the gradient of the past outputs with respect to future inputs is exactly zero
    q_, k_, v_ = (leaf(a, device) for a in (q, k, v))
    out, _ = sdpa(q_, k_, v_, is_causal=True, need_weights=False)
    upstream = rng.standard_normal(out.shape)
    upstream[..., t + 1:, :] = 0
    out.backward(ta.tensor(upstream, device=device))
    for x in (q_, k_, v_):
        assert (host(x.grad)[..., t + 1:, :] == 0).all()


def test_causal_is_top_left_aligned_and_combines_with_mask(device):
    rng = np.random.default_rng(4)
    q, k, v = rng.standard_normal((2, 3, 4)), rng.standard_normal((2, 5, 4)), rng.standard_normal((2, 5, 2))
    allowed = rng.random((2, 3, 5)) < 0.6
    allowed[..., 0] = True
    tril = np.tril(np.ones((3, 5), dtype=bool))
    args = [leaf(a, device, requires_grad=False) for a in (q, k, v)]
    both = F.scaled_dot_product_attention(*args, attn_mask=ta.tensor(allowed, device=device), is_causal=True)
    explicit = F.scaled_dot_product_attention(*args, attn_mask=ta.tensor(allowed & tril, device=device))
    np.testing.assert_array_equal(both[1].numpy(), explicit[1].numpy())
    assert (both[1].numpy()[:, 0, 1:] == 0).all()  # query 0 attends key 0 only
    np.testing.assert_array_equal(F.causal_mask(3, 5).numpy(), tril)


@given(case=attention_cases())
def test_weight_rows_sum_to_one_or_zero(device, case):
    q, k, v, mask = make_inputs(case)
    if case["kind"] == "bool":
        mask[..., 0] = False  # now some rows may have no key left
    mask_ = None if mask is None else ta.tensor(mask, device=device)
    out, w = F.scaled_dot_product_attention(leaf(q, device), leaf(k, device), leaf(v, device), attn_mask=mask_,
                                            is_causal=case["is_causal"])
    weights = w.numpy()
    allowed = np.ones(weights.shape, dtype=bool)
    if mask is not None:
        allowed &= mask if mask.dtype == bool else mask > -math.inf
    if case["is_causal"]:
        allowed &= np.tril(np.ones((case["Lq"], case["Lk"]), dtype=bool))
    expected = allowed.any(-1).astype(np.float64)
    np.testing.assert_allclose(weights.sum(-1), expected, rtol=1e-12, atol=1e-12)
    assert (weights[~allowed] == 0).all()
    assert np.isfinite(out.numpy()).all()


@pytest.mark.parametrize("need_weights", [True, False], ids=["weights", "output"])
@pytest.mark.parametrize("how", ["bool", "causal_and_bool", "float_inf"])
def test_fully_masked_row_gives_zeros_and_zero_gradients(device, route, how, need_weights):
    rng = np.random.default_rng(5)
    q, k, v = (leaf(rng.standard_normal(s), device) for s in [(2, 3, 4), (2, 4, 4), (2, 4, 3)])
    if how == "bool":
        allowed = np.ones((2, 3, 4), dtype=bool)
        allowed[0, 1] = False
        mask, is_causal = ta.tensor(allowed, device=device), False
    elif how == "causal_and_bool":
        allowed = np.ones((2, 3, 4), dtype=bool)
        allowed[0, 1, :2] = False  # causal forbids keys 2, 3 of query 1; the mask forbids 0, 1
        mask, is_causal = ta.tensor(allowed, device=device), True
    else:
        additive = np.zeros((2, 3, 4))
        additive[0, 1] = -math.inf
        mask, is_causal = leaf(additive, device), False
    out, w = route(F.scaled_dot_product_attention)(q, k, v, attn_mask=mask, is_causal=is_causal,
                                                   need_weights=need_weights)
    (out * ta.tensor(rng.standard_normal(out.shape), device=device)).sum().backward(retain_graph=True)
    assert (out.numpy()[0, 1] == 0).all() and np.isfinite(out.numpy()).all()
    if need_weights:
        (w * ta.tensor(rng.standard_normal(w.shape), device=device)).sum().backward()
        assert (w.numpy()[0, 1] == 0).all() and np.isfinite(w.numpy()).all()
    assert (host(q.grad)[0, 1] == 0).all()
    for x in (q, k, v) + ((mask,) if mask.requires_grad else ()):
        assert np.isfinite(host(x.grad)).all()
    if mask.requires_grad:
        assert (host(mask.grad)[0, 1] == 0).all()


@given(shape=st.tuples(st.integers(1, 2), st.integers(1, 6), st.integers(1, 5)), seed=st.integers(0, 2**31 - 1))
def test_self_attention_is_permutation_equivariant(device, route, shape, seed):
    sdpa = route(F.scaled_dot_product_attention)
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape)
    perm = rng.permutation(shape[1])
    out = sdpa(*(leaf(x, device),) * 3, need_weights=False)[0].numpy()
    out_perm = sdpa(*(leaf(x[:, perm], device),) * 3, need_weights=False)[0].numpy()
    np.testing.assert_allclose(out[:, perm], out_perm, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dropout_p", [0.0, 0.3])
def test_float32_in_float32_out(device, route, dropout_p):
    rng = np.random.default_rng(6)
    q, k, v = (leaf(rng.standard_normal(s).astype(np.float32), device) for s in [(2, 3, 4), (2, 5, 4), (2, 5, 3)])
    mask = leaf(rng.standard_normal((3, 5)).astype(np.float32), device)
    for need_weights in (True, False):
        out, w = route(F.scaled_dot_product_attention)(q, k, v, attn_mask=mask, is_causal=True, dropout_p=dropout_p,
                                                       need_weights=need_weights)
        out.backward(ta.tensor(rng.standard_normal(out.shape).astype(np.float32), device=device))
        assert out.dtype == np.float32 and (w is None or w.dtype == np.float32)
        assert all(t.grad.dtype == np.float32 for t in (q, k, v, mask))


def test_mask_that_cannot_broadcast_raises(device, route):
    sdpa = route(F.scaled_dot_product_attention)
    q = ta.zeros(2, 3, 4, device=device)
    k = ta.zeros(2, 5, 4, device=device)
    with pytest.raises(ValueError, match=r"\(3, 4\).*\(2, 3, 5\)"):
        sdpa(q, k, k, attn_mask=ta.ones(3, 4, dtype=bool, device=device))
    with pytest.raises(ValueError, match=r"\(4, 3, 5\).*\(2, 3, 5\)"):  # would grow the scores
        sdpa(q, k, k, attn_mask=ta.ones(4, 3, 5, device=device))
    with pytest.raises(ValueError, match="share the last size E"):
        sdpa(q, ta.zeros(2, 5, 3, device=device), k)
    with pytest.raises(ValueError, match="share the length Lk"):
        sdpa(q, k, ta.zeros(2, 4, 4, device=device))


def test_leading_axes_broadcast_or_raise_and_dropout_p_is_checked(device, route):
    """Equal leading axes, leading axes that broadcast, leading axes that do not; ``dropout_p`` of each kind."""
    sdpa = route(F.scaled_dot_product_attention)
    rng = np.random.default_rng(12)
    q = leaf(rng.standard_normal((2, 1, 3, 4)), device)  # (B, 1, Lq, E)
    k = leaf(rng.standard_normal((1, 3, 5, 4)), device)  # (1, H, Lk, E)
    out, w = sdpa(q, k, k)
    assert out.shape == (2, 3, 3, 4) and w.shape == (2, 3, 3, 5)
    same, _ = sdpa(q, q, q, need_weights=False)
    assert same.shape == (2, 1, 3, 4)
    with pytest.raises(ValueError, match=r"leading dimensions of \(2, 1, 3, 4\), \(3, 3, 5, 4\) cannot be broadcast"):
        sdpa(q, ta.zeros(3, 3, 5, 4, device=device, dtype=ta.float64), k)
    for bad in (1.5, -0.1, "0.1", None):
        with pytest.raises(ValueError, match="dropout_p must be in"):
            sdpa(q, k, k, dropout_p=bad)
    for good in (0, 0.0, np.float32(0.0), np.float64(0.0)):
        np.testing.assert_array_equal(sdpa(q, k, k, dropout_p=good)[0].numpy(), out.numpy())
        np.testing.assert_allclose(sdpa(q, k, k, dropout_p=good, need_weights=False)[0].numpy(), out.numpy(),
                                   rtol=1e-12, atol=1e-12)


def test_need_weights_false_returns_none_and_the_same_output(device, route):
    rng = np.random.default_rng(7)
    q, k, v = (leaf(rng.standard_normal(s), device) for s in [(3, 4), (5, 4), (5, 2)])
    out, w = route(F.scaled_dot_product_attention)(q, k, v, is_causal=True)
    out2, w2 = route(F.scaled_dot_product_attention)(q, k, v, is_causal=True, need_weights=False)
    assert w2 is None and w is not None
    np.testing.assert_allclose(out.numpy(), out2.numpy(), rtol=1e-12, atol=1e-12)  # (compiled: fused without)


def test_dropout_on_the_weights(device):
    rng = np.random.default_rng(8)
    q, k, v = (leaf(rng.standard_normal(s), device) for s in [(2, 6, 4), (2, 7, 4), (2, 7, 3)])
    _, clean = F.scaled_dot_product_attention(q, k, v)
    ta.manual_seed(3)
    out, w = F.scaled_dot_product_attention(q, k, v, dropout_p=0.4)
    ta.manual_seed(3)
    out_again, _ = F.scaled_dot_product_attention(q, k, v, dropout_p=0.4)
    dropped = w.numpy() == 0
    assert dropped.any() and (~dropped).any()
    np.testing.assert_allclose(w.numpy()[~dropped], clean.numpy()[~dropped] / 0.6, rtol=1e-12)
    np.testing.assert_allclose(out.numpy(), w.numpy() @ v.numpy(), rtol=1e-12)  # the returned weights were used
    np.testing.assert_array_equal(out.numpy(), out_again.numpy())  # seeded
    upstream = rng.standard_normal(out.shape)
    out.backward(ta.tensor(upstream, device=device))
    np.testing.assert_allclose(host(v.grad), np.swapaxes(w.numpy(), -1, -2) @ upstream, rtol=1e-12)
    assert (F.scaled_dot_product_attention(q, k, v, dropout_p=1.0)[0].numpy() == 0).all()
    with pytest.raises(ValueError, match="dropout_p"):
        F.scaled_dot_product_attention(q, k, v, dropout_p=1.5)


def test_padding_mask(device):
    lengths = ta.tensor(np.array([2, 4, 0]), device=device)
    mask = F.padding_mask(lengths, 4)
    expected = np.array([[1, 1, 0, 0], [1, 1, 1, 1], [0, 0, 0, 0]], dtype=bool)[:, None, None, :]
    assert mask.shape == (3, 1, 1, 4) and mask.dtype == np.bool_ and mask.device == device
    np.testing.assert_array_equal(mask.numpy(), expected)
    np.testing.assert_array_equal(F.padding_mask([2, 4, 0], 4).numpy(), expected)
    np.testing.assert_array_equal(F.padding_mask(np.array([2, 4, 0]), 4).numpy(), expected)
    with pytest.raises(ValueError, match="1-D integer"):
        F.padding_mask([[1, 2]], 3)


def test_padding_mask_hides_padded_keys(device):
    """Keys past each sequence's length never change the output (with heads, (B, H, Lq, Lk))."""
    rng = np.random.default_rng(9)
    q, k, v = rng.standard_normal((2, 2, 3, 4)), rng.standard_normal((2, 2, 5, 4)), rng.standard_normal((2, 2, 5, 4))
    mask = F.padding_mask([3, 5], 5)
    k2, v2 = k.copy(), v.copy()
    k2[0, :, 3:], v2[0, :, 3:] = 50.0, -50.0
    outs = [F.scaled_dot_product_attention(*(leaf(a, device) for a in args), attn_mask=mask.to(device))
            for args in [(q, k, v), (q, k2, v2)]]
    np.testing.assert_allclose(outs[0][0].numpy(), outs[1][0].numpy(), rtol=1e-12, atol=1e-12)
    assert (outs[0][1].numpy()[0, :, :, 3:] == 0).all()
