"""``ta.compile``: what a compiled model is, and that it computes what the model computes.

- A model built of every layer that has a fused form (``Linear``, ``LayerNorm``, ``MultiHeadAttention``, a
  ``TransformerEncoder`` of ``TransformerEncoderLayer``s, a ``TransformerDecoderLayer``), compiled, against
  itself not compiled: outputs and every gradient (inputs and parameters) in float64, with and without masks,
  in training with dropout 0, in eval mode, and in training with dropout 0.3 and one seed before each call
  (the layers' blocks fall back to their reference lines, and the attention nodes draw the reference's numbers),
  on NumPy and on the strict backend; inference on a padded batch (the real tokens alone) too.
- The copy: the same ``Parameter`` objects (an optimizer step on the compiled model's moves the original's), the
  same ``state_dict``, ``load_state_dict`` and ``to`` on either seen by both, ``train``/``eval`` of its own, the
  original untouched, ``compile_notes``; hooks registered on the original before and after ``compile`` fire on
  the compiled model (a hook on a part makes the fused layer run its reference lines).
- Functions: ``ta.compile(F.fn)`` is the fused form in ``tinyattn.fast.compile``, any other function comes back
  as it is; ``ta.compile`` as a decorator, with PyTorch's keyword arguments.
- Inside ``ta.func.vmap`` and a forward-mode level a compiled form runs its reference (no fused node).
- Gradient penalties (``create_graph=True``) through compiled layers equal the reference's, step after step.
- Bad input to a compiled module raises the reference's error, word for word.
"""

import contextlib
import io
from unittest import mock

import numpy as np
import pytest
from graph_checks import assert_same, grad_of, node_types

import tinyattn as ta
import tinyattn.autograd.forward_ad as fwAD
import tinyattn.compat as torch
import tinyattn.nn as nn
import tinyattn.nn.functional as F
from tinyattn.fast.compile import FUNCTIONS, MODULES, is_compiled

DEVICES = ["cpu", "strict", pytest.param("cuda", marks=pytest.mark.cuda)]  # cuda: skipped without a GPU
COMPILED_FORMS = "tinyattn.fast.compile"  # the module (``tinyattn.fast.compile`` the attribute is the function)
TOLERANCE = dict(rtol=1e-9, atol=1e-10)
BLOCKS = {"SelfAttentionBlock", "FeedForwardBlock"}
FAST_NODES = BLOCKS | {"InProjection", "PackedSelfAttention", "Attention", "HeadsAttention", "BlockedAttention",
                       "Linear", "Normalize", "CrossEntropy"}


class Model(nn.Module):
    """Every layer that has a fused form: an embedding ``Linear`` and ``LayerNorm``, self-attention, a two-layer
    post-norm ReLU encoder, a pre-norm GELU decoder layer over its output, a ``Linear`` head."""

    def __init__(self, E=8, H=2, ff=12, dropout=0.0):
        super().__init__()
        self.embed = nn.Linear(5, E)
        self.norm = nn.LayerNorm(E)
        self.attention = nn.MultiHeadAttention(E, H, dropout=dropout)
        self.encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(E, H, ff, dropout=dropout), 2,
                                             norm=nn.LayerNorm(E))
        self.decoder = nn.TransformerDecoderLayer(E, H, ff, dropout=dropout, norm_first=True, activation="gelu")
        self.head = nn.Linear(E, 3)

    def forward(self, src, tgt, src_mask=None, tgt_mask=None, tgt_is_causal=False):
        x = self.norm(self.embed(src))  # (B, S, E)
        x = x + self.attention(x, attn_mask=src_mask, need_weights=False)[0]
        memory = self.encoder(x, mask=src_mask)  # (B, S, E)
        y = self.decoder(self.norm(self.embed(tgt)), memory, tgt_mask=tgt_mask, memory_mask=src_mask,
                         tgt_is_causal=tgt_is_causal)  # (B, T, E)
        return self.head(y)  # (B, T, 3)


def model(dropout=0.0, seed=0, device="cpu"):
    """A float64 ``Model``, every parameter drawn from ``seed`` (non-zero biases, norms away from 1 and 0)."""
    rng = np.random.default_rng(seed)
    built = Model(dropout=dropout).double()
    for p in built.parameters():
        p.data = rng.standard_normal(p.shape) * 0.5
    return built.to(device)


def model_inputs(rng, device, masks):
    """``(src, tgt, kwargs, upstream)``: inputs needing gradients and, with ``masks``, a padding mask of the
    source (its second sentence two tokens long), a boolean target mask and a causal target."""
    src = ta.tensor(rng.standard_normal((2, 4, 5)), requires_grad=True, device=device)
    tgt = ta.tensor(rng.standard_normal((2, 3, 5)), requires_grad=True, device=device)
    kwargs = {}
    if masks:
        allowed = rng.random((2, 3, 3)) < 0.7
        allowed[..., 0] = True
        kwargs = dict(src_mask=F.padding_mask([4, 2], 4).to(device), tgt_mask=ta.tensor(allowed, device=device),
                      tgt_is_causal=True)
    return src, tgt, kwargs, ta.tensor(rng.standard_normal((2, 3, 3)), device=device)


def step(module, parameters, src, tgt, kwargs, upstream, seed=None):
    """``(node types, [output, the inputs' gradients, every parameter's])`` of one forward and backward."""
    for t in (src, tgt, *parameters):
        t.grad = None
    if seed is not None:
        ta.manual_seed(seed)
    out = module(src, tgt, **kwargs)
    out.backward(upstream)
    return node_types(out), [ta.backend.to_numpy(out._data)] + [grad_of(t) for t in (src, tgt, *parameters)]


MODES = ["training, dropout 0", "eval", "training, dropout 0.3"]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("masks", [False, True], ids=["no masks", "masks"])
def test_a_compiled_model_equals_the_model(device, mode, masks):
    dropout = 0.3 if mode.endswith("0.3") else 0.1 if mode == "eval" else 0.0
    plain = model(dropout, device=device)
    plain.train(mode != "eval")
    compiled = ta.compile(plain)
    parameters = list(plain.parameters())
    src, tgt, kwargs, upstream = model_inputs(np.random.default_rng(1), device, masks)
    fast_nodes, fast = step(compiled, parameters, src, tgt, kwargs, upstream, seed=7)
    reference_nodes, reference = step(plain, parameters, src, tgt, kwargs, upstream, seed=7)
    assert_same(fast, reference, **TOLERANCE)
    assert not FAST_NODES & reference_nodes
    # the attention nodes run with dropout too (drawing the reference's numbers); where dropout acts the layers'
    # blocks fall back to their reference lines
    assert {"InProjection", "PackedSelfAttention", "Linear", "Normalize"} <= fast_nodes
    if mode != "training, dropout 0.3":
        assert BLOCKS <= fast_nodes
    else:
        assert not BLOCKS & fast_nodes
        # dropout acted, and by the seed: the comparison above could fail
        _, other_seed = step(compiled, parameters, src, tgt, kwargs, upstream, seed=8)
        assert not np.allclose(other_seed[0], fast[0])
        _, again = step(compiled, parameters, src, tgt, kwargs, upstream, seed=7)
        assert_same(again, fast, **TOLERANCE)


@pytest.mark.parametrize("device", DEVICES)
def test_second_order_through_compiled_attention_with_dropout_equals_the_models(device):
    """Under ``create_graph`` a fused attention node differentiates its reference, recomputed; where dropout acted,
    the reference draws its mask again from the generators as the node's forward found them: the gradient of a
    gradient penalty equals the model's, seed for seed (and the generators go on as they were)."""
    plain = model(0.3, device=device).train()
    compiled = ta.compile(plain)
    parameters = list(plain.parameters())
    src, tgt, kwargs, upstream = model_inputs(np.random.default_rng(3), device, masks=True)
    leaves = [src, tgt, *parameters]
    directions = [np.random.default_rng(4 + i).standard_normal(t.shape) for i, t in enumerate(leaves)]

    def second_order(module):
        ta.manual_seed(5)
        out = module(src, tgt, **kwargs)
        grads = ta.autograd.grad(out, leaves, upstream, create_graph=True, allow_unused=True)
        penalty = sum((g * ta.tensor(v, device=device)).sum() for g, v in zip(grads, directions) if g is not None)
        seconds = ta.autograd.grad(penalty, leaves, allow_unused=True)
        after = ta.rand(3, device=device).numpy()  # the generators after it all
        return node_types(out), [ta.backend.to_numpy(g._data) for g in (*grads, *seconds) if g is not None], after

    fast_nodes, fast, fast_after = second_order(compiled)
    _, reference, reference_after = second_order(plain)
    assert {"InProjection", "PackedSelfAttention"} <= fast_nodes
    assert len(fast) == len(reference) > len(leaves)
    assert_same(fast, reference, **TOLERANCE)
    np.testing.assert_array_equal(fast_after, reference_after)


@pytest.mark.parametrize("device", DEVICES)
def test_a_compiled_model_in_inference_computes_the_real_tokens_alone_and_equals_the_model(device):
    plain = model(0.1, device=device).eval()
    compiled = ta.compile(plain)
    src, tgt, kwargs, _ = model_inputs(np.random.default_rng(2), device, masks=True)
    spy = mock.patch(f"{COMPILED_FORMS}.encoder_on_real_tokens", wraps=ta.fast.encoder_on_real_tokens)
    with ta.no_grad():
        with spy as real_tokens:
            fast = compiled(src, tgt, **kwargs)
        assert real_tokens.call_count == 1
        reference = plain(src, tgt, **kwargs)
    np.testing.assert_allclose(ta.backend.to_numpy(fast._data), ta.backend.to_numpy(reference._data), **TOLERANCE)


# ----------------------------------------------------------------------------- the copy


def test_the_copy_holds_the_originals_parameters_and_the_fused_classes():
    plain = model()
    classes = [type(module) for module in plain.modules()]
    compiled = ta.compile(plain)
    assert compiled is not plain and type(compiled) is Model
    assert [type(module) for module in plain.modules()] == classes  # the original untouched
    for (name, p), (compiled_name, q) in zip(plain.named_parameters(), compiled.named_parameters(), strict=True):
        assert name == compiled_name and p is q
    for (name, module), (_, copy) in zip(plain.named_modules(), compiled.named_modules(), strict=True):
        assert copy is not module
        expected = MODULES.get(type(module), type(module))
        assert type(copy) is expected and is_compiled(copy) == (type(module) in MODULES), name
        assert isinstance(copy, type(module))  # a fused form is a subclass of its reference class
    notes = compiled.compile_notes
    assert notes["encoder.layers.1"] == "fast.compile.TransformerEncoderLayer"
    assert notes["encoder.layers.0.dropout"] == "reference (no fused form)" and notes[""] == "reference (no fused form)"
    assert list(notes) == [name for name, _ in plain.named_modules()]
    again = ta.compile(compiled)
    assert again.compile_notes["decoder"] == "already compiled" and type(again.decoder) is type(compiled.decoder)


def test_an_optimizer_step_on_the_compiled_models_parameters_moves_the_originals():
    plain = model()
    compiled = ta.compile(plain)
    before = {name: p.numpy().copy() for name, p in plain.named_parameters()}
    optimizer = ta.optim.SGD(compiled.parameters(), lr=0.1)
    src, tgt, kwargs, upstream = model_inputs(np.random.default_rng(3), "cpu", masks=True)
    compiled(src, tgt, **kwargs).backward(upstream)
    optimizer.step()
    for name, p in plain.named_parameters():  # (a key projection's bias has no gradient to speak of: softmax
        assert p.grad is not None, name  # does not see a shift of every score of a row)
        np.testing.assert_allclose(p.numpy(), before[name] - 0.1 * p.grad, rtol=1e-12, atol=1e-12)
    assert sum(not np.allclose(p.numpy(), before[name]) for name, p in plain.named_parameters()) >= 20
    np.testing.assert_allclose(compiled(src, tgt, **kwargs).numpy(), plain(src, tgt, **kwargs).numpy(), **TOLERANCE)


def test_state_dicts_are_equal_and_loading_either_changes_both():
    plain = model()
    compiled = ta.compile(plain)
    state, compiled_state = plain.state_dict(), compiled.state_dict()
    assert list(state) == list(compiled_state)
    for name in state:
        np.testing.assert_array_equal(state[name], compiled_state[name])
    src, tgt, kwargs, _ = model_inputs(np.random.default_rng(4), "cpu", masks=True)
    before = compiled(src, tgt, **kwargs).numpy()
    plain.load_state_dict(model(seed=1).state_dict())  # on the original: seen by the compiled model
    after = compiled(src, tgt, **kwargs).numpy()
    assert not np.allclose(after, before)
    np.testing.assert_allclose(after, model(seed=1)(src, tgt, **kwargs).numpy(), **TOLERANCE)
    compiled.load_state_dict(model(seed=2).state_dict())  # on the compiled model: seen by the original
    for name, value in model(seed=2).state_dict().items():
        np.testing.assert_array_equal(plain.state_dict()[name], value)


@pytest.mark.parametrize("on", ["original", "compiled"])
def test_to_on_either_converts_both(on):
    plain = model()
    compiled = ta.compile(plain)
    (plain if on == "original" else compiled).to(ta.float32)
    assert all(p.dtype == np.float32 for p in plain.parameters())
    assert all(p.dtype == np.float32 for p in compiled.parameters())
    src, tgt, kwargs, _ = model_inputs(np.random.default_rng(5), "cpu", masks=True)
    src, tgt = src.float(), tgt.float()
    out = compiled(src, tgt, **kwargs)
    assert out.dtype == np.float32 and {"SelfAttentionBlock", "FeedForwardBlock"} <= node_types(out)
    (compiled if on == "original" else plain).to(ta.float64)
    assert all(p.dtype == np.float64 for p in plain.parameters())
    assert all(p.dtype == np.float64 for p in compiled.parameters())


def test_train_and_eval_set_the_compiled_models_own_modes():
    plain = model(0.3)
    compiled = ta.compile(plain)
    compiled.eval()
    assert not any(m.training for m in compiled.modules()) and all(m.training for m in plain.modules())
    src, tgt, kwargs, _ = model_inputs(np.random.default_rng(6), "cpu", masks=True)
    out = compiled(src, tgt, **kwargs)
    assert BLOCKS <= node_types(out)  # eval: dropout is off, the blocks run
    np.testing.assert_allclose(out.numpy(), plain.eval()(src, tgt, **kwargs).numpy(), **TOLERANCE)
    plain.train()
    assert not any(m.training for m in compiled.modules())
    compiled.train()
    assert all(m.training for m in compiled.modules())
    assert not BLOCKS & node_types(compiled(src, tgt, **kwargs))  # training, dropout 0.3: the reference lines


def test_hooks_registered_before_and_after_compile_fire_on_the_compiled_model():
    """A forward hook on ``self_attn`` (which the fused self-attention block computes without calling it) makes
    the compiled layer run its reference lines for that block, and fires; the other block stays fused."""
    ta.manual_seed(0)
    layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0).double()
    seen = []
    before = layer.self_attn.register_forward_hook(lambda module, args, output: seen.append(("before", module)))
    compiled = ta.compile(layer)
    after = layer.self_attn.register_forward_hook(lambda module, args, output: seen.append(("after", module)))
    x = ta.tensor(np.random.default_rng(0).standard_normal((2, 3, 8)), requires_grad=True)
    out = compiled(x)
    assert [when for when, _ in seen] == ["before", "after"] and all(m is compiled.self_attn for _, m in seen)
    types = node_types(out)
    assert "SelfAttentionBlock" not in types and {"FeedForwardBlock", "PackedSelfAttention"} <= types
    np.testing.assert_allclose(out.numpy(), layer(x).numpy(), **TOLERANCE)
    assert len(seen) == 4  # and on the original's own call
    before.remove()
    after.remove()
    assert BLOCKS <= node_types(compiled(x)) and len(seen) == 4  # no hook left: fused again
    on_copy = compiled.linear1.register_forward_pre_hook(lambda module, args: seen.append(("copy", module)))
    layer(x)  # a hook registered on the compiled model fires on the original: one table
    assert seen[-1] == ("copy", layer.linear1)
    out = compiled(x)
    assert seen[-1] == ("copy", compiled.linear1) and "FeedForwardBlock" not in node_types(out)
    on_copy.remove()


class _Doubled(nn.TransformerEncoderLayer):
    """A subclass with a forward of its own: it computes something else, so it keeps its class."""

    def forward(self, src, src_mask=None, is_causal=False):
        return super().forward(src, src_mask, is_causal) * 2


def test_a_subclass_with_its_own_forward_keeps_its_class_and_its_parts_are_compiled():
    ta.manual_seed(0)
    layer = _Doubled(8, 2, 16, dropout=0.0).double()
    compiled = ta.compile(layer)
    assert type(compiled) is _Doubled and compiled.compile_notes[""].startswith("reference")
    assert type(compiled.self_attn) is MODULES[nn.MultiHeadAttention]
    x = ta.tensor(np.random.default_rng(0).standard_normal((2, 3, 8)))
    out = compiled(x)
    assert "PackedSelfAttention" in node_types(out) and not BLOCKS & node_types(out)
    np.testing.assert_allclose(out.numpy(), layer(x).numpy(), **TOLERANCE)
    lines = ta.explain(compiled, x, file=io.StringIO()).splitlines()
    assert lines[0].startswith("_Doubled: reference")


def test_the_notes_say_a_subclass_keeps_its_class_for_its_own_forward():
    assert ta.compile(_Doubled(8, 2, 16)).compile_notes[""] == "reference (_Doubled has a forward of its own)"


def test_a_forward_set_on_the_instance_keeps_the_module_as_it_is():
    layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0)
    layer.norm1.forward = layer.norm1.forward  # a wrapper, say
    compiled = ta.compile(layer)
    assert type(compiled.norm1) is nn.LayerNorm
    assert compiled.compile_notes["norm1"] == "reference (a forward is set on the instance)"
    assert "SelfAttentionBlock" not in node_types(compiled(ta.randn(2, 3, 8, requires_grad=True)))


def test_explain_says_what_is_not_compiled():
    layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0).eval()
    lines = ta.explain(layer, ta.randn(2, 3, 8), file=io.StringIO()).splitlines()
    assert lines[0] == "TransformerEncoderLayer: reference (not compiled: ta.compile swaps in its fused form)"
    assert "norm1 (LayerNorm): reference (not compiled: ta.compile swaps in its fused form)" in lines
    lines = ta.explain(ta.compile(layer), ta.randn(2, 3, 8), file=io.StringIO()).splitlines()
    assert lines[1].startswith("  self-attention residual: fast.SelfAttentionBlock")


# ----------------------------------------------------------------------------- functions and the decorator


def test_each_library_function_compiles_to_its_fused_form_and_any_other_comes_back():
    from tinyattn.fast.compile import cross_entropy, layer_norm, linear, scaled_dot_product_attention

    assert ta.compile(F.scaled_dot_product_attention) is scaled_dot_product_attention
    assert ta.compile(F.layer_norm) is layer_norm and ta.compile(F.linear) is linear
    assert ta.compile(F.cross_entropy) is cross_entropy
    assert all(ta.compile(fn) is form and form is not fn for fn, form in FUNCTIONS.items())

    def own(x):
        return x * 2

    for other in (F.relu, F.softmax, own, ta.tanh, lambda x: x):
        assert ta.compile(other) is other
    with pytest.raises(TypeError, match="compile: expected a Module or a function, got int"):
        ta.compile(3)


def test_compile_as_a_decorator_and_with_pytorchs_keyword_arguments():
    @ta.compile
    def double(x):
        return x * 2

    assert double(ta.tensor([1.0])).numpy().tolist() == [2.0]
    linear = ta.compile(fullgraph=True, mode="max-autotune")(F.linear)
    assert linear is FUNCTIONS[F.linear]
    layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0)
    compiled = ta.compile(dynamic=False)(layer)
    assert type(compiled) is MODULES[nn.TransformerEncoderLayer] and type(layer) is nn.TransformerEncoderLayer
    assert torch.compile(layer, disable=True) is layer
    assert type(torch.compile(layer)) is MODULES[nn.TransformerEncoderLayer]


# ----------------------------------------------------------------------------- transforms


def refuse(name):
    """A patch that makes the fused step ``name`` of ``fast.compile`` (a function, or a node's ``apply``) fail if
    it runs."""
    target = f"{COMPILED_FORMS}.{name}" + (".apply" if name[0].isupper() else "")
    return mock.patch(target, side_effect=AssertionError(f"{name} ran inside a transform"))


class refusing_fused_steps:
    """``with refusing_fused_steps():`` every fused step of ``fast.compile`` fails if it runs."""

    def __enter__(self):
        self.patches = [refuse(name) for name in FUSED_STEPS]
        for patch in self.patches:
            patch.start()

    def __exit__(self, *exc):
        for patch in self.patches:
            patch.stop()


def compiled_and_plain():
    ta.manual_seed(0)
    layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0).double()
    return ta.compile(layer), layer


FUSED_STEPS = ("self_attention_block", "feed_forward_block", "packed_self_attention", "LinearNode", "Normalize",
               "Attention", "InProjection", "blocked_attention", "CrossEntropy")


def test_inside_vmap_a_compiled_form_runs_its_reference():
    compiled, layer = compiled_and_plain()
    rng = np.random.default_rng(0)
    xs = ta.tensor(rng.standard_normal((3, 2, 4, 8)))  # 3 batches of (2, 4, 8)
    w = ta.tensor(rng.standard_normal((5, 8)))
    q = ta.tensor(rng.standard_normal((3, 2, 4, 8)))
    sdpa = ta.compile(F.scaled_dot_product_attention)
    outside = compiled(xs[0])
    assert BLOCKS <= node_types(outside)  # (outside a transform: the fused nodes)
    functions = (compiled, lambda x: ta.compile(F.linear)(x, w), lambda x: ta.compile(F.layer_norm)(x, (8,)),
                 lambda x: sdpa(x, q[0], q[0], need_weights=False)[0])
    with refusing_fused_steps():
        for fn in functions:  # (outside a transform the patches bite)
            with pytest.raises(AssertionError, match="ran inside a transform"):
                fn(xs[0])
        results = [ta.func.vmap(fn)(xs) for fn in functions]
    references = [ta.func.vmap(fn)(xs) for fn in (layer, lambda x: F.linear(x, w), lambda x: F.layer_norm(x, (8,)),
                                                  lambda x: F.scaled_dot_product_attention(x, q[0], q[0])[0])]
    for got, expected in zip(results, references, strict=True):
        np.testing.assert_allclose(got.numpy(), expected.numpy(), **TOLERANCE)
    np.testing.assert_allclose(results[0].numpy()[0], outside.numpy(), **TOLERANCE)


def test_inside_a_forward_mode_level_a_compiled_form_runs_its_reference():
    compiled, layer = compiled_and_plain()
    rng = np.random.default_rng(1)
    x, tangent = (ta.tensor(rng.standard_normal((2, 4, 8))) for _ in range(2))
    w = ta.tensor(rng.standard_normal((5, 8)))
    results = []
    for module, linear in ((compiled, ta.compile(F.linear)), (layer, F.linear)):
        with refusing_fused_steps() if module is compiled else contextlib.nullcontext(), fwAD.dual_level():
            dual = fwAD.make_dual(x, tangent)
            outputs = [fwAD.unpack_dual(module(dual)), fwAD.unpack_dual(linear(dual, w))]
        results.append([a.numpy() for output in outputs for a in output])
    assert_same(*results, **TOLERANCE)
    assert all(np.abs(a).max() > 0 for a in results[0])  # the tangents are there, and not zero


# ----------------------------------------------------------------------------- gradient penalties

B, L, E, H = 2, 5, 8, 2


def penalized(kind):
    """``(module, call)``: a float64 module and how a penalty step calls it on ``x``."""
    ta.manual_seed(0)
    if kind == "multi-head attention":
        module = nn.MultiHeadAttention(E, H).double()
        return module, lambda m, x: m(x, need_weights=False)[0]
    if kind == "encoder layer":
        return nn.TransformerEncoderLayer(E, H, 16, dropout=0.0, activation="gelu").double(), lambda m, x: m(x)
    module = nn.TransformerDecoderLayer(E, H, 16, dropout=0.0, norm_first=True).double()
    memory = ta.tensor(np.random.default_rng(1).standard_normal((B, 3, E)))
    return module, lambda m, x: m(x, memory, tgt_is_causal=True, tgt_mask=F.causal_mask(L, L))


def penalty_step(module, call, parameters, x, upstream, direction, create_graph):
    """One step: ``L = Σ out·u``; with ``create_graph``, ``L + Σ (∂L/∂x)·d``, backpropagated to every parameter
    and to ``x``. Returns the graph's node types, the output and every gradient."""
    for t in (x, *parameters):
        t.grad = None
    out = call(module, x)
    loss = (out * upstream).sum()
    if create_graph:
        (g,) = ta.autograd.grad(loss, x, create_graph=True)
        loss = loss + (g * direction).sum()
    loss.backward()
    return node_types(out), [out.numpy()] + [grad_of(t) for t in (*parameters, x)]


FUSED = {"multi-head attention": {"InProjection", "PackedSelfAttention"}, "encoder layer": BLOCKS,
         "decoder layer": BLOCKS}


@pytest.mark.parametrize("kind", ["multi-head attention", "encoder layer", "decoder layer"])
def test_gradient_penalties_through_compiled_layers_equal_the_references(kind):
    """Steps with and without a gradient penalty, in any order: each compiled step runs its fused nodes (whose
    ``create_graph`` backward differentiates their reference) and gives the reference step's numbers."""
    module, call = penalized(kind)
    compiled = ta.compile(module)
    parameters = list(module.parameters())
    rng = np.random.default_rng(2)
    x = ta.tensor(rng.standard_normal((B, L, E)), requires_grad=True)
    upstream, direction = (ta.tensor(rng.standard_normal((B, L, E))) for _ in range(2))
    penalties = []
    for create_graph in (True, True, False, True, False):
        nodes, fast = penalty_step(compiled, call, parameters, x, upstream, direction, create_graph)
        reference_nodes, reference = penalty_step(module, call, parameters, x, upstream, direction, create_graph)
        assert FUSED[kind] <= nodes and not FAST_NODES & reference_nodes
        assert_same(fast, reference, **TOLERANCE)
        penalties.append(fast[1:])
    assert any(not np.allclose(a, b) for a, b in zip(penalties[0], penalties[2]))  # the penalty's terms count


def test_a_gradient_penalty_through_a_compiled_compat_layer_equals_the_uncompiled_one():
    """compat's layer (PyTorch's conventions, a key padding mask) compiles to the native fused form."""
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(E, H, 16, dropout=0.0, batch_first=True).double()
    x = torch.randn(B, L, E, dtype=torch.float64, requires_grad=True)
    mask = torch.zeros(B, L, dtype=torch.bool)
    mask[0, -2:] = True  # the padding of the first sequence
    grads = []
    for module in (torch.compile(layer), layer):
        layer.zero_grad()
        out = module(x, src_key_padding_mask=mask)
        (g,) = torch.autograd.grad((out ** 2).sum(), x, create_graph=True)
        (g ** 2).sum().backward()
        grads.append([p.grad.numpy().copy() for p in layer.parameters()])
    assert is_compiled(torch.compile(layer))
    assert_same(*grads, **TOLERANCE)


# ----------------------------------------------------------------------------- errors


def error_of(call):
    """``(type, message)`` of what ``call()`` raises."""
    with pytest.raises(Exception) as error:
        call()
    return type(error.value), str(error.value)


@pytest.mark.parametrize("call", ["mha key_padding_mask", "layer src_key_padding_mask", "encoder src_key_padding_mask",
                                  "layer too many", "layer none", "decoder integer memory", "mha list mask",
                                  "mha (B, L) mask", "layer 2-d input", "linear width", "norm width",
                                  "encoder float64 input"])
def test_bad_input_to_a_compiled_module_raises_the_references_error(call):
    mha, layer = nn.MultiHeadAttention(8, 2), nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0)
    encoder, decoder = nn.TransformerEncoder(layer, 1), nn.TransformerDecoderLayer(8, 2, 16, dropout=0.0)
    linear, norm, x = nn.Linear(8, 3), nn.LayerNorm(8), ta.randn(2, 4, 8)
    calls = {"mha key_padding_mask": lambda m: m["mha"](x, key_padding_mask=None),
             "layer src_key_padding_mask": lambda m: m["layer"](x, src_key_padding_mask=None),
             "encoder src_key_padding_mask": lambda m: m["encoder"](x, src_key_padding_mask=None),
             "layer too many": lambda m: m["layer"](x, None, False, 5), "layer none": lambda m: m["layer"](),
             "decoder integer memory": lambda m: m["decoder"](x, ta.tensor(np.zeros((2, 3, 8), dtype=np.int64))),
             "mha list mask": lambda m: m["mha"](x, attn_mask=[[True] * 4] * 4),
             "mha (B, L) mask": lambda m: m["mha"](x, attn_mask=ta.tensor(np.ones((2, 4), dtype=bool)),
                                                   need_weights=False),
             "layer 2-d input": lambda m: m["layer"](ta.randn(4, 7)), "linear width": lambda m: m["linear"](x[..., :5]),
             "norm width": lambda m: m["norm"](x[..., :5]),
             "encoder float64 input": lambda m: m["encoder"](x.double(), mask=F.padding_mask([4, 2], 4))}
    plain = dict(mha=mha, layer=layer, encoder=encoder, decoder=decoder, linear=linear, norm=norm)
    compiled = {name: ta.compile(module) for name, module in plain.items()}
    kind, message = error_of(lambda: calls[call](compiled))
    assert (kind, message) == error_of(lambda: calls[call](plain))
    assert "why_not" not in message and "fast" not in message
