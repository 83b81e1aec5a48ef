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
from . import checks as check
from .creation import _uniform
from .engine import Function, Tensor
from .ops import (
    TENSOR_NAMESPACE,
    _lift,
    _normalize_dims,
    amax,
    float_input,
    getitem,
    masked_fill,
    matmul,
    namespace,
    reshape,
    result_type,
    sqrt,
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
    """Every element limited to ``[min, max]``: ``min(max(input, min), max)`` (also ``clip``); where ``min > max``
    every element is ``max``, and NaN stays NaN, as in PyTorch.

    With numbers for bounds it is one primitive (``Clamp``): the gradient passes where the input is inside. A
    bound that is a tensor broadcasts with the input, and the result is two ``where``s, so that each gradient
    goes where its operand was chosen (PyTorch's rule): to ``input`` where ``min <= input <= max``, to ``min``
    where ``input < min < max``, and to ``max`` where ``input > max`` or ``max < min``.

    Args:
        input: the tensor.
        min, max: the bounds (numbers or tensors); either may be ``None``.

    >>> import tinyattn as ta
    >>> ta.clamp(ta.tensor([-2.0, 0.5, 3.0]), min=0.0, max=1.0)
    tensor([0. , 0.5, 1. ])
    >>> ta.clamp(ta.tensor([-2.0, 0.5, 3.0]), min=ta.tensor([-3.0, 1.0, 0.0]))
    tensor([-2.,  1.,  3.])
    """
    if min is None and max is None:
        raise ValueError("clamp: at least one of min and max must be given")
    if isinstance(min, Tensor) or isinstance(max, Tensor):
        return _clamp_to_tensors(input, min, max)
    if input.dtype.kind in "biu" and (isinstance(min, float) or isinstance(max, float)):
        input = input.float()  # an integer tensor clamped to a float bound is float32, as in PyTorch
    return Clamp.apply(input, min=min, max=max)


def _clamp_to_tensors(input, min, max):
    out = input
    if isinstance(min, Tensor) and max is not None:  # at min == max, an input below it gives neither bound a
        min = where(min < max, min, min.detach())    # gradient, as in PyTorch
    if min is not None:
        out = where(input < min, min, input)  # (a NaN input is not below min: it stays)
    if max is not None:
        above = input > max
        if min is not None:
            above = above | (max < min)
        out = where(above, max, out)
    return out


def cumsum(input, dim, *, dtype=None):
    """Running sums along ``dim``: ``out[..., i] = input[..., 0] + … + input[..., i]``; integers and booleans sum
    as int64, as in PyTorch.

    Args:
        input: the tensor.
        dim: the dimension to sum along.
        dtype: the dtype to convert ``input`` to first.

    >>> import tinyattn as ta
    >>> ta.cumsum(ta.tensor([1, 2, 3]), dim=0)
    tensor([1, 3, 6])
    """
    if dtype is not None:
        input = input.to(dtype)
    elif input.dtype.kind in "biu" and input.dtype != np.int64:
        input = input.to(np.int64)
    dim = _normalize_dims(dim, input.ndim, "cumsum")
    if not dim:  # a 0-d tensor: its own running sum
        return clone(input)
    return Cumsum.apply(input, dim=dim[0])


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
    dim = _normalize_dims(dim, builtins_max(input.ndim, 1), "gather")[0]
    if isinstance(index, Tensor) and index._data.ndim != index.ndim and input.ndim == index.ndim:
        # inside vmap, an index batched itself: the parts stay tensors, so that each example's index picks from
        # its own input (the positions along the other axes are constants)
        xp = backend.namespace(index._data)
        return getitem(input, tuple(index if axis == dim else Tensor._wrap(xp.arange(n).reshape(
            [n if a == axis else 1 for a in range(index.ndim)])) for axis, n in enumerate(index.shape)))
    index = index._data if isinstance(index, Tensor) else np.asarray(index)
    if index.dtype.kind not in "iu":
        raise RuntimeError(f"gather(): Expected dtype int64 for index, got {index.dtype}")
    if index.size == 0:  # nothing picked: an empty result of index's shape (torch lets its rank differ then)
        return getitem(reshape(input, -1), backend.namespace(index).zeros(index.shape, dtype=np.intp))
    if builtins_max(input.ndim, 1) != builtins_max(index.ndim, 1):
        raise RuntimeError(f"gather(): Index tensor must have the same number of dimensions as input tensor, got "
                           f"{index.ndim} and {input.ndim}")
    if input.ndim == 0:  # a 0-d input reads as a vector of one element, the result keeps index's shape
        return reshape(getitem(reshape(input, 1), index.reshape(-1)), *index.shape)
    return getitem(input, _along(index, dim))


MaxResult = collections.namedtuple("max", ["values", "indices"])
MinResult = collections.namedtuple("min", ["values", "indices"])
TopkResult = collections.namedtuple("topk", ["values", "indices"])


def _array_or_value(other):
    return other._data if isinstance(other, Tensor) else other


def _no_grad(array, like):
    """A result with no gradient (indices, logic) of ``like``'s kind (``None``: a plain Tensor)."""
    return Tensor._wrap(array, like)


def _lead(input):
    """How many leading axes of ``input``'s array are not its own: inside ``vmap`` a batched tensor's array is
    ``(*batch, *shape)`` while ``shape`` and ``ndim`` are one example's. A result read from the array directly
    (an index, a truth value: no ``Function``, so no batching rule) must keep those axes and count ``dim`` past
    them, or it reduces the batch away."""
    return input._data.ndim - input.ndim


def _physical_axes(input, dim, name):
    """A logical ``dim`` (None, an int or a tuple) of ``input`` as axes of its array (see ``_lead``)."""
    lead, axes = _lead(input), _normalize_dims(dim, input.ndim, name)
    return tuple(range(lead, input._data.ndim)) if axes is None else tuple(axis + lead for axis in axes)


def _take_along(input, indices, dim):
    """``input``'s elements at ``indices`` along ``dim``: ``out[i][j] = input[i][indices[i][j]]`` for ``dim=1``.

    ``indices`` is an integer tensor of ``input``'s rank (a ``vmap`` batch of its own, where it has one); every
    other axis is picked by its own position, so the gradient reaches exactly the elements picked."""
    xp = backend.namespace(indices._data)
    parts = []
    for axis, n in enumerate(indices.shape):
        if axis == dim:
            parts.append(indices)
        else:
            shape = [1] * indices.ndim
            shape[axis] = n
            parts.append(Tensor._wrap(xp.arange(n).reshape(shape)))
    return getitem(input, tuple(parts))


def _arg_extreme(name, input, dim, keepdim, find):
    """``argmax``'s and ``argmin``'s int64 index (``find``: the array library's), read past the batch axes."""
    data, lead = input._data, _lead(input)
    if dim is None:  # the index into the flattened tensor
        index = find(data.reshape(data.shape[:lead] + (-1,)), axis=-1)  # (*batch,)
        if keepdim:
            index = index.reshape(index.shape + (1,) * input.ndim)
    elif input.ndim == 0:
        _normalize_dims(dim, 0, name)
        index = backend.namespace(data).zeros(data.shape, dtype=np.int64)
    else:
        index = find(data, axis=_physical_axes(input, dim, name)[0], keepdims=keepdim)
    return _no_grad(index.astype(np.int64), input)


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
    return _arg_extreme("argmax", input, dim, keepdim, backend.namespace(input._data).argmax)


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
    return _arg_extreme("argmin", input, dim, keepdim, backend.namespace(input._data).argmin)


def _pick(input, dim, keepdim, find, result):
    """``(values, indices)`` of the element ``find`` (argmax, argmin) chooses along ``dim``: the values taken at the
    indices, so the gradient reaches the chosen element alone."""
    indices = _arg_extreme(result.__name__, input, dim, True, find)  # (…, 1, …)
    dim = _normalize_dims(dim, input.ndim, result.__name__)
    values = _take_along(input, indices, dim[0] if dim else None)
    if not keepdim and dim:
        values, indices = values.squeeze(dim[0]), indices.squeeze(dim[0])
    return result(values, indices)


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
    return _pick(input, dim, keepdim, backend.namespace(input._data).argmax, MaxResult)


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
    return _pick(input, dim, keepdim, backend.namespace(input._data).argmin, MinResult)


def maximum(input, other):
    """The elementwise maximum of ``input`` and ``other`` (broadcasting); NaN wins, and a tie gives each half the
    gradient, as in PyTorch: ``input`` where ``input > other``, ``other`` where ``input < other``, else (a tie,
    or a NaN) their mean.

    >>> import tinyattn as ta
    >>> ta.maximum(ta.tensor([1.0, 4.0, float("nan")]), ta.tensor([3.0, 2.0, 0.0]))
    tensor([ 3.,  4., nan])
    """
    return _extreme(input, other, input > other, input < other)


def minimum(input, other):
    """The elementwise minimum of ``input`` and ``other`` (broadcasting); NaN wins, and a tie gives each half the
    gradient, as in PyTorch: ``input`` where ``input < other``, ``other`` where ``input > other``, else (a tie,
    or a NaN) their mean.

    >>> import tinyattn as ta
    >>> ta.minimum(ta.tensor([1.0, 4.0]), ta.tensor([3.0, 2.0]))
    tensor([1., 2.])
    """
    return _extreme(input, other, input < other, input > other)


def _extreme(input, other, input_wins, other_wins):
    """``input`` where ``input_wins``, ``other`` where ``other_wins``, else their mean: at a tie the value
    itself, each operand getting half the gradient; at a NaN, NaN."""
    tie_or_nan = input * 0.5 + other * 0.5 if result_type(input, _lift(other, input)).kind in "fc" else input
    return where(input_wins, input, where(other_wins, other, tie_or_nan))


def _order(data, axis, descending=False):
    """The int64 indices that sort the array ``data`` along ``axis``, stably: ties keep their order, descending
    too (the stable ascending order of the reversed keys, reversed back), and NaN counts as the largest."""
    xp = backend.namespace(data)
    if not descending:
        return xp.argsort(data, axis=axis, kind="stable").astype(np.int64)
    reversed_order = xp.argsort(xp.flip(data, axis=axis), axis=axis, kind="stable")
    return (data.shape[axis] - 1 - xp.flip(reversed_order, axis=axis)).astype(np.int64)


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
    dims = _normalize_dims(dim, input.ndim, "topk")
    size = input.shape[dims[0]] if dims else 1
    if not 0 <= k <= size:
        raise RuntimeError(f"topk: k={k} is out of range for dim {dim} of size {size}")
    xp = backend.namespace(input._data)
    if not dims:  # a 0-d tensor: itself, at index 0
        indices = _no_grad(xp.zeros(input._data.shape, dtype=np.int64), input)
        return TopkResult(_take_along(input, indices, None), indices)
    axis = dims[0] + _lead(input)
    order = _order(input._data, axis, descending=largest)
    indices = _no_grad(xp.take(order, xp.arange(k), axis=axis), input)
    return TopkResult(_take_along(input, indices, dims[0]), indices)


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
    out = input.reshape(pairs).expand(expanded).reshape([r * n for r, n in zip(sizes, shape)])
    # the last reshape copies, but where no size is stretched (all 1s, or sizes of 1 repeated): copy, as PyTorch
    return clone(out) if backend.namespace(out._data).may_share_memory(out._data, input._data) else out


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
        raise RuntimeError(f"bmm: expected two 3-D tensors, got shapes {input.shape} and {mat2.shape}")
    return matmul(input, mat2)


# ----------------------------------------------------------------------------- no gradient


def _truth(name, input, dim, keepdim):
    """``all``'s and ``any``'s result: bool, or uint8 for a uint8 input (as in PyTorch), read past the batch axes."""
    xp = backend.namespace(input._data)
    out = getattr(xp, name)(input._data.astype(bool), axis=_physical_axes(input, dim, name), keepdims=keepdim)
    return _no_grad(out.astype(np.uint8) if input.dtype == np.uint8 else out, input)


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
    return _truth("all", input, dim, keepdim)


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
    return _truth("any", input, dim, keepdim)


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
    batch = input._data.shape[:input._data.ndim - input.ndim]  # inside vmap: the batch axes in front
    examples = input._data.reshape((int(np.prod(batch)),) + tuple(input.shape))  # (examples, *shape)
    if not len(examples):  # an empty batch: the shape of one example with nothing found
        examples = xp.zeros((1,) + tuple(input.shape), dtype=bool)
    if as_tuple:  # a 0-d tensor reads as a vector of one element
        examples = examples.reshape(len(examples), -1) if input.ndim == 0 else examples
        rows = [xp.stack(xp.nonzero(e), axis=0) for e in examples]  # (ndim, n) each
    else:
        rows = [xp.argwhere(e) for e in examples]  # (n, ndim) each
    if len({r.shape for r in rows}) > 1:
        raise RuntimeError("vmap: nonzero's result has a size that depends on the values, and the examples of the "
                           f"batch have different counts of non-zero elements: {[r.size for r in rows]} indices")
    found = xp.stack(rows).reshape(batch + rows[0].shape).astype(np.int64)  # (…batch, n, ndim) or (…batch, ndim, n)
    if as_tuple:
        return tuple(_no_grad(found[..., i, :], input) for i in range(found.shape[-2]))
    return _no_grad(found, input)


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


def _int(self, memory_format=None):
    """The tensor as int32 (``to(ta.int32)``), truncating towards zero; carries no gradient.

    >>> import tinyattn as ta
    >>> ta.tensor([1.7, -1.7]).int()
    tensor([ 1, -1], dtype=int32)
    """
    return self.to(np.int32)


def _bool_method(self, memory_format=None):
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


def _new_filled(self, name, size, fill, dtype, device, requires_grad):
    """A new leaf of ``self``'s kind (compat's tensor makes compat's; under ``vmap``, one constant for every
    example) filled with ``fill``."""
    size, fill = check.shape(name, "size", size), check.number(name, "fill_value", fill)
    xp = backend.namespace_for(device or self.device)
    t = Tensor._wrap(xp.full(size, fill, dtype=dtype or self.dtype), self._constant_like or self)
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
    return _new_filled(self, "new_zeros", size, 0, dtype, device, requires_grad)


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
    return _new_filled(self, "new_ones", size, 1, dtype, device, requires_grad)


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
    return _new_filled(self, "new_full", (size,), fill_value, dtype, device, requires_grad)


def _new_empty(self, *size, dtype=None, device=None, requires_grad=False):
    """A new tensor of shape ``size``, with this tensor's dtype and device unless told otherwise: uninitialised in
    PyTorch, zeros here (as ``ta.empty``).

    Args:
        *size: the shape, as sizes or one tuple.
        dtype, device: default to this tensor's.
        requires_grad: whether the new leaf records operations.

    >>> import tinyattn as ta
    >>> ta.ones(1).new_empty(2)
    tensor([0., 0.])
    """
    return _new_filled(self, "new_empty", size, 0, dtype, device, requires_grad)


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


def _pow(self, exponent):
    """Elementwise ``self ** exponent`` (``ta.pow``), differentiable in both.

    Args:
        exponent: a tensor or a Python number, broadcasting like NumPy.

    >>> import tinyattn as ta
    >>> ta.tensor([1.0, 2.0, 3.0]).pow(2)
    tensor([1., 4., 9.])
    """
    return self**exponent


# One place where the everyday methods are attached to Tensor.
Tensor.sin, Tensor.cos, Tensor.clamp, Tensor.clip, Tensor.clone = sin, cos, clamp, clamp, clone
Tensor.cumsum = cumsum
Tensor.gather = gather
Tensor.max, Tensor.min, Tensor.argmax, Tensor.argmin, Tensor.topk = max, min, argmax, argmin, topk
Tensor.maximum, Tensor.minimum = maximum, minimum
Tensor.std = std
Tensor.repeat, Tensor.repeat_interleave, Tensor.tril, Tensor.triu = repeat, repeat_interleave, tril, triu
Tensor.all, Tensor.any, Tensor.nonzero = all, any, nonzero
Tensor.pow = _pow
Tensor.contiguous, Tensor.is_contiguous = _contiguous, _is_contiguous
Tensor.dim = _dim
Tensor.mT = property(_mT)
Tensor.type, Tensor.type_as = _type, _type_as
Tensor.view_as = Tensor.reshape_as = _reshape_as
Tensor.expand_as = _expand_as
Tensor.new_zeros, Tensor.new_ones, Tensor.new_full, Tensor.new_tensor = _new_zeros, _new_ones, _new_full, _new_tensor
Tensor.new_empty = _new_empty
Tensor.int, Tensor.bool = _int, _bool_method
Tensor.is_cuda = property(_is_cuda)
Tensor.is_floating_point = _is_floating_point
Tensor.element_size = _element_size
