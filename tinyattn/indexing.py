"""Floor 3, by family: indexing: gathers, scatters, index_add, masked and flat selections.

Each function is composed from the primitives in ``ops`` wherever the mathematics allows, so that its
gradient, JVP, batching rule and second derivative come from theirs; a new primitive says in its docstring
why a composition would not do. Names, arguments and defaults are PyTorch's.

Every write here (``scatter``, ``index_add``, ``index_put``, ``masked_scatter``, ``put``, the ``*_scatter``
views) is one rule: the flat positions of ``input`` that the call names (an integer array, found by indexing
``arange(numel)`` shaped as ``input`` the way the call indexes ``input``), and the values that go there. An
overwrite is ``SetItem`` on the flattened input (the last write to a position wins, every writer gets the
gradient read back at its position, as torch's ``src`` does); a sum is ``Scatter`` (``getitem``'s backward,
accumulating repeated positions with ``np.add.at``); a product, minimum or maximum reads and writes the
positions once per round of repeats, so that each round writes distinct positions.

>>> import tinyattn as ta
>>> x = ta.zeros(2, 3)
>>> ta.scatter_add(x, 1, ta.tensor([[0, 0], [2, 1]]), ta.tensor([[1.0, 2.0], [3.0, 4.0]]))
tensor([[3., 0., 0.],
        [0., 4., 3.]])
"""

import builtins

import numpy as np

from . import backend
from .engine import Tensor
from .inplace import SetItem
from .inplace import _write as _write_in_place
from .ops import Scatter, _lift, _normalize_dims, expand, getitem, reshape, where
from .ops_extra import _along, _no_grad, gather, maximum, minimum, nonzero

__all__ = ["scatter", "scatter_add", "scatter_reduce", "index_add", "index_copy", "index_fill", "index_select",
           "index_put", "masked_scatter", "masked_select", "take", "take_along_dim", "put", "nonzero_static",
           "argwhere", "select_scatter", "slice_scatter", "diagonal_scatter", "unravel_index"]


# ----------------------------------------------------------------------------- positions and writes


def _array(index, name):
    """``index`` (a tensor, array or sequence) as a backend array; inside ``vmap`` it must not be batched."""
    if not isinstance(index, Tensor):
        return np.asarray(index)
    if index._data.ndim != index.ndim:
        raise RuntimeError(f"vmap: {name}() cannot take an index or mask batched by vmap (gather can); pass one "
                           "shared by every example, and batch the input instead")
    return index._data


def _integers(index, name):
    """``index`` (a tensor, array or sequence) as a backend integer array."""
    array = _array(index, name)
    if array.dtype.kind not in "iu":
        raise IndexError(f"{name}(): Expected dtype int64 for index, got {array.dtype}")
    return array


def _positions(input, index):
    """The flat positions of ``input``'s elements that ``input[index]`` reads, in its shape (a 0-d input
    indexed as its one element, a vector of one)."""
    shape = tuple(input.shape) or (1,)
    xp = backend.namespace(input._data)
    return xp.arange(int(np.prod(shape))).reshape(shape)[index]


def _values(source, input, shape):
    """``source`` (a tensor or a number) as values of ``input``'s dtype, broadcast to ``shape``."""
    values = source if isinstance(source, Tensor) else _lift(source, input)
    if values.dtype != input.dtype:
        values = values._to_dtype(input.dtype)
    return values if tuple(values.shape) == tuple(shape) else expand(values, *shape)


def _ranks(positions):
    """For each write (flat, in order), how many earlier writes went to the same position."""
    xp = backend.namespace(positions)
    order = xp.argsort(positions, kind="stable")
    ordered = positions[order]
    step = xp.arange(positions.size)
    starts = xp.concatenate([xp.ones(builtins.min(positions.size, 1), dtype=bool), ordered[1:] != ordered[:-1]])
    first = xp.maximum.accumulate(xp.where(starts, step, 0)) if positions.size else step
    ranks = xp.empty_like(step)
    ranks[order] = step - first
    return ranks


_COMBINE = {"prod": lambda a, b: a * b, "amax": maximum, "amin": minimum}


def _write(input, positions, values, reduce=None, include_self=True):
    """``input`` with ``values`` (of ``positions``' shape) written at the flat ``positions``: overwritten
    (``reduce=None``, the last write wins), or reduced with what is there (``"sum"``, ``"mean"``, ``"prod"``,
    ``"amax"``, ``"amin"``; without ``include_self`` the written elements' own values left out)."""
    flat = reshape(input, -1)  # (numel,)
    if reduce is None:
        out = SetItem.apply(flat, values, index=positions)
    elif reduce in ("sum", "mean"):
        xp = backend.namespace(positions)
        count = xp.bincount(positions.reshape(-1), minlength=flat.shape[0])  # (numel,) writes per element
        total = Scatter.apply(values, shape=tuple(flat.shape), index=positions)  # repeats accumulate
        base = flat if include_self else where(_lift(count > 0, flat), 0.0, flat)
        out = base + total
        if reduce == "mean":
            divisor = xp.where(count > 0, count + builtins.int(include_self), 1).astype(flat.dtype)
            out = out / _lift(divisor, flat)
    else:
        ranks = _ranks(positions.reshape(-1)).reshape(positions.shape)
        out = flat
        for rank in range(int(ranks.max()) + 1 if ranks.size else 0):  # each round writes distinct positions
            chosen = ranks == rank
            at, written = positions[chosen], getitem(values, chosen)
            if rank or include_self:
                written = _COMBINE[reduce](getitem(out, at), written)
            out = SetItem.apply(out, written, index=at)
    return reshape(out, *input.shape)


# ----------------------------------------------------------------------------- scatters


def _scatter_positions(input, dim, index, name):
    """The flat positions ``scatter`` writes: ``input[i][index[i][j]]`` for ``dim=1``, in ``index``'s shape."""
    index = _integers(index, name)
    ndim = builtins.max(input.ndim, 1)
    dim = _normalize_dims(dim, ndim, name)[0]
    if input.ndim == 0:
        index = index.reshape(-1)
    if index.size and index.ndim != ndim:
        raise RuntimeError(f"{name}(): Index tensor must have the same number of dimensions as self tensor, got "
                           f"{index.ndim} and {input.ndim}")
    return _positions(input, _along(index, dim)) if index.size else index.reshape(-1)


def _scatter_source(source, input, positions):
    """The part of ``source`` that ``index`` covers (its leading corner), or a number broadcast."""
    if isinstance(source, Tensor):
        if source.ndim == 0 and positions.ndim:
            source = reshape(source, *(1,) * positions.ndim)
        if tuple(source.shape) != positions.shape:
            source = getitem(source, tuple(slice(0, n) for n in positions.shape))
    return _values(source, input, positions.shape)


_SCATTER_REDUCE = {None: None, "add": "sum", "multiply": "prod"}


def scatter(input, dim, index, src=None, *, value=None, reduce=None):
    """``out[i][index[i][j]] = src[i][j]`` for ``dim=1`` (and likewise along any ``dim``); every other element is
    ``input``'s. ``src`` may be a number (or given as ``value``); ``reduce="add"`` or ``"multiply"`` combines with
    what is there instead. Where ``index`` repeats a position, the last write wins.

    >>> import tinyattn as ta
    >>> ta.scatter(ta.zeros(2, 3), 1, ta.tensor([[2], [0]]), ta.tensor([[5.0], [6.0]]))
    tensor([[0., 0., 5.],
            [6., 0., 0.]])
    >>> ta.ones(3).scatter(0, ta.tensor([0, 0]), 2.0, reduce="multiply")
    tensor([4., 1., 1.])
    """
    if reduce not in _SCATTER_REDUCE:
        raise RuntimeError(f"scatter(): reduce argument must be either add or multiply, got {reduce!r}")
    source = value if src is None else src
    if source is None:
        raise TypeError("scatter(): expected src (a tensor or a number) or value")
    positions = _scatter_positions(input, dim, index, "scatter")
    return _write(input, positions, _scatter_source(source, input, positions), _SCATTER_REDUCE[reduce])


def scatter_add(input, dim, index, src):
    """``out[i][index[i][j]] += src[i][j]`` for ``dim=1``, starting from ``input``; repeated positions accumulate.

    >>> import tinyattn as ta
    >>> ta.scatter_add(ta.zeros(3), 0, ta.tensor([0, 2, 0]), ta.tensor([1.0, 2.0, 3.0]))
    tensor([4., 0., 2.])
    """
    positions = _scatter_positions(input, dim, index, "scatter_add")
    return _write(input, positions, _scatter_source(src, input, positions), "sum")


def scatter_reduce(input, dim, index, src, reduce, *, include_self=True):
    """``src`` reduced into ``input`` at ``index`` along ``dim`` (as ``scatter``): ``reduce`` is ``"sum"``,
    ``"prod"``, ``"mean"``, ``"amax"`` or ``"amin"``; with ``include_self=False`` the written elements of
    ``input`` are left out of the reduction (the others keep ``input``'s value).

    >>> import tinyattn as ta
    >>> x = ta.tensor([1.0, 1.0, 1.0])
    >>> ta.scatter_reduce(x, 0, ta.tensor([0, 0, 1]), ta.tensor([2.0, 6.0, 5.0]), "mean")
    tensor([3., 3., 1.])
    >>> x.scatter_reduce(0, ta.tensor([0, 0, 1]), ta.tensor([2.0, 4.0, 5.0]), "amax", include_self=False)
    tensor([4., 5., 1.])
    """
    if reduce not in ("sum", "prod", "mean", "amax", "amin"):
        raise RuntimeError(f"scatter_reduce(): reduce argument must be either sum, prod, mean, amax or amin, "
                           f"got {reduce}")
    positions = _scatter_positions(input, dim, index, "scatter_reduce")
    return _write(input, positions, _scatter_source(src, input, positions), reduce, include_self)


# ----------------------------------------------------------------------------- along one dim, by index


def _index_positions(input, dim, index, name):
    """The flat positions of the slices ``index`` picks along ``dim``: ``input.index_select(dim, index)``'s shape."""
    index = _integers(index, name)
    if index.ndim > 1:
        raise IndexError(f"{name}(): Index is supposed to be a vector, got {index.ndim} dimensions")
    dim = _normalize_dims(dim, builtins.max(input.ndim, 1), name)[0]
    return _positions(input, (slice(None),) * dim + (index.reshape(-1),))


def _index_source(source, input, positions, name):
    if isinstance(source, Tensor) and source.ndim != input.ndim:
        raise IndexError(f"{name}(): source has {source.ndim} dimensions, self {input.ndim}: they must be the same")
    return _values(reshape(source, *positions.shape) if isinstance(source, Tensor) and source.ndim == 0 else source,
                   input, positions.shape)


def index_select(input, dim, index):
    """The slices of ``input`` at ``index`` (a 1-D integer tensor) along ``dim``: ``input[..., index, ...]``.

    >>> import tinyattn as ta
    >>> ta.index_select(ta.tensor([[1.0, 2.0], [3.0, 4.0]]), 1, ta.tensor([1, 1, 0]))
    tensor([[2., 2., 1.],
            [4., 4., 3.]])
    """
    positions = _index_positions(input, dim, index, "index_select")
    out = getitem(reshape(input, -1), positions)  # (…, len(index), …)
    return reshape(out) if input.ndim == 0 else out


def index_add(input, dim, index, source, *, alpha=1):
    """``input`` with ``alpha·source[…, i, …]`` added to the slice ``index[i]`` along ``dim`` (repeats add up).

    >>> import tinyattn as ta
    >>> ta.index_add(ta.zeros(3, 2), 0, ta.tensor([0, 2, 0]), ta.ones(3, 2), alpha=2)
    tensor([[4., 4.],
            [0., 0.],
            [2., 2.]])
    """
    positions = _index_positions(input, dim, index, "index_add")
    values = _index_source(source, input, positions, "index_add")
    return _write(input, positions, values if alpha == 1 else values * alpha, "sum")


def index_copy(input, dim, index, source):
    """``input`` with the slice ``index[i]`` along ``dim`` replaced by ``source``'s slice ``i``.

    >>> import tinyattn as ta
    >>> ta.index_copy(ta.zeros(3), 0, ta.tensor([2, 0]), ta.tensor([5.0, 6.0]))
    tensor([6., 0., 5.])
    """
    positions = _index_positions(input, dim, index, "index_copy")
    return _write(input, positions, _index_source(source, input, positions, "index_copy"))


def index_fill(input, dim, index, value):
    """``input`` with every slice ``index[i]`` along ``dim`` set to ``value`` (a number or a 0-d tensor, which
    then receives the gradient of every element it filled).

    >>> import tinyattn as ta
    >>> ta.zeros(2, 3).index_fill(1, ta.tensor([0, 2]), 1.0)
    tensor([[1., 0., 1.],
            [1., 0., 1.]])
    """
    if isinstance(value, Tensor) and value.ndim != 0:
        raise RuntimeError(f"index_fill_(): only supports a 0-dimensional value tensor, but got tensor with "
                           f"{value.ndim} dimension(s)")
    index = _integers(index, "index_fill")
    dim = _normalize_dims(dim, builtins.max(input.ndim, 1), "index_fill")[0]
    size = input.shape[dim] if input.ndim else 1
    unique = backend.namespace(index).unique(index.reshape(-1) % builtins.max(size, 1))
    positions = _index_positions(input, dim, unique, "index_fill")  # each slice once: value's gradient counts it once
    return _write(input, positions, _values(value, input, positions.shape))


# ----------------------------------------------------------------------------- by index tuples, masks and flat


def index_put(input, indices, values, accumulate=False):
    """``input`` with ``input[indices] = values`` (or ``+=`` with ``accumulate``, repeats adding up); ``indices``
    is a tuple of integer or boolean tensors (``None`` for a whole dimension), and ``values`` broadcasts.

    >>> import tinyattn as ta
    >>> ta.index_put(ta.zeros(3), (ta.tensor([0, 0]),), ta.tensor(1.0), accumulate=True)
    tensor([2., 0., 0.])
    """
    index = tuple(slice(None) if i is None else _array(i, "index_put") for i in indices)
    positions = _positions(input, index)
    return _write(input, positions, _values(values, input, positions.shape), "sum" if accumulate else None)


def put(input, index, source, accumulate=False):
    """``input`` seen flat with ``source``'s elements written at the flat positions ``index`` (negatives count
    from the end), or added with ``accumulate``.

    >>> import tinyattn as ta
    >>> ta.zeros(2, 2).put(ta.tensor([3, 0]), ta.tensor([1.0, 2.0]))
    tensor([[2., 0.],
            [0., 1.]])
    """
    positions = _integers(index, "put").reshape(-1)
    numel = builtins.max(int(np.prod(input.shape)), 1)
    if positions.size and not ((-numel <= positions).all() and (positions < numel).all()):
        raise IndexError(f"put(): index out of range for a tensor of {numel} elements")
    values = reshape(source, -1) if isinstance(source, Tensor) else source
    return _write(input, positions % numel, _values(values, input, positions.shape), "sum" if accumulate else None)


def take(input, index):
    """``input``'s elements at the flat positions ``index`` (negatives count from the end), in ``index``'s shape.

    >>> import tinyattn as ta
    >>> ta.take(ta.tensor([[1.0, 2.0], [3.0, 4.0]]), ta.tensor([[3, 0]]))
    tensor([[4., 1.]])
    """
    return getitem(reshape(input, -1), _integers(index, "take"))


def take_along_dim(input, indices, dim=None):
    """``gather`` along ``dim`` after ``input`` and ``indices`` broadcast over the other dimensions; with
    ``dim=None``, ``take`` on the flattened tensor.

    >>> import tinyattn as ta
    >>> x = ta.tensor([[10.0, 30.0, 20.0], [60.0, 40.0, 50.0]])
    >>> ta.take_along_dim(x, x.argmax(dim=1, keepdim=True), dim=1)
    tensor([[30.],
            [60.]])
    """
    array = _integers(indices, "take_along_dim")
    if dim is None:
        return take(input, array.reshape(-1))
    if input.ndim != array.ndim:
        raise RuntimeError(f"take_along_dim(): input and indices should have the same number of dimensions, but "
                           f"got {input.ndim} dimensions for input, and {array.ndim} dimensions for indices")
    dim = _normalize_dims(dim, input.ndim, "take_along_dim")[0]
    shape = list(np.broadcast_shapes(input.shape[:dim] + (1,) + input.shape[dim + 1:],
                                     array.shape[:dim] + (1,) + array.shape[dim + 1:]))
    input_shape, index_shape = list(shape), list(shape)
    input_shape[dim], index_shape[dim] = input.shape[dim], array.shape[dim]
    xp = backend.namespace(array)
    return gather(expand(input, *input_shape), dim, xp.broadcast_to(array, index_shape))


def masked_select(input, mask):
    """The elements of ``input`` where ``mask`` is true, the two broadcast together, as a 1-D tensor.

    >>> import tinyattn as ta
    >>> x = ta.tensor([[1.0, -2.0], [-3.0, 4.0]])
    >>> ta.masked_select(x, x > 0)
    tensor([1., 4.])
    """
    mask = _array(mask, "masked_select")
    if mask.dtype != np.bool_:
        raise RuntimeError(f"masked_select: expected BoolTensor for mask, got {mask.dtype}")
    shape = np.broadcast_shapes(input.shape, mask.shape)
    x = input if tuple(input.shape) == shape else expand(input, *shape)
    return reshape(getitem(x, backend.namespace(mask).broadcast_to(mask, shape)), -1)


def masked_scatter(input, mask, source):
    """``input`` (broadcast with ``mask``) with its elements where ``mask`` is true replaced, in order, by the
    first elements of ``source``.

    >>> import tinyattn as ta
    >>> ta.zeros(4).masked_scatter(ta.tensor([True, False, True, False]), ta.tensor([1.0, 2.0, 3.0]))
    tensor([1., 0., 2., 0.])
    """
    mask = _array(mask, "masked_scatter")
    if mask.dtype != np.bool_:
        raise RuntimeError(f"masked_scatter_: expected BoolTensor for mask, got {mask.dtype}")
    shape = np.broadcast_shapes(input.shape, mask.shape)
    x = input if tuple(input.shape) == shape else expand(input, *shape)
    xp = backend.namespace(mask)
    positions = xp.flatnonzero(xp.broadcast_to(mask, shape))  # (count,) in row-major order
    flat_source = reshape(source, -1)
    if flat_source.shape[0] < positions.size:
        raise RuntimeError(f"masked_scatter: expected source to have at least {positions.size} elements (the "
                           f"mask's true count), got {flat_source.shape[0]}")
    return _write(x, positions, _values(getitem(flat_source, slice(0, positions.size)), x, positions.shape))


# ----------------------------------------------------------------------------- views written back


def select_scatter(input, src, dim, index):
    """``input`` with its slice ``index`` along ``dim`` (``input.select(dim, index)``) replaced by ``src``.

    >>> import tinyattn as ta
    >>> ta.select_scatter(ta.zeros(2, 2), ta.ones(2), 0, 1)
    tensor([[0., 0.],
            [1., 1.]])
    """
    dim = _normalize_dims(dim, input.ndim, "select_scatter")[0]
    size = input.shape[dim]
    if not -size <= index < size:
        raise IndexError(f"select_scatter(): index {index} out of range for tensor of size {tuple(input.shape)} at "
                         f"dimension {dim}")
    positions = _positions(input, (slice(None),) * dim + (index,))
    return _write(input, positions, _values(src, input, positions.shape))


def slice_scatter(input, src, dim=0, start=None, end=None, step=1):
    """``input`` with the slice ``start:end:step`` along ``dim`` replaced by ``src``.

    >>> import tinyattn as ta
    >>> ta.slice_scatter(ta.zeros(4), ta.ones(2), start=0, step=2)
    tensor([1., 0., 1., 0.])
    """
    dim = _normalize_dims(dim, input.ndim, "slice_scatter")[0]
    positions = _positions(input, (slice(None),) * dim + (slice(start, end, step),))
    return _write(input, positions, _values(src, input, positions.shape))


def diagonal_scatter(input, src, offset=0, dim1=0, dim2=1):
    """``input`` with its diagonal (``input.diagonal(offset, dim1, dim2)``: the last dimension runs along it)
    replaced by ``src``.

    >>> import tinyattn as ta
    >>> ta.diagonal_scatter(ta.zeros(2, 3), ta.ones(2), 1)
    tensor([[0., 1., 0.],
            [0., 0., 1.]])
    """
    dim1, dim2 = _normalize_dims((dim1, dim2), input.ndim, "diagonal_scatter")
    xp = backend.namespace(input._data)
    every = xp.arange(int(np.prod(input.shape))).reshape(input.shape)
    positions = xp.diagonal(every, offset, dim1, dim2)  # (…, diagonal length)
    return _write(input, positions, _values(src, input, positions.shape))


# ----------------------------------------------------------------------------- indices, no gradient


def argwhere(input):
    """The indices of the non-zero elements, one row each: ``nonzero(input)``.

    >>> import tinyattn as ta
    >>> ta.argwhere(ta.tensor([[0.0, 1.0], [2.0, 0.0]]))
    tensor([[0, 1],
            [1, 0]])
    """
    return nonzero(input)


def nonzero_static(input, *, size, fill_value=-1):
    """``nonzero(input)`` cut or padded to ``size`` rows (padding rows hold ``fill_value``): a shape known
    before the values are.

    >>> import tinyattn as ta
    >>> ta.nonzero_static(ta.tensor([0.0, 3.0, 5.0]), size=3)
    tensor([[ 1],
            [ 2],
            [-1]])
    """
    if size < 0:
        raise RuntimeError(f"nonzero_static: 'size' must be an non-negative integer, got {size}")
    found = nonzero(input)._data  # (…batch, n, ndim)
    xp = backend.namespace(found)
    n = found.shape[-2]
    if n >= size:
        rows = found[..., :size, :]
    else:
        padding = xp.full(found.shape[:-2] + (size - n, found.shape[-1]), fill_value, dtype=found.dtype)
        rows = xp.concatenate([found, padding], axis=-2)
    return _no_grad(rows, input)


def unravel_index(indices, shape):
    """The coordinates in a tensor of ``shape`` of the flat positions ``indices``: a tuple of int64 tensors,
    one per dimension, each of ``indices``' shape. Negative positions count from the end; a position out of
    range raises (torch wraps it round silently).

    >>> import tinyattn as ta
    >>> ta.unravel_index(ta.tensor([4, 7]), (2, 4))
    (tensor([1, 1]), tensor([0, 3]))
    """
    if not isinstance(indices, Tensor):
        indices = Tensor(np.asarray(indices))
    if indices.dtype.kind not in "iu":
        raise TypeError(f"expected 'indices' to be integer dtype, but got {indices.dtype}")
    shape = (shape,) if isinstance(shape, int) else tuple(int(n) for n in shape)
    if builtins.any(n < 0 for n in shape):
        raise RuntimeError(f"'shape' cannot have negative values, but got {shape}")
    flat = indices._data.astype(np.int64)
    total = int(np.prod(shape, dtype=object))
    if flat.size and ((flat < -total).any() or (flat >= total).any()):
        raise RuntimeError(f"index out of bounds for shape {shape}: got indices in [{flat.min()}, {flat.max()}]")
    flat = flat % builtins.max(total, 1)
    coordinates = []
    for n in reversed(shape):
        coordinates.append(flat % n)
        flat = flat // n
    return tuple(_no_grad(c, indices) for c in reversed(coordinates))


# ----------------------------------------------------------------------------- in place


def scatter_add_(self, dim, index, src):
    """``scatter_add`` written into this tensor, in place.

    >>> import tinyattn as ta
    >>> ta.zeros(3).scatter_add_(0, ta.tensor([2, 2]), ta.tensor([1.0, 2.0]))
    tensor([0., 0., 3.])
    """
    return _write_in_place(self, lambda old: scatter_add(old, dim, index, src), "scatter_add_")


def scatter_reduce_(self, dim, index, src, reduce, *, include_self=True):
    """``scatter_reduce`` written into this tensor, in place.

    >>> import tinyattn as ta
    >>> ta.ones(2).scatter_reduce_(0, ta.tensor([1, 1]), ta.tensor([2.0, 3.0]), "prod")
    tensor([1., 6.])
    """
    return _write_in_place(self, lambda old: scatter_reduce(old, dim, index, src, reduce, include_self=include_self),
                           "scatter_reduce_")


def index_add_(self, dim, index, source, *, alpha=1):
    """``index_add`` written into this tensor, in place.

    >>> import tinyattn as ta
    >>> ta.zeros(2, 2).index_add_(1, ta.tensor([1]), ta.ones(2, 1))
    tensor([[0., 1.],
            [0., 1.]])
    """
    return _write_in_place(self, lambda old: index_add(old, dim, index, source, alpha=alpha), "index_add_")


def index_copy_(self, dim, index, source):
    """``index_copy`` written into this tensor, in place.

    >>> import tinyattn as ta
    >>> ta.zeros(3).index_copy_(0, ta.tensor([1]), ta.tensor([7.0]))
    tensor([0., 7., 0.])
    """
    return _write_in_place(self, lambda old: index_copy(old, dim, index, source), "index_copy_")


def index_put_(self, indices, values, accumulate=False):
    """``index_put`` written into this tensor, in place.

    >>> import tinyattn as ta
    >>> ta.zeros(3).index_put_((ta.tensor([0, 2]),), ta.tensor(5.0))
    tensor([5., 0., 5.])
    """
    return _write_in_place(self, lambda old: index_put(old, indices, values, accumulate), "index_put_")


def masked_scatter_(self, mask, source):
    """``masked_scatter`` written into this tensor, in place (``mask`` broadcasts to this tensor's shape).

    >>> import tinyattn as ta
    >>> ta.zeros(3).masked_scatter_(ta.tensor([False, True, True]), ta.tensor([1.0, 2.0]))
    tensor([0., 1., 2.])
    """
    return _write_in_place(self, lambda old: masked_scatter(old, mask, source), "masked_scatter_")


def put_(self, index, source, accumulate=False):
    """``put`` written into this tensor, in place.

    >>> import tinyattn as ta
    >>> ta.zeros(2, 2).put_(ta.tensor([1]), ta.tensor([9.0]))
    tensor([[0., 9.],
            [0., 0.]])
    """
    return _write_in_place(self, lambda old: put(old, index, source, accumulate), "put_")


# ----------------------------------------------------------------------------- tensor methods

for _name in ("scatter", "scatter_add", "scatter_reduce", "index_add", "index_copy", "index_fill", "index_select",
              "index_put", "masked_scatter", "masked_select", "take", "take_along_dim", "put", "nonzero_static",
              "argwhere", "select_scatter", "slice_scatter", "diagonal_scatter", "scatter_add_", "scatter_reduce_",
              "index_add_", "index_copy_", "index_put_", "masked_scatter_", "put_"):
    setattr(Tensor, _name, globals()[_name])
