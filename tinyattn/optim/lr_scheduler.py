"""Learning-rate schedules: every scheduler of ``torch.optim.lr_scheduler``, and two factories for ``LambdaLR``.

A scheduler changes each parameter group's ``lr`` between optimizer steps. ``last_epoch`` counts its ``step()``
calls (0 at construction, which already applies the rate of step 0). The usual loop calls ``optimizer.step()``
then ``scheduler.step()``, so the rate set at ``last_epoch = s`` is the one the ``(s + 1)``-th update uses.
Every scheduler computes its rates in the order torch's does (most of them from the group's current ``lr``,
step by step, as torch's "chainable" form does, so that schedulers can be stacked with ``ChainedScheduler``);
``step(epoch)`` jumps to ``epoch`` through the closed form where there is one, as torch's does.

The two factories count the update, ``n = step + 1``, so the very first update already moves the weights (no
update is spent at a rate of 0).

>>> import tinyattn as ta
>>> from tinyattn import optim
>>> w = ta.zeros(3, requires_grad=True)
>>> opt = optim.SGD([w], lr=1.0)
>>> schedule = optim.lr_scheduler.LambdaLR(opt, optim.lr_scheduler.warmup_inverse_sqrt(4))
>>> rates = []
>>> for _ in range(6):
...     rates.append(round(schedule.get_last_lr()[0], 4))
...     schedule.step()                    # after optimizer.step() in a real loop
>>> rates
[0.25, 0.5, 0.75, 1.0, 0.8944, 0.8165]
"""

import bisect
import collections
import math
import numbers

from .optimizer import Optimizer

__all__ = ["LRScheduler", "LambdaLR", "MultiplicativeLR", "StepLR", "MultiStepLR", "ConstantLR", "LinearLR",
           "ExponentialLR", "PolynomialLR", "CosineAnnealingLR", "CosineAnnealingWarmRestarts", "CyclicLR",
           "OneCycleLR", "SequentialLR", "ChainedScheduler", "ReduceLROnPlateau", "warmup_inverse_sqrt",
           "warmup_cosine"]


def _rates(optimizer):
    return [group["lr"] for group in optimizer.param_groups]


def _per_group(name, optimizer, value):
    """``value`` once per parameter group: a list or tuple of that many, or one value for all."""
    groups = len(optimizer.param_groups)
    if isinstance(value, (list, tuple)):
        if len(value) != groups:
            raise ValueError(f"{name} must have the same length as optimizer.param_groups ({groups}), "
                             f"got {len(value)} values")
        return list(value)
    return [value] * groups


def _is_real(value):
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


class LRScheduler:
    """``LRScheduler(optimizer, last_epoch=-1)``: the base class. A subclass gives ``get_lr()``, the rates for the
    step ``last_epoch`` has just reached (from the groups' current ``lr`` or from ``base_lrs``), and may give
    ``_get_closed_form_lr()``, the rates of any step directly, which ``step(epoch)`` uses.

    At construction each group keeps its ``lr`` as ``"initial_lr"`` (``base_lrs``) and the rate of step 0 is
    applied at once. Resuming (``last_epoch >= 0``) needs ``"initial_lr"`` in every group, as a loaded optimizer
    state dict provides. ``state_dict()`` holds ``base_lrs``, ``last_epoch``, ``_last_lr`` and the names in the
    class's ``state_names`` (its options and counters); the functions a scheduler was given are code, not state,
    and are not in it (as in torch).

    >>> import tinyattn as ta
    >>> from tinyattn import optim
    >>> class Halving(optim.lr_scheduler.LRScheduler):
    ...     def get_lr(self):
    ...         return [base_lr * 0.5 ** self.last_epoch for base_lr in self.base_lrs]
    >>> opt = optim.SGD([ta.zeros(1, requires_grad=True)], lr=1.0)
    >>> schedule = Halving(opt)
    >>> schedule.step(); schedule.step()
    >>> schedule.get_last_lr(), schedule.last_epoch
    ([0.25], 2)
    """

    state_names = ()

    def __init__(self, optimizer, last_epoch=-1):
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")
        self.optimizer = optimizer
        if last_epoch == -1:
            for group in optimizer.param_groups:
                group.setdefault("initial_lr", group["lr"])
        else:
            for i, group in enumerate(optimizer.param_groups):
                if "initial_lr" not in group:
                    raise KeyError(
                        f"param 'initial_lr' is not specified in param_groups[{i}] when resuming at "
                        f"last_epoch={last_epoch}; load the optimizer's state dict first"
                    )
        self.base_lrs = [group["initial_lr"] for group in optimizer.param_groups]
        self.last_epoch = last_epoch
        self._initial_step()

    def _initial_step(self):
        """Step 0: the rates of the schedule's start (``_is_initial`` tells ``get_lr`` that it is this step)."""
        self._step_count, self._is_initial = 0, True
        try:
            self.step()
        finally:
            self._is_initial = False

    def get_lr(self):
        """The rates for the step ``last_epoch`` has just reached, one per group."""
        raise NotImplementedError(f"{type(self).__name__} has no get_lr; define it in the subclass")

    def step(self, epoch=None):
        """Advance ``last_epoch`` by one (or set it to ``epoch``, through the closed form where the scheduler has
        one) and write the new rates into the optimizer's groups."""
        self._step_count += 1
        self._update_lr(epoch)

    def _update_lr(self, epoch=None):
        if epoch is None:
            self.last_epoch += 1
            values = self.get_lr()
        else:
            self.last_epoch = epoch
            closed_form = getattr(self, "_get_closed_form_lr", None)
            values = closed_form() if closed_form is not None else self.get_lr()
        for group, lr in zip(self.optimizer.param_groups, values):
            group["lr"] = lr
        self._last_lr = _rates(self.optimizer)

    def get_last_lr(self):
        """The rates the last ``step()`` (or the construction) set, one per group."""
        return list(self._last_lr)

    def state_dict(self):
        """``{"base_lrs": [...], "last_epoch": int, "_last_lr": [...], **{name: value for name in state_names}}``."""
        state = {"base_lrs": list(self.base_lrs), "last_epoch": self.last_epoch, "_last_lr": list(self._last_lr)}
        state.update({name: _copied(getattr(self, name)) for name in self.state_names})
        return state

    def load_state_dict(self, state_dict):
        """Take the step count, rates and counters from ``state_dict``; the optimizer's ``lr`` comes with the
        optimizer's own state dict. A state that does not fit (other keys, another number of groups, values that
        are not numbers) raises and changes nothing."""
        name = type(self).__name__
        expected = {"base_lrs", "last_epoch", "_last_lr", *self.state_names}
        if not isinstance(state_dict, dict) or set(state_dict) != expected:
            got = sorted(state_dict) if isinstance(state_dict, dict) else type(state_dict).__name__
            raise KeyError(f"{name} state_dict needs keys {sorted(expected)}, got {got}")
        groups = len(self.optimizer.param_groups)
        for key in ("base_lrs", "_last_lr"):
            rates = state_dict[key]
            if not (isinstance(rates, (list, tuple)) and len(rates) == groups and all(_is_real(r) for r in rates)):
                raise ValueError(f"{name} state_dict's {key!r} must be a list of {groups} numbers, got {rates!r}")
        last_epoch = state_dict["last_epoch"]
        if isinstance(last_epoch, bool) or not isinstance(last_epoch, numbers.Integral):
            raise ValueError(f"{name} state_dict's 'last_epoch' must be an integer, got {last_epoch!r}")
        self.base_lrs = list(state_dict["base_lrs"])
        self.last_epoch = int(last_epoch)
        self._last_lr = list(state_dict["_last_lr"])
        for key in self.state_names:
            setattr(self, key, _copied(state_dict[key]))


_LRScheduler = LRScheduler


def _copied(value):
    if isinstance(value, collections.Counter):
        return collections.Counter(value)
    return list(value) if isinstance(value, list) else value


class LambdaLR(LRScheduler):
    """``LambdaLR(optimizer, lr_lambda, last_epoch=-1)``: ``lr = initial_lr * lr_lambda(step)``, as in PyTorch.

    ``lr_lambda`` is a function of the step count, or a list with one function per
    parameter group. At construction each group remembers its ``lr`` as ``"initial_lr"``
    and the factor ``lr_lambda(0)`` is applied at once. Resuming (``last_epoch >= 0``)
    needs ``"initial_lr"`` in every group, as a loaded optimizer state dict provides.

    >>> import tinyattn as ta
    >>> from tinyattn import optim
    >>> opt = optim.SGD([ta.tensor([1.0], requires_grad=True)], lr=1.0)
    >>> schedule = optim.lr_scheduler.LambdaLR(opt, lambda step: 0.5 ** step)
    >>> for _ in range(3):
    ...     opt.step()
    ...     schedule.step()
    >>> schedule.get_last_lr()
    [0.125]
    """

    def __init__(self, optimizer, lr_lambda, last_epoch=-1):
        self.lr_lambdas = _lambdas(optimizer, lr_lambda)
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        return [base_lr * lr_lambda(self.last_epoch) for base_lr, lr_lambda in zip(self.base_lrs, self.lr_lambdas)]


def _lambdas(optimizer, lr_lambda):
    groups = len(optimizer.param_groups)
    if not isinstance(lr_lambda, (list, tuple)):
        return [lr_lambda] * groups
    if len(lr_lambda) != groups:
        raise ValueError(f"Expected {groups} lr_lambdas (one per parameter group), but got {len(lr_lambda)}")
    return list(lr_lambda)


class MultiplicativeLR(LRScheduler):
    """``MultiplicativeLR(optimizer, lr_lambda, last_epoch=-1)``: each step multiplies the rate by
    ``lr_lambda(step)``: ``lr_t = lr_{t-1} · lr_lambda(t)`` (step 0 keeps the initial rate).

    >>> import tinyattn as ta
    >>> from tinyattn import optim
    >>> opt = optim.SGD([ta.zeros(1, requires_grad=True)], lr=1.0)
    >>> schedule = optim.lr_scheduler.MultiplicativeLR(opt, lambda step: 0.5)
    >>> for _ in range(3):
    ...     schedule.step()
    >>> schedule.get_last_lr()
    [0.125]
    """

    def __init__(self, optimizer, lr_lambda, last_epoch=-1):
        self.lr_lambdas = _lambdas(optimizer, lr_lambda)
        for function in self.lr_lambdas:
            if not callable(function):
                raise TypeError(f"lr_lambda should be a function, but got {type(function).__name__}")
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self._is_initial:
            return _rates(self.optimizer)
        return [group["lr"] * lr_lambda(self.last_epoch)
                for lr_lambda, group in zip(self.lr_lambdas, self.optimizer.param_groups)]


class StepLR(LRScheduler):
    """``StepLR(optimizer, step_size, gamma=0.1, last_epoch=-1)``: ``lr = initial_lr · gamma^⌊step / step_size⌋``.

    >>> import tinyattn as ta
    >>> from tinyattn import optim
    >>> opt = optim.SGD([ta.zeros(1, requires_grad=True)], lr=1.0)
    >>> schedule = optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    >>> rates = []
    >>> for _ in range(5):
    ...     rates.append(schedule.get_last_lr()[0])
    ...     schedule.step()
    >>> rates
    [1.0, 1.0, 0.5, 0.5, 0.25]
    """

    state_names = ("step_size", "gamma")

    def __init__(self, optimizer, step_size, gamma=0.1, last_epoch=-1):
        self.step_size, self.gamma = step_size, gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self.last_epoch == 0 or self.last_epoch % self.step_size != 0:
            return _rates(self.optimizer)
        return [group["lr"] * self.gamma for group in self.optimizer.param_groups]

    def _get_closed_form_lr(self):
        return [base_lr * self.gamma ** (self.last_epoch // self.step_size) for base_lr in self.base_lrs]


class MultiStepLR(LRScheduler):
    """``MultiStepLR(optimizer, milestones, gamma=0.1, last_epoch=-1)``: ``lr = initial_lr · gamma^k``, ``k`` the
    number of milestones reached (a milestone listed twice counts twice).

    >>> import tinyattn as ta
    >>> from tinyattn import optim
    >>> opt = optim.SGD([ta.zeros(1, requires_grad=True)], lr=1.0)
    >>> schedule = optim.lr_scheduler.MultiStepLR(opt, milestones=[1, 3], gamma=0.1)
    >>> rates = []
    >>> for _ in range(4):
    ...     rates.append(round(schedule.get_last_lr()[0], 6))
    ...     schedule.step()
    >>> rates
    [1.0, 0.1, 0.1, 0.01]
    """

    state_names = ("milestones", "gamma")

    def __init__(self, optimizer, milestones, gamma=0.1, last_epoch=-1):
        self.milestones, self.gamma = collections.Counter(milestones), gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self.last_epoch not in self.milestones:
            return _rates(self.optimizer)
        return [group["lr"] * self.gamma ** self.milestones[self.last_epoch] for group in self.optimizer.param_groups]

    def _get_closed_form_lr(self):
        milestones = sorted(self.milestones.elements())
        return [base_lr * self.gamma ** bisect.bisect_right(milestones, self.last_epoch) for base_lr in self.base_lrs]


class ConstantLR(LRScheduler):
    """``ConstantLR(optimizer, factor=1/3, total_iters=5, last_epoch=-1)``: ``lr = initial_lr · factor`` for the
    first ``total_iters`` steps, then ``initial_lr``.

    >>> import tinyattn as ta
    >>> from tinyattn import optim
    >>> opt = optim.SGD([ta.zeros(1, requires_grad=True)], lr=1.0)
    >>> schedule = optim.lr_scheduler.ConstantLR(opt, factor=0.5, total_iters=2)
    >>> rates = []
    >>> for _ in range(4):
    ...     rates.append(schedule.get_last_lr()[0])
    ...     schedule.step()
    >>> rates
    [0.5, 0.5, 1.0, 1.0]
    """

    state_names = ("factor", "total_iters")

    def __init__(self, optimizer, factor=1.0 / 3, total_iters=5, last_epoch=-1):
        if factor > 1.0 or factor < 0:
            raise ValueError(f"Constant multiplicative factor expected to be between 0 and 1, got {factor}")
        self.factor, self.total_iters = factor, total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self.last_epoch == 0:
            return [group["lr"] * self.factor for group in self.optimizer.param_groups]
        if self.last_epoch != self.total_iters:
            return _rates(self.optimizer)
        return [group["lr"] * (1.0 / self.factor) for group in self.optimizer.param_groups]

    def _get_closed_form_lr(self):
        return [base_lr * (self.factor + (self.last_epoch >= self.total_iters) * (1 - self.factor))
                for base_lr in self.base_lrs]


class LinearLR(LRScheduler):
    """``LinearLR(optimizer, start_factor=1/3, end_factor=1.0, total_iters=5, last_epoch=-1)``: the factor of
    ``initial_lr`` moves linearly from ``start_factor`` to ``end_factor`` over ``total_iters`` steps, then stays:
    ``lr = initial_lr · (start + (end - start) · min(step, total_iters) / total_iters)``.

    >>> import tinyattn as ta
    >>> from tinyattn import optim
    >>> opt = optim.SGD([ta.zeros(1, requires_grad=True)], lr=1.0)
    >>> schedule = optim.lr_scheduler.LinearLR(opt, start_factor=0.25, total_iters=3)
    >>> rates = []
    >>> for _ in range(5):
    ...     rates.append(round(schedule.get_last_lr()[0], 6))
    ...     schedule.step()
    >>> rates
    [0.25, 0.5, 0.75, 1.0, 1.0]
    """

    state_names = ("start_factor", "end_factor", "total_iters")

    def __init__(self, optimizer, start_factor=1.0 / 3, end_factor=1.0, total_iters=5, last_epoch=-1):
        if start_factor > 1.0 or start_factor <= 0:
            raise ValueError("Starting multiplicative factor expected to be greater than 0 and less or equal to 1, "
                             f"got start_factor={start_factor}")
        if end_factor > 1.0 or end_factor < 0:
            raise ValueError(f"Ending multiplicative factor expected to be between 0 and 1, got {end_factor}")
        self.start_factor, self.end_factor, self.total_iters = start_factor, end_factor, total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self.last_epoch == 0:
            return [group["lr"] * self.start_factor for group in self.optimizer.param_groups]
        if self._is_initial or self.last_epoch > self.total_iters:
            return _rates(self.optimizer)
        change = self.end_factor - self.start_factor
        ratio = 1.0 + change / (self.total_iters * self.start_factor + (self.last_epoch - 1) * change)
        return [group["lr"] * ratio for group in self.optimizer.param_groups]

    def _get_closed_form_lr(self):
        return [base_lr * (self.start_factor + (self.end_factor - self.start_factor)
                           * min(self.total_iters, self.last_epoch) / self.total_iters) for base_lr in self.base_lrs]


class ExponentialLR(LRScheduler):
    """``ExponentialLR(optimizer, gamma, last_epoch=-1)``: ``lr = initial_lr · gamma^step``.

    >>> import tinyattn as ta
    >>> from tinyattn import optim
    >>> opt = optim.SGD([ta.zeros(1, requires_grad=True)], lr=1.0)
    >>> schedule = optim.lr_scheduler.ExponentialLR(opt, gamma=0.5)
    >>> schedule.step(); schedule.step()
    >>> schedule.get_last_lr()
    [0.25]
    """

    state_names = ("gamma",)

    def __init__(self, optimizer, gamma, last_epoch=-1):
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self._is_initial:
            return _rates(self.optimizer)
        return [group["lr"] * self.gamma for group in self.optimizer.param_groups]

    def _get_closed_form_lr(self):
        return [base_lr * self.gamma ** self.last_epoch for base_lr in self.base_lrs]


class PolynomialLR(LRScheduler):
    """``PolynomialLR(optimizer, total_iters=5, power=1.0, last_epoch=-1)``:
    ``lr = initial_lr · (1 - min(step, total_iters) / total_iters)^power``, 0 from ``total_iters`` on.

    >>> import tinyattn as ta
    >>> from tinyattn import optim
    >>> opt = optim.SGD([ta.zeros(1, requires_grad=True)], lr=1.0)
    >>> schedule = optim.lr_scheduler.PolynomialLR(opt, total_iters=4, power=2.0)
    >>> rates = []
    >>> for _ in range(5):
    ...     rates.append(round(schedule.get_last_lr()[0], 6))
    ...     schedule.step()
    >>> rates
    [1.0, 0.5625, 0.25, 0.0625, 0.0]
    """

    state_names = ("total_iters", "power")

    def __init__(self, optimizer, total_iters=5, power=1.0, last_epoch=-1):
        self.total_iters, self.power = total_iters, power
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self._is_initial or self.last_epoch > self.total_iters:
            return _rates(self.optimizer)
        decay = ((1.0 - self.last_epoch / self.total_iters) / (1.0 - (self.last_epoch - 1) / self.total_iters)) \
            ** self.power
        return [group["lr"] * decay for group in self.optimizer.param_groups]

    def _get_closed_form_lr(self):
        return [base_lr * (1.0 - min(self.total_iters, self.last_epoch) / self.total_iters) ** self.power
                for base_lr in self.base_lrs]


class CosineAnnealingLR(LRScheduler):
    """``CosineAnnealingLR(optimizer, T_max, eta_min=0.0, last_epoch=-1)``: SGDR without restarts,
    ``lr = eta_min + (initial_lr - eta_min) · (1 + cos(π · step / T_max)) / 2``, computed step by step from the
    previous rate as torch does (past ``T_max`` the rate rises again along the cosine).

    >>> import tinyattn as ta
    >>> from tinyattn import optim
    >>> opt = optim.SGD([ta.zeros(1, requires_grad=True)], lr=1.0)
    >>> schedule = optim.lr_scheduler.CosineAnnealingLR(opt, T_max=4)
    >>> rates = []
    >>> for _ in range(5):
    ...     rates.append(round(schedule.get_last_lr()[0], 4))
    ...     schedule.step()
    >>> rates
    [1.0, 0.8536, 0.5, 0.1464, 0.0]
    """

    state_names = ("T_max", "eta_min")

    def __init__(self, optimizer, T_max, eta_min=0.0, last_epoch=-1):
        self.T_max, self.eta_min = T_max, eta_min
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        T_max, eta_min, step = self.T_max, self.eta_min, self.last_epoch
        if self._is_initial:
            return _rates(self.optimizer)
        if self._step_count == 1 and step > 0:  # resumed at last_epoch: the closed form
            return [eta_min + (base_lr - eta_min) * (1 + math.cos(step * math.pi / T_max)) / 2
                    for base_lr in self.base_lrs]
        if (step - 1 - T_max) % (2 * T_max) == 0:  # the bottom of the cosine: the ratio below would divide by 0
            return [group["lr"] + (base_lr - eta_min) * (1 - math.cos(math.pi / T_max)) / 2
                    for base_lr, group in zip(self.base_lrs, self.optimizer.param_groups)]
        ratio = (1 + math.cos(math.pi * step / T_max)) / (1 + math.cos(math.pi * (step - 1) / T_max))
        return [ratio * (group["lr"] - eta_min) + eta_min for group in self.optimizer.param_groups]

    def _get_closed_form_lr(self):
        return [self.eta_min + (base_lr - self.eta_min) * (1 + math.cos(math.pi * self.last_epoch / self.T_max)) / 2
                for base_lr in self.base_lrs]


class CosineAnnealingWarmRestarts(LRScheduler):
    """``CosineAnnealingWarmRestarts(optimizer, T_0, T_mult=1, eta_min=0.0, last_epoch=-1)``: SGDR (Loshchilov &
    Hutter), ``lr = eta_min + (initial_lr - eta_min) · (1 + cos(π · T_cur / T_i)) / 2``, where ``T_cur`` counts
    the steps since the last restart and the ``i``-th period lasts ``T_i = T_0 · T_mult^i`` steps. ``step(epoch)``
    takes a fractional epoch too (a restart part-way through an epoch).

    >>> import tinyattn as ta
    >>> from tinyattn import optim
    >>> opt = optim.SGD([ta.zeros(1, requires_grad=True)], lr=1.0)
    >>> schedule = optim.lr_scheduler.CosineAnnealingWarmRestarts(opt, T_0=2)
    >>> rates = []
    >>> for _ in range(5):
    ...     rates.append(round(schedule.get_last_lr()[0], 4))
    ...     schedule.step()
    >>> rates
    [1.0, 0.5, 1.0, 0.5, 1.0]
    """

    state_names = ("T_0", "T_i", "T_mult", "eta_min", "T_cur")

    def __init__(self, optimizer, T_0, T_mult=1, eta_min=0.0, last_epoch=-1):
        if T_0 <= 0 or not isinstance(T_0, int):
            raise ValueError(f"Expected positive integer T_0, but got {T_0}")
        if T_mult < 1 or not isinstance(T_mult, int):
            raise ValueError(f"Expected integer T_mult >= 1, but got {T_mult}")
        if not isinstance(eta_min, (float, int)):
            raise ValueError(f"Expected float or int eta_min, but got {eta_min} of type {type(eta_min)}")
        self.T_0, self.T_i, self.T_mult, self.eta_min, self.T_cur = T_0, T_0, T_mult, eta_min, last_epoch
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        return [self.eta_min + (base_lr - self.eta_min) * (1 + math.cos(math.pi * self.T_cur / self.T_i)) / 2
                for base_lr in self.base_lrs]

    def step(self, epoch=None):
        """One step further (``T_cur + 1``, a restart when it reaches ``T_i``), or to ``epoch``."""
        self._step_count += 1
        if epoch is None and self.last_epoch < 0:
            epoch = 0
        if epoch is None:
            epoch = self.last_epoch + 1
            self.T_cur += 1
            if self.T_cur >= self.T_i:
                self.T_cur, self.T_i = self.T_cur % self.T_i, self.T_i * self.T_mult
        elif epoch < 0:
            raise ValueError(f"Expected non-negative epoch, but got {epoch}")
        elif epoch >= self.T_0:
            if self.T_mult == 1:
                self.T_cur = epoch % self.T_0
            else:  # the period that holds epoch: T_0 (T_mult^n - 1) / (T_mult - 1) <= epoch
                n = int(math.log(epoch / self.T_0 * (self.T_mult - 1) + 1, self.T_mult))
                self.T_cur = epoch - self.T_0 * (self.T_mult**n - 1) / (self.T_mult - 1)
                self.T_i = self.T_0 * self.T_mult**n
        else:
            self.T_i, self.T_cur = self.T_0, epoch
        self.last_epoch = math.floor(epoch)
        for group, lr in zip(self.optimizer.param_groups, self.get_lr()):
            group["lr"] = lr
        self._last_lr = _rates(self.optimizer)


def _set_momentum(group, momentum, use_beta1):
    if use_beta1:
        group["betas"] = (momentum, *group["betas"][1:])
    else:
        group["momentum"] = momentum


class CyclicLR(LRScheduler):
    """``CyclicLR(optimizer, base_lr, max_lr, step_size_up=2000, step_size_down=None, mode="triangular", gamma=1.0,
    scale_fn=None, scale_mode="cycle", cycle_momentum=True, base_momentum=0.8, max_momentum=0.9,
    last_epoch=-1)``: Smith's cyclical rates, stepped once per batch. With ``cycle = ⌊1 + step / total⌋``
    (``total = step_size_up + step_size_down``) and ``x`` the position in the cycle, the rate rises linearly from
    ``base_lr`` to ``max_lr`` over ``step_size_up`` steps and falls back over ``step_size_down``:
    ``lr = base_lr + (max_lr - base_lr) · height(x) · scale``. ``scale`` is 1 (``"triangular"``),
    ``1 / 2^(cycle - 1)`` (``"triangular2"``), ``gamma^step`` (``"exp_range"``) or ``scale_fn`` of the cycle or the
    step (``scale_mode``). The momentum (SGD's, or Adam's ``beta1``) moves the other way between
    ``max_momentum`` and ``base_momentum``.

    >>> import tinyattn as ta
    >>> from tinyattn import optim
    >>> opt = optim.SGD([ta.zeros(1, requires_grad=True)], lr=1.0, momentum=0.9)
    >>> schedule = optim.lr_scheduler.CyclicLR(opt, base_lr=0.1, max_lr=0.5, step_size_up=2)
    >>> rates = []
    >>> for _ in range(6):
    ...     rates.append(round(schedule.get_last_lr()[0], 4))
    ...     schedule.step()
    >>> rates, schedule.get_last_lr(), round(opt.param_groups[0]["momentum"], 4)   # at the top: the lowest momentum
    ([0.1, 0.3, 0.5, 0.3, 0.1, 0.3], [0.5], 0.8)
    """

    state_names = ("max_lrs", "total_size", "step_ratio", "mode", "gamma", "scale_mode", "cycle_momentum")

    def __init__(self, optimizer, base_lr, max_lr, step_size_up=2000, step_size_down=None, mode="triangular",
                 gamma=1.0, scale_fn=None, scale_mode="cycle", cycle_momentum=True, base_momentum=0.8,
                 max_momentum=0.9, last_epoch=-1):
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")
        base_lrs = _per_group("base_lr", optimizer, base_lr)
        if last_epoch == -1:
            for lr, group in zip(base_lrs, optimizer.param_groups):
                group["lr"] = lr
        self.max_lrs = _per_group("max_lr", optimizer, max_lr)
        step_size_up = float(step_size_up)
        step_size_down = float(step_size_down) if step_size_down is not None else step_size_up
        self.total_size = step_size_up + step_size_down
        self.step_ratio = step_size_up / self.total_size
        if mode not in ("triangular", "triangular2", "exp_range") and scale_fn is None:
            raise ValueError(f"mode is invalid and scale_fn is None: mode={mode!r}; expected 'triangular', "
                             "'triangular2' or 'exp_range', or a scale_fn")
        self.mode, self.gamma, self.scale_fn_custom = mode, gamma, scale_fn
        self.scale_mode = scale_mode if scale_fn is not None else ("iterations" if mode == "exp_range" else "cycle")
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            if "momentum" not in optimizer.defaults and "betas" not in optimizer.defaults:
                raise ValueError("optimizer must support momentum or beta1 with `cycle_momentum` option enabled")
            self.use_beta1 = "betas" in optimizer.defaults
            self.base_momentums = _per_group("base_momentum", optimizer, base_momentum)
            self.max_momentums = _per_group("max_momentum", optimizer, max_momentum)
            if last_epoch == -1:
                for top, bottom, group in zip(self.max_momentums, self.base_momentums, optimizer.param_groups):
                    _set_momentum(group, top, self.use_beta1)
                    group["max_momentum"], group["base_momentum"] = top, bottom
        super().__init__(optimizer, last_epoch)
        self.base_lrs = base_lrs

    def scale_fn(self, x):
        """The amplitude's scale at ``x`` (the cycle number, or the step with ``scale_mode="iterations"``)."""
        if self.scale_fn_custom is not None:
            return self.scale_fn_custom(x)
        if self.mode == "triangular":
            return 1.0
        if self.mode == "triangular2":
            return 1 / (2.0 ** (x - 1))
        return self.gamma**x

    def get_lr(self):
        cycle = math.floor(1 + self.last_epoch / self.total_size)
        x = 1.0 + self.last_epoch / self.total_size - cycle  # where in the cycle, in [0, 1)
        height = x / self.step_ratio if x <= self.step_ratio else (x - 1) / (self.step_ratio - 1)
        scale = self.scale_fn(cycle if self.scale_mode == "cycle" else self.last_epoch)
        lrs = [base_lr + (max_lr - base_lr) * height * scale for base_lr, max_lr in zip(self.base_lrs, self.max_lrs)]
        if self.cycle_momentum:
            for group, bottom, top in zip(self.optimizer.param_groups, self.base_momentums, self.max_momentums):
                _set_momentum(group, top - (top - bottom) * height * scale, self.use_beta1)
        return lrs


class OneCycleLR(LRScheduler):
    """``OneCycleLR(optimizer, max_lr, total_steps=None, epochs=None, steps_per_epoch=None, pct_start=0.3,
    anneal_strategy="cos", cycle_momentum=True, base_momentum=0.85, max_momentum=0.95, div_factor=25.0,
    final_div_factor=1e4, three_phase=False, last_epoch=-1)``: the 1cycle policy (Smith & Topin), stepped once per
    batch. The rate rises from ``max_lr / div_factor`` to ``max_lr`` over the first ``pct_start`` of the steps,
    then anneals (cosine or linear) down to ``max_lr / div_factor / final_div_factor`` (``three_phase``: back to
    the start first, then down), while the momentum (SGD's, or Adam's ``beta1``) moves the other way.

    >>> import tinyattn as ta
    >>> from tinyattn import optim
    >>> opt = optim.SGD([ta.zeros(1, requires_grad=True)], lr=1.0, momentum=0.9)
    >>> schedule = optim.lr_scheduler.OneCycleLR(opt, max_lr=1.0, total_steps=10, anneal_strategy="linear")
    >>> rates = []
    >>> for _ in range(10):
    ...     rates.append(round(schedule.get_last_lr()[0], 6))
    ...     if len(rates) < 10:
    ...         schedule.step()
    >>> rates[0], max(rates), rates[-1]
    (0.04, 1.0, 4e-06)
    """

    state_names = ("total_steps", "cycle_momentum", "anneal_strategy")

    def __init__(self, optimizer, max_lr, total_steps=None, epochs=None, steps_per_epoch=None, pct_start=0.3,
                 anneal_strategy="cos", cycle_momentum=True, base_momentum=0.85, max_momentum=0.95, div_factor=25.0,
                 final_div_factor=1e4, three_phase=False, last_epoch=-1):
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")
        if total_steps is not None:
            if total_steps <= 0 or not isinstance(total_steps, int):
                raise ValueError(f"Expected positive integer total_steps, but got {total_steps}")
        elif epochs is not None and steps_per_epoch is not None:
            if not isinstance(epochs, int) or epochs <= 0:
                raise ValueError(f"Expected positive integer epochs, but got {epochs}")
            if not isinstance(steps_per_epoch, int) or steps_per_epoch <= 0:
                raise ValueError(f"Expected positive integer steps_per_epoch, but got {steps_per_epoch}")
            total_steps = epochs * steps_per_epoch
        else:
            raise ValueError("You must define either total_steps OR (epochs AND steps_per_epoch)")
        self.total_steps = total_steps
        # each phase: (its last step, the lr and momentum keys of the group it goes from and to)
        rise = float(pct_start * total_steps) - 1
        if three_phase:
            self._phases = [(rise, "initial_lr", "max_lr", "max_momentum", "base_momentum"),
                            (float(2 * pct_start * total_steps) - 2, "max_lr", "initial_lr", "base_momentum",
                             "max_momentum"),
                            (total_steps - 1, "initial_lr", "min_lr", "max_momentum", "max_momentum")]
        else:
            self._phases = [(rise, "initial_lr", "max_lr", "max_momentum", "base_momentum"),
                            (total_steps - 1, "max_lr", "min_lr", "base_momentum", "max_momentum")]
        if pct_start < 0 or pct_start > 1 or not isinstance(pct_start, float):
            raise ValueError(f"Expected float between 0 and 1 pct_start, but got {pct_start}")
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(f"anneal_strategy must be one of 'cos' or 'linear', instead got {anneal_strategy}")
        self.anneal_strategy = anneal_strategy
        max_lrs = _per_group("max_lr", optimizer, max_lr)
        if last_epoch == -1:
            for top, group in zip(max_lrs, optimizer.param_groups):
                group["initial_lr"] = top / div_factor
                group["max_lr"], group["min_lr"] = top, group["initial_lr"] / final_div_factor
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            if "momentum" not in optimizer.defaults and "betas" not in optimizer.defaults:
                raise ValueError("optimizer must support momentum or beta1 with `cycle_momentum` option enabled")
            self.use_beta1 = "betas" in optimizer.defaults
            tops = _per_group("max_momentum", optimizer, max_momentum)
            bottoms = _per_group("base_momentum", optimizer, base_momentum)
            if last_epoch == -1:
                for top, bottom, group in zip(tops, bottoms, optimizer.param_groups):
                    _set_momentum(group, top, self.use_beta1)
                    group["max_momentum"], group["base_momentum"] = top, bottom
        super().__init__(optimizer, last_epoch)

    def _anneal(self, start, end, pct):
        if self.anneal_strategy == "cos":
            return end + (start - end) / 2.0 * (math.cos(math.pi * pct) + 1)
        return (end - start) * pct + start

    def get_lr(self):
        step = self.last_epoch
        if step > self.total_steps:
            raise ValueError(f"Tried to step {step} times. The specified number of total steps is {self.total_steps}")
        lrs = []
        for group in self.optimizer.param_groups:
            start = 0.0
            for i, (end, lr_from, lr_to, momentum_from, momentum_to) in enumerate(self._phases):
                if step <= end or i == len(self._phases) - 1:
                    pct = (step - start) / (end - start)
                    lrs.append(self._anneal(group[lr_from], group[lr_to], pct))
                    if self.cycle_momentum:
                        momentum = self._anneal(group[momentum_from], group[momentum_to], pct)
                        _set_momentum(group, momentum, self.use_beta1)
                    break
                start = end
        return lrs


class SequentialLR(LRScheduler):
    """``SequentialLR(optimizer, schedulers, milestones, last_epoch=-1)``: ``schedulers[i]`` from step
    ``milestones[i - 1]`` on, each later one starting at its own step 0 (a warm-up, then a decay, say).

    >>> import tinyattn as ta
    >>> from tinyattn import optim
    >>> opt = optim.SGD([ta.zeros(1, requires_grad=True)], lr=1.0)
    >>> warmup = optim.lr_scheduler.LinearLR(opt, start_factor=0.5, total_iters=2)
    >>> decay = optim.lr_scheduler.ExponentialLR(opt, gamma=0.5)
    >>> schedule = optim.lr_scheduler.SequentialLR(opt, [warmup, decay], milestones=[2])
    >>> rates = []
    >>> for _ in range(5):
    ...     rates.append(schedule.get_last_lr()[0])
    ...     schedule.step()
    >>> rates
    [0.5, 0.75, 1.0, 0.5, 0.25]
    """

    def __init__(self, optimizer, schedulers, milestones, last_epoch=-1):
        if len(schedulers) < 1:
            raise ValueError(f"{type(self).__name__} expects at least one scheduler, but got no scheduler.")
        _check_schedulers(self, optimizer, schedulers)
        if len(milestones) != len(schedulers) - 1:
            raise ValueError("Sequential Schedulers expects number of schedulers provided to be one more than the "
                             f"number of milestone points, but got number of schedulers {len(schedulers)} and the "
                             f"number of milestones to be equal to {len(milestones)}")
        self.optimizer, self._schedulers, self._milestones = optimizer, list(schedulers), list(milestones)
        self.last_epoch = last_epoch + 1
        for group in optimizer.param_groups:  # undo what the schedulers' constructions set, then start the first
            group["lr"] = group["initial_lr"]
        self._undo(self)
        first = self._schedulers[bisect.bisect_right(self._milestones, 0)]
        first._initial_step()
        self._last_lr = first.get_last_lr()

    def _undo(self, scheduler):
        """Step back every scheduler inside (a nested ``SequentialLR``'s too) by the step its construction took."""
        if hasattr(scheduler, "_schedulers"):
            for inner in scheduler._schedulers:
                self._undo(inner)
        elif hasattr(scheduler, "last_epoch"):
            scheduler.last_epoch -= 1

    def step(self):
        """One step of the scheduler whose turn it is; at a milestone, the next one's step 0."""
        self.last_epoch += 1
        index = bisect.bisect_right(self._milestones, self.last_epoch)
        scheduler = self._schedulers[index]
        if index > 0 and self._milestones[index - 1] == self.last_epoch:
            scheduler._update_lr(0)
        else:
            scheduler.step()
        self._last_lr = scheduler.get_last_lr()

    def state_dict(self):
        """``{"last_epoch", "_last_lr", "_milestones", "_schedulers": [each one's state_dict()]}``."""
        return {"last_epoch": self.last_epoch, "_last_lr": list(self._last_lr), "_milestones": list(self._milestones),
                "_schedulers": [scheduler.state_dict() for scheduler in self._schedulers]}

    def load_state_dict(self, state_dict):
        _load_combined(self, state_dict, {"last_epoch", "_last_lr", "_milestones", "_schedulers"})


class ChainedScheduler(LRScheduler):
    """``ChainedScheduler(schedulers, optimizer=None)``: every scheduler steps at each ``step()``, one after the
    other, each from the rates the previous one left (so their factors multiply).

    >>> import tinyattn as ta
    >>> from tinyattn import optim
    >>> opt = optim.SGD([ta.zeros(1, requires_grad=True)], lr=1.0)
    >>> constant = optim.lr_scheduler.ConstantLR(opt, factor=0.5, total_iters=2)
    >>> decay = optim.lr_scheduler.ExponentialLR(opt, gamma=0.9)
    >>> schedule = optim.lr_scheduler.ChainedScheduler([constant, decay])
    >>> rates = []
    >>> for _ in range(4):
    ...     rates.append(round(schedule.get_last_lr()[0], 4))
    ...     schedule.step()
    >>> rates
    [0.5, 0.45, 0.81, 0.729]
    """

    def __init__(self, schedulers, optimizer=None):
        if len(schedulers) < 1:
            raise ValueError(f"{type(self).__name__} expects at least one scheduler to be chained, but got no "
                             "scheduler.")
        optimizer = optimizer or schedulers[0].optimizer
        _check_schedulers(self, optimizer, schedulers)
        self._schedulers, self.optimizer = list(schedulers), optimizer
        self._last_lr = _rates(self._schedulers[-1].optimizer)

    def step(self):
        """One step of every scheduler, in order."""
        for scheduler in self._schedulers:
            scheduler.step()
        self._last_lr = _rates(self._schedulers[-1].optimizer)

    def state_dict(self):
        """``{"_last_lr", "_schedulers": [each one's state_dict()]}``."""
        return {"_last_lr": list(self._last_lr), "_schedulers": [s.state_dict() for s in self._schedulers]}

    def load_state_dict(self, state_dict):
        _load_combined(self, state_dict, {"_last_lr", "_schedulers"})


def _check_schedulers(combined, optimizer, schedulers):
    name = type(combined).__name__
    for i, scheduler in enumerate(schedulers):
        if not hasattr(scheduler, "optimizer"):
            raise TypeError(f"{name} at index {i} should have `optimizer` as its attribute.")
        if isinstance(scheduler, ReduceLROnPlateau):
            raise ValueError(f"{name} does not support `ReduceLROnPlateau` scheduler as it requires additional "
                             f"kwargs to be specified when calling `step`, but got one at index {i} in the given "
                             "schedulers sequence.")
        if scheduler.optimizer is not optimizer:
            raise ValueError(f"{name} expects all schedulers to belong to the same optimizer, but got scheduler "
                             f"{type(scheduler).__name__} at index {i} with a different optimizer.")


def _load_combined(combined, state_dict, expected):
    name = type(combined).__name__
    if not isinstance(state_dict, dict) or set(state_dict) != expected:
        got = sorted(state_dict) if isinstance(state_dict, dict) else type(state_dict).__name__
        raise KeyError(f"{name} state_dict needs keys {sorted(expected)}, got {got}")
    if len(state_dict["_schedulers"]) != len(combined._schedulers):
        raise ValueError(f"{name} state_dict has {len(state_dict['_schedulers'])} schedulers' states, this one "
                         f"has {len(combined._schedulers)} schedulers")
    for scheduler, state in zip(combined._schedulers, state_dict["_schedulers"]):
        scheduler.load_state_dict(state)
    for key in expected - {"_schedulers"}:
        setattr(combined, key, _copied(state_dict[key]))


class ReduceLROnPlateau(LRScheduler):
    """``ReduceLROnPlateau(optimizer, mode="min", factor=0.1, patience=10, threshold=1e-4, threshold_mode="rel",
    cooldown=0, min_lr=0, eps=1e-8)``: ``step(metrics)`` multiplies every ``lr`` by ``factor`` (not below
    ``min_lr``, and only by more than ``eps``) once the metric has not improved for more than ``patience`` steps,
    then waits ``cooldown`` steps. An improvement beats the best by ``threshold``, relative (``best · (1 ∓
    threshold)``) or absolute (``best ∓ threshold``).

    >>> import tinyattn as ta
    >>> from tinyattn import optim
    >>> opt = optim.SGD([ta.zeros(1, requires_grad=True)], lr=1.0)
    >>> schedule = optim.lr_scheduler.ReduceLROnPlateau(opt, factor=0.5, patience=1)
    >>> for loss in [1.0, 0.9, 0.9, 0.9, 0.9]:
    ...     schedule.step(loss)
    >>> schedule.get_last_lr()
    [0.5]
    """

    state_names = ("factor", "min_lrs", "default_min_lr", "patience", "cooldown", "eps", "mode", "threshold",
                   "threshold_mode", "best", "num_bad_epochs", "cooldown_counter")

    def __init__(self, optimizer, mode="min", factor=0.1, patience=10, threshold=1e-4, threshold_mode="rel",
                 cooldown=0, min_lr=0, eps=1e-8):
        if factor >= 1.0:
            raise ValueError(f"Factor should be < 1.0, got {factor}")
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")
        if mode not in ("min", "max"):
            raise ValueError(f"mode {mode} is unknown! (expected 'min' or 'max')")
        if threshold_mode not in ("rel", "abs"):
            raise ValueError(f"threshold mode {threshold_mode} is unknown! (expected 'rel' or 'abs')")
        self.optimizer, self.factor = optimizer, factor
        if isinstance(min_lr, (list, tuple)):
            if len(min_lr) != len(optimizer.param_groups):
                raise ValueError(f"expected {len(optimizer.param_groups)} min_lrs, got {len(min_lr)}")
            self.default_min_lr, self.min_lrs = None, list(min_lr)
        else:
            self.default_min_lr, self.min_lrs = min_lr, [min_lr] * len(optimizer.param_groups)
        self.patience, self.cooldown, self.eps = patience, cooldown, eps
        self.mode, self.threshold, self.threshold_mode = mode, threshold, threshold_mode
        self.base_lrs = _rates(optimizer)
        self.last_epoch = 0
        self._last_lr = _rates(optimizer)
        self.best = math.inf if mode == "min" else -math.inf
        self.cooldown_counter = self.num_bad_epochs = 0

    @property
    def in_cooldown(self):
        return self.cooldown_counter > 0

    def is_better(self, a, best):
        """Whether the metric ``a`` improves on ``best`` by more than the threshold."""
        if self.mode == "min":
            return a < best * (1.0 - self.threshold) if self.threshold_mode == "rel" else a < best - self.threshold
        return a > best * (self.threshold + 1.0) if self.threshold_mode == "rel" else a > best + self.threshold

    def step(self, metrics, epoch=None):
        """Take one value of the watched metric (a number or a one-element tensor)."""
        current = float(metrics)
        self.last_epoch = self.last_epoch + 1 if epoch is None else epoch
        if self.is_better(current, self.best):
            self.best, self.num_bad_epochs = current, 0
        else:
            self.num_bad_epochs += 1
        if self.in_cooldown:
            self.cooldown_counter -= 1
            self.num_bad_epochs = 0  # bad epochs in cooldown do not count
        if self.num_bad_epochs > self.patience:
            self._reduce_lr()
            self.cooldown_counter, self.num_bad_epochs = self.cooldown, 0
        self._last_lr = _rates(self.optimizer)

    def _reduce_lr(self):
        groups = self.optimizer.param_groups
        if len(groups) != len(self.min_lrs):
            if self.default_min_lr is None:
                raise RuntimeError(f"The number of param groups in the `optimizer` ({len(groups)}) differs from when "
                                   f"`ReduceLROnPlateau` was initialized ({len(self.min_lrs)}); set its `min_lrs` "
                                   "to one per group")
            self.min_lrs = [self.default_min_lr] * len(groups)
        for group, min_lr in zip(groups, self.min_lrs):
            old_lr = float(group["lr"])
            new_lr = max(old_lr * self.factor, min_lr)
            if old_lr - new_lr > self.eps:
                group["lr"] = new_lr


def warmup_inverse_sqrt(warmup_steps):
    """The Transformer's schedule (Vaswani et al., 2017), scaled to peak at 1.

    With ``n = step + 1`` the number of the update the factor is used for::

        factor(step) = min(n / warmup_steps, sqrt(warmup_steps / n))

    a linear rise ``1/warmup_steps, 2/warmup_steps, ...`` to 1 at update ``warmup_steps``,
    then decay as ``1/sqrt(n)``. The first update gets ``1/warmup_steps``, never 0. The
    paper's rate is ``d_model**-0.5 * warmup_steps**-0.5 * factor``.

    >>> factor = warmup_inverse_sqrt(2)
    >>> [round(factor(step), 4) for step in range(5)]
    [0.5, 1.0, 0.8165, 0.7071, 0.6325]
    """
    if not (isinstance(warmup_steps, numbers.Integral) and warmup_steps >= 1):
        raise ValueError(f"warmup_inverse_sqrt: warmup_steps must be an integer >= 1, got {warmup_steps!r}")

    def lr_lambda(step):
        update = step + 1
        return min(update / warmup_steps, math.sqrt(warmup_steps / update))

    return lr_lambda


def warmup_cosine(warmup_steps, total_steps):
    """Linear warm-up to 1, then a half cosine down to 0 when ``total_steps`` updates are done.

    With ``n = step + 1`` the number of the update the factor is used for, and
    ``peak = max(warmup_steps, 1)`` the update that gets the full rate::

        factor(step) = n / warmup_steps                                  if n <= warmup_steps
                     = (1 + cos(pi * (n - peak) / (total_steps + 1 - peak))) / 2
                                                                         if n <= total_steps
                     = 0                                                 afterwards

    Every one of the ``total_steps`` updates gets a positive rate, and ``factor(total_steps)``,
    the rate once they are all done, is 0. ``warmup_steps=0`` (like 1) starts at the full rate.

    >>> factor = warmup_cosine(2, 5)
    >>> [round(factor(step), 4) for step in range(7)]
    [0.5, 1.0, 0.8536, 0.5, 0.1464, 0.0, 0.0]
    """
    integers = isinstance(warmup_steps, numbers.Integral) and isinstance(total_steps, numbers.Integral)
    if not (integers and 0 <= warmup_steps <= total_steps and total_steps >= 1):
        raise ValueError(
            f"warmup_cosine: expected integers 0 <= warmup_steps <= total_steps, total_steps >= 1; "
            f"got warmup_steps={warmup_steps!r}, total_steps={total_steps!r}"
        )
    peak = max(warmup_steps, 1)

    def lr_lambda(step):
        update = step + 1
        if update <= warmup_steps:
            return update / warmup_steps
        if update > total_steps:
            return 0.0
        progress = (update - peak) / (total_steps + 1 - peak)
        return 0.5 * (1.0 + math.cos(math.pi * progress))

    return lr_lambda
