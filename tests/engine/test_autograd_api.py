"""The autograd API around higher-order gradients: ``ta.autograd.grad`` and its errors, ``backward``'s
``inputs`` and ``create_graph``, tensor hooks, ``retain_grad``, grad modes, ``detach_``,
``ta.utils.checkpoint``, ``detect_anomaly``, and PyTorch-style ``Function``s differentiated twice.

Values are checked against closed forms or torch (float64, random upstream gradients).
"""

import inspect

import numpy as np
import pytest
import torch

import tinyattn as ta
import tinyattn.nn as nn
import tinyattn.nn.functional as F
from tinyattn import testing as tt


def rand(*shape, seed=0, requires_grad=True):
    return ta.tensor(np.random.default_rng(seed).standard_normal(shape), requires_grad=requires_grad)


def same(a, b, rtol=1e-12, atol=1e-12):
    np.testing.assert_allclose(a.numpy() if isinstance(a, ta.Tensor) else a,
                               b.numpy() if isinstance(b, ta.Tensor) else b, rtol=rtol, atol=atol)


# ----------------------------------------------------------------------------- autograd.grad


def test_grad_returns_tensors_and_touches_no_grad_attribute():
    x = rand(3)
    v = rand(3, seed=1, requires_grad=False)
    (g,) = ta.autograd.grad(x.tanh(), x, v)
    assert isinstance(g, ta.Tensor) and not g.requires_grad and g.dtype == np.float64
    same(g, v.numpy() / np.cosh(x.numpy()) ** 2)
    assert x.grad is None
    (g_list,) = ta.autograd.grad([x.tanh()], [x], [v.numpy()])  # lists, and an array for grad_outputs
    same(g_list, g)


def test_grad_several_outputs_and_inputs_sum_over_the_outputs():
    a, b = rand(2, 3), rand(3, seed=1)
    va, vb = rand(2, 3, seed=2, requires_grad=False), rand(seed=3, requires_grad=False)
    out1, out2 = a * b, (a.exp() * b).sum()
    ga, gb = ta.autograd.grad([out1, out2], [a, b], [va, vb])
    ta_, tb = (torch.tensor(t.numpy(), requires_grad=True) for t in (a, b))
    expected = torch.autograd.grad([ta_ * tb, (ta_.exp() * tb).sum()], [ta_, tb],
                                   [torch.tensor(va.numpy()), torch.tensor(vb.numpy())])
    same(ga, expected[0].numpy())
    same(gb, expected[1].numpy())


def test_grad_with_respect_to_a_non_leaf():
    x = rand(4)
    y = x * 2
    z = (y.exp() * y).sum()
    gy, gx = ta.autograd.grad(z, [y, x])
    same(gy, np.exp(y.numpy()) * (1 + y.numpy()))
    same(gx, 2 * gy.numpy())


def test_grad_retain_graph_defaults_to_create_graph():
    x = rand(3)
    y = (x * x).sum()
    ta.autograd.grad(y, x)  # retain_graph=None, create_graph=False: the graph is freed
    with pytest.raises(RuntimeError, match="backward through the graph a second time: the arrays saved by"):
        ta.autograd.grad(y, x)
    y = (x * x).sum()
    (g1,) = ta.autograd.grad(y, x, retain_graph=True)
    (g2,) = ta.autograd.grad(y, x)
    same(g1, g2)
    y = (x * x).sum()
    (g,) = ta.autograd.grad(y, x, create_graph=True)  # keeps the graph: a second walk works
    (again,) = ta.autograd.grad(y, x)
    same(g, again)
    assert g.requires_grad and g.grad_fn is not None


def test_grad_allow_unused_and_materialize_grads():
    x, unused = rand(3), rand(2, seed=1)
    with pytest.raises(RuntimeError, match=r"inputs\[1\] \(shape \(2,\)\) was not used.*allow_unused=True"):
        ta.autograd.grad(x.sum(), [x, unused])
    gx, gu = ta.autograd.grad(x.sum(), [x, unused], allow_unused=True)
    assert gu is None
    same(gx, np.ones(3))
    gx, gu = ta.autograd.grad((x * x).sum(), [x, unused], materialize_grads=True)
    assert isinstance(gu, ta.Tensor) and gu.shape == (2,) and gu.dtype == np.float64
    same(gu, np.zeros(2))
    with pytest.raises(ValueError, match="materialize_grads=True needs allow_unused=True"):
        ta.autograd.grad(x.sum(), [x, unused], allow_unused=False, materialize_grads=True)


def test_grad_errors_name_what_is_wrong():
    x = rand(2, 3)
    with pytest.raises(RuntimeError, match=r"only for scalar outputs.*shape \(2, 3\)"):
        ta.autograd.grad(x * 2, x)
    constant = rand(3, requires_grad=False)
    with pytest.raises(RuntimeError, match=r"inputs\[1\] \(shape \(3,\)\) does not require grad"):
        ta.autograd.grad(x.sum(), [x, constant])
    with pytest.raises(RuntimeError, match=r"outputs\[0\].*does not require grad"):
        ta.autograd.grad(constant.sum(), x)
    with pytest.raises(RuntimeError, match=r"grad has shape \(3,\), expected the tensor's shape \(2, 3\)"):
        ta.autograd.grad(x * 2, x, ta.ones(3, dtype=ta.float64))
    with pytest.raises(RuntimeError, match="2 grad_outputs for 1 outputs"):
        ta.autograd.grad(x.sum(), x, [None, None])


def test_second_order_through_grad_matches_torch():
    x = rand(2, 3)
    v, u = rand(2, 3, seed=1, requires_grad=False), rand(2, 3, seed=2, requires_grad=False)
    (g,) = ta.autograd.grad((x.sin() * x).exp(), x, v, create_graph=True)
    (h,) = ta.autograd.grad((g * u).sum(), x)
    tx = torch.tensor(x.numpy(), requires_grad=True)
    (tg,) = torch.autograd.grad((tx.sin() * tx).exp(), tx, torch.tensor(v.numpy()), create_graph=True)
    (th,) = torch.autograd.grad((tg * torch.tensor(u.numpy())).sum(), tx)
    same(g, tg.detach().numpy(), rtol=1e-10)
    same(h, th.numpy(), rtol=1e-10)


# ----------------------------------------------------------------------------- backward's inputs and create_graph


def test_backward_inputs_accumulates_there_alone():
    a, b = rand(3), rand(3, seed=1)
    y = a * b
    out = (y * y).sum()
    out.backward(inputs=[a, y], retain_graph=True)
    assert b.grad is None
    same(a.grad, 2 * (a.numpy() * b.numpy()) * b.numpy())
    same(y.grad, 2 * y.numpy())  # a non-leaf named in inputs gets its gradient too
    out.backward(inputs=[a])
    same(a.grad, 4 * (a.numpy() * b.numpy()) * b.numpy())  # accumulated
    assert b.grad is None


def test_backward_create_graph_leaves_native_grad_an_array():
    x = rand(3)
    (x ** 3).sum().backward(create_graph=True)
    assert isinstance(x.grad, np.ndarray)
    same(x.grad, 3 * x.numpy() ** 2)
    (x ** 3).sum().backward(create_graph=True)  # accumulates, still an array
    assert isinstance(x.grad, np.ndarray)
    same(x.grad, 6 * x.numpy() ** 2)
    (g,) = ta.autograd.grad((x ** 3).sum(), x, create_graph=True)  # the tensor to differentiate again
    (h,) = ta.autograd.grad(g.sum(), x)
    same(h, 6 * x.numpy())


# ----------------------------------------------------------------------------- hooks and retain_grad


def test_hooks_on_a_leaf_observe_replace_and_are_removed():
    x = rand(3)
    seen = []
    observe = x.register_hook(lambda g: seen.append(g.numpy().copy()))
    upstream = np.array([1.0, -2.0, 0.5])
    (x * 2).backward(upstream)
    same(seen[0], 2 * upstream)
    same(x.grad, 2 * upstream)
    replace = x.register_hook(lambda g: g * 10)
    x.grad = None
    (x * 2).backward(upstream)
    same(x.grad, 20 * upstream)
    assert len(seen) == 2
    replace.remove()
    observe.remove()
    x.grad = None
    (x * 2).backward(upstream)
    same(x.grad, 2 * upstream)
    assert len(seen) == 2


def test_hooks_on_a_non_leaf_change_what_flows_on():
    x = rand(3)
    y = x.exp()
    seen = []
    y.register_hook(lambda g: seen.append(g.numpy().copy()))
    handle = y.register_hook(lambda g: g * 0 + 1)  # the gradient reaching x becomes exp(x)·1
    upstream = np.array([1.0, -2.0, 0.5])
    (y * 3).backward(upstream)
    same(seen[0], 3 * upstream)
    same(x.grad, np.exp(x.numpy()))
    handle.remove()
    x.grad = None
    y = x.exp()
    (y * 3).backward(upstream)
    same(x.grad, 3 * upstream * np.exp(x.numpy()))


def test_hooks_see_tensors_with_a_graph_under_create_graph():
    x = rand(3)
    y = x * x
    kinds = []
    y.register_hook(lambda g: kinds.append(g.requires_grad) or g * x)  # the replacement depends on x too
    (g,) = ta.autograd.grad(y, x, ta.ones(3, dtype=ta.float64), create_graph=True)
    assert kinds == [True] or kinds == [False]
    same(g, 2 * x.numpy() * x.numpy())  # d(x²)/dx · (1·x)
    (h,) = ta.autograd.grad(g.sum(), x)
    same(h, 4 * x.numpy())  # d(2x²)/dx: the hook's x is differentiated too


def test_a_hook_returning_a_wrong_shape_raises_naming_it_and_both_shapes():
    x = rand(2, 3)
    y = x * 2

    def wrong_shape(g):
        return g.sum(0)

    y.register_hook(wrong_shape)
    with pytest.raises(RuntimeError, match=r"hook .*wrong_shape returned a gradient of shape \(3,\).*\(2, 3\)"):
        y.backward(np.ones((2, 3)))
    leaf = rand(2)
    leaf.register_hook(wrong_shape)
    with pytest.raises(RuntimeError, match=r"wrong_shape.*shape \(\).*\(2,\)"):
        (leaf * 3).backward(np.ones(2))
    with pytest.raises(RuntimeError, match="register_hook.*does not require grad"):
        ta.ones(2).register_hook(wrong_shape)


def test_retain_grad_keeps_a_non_leaf_gradient():
    x = rand(3)
    y = x.tanh()
    y.retain_grad()
    assert y.retains_grad and not x.retains_grad
    z = y * y
    upstream = np.array([0.5, -1.0, 2.0])
    z.backward(upstream)
    assert isinstance(y.grad, np.ndarray)
    same(y.grad, 2 * y.numpy() * upstream)
    w = x.exp()  # not retained: no .grad
    w.sum().backward()
    assert w.grad is None
    with pytest.raises(RuntimeError, match="retain_grad.*does not require grad"):
        ta.ones(2).retain_grad()


# ----------------------------------------------------------------------------- grad modes and detach_


def test_set_grad_enabled_as_function_context_manager_and_decorator():
    x = rand(2)
    try:
        ta.set_grad_enabled(False)
        assert not ta.is_grad_enabled() and not (x * 2).requires_grad
    finally:
        ta.set_grad_enabled(True)
    assert ta.is_grad_enabled() and (x * 2).requires_grad
    with ta.set_grad_enabled(False):
        assert not (x * 2).requires_grad
        with ta.set_grad_enabled(True):
            assert (x * 2).requires_grad
        assert not (x * 2).requires_grad
    assert ta.is_grad_enabled()

    @ta.set_grad_enabled(False)
    def frozen(t):
        return t * 2

    assert ta.is_grad_enabled()  # decorating changes nothing until it runs
    assert not frozen(x).requires_grad and (x * 2).requires_grad
    with ta.no_grad():
        assert (ta.set_grad_enabled(True)(lambda t: t * 2))(x).requires_grad
        assert not ta.is_grad_enabled()


def test_inference_mode():
    x = rand(2)
    with ta.inference_mode():
        assert ta.is_inference_mode_enabled() and not ta.is_grad_enabled()
        assert not (x * 2).requires_grad
    assert not ta.is_inference_mode_enabled() and ta.is_grad_enabled()
    with ta.inference_mode(False):
        assert (x * 2).requires_grad and not ta.is_inference_mode_enabled()

    @ta.inference_mode
    def bare(t):
        return t * 2

    @ta.inference_mode()
    def called(t):
        return t * 2

    assert not bare(x).requires_grad and not called(x).requires_grad
    assert (x * 2).requires_grad


def test_detach_in_place():
    x = rand(3)
    y = x * 2
    assert y.detach_() is y
    assert not y.requires_grad and y.is_leaf and y.grad_fn is None
    same(y, 2 * x.numpy())
    z = (y * x).sum()  # y is now a constant
    z.backward()
    same(x.grad, y.numpy())
    base = x * 1
    view = base[1:]
    with pytest.raises(RuntimeError, match="detach_: cannot detach a view"):
        view.detach_()


# ----------------------------------------------------------------------------- checkpoint


def _block(layer):
    return lambda x: F.gelu(layer(x)).tanh() * x


def test_checkpoint_gives_the_gradients_of_the_plain_computation():
    ta.manual_seed(0)
    layer = nn.Linear(4, 4).double()
    x = rand(2, 4)
    upstream = np.random.default_rng(5).standard_normal((2, 4))
    _block(layer)(x).backward(upstream)
    plain = [x.grad.copy()] + [p.grad.copy() for p in layer.parameters()]
    x.grad = None
    layer.zero_grad()
    y = ta.utils.checkpoint(_block(layer), x)
    assert type(y.grad_fn).__name__ == "Checkpoint"
    y.backward(upstream)
    for got, expected in zip([x.grad] + [p.grad for p in layer.parameters()], plain):
        same(got, expected)


def test_checkpoint_restores_the_random_state_for_dropout():
    ta.manual_seed(1)
    layer = nn.Linear(6, 6).double()
    x = rand(3, 6)
    upstream = np.random.default_rng(2).standard_normal((3, 6))

    def block(x):
        return F.dropout(layer(x).tanh(), p=0.5) * x

    ta.manual_seed(7)
    plain_out = block(x)
    plain_out.backward(upstream)
    plain = x.grad.copy()
    x.grad = None
    ta.manual_seed(7)
    out = ta.utils.checkpoint(block, x)
    ta.randn(10)  # the generator moves on before backward; the rerun must not see that
    out.backward(upstream)
    same(out, plain_out)
    same(x.grad, plain)
    assert (plain_out.numpy() == 0).any()  # dropout did drop something


def test_second_order_through_checkpoint():
    ta.manual_seed(2)
    layer = nn.Linear(3, 3).double()
    x = rand(2, 3)
    v, u = np.random.default_rng(3).standard_normal((2, 3)), np.random.default_rng(4).standard_normal((2, 3))
    results = []
    for wrap in (lambda f, x: f(x), ta.utils.checkpoint):
        (g,) = ta.autograd.grad(wrap(_block(layer), x), x, ta.tensor(v), create_graph=True)
        (h,) = ta.autograd.grad((g * ta.tensor(u)).sum(), x)
        results.append((g.numpy(), h.numpy()))
    (g_plain, h_plain), (g_checkpointed, h_checkpointed) = results
    same(g_checkpointed, g_plain)
    same(h_checkpointed, h_plain)
    assert tt.gradgradcheck(lambda x: ta.utils.checkpoint(_block(layer), x), [x])


# ----------------------------------------------------------------------------- anomalies


def test_detect_anomaly_names_the_forward_operation_and_the_user_line():
    x = ta.tensor(np.array([0.0, 1.0]), requires_grad=True)
    with ta.autograd.detect_anomaly():
        line = inspect.currentframe().f_lineno + 1
        y = x.sqrt()  # d sqrt(x)/dx at 0 is inf; times an upstream 0 it is NaN
        with pytest.raises(RuntimeError) as error:
            y.backward(np.array([0.0, 1.0]))
    message = str(error.value)
    assert "SqrtBackward returned nan values" in message and "forward operation Sqrt" in message
    assert f"test_autograd_api.py\", line {line}" in message and "x.sqrt()" in message
    assert not ta.autograd.is_anomaly_enabled()
    y = x.sqrt()  # outside: no check, NaN passes silently as in PyTorch
    y.backward(np.array([0.0, 1.0]))
    assert np.isnan(x.grad[0])


def test_detect_anomaly_catches_nan_under_create_graph():
    x = ta.tensor(np.array([0.0, 4.0]), requires_grad=True)
    with ta.autograd.detect_anomaly():
        (g,) = ta.autograd.grad(x.sqrt(), x, ta.tensor(np.array([1.0, 1.0])), create_graph=True)
        assert np.isinf(g.numpy()[0])
        with pytest.raises(RuntimeError, match="returned nan values"):
            ta.autograd.grad(g, x, ta.tensor(np.array([0.0, 1.0])))


# ----------------------------------------------------------------------------- PyTorch-style Functions


class Cube(ta.autograd.Function):
    """x³, its backward written in tensor operations: differentiable again."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x * x

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return grad_output * 3 * x * x


class CubeOnArrays(Cube):
    @staticmethod
    @ta.autograd.once_differentiable
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return grad_output * 3 * x * x


class ScaledProduct(ta.autograd.Function):
    """(a·b·c, a + c) with a number ``c``: two outputs, a non-tensor argument."""

    @staticmethod
    def forward(ctx, a, b, c):
        ctx.save_for_backward(a, b)
        ctx.c = c
        return a * b * c, a + c

    @staticmethod
    def backward(ctx, g_prod, g_sum):
        a, b = ctx.saved_tensors
        return g_prod * b * ctx.c + g_sum, g_prod * a * ctx.c, None


def test_a_torch_style_function_differentiated_twice_and_thrice():
    x = rand(4)
    v = rand(4, seed=1, requires_grad=False)
    (g,) = ta.autograd.grad(Cube.apply(x), x, v, create_graph=True)
    same(g, 3 * x.numpy() ** 2 * v.numpy())
    (h,) = ta.autograd.grad(g.sum(), x, create_graph=True)
    same(h, 6 * x.numpy() * v.numpy())
    (k,) = ta.autograd.grad(h.sum(), x)
    same(k, 6 * v.numpy())
    assert tt.gradgradcheck(Cube.apply, [x])


def test_a_torch_style_function_with_two_outputs_differentiated_twice():
    a, b = rand(3), rand(3, seed=1)
    assert tt.gradgradcheck(lambda a, b: ScaledProduct.apply(a, b, 1.5), [a, b])
    prod, total = ScaledProduct.apply(a, b, 1.5)
    ga, gb = ta.autograd.grad([prod * prod, total * total], [a, b], [ta.ones(3, dtype=ta.float64)] * 2,
                              create_graph=True)
    (h,) = ta.autograd.grad(ga.sum(), b)  # d/db of (2·prod·b·c + 2·total) = 4·a·b·c²
    same(h, 4 * a.numpy() * b.numpy() * 1.5**2)


def test_once_differentiable_refuses_a_second_differentiation_by_name():
    x = rand(3)
    CubeOnArrays.apply(x).sum().backward()  # first order is fine
    same(x.grad, 3 * x.numpy() ** 2)
    (g,) = ta.autograd.grad(CubeOnArrays.apply(x).sum(), x, create_graph=True)
    same(g, 3 * x.numpy() ** 2)
    with pytest.raises(RuntimeError, match="CubeOnArrays's backward works on arrays.*once differentiable"):
        ta.autograd.grad(g.sum(), x)
    with pytest.raises(RuntimeError, match="CubeOnArrays"):
        tt.gradgradcheck(CubeOnArrays.apply, [x])
