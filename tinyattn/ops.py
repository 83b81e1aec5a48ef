"""Floor 3: the differentiable primitives, each forward beside its backward.

Every operation is a ``Function``: ``forward`` computes on backend arrays and saves
what ``backward`` needs; ``backward`` maps the output's gradient to one gradient per
input. Binary operations broadcast like NumPy; ``sum_to`` (the one place where
broadcasting is undone) reduces each input's gradient back to that input's shape.

Layers (softmax, LayerNorm, attention) are built from these in ``nn.functional``.

>>> import tinyattn as ta
>>> a = ta.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
>>> b = ta.tensor([10.0, 20.0], requires_grad=True)      # broadcast over rows
>>> (a * b).backward(ta.ones(2, 2))
>>> b.grad                                                 # summed back to (2,)
array([4., 6.], dtype=float32)
"""

import builtins
import itertools
import math
import numbers

import numpy as np

from . import backend, modes
from . import checks as check
from .creation import zeros_like
from .engine import OUTPUT, Function, Tensor


def sum_to(grad, shape):
    """Undo broadcasting: sum ``grad`` (an array, or a tensor) over the axes that broadcasting added or stretched.

    >>> sum_to(np.ones((4, 2, 3)), (2, 1)).tolist()
    [[12.0], [12.0]]
    """
    if grad.shape == shape:
        return grad
    lead = grad.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(
        lead + i for i, n in enumerate(shape) if n == 1 and grad.shape[lead + i] != 1
    )
    if isinstance(grad, Tensor):
        return sum(grad, axes, keepdim=True).reshape(shape) if axes else grad.reshape(shape)
    return grad.sum(axis=axes, keepdims=True).reshape(shape)


def namespace(x):
    """The functions a backward formula calls, for ``x``: the array library's (NumPy, CuPy) for an array;
    for a tensor, the same names as differentiable operations (``TENSOR_NAMESPACE``). So one formula
    serves both: on arrays for a gradient, on tensors for a gradient that can be differentiated again
    (``Function.differentiable``)."""
    return TENSOR_NAMESPACE if isinstance(x, Tensor) else backend.namespace(x)


def _total(*terms):
    """The sum of a JVP rule's terms, skipping those that are ``False`` (a term of a zero tangent); ``None``
    if all are: ``_total(da is not None and da * b, db is not None and a * db)``."""
    total = None
    for term in terms:
        if term is not False:
            total = term if total is None else total + term
    return total


def _broadcast_error(name, a, b):
    return ValueError(f"{name}: shapes {tuple(a.shape)} and {tuple(b.shape)} cannot be broadcast together")


def _normalize_dims(dim, ndim, name="sum"):
    """A reduction's ``dim`` (None, an int or a tuple, negatives allowed) as a tuple of distinct axes in
    ``[0, ndim)``; ``None`` or an empty tuple reduce every axis, as in PyTorch."""
    return check.dims(name, "dim", dim, ndim) if dim != () and dim != [] else None


# ----------------------------------------------------------------------------- binary


class _Binary(Function):
    differentiable, saved_as = True, {"a": 0, "b": 1}

    def forward(self, a, b):
        self.a_shape, self.b_shape = a.shape, b.shape
        try:
            return self.compute(a, b)
        except ValueError:
            raise _broadcast_error(type(self).__name__.lower(), a, b) from None


class Add(_Binary):
    saved_inputs, saves_output = (), False  # backward reads no array of theirs (see Function)
    def compute(self, a, b):
        return a + b

    def backward(self, grad):
        return sum_to(grad, self.a_shape), sum_to(grad, self.b_shape)

    @staticmethod
    def jvp(tangents, inputs, out):  # d(a + b) = da + db
        da, db = tangents
        return db if da is None else da if db is None else da + db


class Sub(_Binary):
    saved_inputs, saves_output = (), False  # backward reads no array of theirs (see Function)
    def compute(self, a, b):
        if a.dtype.kind == "b" and b.dtype.kind == "b":
            raise TypeError("sub: subtracting two boolean tensors is not supported; use ^ (logical xor) instead")
        return a - b

    def backward(self, grad):
        return sum_to(grad, self.a_shape), sum_to(-grad, self.b_shape)

    @staticmethod
    def jvp(tangents, inputs, out):  # d(a - b) = da - db
        da, db = tangents
        return -db if da is None else da if db is None else da - db


class Mul(_Binary):
    saves_output = False
    def compute(self, a, b):
        self.a, self.b = a, b
        return a * b

    def backward(self, grad):
        a_needs, b_needs = self.needs_grad(0), self.needs_grad(1)
        return (sum_to(grad * self.b, self.a_shape) if a_needs else None,
                sum_to(grad * self.a, self.b_shape) if b_needs else None)

    @staticmethod
    def jvp(tangents, inputs, out):  # d(a·b) = da·b + a·db
        (da, db), (a, b) = tangents, inputs
        return _total(da is not None and da * b, db is not None and a * db)


class Div(_Binary):
    saves_output = False
    def compute(self, a, b):
        self.a, self.b = a, b
        return a / b

    def backward(self, grad):
        grad_a = grad / self.b  # d(a/b)/da = 1/b
        grad_b = -grad_a * self.a / self.b if self.needs_grad(1) else None  # -a/b²
        return (sum_to(grad_a, self.a_shape) if self.needs_grad(0) else None,
                None if grad_b is None else sum_to(grad_b, self.b_shape))

    @staticmethod
    def jvp(tangents, inputs, out):  # d(a/b) = (da - db·(a/b)) / b
        (da, db), (_, b) = tangents, inputs
        if db is None:
            return da / b
        return (-db * out if da is None else da - db * out) / b


class Pow(_Binary):
    saved_as = {"a": 0, "b": 1, "out": OUTPUT}

    def compute(self, a, b):
        self.a, self.b = a, b
        self.out = a**b
        return self.out

    def backward(self, grad):
        a, b = self.a, self.b
        grad_a = grad_b = None
        if self.needs_grad(0):  # b·a^(b-1)
            grad_a = sum_to(grad * b * a ** (b - 1), self.a_shape)
        if self.needs_grad(1):  # a^b·ln a, taken as 0 where a <= 0
            xp = namespace(a)
            log_a = xp.log(xp.where(a > 0, a, 1))
            grad_b = sum_to(grad * self.out * log_a, self.b_shape)
        return grad_a, grad_b

    @staticmethod
    def jvp(tangents, inputs, out):  # d(aᵇ) = b·aᵇ⁻¹·da + aᵇ·ln a·db (ln a taken as 0 where a <= 0)
        (da, db), (a, b) = tangents, inputs
        return _total(da is not None and da * b * a ** (b - 1),
                      db is not None and db * out * where(a > 0, a, 1).log())


class Where(Function):
    """``where(condition, a, b)``: ``a`` where the condition holds, else ``b``."""

    saved_inputs, saves_output, differentiable = (0,), False, True

    def forward(self, condition, a, b):
        xp = backend.namespace(a)
        self.condition, self.a_shape, self.b_shape = condition, a.shape, b.shape
        try:
            return xp.where(condition, a, b)
        except ValueError:
            raise ValueError(
                f"where: condition {tuple(condition.shape)}, inputs {tuple(a.shape)} and "
                f"{tuple(b.shape)} cannot be broadcast together"
            ) from None

    def backward(self, grad):
        zero = grad.dtype.type(0)
        xp = namespace(grad)
        return (None,
                sum_to(xp.where(self.condition, grad, zero), self.a_shape),
                sum_to(xp.where(self.condition, zero, grad), self.b_shape))

    @staticmethod
    def jvp(tangents, inputs, out):  # d where(c, a, b) = where(c, da, db)
        (_, da, db), (condition, _, _) = tangents, inputs
        if da is None and db is None:
            return None
        return where(condition, 0 if da is None else da, 0 if db is None else db)


def _product(a, b):
    """``a @ b`` (arrays, or tensors: then ``MatMul``). NumPy's batched product calls the BLAS on each matrix
    that has one unit stride among its last two axes (row- or column-major: a transposed or head-split view is
    fine); an operand with neither, such as a view with a step, is made C-contiguous first."""
    if isinstance(a, Tensor) or isinstance(b, Tensor):
        return a @ b
    if a.ndim > 2 or b.ndim > 2:
        xp = backend.namespace(a)
        a, b = (m if _blas_ready(m) else xp.ascontiguousarray(m) for m in (a, b))
    return a @ b


def _blas_ready(m):
    """Whether the matrices of ``m`` (…, n, k) are laid out row- or column-major (one of their strides one item)."""
    item = m.itemsize
    return m.ndim < 2 or m.strides[-1] == item or m.strides[-2] == item or min(m.shape[-2:]) <= 1


class MatMul(Function):
    """``a @ b`` with NumPy's rules: batched, broadcasting, 1-D operands promoted."""

    saves_output, differentiable, saved_as = False, True, {"a": 0, "b": 1}

    def forward(self, a, b):
        if a.ndim == 0 or b.ndim == 0:
            raise RuntimeError(
                f"matmul: both operands need at least one dimension, got shapes {tuple(a.shape)} and {tuple(b.shape)}"
            )
        check.one_dtype("matmul", ("the left operand", a), ("the right operand", b))
        inner_b = b.shape[-2] if b.ndim > 1 else b.shape[0]
        if a.shape[-1] != inner_b:
            inner_a = a.shape[-1]
            raise ValueError(
                f"matmul: {tuple(a.shape)} @ {tuple(b.shape)}: inner sizes {inner_a} and {inner_b} differ"
            )
        self.a, self.b = a, b
        if b.ndim == 2 and a.ndim > 2:  # (…, n, k) @ (k, m): the batch folded into rows, one large GEMM
            return (a.reshape(math.prod(a.shape[:-1]), a.shape[-1]) @ b).reshape(a.shape[:-1] + (b.shape[1],))
        try:
            return _product(a, b)
        except ValueError:
            raise ValueError(
                f"matmul: {tuple(a.shape)} @ {tuple(b.shape)}: batch dimensions cannot be broadcast"
            ) from None

    def backward(self, grad):
        a, b = self.a, self.b
        a2 = a[None, :] if a.ndim == 1 else a  # (…, n, k)
        b2 = b[:, None] if b.ndim == 1 else b  # (…, k, m)
        if b.ndim == 1:
            grad = grad[..., None]
        if a.ndim == 1:
            grad = grad[..., None, :]  # grad: (…, n, m)
        grad_a = grad_b = None
        if self.needs_grad(0) and b2.ndim == 2 and grad.ndim > 2:  # folded into rows, as in forward
            rows = math.prod(grad.shape[:-1])
            grad_a = (grad.reshape(rows, grad.shape[-1]) @ b2.swapaxes(-1, -2)).reshape(a.shape)  # (…, n, k)
        elif self.needs_grad(0):
            grad_a = sum_to(_product(grad, b2.swapaxes(-1, -2)), a2.shape).reshape(a.shape)  # (…, n, k)
        if self.needs_grad(1):
            if b2.ndim == 2 and a2.ndim > 2:  # fold the batch into rows: one large GEMM
                k, m = b2.shape
                rows = math.prod(a2.shape[:-1])  # (not -1: k or m may be 0)
                grad_b = a2.reshape(rows, k).T @ grad.reshape(rows, m)
            else:
                grad_b = sum_to(_product(a2.swapaxes(-1, -2), grad), b2.shape)  # (…, k, m)
            grad_b = grad_b.reshape(b.shape)
        return grad_a, grad_b

    @staticmethod
    def jvp(tangents, inputs, out):  # d(a @ b) = da @ b + a @ db
        (da, db), (a, b) = tangents, inputs
        return _total(da is not None and matmul(da, b), db is not None and matmul(a, db))


# ----------------------------------------------------------------------------- unary


class Neg(Function):
    saved_inputs, saves_output, differentiable = (), False, True  # backward reads no array of theirs (see Function)
    def forward(self, x):
        if x.dtype.kind == "b":
            raise TypeError("neg: the - operator on a boolean tensor is not supported; invert a mask with ~")
        return -x

    def backward(self, grad):
        return (-grad,)

    @staticmethod
    def jvp(tangents, inputs, out):  # d(-x) = -dx
        return -tangents[0]


class Exp(Function):
    saved_inputs, saves_output = (), True  # backward reads only its output
    differentiable, saved_as = True, {"out": OUTPUT}
    def forward(self, x):
        self.out = backend.namespace(x).exp(x)
        return self.out

    def backward(self, grad):
        return (grad * self.out,)

    @staticmethod
    def jvp(tangents, inputs, out):  # d eˣ = eˣ·dx
        return tangents[0] * out


class Log(Function):
    saves_output, differentiable, saved_as = False, True, {"x": 0}
    def forward(self, x):
        self.x = x
        return backend.namespace(x).log(x)

    def backward(self, grad):
        return (grad / self.x,)

    @staticmethod
    def jvp(tangents, inputs, out):  # d ln x = dx / x
        return tangents[0] / inputs[0]


class Sqrt(Function):
    saved_inputs, saves_output = (), True  # backward reads only its output
    differentiable, saved_as = True, {"out": OUTPUT}
    def forward(self, x):
        self.out = backend.namespace(x).sqrt(x)
        return self.out

    def backward(self, grad):
        return (grad / (2 * self.out),)

    @staticmethod
    def jvp(tangents, inputs, out):  # d√x = dx / (2√x)
        return tangents[0] / (2 * out)


class Tanh(Function):
    saved_inputs, saves_output = (), True  # backward reads only its output
    differentiable, saved_as = True, {"out": OUTPUT}
    def forward(self, x):
        self.out = backend.namespace(x).tanh(x)
        return self.out

    def backward(self, grad):
        return (grad * (1 - self.out * self.out),)

    @staticmethod
    def jvp(tangents, inputs, out):  # d tanh x = (1 - tanh² x)·dx
        return tangents[0] * (1 - out * out)


class Sigmoid(Function):
    saved_inputs, saves_output = (), True  # backward reads only its output
    differentiable, saved_as = True, {"out": OUTPUT}
    def forward(self, x):
        self.out = 0.5 * backend.namespace(x).tanh(0.5 * x) + 0.5  # overflow-free σ(x)
        return self.out

    def backward(self, grad):
        return (grad * self.out * (1 - self.out),)

    @staticmethod
    def jvp(tangents, inputs, out):  # d σ(x) = σ(x)(1 - σ(x))·dx
        return tangents[0] * out * (1 - out)


class ReLU(Function):
    saved_inputs, saves_output = (), True  # backward reads only its output
    differentiable, saved_as = True, {"out": OUTPUT}
    def forward(self, x):
        if x.dtype.kind in "bc":
            raise TypeError(f"relu: {x.dtype} input is not supported; convert it with .float()")
        self.out = backend.namespace(x).maximum(x, 0)  # +0.0 for negatives, as PyTorch gives
        return self.out  # saved instead of a mask: the next operation usually keeps it anyway

    def backward(self, grad):
        return (grad * (self.out > 0),)  # out > 0 exactly where x > 0

    @staticmethod
    def jvp(tangents, inputs, out):  # d relu(x) = dx where x > 0, else 0
        return tangents[0] * (out > 0)


class Abs(Function):
    saved_inputs, saves_output = (), False  # backward reads no array of theirs (see Function)
    differentiable = True
    def forward(self, x):
        if x.dtype.kind == "b":
            raise TypeError("abs: boolean input is not supported; convert it with .float()")
        xp = backend.namespace(x)
        self.sign = xp.sign(x)
        return xp.abs(x)

    def backward(self, grad):
        return (grad * self.sign,)

    @staticmethod
    def jvp(tangents, inputs, out):  # d|x| = sign(x)·dx
        (dx,), (x,) = tangents, inputs
        return dx * (x > 0) - dx * (x < 0)


class To(Function):
    """A change of dtype or device; the gradient goes back the same way."""

    saved_inputs, saves_output, differentiable = (), False, True  # backward reads no array of theirs (see Function)

    def forward(self, x, dtype=None, device=None):
        self.dtype, self.device = x.dtype, backend.device_of(x)
        if device is not None:
            return backend.to_device(x, device)
        return x.astype(dtype)

    def backward(self, grad):
        if isinstance(grad, Tensor):
            return (To.apply(grad, device=self.device) if grad.device != self.device else grad)._to_dtype(self.dtype),
        return (backend.to_device(grad, self.device).astype(self.dtype, copy=False),)

    @staticmethod
    def jvp(tangents, inputs, out, dtype=None, device=None):  # the tangent goes the same way
        return tangents[0].to(device=device, dtype=dtype)


# ----------------------------------------------------------------------------- reductions


class Sum(Function):
    saved_inputs, saves_output = (), False  # backward reads no array of theirs (see Function)
    differentiable = True
    def forward(self, x, dim=None, keepdim=False):
        self.shape, self.axes, self.keepdim = x.shape, _normalize_dims(dim, x.ndim), keepdim
        return x.sum(axis=self.axes, keepdims=keepdim)

    def backward(self, grad):
        if not self.keepdim and self.axes is not None:
            grad = grad.reshape([1 if i in self.axes else n for i, n in enumerate(self.shape)])
        return (namespace(grad).broadcast_to(grad, self.shape),)

    @staticmethod
    def jvp(tangents, inputs, out, dim=None, keepdim=False):  # d Σx = Σ dx
        return Sum.apply(tangents[0], dim=dim, keepdim=keepdim)


class Amax(Function):
    """Maximum over ``dim``; ties share the gradient equally (as in PyTorch)."""

    saved_inputs, saves_output = (), False  # backward reads no array of theirs (see Function)
    differentiable = True

    def forward(self, x, dim=None, keepdim=False):
        self.axes, self.keepdim = _normalize_dims(dim, x.ndim, "amax"), keepdim
        try:
            out = x.max(axis=self.axes, keepdims=True)
        except ValueError:  # NumPy: "zero-size array to reduction operation maximum"
            raise IndexError(f"amax: cannot reduce over an empty dimension of shape {tuple(x.shape)}") from None
        self.winners = x == out
        return out if keepdim else out.reshape(
            [n for i, n in enumerate(x.shape) if self.axes is not None and i not in self.axes]
        )

    def backward(self, grad):
        winners = self.winners
        if not self.keepdim:
            grad = grad.reshape([1 if self.axes is None or i in self.axes else n for i, n in enumerate(winners.shape)])
        count = winners.sum(axis=self.axes, keepdims=True)
        return (grad * winners / count.astype(grad.dtype),)

    @staticmethod
    def jvp(tangents, inputs, out, dim=None, keepdim=False):  # the mean of dx over the maxima (ties share)
        (dx,), (x,) = tangents, inputs
        axes = _normalize_dims(dim, x.ndim, "amax")
        winners = x == out.reshape([1 if axes is None or i in axes else n for i, n in enumerate(x.shape)])
        count = Sum.apply(winners, dim=dim, keepdim=True)
        return (Sum.apply(dx * winners, dim=dim, keepdim=True) / count).reshape(out.shape)


# ----------------------------------------------------------------------------- shape


class Reshape(Function):
    saved_inputs, saves_output, differentiable = (), False, True

    def forward(self, x, shape):
        self.shape = x.shape
        try:
            out = x.reshape(shape)
            self.is_view = backend.namespace(x).may_share_memory(out, x)  # a copy when x is not contiguous
            return out
        except ValueError:
            raise ValueError(
                f"reshape: cannot view shape {tuple(x.shape)} ({x.size} elements) as {tuple(shape)}"
            ) from None

    def backward(self, grad):
        return (grad.reshape(self.shape),)

    @staticmethod
    def jvp(tangents, inputs, out, shape):
        return Reshape.apply(tangents[0], shape=shape)


class Permute(Function):
    saved_inputs, saves_output, is_view, differentiable = (), False, True, True
    def forward(self, x, dims):
        self.dims = dims  # a permutation of range(x.ndim), checked by ``permute``
        return x.transpose(dims)

    def backward(self, grad):
        inverse = [0] * len(self.dims)
        for i, d in enumerate(self.dims):
            inverse[d] = i  # axis d of the input went to position i
        return (namespace(grad).transpose(grad, inverse),)

    @staticmethod
    def jvp(tangents, inputs, out, dims):
        return Permute.apply(tangents[0], dims=dims)


class Expand(Function):
    saved_inputs, saves_output, is_view, differentiable = (), False, True, True
    def forward(self, x, shape):
        self.shape = x.shape
        shape = tuple(n if n != -1 else x.shape[i - len(shape) + x.ndim] for i, n in enumerate(shape))
        try:
            return backend.namespace(x).broadcast_to(x, shape)
        except ValueError:
            raise ValueError(f"expand: shape {tuple(x.shape)} cannot be expanded to {shape}") from None

    def backward(self, grad):
        return (sum_to(grad, self.shape),)

    @staticmethod
    def jvp(tangents, inputs, out, shape):
        return Expand.apply(tangents[0], shape=shape)


def index_arrays(index):
    """``index`` (as ``t[index]`` takes it) with each tensor in it replaced by its backend array."""
    if isinstance(index, Tensor):
        return index._data
    if isinstance(index, tuple):
        return tuple(i._data if isinstance(i, Tensor) else i for i in index)
    return index


def is_advanced_index(index):
    """Whether ``index`` holds an index array (advanced indexing, which copies), not only slices, integers,
    ``None`` and ``...`` (basic indexing, which views)."""
    parts = index if isinstance(index, tuple) else (index,)
    return any(not isinstance(p, (slice, numbers.Integral, type(None), type(Ellipsis))) for p in parts)


def kept_index(index, like):
    """``index`` as a node keeps it for its backward: each list in it (``t[[1, 2]]``) made an index array on
    ``like``'s backend, so that ``Function.release`` drops it after a walk, as PyTorch frees the index tensors it
    saves (a second walk through the node then asks for ``retain_graph=True``). NumPy reads a list index as that
    array; a list it could not be (of slices, say) is kept, for NumPy's own error."""
    if isinstance(index, list):
        return _index_array(index, like)
    if isinstance(index, tuple) and any(isinstance(part, list) for part in index):
        return tuple(_index_array(part, like) if isinstance(part, list) else part for part in index)
    return index


def _index_array(part, like):
    try:
        array = np.asarray(part)
    except (TypeError, ValueError):
        return part
    if array.dtype.kind not in "biu":
        if array.size:
            return part
        array = array.astype(np.intp)  # ``[]``: no position (NumPy's float default would not index)
    return backend.namespace(like).asarray(array)


class GetItem(Function):
    """``x[index]``: basic slices, or integer-array indexing (repeats accumulate)."""

    differentiable = True
    saved_inputs, saves_output = (), False

    def forward(self, x, index):
        self.is_view = not is_advanced_index(index)  # basic indexing views the array, an index array copies
        if not self.is_view:
            index = kept_index(index, x)
        self.shape, self.dtype, self.index = x.shape, x.dtype, index
        try:
            return x[index]
        except IndexError as error:  # NumPy's words, with the operation and the shape added
            raise IndexError(f"getitem: {error} (indexing a tensor of shape {tuple(x.shape)})") from None

    def backward(self, grad):
        return (scatter(grad, self.shape, self.index),)

    @staticmethod
    def jvp(tangents, inputs, out, index):  # d(x[index]) = dx[index]
        return GetItem.apply(tangents[0], index=index)


class Scatter(Function):
    """``GetItem``'s backward as an operation: an array of zeros of ``shape`` with ``x`` added at ``index``
    (repeated positions accumulate). Its own backward reads ``index`` back out: ``GetItem``."""

    differentiable = True
    saved_inputs, saves_output = (), False

    def forward(self, x, shape, index):
        self.index = index
        full = backend.namespace(x).zeros(shape, dtype=x.dtype)
        if is_advanced_index(index):
            backend.scatter_add(full, index, x)
        else:
            full[index] = x
        return full

    def backward(self, grad):
        return (grad[self.index],)

    @staticmethod
    def jvp(tangents, inputs, out, shape, index):  # linear: the same scatter of the tangent
        return Scatter.apply(tangents[0], shape=shape, index=index)


def scatter(x, shape, index):
    """``Scatter`` on an array or a tensor (a backward formula's call)."""
    if isinstance(x, Tensor):
        return Scatter.apply(x, shape=shape, index=index)
    return Scatter().forward(x, shape, index)


class Concatenate(Function):
    saved_inputs, saves_output = (), False  # backward reads no array of theirs (see Function)
    differentiable = True
    def forward(self, *arrays, dim=0):
        xp = backend.namespace(arrays[0])
        self.dim = dim  # in [0, ndim), checked by ``cat``
        self.bounds = list(itertools.accumulate(a.shape[self.dim] for a in arrays))[:-1]
        try:
            return xp.concatenate(arrays, axis=self.dim)
        except ValueError:
            raise ValueError(f"cat: shapes {[tuple(a.shape) for a in arrays]} differ outside dim {dim}") from None

    def backward(self, grad):
        lead = (slice(None),) * self.dim
        starts, stops = [0, *self.bounds], [*self.bounds, grad.shape[self.dim]]
        return tuple(grad[lead + (slice(start, stop),)] for start, stop in zip(starts, stops))

    @staticmethod
    def jvp(tangents, inputs, out, dim=0):  # the tangents concatenated (zeros for an input without one)
        return Concatenate.apply(*[zeros_like(x) if t is None else t for t, x in zip(tangents, inputs)], dim=dim)


class Stack(Function):
    saved_inputs, saves_output = (), False  # backward reads no array of theirs (see Function)
    differentiable = True
    def forward(self, *arrays, dim=0):
        xp = backend.namespace(arrays[0])
        self.dim = dim  # in [0, ndim], checked by ``stack``
        try:
            return xp.stack(arrays, axis=self.dim)
        except ValueError:
            raise ValueError(f"stack: all shapes must be equal, got {[tuple(a.shape) for a in arrays]}") from None

    def backward(self, grad):
        lead = (slice(None),) * self.dim
        return tuple(grad[lead + (i,)] for i in range(grad.shape[self.dim]))

    @staticmethod
    def jvp(tangents, inputs, out, dim=0):  # the tangents stacked (zeros for an input without one)
        return Stack.apply(*[zeros_like(x) if t is None else t for t, x in zip(tangents, inputs)], dim=dim)


class TangentPack(Tensor):
    """The forward-mode tangent of a node that joins several tensors into one empty output (a hooked module's
    hub, the outputs of a custom ``autograd.Function``): an empty tensor of the output's dtype, carrying the
    joined tensors' tangents (``parts``) for the picks that take each tensor back out of the node."""

    __slots__ = ("parts",)

    def __init__(self, out, parts):
        super().__init__(backend.namespace(out._data).empty((0,), out.dtype))
        self.parts = parts


# ----------------------------------------------------------------------------- the public functions


def _lift(value, like):
    """A Python number or array operand as a constant tensor on ``like``'s device and dtype."""
    if isinstance(value, Tensor):
        return value
    kind = like._constant_like or like  # (a constant beside a batched tensor is one for every example)
    if backend.is_array(value):
        return Tensor._wrap(value, kind)
    dtype = like.dtype
    if dtype.kind not in "fc" and isinstance(value, float):
        dtype = np.float32
    elif dtype.kind == "b" and isinstance(value, int) and not isinstance(value, bool):
        dtype = np.int64  # bool tensor + 2: int64, as in PyTorch
    if not isinstance(value, (int, float)) and not isinstance(value, numbers.Number):  # (the abc check is slow)
        return Tensor(value, device=like.device)
    return Tensor._wrap(backend.namespace(like._data).asarray(value, dtype=dtype), kind)


def _float_if_integer(a, b):
    """An integer or boolean tensor meeting a Python float is computed in float32, as in PyTorch."""
    if a._data.dtype.kind in "biu" and isinstance(b, float):
        return a.float()
    return a


_CATEGORY = {"b": 0, "u": 1, "i": 1, "f": 2, "c": 3}


def result_type(a, b):
    """The dtype PyTorch computes ``a (op) b`` in, for two tensors.

    The higher category wins (bool < integer < floating): int64 with float32 is float32, where
    NumPy would say float64. Within a category the wider dtype wins (float32 with float64 is
    float64), except that a 0-d tensor does not widen a tensor with dimensions: it only lifts it
    to its own dtype when its category is higher. (Python numbers are lifted by ``_lift``, which
    never widens.)

    >>> import tinyattn as ta
    >>> result_type(ta.arange(3), ta.ones(3)), result_type(ta.ones(3), ta.tensor(np.float64(2.0)))
    (dtype('float32'), dtype('float32'))
    """
    da, db = a._data.dtype, b._data.dtype
    if da == db:
        return da
    ka, kb = _CATEGORY[da.kind], _CATEGORY[db.kind]
    if (a.ndim == 0) != (b.ndim == 0):  # one 0-d tensor meets a tensor with dimensions
        dimensioned, zero_d = (a, b) if b.ndim == 0 else (b, a)
        return zero_d._data.dtype if _CATEGORY[zero_d._data.dtype.kind] > _CATEGORY[dimensioned._data.dtype.kind] \
            else dimensioned._data.dtype
    if ka != kb:
        return da if ka > kb else db
    return np.promote_types(da, db)


def _operands(a, b):
    """``a`` and ``b`` as tensors of one dtype, chosen as PyTorch chooses it (see ``result_type``)."""
    a = _float_if_integer(a, b)
    b = _lift(b, a)
    if a._data.dtype != b._data.dtype:
        dtype = result_type(a, b)
        a, b = a._to_dtype(dtype), b._to_dtype(dtype)
    return a, b


def add(input, other, *, alpha=1):
    """Elementwise ``input + alpha * other`` (also ``input + other``), broadcasting like NumPy.

    Args: ``input``, ``other``: tensors or Python numbers; the gradient of each has its own shape. ``alpha``: the
    factor ``other`` is multiplied by first.

    >>> import tinyattn as ta
    >>> ta.add(ta.tensor([1.0, 2.0]), 10), ta.add(ta.tensor([1.0, 2.0]), ta.tensor([1.0, 1.0]), alpha=10)
    (tensor([11., 12.]), tensor([11., 12.]))
    """
    a, b = _operands(input, other)
    return Add.apply(a, b if alpha == 1 else b * alpha)


def sub(input, other, *, alpha=1):
    """Elementwise ``input - alpha * other`` (also ``input - other``), broadcasting like NumPy.

    Args: ``input``, ``other``: tensors or Python numbers. ``alpha``: the factor ``other`` is multiplied by first.

    >>> import tinyattn as ta
    >>> ta.sub(ta.tensor([[1.0], [2.0]]), ta.tensor([1.0, 0.0]))
    tensor([[0., 1.],
            [1., 2.]])
    >>> ta.sub(ta.tensor([11.0, 12.0]), 1.0, alpha=10)
    tensor([1., 2.])
    """
    a, b = _operands(input, other)
    return Sub.apply(a, b if alpha == 1 else b * alpha)


def mul(input, other):
    """Elementwise ``input * other`` (also ``input * other``), broadcasting like NumPy.

    Args: ``input``, ``other``: tensors or Python numbers.

    >>> import tinyattn as ta
    >>> ta.mul(ta.tensor([1.0, 2.0]), ta.tensor([3.0, 4.0]))
    tensor([3., 8.])
    """
    return Mul.apply(*_operands(input, other))


def div(input, other, *, rounding_mode=None):
    """Elementwise true division ``input / other`` (also ``input / other``); integer operands give float32, as in
    PyTorch. ``rounding_mode="trunc"`` rounds the quotient towards zero, ``"floor"`` down (Python's ``//``): a
    step function, whose gradient is zeros (summed to each input's shape), as PyTorch records it; integers keep
    their dtype then, and an integer division by zero raises, as in PyTorch.

    Args: ``input``, ``other``: tensors or Python numbers, broadcasting like NumPy; ``rounding_mode``: ``None``,
    ``"trunc"`` or ``"floor"``.

    >>> import tinyattn as ta
    >>> ta.div(ta.tensor([1, 3]), 2)
    tensor([0.5, 1.5])
    >>> ta.div(ta.tensor([-7.0, 7.0]), 2, rounding_mode="floor"), ta.div(ta.tensor([-7, 7]), 2, rounding_mode="trunc")
    (tensor([-4.,  3.]), tensor([-3,  3]))
    """
    a, b = _operands(input, other)
    if rounding_mode is None:
        if a._data.dtype.kind in "biu":
            a, b = a.float(), b.float()
        return Div.apply(a, b)
    if rounding_mode not in ("trunc", "floor"):
        raise RuntimeError(f"div expected rounding_mode to be one of None, 'trunc', or 'floor' but found "
                           f"{rounding_mode!r}")
    (a_data, b_data), like = aligned(a, b)
    xp = backend.namespace(a_data)
    with np.errstate(divide="ignore", invalid="ignore"):
        if a_data.dtype.kind in "biu":
            if (b_data == 0).any():
                raise RuntimeError("ZeroDivisionError")
            quotient = xp.floor_divide(a_data, b_data)
            if rounding_mode == "trunc":  # floor, moved up by one where the exact quotient is negative and inexact
                quotient = quotient + ((a_data % b_data != 0) & ((a_data < 0) != (b_data < 0)))
            return Tensor._wrap(quotient.astype(a_data.dtype, copy=False), like)
        quotient = xp.floor_divide(a_data, b_data) if rounding_mode == "floor" else xp.trunc(a_data / b_data)
    return piecewise(quotient, like, a, b)


def aligned(*tensors):
    """The arrays of ``tensors`` expanded to their common shape, and the tensor whose kind a result made from those
    arrays takes (inside ``vmap``, a batched one: its batch axes lead the arrays NumPy broadcasts). So a function
    that NumPy computes from several arrays (``floor_divide``, ``fmod``) lines up each example's elements."""
    shape = np.broadcast_shapes(*(t.shape for t in tensors))
    expanded = [t if t.shape == shape else expand(t, *shape) for t in tensors]
    # the result's kind: the tensor with the most batch axes (its array's rank above its own), then compat's
    like = builtins.max(expanded, key=lambda t: (t._data.ndim - t.ndim, t._result_class is not Tensor))
    return [t._data for t in expanded], like


def piecewise(values, like, *inputs):
    """``values`` (an array laid out as ``like``'s: a step function of ``inputs``, such as a rounding) as a tensor in
    the graph with a gradient of zeros for each floating input, as PyTorch records such functions: ``where`` with a
    condition that always holds takes the values and sends each input zeros, summed to its shape.

    >>> import tinyattn as ta
    >>> x = ta.tensor([0.4, 1.6], requires_grad=True)
    >>> piecewise(np.floor(x.data), x, x).backward(ta.ones(2))
    >>> x.grad
    array([0., 0.], dtype=float32)
    """
    out = Tensor._wrap(values, like)
    always = Tensor._wrap(backend.namespace(out._data).asarray(True))
    for x in inputs:
        if isinstance(x, Tensor) and x._data.dtype.kind in "fc":
            out = Where.apply(always, out, x._to_dtype(out._data.dtype))
    return out


def float_input(x):
    """``x`` as a float function takes it: an integer or boolean tensor becomes float32 (PyTorch's default dtype);
    a floating one stays as it is (float16 stays float16)."""
    return x.float() if x._data.dtype.kind in "biu" else x


def pow(a, b):
    """Elementwise ``a ** b`` (also ``a ** b``), differentiable in both the base and the exponent.

    Args: ``a``, ``b``: tensors or Python numbers, broadcasting like NumPy.

    >>> import tinyattn as ta
    >>> ta.pow(ta.tensor([2.0, 3.0]), 2)
    tensor([4., 9.])
    """
    return Pow.apply(*_operands(a, b))


def matmul(a, b):
    """Matrix product ``a @ b`` (also ``a @ b``): batched over leading dimensions, which broadcast.

    Args:
        a: ``(…, n, k)`` (or ``(k,)``, a vector).
        b: ``(…, k, m)`` (or ``(k,)``); the result is ``(…, n, m)``, with a vector's dimension dropped.

    >>> import tinyattn as ta
    >>> a = ta.tensor([[1.0, 2.0], [3.0, 4.0]])
    >>> ta.matmul(a, ta.tensor([1.0, 1.0]))
    tensor([3., 7.])
    >>> (a @ a).shape
    (2, 2)
    """
    b = _lift(b, a)
    if a._data.dtype.kind == "b" or b._data.dtype.kind == "b":
        raise TypeError(f"matmul: boolean operands are not supported, got {a.data.dtype} and {b.data.dtype}")
    return MatMul.apply(a, b)


def neg(x):
    """Elementwise ``-x`` (also unary ``-x``).

    >>> import tinyattn as ta
    >>> ta.neg(ta.tensor([1.0, -2.0]))
    tensor([-1.,  2.])
    """
    return Neg.apply(x)


def exp(x):
    """Elementwise ``e ** x``; its derivative is ``exp(x)`` itself.

    >>> import tinyattn as ta
    >>> ta.exp(ta.tensor([0.0, 1.0])).numpy().round(4)
    array([1.    , 2.7183], dtype=float32)
    """
    return Exp.apply(float_input(x))


def log(x):
    """Elementwise natural logarithm; its derivative is ``1 / x``.

    >>> import tinyattn as ta
    >>> ta.log(ta.tensor([1.0, 4.0])).numpy().round(4)
    array([0.    , 1.3863], dtype=float32)
    """
    return Log.apply(float_input(x))


def sqrt(x):
    """Elementwise square root; its derivative is ``1 / (2 sqrt(x))``.

    >>> import tinyattn as ta
    >>> ta.sqrt(ta.tensor([4.0, 9.0]))
    tensor([2., 3.])
    """
    return Sqrt.apply(float_input(x))


def tanh(x):
    """Elementwise hyperbolic tangent; its derivative is ``1 - tanh(x)²``.

    >>> import tinyattn as ta
    >>> ta.tanh(ta.tensor([0.0, 1.0])).numpy().round(4)
    array([0.    , 0.7616], dtype=float32)
    """
    return Tanh.apply(float_input(x))


def sigmoid(x):
    """Elementwise logistic function ``1 / (1 + exp(-x))``; its derivative is ``s (1 - s)``.

    >>> import tinyattn as ta
    >>> ta.sigmoid(ta.tensor([0.0, 2.0])).numpy().round(4)
    array([0.5   , 0.8808], dtype=float32)
    """
    return Sigmoid.apply(float_input(x))


def relu(x):
    """Elementwise ``max(x, 0)``; the gradient is 1 where ``x > 0``, else 0.

    >>> import tinyattn as ta
    >>> ta.relu(ta.tensor([-1.0, 0.5]))
    tensor([0. , 0.5])
    """
    return ReLU.apply(x)


def abs(x):
    """Elementwise absolute value; the gradient is ``sign(x)`` (0 at 0, as in PyTorch).

    >>> import tinyattn as ta
    >>> ta.abs(ta.tensor([-1.5, 2.0]))
    tensor([1.5, 2. ])
    """
    return Abs.apply(x)


def sum(x, dim=None, keepdim=False, *, dtype=None):
    """Sum of the elements, over all of them or over ``dim``; integers and booleans sum as int64, as in PyTorch.

    Args:
        x: the tensor.
        dim: an int or a tuple of ints; ``None`` sums everything to a 0-d tensor.
        keepdim: keep the reduced dimensions with size 1.
        dtype: the dtype to convert ``x`` to before summing.

    >>> import tinyattn as ta
    >>> x = ta.tensor([[1.0, 2.0], [3.0, 4.0]])
    >>> x.sum(), ta.sum(x, dim=0), x.sum(1, keepdim=True).shape
    (tensor(10.), tensor([4., 6.]), (2, 1))
    """
    if dtype is not None:
        x = x.to(dtype)
    elif x._data.dtype.kind in "biu" and x._data.dtype != np.int64:
        x = x.to(np.int64)
    return Sum.apply(x, dim=dim, keepdim=keepdim)


def _count(x, dim, name):
    """How many elements a reduction over ``dim`` (``None``: all) combines."""
    axes = _normalize_dims(dim, x.ndim, name)
    return x.numel() if axes is None else int(np.prod([x.shape[d] for d in axes]))


def _floating_reduction(name, x):
    if x._data.dtype.kind not in "fc":
        raise TypeError(f"{name}: the input must be a floating-point tensor, got dtype {x.data.dtype} "
                        "(convert it with .float())")


def mean(x, dim=None, keepdim=False, *, dtype=None):
    """Mean of a floating-point tensor, over all elements or over ``dim``.

    Args:
        x: a floating-point tensor (an integer one raises ``TypeError``, as in PyTorch).
        dim: an int or a tuple of ints; ``None`` averages everything.
        keepdim: keep the reduced dimensions with size 1.
        dtype: the floating-point dtype to convert ``x`` to first.

    >>> import tinyattn as ta
    >>> x = ta.tensor([[1.0, 2.0], [3.0, 4.0]])
    >>> x.mean(), ta.mean(x, dim=1)
    (tensor(2.5), tensor([1.5, 3.5]))
    """
    if dtype is not None:
        x = x.to(dtype)
    _floating_reduction("mean", x)
    count = _count(x, dim, "mean")
    return Sum.apply(x, dim=dim, keepdim=keepdim) / count


def amax(x, dim=None, keepdim=False):
    """Largest element over all elements or over ``dim``; ties share the gradient equally, as in PyTorch.

    Args:
        x: the tensor.
        dim: an int or a tuple of ints; ``None`` reduces everything.
        keepdim: keep the reduced dimensions with size 1.

    >>> import tinyattn as ta
    >>> ta.amax(ta.tensor([[1.0, 5.0], [3.0, 2.0]]), dim=1)
    tensor([5., 3.])
    """
    return Amax.apply(x, dim=dim, keepdim=keepdim)


def var(x, dim=None, unbiased=True, keepdim=False, *, correction=None):
    """Variance ``sum((x - mean)²) / (N - correction)`` over all elements or over ``dim``.

    Args:
        x: a floating-point tensor.
        dim: an int or a tuple of ints; ``None`` reduces everything.
        unbiased: PyTorch's older spelling: ``False`` means ``correction=0``.
        keepdim: keep the reduced dimensions with size 1.
        correction: subtracted from ``N``; 1 (Bessel's) by default.

    >>> import tinyattn as ta
    >>> x = ta.tensor([1.0, 2.0, 3.0, 4.0, 5.0])
    >>> x.var(), ta.var(x, correction=0)
    (tensor(2.5), tensor(2.))
    """
    if isinstance(dim, bool):  # var(False), PyTorch's var(unbiased)
        dim, unbiased = None, dim
    if correction is None:
        correction = 1 if unbiased else 0
    _floating_reduction("var", x)
    count = _count(x, dim, "var")
    centered = x - mean(x, dim, keepdim=True)
    return (centered * centered).sum(dim, keepdim) / max(count - correction, 0)


def where(condition, input=None, other=None):
    """``input`` where ``condition`` is true, else ``other``; the three broadcast together. With ``condition``
    alone, the indices where it is true, one int64 tensor per dimension (``nonzero(as_tuple=True)``).

    Args:
        condition: a boolean tensor.
        input, other: tensors or Python numbers (a number takes the other operand's dtype, as in PyTorch); the
            gradient flows to each where it was chosen.

    >>> import tinyattn as ta
    >>> x = ta.tensor([-1.0, 2.0])
    >>> ta.where(x > 0, x, 0.0)
    tensor([0., 2.])
    >>> ta.where(x > 0)
    (tensor([1]),)
    """
    condition = condition if isinstance(condition, Tensor) else Tensor(condition)
    if condition.dtype.kind != "b":
        raise RuntimeError(f"where: condition must be a boolean tensor, got dtype {condition.dtype}")
    if input is None and other is None:
        return tuple(Tensor._wrap(i.astype(np.int64), condition)
                     for i in backend.namespace(condition._data).nonzero(condition._data))
    a, b = input, other
    if not isinstance(a, Tensor) and not isinstance(b, Tensor):
        a = Tensor(a, device=condition.device)
    like = a if isinstance(a, Tensor) else b
    a, b = _lift(a, like), _lift(b, like)
    if a._data.dtype != b._data.dtype:
        dtype = result_type(a, b)
        a, b = a._to_dtype(dtype), b._to_dtype(dtype)
    return Where.apply(condition, a, b)


def masked_fill(x, mask, value):
    """``x`` with ``value`` wherever ``mask`` is true (the two broadcast together, as in PyTorch).

    Args:
        x: the tensor; the result keeps its dtype.
        mask: a boolean tensor broadcastable to ``x``.
        value: a number or a 0-d tensor (differentiable).

    >>> import tinyattn as ta
    >>> x = ta.tensor([1.0, 2.0, 3.0])
    >>> x.masked_fill(x > 1.5, -1.0)
    tensor([ 1., -1., -1.])
    """
    check.tensor("masked_fill", "mask", mask)
    if mask._data.dtype.kind != "b":
        raise TypeError(f"masked_fill: mask must be a boolean tensor, got dtype {mask.data.dtype}")
    if not isinstance(value, (Tensor, numbers.Number)):
        raise TypeError(f"masked_fill: value must be a number or a 0-d tensor, got {type(value).__name__}")
    value = value._to_dtype(x.dtype) if isinstance(value, Tensor) else \
        Tensor._wrap(backend.namespace(x._data).asarray(value, dtype=x.dtype), x._constant_like or x)
    if value.ndim != 0:
        raise RuntimeError(f"masked_fill: value must be a number or a 0-d tensor, got shape {value.shape}")
    try:
        return Where.apply(mask, value, x)
    except ValueError:
        raise ValueError(f"masked_fill: mask {mask.shape} and input {x.shape} cannot be broadcast together") from None


def _sizes(args):
    """Sizes given as ``f(2, 3)`` or ``f((2, 3))``, as a tuple."""
    return tuple(args[0]) if len(args) == 1 and not isinstance(args[0], numbers.Integral) else args


def reshape(x, *shape):
    """``x`` with the same elements in a new ``shape``; one size may be -1, inferred. A view of ``x``'s array where
    its strides allow, else a copy (``view`` is the form that never copies).

    Args:
        x: the tensor.
        shape: sizes as ``reshape(2, 3)`` or ``reshape((2, 3))``.

    >>> import tinyattn as ta
    >>> x = ta.arange(6)
    >>> x.reshape(2, 3).shape, ta.reshape(x, (3, 2)).shape, x.reshape(2, 3).T.reshape(-1).tolist()
    ((2, 3), (3, 2), [0, 3, 1, 4, 2, 5])
    """
    shape = _sizes(shape)
    inferred = 0
    for n in shape:
        if type(n) is not int or n < 0:
            if check.integer("reshape", "shape", n) != -1:
                raise ValueError(f"reshape: invalid size {n} in shape {shape} (sizes are >= 0, or -1 once)")
            inferred += 1
    if inferred > 1:
        raise ValueError(f"reshape: only one size may be -1 (inferred), got shape {shape}")
    if inferred and 0 in shape:
        raise ValueError(f"reshape: shape {shape} is ambiguous: -1 cannot be inferred beside a size of 0")
    return Reshape.apply(x, shape=shape)


def view(x, *shape):
    """``x``'s array in a new ``shape``, never a copy, as PyTorch's ``view``: a write through the result reaches
    ``x``. Where ``x``'s strides cannot give the shape without copying (a transposed matrix flattened), it raises
    PyTorch's error; ``reshape`` copies there, and ``contiguous()`` first makes any shape viewable.

    Args:
        x: the tensor.
        shape: sizes as ``view(2, 3)`` or ``view((2, 3))``; one size may be -1, inferred.

    >>> import tinyattn as ta
    >>> x = ta.zeros(2, 3)
    >>> x.view(-1, 2).shape, x.T.contiguous().view(-1).shape
    ((3, 2), (6,))
    >>> x.T.view(-1)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    RuntimeError: view size is not compatible with input tensor's size and stride ... Use .reshape(...) instead.
    """
    out = reshape(x, *shape)
    if out._data.size and not backend.namespace(x._data).may_share_memory(out._data, x._data):
        raise RuntimeError("view size is not compatible with input tensor's size and stride (at least one dimension "
                           "spans across two contiguous subspaces). Use .reshape(...) instead.")
    return out


def transpose(x, dim0, dim1):
    """``x`` with dimensions ``dim0`` and ``dim1`` swapped (also ``swapaxes``, ``swapdims``).

    Args:
        x: the tensor.
        dim0, dim1: the two dimensions (negative counts from the end).

    >>> import tinyattn as ta
    >>> x = ta.zeros(2, 3, 4)
    >>> x.transpose(0, 2).shape, ta.transpose(x, -1, -2).shape
    ((4, 3, 2), (2, 4, 3))
    """
    dims = list(range(x.ndim))
    dim0, dim1 = check.dim("transpose", "dim0", dim0, x.ndim), check.dim("transpose", "dim1", dim1, x.ndim)
    if x.ndim == 0:
        return Reshape.apply(x, shape=())
    dims[dim0], dims[dim1] = dims[dim1], dims[dim0]
    return Permute.apply(x, dims=tuple(dims))


def permute(x, *dims):
    """``x`` with its dimensions reordered: result dimension ``i`` is input dimension ``dims[i]``.

    Args:
        x: the tensor.
        dims: a permutation of ``range(x.ndim)``, as ``permute(2, 0, 1)`` or ``permute((2, 0, 1))``.

    >>> import tinyattn as ta
    >>> ta.zeros(2, 3, 4).permute(2, 0, 1).shape
    (4, 2, 3)
    """
    dims = _sizes(dims)
    ndim = x.ndim
    axes = tuple(check.dim("permute", "dims", d, ndim) for d in dims)
    if sorted(axes) != list(range(ndim)):
        raise ValueError(f"permute: dims {dims} are not a permutation of the {ndim} axes of {x.shape}")
    return Permute.apply(x, dims=axes)


def unsqueeze(x, dim):
    """``x`` with a new dimension of size 1 inserted at ``dim``.

    Args:
        x: the tensor.
        dim: the new dimension's position, in ``[-x.ndim - 1, x.ndim]``.

    >>> import tinyattn as ta
    >>> x = ta.zeros(2, 3)
    >>> x.unsqueeze(0).shape, ta.unsqueeze(x, -1).shape
    ((1, 2, 3), (2, 3, 1))
    """
    dim = check.dim("unsqueeze", "dim", dim, x.ndim + 1)
    return Reshape.apply(x, shape=x.shape[:dim] + (1,) + x.shape[dim:])


def squeeze(x, dim=None):
    """``x`` without dimensions of size 1: all of them, or those among ``dim`` (others are kept).

    Args:
        x: the tensor.
        dim: ``None``, an int or a tuple of ints.

    >>> import tinyattn as ta
    >>> x = ta.zeros(1, 2, 1)
    >>> x.squeeze().shape, x.squeeze(0).shape
    ((2,), (2, 1))
    """
    if dim is None:
        return Reshape.apply(x, shape=tuple(n for n in x.shape if n != 1))
    dims = check.dims("squeeze", "dim", dim, x.ndim)
    return Reshape.apply(x, shape=tuple(n for i, n in enumerate(x.shape) if not (i in dims and n == 1)))


def expand(x, *shape):
    """``x`` seen as ``shape`` without copying: sizes of 1 stretched, new dimensions in front; -1 keeps a size.

    Args:
        x: the tensor.
        shape: sizes as ``expand(2, 3)`` or ``expand((2, 3))``.

    >>> import tinyattn as ta
    >>> ta.tensor([[1.0], [2.0]]).expand(2, 3)
    tensor([[1., 1., 1.],
            [2., 2., 2.]])
    """
    shape = tuple(check.integer("expand", "size", n) for n in _sizes(shape))
    new = len(shape) - x.ndim
    if new < 0:
        raise ValueError(f"expand: {len(shape)} sizes {shape} for a tensor of {x.ndim} dimensions {x.shape}")
    for i, n in enumerate(shape):
        if n < -1 or (n == -1 and i < new):
            raise ValueError(f"expand: invalid size {n} at position {i} of {shape} for shape {x.shape} "
                             "(-1, keeping the size, is allowed only for an existing dimension)")
    return Expand.apply(x, shape=shape)


def flatten(x, start_dim=0, end_dim=-1):
    """``x`` with dimensions ``start_dim`` to ``end_dim`` (inclusive) merged into one.

    Args:
        x: the tensor.
        start_dim, end_dim: the first and last dimensions to merge.

    >>> import tinyattn as ta
    >>> x = ta.zeros(2, 3, 4)
    >>> x.flatten().shape, x.flatten(1).shape, ta.flatten(x, 0, 1).shape
    ((24,), (2, 12), (6, 4))
    """
    start = check.dim("flatten", "start_dim", start_dim, x.ndim)
    end = check.dim("flatten", "end_dim", end_dim, x.ndim)
    if start > end:
        raise ValueError(f"flatten: start_dim {start_dim} comes after end_dim {end_dim} for shape {x.shape}")
    if x.ndim == 0:
        return Reshape.apply(x, shape=(1,))
    middle = int(np.prod(x.shape[start:end + 1]))
    return Reshape.apply(x, shape=x.shape[:start] + (middle,) + x.shape[end + 1:])


def getitem(x, index):
    if modes.current().batching is not None:  # inside vmap: tensor indices stay tensors, to pair their batch with x's
        return GetItem.apply(x, index=index)
    return GetItem.apply(x, index=index_arrays(index))


def _sequence_of_tensors(name, tensors):
    """The tensors of a non-empty list or tuple, each with at least ``min_ndim`` dimensions."""
    if isinstance(tensors, Tensor) or not isinstance(tensors, (list, tuple)):
        raise TypeError(f"{name}: expected a list or tuple of tensors, got {type(tensors).__name__}")
    if not tensors:
        raise ValueError(f"{name}: expected a non-empty list of tensors, got an empty one")
    for i, t in enumerate(tensors):
        check.tensor(name, f"tensors[{i}]", t)
    ndims = {t.ndim for t in tensors}
    if len(ndims) > 1:
        raise ValueError(f"{name}: all tensors need the same number of dimensions, got shapes "
                         f"{[t.shape for t in tensors]}")
    return tensors[0].ndim


def cat(tensors, dim=0):
    """The tensors joined along an existing dimension ``dim`` (also ``ta.concat``).

    Args:
        tensors: a non-empty list or tuple of tensors with equal sizes except along ``dim``.
        dim: the dimension to join along.

    >>> import tinyattn as ta
    >>> a, b = ta.ones(2, 3), ta.zeros(1, 3)
    >>> ta.cat([a, b]).shape, ta.cat([a, a], dim=1).shape
    ((3, 3), (2, 6))

    A 1-D tensor of size 0 beside tensors of other shapes is skipped, as PyTorch skips it (its legacy empty
    tensor); its gradient is then ``None``.
    """
    if isinstance(tensors, (list, tuple)) and any(t.shape != (0,) for t in tensors if isinstance(t, Tensor)):
        tensors = [t for t in tensors if not (isinstance(t, Tensor) and t.shape == (0,))]
    ndim = _sequence_of_tensors("cat", tensors)
    if ndim == 0:
        raise ValueError("cat: 0-d tensors cannot be concatenated (stack them, or unsqueeze them first)")
    return Concatenate.apply(*tensors, dim=check.dim("cat", "dim", dim, ndim))


def stack(tensors, dim=0):
    """The tensors joined along a new dimension ``dim``.

    Args:
        tensors: a non-empty list or tuple of tensors of one shape.
        dim: the new dimension's position.

    >>> import tinyattn as ta
    >>> a = ta.zeros(2, 3)
    >>> ta.stack([a, a]).shape, ta.stack([a, a], dim=-1).shape
    ((2, 2, 3), (2, 3, 2))
    """
    ndim = _sequence_of_tensors("stack", tensors)
    return Stack.apply(*tensors, dim=check.dim("stack", "dim", dim, ndim + 1))


def _length_along(name, x, dim):
    if x.ndim == 0:
        raise ValueError(f"{name}: expects a tensor of at least one dimension, got a 0-d tensor")
    dim = check.dim(name, "dim", dim, x.ndim)
    return dim, x.shape[dim]


def split(x, split_size_or_sections, dim=0):
    """Pieces of ``x`` along ``dim``: of ``split_size_or_sections`` each (the last one shorter), or of the listed sizes.

    Args:
        x: the tensor.
        split_size_or_sections: an int (each piece's size) or a list of sizes adding up to the dimension's length.
        dim: the dimension to split.

    >>> import tinyattn as ta
    >>> x = ta.arange(5)
    >>> x.split(2)
    (tensor([0, 1]), tensor([2, 3]), tensor([4]))
    >>> [p.shape for p in ta.split(x, [1, 4])]
    [(1,), (4,)]
    """
    dim, length = _length_along("split", x, dim)
    if isinstance(split_size_or_sections, (list, tuple)):
        sizes = [check.size("split", "split_size_or_sections", n) for n in split_size_or_sections]
        if builtins.sum(sizes) != length:
            raise ValueError(f"split: sizes {sizes} do not add up to {length}, the length of dim {dim}")
    else:
        size = check.size("split", "split_size", split_size_or_sections)
        if size == 0 and length:
            raise ValueError(f"split: split_size 0 can only split a dimension of length 0, dim {dim} has {length}")
        sizes = [size] * (length // size) if size else []
        if size and length % size:
            sizes.append(length % size)
        sizes = sizes or [0]  # an empty dimension gives one empty piece, as in PyTorch
    pieces, start = [], 0
    for size in sizes:
        index = (slice(None),) * dim + (slice(start, start + size),)
        pieces.append(GetItem.apply(x, index=index))
        start += size
    return tuple(pieces)


def chunk(x, chunks, dim=0):
    """At most ``chunks`` pieces along ``dim``, each of ``ceil(length / chunks)`` (the last one shorter).

    Args:
        x: the tensor.
        chunks: the number of pieces asked for.
        dim: the dimension to split.

    >>> import tinyattn as ta
    >>> ta.arange(5).chunk(2)
    (tensor([0, 1, 2]), tensor([3, 4]))
    """
    chunks = check.positive("chunk", "chunks", chunks)
    dim, length = _length_along("chunk", x, dim)
    if length == 0:
        return split(x, [0] * chunks, dim)
    return split(x, -(-length // chunks), dim)


class NoGradElementwise(Function):
    """``compute(*arrays)``, an elementwise function whose result carries no gradient (a comparison, a logical or
    bit operation, integer arithmetic); the inputs broadcast together.

    A primitive for ``vmap``'s sake alone. A result made straight from the inputs' arrays
    (``Tensor._wrap(a._data < b._data)``) skips ``Function.apply``, the one place where a batching rule lines the
    batch axes up: the batch of a batched input then broadcasts against an unbatched input's leading axes (or
    another level's batch), and a result built from the logical shape loses the batch. Through ``apply``, the
    elementwise rule pads every input to one layout first, as it does for ``Add``. Its inputs come detached
    (``no_grad_elementwise``), so it never joins the graph and carries no tangent.
    """

    saved_inputs, saves_output = (), False

    def forward(self, *arrays, compute):
        return compute(*arrays)


def no_grad_elementwise(compute, *operands):
    """``compute`` (a NumPy ufunc, or a function of arrays that broadcasts as one) of the operands' arrays, as a
    tensor with no gradient: the operands are detached, and the result is batched under ``vmap`` like theirs.

    >>> import tinyattn as ta
    >>> no_grad_elementwise(np.less, ta.tensor([1.0, 3.0], requires_grad=True), ta.tensor(2.0))
    tensor([ True, False])
    """
    return NoGradElementwise.apply(*[t.detach() if t.requires_grad or t._tangents else t for t in operands],
                                   compute=compute)


def compare(compute, a, b):
    """``compute`` (``np.less``…) of ``a`` and ``b`` (a tensor, a number) in the dtype PyTorch compares them in
    (``result_type``): a boolean tensor with no gradient.

    >>> import tinyattn as ta
    >>> compare(np.equal, ta.tensor([0.1, 0.2]), 0.1)
    tensor([ True, False])
    """
    a, b = _operands(a, b)
    return no_grad_elementwise(compute, a, b)


def _kind_of_pair(a, b):
    """The tensor whose class a result of ``a`` and ``b`` takes (``Tensor._wrap``): ``b`` when it is a
    tensor of a subclass's kind (a compat tensor) and ``a`` is not, else ``a``."""
    if isinstance(b, Tensor) and b._result_class is not Tensor and a._result_class is Tensor:
        return b
    return a


def _comparison_operator(compute):
    """``a < b`` and its kin: ``compare``, or ``NotImplemented`` for an operand that is no tensor, number or array
    (so ``t == None`` is ``False``, as in PyTorch)."""
    def operator(a, b):
        if isinstance(b, (Tensor, numbers.Number)) or backend.is_array(b):
            return compare(compute, a, b)
        return NotImplemented

    return operator


class _TensorNamespace:
    """``namespace(tensor)``: the array library's names that backward formulas call, as differentiable
    operations on tensors (``ops_extra`` adds its own: ``sin``, ``cos``, ``flip``, ``cumsum``)."""

    where, log, exp, sqrt, tanh = map(staticmethod, (where, log, exp, sqrt, tanh))

    @staticmethod
    def sum(x, axis=None, keepdims=False):
        return sum(x, axis, keepdims)

    @staticmethod
    def mean(x, axis=None, keepdims=False):
        return mean(x, axis, keepdims)

    @staticmethod
    def flip(x, axis):
        return x[(slice(None),) * (axis % x.ndim) + (slice(None, None, -1),)]

    @staticmethod
    def broadcast_to(x, shape):
        return expand(x, *shape)

    @staticmethod
    def transpose(x, axes):
        return permute(x, *axes)

    @staticmethod
    def swapaxes(x, axis0, axis1):
        return transpose(x, axis0, axis1)


TENSOR_NAMESPACE = _TensorNamespace()


# ----------------------------------------------------------------------------- Tensor methods

Tensor.__add__ = add
Tensor.__radd__ = lambda a, b: add(a, b)
Tensor.__sub__ = sub
Tensor.__rsub__ = lambda a, b: sub(_lift(b, a), a)
Tensor.__mul__ = mul
Tensor.__rmul__ = lambda a, b: mul(a, b)
Tensor.__truediv__ = div
Tensor.__rtruediv__ = lambda a, b: div(_lift(b, a), a)
Tensor.__pow__ = pow
Tensor.__rpow__ = lambda a, b: pow(_lift(b, a), a)
Tensor.__matmul__ = matmul
Tensor.__rmatmul__ = lambda a, b: matmul(_lift(b, a), a)
Tensor.__neg__ = neg
Tensor.__getitem__ = getitem
Tensor.__lt__, Tensor.__le__ = _comparison_operator(np.less), _comparison_operator(np.less_equal)
Tensor.__gt__, Tensor.__ge__ = _comparison_operator(np.greater), _comparison_operator(np.greater_equal)
Tensor.__eq__, Tensor.__ne__ = _comparison_operator(np.equal), _comparison_operator(np.not_equal)
Tensor.matmul = matmul
Tensor.exp, Tensor.log, Tensor.sqrt, Tensor.tanh = exp, log, sqrt, tanh
Tensor.sigmoid, Tensor.relu, Tensor.abs = sigmoid, relu, abs
Tensor.sum, Tensor.mean, Tensor.amax, Tensor.var = sum, mean, amax, var
Tensor.reshape, Tensor.view = reshape, view
Tensor.transpose, Tensor.permute = transpose, permute
Tensor.swapaxes = Tensor.swapdims = transpose  # PyTorch's (and NumPy's) other names for it
Tensor.unsqueeze, Tensor.squeeze, Tensor.expand, Tensor.flatten = unsqueeze, squeeze, expand, flatten
Tensor.masked_fill = masked_fill
Tensor.split, Tensor.chunk = split, chunk


def _T(x):
    """The tensor with its dimensions reversed (``x.permute(*reversed(range(x.ndim)))``).

    >>> import tinyattn as ta
    >>> ta.zeros(2, 3, 4).T.shape
    (4, 3, 2)
    """
    return permute(x, tuple(reversed(range(x.ndim))))


Tensor.T = property(_T)


def _to(self, *args, device=None, dtype=None, non_blocking=False, copy=False, memory_format=None):
    """The tensor on another device or in another dtype, in PyTorch's forms: ``to(dtype)``, ``to(device)``,
    ``to(device, dtype)``, ``to(other)`` (``other``'s device and dtype), each followed by ``non_blocking`` and
    ``copy``, or ``to(device=..., dtype=...)``. The tensor itself when nothing changes, unless ``copy=True``
    (then a copy, as ``clone()``). ``non_blocking`` and ``memory_format`` are accepted as in PyTorch and change
    nothing here.

    Differentiable, as in PyTorch: the gradient goes back to the original device and dtype.

    >>> import tinyattn as ta
    >>> x = ta.tensor([1.5, 2.0])
    >>> x.to(ta.float64), x.to(ta.int64), x.to("cpu") is x, x.to("cpu", copy=True) is x
    (tensor([1.5, 2. ], dtype=float64), tensor([1, 2]), True, False)
    """
    args = list(args)
    if args and isinstance(args[0], Tensor):  # to(other): other's device and dtype
        other = args.pop(0)
        device, dtype = other.device, other.dtype
    else:
        if args and isinstance(args[0], str):
            device = args.pop(0)
        if args and not isinstance(args[0], (bool, np.bool_)):
            dtype = args.pop(0)
    if len(args) > 2:
        raise TypeError(f"to(): too many positional arguments: after the device and dtype come non_blocking and "
                        f"copy, got {len(args)} more")
    copy = args[1] if len(args) == 2 else copy
    result = self
    if device is not None:
        if device not in backend.DEVICES:
            raise ValueError(f"to(): unknown device {device!r}, expected one of {backend.DEVICES}")
        if device != self.device:
            result = To.apply(self, device=device)
    result = result if dtype is None else _to_dtype(result, dtype)
    return result.clone() if copy and result is self else result


def _to_dtype(self, target):
    dtype = np.dtype(target)
    if dtype == self.dtype:
        return self
    if dtype.kind not in "fc":  # an integer or boolean result carries no gradient
        return Tensor._wrap(self._data.astype(dtype), self)
    return To.apply(self, dtype=dtype)


Tensor.to, Tensor._to_dtype = _to, _to_dtype


def _size(self, dim=None):
    """The shape, or the size of dimension ``dim``.

    >>> import tinyattn as ta
    >>> x = ta.zeros(2, 3)
    >>> x.size(), x.size(-1)
    ((2, 3), 3)
    """
    if dim is None:
        return self.shape
    if isinstance(dim, int) and -self.ndim <= dim < self.ndim:
        return self.shape[dim]
    raise IndexError(f"size(): dim {dim!r} is out of range [{-self.ndim}, {self.ndim - 1}] for shape {self.shape}")


def _len(self):
    if self.ndim == 0:
        raise TypeError("len() of a 0-d tensor")
    return self.shape[0]


def _bool(self):
    if self._data.size != 1:
        raise RuntimeError(f"bool() of a tensor of shape {self.shape} is ambiguous: only a one-element tensor "
                           "has a truth value (reduce it first, or test t.numpy())")
    return bool(self._data.item())


# conversions: to Python numbers, to a dtype or a device (``to``), and the sizes
Tensor.size, Tensor.__len__, Tensor.__bool__ = _size, _len, _bool
Tensor.__float__, Tensor.__int__ = lambda self: float(self.item()), lambda self: int(self.item())


def _numel(self):
    """The number of elements.

    >>> import tinyattn as ta
    >>> ta.zeros(2, 3).numel()
    6
    """
    return int(self._data.size)


def _float(self, memory_format=None):
    """The tensor as float32 (``to(ta.float32)``); ``memory_format`` is accepted as in PyTorch.

    >>> import tinyattn as ta
    >>> ta.tensor([1, 2]).float()
    tensor([1., 2.])
    """
    return self.to(np.float32)


def _double(self, memory_format=None):
    """The tensor as float64 (``to(ta.float64)``).

    >>> import tinyattn as ta
    >>> ta.tensor([1, 2]).double()
    tensor([1., 2.], dtype=float64)
    """
    return self.to(np.float64)


def _long(self, memory_format=None):
    """The tensor as int64 (``to(ta.int64)``), truncating towards zero.

    >>> import tinyattn as ta
    >>> ta.tensor([1.7, -1.7]).long()
    tensor([ 1, -1])
    """
    return self.to(np.int64)


def _cpu(self):
    """The tensor on the host (NumPy), differentiable; the tensor itself when it is there already.

    >>> import tinyattn as ta
    >>> x = ta.zeros(2)
    >>> x.cpu() is x
    True
    """
    return self.to("cpu")


def _cuda(self):
    """The tensor on the GPU (CuPy), differentiable; needs CuPy and an NVIDIA GPU.

    >>> import tinyattn as ta
    >>> ta.zeros(2).cuda().device  # doctest: +SKIP
    'cuda'
    """
    return self.to("cuda")


Tensor.numel, Tensor.float, Tensor.double, Tensor.long, Tensor.cpu, Tensor.cuda = (
    _numel, _float, _double, _long, _cpu, _cuda)


def _numpy(self):
    """A NumPy copy of the data (copied from the GPU if need be).

    >>> import tinyattn as ta
    >>> ta.tensor([1.0, 2.0]).numpy()
    array([1., 2.], dtype=float32)
    """
    return backend.to_numpy(self._data)


def _item(self):
    """The value of a one-element tensor as a Python number.

    >>> import tinyattn as ta
    >>> ta.tensor([[2.5]]).item()
    2.5
    """
    if self._data.size != 1:
        raise ValueError(f"item(): only one-element tensors convert to a Python number, shape is {self.shape}")
    return self._data.item()


def _tolist(self):
    """The data as nested Python lists (a number for a 0-d tensor).

    >>> import tinyattn as ta
    >>> ta.tensor([[1, 2], [3, 4]]).tolist()
    [[1, 2], [3, 4]]
    """
    return self.numpy().tolist()


def _detach_(self):
    """Cut this tensor from the graph, in place: it becomes a leaf that requires no gradient and has no tangent
    (forward mode), as ``detach()``'s result.

    >>> import tinyattn as ta
    >>> y = ta.ones(2, requires_grad=True) * 2
    >>> y.detach_().is_leaf, y.requires_grad
    (True, False)
    """
    if self._view is not None and self._view[0].requires_grad:
        raise RuntimeError("detach_: cannot detach a view of a tensor that requires grad in place; use detach(), "
                           "which returns a new tensor")
    self._ctx, self.requires_grad, self._tangents = None, False, None
    return self


def _repr(self):
    body = np.array2string(backend.to_numpy(self._data), separator=", ", prefix="tensor(")
    extra = "" if self.dtype in (np.float32, np.int64, np.bool_) else f", dtype={self.dtype}"
    extra += "" if self.device == "cpu" else f", device='{self.device}'"
    if self._ctx is not None:
        extra += f", grad_fn=<{type(self._ctx).__name__}>"
    elif self.requires_grad:
        extra += ", requires_grad=True"
    return f"tensor({body}{extra})"


def _format(self, format_spec):
    """A 0-d tensor formats as its number (``f"{loss:.4f}"``); any other tensor takes no format spec.

    >>> import tinyattn as ta
    >>> f"loss {ta.tensor(0.123456):.3f}"
    'loss 0.123'
    """
    if self.ndim == 0:
        return format(self.item(), format_spec)
    if format_spec:
        raise TypeError(f"unsupported format string {format_spec!r} passed to Tensor.__format__ for a tensor of "
                        f"shape {self.shape}; only a 0-d tensor formats as a number")
    return str(self)


Tensor.numpy, Tensor.item, Tensor.tolist, Tensor.detach_, Tensor.__repr__ = _numpy, _item, _tolist, _detach_, _repr
Tensor.__format__ = _format
