"""Floor 3, by family: sorting and selection (sort, topk, kthvalue, median, unique…) and the cumulative ops.

Each function is composed from the primitives in ``ops`` wherever the mathematics allows, so that its
gradient, JVP, batching rule and second derivative come from theirs; a new primitive says in its docstring
why a composition would not do. Names, arguments and defaults are PyTorch's.

The selections find their indices on the array (no gradient: an index is piecewise constant) and then take
the values at those indices by indexing, so the gradient reaches exactly the elements chosen. The running
products and log-sum-exps are scans of multiplications and ``logaddexp``: no division, so ``cumprod``'s
gradient is right where elements are zero.

>>> import tinyattn as ta
>>> x = ta.tensor([3.0, 1.0, 2.0], requires_grad=True)
>>> ta.sort(x)
sort(values=tensor([1., 2., 3.], grad_fn=<GetItem>), indices=tensor([1, 2, 0]))
>>> ta.cumprod(ta.tensor([2.0, 0.0, 3.0]), dim=0)
tensor([2., 0., 0.])
"""

import collections
import math

import numpy as np

from . import backend
from .engine import Tensor
from .ops import _normalize_dims, cat, exp, log, masked_fill, stack, where
from .ops_extra import _lead, _no_grad, _order, _take_along, cumsum

__all__ = [
    "cumsum", "sort", "argsort", "msort", "kthvalue", "median", "nanmedian", "mode", "quantile", "nanquantile",
    "unique",
    "unique_consecutive", "searchsorted", "bucketize", "cumprod", "cummax", "cummin", "logcumsumexp", "diff",
]

SortResult = collections.namedtuple("sort", ["values", "indices"])
KthvalueResult = collections.namedtuple("kthvalue", ["values", "indices"])
MedianResult = collections.namedtuple("median", ["values", "indices"])
NanmedianResult = collections.namedtuple("nanmedian", ["values", "indices"])
ModeResult = collections.namedtuple("mode", ["values", "indices"])
CummaxResult = collections.namedtuple("cummax", ["values", "indices"])
CumminResult = collections.namedtuple("cummin", ["values", "indices"])


def _axis(input, dim, name):
    """``dim`` of ``input`` as a non-negative int, or ``None`` for a 0-d tensor (which takes 0 and -1)."""
    axes = _normalize_dims(dim, input.ndim, name)
    return axes[0] if axes else None


def _zero_index(input):
    """The index of a 0-d tensor's one element (an int64 0 per example)."""
    return _no_grad(backend.namespace(input._data).zeros(input._data.shape, dtype=np.int64), input)


def _chosen(input, index, axis, keepdim, result):
    """``result(values, indices)``: ``input``'s values at ``index`` (an int64 array of ``input``'s array's rank,
    size 1 along ``axis``), the axis dropped unless ``keepdim``."""
    indices = _no_grad(index, input)
    values = _take_along(input, indices, axis)
    if not keepdim:
        values, indices = values.squeeze(axis), indices.squeeze(axis)
    return result(values, indices)


# ----------------------------------------------------------------------------- sorting


def argsort(input, dim=-1, descending=False, stable=False):
    """The int64 indices that sort ``input`` along ``dim``; ties keep their order (the sort is always stable) and
    NaN counts as the largest value, as in PyTorch.

    >>> import tinyattn as ta
    >>> ta.argsort(ta.tensor([3.0, 1.0, 2.0]), descending=True)
    tensor([0, 2, 1])
    """
    axis = _axis(input, dim, "argsort")
    if axis is None:
        return _zero_index(input)
    return _no_grad(_order(input._data, axis + _lead(input), descending), input)


def sort(input, dim=-1, descending=False, stable=False):
    """``(values, indices)``: ``input`` sorted along ``dim`` (stably), and where each value came from.

    >>> import tinyattn as ta
    >>> ta.sort(ta.tensor([[3.0, 1.0], [0.0, 2.0]]), dim=1, descending=True).values
    tensor([[3., 1.],
            [2., 0.]])
    """
    indices = argsort(input, dim, descending)
    return SortResult(_take_along(input, indices, _axis(input, dim, "sort")), indices)


def msort(input):
    """``input`` sorted along its first dimension: ``sort(input, dim=0).values``.

    >>> import tinyattn as ta
    >>> ta.msort(ta.tensor([[3.0, 1.0], [0.0, 2.0]]))
    tensor([[0., 1.],
            [3., 2.]])
    """
    return sort(input, 0).values


def _at_rank(name, input, dim, keepdim, rank, result):
    """``result(values, indices)`` of the element at sorted position ``rank(sorted array, axis)`` (an int array, size
    1 along ``axis``) along ``dim``: the element itself for a 0-d tensor."""
    axis = _axis(input, dim, name)
    if axis is None:
        indices = _zero_index(input)
        return result(_take_along(input, indices, None), indices)
    xp, physical = backend.namespace(input._data), axis + _lead(input)
    order = _order(input._data, physical)
    position = rank(xp.take_along_axis(input._data, order, axis=physical), physical)
    return _chosen(input, xp.take_along_axis(order, position, axis=physical), axis, keepdim, result)


def kthvalue(input, k, dim=-1, keepdim=False):
    """``(values, indices)`` of the ``k``-th smallest element (``k`` from 1) along ``dim``.

    >>> import tinyattn as ta
    >>> ta.kthvalue(ta.tensor([3.0, 1.0, 2.0]), 2)
    kthvalue(values=tensor(2.), indices=tensor(2))
    """
    axis = _axis(input, dim, "kthvalue")
    size = 1 if axis is None else input.shape[axis]
    if not 1 <= k <= size:
        raise RuntimeError(f"kthvalue: k={k} is out of range for dimension {dim} of size {size} (expected 1 to {size})")

    def kth(ranked, axis):
        return np.full(ranked.shape[:axis] + (1,) + ranked.shape[axis + 1:], k - 1, dtype=np.int64)

    return _at_rank("kthvalue", input, dim, keepdim, kth, KthvalueResult)


def _lower_median(ignore_nan):
    """The sorted position of the lower median along ``axis``: of the values that are not NaN with
    ``ignore_nan``; else the first NaN where there is one (the median of a row with NaN is NaN)."""
    def rank(ranked, axis):
        nan = ranked != ranked
        missing = nan.sum(axis=axis, keepdims=True)
        present = ranked.shape[axis] - missing
        if ignore_nan:
            return np.maximum(present - 1, 0) // 2
        return np.where(missing > 0, present, (ranked.shape[axis] - 1) // 2)
    return rank


def _median(name, input, dim, keepdim, ignore_nan, result):
    if dim is None:  # the lower median of every element: its value alone
        return _at_rank(name, input.reshape(-1), 0, False, _lower_median(ignore_nan), result).values
    return _at_rank(name, input, dim, keepdim, _lower_median(ignore_nan), result)


def median(input, dim=None, keepdim=False):
    """The lower median (of an even count, the smaller of the two middle values); NaN where a row holds NaN.

    Without ``dim``, the median of every element (a value); along ``dim``, ``(values, indices)``.

    >>> import tinyattn as ta
    >>> ta.median(ta.tensor([4.0, 1.0, 3.0, 2.0]))
    tensor(2.)
    """
    return _median("median", input, dim, keepdim, False, MedianResult)


def nanmedian(input, dim=None, keepdim=False):
    """``median`` of the values that are not NaN (NaN where a row has none).

    >>> import tinyattn as ta
    >>> ta.nanmedian(ta.tensor([4.0, float("nan"), 3.0]))
    tensor(3.)
    """
    return _median("nanmedian", input, dim, keepdim, True, NanmedianResult)


def mode(input, dim=-1, keepdim=False):
    """``(values, indices)``: the most frequent value along ``dim`` (the smallest of those tied), and the index
    of its last occurrence, as PyTorch's CPU kernel gives.

    >>> import tinyattn as ta
    >>> ta.mode(ta.tensor([1.0, 2.0, 2.0, 1.0, 3.0]))
    mode(values=tensor(1.), indices=tensor(3))
    """
    axis = _axis(input, dim, "mode")
    if axis is None:
        indices = _zero_index(input)
        return ModeResult(_take_along(input, indices, None), indices)
    xp, physical = backend.namespace(input._data), axis + _lead(input)
    rows = xp.moveaxis(input._data, physical, -1)  # (…, n)
    index = xp.empty(rows.shape[:-1], dtype=np.int64)
    for position in np.ndindex(*rows.shape[:-1]):
        row = rows[position]
        values, counts = xp.unique(row, return_counts=True)
        most = values[int(xp.argmax(counts))]  # (unique's values ascend: the first of the most frequent)
        index[position] = int(xp.flatnonzero(row == most)[-1])
    return _chosen(input, xp.expand_dims(index, physical), axis, keepdim, ModeResult)


# ----------------------------------------------------------------------------- quantiles


_INTERPOLATIONS = ("linear", "lower", "higher", "midpoint", "nearest")


def _quantile(name, input, q, dim, keepdim, interpolation, ignore_nan):
    """The ``q``-th quantiles along ``dim``, interpolated between the sorted values on either side of the rank
    ``q·(n - 1)`` (``n``: the values that are not NaN with ``ignore_nan``; else a row with NaN gives NaN)."""
    if input.dtype.kind != "f":
        raise RuntimeError(f"{name}: expected a float or double input, got dtype {input.dtype}")
    if interpolation not in _INTERPOLATIONS:
        raise ValueError(f"{name}: interpolation must be one of {_INTERPOLATIONS}, got {interpolation!r}")
    xp = backend.namespace(input._data)
    q = q if isinstance(q, Tensor) else Tensor._wrap(xp.asarray(q, dtype=input.dtype))  # (a number: a constant)
    if q.ndim > 1:
        raise RuntimeError(f"{name}: q must be a scalar or a 1-D tensor, got shape {q.shape}")
    if not ((q._data >= 0) & (q._data <= 1)).all():
        raise RuntimeError(f"{name}: q values must be in the range [0, 1], got {q.numpy()}")
    shape = input.shape
    x = input.reshape(-1) if dim is None or input.ndim == 0 else input  # the values to rank, along `axis`
    axis = 0 if x is not input else _axis(input, dim, name)
    physical = axis + _lead(x)
    order = _order(x._data, physical)
    ranked = xp.take_along_axis(x._data, order, axis=physical)  # (…, n, …), NaN last
    values = _take_along(x, _no_grad(order, x), axis)  # the same, differentiable
    missing = (ranked != ranked).sum(axis=physical, keepdims=True)  # (…, 1, …)
    n = ranked.shape[physical]
    span = _no_grad((n - 1 - missing).astype(x.dtype), x) if ignore_nan else n - 1
    results = []
    for q_i in (q[i] for i in range(q.shape[0])) if q.ndim else (q,):
        rank = q_i * span  # the fractional position, differentiable in q
        rank = masked_fill(rank, rank < 0, 0.0) if ignore_nan else where(_no_grad(missing > 0, x), float(n - 1), rank)
        ranks = xp.broadcast_to(rank._data, missing.shape)
        below, above = xp.floor(ranks).astype(np.int64), xp.ceil(ranks).astype(np.int64)
        if interpolation in ("lower", "higher", "nearest"):
            chosen = {"lower": below, "higher": above, "nearest": xp.round(ranks).astype(np.int64)}[interpolation]
            out = _take_along(values, _no_grad(chosen, x), axis)
        else:
            weight = _no_grad(xp.full(ranks.shape, 0.5, dtype=x.dtype), x) if interpolation == "midpoint" else \
                rank - _no_grad(below.astype(x.dtype), x)
            low = _take_along(values, _no_grad(below, x), axis)  # (…, 1, …)
            high = _take_along(values, _no_grad(above, x), axis)
            out = low + weight * (high - low)
        if keepdim and dim is None:
            out = out.reshape((1,) * len(shape))
        elif not keepdim or len(shape) == 0:
            out = out.reshape(out.shape[:axis] + out.shape[axis + 1:])
        results.append(out)
    return stack(results, 0) if q.ndim == 1 else results[0]


def quantile(input, q, dim=None, keepdim=False, *, interpolation="linear"):
    """The ``q``-th quantiles of ``input`` along ``dim`` (of every element without it): at the rank
    ``q·(n - 1)`` of the sorted values, ``interpolation`` (``'linear'``, ``'lower'``, ``'higher'``,
    ``'midpoint'``, ``'nearest'``) choosing between the values on either side. A 1-D ``q`` adds a first dimension.

    >>> import tinyattn as ta
    >>> ta.quantile(ta.tensor([1.0, 2.0, 3.0, 4.0]), 0.5)
    tensor(2.5)
    """
    return _quantile("quantile", input, q, dim, keepdim, interpolation, False)


def nanquantile(input, q, dim=None, keepdim=False, *, interpolation="linear"):
    """``quantile`` of the values that are not NaN.

    >>> import tinyattn as ta
    >>> ta.nanquantile(ta.tensor([1.0, float("nan"), 3.0]), 0.5)
    tensor(2.)
    """
    return _quantile("nanquantile", input, q, dim, keepdim, interpolation, True)


# ----------------------------------------------------------------------------- unique values


def _unbatched(name, input):
    if _lead(input):
        raise RuntimeError(f"vmap: {name} returns a number of values that depends on the data, so it cannot be "
                           "batched (torch.vmap refuses it too): call it outside vmap")


def _unique_results(input, values, inverse, counts, return_inverse, return_counts):
    out = (_no_grad(values, input),)
    if return_inverse:
        out += (_no_grad(inverse.astype(np.int64), input),)
    if return_counts:
        out += (_no_grad(counts.astype(np.int64), input),)
    return out if len(out) > 1 else out[0]


def unique(input, sorted=True, return_inverse=False, return_counts=False, dim=None):
    """The distinct values of ``input`` (ascending), or its distinct slices along ``dim``; with
    ``return_inverse`` where each element went, with ``return_counts`` how often each occurs. No gradient.

    >>> import tinyattn as ta
    >>> ta.unique(ta.tensor([3, 1, 3, 2]), return_counts=True)
    (tensor([1, 2, 3]), tensor([1, 1, 2]))
    """
    _unbatched("unique", input)
    xp, data = backend.namespace(input._data), input._data
    axis = None if dim is None else _axis(input, dim, "unique")
    values, inverse, counts = xp.unique(data if axis is not None else data.reshape(-1), return_inverse=True,
                                        return_counts=True, axis=axis)
    inverse = inverse.reshape(-1) if axis is not None else inverse.reshape(data.shape)
    return _unique_results(input, values, inverse, counts, return_inverse, return_counts)


def unique_consecutive(input, return_inverse=False, return_counts=False, dim=None):
    """``input`` with each run of equal consecutive values (or slices along ``dim``) kept once; ``return_inverse``
    and ``return_counts`` as ``unique``'s. No gradient.

    >>> import tinyattn as ta
    >>> ta.unique_consecutive(ta.tensor([1, 1, 2, 2, 1]))
    tensor([1, 2, 1])
    """
    _unbatched("unique_consecutive", input)
    xp = backend.namespace(input._data)
    if dim is None:
        data, axis = input._data.reshape(-1), 0
    else:
        data, axis = input._data, _axis(input, dim, "unique_consecutive")
        if axis is None:
            data, axis = data.reshape(-1), 0
    rest = int(np.prod([size for i, size in enumerate(data.shape) if i != axis]))
    rows = xp.moveaxis(data, axis, 0).reshape(data.shape[axis], rest)  # (n, the rest)
    starts = xp.ones(rows.shape[0], dtype=bool)
    starts[1:] = (rows[1:] != rows[:-1]).any(axis=1) if rows.shape[1] else False
    first = xp.flatnonzero(starts)
    values = xp.take(data, first, axis=axis)
    inverse = xp.cumsum(starts) - 1
    if dim is None:
        inverse = inverse.reshape(input._data.shape)
    counts = xp.diff(xp.append(first, rows.shape[0]))
    return _unique_results(input, values, inverse, counts, return_inverse, return_counts)


# ----------------------------------------------------------------------------- searching sorted sequences


def _leading(array, lead, rank):
    """``array`` (``lead`` batch axes in front) with size-1 batch axes added up to ``rank`` of them."""
    return array.reshape((1,) * (rank - lead) + array.shape)


def searchsorted(sorted_sequence, input, *, out_int32=False, right=False, side=None, sorter=None):
    """For each value of ``input``, the index at which inserting it keeps ``sorted_sequence`` sorted along its last
    dimension: the first position whose value is ``>=`` it (``> `` with ``right=True`` or ``side='right'``).

    A 1-D ``sorted_sequence`` serves every value; an N-D one holds one sequence per row of ``input``'s leading
    dimensions. ``sorter`` gives the order of an unsorted sequence. The search is PyTorch's binary search, step for
    step, so an unsorted sequence gives its answers too. int64 (int32 with ``out_int32``), no gradient.

    >>> import tinyattn as ta
    >>> ta.searchsorted(ta.tensor([1.0, 3.0, 5.0]), ta.tensor([3.0, 6.0])), ta.bucketize(3.0, ta.tensor([1.0, 3.0]))
    (tensor([1, 3]), tensor(1))
    """
    if side is not None:
        if side not in ("left", "right"):
            raise RuntimeError(f"searchsorted: side must be 'left' or 'right', got {side!r}")
        if right and side == "left":
            raise RuntimeError("searchsorted: side='left' and right=True contradict each other")
        right = side == "right"
    like = input if isinstance(input, Tensor) and _lead(input) else sorted_sequence
    xp = backend.namespace(sorted_sequence._data)
    sequence = sorted_sequence._data
    values = input._data if isinstance(input, Tensor) else xp.asarray(input, dtype=sequence.dtype)
    sequence_lead = _lead(sorted_sequence)
    values_lead = _lead(input) if isinstance(input, Tensor) else 0
    if sorted_sequence.ndim > 1 and (not isinstance(input, Tensor) or sorted_sequence.shape[:-1] != input.shape[:-1]):
        raise RuntimeError(f"searchsorted: the leading dimensions of sorted_sequence {sorted_sequence.shape} and "
                           f"input {getattr(input, 'shape', ())} must match")
    if sequence_lead and values_lead and type(input) is not type(sorted_sequence):
        raise RuntimeError("searchsorted: sorted_sequence and input are batched by different vmap levels, which "
                           "it cannot pair: map both with one vmap")
    lead = max(sequence_lead, values_lead)
    sequence, values = _leading(sequence, sequence_lead, lead), _leading(values, values_lead, lead)
    if sorter is not None:  # the sequence in sorted order
        sequence = xp.take_along_axis(sequence, _leading(sorter._data, _lead(sorter), lead), axis=-1)
    n = sequence.shape[-1]
    if sorted_sequence.ndim == 1:  # one sequence for every value: (*batch, 1, …, 1, n)
        sequence = sequence.reshape(sequence.shape[:-1] + (1,) * (values.ndim - lead) + (n,))
    shape = np.broadcast_shapes(sequence.shape[:-1], values.shape) if sorted_sequence.ndim == 1 else \
        np.broadcast_shapes(sequence.shape[:lead], values.shape[:lead]) + values.shape[lead:]
    start, end = xp.zeros(shape, dtype=np.int64), xp.full(shape, n, dtype=np.int64)
    for _ in range(int(n).bit_length() + 1 if n else 0):  # each step halves every interval [start, end)
        middle = start + (end - start) // 2
        if sorted_sequence.ndim == 1:
            found = xp.take_along_axis(sequence, xp.minimum(middle, n - 1)[..., None], axis=-1)[..., 0]
        else:
            found = xp.take_along_axis(sequence, xp.minimum(middle, n - 1), axis=-1)
        after = ~(found > values) if right else ~(found >= values)  # PyTorch's comparisons, NaN included
        searching = start < end
        start = xp.where(searching & after, middle + 1, start)
        end = xp.where(searching & ~after, middle, end)
    return _no_grad(start.astype(np.int32 if out_int32 else np.int64), like)


def bucketize(input, boundaries, *, out_int32=False, right=False):
    """The bucket of each value of ``input`` among the ascending 1-D ``boundaries``: ``searchsorted(boundaries,
    input)``, the index ``i`` with ``boundaries[i-1] < x <= boundaries[i]`` (``<=`` and ``<`` with ``right=True``).

    >>> import tinyattn as ta
    >>> ta.bucketize(ta.tensor([0.5, 2.0, 9.0]), ta.tensor([1.0, 2.0, 3.0]))
    tensor([0, 1, 3])
    """
    if boundaries.ndim != 1:
        raise RuntimeError(f"bucketize: boundaries must be 1-D, got shape {boundaries.shape}")
    return searchsorted(boundaries, input, out_int32=out_int32, right=right)


# ----------------------------------------------------------------------------- running products and extremes


def _scan(x, axis, combine):
    """The inclusive scan of ``combine`` along ``axis`` (Hillis and Steele): after the steps 1, 2, 4, …,
    ``out[i] = combine(x[0], …, x[i])``, composed of slices, ``combine`` and ``cat``."""
    n, step = x.shape[axis], 1
    before = (slice(None),) * axis
    while step < n:
        combined = combine(x[before + (slice(step, n),)], x[before + (slice(0, n - step),)])  # (…, n - step, …)
        x = cat([x[before + (slice(0, step),)], combined], axis)
        step *= 2
    return x


def cumprod(input, dim, *, dtype=None):
    """Running products along ``dim``: ``out[i] = input[0]·…·input[i]`` (integers multiply as int64).

    A scan of multiplications, never a division by the input, so the gradient is right where it holds zeros.

    >>> import tinyattn as ta
    >>> x = ta.tensor([2.0, 0.0, 3.0], requires_grad=True)
    >>> ta.cumprod(x, 0).sum().backward()
    >>> x.grad
    array([1., 8., 0.], dtype=float32)
    """
    if dtype is not None:
        input = input.to(dtype)
    elif input.dtype.kind in "biu" and input.dtype != np.int64:
        input = input.to(np.int64)
    axis = _axis(input, dim, "cumprod")
    return input * 1 if axis is None else _scan(input, axis, lambda later, earlier: later * earlier)


def _logaddexp(a, b):
    """``log(exp(a) + exp(b)) = m + log(exp(a - m) + exp(b - m))`` with ``m = max(a, b)`` held constant: no
    exponential of a large number, and at ``a == b`` the gradient splits evenly, as ``m``'s own would not."""
    high = where(a >= b, a, b).detach()
    high = masked_fill(high, high.abs() == math.inf, 0.0)  # both -inf (or +inf): their sum is as it is
    return log(exp(a - high) + exp(b - high)) + high


def logcumsumexp(input, dim):
    """Running ``log(sum(exp(x)))`` along ``dim``, stable for any magnitude: a scan of ``logaddexp``.

    >>> import tinyattn as ta
    >>> ta.logcumsumexp(ta.tensor([-100.0, -100.0]), dim=0)
    tensor([-100.      ,  -99.306854])
    """
    if input.dtype.kind not in "fc":
        input = input.float()
    axis = _axis(input, dim, "logcumsumexp")
    return input * 1 if axis is None else _scan(input, axis, _logaddexp)


def _running_extreme(name, input, dim, accumulate, result):
    """``cummax``'s and ``cummin``'s ``(values, indices)``: the index of the latest element that equals the running
    extreme (ties move it on, and so does NaN, as in PyTorch), and the values taken there."""
    axis = _axis(input, dim, name)
    if axis is None:
        indices = _zero_index(input)
        return result(_take_along(input, indices, None), indices)
    xp, data, physical = backend.namespace(input._data), input._data, axis + _lead(input)
    running = accumulate(data, axis=physical)
    positions = xp.arange(data.shape[physical]).reshape((-1,) + (1,) * (data.ndim - physical - 1))
    reached = (data == running) | (data != data)
    index = xp.maximum.accumulate(xp.where(reached, positions, 0), axis=physical).astype(np.int64)
    return _chosen(input, index, axis, True, result)


def cummax(input, dim):
    """``(values, indices)``: the running maximum along ``dim`` and where it was reached.

    >>> import tinyattn as ta
    >>> ta.cummax(ta.tensor([1.0, 3.0, 2.0, 3.0]), 0)
    cummax(values=tensor([1., 3., 3., 3.]), indices=tensor([0, 1, 1, 3]))
    """
    return _running_extreme("cummax", input, dim, backend.namespace(input._data).maximum.accumulate, CummaxResult)


def cummin(input, dim):
    """``(values, indices)``: the running minimum along ``dim`` and where it was reached.

    >>> import tinyattn as ta
    >>> ta.cummin(ta.tensor([3.0, 1.0, 2.0, 1.0]), 0)
    cummin(values=tensor([3., 1., 1., 1.]), indices=tensor([0, 1, 1, 3]))
    """
    return _running_extreme("cummin", input, dim, backend.namespace(input._data).minimum.accumulate, CumminResult)


def diff(input, n=1, dim=-1, prepend=None, append=None):
    """The ``n``-th forward difference along ``dim``: ``out[i] = x[i + 1] - x[i]``, ``n`` times, after ``prepend``
    and ``append`` are joined on (booleans differ by ``!=``).

    >>> import tinyattn as ta
    >>> ta.diff(ta.tensor([1.0, 4.0, 9.0, 16.0])), ta.diff(ta.tensor([1.0, 4.0, 9.0, 16.0]), n=2)
    (tensor([3., 5., 7.]), tensor([2., 2.]))
    """
    if input.ndim == 0:
        raise RuntimeError("diff: expected at least a 1-D input, got a 0-d tensor")
    axis = _axis(input, dim, "diff")
    parts = [p if isinstance(p, Tensor) or p is None else Tensor(p) for p in (prepend, input, append)]
    edge = input.shape[:axis] + (1,) + input.shape[axis + 1:]  # a 0-d prepend or append: one slice of it
    parts = [p if p.ndim else p.reshape((1,) * input.ndim).expand(*edge) for p in parts if p is not None]
    if n == 0:
        return input
    x = cat(parts, axis) if len(parts) > 1 else input
    before = (slice(None),) * axis
    for _ in range(n):
        later, earlier = x[before + (slice(1, None),)], x[before + (slice(None, -1),)]
        x = later != earlier if x.dtype == np.bool_ else later - earlier
    return x


Tensor.sort, Tensor.argsort, Tensor.msort, Tensor.kthvalue = sort, argsort, msort, kthvalue
Tensor.median, Tensor.nanmedian, Tensor.mode = median, nanmedian, mode
Tensor.quantile, Tensor.nanquantile, Tensor.unique, Tensor.unique_consecutive = quantile, nanquantile, unique, \
    unique_consecutive
Tensor.cumprod, Tensor.cummax, Tensor.cummin, Tensor.logcumsumexp, Tensor.diff = cumprod, cummax, cummin, \
    logcumsumexp, diff
