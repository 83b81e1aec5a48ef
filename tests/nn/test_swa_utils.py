"""``ta.optim.swa_utils`` against ``torch.optim.swa_utils``: the same averaged weights for the same sequence of
models (SWA's running mean, EMA through ``avg_fn`` and ``multi_avg_fn``), the same ``SWALR`` rates, and
``update_bn``'s protocol on the batch-norm layers."""

import hypothesis.strategies as st
import numpy as np
import pytest
import torch
import torch.optim.swa_utils as torch_swa
from hypothesis import given, settings

import tinyattn as ta
from tinyattn import nn, optim
from tinyattn.optim import swa_utils

SETTINGS = settings(max_examples=25, deadline=None)


@SETTINGS
@given(kind=st.sampled_from(["swa", "ema avg_fn", "ema multi_avg_fn", "custom avg_fn"]), decay=st.floats(0.0, 1.0),
       updates=st.integers(1, 8), seed=st.integers(0, 1000))
def test_averaged_weights_match_torch(kind, decay, updates, seed):
    def options(lib):
        return {"swa": {}, "ema avg_fn": dict(avg_fn=lib.get_ema_avg_fn(decay)),
                "ema multi_avg_fn": dict(multi_avg_fn=lib.get_ema_multi_avg_fn(decay)),
                "custom avg_fn": dict(avg_fn=lambda avg, current, n: avg * 0.5 + current * 0.25 + n)}[kind]

    rng = np.random.default_rng(seed)
    model, reference = nn.Linear(3, 2).double(), torch.nn.Linear(3, 2).double()
    ours, theirs = swa_utils.AveragedModel(model, **options(swa_utils)), torch_swa.AveragedModel(reference,
                                                                                                  **options(torch_swa))
    for _ in range(updates):
        weight, bias = rng.standard_normal((2, 3)), rng.standard_normal(2)
        model.weight.data[...], model.bias.data[...] = weight, bias
        with torch.no_grad():
            reference.weight.copy_(torch.tensor(weight))
            reference.bias.copy_(torch.tensor(bias))
        ours.update_parameters(model)
        theirs.update_parameters(reference)
    np.testing.assert_allclose(ours.module.weight.numpy(), theirs.module.weight.detach().numpy(), rtol=1e-12)
    np.testing.assert_allclose(ours.module.bias.numpy(), theirs.module.bias.detach().numpy(), rtol=1e-12)
    assert ours.n_averaged.item() == theirs.n_averaged.item() == updates
    x = rng.standard_normal((4, 3))
    np.testing.assert_allclose(ours(ta.tensor(x)).numpy(), theirs(torch.tensor(x)).detach().numpy(), rtol=1e-12)
    assert model.weight is not ours.module.weight  # a copy, not the model itself


class _Counted(nn.Module):
    """A layer with a parameter and a buffer, and a batch-norm-like protocol (``reset_running_stats``,
    ``momentum``) that records what ``update_bn`` does to it."""

    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(ta.ones(2))
        self.register_buffer("running_mean", ta.zeros(2))
        self.momentum, self.seen = 0.1, []

    def reset_running_stats(self):
        self.running_mean.data[...] = 0

    def forward(self, x):
        self.seen.append((self.momentum, self.training))
        self.running_mean.data[...] += x.numpy().mean(0)
        return x * self.weight


def test_buffers_are_copied_or_averaged_and_update_bn_recomputes_statistics():
    model = _Counted()
    averaged, with_buffers = swa_utils.AveragedModel(model), swa_utils.AveragedModel(model, use_buffers=True)
    for value in (1.0, 3.0):
        model.weight.data[...] = value
        model.running_mean.data[...] = value * 10
        averaged.update_parameters(model)
        with_buffers.update_parameters(model)
    assert averaged.module.weight.tolist() == [2.0, 2.0] and averaged.module.running_mean.tolist() == [30.0, 30.0]
    assert with_buffers.module.running_mean.tolist() == [20.0, 20.0]
    model.eval()
    swa_utils.update_bn([(ta.ones(3, 2), "label"), (ta.ones(3, 2) * 3, "label")], model)
    assert model.seen == [(None, True), (None, True)] and model.momentum == 0.1 and not model.training
    assert model.running_mean.tolist() == [4.0, 4.0]  # reset, then the two batches


@SETTINGS
@given(swa_lr=st.one_of(st.floats(1e-3, 1.0), st.tuples(st.floats(1e-3, 1.0), st.floats(1e-3, 1.0)).map(list)),
       anneal_epochs=st.integers(0, 12), anneal_strategy=st.sampled_from(["cos", "linear"]))
def test_swalr_rates_match_torch(swa_lr, anneal_epochs, anneal_strategy):
    trails = []
    for lib, schedule_lib, tensor in ((optim, swa_utils, ta.zeros), (torch.optim, torch_swa, torch.zeros)):
        opt = lib.SGD([{"params": [tensor(1, requires_grad=True)]}, {"params": [tensor(1, requires_grad=True)],
                                                                       "lr": 0.3}], lr=0.8)
        schedule = schedule_lib.SWALR(opt, swa_lr, anneal_epochs=anneal_epochs, anneal_strategy=anneal_strategy)
        trail = []
        for _ in range(20):
            trail.append(schedule.get_last_lr())
            opt.step()
            schedule.step()
        trails.append(trail)
    np.testing.assert_allclose(trails[0], trails[1], rtol=1e-12)


def test_swalr_resumes_from_its_state_dict_and_refuses_what_torch_refuses():
    def make():
        opt = optim.SGD([ta.zeros(1, requires_grad=True)], lr=1.0)
        return opt, swa_utils.SWALR(opt, 0.05, anneal_epochs=6)

    opt, schedule = make()
    for _ in range(3):
        schedule.step()
    resumed_opt, resumed = make()
    resumed_opt.load_state_dict(opt.state_dict())
    resumed.load_state_dict(schedule.state_dict())
    for _ in range(5):
        schedule.step(), resumed.step()
        assert resumed.get_last_lr() == schedule.get_last_lr()
    for lib, opt in ((swa_utils, make()[0]), (torch_swa, torch.optim.SGD([torch.zeros(1, requires_grad=True)], 1.0))):
        with pytest.raises(ValueError):
            lib.SWALR(opt, 0.1, anneal_strategy="exp")
        with pytest.raises(ValueError):
            lib.SWALR(opt, 0.1, anneal_epochs=-1)
        with pytest.raises(ValueError):
            lib.get_ema_avg_fn(1.5)
