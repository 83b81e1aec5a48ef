"""``tinyattn.compat.nn.MultiheadAttention`` against ``torch.nn.MultiheadAttention``: PyTorch's parameter
names and order, its state dict loaded as it is, every constructor option (``bias``, ``add_bias_kv``,
``add_zero_attn``, ``kdim``/``vdim``, ``batch_first``) and every mask kind; outputs, weights and every
gradient (inputs and parameters) agree in float64 to 1e-9 under a random upstream gradient."""

import numpy as np
import pytest
import torch

import tinyattn.compat as compat
from tinyattn.nn import functional as native_F

RTOL, ATOL = 1e-9, 1e-10
B, L, S, E, H = 2, 3, 4, 8, 2

CONFIGS = {
    "default": {},
    "no bias": {"bias": False},
    "bias_kv": {"add_bias_kv": True},
    "zero_attn": {"add_zero_attn": True},
    "bias_kv+zero_attn": {"add_bias_kv": True, "add_zero_attn": True},
    "kdim/vdim": {"kdim": 5, "vdim": 6},
    "kdim/vdim, no bias, bias_kv+zero_attn": {"kdim": 5, "vdim": 6, "bias": False, "add_bias_kv": True,
                                             "add_zero_attn": True},
}


def _twins(**options):
    """The module from torch and from compat, float64, torch's state dict loaded into ours as it is."""
    torch.manual_seed(0)
    theirs = torch.nn.MultiheadAttention(E, H, **options).double()
    ours = compat.nn.MultiheadAttention(E, H, **options).double()
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
    return ours, theirs


def _inputs(rng, batch_first, kdim=E, vdim=E, unbatched=False):
    def shape(length, width):
        if unbatched:
            return (length, width)
        return (B, length, width) if batch_first else (length, B, width)

    return rng.standard_normal(shape(L, E)), rng.standard_normal(shape(S, kdim)), rng.standard_normal(shape(S, vdim))


def _run_both(ours, theirs, arrays, upstream, options):
    """Forward and backward on both; ``options`` maps a keyword to a NumPy array (or a plain value)."""
    results = []
    for model, lib in ((ours, compat), (theirs, torch)):
        inputs = [lib.tensor(a, requires_grad=True) for a in arrays]
        kwargs = {k: lib.tensor(v) if isinstance(v, np.ndarray) else v for k, v in options.items()}
        out, weights = model(*inputs, **kwargs)
        out.backward(lib.tensor(upstream))
        results.append((out, weights, inputs))
    return results


def _assert_match(ours, theirs, results):
    (out1, w1, in1), (out2, w2, in2) = results
    np.testing.assert_allclose(out1.numpy(), out2.detach().numpy(), rtol=RTOL, atol=ATOL)
    assert (w1 is None) == (w2 is None)
    if w1 is not None:
        assert w1.shape == tuple(w2.shape)
        np.testing.assert_allclose(w1.numpy(), w2.detach().numpy(), rtol=RTOL, atol=ATOL)
    for i, (a, b) in enumerate(zip(in1, in2)):
        np.testing.assert_allclose(a.grad, b.grad.numpy(), rtol=RTOL, atol=ATOL, err_msg=f"input {i}")
    theirs_grads = dict(theirs.named_parameters())
    assert [n for n, _ in ours.named_parameters()] == list(theirs_grads)
    for name, p in ours.named_parameters():
        np.testing.assert_allclose(p.grad, theirs_grads[name].grad.numpy(), rtol=RTOL, atol=ATOL, err_msg=name)


@pytest.mark.parametrize("config", list(CONFIGS))
def test_parameters_and_state_dict_have_torchs_names_and_order(config):
    ours, theirs = _twins(**CONFIGS[config])
    names = [n for n, _ in theirs.named_parameters()]
    assert [n for n, _ in ours.named_parameters()] == names
    assert list(ours.state_dict()) == list(theirs.state_dict()) == names
    assert [p.shape for p in ours.parameters()] == [tuple(p.shape) for p in theirs.parameters()]
    for (name, ours_value), theirs_value in zip(ours.state_dict().items(), theirs.state_dict().values()):
        np.testing.assert_array_equal(ours_value, theirs_value.numpy(), err_msg=name)


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("weights", ["averaged", "per head", "none"])
@pytest.mark.parametrize("config", list(CONFIGS))
def test_every_option_matches_torch(config, weights, batch_first):
    options = dict(CONFIGS[config], batch_first=batch_first)
    ours, theirs = _twins(**options)
    rng = np.random.default_rng(len(config))
    arrays = _inputs(rng, batch_first, options.get("kdim", E), options.get("vdim", E))
    attn = rng.random((L, S)) < 0.3
    attn[:, 0] = False  # every query keeps a key: no NaN row in torch
    padding = np.array([[False] * S, [False] * (S - 1) + [True]])
    call = {"attn_mask": attn, "key_padding_mask": padding, "need_weights": weights != "none",
            "average_attn_weights": weights == "averaged"}
    results = _run_both(ours, theirs, arrays, rng.standard_normal(arrays[0].shape), call)
    _assert_match(ours, theirs, results)


def _masks(kind, rng):
    attn_bool = rng.random((L, S)) < 0.4
    attn_bool[:, 1] = False  # no fully masked row
    per_head = rng.random((B * H, L, S)) < 0.4
    per_head[:, :, 1] = False
    padding = np.array([[False] * S, [True] + [False] * (S - 1)])
    float_padding = np.where(padding, -1e9, 0.0)
    return {
        "none": {},
        "bool attn_mask": {"attn_mask": attn_bool},
        "float attn_mask": {"attn_mask": rng.standard_normal((L, S))},
        "bool per-head attn_mask (B*H, L, S)": {"attn_mask": per_head},
        "float per-head attn_mask (B*H, L, S)": {"attn_mask": rng.standard_normal((B * H, L, S))},
        "key_padding_mask": {"key_padding_mask": padding},
        "float key_padding_mask": {"key_padding_mask": float_padding},
        "bool attn_mask + key_padding_mask": {"attn_mask": attn_bool, "key_padding_mask": padding},
        "float attn_mask + key_padding_mask": {"attn_mask": rng.standard_normal((L, S)), "key_padding_mask": padding},
        "causal attn_mask with is_causal": {"attn_mask": np.triu(np.ones((L, S), bool), 1), "is_causal": True},
    }[kind]


MASK_KINDS = ["none", "bool attn_mask", "float attn_mask", "bool per-head attn_mask (B*H, L, S)",
              "float per-head attn_mask (B*H, L, S)", "key_padding_mask", "float key_padding_mask",
              "bool attn_mask + key_padding_mask", "float attn_mask + key_padding_mask",
              "causal attn_mask with is_causal"]


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("config", ["default", "bias_kv+zero_attn"])
@pytest.mark.parametrize("kind", MASK_KINDS)
def test_every_mask_kind_matches_torch(kind, config, batch_first):
    options = dict(CONFIGS[config], batch_first=batch_first)
    ours, theirs = _twins(**options)
    rng = np.random.default_rng(MASK_KINDS.index(kind))
    arrays = _inputs(rng, batch_first)
    call = dict(_masks(kind, rng), average_attn_weights=False)
    results = _run_both(ours, theirs, arrays, rng.standard_normal(arrays[0].shape), call)
    _assert_match(ours, theirs, results)


@pytest.mark.parametrize("config", ["default", "bias_kv+zero_attn", "kdim/vdim"])
def test_unbatched_input_matches_torch(config):
    options = CONFIGS[config]
    ours, theirs = _twins(**options)
    rng = np.random.default_rng(3)
    arrays = _inputs(rng, False, options.get("kdim", E), options.get("vdim", E), unbatched=True)
    call = {"key_padding_mask": np.array([False, True, False, False]), "attn_mask": rng.standard_normal((L, S))}
    results = _run_both(ours, theirs, arrays, rng.standard_normal(arrays[0].shape), call)
    _assert_match(ours, theirs, results)


def test_self_attention_with_one_tensor_and_dropout_in_eval_matches_torch():
    ours, theirs = _twins(dropout=0.3, batch_first=True)
    ours.eval(), theirs.eval()
    rng = np.random.default_rng(4)
    x = rng.standard_normal((B, L, E))
    outs = []
    for model, lib in ((ours, compat), (theirs, torch)):
        t = lib.tensor(x, requires_grad=True)
        out, _ = model(t, t, t)
        out.backward(lib.tensor(np.ones_like(x) * 0.5 + x))
        outs.append((out.detach().numpy(), t.grad.numpy()))
    np.testing.assert_allclose(outs[0][0], outs[1][0], rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(outs[0][1], outs[1][1], rtol=RTOL, atol=ATOL)


def test_the_attention_is_the_native_one(monkeypatch):
    """A thin adapter: the attention runs in the native ``F.scaled_dot_product_attention``, on the heads."""
    calls = []
    native = native_F.scaled_dot_product_attention

    def spy(query, key, value, **kwargs):
        calls.append((query.shape, key.shape))
        return native(query, key, value, **kwargs)

    monkeypatch.setattr(native_F, "scaled_dot_product_attention", spy)
    mha = compat.nn.MultiheadAttention(E, H, add_bias_kv=True, add_zero_attn=True)
    mha(compat.randn(L, B, E), compat.randn(S, B, E), compat.randn(S, B, E))
    assert calls == [((B, H, L, E // H), (B, H, S + 2, E // H))]


def test_a_fully_masked_query_gives_zeros_where_torch_gives_nan():
    """The documented difference: the native attention's zeros, never NaN; torch gives NaN when it
    returns the weights (its math path) and zeros when it does not."""
    ours, theirs = _twins()
    mask = np.zeros((L, L), bool)
    mask[1] = True  # query 1 may attend nothing (self-attention: L keys)
    x = np.random.default_rng(5).standard_normal((L, B, E))
    out, weights = ours(*[compat.tensor(x)] * 3, attn_mask=compat.tensor(mask))
    theirs_out, _ = theirs(*[torch.tensor(x)] * 3, attn_mask=torch.tensor(mask))
    assert np.isnan(theirs_out.detach().numpy()[1]).all()
    np.testing.assert_allclose(out.numpy()[1], np.broadcast_to(ours.out_proj.bias.numpy(), (B, E)))
    assert (weights.numpy()[:, 1] == 0).all()
    np.testing.assert_allclose(out.numpy()[[0, 2]], theirs_out.detach().numpy()[[0, 2]], rtol=RTOL, atol=ATOL)
    # without the weights torch takes its scaled_dot_product_attention path, which gives the zeros too
    out, _ = ours(*[compat.tensor(x)] * 3, attn_mask=compat.tensor(mask), need_weights=False)
    theirs_out, _ = theirs(*[torch.tensor(x)] * 3, attn_mask=torch.tensor(mask), need_weights=False)
    np.testing.assert_allclose(out.numpy(), theirs_out.detach().numpy(), rtol=RTOL, atol=ATOL)


def test_a_module_holding_it_loads_torchs_state_dict_beside_native_layers():
    """``compat.nn.Module.load_state_dict`` keeps the keys the module has and converts the rest."""

    def build(lib):
        class Model(lib.nn.Module):
            def __init__(self):
                super().__init__()
                self.attn = lib.nn.MultiheadAttention(E, H, add_bias_kv=True)
                self.layer = lib.nn.TransformerEncoderLayer(E, H, dim_feedforward=16, dropout=0.0)

            def forward(self, x):
                return self.layer(self.attn(x, x, x, need_weights=False)[0])

        return Model()

    torch.manual_seed(0)
    theirs = build(torch).double()
    ours = build(compat).double()
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
    assert list(ours.state_dict()) == list(theirs.state_dict())
    x = np.random.default_rng(6).standard_normal((L, B, E))
    np.testing.assert_allclose(ours(compat.tensor(x)).numpy(), theirs(torch.tensor(x)).detach().numpy(),
                               rtol=RTOL, atol=ATOL)


def test_wrong_sizes_raise_errors_that_name_them():
    with pytest.raises(ValueError, match=r"embed_dim \(6\) must be a positive multiple of num_heads \(4\)"):
        compat.nn.MultiheadAttention(6, 4)
    ours, _ = _twins()
    with pytest.raises(RuntimeError, match=r"missing|Missing"):
        ours.load_state_dict({"in_proj_weight": np.zeros((3 * E, E))})
