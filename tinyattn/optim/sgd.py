"""Stochastic gradient descent, with momentum, Nesterov momentum and L2 weight decay."""

from .optimizer import Optimizer, grad_of, non_negative


class SGD(Optimizer):
    """``SGD(params, lr, momentum=0.0, weight_decay=0.0, nesterov=False)``, PyTorch's update (dampening 0).

    For each parameter ``p`` with gradient ``g``, step ``t`` (``b`` the momentum buffer)::

        g = g + weight_decay * p
        b = g                          if t == 1
        b = momentum * b + g           otherwise
        g = g + momentum * b           if nesterov, else g = b   (only when momentum != 0)
        p = p - lr * g

    >>> import tinyattn as ta
    >>> from tinyattn import optim
    >>> w = ta.tensor([1.0, -2.0], requires_grad=True)
    >>> opt = optim.SGD([w], lr=0.1, momentum=0.9)
    >>> (w * w).sum().backward()
    >>> opt.step()
    >>> w.data
    array([ 0.8, -1.6], dtype=float32)
    """

    def __init__(self, params, lr, momentum=0.0, weight_decay=0.0, nesterov=False):
        defaults = dict(lr=lr, momentum=momentum, weight_decay=weight_decay, nesterov=nesterov)
        super().__init__(params, defaults)

    def _check(self, group):
        non_negative(group["lr"], "learning rate", "lr")
        non_negative(group["momentum"], "momentum value", "momentum")
        non_negative(group["weight_decay"], "weight_decay value", "weight_decay")
        if group["nesterov"] and group["momentum"] <= 0.0:
            raise ValueError(f"Nesterov momentum requires a momentum > 0, got momentum={group['momentum']}")

    def step(self, closure=None):
        """One update of every parameter that has a gradient; returns ``closure()``'s loss if given."""
        loss = None if closure is None else closure()
        for group in self.param_groups:
            # Python floats, so that a float32 parameter is never promoted by a NumPy float64 scalar
            lr, momentum, weight_decay = float(group["lr"]), float(group["momentum"]), float(group["weight_decay"])
            for p in group["params"]:
                if p._grad is None:
                    continue
                grad = grad_of(p)
                if weight_decay != 0:
                    grad = grad + weight_decay * p._data
                if momentum != 0:
                    state = self.state.setdefault(p, {})
                    buf = state.get("momentum_buffer")
                    if buf is None:
                        state["momentum_buffer"] = buf = grad.copy()
                    else:
                        buf *= momentum
                        buf += grad
                    grad = grad + momentum * buf if group["nesterov"] else buf
                p._data -= lr * grad
        return loss
