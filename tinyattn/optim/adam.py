"""Adam (Kingma & Ba, 2015) and AdamW (Loshchilov & Hutter, 2019), PyTorch's single-tensor updates."""

import math

from .. import backend
from .optimizer import Optimizer, grad_of, non_negative


def check_adam_like(group):
    """The hyperparameters Adam and its relatives share, checked as PyTorch checks them: ``lr``, ``eps`` and
    ``weight_decay`` non-negative, ``betas`` two numbers in ``[0, 1)``."""
    non_negative(group["lr"], "learning rate", "lr")
    non_negative(group["eps"], "epsilon value", "eps")
    if len(group["betas"]) != 2:
        raise ValueError(f"Invalid betas: {group['betas']} (expected two numbers, (beta1, beta2))")
    for i, beta in enumerate(group["betas"]):
        non_negative(beta, f"beta parameter at index {i}", "beta")
        if not 0.0 <= beta < 1.0:
            raise ValueError(f"Invalid beta parameter at index {i}: {beta} (expected 0 <= beta < 1)")
    non_negative(group["weight_decay"], "weight_decay value", "weight_decay")


class Adam(Optimizer):
    """``Adam(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0)``.

    For each parameter ``p`` with gradient ``g``, at its step ``t`` (1, 2, ...)::

        g = g + weight_decay * p                       (L2 penalty, added to the gradient)
        m = beta1 * m + (1 - beta1) * g                (first moment, "exp_avg")
        v = beta2 * v + (1 - beta2) * g * g            (second moment, "exp_avg_sq")
        p = p - lr / (1 - beta1**t) * m / (sqrt(v) / sqrt(1 - beta2**t) + eps)

    computed in the same order as ``torch.optim.Adam(foreach=False)``, so the two agree to
    rounding. ``state[p]`` holds ``"step"`` (an int), ``"exp_avg"`` and ``"exp_avg_sq"``.

    >>> import tinyattn as ta
    >>> from tinyattn import optim
    >>> w = ta.tensor([1.0, -2.0], requires_grad=True)
    >>> opt = optim.Adam([w], lr=0.1)
    >>> (w * w).sum().backward()
    >>> opt.step()
    >>> w.data.round(4)            # the first Adam step moves each weight by about lr
    array([ 0.9, -1.9], dtype=float32)
    """

    decoupled_weight_decay = False

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0):
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay)
        super().__init__(params, defaults)

    def _check(self, group):
        check_adam_like(group)

    def step(self, closure=None):
        """One update of every parameter that has a gradient; returns ``closure()``'s loss if given."""
        loss = None if closure is None else closure()
        for group in self.param_groups:
            # Python floats, so that a float32 parameter is never promoted by a NumPy float64 scalar
            lr, eps, weight_decay = float(group["lr"]), float(group["eps"]), float(group["weight_decay"])
            beta1, beta2 = (float(beta) for beta in group["betas"])
            for p in group["params"]:
                if p._grad is None:
                    continue
                state = self.state.setdefault(p, {})
                if not state:
                    xp = backend.namespace(p._data)
                    state["step"] = 0
                    state["exp_avg"] = xp.zeros_like(p._data)
                    state["exp_avg_sq"] = xp.zeros_like(p._data)
                state["step"] += 1
                step, exp_avg, exp_avg_sq = state["step"], state["exp_avg"], state["exp_avg_sq"]

                grad = grad_of(p)
                if weight_decay != 0:
                    if self.decoupled_weight_decay:
                        p._data *= 1 - lr * weight_decay
                    else:
                        grad = grad + weight_decay * p._data

                _lerp_(exp_avg, grad, 1 - beta1)
                exp_avg_sq *= beta2
                exp_avg_sq += (1 - beta2) * grad * grad

                bias_correction1 = 1 - beta1**step
                bias_correction2 = 1 - beta2**step
                step_size = lr / bias_correction1
                denom = backend.namespace(exp_avg_sq).sqrt(exp_avg_sq) / math.sqrt(bias_correction2) + eps
                p._data -= step_size * exp_avg / denom
        return loss


class AdamW(Adam):
    """``AdamW(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)``: decoupled weight decay.

    Adam without the L2 term in the gradient; instead, before the Adam update, each step
    shrinks the weights directly: ``p = p * (1 - lr * weight_decay)``.

    >>> import tinyattn as ta
    >>> from tinyattn import optim
    >>> w = ta.tensor([1.0, -2.0], requires_grad=True)
    >>> opt = optim.AdamW([w], lr=0.1, weight_decay=0.5)
    >>> w.grad = ta.zeros(2).data              # no gradient signal: only the decay acts
    >>> opt.step()
    >>> w.data
    array([ 0.95, -1.9 ], dtype=float32)
    """

    decoupled_weight_decay = True

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01):
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay)


def _lerp_(start, end, weight):
    """``start += weight * (end - start)`` in place, from the nearer end, as ``torch.lerp_`` computes it."""
    if abs(weight) < 0.5:
        start += weight * (end - start)
    else:
        start[...] = end - (end - start) * (1 - weight)
