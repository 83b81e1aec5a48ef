"""fast.buffers: a kept block is handed out again only once nothing refers to it, and the results of compiled
layers and attention (``ta.compile``), whose large arrays come from kept blocks, stay intact."""

import numpy as np
import pytest

import tinyattn as ta
from tinyattn.fast import buffers

F32 = np.dtype(np.float32)


@pytest.fixture(autouse=True)
def _fresh_blocks():
    buffers.clear()
    yield
    buffers.clear()


def _address(array):
    return array.__array_interface__["data"][0]


def test_a_block_in_use_is_never_handed_out():
    a = buffers.empty(np, (256, 256), F32)
    view = a[3:]  # a view of a view still refers to the block
    del a
    b = buffers.empty(np, (256, 256), F32)
    assert not np.shares_memory(b, view)


def test_a_free_block_is_reused_for_sizes_down_to_half():
    a = buffers.empty(np, (512, 256), F32)
    address = _address(a)
    del a
    b = buffers.empty(np, (256, 256), np.dtype(np.float64))  # the same bytes, another shape and dtype
    assert _address(b) == address and b.shape == (256, 256) and b.flags.c_contiguous
    del b
    c = buffers.empty(np, (200, 256), F32)  # under half the block: a block of its own
    assert _address(c) != address
    assert buffers.kept_bytes() == 512 * 256 * 4 + 200 * 256 * 4


def test_among_blocks_of_one_size_a_free_one_is_found_and_no_other():
    arrays = [buffers.empty(np, (256, 256), F32) for _ in range(5)]
    address = _address(arrays[2])
    del arrays[2]
    again = buffers.empty(np, (256, 256), F32)
    assert _address(again) == address
    assert not any(np.shares_memory(again, array) for array in arrays)
    assert buffers.kept_bytes() == 5 * 256 * 256 * 4


def test_the_search_starts_after_the_block_handed_out_last():
    arrays = [buffers.empty(np, (256, 256), F32) for _ in range(4)]  # blocks 0, 1, 2, 3, in that order
    addresses = [_address(a) for a in arrays]
    del arrays[1:]  # 0 stays in use
    first = buffers.empty(np, (256, 256), F32)
    assert _address(first) == addresses[1]  # 0 passed over
    assert [_address(b) for b in buffers._KEPT.sizes[256 * 256 * 4]] == [addresses[i] for i in (2, 3, 0, 1)]
    second = buffers.empty(np, (256, 256), F32)
    assert _address(second) == addresses[2]  # the next one, 0 not looked at again
    assert not np.shares_memory(second, first) and not np.shares_memory(second, arrays[0])


def test_past_the_most_blocks_kept_the_free_ones_are_let_go():
    block = 256 * 256 * 4
    held = [buffers.empty(np, (256, 256), F32) for _ in range(buffers._MOST_KEPT)]
    assert buffers.kept_bytes() == buffers._MOST_KEPT * block
    del held[:10]
    larger = buffers.empty(np, (512, 256), F32)  # no free block is large enough: a new one, and the free ones go
    assert buffers.kept_bytes() == (buffers._MOST_KEPT - 10) * block + larger.nbytes
    assert not any(np.shares_memory(larger, array) for array in held)


def test_small_arrays_and_other_namespaces_are_plain():
    small = buffers.empty(np, (16, 16), F32)
    assert small.base is None and buffers.kept_bytes() == 0


def test_f_ordered_like_keeps_the_order():
    x = np.asfortranarray(np.ones((512, 256), dtype=np.float32))
    y = buffers.empty_like(np, x)
    assert y.shape == x.shape and y.flags.f_contiguous and not y.flags.c_contiguous


def test_layer_outputs_of_earlier_steps_stay_intact():
    """A result the caller keeps is never written over by a later step's arrays."""
    rng = np.random.default_rng(0)
    layer = ta.compile(ta.nn.TransformerEncoderLayer(128, 4, 512, dropout=0.0))
    xs = [ta.tensor(rng.standard_normal((4, 64, 128), dtype=np.float32)) for _ in range(3)]
    with ta.no_grad():
        outs = [layer(x) for x in xs]
        kept = [out.numpy().copy() for out in outs]
        again = [layer(x) for x in xs]
    for out, copy, other in zip(outs, kept, again):
        np.testing.assert_array_equal(out.numpy(), copy)
        np.testing.assert_array_equal(other.numpy(), copy)
    assert buffers.kept_bytes() > 0  # (the layer's arrays came from kept blocks)


@pytest.mark.parametrize("what", ["encoder, pre-norm", "encoder, post-norm", "sdpa"])
def test_gradients_of_earlier_steps_stay_intact(what):
    """Gradients the caller keeps (an input's and the parameters') are never written over by a later step's
    arrays, though the fused nodes' backward works in kept blocks (a pooled product's, the residual blocks' input
    gradient, attention's ``dQ``, ``dK``, ``dV``)."""
    rng = np.random.default_rng(1)
    ta.manual_seed(0)
    if what == "sdpa":
        shapes = [(8, 8, 128, 32)] * 3  # q, k, v (B, H, L, D)
        attention = ta.compile(ta.nn.functional.scaled_dot_product_attention)
    else:
        layer = ta.compile(ta.nn.TransformerEncoderLayer(256, 8, 1024, dropout=0.0,
                                                         norm_first=what.endswith("pre-norm")))
        shapes = [(8, 128, 256)]
    kept = []
    for _ in range(3):
        inputs = [ta.tensor(rng.standard_normal(shape, dtype=np.float32), requires_grad=True) for shape in shapes]
        if what == "sdpa":
            out = attention(*inputs, need_weights=False)[0]
        else:
            layer.zero_grad()  # (to None: the previous step's arrays stay the caller's)
            out = layer(*inputs)
        handed_out = buffers.kept_bytes()
        out.backward(ta.tensor(rng.standard_normal(out.shape, dtype=np.float32)))
        grads = [t.grad for t in inputs] + ([] if what == "sdpa" else [p.grad for p in layer.parameters()])
        kept.append((grads, [g.copy() for g in grads]))
    assert handed_out > 0 and buffers.kept_bytes() > 0  # (the case reaches fast.buffers)
    for grads, copies in kept:
        for grad, copy in zip(grads, copies):
            np.testing.assert_array_equal(grad, copy)
