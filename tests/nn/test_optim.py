"""Optimizers and learning-rate schedules, step by step against torch.optim.

Each optimizer runs beside ``torch.optim``'s single-tensor implementation (``foreach=False``)
on the same parameters (three shapes, optionally in two groups with different options) and
the same random gradients, some of them ``None``; parameters and state must agree after
every step, in float64 to 1e-10 and in float32 to float32 rounding, on every device.
"""

import copy

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tinyattn as ta
from tinyattn import backend, optim
from tinyattn.optim import lr_scheduler

SHAPES = [(3,), (2, 4), (2, 1, 3)]
STEPS = 5

# the device fixture is a plain string, safe to share between hypothesis examples
with_device = settings(
    suppress_health_check=[*settings.default.suppress_health_check, HealthCheck.function_scoped_fixture]
)

small_weight_decay = st.just(0.0) | st.floats(1e-4, 0.1)


@st.composite
def sgd_options(draw):
    momentum = draw(st.just(0.0) | st.floats(0.01, 0.99))
    return dict(
        lr=draw(st.floats(1e-3, 1.0)),
        momentum=momentum,
        weight_decay=draw(small_weight_decay),
        nesterov=momentum > 0 and draw(st.booleans()),
    )


def adam_options(weight_decay):
    return st.fixed_dictionaries(
        dict(
            lr=st.floats(1e-4, 0.5),
            betas=st.tuples(st.floats(0.0, 0.99), st.floats(0.0, 0.9999)),
            eps=st.floats(1e-10, 1e-3),
            weight_decay=weight_decay,
        )
    )


OPTIMIZERS = {
    "SGD": (optim.SGD, torch.optim.SGD, sgd_options()),
    "Adam": (optim.Adam, torch.optim.Adam, adam_options(small_weight_decay)),
    "AdamW": (optim.AdamW, torch.optim.AdamW, adam_options(st.floats(0.0, 0.1))),
}
TOLERANCE = {np.float64: dict(rtol=1e-10, atol=1e-12), np.float32: dict(rtol=1e-5, atol=1e-6)}


def as_groups(params, grouped, options):
    """All parameters in one group, or the first alone in a group of its own with half the lr."""
    if not grouped:
        return list(params)
    return [{"params": params[:1], "lr": options["lr"] / 2}, {"params": params[1:]}]


def host_values(seed, dtype):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(shape).astype(dtype) for shape in SHAPES]


def draw_grads(rng, dtype):
    """One gradient per parameter, about one in five of them None."""
    return [None if rng.random() < 0.2 else rng.standard_normal(shape).astype(dtype) for shape in SHAPES]


def set_grads(params, grads, device):
    for p, g in zip(params, grads):
        p.grad = None if g is None else backend.to_device(g.copy(), device)


def set_torch_grads(params, grads):
    for p, g in zip(params, grads):
        p.grad = None if g is None else torch.tensor(g)


def storage(array):
    """The memory behind a backend array (the strict backend wraps a NumPy array)."""
    return array._a if isinstance(array, backend.StrictArray) else array


def assert_state_matches_torch(ours, theirs, dtype, device, tolerance):
    ours, theirs = ours.state_dict()["state"], theirs.state_dict()["state"]
    assert sorted(ours) == sorted(theirs)
    for index, state in ours.items():
        assert sorted(state) == sorted(theirs[index])
        for name, value in state.items():
            if name == "step":
                assert value == int(theirs[index]["step"])
            else:
                assert value.dtype == dtype
                np.testing.assert_allclose(value, theirs[index][name].numpy(), **tolerance)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name", list(OPTIMIZERS))
@with_device
@given(data=st.data())
def test_optimizer_matches_torch_step_by_step(name, dtype, device, data):
    ours_class, torch_class, options_strategy = OPTIMIZERS[name]
    options = data.draw(options_strategy, label="options")
    grouped = data.draw(st.booleans(), label="grouped")
    seed = data.draw(st.integers(0, 2**32 - 1), label="seed")
    values = host_values(seed, dtype)
    params = [ta.tensor(v.copy(), requires_grad=True, device=device) for v in values]
    reference = [torch.tensor(v, requires_grad=True) for v in values]
    opt = ours_class(as_groups(params, grouped, options), **options)
    torch_opt = torch_class(as_groups(reference, grouped, options), **options, foreach=False)
    rng = np.random.default_rng(seed + 1)
    largest_step = 1.0  # rounding grows with the updates: with beta2 near 0, Adam's can reach 100·lr
    for _ in range(STEPS):
        grads = draw_grads(rng, dtype)
        set_grads(params, grads, device)
        set_torch_grads(reference, grads)
        before = [q.detach().numpy().copy() for q in reference]
        opt.step()
        torch_opt.step()
        largest_step = max([largest_step] + [np.abs(q.detach().numpy() - b).max() for q, b in zip(reference, before)])
        tolerance = dict(TOLERANCE[dtype], atol=TOLERANCE[dtype]["atol"] * largest_step)
        for p, q in zip(params, reference):
            assert p.dtype == dtype and p.device == device
            np.testing.assert_allclose(p.numpy(), q.detach().numpy(), **tolerance)
    assert_state_matches_torch(opt, torch_opt, dtype, device, TOLERANCE[dtype])
    for state in opt.state.values():  # state lives with its parameter: same device, same dtype
        for name_, value in state.items():
            if name_ != "step":
                assert backend.device_of(value) == device and value.dtype == dtype


@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_updates_are_in_place_and_numpy_hyperparameters_do_not_promote(name, device):
    """A NumPy float64 lr or beta must not turn a float32 update into a float64 one."""
    values = host_values(0, np.float32)
    as_python = dict(lr=0.1, momentum=0.9) if name == "SGD" else dict(lr=0.1, betas=(0.8, 0.99))
    as_numpy = {k: np.float64(v) if k != "betas" else tuple(np.float64(b) for b in v) for k, v in as_python.items()}
    results = []
    for options in (as_python, as_numpy):
        params = [ta.tensor(v.copy(), requires_grad=True, device=device) for v in values]
        memory = [storage(p.data) for p in params]
        opt = OPTIMIZERS[name][0](params, **options)
        for step in range(3):
            set_grads(params, host_values(step + 10, np.float32), device)
            opt.step()
        assert all(storage(p.data) is m for p, m in zip(params, memory))
        assert all(p.dtype == np.float32 for p in params)
        results.append([p.numpy() for p in params])
    for python_result, numpy_result in zip(*results):
        np.testing.assert_array_equal(python_result, numpy_result)


@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_state_dict_then_load_state_dict_continues_identically(name, device):
    ours_class, _, _ = OPTIMIZERS[name]
    options = dict(lr=0.1, momentum=0.9, nesterov=True) if name == "SGD" else dict(lr=0.05, weight_decay=0.01)
    rng = np.random.default_rng(3)
    params = [ta.tensor(v, requires_grad=True, device=device) for v in host_values(1, np.float64)]
    opt = ours_class([{"params": params[:2]}, {"params": params[2:], "lr": 0.02}], **options)
    for _ in range(3):
        set_grads(params, draw_grads(rng, np.float64), device)
        opt.step()
    opt.param_groups[0]["lr"] = 0.07  # as a schedule would
    saved = opt.state_dict()
    snapshot = copy.deepcopy(saved)
    twins = [ta.tensor(p.numpy(), requires_grad=True, device=device) for p in params]
    restarted = ours_class([{"params": twins[:2]}, {"params": twins[2:], "lr": 0.5}], lr=0.5)
    loaded = copy.deepcopy(saved)
    restarted.load_state_dict(loaded)
    for state in loaded["state"].values():  # loading copied the arrays: spoiling the source changes nothing
        for array in state.values():
            if isinstance(array, np.ndarray):
                array[...] = np.nan
    assert [g["lr"] for g in restarted.param_groups] == [0.07, 0.02]
    for _ in range(3):
        grads = draw_grads(rng, np.float64)
        set_grads(params, grads, device)
        set_grads(twins, grads, device)
        opt.step()
        restarted.step()
        for p, t in zip(params, twins):
            np.testing.assert_array_equal(p.numpy(), t.numpy())
    assert_equal_state_dicts(opt.state_dict(), restarted.state_dict())
    assert_equal_state_dicts(saved, snapshot)  # a copy, not a view of the state that went on changing


def assert_equal_state_dicts(a, b):
    assert a["param_groups"] == b["param_groups"]
    assert sorted(a["state"]) == sorted(b["state"])
    for index, state in a["state"].items():
        assert sorted(state) == sorted(b["state"][index])
        for name, value in state.items():
            if isinstance(value, np.ndarray):
                assert value.dtype == b["state"][index][name].dtype
                np.testing.assert_array_equal(value, b["state"][index][name])
            else:
                assert value == b["state"][index][name]


def test_state_dict_layout_is_pytorchs():
    w, b = ta.ones(2, 3, requires_grad=True), ta.zeros(3, requires_grad=True)
    opt = optim.Adam([w, b], lr=0.01)
    w.grad = ta.ones(2, 3).data
    opt.step()
    saved = opt.state_dict()
    assert saved["param_groups"] == [dict(lr=0.01, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, params=[0, 1])]
    assert list(saved["state"]) == [0]  # b had no gradient: no state
    assert saved["state"][0]["step"] == 1 and type(saved["state"][0]["exp_avg"]) is np.ndarray


def test_load_state_dict_moves_state_to_the_parameters_device_and_dtype(device):
    source = [ta.tensor(v, requires_grad=True) for v in host_values(2, np.float64)]
    opt = optim.Adam(source, lr=0.01)
    set_grads(source, host_values(3, np.float64), "cpu")
    opt.step()
    target = [ta.tensor(v, requires_grad=True, device=device) for v in host_values(2, np.float32)]
    restarted = optim.Adam(target, lr=0.01)
    saved = opt.state_dict()
    saved["state"][0]["step"] = np.int64(1)  # a NumPy scalar, as a converted checkpoint might hold
    restarted.load_state_dict(saved)
    for p in target:
        state = restarted.state[p]
        assert state["step"] == 1 and type(state["step"]) is int
        for name in ("exp_avg", "exp_avg_sq"):
            assert backend.device_of(state[name]) == device and state[name].dtype == np.float32
    set_grads(target, host_values(3, np.float32), device)
    restarted.step()
    assert all(p.dtype == np.float32 and restarted.state[p]["exp_avg"].dtype == np.float32 for p in target)


def mismatches():
    """(description, how to spoil a good state dict, error type, words the error must contain)."""

    def drop_group(d):
        d["param_groups"].pop()

    def drop_param(d):
        d["param_groups"][1]["params"].pop()

    def bad_shape(d):
        d["state"][2]["exp_avg"] = np.zeros((2, 3, 1))

    def unknown_index(d):
        d["state"][7] = d["state"].pop(2)

    def no_state(d):
        del d["state"]

    return [
        pytest.param(drop_group, ValueError, "1 parameter groups, this optimizer has 2", id="group count"),
        pytest.param(drop_param, ValueError, "group 1 has 1 parameters, this optimizer's has 2", id="param count"),
        pytest.param(bad_shape, ValueError, "'exp_avg' for parameter 2 has shape (2, 3, 1)", id="shape"),
        pytest.param(unknown_index, ValueError, "state for parameter 7", id="unknown index"),
        pytest.param(no_state, KeyError, "no 'state' entry", id="missing key"),
    ]


@pytest.mark.parametrize("spoil, error, words", mismatches())
def test_load_state_dict_rejects_a_mismatch_and_changes_nothing(spoil, error, words):
    params = [ta.tensor(v, requires_grad=True) for v in host_values(4, np.float64)]
    opt = optim.Adam([{"params": params[:1]}, {"params": params[1:]}], lr=0.01)
    set_grads(params, host_values(5, np.float64), "cpu")
    opt.step()
    before = opt.state_dict()
    spoiled = copy.deepcopy(before)
    spoiled["param_groups"][0]["lr"] = 123.0
    spoil(spoiled)
    with pytest.raises(error, match=words.replace("(", r"\(").replace(")", r"\)")):
        opt.load_state_dict(spoiled)
    assert_equal_state_dicts(opt.state_dict(), before)


@pytest.mark.parametrize(
    "make, words",
    [
        (lambda p: optim.SGD(p, lr=-0.1), "Invalid learning rate: -0.1"),
        (lambda p: optim.SGD(p, lr=0.1, momentum=-0.5), "Invalid momentum value: -0.5"),
        (lambda p: optim.SGD(p, lr=0.1, weight_decay=-1.0), "Invalid weight_decay value: -1.0"),
        (lambda p: optim.SGD(p, lr=0.1, nesterov=True), "Nesterov momentum requires a momentum > 0"),
        (lambda p: optim.SGD([{"params": p, "lr": -2.0}], lr=0.1), "Invalid learning rate: -2.0"),
        (lambda p: optim.Adam(p, lr=-1e-3), "Invalid learning rate: -0.001"),
        (lambda p: optim.Adam(p, eps=-1e-8), "Invalid epsilon value: -1e-08"),
        (lambda p: optim.Adam(p, betas=(1.0, 0.999)), "Invalid beta parameter at index 0: 1.0"),
        (lambda p: optim.Adam(p, betas=(0.9, -0.1)), "Invalid beta parameter at index 1: -0.1"),
        (lambda p: optim.Adam(p, weight_decay=-0.1), "Invalid weight_decay value: -0.1"),
        (lambda p: optim.AdamW(p, weight_decay=-0.01), "Invalid weight_decay value: -0.01"),
    ],
)
def test_invalid_hyperparameters_are_named(make, words):
    with pytest.raises(ValueError, match=words.replace("(", r"\(")):
        make([ta.ones(2, requires_grad=True)])


def test_invalid_parameter_lists_are_explained():
    w = ta.ones(2, requires_grad=True)
    with pytest.raises(ValueError, match="empty parameter list"):
        optim.SGD([], lr=0.1)
    with pytest.raises(TypeError, match="got a single Tensor"):
        optim.SGD(w, lr=0.1)
    with pytest.raises(TypeError, match="not a set"):
        optim.Adam([{"params": {w}}])
    with pytest.raises(TypeError, match="parameter 1 is a ndarray"):
        optim.Adam([w, np.ones(2)])
    with pytest.raises(ValueError, match="non-leaf"):
        optim.Adam([w * 2])
    with pytest.raises(ValueError, match="more than one parameter group"):
        optim.Adam([{"params": [w]}, {"params": [w]}])


def test_zero_grad_step_closure_and_skipped_parameters():
    w, frozen = ta.tensor([1.0, 2.0], requires_grad=True), ta.tensor([5.0], requires_grad=True)
    opt = optim.Adam([w, frozen], lr=0.1)

    def closure():
        opt.zero_grad()
        loss = (w * w).sum()
        loss.backward()
        return loss

    loss = opt.step(closure)
    assert loss.item() == 5.0
    assert frozen.grad is None and frozen not in opt.state and frozen.item() == 5.0
    opt.zero_grad(set_to_none=False)
    np.testing.assert_array_equal(w.grad, np.zeros(2, np.float32))
    opt.zero_grad()
    assert w.grad is None
    assert "Parameter Group 0" in repr(opt) and "lr: 0.1" in repr(opt)


# ----------------------------------------------------------------------------- schedules


def reference_inverse_sqrt(steps, warmup):
    update = steps + 1.0
    return np.minimum(update / warmup, np.sqrt(warmup / update))


def reference_cosine(steps, warmup, total):
    update, peak = steps + 1.0, max(warmup, 1)
    warm = update / peak
    cosine = 0.5 * (1 + np.cos(np.pi * (update - peak) / (total + 1 - peak)))
    return np.where(update <= warmup, warm, np.where(update <= total, cosine, 0.0))


@given(warmup=st.integers(1, 50), length=st.integers(1, 200))
def test_warmup_inverse_sqrt_follows_its_formula(warmup, length):
    factor = lr_scheduler.warmup_inverse_sqrt(warmup)
    steps = np.arange(length + warmup)
    values = np.array([factor(int(s)) for s in steps])
    assert all(type(factor(int(s))) is float for s in steps[:3])  # Python floats never promote float32
    np.testing.assert_allclose(values, reference_inverse_sqrt(steps, warmup), rtol=1e-12)
    assert values[0] == 1 / warmup > 0  # the first update already moves
    assert values[warmup - 1] == 1.0 == values.max()
    assert np.all(np.diff(values[:warmup]) > 0) and np.all(np.diff(values[warmup - 1 :]) < 0)


@given(warmup=st.integers(0, 30), extra=st.integers(0, 100))
def test_warmup_cosine_follows_its_formula(warmup, extra):
    total = warmup + extra if warmup + extra > 0 else 1
    factor = lr_scheduler.warmup_cosine(warmup, total)
    steps = np.arange(total + 10)
    values = np.array([factor(int(s)) for s in steps])
    np.testing.assert_allclose(values, reference_cosine(steps, warmup, total), rtol=1e-12, atol=1e-15)
    assert np.all(values[:total] > 0) and np.all(values[total:] == 0)  # every planned update moves
    peak = max(warmup, 1) - 1  # the step whose update gets the full rate
    assert values[peak] == 1.0 == values.max()
    assert np.all(np.diff(values[: peak + 1]) > 0) and np.all(np.diff(values[peak:]) <= 0)


def test_schedule_factories_reject_bad_arguments():
    with pytest.raises(ValueError, match="warmup_steps must be an integer >= 1, got 0"):
        lr_scheduler.warmup_inverse_sqrt(0)
    with pytest.raises(ValueError, match="warmup_steps=10, total_steps=5"):
        lr_scheduler.warmup_cosine(10, 5)
    with pytest.raises(ValueError, match="warmup_steps=0, total_steps=0"):
        lr_scheduler.warmup_cosine(0, 0)
    with pytest.raises(ValueError, match="warmup_steps=2.5"):
        lr_scheduler.warmup_cosine(2.5, 5)


def test_lambda_lr_changes_learning_rates_like_torch():
    lambdas = [lr_scheduler.warmup_cosine(3, 8), lr_scheduler.warmup_inverse_sqrt(2)]
    params = [ta.ones(2, requires_grad=True), ta.ones(3, requires_grad=True)]
    reference = [torch.ones(2, requires_grad=True), torch.ones(3, requires_grad=True)]
    opt = optim.SGD([{"params": params[:1]}, {"params": params[1:], "lr": 0.3}], lr=0.1)
    torch_opt = torch.optim.SGD([{"params": reference[:1]}, {"params": reference[1:], "lr": 0.3}], lr=0.1)
    schedule = lr_scheduler.LambdaLR(opt, lambdas)
    torch_schedule = torch.optim.lr_scheduler.LambdaLR(torch_opt, lambdas)
    for _ in range(12):
        assert schedule.get_last_lr() == pytest.approx(torch_schedule.get_last_lr(), rel=1e-15)
        for group, torch_group in zip(opt.param_groups, torch_opt.param_groups):
            assert group["lr"] == pytest.approx(torch_group["lr"], rel=1e-15)
            assert group["initial_lr"] == torch_group["initial_lr"]
        opt.step()
        torch_opt.step()
        schedule.step()
        torch_schedule.step()
    assert schedule.last_epoch == torch_schedule.last_epoch == 12


def test_adamw_under_a_schedule_matches_torch():
    values = host_values(6, np.float64)
    params = [ta.tensor(v, requires_grad=True) for v in values]
    reference = [torch.tensor(v, requires_grad=True) for v in values]
    opt = optim.AdamW(params, lr=0.01)
    torch_opt = torch.optim.AdamW(reference, lr=0.01, foreach=False)
    schedule = lr_scheduler.LambdaLR(opt, lr_scheduler.warmup_cosine(2, 6))
    torch_schedule = torch.optim.lr_scheduler.LambdaLR(torch_opt, lr_scheduler.warmup_cosine(2, 6))
    rng = np.random.default_rng(7)
    for _ in range(8):
        grads = draw_grads(rng, np.float64)
        set_grads(params, grads, "cpu")
        set_torch_grads(reference, grads)
        opt.step()
        torch_opt.step()
        schedule.step()
        torch_schedule.step()
        for p, q in zip(params, reference):
            np.testing.assert_allclose(p.numpy(), q.detach().numpy(), rtol=1e-10, atol=1e-12)


def test_lambda_lr_resumes_from_its_state_dict():
    factor = lr_scheduler.warmup_inverse_sqrt(3)
    opt = optim.SGD([ta.ones(1, requires_grad=True)], lr=0.2)
    schedule = lr_scheduler.LambdaLR(opt, factor)
    for _ in range(4):
        schedule.step()
    resumed_opt = optim.SGD([ta.ones(1, requires_grad=True)], lr=0.2)
    resumed = lr_scheduler.LambdaLR(resumed_opt, factor)
    resumed_opt.load_state_dict(opt.state_dict())
    resumed.load_state_dict(schedule.state_dict())
    assert resumed.get_last_lr() == schedule.get_last_lr() == [opt.param_groups[0]["lr"]]
    for _ in range(3):
        schedule.step()
        resumed.step()
        assert resumed_opt.param_groups[0]["lr"] == opt.param_groups[0]["lr"] == 0.2 * factor(schedule.last_epoch)
    with pytest.raises(KeyError, match="initial_lr"):
        lr_scheduler.LambdaLR(optim.SGD([ta.ones(1, requires_grad=True)], lr=0.1), factor, last_epoch=5)
    with pytest.raises(ValueError, match="Expected 1 lr_lambdas"):
        lr_scheduler.LambdaLR(opt, [factor, factor])


def test_lr_scheduler_is_a_submodule_attribute():
    import tinyattn.optim.lr_scheduler as module

    assert ta.optim.lr_scheduler is module is lr_scheduler
    assert module.warmup_cosine(0, 1)(0) == 1.0 and module.warmup_cosine(0, 1)(1) == 0.0


@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_a_training_loop_on_a_linear_layer_matches_torch(name, device):
    """Module.parameters(), backward and step together: a regression fit beside torch.nn.Linear."""
    options = dict(lr=0.1, momentum=0.5) if name == "SGD" else dict(lr=0.05)
    rng = np.random.default_rng(8)
    inputs, targets = rng.standard_normal((16, 3)), rng.standard_normal((16, 2))
    model = ta.nn.Linear(3, 2).double().to(device)
    reference = torch.nn.Linear(3, 2).double()
    with torch.no_grad():
        reference.weight.copy_(torch.tensor(model.weight.numpy()))
        reference.bias.copy_(torch.tensor(model.bias.numpy()))
    opt = OPTIMIZERS[name][0](model.parameters(), **options)
    torch_opt = OPTIMIZERS[name][1](reference.parameters(), **options, foreach=False)
    x, y = ta.tensor(inputs, device=device), ta.tensor(targets, device=device)
    losses = []
    for _ in range(10):
        opt.zero_grad()
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
        torch_opt.zero_grad()
        torch_loss = ((reference(torch.tensor(inputs)) - torch.tensor(targets)) ** 2).mean()
        torch_loss.backward()
        torch_opt.step()
        assert loss.item() == pytest.approx(torch_loss.item(), rel=1e-10)
        losses.append(loss.item())
    np.testing.assert_allclose(model.weight.numpy(), reference.weight.detach().numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(model.bias.numpy(), reference.bias.detach().numpy(), rtol=1e-10, atol=1e-12)
    assert losses[-1] < losses[0]


@pytest.mark.parametrize("make", [lambda ps: optim.SGD(ps, lr=0.1), optim.Adam, optim.AdamW])
def test_a_step_over_an_integer_gradient_is_refused_in_the_library_s_words(make):
    layer = ta.nn.Linear(2, 2)
    opt = make(layer.parameters())
    layer.weight.grad = np.ones((2, 2), np.int64)
    before = layer.weight.numpy()
    with pytest.raises(TypeError, match="optimizer step: a parameter of dtype float32 has a .grad of dtype int64"):
        opt.step()
    np.testing.assert_array_equal(layer.weight.numpy(), before)
