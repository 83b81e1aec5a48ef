"""Cases of PyTorch's own transform and autograd tests, ported: each names the test it comes from, and where
PyTorch computes an answer it is run beside ours.

From ``test/functorch/test_eager_transforms.py`` (``TestGradTransform``, ``TestJac``, ``TestHessian``), from
``test/functorch/test_vmap.py`` (``TestRandomness``) and from ``test/test_autograd.py`` (``TestAutograd``): grad
mode outside and inside a transform, Jacobians and Hessians of trees of inputs, chunked ``vmap`` drawing as
unchunked, and the engine's rules on ``requires_grad_`` and second walks.
"""

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import tinyattn as ta
from tinyattn.func import grad, hessian, jacfwd, jacrev, vjp, vmap

finite = st.floats(-2.0, 2.0, allow_nan=False)


def _pair(value):
    return ta.tensor(value, dtype=ta.float64), torch.tensor(value, dtype=torch.float64)


# ----------------------------------------------------------------------------- TestGradTransform: grad modes


@given(value=finite)
def test_no_grad_outside(value):
    """``test_no_grad_outside``: ``grad`` under ``no_grad`` differentiates its function all the same, and what it
    gives carries no graph."""
    x, tx = _pair(value)
    x.requires_grad_(True)
    tx.requires_grad_(True)
    with ta.no_grad():
        y = grad(ta.sin)(x)
    with torch.no_grad():
        ty = torch.func.grad(torch.sin)(tx)
    np.testing.assert_allclose(y.numpy(), ty.numpy(), rtol=1e-12)
    assert y.requires_grad is ty.requires_grad is False


def _minus_shift(lib):
    def f(x):
        with lib.no_grad():
            shift = x ** 2
        return x ** 2 - shift
    return f


@given(value=finite)
def test_no_grad_inside(value):
    """``test_no_grad_inside``: a ``no_grad`` block inside the function is a constant to every level."""
    x, tx = _pair(value)
    f, tf = _minus_shift(ta), _minus_shift(torch)
    np.testing.assert_allclose(grad(f)(x).numpy(), torch.func.grad(tf)(tx).numpy(), rtol=1e-12)  # 2x
    assert grad(grad(f))(x).item() == torch.func.grad(torch.func.grad(tf))(tx).item() == 2.0
    x.requires_grad_(True)
    tx.requires_grad_(True)
    (z,) = ta.autograd.grad(grad(f)(x), x)
    (tz,) = torch.autograd.grad(torch.func.grad(tf)(tx), tx)
    assert z.item() == tz.item() == 2.0


@given(value=finite)
def test_no_grad_mixed(value):
    """``test_no_grad_mixed``: ``no_grad`` outside and inside."""
    x, tx = _pair(value)
    x.requires_grad_(True)
    tx.requires_grad_(True)
    with ta.no_grad():
        y = grad(_minus_shift(ta))(x)
    with torch.no_grad():
        ty = torch.func.grad(_minus_shift(torch))(tx)
    np.testing.assert_allclose(y.numpy(), ty.numpy(), rtol=1e-12)
    assert y.requires_grad is ty.requires_grad is False


def test_vjp_fn_called_under_no_grad_gives_no_graph():
    """``vjp``'s function called under ``no_grad`` gives gradients that carry no graph, as torch.func's."""
    x, tx = _pair([1.0, 2.0])
    x.requires_grad_(True)
    tx.requires_grad_(True)
    _, fn = vjp(lambda t: t ** 2, x)
    _, tfn = torch.func.vjp(lambda t: t ** 2, tx)
    with ta.no_grad():
        (g,) = fn(ta.ones(2, dtype=ta.float64))
    with torch.no_grad():
        (tg,) = tfn(torch.ones(2, dtype=torch.float64))
    np.testing.assert_array_equal(g.numpy(), tg.numpy())
    assert g.requires_grad is tg.requires_grad is False


# ----------------------------------------------------------------------------- TestJac, TestHessian: trees


@pytest.mark.parametrize("jacobian", ["jacrev", "jacfwd"])
def test_jacobian_of_a_tuple_input_and_a_tuple_output(jacobian):
    """``TestJac.test_multiple_inputs_pytree`` / ``test_multiple_outputs_multiple_argnums``: a tuple argument's
    Jacobian is nested by output, then by the argument's tree, in both modes."""
    ours, theirs = {"jacrev": (jacrev, torch.func.jacrev), "jacfwd": (jacfwd, torch.func.jacfwd)}[jacobian]
    (a, ta_), (b, tb) = _pair([1.0, 2.0]), _pair([3.0, -4.0])

    def f(lib):
        return lambda ab: (ab[0] * ab[1], lib.sin(ab[0]) + 1)

    got, expected = ours(f(ta))((a, b)), theirs(f(torch))((ta_, tb))
    for out, t_out in zip(got, expected):
        for g, e in zip(out, t_out):
            np.testing.assert_allclose(g.numpy(), e.numpy(), rtol=1e-12)


def test_hessian_of_a_tuple_input():
    """``TestHessian``: ``hessian`` takes the trees ``jacrev`` takes (it is ``jacfwd(jacrev(f))``)."""
    (a, ta_), (b, tb) = _pair([1.0, 2.0]), _pair([3.0, -4.0])
    got = hessian(lambda ab: (ab[0] * ab[1] * ab[0]).sum())((a, b))
    expected = torch.func.hessian(lambda ab: (ab[0] * ab[1] * ab[0]).sum())((ta_, tb))
    for row, t_row in zip(got, expected):
        for g, e in zip(row, t_row):
            np.testing.assert_allclose(g.numpy(), e.numpy(), rtol=1e-12)


# ----------------------------------------------------------------------------- TestRandomness: chunks


@pytest.mark.parametrize("chunk_size", [1, 2, 3])
def test_chunked_vmap_with_randomness_same_draws_once(chunk_size):
    """``TestRandomness`` (``randomness="same"``, with ``chunk_size``): every example sees one draw, as unchunked,
    and the generator moves on as one draw moves it."""
    ta.manual_seed(0)
    unchunked = vmap(lambda t: ta.rand(3) + t, randomness="same")(ta.zeros(5, 3)).numpy()
    after_unchunked = ta.rand(2).numpy()
    ta.manual_seed(0)
    chunked = vmap(lambda t: ta.rand(3) + t, randomness="same", chunk_size=chunk_size)(ta.zeros(5, 3)).numpy()
    np.testing.assert_array_equal(chunked, unchunked)
    np.testing.assert_array_equal(chunked, np.broadcast_to(chunked[0], chunked.shape))
    np.testing.assert_array_equal(ta.rand(2).numpy(), after_unchunked)


def test_dropout_of_an_unbatched_tensor_inside_vmap_different():
    """``TestRandomness.test_dropout`` (unbatched input, ``randomness="different"``): one mask per example."""
    ta.manual_seed(0)
    out = vmap(lambda t: ta.nn.functional.dropout(ta.ones(64), 0.5, training=True) * t,
               randomness="different")(ta.ones(4, 64)).numpy()
    assert out.shape == (4, 64)
    assert set(np.unique(out)) <= {0.0, 2.0}
    assert len({row.tobytes() for row in out}) == 4


# ----------------------------------------------------------------------------- TestAutograd: the engine's rules


def test_requires_grad_false_on_a_non_leaf_is_refused():
    """``TestAutograd.test_requires_grad_`` (non-leaf): only a leaf's flag may be switched off."""
    y, ty = ta.ones(2, requires_grad=True) * 2, torch.ones(2, requires_grad=True) * 2
    with pytest.raises(RuntimeError, match="only change requires_grad flags of leaf"):
        ty.requires_grad_(False)
    with pytest.raises(RuntimeError, match="only change requires_grad flags of leaf"):
        y.requires_grad_(False)
    assert y.requires_grad_(True) is y  # switching it on stays allowed


def test_a_second_backward_through_nodes_that_saved_nothing():
    """``TestAutograd.test_backward_twice_without_saved_values``: ``a + a`` saves no tensor, so a second walk
    through it needs nothing freed; ``a * a`` saves ``a``, and a second walk is refused."""
    a, t = ta.tensor([1.0], requires_grad=True), torch.tensor([1.0], requires_grad=True)
    y, ty = a + a, t + t
    for _ in range(2):
        y.backward(ta.ones(1))
        ty.backward(torch.ones(1))
    assert a.grad.tolist() == t.grad.tolist() == [4.0]
    z = a * a
    z.backward(ta.ones(1))
    with pytest.raises(RuntimeError, match="a second time"):
        z.backward(ta.ones(1))
