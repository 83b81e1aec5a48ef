"""Muon (Jordan et al., 2024): momentum SGD whose update for a weight matrix is orthogonalised by a Newton–Schulz
iteration, PyTorch's form."""

import math

from .. import backend
from .adam import _lerp_
from .optimizer import Optimizer, grad_of, non_negative


class Muon(Optimizer):
    """``Muon(params, lr=1e-3, weight_decay=0.1, momentum=0.95, nesterov=True,
    ns_coefficients=(3.4445, -4.775, 2.0315), eps=1e-7, ns_steps=5, adjust_lr_fn=None)``, for 2-D parameters only.

    For each weight matrix ``p`` (shape ``(A, B)``) with gradient ``g``::

        buf = lerp(buf, g, 1 - momentum)                     ("momentum_buffer")
        u = lerp(g, buf, momentum) if nesterov else buf
        u = NS(u):  X = u / max(‖u‖_F, eps)  (transposed if A > B), then ns_steps times
                    G = X Xᵀ;   X = a X + (b G + c G G) X                  ((a, b, c) = ns_coefficients)
        p = p * (1 - lr * weight_decay) - lr * ratio * u

    ``NS`` drives every singular value of ``u`` towards 1 (an approximate ``U Vᵀ`` of its SVD). ``ratio`` is
    ``sqrt(max(1, A / B))`` (``adjust_lr_fn=None`` or ``"original"``) or ``0.2 sqrt(max(A, B))``
    (``"match_rms_adamw"``, an update of AdamW's RMS). torch runs the iteration in bfloat16; here it runs in the
    parameter's dtype, so the updates agree with torch's to bfloat16's precision (a few percent after the
    iterations), not to rounding (they do to rounding where torch's iteration is run in float64).

    >>> import numpy as np
    >>> import tinyattn as ta
    >>> from tinyattn import optim
    >>> w = ta.zeros(2, 3, requires_grad=True)
    >>> opt = optim.Muon([w], lr=0.1, weight_decay=0.0)
    >>> w.grad = np.array([[2.0, 0.0, 0.0], [0.0, 0.5, 0.0]], dtype=np.float32)
    >>> opt.step()
    >>> np.abs(w.data).max(axis=1).round(2)        # both rows move alike, whatever their gradient's size
    array([0.07, 0.07], dtype=float32)
    """

    def __init__(self, params, lr=1e-3, weight_decay=0.1, momentum=0.95, nesterov=True,
                 ns_coefficients=(3.4445, -4.775, 2.0315), eps=1e-7, ns_steps=5, adjust_lr_fn=None):
        super().__init__(params, dict(lr=lr, weight_decay=weight_decay, momentum=momentum, nesterov=nesterov,
                                      ns_coefficients=tuple(ns_coefficients), eps=eps, ns_steps=ns_steps,
                                      adjust_lr_fn=adjust_lr_fn))
        for group in self.param_groups:
            for p in group["params"]:
                if p.ndim != 2:
                    raise ValueError(f"Muon only supports 2D parameters whereas we found a parameter with size: "
                                     f"{p.shape}")

    def _check(self, group):
        non_negative(group["lr"], "learning rate", "lr")
        non_negative(group["momentum"], "momentum value", "momentum")
        non_negative(group["weight_decay"], "weight_decay value", "weight_decay")
        if group["adjust_lr_fn"] not in (None, "original", "match_rms_adamw"):
            raise ValueError(f"Adjust learning rate function {group['adjust_lr_fn']} is not supported (expected "
                             "None, 'original' or 'match_rms_adamw')")
        if len(group["ns_coefficients"]) != 3:
            raise ValueError(f"ns_coefficients must be three numbers (a, b, c), got {group['ns_coefficients']}")
        if not 0 <= group["ns_steps"] < 100:
            raise ValueError(f"ns_steps must be in [0, 100), got {group['ns_steps']}")

    def step(self, closure=None):
        """One update of every parameter that has a gradient; returns ``closure()``'s loss if given."""
        loss = None if closure is None else closure()
        for group in self.param_groups:
            lr, weight_decay, momentum = float(group["lr"]), float(group["weight_decay"]), float(group["momentum"])
            for p in group["params"]:
                if p._grad is None:
                    continue
                grad = grad_of(p)
                state = self.state.setdefault(p, {})
                if "momentum_buffer" not in state:
                    state["momentum_buffer"] = backend.namespace(grad).zeros_like(grad)
                buf = state["momentum_buffer"]
                _lerp_(buf, grad, 1 - momentum)
                update = grad + momentum * (buf - grad) if group["nesterov"] else buf
                update = newton_schulz(update, group["ns_coefficients"], group["ns_steps"], float(group["eps"]))
                p._data *= 1 - lr * weight_decay
                p._data -= _adjusted_lr(lr, group["adjust_lr_fn"], p.shape) * update
        return loss


def newton_schulz(matrix, ns_coefficients, ns_steps, eps):
    """The quintic Newton–Schulz iteration of ``Muon``: ``matrix`` with its singular values moved towards 1.

    >>> import numpy as np
    >>> from tinyattn.optim.muon import newton_schulz
    >>> u = newton_schulz(np.diag([3.0, 0.2]), (3.4445, -4.775, 2.0315), 5, 1e-7)
    >>> bool(np.all((np.diag(u) > 0.6) & (np.diag(u) < 1.2)))
    True
    """
    a, b, c = (float(v) for v in ns_coefficients)
    tall = matrix.shape[0] > matrix.shape[1]
    xp = backend.namespace(matrix)
    x = matrix.T if tall else matrix                              # (A', B'), A' <= B'
    x = x / max(float(xp.sqrt(xp.sum(x * x))), eps)
    for _ in range(ns_steps):
        gram = x @ x.T                                            # (A', A')
        x = a * x + (b * gram + c * (gram @ gram)) @ x
    return x.T if tall else x


def _adjusted_lr(lr, adjust_lr_fn, shape):
    rows, cols = shape[:2]
    if adjust_lr_fn is None or adjust_lr_fn == "original":
        return lr * math.sqrt(max(1, rows / cols))
    return lr * 0.2 * math.sqrt(max(rows, cols))
