"""An encoder on a padded batch, as PyTorch's with nested tensors: zeros at the padding, and the real
tokens computed alone (``fast.encoder_on_real_tokens``, ``SelfAttentionBlock`` with ``tokens``).

- Compiled (``ta.compile``), the real tokens alone; not compiled, every position computed and the padding set to
  zero afterwards: the two agree to float64 rounding, for ReLU and both GELUs, one or two layers, a
  final norm or none, any lengths (a sentence of none included), on every backend. The real tokens'
  outputs are those of the same encoder with ``enable_nested_tensor=False`` (every position kept).
- ``torch.nn.TransformerEncoder`` with the same weights gives the same outputs (ours compiled or not), zeros
  included, where
  its conditions hold and where each one fails (training, a gradient recorded, pre-norm, an odd
  number of heads, a padding mask whose real tokens do not come first, ``enable_nested_tensor=False``).
- ``SelfAttentionBlock`` with ``tokens`` (``x (T, E)``, the real rows) gives the padded block's real rows,
  and the same gradients, input and parameters, in float64; with ``cu_seqlens`` (attention sentence by sentence,
  ``fast.attention.attention_by_sequences``, inference) the same rows. Both routes of attention on the real tokens are
  drawn in the tests above, the reference's and PyTorch's; the kernel alone is held to PyTorch's attention of each
  sentence alone (dtypes, empty sentences, the redo of rows far below the shift, a NaN in its row), and
  the route to its threshold, counted in real tokens.
- ``tinyattn.compat``'s encoder, compiled (``torch.compile``), takes the same route and matches PyTorch in
  PyTorch's conventions.
"""

import io
from unittest import mock

import numpy as np
import pytest
import torch
from graph_checks import EXACT, assert_same, grad_of, leaf
from hypothesis import given
from hypothesis import strategies as st
from torch_parity import host

import tinyattn as ta
import tinyattn.nn as nn
import tinyattn.nn.functional as F
from tinyattn import compat, fast
from tinyattn.fast import SelfAttentionBlock, tuning

DEVICES = ["cpu", "strict", pytest.param("cuda", marks=pytest.mark.cuda)]  # cuda: skipped without a GPU
ACTIVATIONS = {"relu": "relu", "gelu": "gelu", "gelu_tanh": nn.GELU(approximate="tanh")}
COMPILED_FORMS = "tinyattn.fast.compile"  # the module (``tinyattn.fast.compile`` the attribute is the function)


def real_tokens_spy():
    """A spy on the real-tokens route where the compiled encoder calls it."""
    return mock.patch(f"{COMPILED_FORMS}.encoder_on_real_tokens", wraps=fast.encoder_on_real_tokens)


def randomized(module, rng):
    module.double()
    for p in module.parameters():
        p.data = rng.standard_normal(p.shape) * 0.5
    return module


def draw_encoder(data, rng, heads=(2, 4), final_norm=None):
    H = data.draw(st.sampled_from(heads), label="heads")
    E = H * data.draw(st.integers(1, 3), label="head size")
    activation = data.draw(st.sampled_from(sorted(ACTIVATIONS)), label="activation")
    layer = nn.TransformerEncoderLayer(E, H, dim_feedforward=data.draw(st.integers(1, 6), label="ff"), dropout=0.0,
                                       activation=ACTIVATIONS[activation],
                                       layer_norm_eps=data.draw(st.sampled_from([1e-5, 1e-12]), label="eps"))
    with_norm = data.draw(st.booleans(), label="final norm") if final_norm is None else final_norm
    encoder = nn.TransformerEncoder(layer, data.draw(st.integers(1, 3), label="layers"),
                                    norm=nn.LayerNorm(E) if with_norm else None)
    for later in encoder.layers[1:]:  # PyTorch looks at the first layer's norm order only; the others may differ
        later.norm_first = data.draw(st.booleans(), label="a later layer's norm_first")
    return randomized(encoder, rng).eval(), E


def run(encoder, x, mask, compiled):
    with ta.no_grad():
        return (ta.compile(encoder) if compiled else encoder)(x, mask=mask)


@pytest.mark.parametrize("device", DEVICES)
@given(data=st.data())
def test_real_tokens_alone_equal_the_reference(device, data):
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="seed"))
    encoder, E = draw_encoder(data, rng)
    encoder.to(device)
    B, L = data.draw(st.integers(1, 3), label="B"), data.draw(st.integers(1, 6), label="L")
    lengths = data.draw(st.lists(st.integers(0, L), min_size=B, max_size=B), label="lengths")
    x = leaf(rng.standard_normal((B, L, E)), device, requires_grad=False)
    mask = F.padding_mask(lengths, L).to(device)
    by_sentence = data.draw(st.booleans(), label="attention sentence by sentence")
    sentences = mock.patch.object(fast.blocks, "attention_by_sequences", wraps=fast.blocks.attention_by_sequences)
    with real_tokens_spy() as real_tokens, sentences as by_sequences:
        with tuning.tuned(sequence_attention_min_length=0 if by_sentence else L + 1):
            fast_out = host(run(encoder, x, mask, True)._data)
        assert real_tokens.call_count == 1  # the fast route ran ...
        assert by_sequences.call_count == (len(encoder.layers) if by_sentence else 0)  # ... attention as drawn ...
        reference = host(run(encoder, x, mask, False)._data)
        assert real_tokens.call_count == 1  # ... and the reference did not
    assert_same([fast_out], [reference])
    real = np.arange(L)[None, :] < np.array(lengths)[:, None]
    padding_out = np.zeros(E) if encoder.norm is None else host(encoder.norm.bias._data)  # norm(0) = its bias
    np.testing.assert_array_equal(fast_out[~real], np.broadcast_to(padding_out, fast_out[~real].shape))
    encoder.enable_nested_tensor = False  # every position computed, none zeroed
    every_position = host(run(encoder, x, mask, True)._data)
    np.testing.assert_allclose(fast_out[real], every_position[real], **EXACT)
    if not real.all():
        assert np.abs(every_position[~real] - padding_out).max() > 1e-3  # the zeros above came from the route


# ----------------------------------------------------------------------------- PyTorch's conditions

CONDITIONS = ["nested", "training", "grad enabled", "norm_first", "odd heads", "padding first",
              "enable_nested_tensor=False"]


@pytest.mark.parametrize("condition", CONDITIONS)
@given(data=st.data())
def test_zeros_at_the_padding_exactly_where_pytorch_has_them(condition, data):
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="seed"))
    H = 3 if condition == "odd heads" else 2
    E, ff = H * data.draw(st.integers(1, 3), label="head size"), data.draw(st.integers(1, 6), label="ff")
    activation = data.draw(st.sampled_from(["relu", "gelu"]), label="activation")
    options = dict(dropout=0.0, activation=activation, norm_first=condition == "norm_first")
    layers, nested = data.draw(st.integers(1, 2), label="layers"), condition != "enable_nested_tensor=False"
    ours = randomized(nn.TransformerEncoder(nn.TransformerEncoderLayer(E, H, ff, **options), layers,
                                            enable_nested_tensor=nested), rng)
    theirs = torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(E, H, ff, batch_first=True, **options),
                                         layers, enable_nested_tensor=nested).double()
    theirs.load_state_dict({k: torch.tensor(v) for k, v in ta.interop.to_torch(ours.state_dict()).items()})
    ours.train(condition == "training"), theirs.train(condition == "training")
    B, L = data.draw(st.integers(1, 3), label="B"), data.draw(st.integers(2, 6), label="L")
    lengths = data.draw(st.lists(st.integers(1, L - 1), min_size=B, max_size=B), label="lengths")
    real = np.arange(L)[None, :] < np.array(lengths)[:, None]  # (B, L)
    if condition == "padding first":
        real = real[:, ::-1].copy()  # the same lengths, the padding at the start of each row
    x = rng.standard_normal((B, L, E))
    recording = condition == "grad enabled"
    by_sentence = data.draw(st.booleans(), label="attention sentence by sentence")  # where the real tokens route runs
    with torch.enable_grad() if recording else torch.no_grad():
        expected = theirs(torch.tensor(x, requires_grad=recording), src_key_padding_mask=torch.tensor(~real))
    expected = expected.detach().numpy()
    zeroed = bool((expected[~real] == 0).all())
    assert zeroed == (condition == "nested")  # PyTorch's own conditions, as this test names them
    for encoder in (ta.compile(ours), ours):
        with (ta.enable_grad() if recording else ta.no_grad(),
              tuning.tuned(sequence_attention_min_length=0 if by_sentence else L + 1), real_tokens_spy() as spy):
            out = encoder(ta.tensor(x, requires_grad=recording), mask=ta.tensor(real[:, None, None, :]))
        out = out.detach().numpy()
        np.testing.assert_allclose(out, expected, rtol=1e-9, atol=1e-10)
        assert bool((out[~real] == 0).all()) == zeroed
        assert spy.call_count == int(zeroed and encoder is not ours)  # the real tokens alone, where compiled


# ----------------------------------------------------------------------------- the block with tokens


@pytest.mark.parametrize("device", DEVICES)
@given(data=st.data())
def test_self_attention_block_on_real_tokens_matches_the_padded_block(device, data):
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="seed"))
    B, L, H = data.draw(st.integers(1, 3), label="B"), data.draw(st.integers(1, 5), label="L"), 2
    E = H * data.draw(st.integers(1, 3), label="head size")
    norm_first = data.draw(st.booleans(), label="norm_first")
    lengths = data.draw(st.lists(st.integers(1, L), min_size=B, max_size=B), label="lengths")
    real = (np.arange(L)[None, :] < np.array(lengths)[:, None]).reshape(-1)
    index = np.flatnonzero(real)
    allowed = F.padding_mask(lengths, L).numpy()
    params = [leaf(rng.standard_normal(shape) * 0.5, device) for shape in [(E,)] * 2 + [(E, E)] * 3 + [(E,)] * 3 +
              [(E, E), (E,)]]
    x = rng.standard_normal((B, L, E))
    upstream = rng.standard_normal((B * L, E))
    options = dict(num_heads=H, norm_first=norm_first, eps=1e-5, attn_mask=None, is_causal=False,
                   allowed=ta.tensor(allowed, device=device)._data)
    results = []
    for tokens in (None, (ta.tensor(index, device=device)._data, B, L)):
        x_in = leaf(x if tokens is None else x.reshape(B * L, E)[index], device)
        out = SelfAttentionBlock.apply(x_in, *params, tokens=tokens, **options)
        grad = upstream * real[:, None] if tokens is None else upstream[index]  # the padding's rows: no gradient
        out.backward(ta.tensor(grad.reshape(out.shape), device=device))
        rows = host(out._data).reshape(-1, E)
        grad_x = grad_of(x_in).reshape(-1, E)
        results.append([rows if tokens else rows[index], grad_x if tokens else grad_x[index]]
                       + [grad_of(p) for p in params])
        for p in params:
            p.grad = None
    assert_same(*results)


# ----------------------------------------------------------------------------- tinyattn.compat


def compat_encoders(batch_first, rng):
    """``(ours, theirs)``: compat's and PyTorch's two-layer GELU encoder with the same weights, in eval mode."""
    E, H = 8, 2
    ours = compat.nn.TransformerEncoder(compat.nn.TransformerEncoderLayer(E, H, 16, dropout=0.0, activation="gelu",
                                                                          batch_first=batch_first), 2).double()
    theirs = torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(E, H, 16, dropout=0.0, activation="gelu",
                                                                          batch_first=batch_first), 2).double()
    randomized(ours, rng)
    theirs.load_state_dict({k: torch.tensor(np.asarray(v)) for k, v in ours.state_dict().items()})
    return ours.eval(), theirs.eval()


@pytest.mark.parametrize("float_mask", [False, True], ids=["bool mask", "float mask"])
@pytest.mark.parametrize("batch_first", [True, False])
@pytest.mark.parametrize("compiled", [True, False])
def test_compat_encoder_matches_torch_with_a_key_padding_mask(batch_first, compiled, float_mask):
    rng = np.random.default_rng(7)
    ours, theirs = compat_encoders(batch_first, rng)
    B, L, E = 3, 5, 8
    padding = ~(np.arange(L)[None, :] < np.array([5, 2, 3])[:, None])  # (B, L), True = padding
    given = np.where(padding, -np.inf, 0.0) if float_mask else padding  # PyTorch's float form: -inf = padding
    x = rng.standard_normal((B, L, E) if batch_first else (L, B, E))
    module = compat.compile(ours) if compiled else ours
    with ta.no_grad():
        out = module(compat.tensor(x), src_key_padding_mask=compat.tensor(given)).numpy()
    with torch.no_grad():
        expected = theirs(torch.tensor(x), src_key_padding_mask=torch.tensor(given)).numpy()
    np.testing.assert_allclose(out, expected, rtol=1e-9, atol=1e-10)
    padded = out[padding] if batch_first else out.transpose(1, 0, 2)[padding]
    assert bool((padded == 0).all()) == batch_first  # PyTorch uses nested tensors with batch_first only


@pytest.mark.xfail(strict=True, reason="library: compat.nn.TransformerEncoder has no fused form since ta.compile "
                                       "(no computes_as/native_forward, not in fast.compile.MODULES): compiled, it "
                                       "computes every position, never fast.encoder_on_real_tokens")
def test_a_compiled_compat_encoder_computes_the_real_tokens_alone():
    ours, _ = compat_encoders(True, np.random.default_rng(7))
    padding = ~(np.arange(5)[None, :] < np.array([5, 2, 3])[:, None])
    with real_tokens_spy() as real_tokens, ta.no_grad():
        compat.compile(ours)(compat.randn(3, 5, 8, dtype=compat.float64), src_key_padding_mask=compat.tensor(padding))
    assert real_tokens.call_count == 1


def test_explain_names_the_route_and_why_not():
    encoder = ta.compile(nn.TransformerEncoder(nn.TransformerEncoderLayer(4, 2, 8, dropout=0.0), 2).eval())
    x, mask = ta.randn(2, 3, 4), F.padding_mask([3, 3], 3)
    lines = ta.explain(encoder, x, mask=mask, file=io.StringIO()).splitlines()[:3]
    assert lines == ["TransformerEncoder",
                     "  padding: fast.encoder_on_real_tokens (the real tokens alone; zeros at the padding)",
                     "  attention on the real tokens: fast.attention.attention_by_sequences (sentence by sentence)"]
    mask = F.padding_mask([3, 2], 3)  # 2.5 real tokens a sentence, under the default 3
    assert ta.explain(encoder, x, mask=mask, file=io.StringIO()).splitlines()[2] == (
        "  attention on the real tokens: on the padded batch with its padding mask (the sentences average 2.5 real "
        "tokens, under the sentence-by-sentence threshold 3)")
    encoder.layers[1].keep_attn_weights = True
    first_line = ta.explain(encoder, x, mask=mask, file=io.StringIO()).splitlines()[0]
    assert first_line == ("TransformerEncoder: reference (layers.1 does not run both residual blocks as fused "
                          "nodes)")


# ----------------------------------------------------------------------------- attention sentence by sentence


def sequence_views(rows, H):
    """``(q, k, v)`` ``(H, T, D)`` views of the in-projection's output ``rows (T, 3·H·D)``, as the blocks split it."""
    T, D = rows.shape[0], rows.shape[1] // (3 * H)
    qkv = rows.reshape(T, 3, H, D).transpose(1, 2, 0, 3)
    return qkv[0], qkv[1], qkv[2]


def output_view(T, H, D, dtype):
    """A fresh ``(H, T, D)`` output view of merged heads ``(T, H·D)``."""
    return np.full((T, H * D), np.nan, dtype=dtype).reshape(T, H, D).swapaxes(0, 1)


def torch_by_sentence(q, k, v, lengths, scale):
    """PyTorch's attention of each sentence alone, ``(H, T, D)`` in float64."""
    starts = np.concatenate([[0], np.cumsum(lengths)])
    parts = [torch.nn.functional.scaled_dot_product_attention(
        *(torch.tensor(a[:, s0:s1].astype(np.float64)) for a in (q, k, v)), scale=scale).numpy()
        for s0, s1 in zip(starts, starts[1:])]
    return np.concatenate(parts, axis=1)


def by_sequences(q, k, v, cu_seqlens, scale, out):
    """``attention_by_sequences`` under the router's schedule of ``cu_seqlens``."""
    schedule = fast.router.sequence_schedule(cu_seqlens, q.shape[1])
    return fast.attention.attention_by_sequences(q, k, v, schedule, scale, out)


@given(data=st.data())
def test_attention_by_sequences_matches_pytorch_sentence_by_sentence(data):
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="seed"))
    H, D = data.draw(st.integers(1, 3), label="heads"), data.draw(st.integers(1, 4), label="head size")
    lengths = data.draw(st.lists(st.integers(0, 6), min_size=1, max_size=4), label="lengths")  # an empty one too
    dtype = data.draw(st.sampled_from([np.float64, np.float32]), label="dtype")
    scale = data.draw(st.sampled_from([1 / np.sqrt(D), 0.3, 2.0]), label="scale")
    T = sum(lengths)
    q, k, v = sequence_views((rng.standard_normal((T, 3 * H * D)) * 2).astype(dtype), H)
    out = output_view(T, H, D, dtype)
    cu_seqlens = np.concatenate([[0], np.cumsum(lengths)]).astype(int)
    result = by_sequences(q, k, v, cu_seqlens, scale, out)
    assert result is out and out.dtype == dtype
    # float32: an output is a weighted sum of values, so its round-off scales with the largest value, not with it
    size = max(1.0, float(np.abs(v).max())) if T else 1.0
    tolerance = dict(rtol=1e-12, atol=1e-12) if dtype == np.float64 else dict(rtol=2e-5, atol=2e-6 * size)
    if T:
        np.testing.assert_allclose(out, torch_by_sentence(q, k, v, lengths, scale), **tolerance)


def test_attention_by_sequences_redoes_rows_far_below_the_shift_and_keeps_a_nan_in_its_row():
    """One shift for all sentences: the rows of a sentence whose scores lie far below another's underflow under it
    and are redone with their own maximum (``softmax_into``), and a NaN stays in its query's row, as PyTorch keeps
    it."""
    rng = np.random.default_rng(21)
    H, D, lengths = 2, 3, [3, 4, 2]
    rows = rng.standard_normal((9, 3 * H * D))
    rows[:3, :H * D] *= 60  # sentence 0's queries and keys: scores in the thousands
    rows[:3, H * D:2 * H * D] *= 60
    q, k, v = sequence_views(rows, H)
    cu_seqlens, scale = np.array([0, 3, 7, 9]), 0.5
    scores = [np.einsum("hid,hjd->hij", q[:, a:b], k[:, a:b]) * scale for a, b in ((0, 3), (3, 7), (7, 9))]
    assert scores[0].max() - max(scores[1].max(), scores[2].max()) > 800  # exp underflows to 0 below that: the redo
    out = by_sequences(q, k, v, cu_seqlens, scale, output_view(9, H, D, np.float64))
    expected = torch_by_sentence(q, k, v, lengths, scale)
    np.testing.assert_allclose(out, expected, rtol=1e-12, atol=1e-12)
    rows[4, 1] = np.nan  # the second query of sentence 1, head 0
    q, k, v = sequence_views(rows, H)
    out = by_sequences(q, k, v, cu_seqlens, scale, output_view(9, H, D, np.float64))
    assert np.isnan(out[0, 4]).all()
    finite = np.ones(out.shape, dtype=bool)
    finite[0, 4] = False
    np.testing.assert_allclose(out[finite], expected[finite], rtol=1e-12, atol=1e-12)


def test_self_attention_block_by_sentence_gives_the_padded_blocks_rows():
    """``SelfAttentionBlock`` with ``cu_seqlens`` (inference) gives what it gives with ``tokens`` (attention on the
    padded batch); it refuses ``for_backward=True``, a mask, ``is_causal`` and a
    backward, each by name."""
    rng = np.random.default_rng(22)
    lengths, L, H, E = [4, 1, 3], 4, 2, 6
    real = (np.arange(L)[None, :] < np.array(lengths)[:, None]).reshape(-1)
    index, cu_seqlens = np.flatnonzero(real), np.array([0, 4, 5, 8])
    params = [ta.tensor(rng.standard_normal(shape) * 0.5) for shape in [(E,)] * 2 + [(E, E)] * 3 + [(E,)] * 3 +
              [(E, E), (E,)]]
    x = ta.tensor(rng.standard_normal((len(index), E)))
    options = dict(num_heads=H, norm_first=False, eps=1e-5, attn_mask=None, is_causal=False, allowed=None,
                   for_backward=False)  # for_backward as self_attention_block gives it here
    padding = F.padding_mask(lengths, L).numpy()
    with ta.no_grad():
        padded = SelfAttentionBlock.apply(x, *params, **{**options, "allowed": padding,
                                                         "tokens": (index, len(lengths), L)}).numpy()
        with mock.patch.object(fast.blocks, "packed_attention") as not_run:
            by_sentence = SelfAttentionBlock.apply(x, *params, cu_seqlens=cu_seqlens, **options).numpy()
        assert not_run.call_count == 0
    np.testing.assert_allclose(by_sentence, padded, rtol=1e-12, atol=1e-12)
    refusals = {"inference only": {"for_backward": True}, "nothing else masks": {"allowed": padding},
                "is_causal=True": {"is_causal": True}}
    for message, change in refusals.items():
        with pytest.raises(ValueError, match=message):
            SelfAttentionBlock.apply(x, *params, cu_seqlens=cu_seqlens, **{**options, **change})
    with pytest.raises(ValueError, match=r"\(T, E\); got shape \(1, 8, 6\)"):
        SelfAttentionBlock.apply(x.reshape(1, 8, E), *params, cu_seqlens=cu_seqlens, **options)
    x.requires_grad = True
    y = SelfAttentionBlock.apply(x, *params, cu_seqlens=cu_seqlens, **options)  # a graph recorded, none kept for it
    with pytest.raises(RuntimeError, match="cu_seqlens="):
        y.backward(ta.tensor(rng.standard_normal(y.shape)))


def test_attention_by_sequences_refuses_lengths_that_do_not_cover_the_rows():
    q = k = v = np.zeros((2, 8, 3))
    out = np.empty((2, 8, 3))
    for cu_seqlens in ([0, 3], [1, 8], [0], [0, 5, 3, 8]):
        with pytest.raises(ValueError, match=r"cu_seqlens must run from 0 up to T = 8 .* got \["):
            by_sequences(q, k, v, np.array(cu_seqlens), 0.5, out)


@pytest.mark.parametrize("lengths, by_sentence", [([3, 2], False), ([3, 3], True), ([1, 5], True), ([0, 6, 3], True),
                                                  ([2, 2, 4], False)])
def test_the_default_threshold_counts_real_tokens(lengths, by_sentence):
    """By default, sentences averaging at least 3 real tokens attend sentence by sentence, fewer on the padded batch:
    the count is of the real tokens (the padding is not counted)."""
    L = max(lengths)
    encoder = ta.compile(nn.TransformerEncoder(nn.TransformerEncoderLayer(4, 2, 8, dropout=0.0), 2).eval())
    sentences = mock.patch.object(fast.blocks, "attention_by_sequences", wraps=fast.blocks.attention_by_sequences)
    with sentences as by_sequences, ta.no_grad():
        encoder(ta.randn(len(lengths), L, 4), mask=F.padding_mask(lengths, L))
    assert by_sequences.call_count == (2 if by_sentence else 0)


def test_a_tuned_threshold_comes_back_and_an_unknown_name_is_refused():
    with tuning.tuned(sequence_attention_min_length=4.0):
        assert tuning.values.sequence_attention_min_length == 4.0
    assert tuning.values.sequence_attention_min_length == 3.0
    before = vars(tuning.values).copy()
    with pytest.raises(TypeError, match="unknown tuning values"):
        tuning.tuned(sequence_attention_min_length=7.0, sequence_min_length=1)
    assert vars(tuning.values) == before
