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
           "ReduceLROnPlateau"]

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
