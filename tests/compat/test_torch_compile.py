"""``torch.compile`` under compat is ``ta.compile``: the model with its fused forms swapped in, the same
parameters, the same numbers. Bare, with torch's keyword arguments, as a decorator; ``disable=True`` gives the
model back; ``Module.compile()`` compiles in place, as torch's does."""

import numpy as np
import pytest
from graph_checks import node_types

import tinyattn.compat as compat
from tinyattn.fast.compile import is_compiled

EXACT = dict(rtol=1e-10, atol=1e-10)  # float64: the fused nodes and the layer's own lines differ only in rounding
TORCH_OPTIONS = [dict(), dict(fullgraph=True), dict(mode="reduce-overhead"),
                 dict(fullgraph=True, dynamic=False, backend="inductor", mode="max-autotune", options={})]


def _encoder_layer(batch_first, seed=0):
    compat.manual_seed(seed)
    return compat.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=batch_first, dtype=compat.float64)


@pytest.mark.parametrize("options", TORCH_OPTIONS, ids=lambda o: ",".join(o) or "bare")
def test_compile_returns_the_compiled_model_with_its_parameters(options):
    model = compat.nn.Sequential(compat.nn.Linear(4, 8), compat.nn.GELU(), compat.nn.LayerNorm(8))
    compiled = compat.compile(model, **options)
    assert compiled is not model and not is_compiled(model)
    assert [is_compiled(m) for m in compiled] == [True, False, True]
    assert isinstance(compiled[0], compat.nn.Linear) and isinstance(compiled[2], compat.nn.LayerNorm)
    assert all(a is b for a, b in zip(compiled.parameters(), model.parameters()))
    assert compiled.compile_notes["0"] == "fast.compile.Linear"
    x = compat.randn(3, 4)
    np.testing.assert_allclose(compiled(x).detach().numpy(), model(x).detach().numpy(), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("options", TORCH_OPTIONS, ids=lambda o: ",".join(o) or "bare")
def test_compile_as_a_decorator(options):
    decorate = compat.compile if not options else compat.compile(**options)

    @decorate
    def step(x):  # a function of the user's own: there is no fused form of it, it comes back as it is
        return x * 2

    assert step.__name__ == "step" and step(compat.ones(2)).tolist() == [2.0, 2.0]
    compiled = decorate(compat.nn.Linear(2, 3))
    assert is_compiled(compiled) and type(compiled(compat.ones(1, 2)).grad_fn).__name__ == "Linear"


def test_disable_returns_the_model_itself():
    model = compat.nn.Linear(2, 2)
    assert compat.compile(model, disable=True) is model
    assert compat.compile(model, fullgraph=True, mode="reduce-overhead", disable=True) is model
    assert compat.compile(disable=True)(model) is model and not is_compiled(model)


def test_module_compile_compiles_in_place():
    model = compat.nn.Sequential(compat.nn.Linear(2, 3), compat.nn.ReLU())
    weight = model[0].weight
    x = compat.randn(4, 2)
    before = model(x).detach().numpy()
    assert model.compile() is None  # as torch's: in place
    assert is_compiled(model[0]) and isinstance(model[0], compat.nn.Linear) and model[0].weight is weight
    assert not is_compiled(model[1]) and "Linear" in node_types(model(x))
    np.testing.assert_allclose(model(x).detach().numpy(), before, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("batch_first", [True, False], ids=["batch_first", "sequence_first"])
def test_a_compiled_encoder_layer_gives_the_layer_s_outputs_and_gradients(batch_first):
    """A compat ``TransformerEncoderLayer`` with a key padding mask, compiled: its fused blocks run, and give the
    uncompiled layer's outputs and the gradients of its input and of every parameter (float64)."""
    layer = _encoder_layer(batch_first)
    compiled = compat.compile(layer, fullgraph=True)
    rng = np.random.default_rng(0)
    B, S = 3, 5
    src = rng.standard_normal((B, S, 8) if batch_first else (S, B, 8))
    padding = compat.tensor(np.arange(S)[None, :] >= np.array([5, 3, 1])[:, None])  # (B, S), True = padding
    upstream = compat.tensor(rng.standard_normal(src.shape))
    results = []
    for model in (compiled, layer):
        x = compat.tensor(src, requires_grad=True)
        out = model(x, src_key_padding_mask=padding)
        kinds = node_types(out)
        assert ({"SelfAttentionBlock", "FeedForwardBlock"} <= kinds) == (model is compiled), kinds
        layer.zero_grad()
        out.backward(upstream)
        results.append([out.detach().numpy(), x.grad.numpy()] + [p.grad.numpy() for p in layer.parameters()])
    names = ["output", "input"] + [name for name, _ in layer.named_parameters()]
    for name, fused, reference in zip(names, *results):
        assert fused.shape == reference.shape and fused.dtype == reference.dtype == np.float64, name
        np.testing.assert_allclose(fused, reference, **EXACT, err_msg=name)
