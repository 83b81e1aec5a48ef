"""``.grad`` and ``.data`` under compat are tensors sharing the arrays, as in torch: the same torch code runs
on both libraries (``lib`` is ``tinyattn.compat`` or ``torch``) and leaves the same values and gradients.
The native API keeps its arrays (the last tests)."""

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import tinyattn as ta
import tinyattn.compat as compat

RTOL, ATOL = 1e-9, 1e-10
LIBS = (compat, torch)


def _twin_layers(in_features, out_features, seed=0):
    """A float64 ``nn.Linear`` in each library with torch's initial weights."""
    torch.manual_seed(seed)
    theirs = torch.nn.Linear(in_features, out_features).double()
    ours = compat.nn.Linear(in_features, out_features).double()
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
    return ours, theirs


def _backward(model, lib, x, upstream):
    model(lib.tensor(x)).backward(lib.tensor(upstream))


def _assert_same(ours, theirs):
    for (name, a), b in zip(ours.named_parameters(), theirs.parameters()):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=RTOL, atol=ATOL, err_msg=name)
        assert (a.grad is None) == (b.grad is None), name
        if b.grad is not None:
            np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=RTOL, atol=ATOL, err_msg=name)


def _run_on_both(step, in_features=3, out_features=2, batch=4, seed=0):
    """One backward on a fixed batch in both libraries, then ``step(model, lib)`` in each; the two compared."""
    rng = np.random.default_rng(seed)
    x, upstream = rng.standard_normal((batch, in_features)), rng.standard_normal((batch, out_features))
    layers = _twin_layers(in_features, out_features, seed)
    results = []
    for model, lib in zip(layers, LIBS):
        assert all(p.grad is None for p in model.parameters())  # before any backward, as in torch
        _backward(model, lib, x, upstream)
        results.append(step(model, lib))
    _assert_same(*layers)
    return results


# Torch code as tutorials write it: each runs unchanged on both libraries.
TORCH_CODE = {
    "p.grad.zero_()": lambda p, lib: p.grad.zero_(),
    "p.grad.data.zero_()": lambda p, lib: p.grad.data.zero_(),
    "p.grad = None": lambda p, lib: setattr(p, "grad", None),
    "p.grad = zeros_like(p)": lambda p, lib: setattr(p, "grad", lib.zeros_like(p)),
    "p.grad.mul_(0.5)": lambda p, lib: p.grad.mul_(0.5),
    "p.grad += 1": lambda p, lib: _iadd_grad(p),
    "p.data.mul_(0.5)": lambda p, lib: p.data.mul_(0.5),
    "p.data.add_(p.grad.data, alpha=-0.1)": lambda p, lib: p.data.add_(p.grad.data, alpha=-0.1),
    "p.data.copy_(p.data * 2)": lambda p, lib: p.data.copy_(p.data * 2),
    "p.data.fill_(0.25)": lambda p, lib: p.data.fill_(0.25),
    "p.data *= 0.5": lambda p, lib: _imul_data(p),
    "p.data = p.data.clone() + 1": lambda p, lib: setattr(p, "data", p.data.clone() + 1),
    "p.data[0] = 3": lambda p, lib: p.data.__setitem__(0, 3.0),
    "p.grad[...] = 0": lambda p, lib: p.grad.__setitem__(Ellipsis, 0.0),
    "with no_grad: p -= 0.1 * p.grad": lambda p, lib: _sgd_under_no_grad(p, lib),
}


def _iadd_grad(p):
    p.grad += 1


def _imul_data(p):
    p.data *= 0.5


def _sgd_under_no_grad(p, lib):
    with lib.no_grad():
        p -= 0.1 * p.grad


@pytest.mark.parametrize("code", list(TORCH_CODE))
def test_torch_code_that_writes_data_and_grad_leaves_what_torch_leaves(code):
    def step(model, lib):
        for p in model.parameters():
            TORCH_CODE[code](p, lib)

    _run_on_both(step)


READS = {
    "p.grad.norm()": lambda p: p.grad.norm().item(),
    "p.grad.abs().sum()": lambda p: p.grad.abs().sum().item(),
    "p.grad.numpy()": lambda p: p.grad.numpy(),
    "p.data.clone()": lambda p: p.data.clone().numpy(),
    "p.data.mean(0)": lambda p: p.data.mean(0).numpy(),
    "p.grad.data.max()": lambda p: p.grad.data.max().item(),
    "p.data.shape": lambda p: tuple(p.data.shape),
    "p.grad.requires_grad": lambda p: p.grad.requires_grad,
    "p.data.requires_grad": lambda p: p.data.requires_grad,
}


@pytest.mark.parametrize("code", list(READS))
def test_torch_code_that_reads_data_and_grad_gets_what_torch_gets(code):
    ours, theirs = _run_on_both(lambda model, lib: [READS[code](p) for p in model.parameters()])
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, rtol=RTOL, atol=ATOL)


class MomentumSGD:
    """A hand-written optimizer as torch tutorials write one: it reads ``p.grad.data`` and updates ``p.data``."""

    def __init__(self, params, lr, momentum, lib):
        self.params, self.lr, self.momentum = list(params), lr, momentum
        self.buffers = [lib.zeros_like(p.data) for p in self.params]

    def zero_grad(self):
        for p in self.params:
            if p.grad is not None:
                p.grad.zero_()

    def step(self):
        for p, buf in zip(self.params, self.buffers):
            buf.mul_(self.momentum).add_(p.grad.data)
            p.data.add_(buf, alpha=-self.lr)


@given(in_features=st.integers(1, 5), out_features=st.integers(1, 4), batch=st.integers(1, 6),
       lr=st.floats(1e-3, 0.5), momentum=st.floats(0.0, 0.95), steps=st.integers(1, 4), seed=st.integers(0, 2**16))
def test_a_hand_written_optimizer_on_data_and_grad_trains_as_in_torch(in_features, out_features, batch, lr,
                                                                      momentum, steps, seed):
    rng = np.random.default_rng(seed)
    batches = [(rng.standard_normal((batch, in_features)), rng.standard_normal((batch, out_features)))
               for _ in range(steps)]
    layers = _twin_layers(in_features, out_features, seed)
    for model, lib in zip(layers, LIBS):
        optimizer = MomentumSGD(model.parameters(), lr, momentum, lib)
        for x, upstream in batches:
            optimizer.zero_grad()
            _backward(model, lib, x, upstream)
            optimizer.step()
    _assert_same(*layers)


def test_a_write_through_data_is_not_seen_by_autograd_as_in_torch():
    """torch's ``.data`` is cut from the graph: an in-place change through it raises no version error, and the
    backward then reads the changed values. The same here (a write through ``p`` itself would raise)."""
    grads = []
    for lib in LIBS:
        w = lib.tensor(np.array([1.0, 2.0, 3.0]), requires_grad=True)
        x = lib.tensor(np.array([0.5, -1.0, 2.0]), requires_grad=True)
        y = (w * x).sum()
        w.data.mul_(2.0)
        y.backward()
        grads.append((x.grad.numpy(), w.grad.numpy(), w.detach().numpy()))
    for a, b in zip(*grads):
        np.testing.assert_allclose(a, b)


def test_data_and_grad_share_memory_with_the_tensor():
    layer = compat.nn.Linear(3, 2)
    layer(compat.randn(4, 3)).sum().backward()
    w = layer.weight
    view, grad = w.data, w.grad
    view[0, 0] = 7.0
    grad[0, 0] = -7.0
    assert w[0, 0].item() == 7.0 and w.grad[0, 0].item() == -7.0
    assert isinstance(view, compat.Tensor) and not view.requires_grad and view.grad is None


def test_results_computed_from_compat_tensors_are_compat_tensors():
    x = compat.randn(2, 3)
    native_mask = ta.ones(2, 3) > 0
    results = {
        "x * 2": x * 2, "2 * x": 2 * x, "x > 0": x > 0, "~(x > 0)": ~(x > 0), "x.argmax(1)": x.argmax(1),
        "x.max(1).indices": x.max(1).indices, "x.max(1).values": x.max(1).values,
        "x.masked_fill(native_mask, 0)": x.masked_fill(native_mask, 0.0), "x.detach()": x.detach(),
        "x.double()": x.double(), "x.long()": x.long(), "x.data.topk(2).indices": x.data.topk(2).indices,
        "compat.cat([x, x])": compat.cat([x, x]), "x.new_zeros(2)": x.new_zeros(2),
        "compat.nn.functional.one_hot(x.argmax(1))": compat.nn.functional.one_hot(x.argmax(1)),
        "compat.nn.functional.pad(x, (1, 1))": compat.nn.functional.pad(x, (1, 1)),
    }
    for code, result in results.items():
        assert type(result) is compat.Tensor, code
        assert type(result.data) is compat.Tensor, code


def test_compat_modules_make_compat_parameters_even_for_a_native_submodule():
    class Net(compat.nn.Module):
        def __init__(self):
            super().__init__()
            self.native = ta.nn.Linear(2, 2)  # a native layer attached to a compat module
            self.fc = compat.nn.Linear(2, 2)
            self.register_buffer("scale", ta.ones(2))

    net = Net()
    assert all(type(p) is compat.nn.Parameter for p in net.parameters())
    assert type(net.scale) is compat.Tensor
    lazy = compat.nn.LazyLinear(3)
    lazy(compat.randn(2, 4))
    assert type(lazy) is compat.nn.Linear and type(lazy.weight) is compat.nn.Parameter


def test_assigning_a_grad_of_another_shape_is_refused_as_in_torch():
    for lib in LIBS:
        p = lib.nn.Parameter(lib.zeros(2, 3))
        with pytest.raises(RuntimeError, match="shape|size"):
            p.grad = lib.zeros(3, 2)


def test_the_native_api_keeps_arrays():
    layer = ta.nn.Linear(3, 2)
    layer(ta.randn(4, 3)).sum().backward()
    assert type(layer.weight.data) is np.ndarray and type(layer.weight.grad) is np.ndarray
    assert type(layer.weight) is ta.nn.Parameter and type(layer(ta.randn(1, 3))) is ta.Tensor


def test_a_result_of_a_native_and_a_compat_tensor_is_compat_whichever_comes_first():
    x, native = compat.randn(3, 4), ta.randn(3, 4)
    mask, native_mask = x > 0, native > 0
    for code, result in {"native > x": native > x, "native_mask & mask": native_mask & mask,
                         "native_mask | mask": native_mask | mask, "native_mask ^ mask": native_mask ^ mask,
                         "native // x": native // x, "native % x": native % x, "native + x": native + x,
                         "ta.where(native_mask, native, x)": ta.where(native_mask, native, x)}.items():
        assert type(result) is compat.Tensor, code
    assert type(native > native) is ta.Tensor and type(native + native) is ta.Tensor


def test_a_custom_functions_backward_gets_compat_gradients():
    seen = []

    class Double(compat.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            return a * 2

        @staticmethod
        def backward(ctx, grad):
            seen.append((type(grad), type(grad.data)))
            return grad * 2

    x = compat.randn(3, requires_grad=True)
    Double.apply(x).sum().backward()
    assert seen == [(compat.Tensor, compat.Tensor)] and type(x.grad) is compat.Tensor


def test_compat_layers_inside_a_transformer_layer_are_compat_and_keep_the_fused_route():
    from tinyattn.fast import router as routes

    layer = compat.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True, activation=compat.nn.GELU())
    assert isinstance(layer.linear1, compat.nn.Linear) and isinstance(layer.norm1, compat.nn.LayerNorm)
    touched = []
    layer.apply(lambda m: touched.append(m) if isinstance(m, compat.nn.Linear) else None)  # torch's init idiom
    assert len(touched) == 2 + 4  # linear1, linear2; q, k, v and out projections
    x = compat.randn(2, 5, 8)
    compiled = compat.compile(layer)
    assert isinstance(compiled.linear1, compat.nn.Linear) and isinstance(compiled.norm1, compat.nn.LayerNorm)
    route = routes.LayerRoute(True, "gelu", False, False)  # both blocks fused (too small to pool)
    assert routes.encoder_layer(compiled, x, None) == route
    assert type(compiled(x).grad_fn).__name__ == "FeedForwardBlock" and type(layer(x).grad_fn).__name__ == "Add"
    assert type(compat.nn.Transformer.generate_square_subsequent_mask(3)) is compat.Tensor
    assert type(x.new_tensor([1.0, 2.0])) is compat.Tensor
