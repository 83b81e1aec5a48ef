"""Optimizers and learning-rate schedules, with PyTorch's names, arguments and update formulas.

``SGD``, ``Adam`` and ``AdamW`` update ``p.data`` in place from ``p.grad``; parameters whose
gradient is ``None`` are skipped. ``lr_scheduler`` changes the groups' ``lr`` between steps.

>>> import tinyattn as ta
>>> from tinyattn import optim
>>> w = ta.tensor([3.0], requires_grad=True)
>>> opt = optim.SGD([w], lr=0.25)
>>> for _ in range(3):
...     opt.zero_grad()
...     (w * w).sum().backward()          # d/dw w^2 = 2w: each step halves w
...     opt.step()
>>> w.item()
0.375
"""

from . import lr_scheduler
from .adam import Adam, AdamW
from .optimizer import Optimizer
from .sgd import SGD

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "lr_scheduler"]
