"""Positional encoding and the Transformer layers and stacks.

Oracles: ``torch.nn.TransformerEncoderLayer``/``DecoderLayer`` and their stacks (weights copied
through ``interop.from_torch``, gradients of the inputs and of every parameter mapped back
through ``interop.to_torch``; float64, random upstream gradient); ``gradcheck``; invariants
(causality, padding never leaks, train and eval agree without dropout, fresh copies differ). The tests
that run a layer or a stack run it as written and compiled (``ta.compile``: the ``route`` fixture).
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

# ----------------------------------------------------------------------------- positional encoding


def test_positional_encoding_table(device):
    d_model, max_len = 7, 12  # odd width: the last column is a sine
    pe = nn.PositionalEncoding(d_model, max_len=max_len).to(device)
    x = ta.tensor(np.random.default_rng(0).standard_normal((2, 5, d_model)).astype(np.float32), device=device)
    out = pe(x)
    expected = np.zeros((5, d_model))
    for pos in range(5):
        for column in range(d_model):
            angle = pos / 10000 ** ((column - column % 2) / d_model)
            expected[pos, column] = math.sin(angle) if column % 2 == 0 else math.cos(angle)
    assert out.dtype == np.float32 and out.device == device
    np.testing.assert_allclose(out.numpy() - x.numpy(), np.broadcast_to(expected, (2, 5, d_model)), atol=1e-6)
    assert list(pe.state_dict()) == [] and [name for name, _ in pe.named_buffers()] == ["pe"]
    assert pe.pe.shape == (max_len, d_model)
    out64 = pe(x.double())
    assert out64.dtype == np.float64  # the table is added in the input's dtype
    np.testing.assert_allclose(out64.numpy() - x.double().numpy(), np.broadcast_to(expected, (2, 5, d_model)),
                               atol=1e-6)
    with pytest.raises(ValueError, match="13 positions.*max_len=12"):
        pe(ta.zeros(1, 13, d_model, device=device))


def test_positional_encoding_gradient_and_dropout(device):
    pe = nn.PositionalEncoding(4, max_len=8, dropout=0.5).to(device)
    x = ta.tensor(np.ones((2, 3, 4)), requires_grad=True, device=device)
    upstream = np.random.default_rng(1).standard_normal((2, 3, 4))
    pe.eval()
    pe(x).backward(ta.tensor(upstream, device=device))
    np.testing.assert_array_equal(host(x.grad), upstream)  # d(x + P)/dx = 1
    pe.train()
    dropped = pe(x).numpy() == 0
    assert dropped.any() and (~dropped).any()


# ----------------------------------------------------------------------------- parity with PyTorch


ACTIVATIONS = {
    "relu": ("relu", "relu"),
    "gelu": ("gelu", "gelu"),
    "gelu_tanh": (lambda: nn.GELU(approximate="tanh"), lambda: torch.nn.GELU(approximate="tanh")),
}


@st.composite
def transformer_cases(draw):
    heads = draw(st.integers(1, 2))
    return dict(
        kind=draw(st.sampled_from(["encoder_layer", "decoder_layer", "encoder", "decoder"])),
        heads=heads, d_model=heads * draw(st.integers(1, 3)), ff=draw(st.integers(1, 6)),
        norm_first=draw(st.booleans()), activation=draw(st.sampled_from(sorted(ACTIVATIONS))),
        eps=draw(st.sampled_from([1e-5, 1e-3])), eval=draw(st.booleans()),
        layers=draw(st.integers(1, 2)), final_norm=draw(st.booleans()),
        B=draw(st.integers(1, 2)), T=draw(st.integers(1, 5)), S=draw(st.integers(1, 5)),
        causal=draw(st.booleans()), padding=draw(st.booleans()), seed=draw(st.integers(0, 2**31 - 1)),
    )


def build_pair(case):
    """(torch module, tinyattn module) of the same architecture; dropout 0.1 when compared in eval."""
    ours_activation, torch_activation = ACTIVATIONS[case["activation"]]
    make = lambda a: a() if callable(a) else a
    dropout = 0.1 if case["eval"] else 0.0
    common = dict(dim_feedforward=case["ff"], dropout=dropout, layer_norm_eps=case["eps"],
                  norm_first=case["norm_first"])
    side = case["kind"].split("_")[0]
    torch_cls = torch.nn.TransformerEncoderLayer if side == "encoder" else torch.nn.TransformerDecoderLayer
    ours_cls = nn.TransformerEncoderLayer if side == "encoder" else nn.TransformerDecoderLayer
    theirs = torch_cls(case["d_model"], case["heads"], activation=make(torch_activation), batch_first=True, **common)
    ours = ours_cls(case["d_model"], case["heads"], activation=make(ours_activation), **common)
    if case["kind"].endswith("layer"):
        return theirs, ours
    torch_norm = torch.nn.LayerNorm(case["d_model"]) if case["final_norm"] else None
    ours_norm = nn.LayerNorm(case["d_model"]) if case["final_norm"] else None
    if side == "encoder":
        return (torch.nn.TransformerEncoder(theirs, case["layers"], torch_norm, enable_nested_tensor=False),
                nn.TransformerEncoder(ours, case["layers"], ours_norm))
    torch_stack = torch.nn.TransformerDecoder(theirs, case["layers"], torch_norm)
    for copied in torch_stack.layers:
        # torch's TransformerDecoderLayer.__setstate__ (run by deepcopy) shadows an activation *module*
        # with F.relu in the instance dict; drop the shadow so that the copies use the module again
        if "activation" in copied._modules:
            del copied.__dict__["activation"]
    return torch_stack, nn.TransformerDecoder(ours, case["layers"], ours_norm)


@given(case=transformer_cases())
def test_matches_torch(device, route, case):
    torch.manual_seed(case["seed"])
    rng = np.random.default_rng(case["seed"])
    theirs, ours = build_pair(case)
    theirs.double()
    ours = route(load_from_torch(ours, theirs, device))
    if case["eval"]:
        theirs.eval(), ours.eval()
    B, T, S, E = case["B"], case["T"], case["S"], case["d_model"]
    decoder = case["kind"].startswith("decoder")

    # masks: causal self-attention and padding of the (source) keys; no query loses every key
    x = rng.standard_normal((B, T, E))
    memory = rng.standard_normal((B, S, E))
    causal = np.tril(np.ones((T, T), dtype=bool))
    key_len = S if decoder else T
    lengths = rng.integers(1, key_len + 1, size=B)
    padding = np.arange(key_len)[None, :] < lengths[:, None]  # (B, Lk) True = real token
    torch_causal = torch.tensor(~causal) if case["causal"] else None
    torch_padding = torch.tensor(~padding) if case["padding"] else None
    our_padding = F.padding_mask(lengths, key_len).to(device) if case["padding"] else None

    t_x = torch.tensor(x, requires_grad=True)
    t_memory = torch.tensor(memory, requires_grad=True)
    if decoder:
        t_out = theirs(t_x, t_memory, tgt_mask=torch_causal, memory_key_padding_mask=torch_padding)
    elif case["kind"] == "encoder":
        t_out = theirs(t_x, mask=torch_causal, src_key_padding_mask=torch_padding)
    else:
        t_out = theirs(t_x, src_mask=torch_causal, src_key_padding_mask=torch_padding)
    upstream = rng.standard_normal(t_out.shape)
    (t_out * torch.tensor(upstream)).sum().backward()

    o_x = ta.tensor(x, requires_grad=True, device=device)
    o_memory = ta.tensor(memory, requires_grad=True, device=device)
    if decoder:
        out = ours(o_x, o_memory, memory_mask=our_padding, tgt_is_causal=case["causal"])
    elif case["kind"] == "encoder":
        out = ours(o_x, mask=our_padding, is_causal=case["causal"])
    else:
        out = ours(o_x, src_mask=our_padding, is_causal=case["causal"])
    out.backward(ta.tensor(upstream, device=device))

    np.testing.assert_allclose(out.numpy(), t_out.detach().numpy(), rtol=1e-9, atol=1e-10)
    np.testing.assert_allclose(host(o_x.grad), t_x.grad.numpy(), rtol=1e-9, atol=1e-10)
    if decoder:
        np.testing.assert_allclose(host(o_memory.grad), t_memory.grad.numpy(), rtol=1e-9, atol=1e-10)
    assert_parameter_grads_match(ours, theirs)


# ----------------------------------------------------------------------------- finite differences


def small_inputs(device, seed):
    rng = np.random.default_rng(seed)
    src = ta.tensor(rng.standard_normal((2, 3, 4)), requires_grad=True, device=device)
    memory = ta.tensor(rng.standard_normal((2, 4, 4)), requires_grad=True, device=device)
    return src, memory


@pytest.mark.parametrize("norm_first", [False, True])
def test_gradcheck_encoder_layer(device, route, norm_first):
    ta.manual_seed(0)
    layer = route(nn.TransformerEncoderLayer(4, 2, dim_feedforward=5, dropout=0.0, activation="gelu",
                                             norm_first=norm_first).double().to(device))
    src, _ = small_inputs(device, 0)
    mask = F.padding_mask([3, 2], 3).to(device)
    fn = lambda src, *params: layer(src, src_mask=mask, is_causal=True)
    assert gradcheck(fn, [src, *layer.parameters()])


@pytest.mark.parametrize("norm_first", [False, True])
def test_gradcheck_decoder_layer(device, route, norm_first):
    ta.manual_seed(1)
    layer = nn.TransformerDecoderLayer(4, 2, dim_feedforward=3, dropout=0.0, norm_first=norm_first)
    layer = route(layer.double().to(device))
    tgt, memory = small_inputs(device, 1)
    memory_mask = F.padding_mask([4, 2], 4).to(device)
    fn = lambda tgt, memory, *params: layer(tgt, memory, memory_mask=memory_mask, tgt_is_causal=True)
    assert gradcheck(fn, [tgt, memory, *layer.parameters()])


# ----------------------------------------------------------------------------- invariants


def encoder_stack(device, route, norm_first=False, dropout=0.0):
    layer = nn.TransformerEncoderLayer(4, 2, dim_feedforward=6, dropout=dropout, norm_first=norm_first)
    return route(nn.TransformerEncoder(layer, 2, norm=nn.LayerNorm(4)).double().to(device))


def decoder_stack(device, route):
    return route(nn.TransformerDecoder(nn.TransformerDecoderLayer(4, 2, 6, dropout=0.0), 2).double().to(device))


@given(seed=st.integers(0, 2**31 - 1), L=st.integers(2, 6), t=st.integers(0, 5), norm_first=st.booleans())
def test_causal_stack_never_sees_the_future(device, route, seed, L, t, norm_first):
    t = t % L
    ta.manual_seed(seed)
    rng = np.random.default_rng(seed)
    encoder = encoder_stack(device, route, norm_first)
    src = rng.standard_normal((2, L, 4))
    changed = src.copy()
    changed[:, t + 1:] = rng.standard_normal(changed[:, t + 1:].shape) * 5
    outs = [encoder(ta.tensor(s, device=device), is_causal=True).numpy() for s in (src, changed)]
    np.testing.assert_allclose(outs[0][:, :t + 1], outs[1][:, :t + 1], rtol=1e-12, atol=1e-12)

    decoder = decoder_stack(device, route)
    memory = ta.tensor(rng.standard_normal((2, 3, 4)), device=device)
    outs = [decoder(ta.tensor(s, device=device), memory, tgt_is_causal=True).numpy() for s in (src, changed)]
    np.testing.assert_allclose(outs[0][:, :t + 1], outs[1][:, :t + 1], rtol=1e-12, atol=1e-12)


def test_padding_never_leaks(device, route):
    ta.manual_seed(2)
    rng = np.random.default_rng(2)
    encoder = encoder_stack(device, route, norm_first=True)
    decoder = decoder_stack(device, route)
    lengths = [5, 2]
    src = rng.standard_normal((2, 5, 4))
    changed = src.copy()
    changed[1, 2:] = 100.0
    mask = F.padding_mask(lengths, 5).to(device)
    memories = [encoder(ta.tensor(s, device=device), mask=mask) for s in (src, changed)]
    np.testing.assert_allclose(memories[0].numpy()[1, :2], memories[1].numpy()[1, :2], rtol=1e-12, atol=1e-12)
    tgt = ta.tensor(rng.standard_normal((2, 3, 4)), device=device)
    # the decoder reads the padded memory positions (which differ) only through the masked cross-attention
    outs = [decoder(tgt, m, memory_mask=mask, tgt_is_causal=True).numpy() for m in memories]
    np.testing.assert_allclose(outs[0], outs[1], rtol=1e-12, atol=1e-12)


def test_train_and_eval_agree_without_dropout(device, route):
    ta.manual_seed(3)
    x = ta.tensor(np.random.default_rng(3).standard_normal((2, 4, 4)), device=device)
    encoder = encoder_stack(device, route)
    train_out = encoder(x, is_causal=True).numpy()
    np.testing.assert_array_equal(train_out, encoder.eval()(x, is_causal=True).numpy())

    dropping = encoder_stack(device, route, dropout=0.3)
    eval_out = dropping.eval()(x).numpy()
    np.testing.assert_array_equal(eval_out, dropping(x).numpy())  # eval is deterministic
    assert not np.allclose(dropping.train()(x).numpy(), eval_out)


def test_stack_copies_are_fresh_and_independent():
    ta.manual_seed(4)
    prototype = nn.TransformerDecoderLayer(4, 2, dim_feedforward=6)
    decoder = nn.TransformerDecoder(prototype, 3, norm=nn.LayerNorm(4))
    assert len(decoder.layers) == 3 and all(layer is not prototype for layer in decoder.layers)
    states = [layer.state_dict() for layer in decoder.layers]
    assert list(states[0]) == list(prototype.state_dict())
    for key in ("self_attn.q_proj.weight", "cross_attn.out_proj.weight", "linear1.weight", "linear2.bias"):
        assert not np.array_equal(states[0][key], states[1][key]), key
        assert not np.array_equal(states[1][key], states[2][key]), key
        assert not np.array_equal(states[0][key], prototype.state_dict()[key]), key
    for state in states:  # the re-initialisation keeps each parameter's own scheme
        assert (state["self_attn.q_proj.bias"] == 0).all() and (state["norm1.weight"] == 1).all()
    bound = math.sqrt(6 / (4 + 12))  # attention's xavier bound, not Linear's 1/sqrt(4)
    assert all(np.abs(s["cross_attn.k_proj.weight"]).max() <= bound for s in states)
    decoder.layers[0].linear1.weight.data[...] = 0
    assert not (decoder.layers[1].linear1.weight.numpy() == 0).all()
    assert [name for name, _ in decoder.named_parameters()][-2:] == ["norm.weight", "norm.bias"]


def test_kept_attention_weights(device, route):
    ta.manual_seed(5)
    rng = np.random.default_rng(5)
    encoder_layer = route(nn.TransformerEncoderLayer(4, 2, dim_feedforward=6, norm_first=True).double().to(device))
    encoder_layer.eval()
    x = ta.tensor(rng.standard_normal((2, 3, 4)), device=device)
    encoder_layer(x)
    assert encoder_layer.attn_weights is None  # off by default
    encoder_layer.keep_attn_weights = True
    encoder_layer(x, is_causal=True)
    expected = encoder_layer.self_attn(encoder_layer.norm1(x), is_causal=True)[1]
    np.testing.assert_allclose(encoder_layer.attn_weights.numpy(), expected.numpy(), rtol=1e-12)
    assert not encoder_layer.attn_weights.requires_grad

    decoder_layer = route(nn.TransformerDecoderLayer(4, 2, dim_feedforward=6).double().to(device)).eval()
    decoder_layer.keep_attn_weights = True
    memory = ta.tensor(rng.standard_normal((2, 5, 4)), device=device)
    decoder_layer(x, memory, memory_mask=F.padding_mask([5, 1], 5).to(device), tgt_is_causal=True)
    assert decoder_layer.self_attn_weights.shape == (2, 2, 3, 3)
    assert decoder_layer.cross_attn_weights.shape == (2, 2, 3, 5)
    np.testing.assert_allclose(decoder_layer.cross_attn_weights.numpy().sum(-1), 1.0, rtol=1e-12)
    assert (decoder_layer.cross_attn_weights.numpy()[1, :, :, 1:] == 0).all()


def test_float32_in_float32_out(device, route):
    ta.manual_seed(6)
    decoder = nn.TransformerDecoder(nn.TransformerDecoderLayer(4, 2, 6, activation="gelu"), 2, norm=nn.LayerNorm(4))
    decoder = route(decoder.to(device))
    tgt = ta.tensor(np.ones((1, 3, 4), dtype=np.float32), requires_grad=True, device=device)
    memory = ta.tensor(np.ones((1, 2, 4), dtype=np.float32), device=device)
    out = decoder(tgt, memory, tgt_is_causal=True)
    out.backward(ta.tensor(np.ones((1, 3, 4), dtype=np.float32), device=device))
    assert out.dtype == np.float32 and tgt.grad.dtype == np.float32
    assert all(p.grad.dtype == np.float32 for p in decoder.parameters())


def test_errors_teach(route):
    with pytest.raises(ValueError, match="activation must be 'relu', 'gelu' or a callable, got 'swish'"):
        nn.TransformerEncoderLayer(4, 2, activation="swish")
    with pytest.raises(ValueError, match=r"src must be batch-first \(B, L, 4\), got shape \(3, 4\)"):
        route(nn.TransformerEncoderLayer(4, 2))(ta.zeros(3, 4))
    with pytest.raises(ValueError, match=r"memory must be batch-first \(B, L, 4\), got shape \(1, 2, 5\)"):
        route(nn.TransformerDecoderLayer(4, 2))(ta.zeros(1, 3, 4), ta.zeros(1, 2, 5))
    with pytest.raises(ValueError, match="embed_dim"):
        nn.TransformerEncoderLayer(6, 4)
