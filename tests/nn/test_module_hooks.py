"""Module hooks (``register_forward_pre_hook``, ``register_forward_hook``, ``register_full_backward_hook``,
``register_full_backward_pre_hook``): what each receives, what a replacement does, removal and order, against
PyTorch's where there is a number to compare, and on compiled models (``ta.compile``), whose fused forms give way
to a hooked part."""

import copy
import io

import numpy as np
import pytest
import torch

import tinyattn as ta
import tinyattn.nn as nn
from tinyattn.fast import router

rng = np.random.default_rng(0)


def randn(*shape, requires_grad=False):
    return ta.tensor(rng.standard_normal(shape), requires_grad=requires_grad)  # float64


def both_linears(in_features=3, out_features=2):
    """An ``nn.Linear`` in float64 and PyTorch's with the same weights (the layouts agree)."""
    theirs = torch.nn.Linear(in_features, out_features).double()
    ours = nn.Linear(in_features, out_features).double()
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
    return ours, theirs


def as_numpy(values):
    return [None if v is None else (v.detach().numpy() if isinstance(v, torch.Tensor) else v.numpy()) for v in values]


def assert_all_close(ours, theirs):
    assert len(ours) == len(theirs)
    for a, b in zip(as_numpy(ours), as_numpy(theirs)):
        assert (a is None) == (b is None)
        if a is not None:
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-13)


# ----------------------------------------------------------------------------- forward hooks


def test_forward_pre_hook_sees_the_arguments_and_may_replace_them():
    linear = nn.Linear(3, 2).double()
    x, other = randn(4, 3), randn(4, 3)
    seen = []

    def record(module, args):
        seen.append((module, args))

    with linear.register_forward_pre_hook(record):
        linear(x)
    assert seen == [(linear, (x,))]
    with linear.register_forward_pre_hook(lambda module, args: other):  # one value: wrapped in a tuple
        np.testing.assert_array_equal(linear(x).numpy(), linear.forward(other).numpy())
    with linear.register_forward_pre_hook(lambda module, args: (other,)):
        np.testing.assert_array_equal(linear(x).numpy(), linear.forward(other).numpy())
    np.testing.assert_array_equal(linear(x).numpy(), linear.forward(x).numpy())  # the hooks are off again


def test_forward_pre_hook_with_kwargs_replaces_args_and_kwargs():
    attention = nn.MultiHeadAttention(4, 2).double()
    query = randn(2, 3, 4)
    seen = []

    def causal(module, args, kwargs):
        seen.append(dict(kwargs))
        return args, {**kwargs, "is_causal": True}

    attention.register_forward_pre_hook(causal, with_kwargs=True)
    output, weights = attention(query, need_weights=True)
    assert seen == [{"need_weights": True}]
    assert np.all(np.triu(weights.numpy(), k=1) == 0)  # keys after each query get no weight
    attention.register_forward_pre_hook(lambda module, args, kwargs: args, with_kwargs=True)
    with pytest.raises(RuntimeError, match=r"forward pre-hook .* must return None or a tuple \(new_args, new_kwargs\)"):
        attention(query)


def test_forward_hook_sees_args_and_output_and_may_replace_the_output():
    linear = nn.Linear(3, 2).double()
    x = randn(4, 3)
    seen = []
    linear.register_forward_hook(lambda module, args, output: seen.append((module, args, output)))
    linear.register_forward_hook(lambda module, args, output: output * 2)
    y = linear(x)
    (module, args, output), = seen
    assert module is linear and args == (x,)
    np.testing.assert_array_equal(y.numpy(), 2 * output.numpy())


def test_forward_hook_with_kwargs_and_always_call():
    attention = nn.MultiHeadAttention(4, 2).double()
    query = randn(2, 3, 4)
    seen = []
    attention.register_forward_hook(lambda module, args, kwargs, output: seen.append(kwargs), with_kwargs=True)
    attention(query, need_weights=False)
    assert seen == [{"need_weights": False}]

    calls = []
    attention.register_forward_hook(lambda module, args, output: calls.append(output), always_call=True)
    with pytest.raises(ValueError):
        attention(randn(2, 3, 5))  # not embed_dim wide: forward raises, the always_call hook still runs
    assert calls == [None]


def test_remove_prepend_and_the_handle_as_a_context_manager():
    linear = nn.Linear(2, 2)
    x = ta.randn(1, 2)
    order = []
    first = linear.register_forward_hook(lambda *_: order.append("first"))
    linear.register_forward_hook(lambda *_: order.append("second"))
    linear.register_forward_hook(lambda *_: order.append("prepended"), prepend=True)
    linear.register_forward_pre_hook(lambda *_: order.append("pre"))
    linear.register_forward_pre_hook(lambda *_: order.append("pre, prepended"), prepend=True)
    linear(x)
    assert order == ["pre, prepended", "pre", "prepended", "first", "second"]
    order.clear()
    first.remove()
    first.remove()  # a second remove does nothing
    linear(x)
    assert order == ["pre, prepended", "pre", "prepended", "second"]

    plain = nn.Linear(2, 2)
    with plain.register_forward_hook(lambda *_: order.append("inside")) as handle:
        assert plain._has_hooks and handle.id in plain._forward_hooks
    assert not plain._has_hooks and not plain._forward_hooks
    order.clear()
    plain(x)
    assert order == []


def test_a_module_without_hooks_keeps_no_tables_of_its_own():
    linear = nn.Linear(2, 2)
    assert "_forward_hooks" not in linear.__dict__ and not linear._has_hooks
    with pytest.raises(TypeError, match="a hook must be callable, got a int"):
        linear.register_forward_hook(3)


def test_state_dict_repr_load_state_dict_and_deepcopy_with_hooks():
    layer = nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0)
    calls = []
    layer.self_attn.register_forward_hook(lambda module, args, output: calls.append(module))
    layer.register_full_backward_hook(lambda module, grad_input, grad_output: None)
    plain = nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0)
    assert repr(layer) == repr(plain)
    assert list(layer.state_dict()) == list(plain.state_dict())
    plain.load_state_dict(layer.state_dict())
    layer.load_state_dict(plain.state_dict())

    copied = copy.deepcopy(layer)  # as PyTorch's deepcopy, the copy has the hooks too
    copied(ta.randn(2, 3, 8))
    assert calls == [copied.self_attn]
    encoder = nn.TransformerEncoder(layer, 2)  # copies its layer
    encoder(ta.randn(2, 3, 8))
    assert calls[1:] == [encoder.layers[0].self_attn, encoder.layers[1].self_attn]
    assert all(m._has_hooks for m in (encoder.layers[0], encoder.layers[1].self_attn))


# ----------------------------------------------------------------------------- hooks on compiled models


@pytest.mark.parametrize("training", [True, False], ids=["train", "eval"])
def test_a_hooked_self_attn_inside_a_compiled_encoder_layer_fires(training):
    """A hook registered on the model after ``ta.compile`` fires in the compiled copy too (they share their hook
    tables): the fused block gives way to the hooked part, and comes back once the hook is removed."""
    ta.manual_seed(0)
    layer = nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0).double().train(training)
    compiled = ta.compile(layer)
    x = randn(2, 5, 8)
    seen = []
    handle = layer.self_attn.register_forward_hook(lambda module, args, output: seen.append(output[0].numpy()))
    fast = compiled(x)
    reference = layer(x)
    assert len(seen) == 2
    np.testing.assert_allclose(seen[0], seen[1], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(fast.numpy(), reference.numpy(), rtol=1e-12, atol=1e-12)
    text = ta.explain(compiled, x, file=io.StringIO())
    assert "self-attention residual: reference (self_attn has a forward hook)" in text
    assert len(seen) == 3  # (explain runs the layer once)
    handle.remove()  # the fused block runs again
    assert "self-attention residual: fast.SelfAttentionBlock" in ta.explain(compiled, x, file=io.StringIO())
    compiled(x)
    assert len(seen) == 3


@pytest.mark.parametrize(("owner", "part", "reason"), [
    ("layer", "self_attn.q_proj", "self_attn.q_proj has a forward hook"),
    ("layer", "norm1", "norm1 has a forward hook"),
    ("layer", "linear1", "feed-forward residual: reference (linear1 has a forward hook)"),
    ("layer", "norm2", "feed-forward residual: reference (norm2 has a forward hook)"),
    ("attention", "q_proj", "reference (q_proj has a forward hook)"),
])
def test_every_fused_route_gives_way_to_a_hooked_part(owner, part, reason):
    ta.manual_seed(0)
    layer = nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0).double().eval()
    module = layer if owner == "layer" else layer.self_attn
    compiled = ta.compile(module)
    args, kwargs = (randn(2, 5, 8),), ({} if owner == "layer" else {"need_weights": False})
    hooked = _submodule(compiled, part)  # (the compiled copy's part: its hook fires in the original too)
    calls = []
    hooked.register_forward_hook(lambda *_: calls.append(1))
    fast = compiled(*args, **kwargs)
    reference = module(*args, **kwargs)
    assert len(calls) == 2
    fast, reference = (fast[0], reference[0]) if isinstance(fast, tuple) else (fast, reference)
    np.testing.assert_allclose(fast.numpy(), reference.numpy(), rtol=1e-12, atol=1e-12)
    assert reason in ta.explain(compiled, *args, file=io.StringIO(), **kwargs)


def _submodule(module, dotted):
    for name in dotted.split("."):
        module = module._modules[name]
    return module


def test_the_whole_stack_route_gives_way_to_a_hooked_layer():
    ta.manual_seed(0)
    layer = nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0)
    encoder = nn.TransformerEncoder(layer, 2).double().eval()
    compiled = ta.compile(encoder)
    x, mask = randn(2, 4, 8), nn.functional.padding_mask([4, 2], 4)
    inputs = []
    encoder.layers[1].register_forward_pre_hook(lambda module, args: inputs.append(args[0].numpy()))
    fast = compiled(x, mask=mask)
    reference = encoder(x, mask=mask)
    assert len(inputs) == 2
    np.testing.assert_allclose(fast.numpy(), reference.numpy(), rtol=1e-12, atol=1e-12)
    assert "TransformerEncoder: reference (layers.1 has a forward pre-hook)" in ta.explain(
        compiled, x, mask=mask, file=io.StringIO())


def test_the_hook_reason_is_one_helper_for_every_kind():
    linear = nn.Linear(2, 2)
    assert router._why_not_hooked([("linear1", linear)]) is None
    for register, kind in ((linear.register_forward_pre_hook, "a forward pre-hook"),
                           (linear.register_forward_hook, "a forward hook"),
                           (linear.register_full_backward_pre_hook, "a full backward pre-hook"),
                           (linear.register_full_backward_hook, "a full backward hook")):
        with register(lambda *_: None):
            assert router._why_not_hooked([("linear1", linear)]) == f"linear1 has {kind}"


# ----------------------------------------------------------------------------- full backward hooks, against PyTorch


def _record_backward(module, log):
    return module.register_full_backward_hook(lambda m, grad_input, grad_output: log.append((grad_input, grad_output)))


def test_full_backward_hook_of_a_linear_matches_pytorch():
    ours, theirs = both_linears()
    x = rng.standard_normal((4, 3))
    upstream = rng.standard_normal((4, 2))
    our_log, their_log = [], []
    _record_backward(ours, our_log)
    _record_backward(theirs, their_log)
    x_ours, x_theirs = ta.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    ours(x_ours).backward(ta.tensor(upstream))
    theirs(x_theirs).backward(torch.tensor(upstream))
    (grad_input, grad_output), = our_log
    (their_input, their_output), = their_log
    assert all(isinstance(g, ta.Tensor) for g in grad_input + grad_output)
    assert_all_close(grad_input, their_input)
    assert_all_close(grad_output, their_output)
    np.testing.assert_allclose(x_ours.grad, x_theirs.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(ours.weight.grad, theirs.weight.grad.numpy(), rtol=1e-12)


def test_full_backward_hooks_in_a_sequential_match_pytorch(route):
    (first, first_t), (second, second_t) = both_linears(3, 5), both_linears(5, 2)
    ours = route(nn.Sequential(first, nn.ReLU(), second))
    theirs = torch.nn.Sequential(first_t, torch.nn.ReLU(), second_t)
    x, upstream = rng.standard_normal((4, 3)), rng.standard_normal((4, 2))
    our_logs, their_logs = [[] for _ in range(4)], [[] for _ in range(4)]
    for modules, logs in ((list(ours.modules()), our_logs), (list(theirs.modules()), their_logs)):
        for module, log in zip(modules, logs):
            _record_backward(module, log)
    x_ours = ta.tensor(x, requires_grad=True)
    ours(x_ours).backward(ta.tensor(upstream))
    x_theirs = torch.tensor(x, requires_grad=True)
    theirs(x_theirs).backward(torch.tensor(upstream))
    for our_log, their_log in zip(our_logs, their_logs):
        assert len(our_log) == len(their_log) == 1
        assert_all_close(our_log[0][0], their_log[0][0])  # grad_input
        assert_all_close(our_log[0][1], their_log[0][1])  # grad_output
    np.testing.assert_allclose(x_ours.grad, x_theirs.grad.numpy(), rtol=1e-12)


def test_a_replaced_grad_input_and_grad_output_go_on_as_in_pytorch():
    ours, theirs = both_linears()
    x, upstream = rng.standard_normal((4, 3)), rng.standard_normal((4, 2))
    results = []
    for module, tensor in ((ours, ta.tensor), (theirs, torch.tensor)):
        module.register_full_backward_pre_hook(lambda m, grad_output: (grad_output[0] * 3,))
        module.register_full_backward_hook(lambda m, grad_input, grad_output: (grad_input[0] * 2,))
        x_in = tensor(x, requires_grad=True)
        module(x_in).backward(tensor(upstream))
        results.append((x_in.grad, module.weight.grad))
    (x_grad, w_grad), (x_grad_t, w_grad_t) = results
    np.testing.assert_allclose(x_grad, x_grad_t.numpy(), rtol=1e-12)  # 2 · 3 · upstream W
    np.testing.assert_allclose(w_grad, w_grad_t.numpy(), rtol=1e-12)  # 3 · upstreamᵀ x
    np.testing.assert_allclose(x_grad, 6 * upstream @ ours.weight.numpy(), rtol=1e-12)


def test_a_replacement_may_be_a_backend_array():
    linear = nn.Linear(3, 2).double()
    x = randn(4, 3, requires_grad=True)
    linear.register_full_backward_hook(lambda m, grad_input, grad_output: (np.ones((4, 3)),))
    linear(x).sum().backward()
    np.testing.assert_array_equal(x.grad, np.ones((4, 3)))


def test_a_wrong_replacement_names_the_hook_and_both_shapes():
    linear = nn.Linear(3, 2).double()

    def wrong_shape(module, grad_input, grad_output):
        return (grad_input[0][:2],)

    linear.register_full_backward_hook(wrong_shape)
    with pytest.raises(RuntimeError, match=r"full backward hook .*wrong_shape returned grad_input\[0\] of shape "
                                           r"\(2, 3\); expected \(4, 3\)"):
        linear(randn(4, 3, requires_grad=True)).sum().backward()

    other = nn.Linear(3, 2).double()
    other.register_full_backward_hook(lambda m, grad_input, grad_output: (None, None))
    with pytest.raises(RuntimeError, match="returned 2 gradients; expected 1"):
        other(randn(4, 3, requires_grad=True)).sum().backward()

    third = nn.Linear(3, 2).double()
    third.register_full_backward_pre_hook(lambda m, grad_output: (np.zeros((4, 2), np.float32),))
    with pytest.raises(RuntimeError, match=r"backward pre-hook .* grad_output\[0\] of dtype float32; expected float64"):
        third(randn(4, 3, requires_grad=True)).sum().backward()


@pytest.mark.filterwarnings("ignore:Full backward hook is firing when gradients are computed")
def test_an_input_without_grad_gives_grad_input_none_as_in_pytorch():
    ours, theirs = both_linears()
    x, upstream = rng.standard_normal((4, 3)), rng.standard_normal((4, 2))
    our_log, their_log = [], []
    _record_backward(ours, our_log)
    _record_backward(theirs, their_log)
    ours(ta.tensor(x)).backward(ta.tensor(upstream))  # only the parameters need gradients
    theirs(torch.tensor(x)).backward(torch.tensor(upstream))
    (grad_input, grad_output), = our_log
    (their_input, their_output), = their_log
    assert grad_input == (None,) and their_input == (None,)
    assert_all_close(grad_output, their_output)
    np.testing.assert_allclose(ours.weight.grad, theirs.weight.grad.numpy(), rtol=1e-12)


def test_full_backward_hook_of_self_attn_in_a_compiled_layer_matches_the_reference():
    ta.manual_seed(0)
    layer = nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0).double()
    x, upstream = rng.standard_normal((2, 5, 8)), rng.standard_normal((2, 5, 8))
    runs = []
    for model in (ta.compile(layer), layer):
        log = []
        with _record_backward(model.self_attn, log):
            x_in = ta.tensor(x, requires_grad=True)
            model(x_in).backward(ta.tensor(upstream))
        (grad_input, grad_output), = log
        assert len(grad_input) == 1 and len(grad_output) == 2 and grad_output[1] is None  # (output, weights None)
        runs.append((grad_input[0].numpy(), grad_output[0].numpy(), x_in.grad))
    for fast_value, reference_value in zip(*runs):
        np.testing.assert_allclose(fast_value, reference_value, rtol=1e-10, atol=1e-12)


def test_full_backward_hooks_under_create_graph_match_pytorch():
    x = rng.standard_normal((3, 4))
    results = []
    for module, tensor, grad in ((nn.Tanh(), ta.tensor, ta.autograd.grad), (torch.nn.Tanh(), torch.tensor,
                                                                          torch.autograd.grad)):
        log = []
        _record_backward(module, log)
        x_in = tensor(x, requires_grad=True)
        first, = grad(module(x_in).sum(), x_in, create_graph=True)  # 1 - tanh²(x), with its graph
        first.sum().backward()  # d/dx (1 - tanh²(x)) = -2 tanh(x) (1 - tanh²(x))
        results.append((log[0][0], log[0][1], x_in.grad))
    (grad_input, grad_output, x_grad), (their_input, their_output, x_grad_t) = results
    assert_all_close(grad_input, their_input)
    assert_all_close(grad_output, their_output)
    np.testing.assert_allclose(x_grad, x_grad_t.numpy(), rtol=1e-12)
