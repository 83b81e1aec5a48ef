"""The layers of ``tinyattn.nn``, each against the PyTorch layer of the same name.

A ``LayerSpec`` draws a layer's constructor arguments and an input; PyTorch builds the
reference module, its parameters are set to random values (so that a LayerNorm's weight is
not all ones), and they are copied into ours through ``load_state_dict``. Then:

1. ``test_layer_matches_torch``: outputs and the gradients of the input and of every
   parameter agree with PyTorch, float64 tight and float32 loose, on every device, under a
   random upstream gradient; everything stays in the model's dtype;
2. ``test_layer_gradcheck``: float64 gradients of the input and of every parameter agree
   with central finite differences.

Both run on each layer as written and compiled (``ta.compile``: the ``route`` fixture).

Then initialisation (PyTorch's distributions, the library's seeded generator, the module's
device), a float32 model kept float32 end to end, the containers, and bad input.
"""

from collections import OrderedDict
from typing import NamedTuple

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import tinyattn as ta
import tinyattn.nn as nn
import tinyattn.nn.functional as F
from tinyattn import backend
from tinyattn import testing as tt

TOLERANCES = {np.float64: dict(rtol=1e-9, atol=1e-11), np.float32: dict(rtol=2e-4, atol=2e-5)}
# a stack of layers compounds float32 rounding: a LayerNorm over a few features whose values are close
# amplifies it (both libraries round differently), so the stack gets a looser float32 tolerance
STACK_FLOAT32 = dict(rtol=1e-3, atol=1e-4)


class LayerSpec(NamedTuple):
    name: str
    case: object  # strategy of (constructor kwargs, input array)
    ours: object  # kwargs -> our module
    theirs: object  # kwargs -> torch module


@st.composite
def _linear_case(draw):
    in_features, out_features = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    batch = draw(tt.shapes(min_dims=0, max_dims=2, max_side=3))
    kwargs = dict(in_features=in_features, out_features=out_features, bias=draw(st.booleans()))
    return kwargs, draw(tt.arrays(batch + (in_features,)))


@st.composite
def _layer_norm_case(draw):
    shape = draw(tt.shapes(min_dims=1, max_dims=3, min_side=2, max_side=4))
    normalized_shape = shape[len(shape) - draw(st.integers(1, min(2, len(shape)))):]
    affine = draw(st.booleans())
    kwargs = dict(normalized_shape=normalized_shape, eps=draw(st.sampled_from([1e-5, 1e-3])),
                  elementwise_affine=affine, bias=draw(st.booleans()) if affine else True)
    return kwargs, draw(tt.distinct_arrays(shape, spacing=0.3))


@st.composite
def _embedding_case(draw, padding=True):
    num_embeddings, embedding_dim = draw(st.integers(1, 5)), draw(st.integers(1, 3))
    shape = draw(tt.shapes(min_dims=0, max_dims=2, max_side=4))
    size = int(np.prod(shape))
    index = np.array(draw(st.lists(st.integers(0, num_embeddings - 1), min_size=size, max_size=size)))
    padding_idx = draw(st.one_of(st.none(), st.integers(-num_embeddings, num_embeddings - 1))) if padding else None
    kwargs = dict(num_embeddings=num_embeddings, embedding_dim=embedding_dim, padding_idx=padding_idx)
    return kwargs, index.reshape(shape).astype(np.int64)


@st.composite
def _activation_case(draw, **kwargs):
    return kwargs, draw(tt.arrays(draw(tt.shapes(max_dims=3, max_side=3)), low=0.1, high=3.0))


@st.composite
def _stack_case(draw):
    width = draw(st.integers(2, 4))
    batch = draw(tt.shapes(min_dims=1, max_dims=2, max_side=3))
    kwargs = dict(width=width, hidden=draw(st.integers(3, 5)), approximate=draw(st.sampled_from(["none", "tanh"])))
    return kwargs, draw(tt.arrays(batch + (width,)))


def _stack(nn_module):
    """The same small MLP block from either library: Linear, GELU, Dropout, LayerNorm, Linear, ReLU."""

    def build(width, hidden, approximate):
        return nn_module.Sequential(
            nn_module.Linear(width, hidden), nn_module.GELU(approximate=approximate), nn_module.Dropout(0.3),
            nn_module.LayerNorm(hidden), nn_module.Linear(hidden, width), nn_module.ReLU(),
        )

    return build


SPECS = [
    LayerSpec("Linear", _linear_case(), lambda kw: nn.Linear(**kw), lambda kw: torch.nn.Linear(**kw)),
    LayerSpec("LayerNorm", _layer_norm_case(), lambda kw: nn.LayerNorm(**kw), lambda kw: torch.nn.LayerNorm(**kw)),
    LayerSpec("Embedding", _embedding_case(), lambda kw: nn.Embedding(**kw), lambda kw: torch.nn.Embedding(**kw)),
    LayerSpec("GELU", _activation_case(approximate="none"), lambda kw: nn.GELU(**kw), lambda kw: torch.nn.GELU(**kw)),
    LayerSpec("GELU_tanh", _activation_case(approximate="tanh"), lambda kw: nn.GELU(**kw),
              lambda kw: torch.nn.GELU(**kw)),
    LayerSpec("ReLU", _activation_case(), lambda kw: nn.ReLU(), lambda kw: torch.nn.ReLU()),
    LayerSpec("Dropout_eval", _activation_case(p=0.4), lambda kw: nn.Dropout(**kw).eval(),
              lambda kw: torch.nn.Dropout(**kw).eval()),
    LayerSpec("Sequential_eval", _stack_case(), lambda kw: _stack(nn)(**kw).eval(),
              lambda kw: _stack(torch.nn)(**kw).eval()),
]


def _twins(spec, kwargs, dtype, device, seed, route):
    """The torch module with random parameters, and ours holding copies of them (passed through ``route``)."""
    theirs = spec.theirs(kwargs).to(torch.float64 if dtype == np.float64 else torch.float32)
    rng = np.random.default_rng(seed)
    with torch.no_grad():
        for param in theirs.parameters():
            param.copy_(torch.from_numpy(rng.uniform(-1.5, 1.5, tuple(param.shape))))
    ours = spec.ours(kwargs).to(dtype).to(device)
    ours.load_state_dict({name: value.numpy() for name, value in theirs.state_dict().items()})
    return route(ours), theirs


def _as_input(array, dtype, device):
    if array.dtype.kind == "i":
        return ta.tensor(array, device=device), torch.tensor(array)
    return (ta.tensor(array.astype(dtype), device=device, requires_grad=True),
            torch.tensor(array.astype(dtype), requires_grad=True))


def _torch_results(module, array, upstream):
    """PyTorch's output, input gradient (or ``None``) and parameter gradients, as NumPy arrays."""
    x = torch.tensor(array, requires_grad=array.dtype.kind == "f")
    out = module(x)
    out.backward(torch.tensor(upstream, dtype=out.dtype))
    grads = {name: p.grad.numpy() for name, p in module.named_parameters()}
    return out.detach().numpy(), None if x.grad is None else x.grad.numpy(), grads


def _assert_matches(ours, torch_same, torch_float64, tolerance, err_msg=""):
    """float64: ours within ``tolerance`` of PyTorch. float32: within ``tolerance`` of PyTorch in float64
    (the same inputs and parameters), or no further from it than twice PyTorch's own float32 result is:
    a gradient that is all cancellation (LayerNorm over two features, say) is inexact in both libraries."""
    if torch_float64 is None:
        np.testing.assert_allclose(ours, torch_same, **tolerance, err_msg=err_msg)
        return
    exact = torch_float64.astype(np.float64)
    allowed = np.maximum(tolerance["atol"] + tolerance["rtol"] * np.abs(exact), 2 * np.abs(torch_same - exact))
    error = np.abs(ours.astype(np.float64) - exact)
    worst = np.argmax(error - allowed) if error.size else None
    assert (error <= allowed).all(), f"{err_msg}: error {error.flat[worst]} where {allowed.flat[worst]} is allowed"


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["float64", "float32"])
@pytest.mark.parametrize("spec", SPECS, ids=[s.name for s in SPECS])
@given(data=st.data(), seed=st.integers(0, 2**32 - 1))
def test_layer_matches_torch(spec, dtype, device, route, data, seed):
    kwargs, array = data.draw(spec.case)
    ours, theirs = _twins(spec, kwargs, dtype, device, seed, route)
    x, x_torch = _as_input(array, dtype, device)
    out, out_torch = ours(x), theirs(x_torch)
    tolerance = STACK_FLOAT32 if spec.name.startswith("Sequential") and dtype == np.float32 else TOLERANCES[dtype]
    assert out.shape == tuple(out_torch.shape) and out.dtype == dtype and out.device == device
    upstream = np.random.default_rng(seed + 1).standard_normal(out.shape).astype(dtype)
    exact = None  # float32: PyTorch in float64 on the same float32 inputs and parameters, to measure both against
    if dtype == np.float32:
        as_float64 = spec.theirs(kwargs).double()
        as_float64.load_state_dict({k: v.double() for k, v in theirs.state_dict().items()})
        exact = _torch_results(as_float64.train(theirs.training), array.astype(dtype).astype(
            np.float64) if array.dtype.kind == "f" else array, upstream.astype(np.float64))
    _assert_matches(out.numpy(), out_torch.detach().numpy(), None if exact is None else exact[0], tolerance, "output")

    out.backward(ta.tensor(upstream, device=device))
    out_torch.backward(torch.tensor(upstream))
    if x.requires_grad:
        assert x.grad.dtype == dtype
        _assert_matches(backend.to_numpy(x.grad), x_torch.grad.numpy(), None if exact is None else exact[1],
                        tolerance, "input gradient")
    reference = dict(theirs.named_parameters())
    for name, param in ours.named_parameters():
        assert param.grad.dtype == dtype and backend.device_of(param.grad) == device, name
        _assert_matches(backend.to_numpy(param.grad), reference[name].grad.numpy(),
                        None if exact is None else exact[2][name], tolerance, f"{spec.name}: gradient of {name}")


CALCULUS = [s._replace(case=_embedding_case(padding=False)) if s.name == "Embedding" else s for s in SPECS]


@pytest.mark.parametrize("spec", CALCULUS, ids=[s.name for s in CALCULUS])
@given(data=st.data(), seed=st.integers(0, 2**32 - 1))
def test_layer_gradcheck(spec, device, route, data, seed):
    kwargs, array = data.draw(spec.case)
    ours, _ = _twins(spec, kwargs, np.float64, device, seed, route)
    params = list(ours.parameters())
    x, _ = _as_input(array, np.float64, device)
    if x.requires_grad:
        assert tt.gradcheck(lambda x, *params: ours(x), [x, *params])
    else:  # integer indices: only the table is differentiable
        assert tt.gradcheck(lambda *params: ours(x), params)


# ----------------------------------------------------------------------------- initialisation


def test_linear_init_is_pytorch_default(device):
    ta.manual_seed(0)
    layer = nn.Linear(400, 300, device=device)
    bound = 1 / np.sqrt(400)
    for param in (layer.weight, layer.bias):
        values = param.numpy()
        assert param.device == device and param.dtype == np.float32 and param.requires_grad
        assert np.abs(values).max() <= bound
        assert abs(values.mean()) < 4 * bound / np.sqrt(3 * values.size)  # U(-b, b) has std b/√3
    np.testing.assert_allclose(layer.weight.numpy().std(), bound / np.sqrt(3), rtol=0.02)
    reference = torch.nn.Linear(400, 300).weight.detach().numpy()
    np.testing.assert_allclose(layer.weight.numpy().std(), reference.std(), rtol=0.03)


def test_embedding_and_layer_norm_init(device):
    ta.manual_seed(0)
    table = nn.Embedding(200, 100, padding_idx=-1, device=device)
    weight = table.weight.numpy()
    assert table.padding_idx == 199 and table.weight.device == device
    np.testing.assert_array_equal(weight[199], 0.0)
    assert abs(weight[:199].mean()) < 0.02 and abs(weight[:199].std() - 1) < 0.02  # N(0, 1)
    norm = nn.LayerNorm((2, 3), device=device, dtype=np.float64)
    assert norm.weight.dtype == np.float64 and norm.weight.device == device
    np.testing.assert_array_equal(norm.weight.numpy(), 1.0)
    np.testing.assert_array_equal(norm.bias.numpy(), 0.0)


@pytest.mark.parametrize("build", [lambda d: nn.Linear(5, 3, device=d), lambda d: nn.Embedding(6, 4, device=d)],
                         ids=["Linear", "Embedding"])
def test_init_reproducible_under_manual_seed(build, device):
    ta.manual_seed(7)
    first = build(device).state_dict()
    ta.manual_seed(7)
    again = build(device).state_dict()
    ta.manual_seed(8)
    other = build(device).state_dict()
    for name in first:
        np.testing.assert_array_equal(first[name], again[name])
        assert (first[name] != other[name]).any()


def test_reset_parameters_draws_afresh():
    layer = nn.Linear(4, 4)
    before, weight = layer.weight.numpy(), layer.weight
    layer.reset_parameters()
    assert layer.weight is weight and (layer.weight.numpy() != before).any()


# ----------------------------------------------------------------------------- dtype end to end


def test_float32_model_stays_float32(device, route):
    ta.manual_seed(0)
    model = route(nn.Sequential(
        nn.Embedding(7, 6, padding_idx=0), nn.Linear(6, 8), nn.GELU(), nn.Dropout(0.2), nn.LayerNorm(8),
        nn.Linear(8, 8), nn.ReLU(), nn.GELU(approximate="tanh"), nn.Linear(8, 7),
    ).to(device))
    activation = ta.tensor([[1, 2, 0, 6], [3, 3, 4, 5]], device=device)  # (B, L)
    for layer in model:
        activation = layer(activation)
        assert activation.dtype == np.float32 and activation.device == device, type(layer).__name__
    loss = route(F.cross_entropy)(activation.reshape(-1, 7), ta.tensor([1, 2, 3, 4, 5, 6, 0, 1], device=device),
                                  label_smoothing=0.1)
    assert loss.dtype == np.float32
    loss.backward()
    for name, param in model.named_parameters():
        assert param.dtype == np.float32 and param.grad.dtype == np.float32, name
        assert backend.device_of(param.grad) == device, name


# ----------------------------------------------------------------------------- dropout as a module


def test_dropout_module_train_and_eval(device):
    drop = nn.Dropout(0.5)
    x = ta.ones(50, 40, device=device)
    ta.manual_seed(3)
    trained = drop(x).numpy()
    assert set(np.unique(trained)) == {0.0, 2.0}
    ta.manual_seed(3)
    np.testing.assert_array_equal(F.dropout(x, 0.5).numpy(), trained)  # the module is the function
    assert drop.eval()(x) is x and not drop.training
    assert (drop.train()(x).numpy() == 0).any()
    np.testing.assert_array_equal(nn.Dropout(1.0)(x).numpy(), 0.0)


@pytest.mark.parametrize("p", [-0.5, 1.01, 2])
def test_dropout_module_rejects_bad_p(p):
    with pytest.raises(ValueError, match=f"between 0 and 1, but got {p}"):
        nn.Dropout(p)


# ----------------------------------------------------------------------------- containers


def test_sequential_indexing_and_growth():
    first, second, third = nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1)
    model = nn.Sequential(first, second)
    assert len(model) == 2 and model[0] is first and model[-1] is second and list(model) == [first, second]
    model.append(third)
    assert len(model) == 3 and model[2] is third
    tail = model[1:]
    assert isinstance(tail, nn.Sequential) and list(tail) == [second, third]
    x = ta.randn(4, 2)
    np.testing.assert_array_equal(model(x).numpy(), third(second(first(x))).numpy())
    named = nn.Sequential(OrderedDict([("proj", first), ("act", second)]))
    assert [name for name, _ in named.named_children()] == ["proj", "act"] and named.proj is first
    with pytest.raises(IndexError, match="index 3 is out of range for 3 modules"):
        model[3]


def test_module_list_indexing_and_growth():
    layers = nn.ModuleList([nn.Linear(2, 2), nn.Linear(2, 2)])
    extra = nn.LayerNorm(2)
    layers.append(extra)
    assert len(layers) == 3 and layers[-1] is extra and list(layers)[2] is extra
    layers.extend([nn.ReLU()])
    layers.insert(0, nn.GELU())
    assert [type(m).__name__ for m in layers] == ["GELU", "Linear", "Linear", "LayerNorm", "ReLU"]
    assert [name for name, _ in layers.named_parameters()] == [
        "1.weight", "1.bias", "2.weight", "2.bias", "3.weight", "3.bias"]
    replacement = nn.Linear(2, 2)
    layers[1] = replacement
    assert layers[1] is replacement and isinstance(layers[1:3], nn.ModuleList) and len(layers[1:3]) == 2
    with pytest.raises(IndexError, match="index -6 is out of range for 5 modules"):
        layers[-6]
    with pytest.raises(NotImplementedError, match="container"):
        layers(ta.ones(2))


# ----------------------------------------------------------------------------- bad input


def test_linear_wrong_feature_size_names_both_sizes(device, route):
    layer = route(nn.Linear(3, 4, device=device))
    with pytest.raises(ValueError, match=r"in_features=3.*size 5 \(input shape \(2, 5\)\), expected 3"):
        layer(ta.ones(2, 5, device=device))


@pytest.mark.parametrize("bad", [10, -1, -11])
def test_embedding_module_rejects_bad_indices(bad, device):
    table = nn.Embedding(10, 3, device=device)
    with pytest.raises(IndexError, match=f"index {bad} is out of range for a table of 10 rows"):
        table(ta.tensor([0, bad, 2], device=device))
    with pytest.raises(TypeError, match="indices must be integers"):
        table(ta.tensor([0.0, 1.0], device=device))


def test_constructor_arguments_are_checked():
    with pytest.raises(ValueError, match="approximate must be 'none' or 'tanh', got 'fast'"):
        nn.GELU("fast")
    with pytest.raises(ValueError, match="padding_idx 5 must be within the 5 rows"):
        nn.Embedding(5, 2, padding_idx=5)
