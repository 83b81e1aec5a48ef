"""Adam's relatives: Adamax (Kingma & Ba, 2015), NAdam (Dozat, 2016) and RAdam (Liu et al., 2020), PyTorch's
single-tensor updates. Each keeps Adam's first moment ``exp_avg = lerp(exp_avg, g, 1 - beta1)``."""

import math

from .. import backend
from .adam import _lerp_, check_adam_like
from .optimizer import Optimizer, grad_of, non_negative


def _moments(optimizer, p, *names):
    """``state[p]`` (``"step"`` 0 and a zero array per name, made at the parameter's first step)."""
    state = optimizer.state.setdefault(p, {})
    if not state:
        xp = backend.namespace(p._data)
        state["step"] = 0
        state.update({name: xp.zeros_like(p._data) for name in names})
    return state


def _decayed_grad(p, group, lr, weight_decay):
    """The gradient (negated to maximize); weight decay added to it (L2), or applied to ``p`` directly
    (``decoupled_weight_decay``, as AdamW)."""
    grad = -grad_of(p) if group["maximize"] else grad_of(p)
    if weight_decay != 0:
        if group.get("decoupled_weight_decay", False):
            p._data *= 1 - lr * weight_decay
        else:
            grad = grad + weight_decay * p._data
    return grad


class Adamax(Optimizer):
    """``Adamax(params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, *, maximize=False)``: Adam with the
    infinity norm in place of the second moment.

    For each parameter ``p`` with gradient ``g``, at its step ``t``::

        g = g + weight_decay * p
        m = lerp(m, g, 1 - beta1)                          ("exp_avg")
        u = max(beta2 * u, |g| + eps)                      ("exp_inf")
        p = p - lr / (1 - beta1**t) * m / u

    >>> import tinyattn as ta
    >>> from tinyattn import optim
    >>> w = ta.tensor([1.0, -2.0], requires_grad=True)
    >>> opt = optim.Adamax([w], lr=0.1)
    >>> (w * w).sum().backward()
    >>> opt.step()
    >>> w.data.round(4)
    array([ 0.9, -1.9], dtype=float32)
    """

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, *, maximize=False):
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                                      maximize=maximize))

    def _check(self, group):
        check_adam_like(group)

    def step(self, closure=None):
        """One update of every parameter that has a gradient; returns ``closure()``'s loss if given."""
        loss = None if closure is None else closure()
        for group in self.param_groups:
            lr, eps, weight_decay = float(group["lr"]), float(group["eps"]), float(group["weight_decay"])
            beta1, beta2 = (float(beta) for beta in group["betas"])
            for p in group["params"]:
                if p._grad is None:
                    continue
                state = _moments(self, p, "exp_avg", "exp_inf")
                state["step"] += 1
                grad = _decayed_grad(p, group, lr, weight_decay)
                _lerp_(state["exp_avg"], grad, 1 - beta1)
                xp = backend.namespace(p._data)
                state["exp_inf"][...] = xp.maximum(state["exp_inf"] * beta2, xp.abs(grad) + eps)
                clr = lr / (1 - beta1 ** state["step"])
                p._data -= clr * (state["exp_avg"] / state["exp_inf"])
        return loss


class NAdam(Optimizer):
    """``NAdam(params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, momentum_decay=4e-3,
    decoupled_weight_decay=False, *, maximize=False)``: Adam with Nesterov momentum and a momentum schedule.

    For each parameter ``p`` with gradient ``g``, at its step ``t``::

        mu_t = beta1 * (1 - 0.5 * 0.96 ** (t * momentum_decay))
        mu_product = mu_1 * ... * mu_t                     ("mu_product", a float)
        m = lerp(m, g, 1 - beta1);  v = beta2 * v + (1 - beta2) * g * g
        denom = sqrt(v / (1 - beta2**t)) + eps
        p = p - lr * (1 - mu_t) / (1 - mu_product) * g / denom
              - lr * mu_{t+1} / (1 - mu_product * mu_{t+1}) * m / denom

    The step's scalars are Python floats (float64), as torch's are when its default dtype is float64.

    >>> import tinyattn as ta
    >>> from tinyattn import optim
    >>> w = ta.tensor([1.0, -2.0], requires_grad=True)
    >>> opt = optim.NAdam([w], lr=0.1)
    >>> (w * w).sum().backward()
    >>> opt.step()
    >>> w.data.round(4)
    array([ 0.8944, -1.8944], dtype=float32)
    """

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, momentum_decay=4e-3,
                 decoupled_weight_decay=False, *, maximize=False):
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                                      momentum_decay=momentum_decay, decoupled_weight_decay=decoupled_weight_decay,
                                      maximize=maximize))

    def _check(self, group):
        check_adam_like(group)
        non_negative(group["momentum_decay"], "momentum_decay value", "momentum_decay")

    def step(self, closure=None):
        """One update of every parameter that has a gradient; returns ``closure()``'s loss if given."""
        loss = None if closure is None else closure()
        for group in self.param_groups:
            lr, eps, weight_decay = float(group["lr"]), float(group["eps"]), float(group["weight_decay"])
            beta1, beta2 = (float(beta) for beta in group["betas"])
            momentum_decay = float(group["momentum_decay"])
            for p in group["params"]:
                if p._grad is None:
                    continue
                state = _moments(self, p, "exp_avg", "exp_avg_sq")
                state.setdefault("mu_product", 1.0)
                state["step"] += 1
                step = state["step"]
                bias_correction2 = 1 - beta2**step
                grad = _decayed_grad(p, group, lr, weight_decay)
                mu = beta1 * (1.0 - 0.5 * 0.96 ** (step * momentum_decay))
                mu_next = beta1 * (1.0 - 0.5 * 0.96 ** ((step + 1) * momentum_decay))
                state["mu_product"] *= mu
                mu_product = state["mu_product"]
                exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
                _lerp_(exp_avg, grad, 1 - beta1)
                exp_avg_sq *= beta2
                exp_avg_sq += (1 - beta2) * grad * grad
                denom = backend.namespace(p._data).sqrt(exp_avg_sq / bias_correction2) + eps
                p._data += (-lr * (1.0 - mu) / (1.0 - mu_product)) * (grad / denom)
                p._data += (-lr * mu_next / (1.0 - mu_product * mu_next)) * (exp_avg / denom)
        return loss


class RAdam(Optimizer):
    """``RAdam(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, decoupled_weight_decay=False, *,
    maximize=False)``: Adam whose adaptive step is rectified while the second moment's estimate is too young.

    For each parameter ``p`` with gradient ``g``, at its step ``t``::

        m = lerp(m, g, 1 - beta1);  v = beta2 * v + (1 - beta2) * g * g
        rho_inf = 2 / (1 - beta2) - 1;  rho_t = rho_inf - 2 t beta2**t / (1 - beta2**t)
        m_hat = m / (1 - beta1**t)
        p = p - lr * m_hat * r_t * sqrt(1 - beta2**t) / (sqrt(v) + eps)      if rho_t > 5
        p = p - lr * m_hat                                                     otherwise (SGD with momentum)
        r_t = sqrt((rho_t - 4)(rho_t - 2) rho_inf / ((rho_inf - 4)(rho_inf - 2) rho_t))

    >>> import tinyattn as ta
    >>> from tinyattn import optim
    >>> w = ta.tensor([1.0, -2.0], requires_grad=True)
    >>> opt = optim.RAdam([w], lr=0.1)
    >>> (w * w).sum().backward()
    >>> opt.step()
    >>> w.data.round(4)                # rho_1 = 1: a plain momentum step, lr * g
    array([ 0.8, -1.6], dtype=float32)
    """

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, decoupled_weight_decay=False,
                 *, maximize=False):
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                                      decoupled_weight_decay=decoupled_weight_decay, maximize=maximize))

    def _check(self, group):
        check_adam_like(group)

    def step(self, closure=None):
        """One update of every parameter that has a gradient; returns ``closure()``'s loss if given."""
        loss = None if closure is None else closure()
        for group in self.param_groups:
            lr, eps, weight_decay = float(group["lr"]), float(group["eps"]), float(group["weight_decay"])
            beta1, beta2 = (float(beta) for beta in group["betas"])
            for p in group["params"]:
                if p._grad is None:
                    continue
                state = _moments(self, p, "exp_avg", "exp_avg_sq")
                state["step"] += 1
                step, exp_avg, exp_avg_sq = state["step"], state["exp_avg"], state["exp_avg_sq"]
                grad = _decayed_grad(p, group, lr, weight_decay)
                _lerp_(exp_avg, grad, 1 - beta1)
                exp_avg_sq *= beta2
                exp_avg_sq += (1 - beta2) * grad * grad
                bias_correction1 = 1 - beta1**step
                bias_correction2 = 1 - beta2**step
                bias_corrected_exp_avg = exp_avg / bias_correction1
                rho_inf = 2 / (1 - beta2) - 1
                rho_t = rho_inf - 2 * step * (beta2**step) / bias_correction2
                if rho_t > 5.0:
                    rect = math.sqrt((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t))
                    adaptive_lr = math.sqrt(bias_correction2) / (backend.namespace(p._data).sqrt(exp_avg_sq) + eps)
                    p._data -= bias_corrected_exp_avg * lr * adaptive_lr * rect
                else:
                    p._data -= bias_corrected_exp_avg * lr
        return loss
