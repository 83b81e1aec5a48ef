"""Where torch and tinyattn could differ without a word, they either agree or one of them says so.

* ``view`` on a tensor whose strides cannot give the shape raises torch's error, natively and in compat (both
  APIs follow torch: ``reshape`` copies, ``view`` never does), and a write through a view reaches its base.
* A PyTorch-style boolean mask handed to the native ``MultiHeadAttention`` (``True`` = masked) cannot invert
  silently: where it leaves a query no key in every sequence (torch's causal mask, its ``(B, S)`` padding mask) the
  layer refuses it and names the conventions; compat's layers take torch's masks as torch does.
"""

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import tinyattn as ta
import tinyattn.compat as tc


@given(rows=st.integers(2, 5), cols=st.integers(2, 5))
def test_view_of_a_transpose_raises_torchs_error_natively_and_in_compat(rows, cols):
    t = torch.arange(float(rows * cols)).reshape(rows, cols)
    with pytest.raises(RuntimeError) as theirs:
        t.t().view(-1)
    for make in (ta.arange, tc.arange):
        x = make(float(rows * cols)).reshape(rows, cols)
        with pytest.raises(RuntimeError) as ours:
            x.t().view(-1)
        assert str(ours.value) == str(theirs.value)
        assert x.t().reshape(-1).tolist() == t.t().reshape(-1).tolist()  # reshape copies, as torch's does
        assert x.t().contiguous().view(-1).tolist() == t.t().contiguous().view(-1).tolist()


@given(shape=st.sampled_from([(2, 6), (3, 4), (12,), (2, 3, 2)]), target=st.sampled_from([(-1,), (4, 3), (6, 2)]))
def test_a_write_through_a_view_reaches_the_base_as_in_torch(shape, target):
    t, x = torch.zeros(shape), tc.zeros(shape)
    tv, xv = t.view(target), x.view(target)
    tv[1] += 1.0
    xv[1] += 1.0
    assert np.array_equal(x.numpy(), t.numpy()) and x.numpy().any()


def test_pytorchs_causal_and_padding_masks_are_refused_by_the_native_layer():
    ta.manual_seed(0)
    mha = ta.nn.MultiHeadAttention(4, 2)
    x = ta.randn(4, 4, 4)
    torch_causal = ta.triu(ta.ones(4, 4, dtype=ta.bool), diagonal=1)  # torch's: True above the diagonal = masked
    torch_padding = ta.tensor(np.arange(4)[None, :] >= np.array([4, 3, 2, 1])[:, None])  # (B, S), True = padding
    for mask in (torch_causal, torch_padding):
        with pytest.raises(ValueError, match="leaves a query no key to attend.*MAY be attended.*~mask"):
            mha(x, attn_mask=mask)
        with pytest.raises(ValueError, match="MAY be attended"):
            ta.compile(mha)(x, attn_mask=mask)
    out, _ = mha(x, attn_mask=~torch_causal)  # inverted, it is the causal mask
    assert np.allclose(out.numpy(), mha(x, is_causal=True)[0].numpy(), atol=1e-6)


def test_a_query_silenced_on_purpose_takes_a_float_mask_or_a_mask_per_sequence():
    mha = ta.nn.MultiHeadAttention(4, 2)
    x = ta.randn(2, 3, 4)
    blank = np.ones((3, 3), dtype=bool)
    blank[1] = False
    additive = ta.tensor(np.where(blank, 0.0, -np.inf).astype(np.float32))
    for mask in (additive, ta.tensor(np.broadcast_to(blank, (2, 3, 3)).copy())):
        out, w = mha(x, attn_mask=mask)
        assert (w.numpy()[:, :, 1] == 0).all()
        assert np.allclose(out.numpy()[:, 1], mha.out_proj.bias.numpy())


def test_compat_layers_keep_torchs_masks_and_give_zeros_where_a_query_has_no_key():
    layer = tc.nn.TransformerEncoderLayer(4, 2, dim_feedforward=8, dropout=0.0, batch_first=True)
    x = tc.randn(2, 3, 4)
    masked = np.eye(3, k=1, dtype=bool)
    masked[1] = True  # torch's convention, True = masked: query 1 masked from every key
    out = layer(x, src_mask=tc.tensor(masked)).numpy()
    additive = layer(x, src_mask=tc.tensor(np.where(masked, -np.inf, 0.0).astype(np.float32))).numpy()
    np.testing.assert_allclose(out, additive, rtol=1e-6, atol=1e-6)  # the boolean mask means what the float one does
    assert np.isfinite(out).all()
