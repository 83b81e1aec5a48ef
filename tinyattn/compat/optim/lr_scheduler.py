"""``torch.optim.lr_scheduler``: the native schedulers (``ta.optim.lr_scheduler``), which follow torch's formulas
step by step, so rates agree to rounding (1e-15).

>>> import tinyattn.compat as torch
>>> opt = torch.optim.SGD([torch.nn.Parameter(torch.ones(1))], lr=1.0)
>>> schedule = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
>>> rates = []
>>> for _ in range(5):
...     rates.append(schedule.get_last_lr()[0])
...     opt.step(); schedule.step()
>>> rates
[1.0, 1.0, 0.5, 0.5, 0.25]
"""

from ...optim.lr_scheduler import (
    ChainedScheduler,
    ConstantLR,
    CosineAnnealingLR,
    CosineAnnealingWarmRestarts,
    CyclicLR,
    ExponentialLR,
    LambdaLR,
    LinearLR,
    LRScheduler,
    MultiplicativeLR,
    MultiStepLR,
    OneCycleLR,
    PolynomialLR,
    ReduceLROnPlateau,
    SequentialLR,
    StepLR,
)
from ..scope import missing

_LRScheduler = LRScheduler

__all__ = ["LRScheduler", "LambdaLR", "MultiplicativeLR", "StepLR", "MultiStepLR", "ConstantLR", "LinearLR",
           "ExponentialLR", "PolynomialLR", "CosineAnnealingLR", "CosineAnnealingWarmRestarts", "CyclicLR",
           "OneCycleLR", "SequentialLR", "ChainedScheduler", "ReduceLROnPlateau"]


def __getattr__(name):
    raise missing(__name__, name)
