"""``torch.autograd.forward_ad``: forward-mode differentiation with dual tensors (``dual_level``,
``make_dual``, ``unpack_dual``, ``enter_dual_level``/``exit_dual_level``): ``tinyattn.autograd.forward_ad``,
its tensors compat tensors.

>>> import tinyattn.compat as torch
>>> import tinyattn.compat.autograd.forward_ad as fwAD
>>> x = torch.tensor([1.0, 2.0], dtype=torch.float64)
>>> with fwAD.dual_level():
...     y = fwAD.make_dual(x, torch.ones_like(x)) ** 3           # d(x³) = 3x²·dx
...     primal, tangent = fwAD.unpack_dual(y)
>>> tangent, type(tangent).__name__
(tensor([ 3., 12.], dtype=torch.float64), 'Tensor')
"""

from ...autograd import forward_ad as _native
from ..core.tensor import as_compat
from ..scope import missing

UnpackedDualTensor = _native.UnpackedDualTensor
dual_level = _native.dual_level
enter_dual_level = _native.enter_dual_level
exit_dual_level = _native.exit_dual_level

__all__ = ["dual_level", "enter_dual_level", "exit_dual_level", "make_dual", "unpack_dual", "UnpackedDualTensor"]


def make_dual(tensor, tangent, *, level=None):
    """A compat tensor with ``tensor``'s value and ``tangent`` as its tangent at ``level`` (the innermost)."""
    return as_compat(_native.make_dual(tensor, tangent, level=level))


def unpack_dual(tensor, *, level=None):
    """``UnpackedDualTensor(primal, tangent)``, compat tensors (the tangent ``None`` where there is none)."""
    primal, tangent = _native.unpack_dual(tensor, level=level)
    return UnpackedDualTensor(as_compat(primal), None if tangent is None else as_compat(tangent))


def __getattr__(name):
    raise missing(__name__, name)
