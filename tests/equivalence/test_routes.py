"""The router: the ``why_not_*`` reasons, ``LayerRoute`` and ``ta.explain``, each read from
``tinyattn.fast.router``, the one module that decides what a compiled form (``ta.compile``) runs on each call;
and ``fast.tuning``, the values it reads."""

import functools
import io
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from graph_checks import node_types
from hypothesis import given
from hypothesis import strategies as st

import tinyattn as ta
import tinyattn.nn as nn
import tinyattn.nn.functional as F
from tinyattn.fast import router, tuning

ROOT = Path(__file__).resolve().parents[2]


def test_tuning_takes_known_names_only_and_puts_the_values_back():
    with tuning.tuned(blocked_attention_min_keys=7, attention_block_size=3):
        assert tuning.values.blocked_attention_min_keys == 7 and tuning.values.attention_block_size == 3
        with tuning.tuned(blocked_attention_min_keys=9):
            assert tuning.values.blocked_attention_min_keys == 9
        assert tuning.values.blocked_attention_min_keys == 7
    assert tuning.values.blocked_attention_min_keys == 513 and tuning.values.attention_block_size is None
    with pytest.raises(TypeError, match="unknown tuning values .'blocked_min'."):
        tuning.tuned(blocked_min=7)


def test_attention_reasons_name_the_threshold_the_weights_dropout_and_the_dtype():
    """The reasons, and the node the compiled ``F.scaled_dot_product_attention`` makes on the same arguments."""
    sdpa = ta.compile(F.scaled_dot_product_attention)

    def node(q, kv, **options):
        out, _ = sdpa(q, kv, kv, scale=0.5, **options)
        return type(out._ctx).__name__

    q = ta.randn(1, 2, 3, 4, requires_grad=True)
    kv = ta.randn(1, 2, 600, 4)
    assert router.why_not_blocked_attention(q, kv, kv, None, 0.0, False, 0.5, False) is None
    assert router.attention_route(q, kv, kv, None, 0.0, False) == "blocked"
    assert node(q, kv, need_weights=False) == "BlockedAttention"
    short = ta.randn(1, 2, 5, 4)
    reason = router.why_not_blocked_attention(q, short, short, None, 0.0, False, 0.5, False)
    assert reason == "5 keys, fewer than the blocked-attention threshold of 513"
    assert router.attention_route(q, short, short, None, 0.0, False) == f"fused (not blocked: {reason})"
    assert node(q, short, need_weights=False) == "Attention"
    with tuning.tuned(blocked_attention_min_keys=5):
        assert router.attention_route(q, short, short, None, 0.0, False) == "blocked"
        assert node(q, short, need_weights=False) == "BlockedAttention"
    assert "dropout" in router.why_not_blocked_attention(q, kv, kv, None, 0.1, False, 0.5, False)
    assert node(q, kv, need_weights=False, dropout_p=0.1) == "Attention"
    assert "need_weights" in router.why_not_fused_attention(q, kv, kv, None, 0.0, False, 0.5, True)
    assert router.attention_route(q, kv, kv, None, 0.0, True).startswith("masked softmax")
    assert node(q, kv, need_weights=True) not in ("Attention", "BlockedAttention")  # the definition
    assert "dtype" in router.why_not_fused_attention(q, kv.double(), kv, None, 0.0, False, 0.5, False)


def test_packed_self_attention_reasons():
    mha = nn.MultiHeadAttention(8, 2)
    x, other = ta.randn(2, 3, 8), ta.randn(2, 3, 8)
    assert router.why_not_packed_self_attention(mha, x, x, x, need_weights=False) is None
    assert router.why_not_packed_self_attention(mha, x, need_weights=False) is None  # key and value default to x
    assert "not self-attention" in router.why_not_packed_self_attention(mha, x, other, other, need_weights=False)
    assert "need_weights" in router.why_not_packed_self_attention(mha, x, x, x, need_weights=True)
    assert "batch-first" in router.why_not_packed_self_attention(mha, ta.randn(3, 8), need_weights=False)
    mha.k_proj.forward = mha.k_proj.forward  # a forward set on the instance (a wrapper, say)
    assert "k_proj" in router.why_not_packed_self_attention(mha, x, x, x, need_weights=False)
    at_threshold, long = ta.randn(1, 512, 8), ta.randn(1, 513, 8)  # 512 keys: the whole matrix; 513: blocks of keys
    assert router.why_not_packed_self_attention(nn.MultiHeadAttention(8, 2), at_threshold, need_weights=False) is None
    assert "513 keys, at least the blocked-attention threshold of 513" == router.why_not_packed_self_attention(
        nn.MultiHeadAttention(8, 2), long, need_weights=False)


def test_layer_reasons():
    layer = nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.1)
    x = ta.randn(2, 3, 8)
    assert "dropout" in router.why_not_self_attention_block(layer, x, None)
    assert "dropout" in router.why_not_feed_forward_block(layer, layer.norm2, x, layer.dropout2)
    layer.eval()
    assert router.encoder_layer(layer, x, None) == router.LayerRoute(True, "relu", False, False)
    layer.keep_attn_weights = True
    assert "keep_attn_weights" in router.why_not_self_attention_block(layer, x, None)
    other = nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, activation=ta.tanh).eval()
    assert router.why_not_feed_forward_block(other, other.norm2, x, other.dropout2) == \
        "the activation is tanh, not relu or gelu"
    float_mask = ta.zeros(3, 3, requires_grad=True)
    assert "gradient" in router.why_not_self_attention_block(other, x, float_mask)


class OwnGELU(nn.GELU):
    """A GELU subclass with its own forward: the block would not compute what it does."""

    def forward(self, input):
        return super().forward(input) * 2


class PlainGELU(nn.GELU):
    """A subclass that keeps GELU's forward: still not the library's class, so not fused either."""


ACTIVATIONS = [  # (the layer's activation argument, the name the block knows it by or None)
    ("relu", "relu"), (F.relu, "relu"), (nn.ReLU(), "relu"),
    ("gelu", "gelu"), (F.gelu, "gelu"), (nn.GELU(), "gelu"), (nn.GELU(approximate="tanh"), "gelu_tanh"),
    (functools.partial(F.gelu, approximate="tanh"), "gelu_tanh"), (functools.partial(F.gelu), "gelu"),
    (OwnGELU(), None), (PlainGELU(), None), (ta.tanh, None),
]


@pytest.mark.parametrize("activation, name", ACTIVATIONS, ids=[str(i) for i in range(len(ACTIVATIONS))])
def test_the_feed_forward_block_takes_relu_and_gelu_in_both_forms(activation, name):
    """The route (``LayerRoute.feed_forward_block``, ``ta.explain``) and the node that runs agree."""
    layer = ta.compile(nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0, activation=activation))
    x = ta.randn(2, 3, 8, requires_grad=True)
    assert router.encoder_layer(layer, x, None).feed_forward_block == name
    out = layer(x)
    assert (type(out._ctx).__name__ == "FeedForwardBlock") == (name is not None)
    if name is not None:
        assert out._ctx.activation == name
    lines = ta.explain(layer, x, file=io.StringIO()).splitlines()
    expected = f"fast.FeedForwardBlock ({name})" if name else "reference (the activation is"
    assert any(line.startswith(f"  feed-forward residual: {expected}") for line in lines), lines
    if isinstance(activation, nn.Module):  # the activation module itself: inside the block when fused
        inside = "activation (" + type(layer.activation).__name__ + "): inside a fused node of its parent"
        assert (inside in lines) == (name is not None), lines


def test_gelu_blocks_take_float32_and_float64_only():
    layer = nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0, activation="gelu").to(np.float16)
    x = ta.randn(2, 3, 8).to(np.float16)
    assert router.why_not_feed_forward_block(layer, layer.norm2, x, layer.dropout2) == \
        "GELU's kernels take float32 and float64, not float16"


@pytest.mark.parametrize("eps", [1e-12, 1e-5])
def test_a_bert_layer_with_its_padding_mask_runs_both_blocks(eps):
    """BERT's post-norm GELU layer (``tinyattn.pretrained``'s), eps 1e-12, with the boolean
    ``(B, 1, 1, L)`` key mask its ``attention_mask`` becomes: both residual blocks are fused."""
    from tinyattn.pretrained.bert import BertModel, key_mask

    config = dict(vocab_size=50, hidden_size=8, num_hidden_layers=2, num_attention_heads=2, intermediate_size=16,
                  max_position_embeddings=16, layer_norm_eps=eps)
    model = BertModel(config).eval()
    ids, attention_mask = ta.tensor([[1, 5, 7, 2], [1, 9, 2, 0]]), ta.tensor([[1, 1, 1, 1], [1, 1, 1, 0]])
    layer, h = model.encoder.layers[0], ta.randn(2, 4, 8)
    assert layer.norm1.eps == layer.norm2.eps == eps
    assert router.encoder_layer(layer, h, key_mask(attention_mask)) == router.LayerRoute(True, "gelu", False, False)
    lines = ta.explain(ta.compile(model), ids, attention_mask=attention_mask, file=io.StringIO()).splitlines()
    for i in range(2):
        assert f"encoder.layers.{i} (TransformerEncoderLayer)" in lines
    assert lines.count("  feed-forward residual: fast.FeedForwardBlock (gelu)") == 2
    assert sum(line.startswith("  self-attention residual: fast.SelfAttentionBlock") for line in lines) == 2


def test_explain_prints_each_submodule_and_why():
    layer = nn.TransformerDecoderLayer(8, 2, dim_feedforward=16)  # training, dropout 0.1
    out = io.StringIO()
    text = ta.explain(ta.compile(layer), ta.randn(2, 3, 8), ta.randn(2, 4, 8), tgt_is_causal=True, file=out)
    assert out.getvalue().strip() == text
    lines = text.splitlines()
    assert "  self-attention residual: reference (dropout acts on the attention weights (p=0.1, training))" in lines
    assert "self_attn (MultiHeadAttention): fast.InProjection + fast.PackedSelfAttention" in lines
    assert "cross_attn (MultiHeadAttention)" in lines
    assert "  projections and attention: reference (not self-attention (query, key and value are not one tensor))" \
        in lines  # cross_attn
    assert any(line.startswith("  scaled dot-product attention: fused (not blocked: dropout acts") for line in lines)
    text = ta.explain(layer.eval(), ta.randn(2, 3, 8), ta.randn(2, 4, 8), file=io.StringIO())
    assert "norm1 (LayerNorm): reference (not compiled: ta.compile swaps in its fused form)" in text.splitlines()


def test_a_batch_of_key_masks_shaped_b_l_points_to_padding_mask():
    mha = nn.MultiHeadAttention(8, 2)
    keys_per_sequence = ta.tensor(np.ones((2, 5), dtype=bool))  # (B, Lk): a common mistake
    for module in (ta.compile(mha), mha):
        with pytest.raises(ValueError, match=r"F\.padding_mask\(lengths, 5\)"):
            module(ta.randn(2, 5, 8), attn_mask=keys_per_sequence, need_weights=False)
    with pytest.raises(ValueError, match=r"\(2, 5\) cannot be broadcast .* \(2, 2, 5, 5\)"):
        F.scaled_dot_product_attention(ta.randn(2, 2, 5, 4), ta.randn(2, 2, 5, 4), ta.randn(2, 2, 5, 4),
                                       attn_mask=keys_per_sequence)


# ----------------------------------------------------------------------------- changes between calls
#
# A compiled layer asks the router afresh on every call. Each change below is one a user can make between two
# calls, made to the original and to the compiled copy alike (each holds its own attributes, both the same
# parameters); after every one the node the compiled layer runs is the one the route names, and its output is
# the reference's.

class _OwnLinear(nn.Linear):
    pass


def _change(layers, what, rng):
    """Make the change ``what`` on each of ``layers`` (a drawn value is drawn once)."""
    E = layers[0].self_attn.embed_dim
    p = float(rng.choice([0.0, 0.3]))
    shared = {"linear1 replaced": lambda: _OwnLinear(E, layers[0].linear1.out_features),
              "linear1 plain": lambda: nn.Linear(E, layers[0].linear1.out_features)}.get(what, lambda: None)()
    for layer in layers:
        if what == "train":
            layer.train()
        elif what == "eval":
            layer.eval()
        elif what == "dropout1.p":
            layer.dropout1.p = p
        elif what == "dropout.p":
            layer.dropout.p = p
        elif what == "attention dropout":
            layer.self_attn.dropout = p
        elif what == "keep_attn_weights":
            layer.keep_attn_weights = not layer.keep_attn_weights
        elif what == "norm1.weight.data of another shape":
            layer.norm1.weight.data = ta.ones(E + 1, dtype=layer.norm1.weight.dtype).data
        elif what == "norm1.weight.data of its shape":
            layer.norm1.weight.data = ta.ones(E, dtype=layer.norm1.weight.dtype).data
        elif what == "double":
            layer.double()
        elif what == "float":
            layer.float()
        elif what in ("linear1 replaced", "linear1 plain"):
            layer.linear1 = shared.to(layer.linear2.weight.dtype)  # one module, the same weights for both
        elif what == "norm2.forward on the instance":
            layer.norm2.forward = functools.partial(nn.LayerNorm.forward, layer.norm2)
        elif what == "activation gelu":
            layer.activation = F.gelu
        elif what == "activation tanh":
            layer.activation = ta.tanh
    if what == "blocked threshold 4":
        tuning.tuned(blocked_attention_min_keys=4).__enter__()  # (the test puts the value back)
    elif what == "blocked threshold 512":
        tuning.tuned(blocked_attention_min_keys=512).__enter__()


CHANGES = ["train", "eval", "dropout1.p", "dropout.p", "attention dropout", "keep_attn_weights",
           "norm1.weight.data of another shape", "norm1.weight.data of its shape", "double", "float",
           "linear1 replaced", "linear1 plain", "norm2.forward on the instance", "activation gelu",
           "activation tanh", "blocked threshold 4", "blocked threshold 512"]


@given(changes=st.lists(st.sampled_from(CHANGES), min_size=1, max_size=8), seed=st.integers(0, 2**16),
       mask=st.sampled_from(["none", "bool", "float", "float with grad"]),
       dtype=st.sampled_from(["float32", "float64"]))
def test_after_any_change_the_route_is_what_runs_and_gives_the_reference(changes, seed, mask, dtype):
    rng = np.random.default_rng(seed)
    E, L = 8, 5
    layer = nn.TransformerEncoderLayer(E, 2, 16, dropout=0.0, norm_first=bool(seed % 2))
    compiled = ta.compile(layer)
    x = rng.standard_normal((2, L, E))
    attn_mask = {"none": None, "bool": ta.tensor((rng.random((L, L)) > 0.3) | np.eye(L, dtype=bool)),
                 "float": ta.tensor(rng.standard_normal((L, L)), dtype=dtype),
                 "float with grad": ta.tensor(rng.standard_normal((L, L)), dtype=dtype, requires_grad=True)}[mask]
    with tuning.tuned(blocked_attention_min_keys=513):  # leaving restores it
        for what in [None] + changes:
            if what is not None:
                _change((layer, compiled), what, rng)
            xi = ta.tensor(x, dtype=compiled.linear2.weight.dtype, requires_grad=True)
            route = router.encoder_layer(compiled, xi, attn_mask)
            try:
                out = compiled(xi, attn_mask)
            except (ValueError, TypeError) as error:  # a norm weight of another shape, mixed dtypes: the
                with pytest.raises(type(error)) as reference_error:  # reference's own error
                    layer(xi, attn_mask)
                assert str(reference_error.value) == str(error)
                continue
            types = node_types(out)
            blocks = route or router.LayerRoute(False, None, False, False)
            assert ("SelfAttentionBlock" in types) == blocks.self_attention_block, (what, route, types)
            assert ("FeedForwardBlock" in types) == (blocks.feed_forward_block is not None), (what, route, types)
            ta.manual_seed(seed)
            reference = layer(xi, attn_mask).numpy()
            ta.manual_seed(seed)
            out = compiled(xi, attn_mask).numpy()  # dropout, where it acts, from one seed
            tolerance = dict(rtol=1e-4, atol=1e-5) if out.dtype == np.float32 else dict(rtol=1e-9, atol=1e-10)
            np.testing.assert_allclose(out, reference, **tolerance)


class _ScaledLinear(nn.Linear):
    def forward(self, input):
        return super().forward(input) * 2


def test_a_layer_keeps_its_structure_while_it_holds_the_same_parts_and_asks_again_when_one_is_replaced():
    """What depends on the parts alone (their classes, the sizes, the activation) is asked once per set of parts
    (``router.layer_structure``); a part or an activation replaced asks afresh, and what runs follows."""
    layer = ta.compile(nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0).eval())
    x = ta.randn(2, 5, 8, requires_grad=True)
    first = router.layer_structure(layer, layer.norm2, layer.dropout2)
    assert first.self_attention is None and first.feed_forward is None and first.activation == "relu"
    assert router.layer_structure(layer, layer.norm2, layer.dropout2) is first  # kept
    layer.linear1 = _ScaledLinear(8, 16)
    replaced = router.layer_structure(layer, layer.norm2, layer.dropout2)
    assert replaced is not first and replaced.feed_forward == "linear1 is not the library's Linear with its own forward"
    assert "FeedForwardBlock" not in node_types(layer(x)) and "SelfAttentionBlock" in node_types(layer(x))
    layer.activation = ta.tanh
    assert router.layer_structure(layer, layer.norm2, layer.dropout2).activation is None
    layer.linear1, layer.activation = nn.Linear(8, 16), F.gelu
    assert router.layer_structure(layer, layer.norm2, layer.dropout2).activation == "gelu"
    assert "FeedForwardBlock" in node_types(layer(x))


def test_deleting_an_instance_forward_brings_the_fused_route_back():
    layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0)
    x = ta.randn(2, 5, 8)
    layer.norm1.forward = layer.norm1.forward  # a forward on the instance: the composed route
    assert router.encoder_layer(layer, x, None).self_attention_block is False
    del layer.norm1.forward
    assert router.encoder_layer(layer, x, None).self_attention_block is True


def test_a_tuning_value_set_directly_changes_the_next_calls_route():
    layer = ta.compile(nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0).eval())
    x = ta.randn(2, 8, 8, requires_grad=True)
    assert router.encoder_layer(layer, x, None).self_attention_block
    previous = tuning.values.blocked_attention_min_keys
    try:
        tuning.values.blocked_attention_min_keys = 4
        assert not router.encoder_layer(layer, x, None).self_attention_block  # 8 keys: blocked attention now
        assert "SelfAttentionBlock" not in node_types(layer(x))
    finally:
        tuning.values.blocked_attention_min_keys = previous
    assert router.encoder_layer(layer, x, None).self_attention_block
    assert "SelfAttentionBlock" in node_types(layer(x))


# ----------------------------------------------------------------------------- the encoder's padding


class _DoubledLayer(nn.TransformerEncoderLayer):
    def forward(self, src, src_mask=None, is_causal=False):
        return super().forward(src, src_mask, is_causal) * 2


class _OwnForwardGELU(nn.GELU):
    def forward(self, input):
        return super().forward(input) + 1


@pytest.mark.parametrize("change", ["subclass", "forward on the instance", "activation with its own forward"])
@pytest.mark.parametrize("compiled", [True, False])
def test_the_padding_is_zeroed_only_for_the_librarys_own_layer(change, compiled):
    """What the encoder returns is the reference's business: zeros at the padding only where the first layer
    computes the library's forward (PyTorch's nested-tensor case); a changed layer gets its padding computed."""
    ta.manual_seed(0)
    layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, activation=_OwnForwardGELU()
                                       if change == "activation with its own forward" else "relu")
    encoder = nn.TransformerEncoder(layer, 1).eval()
    if change == "subclass":
        encoder.layers[0] = _DoubledLayer(8, 2, 16, dropout=0.0).eval()
    elif change == "forward on the instance":
        first = encoder.layers[0]
        first.forward = functools.partial(nn.TransformerEncoderLayer.forward, first)
    x, mask = ta.randn(2, 4, 8), F.padding_mask([4, 2], 4)
    with ta.no_grad():
        out = (ta.compile(encoder) if compiled else encoder)(x, mask=mask).numpy()
    assert np.abs(out[1, 2:]).max() > 1e-3  # the padding's rows were computed, not zeroed


def test_a_pooled_pass_in_an_atexit_handler_runs_on_the_calling_thread():
    code = ("import atexit, numpy as np, tinyattn as ta\n"
            "from tinyattn.fast import kernels, router\n"
            "def relu():\n"
            "    z = np.ones((1024, 1024), np.float32)\n"
            "    return kernels.bias_relu(z, np.zeros(1024, np.float32), router.elementwise_schedule(z))\n"
            "def at_exit():\n"
            "    print('ok', float(relu().sum()))\n"
            "atexit.register(at_exit)\n"
            "relu()\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and result.stdout.strip() == "ok 1048576.0", result.stderr
