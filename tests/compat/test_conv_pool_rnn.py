"""Packed sequences, the recurrent layers over them and the recurrent cells, against torch with copied weights:
values and gradients in float64 under a random upstream gradient, for lengths drawn by hypothesis, sorted
(``enforce_sorted=True``) and not. Also compat's convolution, pooling and embedding layers."""

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import tinyattn.compat as ct
from tinyattn.compat.nn.utils import rnn as ours_rnn

TR = torch.nn.utils.rnn


def _close(ours, theirs):
    np.testing.assert_allclose(ours.numpy(), theirs.detach().numpy(), rtol=1e-10, atol=1e-12)


@st.composite
def batches(draw):
    lengths = draw(st.lists(st.integers(1, 6), min_size=1, max_size=5))
    enforce_sorted = draw(st.booleans())
    if enforce_sorted:
        lengths = sorted(lengths, reverse=True)
    return lengths, enforce_sorted, draw(st.booleans()), draw(st.integers(0, 2**16))


@given(batches())
def test_pack_and_pad_match_torch(batch):
    lengths, enforce_sorted, batch_first, seed = batch
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((len(lengths), max(lengths) + 1, 3) if batch_first else (max(lengths) + 1, len(lengths), 3))
    ours_x, theirs_x = ct.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    ours = ours_rnn.pack_padded_sequence(ours_x, lengths, batch_first=batch_first, enforce_sorted=enforce_sorted)
    theirs = TR.pack_padded_sequence(theirs_x, lengths, batch_first=batch_first, enforce_sorted=enforce_sorted)
    _close(ours.data, theirs.data)
    assert ours.batch_sizes.tolist() == theirs.batch_sizes.tolist()
    for mine, torchs in ((ours.sorted_indices, theirs.sorted_indices),
                         (ours.unsorted_indices, theirs.unsorted_indices)):
        assert (mine is None) == (torchs is None) and (mine is None or mine.tolist() == torchs.tolist())
    ours_padded, ours_lengths = ours_rnn.pad_packed_sequence(ours, batch_first=batch_first, padding_value=-2.0,
                                                             total_length=max(lengths) + 1)
    theirs_padded, theirs_lengths = TR.pad_packed_sequence(theirs, batch_first=batch_first, padding_value=-2.0,
                                                           total_length=max(lengths) + 1)
    _close(ours_padded, theirs_padded)
    assert ours_lengths.tolist() == theirs_lengths.tolist()
    upstream = rng.standard_normal(x.shape)
    ours_padded.backward(ct.tensor(upstream))
    theirs_padded.backward(torch.tensor(upstream))
    _close(ours_x.grad, theirs_x.grad)
    assert np.abs(ours_x.grad.numpy()).max() > 0
    for mine, torchs in zip(ours_rnn.unpack_sequence(ours), TR.unpack_sequence(theirs)):
        _close(mine, torchs)
    for mine, torchs in zip(ours_rnn.unpad_sequence(ours_padded, ours_lengths, batch_first),
                            TR.unpad_sequence(theirs_padded, theirs_lengths, batch_first)):
        _close(mine, torchs)


def test_pack_sequence_refuses_what_torch_refuses():
    with pytest.raises(RuntimeError, match="sorted in decreasing order"):
        ours_rnn.pack_sequence([ct.ones(1), ct.ones(2)])
    with pytest.raises(RuntimeError, match="greater than 0"):
        ours_rnn.pack_padded_sequence(ct.ones(3, 2), [3, 0])
    packed = ours_rnn.pack_sequence([ct.ones(3), ct.ones(2)])
    with pytest.raises(ValueError, match="total_length"):
        ours_rnn.pad_packed_sequence(packed, total_length=2)
    assert ours_rnn.invert_permutation(ct.tensor([2, 0, 1])).tolist() == [1, 2, 0]
    assert ours_rnn.invert_permutation(None) is None


def _copied(mode, **kwargs):
    theirs = getattr(torch.nn, mode)(**kwargs).double()
    ours = getattr(ct.nn, mode)(**kwargs).double()
    ours.load_state_dict({k: v.numpy() for k, v in theirs.state_dict().items()})
    return ours, theirs


@pytest.mark.parametrize("mode", ["RNN", "LSTM", "GRU"])
@given(batch=batches(), bidirectional=st.booleans(), num_layers=st.integers(1, 2), with_state=st.booleans())
def test_recurrent_layers_over_packed_sequences_match_torch(mode, batch, bidirectional, num_layers, with_state):
    lengths, enforce_sorted, batch_first, seed = batch
    rng = np.random.default_rng(seed)
    ours_layer, theirs_layer = _copied(mode, input_size=3, hidden_size=4, num_layers=num_layers,
                                       bidirectional=bidirectional, batch_first=batch_first)
    B, T = len(lengths), max(lengths)
    x = rng.standard_normal((B, T, 3) if batch_first else (T, B, 3))
    ours_x, theirs_x = ct.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    ours_in = ours_rnn.pack_padded_sequence(ours_x, lengths, batch_first=batch_first, enforce_sorted=enforce_sorted)
    theirs_in = TR.pack_padded_sequence(theirs_x, lengths, batch_first=batch_first, enforce_sorted=enforce_sorted)
    D = 2 if bidirectional else 1
    ours_state = theirs_state = None
    if with_state:  # in the batch's own order, as the user holds it
        h0 = rng.standard_normal((D * num_layers, B, 4))
        ours_state, theirs_state = ct.tensor(h0, requires_grad=True), torch.tensor(h0, requires_grad=True)
        if mode == "LSTM":
            ours_state, theirs_state = (ours_state, ct.tensor(h0 / 2)), (theirs_state, torch.tensor(h0 / 2))
    ours_out, ours_h = ours_layer(ours_in, ours_state)
    theirs_out, theirs_h = theirs_layer(theirs_in, theirs_state)
    assert isinstance(ours_out, ours_rnn.PackedSequence)
    _close(ours_out.data, theirs_out.data)
    assert ours_out.batch_sizes.tolist() == theirs_out.batch_sizes.tolist()
    ours_states = ours_h if mode == "LSTM" else (ours_h,)
    theirs_states = theirs_h if mode == "LSTM" else (theirs_h,)
    for mine, torchs in zip(ours_states, theirs_states):
        _close(mine, torchs)  # each sequence's state at its own last step, in the batch's order
    # one loss through the packed output and the final states, under random weights
    ours_loss = (ours_out.data * ct.tensor(w_out := rng.standard_normal(theirs_out.data.shape))).sum()
    theirs_loss = (theirs_out.data * torch.tensor(w_out)).sum()
    for mine, torchs in zip(ours_states, theirs_states):
        w_h = rng.standard_normal(tuple(torchs.shape))
        ours_loss = ours_loss + (mine * ct.tensor(w_h)).sum()
        theirs_loss = theirs_loss + (torchs * torch.tensor(w_h)).sum()
    ours_loss.backward()
    theirs_loss.backward()
    _close(ours_x.grad, theirs_x.grad)
    for (name, p), (_, q) in zip(ours_layer.named_parameters(), theirs_layer.named_parameters()):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-9, atol=1e-12, err_msg=name)
    if with_state:
        _close((ours_state[0] if mode == "LSTM" else ours_state).grad,
               (theirs_state[0] if mode == "LSTM" else theirs_state).grad)


@pytest.mark.parametrize("mode", ["RNNCell", "LSTMCell", "GRUCell"])
@pytest.mark.parametrize("unbatched", [False, True])
def test_cells_match_torch(mode, unbatched):
    rng = np.random.default_rng(7)
    kwargs = dict(input_size=3, hidden_size=4)
    if mode == "RNNCell":
        kwargs["nonlinearity"] = "relu"
    ours, theirs = _copied(mode, **kwargs)
    assert repr(ours) == repr(theirs)
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in theirs.named_parameters()]
    shape = (3,) if unbatched else (2, 3)
    x = rng.standard_normal(shape)
    h = rng.standard_normal(shape[:-1] + (4,))
    ours_x, theirs_x = ct.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    ours_h, theirs_h = ct.tensor(h, requires_grad=True), torch.tensor(h, requires_grad=True)
    if mode == "LSTMCell":
        ours_out = ours(ours_x, (ours_h, ct.tensor(h * 2)))
        theirs_out = theirs(theirs_x, (theirs_h, torch.tensor(h * 2)))
        assert len(ours(ours_x)) == 2
    else:
        ours_out, theirs_out = (ours(ours_x, ours_h),), (theirs(theirs_x, theirs_h),)
        _close(ours(ours_x), theirs(theirs_x))  # the state defaults to zeros
    for mine, torchs in zip(ours_out, theirs_out):
        _close(mine, torchs)
        upstream = rng.standard_normal(tuple(torchs.shape))
        mine.backward(ct.tensor(upstream), retain_graph=True)
        torchs.backward(torch.tensor(upstream), retain_graph=True)
    _close(ours_x.grad, theirs_x.grad)
    _close(ours_h.grad, theirs_h.grad)
    _close(ours.weight_hh.grad, theirs.weight_hh.grad)
    with pytest.raises(ValueError, match="1D or 2D"):
        ours(ct.ones(1, 2, 3))


def test_compat_layers_are_compat_modules_with_torch_state_dicts():
    conv = ct.nn.Conv1d(4, 6, 3, groups=2, padding="same")
    theirs = torch.nn.Conv1d(4, 6, 3, groups=2, padding="same").double()
    conv.double().load_state_dict({k: v.numpy() for k, v in theirs.state_dict().items()})
    x = np.random.default_rng(8).standard_normal((2, 4, 7))
    out = conv(ct.tensor(x))
    assert isinstance(out, ct.Tensor) and isinstance(conv.weight, ct.nn.Parameter)
    _close(out, theirs(torch.tensor(x)))
    pooled, indices = ct.nn.MaxPool1d(2, return_indices=True)(out)
    theirs_pooled, theirs_indices = torch.nn.MaxPool1d(2, return_indices=True)(theirs(torch.tensor(x)))
    _close(pooled, theirs_pooled)
    assert isinstance(indices, ct.Tensor) and indices.tolist() == theirs_indices.tolist()
    values, where = ct.nn.functional.max_pool1d_with_indices(out, 2)
    assert where.tolist() == theirs_indices.tolist()


def test_compat_embedding_from_pretrained_is_the_compat_class():
    table = np.random.default_rng(9).standard_normal((5, 3))
    embedding = ct.nn.Embedding.from_pretrained(ct.tensor(table), freeze=False, padding_idx=1)
    theirs = torch.nn.Embedding.from_pretrained(torch.tensor(table), freeze=False, padding_idx=1)
    assert type(embedding) is ct.nn.Embedding and isinstance(embedding.weight, ct.nn.Parameter)
    assert repr(embedding) == repr(theirs)
    index = [[1, 2, 1, 4], [0, 1, 3, 3]]
    upstream = np.random.default_rng(10).standard_normal((2, 4, 3))
    embedding(ct.tensor(index)).backward(ct.tensor(upstream))
    theirs(torch.tensor(index)).backward(torch.tensor(upstream))
    _close(embedding.weight.grad, theirs.weight.grad)
    assert embedding.weight.grad.numpy()[1].tolist() == [0.0, 0.0, 0.0]
    assert not ct.nn.Embedding.from_pretrained(ct.tensor(table)).weight.requires_grad


@pytest.mark.parametrize("path", ["conv", "pooling", "rnn", "sparse"])
def test_torch_nn_modules_paths_hold_torch_names(path):
    import importlib

    ours = importlib.import_module(f"tinyattn.compat.nn.modules.{path}")
    theirs = importlib.import_module(f"torch.nn.modules.{path}")
    assert sorted(ours.__all__) == sorted(theirs.__all__)
    for name in theirs.__all__:
        assert getattr(ours, name) is getattr(ct.nn, name)


def test_compat_lazy_convolution_becomes_compat_conv_and_fractional_pooling_is_refused():
    layer = ct.nn.LazyConv1d(4, 3)
    layer(ct.randn(2, 3, 7))
    assert type(layer) is ct.nn.Conv1d and isinstance(layer.weight, ct.nn.Parameter)
    assert layer.weight.shape == (4, 3, 3)
    with pytest.raises(NotImplementedError, match="FractionalMaxPool2d .*MaxPool2d"):
        ct.nn.FractionalMaxPool2d(2)
    with pytest.raises(NotImplementedError, match="fractional_max_pool2d"):
        ct.nn.functional.fractional_max_pool2d(ct.randn(1, 1, 4, 4), 2)
