"""Adagrad (Duchi et al., 2011) and Adadelta (Zeiler, 2012): per-coordinate rates from the gradients' squares."""

from .. import backend
from .optimizer import Optimizer, grad_of, non_negative


class Adagrad(Optimizer):
    """``Adagrad(params, lr=1e-2, lr_decay=0, weight_decay=0, initial_accumulator_value=0, eps=1e-10, *,
    maximize=False)``, PyTorch's update.

    For each parameter ``p`` with gradient ``g``, at its step ``t`` (1, 2, ...)::

        g = -g                                        (maximize)
        g = g + weight_decay * p
        sum = sum + g * g                             (starts at initial_accumulator_value)
        p = p - lr / (1 + (t - 1) * lr_decay) * g / (sqrt(sum) + eps)

    ``state[p]`` holds ``"step"`` and ``"sum"``.

    >>> import tinyattn as ta
    >>> from tinyattn import optim
    >>> w = ta.tensor([1.0, -2.0], requires_grad=True)
    >>> opt = optim.Adagrad([w], lr=0.1)
    >>> (w * w).sum().backward()
    >>> opt.step()
    >>> w.data.round(4)               # the first step moves each weight by lr, whatever its gradient's size
    array([ 0.9, -1.9], dtype=float32)
    """

    def __init__(self, params, lr=1e-2, lr_decay=0, weight_decay=0, initial_accumulator_value=0, eps=1e-10, *,
                 maximize=False):
        defaults = dict(lr=lr, lr_decay=lr_decay, weight_decay=weight_decay,
                        initial_accumulator_value=initial_accumulator_value, eps=eps, maximize=maximize)
        super().__init__(params, defaults)

    def _check(self, group):
        non_negative(group["lr"], "learning rate", "lr")
        non_negative(group["lr_decay"], "lr_decay value", "lr_decay")
        non_negative(group["weight_decay"], "weight_decay value", "weight_decay")
        non_negative(group["initial_accumulator_value"], "initial_accumulator_value value",
                     "initial_accumulator_value")
        non_negative(group["eps"], "epsilon value", "eps")

    def step(self, closure=None):
        """One update of every parameter that has a gradient; returns ``closure()``'s loss if given."""
        loss = None if closure is None else closure()
        for group in self.param_groups:
            lr, lr_decay, eps = float(group["lr"]), float(group["lr_decay"]), float(group["eps"])
            weight_decay = float(group["weight_decay"])
            for p in group["params"]:
                if p._grad is None:
                    continue
                state = self.state.setdefault(p, {})
                if not state:
                    state["step"] = 0
                    state["sum"] = backend.namespace(p._data).full_like(
                        p._data, float(group["initial_accumulator_value"]))
                state["step"] += 1
                grad = -grad_of(p) if group["maximize"] else grad_of(p)
                if weight_decay != 0:
                    grad = grad + weight_decay * p._data
                clr = lr / (1 + (state["step"] - 1) * lr_decay)
                state["sum"] += grad * grad
                std = backend.namespace(p._data).sqrt(state["sum"]) + eps
                p._data -= clr * (grad / std)
        return loss


class Adadelta(Optimizer):
    """``Adadelta(params, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0, *, maximize=False)``, PyTorch's update.

    For each parameter ``p`` with gradient ``g``::

        g = g + weight_decay * p
        square_avg = rho * square_avg + (1 - rho) * g * g
        delta = sqrt(acc_delta + eps) / sqrt(square_avg + eps) * g     (the step, in the parameter's units)
        acc_delta = rho * acc_delta + (1 - rho) * delta * delta
        p = p - lr * delta

    ``state[p]`` holds ``"step"``, ``"square_avg"`` and ``"acc_delta"``.

    >>> import tinyattn as ta
    >>> from tinyattn import optim
    >>> w = ta.tensor([1.0, -2.0], requires_grad=True)
    >>> opt = optim.Adadelta([w])
    >>> (w * w).sum().backward()
    >>> opt.step()
    >>> w.data.round(4)               # sqrt(eps) / sqrt(0.1) per unit of the gradient's sign: a careful start
    array([ 0.9968, -1.9968], dtype=float32)
    """

    def __init__(self, params, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0, *, maximize=False):
        super().__init__(params, dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay, maximize=maximize))

    def _check(self, group):
        non_negative(group["lr"], "learning rate", "lr")
        non_negative(group["rho"], "rho value", "rho")
        if group["rho"] > 1.0:
            raise ValueError(f"Invalid rho value: {group['rho']} (expected 0 <= rho <= 1)")
        non_negative(group["eps"], "epsilon value", "eps")
        non_negative(group["weight_decay"], "weight_decay value", "weight_decay")

    def step(self, closure=None):
        """One update of every parameter that has a gradient; returns ``closure()``'s loss if given."""
        loss = None if closure is None else closure()
        for group in self.param_groups:
            lr, rho, eps, weight_decay = (float(group[k]) for k in ("lr", "rho", "eps", "weight_decay"))
            for p in group["params"]:
                if p._grad is None:
                    continue
                xp = backend.namespace(p._data)
                state = self.state.setdefault(p, {})
                if not state:
                    state.update(step=0, square_avg=xp.zeros_like(p._data), acc_delta=xp.zeros_like(p._data))
                state["step"] += 1
                square_avg, acc_delta = state["square_avg"], state["acc_delta"]
                grad = -grad_of(p) if group["maximize"] else grad_of(p)
                if weight_decay != 0:
                    grad = grad + weight_decay * p._data
                square_avg *= rho
                square_avg += (1 - rho) * grad * grad
                std = xp.sqrt(square_avg + eps)
                delta = xp.sqrt(acc_delta + eps) / std * grad
                acc_delta *= rho
                acc_delta += (1 - rho) * delta * delta
                p._data -= lr * delta
        return loss
