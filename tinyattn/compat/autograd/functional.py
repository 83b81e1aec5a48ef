"""``torch.autograd.functional``: ``jacobian``, ``hessian``, ``vjp``, ``jvp``, ``vhp`` and ``hvp`` with torch's
arguments and nesting: ``tinyattn.autograd.functional``, the results compat tensors.

>>> import tinyattn.compat as torch
>>> x = torch.tensor([1.0, 2.0], dtype=torch.float64)
>>> torch.autograd.functional.hessian(lambda t: (t ** 3).sum(), x)      # diag(6x)
tensor([[ 6.,  0.],
        [ 0., 12.]], dtype=torch.float64)
"""

import functools

from ...autograd import functional as _native
from ..core.tensor import as_compat_tree
from ..scope import missing

__all__ = ["vjp", "jvp", "jacobian", "hessian", "hvp", "vhp"]


def _returning_compat(function):
    @functools.wraps(function)
    def compat_function(*args, **kwargs):
        return as_compat_tree(function(*args, **kwargs))
    return compat_function


vjp = _returning_compat(_native.vjp)
jvp = _returning_compat(_native.jvp)
jacobian = _returning_compat(_native.jacobian)
hessian = _returning_compat(_native.hessian)
hvp = _returning_compat(_native.hvp)
vhp = _returning_compat(_native.vhp)


def __getattr__(name):
    raise missing(__name__, name)
