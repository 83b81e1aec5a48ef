"""RMSprop (Hinton's lecture 6e; Graves, 2013, centered) and Rprop (Riedmiller & Braun, 1993)."""

from .. import backend
from .optimizer import Optimizer, grad_of, non_negative


class RMSprop(Optimizer):
    """``RMSprop(params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0, centered=False, *,
    maximize=False)``, PyTorch's update.

    For each parameter ``p`` with gradient ``g``::

        g = g + weight_decay * p
        square_avg = alpha * square_avg + (1 - alpha) * g * g
        avg = sqrt(square_avg - grad_avg**2) + eps    centered: grad_avg = lerp(grad_avg, g, 1 - alpha)
        avg = sqrt(square_avg) + eps                  otherwise
        buf = momentum * buf + g / avg;  p = p - lr * buf           with momentum > 0
        p = p - lr * g / avg                                          otherwise

    ``state[p]`` holds ``"step"``, ``"square_avg"``, and ``"momentum_buffer"`` / ``"grad_avg"`` when used.

    >>> import tinyattn as ta
    >>> from tinyattn import optim
    >>> w = ta.tensor([1.0, -2.0], requires_grad=True)
    >>> opt = optim.RMSprop([w], lr=0.01)
    >>> (w * w).sum().backward()
    >>> opt.step()
    >>> w.data.round(4)               # g / sqrt(0.01 g²) = 10 sign(g): the first step is 10 lr
    array([ 0.9, -1.9], dtype=float32)
    """

    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0, centered=False, *,
                 maximize=False):
        super().__init__(params, dict(lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay, momentum=momentum,
                                      centered=centered, maximize=maximize))

    def _check(self, group):
        for name, what in (("lr", "learning rate"), ("eps", "epsilon value"), ("momentum", "momentum value"),
                           ("weight_decay", "weight_decay value"), ("alpha", "alpha value")):
            non_negative(group[name], what, name)

    def step(self, closure=None):
        """One update of every parameter that has a gradient; returns ``closure()``'s loss if given."""
        loss = None if closure is None else closure()
        for group in self.param_groups:
            lr, alpha, eps = float(group["lr"]), float(group["alpha"]), float(group["eps"])
            weight_decay, momentum = float(group["weight_decay"]), float(group["momentum"])
            for p in group["params"]:
                if p._grad is None:
                    continue
                xp = backend.namespace(p._data)
                state = self.state.setdefault(p, {})
                if not state:
                    state.update(step=0, square_avg=xp.zeros_like(p._data))
                    if momentum > 0:
                        state["momentum_buffer"] = xp.zeros_like(p._data)
                    if group["centered"]:
                        state["grad_avg"] = xp.zeros_like(p._data)
                state["step"] += 1
                grad = -grad_of(p) if group["maximize"] else grad_of(p)
                if weight_decay != 0:
                    grad = grad + weight_decay * p._data
                square_avg = state["square_avg"]
                square_avg *= alpha
                square_avg += (1 - alpha) * grad * grad
                if group["centered"]:
                    grad_avg = state["grad_avg"]
                    grad_avg += (1 - alpha) * (grad - grad_avg)
                    avg = xp.sqrt(square_avg - grad_avg * grad_avg) + eps
                else:
                    avg = xp.sqrt(square_avg) + eps
                if momentum > 0:
                    buf = state["momentum_buffer"]
                    buf *= momentum
                    buf += grad / avg
                    p._data -= lr * buf
                else:
                    p._data -= lr * (grad / avg)
        return loss


class Rprop(Optimizer):
    """``Rprop(params, lr=1e-2, etas=(0.5, 1.2), step_sizes=(1e-6, 50), *, maximize=False)``: resilient
    backpropagation, which looks at the gradients' signs only.

    Each coordinate keeps its own step size (``lr`` at first). Where the gradient kept its sign since the last
    step, the step size grows by ``etaplus``; where it flipped, it shrinks by ``etaminus`` and that coordinate
    waits a step (its gradient is taken as 0); the step size stays within ``step_sizes``::

        p = p - sign(g) * step_size

    ``state[p]`` holds ``"step"``, ``"prev"`` (the last gradient used) and ``"step_size"``.

    >>> import tinyattn as ta
    >>> from tinyattn import optim
    >>> w = ta.tensor([1.0, -2.0], requires_grad=True)
    >>> opt = optim.Rprop([w], lr=0.1)
    >>> for _ in range(2):
    ...     opt.zero_grad()
    ...     (w * w).sum().backward()
    ...     opt.step()
    >>> w.data.round(4)               # 0.1, then 0.12: the sign held, the step grew
    array([ 0.78, -1.78], dtype=float32)
    """

    def __init__(self, params, lr=1e-2, etas=(0.5, 1.2), step_sizes=(1e-6, 50), *, maximize=False):
        super().__init__(params, dict(lr=lr, etas=tuple(etas), step_sizes=tuple(step_sizes), maximize=maximize))

    def _check(self, group):
        non_negative(group["lr"], "learning rate", "lr")
        etaminus, etaplus = group["etas"]
        if not 0.0 < etaminus < 1.0 < etaplus:
            raise ValueError(f"Invalid eta values: {etaminus}, {etaplus} (expected 0 < etaminus < 1 < etaplus)")

    def step(self, closure=None):
        """One update of every parameter that has a gradient; returns ``closure()``'s loss if given."""
        loss = None if closure is None else closure()
        for group in self.param_groups:
            etaminus, etaplus = (float(eta) for eta in group["etas"])
            step_size_min, step_size_max = (float(size) for size in group["step_sizes"])
            for p in group["params"]:
                if p._grad is None:
                    continue
                xp = backend.namespace(p._data)
                grad = -grad_of(p) if group["maximize"] else grad_of(p)
                state = self.state.setdefault(p, {})
                if not state:
                    state.update(step=0, prev=xp.zeros_like(p._data),
                                 step_size=xp.full_like(grad, float(group["lr"])))
                state["step"] += 1
                sign = xp.sign(grad * state["prev"])
                factor = xp.where(sign > 0, etaplus, xp.where(sign < 0, etaminus, 1.0)).astype(p._data.dtype)
                state["step_size"][...] = xp.clip(state["step_size"] * factor, step_size_min, step_size_max)
                grad = xp.where(sign < 0, 0, grad).astype(p._data.dtype)  # a flipped sign: wait one step
                p._data -= xp.sign(grad) * state["step_size"]
                state["prev"][...] = grad
        return loss
