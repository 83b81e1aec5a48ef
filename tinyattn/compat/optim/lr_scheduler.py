"""``torch.optim.lr_scheduler``: ``LambdaLR`` (the native one) and torch's closed-form schedules on it,
plus ``ReduceLROnPlateau``.

Each schedule sets ``lr = initial_lr * factor(step)`` for the factor torch's schedule gives; torch
computes some of them step by step from the previous rate, so rates agree to rounding (1e-15).

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

import bisect
import math

from ...optim.lr_scheduler import LambdaLR

__all__ = ["LRScheduler", "LambdaLR", "StepLR", "MultiStepLR", "ExponentialLR", "CosineAnnealingLR", "LinearLR",
           "SequentialLR", "OneCycleLR", "ReduceLROnPlateau"]

LRScheduler = LambdaLR


class StepLR(LambdaLR):
    """``lr = initial_lr * gamma ** (step // step_size)``."""

    def __init__(self, optimizer, step_size, gamma=0.1, last_epoch=-1):
        self.step_size, self.gamma = step_size, gamma
        super().__init__(optimizer, lambda step: gamma ** (step // step_size), last_epoch)


class MultiStepLR(LambdaLR):
    """``lr = initial_lr * gamma ** (the number of milestones reached)``."""

    def __init__(self, optimizer, milestones, gamma=0.1, last_epoch=-1):
        self.milestones, self.gamma = sorted(milestones), gamma
        super().__init__(optimizer, lambda step: gamma ** bisect.bisect_right(self.milestones, step), last_epoch)


class ExponentialLR(LambdaLR):
    """``lr = initial_lr * gamma ** step``."""

    def __init__(self, optimizer, gamma, last_epoch=-1):
        self.gamma = gamma
        super().__init__(optimizer, lambda step: gamma ** step, last_epoch)


class CosineAnnealingLR(LambdaLR):
    """``lr = eta_min + (initial_lr - eta_min) · (1 + cos(π · step / T_max)) / 2`` (SGDR without restarts)."""

    def __init__(self, optimizer, T_max, eta_min=0.0, last_epoch=-1):
        self.T_max, self.eta_min = T_max, eta_min

        def factor_for(base_lr):
            def factor(step):
                lr = eta_min + (base_lr - eta_min) * (1 + math.cos(math.pi * step / T_max)) / 2
                return lr / base_lr if base_lr else 0.0

            return factor

        bases = [group.get("initial_lr", group["lr"]) for group in optimizer.param_groups]
        super().__init__(optimizer, [factor_for(base) for base in bases], last_epoch)


class LinearLR(LambdaLR):
    """The factor moves linearly from ``start_factor`` to ``end_factor`` over ``total_iters`` steps, then stays."""

    def __init__(self, optimizer, start_factor=1.0 / 3, end_factor=1.0, total_iters=5, last_epoch=-1):
        if not 0 < start_factor <= 1 or not 0 <= end_factor <= 1:
            raise ValueError("Starting multiplicative factor expected to be greater than 0 and less or equal to 1, "
                             "and the ending one between 0 and 1.")
        self.start_factor, self.end_factor, self.total_iters = start_factor, end_factor, total_iters
        super().__init__(optimizer, lambda step: start_factor + (end_factor - start_factor)
                         * min(step, total_iters) / total_iters, last_epoch)


class SequentialLR:
    """``SequentialLR(optimizer, schedulers, milestones)``: ``schedulers[i]`` from step ``milestones[i - 1]`` on,
    each later one starting from its own step 0 (a warm-up then a decay, say)."""

    def __init__(self, optimizer, schedulers, milestones, last_epoch=-1):
        if len(milestones) != len(schedulers) - 1:
            raise ValueError("Sequential Schedulers expects number of schedulers provided to be one more than the "
                             f"number of milestone points, but got number of schedulers {len(schedulers)} and the "
                             f"number of milestones to be equal to {len(milestones)}")
        for i, scheduler in enumerate(schedulers):
            if scheduler.optimizer is not optimizer:
                raise ValueError(f"Sequential Schedulers expects all schedulers to belong to the same optimizer, "
                                 f"but got scheduler at index {i} to be different than the optimizer passed in.")
        self.optimizer, self._schedulers, self._milestones = optimizer, list(schedulers), list(milestones)
        self.last_epoch = last_epoch + 1
        for group in optimizer.param_groups:  # undo what the schedulers' constructions set, then start the first
            group["lr"] = group["initial_lr"]
        for scheduler in self._schedulers:
            scheduler.last_epoch -= 1
        self._schedulers[0].step()
        self._last_lr = self._schedulers[0].get_last_lr()

    def step(self):
        self.last_epoch += 1
        index = bisect.bisect_right(self._milestones, self.last_epoch)
        scheduler = self._schedulers[index]
        if index > 0 and self._milestones[index - 1] == self.last_epoch:
            scheduler.last_epoch = -1  # the next scheduler starts at its own step 0
        scheduler.step()
        self._last_lr = scheduler.get_last_lr()

    def get_last_lr(self):
        return list(self._last_lr)


class OneCycleLR:
    """``OneCycleLR(optimizer, max_lr, total_steps=None, epochs=None, steps_per_epoch=None, pct_start=0.3,
    anneal_strategy="cos", cycle_momentum=True, base_momentum=0.85, max_momentum=0.95, div_factor=25.0,
    final_div_factor=1e4, three_phase=False)``: the rate rises from ``max_lr / div_factor`` to ``max_lr``, then
    falls to ``max_lr / div_factor / final_div_factor``, while the momentum (SGD's, or Adam's ``beta1``) moves
    the other way (Smith and Topin)."""

    def __init__(self, optimizer, max_lr, total_steps=None, epochs=None, steps_per_epoch=None, pct_start=0.3,
                 anneal_strategy="cos", cycle_momentum=True, base_momentum=0.85, max_momentum=0.95, div_factor=25.0,
                 final_div_factor=1e4, three_phase=False, last_epoch=-1):
        if total_steps is None:
            if epochs is None or steps_per_epoch is None:
                raise ValueError("You must define either total_steps OR (epochs AND steps_per_epoch)")
            total_steps = epochs * steps_per_epoch
        if total_steps <= 0 or not isinstance(total_steps, int):
            raise ValueError(f"Expected positive integer total_steps, but got {total_steps}")
        if not 0 <= pct_start <= 1 or not isinstance(pct_start, float):
            raise ValueError(f"Expected float between 0 and 1 pct_start, but got {pct_start}")
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(f"anneal_strategy must be one of 'cos' or 'linear', instead got {anneal_strategy}")
        self.optimizer, self.total_steps, self.cycle_momentum = optimizer, total_steps, cycle_momentum
        self._anneal = _cosine if anneal_strategy == "cos" else _linear
        up = float(pct_start * total_steps) - 1
        if three_phase:
            self._phases = [(up, "initial_lr", "max_lr", "max_momentum", "base_momentum"),
                            (float(2 * pct_start * total_steps) - 2, "max_lr", "initial_lr", "base_momentum",
                             "max_momentum"),
                            (total_steps - 1, "initial_lr", "min_lr", "max_momentum", "max_momentum")]
        else:
            self._phases = [(up, "initial_lr", "max_lr", "max_momentum", "base_momentum"),
                            (total_steps - 1, "max_lr", "min_lr", "base_momentum", "max_momentum")]
        groups = optimizer.param_groups
        max_lrs = list(max_lr) if isinstance(max_lr, (list, tuple)) else [max_lr] * len(groups)
        self._use_betas = "betas" in optimizer.defaults
        if cycle_momentum and not self._use_betas and "momentum" not in optimizer.defaults:
            raise ValueError("optimizer must support momentum or beta1 with `cycle_momentum` option enabled")
        for group, top in zip(groups, max_lrs):
            group["initial_lr"] = top / div_factor
            group["max_lr"], group["min_lr"] = top, group["initial_lr"] / final_div_factor
            if cycle_momentum:
                group["max_momentum"], group["base_momentum"] = max_momentum, base_momentum
                self._set_momentum(group, max_momentum)
        self.last_epoch = last_epoch
        self.step()

    def _set_momentum(self, group, momentum):
        if self._use_betas:
            group["betas"] = (momentum, *group["betas"][1:])
        else:
            group["momentum"] = momentum

    def step(self):
        self.last_epoch += 1
        step = self.last_epoch
        if step > self.total_steps:
            raise ValueError(f"Tried to step {step} times. The specified number of total steps is {self.total_steps}")
        for group in self.optimizer.param_groups:
            start = 0.0
            for i, (end, lr_from, lr_to, momentum_from, momentum_to) in enumerate(self._phases):
                if step <= end or i == len(self._phases) - 1:
                    pct = (step - start) / (end - start)
                    group["lr"] = self._anneal(group[lr_from], group[lr_to], pct)
                    if self.cycle_momentum:
                        self._set_momentum(group, self._anneal(group[momentum_from], group[momentum_to], pct))
                    break
                start = end
        self._last_lr = [group["lr"] for group in self.optimizer.param_groups]

    def get_last_lr(self):
        return list(self._last_lr)


def _cosine(start, end, pct):
    return end + (start - end) / 2.0 * (math.cos(math.pi * pct) + 1)


def _linear(start, end, pct):
    return (end - start) * pct + start


class ReduceLROnPlateau:
    """``ReduceLROnPlateau(optimizer, mode="min", factor=0.1, patience=10, threshold=1e-4, threshold_mode="rel",
    cooldown=0, min_lr=0, eps=1e-8)``: ``step(metric)`` multiplies every ``lr`` by ``factor`` once the metric
    has not improved for more than ``patience`` steps."""

    def __init__(self, optimizer, mode="min", factor=0.1, patience=10, threshold=1e-4, threshold_mode="rel",
                 cooldown=0, min_lr=0, eps=1e-8):
        if factor >= 1.0:
            raise ValueError("Factor should be < 1.0.")
        if mode not in ("min", "max"):
            raise ValueError(f"mode {mode} is unknown!")
        if threshold_mode not in ("rel", "abs"):
            raise ValueError(f"threshold mode {threshold_mode} is unknown!")
        groups = optimizer.param_groups
        self.min_lrs = list(min_lr) if isinstance(min_lr, (list, tuple)) else [min_lr] * len(groups)
        if len(self.min_lrs) != len(groups):
            raise ValueError(f"expected {len(groups)} min_lrs, got {len(self.min_lrs)}")
        self.optimizer, self.mode, self.factor, self.patience = optimizer, mode, factor, patience
        self.threshold, self.threshold_mode, self.cooldown, self.eps = threshold, threshold_mode, cooldown, eps
        self.best = math.inf if mode == "min" else -math.inf
        self.num_bad_epochs = self.cooldown_counter = 0
        self.last_epoch = 0
        self._last_lr = [group["lr"] for group in groups]

    def is_better(self, a, best):
        if self.mode == "min":
            return a < best * (1 - self.threshold) if self.threshold_mode == "rel" else a < best - self.threshold
        return a > best * (self.threshold + 1) if self.threshold_mode == "rel" else a > best + self.threshold

    def step(self, metrics):
        current = float(metrics)
        self.last_epoch += 1
        if self.is_better(current, self.best):
            self.best, self.num_bad_epochs = current, 0
        else:
            self.num_bad_epochs += 1
        if self.cooldown_counter > 0:
            self.cooldown_counter -= 1
            self.num_bad_epochs = 0
        if self.num_bad_epochs > self.patience:
            for group, min_lr in zip(self.optimizer.param_groups, self.min_lrs):
                new_lr = max(group["lr"] * self.factor, min_lr)
                if group["lr"] - new_lr > self.eps:
                    group["lr"] = new_lr
            self.cooldown_counter, self.num_bad_epochs = self.cooldown, 0
        self._last_lr = [group["lr"] for group in self.optimizer.param_groups]

    def get_last_lr(self):
        return list(self._last_lr)

    def state_dict(self):
        return {key: value for key, value in self.__dict__.items() if key != "optimizer"}

    def load_state_dict(self, state_dict):
        self.__dict__.update(state_dict)


def __getattr__(name):
    raise AttributeError(f"tinyattn.compat.optim.lr_scheduler has no `{name}` yet")
