"""``ta.autograd.functional`` against ``torch.autograd.functional``: every function on the same float64
functions (elementwise, matmul, a small MLP, several inputs and outputs), with and without ``create_graph``
(the results then differentiated again), ``vectorize`` both ways and the forward-mode strategy; the nesting
of the results, ``v``'s defaults and the errors (``strict`` included) as torch has them."""

import hypothesis.extra.numpy as hnp
import hypothesis.strategies as st
import numpy as np
import pytest
import torch
import torch.autograd.functional as TF
from hypothesis import given, settings

import tinyattn as ta
import tinyattn.autograd.functional as AF

RNG = np.random.default_rng(0)
W1, B1, W2 = RNG.standard_normal((3, 4)), RNG.standard_normal(4), RNG.standard_normal((4, 2))
X, Y = RNG.standard_normal(3), RNG.standard_normal((2, 3))
LIBS = ((ta, AF), (torch, TF))


def _tensor(lib, array, requires_grad=False):
    return lib.tensor(np.array(array), requires_grad=requires_grad)


def elementwise(lib, x):
    return x.tanh() * x.exp() + x * x


def matmul(lib, x):
    return x @ _tensor(lib, W1)


def mlp(lib, x):
    return (x @ _tensor(lib, W1) + _tensor(lib, B1)).tanh() @ _tensor(lib, W2)


def two_in_two_out(lib, x, y):
    return (y @ x).sigmoid() * x[:2], (x * x).sum() * y.tanh()


def scalar(lib, x):
    return (mlp(lib, x) ** 2).sum() + (x.exp() * x).sum()


def scalar_of_two(lib, x, y):
    return ((y @ x).tanh() ** 2).sum() * (x * x).sum() + (y.exp() * y).sum()


def _numpy(result):
    """Nested tuples of tensors as nested tuples of arrays; the nesting is part of what is compared (torch's
    forward-mode Jacobian nests a list where its other paths nest a tuple; here it is a tuple everywhere)."""
    if isinstance(result, (tuple, list)):
        return tuple(_numpy(r) for r in result)
    return result.detach().numpy()


def _assert_same(ours, theirs, path="result"):
    assert isinstance(ours, tuple) == isinstance(theirs, tuple), f"{path}: nesting differs"
    if isinstance(theirs, tuple):
        assert len(ours) == len(theirs), f"{path}: {len(ours)} entries, torch {len(theirs)}"
        for i, (a, b) in enumerate(zip(ours, theirs)):
            _assert_same(a, b, f"{path}[{i}]")
    else:
        assert ours.shape == theirs.shape, f"{path}: shape {ours.shape}, torch {theirs.shape}"
        np.testing.assert_allclose(ours, theirs, rtol=1e-10, atol=1e-12, err_msg=path)


def _both(call):
    """``call(lib, functional)`` with tinyattn and with torch, compared as nested arrays."""
    ours, theirs = (_numpy(call(lib, functional)) for lib, functional in LIBS)
    _assert_same(ours, theirs)
    return ours


def _inputs(lib, arrays, requires_grad=False):
    tensors = tuple(_tensor(lib, a, requires_grad) for a in arrays)
    return tensors if len(tensors) > 1 else tensors[0]


def _fn(lib, f, several):
    return (lambda *args: f(lib, *args)) if several else (lambda x: f(lib, x))


CASES = [(elementwise, (X,)), (matmul, (X,)), (mlp, (X,)), (two_in_two_out, (X, Y))]
SCALARS = [(scalar, (X,)), (scalar_of_two, (X, Y))]
JACOBIAN_MODES = [dict(), dict(vectorize=True), dict(vectorize=True, strategy="forward-mode")]


# ----------------------------------------------------------------------------- values and nesting


@pytest.mark.parametrize("mode", JACOBIAN_MODES, ids=["loop", "vectorize", "forward-mode"])
@pytest.mark.parametrize("f, arrays", CASES, ids=lambda c: getattr(c, "__name__", ""))
def test_jacobian_matches_torch(f, arrays, mode):
    def jacobian(lib, F, inputs, function):
        if lib is torch and mode.get("strategy") == "forward-mode" and f is mlp:  # torch's forward mode under its
            return F.jacobian(function, inputs)  # old vmap refuses a broadcast bias ("forward gradient of size [1, 4]")
        return F.jacobian(function, inputs, **mode)
    _both(lambda lib, F: jacobian(lib, F, _inputs(lib, arrays), _fn(lib, f, len(arrays) > 1)))
    if len(arrays) == 1:  # a tuple of one input gives a tuple of one Jacobian, as in torch
        _both(lambda lib, F: jacobian(lib, F, (_tensor(lib, arrays[0]),), lambda x: f(lib, x)))


@pytest.mark.parametrize("mode", [dict(), dict(vectorize=True), dict(vectorize=True,
                                                                        outer_jacobian_strategy="forward-mode")],
                         ids=["loop", "vectorize", "forward-over-reverse"])
@pytest.mark.parametrize("f, arrays", SCALARS, ids=lambda c: getattr(c, "__name__", ""))
def test_hessian_matches_torch(f, arrays, mode):
    def hessian(lib, F):
        options = {} if lib is torch and f is scalar else mode  # (torch's forward mode: see above)
        return F.hessian(_fn(lib, f, len(arrays) > 1), _inputs(lib, arrays), **options)
    _both(hessian)


@pytest.mark.parametrize("f, arrays", CASES, ids=lambda c: getattr(c, "__name__", ""))
def test_vjp_and_jvp_match_torch(f, arrays):
    def outputs_of(lib):
        out = f(lib, *(_tensor(lib, a) for a in arrays))
        return out if isinstance(out, tuple) else (out,)
    u = [RNG.standard_normal(tuple(o.shape)) for o in outputs_of(ta)]
    v = [RNG.standard_normal(a.shape) for a in arrays]
    _both(lambda lib, F: F.vjp(_fn(lib, f, len(arrays) > 1), _inputs(lib, arrays), _inputs(lib, u)))
    _both(lambda lib, F: F.jvp(_fn(lib, f, len(arrays) > 1), _inputs(lib, arrays), _inputs(lib, v)))


@pytest.mark.parametrize("name", ["vhp", "hvp"])
@pytest.mark.parametrize("f, arrays", SCALARS, ids=lambda c: getattr(c, "__name__", ""))
def test_vhp_and_hvp_match_torch(f, arrays, name):
    v = [RNG.standard_normal(a.shape) for a in arrays]
    _both(lambda lib, F: getattr(F, name)(_fn(lib, f, len(arrays) > 1), _inputs(lib, arrays), _inputs(lib, v)))


@settings(max_examples=15, deadline=None)
@given(x=hnp.arrays(np.float64, hnp.array_shapes(min_dims=0, max_dims=3, max_side=3),
                    elements=st.floats(-2, 2, allow_nan=False)),
       vectorize=st.booleans())
def test_jacobian_and_hessian_of_any_shape_match_torch(x, vectorize):
    _both(lambda lib, F: F.jacobian(lambda t: (t.sin() * t).reshape(-1)[:2] * t.sum(), _tensor(lib, x),
                                    vectorize=vectorize))
    _both(lambda lib, F: F.hessian(lambda t: (t.sin() * t * t).sum(), _tensor(lib, x), vectorize=vectorize))


def test_v_may_be_omitted_for_one_element_outputs_and_inputs():
    one = np.array([0.7])
    _both(lambda lib, F: F.vjp(lambda x: scalar(lib, x), _tensor(lib, X)))
    for name in ("jvp", "vhp", "hvp"):
        _both(lambda lib, F, name=name: getattr(F, name)(lambda x: (x.exp() * x).sum(), _tensor(lib, one)))


# ----------------------------------------------------------------------------- create_graph


@pytest.mark.parametrize("name", ["jacobian", "jacobian-vectorized", "hessian", "vjp", "jvp", "vhp", "hvp"])
def test_create_graph_results_differentiate_again_as_torch(name):
    """With ``create_graph=True`` the results reach the inputs (and ``v``): a weighted sum of them,
    differentiated with ``autograd.grad``, gives torch's numbers; without it they are detached."""
    def script(lib, F):
        x, y = _tensor(lib, X, True), _tensor(lib, Y, True)
        v = (_tensor(lib, RNG_V[0], True), _tensor(lib, RNG_V[1], True))
        call = {
            "jacobian": lambda cg: F.jacobian(lambda a, b: two_in_two_out(lib, a, b), (x, y), create_graph=cg),
            "jacobian-vectorized": lambda cg: F.jacobian(lambda a, b: two_in_two_out(lib, a, b), (x, y),
                                                         create_graph=cg, vectorize=True),
            "hessian": lambda cg: F.hessian(lambda a, b: scalar_of_two(lib, a, b), (x, y), create_graph=cg),
            "vjp": lambda cg: F.vjp(lambda a, b: two_in_two_out(lib, a, b), (x, y), (v[0][:2], v[1]), cg)[1],
            "jvp": lambda cg: F.jvp(lambda a, b: two_in_two_out(lib, a, b), (x, y), v, cg)[1],
            "vhp": lambda cg: F.vhp(lambda a, b: scalar_of_two(lib, a, b), (x, y), v, cg)[1],
            "hvp": lambda cg: F.hvp(lambda a, b: scalar_of_two(lib, a, b), (x, y), v, cg)[1],
        }[name]
        detached = _flat(call(False))
        assert not any(t.requires_grad for t in detached)
        results = _flat(call(True))
        assert all(t.requires_grad for t in results)
        total = sum((t * _tensor(lib, np.cos(np.arange(t.numel())).reshape(tuple(t.shape)))).sum() for t in results)
        wrt = (x, y) + (v if name in ("jvp", "vhp", "hvp", "vjp") else ())
        return lib.autograd.grad(total, wrt, allow_unused=True, materialize_grads=True)
    _both(script)


RNG_V = (RNG.standard_normal(3), RNG.standard_normal((2, 3)))


def _flat(result):
    return [t for r in result for t in _flat(r)] if isinstance(result, tuple) else [result]


def test_create_graph_keeps_an_input_that_requires_grad_in_its_graph():
    x = ta.tensor(X, requires_grad=True)
    jac = AF.jacobian(lambda t: t ** 3, x, create_graph=True)  # diag(3x²)
    (g,) = ta.autograd.grad(jac.sum(), x)
    np.testing.assert_allclose(g.numpy(), 6 * X)
    out, _ = AF.vjp(lambda t: t ** 3, x, ta.ones(3, dtype=ta.float64), create_graph=True)
    assert out.requires_grad and out.grad_fn is not None


# ----------------------------------------------------------------------------- errors


def _same_error(call):
    """``call(lib, functional)`` raises with both libraries, errors of one kind; returns ours and torch's."""
    errors = []
    for lib, functional in LIBS:
        with pytest.raises(Exception) as info:
            call(lib, functional)
        errors.append(info.value)
    assert isinstance(errors[0], type(errors[1])), errors
    return str(errors[0]), str(errors[1])


STRICT_CASES = {
    "vjp: output independent of input": (
        lambda lib, F: F.vjp(lambda a, b: a * 2, (_tensor(lib, X), _tensor(lib, X)), _tensor(lib, X), strict=True),
        "independent of input 1"),
    "vjp: output without grad": (
        lambda lib, F: F.vjp(lambda a: _tensor(lib, X), _tensor(lib, X), _tensor(lib, X), strict=True),
        "Output 0 of the user-provided function does not require gradients"),
    "jvp: output independent of input": (
        lambda lib, F: F.jvp(lambda a, b: a * 2, (_tensor(lib, X), _tensor(lib, X)),
                             (_tensor(lib, X), _tensor(lib, X)), strict=True),
        "independent of input 1"),
    "jvp: create_graph on a linear function": (
        lambda lib, F: F.jvp(lambda a: a * 2, _tensor(lib, X), _tensor(lib, X), create_graph=True, strict=True),
        "when create_graph=True"),
    "jacobian: output independent of input": (
        lambda lib, F: F.jacobian(lambda a, b: a.exp(), (_tensor(lib, X), _tensor(lib, X)), strict=True),
        "Output 0 of the user-provided function is independent of input 1"),
    "jacobian: create_graph on a linear function": (
        lambda lib, F: F.jacobian(lambda a: a * 2, _tensor(lib, X), create_graph=True, strict=True),
        "when create_graph=True"),
    "jacobian: strict with vectorize": (
        lambda lib, F: F.jacobian(lambda a: a.exp(), _tensor(lib, X), strict=True, vectorize=True),
        "strict=True and vectorize"),
    "jacobian: strict with forward mode": (
        lambda lib, F: F.jacobian(lambda a: a.exp(), _tensor(lib, X), strict=True, vectorize=True,
                                  strategy="forward-mode"),
        "forward-mode"),
    "hessian: linear function": (
        lambda lib, F: F.hessian(lambda a: (a * 2).sum(), _tensor(lib, X), strict=True),
        "the jacobian of the user-provided function with respect to input 0 is independent of the input"),
    "vhp: linear function": (
        lambda lib, F: F.vhp(lambda a: (a * 2).sum(), _tensor(lib, X), _tensor(lib, X), strict=True),
        "the jacobian of the user-provided function with respect to input 0 is independent of the input"),
    "hvp: quadratic in one input only": (
        lambda lib, F: F.hvp(lambda a, b: (a * a).sum() + b.sum(), (_tensor(lib, X), _tensor(lib, X)),
                             (_tensor(lib, X), _tensor(lib, X)), strict=True),
        "input 1 is independent of the input"),
}


@pytest.mark.parametrize("case", list(STRICT_CASES))
def test_strict_raises_as_torch(case):
    call, phrase = STRICT_CASES[case]
    ours, theirs = _same_error(call)
    assert phrase in ours, ours


@pytest.mark.parametrize("name", ["vjp", "jvp", "jacobian", "hessian", "vhp", "hvp"])
def test_without_strict_an_independent_input_gets_zeros(name):
    def f(lib, a, b):
        return (a.exp() * a).sum() if name in ("hessian", "vhp", "hvp") else a.exp()
    args = lambda lib: (_tensor(lib, X), _tensor(lib, X))  # noqa: E731
    extra = {"vjp": lambda lib: (_tensor(lib, X),), "jacobian": lambda lib: (), "hessian": lambda lib: ()}.get(
        name, lambda lib: ((_tensor(lib, X), _tensor(lib, X)),))
    ours = _both(lambda lib, F: getattr(F, name)(lambda a, b: f(lib, a, b), args(lib), *extra(lib)))
    if name != "jvp":  # (jvp's results are per output)
        assert not np.any(_flat(ours)[-1])


ERROR_CASES = {
    "v omitted for a larger output": (lambda lib, F: F.vjp(lambda a: a.exp(), _tensor(lib, X)), "v can only be None"),
    "v omitted for a larger input": (lambda lib, F: F.jvp(lambda a: a.exp(), _tensor(lib, X)), "v can only be None"),
    "v of the wrong shape": (lambda lib, F: F.vjp(lambda a: a.exp(), _tensor(lib, X), _tensor(lib, Y)),
                             "v has invalid size"),
    "v of the wrong length": (lambda lib, F: F.jvp(lambda a, b: a * b, (_tensor(lib, X),) * 2, (_tensor(lib, X),)),
                              "v is a tuple of invalid length: should be 2 but got 1"),
    "input not a tensor": (lambda lib, F: F.jacobian(lambda a, b: a, (_tensor(lib, X), 3.0)), "at index 1 has type"),
    "output not a tensor": (lambda lib, F: F.vjp(lambda a: 3.0, _tensor(lib, X)), "outputs of the user-provided"),
    "hessian of a vector": (lambda lib, F: F.hessian(lambda a: a.exp(), _tensor(lib, X)), "a single element"),
    "vhp of a tuple": (lambda lib, F: F.vhp(lambda a: (a.sum(),), _tensor(lib, X), _tensor(lib, X)),
                       "should return a single Tensor"),
    "forward mode without vectorize": (
        lambda lib, F: F.jacobian(lambda a: a.exp(), _tensor(lib, X), strategy="forward-mode"), "vectorize=True"),
    "forward mode with create_graph": (
        lambda lib, F: F.jacobian(lambda a: a.exp(), _tensor(lib, X), create_graph=True, vectorize=True,
                                  strategy="forward-mode"), "create_graph"),
}


@pytest.mark.parametrize("case", list(ERROR_CASES))
def test_errors_as_torch(case):
    call, phrase = ERROR_CASES[case]
    ours, theirs = _same_error(call)
    assert phrase in ours, ours


def test_an_unknown_strategy_is_refused():
    with pytest.raises(ValueError, match="strategy must be"):
        AF.jacobian(lambda a: a, ta.tensor(X), strategy="sideways")
    with pytest.raises(ValueError, match="outer_jacobian_strategy must be"):
        AF.hessian(lambda a: a.sum(), ta.tensor(X), outer_jacobian_strategy="sideways")


def test_importable_as_a_module_and_as_an_attribute():
    import tinyattn.autograd.functional as by_import

    assert by_import is ta.autograd.functional
    assert set(AF.__all__) == set(TF.__all__)
