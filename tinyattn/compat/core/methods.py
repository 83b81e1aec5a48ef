"""The tensor methods and functions of torch's everyday API that the native tensor does not carry.

Each is written from the native differentiable operations (indexing, ``gather``, ``transpose``,
arithmetic), so gradients come for free. What torch gives no gradient (sorting indices,
the ``is*`` tests) comes cut from the graph. Argument names, defaults, result dtypes and errors are torch's.

>>> import tinyattn.compat as torch
>>> x = torch.tensor([[3.0, 1.0, 2.0], [0.5, 4.0, 1.5]], requires_grad=True)
>>> values, indices = x.sort(dim=1, descending=True)
>>> values.tolist(), indices.tolist()
([[3.0, 2.0, 1.0], [4.0, 1.5, 0.5]], [[0, 2, 1], [1, 2, 0]])
>>> x.argmax(axis=1)                         # NumPy's names are aliases, as in torch
tensor([0, 1])
>>> f"{x.sum():.2f}"
'12.00'
>>> ["a", "b", "c"][torch.tensor(2)]
'c'
"""

import builtins
import functools
import inspect

import numpy as np

from ... import ops as _ops
from ...engine import Tensor as _NativeTensor


def _cut(array, like):
    """``array`` as a tensor of ``like``'s class, with no graph (results torch gives no gradient)."""
    return _NativeTensor._wrap(array, like)


def _dim(dim, ndim, name):
    """``dim`` in ``[0, ndim)`` (a 0-d tensor has the one dimension ``0`` or ``-1``, as in torch)."""
    n = builtins.max(ndim, 1)
    if not isinstance(dim, (int, np.integer)) or isinstance(dim, bool) or not -n <= dim < n:
        raise IndexError(f"{name}: Dimension out of range (expected to be in range of [{-n}, {n - 1}], "
                         f"but got {dim})")
    return int(dim) % n


# ----------------------------------------------------------------------------- Python protocols


def __index__(self):
    """``items[t]``, ``range(t)``, ``data[i:i + n]`` with ``t`` an integer tensor of one element."""
    if self._data.dtype.kind not in "biu" or self._data.size != 1:
        raise TypeError("only integer tensors of a single element can be converted to an index")
    return int(self._data.reshape(()))


# ----------------------------------------------------------------------------- NumPy-style aliases


def numpy_names(fn):
    """``fn`` accepting torch's NumPy-style aliases: ``axis`` for ``dim``, ``keepdims`` for ``keepdim``."""

    @functools.wraps(fn)
    def with_aliases(*args, **kwargs):
        for alias, name in (("axis", "dim"), ("keepdims", "keepdim")):
            if alias in kwargs:
                if name in kwargs:
                    raise TypeError(f"{fn.__name__}() got values for both {name!r} and its alias {alias!r}")
                kwargs[name] = kwargs.pop(alias)
        return fn(*args, **kwargs)

    return with_aliases


def takes_dim(fn):
    """Whether ``fn`` has a ``dim`` or ``keepdim`` parameter (so that torch gives it the aliases)."""
    try:
        parameters = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
    return "dim" in parameters or "keepdim" in parameters


# ----------------------------------------------------------------------------- masked_fill's value


def _checked_fill_value(value, name):
    if isinstance(value, _NativeTensor) and value.ndim != 0:
        raise RuntimeError(f"{name} only supports a 0-dimensional value tensor, but got tensor with "
                           f"{value.ndim} dimension(s).")
    return value


def masked_fill(self, mask, value):
    return _ops.masked_fill(self, mask, _checked_fill_value(value, "masked_fill_"))


def masked_fill_(self, mask, value):
    return _NativeTensor.masked_fill_(self, mask, _checked_fill_value(value, "masked_fill_"))


# ----------------------------------------------------------------------------- shape and selection




# ----------------------------------------------------------------------------- tests and logic




# ----------------------------------------------------------------------------- conversions and placement


def pin_memory(self):
    """Host memory is what NumPy holds already: the tensor itself."""
    return self


def bfloat16(self):
    raise TypeError("bfloat16 has no NumPy dtype, so tinyattn.compat cannot hold it; use float32 (t.float()) "
                    "or float16 (t.half())")


def detach_(self):
    """Cut this tensor from its graph, in place (torch's ``detach_``)."""
    if self._view is not None:
        raise RuntimeError("Can't detach views in-place. Use detach() instead.")
    self._ctx, self.requires_grad, self._tangents = None, False, None  # (its forward-mode tangents too)
    return self


# ----------------------------------------------------------------------------- attaching them


def attach(cls):
    """Put the methods above on ``cls`` (compat's ``Tensor``) and give every method with a ``dim``
    torch's NumPy-style aliases."""
    for name in dir(cls):
        if name.startswith("_"):
            continue
        method = getattr(cls, name, None)
        if callable(method) and not isinstance(method, type) and takes_dim(method):
            setattr(cls, name, numpy_names(method))
    methods = dict(
        __index__=__index__, masked_fill=masked_fill, masked_fill_=masked_fill_,
        pin_memory=pin_memory, bfloat16=bfloat16, detach_=detach_,
        nelement=lambda self: self.numel(), ndimension=lambda self: self.ndim,
        swapaxes=lambda self, axis0, axis1: self.transpose(axis0, axis1),
    )
    methods["swapdims"] = methods["swapaxes"]
    for name, method in methods.items():
        setattr(cls, name, numpy_names(method) if takes_dim(method) else method)


# ----------------------------------------------------------------------------- functions


def pow(input, exponent):
    """``input ** exponent``, where ``input`` may be a Python number (``torch.pow(10000, t)``)."""
    if not isinstance(input, _NativeTensor) and not isinstance(exponent, _NativeTensor):
        raise TypeError(f"pow(): expected a tensor as input or exponent, got {type(input).__name__} and "
                        f"{type(exponent).__name__}")
    return input ** exponent


def numel(input):
    return input.numel()


def is_floating_point(input):
    return input.dtype.kind == "f"
