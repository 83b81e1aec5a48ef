"""Floor 3, by family: shape and view ops: moving, splitting, stacking, tiling and rolling dimensions.

Each function is composed from the primitives in ``ops`` wherever the mathematics allows, so that its
gradient, JVP, batching rule and second derivative come from theirs; a new primitive says in its docstring
why a composition would not do. Names, arguments and defaults are PyTorch's.

Four primitives carry the family: ``Reshape``, ``Permute`` and ``Expand`` (views), ``GetItem`` with basic
slices (a view) or with index arrays (a copy), and its adjoint ``Scatter``; ``Concatenate`` and ``Stack`` join.
Where PyTorch returns a view (``narrow``, ``select``, the splits, ``movedim``, ``unflatten``, ``broadcast_to``,
``meshgrid``) the result views the input here too; where PyTorch returns a new tensor (``flip``, ``roll``,
``rot90``, ``tile``, the stacks, ``diag_embed``) so does this module. ``diagonal`` and ``unfold``, views in PyTorch
(through strides NumPy's basic indexing cannot express), are copies here, picked by index arrays.

>>> import tinyattn as ta
>>> x = ta.arange(6.0).reshape(2, 3).requires_grad_()
>>> y = ta.roll(x, 1, dims=1)                 # cat of two slices
>>> y
tensor([[2., 0., 1.],
        [5., 3., 4.]], grad_fn=<Concatenate>)
>>> (y * ta.tensor([1.0, 0.0, 0.0])).sum().backward()
>>> x.grad                                     # the first column of y came from the last column of x
array([[0., 0., 1.],
       [0., 0., 1.]], dtype=float32)
"""

import builtins
import functools
import itertools
import math
import numbers

import numpy as np

from . import backend
from . import checks as check
from .engine import Tensor
from .ops import _CATEGORY, cat, expand, flatten, getitem, permute, reshape, scatter, split, stack, transpose
from .ops_extra import clone, repeat

__all__ = [
    "broadcast_to", "broadcast_tensors", "broadcast_shapes", "unflatten", "ravel", "movedim", "moveaxis", "narrow",
    "select", "unbind", "t", "flip", "fliplr", "flipud", "roll", "rot90", "split_with_sizes", "tensor_split",
    "hsplit", "vsplit", "dsplit", "atleast_1d", "atleast_2d", "atleast_3d", "hstack", "vstack", "dstack",
    "column_stack", "diagonal", "diag_embed", "diag", "diagflat", "block_diag", "meshgrid", "cartesian_prod",
    "combinations", "tile",
]


def _xp(x):
    return backend.namespace(x._data)


def _along(dim, part):
    """The index ``[:, …, :, part]`` that takes ``part`` (a slice, an integer or an index array) along ``dim``."""
    return (slice(None),) * dim + (part,)


def _tensors(name, tensors):
    """Tensors given as ``f(a, b)`` or ``f([a, b])``: (the tensors, whether they came as a sequence)."""
    many = len(tensors) != 1
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors, many = tuple(tensors[0]), True
    for i, t in enumerate(tensors):
        check.tensor(name, f"tensors[{i}]", t)
    return tuple(tensors), many


# ----------------------------------------------------------------------------- broadcasting


def broadcast_shapes(*shapes):
    """The shape that ``shapes`` broadcast to (NumPy's rule: sizes aligned from the last, each equal or 1).

    Args:
        shapes: shapes (tuples), or ints standing for 1-D shapes.

    >>> import tinyattn as ta
    >>> ta.broadcast_shapes((5, 1, 3), (4, 1), 3)
    (5, 4, 3)
    """
    sizes = [(check.integer("broadcast_shapes", "shape", s),) if isinstance(s, numbers.Integral)
             else tuple(check.integer("broadcast_shapes", "shape", n) for n in s) for s in shapes]
    for shape in sizes:
        if any(n < 0 for n in shape):
            raise RuntimeError(f"broadcast_shapes: shape {shape} has a negative size")
    try:
        return tuple(int(n) for n in np.broadcast_shapes(*sizes))
    except ValueError:
        raise RuntimeError(f"broadcast_shapes: shapes {sizes} cannot be broadcast together (aligned from the last "
                           "dimension, sizes must be equal or 1)") from None


def broadcast_to(input, size):
    """``input`` seen as ``size`` without copying (``expand``): sizes of 1 stretched, new dimensions in front.

    Args:
        input: the tensor.
        size: the target shape; -1 keeps a size.

    >>> import tinyattn as ta
    >>> ta.broadcast_to(ta.tensor([1.0, 2.0]), (2, 2))
    tensor([[1., 2.],
            [1., 2.]])
    """
    return expand(input, tuple(size))


def broadcast_tensors(*tensors):
    """The tensors expanded to their common shape (``broadcast_shapes``), as a tuple of views.

    >>> import tinyattn as ta
    >>> a, b = ta.broadcast_tensors(ta.zeros(3, 1), ta.zeros(4))
    >>> a.shape, b.shape
    ((3, 4), (3, 4))
    """
    tensors, _ = _tensors("broadcast_tensors", tensors)
    shape = broadcast_shapes(*(t.shape for t in tensors))
    return tuple(expand(t, shape) for t in tensors)


# ----------------------------------------------------------------------------- reshaping and moving dimensions


def unflatten(input, dim, sizes):
    """``input`` with dimension ``dim`` split into ``sizes`` (their product is its length; one may be -1).

    Args:
        input: the tensor.
        dim: the dimension to split.
        sizes: the new dimensions' sizes.

    >>> import tinyattn as ta
    >>> ta.zeros(2, 12).unflatten(1, (3, -1)).shape
    (2, 3, 4)
    """
    dim = check.dim("unflatten", "dim", dim, input.ndim)
    sizes = tuple(check.integer("unflatten", "sizes", n) for n in sizes)
    if not sizes:
        raise RuntimeError("unflatten: sizes must be non-empty")
    length = input.shape[dim] if input.ndim else 1
    known = math.prod(n for n in sizes if n != -1)
    if sizes.count(-1) > 1 or any(n < -1 for n in sizes):
        raise RuntimeError(f"unflatten: invalid sizes {sizes} (sizes are >= 0, or -1 once)")
    if -1 in sizes:
        if known == 0 or length % known:
            raise RuntimeError(f"unflatten: sizes {sizes} cannot split dimension {dim} of length {length}")
        sizes = tuple(length // known if n == -1 else n for n in sizes)
    elif known != length:
        raise RuntimeError(f"unflatten: sizes {sizes} multiply to {known}, dimension {dim} has length {length}")
    return reshape(input, input.shape[:dim] + sizes + input.shape[dim + 1:])


def ravel(input):
    """``input`` as one dimension (``reshape(-1)``): a view where the elements lie in order, else a copy.

    >>> import tinyattn as ta
    >>> ta.ravel(ta.tensor([[1, 2], [3, 4]]))
    tensor([1, 2, 3, 4])
    """
    return reshape(input, -1)


def _dims_of(name, arg, dims, ndim):
    dims = (dims,) if isinstance(dims, numbers.Integral) else tuple(dims)
    axes = tuple(check.dim(name, arg, d, ndim) for d in dims)
    if len(set(axes)) != len(axes):
        raise RuntimeError(f"{name}: repeated dim in `{arg}` {dims}")
    return axes


def movedim(input, source, destination):
    """``input`` with dimensions ``source`` moved to positions ``destination``, the others keeping their order.

    Args:
        input: the tensor.
        source, destination: a dim or a sequence of dims, of equal lengths.

    >>> import tinyattn as ta
    >>> ta.zeros(2, 3, 4).movedim(0, -1).shape, ta.movedim(ta.zeros(2, 3, 4), (0, 1), (2, 0)).shape
    ((3, 4, 2), (3, 4, 2))
    """
    source = _dims_of("movedim", "source", source, input.ndim)
    destination = _dims_of("movedim", "destination", destination, input.ndim)
    if len(source) != len(destination):
        raise RuntimeError(f"movedim: source {list(source)} and destination {list(destination)} must name as many "
                           "dims")
    if input.ndim == 0:
        return reshape(input, ())
    order = [None] * input.ndim
    for s, d in zip(source, destination):
        order[d] = s
    rest = iter(d for d in range(input.ndim) if d not in source)
    return permute(input, tuple(next(rest) if d is None else d for d in order))


moveaxis = movedim


def narrow(input, dim, start, length):
    """``length`` elements from ``start`` along ``dim``: a view, ``input[..., start:start + length]``.

    Args:
        input: the tensor.
        dim: the dimension.
        start: the first index (negative counts from the end; a 0-d integer tensor is taken as its value).
        length: how many elements.

    >>> import tinyattn as ta
    >>> ta.arange(6).narrow(0, 2, 3)
    tensor([2, 3, 4])
    """
    if input.ndim == 0:
        raise RuntimeError("narrow: expected a tensor of at least 1 dimension, got a 0-d tensor")
    dim = check.dim("narrow", "dim", dim, input.ndim)
    start = check.integer("narrow", "start", start.item() if isinstance(start, Tensor) else start)
    length = check.integer("narrow", "length", length)
    size = input.shape[dim]
    if not -size <= start <= size:
        raise IndexError(f"narrow: start {start} is out of range for dimension {dim} of length {size}")
    start += size if start < 0 else 0
    if length < 0 or start + length > size:
        raise RuntimeError(f"narrow: start ({start}) + length ({length}) exceeds dimension {dim}'s size ({size})")
    return getitem(input, _along(dim, slice(start, start + length)))


def select(input, dim, index):
    """The slice at ``index`` along ``dim``, that dimension removed: a view, ``input[..., index]``.

    Args:
        input: the tensor.
        dim: the dimension.
        index: the position along it (negative counts from the end).

    >>> import tinyattn as ta
    >>> ta.tensor([[1, 2], [3, 4]]).select(1, -1)
    tensor([2, 4])
    """
    if input.ndim == 0:
        raise IndexError("select: expected a tensor of at least 1 dimension, got a 0-d tensor")
    dim = check.dim("select", "dim", dim, input.ndim)
    index = check.integer("select", "index", index.item() if isinstance(index, Tensor) else index)
    size = input.shape[dim]
    if not -size <= index < size:
        raise IndexError(f"select: index {index} is out of range for dimension {dim} of length {size} (shape "
                         f"{input.shape})")
    return getitem(input, _along(dim, index))


def unbind(input, dim=0):
    """The slices along ``dim``, each without that dimension, as a tuple of views (``select`` at each index).

    Args:
        input: the tensor.
        dim: the dimension to take apart.

    >>> import tinyattn as ta
    >>> ta.tensor([[1.0, 2.0], [3.0, 4.0]]).unbind(1)
    (tensor([1., 3.]), tensor([2., 4.]))
    """
    if input.ndim == 0:
        raise IndexError("unbind: expected a tensor of at least 1 dimension, got a 0-d tensor")
    dim = check.dim("unbind", "dim", dim, input.ndim)
    return tuple(getitem(input, _along(dim, i)) for i in range(input.shape[dim]))


def t(input):
    """The transpose of a matrix; a tensor of 0 or 1 dimensions as it is (a view); more dimensions are refused.

    >>> import tinyattn as ta
    >>> ta.tensor([[1, 2, 3]]).t().shape, ta.t(ta.zeros(3)).shape
    ((3, 1), (3,))
    """
    if input.ndim > 2:
        raise RuntimeError(f"t: expected a tensor of at most 2 dimensions, got {input.ndim} (shape {input.shape}); "
                           "transpose or mT swap two of them")
    return transpose(input, 0, 1) if input.ndim == 2 else reshape(input, input.shape)


# ----------------------------------------------------------------------------- reversing and rotating


def flip(input, dims):
    """A copy of ``input`` with the elements in reverse order along each of ``dims``.

    The reversal is a view (slices with step -1); the copy makes the result a tensor of its own, as PyTorch's.

    Args:
        input: the tensor.
        dims: a dim or a sequence of distinct dims.

    >>> import tinyattn as ta
    >>> ta.tensor([[1, 2], [3, 4]]).flip(1)
    tensor([[2, 1],
            [4, 3]])
    """
    dims = _dims_of("flip", "dims", dims, input.ndim) if input.ndim else ()
    index = tuple(slice(None, None, -1) if d in dims else slice(None) for d in range(input.ndim))
    return clone(getitem(input, index))


def fliplr(input):
    """``input`` reversed left to right: along dimension 1 (at least 2 dimensions).

    >>> import tinyattn as ta
    >>> ta.tensor([[1, 2], [3, 4]]).fliplr()
    tensor([[2, 1],
            [4, 3]])
    """
    if input.ndim < 2:
        raise RuntimeError(f"fliplr: expected a tensor of at least 2 dimensions, got shape {input.shape}")
    return flip(input, 1)


def flipud(input):
    """``input`` reversed upside down: along dimension 0 (at least 1 dimension).

    >>> import tinyattn as ta
    >>> ta.tensor([[1, 2], [3, 4]]).flipud()
    tensor([[3, 4],
            [1, 2]])
    """
    if input.ndim < 1:
        raise RuntimeError("flipud: expected a tensor of at least 1 dimension, got a 0-d tensor")
    return flip(input, 0)


def roll(input, shifts, dims=None):
    """``input`` with its elements shifted ``shifts`` places along ``dims``, those falling off one end coming back at
    the other: along a dim of length ``n``, ``out[i] = input[(i - shift) mod n]``, the ``cat`` of two slices.

    Args:
        input: the tensor.
        shifts: an int or a sequence of ints, one per dim.
        dims: a dim or a sequence of dims; ``None`` rolls the flattened tensor and restores its shape.

    >>> import tinyattn as ta
    >>> ta.roll(ta.arange(5), 2)
    tensor([3, 4, 0, 1, 2])
    >>> ta.arange(6).reshape(2, 3).roll((1, -1), (0, 1))
    tensor([[4, 5, 3],
            [1, 2, 0]])
    """
    shifts = (shifts,) if isinstance(shifts, numbers.Integral) else tuple(shifts)
    shifts = tuple(check.integer("roll", "shifts", s) for s in shifts)
    if dims is None:
        if len(shifts) != 1:
            raise RuntimeError(f"roll: shifts {shifts} needs dims, one per shift (only one shift rolls the "
                               "flattened tensor)")
        return reshape(roll(flatten(input), shifts, 0), input.shape)
    dims = (dims,) if isinstance(dims, numbers.Integral) else tuple(dims)
    if len(shifts) != len(dims):
        raise RuntimeError(f"roll: shifts {shifts} and dims {dims} must have one shift per dim")
    out = input if input.ndim else reshape(input, (1,))
    for shift, dim in zip(shifts, dims):
        dim = check.dim("roll", "dims", dim, out.ndim)
        n = out.shape[dim]
        cut = n - shift % n if n else 0  # out = (input[cut:], input[:cut]) along dim
        out = cat([getitem(out, _along(dim, slice(cut, None))), getitem(out, _along(dim, slice(0, cut)))], dim)
    return out if input.ndim else reshape(out, ())


def rot90(input, k=1, dims=(0, 1)):
    """``input`` rotated by ``k`` quarter turns in the plane of ``dims``, from the first dim towards the second:
    one turn is a flip along ``dims[1]`` then a transpose; two turns flip both; three flip ``dims[0]`` then
    transpose; none copies.

    Args:
        input: a tensor of at least 2 dimensions.
        k: the number of quarter turns (negative turns the other way).
        dims: the two dims of the plane.

    >>> import tinyattn as ta
    >>> ta.tensor([[1, 2], [3, 4]]).rot90()
    tensor([[2, 4],
            [1, 3]])
    """
    dims = tuple(dims)
    if len(dims) != 2:
        raise RuntimeError(f"rot90: expected two dims (the plane of rotation), got {dims}")
    if input.ndim < 2:
        raise RuntimeError(f"rot90: expected a tensor of at least 2 dimensions, got shape {input.shape}")
    first, second = (check.dim("rot90", "dims", d, input.ndim) for d in dims)
    if first == second:
        raise RuntimeError(f"rot90: dims {dims} name the same dimension twice")
    turns = check.integer("rot90", "k", k) % 4
    if turns == 1:
        return transpose(flip(input, second), first, second)
    if turns == 2:
        return flip(input, (first, second))
    if turns == 3:
        return transpose(flip(input, first), first, second)
    return clone(input)


# ----------------------------------------------------------------------------- splitting


def split_with_sizes(input, split_sizes, dim=0):
    """Pieces of ``input`` along ``dim`` of the listed sizes (they add up to its length), as views.

    Args:
        input: the tensor.
        split_sizes: the pieces' sizes.
        dim: the dimension to split.

    >>> import tinyattn as ta
    >>> ta.arange(5).split_with_sizes([2, 3])
    (tensor([0, 1]), tensor([2, 3, 4]))
    """
    return split(input, list(split_sizes), dim)


def tensor_split(input, indices_or_sections, dim=0):
    """Pieces of ``input`` along ``dim``, as views: ``n`` sections (the first ``length % n`` one element longer),
    or cut before each of the listed indices (``input[:i0], input[i0:i1], …, input[ik:]``, Python's slicing).

    Args:
        input: a tensor of at least one dimension.
        indices_or_sections: an int (the number of sections), a sequence of indices, or an integer tensor
            (0-d: sections; 1-D: indices).
        dim: the dimension to split.

    >>> import tinyattn as ta
    >>> ta.arange(7).tensor_split(3)
    (tensor([0, 1, 2]), tensor([3, 4]), tensor([5, 6]))
    >>> ta.arange(7).tensor_split([1, 5])
    (tensor([0]), tensor([1, 2, 3, 4]), tensor([5, 6]))
    """
    if input.ndim == 0:
        raise RuntimeError("tensor_split: expected a tensor of at least 1 dimension, got a 0-d tensor")
    dim = check.dim("tensor_split", "dim", dim, input.ndim)
    if isinstance(indices_or_sections, Tensor):
        if indices_or_sections.dtype.kind not in "iu" or indices_or_sections.ndim > 1:
            raise RuntimeError("tensor_split: expected indices_or_sections as a 0-d or 1-D tensor of integers, "
                               f"got dtype {indices_or_sections.dtype} "
                               f"and {indices_or_sections.ndim} dimension(s)")
        indices_or_sections = indices_or_sections.tolist()
    length = input.shape[dim]
    if isinstance(indices_or_sections, numbers.Integral):
        sections = check.integer("tensor_split", "sections", indices_or_sections)
        if sections <= 0:
            raise RuntimeError(f"tensor_split: the number of sections must be positive, got {sections}")
        size, longer = divmod(length, sections)
        indices = list(itertools.accumulate([size + 1] * longer + [size] * (sections - longer)))[:-1]
    else:
        indices = [check.integer("tensor_split", "indices", i) for i in indices_or_sections]
    starts, stops = [0, *indices], [*indices, None]
    return tuple(getitem(input, _along(dim, slice(start, stop))) for start, stop in zip(starts, stops))


def _split_along(name, input, indices_or_sections, dim, min_ndim):
    if input.ndim < min_ndim:
        raise RuntimeError(f"{name}: expected a tensor of at least {min_ndim} dimension(s), got shape {input.shape}")
    if isinstance(indices_or_sections, numbers.Integral):
        sections = check.integer(name, "sections", indices_or_sections)
        if sections == 0 or input.shape[dim] % sections:
            raise RuntimeError(f"{name}: {sections} sections do not divide dimension {dim} of length "
                               f"{input.shape[dim]} evenly (tensor_split allows uneven ones)")
    return tensor_split(input, indices_or_sections, dim)


def hsplit(input, indices_or_sections):
    """``tensor_split`` along dimension 1 (0 for a 1-D tensor); a number of sections must divide its length.

    >>> import tinyattn as ta
    >>> [p.shape for p in ta.zeros(2, 6).hsplit(3)]
    [(2, 2), (2, 2), (2, 2)]
    """
    return _split_along("hsplit", input, indices_or_sections, 1 if input.ndim > 1 else 0, 1)


def vsplit(input, indices_or_sections):
    """``tensor_split`` along dimension 0 (at least 2 dimensions); a number of sections must divide its length.

    >>> import tinyattn as ta
    >>> [p.shape for p in ta.zeros(6, 2).vsplit([1, 4])]
    [(1, 2), (3, 2), (2, 2)]
    """
    return _split_along("vsplit", input, indices_or_sections, 0, 2)


def dsplit(input, indices_or_sections):
    """``tensor_split`` along dimension 2 (at least 3 dimensions); a number of sections must divide its length.

    >>> import tinyattn as ta
    >>> [p.shape for p in ta.zeros(1, 2, 4).dsplit(2)]
    [(1, 2, 2), (1, 2, 2)]
    """
    return _split_along("dsplit", input, indices_or_sections, 2, 3)


# ----------------------------------------------------------------------------- at least n dimensions, and stacking


def _at_least(name, tensors, view):
    tensors, many = _tensors(name, tensors)
    out = tuple(view(t) for t in tensors)
    return out if many else out[0]


def _1d(t):
    return reshape(t, (1,)) if t.ndim == 0 else t


def _2d(t):
    return reshape(t, (1,) * (2 - t.ndim) + t.shape) if t.ndim < 2 else t


def _3d(t):
    if t.ndim == 0:
        return reshape(t, (1, 1, 1))
    if t.ndim == 1:
        return reshape(t, (1, t.shape[0], 1))  # (n,) → (1, n, 1), as NumPy's atleast_3d
    return reshape(t, t.shape + (1,)) if t.ndim == 2 else t


def atleast_1d(*tensors):
    """Each tensor with at least one dimension (a 0-d tensor becomes ``(1,)``; others as they are).

    One tensor gives a tensor; several (or a list) give a tuple.

    >>> import tinyattn as ta
    >>> ta.atleast_1d(ta.tensor(2.0))
    tensor([2.])
    """
    return _at_least("atleast_1d", tensors, _1d)


def atleast_2d(*tensors):
    """Each tensor with at least two dimensions: ``()`` → ``(1, 1)``, ``(n,)`` → ``(1, n)``.

    One tensor gives a tensor; several (or a list) give a tuple.

    >>> import tinyattn as ta
    >>> ta.atleast_2d(ta.zeros(3)).shape
    (1, 3)
    """
    return _at_least("atleast_2d", tensors, _2d)


def atleast_3d(*tensors):
    """Each tensor with at least three dimensions: ``()`` → ``(1, 1, 1)``, ``(n,)`` → ``(1, n, 1)``,
    ``(m, n)`` → ``(m, n, 1)``.

    One tensor gives a tensor; several (or a list) give a tuple.

    >>> import tinyattn as ta
    >>> ta.atleast_3d(ta.zeros(3)).shape, ta.atleast_3d(ta.zeros(2, 3)).shape
    ((1, 3, 1), (2, 3, 1))
    """
    return _at_least("atleast_3d", tensors, _3d)


def hstack(tensors):
    """The tensors joined horizontally: along dimension 1, or 0 for 1-D tensors (0-d ones count as 1-D).

    >>> import tinyattn as ta
    >>> ta.hstack([ta.tensor([1, 2]), ta.tensor([3])])
    tensor([1, 2, 3])
    """
    tensors = [_1d(t) for t in _tensors("hstack", (tensors,))[0]]
    return cat(tensors, 0 if tensors and tensors[0].ndim == 1 else 1)


def vstack(tensors):
    """The tensors joined vertically: along dimension 0, each made at least 2-D first (``(n,)`` → ``(1, n)``).

    >>> import tinyattn as ta
    >>> ta.vstack([ta.tensor([1, 2]), ta.tensor([3, 4])])
    tensor([[1, 2],
            [3, 4]])
    """
    return cat([_2d(t) for t in _tensors("vstack", (tensors,))[0]], 0)


def dstack(tensors):
    """The tensors joined in depth: along dimension 2, each made at least 3-D first (``atleast_3d``).

    >>> import tinyattn as ta
    >>> ta.dstack([ta.tensor([1, 2]), ta.tensor([3, 4])])
    tensor([[[1, 3],
             [2, 4]]])
    """
    return cat([_3d(t) for t in _tensors("dstack", (tensors,))[0]], 2)


def column_stack(tensors):
    """The tensors side by side as columns: 0-d and 1-D tensors become columns ``(n, 1)``, then ``cat`` along 1.

    >>> import tinyattn as ta
    >>> ta.column_stack([ta.tensor([1, 2]), ta.tensor([[3, 4], [5, 6]])])
    tensor([[1, 3, 4],
            [2, 5, 6]])
    """
    columns = [reshape(t, (t.numel(), 1)) if t.ndim <= 1 else t for t in _tensors("column_stack", (tensors,))[0]]
    return cat(columns, 1)


# ----------------------------------------------------------------------------- diagonals


def _diagonal_positions(xp, rows, cols, offset):
    """The (row, column) index arrays of diagonal ``offset`` of a ``rows × cols`` matrix (above the main one when
    positive, below when negative)."""
    length = builtins.max(0, builtins.min(rows + builtins.min(offset, 0), cols - builtins.max(offset, 0)))
    steps = xp.arange(length)
    return steps + builtins.max(-offset, 0), steps + builtins.max(offset, 0)


def diagonal(input, offset=0, dim1=0, dim2=1):
    """The elements ``input[…, i, i + offset]`` of the matrices in the plane of ``dim1`` (rows) and ``dim2``
    (columns), along a new last dimension; a copy (picked by index arrays), where PyTorch returns a view.

    Args:
        input: a tensor of at least 2 dimensions.
        offset: 0 for the main diagonal, positive above it, negative below.
        dim1, dim2: the plane's dimensions.

    >>> import tinyattn as ta
    >>> x = ta.arange(9).reshape(3, 3)
    >>> x.diagonal(), x.diagonal(1), ta.diagonal(x, -1)
    (tensor([0, 4, 8]), tensor([1, 5]), tensor([3, 7]))
    """
    return _diagonal_of(input, offset, dim1, dim2)


def _diagonal_of(input, offset, dim1, dim2):
    if input.ndim < 2:
        raise RuntimeError(f"diagonal: expected a tensor of at least 2 dimensions, got {input.ndim}")
    dim1, dim2 = check.dim("diagonal", "dim1", dim1, input.ndim), check.dim("diagonal", "dim2", dim2, input.ndim)
    if dim1 == dim2:
        raise RuntimeError(f"diagonal: dim1 and dim2 are both dimension {dim1}; a diagonal needs two")
    matrices = movedim(input, (dim1, dim2), (-2, -1))  # (…, rows, cols)
    rows, cols = _diagonal_positions(_xp(input), *matrices.shape[-2:], offset)
    return getitem(matrices, (Ellipsis, rows, cols))  # (…, length)


def diag_embed(input, offset=0, dim1=-2, dim2=-1):
    """Matrices with the last dimension of ``input`` on their diagonal ``offset`` and zeros elsewhere, in the
    plane of the result's ``dim1`` (rows) and ``dim2`` (columns): ``out[…, i, i + offset] = input[…, i]``,
    a ``scatter`` of ``input`` into zeros of size ``n + |offset|`` square.

    Args:
        input: a tensor of at least 1 dimension.
        offset: 0 for the main diagonal, positive above it, negative below.
        dim1, dim2: the new matrices' dimensions among the result's (one more than the input's).

    >>> import tinyattn as ta
    >>> ta.diag_embed(ta.tensor([1, 2]), offset=1)
    tensor([[0, 1, 0],
            [0, 0, 2],
            [0, 0, 0]])
    """
    if input.ndim < 1:
        raise RuntimeError("diag_embed: expected a tensor of at least 1 dimension, got a 0-d tensor")
    dim1, dim2 = check.dim("diag_embed", "dim1", dim1, input.ndim + 1), check.dim("diag_embed", "dim2", dim2,
                                                                                  input.ndim + 1)
    if dim1 == dim2:
        raise RuntimeError(f"diag_embed: dim1 and dim2 are both dimension {dim1}; a diagonal needs two")
    size = input.shape[-1] + builtins.abs(offset)
    rows, cols = _diagonal_positions(_xp(input), size, size, offset)
    matrices = scatter(input, input.shape[:-1] + (size, size), (Ellipsis, rows, cols))  # (…, size, size)
    return movedim(matrices, (-2, -1), (dim1, dim2))


def diag(input, diagonal=0):
    """A 1-D ``input`` as the diagonal ``diagonal`` of a square matrix (``diag_embed``), or the diagonal of a
    2-D ``input`` (a copy of ``ta.diagonal``).

    Args:
        input: a 1-D or 2-D tensor.
        diagonal: 0 for the main diagonal, positive above it, negative below.

    >>> import tinyattn as ta
    >>> ta.diag(ta.tensor([1, 2]))
    tensor([[1, 0],
            [0, 2]])
    >>> ta.diag(ta.tensor([[1, 2], [3, 4]]), 1)
    tensor([2])
    """
    if input.ndim == 1:
        return diag_embed(input, diagonal)
    if input.ndim == 2:
        return _diagonal_of(input, diagonal, 0, 1)
    raise RuntimeError(f"diag: expected a 1-D or 2-D tensor, got shape {input.shape}")


def diagflat(input, offset=0):
    """The flattened ``input`` as the diagonal ``offset`` of a square matrix.

    >>> import tinyattn as ta
    >>> ta.diagflat(ta.tensor([[1, 2], [3, 4]])).shape
    (4, 4)
    """
    return diag_embed(flatten(input), offset)


def block_diag(*tensors):
    """The tensors as blocks along the diagonal of one matrix, zeros elsewhere: 0-d tensors as ``(1, 1)``,
    1-D ones as rows ``(1, n)``. Each block is scattered into a band of zeros as wide as the result, and the
    bands are joined along dimension 0.

    >>> import tinyattn as ta
    >>> ta.block_diag(ta.tensor([[1, 2]]), ta.tensor(3))
    tensor([[1, 2, 0],
            [0, 0, 3]])
    """
    tensors, _ = _tensors("block_diag", tensors)
    blocks = []
    for i, t in enumerate(tensors):
        if t.ndim > 2:
            raise RuntimeError(f"block_diag: expected tensors of at most 2 dimensions, tensors[{i}] has shape "
                               f"{t.shape}")
        blocks.append(_2d(t))
    if not blocks:
        return Tensor(np.zeros((1, 0), dtype=np.float32))
    # PyTorch's promotion: the highest category (bool < integer < float) wins, then the widest dtype within it
    highest = builtins.max(_CATEGORY[b.dtype.kind] for b in blocks)
    dtype = functools.reduce(np.promote_types, (b.dtype for b in blocks if _CATEGORY[b.dtype.kind] == highest))
    width, start, bands = builtins.sum(b.shape[1] for b in blocks), 0, []
    for block in blocks:
        rows, cols = block.shape
        bands.append(scatter(block.to(dtype), (rows, width), (slice(None), slice(start, start + cols))))
        start += cols
    return cat(bands, 0)  # (Σ rows, Σ cols)


# ----------------------------------------------------------------------------- grids and products of sets


def meshgrid(*tensors, indexing="ij"):
    """Coordinate grids: for ``N`` tensors of sizes ``n_0 … n_{N-1}`` (0-d or 1-D), ``N`` tensors of shape
    ``(n_0, …, n_{N-1})``, the ``i``-th holding ``tensors[i]`` along dimension ``i`` (views, by ``expand``).
    ``indexing="xy"`` swaps the first two dimensions (NumPy's and MATLAB's Cartesian order).

    Args:
        tensors: the tensors, as ``meshgrid(a, b)`` or ``meshgrid([a, b])``.
        indexing: ``"ij"`` (matrix order) or ``"xy"``.

    >>> import tinyattn as ta
    >>> rows, cols = ta.meshgrid(ta.tensor([1, 2]), ta.tensor([3, 4, 5]), indexing="ij")
    >>> rows.shape, cols[0]
    ((2, 3), tensor([3, 4, 5]))
    """
    tensors, _ = _tensors("meshgrid", tensors)
    if indexing not in ("ij", "xy"):
        raise ValueError(f"meshgrid: indexing must be \"ij\" or \"xy\", got {indexing!r}")
    for t in tensors:
        if t.ndim > 1:
            raise RuntimeError(f"meshgrid: expected 0-d or 1-D tensors, got shape {t.shape}")
    axes = list(range(len(tensors)))
    if indexing == "xy" and len(tensors) > 1:
        axes[0], axes[1] = 1, 0
    shape = [0] * len(tensors)
    for t, axis in zip(tensors, axes):
        shape[axis] = t.numel()
    grids = []
    for t, axis in zip(tensors, axes):
        line = reshape(t, tuple(shape[axis] if k == axis else 1 for k in range(len(tensors))))  # (1, …, n, …, 1)
        grids.append(expand(line, tuple(shape)))
    return tuple(grids)


def cartesian_prod(*tensors):
    """Every tuple of the 1-D tensors' elements, in order (``itertools.product``): ``(Π n_i, N)``, the grids of
    ``meshgrid`` flattened and stacked as columns. One tensor is returned as it is.

    >>> import tinyattn as ta
    >>> ta.cartesian_prod(ta.tensor([1, 2]), ta.tensor([3, 4]))
    tensor([[1, 3],
            [1, 4],
            [2, 3],
            [2, 4]])
    """
    tensors, _ = _tensors("cartesian_prod", tensors)
    for t in tensors:
        if t.ndim != 1:
            raise RuntimeError(f"cartesian_prod: expected 1-D tensors, got shape {t.shape}")
    if len(tensors) == 1:
        return tensors[0]
    return stack([reshape(grid, (-1,)) for grid in meshgrid(*tensors, indexing="ij")], 1)


def combinations(input, r=2, with_replacement=False):
    """The ``r``-element combinations of a 1-D tensor's elements, in order (``itertools.combinations``, or
    ``combinations_with_replacement``), as the rows of a ``(count, r)`` tensor picked by one index array.

    Args:
        input: a 1-D tensor.
        r: the number of elements in each combination.
        with_replacement: whether an element may repeat within a combination.

    >>> import tinyattn as ta
    >>> ta.combinations(ta.tensor([1, 2, 3]))
    tensor([[1, 2],
            [1, 3],
            [2, 3]])
    """
    if input.ndim != 1:
        raise RuntimeError(f"combinations: expected a 1-D tensor, got shape {input.shape}")
    r = check.integer("combinations", "r", r)
    if r < 0:
        raise RuntimeError(f"combinations: r must be non-negative, got {r}")
    if r == 0:
        return getitem(input, (_xp(input).arange(0),))  # (0,): torch's empty result
    pick = itertools.combinations_with_replacement if with_replacement else itertools.combinations
    index = np.array(list(pick(range(input.shape[0]), r)), dtype=np.intp).reshape(-1, r)  # (count, r)
    return getitem(input, (_xp(input).asarray(index),))


# ----------------------------------------------------------------------------- tiling and sliding windows


def tile(input, dims):
    """``input`` repeated ``dims[i]`` times along each dimension; fewer ``dims`` than dimensions are padded with
    1s in front (NumPy's ``tile``), more add leading dimensions (``repeat``).

    Args:
        input: the tensor.
        dims: the number of repetitions per dimension.

    >>> import tinyattn as ta
    >>> ta.tensor([[1, 2]]).tile((2,))
    tensor([[1, 2, 1, 2]])
    """
    dims = (dims,) if isinstance(dims, numbers.Integral) else tuple(dims)
    return repeat(input, (1,) * (input.ndim - len(dims)) + dims)


def unfold(self, dimension, size, step):
    """Every window of ``size`` elements along ``dimension``, ``step`` apart, in a new last dimension: windows
    ``(length - size) // step + 1`` take the place of ``dimension``. PyTorch's ``Tensor.unfold`` (a strided view
    there; here a copy, picked by one index array ``[i·step + j]`` of shape ``(windows, size)``).

    Args:
        dimension: the dimension to slide along.
        size: each window's length.
        step: the distance between the starts of two windows.

    >>> import tinyattn as ta
    >>> ta.arange(5).unfold(0, 2, 1)
    tensor([[0, 1],
            [1, 2],
            [2, 3],
            [3, 4]])
    """
    dim = check.dim("unfold", "dimension", dimension, self.ndim)
    size, step = check.size("unfold", "size", size), check.integer("unfold", "step", step)
    length = self.shape[dim] if self.ndim else 1
    if size > length:
        raise RuntimeError(f"unfold: size {size} is longer than dimension {dim} ({length})")
    if step <= 0:
        raise RuntimeError(f"unfold: step must be positive, got {step}")
    xp = _xp(self)
    if self.ndim == 0:
        return getitem(reshape(self, (1,)), (xp.arange(size),))  # (size,)
    windows = (length - size) // step + 1
    starts = xp.arange(windows).reshape(-1, 1) * step
    out = getitem(self, _along(dim, starts + xp.arange(size)))  # (…, windows, size, …)
    return movedim(out, dim + 1, -1)  # (…, windows, …, size)


Tensor.broadcast_to, Tensor.unflatten, Tensor.ravel, Tensor.movedim = broadcast_to, unflatten, ravel, movedim
Tensor.moveaxis, Tensor.narrow, Tensor.select, Tensor.unbind, Tensor.t = moveaxis, narrow, select, unbind, t
Tensor.flip, Tensor.fliplr, Tensor.flipud, Tensor.roll, Tensor.rot90 = flip, fliplr, flipud, roll, rot90
Tensor.split_with_sizes, Tensor.tensor_split = split_with_sizes, tensor_split
Tensor.hsplit, Tensor.vsplit, Tensor.dsplit = hsplit, vsplit, dsplit
Tensor.diagonal, Tensor.diag_embed, Tensor.diag, Tensor.diagflat = diagonal, diag_embed, diag, diagflat
Tensor.tile, Tensor.unfold = tile, unfold
