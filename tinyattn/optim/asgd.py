"""Averaged SGD (Polyak & Juditsky, 1992), with the decaying rate of Bottou's SGD."""

from .. import backend
from .optimizer import Optimizer, grad_of, non_negative


class ASGD(Optimizer):
    """``ASGD(params, lr=1e-2, lambd=1e-4, alpha=0.75, t0=1e6, weight_decay=0, *, maximize=False)``, PyTorch's
    update.

    For each parameter ``p`` with gradient ``g``, at its step ``t``, with ``eta`` (``lr`` at first) and ``mu``
    (1 at first) from the step before::

        g = g + weight_decay * p
        p = p * (1 - lambd * eta) - eta * g
        ax = ax + mu * (p - ax)                  (the running average; ax = p while mu is 1)
        eta = lr / (1 + lambd * lr * t) ** alpha
        mu = 1 / max(1, t - t0)                  (averaging starts after t0 steps)

    ``state[p]`` holds ``"step"``, ``"eta"`` and ``"mu"`` (floats) and ``"ax"``, the average to evaluate with.

    >>> import tinyattn as ta
    >>> from tinyattn import optim
    >>> w = ta.tensor([1.0, -2.0], requires_grad=True)
    >>> opt = optim.ASGD([w], lr=0.1)
    >>> (w * w).sum().backward()
    >>> opt.step()
    >>> w.data.round(4), opt.state[w]["ax"].round(4)
    (array([ 0.8, -1.6], dtype=float32), array([ 0.8, -1.6], dtype=float32))
    """

    def __init__(self, params, lr=1e-2, lambd=1e-4, alpha=0.75, t0=1e6, weight_decay=0, *, maximize=False):
        super().__init__(params, dict(lr=lr, lambd=lambd, alpha=alpha, t0=t0, weight_decay=weight_decay,
                                      maximize=maximize))

    def _check(self, group):
        non_negative(group["lr"], "learning rate", "lr")
        non_negative(group["weight_decay"], "weight_decay value", "weight_decay")

    def step(self, closure=None):
        """One update of every parameter that has a gradient; returns ``closure()``'s loss if given."""
        loss = None if closure is None else closure()
        for group in self.param_groups:
            lr, lambd, alpha, t0 = (float(group[k]) for k in ("lr", "lambd", "alpha", "t0"))
            weight_decay = float(group["weight_decay"])
            for p in group["params"]:
                if p._grad is None:
                    continue
                state = self.state.setdefault(p, {})
                if not state:
                    state.update(step=0, eta=lr, mu=1.0, ax=backend.namespace(p._data).zeros_like(p._data))
                state["step"] += 1
                grad = -grad_of(p) if group["maximize"] else grad_of(p)
                if weight_decay != 0:
                    grad = grad + weight_decay * p._data
                eta, mu, ax = float(state["eta"]), float(state["mu"]), state["ax"]
                p._data *= 1 - lambd * eta
                p._data -= eta * grad
                if mu != 1:
                    ax += (p._data - ax) * mu
                else:
                    ax[...] = p._data
                state["eta"] = lr / ((1 + lambd * lr * state["step"]) ** alpha)
                state["mu"] = 1 / max(1, state["step"] - t0)
        return loss
