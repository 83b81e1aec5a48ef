"""Higher-order autograd, proven by a factory: second (and third) derivatives against PyTorch's.

For an operation ``f`` with inputs ``x`` (all float64, all ``requires_grad``), a random upstream
gradient ``v`` and random directions ``u``, ``w``:

    g = grad(f(x), x, v, create_graph=True)          # first order: vᵀ ∂f/∂x
    h = grad(Σ g · u, x, create_graph=True)          # second order: a Hessian-vector product
    k = grad(Σ h · w, x)                             # third order (the elementwise family)

each compared with ``torch.autograd.grad`` doing the same. An input whose derivative of some
order is identically zero (``relu``'s second, a sum's second) gets zeros on both sides
(``materialize_grads``). The rows are the registry's ``order3``, ``order2`` and ``gradgrad`` tables, their cases
``tests/cases.py``' strategies (kinks avoided: nonzero values, positive ones for ``log``/``sqrt``/``**``, distinct
ones for ``amax``). Then ``gradgradcheck``, which
compares the second derivative with finite differences of the first, must catch a double backward
that is wrong while its first order is right.
"""

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from registry import convert, table

import tinyattn as ta
from tinyattn import testing as tt

RTOL, ATOL = 1e-8, 1e-10  # float64; higher derivatives sum more terms in another order than torch's


# ----------------------------------------------------------------------------- the two sides


def _tuple(out):
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)


def derivatives(side, fn, arrays, upstream, directions, options=None):
    """``[f(x), g, h, …]`` as NumPy arrays, on ``side`` (``"ours"`` or ``"torch"``): the outputs, then one
    derivative per order, order ``n + 1`` taken along ``directions[n - 1]`` (one array per input)."""
    if side == "ours":
        make, tensor, grad = (lambda a: ta.tensor(a, requires_grad=True)), ta.tensor, ta.autograd.grad
        numpy = lambda t: t.numpy()  # noqa: E731
        make_option = lambda a: ta.tensor(a)  # noqa: E731
    else:
        make, tensor, grad = (lambda a: torch.tensor(a, requires_grad=True)), torch.tensor, torch.autograd.grad
        numpy = lambda t: t.detach().numpy(force=True)  # noqa: E731  (force: a ZeroTensor too)
        make_option = torch.from_numpy
    xs = [make(a) for a in arrays]
    opts = {k: convert(v, make_option) for k, v in (options or {}).items()}
    outs = _tuple(fn(*xs, **opts))
    results = [[numpy(o) for o in outs]]
    live = [(o, tensor(v)) for o, v in zip(outs, upstream) if o.requires_grad]
    grads = grad([o for o, _ in live], xs, [v for _, v in live], create_graph=True, materialize_grads=True)
    results.append([numpy(g) for g in grads])
    for u in directions:
        terms = [(g * tensor(d)).sum() for g, d in zip(grads, u) if g.requires_grad]
        if not terms:  # the last derivative is constant in x: every later one is zero
            grads = [tensor(np.zeros(a.shape)) for a in arrays]
        else:
            grads = grad(sum(terms[1:], terms[0]), xs, create_graph=True, materialize_grads=True)
        results.append([numpy(g) for g in grads])
    return results


def assert_orders_match(fn_ours, fn_theirs, arrays, options, seed, order=2, rtol=RTOL, atol=ATOL):
    """Outputs and derivatives up to ``order`` of ours and torch's agree, along the same random directions."""
    rng = np.random.default_rng(seed)
    with ta.no_grad():  # shapes of the outputs, for the upstream gradients
        shapes = [o.shape for o in _tuple(fn_ours(*[ta.tensor(a) for a in arrays],
                                                  **{k: convert(v, ta.tensor) for k, v in options.items()}))]
    upstream = [rng.standard_normal(s) for s in shapes]
    directions = [[rng.standard_normal(a.shape) for a in arrays] for _ in range(order - 1)]
    ours = derivatives("ours", fn_ours, arrays, upstream, directions, options)
    theirs = derivatives("torch", fn_theirs, arrays, upstream, directions, options)
    for n, (mine, other) in enumerate(zip(ours, theirs)):
        what = "output" if n == 0 else f"derivative of order {n}"
        assert len(mine) == len(other)
        for i, (a, b) in enumerate(zip(mine, other)):
            assert a.shape == b.shape, f"{what} {i}: shape {a.shape}, torch's {b.shape}"
            np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, err_msg=f"{what}, {i}")


# ----------------------------------------------------------------------------- elementwise: to third order


UNARY = table("order3")


@pytest.mark.parametrize("order", [2, 3])
@pytest.mark.parametrize("spec", UNARY, ids=[s.name for s in UNARY])
@given(data=st.data())
def test_elementwise_matches_torch(spec, order, data):
    arrays, options = data.draw(spec.case, label="case")
    seed = data.draw(st.integers(0, 2**32 - 1), label="seed")
    assert_orders_match(spec.ours, spec.theirs, arrays, options, seed, order=order, rtol=1e-7)


# ----------------------------------------------------------------------------- the primitives: second order


PRIMITIVES = table("order2")


@pytest.mark.parametrize("spec", PRIMITIVES, ids=[s.name for s in PRIMITIVES])
@given(data=st.data())
def test_primitives_second_order_match_torch(spec, data):
    arrays, options = data.draw(spec.case, label="case")
    seed = data.draw(st.integers(0, 2**32 - 1), label="seed")
    assert_orders_match(spec.ours, spec.theirs, arrays, options, seed)


# ----------------------------------------------------------------------------- gradgradcheck


GRADGRAD = table("gradgrad")


@pytest.mark.parametrize("spec", GRADGRAD, ids=[s.name for s in GRADGRAD])
@given(data=st.data())
def test_gradgradcheck_on_primitives(spec, data):
    arrays, options = data.draw(spec.case, label="case")
    inputs = [ta.tensor(a, requires_grad=True) for a in arrays]
    options = {k: convert(v, ta.tensor) for k, v in options.items()}
    assert tt.gradgradcheck(lambda *xs: spec.ours(*xs, **options), inputs)


class SquareFrozenFactor(ta.Function):
    """x² with a backward right at first order (2x·g, as x + x) but wrong at second: one factor detached
    under ``create_graph``, so the derivative of the gradient is g instead of 2g."""

    differentiable, saved_as = True, {"x": 0}

    def forward(self, x):
        self.x = x
        return x * x

    def backward(self, grad):
        frozen = self.x.detach() if isinstance(self.x, ta.Tensor) else self.x
        return (grad * (self.x + frozen),)


def test_gradgradcheck_catches_a_wrong_double_backward_that_gradcheck_passes():
    x = ta.tensor(np.array([[0.5, -1.0], [2.0, 1.5]]), requires_grad=True)
    y = ta.tensor(np.array([0.3, -0.7]), requires_grad=True)
    fn = lambda x, y: SquareFrozenFactor.apply(x) * y.exp()  # noqa: E731
    assert tt.gradcheck(fn, [x, y])
    with pytest.raises(tt.GradcheckError) as error:
        tt.gradgradcheck(fn, [x, y])
    message = str(error.value)
    assert message.startswith("gradgradcheck: a second derivative disagrees")
    assert "input 0 (shape (2, 2))" in message and "element (" in message
    assert "analytic gradient" in message and "numeric" in message and "atol + rtol*|numeric|" in message
    assert isinstance(error.value, AssertionError)


def test_gradgradcheck_takes_grad_outputs_skips_unused_inputs_and_constants():
    x = ta.tensor(np.array([0.5, -1.0, 2.0]), requires_grad=True)
    unused = ta.tensor(np.array([1.0, 2.0]), requires_grad=True)
    c = ta.tensor(np.array([3.0, -4.0, 5.0]))  # a constant: not checked
    v = ta.tensor(np.array([1.0, -2.0, 0.5]))
    assert tt.gradgradcheck(lambda x, unused, c: (x * c).tanh(), [x, unused, c], grad_outputs=[v])
    assert tt.gradgradcheck(lambda x, unused, c: ((x * c).sin(), x.sum() * 2), [x, unused, c])
    assert tt.gradgradcheck(lambda x: x * 3, [x])  # a linear function: the second derivative is zero
    # the planted bug is found with given grad_outputs too, and a linear first derivative has nothing to hide
    with pytest.raises(tt.GradcheckError, match="input 0"):
        tt.gradgradcheck(SquareFrozenFactor.apply, [x], grad_outputs=v)


def test_gradgradcheck_wants_float64_and_matching_grad_outputs():
    x = ta.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(TypeError, match="gradgradcheck: input 0 has dtype float32.*float64"):
        tt.gradgradcheck(lambda x: x * x, [x])
    with pytest.raises(ValueError, match="no input has requires_grad"):
        tt.gradgradcheck(lambda x: x * x, [ta.tensor(np.ones(2))])
    x = x.double().detach().requires_grad_()
    with pytest.raises(ValueError, match=r"grad_outputs\[0\] has shape \(3,\), expected output 0's shape \(2,\)"):
        tt.gradgradcheck(lambda x: x * x, [x], grad_outputs=[np.ones(3)])
    with pytest.raises(ValueError, match="2 grad_outputs for 1 outputs"):
        tt.gradgradcheck(lambda x: x * x, [x], grad_outputs=[np.ones(2), np.ones(2)])


def test_gradgradcheck_reports_a_once_differentiable_backward():
    class ArrayCube(ta.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x * x

        @staticmethod
        @ta.autograd.once_differentiable
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return grad * 3 * x * x

    x = ta.tensor(np.array([0.5, -1.0]), requires_grad=True)
    assert tt.gradcheck(ArrayCube.apply, [x])
    with pytest.raises(RuntimeError, match="ArrayCube"):
        tt.gradgradcheck(ArrayCube.apply, [x])


@given(shape=tt.shapes(min_dims=1, max_dims=2, max_side=3), data=st.data())
def test_gradgradcheck_matches_the_hessian_of_a_quadratic_form(shape, data):
    """f(x) = ½ xᵀ A x summed against v: its first derivative is v·A x (with A symmetric), its second v·A,
    known exactly, so gradgradcheck's finite differences have an exact oracle too."""
    n = int(np.prod(shape))
    a = data.draw(hnp.arrays(np.float64, (n, n), elements=st.floats(-2, 2)), label="A")
    a = ta.tensor(a + a.T)
    x = ta.tensor(data.draw(tt.arrays(shape), label="x"), requires_grad=True)
    quadratic = lambda x: 0.5 * (x.reshape(n) @ (a @ x.reshape(n)))  # noqa: E731
    assert tt.gradgradcheck(quadratic, [x])
    (g,) = ta.autograd.grad(quadratic(x), x, create_graph=True)
    np.testing.assert_allclose(g.numpy().reshape(n), a.numpy() @ x.numpy().reshape(n), rtol=1e-12, atol=1e-12)
    u = np.random.default_rng(0).standard_normal(shape)
    (h,) = ta.autograd.grad((g * ta.tensor(u)).sum(), x)
    np.testing.assert_allclose(h.numpy().reshape(n), a.numpy() @ u.reshape(n), rtol=1e-12, atol=1e-12)
