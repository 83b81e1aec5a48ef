"""Adafactor (Shazeer & Stern, 2018), PyTorch's form: a second moment kept as row and column factors."""

import math

import numpy as np

from .. import backend
from .optimizer import Optimizer, _state_value, grad_of, non_negative


class Adafactor(Optimizer):
    """``Adafactor(params, lr=1e-2, beta2_decay=-0.8, eps=(None, 1e-3), d=1.0, weight_decay=0.0, *,
    maximize=False)``, PyTorch's update.

    For each parameter ``p`` with gradient ``g``, at its step ``t``, ``eps1`` (the dtype's epsilon by default) and
    ``eps2`` from ``eps``::

        beta2_t = 1 - t ** beta2_decay;    rho_t = min(lr, 1 / sqrt(t))
        alpha = max(eps2, RMS(p)) * rho_t                      (a step relative to the parameter's size)
        p = p * (1 - lr * weight_decay)
        matrices (and stacks of them): the variance is the outer product of running row and column means of g²
            row_var = lerp(row_var, mean(g², last axis), 1 - beta2_t)     ("row_var", shape (..., n, 1))
            col_var = lerp(col_var, mean(g², axis -2), 1 - beta2_t)       ("col_var", shape (..., 1, m))
            var = row_var @ col_var / max(mean(row_var), eps1)
        vectors: var = lerp(variance, g², 1 - beta2_t)                    ("variance")
        u = g / sqrt(max(var, eps1²))
        p = p - alpha / max(1, RMS(u) / d) * u                 (the update clipped to RMS d)

    No first moment is kept, so the memory is one row and one column per matrix.

    >>> import tinyattn as ta
    >>> from tinyattn import optim
    >>> w = ta.tensor([[1.0, -2.0], [0.5, 3.0]], requires_grad=True)
    >>> opt = optim.Adafactor([w], lr=0.1)
    >>> (w * w).sum().backward()
    >>> opt.step()
    >>> opt.state[w]["row_var"].shape, opt.state[w]["col_var"].shape
    ((2, 1), (1, 2))
    """

    def __init__(self, params, lr=1e-2, beta2_decay=-0.8, eps=(None, 1e-3), d=1.0, weight_decay=0.0, *,
                 maximize=False):
        super().__init__(params, dict(lr=lr, beta2_decay=beta2_decay, eps=tuple(eps), d=d, weight_decay=weight_decay,
                                      maximize=maximize))

    def _check(self, group):
        non_negative(group["lr"], "learning rate", "lr")
        if not 0.0 >= group["beta2_decay"]:
            raise ValueError(f"beta2_decay should be <= 0 but is: {group['beta2_decay']}")
        eps1, eps2 = group["eps"]
        if eps1 is not None and not 0.0 <= eps1:
            raise ValueError(f"epsilon1 should be >= 0 but is: {eps1}")
        if not 0.0 <= eps2:
            raise ValueError(f"epsilon2 should be >= 0 but is: {eps2}")
        if not 1.0 <= group["d"]:
            raise ValueError(f"Clipping threshold d should be >= 1 but is: {group['d']}")
        non_negative(group["weight_decay"], "weight_decay value", "weight_decay")

    def _loaded_state_value(self, value, param, index, name):
        shape = list(param.shape)
        if name == "row_var":
            shape[-1] = 1
        elif name == "col_var":
            shape[-2] = 1
        return _state_value(value, param, index, name, shape)

    def step(self, closure=None):
        """One update of every parameter that has a gradient; returns ``closure()``'s loss if given."""
        loss = None if closure is None else closure()
        for group in self.param_groups:
            lr, beta2_decay, d = float(group["lr"]), float(group["beta2_decay"]), float(group["d"])
            weight_decay, (eps1, eps2) = float(group["weight_decay"]), group["eps"]
            for p in group["params"]:
                if p._grad is None:
                    continue
                xp = backend.namespace(p._data)
                grad = -grad_of(p) if group["maximize"] else grad_of(p)
                state = self.state.setdefault(p, {})
                if not state:
                    state["step"] = 0
                    if grad.ndim > 1:
                        state["row_var"] = xp.zeros(grad.shape[:-1] + (1,), dtype=grad.dtype)
                        state["col_var"] = xp.zeros(grad.shape[:-2] + (1, grad.shape[-1]), dtype=grad.dtype)
                    else:
                        state["variance"] = xp.zeros_like(grad)
                epsilon1 = float(np.finfo(p._data.dtype).eps) if eps1 is None else float(eps1)
                state["step"] += 1
                step = float(state["step"])
                one_minus_beta2_t = step**beta2_decay
                rho_t = min(lr, 1 / (step**0.5))
                alpha = max(float(eps2), _rms(xp, p._data)) * rho_t
                if weight_decay != 0:
                    p._data *= 1 - lr * weight_decay
                if grad.ndim > 1:
                    row_var, col_var = state["row_var"], state["col_var"]
                    row_var += one_minus_beta2_t * ((grad * grad).mean(axis=-1, keepdims=True) - row_var)
                    col_var += one_minus_beta2_t * ((grad * grad).mean(axis=-2, keepdims=True) - col_var)
                    var_estimate = xp.matmul(row_var, col_var)           # (..., n, m)
                    var_estimate /= xp.maximum(row_var.mean(axis=-2, keepdims=True), epsilon1)
                else:
                    variance = state["variance"]
                    variance += one_minus_beta2_t * (grad * grad - variance)
                    var_estimate = variance.copy()
                update = grad / xp.sqrt(xp.maximum(var_estimate, epsilon1 * epsilon1))
                denom = max(1.0, _rms(xp, update) / d)
                p._data -= (alpha / denom) * update
        return loss


def _rms(xp, array):
    """The root mean square of ``array``'s elements, as a Python float: ``‖a‖₂ / sqrt(numel)``."""
    return float(xp.sqrt(xp.sum(array * array))) / math.sqrt(array.size)
