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
import collections
import functools
import inspect

import numpy as np

from ... import backend
from ... import ops as _ops
from ... import ops_extra as _ops_extra
from ...engine import Tensor as _NativeTensor
from ...engine import no_grad

SortResult = collections.namedtuple("sort", ["values", "indices"])


def _cut(array, like):
    """``array`` as a tensor of ``like``'s class, with no graph (results torch gives no gradient)."""
    return _NativeTensor._wrap(np.asarray(array) if isinstance(array, np.generic) else array, like)  # (0-d)


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


def __format__(self, format_spec):
    """A 0-d tensor formats as its number (``f"{loss:.4f}"``); any other takes no format spec."""
    if self.ndim == 0:
        return format(self.item(), format_spec)
    if format_spec:
        raise TypeError("unsupported format string passed to Tensor.__format__")
    return str(self)


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


def narrow(self, dim, start, length):
    """``length`` elements from ``start`` along ``dim`` (a view, as ``self[..., start:start + length]``)."""
    dim = _dim(dim, self.ndim, "narrow")
    start, length = int(start), int(length)
    size = self.shape[dim]
    if start < 0:
        start += size
    if not (0 <= start and length >= 0 and start + length <= size):
        raise RuntimeError(f"narrow: start ({start}) + length ({length}) exceeds dimension size ({size}).")
    return self[(slice(None),) * dim + (slice(start, start + length),)]


def t(self):
    """The transpose of a tensor of at most 2 dimensions (torch refuses more)."""
    if self.ndim > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {self.ndim}D")
    return self if self.ndim < 2 else self.transpose(0, 1)


def index_select(self, dim, index):
    """The slices of ``self`` at ``index`` (1-D integers) along ``dim``; differentiable in ``self``."""
    dim = _dim(dim, self.ndim, "index_select")
    index = index._data if isinstance(index, _NativeTensor) else np.asarray(index)
    if index.ndim > 1 or index.dtype.kind not in "iu":
        raise IndexError(f"index_select(): Expected a 1-D integer index, got dtype {index.dtype} "
                         f"and {index.ndim} dimension(s)")
    return self[(slice(None),) * dim + (index.reshape(-1),)]


def flip(self, dims):
    """The elements in reverse order along each of ``dims``."""
    dims = [_dim(dim, self.ndim, "flip") for dim in ((dims,) if isinstance(dims, int) else dims)]
    index = [slice(None)] * self.ndim
    for dim in dims:
        if index[dim] != slice(None):
            raise RuntimeError(f"dim {dim} appears multiple times in the list of dims")
        index[dim] = slice(None, None, -1)
    return self[tuple(index)]


def masked_select(self, mask):
    """The elements where ``mask`` (broadcast with ``self``) is true, as a 1-D tensor."""
    shape = np.broadcast_shapes(self.shape, mask.shape)
    return self.expand(*shape)[mask._data if mask.shape == shape else np.broadcast_to(mask._data, shape)]


def sort(self, dim=-1, descending=False, stable=False):
    """``(values, indices)`` sorted along ``dim``; ties keep their order (torch's stable sort)."""
    indices = argsort(self, dim=dim, descending=descending, stable=stable)
    return SortResult(_ops_extra.gather(self, dim, indices), indices)


def argsort(self, dim=-1, descending=False, stable=False):
    """The indices that sort ``self`` along ``dim`` (ascending, or ``descending``), int64."""
    dim = _dim(dim, self.ndim, "argsort")
    xp = backend.namespace(self._data)
    data = self._data
    if descending:  # a stable descending order: the stable ascending order of the reversed keys, reversed back
        n = data.shape[dim] if data.ndim else 1
        order = xp.flip(xp.argsort(xp.flip(data, axis=dim), axis=dim, kind="stable"), axis=dim)
        order = n - 1 - order
    else:
        order = xp.argsort(data, axis=dim, kind="stable")
    return _cut(order.astype(np.int64), self)


def cumsum(self, dim, *, dtype=None):
    """Running sums along ``dim`` (integers and booleans sum as int64, as in torch)."""
    x = self if dtype is None else self.to(dtype)
    if dtype is None and x.dtype.kind in "biu":
        x = x.to(np.int64)
    return _ops_extra.cumsum(x, _dim(dim, x.ndim, "cumsum"))


# ----------------------------------------------------------------------------- tests and logic


def _test(name):
    def method(self):
        xp = backend.namespace(self._data)
        if self._data.dtype.kind not in "fc":
            return _cut(xp.full(self.shape, name == "isfinite"), self)
        return _cut(getattr(xp, name)(self._data), self)

    method.__name__ = name
    return method


def _logical(op):
    def method(self, other):
        other = other._data if isinstance(other, _NativeTensor) else other
        return _cut(op(self._data.astype(bool), np.asarray(other).astype(bool)), self)

    return method


def clamp_min(self, min):
    return self.clamp(min=min)


def clamp_max(self, max):
    return self.clamp(max=max)


# ----------------------------------------------------------------------------- conversions and placement


def to(self, *args, non_blocking=False, copy=False, memory_format=None, **kwargs):
    """``t.to(device or dtype or other, non_blocking=False, copy=False)`` (``non_blocking`` is moot on the host)."""
    if args and isinstance(args[0], _NativeTensor):  # t.to(other): other's device and dtype
        other, args = args[0], args[1:]
        kwargs.setdefault("device", other.device)
        kwargs.setdefault("dtype", other.dtype)
    result = _NativeTensor.to(self, *args, **kwargs)
    return result.clone() if copy and result is self else result


def pin_memory(self):
    """Host memory is what NumPy holds already: the tensor itself."""
    return self


def new_empty(self, *size, dtype=None, device=None, requires_grad=False):
    return self.new_zeros(*size, dtype=dtype, device=device, requires_grad=requires_grad)


def half(self):
    return self.to(np.float16)


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
        __index__=__index__, __format__=__format__, masked_fill=masked_fill, masked_fill_=masked_fill_,
        narrow=narrow, t=t, index_select=index_select, flip=flip, masked_select=masked_select, sort=sort,
        argsort=argsort, cumsum=cumsum, clamp_min=clamp_min, clamp_max=clamp_max, to=to,
        pin_memory=pin_memory, new_empty=new_empty, half=half, bfloat16=bfloat16, detach_=detach_,
        logical_and=_logical(np.logical_and), logical_or=_logical(np.logical_or),
        nelement=lambda self: self.numel(), ndimension=lambda self: self.ndim,
        swapaxes=lambda self, axis0, axis1: self.transpose(axis0, axis1),
    )
    methods["swapdims"] = methods["swapaxes"]
    for name in ("isnan", "isinf", "isfinite"):
        methods[name] = _test(name)
    for name, method in methods.items():
        setattr(cls, name, numpy_names(method) if takes_dim(method) else method)


# ----------------------------------------------------------------------------- functions


def pow(input, exponent):
    """``input ** exponent``, where ``input`` may be a Python number (``torch.pow(10000, t)``)."""
    if not isinstance(input, _NativeTensor) and not isinstance(exponent, _NativeTensor):
        raise TypeError(f"pow(): expected a tensor as input or exponent, got {type(input).__name__} and "
                        f"{type(exponent).__name__}")
    return input ** exponent


@no_grad()
def allclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    return bool(np.allclose(input.numpy(), other.numpy(), rtol=rtol, atol=atol, equal_nan=equal_nan))


def equal(input, other):
    return input.shape == other.shape and bool((input.numpy() == other.numpy()).all())


def numel(input):
    return input.numel()


def is_floating_point(input):
    return input.dtype.kind == "f"
