"""Higher-order autograd through ``tinyattn.compat``: each script is written once against torch's API and run
twice, with ``lib`` torch and with ``lib`` the compat namespace (float64, weights copied), and the numbers,
flags and errors are compared: double grad, gradient penalties, ``.grad`` with its graph after
``backward(create_graph=True)``, hooks, ``retain_grad``, the grad modes, checkpointing, anomaly detection,
``gradcheck``/``gradgradcheck`` and the errors torch raises."""

import re

import numpy as np
import pytest
import torch

import tinyattn.compat as compat

RTOL, ATOL = 1e-9, 1e-10
LIBS = (compat, torch)
pytestmark = pytest.mark.filterwarnings(  # torch's advice on create_graph cycles and non-leaf .grad: meant here
    "ignore:Using backward\\(\\) with create_graph=True", "ignore:The .grad attribute of a Tensor that is not a leaf")


def _both(script, *args):
    """``script(lib, *args)`` for compat and for torch."""
    return script(compat, *args), script(torch, *args)


def _assert_close(ours, theirs, path="result"):
    """Nested tuples/lists/dicts of arrays, numbers and flags, compared leaf by leaf."""
    if isinstance(theirs, dict):
        assert sorted(ours) == sorted(theirs), path
        for key in theirs:
            _assert_close(ours[key], theirs[key], f"{path}[{key!r}]")
    elif isinstance(theirs, (tuple, list)):
        assert len(ours) == len(theirs), path
        for i, (a, b) in enumerate(zip(ours, theirs)):
            _assert_close(a, b, f"{path}[{i}]")
    elif isinstance(theirs, (bool, type(None), str)):
        assert ours == theirs, path
    else:
        np.testing.assert_allclose(ours, theirs, rtol=RTOL, atol=ATOL, err_msg=path)


def _sequential(lib, sizes=(3, 4, 2)):
    """``Sequential(Linear, Tanh, Linear, …)`` of ``sizes``, float64."""
    layers = []
    for i, (n_in, n_out) in enumerate(zip(sizes, sizes[1:])):
        layers += [lib.nn.Linear(n_in, n_out)] + ([lib.nn.Tanh()] if i < len(sizes) - 2 else [])
    return lib.nn.Sequential(*layers).double()


def _twin_models(sizes=(3, 4, 2)):
    """The same model from compat and from torch, torch's weights copied into ours."""
    torch.manual_seed(0)
    theirs = _sequential(torch, sizes)
    ours = _sequential(compat, sizes)
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
    return ours, theirs


def _grads(model):
    return {name: p.grad.detach().numpy() for name, p in model.named_parameters()}


X = np.random.default_rng(0).standard_normal((5, 3))
V = np.random.default_rng(1).standard_normal(3)


# ----------------------------------------------------------------------------- double grad


def test_hessian_vector_product_by_double_grad_matches_torch():
    def script(lib):
        x = lib.tensor(V, requires_grad=True)
        y = (x.tanh() * x.exp()).sum() + (x @ x) ** 2 + (x.sigmoid() * x * x).sum()
        (g,) = lib.autograd.grad(y, x, create_graph=True)
        assert isinstance(g, lib.Tensor) and g.requires_grad and g.grad_fn is not None
        v = lib.tensor(X[0])
        (hv,) = lib.autograd.grad(g @ v, x, retain_graph=True)
        (g @ v).backward()  # the same product, accumulated into x.grad
        return g.detach().numpy(), hv.numpy(), x.grad.numpy(), isinstance(hv, lib.Tensor)

    _assert_close(*_both(script))


def test_third_derivative_and_grad_outputs_match_torch():
    def script(lib):
        x = lib.tensor(V, requires_grad=True)
        y = x ** 4 * x.sin()
        (g1,) = lib.autograd.grad(y, x, grad_outputs=lib.ones_like(y), create_graph=True)
        (g2,) = lib.autograd.grad(g1.sum(), x, create_graph=True)
        (g3,) = lib.autograd.grad(g2, x, grad_outputs=lib.tensor(X[1]))
        return g1.detach().numpy(), g2.detach().numpy(), g3.numpy()

    _assert_close(*_both(script))


def test_gradient_penalty_on_input_reaches_linear_weights_as_in_torch():
    ours, theirs = _twin_models()

    def script(lib, model):
        x = lib.tensor(X, requires_grad=True)
        out = model(x)
        loss = (out ** 2).mean()
        (gx,) = lib.autograd.grad(loss, x, create_graph=True)
        total = loss + (gx ** 2).sum()
        total.backward()
        return total.item(), _grads(model), x.grad.numpy()

    _assert_close(script(compat, ours), script(torch, theirs))


def test_wgan_gp_penalty_with_grad_outputs_and_sgd_steps_match_torch():
    ours, theirs = _twin_models((3, 5, 1))

    def script(lib, model):
        optimizer = lib.optim.SGD(model.parameters(), lr=0.1)
        losses = []
        for step in range(3):
            x = lib.tensor(X + step, requires_grad=True)
            score = model(x)
            (gx,) = lib.autograd.grad(score, x, grad_outputs=lib.ones_like(score), create_graph=True)
            penalty = ((gx.norm(2, dim=1) - 1) ** 2).mean()
            loss = score.mean() + 10 * penalty
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        return losses, _grads(model), {k: v.detach().numpy() for k, v in model.named_parameters()}

    _assert_close(script(compat, ours), script(torch, theirs))


def test_penalty_on_parameter_gradients_by_autograd_grad_matches_torch():
    ours, theirs = _twin_models()

    def script(lib, model):
        loss = (model(lib.tensor(X)) ** 2).sum()
        params = list(model.parameters())
        grads = lib.autograd.grad(loss, params, create_graph=True)
        penalty = sum((g ** 2).sum() for g in grads)
        penalty.backward()
        return penalty.item(), _grads(model)

    _assert_close(script(compat, ours), script(torch, theirs))


# ----------------------------------------------------------------------------- .grad with its graph


def test_grad_after_backward_create_graph_can_be_differentiated_as_in_torch():
    def script(lib):
        x = lib.tensor(V, requires_grad=True)
        loss = (x ** 3).sum() + (x.tanh() * x).sum()
        loss.backward(create_graph=True)
        g = x.grad
        flags = (g.requires_grad, g.grad_fn is not None, x.grad.requires_grad)
        x.grad = None
        (g * g).sum().backward()
        return flags, g.detach().numpy(), x.grad.numpy()

    _assert_close(*_both(script))


def test_parameter_grad_penalty_after_backward_create_graph_matches_torch():
    ours, theirs = _twin_models()

    def script(lib, model):
        loss = (model(lib.tensor(X)) ** 2).mean()
        loss.backward(create_graph=True)
        penalty = sum((p.grad ** 2).sum() for p in model.parameters())
        first = _grads(model)
        model.zero_grad()
        penalty.backward()
        return first, penalty.item(), _grads(model)

    _assert_close(script(compat, ours), script(torch, theirs))


def test_grad_accumulates_over_two_create_graph_backwards_as_in_torch():
    def script(lib):
        x = lib.tensor(V, requires_grad=True)
        (x ** 3).sum().backward(create_graph=True)
        (x.exp() * x).sum().backward(create_graph=True)
        g = x.grad
        (gx,) = lib.autograd.grad(g.sum(), x)
        return g.detach().numpy(), g.requires_grad, gx.numpy()

    _assert_close(*_both(script))


# ----------------------------------------------------------------------------- hooks, retain_grad, leaves


def test_register_hook_replacing_gradients_matches_torch():
    def script(lib):
        seen = []
        x = lib.tensor(V, requires_grad=True)
        y = x.tanh() * 2
        h = y.register_hook(lambda g: g * 3 + 1)
        x.register_hook(lambda g: seen.append(isinstance(g, lib.Tensor)) or g.clamp(-1.5, 1.5))
        (y * y).sum().backward(retain_graph=True)
        first = x.grad.numpy().copy()
        h.remove()
        x.grad = None
        (y * y).sum().backward()
        return first, x.grad.numpy(), seen

    _assert_close(*_both(script))


def test_hook_under_create_graph_sees_a_tensor_and_its_replacement_is_differentiated_as_in_torch():
    def script(lib):
        seen = []
        x = lib.tensor(V, requires_grad=True)
        y = x.sin()
        y.register_hook(lambda g: seen.append((isinstance(g, lib.Tensor), g.requires_grad)) or g * y)
        (g,) = lib.autograd.grad((y ** 2).sum(), x, create_graph=True)
        (gg,) = lib.autograd.grad(g.sum(), x)
        return seen, g.detach().numpy(), gg.numpy()

    _assert_close(*_both(script))


def test_retain_grad_grad_fn_is_leaf_and_detach_match_torch():
    def script(lib):
        x = lib.tensor(V, requires_grad=True)
        y = x.tanh()
        y.retain_grad()
        z = y * x
        (z ** 2).sum().backward()
        flags = (y.retains_grad, z.retains_grad, x.retains_grad, y.is_leaf, x.is_leaf, y.grad_fn is not None,
                 x.grad_fn is None, z.grad is None)
        w = x * 2
        w.detach_()
        flags += (w.requires_grad, w.is_leaf, w.grad_fn is None)
        return flags, y.grad.numpy(), x.grad.numpy()

    _assert_close(*_both(script))
    for lib in LIBS:
        with pytest.raises(RuntimeError, match="Can't detach views in-place"):
            lib.ones(3)[:2].detach_()


# ----------------------------------------------------------------------------- grad modes


def test_set_grad_enabled_as_function_context_and_decorator_matches_torch():
    def script(lib):
        x = lib.tensor(V, requires_grad=True)
        flags = []
        lib.set_grad_enabled(False)
        flags += [(x * 2).requires_grad, lib.is_grad_enabled()]
        lib.set_grad_enabled(True)
        flags += [(x * 2).requires_grad, lib.is_grad_enabled()]
        with lib.set_grad_enabled(False):
            flags += [(x * 2).requires_grad]
            with lib.set_grad_enabled(True):
                flags += [(x * 2).requires_grad]
            flags += [lib.is_grad_enabled()]
        flags += [lib.is_grad_enabled()]

        @lib.set_grad_enabled(False)
        def doubled(t):
            return t * 2

        flags += [lib.is_grad_enabled(), doubled(x).requires_grad, lib.is_grad_enabled()]
        with lib.no_grad():
            flags += [lib.autograd.set_grad_enabled is lib.set_grad_enabled, (x * 2).requires_grad]
        return flags

    _assert_close(*_both(script))


def test_inference_mode_matches_torch():
    def script(lib):
        x = lib.tensor(V, requires_grad=True)
        flags = [lib.is_inference_mode_enabled()]
        with lib.inference_mode():
            flags += [lib.is_inference_mode_enabled(), lib.is_grad_enabled(), (x * 2).requires_grad]
        with lib.no_grad():
            flags += [lib.is_inference_mode_enabled()]
        with lib.inference_mode(False):
            flags += [lib.is_inference_mode_enabled(), (x * 2).requires_grad]

        @lib.inference_mode()
        def called(t):
            return lib.is_inference_mode_enabled(), (t * 2).requires_grad

        @lib.inference_mode
        def bare(t):
            return lib.is_inference_mode_enabled(), (t * 2).requires_grad

        flags += [called(x), bare(x), lib.is_inference_mode_enabled(), lib.is_grad_enabled()]
        return flags

    _assert_close(*_both(script))


# ----------------------------------------------------------------------------- checkpoint


def _checkpointed(lib, model, x, **options):
    """The model's first three layers checkpointed, the rest run as usual."""
    block, rest = model[:3], model[3:]
    return rest(lib.utils.checkpoint.checkpoint(block, x, use_reentrant=False, **options))


def test_checkpoint_gradients_equal_no_checkpoint_and_torch():
    ours, theirs = _twin_models((3, 6, 5, 2))

    def script(lib, model, checkpointed):
        x = lib.tensor(X, requires_grad=True)
        out = _checkpointed(lib, model, x) if checkpointed else model(x)
        (out.tanh() * lib.tensor(X[:, :2])).sum().backward()
        result = out.detach().numpy(), x.grad.numpy(), _grads(model)
        model.zero_grad()
        return result

    plain = script(compat, ours, False)
    _assert_close(script(compat, ours, True), plain)
    _assert_close(plain, script(torch, theirs, True))
    y = compat.utils.checkpoint.checkpoint(ours, compat.tensor(X, requires_grad=True), use_reentrant=False)
    assert isinstance(y, compat.Tensor) and type(y.grad_fn).__name__ == "Checkpoint"
    assert len(y.grad_fn.parents) == 1 + len(list(ours.parameters()))  # the argument, then what the inside reached


def test_checkpoint_with_autograd_grad_create_graph_and_a_hook_matches_torch():
    ours, theirs = _twin_models((3, 6, 5, 2))

    def script(lib, model):
        calls = []
        x = lib.tensor(X, requires_grad=True)
        loss = (_checkpointed(lib, model, x) ** 2).sum()
        (gx,) = lib.autograd.grad(loss, x, create_graph=True)
        model[0].weight.register_hook(lambda g: calls.append(1) or g * 2)  # once per backward, not once per walk
        (loss + (gx ** 2).sum()).backward()
        return x.grad.numpy(), _grads(model), len(calls)

    _assert_close(script(compat, ours), script(torch, theirs))


def test_checkpoint_replays_dropout_and_checkpoint_sequential_matches_torch():
    def dropped(lib):
        lib.manual_seed(3)
        return lib.nn.Sequential(lib.nn.Linear(3, 8), lib.nn.Dropout(0.5), lib.nn.Tanh(), lib.nn.Linear(8, 1)).double()

    results = []
    for checkpointed in (False, True):
        model = dropped(compat)
        compat.manual_seed(7)
        x = compat.tensor(X, requires_grad=True)
        out = compat.utils.checkpoint.checkpoint(model, x, use_reentrant=False) if checkpointed else model(x)
        out.sum().backward()
        results.append((x.grad.numpy(), _grads(model)))
    _assert_close(*results)

    ours, theirs = _twin_models((3, 4, 4, 4, 2))

    def script(lib, model):
        x = lib.tensor(X, requires_grad=True)
        out = lib.utils.checkpoint.checkpoint_sequential(model, 2, x, use_reentrant=False)
        (out ** 2).sum().backward()
        return out.detach().numpy(), x.grad.numpy(), _grads(model)

    _assert_close(script(compat, ours), script(torch, theirs))


# ----------------------------------------------------------------------------- anomaly detection


@pytest.mark.filterwarnings("ignore:invalid value encountered", "ignore:Error detected in SqrtBackward0",
                            "ignore:Anomaly Detection has been enabled")
def test_detect_anomaly_raises_on_nan_backward_naming_the_forward_op():
    messages = {}
    for lib in LIBS:
        x = lib.tensor([0.0, 1.0], requires_grad=True)
        with lib.autograd.detect_anomaly():
            assert lib.is_anomaly_enabled()
            y = x.sqrt()  # the forward line the error names
            with pytest.raises(RuntimeError, match="returned nan values in its 0th output") as error:
                y.backward(lib.tensor([0.0, 1.0]))  # d sqrt/dx at 0 is inf, times 0: NaN
        assert not lib.is_anomaly_enabled()
        messages[lib] = str(error.value)
    assert "SqrtBackward0" in messages[torch]
    assert "the forward operation Sqrt was created at" in messages[compat]
    assert "y = x.sqrt()  # the forward line the error names" in messages[compat]
    for lib in LIBS:  # set_detect_anomaly: on from now on, then off, where NaN passes silently as in torch
        lib.autograd.set_detect_anomaly(True)
        assert lib.is_anomaly_enabled()
        lib.autograd.set_detect_anomaly(False)
        assert not lib.is_anomaly_enabled()
        y = lib.tensor([0.0, 1.0], requires_grad=True).sqrt()
        y.backward(lib.tensor([0.0, 1.0]))


# ----------------------------------------------------------------------------- gradcheck, gradgradcheck


def _cubes(lib):
    """``x³`` as a torch-style Function, right, planted wrong at second order, and once differentiable."""

    class Cube(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x ** 3

        @staticmethod
        def backward(ctx, grad_output):
            (x,) = ctx.saved_tensors
            return grad_output * 3 * x * x

    class WrongCube(Cube):
        @staticmethod
        def backward(ctx, grad_output):
            (x,) = ctx.saved_tensors
            # 3x² in value, but one factor detached: d/dx of it is 3x, not 6x (right at first order only)
            return grad_output * 3 * x * x.detach()

    class OnceCube(Cube):
        @staticmethod
        @lib.autograd.function.once_differentiable
        def backward(ctx, grad_output):
            (x,) = ctx.saved_tensors
            return grad_output * 3 * x * x

    return Cube, WrongCube, OnceCube


def test_gradgradcheck_passes_on_right_functions_and_fails_on_a_planted_wrong_double_backward():
    for lib in LIBS:
        Cube, WrongCube, OnceCube = _cubes(lib)
        x = lib.tensor(V, requires_grad=True)
        y = lib.tensor(X[0], requires_grad=True)
        assert lib.autograd.gradcheck(lambda a, b: (a * b.tanh()).exp(), (x, y))
        assert lib.autograd.gradgradcheck(lambda a, b: (a * b.tanh()).exp(), (x, y))
        assert lib.autograd.gradgradcheck(Cube.apply, (x,))
        assert lib.autograd.gradgradcheck(Cube.apply, x, grad_outputs=lib.tensor(X[1]))
        for cube in (Cube, WrongCube, OnceCube):
            assert lib.autograd.gradcheck(cube.apply, (x,)), lib
        with pytest.raises(RuntimeError):
            lib.autograd.gradgradcheck(WrongCube.apply, (x,))
        assert lib.autograd.gradgradcheck(WrongCube.apply, (x,), raise_exception=False) is False
        assert lib.autograd.gradcheck(lambda a: a ** 3 + a.detach() * a, (x,), raise_exception=False) is False
        with pytest.raises(RuntimeError):
            lib.autograd.gradgradcheck(OnceCube.apply, (x,))


def test_function_under_create_graph_gives_torchs_second_derivatives():
    def script(lib):
        Cube, WrongCube, _ = _cubes(lib)
        out = []
        for cube in (Cube, WrongCube):
            x = lib.tensor(V, requires_grad=True)
            (g,) = lib.autograd.grad(cube.apply(x).sum(), x, create_graph=True)
            g.sum().backward()
            out.append((g.detach().numpy(), x.grad.numpy()))
        return out

    _assert_close(*_both(script))


def test_gradgradcheck_error_names_the_input_and_is_a_runtime_error():
    _, WrongCube, _ = _cubes(compat)
    x = compat.tensor(V, requires_grad=True)
    with pytest.raises(compat.autograd.GradcheckError, match=r"gradgradcheck: .*input 0 .*element \(0,\)"):
        compat.autograd.gradgradcheck(WrongCube.apply, (x,))


def test_autograd_backward_of_several_tensors_matches_torch():
    def script(lib):
        x = lib.tensor(V, requires_grad=True)
        a, b = x.tanh() * 2, (x ** 2).sum()
        a.register_hook(lambda g: g * 2)
        lib.autograd.backward([a, b], [lib.tensor(X[0]), None], retain_graph=True)
        first = x.grad.numpy().copy()
        x.grad = None
        lib.autograd.backward(b, create_graph=True)
        (gg,) = lib.autograd.grad(x.grad.sum(), x)
        return first, gg.numpy()

    _assert_close(*_both(script))


# ----------------------------------------------------------------------------- errors


def _error(lib, script):
    with pytest.raises(RuntimeError) as error:
        script(lib)
    return str(error.value)


def test_grad_of_an_unused_input_raises_naming_it_unless_allow_unused():
    def unused(lib):
        x, z = lib.tensor(V, requires_grad=True), lib.tensor(V, requires_grad=True)
        return lib.autograd.grad((x * 2).sum(), [x, z])

    assert "appears to not have been used in the graph" in _error(torch, unused)
    assert re.search(r"inputs\[1\] \(shape \(3,\)\) was not used", _error(compat, unused))

    def allowed(lib):
        x, z = lib.tensor(V, requires_grad=True), lib.tensor(V, requires_grad=True)
        gx, gz = lib.autograd.grad((x * 2).sum(), [x, z], allow_unused=True)
        (mx, mz) = lib.autograd.grad((x * 2).sum(), [x, z], allow_unused=True, materialize_grads=True)
        return gx.numpy(), gz, mx.numpy(), mz.numpy()

    _assert_close(*_both(allowed))


def test_non_scalar_output_without_grad_outputs_raises_as_in_torch():
    def script(lib):
        x = lib.tensor(V, requires_grad=True)
        return lib.autograd.grad(x * 2, x)

    def by_backward(lib):
        (lib.tensor(V, requires_grad=True) * 2).backward(create_graph=True)

    for s in (script, by_backward):
        assert "grad can be implicitly created only for scalar outputs" in _error(torch, s)
        assert "grad can be implicitly created only for scalar outputs" in _error(compat, s)


def test_second_backward_through_a_freed_graph_raises_as_in_torch():
    def twice(lib):
        x = lib.tensor(V, requires_grad=True)
        y = (x.exp() * x).sum()
        y.backward()
        y.backward()

    def grad_then_backward(lib):
        x = lib.tensor(V, requires_grad=True)
        y = (x.exp() * x).sum()
        lib.autograd.grad(y, x)
        y.backward()

    for s in (twice, grad_then_backward):
        assert "backward through the graph a second time" in _error(torch, s)
        assert "backward through the graph a second time" in _error(compat, s)
