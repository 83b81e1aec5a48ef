"""Helpers that act on a model's parameters: gradient clipping.

>>> import tinyattn as ta
>>> w = ta.tensor([3.0, 4.0], requires_grad=True)
>>> (w * ta.tensor([1.0, 1.0])).backward(ta.tensor([3.0, 4.0]))
>>> clip_grad_norm_([w], max_norm=1.0)
5.0
>>> w.grad.round(4)
array([0.6, 0.8], dtype=float32)
"""

import math

from .. import backend
from .. import checks as check
from ..engine import Tensor


def clip_grad_norm_(parameters, max_norm, norm_type=2.0):
    """Scale all gradients together so that their joint norm is at most ``max_norm``.

    The norm is taken over every gradient as if concatenated into one vector (``norm_type``
    2 or ``inf``). Each gradient is multiplied in place by ``min(1, max_norm / (norm + 1e-6))``,
    as in PyTorch. Returns the norm before clipping, as a Python float.

    ``parameters``: a tensor or an iterable of tensors (those without a gradient are skipped); ``max_norm``: the
    largest norm allowed; ``norm_type``: ``2.0`` or ``float("inf")``.

    >>> import numpy as np
    >>> import tinyattn as ta
    >>> w = ta.tensor([0.0, 0.0], requires_grad=True)
    >>> w.grad = np.array([3.0, 4.0], dtype=np.float32)
    >>> ta.nn.utils.clip_grad_norm_([w], max_norm=1.0)
    5.0
    >>> w.grad.round(3)
    array([0.6, 0.8], dtype=float32)
    """
    check.real("clip_grad_norm_", "max_norm", max_norm)  # a NaN would turn every gradient into NaN
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    grads = [p._grad for p in parameters if p._grad is not None]
    if not grads:
        return 0.0
    norm_type = float(norm_type)
    if norm_type not in (2.0, math.inf):
        raise ValueError(f"clip_grad_norm_: norm_type must be 2.0 or inf, got {norm_type}")
    # one norm per gradient on its device, stacked, reduced there: one host copy per device, not per gradient
    per_device = {}
    for g in grads:
        per_device.setdefault(backend.device_of(g), []).append(g)
    device_norms = []
    for same_device in per_device.values():
        xp = backend.namespace(same_device[0])
        if norm_type == math.inf:
            device_norms.append(float(xp.stack([xp.abs(g).max() for g in same_device]).max()))
        else:
            norms = xp.stack([xp.sqrt((g * g).sum()) for g in same_device])  # (number of gradients,)
            device_norms.append(float(xp.sqrt((norms * norms).sum())))
    total = max(device_norms) if norm_type == math.inf else math.hypot(*device_norms)
    coefficient = max_norm / (total + 1e-6)
    if coefficient < 1.0:  # min(1, coefficient): at 1 the gradients stay as they are
        for g in grads:
            g *= coefficient
    return total
