"""Learning-rate schedules: ``LambdaLR`` and two factories for its ``lr_lambda``.

``LambdaLR`` sets each group's ``lr`` to ``initial_lr * lr_lambda(step)``, where ``step``
counts the scheduler's ``step()`` calls (0 at construction). The usual loop calls
``optimizer.step()`` then ``scheduler.step()``, so the rate set at ``step = s`` is the one
the ``(s + 1)``-th optimizer update uses. Both factories count that update, ``n = s + 1``,
so the very first update already moves the weights (no update is spent at a rate of 0).

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

import math
import numbers


class LambdaLR:
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
        self.optimizer = optimizer
        groups = optimizer.param_groups
        if last_epoch == -1:
            for group in groups:
                group.setdefault("initial_lr", group["lr"])
        else:
            for i, group in enumerate(groups):
                if "initial_lr" not in group:
                    raise KeyError(
                        f"param 'initial_lr' is not specified in param_groups[{i}] when resuming at "
                        f"last_epoch={last_epoch}; load the optimizer's state dict first"
                    )
        self.base_lrs = [group["initial_lr"] for group in groups]
        if isinstance(lr_lambda, (list, tuple)):
            if len(lr_lambda) != len(groups):
                raise ValueError(
                    f"Expected {len(groups)} lr_lambdas (one per parameter group), but got {len(lr_lambda)}"
                )
            self.lr_lambdas = list(lr_lambda)
        else:
            self.lr_lambdas = [lr_lambda] * len(groups)
        self.last_epoch = last_epoch
        self.step()

    def get_lr(self):
        """The rates for the current step count, one per group."""
        return [base_lr * lr_lambda(self.last_epoch) for base_lr, lr_lambda in zip(self.base_lrs, self.lr_lambdas)]

    def step(self):
        """Advance the step count by one and write the new rates into the optimizer's groups."""
        self.last_epoch += 1
        for group, lr in zip(self.optimizer.param_groups, self.get_lr()):
            group["lr"] = lr
        self._last_lr = [group["lr"] for group in self.optimizer.param_groups]

    def get_last_lr(self):
        """The rates the last ``step()`` (or the construction) set, one per group."""
        return list(self._last_lr)

    def state_dict(self):
        """Step count and rates: ``{"base_lrs": [...], "last_epoch": int, "_last_lr": [...]}``.

        The ``lr_lambda`` functions are code, not state, and are not included (as in
        PyTorch): a resumed run builds its scheduler with the same functions, then loads this.
        """
        return {"base_lrs": list(self.base_lrs), "last_epoch": self.last_epoch, "_last_lr": list(self._last_lr)}

    def load_state_dict(self, state_dict):
        """Take the step count and rates from ``state_dict``; the optimizer's ``lr`` comes with
        the optimizer's own state dict. A state that does not fit (other keys, another number of
        groups, values that are not numbers) raises and changes nothing."""
        expected = {"base_lrs", "last_epoch", "_last_lr"}
        if not isinstance(state_dict, dict) or set(state_dict) != expected:
            got = sorted(state_dict) if isinstance(state_dict, dict) else type(state_dict).__name__
            raise KeyError(f"LambdaLR state_dict needs keys {sorted(expected)}, got {got}")
        groups = len(self.optimizer.param_groups)
        for key in ("base_lrs", "_last_lr"):
            rates = state_dict[key]
            if not (isinstance(rates, (list, tuple)) and len(rates) == groups and all(_is_real(r) for r in rates)):
                raise ValueError(f"LambdaLR state_dict's {key!r} must be a list of {groups} numbers, got {rates!r}")
        last_epoch = state_dict["last_epoch"]
        if isinstance(last_epoch, bool) or not isinstance(last_epoch, numbers.Integral):
            raise ValueError(f"LambdaLR state_dict's 'last_epoch' must be an integer, got {last_epoch!r}")
        self.base_lrs = list(state_dict["base_lrs"])
        self.last_epoch = int(last_epoch)
        self._last_lr = list(state_dict["_last_lr"])


def _is_real(value):
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


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
