"""``nn.MultiHeadAttention``: parity with ``torch.nn.MultiheadAttention``, gradcheck, invariants.

Weights are copied from torch through ``interop.from_torch``; every gradient of ours is mapped
back through ``interop.to_torch`` and compared key by key with torch's, in float64. The tests that
run a layer run it as written and compiled (``ta.compile``: the ``route`` fixture).
"""

import math

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from torch_parity import assert_parameter_grads_match, host, load_from_torch

import tinyattn as ta
import tinyattn.nn as nn
import tinyattn.nn.functional as F
from tinyattn.testing import gradcheck


@st.composite
def mha_cases(draw):
    heads = draw(st.integers(1, 2))
    embed_dim = heads * draw(st.integers(1, 3))
    cross = draw(st.booleans())
    return dict(
        B=draw(st.integers(1, 2)), Lq=draw(st.integers(1, 5)), heads=heads, embed_dim=embed_dim, cross=cross,
        Lk=draw(st.integers(1, 6)) if cross else None,
        kdim=draw(st.sampled_from([None, 3])) if cross else None,
        vdim=draw(st.sampled_from([None, 2])) if cross else None,
        bias=draw(st.booleans()),
        mask=draw(st.sampled_from(["none", "bool2d", "bool3d", "padding", "float2d", "causal", "causal+padding"])),
        seed=draw(st.integers(0, 2**31 - 1)),
    )


def mha_masks(case, Lk, rng):
    """(our attn_mask, our is_causal, torch attn_mask, torch key_padding_mask); key 0 always visible."""
    B, Lq, H = case["B"], case["Lq"], case["heads"]
    kind = case["mask"]
    causal = np.tril(np.ones((Lq, Lk), dtype=bool))
    lengths = rng.integers(1, Lk + 1, size=B)
    padding = np.arange(Lk)[None, :] < lengths[:, None]  # (B, Lk) True = may attend
    if kind == "none":
        return None, False, None, None
    if kind == "bool2d":
        allowed = rng.random((Lq, Lk)) < 0.6
        allowed[:, 0] = True
        return ta.tensor(allowed), False, torch.tensor(~allowed), None
    if kind == "bool3d":
        allowed = rng.random((B, Lq, Lk)) < 0.6
        allowed[..., 0] = True
        return ta.tensor(allowed), False, torch.tensor(~allowed).repeat_interleave(H, dim=0), None
    if kind == "padding":
        return F.padding_mask(lengths, Lk), False, None, torch.tensor(~padding)
    if kind == "float2d":
        additive = rng.standard_normal((Lq, Lk))
        return ta.tensor(additive), False, torch.tensor(additive), None
    if kind == "causal":
        return None, True, torch.tensor(~causal), None
    return F.padding_mask(lengths, Lk), True, torch.tensor(~causal), torch.tensor(~padding)  # causal + padding


@given(case=mha_cases())
def test_matches_torch_multihead_attention(device, route, case):
    rng = np.random.default_rng(case["seed"])
    torch.manual_seed(case["seed"])
    E, H, B, Lq = case["embed_dim"], case["heads"], case["B"], case["Lq"]
    theirs = torch.nn.MultiheadAttention(E, H, bias=case["bias"], kdim=case["kdim"], vdim=case["vdim"],
                                         batch_first=True).double()
    ours = route(load_from_torch(nn.MultiHeadAttention(E, H, bias=case["bias"], kdim=case["kdim"], vdim=case["vdim"]),
                                 theirs, device))
    Lk = case["Lk"] if case["cross"] else Lq
    query = rng.standard_normal((B, Lq, E))
    key = rng.standard_normal((B, Lk, case["kdim"] or E)) if case["cross"] else query
    value = rng.standard_normal((B, Lk, case["vdim"] or E)) if case["cross"] else query
    mask, is_causal, torch_mask, key_padding = mha_masks(case, Lk, rng)

    t_inputs = [torch.tensor(a, requires_grad=True) for a in (query, key, value)]
    t_out, t_w = theirs(*(t_inputs if case["cross"] else [t_inputs[0]] * 3), attn_mask=torch_mask,
                        key_padding_mask=key_padding, need_weights=True, average_attn_weights=False)
    g_out, g_w = rng.standard_normal(t_out.shape), rng.standard_normal(t_w.shape)
    ((t_out * torch.tensor(g_out)).sum() + (t_w * torch.tensor(g_w)).sum()).backward()

    inputs = [ta.tensor(a, requires_grad=True, device=device) for a in (query, key, value)]
    args = inputs if case["cross"] else [inputs[0]]
    out, w = ours(*args, attn_mask=None if mask is None else mask.to(device), is_causal=is_causal)
    (out * ta.tensor(g_out, device=device)).sum().backward(retain_graph=True)
    (w * ta.tensor(g_w, device=device)).sum().backward()

    assert out.shape == (B, Lq, E) and w.shape == (B, H, Lq, Lk)
    np.testing.assert_allclose(out.numpy(), t_out.detach().numpy(), rtol=1e-9, atol=1e-10)
    np.testing.assert_allclose(w.numpy(), t_w.detach().numpy(), rtol=1e-9, atol=1e-10)
    for ours_input, torch_input in zip(args, t_inputs):
        np.testing.assert_allclose(host(ours_input.grad), torch_input.grad.numpy(), rtol=1e-9, atol=1e-10)
    assert_parameter_grads_match(ours, theirs)


def test_gradcheck(device, route):
    ta.manual_seed(0)
    mha = route(nn.MultiHeadAttention(4, 2, kdim=3, vdim=2).double().to(device))
    rng = np.random.default_rng(0)
    query = ta.tensor(rng.standard_normal((2, 3, 4)), requires_grad=True, device=device)
    key = ta.tensor(rng.standard_normal((2, 4, 3)), requires_grad=True, device=device)
    value = ta.tensor(rng.standard_normal((2, 4, 2)), requires_grad=True, device=device)
    mask = F.padding_mask([4, 2], 4).to(device)
    params = list(mha.parameters())

    def attend(query, key, value, *_params):
        return mha(query, key, value, attn_mask=mask, is_causal=True)

    assert gradcheck(attend, [query, key, value, *params])


def test_embed_dim_must_divide_into_heads():
    with pytest.raises(ValueError, match=r"embed_dim \(6\).*num_heads \(4\)"):
        nn.MultiHeadAttention(6, 4)


def test_shapes_are_checked(route):
    mha = route(nn.MultiHeadAttention(4, 2, kdim=3))
    with pytest.raises(ValueError, match=r"key must be batch-first \(B, L, 3\), got shape \(1, 2, 4\)"):
        mha(ta.zeros(1, 2, 4))  # key defaults to query, whose size is not kdim
    with pytest.raises(ValueError, match="query must be batch-first"):
        mha(ta.zeros(2, 4), ta.zeros(1, 2, 3), ta.zeros(1, 2, 4))


def test_initialisation_follows_pytorch():
    """Xavier-uniform projections (stacked bound when packed), zero biases, Linear default out_proj."""
    ta.manual_seed(1)
    E = 64
    packed = nn.MultiHeadAttention(E, 4)
    bound = math.sqrt(6 / (E + 3 * E))
    for projection in (packed.q_proj, packed.k_proj, packed.v_proj):
        weight = projection.weight.numpy()
        assert np.abs(weight).max() <= bound and np.abs(weight).max() > 0.95 * bound
        assert (projection.bias.numpy() == 0).all()
    assert (packed.out_proj.bias.numpy() == 0).all()
    out_bound = 1 / math.sqrt(E)
    assert 0.95 * out_bound < np.abs(packed.out_proj.weight.numpy()).max() <= out_bound

    separate = nn.MultiHeadAttention(E, 4, kdim=16, vdim=E)
    k_bound = math.sqrt(6 / (16 + E))
    assert 0.95 * k_bound < np.abs(separate.k_proj.weight.numpy()).max() <= k_bound
    q_bound = math.sqrt(6 / (2 * E))
    assert 0.95 * q_bound < np.abs(separate.q_proj.weight.numpy()).max() <= q_bound

    ta.manual_seed(1)
    assert (nn.MultiHeadAttention(E, 4).q_proj.weight.numpy() == packed.q_proj.weight.numpy()).all()


def test_three_dimensional_mask_is_per_batch_element(device, route):
    ta.manual_seed(2)
    mha = route(nn.MultiHeadAttention(4, 2).to(device))
    rng = np.random.default_rng(2)
    x = ta.tensor(rng.standard_normal((2, 3, 4)).astype(np.float32), device=device)
    allowed = rng.random((2, 3, 3)) < 0.5
    allowed[..., 0] = True
    mask = ta.tensor(allowed, device=device)
    _, w3 = mha(x, attn_mask=mask)
    _, w4 = mha(x, attn_mask=mask.unsqueeze(1))
    np.testing.assert_array_equal(w3.numpy(), w4.numpy())
    assert (w3.numpy()[np.broadcast_to(~allowed[:, None], w3.shape)] == 0).all()


def test_dropout_only_in_training(device, route):
    ta.manual_seed(3)
    mha = route(nn.MultiHeadAttention(4, 2, dropout=0.5).double().to(device))
    x = ta.tensor(np.random.default_rng(3).standard_normal((2, 5, 4)), device=device)
    mha.eval()
    out_eval, w_eval = mha(x)
    np.testing.assert_allclose(w_eval.numpy().sum(-1), 1.0, rtol=1e-12)
    mha.train()
    ta.manual_seed(4)
    out_train, w_train = mha(x)
    ta.manual_seed(4)
    out_again, _ = mha(x)
    assert (w_train.numpy() == 0).any()
    kept = w_train.numpy() != 0
    np.testing.assert_allclose(w_train.numpy()[kept], 2 * w_eval.numpy()[kept], rtol=1e-12)
    assert not np.allclose(out_train.numpy(), out_eval.numpy())
    np.testing.assert_array_equal(out_train.numpy(), out_again.numpy())


def test_need_weights_false(device, route):
    mha = route(nn.MultiHeadAttention(4, 2).to(device))
    x = ta.randn(1, 3, 4).to(device)
    out, w = mha(x, need_weights=False, is_causal=True)
    assert w is None and out.dtype == np.float32
    # (compiled, need_weights=False runs fused nodes, which round float32 otherwise than the definition)
    np.testing.assert_allclose(out.numpy(), mha(x, is_causal=True)[0].numpy(), rtol=1e-5, atol=1e-6)


@given(seed=st.integers(0, 2**31 - 1), L=st.integers(2, 6))
def test_self_attention_is_permutation_equivariant(device, route, seed, L):
    ta.manual_seed(seed)
    mha = route(nn.MultiHeadAttention(4, 2).double().to(device))
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((2, L, 4))
    perm = rng.permutation(L)
    out = mha(ta.tensor(x, device=device))[0].numpy()
    out_perm = mha(ta.tensor(x[:, perm], device=device))[0].numpy()
    np.testing.assert_allclose(out[:, perm], out_perm, rtol=1e-10, atol=1e-12)


def test_masked_keys_never_leak_and_fully_masked_rows_are_zero(device, route):
    ta.manual_seed(5)
    mha = route(nn.MultiHeadAttention(4, 2, bias=False).double().to(device))  # no bias: a zero row stays zero
    rng = np.random.default_rng(5)
    query = ta.tensor(rng.standard_normal((2, 3, 4)), requires_grad=True, device=device)
    memory = rng.standard_normal((2, 5, 4))
    mask = F.padding_mask([3, 0], 5).to(device)  # the second sequence has no key at all
    out, w = mha(query, ta.tensor(memory, device=device), attn_mask=mask)
    memory[0, 3:] = 1e3
    out_changed, _ = mha(query, ta.tensor(memory, device=device), attn_mask=mask)
    np.testing.assert_allclose(out.numpy()[0], out_changed.numpy()[0], rtol=1e-12, atol=1e-12)
    assert (out.numpy()[1] == 0).all() and (w.numpy()[1] == 0).all()
    out.backward(ta.tensor(rng.standard_normal(out.shape), device=device))
    assert np.isfinite(host(query.grad)).all() and (host(query.grad)[1] == 0).all()
    assert all(np.isfinite(host(p.grad)).all() for p in mha.parameters())


def test_float32_in_float32_out(device, route):
    mha = route(nn.MultiHeadAttention(4, 2, dropout=0.1).to(device))
    x = ta.randn(2, 3, 4, requires_grad=True).to(device)
    out, w = mha(x, is_causal=True)
    out.backward(ta.ones(2, 3, 4).to(device))
    assert out.dtype == w.dtype == np.float32
    assert all(p.grad.dtype == np.float32 for p in mha.parameters())
