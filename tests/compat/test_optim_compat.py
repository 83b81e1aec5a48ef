"""``torch.optim`` and ``torch.optim.lr_scheduler`` on compat: torch's signatures for every optimizer, the native
updates reached through them with compat tensors, the options compat does not implement refused, and every
scheduler class present."""

import inspect

import numpy as np
import pytest
import torch

import tinyattn.compat as compat
from tinyattn.compat.refusals import is_refused

NAMES = ["SGD", "Adam", "AdamW", "Adamax", "NAdam", "RAdam", "Adagrad", "Adadelta", "RMSprop", "Rprop", "ASGD",
         "Adafactor", "Muon", "LBFGS"]


def _parameters(signature):
    return [(p.name, p.default, p.kind) for p in signature.parameters.values()]


@pytest.mark.parametrize("name", NAMES[3:])
def test_signatures_are_torchs(name):
    ours = inspect.signature(getattr(compat.optim, name))
    theirs = inspect.signature(getattr(torch.optim, name))
    assert _parameters(ours) == _parameters(theirs)


@pytest.mark.parametrize("name", NAMES[3:-2])
def test_a_training_loop_through_compat_matches_torch(name):
    rng = np.random.default_rng(0)
    weight, inputs, targets = rng.standard_normal((3, 4)), rng.standard_normal((8, 4)), rng.standard_normal((8, 3))
    results = []
    for lib in (torch, compat):
        w = lib.nn.Parameter(lib.tensor(weight.copy()))
        x, y = lib.tensor(inputs), lib.tensor(targets)
        opt = getattr(lib.optim, name)([w], lr=0.01, maximize=False)
        for _ in range(5):
            opt.zero_grad()
            loss = ((x @ w.T - y) ** 2).mean()
            loss.backward()
            opt.step()
        results.append(w.detach().numpy())
    np.testing.assert_allclose(results[1], results[0], rtol=1e-6, atol=1e-7)  # float32 on both sides


def test_lbfgs_through_compat():
    w = compat.nn.Parameter(compat.zeros(2, dtype=compat.float64))
    opt = compat.optim.LBFGS([w], line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        loss = ((w - compat.tensor([1.0, -2.0], dtype=compat.float64)) ** 2).sum()
        loss.backward()
        return loss

    opt.step(closure)
    np.testing.assert_allclose(w.detach().numpy(), [1.0, -2.0], atol=1e-6)


@pytest.mark.parametrize("make", [
    lambda p: compat.optim.Adagrad(p, fused=True),
    lambda p: compat.optim.RMSprop(p, capturable=True),
    lambda p: compat.optim.NAdam(p, differentiable=True),
])
def test_what_compat_does_not_implement_is_refused(make):
    with pytest.raises((RuntimeError, NotImplementedError)):
        make([compat.nn.Parameter(compat.ones(1))])


def test_sparse_adam_is_refused_and_schedulers_are_all_there():
    assert is_refused(compat.optim.SparseAdam)
    with pytest.raises(NotImplementedError, match="SparseAdam"):
        compat.optim.SparseAdam([compat.nn.Parameter(compat.ones(1))])
    schedulers = [n for n in dir(torch.optim.lr_scheduler) if n[0].isupper() and n.endswith(("LR", "Scheduler",
                                                                                               "Plateau"))]
    missing = [n for n in schedulers if not hasattr(compat.optim.lr_scheduler, n)]
    assert not missing and compat.optim.lr_scheduler._LRScheduler is compat.optim.lr_scheduler.LRScheduler


def test_swa_utils_average_compat_models_as_torch():
    rng = np.random.default_rng(2)
    weights = [rng.standard_normal((1, 2)).astype(np.float32) for _ in range(3)]
    results = []
    for lib in (torch, compat):
        model = lib.nn.Linear(2, 1, bias=False)
        averaged = lib.optim.swa_utils.AveragedModel(model, multi_avg_fn=lib.optim.swa_utils.get_ema_multi_avg_fn(0.9))
        for weight in weights:
            with lib.no_grad():
                model.weight.copy_(lib.tensor(weight))
            averaged.update_parameters(model)
        results.append(averaged(lib.ones(1, 2)).detach().numpy())
    np.testing.assert_allclose(results[1], results[0], rtol=1e-6)
