"""Stochastic weight averaging (Izmailov et al., 2018) and exponential moving averages of a model's weights:
``AveragedModel``, its averaging functions, ``update_bn`` and the ``SWALR`` schedule, as ``torch.optim.swa_utils``.

>>> import tinyattn as ta
>>> from tinyattn import nn, optim
>>> from tinyattn.optim.swa_utils import AveragedModel
>>> model = nn.Linear(2, 1)
>>> swa_model = AveragedModel(model)
>>> for value in (1.0, 3.0):
...     model.weight.data[...] = value
...     swa_model.update_parameters(model)
>>> swa_model.module.weight.data.tolist(), swa_model.n_averaged.item()
([[2.0, 2.0]], 2)
"""

import copy
import itertools
import math

from ..engine import Tensor
from ..grad_mode import no_grad
from ..nn.module import Module
from .lr_scheduler import LRScheduler, _per_group

__all__ = ["AveragedModel", "update_bn", "SWALR", "get_ema_multi_avg_fn", "get_swa_multi_avg_fn", "get_ema_avg_fn",
           "get_swa_avg_fn"]


def _check_decay(decay):
    if decay < 0.0 or decay > 1.0:
        raise ValueError(f"Invalid decay value {decay} provided. Please provide a value in [0,1] range.")


def get_ema_multi_avg_fn(decay=0.999):
    """``multi_avg_fn`` for an exponential moving average: each averaged tensor, in place,
    ``ema = decay · ema + (1 - decay) · current``.

    >>> import tinyattn as ta
    >>> from tinyattn.optim.swa_utils import get_ema_multi_avg_fn
    >>> ema, current = [ta.tensor([0.0])], [ta.tensor([1.0])]
    >>> get_ema_multi_avg_fn(0.75)(ema, current, 1)
    >>> ema[0].item()
    0.25
    """
    _check_decay(decay)

    def ema_update(ema_param_list, current_param_list, num_averaged):
        for ema, current in zip(ema_param_list, current_param_list):
            ema._data[...] = ema._data * decay + current._data * (1 - decay)

    return ema_update


def get_swa_multi_avg_fn():
    """``multi_avg_fn`` for the running mean of SWA: each averaged tensor, in place,
    ``avg = avg + (current - avg) / (num_averaged + 1)``.

    >>> import tinyattn as ta
    >>> from tinyattn.optim.swa_utils import get_swa_multi_avg_fn
    >>> avg, current = [ta.tensor([1.0])], [ta.tensor([4.0])]
    >>> get_swa_multi_avg_fn()(avg, current, 2)      # the mean of two values was 1.0; the third is 4.0
    >>> avg[0].item()
    2.0
    """

    def swa_update(averaged_param_list, current_param_list, num_averaged):
        for averaged, current in zip(averaged_param_list, current_param_list):
            averaged._data[...] = averaged._data + (current._data - averaged._data) / (num_averaged + 1)

    return swa_update


def get_ema_avg_fn(decay=0.999):
    """``avg_fn`` for an exponential moving average: ``decay · ema + (1 - decay) · current``, a new tensor.

    >>> import tinyattn as ta
    >>> from tinyattn.optim.swa_utils import get_ema_avg_fn
    >>> get_ema_avg_fn(0.5)(ta.tensor([0.0]), ta.tensor([1.0]), 3).item()
    0.5
    """
    _check_decay(decay)

    def ema_update(ema_param, current_param, num_averaged):
        return decay * ema_param + (1 - decay) * current_param

    return ema_update


def get_swa_avg_fn():
    """``avg_fn`` for the running mean of SWA: ``avg + (current - avg) / (num_averaged + 1)``, a new tensor.

    >>> import tinyattn as ta
    >>> from tinyattn.optim.swa_utils import get_swa_avg_fn
    >>> get_swa_avg_fn()(ta.tensor([1.0]), ta.tensor([4.0]), 2).item()
    2.0
    """

    def swa_update(averaged_param, current_param, num_averaged):
        return averaged_param + (current_param - averaged_param) / (num_averaged + 1)

    return swa_update


class AveragedModel(Module):
    """``AveragedModel(model, device=None, avg_fn=None, multi_avg_fn=None, use_buffers=False)``: a copy of
    ``model`` (``self.module``) whose parameters ``update_parameters(model)`` averages with ``model``'s.

    The first update copies ``model``'s parameters; each later one applies ``multi_avg_fn(averaged, current,
    n_averaged)`` (in place, on the lists of tensors) or ``avg_fn(averaged, current, n_averaged)`` (per tensor,
    returning the new value); without either, the running mean (SWA). ``n_averaged`` is a buffer counting the
    updates (the functions receive it as a Python int). With ``use_buffers=True`` the buffers are averaged with
    the parameters; otherwise they are copied from ``model`` at each update. ``forward`` calls ``self.module``.

    >>> import tinyattn as ta
    >>> from tinyattn import nn
    >>> from tinyattn.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn
    >>> model = nn.Linear(1, 1, bias=False)
    >>> ema = AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(0.5))
    >>> for value in (4.0, 2.0, 0.0):
    ...     model.weight.data[...] = value
    ...     ema.update_parameters(model)
    >>> ema.module.weight.item()                  # 4, then (4 + 2) / 2, then (3 + 0) / 2
    1.5
    """

    def __init__(self, model, device=None, avg_fn=None, multi_avg_fn=None, use_buffers=False):
        super().__init__()
        if avg_fn is not None and multi_avg_fn is not None:
            raise AssertionError("Only one of avg_fn and multi_avg_fn should be provided")
        self.module = copy.deepcopy(model)
        if device is not None:
            self.module = self.module.to(device)
        self.register_buffer("n_averaged", Tensor(0, device=device))
        self.avg_fn, self.multi_avg_fn, self.use_buffers = avg_fn, multi_avg_fn, use_buffers

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)

    def update_parameters(self, model):
        """Average ``model``'s parameters (and buffers, with ``use_buffers``) into this copy's."""
        if self.use_buffers:
            averaged = list(itertools.chain(self.module.parameters(), self.module.buffers()))
            current = list(itertools.chain(model.parameters(), model.buffers()))
        else:
            averaged, current = list(self.module.parameters()), list(model.parameters())
        current = [p.detach().to(a.device) for a, p in zip(averaged, current)]
        n_averaged = int(self.n_averaged.item())
        with no_grad():
            if n_averaged == 0:
                for a, p in zip(averaged, current):
                    a._data[...] = p._data
            elif self.avg_fn is not None:
                for a, p in zip(averaged, current):
                    a._data[...] = self.avg_fn(a.detach(), p, n_averaged)._data
            else:
                (self.multi_avg_fn or get_swa_multi_avg_fn())(averaged, current, n_averaged)
            if not self.use_buffers:
                for b_averaged, b_model in zip(self.module.buffers(), model.buffers()):
                    b_averaged._data[...] = b_model.detach().to(b_averaged.device)._data
        self.n_averaged._data += 1


def update_bn(loader, model, device=None):
    """Recompute the running statistics of ``model``'s batch-norm layers (the submodules with
    ``reset_running_stats()`` and ``momentum``) from one pass over ``loader``, as a plain average (``momentum``
    ``None`` during the pass). Each batch is an input, or a list or tuple whose first item is the input.

    >>> import tinyattn as ta
    >>> from tinyattn import nn
    >>> from tinyattn.optim.swa_utils import update_bn
    >>> update_bn([ta.ones(2, 3)], nn.Linear(3, 1))    # no batch norm: nothing to do
    """
    momenta = {}
    for module in model.modules():
        if callable(getattr(module, "reset_running_stats", None)) and hasattr(module, "momentum"):
            module.reset_running_stats()
            momenta[module] = module.momentum
    if not momenta:
        return
    was_training = model.training
    model.train()
    for module in momenta:
        module.momentum = None
    with no_grad():
        for input in loader:
            if isinstance(input, (list, tuple)):
                input = input[0]
            if device is not None:
                input = input.to(device)
            model(input)
    for module, momentum in momenta.items():
        module.momentum = momentum
    model.train(was_training)


class SWALR(LRScheduler):
    """``SWALR(optimizer, swa_lr, anneal_epochs=10, anneal_strategy="cos", last_epoch=-1)``: anneals each group's
    rate to ``swa_lr`` over ``anneal_epochs`` steps, then keeps it there (SWA's constant rate). At step ``s``, with
    ``t = min(1, s / anneal_epochs)`` and ``α(t)`` = ``(1 - cos(π t)) / 2`` (``"cos"``) or ``t`` (``"linear"``),
    ``lr = swa_lr · α(t) + lr_0 · (1 - α(t))``, ``lr_0`` the rate before annealing (recovered from the
    group's current rate, so that another schedule may have set it).

    >>> import tinyattn as ta
    >>> from tinyattn import optim
    >>> from tinyattn.optim.swa_utils import SWALR
    >>> opt = optim.SGD([ta.zeros(1, requires_grad=True)], lr=1.0)
    >>> schedule = SWALR(opt, swa_lr=0.1, anneal_epochs=2, anneal_strategy="linear")
    >>> rates = []
    >>> for _ in range(4):
    ...     rates.append(round(schedule.get_last_lr()[0], 4))
    ...     schedule.step()
    >>> rates
    [1.0, 0.55, 0.1, 0.1]
    """

    state_names = ("anneal_epochs", "anneal_strategy", "_step_count")

    def __init__(self, optimizer, swa_lr, anneal_epochs=10, anneal_strategy="cos", last_epoch=-1):
        for lr, group in zip(_per_group("swa_lr", optimizer, swa_lr), optimizer.param_groups):
            group["swa_lr"] = lr
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(f"anneal_strategy must be one of 'cos' or 'linear', instead got {anneal_strategy}")
        if not isinstance(anneal_epochs, int) or anneal_epochs < 0:
            raise ValueError(f"anneal_epochs must be equal or greater than 0, got {anneal_epochs}")
        self.anneal_strategy, self.anneal_epochs = anneal_strategy, anneal_epochs
        super().__init__(optimizer, last_epoch)

    def anneal_func(self, t):
        """``α(t)``: how far along the annealing, from 0 to 1."""
        return (1 - math.cos(math.pi * t)) / 2 if self.anneal_strategy == "cos" else t

    def get_lr(self):
        step = self._step_count - 1
        if self.anneal_epochs == 0:
            step = max(1, step)
        prev_alpha = self.anneal_func(max(0, min(1, (step - 1) / max(1, self.anneal_epochs))))
        prev_lrs = [group["swa_lr"] if prev_alpha == 1 else  # the rate before annealing, from the current one
                    (group["lr"] - prev_alpha * group["swa_lr"]) / (1 - prev_alpha)
                    for group in self.optimizer.param_groups]
        alpha = self.anneal_func(max(0, min(1, step / max(1, self.anneal_epochs))))
        return [group["swa_lr"] * alpha + lr * (1 - alpha) for group, lr in zip(self.optimizer.param_groups, prev_lrs)]
