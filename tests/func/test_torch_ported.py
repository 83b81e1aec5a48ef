"""Cases of PyTorch's own transform tests, ported: each names the test it comes from, and where PyTorch computes
an answer it is run beside ours (``_run_both``: the same function, written once, run with ``tinyattn`` and
``tinyattn.func``, then with ``torch`` and ``torch.func``).

From ``test/functorch/test_eager_transforms.py`` (``TestGradTransform``, ``TestVmapOfGrad``, ``TestJac``,
``TestHessian``, ``TestJvp``, ``TestComposability``), from ``test/functorch/test_vmap.py`` (``TestVmapAPI``,
``TestRandomness``) and from ``test/test_autograd.py`` (``TestAutograd``: two cases of the engine's rules; the rest
of ``test_autograd.py`` and ``test/autograd/test_functional.py`` are in ``tests/engine/test_torch_autograd_ported.py``).
A case marked ``xfail(strict=True)`` is one where tinyattn does not do what PyTorch's test asserts; its reason
says how the two differ.
"""

import collections
import functools

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import tinyattn as ta
import tinyattn.nn.functional as F
from tinyattn.func import grad, hessian, jacfwd, jacrev, jvp, vjp, vmap

finite = st.floats(-2.0, 2.0, allow_nan=False)


def _pair(value):
    return ta.tensor(value, dtype=ta.float64), torch.tensor(value, dtype=torch.float64)


def _arrays(*shapes, seed=0):
    """Standard-normal float64 arrays of ``shapes``, the same on every run."""
    rng = np.random.default_rng(seed)
    return [np.asarray(rng.standard_normal(shape), dtype=np.float64) for shape in shapes]


def _run_both(build, *arrays):
    """``build(lib, func, *tensors)`` run with ``tinyattn`` and ``tinyattn.func`` on tensors of ``arrays``, then with
    ``torch`` and ``torch.func``: ``(ours, theirs)``."""
    ours = build(ta, ta.func, *[ta.tensor(a) for a in arrays])
    theirs = build(torch, torch.func, *[torch.tensor(a) for a in arrays])
    return ours, theirs


def _np(t):
    """A tensor of either library (or a native ``.grad`` array, or a number) as a NumPy array."""
    if isinstance(t, torch.Tensor):
        return t.detach().numpy()
    if isinstance(t, ta.Tensor):
        return t.numpy()
    return np.asarray(t)


def _close(ours, theirs, rtol=1e-10, atol=1e-12):
    """Two results with the same tree (tuples, lists, dicts) of tensors of the same shapes and values; ``theirs``
    may hold NumPy arrays or numbers."""
    if isinstance(theirs, dict):
        assert isinstance(ours, dict) and list(ours) == list(theirs), (ours, theirs)
        for key in theirs:
            _close(ours[key], theirs[key], rtol, atol)
    elif isinstance(theirs, (tuple, list)):
        assert isinstance(ours, type(theirs)) and len(ours) == len(theirs), (ours, theirs)
        for o, t in zip(ours, theirs):
            _close(o, t, rtol, atol)
    else:
        assert isinstance(ours, (ta.Tensor, np.ndarray)), f"expected a tensor, got {type(ours).__name__}"
        assert np.shape(_np(ours)) == np.shape(_np(theirs)), (np.shape(_np(ours)), np.shape(_np(theirs)))
        np.testing.assert_allclose(_np(ours), _np(theirs), rtol=rtol, atol=atol)


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


# ----------------------------------------------------------------------------- TestGradTransform: more cases


def test_primitive_and_nesting_simple():
    """``TestGradTransform.test_primitive`` and ``test_nesting_simple``: ``grad(sin)`` is ``cos``, ``grad(grad(sin))``
    is ``-sin``."""
    (x,) = _arrays((), seed=1)
    ours, theirs = _run_both(lambda lib, func, t: (func.grad(lib.sin)(t), func.grad(func.grad(lib.sin))(t)), x)
    _close(ours, theirs)
    _close(ours, (np.cos(x), -np.sin(x)))


def test_composite_simple():
    """``TestGradTransform.test_composite_simple``: the gradient of ``flatten(x).sum()`` is ones."""
    (x,) = _arrays((2, 3, 4))
    ours, theirs = _run_both(lambda lib, func, t: func.grad(lambda t: lib.flatten(t).sum())(t), x)
    _close(ours, theirs)
    _close(ours, np.ones((2, 3, 4)))


def test_fn_with_kwargs():
    """``TestGradTransform.test_fn_with_kwargs``: a keyword argument reaches the function, undifferentiated."""
    def foo(x, y):
        return (x * y).sum()

    ours, theirs = _run_both(lambda lib, func, x, y: (func.grad(foo)(x, y), func.grad(foo)(x, y=y)), *_arrays(3, 3))
    _close(ours, theirs)
    _close(ours[1], ours[0])


def test_composite_complicated_and_two_ops():
    """``TestGradTransform.test_composite_complicated`` and ``test_composite_two_ops``: ``grad`` of ``(x @ y).sum()``
    and of ``cross_entropy`` equal ``autograd.grad`` of the same."""
    def build(lib, func, x, y, logits):
        targets = lib.tensor([1, 4])
        cross_entropy = lib.nn.functional.cross_entropy
        results = (func.grad(lambda x, y: (x @ y).sum())(x, y), func.grad(cross_entropy)(logits, targets))
        x.requires_grad_(True)
        logits.requires_grad_(True)
        expected = (lib.autograd.grad((x @ y).sum(), x)[0],
                    lib.autograd.grad(cross_entropy(logits, targets), logits)[0])
        return results, expected

    (ours, ours_expected), (theirs, _) = _run_both(build, *_arrays(3, (3, 5), (2, 5)))
    _close(ours, ours_expected)
    _close(ours, theirs)


def test_composed_with_autograd():
    """``TestGradTransform.test_composed_with_autograd``: ``grad``'s result, for an input that requires grad, is in
    its graph: ``autograd.grad`` of it is ``-sin``."""
    def build(lib, func, x):
        x.requires_grad_(True)
        return lib.autograd.grad(func.grad(lib.sin)(x), x)

    (x,) = _arrays((), seed=2)
    ours, theirs = _run_both(build, x)
    _close(ours, theirs)
    _close(ours, (-np.sin(x),))


def test_grad_of_vjp_and_vjp_of_grad_compositions():
    """``TestGradTransform.test_grad_of_vjp_composition`` (``cos x``), ``test_vjp_of_grad_composition``
    (``-y sin x``) and ``test_grad_of_vjp_of_grad_composition`` (``cos x``)."""
    def build(lib, func, x, y):
        def grad_of_vjp(x, y):
            _, vjp_fn = func.vjp(lib.sin, x)
            return func.grad(lambda y: vjp_fn(y)[0])(y)

        def vjp_of_grad(x, y):
            _, vjp_fn = func.vjp(func.grad(lib.sin), x)
            return vjp_fn(y)[0]

        def grad_of_vjp_of_grad(x, y):
            _, vjp_fn = func.vjp(func.grad(lambda x: -lib.cos(x)), x)
            return func.grad(lambda y: vjp_fn(y)[0])(y)

        return grad_of_vjp(x, y), vjp_of_grad(x, y), grad_of_vjp_of_grad(x, y)

    x, y = _arrays((), (), seed=3)
    ours, theirs = _run_both(build, x, y)
    _close(ours, theirs)
    _close(ours, (np.cos(x), -y * np.sin(x), np.cos(x)))


def test_views():
    """``TestGradTransform.test_views``: a view inside the function, and ``autograd.grad`` through ``grad``'s
    result and another term."""
    def build(lib, func, x, y):
        x.requires_grad_(True)
        y.requires_grad_(True)

        def silly_sin(x):
            return x.view([]).sin()

        result = func.grad(silly_sin)(x) + lib.cos(y)
        return lib.autograd.grad(result, [x, y])

    x, y = _arrays((), (), seed=4)
    ours, theirs = _run_both(build, x, y)
    _close(ours, theirs)
    _close(ours, (-np.sin(x), -np.sin(y)))


def test_argnums():
    """``TestGradTransform.test_argnums``, ``test_out_of_order_argnums`` and ``test_negative_argnums``: an int
    gives one gradient, a tuple a tuple, in its own order."""
    specs = [0, 1, (0,), (0, 1), (1, 0), -2, -1, (-2,), (-2, -1)]
    x, y = _arrays((), (), seed=5)
    ours, theirs = _run_both(lambda lib, func, x, y: [func.grad(lib.mul, argnums=a)(x, y) for a in specs], x, y)
    _close(ours, theirs)
    _close(ours, [y, x, (y,), (y, x), (x, y), y, x, (y,), (y, x)])


def test_invalid_argnums_out_of_range_or_not_ints():
    """``TestGradTransform.test_invalid_argnums`` (the cases tinyattn refuses as torch.func does): an argnum out of
    range, or not an int, raises ``RuntimeError``."""
    (x, tx), (y, ty) = _pair(1.0), _pair(2.0)
    for argnums in (-3, 2, ("0",)):
        with pytest.raises(RuntimeError):
            torch.func.grad(torch.mul, argnums=argnums)(tx, ty)
        with pytest.raises(RuntimeError):
            grad(ta.mul, argnums=argnums)(x, y)


def test_invalid_argnums_a_list_or_repeated():
    """``TestGradTransform.test_invalid_argnums``: ``argnums=[0]``, ``(0, 0)`` and ``(0, -2)`` are refused."""
    x, y = ta.tensor(1.0, dtype=ta.float64), ta.tensor(2.0, dtype=ta.float64)
    for argnums in ([0], (0, 0), (0, -2)):
        with pytest.raises(RuntimeError):
            torch.func.grad(torch.mul, argnums=argnums)(torch.tensor(1.0), torch.tensor(2.0))
        with pytest.raises(RuntimeError):
            grad(ta.mul, argnums=argnums)(x, y)


def test_grad_pytree_inputs():
    """``TestGradTransform.test_grad_pytree_inputs``: an argument that is a tuple or a dict gets its gradient as
    the same tree."""
    def f(a, b):
        x, y = a
        return 1 * x + 2 * y + 3 * b["foo"]

    def build(lib, func, x):
        args = ((x, x), {"foo": x})
        return func.grad(f)(*args), func.grad(f, argnums=(0,))(*args), func.grad(f, argnums=(0, 1))(*args)

    ours, theirs = _run_both(build, *_arrays(()))
    _close(ours, theirs)
    _close(ours, ((1.0, 2.0), ((1.0, 2.0),), ((1.0, 2.0), {"foo": 3.0})))


def _tan(x):
    return x.sin() / x.cos()  # (tinyattn has no tan; PyTorch's test uses x.tan())


def test_grad_aux_tensor_and_pytree():
    """``TestGradTransform.test_grad_aux_tensor`` and ``test_grad_aux_pytree``: with ``has_aux`` the function returns
    a pair (a list or a triple raises), and the aux, a tensor or a tree of them, comes back as it is."""
    (x,) = _arrays(3)
    for func, t in ((ta.func, ta.tensor(x)), (torch.func, torch.tensor(x))):
        with pytest.raises(RuntimeError):
            func.grad(lambda t: [t, t], has_aux=True)(t)
        with pytest.raises(RuntimeError):
            func.grad(lambda t: (t, t + 2, t + 3), has_aux=True)(t)

    def build(lib, func, x):
        return (func.grad(lambda t: (t.sin().sum(), t.cos()), has_aux=True)(x),
                func.grad(lambda t: (t.sin().sum(), {"a": t.cos(), "b": [_tan(t)]}), has_aux=True)(x))

    ours, theirs = _run_both(build, x)
    _close(ours, theirs)
    _close(ours, ((np.cos(x), np.cos(x)), (np.cos(x), {"a": np.cos(x), "b": [np.tan(x)]})))


@pytest.mark.parametrize("transform", ["grad", "vjp", "jvp", "jacrev", "jacfwd"])
def test_aux_must_be_tensors(transform):
    """``test_grad_aux_pytree``, ``test_vjp_aux_pytree``, ``TestJvp.test_aux_pytree`` and ``TestJac.test_aux_pytree``:
    an aux that holds anything but tensors is refused."""
    x = ta.tensor(_arrays(3)[0])
    call = {"grad": lambda f: grad(lambda x: (f(x)[0].sum(), f(x)[1]), has_aux=True)(x),
            "vjp": lambda f: vjp(f, x, has_aux=True),
            "jvp": lambda f: jvp(f, (x,), (x,), has_aux=True),
            "jacrev": lambda f: jacrev(f, has_aux=True)(x),
            "jacfwd": lambda f: jacfwd(f, has_aux=True)(x)}[transform]
    for aux in [1, 1.0, "abc"]:
        with pytest.raises(RuntimeError, match="Expected tensors|tensor"):
            call(lambda x, aux=aux: (x, aux))
        with pytest.raises(RuntimeError, match="Expected tensors|tensor"):
            call(lambda x, aux=aux: (x, [x, aux]))


def test_zero_grad():
    """``TestGradTransform.test_zero_grad``: in a dict argument, an entry the function does not read gets zeros."""
    def f(x):
        return (x["a"] ** 2.0).sum()

    a, b = _arrays(10, 10, seed=6)
    ours, theirs = _run_both(lambda lib, func, a, b: func.grad(f)({"a": a + 3, "b": b}), a, b)
    _close(ours, theirs)
    assert ours["a"].sum().item() != 0.0
    assert ours["b"].sum().item() == 0.0


def test_unrelated_grad_and_vjp():
    """``TestGradTransform.test_unrelated_grad``, ``test_unrelated_vjp`` and
    ``test_unrelated_vjp_multiple_inputs_outputs``: an output that does not depend on an input gives it zeros."""
    def build(lib, func, w, x, y, v):
        unrelated_grad = func.grad(lambda x: y)(x)
        _, vjp_fn = func.vjp(lambda x: y, x)
        _, vjp_fn_2 = func.vjp(lambda w, x: (y, y, x), w, x)
        return unrelated_grad, vjp_fn(v), vjp_fn_2((v, v, v))

    ours, theirs = _run_both(build, *[np.array(value) for value in (3.0, 1.0, 2.0, 1.0)])
    _close(ours, theirs)
    _close(ours, (0.0, (0.0,), (0.0, 1.0)))


def test_unrelated_hessian():
    """``TestGradTransform.test_unrelated_hessian``: ``jacrev(jacrev(W @ x))`` is zeros of shape ``(N, M, M)``."""
    W, x = _arrays((5, 3), 3, seed=7)
    ours, theirs = _run_both(lambda lib, func, W, x: func.jacrev(func.jacrev(lambda x: W @ x))(x), W, x)
    _close(ours, theirs)
    _close(ours, np.zeros((5, 3, 3)))


def test_vjp_basic_two_outputs_and_pytrees():
    """``TestGradTransform.test_vjp``, ``test_vjp_two_outputs``, ``test_vjp_pytree_input`` and
    ``test_vjp_pytree_output``: ``vjp`` of ``sin`` is ``v cos x``; trees of inputs and of outputs take trees of
    cotangents and give trees of gradients."""
    def build(lib, func, x, v, v1, v2, v3):
        out, vjp_fn = func.vjp(lib.sin, x)
        two, vjp_two = func.vjp(lambda x: (x, x), x)
        tree_out, vjp_tree_in = func.vjp(lambda x: x[0] * x[1][0], (x, (x, x)))
        _, vjp_tree_out = func.vjp(lambda x: (x, (x, x)), x)
        return out, vjp_fn(v), vjp_two(two), tree_out, vjp_tree_in(v), vjp_tree_out((v1, (v2, v3)))

    x, v, v1, v2, v3 = _arrays((), (), (), (), (), seed=8)
    ours, theirs = _run_both(build, x, v, v1, v2, v3)
    _close(ours, theirs)
    _close(ours, (np.sin(x), (v * np.cos(x),), (2 * x,), x * x, ((x * v, (x * v, 0.0)),), (v1 + v2 + v3,)))


def test_vjp_aux_tensor_and_pytree():
    """``TestGradTransform.test_vjp_aux_tensor`` and ``test_vjp_aux_pytree``: ``vjp(has_aux=True)`` wants a pair, and
    gives ``(output, vjp_fn, aux)``."""
    (x, v) = _arrays(3, 3, seed=9)
    for func, t in ((ta.func, ta.tensor(x)), (torch.func, torch.tensor(x))):
        with pytest.raises(RuntimeError):
            func.vjp(lambda t: [t, t], t, has_aux=True)
        with pytest.raises(RuntimeError):
            func.vjp(lambda t: (t, t + 2, t + 3), t, has_aux=True)

    def build(lib, func, x, v):
        out, vjp_fn, aux = func.vjp(lambda t: (t.sin(), t.cos()), x, has_aux=True)
        out_2, vjp_fn_2, aux_2 = func.vjp(lambda t: (t.sin(), {"a": t.cos(), "b": [_tan(t)]}), x, has_aux=True)
        return out, aux, vjp_fn(v), out_2, aux_2, vjp_fn_2(v)

    ours, theirs = _run_both(build, x, v)
    _close(ours, theirs)
    _close(ours, (np.sin(x), np.cos(x), (v * np.cos(x),), np.sin(x), {"a": np.cos(x), "b": [np.tan(x)]},
                  (v * np.cos(x),)))


# ----------------------------------------------------------------------------- TestGradTransform: grad modes, more

def test_no_grad_nested_simple():
    """``TestGradTransform.test_no_grad_nested_simple``: a ``grad`` taken under ``no_grad`` inside ``grad`` is a
    constant: ``3x²``, and ``6x`` by ``autograd.grad`` of that."""
    def build(lib, func, x):
        x.requires_grad_(True)

        def h(x):
            with lib.no_grad():
                shift = func.grad(lambda x: 0.25 * x ** 4)(x)
            return x ** 3 - shift

        y = func.grad(h)(x)
        return y, lib.autograd.grad(y, x)[0]

    ours, theirs = _run_both(build, np.array(1.5))
    _close(ours, theirs)
    _close(ours, (3 * 1.5 ** 2, 6 * 1.5))


def test_no_grad_nested_complicated():
    """``TestGradTransform.test_no_grad_nested_complicated``: the only differentiable part of ``g`` is ``x³``:
    ``6x``, then ``6``."""
    def build(lib, func, x):
        x.requires_grad_(True)

        def f(x):
            with lib.no_grad():
                shift = x ** 3
            return x ** 3 - shift

        def g(x):
            r1 = func.grad(f)(x)
            with lib.no_grad():
                shift = func.grad(f)(x)
            return r1 - shift

        y = func.grad(g)(x)
        return y, lib.autograd.grad(y, x)[0]

    (x,) = _arrays((), seed=10)
    ours, theirs = _run_both(build, x)
    _close(ours, theirs)
    _close(ours, (6 * x, 6.0))


def test_no_grad_value():
    """``TestGradTransform.test_no_grad_value``: ``grad_and_value`` under ``no_grad`` gives a constant value."""
    def build(lib, func, x):
        x.requires_grad_(True)

        def h(x):
            with lib.no_grad():
                _, value = func.grad_and_value(lambda x: x ** 3)(x)
            return x ** 3 - value

        y = func.grad(h)(x)
        return y, lib.autograd.grad(y, x)[0]

    ours, theirs = _run_both(build, np.array(1.6))
    _close(ours, theirs)
    _close(ours, (3 * 1.6 ** 2, 6 * 1.6))


def test_no_grad_outside_vjp():
    """``TestGradTransform.test_no_grad_outside_vjp``: ``vjp`` and its function under ``no_grad``: no graph out."""
    def build(lib, func, x):
        x.requires_grad_(True)
        with lib.no_grad():
            out, vjp_fn = func.vjp(lambda x: x ** 2, x)
            (y,) = vjp_fn(lib.tensor(1.0, dtype=lib.float64))
        return y, y.requires_grad, out.requires_grad

    ours, theirs = _run_both(build, np.array(2.0))
    assert ours[1:] == theirs[1:] == (False, False)
    _close(ours[0], 4.0)


def test_no_grad_outside_vjp_only():
    """``TestGradTransform.test_no_grad_outside_vjp_only``: ``vjp`` under ``no_grad``, its function outside: the
    output carries no graph, the gradient does ("a little weird", PyTorch's test says), and it is ``2``."""
    def build(lib, func, x):
        x.requires_grad_(True)
        with lib.no_grad():
            out, vjp_fn = func.vjp(lambda x: x ** 2, x)
        (y,) = vjp_fn(lib.tensor(1.0, dtype=lib.float64))
        return y, out.requires_grad, y.requires_grad, lib.autograd.grad(y, x)[0]

    ours, theirs = _run_both(build, np.array(3.14))
    assert ours[1:3] == theirs[1:3] == (False, True)
    _close((ours[0], ours[3]), (2 * 3.14, 2.0))


INFERENCE_MODE_OUTSIDE = {  # PyTorch's test: (input shape, the transform, the expected result from the input)
    "test_inference_mode_outside_grad": (3, lambda lib, func, x: func.grad(lambda x: (x ** 2).sum())(x),
                                         lambda x: 2 * x),
    "test_inference_mode_nograd_outside_grad": (3, lambda lib, func, x: _under_no_grad(
        lib, lambda: func.grad(lambda x: (x ** 2).sum())(x)), lambda x: 2 * x),
    "test_inference_mode_outside_vjp": (3, lambda lib, func, x: func.vjp(lambda x: (x ** 2).sum(), x)[1](
        lib.tensor(1.0, dtype=lib.float64))[0], lambda x: 2 * x),
    "test_inference_mode_outside_jvp": (3, lambda lib, func, x: func.jvp(
        lambda x: (x ** 2).sum(), (x,), (lib.ones(3, dtype=lib.float64),))[1], lambda x: (2 * x).sum()),
    "test_inference_mode_outside_jacrev": (3, lambda lib, func, x: func.jacrev(lambda x: x ** 2)(x),
                                           lambda x: np.diag(2 * x)),
    "test_inference_mode_outside_vmap_grad": ((5, 3), lambda lib, func, x: func.vmap(
        func.grad(lambda x: (x ** 2).sum()))(x), lambda x: 2 * x),
    "test_inference_mode_outside_grad_vmap": (3, lambda lib, func, x: func.grad(
        lambda x: func.vmap(lambda x: (x ** 2).sum())(x).sum())(x), lambda x: 2 * x),
    "test_inference_mode_nested_grad": ((), lambda lib, func, x: func.grad(func.grad(lambda x: x ** 3))(x),
                                        lambda x: 6 * x),
    "test_inference_mode_jacrev_grad": (3, lambda lib, func, x: func.jacrev(func.grad(lambda x: (x ** 3).sum()))(x),
                                        lambda x: np.diag(6 * x)),
}


def _under_no_grad(lib, call):
    with lib.no_grad():
        return call()


@pytest.mark.parametrize("case", list(INFERENCE_MODE_OUTSIDE))
def test_inference_mode_outside_a_transform(case):
    """``TestGradTransform.test_inference_mode_outside_*``, ``test_inference_mode_nested_grad`` and
    ``test_inference_mode_jacrev_grad``: a transform under ``inference_mode`` differentiates all the same."""
    shape, transform, expected = INFERENCE_MODE_OUTSIDE[case]

    def build(lib, func, x):
        with lib.inference_mode():
            return transform(lib, func, x)

    (x,) = _arrays(shape, seed=11)
    ours, theirs = _run_both(build, x)
    _close(ours, theirs)
    _close(ours, expected(x))


def test_inference_mode_inside_grad_and_restored():
    """``TestGradTransform.test_inference_mode_inside_grad`` (a value computed under ``inference_mode`` inside the
    function is a constant) and ``test_inference_mode_restored`` (the mode is back as it was after the transform)."""
    def build(lib, func, x):
        def f(x):
            with lib.inference_mode():
                c = x ** 2
            return x - c

        assert not lib.is_inference_mode_enabled()
        with lib.inference_mode():
            y = func.grad(lambda x: f(x).sum())(x)
            assert lib.is_inference_mode_enabled()
        assert not lib.is_inference_mode_enabled()
        return y

    ours, theirs = _run_both(build, *_arrays(3, seed=12))
    _close(ours, theirs)
    _close(ours, np.ones(3))


# ----------------------------------------------------------------------------- TestVmapOfGrad


def test_per_sample_grads_simple():
    """``TestVmapOfGrad.test_per_sample_grads_simple``: ``vmap`` of ``grad`` over the examples equals ``grad`` of
    each example, stacked."""
    def compute_loss(weight, x, t):
        y = x @ weight
        return ((y - t) ** 2).sum()

    def build(lib, func, weight, x, t):
        result = func.vmap(functools.partial(func.grad(compute_loss), weight))(x, t)
        expected = lib.stack([func.grad(compute_loss)(weight, x[i], t[i]) for i in range(64)])
        return result, expected

    (ours, ours_expected), (theirs, _) = _run_both(build, *_arrays((16, 2), (64, 16), (64, 2), seed=13))
    _close(ours, ours_expected)
    _close(ours, theirs)


def _sample_net(nn, vocab_size):
    """``TestVmapOfGrad.test_per_sample_grads_embeddingnet`` (the ``functional_call`` mechanism; a vocabulary of 100
    words, not 1000: the larger per-example gradients, once freed, raise glibc's dynamic mmap threshold and upset
    ``tests/engine/test_backend.py``'s ``keep_freed_memory`` check later in the same process): per-example
    gradients of every weight of an embedding network, by ``vmap(grad)``, equal ``grad`` of each example; and
    torch's, with the weights copied."""
    vocab_size, batch, words = 100, 64, 5
    torch.manual_seed(0)
    theirs_net = _sample_net(torch.nn, vocab_size)
    ours_net = _sample_net(ta.nn, vocab_size)
    ours_net.load_state_dict({k: v.detach().numpy() for k, v in theirs_net.state_dict().items()})
    rng = np.random.default_rng(14)
    data, targets = rng.integers(0, vocab_size, (batch, words)), np.zeros(batch, dtype=np.int64)

    def per_sample(lib, func, net):
        def compute_loss(weights, data, target):
            return lib.nn.functional.cross_entropy(func.functional_call(net, weights, (data,)), target)

        weights = dict(net.named_parameters())
        d, t = lib.tensor(data), lib.tensor(targets)
        result = func.vmap(functools.partial(func.grad(compute_loss), weights))(d, t)
        expected = [func.grad(compute_loss)(weights, d[i], t[i]) for i in range(batch)]
        return result, {k: lib.stack([e[k] for e in expected]) for k in weights}

    ours, ours_expected = per_sample(ta, ta.func, ours_net)
    theirs, _ = per_sample(torch, torch.func, theirs_net)
    _close(ours, ours_expected)
    _close(ours, theirs)


def test_vmap_of_vjp_of_log_softmax():
    """``TestVmapOfGrad.test_log_softmax``: ``vmap`` of ``vjp`` of ``log_softmax`` with one cotangent for all
    examples equals ``backward`` with it expanded."""
    def build(lib, func, x, v):
        def foo(x, v):
            _, vjp_fn = func.vjp(functools.partial(lib.log_softmax, dim=-1), x)
            return vjp_fn(v)[0]

        result = func.vmap(foo, (0, None))(x, v)
        x.requires_grad_(True)
        (expected,) = lib.autograd.grad(lib.log_softmax(x, dim=-1), x, v.expand_as(x))
        return result, expected

    (ours, ours_expected), (theirs, _) = _run_both(build, *_arrays((3, 5), 5, seed=15))
    _close(ours, ours_expected)
    _close(ours, theirs)


# ----------------------------------------------------------------------------- TestJac: more cases

JACAPIS = pytest.mark.parametrize("jacapi", ["jacrev", "jacfwd"])


@JACAPIS
def test_jac_simple_and_not_flat(jacapi):
    """``TestJac.test_simple`` and ``test_simple_not_flat``: the Jacobian of ``sin`` is ``diag(cos x)``, shaped
    ``x.shape * 2``."""
    for shape in [(3,), (2, 3)]:
        (x,) = _arrays(shape, seed=16)
        ours, theirs = _run_both(lambda lib, func, x: getattr(func, jacapi)(lib.sin)(x), x)
        _close(ours, theirs)
        _close(ours, np.diag(np.cos(x).ravel()).reshape(shape + shape))


@JACAPIS
def test_diff_numel(jacapi):
    """``TestJac.test_diff_numel``: ``(2, 4) -> (3, 1)`` has a ``(3, 1, 2, 4)`` Jacobian of three ones."""
    (x,) = _arrays((2, 4), seed=17)
    ours, theirs = _run_both(lambda lib, func, x: getattr(func, jacapi)(lambda x: x[0, 1:].unsqueeze(-1))(x), x)
    expected = np.zeros((3, 1, 2, 4))
    expected[0, 0, 0, 1] = expected[1, 0, 0, 2] = expected[2, 0, 0, 3] = 1
    _close(ours, theirs)
    _close(ours, expected)


@JACAPIS
def test_vmap_on_jac_and_nested_jac(jacapi):
    """``TestJac.test_vmap_on_jac_simple`` (``vmap`` of the Jacobian of ``sin``) and ``test_nested_jac_simple``
    (the Jacobian of the Jacobian of ``sin(x).sum()``: ``diag(-sin x)``)."""
    def build(lib, func, x, y):
        jac = getattr(func, jacapi)
        return func.vmap(jac(lib.sin))(x), jac(jac(lambda x: x.sin().sum()))(y)

    x, y = _arrays((2, 3), 3, seed=18)
    ours, theirs = _run_both(build, x, y)
    _close(ours, theirs)
    _close(ours, (np.stack([np.diag(np.cos(row)) for row in x]), np.diag(-np.sin(y))))


@JACAPIS
def test_jac_argnums(jacapi):
    """``TestJac.test_multiple_args``, ``test_argnums_tuple``, ``test_argnums_effect_on_return`` and
    ``test_argnums_defaults_to_zero``: an int gives a tensor, a tuple a tuple, the default the first argument."""
    def build(lib, func, x, y):
        jac = getattr(func, jacapi)
        return (jac(lib.mul, argnums=1)(x, y), jac(lib.mul, argnums=(0, 1))(x, y), jac(lib.mul, argnums=(0,))(x, y),
                jac(lib.mul, argnums=0)(x, y), jac(lambda x, y: x * 2 + y * 3)(x, y))

    x, y = _arrays(3, 3, seed=19)
    ours, theirs = _run_both(build, x, y)
    _close(ours, theirs)
    _close(ours, (np.diag(x), (np.diag(y), np.diag(x)), (np.diag(y),), np.diag(y), np.diag(np.full(3, 2.0))))


@JACAPIS
def test_multiple_outputs_single_argnums_and_pytree(jacapi):
    """``TestJac.test_multiple_outputs_single_argnums`` and ``test_multiple_outputs_pytree``: the Jacobian is nested
    by the outputs (a tuple, a dict), then by the argnums."""
    def build(lib, func, x, y):
        jac = getattr(func, jacapi)
        f = lambda x, y: (2 * x + 3 * y, 4 * x + 5 * y)
        g = lambda x, y: {"left": 2 * x + 3 * y, "right": 4 * x + 5 * y}
        return jac(f, argnums=0)(x, y), jac(f, argnums=(0,))(x, y), jac(g, argnums=(0, 1))(x, y)

    x, y = _arrays(3, 3, seed=20)
    ours, theirs = _run_both(build, x, y)
    _close(ours, theirs)
    d = {n: np.diag(np.full(3, float(n))) for n in (2, 3, 4, 5)}
    _close(ours, ((d[2], d[4]), ((d[2],), (d[4],)), {"left": (d[2], d[3]), "right": (d[4], d[5])}))


@JACAPIS
def test_multiple_inputs_outputs_pytree(jacapi):
    """``TestJac.test_multiple_inputs_outputs_pytree``: trees in and trees out, nested by output, then by argnum,
    then by the argument's tree."""
    def build(lib, func, x):
        jac = getattr(func, jacapi)

        def f(a, b, c):
            a0, a1 = a
            return a0 + a1 * 2, {"foo": b * 3 + c * 4}

        args = ((x, x), x, x)
        return jac(f)(*args), jac(f, argnums=(0,))(*args), jac(f, argnums=(0, 1))(*args)

    (x,) = _arrays((), seed=21)
    ours, theirs = _run_both(build, x)
    _close(ours, theirs)
    _close(ours, (((1.0, 2.0), {"foo": (0.0, 0.0)}),
                  (((1.0, 2.0),), {"foo": ((0.0, 0.0),)}),
                  (((1.0, 2.0), 0.0), {"foo": ((0.0, 0.0), 3.0)})))


@JACAPIS
def test_multiple_inputs_outputs_pytree_multidim(jacapi):
    """``TestJac.test_multiple_inputs_outputs_pytree_multidim``: a dict in, a dict out: a dict of dicts."""
    def build(lib, func, v):
        return getattr(func, jacapi)(lambda dct: {"c": dct["a"].sin(), "d": dct["b"].cos()})({"a": v, "b": v})

    (v,) = _arrays(3, seed=21)
    ours, theirs = _run_both(build, v)
    _close(ours, theirs)
    zeros = np.zeros((3, 3))
    _close(ours, {"c": {"a": np.diag(np.cos(v)), "b": zeros}, "d": {"a": zeros, "b": np.diag(-np.sin(v))}})


@JACAPIS
def test_dimensionality_and_aux(jacapi):
    """``TestJac.test_dimensionality`` (the identity's Jacobian at a 0-d input is 0-d, at ``(1,)`` it is ``(1, 1)``)
    and ``test_aux_tensor`` / ``test_aux_pytree`` (``has_aux``: ``(jacobian, aux)``)."""
    def build(lib, func, s, v, x):
        jac = getattr(func, jacapi)
        return (jac(lambda x: x)(s), jac(lambda x: x)(v), jac(lambda x: (x.clone(), x.clone().cos()), has_aux=True)(x),
                jac(lambda x: (x.clone(), {"a": x.cos(), "b": [_tan(x)]}), has_aux=True)(x))

    s, v, x = _arrays((), 1, 3, seed=22)
    ours, theirs = _run_both(build, s, v, x)
    _close(ours, theirs)
    _close(ours, (1.0, np.ones((1, 1)), (np.eye(3), np.cos(x)), (np.eye(3), {"a": np.cos(x), "b": [np.tan(x)]})))


@JACAPIS
def test_unrelated_input_and_output(jacapi):
    """``TestJac.test_unrelated_input`` and ``test_unrelated_output``: zeros where an output does not depend on an
    input."""
    def build(lib, func, x, y):
        jac = getattr(func, jacapi)
        return jac(lambda x, y: x, argnums=(0, 1))(x, y), jac(lambda x: y)(x)

    x, y = _arrays((2, 3), (2, 3), seed=23)
    ours, theirs = _run_both(build, x, y)
    _close(ours, theirs)
    zeros = np.zeros((2, 3, 2, 3))
    _close(ours, ((np.eye(6).reshape(2, 3, 2, 3), zeros), zeros))


AGAINST_REFERENCE = {  # TestJac.test_against_reference_*: (the function, in the library lib; input shapes)
    "simple": (lambda lib: lambda x: 3 * x ** 2, [(2, 3, 5)]),
    "multi_input": (lambda lib: lambda x, y: (x.cos() * x) @ y.sin(), [(2, 3), (3, 5)]),
    "multi_input_multi_output": (lambda lib: lambda x, y: ((x * x) @ y, x @ (x.sum(1) * y), y.sum()),
                                 [(5, 3), (3, 5)]),
    "unrelated_outputs": (lambda lib: lambda x, y: (x, y, x, y), [2, 3]),
    "zero_dim_output": (lambda lib: lambda x, y: (x.sum(), y.sum(), x * y), [3, 3]),
    "zero_dim_input": (lambda lib: lambda x: lib.stack([x, x, x]), [()]),
    "zero_dim_mixed": (lambda lib: lambda x, y: (y.sum(), x * y), [(), 1]),
    "default_arg": (lambda lib: lambda x, y, z=3.0: x * y * z, [3, 3]),
}


@JACAPIS
@pytest.mark.parametrize("case", list(AGAINST_REFERENCE))
def test_against_reference(jacapi, case):
    """``TestJac.test_against_reference_*`` (``simple``, ``multi_input``, ``multi_input_multi_output``,
    ``unrelated_outputs``, ``zero_dim``, ``default_arg``): ``jacapi(f)`` of a tuple of inputs equals
    ``torch.autograd.functional.jacobian(f, inputs)``."""
    build, shapes = AGAINST_REFERENCE[case]
    arrays = _arrays(*shapes, seed=24)
    ours = getattr(ta.func, jacapi)(lambda inputs: build(ta)(*inputs))(tuple(ta.tensor(a) for a in arrays))
    expected = torch.autograd.functional.jacobian(build(torch), tuple(torch.tensor(a) for a in arrays))
    _close(ours, expected)


def test_chunk_jacrev():
    """``TestJac.test_chunk_jacrev``: ``chunk_size`` changes nothing in the Jacobian, for any size."""
    def f(x, y):
        return (x.sin(), x + y), (x + 2, x.sum())

    def build(lib, func, x, y):
        return [func.jacrev(f, argnums=(0, 1), chunk_size=c)(x, y) for c in (None, 1, 2, 3, 4, 7, 10, 1000)]

    ours, theirs = _run_both(build, *_arrays((10, 2), (1, 2), seed=25))
    _close(ours, theirs)
    for chunked in ours[1:]:
        _close(chunked, ours[0])


def test_chunk_jacrev_refuses_a_size_below_one():
    """``TestJac.test_chunk_jacrev``: ``chunk_size`` 0 or negative raises ``ValueError`` naming ``chunk_size``."""
    x, y = (ta.tensor(a) for a in _arrays((10, 2), (1, 2)))
    for chunk_size in (0, -2):
        with pytest.raises(ValueError, match="chunk_size"):
            jacrev(lambda x, y: x + y, argnums=(0,), chunk_size=chunk_size)(x, y)


def test_chunk_jacrev_composition():
    """``TestJac.test_chunk_jacrev_composition``: ``vmap(jacrev(jacrev(f)))`` chunked as unchunked."""
    def f(x):
        return (x.sin(), x), (x + 2, x.sum())

    def build(lib, func, x):
        return (func.vmap(func.jacrev(func.jacrev(f)))(x),
                func.vmap(func.jacrev(func.jacrev(f, chunk_size=3), chunk_size=3))(x))

    ours, theirs = _run_both(build, *_arrays((10, 2), seed=26))
    _close(ours, theirs)
    _close(ours[1], ours[0])


@JACAPIS
def test_jac_with_non_tensor_args(jacapi):
    """``TestJac.test_jac_with_non_tensor_args``: an int argument passes through, undifferentiated."""
    (t,) = _arrays((3, 3), seed=27)
    ours = getattr(ta.func, jacapi)(lambda t, int_x: t + int_x)(ta.tensor(t), 3)
    _close(ours, torch.autograd.functional.jacobian(lambda t: t + 3, torch.tensor(t)))


@JACAPIS
def test_empty_out_of_bounds_and_negative_argnums(jacapi):
    """``TestJac.test_empty_argnums``, ``test_out_of_bounds_argnums`` and ``test_negative_argnums``: each raises
    ``RuntimeError``."""
    x = ta.tensor(_arrays(3)[0])
    for argnums in ((), 2, -2):
        with pytest.raises(RuntimeError):
            getattr(ta.func, jacapi)(ta.sin, argnums=argnums)(x)


@JACAPIS
def test_repeated_and_float_argnums(jacapi):
    """``TestJac.test_repeated_argnums`` and ``test_float_argnums``: ``argnums=(0, 0)`` and ``argnums=0.0`` raise
    ``RuntimeError``."""
    x = ta.tensor(_arrays(3)[0])
    with pytest.raises(RuntimeError):
        getattr(ta.func, jacapi)(ta.sin, argnums=(0, 0))(x)
    with pytest.raises(RuntimeError):
        getattr(ta.func, jacapi)(ta.sin, argnums=0.0)(x)


def test_hessian_simple():
    """``TestJac.test_hessian_simple``: ``hessian`` of a function with a vector output runs (and agrees with torch)."""
    ours, theirs = _run_both(lambda lib, func, x: func.hessian(lambda x: x.sin())(x), *_arrays(3, seed=28))
    _close(ours, theirs)


# ----------------------------------------------------------------------------- TestHessian


HESSIAN_AGAINST_REFERENCE = {  # TestHessian.test_hessian_vectorize_correctness_*: (f in the library lib, shapes)
    "simple": (lambda lib: lambda x: (3 * x ** 2).sum(), [(2, 3, 5)]),
    "multi_input": (lambda lib: lambda x, y, z: ((x.relu() * x) @ y.sin() @ z).sum(), [(2, 3), (3, 5), (5, 5)]),
    "unrelated_outputs_one": (lambda lib: lambda x, y: (x ** 2).sum(), [2, 3]),
    "unrelated_outputs_all": (lambda lib: lambda x, y: lib.ones(()), [2, 3]),
}


@pytest.mark.parametrize("case", list(HESSIAN_AGAINST_REFERENCE))
def test_hessian_against_reference(case):
    """``TestHessian.test_hessian_vectorize_correctness_simple``, ``_multi_input`` and ``_unrelated_outputs``:
    ``hessian(f)`` of a tuple of inputs equals ``torch.autograd.functional.hessian(f, inputs)``."""
    build, shapes = HESSIAN_AGAINST_REFERENCE[case]
    arrays = _arrays(*shapes, seed=29)
    ours = hessian(lambda inputs: build(ta)(*inputs))(tuple(ta.tensor(a) for a in arrays))
    _close(ours, torch.autograd.functional.hessian(build(torch), tuple(torch.tensor(a) for a in arrays)))


def test_jacfwd_different_levels():
    """``TestHessian.test_jacfwd_different_levels`` (functorch issue 597): ``vmap(hessian(loss))`` equals
    ``vmap(jacrev(jacrev(loss)))`` for a least-squares loss of 8 batches of 100 points."""
    def loss(A, x1, x2):
        x2_hat = (A @ (x1.T)).T
        res = x2 - x2_hat
        return (res ** 2).sum()

    def build(lib, func, x1, A):
        return func.vmap(func.jacrev(func.jacrev(loss)))(A, x1, x1), func.vmap(func.hessian(loss))(A, x1, x1)

    x1, A = _arrays((8, 100, 2), (8, 2, 2), seed=30)
    ours, theirs = _run_both(build, x1, 0.1 * A)
    _close(ours, theirs)
    _close(ours[1], ours[0])


# ----------------------------------------------------------------------------- TestJvp


def test_jvp_simple_and_multiple_inputs_outputs():
    """``TestJvp.test_simple``, ``test_multiple_inputs``, ``test_multiple_outputs`` and
    ``test_multiple_inputs_outputs``: ``(f(x), J t)`` for one and several inputs and outputs."""
    def build(lib, func, x, y, tx, ty):
        f = lambda x, y: (2 * x + 3 * y, 4 * x + 5 * y)
        return (func.jvp(lib.sin, (x,), (tx,)), func.jvp(lambda x, y: x * y, (x, y), (tx, ty)),
                func.jvp(lambda x: (lib.sin(x), lib.cos(x)), (x,), (tx,)), func.jvp(f, (x, y), (tx, ty)))

    x, y, tx, ty = _arrays((2, 3), (2, 3), (2, 3), (2, 3), seed=31)
    ours, theirs = _run_both(build, x, y, tx, ty)
    _close(ours, theirs)
    _close(ours, ((np.sin(x), np.cos(x) * tx), (x * y, y * tx + x * ty),
                  ((np.sin(x), np.cos(x)), (np.cos(x) * tx, -np.sin(x) * tx)),
                  ((2 * x + 3 * y, 4 * x + 5 * y), (2 * tx + 3 * ty, 4 * tx + 5 * ty))))


def test_jvp_pytree_inputs_and_unrelated():
    """``TestJvp.test_pytree_inputs``, ``test_unrelated_input`` and ``test_unrelated_output``: trees of primals and
    tangents; an unused input adds nothing, an output unrelated to the inputs has a zero tangent."""
    def build(lib, func, one, x, y, tx, ty):
        f = lambda x, y, z: x[0] + 2 * x[1] + 3 * y + 4 * z
        return (func.jvp(f, ((one, one), one, one), ((one, one), one, one)),
                func.jvp(lambda x, y: x, (x, y), (tx, ty)), func.jvp(lambda x: y, (x,), (tx,)))

    x, y, tx, ty = _arrays((2, 3), (2, 3), (2, 3), (2, 3), seed=32)
    ours, theirs = _run_both(build, np.array(1.0), x, y, tx, ty)
    _close(ours, theirs)
    _close(ours, ((10.0, 10.0), (x, tx), (y, np.zeros((2, 3)))))


def test_jvp_strict_mode():
    """``TestJvp.test_strict_mode``: ``strict=True`` refuses an output independent of the primals."""
    x, tx, y = (ta.tensor(a) for a in _arrays((2, 3), (2, 3), (2, 3), seed=33))
    with pytest.raises(RuntimeError, match="strict"):
        jvp(lambda x: (x, y), (x,), (tx,), strict=True)


def test_jvp_aux_tensor_and_pytree():
    """``TestJvp.test_aux_tensor`` and ``test_aux_pytree``: ``jvp(has_aux=True)`` wants a pair and gives
    ``(output, J t, aux)``."""
    x, t = _arrays(3, 3, seed=34)
    for func, a, b in ((ta.func, ta.tensor(x), ta.tensor(t)), (torch.func, torch.tensor(x), torch.tensor(t))):
        with pytest.raises(RuntimeError):
            func.jvp(lambda t: [t, t], (a,), (b,), has_aux=True)
        with pytest.raises(RuntimeError):
            func.jvp(lambda t: (t, t + 2, t + 3), (a,), (b,), has_aux=True)

    def build(lib, func, x, t):
        return (func.jvp(lambda z: (z.sin(), z.cos()), (x,), (t,), has_aux=True),
                func.jvp(lambda z: (z.sin(), {"a": z.cos(), "b": [_tan(z)]}), (x,), (t,), has_aux=True))

    ours, theirs = _run_both(build, x, t)
    _close(ours, theirs)
    _close(ours, ((np.sin(x), t * np.cos(x), np.cos(x)),
                  (np.sin(x), t * np.cos(x), {"a": np.cos(x), "b": [np.tan(x)]})))


def test_jvp_structure_errors():
    """``TestJvp.test_primals_tangents_length_mismatch``, ``test_inputs_are_tuples_of_tensors`` and
    ``test_pytree_inputs_error_cases`` (all but the empty tuples): primals and tangents are tuples of the same
    tree of tensors, else ``RuntimeError``."""
    x, t = (ta.tensor(a) for a in _arrays((2, 3), (2, 3), seed=35))
    one = ta.tensor(1.0, dtype=ta.float64)
    for primals, tangents in [((x,), (t, t)), ((x, x), (t, t, t)), (x, (t,)), ((x,), t), ((x,), [t]), ((1.0,), (t,)),
                              ((x,), (1.0,)), (one, one), (((one, one), one), (one, one)),
                              (((one, one), 1), ((one, one), one)), (((one, one), 1), ((1, one), one))]:
        with pytest.raises(RuntimeError):
            jvp(lambda *args: args[0], primals, tangents)


def test_nonempty_primals_and_tangents():
    """``TestJvp.test_nonempty_primals_and_tangents`` and ``test_pytree_inputs_error_cases``: primals with no tensor
    raise ``RuntimeError``."""
    with pytest.raises(RuntimeError):
        jvp(ta.sin, (), ())
    with pytest.raises(RuntimeError):
        jvp(lambda x: x, ((),), ((),))


def test_jvp_new_tensor():
    """``TestJvp.test_jvp_new_tensor``: a tensor made inside with ``new_tensor`` is a constant."""
    def build(lib, func, x):
        return func.jvp(lambda x: x + x.new_tensor(0.5), (x,), (lib.zeros_like(x),))

    (x,) = _arrays((10, 10), seed=36)
    ours, theirs = _run_both(build, x)
    _close(ours, theirs)
    _close(ours, (x + 0.5, np.zeros((10, 10))))


def test_jvp_inside_autograd_function():
    """``TestJvp.test_jvp_inside_autograd_function``: an ``autograd.Function`` whose forward and backward call
    ``jvp``: ``sin`` and its derivative ``cos``."""
    def build(lib, func, x):
        class MySin(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                _, neg_sin_x = func.jvp(lib.cos, (x,), (lib.ones_like(x),))
                ctx.save_for_backward(x)
                return -neg_sin_x

            @staticmethod
            def backward(ctx, gx):
                (x,) = ctx.saved_tensors
                _, cos_x = func.jvp(lib.sin, (x,), (lib.ones_like(x),))
                return gx * cos_x

        x.requires_grad_(True)
        y = MySin.apply(x)
        return y, lib.autograd.grad(y, x)[0]

    (x,) = _arrays((), seed=37)
    ours, theirs = _run_both(build, x)
    _close(ours, theirs)
    _close(ours, (np.sin(x), np.cos(x)))


# ----------------------------------------------------------------------------- TestComposability


def test_grad_of_vmap_and_of_vjp():
    """``TestComposability.test_grad_vmap`` (``cos x``) and ``test_grad_vjp`` (``grad`` of ``vjp_fn(x)[0].sum()``
    equals ``grad`` of ``(x cos x).sum()``)."""
    def build(lib, func, x):
        def foo(x):
            _, vjp_fn = func.vjp(lib.sin, x)
            return vjp_fn(x)[0].sum()

        return (func.grad(lambda x: func.vmap(lib.sin)(x).sum())(x), func.grad(foo)(x),
                func.grad(lambda x: (x * x.cos()).sum())(x))

    (x,) = _arrays(3, seed=38)
    ours, theirs = _run_both(build, x)
    _close(ours, theirs)
    _close(ours[0], np.cos(x))
    _close(ours[1], ours[2])


def test_vmap_of_grad_vmap_and_vjp():
    """``TestComposability.test_vmap_grad``, ``test_vmap_vmap`` and ``test_vmap_vjp``: ``vmap`` of each transform
    equals the transform example by example."""
    def build(lib, func, x, xs, m):
        _, vjp_fn = func.vjp(lib.sin, x)

        def foo(x):
            _, vjp_fn = func.vjp(lib.sin, x)
            return vjp_fn(x)

        return (func.vmap(func.grad(lib.sin))(x), func.vmap(func.vmap(lib.sin))(m), func.vmap(foo)(x), vjp_fn(x),
                func.vmap(lambda x: vjp_fn(x)[0])(xs), lib.stack([vjp_fn(row)[0] for row in xs]))

    x, xs, m = _arrays(3, (5, 3), (2, 3), seed=39)
    ours, theirs = _run_both(build, x, xs, m)
    _close(ours, theirs)
    _close(ours[:2], (np.cos(x), np.sin(m)))
    _close(ours[2], ours[3])
    _close(ours[4], ours[5])


def test_vjp_of_grad_vmap_and_vjp():
    """``TestComposability.test_vjp_grad``, ``test_vjp_vmap`` and ``test_vjp_vjp``: ``vjp`` of ``grad(sin)`` is
    ``-v sin x``, of ``vmap(sin)`` is ``v cos x``, and of a ``vjp_fn`` runs (``y = x cos x``)."""
    def build(lib, func, s, v_s, x, v):
        y1, vjp_1 = func.vjp(func.grad(lib.sin), s)
        y2, vjp_2 = func.vjp(func.vmap(lib.sin), x)
        _, vjp_fn = func.vjp(lib.sin, x)
        y3, vjp_3 = func.vjp(lambda x: vjp_fn(x)[0], x)
        return y1, vjp_1(v_s)[0], y2, vjp_2(v)[0], y3, vjp_3(x)[0]

    s, v_s, x, v = _arrays((), (), 3, 3, seed=40)
    ours, theirs = _run_both(build, s, v_s, x, v)
    _close(ours, theirs)
    _close(ours[:5], (np.cos(s), -np.sin(s) * v_s, np.sin(x), np.cos(x) * v, x * np.cos(x)))


@pytest.mark.parametrize("case", ["requires_grad_", "retain_grad"])
def test_requires_grad_and_retain_grad_inside_transform(case):
    """``TestComposability.test_requires_grad_inside_transform`` and ``test_retain_grad_inside_transform``: a
    transform refuses a function that asks for autograd's own bookkeeping on its tensors."""
    x = ta.tensor(_arrays(3, seed=41)[0])
    if case == "requires_grad_":
        def f(x):
            x.requires_grad_()
            return x.sin().sum()

        for transform in (vmap(f), grad(f), vmap(grad(f))):
            with pytest.raises(RuntimeError, match="requires_grad_"):
                transform(x)
    else:
        def g(x):
            y = x.sin()
            y.retain_grad()
            return y.sum()

        with pytest.raises(RuntimeError, match="retain_grad"):
            grad(g)(x)


# ----------------------------------------------------------------------------- TestVmapAPI


def test_vmap_errors_for_outputs_sizes_and_inputs():
    """``TestVmapAPI.test_non_tensor_output_raises``, ``test_different_map_dim_size_raises``,
    ``test_func_with_no_inputs`` and ``test_func_with_no_tensors``: each raises ``ValueError``."""
    x, y = ta.tensor(_arrays(2)[0]), ta.tensor(_arrays(3)[0])
    with pytest.raises(ValueError):
        vmap(lambda x: 3.14)(ta.ones(3))
    with pytest.raises(ValueError):
        vmap(lambda x: (x, 3))(ta.ones(3))
    with pytest.raises(ValueError, match="(?i)expected all tensors to have the same size in the mapped dimension"):
        vmap(ta.mul)(x, y)
    with pytest.raises(ValueError, match="(?i)same size in the mapped dimension"):
        vmap(lambda z: z[0] + z[1], in_dims=((0, 0),))((x, y))
    with pytest.raises(ValueError, match="(?i)same size in the mapped dimension"):
        vmap(lambda z: z["x"] + z["y"], in_dims=({"x": 0, "y": 0},))({"x": x, "y": y})
    with pytest.raises(ValueError):
        vmap(lambda: ta.randn(3))()
    with pytest.raises(ValueError):
        vmap(lambda x: ta.randn(3))()
    with pytest.raises(ValueError):
        vmap(lambda x: ta.randn(3), (None,))(1)


def test_vmap_constant_single_and_multiple():
    """``TestVmapAPI.test_constant_function``, ``test_single_input``, ``test_multiple_inputs``,
    ``test_multiple_outputs`` and ``test_multiple_outputs2``."""
    def build(lib, func, x, y, v):
        return (func.vmap(lambda x: lib.tensor(3.14))(lib.ones(3)), func.vmap(lambda x: x * x)(x),
                func.vmap(lib.mul)(x, y), func.vmap(lambda x: (x * x, x * x * x))(v),
                func.vmap(lambda x: (x, x))(v), func.vmap(lambda x: [x, x])(v), func.vmap(lambda x: [x])(v))

    x, y, v = _arrays((2, 3), (2, 3), 3, seed=42)
    ours, theirs = _run_both(build, x, y, v)
    _close(ours, theirs, rtol=1e-6)
    _close(ours, (np.full(3, 3.14, dtype=np.float32), x * x, x * y, (v * v, v * v * v), (v, v), [v, v], [v]),
           rtol=1e-6)


def test_vmap_nested():
    """``TestVmapAPI.test_nested_with_same_map_dim``, ``test_nested_with_different_map_dim`` and
    ``test_noop_in_inner_vmap``."""
    def build(lib, func, x, y, a, b, c, p, q):
        return (func.vmap(func.vmap(lib.mul))(x, y), func.vmap(func.vmap(func.vmap(lib.mul)))(x, y),
                func.vmap(lambda a: func.vmap(lambda b: a * b)(b))(a),
                func.vmap(lambda a: func.vmap(lambda b: func.vmap(lambda c: a * b * c)(c))(b))(a),
                func.vmap(lambda p: func.vmap(lambda q: p)(q))(p))

    x, y, a, b, c, p, q = _arrays((2, 3, 5), (2, 3, 5), (2, 3), (5, 3), (7, 3), 3, 5, seed=43)
    ours, theirs = _run_both(build, x, y, a, b, c, p, q)
    _close(ours, theirs)
    _close(ours, (x * y, x * y, a.reshape(2, 1, 3) * b, a.reshape(2, 1, 1, 3) * b.reshape(5, 1, 3) * c,
                  np.broadcast_to(p.reshape(3, 1), (3, 5))))


def test_nonzero_multiple_and_nested_out_dims():
    """``TestVmapAPI.test_nonzero_out_dims`` (without the storage checks), ``test_multiple_out_dims``,
    ``test_nested_out_dims`` and ``test_out_dims_edge_case``: where ``out_dims`` puts the batch."""
    def build(lib, func, a, b, c, d, e, f, g):
        identity = lambda x: x
        return (func.vmap(identity, out_dims=1)(a), func.vmap(identity, out_dims=2)(b),
                func.vmap(identity, out_dims=-1)(b), func.vmap(lambda x, y: (x, y), out_dims=2)(b, c),
                func.vmap(lambda x, y: (x, x * y, x * y * y), out_dims=1)(d, e),
                func.vmap(lambda x: (x, x), out_dims=(0, 1))(d),
                func.vmap(lambda x, y: (x, x, x, x * y), out_dims=(-1, 0, 1, 2))(d, e),
                func.vmap(lambda y: func.vmap(identity, out_dims=1)(y))(b),
                func.vmap(lambda y: func.vmap(identity, out_dims=1)(y), out_dims=1)(b),
                func.vmap(lambda y: func.vmap(identity, out_dims=-1)(y), out_dims=-1)(b),
                func.vmap(lambda y: func.vmap(lambda x: x * y, out_dims=1)(f), out_dims=-1)(g),
                func.vmap(identity, out_dims=(1,))(a))

    a, b, c, d, e, f, g = _arrays((2, 3), (2, 3, 5, 7), (2, 3, 5, 7), (2, 3, 5), (2, 3, 5), (2, 3), (5, 3), seed=44)
    ours, theirs = _run_both(build, a, b, c, d, e, f, g)
    _close(ours, theirs)
    t = np.transpose
    _close(ours, (a.T, t(b, (1, 2, 0, 3)), t(b, (1, 2, 3, 0)), (t(b, (1, 2, 0, 3)), t(c, (1, 2, 0, 3))),
                  (t(d, (1, 0, 2)), t(d * e, (1, 0, 2)), t(d * e * e, (1, 0, 2))), (d, t(d, (1, 0, 2))),
                  (t(d, (1, 2, 0)), d, t(d, (1, 0, 2)), t(d * e, (1, 2, 0))), t(b, (0, 2, 1, 3)), t(b, (2, 0, 1, 3)),
                  t(b, (2, 3, 1, 0)), t(g.reshape(5, 1, 3) * f, (2, 1, 0)), a.T))
    big = ta.tensor(np.zeros([2] + [1] * 63))  # the most dimensions an array may have
    assert vmap(lambda x: x, out_dims=2)(big).shape == tuple([1, 1, 2] + [1] * 61)


def test_out_dims_none_and_normal_tensor():
    """``TestVmapAPI.test_out_dims_none`` (a batched output with ``out_dims=None`` raises ``ValueError``) and
    ``test_out_dims_normal_tensor`` (an unbatched output is repeated, or with ``None`` returned once)."""
    with pytest.raises(ValueError):
        vmap(lambda x: x, out_dims=None)(ta.ones(2, 3))

    def build(lib, func, x):
        return func.vmap(lambda x: lib.arange(3))(x), func.vmap(lambda x: lib.arange(3), out_dims=None)(x)

    ours, theirs = _run_both(build, *_arrays((2, 3)))
    _close(ours, theirs)
    _close(ours, (np.tile(np.arange(3), (2, 1)), np.arange(3)))


def test_out_dims_none_for_non_tensor_outputs():
    """``TestVmapAPI.test_out_dims_none_tuple`` and ``test_out_dims_none``: an output that is not a tensor, with
    ``out_dims`` ``None`` for it, comes back as it is."""
    x = ta.tensor(_arrays((2, 3))[0])
    result = vmap(lambda x: (x, "hello world"), out_dims=(0, None))(x)
    assert result[1] == "hello world"
    _close(result[0], x.numpy())
    assert vmap(lambda x: (None, "hello world"), out_dims=(None, None))(x) == (None, "hello world")
    assert vmap(lambda x: "hello world", out_dims=None)(x) == "hello world"


def test_pytree_returns():
    """``TestVmapAPI.test_pytree_returns``, ``test_pytree_returns_outdims`` and
    ``test_pytree_returns_broadcast_simple``: trees of outputs, ``out_dims`` a tree or one int for all."""
    def build(lib, func, x):
        def f(x):
            y = x.sin()
            return y, (y, y)

        return (func.vmap(lambda x: (x.sin(), (x.sin(), x.sin()), [x.sin(), (x.sin(), x.sin())]))(x),
                func.vmap(f, out_dims=(0, (0, 1)))(x), func.vmap(f, out_dims=1)(x))

    (x,) = _arrays((2, 3), seed=45)
    ours, theirs = _run_both(build, x)
    _close(ours, theirs)
    s = np.sin(x)
    _close(ours, ((s, (s, s), [s, (s, s)]), (s, (s, s.T)), (s.T, (s.T, s.T))))


def test_pytree_returns_broadcast_nested():
    """``TestVmapAPI.test_pytree_returns_broadcast_nested``: an int in ``out_dims`` applies to the whole subtree of
    outputs in its place."""
    x = ta.tensor(_arrays((2, 3), seed=45)[0])
    y0, (y1, y2) = vmap(lambda x: (x.sin(), (x.sin(), x.sin())), out_dims=(0, 1))(x)
    s = np.sin(x.numpy())
    _close((y0, y1, y2), (s, s.T, s.T))


def test_pytree_odict_returns():
    """``TestVmapAPI.test_pytree_odict_returns``: an ``OrderedDict`` output comes back an ``OrderedDict``."""
    x = ta.tensor(_arrays((2, 3))[0])
    out = vmap(lambda t: collections.OrderedDict([("sin", t.sin()), ("cos", t.cos())]))(x)
    assert isinstance(out, collections.OrderedDict)
    _close(dict(out), {"sin": np.sin(x.numpy()), "cos": np.cos(x.numpy())})


def test_out_dims_and_num_outputs_mismatch():
    """``TestVmapAPI.test_out_dims_and_num_outputs_mismatch_err_msg``: too many or too few ``out_dims`` raise
    ``ValueError``."""
    x = ta.tensor(_arrays((2, 3, 5))[0])
    for fn, out_dims in [(lambda x: x, (0, 0)), (lambda x: (x, x, x), (0, 0, 0, 0)), (lambda x: (x, x), (0,)),
                         (lambda x: (x, x, x), (0, 0))]:
        with pytest.raises(ValueError):
            vmap(fn, out_dims=out_dims)(x)


def test_out_dims_must_be_ints():
    """``TestVmapAPI.test_out_dims_must_be_int_or_collection_of_int_err_msg``: ``out_dims`` that are not ints raise
    ``ValueError``."""
    x = ta.tensor(_arrays((2, 3))[0])
    for out_dims in ("lol", ("lol",)):
        with pytest.raises(ValueError):
            vmap(lambda x: x, out_dims=out_dims)(x)


def test_out_dim_out_of_bounds():
    """``TestVmapAPI.test_out_dim_out_of_bounds_err_msg``: ``out_dims`` out of the result's range raises
    ``IndexError``."""
    x = ta.tensor(_arrays((2, 3, 5))[0])
    for out_dims in (3, -4):
        with pytest.raises(IndexError):
            vmap(lambda x: x, out_dims=out_dims)(x)


def test_in_dims():
    """``TestVmapAPI.test_non_zero_in_dims``, ``test_none_in_dims``, ``test_nested_non_default_in_dims``,
    ``test_nested_negative_in_dims`` and ``test_non_default_in_dims_out_dims``."""
    def build(lib, func, t, x, y, yt, u, v, p, q):
        foo = lambda x: x * 2
        return (func.vmap(lambda x: x, (1,))(t), func.vmap(lib.mul, (0, 1))(x, yt), func.vmap(lib.mul, (1, 0))(yt, x),
                func.vmap(lib.mul, (0, None))(x, y), func.vmap(lib.mul, (0, None))(x, 2),
                func.vmap(func.vmap(func.vmap(lib.mul), (1, 0)), (1, 2))(u, v), func.vmap(lib.mul, (-1, -1))(p, q),
                func.vmap(lambda x: x, in_dims=1, out_dims=1)(t), func.vmap(lambda x: x, in_dims=2, out_dims=1)(t),
                func.vmap(foo, in_dims=1, out_dims=1)(t), func.vmap(foo, in_dims=2, out_dims=1)(t),
                func.vmap(func.vmap(foo, 1, 1), 1, 1)(t))

    t, x, y, u, v, p, q = _arrays((2, 3, 5), (2, 3), (2, 3), (5, 2, 3), (3, 5, 2), (2, 3), (2, 3), seed=46)
    ours, theirs = _run_both(build, t, x, y, np.ascontiguousarray(x.T * 0.5 + 1), u, v, p, q)
    _close(ours, theirs)
    yt = x.T * 0.5 + 1
    _close(ours, (np.transpose(t, (1, 0, 2)), x * yt.T, yt.T * x, x.reshape(2, 1, 3) * y, x * 2,
                  np.transpose(u, (1, 2, 0)) * np.transpose(v, (2, 0, 1)), (p * q).T, t, np.transpose(t, (0, 2, 1)),
                  t * 2, np.transpose(t * 2, (0, 2, 1)), t * 2))


def test_item_and_data_dependent_control_flow_throw():
    """``TestVmapAPI.test_item_throws`` and ``test_data_dependent_control_flow_throws``: ``item()`` and ``if x:`` on
    a batched tensor raise ``RuntimeError``."""
    with pytest.raises(RuntimeError, match=r"item\(\)"):
        vmap(lambda x: x.item())(ta.ones(3))
    with pytest.raises(RuntimeError):
        vmap(lambda x: x if x else 0)(ta.ones(3))


def test_accepts_nested_inputs():
    """``TestVmapAPI.test_accepts_nested_inputs``: tuples, lists and dicts of tensors, with ``in_dims`` an int, one
    per argument, or the argument's own tree."""
    def build(lib, func, x, y):
        add = lambda z: z[0] + z[1]
        add_dict = lambda z: z["x"] + z["y"]
        return (func.vmap(add)((x, y)), func.vmap(add, in_dims=(0,))((x, y)), func.vmap(add, in_dims=((0, 0),))((x, y)),
                func.vmap(add)([x, y]), func.vmap(add, in_dims=(0,))([x, y]), func.vmap(add, in_dims=([0, 0],))([x, y]),
                func.vmap(add_dict)({"x": x, "y": y}), func.vmap(add_dict, in_dims=(0,))({"x": x, "y": y}),
                func.vmap(add_dict, in_dims=({"x": 0, "y": 0},))({"x": x, "y": y}),
                func.vmap(lambda z: z["x"][0] + z["x"][1][0] + z["y"][0] + z["y"][1])({"x": [x, (x,)], "y": [y, y]}))

    x, y = _arrays((2, 3), (2, 3), seed=47)
    ours, theirs = _run_both(build, x, y)
    _close(ours, theirs)
    _close(ours, tuple([x + y] * 9 + [2 * x + 2 * y]))


def test_in_dims_errors():
    """``TestVmapAPI.test_in_dims_wrong_type_err_msg`` and ``test_not_enough_in_dims_err_msg`` (the cases tinyattn
    refuses as torch does), ``test_integer_in_dim_but_not_tensor_input_err_msg`` and
    ``test_in_dim_not_in_tensor_err_msg``: each raises ``ValueError``; the last lines of each must not."""
    x3, y3, x, y = (ta.tensor(a) for a in _arrays(3, 3, (2, 3), (2, 3), seed=48))
    add = lambda z: z[0] + z[1]
    calls = [lambda: vmap(ta.mul, {0})(x3, y3), lambda: vmap(ta.mul, "lol")(x3, y3),
             lambda: vmap(add, in_dims=[0, 0])([x3, y3]), lambda: vmap(ta.mul, (0,))(x3, y3),
             lambda: vmap(ta.mul, (0, 0, 0))(x3, y3), lambda: vmap(add, in_dims=([0],))([x3, y3]),
             lambda: vmap(ta.sum)(x, 0), lambda: vmap(ta.sum, (0, 0))(x, 0),
             lambda: vmap(add, in_dims=([0, 0],))([x, 1]),
             lambda: vmap(lambda t: t * t)(ta.randn()), lambda: vmap(lambda t: t * t, in_dims=(0,))(ta.randn()),
             lambda: vmap(lambda t: t * t, in_dims=(-3,))(x), lambda: vmap(lambda t: t * t, in_dims=(2,))(y),
             lambda: vmap(add, in_dims=([3, 0],))([x, y])]
    for call in calls:
        with pytest.raises(ValueError):
            call()
    vmap(ta.mul, (0, 0))(x3, y3)
    vmap(ta.sum, (0, None))(x, 0)
    vmap(lambda t: t * t, in_dims=(0,))(x)
    vmap(lambda t: t * t, in_dims=(1,))(x)


def test_in_dims_must_be_tuples_matching_the_inputs():
    """``TestVmapAPI.test_in_dims_wrong_type_err_msg`` (``vmap(mul, [0, 0])``) and
    ``test_not_enough_in_dims_err_msg`` (``in_dims=((0, 0),)`` for ``[x, y]``): each raises ``ValueError``."""
    x, y = (ta.tensor(a) for a in _arrays(3, 3))
    with pytest.raises(ValueError):
        vmap(ta.mul, [0, 0])(x, y)
    with pytest.raises(ValueError):
        vmap(lambda z: z[0] + z[1], in_dims=((0, 0),))([x, y])


def test_functools_partial_nn_module_and_unbatched_inner_inputs():
    """``TestVmapAPI.test_functools_partial``, ``test_nn_module`` (a ``Linear`` without bias, weights copied) and
    ``test_batch_rule_does_not_need_to_handle_no_batched_input`` (``torch.dot`` written as ``@`` of vectors)."""
    torch.manual_seed(1)
    theirs_model = torch.nn.Linear(3, 3, bias=False).double()
    ours_model = ta.nn.Linear(3, 3, bias=False).double()
    ours_model.load_state_dict({k: v.detach().numpy() for k, v in theirs_model.state_dict().items()})

    def build(lib, func, x, y, t, a, b):
        model = ours_model if lib is ta else theirs_model

        def f(x, y):
            return x + y @ lib.ones(2, dtype=lib.float64)

        return (func.vmap(functools.partial(lib.mul, x))(y), func.vmap(model)(t), model(t),
                func.vmap(func.vmap(f, in_dims=(0, None)), in_dims=(None, 0))(a, b))

    x, y, t, a, b = _arrays(3, (2, 3), (2, 3), (7, 5), (3, 2), seed=49)
    ours, theirs = _run_both(build, x, y, t, a, b)
    _close(ours, theirs)
    _close(ours[0], x * y)
    _close(ours[1], ours[2])
    _close(ours[3], (b @ np.ones(2)).reshape(3, 1, 1) + a)


# ----------------------------------------------------------------------------- TestRandomness: more cases


@pytest.mark.parametrize("randomness", ["error", "same", "different"])
@pytest.mark.parametrize("op", ["randn", "rand"])
def test_factory_ops(op, randomness):
    """``TestRandomness.test_factory_ops`` (the generator seeded by ``manual_seed``): ``"error"`` raises; ``"same"``
    draws what one unbatched call draws, for every example; ``"different"`` draws what one call of the batched shape
    draws, a distinct slice per example."""
    draw = lambda _, shape: getattr(ta, op)(shape, dtype=ta.float64)
    B0, shape, seed = 4, (3, 3), 1234567
    passed = ta.randn(B0)
    if randomness == "error":
        with pytest.raises(RuntimeError, match="randomness"):
            vmap(draw, in_dims=(0, None), randomness="error")(passed, shape)
        return
    ta.manual_seed(seed)
    result = vmap(draw, in_dims=(0, None), randomness=randomness)(passed, shape).numpy()
    ta.manual_seed(seed)
    if randomness == "different":
        expected = draw(passed, (B0, *shape)).numpy()
        assert len({row.tobytes() for row in result}) == B0
    else:
        expected = np.broadcast_to(draw(passed, shape).numpy(), (B0, *shape))
    np.testing.assert_array_equal(result, expected)


@pytest.mark.parametrize("randomness, batched_input", [  # ("different", "none"): ported above
    (r, b) for r in ("error", "same", "different") for b in ("first", "last", "none")
    if (r, b) != ("different", "none")])
def test_dropout(randomness, batched_input):
    """``TestRandomness.test_dropout`` (but ``"different"`` with an unbatched input, ported above): dropout of
    ``ones_like(t)`` inside ``vmap``: ``"error"`` raises; the rate is near one half; ``"same"`` gives one mask,
    ``"different"`` one per example."""
    B0 = 4
    passed = {"first": ta.ones(B0, 3, 3, 14, 14), "last": ta.ones(3, 3, 14, 14, B0), "none": ta.ones(3, 3, 14, 14)}
    in_dims = ({"first": 0, "last": -1, "none": None}[batched_input], 0)
    op = lambda t, ignored: F.dropout(ta.ones_like(t), training=True)
    ta.manual_seed(0)
    if randomness == "error":
        with pytest.raises(RuntimeError, match="randomness"):
            vmap(op, randomness=randomness, in_dims=in_dims)(passed[batched_input], ta.randn(B0))
        return
    result = vmap(op, randomness=randomness, in_dims=in_dims)(passed[batched_input], ta.randn(B0)).numpy()
    p_estimate = result.mean() / 2
    assert 0.25 < p_estimate < 0.75
    slices = {row.tobytes() for row in result}
    assert len(slices) == (B0 if randomness == "different" else 1)
