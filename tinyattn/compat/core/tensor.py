"""compat's ``Tensor`` and ``Parameter``: the native ones, with ``.data`` and ``.grad`` as tensors.

The native API promises backend arrays for ``t.data`` and ``t.grad`` (every native operation reads
them). PyTorch code calls tensor methods on them (``p.grad.zero_()``, ``p.data.mul_(0.5)``,
``p.grad.norm()``), so here they are tensors that *share* the arrays: a write through them is a write
to the parameter's values or gradient, as in torch. Like torch's ``.data``, such a tensor is cut from
the graph (``requires_grad=False``) and has its own version counter: autograd does not see writes made
through it.

A result computed from a compat tensor is a compat tensor (``Tensor._result_class``), so ``out.data``
and ``out.argmax(1)`` stay in this world; compat's creation functions and modules make compat
tensors and parameters (``as_compat``).

>>> import tinyattn.compat as torch
>>> w = torch.nn.Parameter(torch.ones(2))
>>> (w * 3).sum().backward()
>>> w.grad
tensor([3., 3.])
>>> w.grad.zero_()
tensor([0., 0.])
>>> w.grad.norm().item(), type(w.data).__name__
(0.0, 'Tensor')
"""

import math
import operator

import numpy as np

from ... import backend
from ...engine import Tensor as _NativeTensor
from ...nn.module import Parameter as _NativeParameter
from . import devices, methods


def _array_of(name, value, owner):
    """The backend array to store for ``owner.name = value`` (a tensor or an array, as torch takes)."""
    if isinstance(value, _NativeTensor):
        value = value._data
    if not backend.is_array(value):
        raise TypeError(f"assigned {name} must be a Tensor, got {type(value).__name__}")
    if type(value) is not type(owner._data):
        raise RuntimeError(f"assigned {name} is on device {backend.device_of(value)!r}, "
                           f"the tensor on {owner.device!r}")
    return value


def _get_data(self):  # a compat tensor sharing the array, cut from the graph, with its own version counter
    return _NativeTensor._wrap(self._data, self)


def _set_data(self, value):
    self._data = _array_of("data", value, self)


def _get_grad(self):
    """A tensor sharing the gradient's array; after ``backward(create_graph=True)``, the gradient with its
    graph (the walk's ``_grad_graph``, while it still holds the array), so that it can be differentiated."""
    if self._grad is None:
        return None
    graph = self._grad_graph
    if graph is not None and graph._data is self._grad:
        return as_compat(graph)
    return _NativeTensor._wrap(self._grad, self)


def _set_grad(self, value):
    if value is None:
        self._grad = None
        return
    array = _array_of("grad", value, self)
    if tuple(array.shape) != self.shape or array.dtype != self.dtype:
        raise RuntimeError(f"assigned grad has shape {tuple(array.shape)} and dtype {array.dtype}, "
                           f"expected the tensor's shape {self.shape} and dtype {self.dtype}")
    self._grad = array


def dtype_name(dtype):
    """torch's name of a NumPy dtype: ``torch.float64``, ``torch.bool``."""
    return f"torch.{np.dtype(dtype).name}"


# the native nodes whose torch counterpart has another name (the rest: ``Mul`` is torch's ``MulBackward0``)
_TORCH_NODE_NAMES = {"ReLU": "Relu", "Concatenate": "Cat", "Reshape": "View"}


def grad_fn_name(node):
    """torch's name for the node that made a tensor: ``MulBackward0`` for the native ``Mul``."""
    name = type(node).__name__
    return f"{_TORCH_NODE_NAMES.get(name, name)}Backward0"


class Size(tuple):
    """``torch.Size``: a tensor's shape, a tuple of ints printed as torch prints it (``torch.Size([2, 3])``).

    >>> Size([2, 3]), Size([2, 3]).numel(), Size([2, 3]) == (2, 3)
    (torch.Size([2, 3]), 6, True)
    """

    __slots__ = ()

    def __new__(cls, sizes=()):
        sizes = tuple(sizes)
        for size in sizes:
            if not isinstance(size, int) and not hasattr(size, "__index__"):
                raise TypeError(f"torch.Size() takes an iterable of 'int' (item {len(sizes)} is "
                                f"'{type(size).__name__}')")
        return super().__new__(cls, (operator.index(size) for size in sizes))

    def __repr__(self):
        return f"torch.Size({list(self)})"

    def __getitem__(self, index):
        item = super().__getitem__(index)
        return Size(item) if isinstance(index, slice) else item

    def __add__(self, other):
        return Size(tuple(self) + tuple(other))

    def numel(self):
        return math.prod(self)


class Tensor(_NativeTensor):
    """The native tensor whose ``.data`` and ``.grad`` are tensors sharing its arrays (see the module)."""

    __slots__ = ()
    _result_class = None  # set below: results computed from a compat tensor are compat tensors

    data = property(_get_data, _set_data, doc="A tensor sharing this tensor's array, cut from the graph.")
    grad = property(_get_grad, _set_grad, doc="``None``, or a tensor sharing the accumulated gradient's array.")

    device = property(lambda self: devices.device(_NativeTensor.device.fget(self)),
                      doc="The tensor's ``torch.device`` (a ``str``: ``'cpu'`` or ``'cuda'``).")

    def backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
        """torch's ``backward``; under ``create_graph`` the implicit gradient of a one-element tensor is a
        compat tensor, so that every gradient the walk makes from it is one too."""
        if create_graph and gradient is None and self.numel() == 1:
            gradient = _NativeTensor._wrap(backend.namespace(self._data).ones_like(self._data), self)
        super().backward(gradient, retain_graph, create_graph, inputs)

    def __repr__(self):
        """As torch prints a tensor: the values (NumPy's printing, under ``set_printoptions``), then the device
        when not the host's, the size of an empty tensor, the dtype when not float32, int64 or bool (an
        empty tensor's when not float32), and ``grad_fn=<MulBackward0>`` or ``requires_grad=True``."""
        array = backend.to_numpy(self._data)
        empty = array.size == 0
        body = "[]" if empty else np.array2string(array, separator=", ", prefix="tensor(")
        suffixes = [] if self.device == "cpu" else [f"device='{self.device}:0'" if ":" not in self.device
                                                    else f"device='{self.device}'"]
        if empty and array.ndim != 1:
            suffixes.append(f"size={tuple(array.shape)}")
        if array.dtype != np.float32 and (empty or array.dtype not in (np.int64, np.bool_)):
            suffixes.append(f"dtype={dtype_name(array.dtype)}")
        if self._ctx is not None:
            suffixes.append(f"grad_fn=<{grad_fn_name(self._ctx)}>")
        elif self.requires_grad:
            suffixes.append("requires_grad=True")
        return f"tensor({body}{''.join(', ' + suffix for suffix in suffixes)})"

    def __array__(self, dtype=None, copy=None):
        """``numpy.asarray(t)``, as torch's CPU tensors allow (a copy from the GPU)."""
        array = backend.to_numpy(self._data)
        return array if dtype is None else array.astype(dtype, copy=False)


Tensor._result_class = Tensor
methods.attach(Tensor)  # __index__, NumPy-style ``axis=``, narrow, sort… (see ``methods``)


class Parameter(_NativeParameter, Tensor):
    """``nn.Parameter`` whose ``.data`` and ``.grad`` are tensors (see the module)."""

    __slots__ = ()


#: native layer class -> its compat twin (``compat.nn``'s ``_compat_layer`` fills it)
TWINS = {}


def as_compat(value):
    """``value`` made compat in place (a native tensor's or parameter's class changed; no copy) and
    returned; a module's parameters and buffers too, and each of its modules of a native layer class
    with a compat twin (``compat.nn.Linear``…) takes the twin's class, recursively; anything else as it is."""
    if isinstance(value, _NativeTensor):
        if type(value) is _NativeTensor:
            value.__class__ = Tensor
        elif type(value) is _NativeParameter:
            value.__class__ = Parameter
        return value
    if isinstance(value, tuple):  # (values, indices) and similar results
        for item in value:
            as_compat(item)
        return value
    modules = getattr(value, "modules", None)
    if callable(modules) and hasattr(value, "_parameters"):
        for module in modules():
            twin = TWINS.get(type(module))
            if twin is not None:
                module.__class__ = twin
            for table in (module._parameters, module._buffers):
                for item in table.values():
                    if item is not None:
                        as_compat(item)
    return value


def as_compat_tree(tree):
    """``tree`` (a tensor, or tuples, namedtuples, lists and dicts of them) with every tensor made compat
    (``as_compat``), as compat's transforms return their results."""
    if isinstance(tree, _NativeTensor):
        return as_compat(tree)
    if isinstance(tree, tuple) and hasattr(tree, "_fields"):  # a namedtuple
        return type(tree)(*(as_compat_tree(t) for t in tree))
    if isinstance(tree, (tuple, list)):
        return type(tree)(as_compat_tree(t) for t in tree)
    if isinstance(tree, dict):
        return type(tree)((key, as_compat_tree(value)) for key, value in tree.items())
    return tree
