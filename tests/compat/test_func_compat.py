"""``torch.func``, ``torch.vmap``, ``torch.autograd.forward_ad`` and ``torch.autograd.functional`` through
``tinyattn.compat``: each script is written once against torch's API and run with ``lib`` torch and with
``lib`` the compat namespace (float64, weights copied); the numbers, and that every result is the
library's own tensor, are compared."""

import importlib

import numpy as np
import pytest
import torch

import tinyattn.compat as compat

RTOL, ATOL = 1e-9, 1e-11
RNG = np.random.default_rng(0)
X, T, V = RNG.standard_normal((5, 3)), RNG.standard_normal((5, 2)), RNG.standard_normal(3)


def _numpy(tree, lib):
    """Nested tuples, lists and dicts of ``lib``'s tensors as the same nesting of arrays (each leaf checked to be
    one of ``lib``'s tensors: compat's results are compat tensors)."""
    if isinstance(tree, dict):
        return {key: _numpy(value, lib) for key, value in tree.items()}
    if isinstance(tree, (tuple, list)):
        return tuple(_numpy(t, lib) for t in tree)
    assert type(tree) is lib.Tensor, (type(tree), lib.__name__)
    return tree.detach().numpy()


def _assert_close(ours, theirs, path="result"):
    if isinstance(theirs, dict):
        assert sorted(ours) == sorted(theirs), path
        for key in theirs:
            _assert_close(ours[key], theirs[key], f"{path}[{key!r}]")
    elif isinstance(theirs, tuple):
        assert isinstance(ours, tuple) and len(ours) == len(theirs), path
        for i, (a, b) in enumerate(zip(ours, theirs)):
            _assert_close(a, b, f"{path}[{i}]")
    else:
        assert ours.shape == theirs.shape, (path, ours.shape, theirs.shape)
        np.testing.assert_allclose(ours, theirs, rtol=RTOL, atol=ATOL, err_msg=path)


def _both(script):
    """``script(lib)`` with compat and with torch, compared."""
    ours, theirs = _numpy(script(compat), compat), _numpy(script(torch), torch)
    _assert_close(ours, theirs)
    return ours


def _twin(make):
    """The same module from compat and from torch (``make(lib)``), torch's weights copied into ours."""
    torch.manual_seed(0)
    theirs = make(torch).double()
    ours = make(compat).double()
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
    return {compat: ours, torch: theirs}




def test_a_captured_compat_tensor_under_vmap():
    c0 = compat.tensor(np.array([1.0, 2.0, 3.0]))
    out = compat.func.vmap(lambda t: (t * c0).sum())(compat.ones(4, 3, dtype=compat.float64))
    np.testing.assert_allclose(out.numpy(), [6.0] * 4)


def test_mean_of_all_elements_under_vmap():
    out = compat.vmap(lambda t: t.mean())(compat.tensor(np.arange(10.0).reshape(5, 2)))
    np.testing.assert_allclose(out.numpy(), [0.5, 2.5, 4.5, 6.5, 8.5])


def _mlp(lib):
    return lib.nn.Sequential(lib.nn.Linear(3, 4), lib.nn.Tanh(), lib.nn.Linear(4, 2))


def test_the_modules_import_as_torch_scripts_import_them():
    func = importlib.import_module("tinyattn.compat.func")
    fwAD = importlib.import_module("tinyattn.compat.autograd.forward_ad")
    functional = importlib.import_module("tinyattn.compat.autograd.functional")
    from tinyattn.compat.func import vmap

    assert compat.func is func and compat.vmap is vmap is func.vmap
    assert compat.autograd.forward_ad is fwAD and compat.autograd.functional is functional
    assert set(func.__all__) <= set(dir(torch.func))
    assert set(functional.__all__) == set(torch.autograd.functional.__all__)


# ----------------------------------------------------------------------------- torch.func


def test_per_sample_gradients_by_vmap_of_grad_of_functional_call():
    models = _twin(_mlp)

    def script(lib):
        model = models[lib]
        params = {k: v.detach() for k, v in model.named_parameters()}

        def loss(params, x, target):
            out = lib.func.functional_call(model, params, (x.unsqueeze(0),))
            return ((out - target.unsqueeze(0)) ** 2).mean()

        per_sample = lib.func.vmap(lib.func.grad(loss), in_dims=(None, 0, 0))(params, lib.tensor(X), lib.tensor(T))
        grads, value = lib.func.grad_and_value(loss)(params, lib.tensor(X[0]), lib.tensor(T[0]))
        return per_sample, grads, value

    per_sample, first, _ = _both(script)
    _assert_close({k: v[0] for k, v in per_sample.items()}, first)  # example 0 of the batch is example 0 alone


def test_jacrev_jacfwd_and_hessian_of_a_function_of_two_arguments():
    def script(lib):
        def f(x, w):
            return (x @ w).tanh() * x.sum()

        def scalar(x, w):
            return f(x, w).exp().sum()

        x, w = lib.tensor(V), lib.tensor(X[:3, :2].copy())
        return (lib.func.jacrev(f)(x, w), lib.func.jacrev(f, argnums=(0, 1))(x, w),
                lib.func.jacfwd(f, argnums=(0, 1))(x, w), lib.func.hessian(scalar)(x, w),
                lib.func.hessian(scalar, argnums=1)(x, w), lib.func.jacrev(lib.func.jacfwd(scalar))(x, w))
    _both(script)


def test_vjp_jvp_and_aux():
    def script(lib):
        x, v = lib.tensor(V), lib.tensor(X[0])

        def f(x):
            return (x.sin() * x).cumsum(0), x.sum()

        (out, total), vjp_fn = lib.func.vjp(f, x)
        (grad_x,) = vjp_fn((v, lib.tensor(2.0, dtype=lib.float64)))
        primal, tangent = lib.func.jvp(lambda t: f(t)[0], (x,), (v,))
        g, aux = lib.func.grad(lambda t: ((t ** 3).sum(), t * 2), has_aux=True)(x)
        jac, aux2 = lib.func.jacrev(lambda t: (t.exp(), t.sum()), has_aux=True)(x)
        return out, total, grad_x, primal, tangent, g, aux, jac, aux2
    _both(script)


def test_torch_vmap_is_func_vmap_with_in_and_out_dims():
    def script(lib):
        w = lib.tensor(X[:3, :2].copy())
        batched = lib.vmap(lambda x, b: (x @ w + b).relu(), in_dims=(1, None), out_dims=1)
        return batched(lib.tensor(X.T.copy()), lib.tensor(T[0]))
    _both(script)


def test_functional_call_takes_torchs_state_dict_names():
    """A Transformer layer's ``self_attn.in_proj_weight`` (three projections in the native layer) is a name
    ``functional_call`` takes, and the gradient with respect to it is the packed one, as in torch."""
    def make(lib):
        return lib.nn.TransformerEncoderLayer(4, 2, 8, dropout=0.0, batch_first=True)
    models = _twin(make)
    names = {k: v.detach().numpy() for k, v in models[torch].named_parameters()}
    src = RNG.standard_normal((2, 3, 4))

    def script(lib):
        model = models[lib]
        params = {k: lib.tensor(v) for k, v in names.items()}

        def loss(params):
            return (lib.func.functional_call(model, params, (lib.tensor(src),)) ** 2).sum()
        return lib.func.grad(loss)(params), loss(params)

    grads, _ = _both(script)
    assert "self_attn.in_proj_weight" in grads


def test_functional_call_refuses_a_name_the_module_does_not_have():
    model = compat.nn.Linear(2, 2)
    with pytest.raises(ValueError, match="unexpected keys .*'no_such.weight'"):
        compat.func.functional_call(model, {"no_such.weight": compat.ones(2, 2)}, (compat.ones(1, 2),))


# ----------------------------------------------------------------------------- torch.autograd.forward_ad


def test_forward_ad_script_gives_torchs_jvp():
    models = _twin(_mlp)

    def script(lib):
        fwAD = lib.autograd.forward_ad
        model = models[lib]
        x, v = lib.tensor(X), lib.tensor(X[::-1].copy())
        with fwAD.dual_level():
            dual = fwAD.make_dual(x, v)
            out = model(dual)
            primal, tangent = fwAD.unpack_dual(out)
            unpacked = fwAD.unpack_dual(x)
        assert unpacked.tangent is None and isinstance(unpacked, fwAD.UnpackedDualTensor)
        return primal, tangent
    _both(script)


# ----------------------------------------------------------------------------- torch.autograd.functional


@pytest.mark.parametrize("vectorize", [False, True])
def test_autograd_functional_through_compat(vectorize):
    models = _twin(_mlp)

    def script(lib):
        model, F = models[lib], lib.autograd.functional
        x, v = lib.tensor(X[0].copy(), requires_grad=True), lib.tensor(V)

        def energy(x):
            return (model(x) ** 2).sum()
        jac = F.jacobian(model, x, vectorize=vectorize)
        hess = F.hessian(energy, x, create_graph=True, vectorize=vectorize)
        (hess_grad,) = lib.autograd.grad(hess.sum(), x)
        return (jac, hess, hess_grad, F.vjp(model, x, lib.tensor(T[0])), F.jvp(model, x, v), F.hvp(energy, x, v),
                F.vhp(energy, x, v))
    _both(script)
