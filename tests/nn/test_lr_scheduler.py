"""Every scheduler of ``ta.optim.lr_scheduler`` beside torch's: the same optimizer (two parameter groups), the same
options drawn by hypothesis, ~30 steps; the rates (and the momenta the cyclic ones move) must agree to rounding
after every step, and a scheduler resumed from its ``state_dict`` must go on as the original does."""

import math
import warnings

import hypothesis.strategies as st
import numpy as np
import pytest
import torch
from hypothesis import assume, given, settings

import tinyattn as ta
from tinyattn import optim
from tinyattn.optim import lr_scheduler

STEPS = 30
SETTINGS = settings(max_examples=25, deadline=None)


def optimizers(kind="SGD"):
    """(ours, torch's): two groups with different rates, momentum (or betas) for the cyclic schedules."""
    made = []
    for lib, parameter in ((optim, lambda: ta.zeros(2, requires_grad=True)),
                           (torch.optim, lambda: torch.zeros(2, requires_grad=True))):
        groups = [{"params": [parameter()]}, {"params": [parameter()], "lr": 0.05}]
        made.append(lib.SGD(groups, lr=0.2, momentum=0.9) if kind == "SGD" else lib.Adam(groups, lr=0.2))
    return made


def rates_of(make, lib, opt, steps=STEPS, metrics=None):
    scheduler = make(lib, opt)
    trail = []
    for i in range(steps):
        group = opt.param_groups[0]
        trail.append((scheduler.get_last_lr(), [g["lr"] for g in opt.param_groups],
                      group.get("momentum", group.get("betas", (None,))[0])))
        opt.step()
        scheduler.step() if metrics is None else scheduler.step(metrics[i])
    return trail, scheduler


def assert_same_trails(ours, theirs):
    for i, ((lrs, group_lrs, momentum), (their_lrs, their_group_lrs, their_momentum)) in enumerate(zip(ours, theirs)):
        np.testing.assert_allclose(lrs, their_lrs, rtol=1e-12, atol=1e-15, err_msg=f"step {i}")
        np.testing.assert_allclose(group_lrs, their_group_lrs, rtol=1e-12, atol=1e-15, err_msg=f"step {i}")
        np.testing.assert_allclose(momentum, their_momentum, rtol=1e-12, err_msg=f"step {i} momentum")


gammas = st.floats(0.1, 0.99)
SCHEDULES = {
    "LambdaLR": st.builds(lambda a: lambda lib, o: lib.LambdaLR(o, [lambda s: 1 / (s + a), lambda s: a ** -s]),
                          st.floats(1.0, 3.0)),
    "MultiplicativeLR": st.builds(lambda g: lambda lib, o: lib.MultiplicativeLR(o, lambda s: g + (1 - g) / (s + 1)),
                                  gammas),
    "StepLR": st.builds(lambda n, g: lambda lib, o: lib.StepLR(o, step_size=n, gamma=g), st.integers(1, 8), gammas),
    "MultiStepLR": st.builds(lambda m, g: lambda lib, o: lib.MultiStepLR(o, milestones=m, gamma=g),
                             st.lists(st.integers(1, 35), max_size=5), gammas),
    "ConstantLR": st.builds(lambda f, n: lambda lib, o: lib.ConstantLR(o, factor=f, total_iters=n),
                            st.floats(0.05, 1.0), st.integers(0, 35)),
    "LinearLR": st.builds(lambda a, b, n: lambda lib, o: lib.LinearLR(o, start_factor=a, end_factor=b, total_iters=n),
                          st.floats(0.05, 1.0), st.floats(0.0, 1.0), st.integers(1, 35)),
    "ExponentialLR": st.builds(lambda g: lambda lib, o: lib.ExponentialLR(o, gamma=g), gammas),
    "PolynomialLR": st.builds(lambda n, p: lambda lib, o: lib.PolynomialLR(o, total_iters=n, power=p),
                              st.integers(1, 35), st.floats(0.5, 3.0)),
    "CosineAnnealingLR": st.builds(lambda n, e: lambda lib, o: lib.CosineAnnealingLR(o, T_max=n, eta_min=e),
                                   st.integers(1, 20), st.sampled_from([0.0, 1e-3, 0.01])),
    "CosineAnnealingWarmRestarts": st.builds(
        lambda t, m, e: lambda lib, o: lib.CosineAnnealingWarmRestarts(o, T_0=t, T_mult=m, eta_min=e),
        st.integers(1, 10), st.integers(1, 3), st.sampled_from([0.0, 1e-3])),
    "CyclicLR": st.builds(
        lambda up, down, mode, g: lambda lib, o: lib.CyclicLR(o, base_lr=[0.01, 0.02], max_lr=0.3, step_size_up=up,
                                                              step_size_down=down, mode=mode, gamma=g),
        st.integers(1, 8), st.one_of(st.none(), st.integers(1, 8)),
        st.sampled_from(["triangular", "triangular2", "exp_range"]), gammas),
    "CyclicLR scale_fn": st.builds(
        lambda up, mode: lambda lib, o: lib.CyclicLR(o, base_lr=0.01, max_lr=[0.3, 0.1], step_size_up=up,
                                                     scale_fn=lambda x: 1 / (1 + x), scale_mode=mode,
                                                     base_momentum=0.7, max_momentum=0.95),
        st.integers(1, 8), st.sampled_from(["cycle", "iterations"])),
    "OneCycleLR": st.builds(
        lambda pct, strategy, three, div: lambda lib, o: lib.OneCycleLR(
            o, max_lr=[1.0, 0.5], total_steps=STEPS + 1, pct_start=pct, anneal_strategy=strategy,
            three_phase=three, div_factor=div),
        st.floats(0.1, 0.45), st.sampled_from(["cos", "linear"]), st.booleans(), st.floats(2.0, 30.0)),
    "SequentialLR": st.builds(
        lambda n, m, g: lambda lib, o: lib.SequentialLR(
            o, [lib.LinearLR(o, start_factor=0.1, total_iters=n), lib.ExponentialLR(o, gamma=g),
                lib.CosineAnnealingLR(o, T_max=7)], milestones=[m, m + 9]),
        st.integers(1, 8), st.integers(1, 15), gammas),
    "ChainedScheduler": st.builds(
        lambda n, g, f: lambda lib, o: lib.ChainedScheduler(
            [lib.ConstantLR(o, factor=f, total_iters=n), lib.ExponentialLR(o, gamma=g), lib.StepLR(o, 4)]),
        st.integers(1, 8), gammas, st.floats(0.1, 1.0)),
}


@pytest.mark.parametrize("name", list(SCHEDULES))
@pytest.mark.parametrize("kind", ["SGD", "Adam"])
@SETTINGS
@given(data=st.data())
def test_scheduler_rates_match_torch(name, kind, data):
    make = data.draw(SCHEDULES[name], label="schedule")
    ours, theirs = optimizers(kind)
    our_trail, _ = rates_of(make, lr_scheduler, ours)
    their_trail, _ = rates_of(make, torch.optim.lr_scheduler, theirs)
    assert_same_trails(our_trail, their_trail)


@SETTINGS
@given(mode=st.sampled_from(["min", "max"]), threshold_mode=st.sampled_from(["rel", "abs"]),
       factor=st.floats(0.1, 0.9), patience=st.integers(0, 4), cooldown=st.integers(0, 3),
       min_lr=st.sampled_from([0.0, 0.01, [0.02, 0.001]]), seed=st.integers(0, 1000))
def test_reduce_on_plateau_matches_torch(mode, threshold_mode, factor, patience, cooldown, min_lr, seed):
    metrics = np.round(np.random.default_rng(seed).random(STEPS) * 3, 1).tolist()  # ties: plateaus

    def make(lib, opt):
        return lib.ReduceLROnPlateau(opt, mode=mode, factor=factor, patience=patience, threshold=0.05,
                                     threshold_mode=threshold_mode, cooldown=cooldown, min_lr=min_lr)

    ours, theirs = optimizers()
    our_trail, _ = rates_of(make, lr_scheduler, ours, metrics=metrics)
    their_trail, _ = rates_of(make, torch.optim.lr_scheduler, theirs, metrics=metrics)
    assert_same_trails(our_trail, their_trail)


@pytest.mark.parametrize("name", [n for n in SCHEDULES if n != "CyclicLR scale_fn"] + ["ReduceLROnPlateau"])
@settings(max_examples=5, deadline=None)
@given(data=st.data())
def test_a_scheduler_resumed_from_its_state_dict_goes_on_identically(name, data):
    metrics = [1.0, 0.9, 0.95, 0.97, 0.99] * 20
    if name == "ReduceLROnPlateau":
        def make(lib, opt):
            return lib.ReduceLROnPlateau(opt, factor=0.5, patience=1)
    else:
        make = data.draw(SCHEDULES[name], label="schedule")
    opt, _ = optimizers()
    _, scheduler = rates_of(make, lr_scheduler, opt, steps=12, metrics=metrics if name == "ReduceLROnPlateau" else None)
    state = scheduler.state_dict()
    # torch's chainable LinearLR down to end_factor=0 can leave a rate of -1e-17, which an optimizer refuses to load
    assume(all(group["lr"] >= 0 for group in opt.param_groups))
    resumed_opt, _ = optimizers()
    resumed = make(lr_scheduler, resumed_opt)
    resumed_opt.load_state_dict(opt.state_dict())
    resumed.load_state_dict(state)
    assert resumed.state_dict() == state and resumed.get_last_lr() == scheduler.get_last_lr()
    for i in range(10):
        if name == "ReduceLROnPlateau":
            scheduler.step(metrics[12 + i]), resumed.step(metrics[12 + i])
        else:
            scheduler.step(), resumed.step()
        assert resumed.get_last_lr() == scheduler.get_last_lr()
        assert [g["lr"] for g in resumed_opt.param_groups] == [g["lr"] for g in opt.param_groups]
    with pytest.raises(KeyError):
        resumed.load_state_dict({**state, "unexpected": 1})


@pytest.mark.parametrize("make", [
    lambda lib, o: lib.StepLR(o, 3, gamma=0.5),
    lambda lib, o: lib.MultiStepLR(o, [2, 5, 5], gamma=0.5),
    lambda lib, o: lib.ConstantLR(o, factor=0.5, total_iters=4),
    lambda lib, o: lib.LinearLR(o, start_factor=0.2, total_iters=6),
    lambda lib, o: lib.ExponentialLR(o, gamma=0.8),
    lambda lib, o: lib.PolynomialLR(o, total_iters=6, power=2.0),
    lambda lib, o: lib.CosineAnnealingLR(o, T_max=5),
    lambda lib, o: lib.CosineAnnealingWarmRestarts(o, T_0=3, T_mult=2),
])
def test_step_to_an_epoch_uses_the_closed_form_as_torch(make):
    epochs = [3, 7, 2, 10, 0, 4.5] if "Warm" in str(make(lr_scheduler, optimizers()[0])) else [3, 7, 2, 10, 0, 4]
    ours, theirs = optimizers()
    schedulers = make(lr_scheduler, ours), make(torch.optim.lr_scheduler, theirs)
    for epoch in epochs:
        ours.step(), theirs.step()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch's: step(epoch) is deprecated
            schedulers[1].step(epoch)
        schedulers[0].step(epoch)
        np.testing.assert_allclose(schedulers[0].get_last_lr(), schedulers[1].get_last_lr(), rtol=1e-12)
        assert schedulers[0].last_epoch == schedulers[1].last_epoch


def test_resuming_at_last_epoch_matches_torch():
    trails = []
    for lib, opt in zip((lr_scheduler, torch.optim.lr_scheduler), optimizers()):
        for group in opt.param_groups:
            group["initial_lr"] = group["lr"]
        scheduler = lib.CosineAnnealingLR(opt, T_max=10, last_epoch=4)
        trails.append([scheduler.get_last_lr()] + [(scheduler.step(), scheduler.get_last_lr())[1] for _ in range(8)])
    np.testing.assert_allclose(trails[0], trails[1], rtol=1e-12)


def test_errors_match_torchs():
    cases = [
        lambda lib, o: lib.LambdaLR(o, [lambda s: 1.0]),
        lambda lib, o: lib.MultiplicativeLR(o, 0.5),
        lambda lib, o: lib.ConstantLR(o, factor=1.5),
        lambda lib, o: lib.LinearLR(o, start_factor=0.0),
        lambda lib, o: lib.LinearLR(o, end_factor=1.5),
        lambda lib, o: lib.CosineAnnealingWarmRestarts(o, T_0=0),
        lambda lib, o: lib.CosineAnnealingWarmRestarts(o, T_0=2, T_mult=1.5),
        lambda lib, o: lib.CyclicLR(o, 0.1, 1.0, mode="sawtooth"),
        lambda lib, o: lib.CyclicLR(o, [0.1], 1.0),
        lambda lib, o: lib.OneCycleLR(o, 1.0),
        lambda lib, o: lib.OneCycleLR(o, 1.0, total_steps=10, pct_start=1),
        lambda lib, o: lib.OneCycleLR(o, 1.0, total_steps=10, anneal_strategy="exp"),
        lambda lib, o: [scheduler.step() for scheduler in [lib.OneCycleLR(o, 1.0, total_steps=2)] for _ in range(3)],
        lambda lib, o: lib.SequentialLR(o, [], []),
        lambda lib, o: lib.SequentialLR(o, [lib.StepLR(o, 2)], [1]),
        lambda lib, o: lib.ChainedScheduler([lib.StepLR(o, 2), lib.ReduceLROnPlateau(o)]),
        lambda lib, o: lib.ReduceLROnPlateau(o, factor=1.0),
        lambda lib, o: lib.ReduceLROnPlateau(o, mode="up"),
        lambda lib, o: lib.ReduceLROnPlateau(o, min_lr=[0.1]),
        lambda lib, o: lib.StepLR(object(), 2),
        lambda lib, o: lib.StepLR(o, 2, last_epoch=3),
    ]
    for i, case in enumerate(cases):
        kinds = []
        for lib, opt in zip((lr_scheduler, torch.optim.lr_scheduler), optimizers()):
            try:
                case(lib, opt)
            except Exception as error:  # noqa: BLE001  (the kind is what is compared)
                kinds.append(type(error))
            else:
                kinds.append(None)
        assert kinds[0] is kinds[1] is not None, (i, kinds)


def test_the_base_class_and_its_old_name():
    assert lr_scheduler._LRScheduler is lr_scheduler.LRScheduler
    assert all(issubclass(getattr(lr_scheduler, name), lr_scheduler.LRScheduler)
               for name in lr_scheduler.__all__ if name[0].isupper())
    assert math.isclose(lr_scheduler.warmup_cosine(0, 1)(0), 1.0)


@pytest.mark.parametrize("name", [n for n in SCHEDULES if n != "CyclicLR scale_fn"])
def test_a_scheduler_state_goes_through_a_checkpoint(name, tmp_path):
    make = SCHEDULES[name]

    @settings(max_examples=3, deadline=None)
    @given(make=make)
    def check(make):
        opt, _ = optimizers()
        _, scheduler = rates_of(make, lr_scheduler, opt, steps=5)
        ta.save(scheduler.state_dict(), tmp_path / "schedule")
        resumed = make(lr_scheduler, optimizers()[0])
        resumed.load_state_dict(ta.load(tmp_path / "schedule"))
        assert resumed.state_dict() == scheduler.state_dict()

    check()
