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

from .. import forward_mode, modes, ops
from ..engine import Tensor

UnpackedDualTensor = collections.namedtuple("UnpackedDualTensor", ["primal", "tangent"])
UnpackedDualTensor.__doc__ = """What ``unpack_dual`` returns: the named pair ``(primal, tangent)``.

``primal``: the tensor's value, with no tangent; ``tangent``: its tangent at the open level, or ``None``.

>>> import tinyattn as ta
>>> import tinyattn.autograd.forward_ad as fwAD
>>> with fwAD.dual_level():
...     y = fwAD.make_dual(ta.tensor([2.0]), ta.tensor([1.0])) ** 2
...     unpacked = fwAD.unpack_dual(y)
>>> unpacked.primal, unpacked.tangent
(tensor([4.]), tensor([4.]))
"""


class TangentSizeError(RuntimeError, ValueError):
    """``make_dual`` given a tangent of another shape than its tensor: a ``RuntimeError``, as PyTorch raises
    ("Trying to set a forward gradient that has a different size"), and a ``ValueError``, as it was here before."""


def enter_dual_level():
    """Open the forward AD level and return its index, 0, as PyTorch's ``enter_dual_level`` does (one level at a
    time: for a derivative of a derivative, nest ``ta.func.jvp``); ``exit_dual_level`` closes it.
    ``dual_level`` is the context manager that does both. The level is the calling thread's (``tinyattn.modes``).

    >>> import tinyattn as ta
    >>> import tinyattn.autograd.forward_ad as fwAD
    >>> level = fwAD.enter_dual_level()
    >>> x = fwAD.make_dual(ta.tensor([3.0]), ta.tensor([1.0]))
    >>> fwAD.unpack_dual(x.exp().log()).tangent
    tensor([1.])
    >>> fwAD.exit_dual_level(level=level)
    """
    mode = modes.current()
    if mode.forward_ad_level is not None:
        raise RuntimeError("Nested forward mode AD is not supported at the moment: a forward AD level is already "
                           "open in this thread (for higher derivatives, nest ta.func.jvp)")
    number = modes.new_level()  # (tangents are kept by this number: never reused, a closed level's look stale)
    modes.change(dual_levels=mode.dual_levels + (number,), forward_ad_level=number)
    return 0


def exit_dual_level(*, level=None):
    """Close the level (``level``, when given, must be its index, 0): its tangents are forgotten.

    >>> import tinyattn as ta
    >>> import tinyattn.autograd.forward_ad as fwAD
    >>> level = fwAD.enter_dual_level()
    >>> x = fwAD.make_dual(ta.tensor([3.0]), ta.tensor([1.0]))
    >>> fwAD.exit_dual_level(level=level)
    >>> x.exp().log()                          # no level: the tangent is gone
    tensor([3.])
    """
    mode = modes.current()
    if mode.forward_ad_level is None:
        raise RuntimeError("exit_dual_level: no forward AD level is open")
    if level not in (None, 0):
        raise RuntimeError(f"exit_dual_level: level {level} is not open; the open level is 0")
    modes.change(dual_levels=tuple(n for n in mode.dual_levels if n != mode.forward_ad_level), forward_ad_level=None)


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


def _level(level, name):
    """The number under which the open level keeps its tangents (``None`` when none is open), for ``level``: its
    index, 0, or ``None``."""
    if level not in (None, 0):
        raise RuntimeError(f"{name}: level {level} is not open; forward AD has one level, 0")
    return modes.current().forward_ad_level


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
    level = _level(level, "make_dual")
    if level is None:
        raise RuntimeError("make_dual: no forward AD level is open; call it inside `with forward_ad.dual_level():`")
    if tensor.dtype.kind not in "fc":
        raise TypeError(f"make_dual: the tensor must be floating-point to carry a tangent, got dtype {tensor.dtype}")
    for what, mine, theirs in (("shape", tangent.shape, tensor.shape), ("dtype", tangent.dtype, tensor.dtype),
                               ("device", tangent.device, tensor.device)):
        if mine != theirs:
            error = TangentSizeError if what == "shape" else ValueError
            raise error(f"make_dual: the tangent's {what} {mine} differs from the tensor's {what} {theirs}; "
                        "a tangent has the shape, dtype and device of its primal")
    if tensor._tangents and level in tensor._tangents:
        raise RuntimeError(f"make_dual: the tensor already has a tangent at level {level}; unpack_dual it first "
                           "and make a dual of its primal")
    dual = ops.reshape(tensor, tensor.shape)  # a view of the tensor, for reverse mode alone: DualStep
    forward_mode.mark_dual(dual, level)
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
    level = _level(level, "unpack_dual")
    tangents = tensor._tangents
    if level is None or not tangents or level not in tangents or level not in modes.current().dual_levels:
        return UnpackedDualTensor(tensor, None)
    primal = ops.reshape(tensor, tensor.shape)
    primal._tangents = {k: t for k, t in (primal._tangents or {}).items() if k != level} or None
    return UnpackedDualTensor(primal, tangents[level])


__all__ = ["dual_level", "enter_dual_level", "exit_dual_level", "make_dual", "unpack_dual", "UnpackedDualTensor"]
