"""The optimizers beyond SGD and Adam against ``torch.optim``: the same parameters (three shapes, in one or two
groups), the same gradient sequence (some gradients ``None``) and hyperparameters drawn by hypothesis give the same
trajectory and the same state, in float64 to 1e-10, on every device. Torch runs with float64 as its default dtype,
so that its step scalars (NAdam's ``mu_product``, ASGD's ``eta`` and ``mu``) are float64, as ours are."""

import contextlib

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tinyattn as ta
from tinyattn import backend, optim

SHAPES = [(3,), (2, 4), (2, 1, 3)]
STEPS = 6
TOLERANCE = dict(rtol=1e-10, atol=1e-12)
with_device = settings(max_examples=25, deadline=None,
                       suppress_health_check=[*settings.default.suppress_health_check,
                                              HealthCheck.function_scoped_fixture])

rates = st.floats(1e-3, 0.5)
decays = st.just(0.0) | st.floats(1e-4, 0.1)
betas = st.tuples(st.floats(0.0, 0.99), st.floats(0.5, 0.9999))
OPTIMIZERS = {
    "Adagrad": (optim.Adagrad, torch.optim.Adagrad, st.fixed_dictionaries(dict(
        lr=rates, lr_decay=st.just(0.0) | st.floats(0.0, 0.5), weight_decay=decays,
        initial_accumulator_value=st.just(0.0) | st.floats(0.0, 1.0), eps=st.floats(1e-10, 1e-3),
        maximize=st.booleans()))),
    "Adadelta": (optim.Adadelta, torch.optim.Adadelta, st.fixed_dictionaries(dict(
        lr=st.floats(0.1, 2.0), rho=st.floats(0.0, 0.99), eps=st.floats(1e-8, 1e-3), weight_decay=decays,
        maximize=st.booleans()))),
    "Adamax": (optim.Adamax, torch.optim.Adamax, st.fixed_dictionaries(dict(
        lr=rates, betas=betas, eps=st.floats(1e-10, 1e-3), weight_decay=decays, maximize=st.booleans()))),
    "NAdam": (optim.NAdam, torch.optim.NAdam, st.fixed_dictionaries(dict(
        lr=rates, betas=betas, eps=st.floats(1e-10, 1e-3), weight_decay=decays,
        momentum_decay=st.floats(0.0, 0.1), decoupled_weight_decay=st.booleans(), maximize=st.booleans()))),
    "RAdam": (optim.RAdam, torch.optim.RAdam, st.fixed_dictionaries(dict(
        lr=rates, betas=st.tuples(st.floats(0.0, 0.99), st.floats(0.0, 0.9)), eps=st.floats(1e-10, 1e-3),
        weight_decay=decays, decoupled_weight_decay=st.booleans(), maximize=st.booleans()))),
    "RMSprop": (optim.RMSprop, torch.optim.RMSprop, st.fixed_dictionaries(dict(
        lr=st.floats(1e-4, 0.05), alpha=st.floats(0.5, 0.999), eps=st.floats(1e-8, 1e-3), weight_decay=decays,
        momentum=st.just(0.0) | st.floats(0.0, 0.95), centered=st.booleans(), maximize=st.booleans()))),
    "Rprop": (optim.Rprop, torch.optim.Rprop, st.fixed_dictionaries(dict(
        lr=rates, etas=st.tuples(st.floats(0.1, 0.9), st.floats(1.1, 2.0)),
        step_sizes=st.tuples(st.floats(1e-6, 1e-3), st.floats(0.1, 50.0)), maximize=st.booleans()))),
    "ASGD": (optim.ASGD, torch.optim.ASGD, st.fixed_dictionaries(dict(
        lr=rates, lambd=st.floats(1e-5, 0.1), alpha=st.floats(0.5, 1.0), t0=st.sampled_from([1.0, 3.0, 1e6]),
        weight_decay=decays, maximize=st.booleans()))),
    "Adafactor": (optim.Adafactor, torch.optim.Adafactor, st.fixed_dictionaries(dict(
        lr=rates, beta2_decay=st.floats(-1.0, -0.1), eps=st.tuples(st.none() | st.floats(1e-30, 1e-10),
                                                                     st.floats(1e-4, 1e-2)),
        d=st.floats(1.0, 3.0), weight_decay=decays, maximize=st.booleans()))),
}


@contextlib.contextmanager
def torch_float64():
    before = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        yield
    finally:
        torch.set_default_dtype(before)


def storage(array):
    """The memory behind a backend array (the strict backend wraps a NumPy array)."""
    return array._a if isinstance(array, backend.StrictArray) else array


def as_groups(params, grouped, options):
    if not grouped:
        return list(params)
    return [{"params": params[:1], "lr": options["lr"] / 2}, {"params": params[1:]}]


def assert_states_match(ours, theirs):
    ours, theirs = ours.state_dict()["state"], theirs.state_dict()["state"]
    assert sorted(ours) == sorted(theirs)
    for index, state in ours.items():
        assert sorted(state) == sorted(theirs[index])
        for name, value in state.items():
            their = theirs[index][name]
            their = their.numpy() if isinstance(their, torch.Tensor) else their
            np.testing.assert_allclose(np.asarray(value), their, **TOLERANCE, err_msg=name)


@pytest.mark.parametrize("name", list(OPTIMIZERS))
@with_device
@given(data=st.data())
def test_optimizer_matches_torch_step_by_step(name, device, data):
    ours_class, torch_class, options_strategy = OPTIMIZERS[name]
    options = data.draw(options_strategy, label="options")
    grouped = data.draw(st.booleans(), label="grouped")
    seed = data.draw(st.integers(0, 2**32 - 1), label="seed")
    rng = np.random.default_rng(seed)
    values = [rng.standard_normal(shape) for shape in SHAPES]
    params = [ta.tensor(v.copy(), requires_grad=True, device=device) for v in values]
    memory = [storage(p.data) for p in params]
    with torch_float64():
        reference = [torch.tensor(v, requires_grad=True) for v in values]
        opt = ours_class(as_groups(params, grouped, options), **options)
        torch_opt = torch_class(as_groups(reference, grouped, options), **options, foreach=False)
        for _ in range(STEPS):
            grads = [None if rng.random() < 0.2 else rng.standard_normal(shape) for shape in SHAPES]
            for p, q, g in zip(params, reference, grads):
                p.grad = None if g is None else backend.to_device(g.copy(), device)
                q.grad = None if g is None else torch.tensor(g)
            opt.step()
            torch_opt.step()
            for p, q in zip(params, reference):
                np.testing.assert_allclose(p.numpy(), q.detach().numpy(), **TOLERANCE)
        assert_states_match(opt, torch_opt)
    assert all(storage(p.data) is m for p, m in zip(params, memory))  # updated in place


@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_float32_stays_float32_and_a_state_dict_resumes(name, device):
    ours_class = OPTIMIZERS[name][0]
    rng = np.random.default_rng(0)
    values = [rng.standard_normal(shape).astype(np.float32) for shape in SHAPES]
    runs = []
    for resume in (False, True):
        params = [ta.tensor(v.copy(), requires_grad=True, device=device) for v in values]
        opt = ours_class(params, lr=np.float64(0.01))
        grads = np.random.default_rng(1)
        for step in range(4):
            for p, shape in zip(params, SHAPES):
                p.grad = backend.to_device(grads.standard_normal(shape).astype(np.float32), device)
            opt.step()
            if resume and step == 1:
                saved = opt.state_dict()
                opt = ours_class(params, lr=0.5)
                opt.load_state_dict(saved)
        assert all(p.dtype == np.float32 for p in params)
        assert all(v.dtype == np.float32 for s in opt.state.values() for v in s.values() if hasattr(v, "dtype"))
        runs.append([p.numpy() for p in params])
    for a, b in zip(*runs):
        np.testing.assert_array_equal(a, b)


def _problem(seed, n):
    """A smooth, non-quadratic objective: ½ xᵀAx - bᵀx + ¼ Σ x⁴ (A positive definite), on two parameters."""
    rng = np.random.default_rng(seed)
    m = rng.standard_normal((n, n))
    return m @ m.T / n + np.eye(n), rng.standard_normal(n), rng.standard_normal(n)


def objective(lib, A, b, xs):
    """The closure ``LBFGS.step`` calls, on the parameters ``xs`` (two pieces of one vector)."""
    A, b = lib.tensor(A), lib.tensor(b)

    def closure():
        for x in xs:
            x.grad = None
        x = lib.cat(list(xs))
        loss = 0.5 * (x * (A @ x)).sum() - (b * x).sum() + 0.25 * (x**4).sum()
        loss.backward()
        return loss

    return closure


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), lr=st.floats(0.1, 1.0), max_iter=st.integers(1, 25),
       history_size=st.integers(1, 10), line_search=st.sampled_from([None, "strong_wolfe"]),
       tolerance_change=st.sampled_from([1e-9, 1e-4]))
def test_lbfgs_matches_torch(seed, lr, max_iter, history_size, line_search, tolerance_change):
    A, b, x0 = _problem(seed, 5)
    trails = []
    with torch_float64():
        for lib, make in ((ta, optim.LBFGS), (torch, torch.optim.LBFGS)):
            xs = [lib.tensor(x0[:2].copy(), requires_grad=True), lib.tensor(x0[2:].copy(), requires_grad=True)]
            opt = make(xs, lr=lr, max_iter=max_iter, history_size=history_size, line_search_fn=line_search,
                       tolerance_change=tolerance_change)
            closure = objective(lib, A, b, xs)
            trail = []
            for _ in range(3):
                loss = opt.step(closure)
                trail.append((loss.item(), np.concatenate([x.detach().numpy() for x in xs])))
            trails.append((trail, opt))
    (ours, our_opt), (theirs, their_opt) = trails
    for (loss, x), (their_loss, their_x) in zip(ours, theirs):
        np.testing.assert_allclose(loss, their_loss, rtol=1e-9)
        np.testing.assert_allclose(x, their_x, rtol=1e-8, atol=1e-10)
    our_state, their_state = our_opt.state_dict()["state"][0], their_opt.state_dict()["state"][0]
    assert our_state["func_evals"] == their_state["func_evals"] and our_state["n_iter"] == their_state["n_iter"]
    assert len(our_state["old_dirs"]) == len(their_state["old_dirs"]) <= history_size
    for ours_, theirs_ in zip(our_state["old_dirs"], their_state["old_dirs"]):
        np.testing.assert_allclose(ours_, theirs_.numpy(), rtol=1e-7, atol=1e-10)


def test_lbfgs_state_dict_resumes_and_one_group_only():
    A, b, x0 = _problem(3, 4)
    runs = []
    for resume in (False, True):
        x = ta.tensor(x0.copy(), requires_grad=True)
        opt = optim.LBFGS([x], max_iter=3, line_search_fn="strong_wolfe")
        closure = objective(ta, A, b, [x])
        for step in range(4):
            opt.step(closure)
            if resume and step == 1:
                saved = opt.state_dict()
                opt = optim.LBFGS([x], max_iter=3, line_search_fn="strong_wolfe")
                opt.load_state_dict(saved)
        runs.append(x.numpy())
    np.testing.assert_array_equal(*runs)
    with pytest.raises(ValueError, match="parameter groups"):
        optim.LBFGS([{"params": [ta.ones(1, requires_grad=True)]}, {"params": [ta.ones(1, requires_grad=True)]}])


@pytest.mark.parametrize("make", [
    lambda lib, p: lib.Adagrad(p, lr=-1.0),
    lambda lib, p: lib.Adagrad(p, lr_decay=-1.0),
    lambda lib, p: lib.Adagrad(p, eps=-1.0),
    lambda lib, p: lib.Adadelta(p, rho=1.5),
    lambda lib, p: lib.Adamax(p, betas=(1.0, 0.9)),
    lambda lib, p: lib.NAdam(p, momentum_decay=-1.0),
    lambda lib, p: lib.RAdam(p, betas=(0.9, -0.1)),
    lambda lib, p: lib.RMSprop(p, alpha=-0.5),
    lambda lib, p: lib.RMSprop(p, momentum=-0.5),
    lambda lib, p: lib.Rprop(p, etas=(1.5, 1.2)),
    lambda lib, p: lib.ASGD(p, weight_decay=-1.0),
    lambda lib, p: lib.Adafactor(p, beta2_decay=0.5),
    lambda lib, p: lib.Adafactor(p, d=0.5),
    lambda lib, p: lib.Adafactor(p, eps=(None, -1.0)),
    lambda lib, p: lib.LBFGS(p, lr=-1.0),
])
def test_invalid_hyperparameters_are_refused_as_torch_refuses_them(make):
    for lib, parameter in ((optim, ta.ones(2, requires_grad=True)), (torch.optim, torch.ones(2, requires_grad=True))):
        with pytest.raises(ValueError):
            make(lib, [parameter])


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), shape=st.sampled_from([(3, 5), (6, 2), (4, 4)]), lr=st.floats(1e-3, 0.1),
       weight_decay=st.sampled_from([0.0, 0.1]), momentum=st.floats(0.0, 0.99), nesterov=st.booleans(),
       adjust_lr_fn=st.sampled_from([None, "original", "match_rms_adamw"]))
def test_muon_matches_torch(seed, shape, lr, weight_decay, momentum, nesterov, adjust_lr_fn):
    """torch orthogonalises in bfloat16, here in the parameter's dtype: with torch's bfloat16 cast made a copy
    (so that its iteration runs in float64 too), the trajectories agree to rounding."""
    rng = np.random.default_rng(seed)
    start = rng.standard_normal(shape)
    options = dict(lr=lr, weight_decay=weight_decay, momentum=momentum, nesterov=nesterov, adjust_lr_fn=adjust_lr_fn)
    with torch_float64(), pytest.MonkeyPatch.context() as patch:
        patch.setattr(torch.Tensor, "bfloat16", lambda self: self.clone())
        w, reference = ta.tensor(start.copy(), requires_grad=True), torch.tensor(start.copy(), requires_grad=True)
        opt, torch_opt = optim.Muon([w], **options), torch.optim.Muon([reference], **options)
        for _ in range(STEPS):
            grad = rng.standard_normal(shape)
            w.grad, reference.grad = grad.copy(), torch.tensor(grad)
            opt.step()
            torch_opt.step()
            np.testing.assert_allclose(w.numpy(), reference.detach().numpy(), **TOLERANCE)
    k = min(shape)  # a matrix of singular values in [0.3, 1]: orthogonalised, every one lands near 1
    left = np.linalg.qr(rng.standard_normal((shape[0], k)))[0]
    right = np.linalg.qr(rng.standard_normal((shape[1], k)))[0]
    matrix = left @ np.diag(rng.uniform(0.3, 1.0, k)) @ right.T
    singular_values = np.linalg.svd(optim.muon.newton_schulz(matrix, (3.4445, -4.775, 2.0315), 5, 1e-7),
                                    compute_uv=False)
    assert np.all((singular_values > 0.6) & (singular_values < 1.25)), singular_values
    with pytest.raises(ValueError, match="2D"):
        optim.Muon([ta.ones(3, requires_grad=True)])


@pytest.mark.parametrize("name", ["Adagrad", "RMSprop", "NAdam"])
def test_swap_in_params_and_state_steps_them_and_restores_the_live_ones_as_torch(name):
    ours_class, torch_class, _ = OPTIMIZERS[name]
    rng = np.random.default_rng(5)
    live, swapped, grads = ([rng.standard_normal(shape) for shape in SHAPES] for _ in range(3))
    results = []
    with torch_float64():
        for lib, make in ((ta, ours_class), (torch, torch_class)):
            params = [lib.tensor(v.copy(), requires_grad=True) for v in live]
            opt = make([{"params": params[:1]}, {"params": params[1:], "lr": 0.05}], lr=0.1)
            for p, g in zip(params, grads):
                p.grad = g.copy() if lib is ta else torch.tensor(g)
            opt.step()
            before = (opt.state_dict(), [p.detach().numpy().copy() for p in params])
            others = {str(i): lib.tensor(v.copy(), requires_grad=True) for i, v in enumerate(swapped)}
            for p, g in zip(others.values(), grads):
                p.grad = 2 * g if lib is ta else torch.tensor(2 * g)
            state = opt.state_dict()
            state["param_groups"][1]["lr"] = 0.3
            swap = (optim if lib is ta else torch.optim).swap_in_optimizer_params_and_state
            with swap(opt, others, state):
                opt.step()
            after = (opt.state_dict(), [p.detach().numpy() for p in params])
            assert [g["lr"] for g in after[0]["param_groups"]] == [0.1, 0.05]
            for a, b in zip(before[1], after[1]):
                np.testing.assert_array_equal(a, b)
            results.append([p.detach().numpy() for p in others.values()])
    for ours, theirs in zip(*results):
        np.testing.assert_allclose(ours, theirs, **TOLERANCE)
