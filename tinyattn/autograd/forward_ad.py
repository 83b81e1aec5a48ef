"""Forward-mode automatic differentiation, with ``torch.autograd.forward_ad``'s API.

A *dual tensor* carries, beside its value (the primal), a *tangent* of the same shape: the
direction ``v`` along which to differentiate. Every operation on dual tensors computes its
output's tangent with its JVP rule (written beside its backward, in ``tinyattn.ops``), so one
forward pass gives ``J v``, the Jacobian-vector product, without building the Jacobian:

    with dual_level():
        y = f(make_dual(x, v))
        J_v = unpack_dual(y).tangent

Levels nest: each ``dual_level`` opens a new one, and tangents of different levels never mix
(a function differentiated inside another sees its own level only), so forward over forward
gives second derivatives. Rules run as ordinary operations, so a gradient taken with
``ta.autograd.grad`` inside a level carries a tangent too (forward over reverse), and a tangent
can be differentiated by reverse mode (reverse over forward). While a level is open a compiled module
runs its reference forward (``ta.compile``'s fused nodes have no JVP rules).

>>> import numpy as np
>>> import tinyattn as ta
>>> import tinyattn.autograd.forward_ad as fwAD
>>> x = ta.tensor(np.array([0.0, 1.0, 2.0]))
>>> with fwAD.dual_level():
...     y = fwAD.make_dual(x, ta.ones(3, dtype=ta.float64)).exp()   # d eˣ = eˣ·dx
...     primal, tangent = fwAD.unpack_dual(y)
>>> tangent.numpy().round(4).tolist()
[1.0, 2.7183, 7.3891]
"""

import collections
import itertools

from .. import ops
from ..tensor import _DUAL_LEVELS, Tensor

_NEW_LEVELS = itertools.count()  # a level's number is never reused: a stale tangent never looks current

UnpackedDualTensor = collections.namedtuple("UnpackedDualTensor", ["primal", "tangent"])


def enter_dual_level():
    """Open a new level, nested in any open one, and return its number (PyTorch's ``enter_dual_level``);
    ``exit_dual_level`` closes it. ``dual_level`` is the context manager that does both."""
    level = next(_NEW_LEVELS)
    _DUAL_LEVELS.append(level)
    return level


def exit_dual_level(*, level=None):
    """Close the innermost level (``level``, when given, must be it): its tangents are forgotten."""
    if not _DUAL_LEVELS:
        raise RuntimeError("exit_dual_level: no forward AD level is open")
    innermost = _DUAL_LEVELS[-1]
    if level is not None and level != innermost:
        raise RuntimeError(f"exit_dual_level: level {level} is not the innermost open level ({innermost}); "
                           "levels close in the reverse order of their opening")
    _DUAL_LEVELS.pop()


class dual_level:
    """Context manager: a forward AD level open inside, closed on exit; ``as`` gives its number.

    >>> import tinyattn as ta
    >>> import tinyattn.autograd.forward_ad as fwAD
    >>> with fwAD.dual_level():
    ...     x = fwAD.make_dual(ta.tensor([3.0]), ta.tensor([1.0]))
    ...     fwAD.unpack_dual(x * x).tangent                        # d(x²) = 2x·dx
    tensor([6.])
    >>> fwAD.unpack_dual(x).tangent is None                        # the level is closed
    True
    """

    def __enter__(self):
        self.level = enter_dual_level()
        return self.level

    def __exit__(self, *exc):
        exit_dual_level(level=self.level)


def _level(level):
    """``level``, or the innermost open level when it is ``None`` (``None`` if none is open)."""
    if level is None:
        return _DUAL_LEVELS[-1] if _DUAL_LEVELS else None
    return level


def make_dual(tensor, tangent, *, level=None):
    """A new tensor with ``tensor``'s value (a differentiable alias of it: gradients flow back to ``tensor``)
    and ``tangent`` as its tangent at ``level`` (the innermost open level by default). ``tangent`` has the
    tensor's shape, dtype and device; tangents of outer levels that ``tensor`` has are kept.

    >>> import tinyattn as ta
    >>> import tinyattn.autograd.forward_ad as fwAD
    >>> with fwAD.dual_level():
    ...     x = fwAD.make_dual(ta.tensor([1.0, 2.0]), ta.tensor([1.0, 2.0]))
    ...     [round(v, 4) for v in fwAD.unpack_dual(x.sin()).tangent.tolist()]    # cos(x)·dx
    [0.5403, -0.8323]
    >>> fwAD.make_dual(ta.tensor([1.0]), ta.tensor([1.0]))                  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    RuntimeError: make_dual: no forward AD level is open; ...
    """
    for name, t in (("tensor", tensor), ("tangent", tangent)):
        if not isinstance(t, Tensor):
            raise TypeError(f"make_dual: {name} must be a Tensor, got {type(t).__name__}")
    level = _level(level)
    if level is None:
        raise RuntimeError("make_dual: no forward AD level is open; call it inside `with forward_ad.dual_level():`")
    if level not in _DUAL_LEVELS:
        raise RuntimeError(f"make_dual: level {level} is not open (open levels: {_DUAL_LEVELS})")
    if tensor.dtype.kind not in "fc":
        raise TypeError(f"make_dual: the tensor must be floating-point to carry a tangent, got dtype {tensor.dtype}")
    for what, mine, theirs in (("shape", tangent.shape, tensor.shape), ("dtype", tangent.dtype, tensor.dtype),
                               ("device", tangent.device, tensor.device)):
        if mine != theirs:
            raise ValueError(f"make_dual: the tangent's {what} {mine} differs from the tensor's {what} {theirs}; "
                             "a tangent has the shape, dtype and device of its primal")
    if tensor._tangents and level in tensor._tangents:
        raise RuntimeError(f"make_dual: the tensor already has a tangent at level {level}; unpack_dual it first "
                           "and make a dual of its primal")
    dual = ops.reshape(tensor, tensor.shape)
    dual._tangents = {**(dual._tangents or {}), level: tangent}
    return dual


def unpack_dual(tensor, *, level=None):
    """``UnpackedDualTensor(primal, tangent)``: ``primal`` a differentiable alias of ``tensor`` without a
    tangent at ``level`` (the innermost open one by default), ``tangent`` the tangent there, or ``None``.

    >>> import tinyattn as ta
    >>> import tinyattn.autograd.forward_ad as fwAD
    >>> with fwAD.dual_level():
    ...     y = fwAD.make_dual(ta.tensor([2.0]), ta.tensor([1.0])) ** 3
    ...     fwAD.unpack_dual(y)
    UnpackedDualTensor(primal=tensor([8.]), tangent=tensor([12.]))
    """
    level = _level(level)
    tangents = tensor._tangents
    if level is None or not tangents or level not in tangents or level not in _DUAL_LEVELS:
        return UnpackedDualTensor(tensor, None)
    primal = ops.reshape(tensor, tensor.shape)
    primal._tangents = {k: t for k, t in (primal._tangents or {}).items() if k != level} or None
    return UnpackedDualTensor(primal, tangents[level])


__all__ = ["dual_level", "enter_dual_level", "exit_dual_level", "make_dual", "unpack_dual", "UnpackedDualTensor"]
