"""Optimizers and learning-rate schedules, with PyTorch's names, arguments and update formulas.

Every optimizer of ``torch.optim`` for dense tensors: ``SGD``, ``Adam``, ``AdamW``, ``Adamax``, ``NAdam``,
``RAdam``, ``Adagrad``, ``Adadelta``, ``RMSprop``, ``Rprop``, ``ASGD``, ``Adafactor``, ``Muon`` and the
closure-driven ``LBFGS``. Each updates ``p.data`` in place from ``p.grad``; parameters whose gradient is ``None``
are skipped. ``lr_scheduler`` changes the groups' ``lr`` between steps; ``swa_utils`` averages a model's weights.

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

from . import lr_scheduler, swa_utils
from .adafactor import Adafactor
from .adagrad import Adadelta, Adagrad
from .adam import Adam, AdamW
from .adam_variants import Adamax, NAdam, RAdam
from .asgd import ASGD
from .lbfgs import LBFGS
from .muon import Muon
from .optimizer import Optimizer, swap_in_optimizer_params_and_state
from .rmsprop import RMSprop, Rprop
from .sgd import SGD

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "Adamax", "NAdam", "RAdam", "Adagrad", "Adadelta", "RMSprop", "Rprop",
           "ASGD", "Adafactor", "Muon", "LBFGS", "swap_in_optimizer_params_and_state", "lr_scheduler", "swa_utils"]
