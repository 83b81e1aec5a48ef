"""``ta.func``'s transforms against ``torch.func``'s on every case of ``func_cases`` (float64, hypothesis-drawn
shapes, values, argnums and directions), then against calculus and against each other:

1. ``grad`` (argnums int and tuple, ``has_aux``), ``grad_and_value``, ``vjp`` (several outputs, ``has_aux``),
   ``jvp`` (several primals), ``jacrev`` and ``jacfwd`` (argnums, several outputs), ``hessian``: the values
   and the nesting of the results equal torch.func's;
2. ``jvp`` equals central finite differences; ``jacfwd == jacrev``; the Hessian is symmetric and equals
   ``jacfwd(jacrev)`` and ``jacrev(jacrev)``;
3. compositions: ``grad(grad)``, ``jvp`` of ``grad``, ``vmap(grad)``, ``vmap(jacrev)``, ``jacfwd(jacrev)``,
   and nested ``jvp`` that closes over the outer input (perturbation confusion).
"""

import numpy as np
import pytest
import torch
from func_cases import (
    IDS,
    SPECS,
    as_tuple,
    assert_trees_close,
    contract,
    functions,
    numpy_of,
    ours,
    theirs,
)
from hypothesis import given
from hypothesis import strategies as st
from torch.nn.attention import SDPBackend, sdpa_kernel

import tinyattn as ta
from tinyattn import func
from tinyattn import testing as tt

HESSIAN_RTOL, HESSIAN_ATOL = 1e-8, 1e-10


@pytest.fixture(autouse=True)
def torch_math_attention():
    """torch's attention on its composite kernel, which every torch.func transform goes through."""
    with sdpa_kernel(SDPBackend.MATH):
        yield


def _draw(spec, data):
    """A case of ``spec``: the arrays, both functions, and a random number generator for directions."""
    arrays, options = data.draw(spec.case, label="case")
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="seed"))
    ours_fn, theirs_fn = functions(spec, options)
    return arrays, ours_fn, theirs_fn, rng


def _argnums(data, count):
    """An int (possibly negative) or a tuple of distinct positions (in any order)."""
    as_int = st.integers(-count, count - 1)
    as_tuple_ = st.lists(st.integers(0, count - 1), min_size=1, max_size=count, unique=True).map(tuple)
    return data.draw(as_int | as_tuple_, label="argnums")


def _for_torch(argnums, count):
    """torch.func.jacfwd (2.13) answers zeros for a negative argnums: torch gets the same positions, counted
    from the front (ours gets them as drawn)."""
    return argnums % count if isinstance(argnums, int) else argnums


def _directions(rng, outputs):
    return [rng.standard_normal(tuple(o.shape)) for o in as_tuple(outputs)]


def _scalar_functions(theirs_fn, arrays, rng):
    """Both functions contracted with the same random directions of their outputs: a number each."""
    directions = _directions(rng, theirs_fn(*[theirs(a) for a in arrays]))

    def make(fn, convert):
        us = [convert(u) for u in directions]
        return lambda *xs: contract(fn(*xs), us)
    return make, directions


# ----------------------------------------------------------------------------- against torch.func


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
@given(data=st.data())
def test_grad_matches_torch(spec, data):
    arrays, ours_fn, theirs_fn, rng = _draw(spec, data)
    make, _ = _scalar_functions(theirs_fn, arrays, rng)
    ours_scalar, their_scalar = make(ours_fn, ours), make(theirs_fn, theirs)
    argnums = _argnums(data, len(arrays))
    has_aux = data.draw(st.booleans(), label="has_aux")
    if has_aux:  # aux: a tree of tensors that rides along
        ours_f = lambda *xs: (ours_scalar(*xs), {"first": as_tuple(ours_fn(*xs))[0] * 2})  # noqa: E731
        their_f = lambda *xs: (their_scalar(*xs), {"first": as_tuple(theirs_fn(*xs))[0] * 2})  # noqa: E731
    else:
        ours_f, their_f = ours_scalar, their_scalar
    xs, ts = [ours(a) for a in arrays], [theirs(a) for a in arrays]
    got = func.grad(ours_f, argnums=argnums, has_aux=has_aux)(*xs)
    expected = torch.func.grad(their_f, argnums=_for_torch(argnums, len(arrays)), has_aux=has_aux)(*ts)
    assert_trees_close(got, expected, where="grad")
    got = func.grad_and_value(ours_f, argnums=argnums, has_aux=has_aux)(*xs)
    expected = torch.func.grad_and_value(their_f, argnums=_for_torch(argnums, len(arrays)), has_aux=has_aux)(*ts)
    assert_trees_close(got, expected, where="grad_and_value")
    for x, a in zip(xs, arrays):  # the inputs are left as they were
        assert not x.requires_grad and x.grad is None
        np.testing.assert_array_equal(x.numpy(), a)


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
@given(data=st.data())
def test_vjp_matches_torch(spec, data):
    arrays, ours_fn, theirs_fn, rng = _draw(spec, data)
    has_aux = data.draw(st.booleans(), label="has_aux")
    if has_aux:
        ours_f = lambda *xs: (ours_fn(*xs), xs[0].tanh())  # noqa: E731
        their_f = lambda *xs: (theirs_fn(*xs), xs[0].tanh())  # noqa: E731
    else:
        ours_f, their_f = ours_fn, theirs_fn
    got = func.vjp(ours_f, *[ours(a) for a in arrays], has_aux=has_aux)
    expected = torch.func.vjp(their_f, *[theirs(a) for a in arrays], has_aux=has_aux)
    assert_trees_close(got[0], expected[0], where="output")
    if has_aux:
        assert_trees_close(got[2], expected[2], where="aux")
    directions = _directions(rng, expected[0])
    structure = type(expected[0])
    if structure is torch.Tensor:
        ours_ct, their_ct = ours(directions[0]), theirs(directions[0])
    else:
        ours_ct, their_ct = structure(ours(u) for u in directions), structure(theirs(u) for u in directions)
    assert_trees_close(got[1](ours_ct), expected[1](their_ct), where="vjp_fn")


@given(x=tt.shapes(max_dims=2, max_side=3).flatmap(tt.arrays), seed=st.integers(0, 2**32 - 1))
def test_vjp_fn_can_be_called_again(x, seed):
    """torch.func's vjp_fn keeps its graph: a second cotangent (another row of a Jacobian) works."""
    rng = np.random.default_rng(seed)
    u, w = rng.standard_normal(x.shape), rng.standard_normal(x.shape)
    _, vjp_fn = func.vjp(lambda t: t.tanh() * t, ours(x))
    _, their_fn = torch.func.vjp(lambda t: t.tanh() * t, theirs(x))
    assert_trees_close(vjp_fn(ours(u)), their_fn(theirs(u)), where="first call")
    assert_trees_close(vjp_fn(ours(w)), their_fn(theirs(w)), where="second call")


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
@given(data=st.data())
def test_jvp_matches_torch(spec, data):
    arrays, ours_fn, theirs_fn, rng = _draw(spec, data)
    tangents = [rng.standard_normal(a.shape) for a in arrays]
    got = func.jvp(ours_fn, tuple(ours(a) for a in arrays), tuple(ours(v) for v in tangents))
    expected = torch.func.jvp(theirs_fn, tuple(theirs(a) for a in arrays), tuple(theirs(v) for v in tangents))
    assert_trees_close(got, expected, where="jvp")


@pytest.mark.parametrize("transform", ["jacrev", "jacfwd"])
@pytest.mark.parametrize("spec", SPECS, ids=IDS)
@given(data=st.data())
def test_jacobians_match_torch(spec, transform, data):
    arrays, ours_fn, theirs_fn, _ = _draw(spec, data)
    argnums = _argnums(data, len(arrays))
    got = getattr(func, transform)(ours_fn, argnums=argnums)(*[ours(a) for a in arrays])
    expected = getattr(torch.func, transform)(theirs_fn, argnums=_for_torch(argnums, len(arrays)))(
        *[theirs(a) for a in arrays])
    assert_trees_close(got, expected, where=transform)


@pytest.mark.parametrize("transform", ["jacrev", "jacfwd"])
@given(x=tt.shapes(min_dims=1, max_dims=2, max_side=3).flatmap(tt.arrays))
def test_jacobians_has_aux_match_torch(transform, x):
    def f(t):
        return (t.tanh() * t.sum(), t * t), {"aux": t.exp()}
    got = getattr(func, transform)(f, has_aux=True)(ours(x))
    expected = getattr(torch.func, transform)(f, has_aux=True)(theirs(x))
    assert_trees_close(got, expected, where=f"{transform}(has_aux=True)")


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
@given(data=st.data())
def test_hessian_matches_torch(spec, data):
    arrays, ours_fn, theirs_fn, rng = _draw(spec, data)
    make, _ = _scalar_functions(theirs_fn, arrays, rng)
    argnums = _argnums(data, len(arrays))
    got = func.hessian(make(ours_fn, ours), argnums=argnums)(*[ours(a) for a in arrays])
    expected = torch.func.hessian(make(theirs_fn, theirs), argnums=_for_torch(argnums, len(arrays)))(
        *[theirs(a) for a in arrays])
    assert_trees_close(got, expected, rtol=HESSIAN_RTOL, atol=HESSIAN_ATOL, where="hessian")


# ----------------------------------------------------------------------------- calculus and consistency


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
@given(data=st.data())
def test_jvp_matches_finite_differences(spec, data):
    arrays, ours_fn, _, rng = _draw(spec, data)
    tangents = [rng.standard_normal(a.shape) for a in arrays]
    _, jv = func.jvp(ours_fn, tuple(ours(a) for a in arrays), tuple(ours(v) for v in tangents))
    eps = 1e-6
    plus = as_tuple(ours_fn(*[ours(a + eps * v) for a, v in zip(arrays, tangents)]))
    minus = as_tuple(ours_fn(*[ours(a - eps * v) for a, v in zip(arrays, tangents)]))
    for k, (j, p, m) in enumerate(zip(as_tuple(jv), plus, minus)):
        np.testing.assert_allclose(j.numpy(), (p.numpy() - m.numpy()) / (2 * eps), rtol=1e-5, atol=1e-6,
                                   err_msg=f"output {k}")


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
@given(data=st.data())
def test_jacfwd_equals_jacrev(spec, data):
    arrays, ours_fn, _, _ = _draw(spec, data)
    argnums = _argnums(data, len(arrays))
    xs = [ours(a) for a in arrays]
    forward = func.jacfwd(ours_fn, argnums=argnums)(*xs)
    reverse = func.jacrev(ours_fn, argnums=argnums)(*xs)
    assert_trees_close(forward, reverse, rtol=1e-10, atol=1e-12, where="jacfwd vs jacrev")


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
@given(data=st.data())
def test_hessian_is_symmetric_and_equals_nested_jacobians(spec, data):
    arrays, ours_fn, theirs_fn, rng = _draw(spec, data)
    make, _ = _scalar_functions(theirs_fn, arrays, rng)
    f = make(ours_fn, ours)
    n = data.draw(st.integers(0, len(arrays) - 1), label="argnum")
    xs = [ours(a) for a in arrays]
    h = func.hessian(f, argnums=n)(*xs)
    size = xs[n].numel()
    matrix = h.numpy().reshape(size, size)
    np.testing.assert_allclose(matrix, matrix.T, rtol=1e-9, atol=1e-10, err_msg="not symmetric")
    for name, nested in [("jacfwd(jacrev)", func.jacfwd(func.jacrev(f, n), n)),
                         ("jacrev(jacrev)", func.jacrev(func.jacrev(f, n), n)),
                         ("jacrev(jacfwd)", func.jacrev(func.jacfwd(f, n), n))]:
        assert_trees_close(nested(*xs), numpy_tensor(h), rtol=HESSIAN_RTOL, atol=HESSIAN_ATOL, where=name)
    v = rng.standard_normal(arrays[n].shape)  # a Hessian-vector product by forward over reverse
    grad_f = lambda x: func.grad(f, argnums=n)(*xs[:n], x, *xs[n + 1:])  # noqa: E731
    _, hv = func.jvp(grad_f, (xs[n],), (ours(v),))
    np.testing.assert_allclose(hv.numpy().reshape(-1), matrix @ v.reshape(-1), rtol=1e-8, atol=1e-10)


def numpy_tensor(t):
    return torch.from_numpy(numpy_of(t))


# ----------------------------------------------------------------------------- compositions


def _pair(module):
    """A function of two tensors with a Hessian that has every block: x (n,), w (n, m)."""
    return lambda x, w: ((x @ w).tanh() * (x * x).sum()).sum() + (w.exp() * x.unsqueeze(-1)).mean()


@given(n=st.integers(1, 3), m=st.integers(1, 3), batch=st.integers(1, 3), seed=st.integers(0, 2**32 - 1))
def test_compositions_match_torch(n, m, batch, seed):
    rng = np.random.default_rng(seed)
    x, w, xs, v, U = (rng.standard_normal(s) for s in [(n,), (n, m), (batch, n), (n,), (batch, m)])
    f, g = _pair(ta), _pair(torch)
    X, W, XS, V = (ours(a) for a in (x, w, xs, v))
    tX, tW, tXS, tV = (theirs(a) for a in (x, w, xs, v))
    cases = [
        ("grad(grad)", func.grad(lambda a: (func.grad(f)(a, W) * V).sum())(X),
         torch.func.grad(lambda a: (torch.func.grad(g)(a, tW) * tV).sum())(tX)),
        ("grad(grad) argnums", func.grad(lambda a, b: (func.grad(f, argnums=1)(a, b)).tanh().sum(), (0, 1))(X, W),
         torch.func.grad(lambda a, b: (torch.func.grad(g, argnums=1)(a, b)).tanh().sum(), (0, 1))(tX, tW)),
        ("jvp(grad)", func.jvp(func.grad(f, argnums=(0, 1)), (X, W), (V, W * 0.5)),
         torch.func.jvp(torch.func.grad(g, argnums=(0, 1)), (tX, tW), (tV, tW * 0.5))),
        ("vmap(grad)", func.vmap(func.grad(f), in_dims=(0, None))(XS, W),
         torch.func.vmap(torch.func.grad(g), in_dims=(0, None))(tXS, tW)),
        ("vmap(grad) argnums 1", func.vmap(func.grad(f, argnums=1), in_dims=(0, None))(XS, W),
         torch.func.vmap(torch.func.grad(g, argnums=1), in_dims=(0, None))(tXS, tW)),
        ("vmap(jacrev)", func.vmap(func.jacrev(lambda a, b: (a @ b).tanh(), argnums=(0, 1)), in_dims=(0, None))(XS, W),
         torch.func.vmap(torch.func.jacrev(lambda a, b: (a @ b).tanh(), argnums=(0, 1)), in_dims=(0, None))(tXS, tW)),
        ("vmap(jacfwd)", func.vmap(func.jacfwd(lambda a, b: (a @ b).tanh()), in_dims=(0, None))(XS, W),
         torch.func.vmap(torch.func.jacfwd(lambda a, b: (a @ b).tanh()), in_dims=(0, None))(tXS, tW)),
        ("jacfwd(jacrev)", func.jacfwd(func.jacrev(f, argnums=(0, 1)), argnums=(0, 1))(X, W),
         torch.func.jacfwd(torch.func.jacrev(g, argnums=(0, 1)), argnums=(0, 1))(tX, tW)),
        ("vmap(hessian)", func.vmap(func.hessian(f), in_dims=(0, None))(XS, W),
         torch.func.vmap(torch.func.hessian(g), in_dims=(0, None))(tXS, tW)),
        ("grad(vmap)", func.grad(lambda b: func.vmap(f, in_dims=(0, None))(XS, b).tanh().sum())(W),
         torch.func.grad(lambda b: torch.func.vmap(g, in_dims=(0, None))(tXS, b).tanh().sum())(tW)),
        ("vjp(vmap)", func.vjp(lambda b: func.vmap(lambda a: (a @ b).sin())(XS), W)[1](ours(U)),
         torch.func.vjp(lambda b: torch.func.vmap(lambda a: (a @ b).sin())(tXS), tW)[1](theirs(U))),
    ]
    for name, got, expected in cases:
        assert_trees_close(got, expected, rtol=1e-8, atol=1e-10, where=name)


@given(x=st.floats(-2.0, 2.0), y=st.floats(-2.0, 2.0))
def test_nested_jvp_never_confuses_perturbations(x, y):
    """d/dx [x · d/dy (x + y)] = 1 for every x and y: the inner derivative must not pick up the outer tangent
    (which a confused implementation adds, giving 2)."""
    def outer(a):
        inner = lambda b: a + b  # noqa: E731  (closes over the outer input)
        _, d_inner = func.jvp(inner, (ta.tensor(np.float64(y)),), (ta.tensor(np.float64(1.0)),))
        return a * d_inner
    value, derivative = func.jvp(outer, (ta.tensor(np.float64(x)),), (ta.tensor(np.float64(1.0)),))
    assert value.item() == pytest.approx(x)
    assert derivative.item() == pytest.approx(1.0)
    # the same through grad over jvp and jvp over grad
    assert func.grad(outer)(ta.tensor(np.float64(x))).item() == pytest.approx(1.0)
    inner_grad = lambda a: func.grad(lambda b: a * b * b)(ta.tensor(np.float64(y)))  # noqa: E731  (2ay)
    _, d = func.jvp(inner_grad, (ta.tensor(np.float64(x)),), (ta.tensor(np.float64(1.0)),))
    assert d.item() == pytest.approx(2 * y)


@given(x=st.floats(0.1, 2.0))
def test_nested_grad_never_confuses_perturbations(x):
    """The reverse-mode twin: d/dx [x · d/dy (x·y)] at y = 1 is 2x; a confused grad would answer otherwise."""
    def outer(a):
        return a * func.grad(lambda b: a * b)(ta.tensor(np.float64(1.0)))
    assert func.grad(outer)(ta.tensor(np.float64(x))).item() == pytest.approx(2 * x)
    assert func.grad(func.grad(lambda a: a ** 3))(ta.tensor(np.float64(x))).item() == pytest.approx(6 * x)


def test_grad_takes_and_returns_trees():
    params = {"w": ours(np.array([[1.0, 2.0], [0.5, -1.0]])), "b": ours(np.array([0.1, -0.3]))}
    tparams = {k: theirs(v.numpy()) for k, v in params.items()}
    x = np.array([0.3, -0.7])

    got = func.grad(lambda p: ((p["w"] @ ours(x) + p["b"]).tanh() * ours([1.0, -2.0])).sum())(params)
    expected = torch.func.grad(lambda p: ((p["w"] @ theirs(x) + p["b"]).tanh() * theirs([1.0, -2.0])).sum())(tparams)
    assert_trees_close(got, expected, where="grad of a dict")
    pair = (ours(x), [ours(np.array(2.0))])
    got = func.grad(lambda t: (t[0] * t[1][0] ** 2).sin().sum())(pair)
    expected = torch.func.grad(lambda t: (t[0] * t[1][0] ** 2).sin().sum())((theirs(x), [theirs(np.array(2.0))]))
    assert_trees_close(got, expected, where="grad of a tuple with a list")
