"""The Tensor and the graph walk: invariants no single operation shows, and errors that teach.

Released graphs, retain_graph, gradient accumulation, no_grad, detach, a 100,000-deep
chain, the dtype rules of ``ta.tensor``, conversions (``.to``, ``.numpy``, ``.item``) and
the bad inputs a user will try. PyTorch is the oracle where it has an answer.
"""

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import tinyattn as ta
from tinyattn import backend
from tinyattn import testing as tt


def _graph(x):
    """A small graph with shared subexpressions: x feeds three branches."""
    y = x.tanh() * x
    return (y + x.exp()) / (1 + x * x)


# ----------------------------------------------------------------------------- the graph walk


def test_second_backward_raises_and_names_the_fix(device):
    x = ta.tensor([0.5, -1.0], requires_grad=True, device=device)
    y = _graph(x).sum()
    y.backward()
    with pytest.raises(RuntimeError, match="retain_graph=True"):
        y.backward()


@given(x=tt.arrays((3, 2)), seed=st.integers(0, 2**32 - 1))
def test_retain_graph_walks_twice_and_gradients_accumulate(device, x, seed):
    upstream = np.random.default_rng(seed).standard_normal(x.shape)
    ours = ta.tensor(x, requires_grad=True, device=device)
    out = _graph(ours)
    out.backward(backend.to_device(upstream, device), retain_graph=True)
    first = backend.to_numpy(ours.grad)
    out.backward(backend.to_device(upstream, device))  # the graph was kept, so this works
    theirs = torch.tensor(x, requires_grad=True)
    _graph(theirs).backward(torch.from_numpy(upstream))
    np.testing.assert_allclose(first, theirs.grad.numpy(), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(backend.to_numpy(ours.grad), 2 * first, rtol=1e-12)
    with pytest.raises(RuntimeError, match="second time"):
        out.backward(backend.to_device(upstream, device))


def test_accumulation_over_two_graphs_matches_torch():
    x = np.array([0.3, -1.2, 2.0])
    ours, theirs = ta.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    for fn in (lambda t: (t * t).sum(), lambda t: t.exp().mean()):
        fn(ours).backward()
        fn(theirs).backward()
    np.testing.assert_allclose(ours.grad, theirs.grad.numpy(), rtol=1e-12)


def test_released_graph_frees_saved_arrays():
    x = ta.tensor([1.0, 2.0], requires_grad=True)
    y = x.exp()
    node = y._ctx
    assert hasattr(node, "out")
    y.sum().backward()
    assert not hasattr(node, "out") and node.released


def test_a_100000_deep_chain_backpropagates_without_recursion():
    x = ta.tensor(np.array([1.0]), requires_grad=True)
    y = x
    for _ in range(100_000):
        y = y * 1.0
    y.backward(ta.tensor(np.array([3.0])))
    np.testing.assert_array_equal(x.grad, [3.0])
    del y  # freeing the chain must not recurse either


def test_backward_on_a_leaf_copies_the_upstream_gradient(device):
    x = ta.tensor([1.0, 2.0], requires_grad=True, device=device)
    upstream = backend.to_device(np.array([3.0, 4.0], dtype=np.float32), device)
    x.backward(upstream)
    x.backward(upstream)  # accumulates into x.grad, must not write into upstream
    np.testing.assert_array_equal(backend.to_numpy(upstream), [3.0, 4.0])
    np.testing.assert_array_equal(backend.to_numpy(x.grad), [6.0, 8.0])


class _Returns(ta.Function):
    """``y = x₀ + x₁``, whose backward returns what the test sets: ``fresh`` arrays, one it ``kept``, the
    ``same`` array twice, a ``view``, or the upstream gradient itself (``upstream``)."""

    how, kept = "fresh", None

    def forward(self, a, b):
        return a + b

    def backward(self, grad):
        if self.how == "fresh":
            return grad * 2.0, grad * 3.0
        if self.how == "kept":
            return self.kept, grad * 3.0
        if self.how == "same":
            same = grad * 2.0
            return same, same
        if self.how == "view":
            return (grad * 2.0)[:], grad * 3.0
        return grad, grad


@pytest.mark.parametrize("how", ["fresh", "kept", "same", "view", "upstream"])
def test_a_leaf_takes_a_gradient_no_one_else_holds_and_copies_any_other(how, monkeypatch):
    monkeypatch.setattr(_Returns, "how", how)
    monkeypatch.setattr(_Returns, "kept", np.full(3, 5.0))
    a, b = (ta.tensor(np.zeros(3), requires_grad=True) for _ in range(2))
    upstream = np.array([1.0, 2.0, 3.0])
    y = _Returns.apply(a, b)
    y.backward(upstream)
    if how == "fresh":  # taken as it came: each leaf's .grad is the array the backward made
        assert a.grad.base is None and b.grad.base is None
    ga, gb = a.grad.copy(), b.grad.copy()
    a.grad += 100.0  # an optimizer (or clip_grad_norm_) writes a .grad in place: nothing else may change
    np.testing.assert_array_equal(b.grad, gb)
    np.testing.assert_array_equal(upstream, [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(_Returns.kept, np.full(3, 5.0))
    y2 = _Returns.apply(a, b)
    y2.backward(upstream)  # accumulated in place into arrays the leaves own
    np.testing.assert_array_equal(a.grad, ga + 100.0 + ga)
    np.testing.assert_array_equal(b.grad, gb + gb)


@pytest.mark.parametrize("how", ["kept", "same", "upstream"])
def test_a_debugger_reading_every_frames_locals_never_makes_a_shared_gradient_look_unshared(how, monkeypatch):
    import sys

    monkeypatch.setattr(_Returns, "how", how)
    monkeypatch.setattr(_Returns, "kept", np.full(3, 5.0))
    a, b = (ta.tensor(np.zeros(3), requires_grad=True) for _ in range(2))
    upstream = np.array([1.0, 2.0, 3.0])
    y = _Returns.apply(a, b)

    def tracer(frame, event, arg):  # as a debugger's variables pane does, at every line
        frame.f_locals  # noqa: B018 (read for its side effect: a snapshot of the locals)
        return tracer

    sys.settrace(tracer)
    try:
        y.backward(upstream)
    finally:
        sys.settrace(None)
    a.grad += 100.0
    assert not np.shares_memory(a.grad, b.grad)
    np.testing.assert_array_equal(upstream, [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(_Returns.kept, np.full(3, 5.0))


def test_a_fresh_gradient_is_not_copied():
    made = []

    class Fresh(ta.Function):
        def forward(self, a):
            return a * 1.0

        def backward(self, grad):
            made.append(grad * 2.0)
            return (made[-1],)

    a = ta.tensor(np.ones(3), requires_grad=True)
    Fresh.apply(a).backward(np.ones(3))  # ``made`` holds the array too: copied
    assert a.grad is not made[0]
    a.grad = None
    made.clear()

    class Taken(ta.Function):
        def forward(self, a):
            return a * 1.0

        def backward(self, grad):
            g = grad * 2.0
            made.append(id(g))
            return (g,)

    Taken.apply(a).backward(np.ones(3))
    assert id(a.grad) == made[0]  # the walk held the only reference: taken, as PyTorch's AccumulateGrad does


def test_one_tensor_used_twice_gets_both_contributions():
    x = ta.tensor(np.array([2.0, -3.0]), requires_grad=True)
    (x * x + x).backward(np.array([1.0, 10.0]))
    np.testing.assert_array_equal(x.grad, [5.0, -50.0])


def test_only_inputs_that_need_it_get_gradients():
    a = ta.tensor([1.0, 2.0], requires_grad=True)
    b = ta.tensor([3.0, 4.0])
    (a * b).backward(np.array([2.0, -1.0], dtype=np.float32))
    assert b.grad is None and not b.requires_grad
    np.testing.assert_array_equal(a.grad, [6.0, -4.0])


# ----------------------------------------------------------------------------- no_grad and detach


def test_no_grad_context_records_nothing_and_restores():
    w = ta.ones(2, requires_grad=True)
    with ta.no_grad():
        assert not ta.is_grad_enabled()
        y = w * 2
        with ta.no_grad():
            pass
        assert not ta.is_grad_enabled()  # a nested block restores the outer state
    assert ta.is_grad_enabled()
    assert not y.requires_grad and y.is_leaf


def test_no_grad_restores_after_an_exception():
    with pytest.raises(ZeroDivisionError), ta.no_grad():
        _ = 1 / 0
    assert ta.is_grad_enabled()


def test_no_grad_as_decorator_keeps_name_and_doc():
    @ta.no_grad()
    def double(t):
        """Twice t."""
        return t * 2

    y = double(ta.ones(2, requires_grad=True))
    assert not y.requires_grad and ta.is_grad_enabled()
    assert double.__name__ == "double" and double.__doc__ == "Twice t."


def test_detach_shares_data_and_stops_the_gradient():
    x = ta.tensor([1.0, 2.0], requires_grad=True)
    d = x.detach()
    assert not d.requires_grad and d.is_leaf and d.data is x.data
    (x * d).sum().backward()  # d is a constant: d(x*d)/dx = d
    np.testing.assert_array_equal(x.grad, [1.0, 2.0])


# ----------------------------------------------------------------------------- ta.tensor and conversions


@pytest.mark.parametrize("data, dtype", [
    (1.5, np.float32),
    ([1.0, 2.0], np.float32),
    ([[1, 2]], np.int64),
    (3, np.int64),
    (True, np.bool_),
    (np.array([1.0, 2.0]), np.float64),
    (np.array([1.0], dtype=np.float32), np.float32),
    (np.array([1, 2], dtype=np.int32), np.int32),
    (np.float64(2.5), np.float64),
], ids=["float", "float-list", "int-list", "int", "bool", "float64-array", "float32-array", "int32-array",
        "float64-scalar"])
def test_tensor_dtype_rules_match_torch(data, dtype):
    ours = ta.tensor(data)
    assert ours.dtype == dtype
    theirs = torch.tensor(data) if not isinstance(data, np.ndarray) else torch.from_numpy(data)
    assert str(theirs.dtype).removeprefix("torch.") == np.dtype(dtype).name


def test_tensor_from_arrays_and_tensors_on_every_device(device):
    ours = ta.tensor(np.array([1.0, 2.0]), device=device, dtype=ta.float32)
    assert ours.device == device and ours.dtype == np.float32
    again = ta.Tensor(ours, requires_grad=True)
    assert again.device == device and again.requires_grad
    assert ta.tensor(ours.data).device == device  # a backend array stays where it is


def test_tensor_copies_its_data_and_the_class_shares_it(device):
    source = ta.tensor(np.array([1.0, 2.0]), device=device)
    copied, shared = ta.tensor(source), ta.Tensor(source.data)
    assert copied.data is not source.data and shared.data is source.data
    host = np.array([1.0, 2.0])
    from_host = ta.tensor(host, device=device)
    host[0] = 5.0  # torch.tensor copies too: the tensor does not see this
    np.testing.assert_array_equal(from_host.numpy(), [1.0, 2.0])


def test_to_changes_dtype_and_device_and_passes_the_gradient_back(device):
    x = ta.tensor([0.5, 1.5], requires_grad=True)  # float32 on cpu
    y = x.to(device).double()
    assert y.device == device and y.dtype == np.float64
    (y * y).backward(ta.tensor(np.array([2.0, -3.0]), device=device))  # d(y²)/dx = 2y, times the upstream
    assert x.grad.dtype == np.float32 and type(x.grad) is np.ndarray
    np.testing.assert_allclose(x.grad, [2.0, -9.0])
    assert x.to(ta.float32) is x and x.to("cpu") is x
    as_int = x.to(ta.int64)
    assert as_int.dtype == np.int64 and not as_int.requires_grad


def test_numpy_is_a_host_copy(device):
    x = ta.tensor([1.0, 2.0], device=device)
    host = x.numpy()
    assert type(host) is np.ndarray
    host[0] = 99.0
    np.testing.assert_array_equal(x.numpy(), [1.0, 2.0])


def test_item_and_its_error():
    assert ta.tensor([[2.5]]).item() == 2.5 and isinstance(ta.tensor(3).item(), int)
    with pytest.raises(ValueError, match=r"shape is \(2,\)"):
        ta.tensor([1.0, 2.0]).item()


def test_truth_value_and_number_conversions_match_torch():
    assert bool(ta.tensor([2.0]) > 1.0) and not bool(ta.tensor(0.0))
    assert float(ta.tensor([[1.5]])) == 1.5 and int(ta.tensor(3)) == 3
    with pytest.raises(RuntimeError, match=r"shape \(2,\) is ambiguous"):
        bool(ta.tensor([1.0, 2.0]) > 0)
    with pytest.raises(RuntimeError):
        bool(torch.tensor([1.0, 2.0]) > 0)  # PyTorch refuses too


def test_shape_properties_match_torch():
    data = np.zeros((2, 3, 4))
    ours, theirs = ta.tensor(data), torch.from_numpy(data)
    assert ours.shape == tuple(theirs.shape) and ours.ndim == theirs.ndim and len(ours) == len(theirs)
    assert ours.size() == tuple(theirs.size()) and ours.size(1) == theirs.size(1) == 3
    assert ours.size(-1) == 4 and ours.numel() == theirs.numel()


def test_ndarray_on_the_left_defers_to_the_tensor():
    x = ta.tensor(np.array([1.0, 2.0]), requires_grad=True)
    y = np.array([3.0, 4.0]) * x
    assert isinstance(y, ta.Tensor) and y.requires_grad


@pytest.mark.parametrize("layout", ["contiguous", "transposed", "head-split", "stepped"])
def test_batched_matmul_of_every_layout_equals_numpys(layout):
    """Batched operands as views (transposed, split into heads, taken with a step): values and gradients
    equal those of the same operands copied to C order (the product reads any layout)."""
    rng = np.random.default_rng(0)
    base = rng.standard_normal((2, 6, 3, 8))  # (B, L, H, 2·D)
    view = {"contiguous": np.ascontiguousarray(base.transpose(0, 2, 1, 3)),  # (B, H, L, 2·D)
            "transposed": base.transpose(0, 2, 3, 1).swapaxes(-1, -2),
            "head-split": base.transpose(0, 2, 1, 3),
            "stepped": base.transpose(0, 2, 1, 3)[..., ::2]}[layout]
    if layout != "stepped":
        view = view[..., :4]
    other = rng.standard_normal((2, 3, 4, 5))
    grad = rng.standard_normal((2, 3, 6, 5))
    a, b = ta.tensor(view, requires_grad=True), ta.tensor(other, requires_grad=True)
    (a @ b).backward(ta.tensor(grad))
    plain = np.ascontiguousarray(view)
    np.testing.assert_allclose((a @ b).numpy(), plain @ other, rtol=1e-12)
    np.testing.assert_allclose(a.grad, grad @ other.swapaxes(-1, -2), rtol=1e-12)
    np.testing.assert_allclose(b.grad, plain.swapaxes(-1, -2) @ grad, rtol=1e-12)


# ----------------------------------------------------------------------------- bad input


def test_matmul_mismatch_names_both_shapes():
    with pytest.raises(ValueError, match=r"matmul: \(2, 3\) @ \(4, 5\): inner sizes 3 and 4 differ"):
        ta.zeros(2, 3) @ ta.zeros(4, 5)
    with pytest.raises(ValueError, match=r"matmul: \(2, 2, 3\) @ \(3, 3, 1\)"):
        ta.zeros(2, 2, 3) @ ta.zeros(3, 3, 1)


@pytest.mark.parametrize("op, name", [(lambda a, b: a + b, "add"), (lambda a, b: a * b, "mul"),
                                      (lambda a, b: a - b, "sub"), (lambda a, b: a / b, "div")])
def test_broadcast_mismatch_names_the_op_and_both_shapes(op, name, device):
    with pytest.raises(ValueError, match=rf"{name}: shapes \(2, 3\) and \(4,\) cannot be broadcast"):
        op(ta.zeros(2, 3, device=device), ta.zeros(4, device=device))


def test_backward_on_a_non_scalar_needs_grad():
    y = ta.ones(2, 3, requires_grad=True) * 2
    with pytest.raises(RuntimeError, match=r"shape \(2, 3\): pass grad"):
        y.backward()
    with pytest.raises(RuntimeError, match=r"grad has shape \(3,\), expected .* \(2, 3\)"):
        y.backward(np.ones(3, dtype=np.float32))


def test_backward_without_requires_grad():
    with pytest.raises(RuntimeError, match="does not require grad"):
        ta.ones(2).sum().backward()


def test_requires_grad_on_an_integer_tensor():
    with pytest.raises(RuntimeError, match="floating-point.*int64"):
        ta.tensor([1, 2], requires_grad=True)
    with pytest.raises(RuntimeError, match="floating-point"):
        ta.arange(3).requires_grad_()


def test_mixed_devices_name_both():
    a, b = ta.ones(2), ta.ones(2, device="strict", requires_grad=True)
    with pytest.raises(RuntimeError, match="'cpu', 'strict'"):
        a + b
    with pytest.raises(RuntimeError, match="device 'cpu', the tensor on 'strict'"):
        (b * 2).sum().backward(np.ones((), dtype=np.float32))


def test_out_of_range_dim_is_an_index_error():
    with pytest.raises(IndexError, match=r"dim 2 is out of range .* 2 dimensions"):
        ta.ones(2, 3).sum(2)


def test_reshape_error_names_both_shapes():
    with pytest.raises(ValueError, match=r"reshape: cannot view shape \(2, 3\) \(6 elements\) as \(4,\)"):
        ta.ones(2, 3).reshape(4)
