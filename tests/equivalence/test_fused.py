"""The speed paths, each against the slow form it replaces.

- compiled ``F.linear`` (``ta.compile``) is one fused node (batch folded into rows): it must agree with
  ``x @ W.T + b``;
- compiled ``layer_norm`` is one fused node: it must agree with the composed formula, the partial-affine cases
  too;
- the graph walk sums a gradient in place only in arrays it made itself: upstream gradients are
  never written to, no two ``.grad`` arrays share memory, and a leaf's ``.grad`` never shares memory with
  an array a node handed down;
- modules reach their parameters by plain attribute lookup, and the cached parameter list
  follows every registration, deletion and replacement, in the module or in a child.
"""

import numpy as np
import pytest
from graph_checks import node_types
from hypothesis import given
from hypothesis import strategies as st

import tinyattn as ta
import tinyattn.nn as nn
import tinyattn.nn.functional as F
from tinyattn import testing as tt
from tinyattn.fast import Attention, FeedForwardBlock, Linear

DEVICES = ["cpu", "strict", pytest.param("cuda", marks=pytest.mark.cuda)]  # cuda: skipped without a GPU
linear, layer_norm = ta.compile(F.linear), ta.compile(F.layer_norm)  # the fused forms


def _run(fn, arrays, needs, upstream, device):
    """``fn``'s output and the gradients of the inputs that need one, under ``upstream``."""
    inputs = [None if a is None else ta.tensor(a, device=device, requires_grad=n) for a, n in zip(arrays, needs)]
    out = fn(*inputs)
    out.backward(ta.tensor(upstream, device=device))
    return [out.numpy()] + [None if t is None or t.grad is None else ta.backend.to_numpy(t.grad) for t in inputs]


def _assert_same(fused, composed):
    for a, b in zip(fused, composed):
        assert (a is None) == (b is None)
        if a is not None:
            np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


# ----------------------------------------------------------------------------- linear


@st.composite
def _linear_case(draw):
    batch = draw(tt.shapes(min_dims=0, max_dims=3, min_side=0, max_side=3))
    in_features, out_features = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    arrays = [draw(tt.arrays(batch + (in_features,))), draw(tt.arrays((out_features, in_features)))]
    arrays.append(draw(tt.arrays((out_features,))) if draw(st.booleans()) else None)
    needs = draw(st.lists(st.booleans(), min_size=3, max_size=3).filter(any))
    return arrays, needs, batch + (out_features,)


@pytest.mark.parametrize("device", DEVICES)
@given(case=_linear_case(), seed=st.integers(0, 2**32 - 1))
def test_fused_linear_matches_composed(device, case, seed):
    arrays, needs, out_shape = case
    if not any(n for a, n in zip(arrays, needs) if a is not None):
        needs = [True] * 3
    upstream = np.random.default_rng(seed).standard_normal(out_shape)
    fused = _run(linear, arrays, needs, upstream, device)

    def composed(x, w, b):
        y = x @ w.T
        return y if b is None else y + b

    _assert_same(fused, _run(composed, arrays, needs, upstream, device))


def test_fused_linear_is_one_node_and_keeps_float32():
    x, w, b = ta.randn(2, 3, 4, requires_grad=True), ta.randn(5, 4, requires_grad=True), ta.randn(5, requires_grad=True)
    y = linear(x, w, b)
    assert type(y._ctx).__name__ == "Linear" and y._ctx.parents == (x, w, b)
    y.backward(ta.randn(2, 3, 5))
    assert y.dtype == x.grad.dtype == w.grad.dtype == b.grad.dtype == np.float32


def test_linear_refuses_a_bias_of_another_dtype_as_pytorch_does():
    import torch

    x, w, b = ta.ones(2, 3), ta.ones(4, 3), ta.tensor(np.ones(4))  # float32, float32, float64
    with pytest.raises(RuntimeError):
        torch.nn.functional.linear(torch.ones(2, 3), torch.ones(4, 3), torch.ones(4, dtype=torch.float64))
    for function in (linear, F.linear):
        with pytest.raises(RuntimeError, match="bias is float64"):
            function(x, w, b)


# ----------------------------------------------------------------------------- layer norm


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("affine", ["both", "weight", "bias", "none"])
@given(data=st.data(), seed=st.integers(0, 2**32 - 1))
def test_layer_norm_matches_composed(device, affine, data, seed):
    shape = data.draw(tt.shapes(min_dims=1, max_dims=3, min_side=2, max_side=4))
    ndim = data.draw(st.integers(1, len(shape)))
    normalized = shape[len(shape) - ndim:]
    arrays = [data.draw(tt.distinct_arrays(shape)),
              data.draw(tt.arrays(normalized)) if affine in ("both", "weight") else None,
              data.draw(tt.arrays(normalized)) if affine in ("both", "bias") else None]
    upstream = np.random.default_rng(seed).standard_normal(shape)

    def composed(x, w, b):
        axes = tuple(range(x.ndim - ndim, x.ndim))
        centered = x - x.mean(axes, keepdim=True)
        y = centered / ((centered * centered).mean(axes, keepdim=True) + 1e-5).sqrt()
        y = y if w is None else y * w
        return y if b is None else y + b

    fused = _run(lambda x, w, b: layer_norm(x, normalized, w, b), arrays, [True] * 3, upstream, device)
    _assert_same(fused, _run(composed, arrays, [True] * 3, upstream, device))


# ----------------------------------------------------------------------------- feed-forward block


@st.composite
def _feed_forward_case(draw):
    batch = draw(tt.shapes(min_dims=1, max_dims=2, min_side=1, max_side=3))
    E, hidden = draw(st.integers(1, 4)), draw(st.integers(1, 5))
    # inputs: x, norm weight, norm bias, w1, b1, w2, b2
    arrays = [draw(tt.arrays(batch + (E,))), draw(tt.arrays((E,))), draw(tt.arrays((E,))),
              draw(tt.arrays((hidden, E))), draw(tt.arrays((hidden,))), draw(tt.arrays((E, hidden))),
              draw(tt.arrays((E,)))]
    needs = draw(st.lists(st.booleans(), min_size=7, max_size=7).filter(any))
    return arrays, needs, batch + (E,), draw(st.booleans())


def _feed_forward_composed(norm_first):
    def composed(x, norm_weight, norm_bias, w1, b1, w2, b2):
        def feed_forward(h):
            return F.linear(F.relu(F.linear(h, w1, b1)), w2, b2)

        norm = (lambda h: F.layer_norm(h, (h.shape[-1],), norm_weight, norm_bias))
        return x + feed_forward(norm(x)) if norm_first else norm(x + feed_forward(x))

    return composed


@pytest.mark.parametrize("device", DEVICES)
@given(case=_feed_forward_case(), seed=st.integers(0, 2**32 - 1))
def test_feed_forward_block_matches_composed(device, case, seed):
    """Any batch shape, pre- and post-norm, any subset of the inputs needing a gradient."""
    arrays, needs, shape, norm_first = case
    upstream = np.random.default_rng(seed).standard_normal(shape)
    fused = _run(lambda *t: FeedForwardBlock.apply(*t, norm_first=norm_first, eps=1e-5), arrays, needs, upstream,
                 device)
    _assert_same(fused, _run(_feed_forward_composed(norm_first), arrays, needs, upstream, device))


@pytest.mark.parametrize("layer_type", ["encoder", "decoder"])
@pytest.mark.parametrize("norm_first", [True, False])
def test_transformer_layers_use_the_fused_blocks_only_when_no_dropout_acts(layer_type, norm_first):
    ta.manual_seed(0)
    cls = nn.TransformerEncoderLayer if layer_type == "encoder" else nn.TransformerDecoderLayer
    layer = ta.compile(cls(8, 2, dim_feedforward=12, dropout=0.3, norm_first=norm_first).double().eval())
    x = ta.tensor(np.random.default_rng(0).standard_normal((2, 5, 8)), requires_grad=True)
    memory = ta.tensor(np.random.default_rng(1).standard_normal((2, 4, 8)))
    args = (x,) if layer_type == "encoder" else (x, memory)
    upstream = np.random.default_rng(2).standard_normal((2, 5, 8))

    def run():
        layer.zero_grad()
        x.grad = None
        y = layer(*args)
        y.backward(upstream)
        return y, [y.numpy(), x.grad.copy()] + [p.grad.copy() for p in layer.parameters()]

    y, fused = run()
    assert {"SelfAttentionBlock", "FeedForwardBlock"} <= node_types(y)  # eval mode: dropout is off
    layer.activation = lambda t: t.relu()  # the same function, not F.relu: the feed-forward block is composed
    y, composed = run()
    assert "SelfAttentionBlock" in node_types(y) and "FeedForwardBlock" not in node_types(y)
    for a, b in zip(fused, composed):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)
    layer.activation = F.relu
    layer.train()  # dropout acts: composed, so that the dropout masks stay where PyTorch puts them
    y = layer(*args)
    assert not {"SelfAttentionBlock", "FeedForwardBlock"} & node_types(y)


# ----------------------------------------------------------------------------- in-place accumulation


def test_summed_gradients_never_write_to_upstream_or_alias():
    x = ta.tensor(np.array([1.0, 2.0]), requires_grad=True)
    w = ta.tensor(np.array([3.0, 4.0]), requires_grad=True)
    h = x * 1.0  # a non-leaf used four times: three in-place additions into an array the walk made
    y = h + h + h * w + h.reshape(2)
    upstream = np.array([1.0, -1.0])
    kept = upstream.copy()
    y.backward(upstream)
    np.testing.assert_array_equal(upstream, kept)
    np.testing.assert_allclose(x.grad, (3.0 + w.numpy()) * upstream)
    np.testing.assert_allclose(w.grad, h.numpy() * upstream)
    assert not np.shares_memory(x.grad, w.grad) and not np.shares_memory(x.grad, upstream)


class _SameArrayTwice(ta.Function):
    """Hands one array it made to both inputs: the second leaf must not share the first's."""

    def forward(self, a, b):
        return a + b

    def backward(self, grad):
        made = grad * 1.0
        return made, made


class _ArrayAndItsView(ta.Function):
    """Hands an array it made to a leaf and a view of it to a node still waiting: the leaf may not
    sum a later gradient into that array in place."""

    def forward(self, leaf, other):
        return leaf + other

    def backward(self, grad):
        made = grad * 1.0
        return made, made.reshape(made.shape)


def test_leaves_take_gradients_without_sharing_them():
    a = ta.tensor(np.array([1.0, 2.0]), requires_grad=True)
    b = ta.tensor(np.array([3.0, 4.0]), requires_grad=True)
    _SameArrayTwice.apply(a, b).backward(np.array([1.0, -1.0]))
    np.testing.assert_array_equal(a.grad, [1.0, -1.0])
    np.testing.assert_array_equal(b.grad, [1.0, -1.0])
    assert not np.shares_memory(a.grad, b.grad)

    w = ta.compile(nn.Linear(2, 3))  # fast.Linear's gradients: each leaf's its own
    w(ta.ones(4, 2)).backward(np.ones((4, 3)))
    assert not np.shares_memory(w.weight.grad, w.bias.grad)


class _ReturnsAnArrayItKeeps(ta.Function):
    """Returns, as the gradient, an array it also keeps (as a user-written node might)."""

    def forward(self, x):
        self.kept = np.full(x.shape, 7.0)
        return x * 1.0

    def backward(self, grad):
        return (self.kept,)


def test_a_gradient_that_someone_else_holds_is_copied_and_never_written_to():
    x = ta.tensor(np.array([1.0, 2.0]), requires_grad=True)
    y = _ReturnsAnArrayItKeeps.apply(x)
    node = y._ctx
    kept = node.kept
    y.backward(np.ones(2), retain_graph=True)
    assert x.grad is not kept and not np.shares_memory(x.grad, kept)
    y.backward(np.ones(2), retain_graph=True)  # sums into x.grad in place: must not write into the node's array
    y.backward(np.ones(2))
    np.testing.assert_array_equal(kept, [7.0, 7.0])
    np.testing.assert_array_equal(x.grad, [21.0, 21.0])


def test_a_leafs_gradient_is_never_written_while_a_view_of_it_is_pending():
    x = ta.tensor(np.array([1.0, 2.0]), requires_grad=True)
    h = x * 3.0  # walked last: it waits for the view
    z = x * 5.0  # walked after the function below, so x's second gradient arrives while the view waits
    y = _ArrayAndItsView.apply(x, h) * 2.0 + z
    y.backward(np.array([1.0, 10.0]))
    # dy/dx through the first input: 2; through h: 2·3; through z: 5
    np.testing.assert_allclose(x.grad, (2.0 + 6.0 + 5.0) * np.array([1.0, 10.0]))


class _GivesAView(ta.Function):
    """Hands its input's gradient down as a view, made by ``view_of(an array it made)``."""

    def forward(self, x, *, view_of):
        self.view_of = view_of
        return x * 1.0

    def backward(self, grad):
        return (self.view_of(grad * 2.0),)


def _leaf_gradient_through(view_of, shape=(4, 6)):
    x = ta.tensor(np.ones(shape), requires_grad=True)
    _GivesAView.apply(x, view_of=view_of).backward(np.ones(shape))
    return x.grad


def test_a_leafs_gradient_is_its_own_array_whatever_view_a_node_hands_down():
    from tinyattn.fast import buffers

    handed = []

    def kept_by(view_of):
        return lambda g: handed.append(view_of(g)) or handed[-1]

    views = {"a reshape": lambda g: g.reshape(g.shape), "part of an array": lambda g: np.concatenate([g, g])[:4],
             "not C-ordered": lambda g: np.ascontiguousarray(g.T).T, "read-only": lambda g: np.broadcast_to(g, g.shape)}
    for name, view_of in views.items():
        grad = _leaf_gradient_through(kept_by(view_of))
        assert not np.shares_memory(grad, handed[-1]) and grad.flags.writeable, name
        np.testing.assert_array_equal(grad, np.full((4, 6), 2.0))

    def into_a_kept_block(g):
        out = buffers.empty(np, g.shape, g.dtype)
        out[...] = g
        return out

    buffers.clear()  # (whatever earlier tests left in this thread's blocks)
    shape = (64, 512)  # 256 KiB: from fast.buffers
    grad = _leaf_gradient_through(into_a_kept_block, shape)
    assert grad.base is None and not buffers.keeps(grad)  # a copy: the block is free again
    np.testing.assert_array_equal(grad, np.full(shape, 2.0))
    other = buffers.empty(np, shape, np.dtype(np.float64))  # the block, handed out again
    assert buffers.keeps(other.base if other.base is not None else other) and not np.shares_memory(other, grad)
    buffers.clear()


def test_gradients_accumulate_across_backward_calls():
    w = ta.compile(nn.Linear(2, 2))
    x = ta.ones(3, 2)
    w(x).backward(np.ones((3, 2)))
    first = w.weight.grad.copy()
    w(x).backward(np.ones((3, 2)))
    np.testing.assert_allclose(w.weight.grad, 2 * first)


def test_a_plain_backward_after_create_graph_never_writes_to_the_graphs_gradient():
    x = ta.tensor(np.array([1.0, 2.0]), requires_grad=True)
    (x * x).sum().backward(create_graph=True)
    graph_grad = x.grad  # the array of a tensor with its own graph
    kept = graph_grad.copy()
    (x * 3.0).sum().backward()
    np.testing.assert_array_equal(graph_grad, kept)  # summed out of place
    np.testing.assert_allclose(x.grad, kept + 3.0)


def test_summed_gradients_of_a_0d_tensor_used_many_times():
    x = ta.tensor(np.array([1.0, 2.0]), requires_grad=True)
    s = x.sum() * 1.0  # 0-d: NumPy hands back scalars, which cannot be added to in place
    (s * 2.0 + s * 3.0 + s * 4.0 + s).backward()
    np.testing.assert_allclose(x.grad, [10.0, 10.0])


def test_graph_walk_follows_creation_order_across_branches():
    x = ta.tensor(np.array([0.5, 1.5]), requires_grad=True)
    w1, w2 = np.array([2.0, -1.0]), np.array([0.5, 3.0])  # weighted sums: an element mixed up would show
    a = x.exp()
    b = (a * x * w1).sum()  # created after a: walks before it
    c = (a * w2).sum()
    (b + c).backward()
    expected = np.exp(x.numpy()) * (x.numpy() + 1) * w1 + np.exp(x.numpy()) * w2
    np.testing.assert_allclose(x.grad, expected)


# ----------------------------------------------------------------------------- modules


def test_parameters_are_plain_attributes_and_the_cache_follows_registration():
    model = nn.Sequential(nn.Linear(2, 3), nn.Linear(3, 1))
    first = model[0]
    assert "weight" in vars(first) and first.weight is first._parameters["weight"]
    assert len(list(model.parameters())) == 4

    first.bias = None  # replacement in a child
    assert first.bias is None and len(list(model.parameters())) == 3
    first.extra = nn.Parameter(ta.zeros(2))  # registration in a child
    assert [n for n, _ in model.named_parameters()][-3:] == ["0.extra", "1.weight", "1.bias"]
    del first.extra
    assert not hasattr(first, "extra") and len(list(model.parameters())) == 3
    model.append(nn.Linear(1, 1))
    assert len(list(model.parameters())) == 5
    model.zero_grad()
    assert all(p.grad is None for p in model.parameters())


def test_deep_copies_get_their_own_parameters():
    import copy

    layer = nn.Linear(2, 2)
    list(layer.parameters())  # fills the cache before the copy
    twin = copy.deepcopy(layer)
    assert twin.weight is not layer.weight
    assert [id(p) for p in twin.parameters()] == [id(twin.weight), id(twin.bias)]


# ----------------------------------------------------------------------------- empty inputs


@pytest.mark.parametrize("shape", [(0, 3, 4), (2, 0, 4)])
def test_fused_self_attention_and_layers_take_empty_batches(shape):
    mha = ta.compile(nn.MultiHeadAttention(4, 2))
    x = ta.randn(*shape, requires_grad=True)
    out, _ = mha(x, need_weights=False)  # the fused path
    assert out.shape == shape and "PackedSelfAttention" in node_types(out)
    out.backward(np.ones(shape, dtype=np.float32))
    assert x.grad.shape == shape and mha.q_proj.weight.grad.shape == (4, 4)
    out = ta.compile(nn.TransformerEncoderLayer(4, 2, 8).eval())(x)
    assert out.shape == shape and "FeedForwardBlock" in node_types(out)


def test_attention_with_no_keys_gives_zeros():
    q, kv = ta.randn(2, 3, 4, requires_grad=True), ta.randn(2, 0, 4)
    for function in (ta.compile(F.scaled_dot_product_attention), F.scaled_dot_product_attention):
        for need_weights in (True, False):
            out, _ = function(q, kv, kv, need_weights=need_weights)
            np.testing.assert_array_equal(out.numpy(), np.zeros((2, 3, 4), dtype=np.float32))


# ----------------------------------------------------------------------------- review fixes


@pytest.mark.parametrize("need_weights", [True, False])
@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_a_nan_or_inf_score_stays_in_its_own_row(need_weights, bad):
    """The softmax's shift is the whole array's maximum: a NaN or +inf there must not spread to the
    other rows (PyTorch keeps it to its row)."""
    import torch

    rng = np.random.default_rng(0)
    q, k = rng.standard_normal((3, 4, 8)), rng.standard_normal((3, 5, 8))
    q[0, 0, 0] = bad
    expected = torch.nn.functional.scaled_dot_product_attention(*(torch.tensor(a) for a in (q, k, k))).numpy()
    for function in (ta.compile(F.scaled_dot_product_attention), F.scaled_dot_product_attention):
        with np.errstate(invalid="ignore"):  # inf - inf in the bad row: NaN there, as in PyTorch
            out, _ = function(ta.tensor(q), ta.tensor(k), ta.tensor(k), need_weights=need_weights)
        np.testing.assert_array_equal(np.isnan(out.numpy()), np.isnan(expected))
        assert np.isfinite(out.numpy()[1:]).all()
        np.testing.assert_allclose(out.numpy()[1:], expected[1:], rtol=1e-10, atol=1e-12)


def test_a_numpy_dropout_probability_keeps_float32():
    q = ta.randn(2, 3, 4)
    for function in (ta.compile(F.scaled_dot_product_attention), F.scaled_dot_product_attention):
        out, _ = function(q, q, q, dropout_p=np.float64(0.1), need_weights=False)
        assert out.dtype == np.float32
    mha = nn.MultiHeadAttention(8, 2, dropout=np.float64(0.1))
    for module in (ta.compile(mha), mha):
        assert module(ta.randn(2, 3, 8), need_weights=False)[0].dtype == np.float32


class _Doubled(nn.Linear):
    def forward(self, input):
        return super().forward(input) * 2.0


def test_replaced_submodules_keep_their_own_forward_in_a_compiled_model():
    ta.manual_seed(0)
    mha = nn.MultiHeadAttention(8, 2).double()
    x = ta.tensor(np.random.default_rng(0).standard_normal((2, 3, 8)))
    mha.q_proj = _Doubled(8, 8).double()
    compiled = ta.compile(mha)
    assert type(compiled.q_proj) is _Doubled
    out_fast, _ = compiled(x, need_weights=False)
    out_reference, _ = mha(x, need_weights=False)
    np.testing.assert_allclose(out_fast.numpy(), out_reference.numpy(), rtol=1e-12, atol=1e-12)

    layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0).double()
    plain = ta.compile(layer)(x).numpy()
    layer.linear2 = _Doubled(16, 8).double()
    layer.linear2.load_state_dict({"weight": layer.linear1.weight.numpy().T.copy(), "bias": np.zeros(8)})
    compiled = ta.compile(layer)
    changed = compiled(x)
    assert "SelfAttentionBlock" in node_types(changed) and "FeedForwardBlock" not in node_types(changed)
    np.testing.assert_allclose(changed.numpy(), layer(x).numpy(), rtol=1e-12, atol=1e-12)
    assert not np.allclose(changed.numpy(), plain)


def test_an_in_place_change_to_a_layer_norm_output_without_weight_is_refused():
    """Without an affine weight, ``fast.Normalize``'s output is the x̂ its backward reads: writing to it in
    place makes backward refuse instead of using the changed values."""
    x = ta.randn(3, 4, requires_grad=True)
    y = layer_norm(x, (4,))
    assert type(y._ctx).__name__ == "Normalize"
    with ta.no_grad():
        y.mul_(2.0)
    with pytest.raises(RuntimeError, match="Normalize saved for its backward was modified"):
        y.backward(np.ones((3, 4), np.float32))


def test_each_node_watches_the_arrays_its_backward_reads_and_no_other():
    """``saved_inputs`` and ``saves_output`` as the nodes declare them: written in place after the forward, ``x``
    or ``W`` makes ``fast.Linear``'s backward refuse, while ``b`` (never read) leaves the gradients as they were;
    and ``fast.Attention`` reads its output."""
    rng = np.random.default_rng(3)
    x_np, w_np, b_np, g_np = (rng.standard_normal(s) for s in [(2, 3, 4), (6, 4), (6,), (2, 3, 6)])

    def linear_grads(written=None):
        x, w, b = (ta.tensor(a, requires_grad=True) for a in (x_np, w_np, b_np))
        y = Linear.apply(x, w, b)
        if written is not None:
            with ta.no_grad():
                {"x": x, "weight": w, "bias": b}[written].add_(1.0)
        y.backward(ta.tensor(g_np))
        return [np.array(t.grad) for t in (x, w, b)]

    for written in ("x", "weight"):
        with pytest.raises(RuntimeError, match="Linear saved for its backward was modified"):
            linear_grads(written)
    for got, expected in zip(linear_grads("bias"), linear_grads()):
        np.testing.assert_array_equal(got, expected)

    q, k, v = (ta.tensor(rng.standard_normal((2, 3, 3)), requires_grad=True) for _ in range(3))
    out = Attention.apply(q, k, v, allowed=None, is_causal=False, scale=0.5, dropout_p=0.0)
    with ta.no_grad():
        out.mul_(2.0)
    with pytest.raises(RuntimeError, match="Attention saved for its backward was modified"):
        out.backward(ta.tensor(g_np[..., :3]))
