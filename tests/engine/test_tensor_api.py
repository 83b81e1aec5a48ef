"""The everyday tensor API: new operations through the same factory as the primitives (the registry's ``api``
table), type promotion, in-place operations and their autograd rules, all against PyTorch."""

import numpy as np
import pytest
import torch
from cases import one
from hypothesis import given
from hypothesis import strategies as st
from registry import convert, table
from test_ops import _run_ours, _run_theirs

import tinyattn as ta
from tinyattn import testing as tt

SPECS = table("api")
IDS = [spec.name for spec in SPECS]


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
@given(data=st.data())
def test_matches_torch_in_float64(spec, data):
    arrays, options = data.draw(spec.case, label="case")
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="seed"))
    inputs, outs = _run_ours(spec, arrays, options, np.float64, "cpu")
    their_inputs, their_outs = _run_theirs(spec, arrays, options, np.float64)
    for ours, theirs in zip(outs, their_outs, strict=True):
        assert ours.shape == tuple(theirs.shape) and ours.dtype == np.float64
        np.testing.assert_allclose(ours.numpy(), theirs.detach().numpy(), rtol=1e-9, atol=1e-12)
    upstream = [rng.standard_normal(o.shape) for o in outs]
    for k, (o, u) in enumerate(zip(outs, upstream)):
        o.backward(u.copy(), retain_graph=k < len(outs) - 1)
    torch.autograd.backward(their_outs, [torch.from_numpy(u) for u in upstream])
    for i, (t, theirs) in enumerate(zip(inputs, their_inputs)):
        np.testing.assert_allclose(t.grad, theirs.grad.numpy(), rtol=1e-9, atol=1e-12, err_msg=f"input {i}")


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
@given(data=st.data())
def test_gradcheck(spec, data):
    arrays, options = data.draw(spec.case, label="case")
    inputs = [ta.tensor(a, requires_grad=True) for a in arrays]
    options = {k: convert(v, ta.tensor) for k, v in options.items()}
    assert tt.gradcheck(lambda *xs: spec.ours(*xs, **options), inputs)


# ----------------------------------------------------------------------------- type promotion

DTYPES = [np.bool_, np.uint8, np.int32, np.int64, np.float32, np.float64]


@pytest.mark.parametrize("a_dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("b_dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("b_shape", [(3,), ()], ids=["tensor", "0-d"])
def test_binary_promotion_matches_torch(a_dtype, b_dtype, b_shape):
    a, b = np.ones(3, dtype=a_dtype), np.full(b_shape, 2, dtype=b_dtype)
    for op in (lambda x, y: x + y, lambda x, y: x * y, lambda x, y: x / y):
        ours = op(ta.tensor(a), ta.tensor(b))
        theirs = op(torch.from_numpy(a), torch.from_numpy(b))
        assert ours.dtype == np.dtype(str(theirs.dtype).removeprefix("torch."))
        np.testing.assert_allclose(ours.numpy().astype(float), theirs.numpy().astype(float))


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("scalar", [2, 2.5, True], ids=["int", "float", "bool"])
def test_python_scalars_do_not_upcast(dtype, scalar):
    ours, theirs = ta.tensor(np.ones(2, dtype=dtype)) * scalar, torch.from_numpy(np.ones(2, dtype=dtype)) * scalar
    assert ours.dtype == np.dtype(str(theirs.dtype).removeprefix("torch."))


def test_promotion_carries_the_gradient_back_in_each_dtype():
    a = ta.tensor(np.array([1.0, 2.0], dtype=np.float32), requires_grad=True)
    b = ta.tensor(np.array([3.0, 4.0]), requires_grad=True)
    (a * b).backward(np.ones(2))
    assert a.grad.dtype == np.float32 and b.grad.dtype == np.float64
    np.testing.assert_array_equal(a.grad, [3.0, 4.0])


# ----------------------------------------------------------------------------- in-place rules


def test_in_place_on_a_saved_tensor_raises_instead_of_a_wrong_gradient():
    x = ta.tensor([1.0, 2.0], requires_grad=True)
    y = x.exp()
    y.add_(1)
    with pytest.raises(RuntimeError, match="Exp saved for its backward was modified by an in-place operation"):
        y.sum().backward()
    h = x * 1
    z = h * x  # Mul saved h
    v = h.view(2, 1)
    v[0] = 5.0  # through a view: the shared counter sees it
    with pytest.raises(RuntimeError, match="Mul saved"):
        z.sum().backward()


def test_in_place_through_detach_is_seen_as_in_torch():
    """``detach()`` shares the count of in-place writes: a node that saved the tensor notices a write made through
    it (a compiled attention's node keeps its output for backward), in PyTorch and here."""
    for lib in (ta, torch):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        y = x.exp()  # Exp saves its output
        with lib.no_grad():
            y.detach().add_(1)
        with pytest.raises(RuntimeError, match="modified by an in-?place operation"):
            y.sum().backward()
    q, k, v = (ta.tensor(np.random.default_rng(i).standard_normal((2, 3, 4)), requires_grad=True) for i in range(3))
    out, _ = ta.compile(ta.nn.functional.scaled_dot_product_attention)(q, k, v, need_weights=False)
    assert type(out.grad_fn).__name__ == "Attention"
    out.detach().mul_(2)
    with pytest.raises(RuntimeError, match="modified by an in-place operation"):
        out.sum().backward()
    detached = out.detach()  # cut from the graph all the same
    assert detached._ctx is None and not detached.requires_grad and out._ctx is not None


def test_in_place_on_a_tensor_no_node_saved_is_allowed_as_in_torch():
    for lib in (ta, torch):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        h = x + 1
        y = h + 1  # Add saves nothing
        h += 5
        (y.sum() + (h * h).sum()).backward()
        np.testing.assert_allclose(np.asarray(x.grad), [2 * (1 + 1 + 5) + 1, 2 * (2 + 1 + 5) + 1])


def test_in_place_on_a_leaf_that_requires_grad_is_refused_outside_no_grad():
    w = ta.ones(3, requires_grad=True)
    for change in (lambda: w.add_(1), lambda: w.__setitem__(0, 2.0), lambda: w.view(3).fill_(0),
                   lambda: w.__iadd__(1)):
        with pytest.raises(RuntimeError, match="leaf"):
            change()
    with ta.no_grad():
        w.mul_(2)
        w[0] = 7.0
    np.testing.assert_array_equal(w.numpy(), [7.0, 2.0, 2.0])
    assert w.is_leaf and w.requires_grad


def test_assignment_into_a_tensor_without_grad_makes_it_part_of_the_graph():
    value = ta.tensor(np.array([2.0, 3.0]), requires_grad=True)
    buffer = ta.zeros(4, dtype=ta.float64)
    buffer[1:3] = value
    (buffer * ta.tensor(np.arange(4.0))).sum().backward()
    np.testing.assert_array_equal(value.grad, [1.0, 2.0])


def test_d2l_sequence_mask_through_a_view_matches_torch():
    """d2l's masked softmax: ``X[~mask] = -1e6`` on a reshaped view, inside a differentiable function."""
    def masked_softmax(lib, X, valid_lens):
        shape = X.shape
        X = X.reshape(-1, shape[-1])
        mask = lib.arange(shape[-1], dtype=lib.float32)[None, :] < valid_lens.repeat_interleave(shape[1])[:, None]
        X[~mask] = -1e6
        return lib.nn.functional.softmax(X.reshape(shape), dim=-1)

    rng = np.random.default_rng(0)
    scores, upstream = rng.standard_normal((2, 3, 4)), rng.standard_normal((2, 3, 4))
    results = []
    for lib in (ta, torch):
        x = lib.tensor(scores, requires_grad=True)
        out = masked_softmax(lib, x * 2, lib.tensor([2, 3]))
        out.backward(lib.tensor(upstream))
        results.append((np.asarray(out.detach().numpy()), np.asarray(x.grad)))
    np.testing.assert_allclose(results[0][0], results[1][0], rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(results[0][1], results[1][1], rtol=1e-9, atol=1e-12)


def test_everyday_functions_without_gradient_match_torch():
    x = np.array([[0.0, 3.0, -1.0], [2.0, 0.0, 5.0]])
    ours, theirs = ta.tensor(x), torch.from_numpy(x)
    for f in (lambda m, t: m.argmax(t, dim=1), lambda m, t: t.argmax(), lambda m, t: m.nonzero(t),
              lambda m, t: m.all(t > -2), lambda m, t: t.max(dim=0).indices, lambda m, t: m.topk(t, 2).indices,
              lambda m, t: (t > 0) & ~(t > 4), lambda m, t: t != 0, lambda m, t: m.cat([t, t], 1),
              lambda m, t: m.concat([t, t]), lambda m, t: m.triu(m.ones(3, 3), diagonal=1).type(m.uint8) == 0,
              lambda m, t: m.bmm(t[None], t.T[None])):
        np.testing.assert_array_equal(np.asarray(f(ta, ours).numpy()), f(torch, theirs).numpy())
    assert ours.dim() == 2 and ours.type() == "torch.DoubleTensor" and ours.float().type() == "torch.FloatTensor"
    assert ta.from_numpy(x).data is x and ta.empty(2, 3).shape == (2, 3)


def test_multinomial_draws_follow_the_weights():
    ta.manual_seed(0)
    weights = ta.tensor([[0.0, 1.0, 3.0], [5.0, 0.0, 0.0]])
    draws = ta.multinomial(weights, 4000, replacement=True).numpy()
    assert (draws[1] == 0).all() and not (draws[0] == 0).any()
    assert abs((draws[0] == 2).mean() - 0.75) < 0.03
    without = ta.multinomial(weights[0], 2).numpy()
    assert sorted(without.tolist()) == [1, 2]


def test_enable_grad_inside_no_grad_and_backward_gradient_keyword():
    x = ta.tensor([1.0, 2.0], requires_grad=True)
    with ta.no_grad():
        with ta.enable_grad():
            y = x * 3
    y.backward(gradient=ta.tensor([1.0, 1.0]))
    np.testing.assert_array_equal(x.grad, [3.0, 3.0])


# ----------------------------------------------------------------------------- autograd.Function


class _ScaledTanh(ta.autograd.Function):
    @staticmethod
    def forward(ctx, x, scale, bias):
        y = (x * scale).tanh() + bias
        ctx.save_for_backward(x, y - bias)
        ctx.scale = scale
        return y

    @staticmethod
    def backward(ctx, grad_output):
        x, t = ctx.saved_tensors
        grad_x = grad_output * ctx.scale * (1 - t * t) if ctx.needs_input_grad[0] else None
        return grad_x, None, grad_output if ctx.needs_input_grad[2] else None


@given(case=one().map(lambda case: case[0][0]))
def test_autograd_function_passes_gradcheck_and_matches_the_composed_form(case):
    x = ta.tensor(case, requires_grad=True)
    bias = ta.tensor(np.float64(0.25), requires_grad=True)
    assert tt.gradcheck(lambda x, b: _ScaledTanh.apply(x, 1.5, b), [x, bias])
    upstream = np.random.default_rng(0).standard_normal(x.shape)
    _ScaledTanh.apply(x, 1.5, bias).backward(upstream)
    custom = x.grad.copy(), bias.grad.copy()
    x.grad = bias.grad = None
    ((x * 1.5).tanh() + bias).backward(upstream)
    np.testing.assert_allclose(custom[0], x.grad, rtol=1e-12)
    np.testing.assert_allclose(custom[1], bias.grad, rtol=1e-12)


def test_autograd_function_notices_an_in_place_change_to_a_saved_tensor():
    x = ta.tensor([0.5, 1.0], requires_grad=True)
    h = x * 1
    y = _ScaledTanh.apply(h, 2.0, 0.0)
    h.add_(1)
    with pytest.raises(RuntimeError, match="save_for_backward was modified"):
        y.sum().backward()
