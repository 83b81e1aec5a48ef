"""Floor 3, continued: the everyday tensor API that model code calls beyond the primitives.

A few new primitives (``sin``, ``cos``, ``clamp``, ``clone``), and functions composed from the
primitives, so that their gradients come for free: ``max``/``min`` along a dim and ``topk``
gather the chosen elements by integer-array indexing, ``repeat`` is a reshape, an expand and
a reshape, ``tril``/``triu`` are a ``masked_fill``, ``std`` is ``sqrt(var)``. The rest carry no
gradient (``argmax``, ``nonzero``, ``multinomial``, ``all``). Names, argument names and
defaults are PyTorch's.

>>> import tinyattn as ta
>>> x = ta.tensor([[1.0, 5.0, 3.0], [4.0, 2.0, 6.0]], requires_grad=True)
>>> values, indices = x.max(dim=1)
>>> values, indices
(tensor([5., 6.], grad_fn=<Reshape>), tensor([1, 2]))
>>> values.backward(ta.tensor([1.0, 10.0]))
>>> x.grad
array([[ 0.,  1.,  0.],
       [ 0.,  0., 10.]], dtype=float32)
"""

import collections
import numbers
from builtins import max as builtins_max

import numpy as np

from . import backend
from .engine import Function, Tensor
from .ops import (
    TENSOR_NAMESPACE,
    _kind_of_pair,
    _normalize_dims,
    amax,
    float_input,
    getitem,
    masked_fill,
    matmul,
    namespace,
    sqrt,
    sum,
    var,
    where,
)

# ----------------------------------------------------------------------------- new primitives


class Sin(Function):
    saved_inputs, saves_output, differentiable, saved_as = None, False, True, {"x": 0}

    def forward(self, x):
        self.x = x
        return backend.namespace(x).sin(x)

    def backward(self, grad):
        return (grad * namespace(grad).cos(self.x),)

    @staticmethod
    def jvp(tangents, inputs, out):  # d sin x = cos x·dx
        return tangents[0] * cos(inputs[0])


class Cos(Function):
    saved_inputs, saves_output, differentiable, saved_as = None, False, True, {"x": 0}

    def forward(self, x):
        self.x = x
        return backend.namespace(x).cos(x)

    def backward(self, grad):
        return (-grad * namespace(grad).sin(self.x),)

    @staticmethod
    def jvp(tangents, inputs, out):  # d cos x = -sin x·dx
        return -tangents[0] * sin(inputs[0])


class Clamp(Function):
    """``min(max(x, min), max)``; the gradient passes where ``min <= x <= max``, as in PyTorch."""

    saved_inputs, saves_output, differentiable = (), False, True

    def forward(self, x, min=None, max=None):
        xp = backend.namespace(x)
        self.inside = xp.ones(x.shape, dtype=bool)
        if min is not None:
            self.inside &= x >= min
        if max is not None:
            self.inside &= x <= max
        return xp.clip(x, min, max).astype(x.dtype, copy=False)

    def backward(self, grad):
        return (grad * self.inside,)

    @staticmethod
    def jvp(tangents, inputs, out, min=None, max=None):  # dx where min <= x <= max, else 0
        (dx,), (x,) = tangents, inputs
        if min is not None:
            dx = dx * (x >= min)
        return dx if max is None else dx * (x <= max)


class Cumsum(Function):
    """Running sums along ``dim``; the gradient is the running sum of the gradient from the other end."""

    saved_inputs, saves_output, differentiable = (), False, True

    def forward(self, x, dim=0):
        self.dim = dim
        return backend.namespace(x).cumsum(x, axis=dim, dtype=x.dtype)

    def backward(self, grad):
        xp = namespace(grad)
        return (xp.flip(xp.cumsum(xp.flip(grad, axis=self.dim), axis=self.dim), axis=self.dim),)

    @staticmethod
    def jvp(tangents, inputs, out, dim=0):  # linear: the running sums of the tangent
        return Cumsum.apply(tangents[0], dim=dim)


class Clone(Function):
    """A copy of the array; the gradient passes unchanged."""

    saved_inputs, saves_output, differentiable = (), False, True

    def forward(self, x):
        return x.copy()

    def backward(self, grad):
        return (grad,)

    @staticmethod
    def jvp(tangents, inputs, out):
        return Clone.apply(tangents[0])


def sin(input):
    """Elementwise sine; its derivative is ``cos(input)``.

    >>> import tinyattn as ta
    >>> ta.sin(ta.tensor([0.0, 1.5708])).numpy().round(4)
    array([0., 1.], dtype=float32)
    """
    return Sin.apply(float_input(input))


def cos(input):
    """Elementwise cosine; its derivative is ``-sin(input)``.

    >>> import tinyattn as ta
    >>> ta.cos(ta.tensor([0.0, 3.1416])).numpy().round(4)
    array([ 1., -1.], dtype=float32)
    """
    return Cos.apply(float_input(input))


def clamp(input, min=None, max=None):
    """Every element limited to ``[min, max]`` (also ``clip``); the gradient passes where the input is inside.

    Args:
        input: the tensor.
        min, max: the bounds (numbers); either may be ``None``.

    >>> import tinyattn as ta
    >>> ta.clamp(ta.tensor([-2.0, 0.5, 3.0]), min=0.0, max=1.0)
    tensor([0. , 0.5, 1. ])
    """
    if min is None and max is None:
        raise ValueError("clamp: at least one of min and max must be given")
    return Clamp.apply(input, min=min, max=max)


def cumsum(input, dim):
    """Running sums along ``dim``: ``out[..., i] = input[..., 0] + … + input[..., i]`` (in the input's dtype).

    Args:
        input: the tensor.
        dim: the dimension to sum along.

    >>> import tinyattn as ta
    >>> ta.cumsum(ta.tensor([1, 2, 3]), dim=0)
    tensor([1, 3, 6])
    """
    dim = _normalize_dims(dim, builtins_max(input.ndim, 1))[0]
    if input.ndim == 0:
        return clone(input)
    return Cumsum.apply(input, dim=dim)


def clone(input):
    """A copy of ``input`` with its own memory; the gradient passes unchanged.

    >>> import tinyattn as ta
    >>> x = ta.tensor([1.0, 2.0])
    >>> y = x.clone()
    >>> y.data is x.data, y
    (False, tensor([1., 2.]))
    """
    return Clone.apply(input)


def _cumsum_along(x, axis):
    return Cumsum.apply(x, dim=axis % x.ndim)


# the backward formulas' names for these operations on tensors (see ``ops.namespace``)
TENSOR_NAMESPACE.sin, TENSOR_NAMESPACE.cos, TENSOR_NAMESPACE.cumsum = sin, cos, _cumsum_along


# ----------------------------------------------------------------------------- selecting along a dim


def _along(index, dim):
    """The integer-array index that picks ``x[i, j, index[i, j, k], …]``: PyTorch's gather pattern.

    Every axis but ``dim`` is indexed by its own position (an ``arange`` shaped to broadcast)."""
    xp = backend.namespace(index)
    parts = []
    for axis, n in enumerate(index.shape):
        if axis == dim:
            parts.append(index)
        else:
            shape = [1] * index.ndim
            shape[axis] = n
            parts.append(xp.arange(n).reshape(shape))
    return tuple(parts)


def gather(input, dim, index):
    """Values of ``input`` picked along ``dim`` by ``index``: ``out[i][j] = input[i][index[i][j]]`` for ``dim=1``.

    Args:
        input: the tensor; differentiable.
        dim: the dimension to pick along.
        index: an integer tensor with ``input``'s number of dimensions; the result has its shape.

    >>> import tinyattn as ta
    >>> x = ta.tensor([[1.0, 2.0], [3.0, 4.0]])
    >>> ta.gather(x, 1, ta.tensor([[1], [0]]))
    tensor([[2.],
            [3.]])
    """
    dim = _normalize_dims(dim, input.ndim)[0]
    index = index._data if isinstance(index, Tensor) else index
    return getitem(input, _along(index, dim))


MaxResult = collections.namedtuple("max", ["values", "indices"])
MinResult = collections.namedtuple("min", ["values", "indices"])
TopkResult = collections.namedtuple("topk", ["values", "indices"])


def _array_or_value(other):
    return other._data if isinstance(other, Tensor) else other


def _no_grad(array, like):
    """A result with no gradient (indices, logic) of ``like``'s kind (``None``: a plain Tensor)."""
    return Tensor._wrap(np.asarray(array) if isinstance(array, np.generic) else array, like)


def argmax(input, dim=None, keepdim=False):
    """The index of the largest element, over ``dim`` or of the flattened tensor when ``dim`` is ``None``.

    Args:
        input: the tensor.
        dim: the dimension to reduce, or ``None``.
        keepdim: keep the reduced dimension with size 1.

    >>> import tinyattn as ta
    >>> x = ta.tensor([[1.0, 5.0], [3.0, 2.0]])
    >>> ta.argmax(x), x.argmax(dim=1)
    (tensor(1), tensor([1, 0]))
    """
    if dim is None:
        return _no_grad(input._data.argmax(), input)
    dim = _normalize_dims(dim, input.ndim)[0]
    return _no_grad(input._data.argmax(axis=dim, keepdims=keepdim), input)


def argmin(input, dim=None, keepdim=False):
    """The index of the smallest element, over ``dim`` or of the flattened tensor when ``dim`` is ``None``.

    Args:
        input: the tensor.
        dim: the dimension to reduce, or ``None``.
        keepdim: keep the reduced dimension with size 1.

    >>> import tinyattn as ta
    >>> ta.argmin(ta.tensor([[1.0, 5.0], [3.0, 2.0]]), dim=1)
    tensor([0, 1])
    """
    if dim is None:
        return _no_grad(input._data.argmin(), input)
    dim = _normalize_dims(dim, input.ndim)[0]
    return _no_grad(input._data.argmin(axis=dim, keepdims=keepdim), input)


def _pick(input, indices, dim, keepdim):
    """The elements of ``input`` at ``indices`` (taken with keepdim=True) along ``dim``."""
    values = gather(input, dim, indices)
    if not keepdim:
        values = values.squeeze(dim)
    return values


def max(input, dim=None, keepdim=False):
    """The largest element; along ``dim``, the pair ``(values, indices)``; with a tensor, the elementwise maximum.

    Args:
        input: the tensor.
        dim: ``None`` (the whole tensor; ties share the gradient), an int, or a tensor (``maximum``).
        keepdim: keep the reduced dimension with size 1.

    >>> import tinyattn as ta
    >>> x = ta.tensor([[1.0, 5.0], [3.0, 2.0]])
    >>> x.max()
    tensor(5.)
    >>> values, indices = ta.max(x, dim=0)
    >>> values, indices
    (tensor([3., 5.]), tensor([1, 0]))
    """
    if isinstance(dim, Tensor):
        return maximum(input, dim)
    if dim is None:
        return amax(input)
    dim = _normalize_dims(dim, input.ndim)[0]
    indices = input._data.argmax(axis=dim, keepdims=True)
    return MaxResult(_pick(input, indices, dim, keepdim), _no_grad(indices if keepdim else indices.squeeze(dim), input))


def min(input, dim=None, keepdim=False):
    """The smallest element; along ``dim``, the pair ``(values, indices)``; with a tensor, the elementwise minimum.

    Args:
        input: the tensor.
        dim: ``None`` (the whole tensor), an int, or a tensor (``minimum``).
        keepdim: keep the reduced dimension with size 1.

    >>> import tinyattn as ta
    >>> x = ta.tensor([[1.0, 5.0], [3.0, 2.0]])
    >>> x.min(), ta.min(x, dim=1).values
    (tensor(1.), tensor([1., 2.]))
    """
    if isinstance(dim, Tensor):
        return minimum(input, dim)
    if dim is None:
        return -amax(-input)
    dim = _normalize_dims(dim, input.ndim)[0]
    indices = input._data.argmin(axis=dim, keepdims=True)
    return MinResult(_pick(input, indices, dim, keepdim), _no_grad(indices if keepdim else indices.squeeze(dim), input))


def maximum(input, other):
    """The elementwise maximum of ``input`` and ``other`` (broadcasting); ties send the gradient to ``input``.

    >>> import tinyattn as ta
    >>> ta.maximum(ta.tensor([1.0, 4.0]), ta.tensor([3.0, 2.0]))
    tensor([3., 4.])
    """
    return where(input >= other, input, other)


def minimum(input, other):
    """The elementwise minimum of ``input`` and ``other`` (broadcasting); ties send the gradient to ``input``.

    >>> import tinyattn as ta
    >>> ta.minimum(ta.tensor([1.0, 4.0]), ta.tensor([3.0, 2.0]))
    tensor([1., 2.])
    """
    return where(input <= other, input, other)


def topk(input, k, dim=-1, largest=True, sorted=True):
    """The ``k`` largest (or smallest) elements along ``dim`` and their indices, largest first.

    Args:
        input: the tensor.
        k: how many elements to keep.
        dim: the dimension to search (the last by default).
        largest: ``False`` keeps the ``k`` smallest.
        sorted: accepted for PyTorch's signature; the elements come sorted.

    >>> import tinyattn as ta
    >>> values, indices = ta.topk(ta.tensor([1.0, 4.0, 2.0, 3.0]), 2)
    >>> values, indices
    (tensor([4., 3.]), tensor([1, 3]))
    """
    dim = _normalize_dims(dim, input.ndim)[0]
    xp = backend.namespace(input._data)
    if not 0 <= k <= input.shape[dim]:
        raise ValueError(f"topk: k={k} is out of range for dim {dim} of size {input.shape[dim]}")
    order = xp.argsort(-input._data if largest else input._data, axis=dim, kind="stable")
    indices = xp.take(order, xp.arange(k), axis=dim)
    return TopkResult(gather(input, dim, indices), _no_grad(indices, input))


# ----------------------------------------------------------------------------- composed from primitives


def std(input, dim=None, unbiased=True, keepdim=False, *, correction=None):
    """Standard deviation ``sqrt(var(...))``, with ``var``'s arguments (``correction`` 1 by default).

    Args:
        input: a floating-point tensor.
        dim: an int or a tuple of ints; ``None`` reduces everything.
        unbiased: ``False`` means ``correction=0``.
        keepdim: keep the reduced dimensions with size 1.
        correction: subtracted from the count.

    >>> import tinyattn as ta
    >>> ta.std(ta.tensor([1.0, 3.0]), correction=0)
    tensor(1.)
    """
    return sqrt(var(input, dim, unbiased, keepdim, correction=correction))


def norm(input, p="fro", dim=None, keepdim=False):
    """The vector ``p``-norm over ``dim`` (all elements by default).

    Args:
        input: a floating-point tensor.
        p: 2 (or ``"fro"``), 1, ``inf`` or any ``p > 0``.
        dim: an int or a tuple of ints; ``None`` reduces everything.
        keepdim: keep the reduced dimensions with size 1.

    >>> import tinyattn as ta
    >>> x = ta.tensor([3.0, -4.0])
    >>> x.norm(), ta.norm(x, p=1)
    (tensor(5.), tensor(7.))
    """
    if p in ("fro", 2):
        return sqrt(sum(input * input, dim, keepdim))
    if p == float("inf"):
        return amax(input.abs(), dim, keepdim)
    if p == 1:
        return sum(input.abs(), dim, keepdim)
    return sum(input.abs() ** p, dim, keepdim) ** (1.0 / p)


def _sizes(sizes):
    return tuple(sizes[0]) if len(sizes) == 1 and not isinstance(sizes[0], numbers.Integral) else tuple(sizes)


def repeat(input, *sizes):
    """``input`` tiled ``sizes[i]`` times along each dimension (leading dimensions added as needed).

    Each dimension ``n`` is viewed as ``(1, n)``, expanded to ``(r, n)`` and merged to ``r·n``.

    Args:
        input: the tensor.
        sizes: one count per dimension, as ``repeat(2, 1)`` or ``repeat((2, 1))``.

    >>> import tinyattn as ta
    >>> ta.tensor([1, 2]).repeat(2)
    tensor([1, 2, 1, 2])
    """
    sizes = _sizes(sizes)
    if len(sizes) < input.ndim:
        raise ValueError(f"repeat: {len(sizes)} sizes for a tensor of {input.ndim} dims; give at least {input.ndim}")
    shape = (1,) * (len(sizes) - input.ndim) + input.shape
    pairs = [m for n in shape for m in (1, n)]  # (1, n0, 1, n1, …)
    expanded = [m for r, n in zip(sizes, shape) for m in (r, n)]  # (r0, n0, r1, n1, …)
    return input.reshape(pairs).expand(expanded).reshape([r * n for r, n in zip(sizes, shape)])


def repeat_interleave(input, repeats, dim=None, *, output_size=None):
    """Each element (each slice along ``dim``) repeated ``repeats`` times in place: [a, b] → [a, a, b, b].

    Args:
        input: the tensor.
        repeats: an int, or a tensor of one count per slice.
        dim: the dimension; ``None`` flattens first.
        output_size: accepted for PyTorch's signature.

    >>> import tinyattn as ta
    >>> ta.repeat_interleave(ta.tensor([1, 2]), 2)
    tensor([1, 1, 2, 2])
    """
    if dim is None:
        input, dim = input.flatten(), 0
    dim = _normalize_dims(dim, input.ndim)[0]
    xp = backend.namespace(input._data)
    counts = repeats._data if isinstance(repeats, Tensor) else repeats
    positions = xp.repeat(xp.arange(input.shape[dim]), counts)
    return getitem(input, (slice(None),) * dim + (positions,))


def _triangle(input, diagonal, lower):
    xp = backend.namespace(input._data)
    rows, cols = input.shape[-2:]
    keep = xp.tri(rows, cols, diagonal, dtype=bool) if lower else ~xp.tri(rows, cols, diagonal - 1, dtype=bool)
    return masked_fill(input, Tensor._wrap(~keep), 0)


def tril(input, diagonal=0):
    """The lower triangle of the last two dimensions (``j <= i + diagonal``); zeros above.

    Args:
        input: a tensor of at least two dimensions.
        diagonal: 0 keeps the main diagonal; positive keeps more, negative fewer.

    >>> import tinyattn as ta
    >>> ta.tril(ta.ones(3, 3))
    tensor([[1., 0., 0.],
            [1., 1., 0.],
            [1., 1., 1.]])
    """
    return _triangle(input, diagonal, lower=True)


def triu(input, diagonal=0):
    """The upper triangle of the last two dimensions (``j >= i + diagonal``); zeros below.

    Args:
        input: a tensor of at least two dimensions.
        diagonal: 0 keeps the main diagonal; 1 starts above it.

    >>> import tinyattn as ta
    >>> ta.triu(ta.ones(3, 3), diagonal=1)
    tensor([[0., 1., 1.],
            [0., 0., 1.],
            [0., 0., 0.]])
    """
    return _triangle(input, diagonal, lower=False)


def bmm(input, mat2):
    """Batched matrix product ``(B, n, k) @ (B, k, m)`` → ``(B, n, m)``: ``matmul`` for 3-D operands only.

    Args:
        input: ``(B, n, k)``.
        mat2: ``(B, k, m)``.

    >>> import tinyattn as ta
    >>> ta.bmm(ta.ones(2, 3, 4), ta.ones(2, 4, 5)).shape
    (2, 3, 5)
    """
    if input.ndim != 3 or mat2.ndim != 3:
        raise ValueError(f"bmm: expected two 3-D tensors, got shapes {input.shape} and {mat2.shape}")
    return matmul(input, mat2)


# ----------------------------------------------------------------------------- no gradient


def all(input, dim=None, keepdim=False):
    """Whether every element is non-zero (true), over all elements or over ``dim``; a boolean tensor.

    Args:
        input: the tensor.
        dim: an int or a tuple of ints; ``None`` reduces everything.
        keepdim: keep the reduced dimensions with size 1.

    >>> import tinyattn as ta
    >>> x = ta.tensor([[True, False], [True, True]])
    >>> ta.all(x), x.all(dim=1)
    (tensor(False), tensor([False,  True]))
    """
    axes = _normalize_dims(dim, input.ndim)
    return _no_grad(input._data.astype(bool).all(axis=axes, keepdims=keepdim), input)


def any(input, dim=None, keepdim=False):
    """Whether some element is non-zero (true), over all elements or over ``dim``; a boolean tensor.

    Args:
        input: the tensor.
        dim: an int or a tuple of ints; ``None`` reduces everything.
        keepdim: keep the reduced dimensions with size 1.

    >>> import tinyattn as ta
    >>> x = ta.tensor([[True, False], [False, False]])
    >>> ta.any(x), x.any(dim=1)
    (tensor(True), tensor([ True, False]))
    """
    axes = _normalize_dims(dim, input.ndim)
    return _no_grad(input._data.astype(bool).any(axis=axes, keepdims=keepdim), input)


def nonzero(input, *, as_tuple=False):
    """The indices of the non-zero elements: an ``(n, ndim)`` int64 tensor, or a tuple of 1-D tensors.

    Args:
        input: the tensor.
        as_tuple: return one index tensor per dimension, as NumPy's ``nonzero``.

    >>> import tinyattn as ta
    >>> ta.nonzero(ta.tensor([0, 3, 0, 5]))
    tensor([[1],
            [3]])
    """
    xp = backend.namespace(input._data)
    found = xp.nonzero(input._data)
    if as_tuple:
        return tuple(_no_grad(i.astype(np.int64), input) for i in found)
    return _no_grad(xp.stack(found, axis=1).astype(np.int64) if found else xp.zeros((0, 0), dtype=np.int64), input)


def multinomial(input, num_samples, replacement=False, *, generator=None):
    """``num_samples`` category indices per row, drawn with probabilities proportional to ``input``.

    With replacement, each draw inverts the cumulative distribution at a uniform number; without, the
    ``num_samples`` largest keys ``log(u) / w`` win (Efraimidis and Spirakis), which samples without
    replacement exactly.

    Args:
        input: ``(C,)`` or ``(N, C)`` non-negative weights with a positive sum per row.
        num_samples: draws per row.
        replacement: draw with replacement.
        generator: a ``numpy.random.Generator`` to draw from instead of the library's seeded one.

    >>> import tinyattn as ta
    >>> _ = ta.manual_seed(0)
    >>> ta.multinomial(ta.tensor([0.0, 1.0, 0.0]), 2, replacement=True)
    tensor([1, 1])
    """
    weights = input._data.astype(np.float64)
    if (weights < 0).any() or not (weights.sum(axis=-1) > 0).all():
        raise RuntimeError("multinomial: weights must be non-negative with a positive sum in every row")
    if not replacement and num_samples > weights.shape[-1]:
        raise RuntimeError(f"multinomial: cannot draw {num_samples} of {weights.shape[-1]} without replacement")
    xp = backend.namespace(weights)
    rows = weights.reshape(-1, weights.shape[-1])  # (N, C)
    u = _uniform((rows.shape[0], num_samples if replacement else rows.shape[1]), input.device, generator)
    if replacement:
        cdf = xp.cumsum(rows, axis=1)
        cdf /= cdf[:, -1:]
        draws = (u[:, :, None] >= cdf[:, None, :]).sum(axis=2)  # (N, num_samples)
        draws = xp.minimum(draws, rows.shape[1] - 1)
    else:
        with np.errstate(divide="ignore"):
            keys = xp.log(u) / rows  # -inf where the weight is 0
        draws = xp.argsort(-keys, axis=1, kind="stable")[:, :num_samples]
    return _no_grad(draws.reshape(weights.shape[:-1] + (num_samples,)).astype(np.int64), input)


def _uniform(shape, device, generator):
    """Uniform float64 draws in ``[0, 1)``: from the library's generator, or from ``generator`` (a
    ``numpy.random.Generator`` the caller keeps, for draws of their own stream; host only)."""
    if generator is None:
        return backend.random_uniform(shape, np.dtype(np.float64), device)
    if not isinstance(generator, np.random.Generator):
        raise TypeError(f"generator must be a numpy.random.Generator, got {type(generator).__name__}")
    return backend.to_device(generator.random(shape), device) if device != "cpu" else generator.random(shape)


def randint(low, high=None, size=None, *, generator=None, dtype=None, device=None):
    """Uniform integers in ``[low, high)`` from the library's seeded generator (``randint(high, size)`` starts at 0).

    Args:
        low, high: the bounds (``high`` excluded).
        size: the result's shape, a tuple.
        generator: a ``numpy.random.Generator`` to draw from instead.
        dtype: int64 by default.
        device: ``"cpu"`` or ``"cuda"``.

    >>> import tinyattn as ta
    >>> _ = ta.manual_seed(0)
    >>> x = ta.randint(3, 6, (2, 4))
    >>> x.shape, x.dtype, bool(((x >= 3) & (x < 6)).all())
    ((2, 4), dtype('int64'), True)
    """
    if size is None:
        low, high, size = 0, low, high
    draws = _uniform(tuple(size), device or "cpu", generator)
    xp = backend.namespace(draws)
    return _no_grad(xp.floor(low + draws * (high - low)).astype(dtype or np.int64), None)


def from_numpy(ndarray):
    """A tensor sharing ``ndarray``'s memory (PyTorch's ``from_numpy``): writes to one show in the other.

    Args:
        ndarray: a ``numpy.ndarray``; its dtype is kept.

    >>> import tinyattn as ta
    >>> import numpy as np
    >>> a = np.zeros(2)
    >>> t = ta.from_numpy(a)
    >>> a[0] = 1.0
    >>> t
    tensor([1., 0.], dtype=float64)
    """
    if not isinstance(ndarray, np.ndarray):
        raise TypeError(f"from_numpy: expected a numpy.ndarray, got {type(ndarray).__name__}")
    return Tensor(ndarray)


def is_tensor(obj):
    """Whether ``obj`` is a tinyattn tensor (a ``Tensor`` or a subclass, such as ``nn.Parameter``).

    >>> import tinyattn as ta
    >>> ta.is_tensor(ta.zeros(1)), ta.is_tensor([0.0])
    (True, False)
    """
    return isinstance(obj, Tensor)


# ----------------------------------------------------------------------------- Tensor methods

_TORCH_TYPE_NAMES = {"float32": "FloatTensor", "float64": "DoubleTensor", "int64": "LongTensor", "int32": "IntTensor",
                     "bool": "BoolTensor", "uint8": "ByteTensor", "float16": "HalfTensor"}
_DTYPES_BY_TYPE_NAME = {name: np.dtype(dtype) for dtype, name in _TORCH_TYPE_NAMES.items()}


def _type(self, dtype=None):
    """``t.type()``: PyTorch's type name (``"torch.FloatTensor"``); ``t.type(dtype)``: a cast.

    Args:
        dtype: ``None`` for the name; a dtype or a PyTorch type name (``"torch.DoubleTensor"``) to cast to.

    >>> import tinyattn as ta
    >>> x = ta.tensor([1.0, 2.0])
    >>> x.type(), x.type("torch.DoubleTensor")
    ('torch.FloatTensor', tensor([1., 2.], dtype=float64))
    """
    if dtype is None:
        return "torch." + _TORCH_TYPE_NAMES.get(self.dtype.name, self.dtype.name)
    if isinstance(dtype, str):
        dtype = _DTYPES_BY_TYPE_NAME[dtype.rsplit(".", 1)[-1]]
    return self.to(dtype)


def _type_as(self, other):
    """The tensor cast to ``other``'s dtype (``self.to(other.dtype)``); differentiable for a float result.

    Args:
        other: the tensor whose dtype to take.

    >>> import tinyattn as ta
    >>> ta.tensor([1.0, 2.0]).type_as(ta.tensor([0], dtype=ta.int64))
    tensor([1, 2])
    """
    return self.to(other.dtype)


def _int(self):
    """The tensor as int32 (``to(ta.int32)``), truncating towards zero; carries no gradient.

    >>> import tinyattn as ta
    >>> ta.tensor([1.7, -1.7]).int()
    tensor([ 1, -1], dtype=int32)
    """
    return self.to(np.int32)


def _bool_method(self):
    """The tensor as bool (``to(ta.bool)``): ``True`` where an element is non-zero; carries no gradient.

    >>> import tinyattn as ta
    >>> ta.tensor([0.0, 2.0]).bool()
    tensor([False,  True])
    """
    return self.to(np.bool_)


def _is_cuda(self):
    """Whether the tensor's array lives on the GPU (CuPy) (``t.device == "cuda"``).

    >>> import tinyattn as ta
    >>> ta.zeros(2).is_cuda
    False
    """
    return self.device == "cuda"


def _is_floating_point(self):
    """Whether the tensor's dtype is a floating-point one (float16, float32, float64).

    >>> import tinyattn as ta
    >>> ta.tensor([1.0]).is_floating_point(), ta.tensor([1]).is_floating_point()
    (True, False)
    """
    return self.dtype.kind == "f"


def _element_size(self):
    """The size of one element in bytes (``t.dtype.itemsize``).

    >>> import tinyattn as ta
    >>> ta.zeros(2).element_size(), ta.zeros(2, dtype=ta.float64).element_size()
    (4, 8)
    """
    return self.dtype.itemsize


def _contiguous(self):
    """The tensor itself if its array is C-contiguous (row-major, no gaps), else a contiguous copy (``ta.clone``).

    Differentiable: the copy passes the gradient back unchanged.

    >>> import tinyattn as ta
    >>> x = ta.zeros(2, 3)
    >>> x.contiguous() is x, x.T.contiguous().is_contiguous()
    (True, True)
    """
    return self if self._data.flags.c_contiguous else clone(self)


def _is_contiguous(self):
    """Whether the tensor's array is C-contiguous (row-major, no gaps); a transpose is a view that is not.

    >>> import tinyattn as ta
    >>> x = ta.zeros(2, 3)
    >>> x.is_contiguous(), x.T.is_contiguous()
    (True, False)
    """
    return bool(self._data.flags.c_contiguous)


def _dim(self):
    """The number of dimensions (``t.ndim``).

    >>> import tinyattn as ta
    >>> ta.zeros(2, 3).dim()
    2
    """
    return self.ndim


def _mT(self):
    """The tensor with its last two dimensions swapped (``x.transpose(-2, -1)``): a batch of matrices transposed.

    >>> import tinyattn as ta
    >>> ta.zeros(5, 2, 3).mT.shape
    (5, 3, 2)
    """
    return self.transpose(-2, -1)


def _reshape_as(self, other):
    """The tensor reshaped to ``other``'s shape (``self.reshape(other.shape)``); ``view_as`` is the same method.

    Args:
        other: the tensor whose shape to take; it must have as many elements.

    >>> import tinyattn as ta
    >>> ta.arange(6).reshape_as(ta.zeros(2, 3))
    tensor([[0, 1, 2],
            [3, 4, 5]])
    """
    return self.reshape(other.shape)


def _expand_as(self, other):
    """The tensor broadcast to ``other``'s shape (``self.expand(other.shape)``); the gradient is summed back.

    Args:
        other: the tensor whose shape to take; each of this tensor's sizes must be 1 or match it.

    >>> import tinyattn as ta
    >>> ta.tensor([[1.0], [2.0]]).expand_as(ta.zeros(2, 3))
    tensor([[1., 1., 1.],
            [2., 2., 2.]])
    """
    return self.expand(other.shape)


def _new_filled(self, size, fill, dtype, device, requires_grad):
    xp = backend.namespace_for(device or self.device)
    t = Tensor._wrap(xp.full(_sizes(size), fill, dtype=dtype or self.dtype), self)
    return t.requires_grad_(True) if requires_grad else t


def _new_zeros(self, *size, dtype=None, device=None, requires_grad=False):
    """A new tensor of zeros of shape ``size``, with this tensor's dtype and device unless told otherwise.

    Args:
        *size: the shape, as sizes or one tuple.
        dtype, device: default to this tensor's.
        requires_grad: whether the new leaf records operations.

    >>> import tinyattn as ta
    >>> ta.zeros(1, dtype=ta.float64).new_zeros(2, 3)
    tensor([[0., 0., 0.],
            [0., 0., 0.]], dtype=float64)
    """
    return _new_filled(self, size, 0, dtype, device, requires_grad)


def _new_ones(self, *size, dtype=None, device=None, requires_grad=False):
    """A new tensor of ones of shape ``size``, with this tensor's dtype and device unless told otherwise.

    Args:
        *size: the shape, as sizes or one tuple.
        dtype, device: default to this tensor's.
        requires_grad: whether the new leaf records operations.

    >>> import tinyattn as ta
    >>> ta.tensor([1, 2]).new_ones((2,))
    tensor([1, 1])
    """
    return _new_filled(self, size, 1, dtype, device, requires_grad)


def _new_full(self, size, fill_value, *, dtype=None, device=None, requires_grad=False):
    """A new tensor of shape ``size`` filled with ``fill_value``, with this tensor's dtype and device unless told.

    Args:
        size: the shape, a tuple.
        fill_value: the number every element holds.
        dtype, device: default to this tensor's.
        requires_grad: whether the new leaf records operations.

    >>> import tinyattn as ta
    >>> ta.zeros(1).new_full((2,), 7.0)
    tensor([7., 7.])
    """
    return _new_filled(self, (size,), fill_value, dtype, device, requires_grad)


def _new_tensor(self, data, dtype=None):
    """A new leaf tensor holding ``data`` (a copy), with this tensor's dtype (unless ``dtype``) and device.

    Args:
        data: a Python number or (nested) list, or an array.
        dtype: defaults to this tensor's.

    >>> import tinyattn as ta
    >>> ta.zeros(1, dtype=ta.float64).new_tensor([1, 2])
    tensor([1., 2.], dtype=float64)
    """
    return Tensor._wrap(Tensor(data, dtype=dtype or self.dtype, device=self.device)._data, self)


def _unbind(self, dim=0):
    """The slices along ``dim``, each without that dimension, as a tuple; differentiable.

    Args:
        dim: the dimension to take apart.

    >>> import tinyattn as ta
    >>> ta.tensor([[1.0, 2.0], [3.0, 4.0]]).unbind(1)
    (tensor([1., 3.]), tensor([2., 4.]))
    """
    return tuple(t.squeeze(dim) for t in self.split(1, dim))


def _pow(self, exponent):
    """Elementwise ``self ** exponent`` (``ta.pow``), differentiable in both.

    Args:
        exponent: a tensor or a Python number, broadcasting like NumPy.

    >>> import tinyattn as ta
    >>> ta.tensor([1.0, 2.0, 3.0]).pow(2)
    tensor([1., 4., 9.])
    """
    return self**exponent


def _eq(self, other):
    """Elementwise ``self == other`` as a bool tensor, broadcasting like NumPy; carries no gradient.

    Args:
        other: a tensor or a Python number.

    >>> import tinyattn as ta
    >>> ta.tensor([1.0, 2.0, 3.0]).eq(2)
    tensor([False,  True, False])
    """
    return self == other


def _ne(self, other):
    """Elementwise ``self != other`` as a bool tensor, broadcasting like NumPy; carries no gradient.

    Args:
        other: a tensor or a Python number.

    >>> import tinyattn as ta
    >>> ta.tensor([1.0, 2.0, 3.0]).ne(2)
    tensor([ True, False,  True])
    """
    return self != other


def _lt(self, other):
    """Elementwise ``self < other`` as a bool tensor, broadcasting like NumPy; carries no gradient.

    Args:
        other: a tensor or a Python number.

    >>> import tinyattn as ta
    >>> ta.tensor([1.0, 2.0, 3.0]).lt(2)
    tensor([ True, False, False])
    """
    return self < other


def _le(self, other):
    """Elementwise ``self <= other`` as a bool tensor, broadcasting like NumPy; carries no gradient.

    Args:
        other: a tensor or a Python number.

    >>> import tinyattn as ta
    >>> ta.tensor([1.0, 2.0, 3.0]).le(2)
    tensor([ True,  True, False])
    """
    return self <= other


def _gt(self, other):
    """Elementwise ``self > other`` as a bool tensor, broadcasting like NumPy; carries no gradient.

    Args:
        other: a tensor or a Python number.

    >>> import tinyattn as ta
    >>> ta.tensor([1.0, 2.0, 3.0]).gt(ta.tensor([2.0, 2.0, 2.0]))
    tensor([False, False,  True])
    """
    return self > other


def _ge(self, other):
    """Elementwise ``self >= other`` as a bool tensor, broadcasting like NumPy; carries no gradient.

    Args:
        other: a tensor or a Python number.

    >>> import tinyattn as ta
    >>> ta.tensor([1.0, 2.0, 3.0]).ge(2)
    tensor([False,  True,  True])
    """
    return self >= other


def _logical_not(self):
    """Elementwise logical not: ``True`` where an element is zero (or ``False``); carries no gradient.

    >>> import tinyattn as ta
    >>> ta.tensor([0.0, 2.0]).logical_not()
    tensor([ True, False])
    """
    return _no_grad(~self._data.astype(bool), self)


# One place where the everyday methods are attached to Tensor.
Tensor.sin, Tensor.cos, Tensor.clamp, Tensor.clip, Tensor.clone = sin, cos, clamp, clamp, clone
Tensor.cumsum = cumsum
Tensor.gather = gather
Tensor.max, Tensor.min, Tensor.argmax, Tensor.argmin, Tensor.topk = max, min, argmax, argmin, topk
Tensor.maximum, Tensor.minimum = maximum, minimum
Tensor.std, Tensor.norm = std, norm
Tensor.repeat, Tensor.repeat_interleave, Tensor.tril, Tensor.triu = repeat, repeat_interleave, tril, triu
Tensor.all, Tensor.any, Tensor.nonzero = all, any, nonzero
Tensor.pow = _pow
Tensor.eq, Tensor.ne, Tensor.lt, Tensor.le, Tensor.gt, Tensor.ge = _eq, _ne, _lt, _le, _gt, _ge
Tensor.__xor__ = lambda self, other: _no_grad(self._data ^ _array_or_value(other), _kind_of_pair(self, other))
Tensor.logical_not = _logical_not
Tensor.__rand__ = lambda self, other: self & other
Tensor.__ror__ = lambda self, other: self | other
Tensor.contiguous, Tensor.is_contiguous = _contiguous, _is_contiguous
Tensor.dim = _dim
Tensor.mT = property(_mT)
Tensor.type, Tensor.type_as = _type, _type_as
Tensor.view_as = Tensor.reshape_as = _reshape_as
Tensor.expand_as = _expand_as
Tensor.new_zeros, Tensor.new_ones, Tensor.new_full, Tensor.new_tensor = _new_zeros, _new_ones, _new_full, _new_tensor
Tensor.int, Tensor.bool = _int, _bool_method
Tensor.is_cuda = property(_is_cuda)
Tensor.is_floating_point = _is_floating_point
Tensor.element_size = _element_size
Tensor.unbind = _unbind
