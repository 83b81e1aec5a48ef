"""Floor 3, by family: reductions: sums and products, extremes, moments, norms, logsumexp.

Each function is composed from the primitives in ``ops`` wherever the mathematics allows, so that its
gradient, JVP, batching rule and second derivative come from theirs; a new primitive says in its docstring
why a composition would not do. Names, arguments and defaults are PyTorch's.

>>> import tinyattn as ta
>>> x = ta.tensor([[1.0, 0.0, 3.0], [2.0, 2.0, 2.0]], requires_grad=True)
>>> ta.prod(x, dim=1)                       # its gradient is right at the zero too
tensor([0., 8.], grad_fn=<Reshape>)
>>> ta.logsumexp(ta.tensor([1000.0, 1000.0]), dim=0).item() > 1000     # exp(1000) would overflow
True
"""

import collections
import math
import numbers

import numpy as np

from . import backend
from .engine import Tensor
from .ops import (
    _normalize_dims,
    abs,
    amax,
    cat,
    exp,
    log,
    masked_fill,
    mean,
    sqrt,
    sum,
    sum_to,
    var,
    where,
)
from .ops_extra import _no_grad, _physical_axes

__all__ = [
    "amin", "aminmax", "count_nonzero", "nanmean", "nansum", "var_mean", "std_mean", "prod", "logsumexp",
    "norm", "dist", "trace",
]

AminmaxResult = collections.namedtuple("aminmax", ["min", "max"])


def _floating(input):
    """``input``, an integer or boolean one converted to float32 (PyTorch's default dtype)."""
    return input if input.dtype.kind in "fc" else input.float()


def _reduced(out, input, dim, keepdim):
    """``out`` (reduced over ``dim`` with ``keepdim=True``) with the reduced dimensions dropped unless ``keepdim``."""
    if keepdim:
        return out
    axes = _normalize_dims(dim, input.ndim)
    return out.reshape([n for i, n in enumerate(input.shape) if axes is not None and i not in axes])


# ----------------------------------------------------------------------------- extremes and counts


def amin(input, dim=None, keepdim=False):
    """Smallest element over all elements or over ``dim``: ``-amax(-input)``; ties share the gradient, as in PyTorch.

    >>> import tinyattn as ta
    >>> ta.amin(ta.tensor([[1.0, 5.0], [3.0, 2.0]]), dim=1)
    tensor([1., 2.])
    """
    return -amax(-input, dim, keepdim)


def aminmax(input, *, dim=None, keepdim=False):
    """``(min, max)``: ``amin`` and ``amax`` over ``dim`` (all elements by default), a named tuple.

    >>> import tinyattn as ta
    >>> ta.aminmax(ta.tensor([3.0, -1.0, 2.0]))
    aminmax(min=tensor(-1.), max=tensor(3.))
    """
    return AminmaxResult(amin(input, dim, keepdim), amax(input, dim, keepdim))


def count_nonzero(input, dim=None):
    """How many elements are non-zero, over ``dim`` (an int or a tuple; all by default); int64, no gradient.

    >>> import tinyattn as ta
    >>> ta.count_nonzero(ta.tensor([[0, 1, 2], [3, 0, 0]]), dim=1)
    tensor([2, 1])
    """
    counts = (input._data != 0).sum(axis=_physical_axes(input, dim, "count_nonzero"))
    return _no_grad(counts.astype(np.int64), input)


# ----------------------------------------------------------------------------- sums, means, moments


def nansum(input, dim=None, keepdim=False, *, dtype=None):
    """The sum with NaN counted as zero: ``sum(where(isnan(x), 0, x))``.

    >>> import tinyattn as ta
    >>> ta.nansum(ta.tensor([1.0, float("nan"), 2.0]))
    tensor(3.)
    """
    if input.dtype.kind in "fc":
        input = masked_fill(input, input != input, 0.0)
    return sum(input, dim, keepdim, dtype=dtype)


def nanmean(input, dim=None, keepdim=False, *, dtype=None):
    """The mean of the elements that are not NaN: ``nansum(x) / count(not isnan(x))`` (NaN where none is).

    >>> import tinyattn as ta
    >>> ta.nanmean(ta.tensor([1.0, float("nan"), 2.0]))
    tensor(1.5)
    """
    if dtype is not None:
        input = input.to(dtype)
    present = input == input  # (NaN is the one value unequal to itself)
    return nansum(input, dim, keepdim) / sum(present.to(input.dtype), dim, keepdim)


def var_mean(input, dim=None, unbiased=True, keepdim=False, *, correction=None):
    """``(var, mean)`` over ``dim``, with ``var``'s arguments (``correction`` 1 by default), a tuple.

    >>> import tinyattn as ta
    >>> ta.var_mean(ta.tensor([1.0, 2.0, 3.0]))
    (tensor(1.), tensor(2.))
    """
    if isinstance(dim, bool):  # var_mean(x, False): PyTorch's var_mean(input, unbiased)
        dim, unbiased = None, dim
    return var(input, dim, unbiased, keepdim, correction=correction), mean(input, dim, keepdim)


def std_mean(input, dim=None, unbiased=True, keepdim=False, *, correction=None):
    """``(std, mean)`` over ``dim``: ``std = sqrt(var)``, with ``var``'s arguments, a tuple.

    >>> import tinyattn as ta
    >>> ta.std_mean(ta.tensor([1.0, 3.0]), correction=0)
    (tensor(1.), tensor(2.))
    """
    variance, average = var_mean(input, dim, unbiased, keepdim, correction=correction)
    return sqrt(variance), average


def _product_along(x, dim):
    """The product of ``x`` along ``dim`` (kept with size 1), by multiplying its halves pairwise until one is
    left: only multiplications, so the gradient of each factor is the product of the others, exactly,
    zeros included (``out / x`` would divide by them)."""
    if x.shape[dim] == 0:
        return sum(x, dim, keepdim=True) + 1  # the empty product (and a gradient of the input's empty shape)
    while x.shape[dim] > 1:
        n, half = x.shape[dim], x.shape[dim] // 2
        before = (slice(None),) * dim
        paired = x[before + (slice(0, half),)] * x[before + (slice(half, 2 * half),)]  # (…, n // 2, …)
        x = cat([paired, x[before + (slice(2 * half, n),)]], dim) if n % 2 else paired
    return x


def prod(input, dim=None, keepdim=False, *, dtype=None):
    """The product of the elements, over all of them or along one ``dim``; integers multiply as int64.

    The gradient of each element is the product of all the others, computed without dividing, so it is
    right where elements are zero.

    >>> import tinyattn as ta
    >>> x = ta.tensor([2.0, 0.0, 3.0], requires_grad=True)
    >>> x.prod().backward()
    >>> x.grad
    array([0., 6., 0.], dtype=float32)
    """
    if dtype is not None:
        input = input.to(dtype)
    elif input.dtype.kind in "biu":
        input = input.to(np.int64)
    if dim is None:
        out = _product_along(input.reshape(-1), 0).reshape(())  # ()
        return out.reshape((1,) * input.ndim) if keepdim else out
    if input.ndim == 0:
        _normalize_dims(dim, 0, "prod")
        return input * 1
    (axis,) = _normalize_dims(dim, input.ndim, "prod")
    return _reduced(_product_along(input, axis), input, axis, keepdim)


def logsumexp(input, dim, keepdim=False):
    """``log(sum(exp(x)))`` over ``dim``, computed stably: ``m + log(sum(exp(x - m)))`` with ``m`` the maximum
    (held constant: the gradient, ``softmax(x)``, is the same for every ``m``).

    >>> import tinyattn as ta
    >>> ta.logsumexp(ta.tensor([[0.0, 0.0], [-100.0, -100.0]]), dim=1)
    tensor([  0.6931472, -99.306854 ])
    """
    input = _floating(input)
    shift = amax(input.detach(), dim, keepdim=True)
    shift = masked_fill(shift, shift.abs() == math.inf, 0.0)  # an infinite maximum: its rows give ±inf as they are
    total = sum(exp(input - shift), dim, keepdim)
    return log(total) + (shift if keepdim else shift.reshape(total.shape))


# ----------------------------------------------------------------------------- norms


def _root(total, ord):
    """``total ** (1 / ord)``, with the derivative 0 where ``total`` is 0 (PyTorch's subgradient of a norm at 0)."""
    zero = total == 0
    return masked_fill(masked_fill(total, zero, 1.0) ** (1.0 / ord), zero, 0.0)


def vector_norm(x, ord=2, dim=None, keepdim=False, *, dtype=None):
    """The vector ``ord``-norm over ``dim`` (all elements by default): ``(Σ |x|^ord)^(1/ord)``.

    ``ord`` is any number: ``inf`` is ``max |x|``, ``-inf`` is ``min |x|``, ``0`` counts the non-zero elements.
    At a zero the gradient is PyTorch's subgradient, 0 (never NaN).

    >>> import tinyattn as ta
    >>> x = ta.tensor([3.0, -4.0])
    >>> ta.linalg.vector_norm(x), ta.linalg.vector_norm(x, ord=1), ta.linalg.vector_norm(x, ord=float("inf"))
    (tensor(5.), tensor(7.), tensor(4.))
    """
    if not isinstance(ord, numbers.Real):
        raise TypeError(f"vector_norm: ord must be a number, got {ord!r}")
    if dtype is not None:
        x = x.to(dtype)
    elif x.dtype.kind not in "fc":
        raise RuntimeError(f"vector_norm: expected a floating-point input, got dtype {x.dtype} "
                           "(convert it with .float(), or pass dtype=)")
    if x.dtype == np.float16:  # accumulated in float32, as PyTorch does (|x|^ord overflows float16 early)
        return vector_norm(x.float(), ord, dim, keepdim).to(np.float16)
    if ord == 0:  # the count of non-zero elements; a gradient of zeros
        return sum(where(x != 0, 1.0, x * 0), dim, keepdim)
    magnitude = abs(x)
    if ord == math.inf:
        return amax(magnitude, dim, keepdim)
    if ord == -math.inf:
        return amin(magnitude, dim, keepdim)
    if ord == 1:
        return sum(magnitude, dim, keepdim)
    if ord == 2:
        return _root(sum(x * x, dim, keepdim), 2)
    zero = magnitude == 0  # |x|^ord is 0 there (inf for a negative ord), its derivative taken as 0
    powered = masked_fill(masked_fill(magnitude, zero, 1.0) ** ord, zero, 0.0 if ord > 0 else math.inf)
    return _root(sum(powered, dim, keepdim), ord)


def _refuse_singular_values(name, ord):
    raise NotImplementedError(
        f"{name}: ord={ord!r} needs the matrix's singular values (an SVD); linear-algebra decompositions are "
        "out of tinyattn's scope (use 'fro', 1, -1, inf or -inf)")


def matrix_norm(A, ord="fro", dim=(-2, -1), keepdim=False, *, dtype=None):
    """The matrix ``ord``-norm over the two dimensions ``dim``.

    ``'fro'``: ``sqrt(Σ |a_ij|²)``; ``inf`` / ``-inf``: the largest / smallest row sum of ``|A|``; ``1`` / ``-1``: the
    largest / smallest column sum. ``'nuc'``, ``2`` and ``-2`` need singular values and raise
    ``NotImplementedError`` (decompositions are out of scope).

    >>> import tinyattn as ta
    >>> A = ta.tensor([[1.0, -2.0], [3.0, 4.0]])
    >>> ta.linalg.matrix_norm(A, ord=float("inf")), ta.linalg.matrix_norm(A, ord=1)
    (tensor(7.), tensor(6.))
    """
    if dtype is not None:
        A = A.to(dtype)
    if A.ndim < 2:
        raise RuntimeError(f"matrix_norm: expected a tensor with 2 or more dimensions, got shape {A.shape}")
    rows, columns = _normalize_dims(tuple(dim), A.ndim, "matrix_norm")
    if ord == "fro":
        return vector_norm(A, 2, (rows, columns), keepdim)
    if ord in ("nuc", 2, -2):
        _refuse_singular_values("matrix_norm", ord)
    if ord not in (math.inf, -math.inf, 1, -1):
        raise RuntimeError(f"matrix_norm: ord must be one of 'fro', 'nuc', inf, -inf, 1, -1, 2, -2, got {ord!r}")
    summed, extreme = (columns, rows) if ord in (math.inf, -math.inf) else (rows, columns)
    if A.shape[extreme] == 0 and ord > 0:  # the largest of no sums: 0, as in PyTorch (a norm is never below it)
        return sum(abs(A), (rows, columns), keepdim)
    pick = amax if ord > 0 else amin
    out = pick(sum(abs(A), summed, keepdim=True), extreme, keepdim=True)  # (…, 1, …, 1, …)
    return _reduced(out, A, (rows, columns), keepdim)


def linalg_norm(A, ord=None, dim=None, keepdim=False, *, dtype=None):
    """``torch.linalg.norm``: a vector norm over one dimension, a matrix norm over two.

    ``ord=None`` is the 2-norm of the flattened tensor (over all of ``dim``); with ``ord`` given and ``dim`` not, a
    1-D input takes the vector norm and a 2-D input the matrix norm.

    >>> import tinyattn as ta
    >>> ta.linalg.norm(ta.tensor([[1.0, 2.0], [2.0, 4.0]]))
    tensor(5.)
    """
    if isinstance(dim, numbers.Integral) or (dim is not None and len(dim) == 1):
        return vector_norm(A, 2 if ord is None else ord, dim, keepdim, dtype=dtype)
    if dim is not None:
        return matrix_norm(A, "fro" if ord is None else ord, dim, keepdim, dtype=dtype)
    if ord is None:
        return vector_norm(A, 2, None, keepdim, dtype=dtype)
    if A.ndim == 1:
        return vector_norm(A, ord, None, keepdim, dtype=dtype)
    if A.ndim == 2:
        return matrix_norm(A, ord, (-2, -1), keepdim, dtype=dtype)
    raise RuntimeError(f"linalg.norm: with ord={ord!r} and no dim, the input must be 1-D or 2-D, got shape {A.shape}")


def norm(input, p="fro", dim=None, keepdim=False, dtype=None):
    """``torch.norm``: the vector ``p``-norm over ``dim`` (all elements by default) for a number ``p``; ``'fro'``
    is the 2-norm; ``'nuc'`` needs singular values and raises ``NotImplementedError``.

    >>> import tinyattn as ta
    >>> x = ta.tensor([3.0, -4.0])
    >>> x.norm(), ta.norm(x, p=1), ta.norm(x, p=float("inf"))
    (tensor(5.), tensor(7.), tensor(4.))
    """
    if p == "nuc":
        _refuse_singular_values("norm", p)
    if p == "fro":
        p = 2
    if isinstance(dim, numbers.Integral):
        dim = (dim,)
    return vector_norm(input, p, tuple(dim) if dim is not None else None, keepdim, dtype=dtype)


def dist(input, other, p=2):
    """The ``p``-norm of ``input - other`` (broadcast together), over all elements.

    >>> import tinyattn as ta
    >>> ta.dist(ta.tensor([1.0, 1.0]), ta.tensor([4.0, 5.0]))
    tensor(5.)
    """
    return vector_norm(input - other, p)


def trace(input):
    """The sum of a matrix's main diagonal ``Σ_i input[i, i]`` (integers sum as int64).

    >>> import tinyattn as ta
    >>> ta.trace(ta.tensor([[1.0, 2.0], [3.0, 4.0]]))
    tensor(5.)
    """
    if input.ndim != 2:
        raise RuntimeError(f"trace: expected a matrix (2-D), got shape {input.shape}")
    diagonal = backend.namespace(input._data).arange(min(input.shape))
    return sum(input[diagonal, diagonal])


def sum_to_size(self, *size):
    """The tensor summed down to ``size`` (to which it must broadcast), as a gradient is summed to its input's.

    >>> import tinyattn as ta
    >>> ta.tensor([[1.0, 2.0], [3.0, 4.0]]).sum_to_size(1, 2)
    tensor([[4., 6.]])
    """
    size = tuple(size[0]) if len(size) == 1 and not isinstance(size[0], numbers.Integral) else size
    if np.broadcast_shapes(size, self.shape) != tuple(self.shape):
        raise RuntimeError(f"sum_to_size: size {size} is not expandable to the tensor's size {tuple(self.shape)}")
    return sum_to(self, size)


Tensor.amin, Tensor.aminmax, Tensor.count_nonzero = amin, aminmax, count_nonzero
Tensor.nansum, Tensor.nanmean, Tensor.prod, Tensor.logsumexp = nansum, nanmean, prod, logsumexp
Tensor.norm, Tensor.dist, Tensor.trace, Tensor.sum_to_size = norm, dist, trace, sum_to_size
