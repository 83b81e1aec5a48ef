"""The table's first row for multi-head attention and the Transformer layers: a module whose calls are each
followed by a backward with ``create_graph=True`` runs its reference lines, with no fused node inside
(``fast.table.reference_lines``, ``router.why_not_reference_lines``), and goes back to its fused routes
after a call that no such backward followed.

The steps are gradient-penalty steps in float64: ``g = ∂L/∂x`` with ``create_graph``, then ``L + Σ g·u``
backpropagated to every parameter and to ``x``, with random upstream gradients. Every step's numbers equal
those of the same step with fast paths off, whichever route each call took."""

import numpy as np
import pytest
from graph_checks import node_types

import tinyattn as ta
import tinyattn.compat as torch
import tinyattn.nn as nn
from tinyattn.fast import router

FUSED = {"SelfAttentionBlock", "FeedForwardBlock", "InProjection", "PackedSelfAttention", "Attention", "Linear",
         "Normalize", "MaskedSoftmax", "SplitHeads", "MergeHeads"}
B, L, E, H = 2, 5, 8, 2


def _modules(kind):
    ta.manual_seed(0)
    if kind == "multi-head attention":
        module = nn.MultiHeadAttention(E, H)
        return module, lambda x: module(x, need_weights=False)[0]
    if kind == "encoder layer":
        module = nn.TransformerEncoderLayer(E, H, 16, dropout=0.0)
        return module, module
    module = nn.TransformerDecoderLayer(E, H, 16, dropout=0.0)
    memory = ta.tensor(np.random.default_rng(1).standard_normal((B, 3, E)))
    return module, lambda x: module(x, memory, tgt_is_causal=True, tgt_mask=nn.functional.causal_mask(L, L))


def _step(module, call, x, upstream, direction, create_graph):
    """One step; returns the output, the graph's node types and every gradient (parameters, then x)."""
    module.zero_grad()
    x.grad = None
    out = call(x)
    loss = (out * upstream).sum()
    if create_graph:
        (g,) = ta.autograd.grad(loss, x, create_graph=True)
        loss = loss + (g * direction).sum()
    loss.backward()
    return out.numpy(), node_types(out), [p.grad for p in module.parameters()] + [x.grad]


@pytest.mark.parametrize("kind", ["multi-head attention", "encoder layer", "decoder layer"])
def test_calls_after_a_create_graph_backward_run_the_reference_lines_and_equal_the_reference(kind):
    module, call = _modules(kind)
    module.double()
    rng = np.random.default_rng(2)
    x = ta.tensor(rng.standard_normal((B, L, E)), requires_grad=True)
    upstream, direction = (ta.tensor(rng.standard_normal((B, L, E))) for _ in range(2))
    plan = [True, True, True, False, False, True]  # whether each step differentiates its gradient again
    routes = []
    for create_graph in plan:
        out, nodes, grads = _step(module, call, x, upstream, direction, create_graph)
        with ta.use_fast_paths(False):
            out_ref, nodes_ref, grads_ref = _step(module, call, x, upstream, direction, create_graph)
        assert not nodes_ref & FUSED
        np.testing.assert_allclose(out, out_ref, rtol=1e-12, atol=1e-12)
        for a, b in zip(grads, grads_ref):
            np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)
        routes.append("fused" if nodes & FUSED else "reference lines")
    # a call after a create_graph backward: the reference lines; after a call no such backward followed: fused
    assert routes == ["fused", "reference lines", "reference lines", "reference lines", "fused", "fused"]


def test_the_reason_reads_the_create_graph_walks_and_notes_calls_that_record_a_graph():
    layer = nn.TransformerEncoderLayer(E, H, 16, dropout=0.0)
    x = ta.randn(B, L, E, requires_grad=True)
    assert router.why_not_reference_lines(layer, x) == "its first call that records a graph"
    assert router.why_not_reference_lines(layer, x) == "no backward with create_graph=True ran since its previous call"
    (g,) = ta.autograd.grad((layer(x) ** 2).sum(), x, create_graph=True)
    with ta.no_grad():  # a call that records nothing neither takes the route nor counts as a call
        assert router.why_not_reference_lines(layer, x) == "no graph is recorded"
        assert type(layer(x)).__name__ == "Tensor"
    assert router.why_not_reference_lines(layer, x) is None
    assert router.why_not_reference_lines(layer, x) == "no backward with create_graph=True ran since its previous call"
    g.sum().backward()  # a plain backward is not a create_graph walk
    assert router.why_not_reference_lines(layer, x) == "no backward with create_graph=True ran since its previous call"


def test_a_compat_layer_takes_the_native_reference_lines_on_its_native_arguments():
    """compat's layers run the native class's rows: the reference lines are the native ``forward``."""
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(E, H, 16, dropout=0.0, batch_first=True).double()
    x = torch.randn(B, L, E, dtype=torch.float64, requires_grad=True)
    mask = torch.zeros(B, L, dtype=torch.bool)
    mask[0, -2:] = True  # the padding of the first sequence
    grads = []
    for fast in (True, True, False):
        with ta.use_fast_paths(fast):
            layer.zero_grad()
            out = layer(x, src_key_padding_mask=mask)
            (g,) = torch.autograd.grad((out ** 2).sum(), x, create_graph=True)
            (g ** 2).sum().backward()
            grads.append([p.grad.numpy().copy() for p in layer.parameters()])
    for fused_or_lines in grads[:2]:
        for a, b in zip(fused_or_lines, grads[2]):
            np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


def test_a_new_module_at_a_dead_ones_id_is_not_taken_for_it():
    import weakref

    from tinyattn.tensor import create_graph_walks

    class Gone:
        pass

    layer = nn.TransformerEncoderLayer(E, H, 16, dropout=0.0)
    gone = Gone()
    dead = weakref.ref(gone)
    del gone  # a module noted before, now gone, whose id the new layer happens to have
    router._WALKS_AT_LAST_CALL[id(layer)] = (dead, create_graph_walks() - 1)  # walks moved since
    x = ta.randn(B, L, E, requires_grad=True)
    assert router.why_not_reference_lines(layer, x) == "its first call that records a graph"
    assert {"SelfAttentionBlock", "FeedForwardBlock"} <= node_types(layer(x))  # its fused blocks, not the lines
