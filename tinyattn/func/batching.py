"""``vmap``'s batching rules: how each primitive moves the batch through itself.

Inside ``vmap`` a function sees *batched* tensors: each holds the whole batch in its array, the batch's
axes in front (one per ``vmap`` level, outermost first), and shows the function only the shape of one
example (its *logical* shape). ``BatchedTensor(levels)`` is that kind of tensor, one class per tuple
of levels, with the same layout as ``Tensor``: so a batched tensor is an ordinary node of the graph,
and gradients flow through the batch as through any array.

When an operation meets a batched input, ``Function.apply`` hands it to ``apply_batched``: the
primitive's rule (``RULES``) turns the logical call into one call on whole arrays (the *physical*
call), and its result is marked batched again. The rules are few, because most primitives share one:

    elementwise   the batched inputs get their missing levels and their logical axes padded with
                  size-1 axes, so NumPy's broadcasting lines the batch up (an unbatched input
                  broadcasts over it as it is)
    reduction     ``dim`` (logical) moves past the batch axes; ``None`` means every logical axis
    shape         ``reshape``, ``expand`` and ``permute`` keep the batch axes in front
    indexing      the index gets one full slice per batch axis in front
    joining       ``cat`` and ``stack`` move ``dim`` past the batch axes, every input batched
    matmul        vectors become matrices (and back), so that the batch broadcasts as a batch

Every rule calls the same ``Function`` on the physical tensors: no loop over the batch.
"""


import math
import numbers
import weakref

import numpy as np

from .. import backend, modes
from ..distributions.distribution import LogGamma, Polygamma
from ..engine import OnceDifferentiable, Tensor
from ..inplace import SetItem
from ..nn.functional import LayerNorm, LogSoftmax, Softmax
from ..ops import (
    Abs,
    Add,
    Amax,
    Concatenate,
    Div,
    Exp,
    Expand,
    GetItem,
    Log,
    MatMul,
    Mul,
    Neg,
    NoGradElementwise,
    Permute,
    Pow,
    ReLU,
    Reshape,
    Scatter,
    Sigmoid,
    Sqrt,
    Stack,
    Sub,
    Sum,
    Tanh,
    To,
    Where,
    index_arrays,
    is_advanced_index,
)
from ..ops_extra import Clamp, Clone, Cos, Cumsum, Sin
from ..pointwise import Acos, Asin, Atan, Atan2, Erf, Erfc, Erfinv, Expm1, Log1p

# ----------------------------------------------------------------------------- batched tensors

#: The classes of batched tensors, by their levels: kept while a tensor of the class lives (a level's number is
#: never reused, so a class kept for good would be one more for every ``vmap`` call).
_CLASSES = weakref.WeakValueDictionary()


def batched_class(levels):
    """The class of the tensors batched at ``levels`` (a tuple, outermost first); ``Tensor`` for none."""
    if not levels:
        return Tensor
    cls = _CLASSES.get(levels)
    if cls is None:
        cls = _CLASSES[levels] = type(f"BatchedTensor{list(levels)}", (BatchedTensor,),
                                      {"__slots__": (), "levels": levels})
        cls._result_class = cls  # comparisons and other results wrapped from its arrays stay batched
    return cls


class BatchedTensor(Tensor):
    """A tensor that holds a batch for ``vmap``: its array is ``(*batch sizes, *shape)``; ``shape``,
    ``ndim``, ``size()`` and ``len()`` are those of one example."""

    __slots__ = ()
    levels = ()
    _constant_like = Tensor  # a number or array beside a batched tensor is one constant for every example

    shape = property(lambda self: self._data.shape[len(self.levels):])
    ndim = property(lambda self: self._data.ndim - len(self.levels))

    def numel(self):
        n = 1
        for size in self.shape:
            n *= size
        return n

    def item(self):
        raise RuntimeError("vmap: item() of a batched tensor: it holds one value per example, and a function "
                           "under vmap sees one example at a time (return the tensor instead)")

    __bool__ = __float__ = __int__ = item

    def __repr__(self):
        return f"BatchedTensor(levels={list(self.levels)}, batch={self._data.shape[:len(self.levels)]}, " \
               f"shape={self.shape})"


def levels_of(t):
    return t.levels if isinstance(t, BatchedTensor) else ()


def physical(t, levels, rank=None):
    """``t``'s array as a plain tensor in the graph (same node), with one axis per level of ``levels`` (size 1
    where ``t`` is not batched at that level) and its logical axes padded in front to ``rank``. Its tangents
    (forward mode) come along laid out the same way, so that a backward through the physical call's node
    differentiates in forward mode as well."""
    own = levels_of(t)
    if t.requires_grad and t._ctx is None:  # a leaf: its gradient must reach it, so go through a node
        alias = plain(Reshape.apply, t, shape=t._data.shape)
        alias.__class__ = Tensor  # (it took t's class)
    else:
        alias = Tensor._wrap(t._data)
        alias.requires_grad, alias._ctx, alias._version, alias._view = t.requires_grad, t._ctx, t._version, t._view
    tangents = open_tangents(t)
    if tangents:
        alias._tangents = {level: unwrap(tangent, own) for level, tangent in tangents.items()}
    logical = t._data.shape[len(own):]
    rank = len(logical) if rank is None else rank
    shape = tuple(t._data.shape[own.index(level)] if level in own else 1 for level in levels)
    shape += (1,) * (rank - len(logical)) + logical
    if shape != alias.shape:
        alias = Reshape.apply(alias, shape=shape)  # (the levels keep their order: only size-1 axes come in)
    return alias


def full(t, levels):
    """``physical(t, levels)`` with every batch axis at its full size (``cat`` and ``stack`` need them)."""
    alias = physical(t, levels)
    sizes = tuple(modes.current().vmap_sizes[level] for level in levels)
    if alias.shape[:len(levels)] != sizes:
        alias = Expand.apply(alias, shape=sizes + alias.shape[len(levels):])
    return alias


def batched(result, levels):
    """The physical ``result`` marked batched at ``levels`` (its class changed in place: same layout)."""
    if isinstance(result, Tensor) and not isinstance(result, BatchedTensor):  # (a compat operand's class too)
        result.__class__ = batched_class(levels)
    return result


def plain(op, *args, **options):
    """An operation on physical tensors, with the batching rules and forward mode out of the way (the caller
    lays out the tangents itself)."""
    saved = modes.change(batching=None, seen_level=-math.inf)
    try:
        return op(*args, **options)
    finally:
        modes.change(**saved)


def open_tangents(t):
    """``t``'s tangents at the forward-mode levels still open (a closed level's are stale: nothing reads them)."""
    if not t._tangents:
        return None
    return {level: tangent for level, tangent in t._tangents.items() if level in modes.current().dual_levels}


def _carrying_tangents(convert):
    """``convert`` (a change of how a tensor's batch is laid out) applied to the tensor's tangents too, so that
    forward mode goes through it: the result carries them, converted the same way."""
    def converted(t, levels):
        out = convert(t, levels)
        tangents = open_tangents(t)
        if tangents:
            out._tangents = {level: converted(tangent, levels) for level, tangent in tangents.items()}
        return out
    converted.__doc__, converted.__name__ = convert.__doc__, convert.__name__
    return converted


@_carrying_tangents
def unwrap(t, levels):
    """``t`` with the batch axes of ``levels`` made real, leading axes (in ``levels``' order), and batched at its
    other levels alone: how the graph walk sees a gradient. The graph's nodes are physical (their saved
    arrays hold the batch of the levels they were recorded under), so a gradient reaching them must too; a
    level the gradient has and the graph does not (``vmap`` of a ``vjp``) stays a batch level."""
    own = levels_of(t)
    order = tuple(level for level in modes.current().vmap_levels if level in own or level in levels)
    array = full(t, order) if any(level not in own for level in levels) else physical(t, order)
    rest = tuple(level for level in order if level not in levels)
    dims = [order.index(level) for level in rest] + [order.index(level) for level in levels]
    dims += list(range(len(order), array.ndim))
    if dims != list(range(array.ndim)):
        array = plain(Permute.apply, array, dims=tuple(dims))
    array.__class__ = batched_class(rest)
    return array


@_carrying_tangents
def rewrap(t, levels):
    """``unwrap``'s inverse: ``t``'s leading logical axes are the batch of ``levels``; batched at them again."""
    own = levels_of(t)
    order = tuple(level for level in modes.current().vmap_levels if level in own or level in levels)
    alias = physical(t, own)  # (*own batch, *levels batch, *rest)
    position = {level: i for i, level in enumerate(own + tuple(levels))}
    dims = [position[level] for level in order] + list(range(len(order), alias.ndim))
    if dims != list(range(alias.ndim)):
        alias = plain(Permute.apply, alias, dims=tuple(dims))
    alias.__class__ = batched_class(order)
    return alias


# ----------------------------------------------------------------------------- the rules


def _phys(t, levels, rank=None):
    """An input of the physical call: ``physical(t, …)``, or ``t`` itself when it is not batched (it broadcasts
    over the batch as it is) and carries no tangent to lay out."""
    return physical(t, levels, rank) if levels_of(t) or open_tangents(t) else t


def elementwise(cls, inputs, options, levels):
    rank = max(t.ndim for t in inputs)
    return cls.apply(*[_phys(t, levels, rank) for t in inputs], **options)


def _axes(dim, ndim, offset):
    """A logical ``dim`` (None, an int or a sequence; negatives allowed) as physical axes."""
    if dim is None or dim == () or dim == []:
        return tuple(range(offset, offset + ndim))
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    return tuple((d % max(ndim, 1)) + offset for d in dims)


def reduction(cls, inputs, options, levels):
    (x,) = inputs
    if x.ndim == 0:  # one number per example: nothing to reduce
        return physical(x, levels)
    options = dict(options, dim=_axes(options.get("dim"), x.ndim, len(levels)))
    return cls.apply(physical(x, levels), **options)


def along_dim(name):
    """The rule of an operation along one logical axis (``options[name]``: an int, or a tuple of them)."""
    def rule(cls, inputs, options, levels):
        x = inputs[0]
        axes = _axes(options[name], x.ndim, len(levels))
        options = dict(options, **{name: axes if isinstance(options[name], (tuple, list)) else axes[0]})
        return cls.apply(physical(x, levels), *[_phys(t, levels) for t in inputs[1:]], **options)
    return rule


def reshape(cls, inputs, options, levels):
    (x,) = inputs
    alias = physical(x, levels)
    return cls.apply(alias, shape=alias.shape[:len(levels)] + tuple(options["shape"]))


def permute(cls, inputs, options, levels):
    (x,) = inputs
    n = len(levels)
    return cls.apply(physical(x, levels), dims=tuple(range(n)) + tuple(d + n for d in options["dims"]))


def expand(cls, inputs, options, levels):
    (x,) = inputs
    shape = tuple(options["shape"])
    alias = physical(x, levels, rank=len(shape))
    return cls.apply(alias, shape=alias.shape[:len(levels)] + shape)


def _separated(parts):
    """The shape the index arrays broadcast to, where they are separated by a slice, ``None`` or ``...`` (NumPy
    then puts that shape first, in front of the batch); None where they stand together (or there are none).
    An integer beside an index array counts as one, as NumPy counts it."""
    if not any(is_advanced_index((p,)) for p in parts):
        return None
    advanced = [i for i, p in enumerate(parts) if is_advanced_index((p,)) or isinstance(p, numbers.Integral)]
    if advanced[-1] - advanced[0] + 1 == len(advanced):
        return None
    chosen = [p if hasattr(p, "shape") else np.asarray(p) for p in (parts[i] for i in advanced)]  # lists, ints
    shapes = [(int(backend.namespace(p).count_nonzero(p)),) if p.dtype == bool else p.shape for p in chosen]
    return _broadcast(shapes)


def _broadcast(shapes):
    rank = max(len(shape) for shape in shapes)
    padded = [(1,) * (rank - len(shape)) + tuple(shape) for shape in shapes]
    return tuple(max(sizes) if min(sizes) != 0 else 0 for sizes in zip(*padded))


def _batched_index(index, n):
    parts = index if isinstance(index, tuple) else (index,)
    if _separated(parts) is not None:
        raise RuntimeError("vmap: writing through integer arrays separated by slices is not supported inside "
                           "vmap (NumPy moves their axes in front of the batch); index in two steps")
    return (slice(None),) * n + parts


def _index_parts(index):
    return index if isinstance(index, tuple) else (index,)


def getitem(cls, inputs, options, levels):
    (x,) = inputs
    parts = _index_parts(options["index"])
    if not any(levels_of(p) for p in parts if isinstance(p, Tensor)):
        index, n = index_arrays(options["index"]), len(levels)
        front = _separated(_index_parts(index))
        if front is None:
            return cls.apply(physical(x, levels), index=_batched_index(index, n))
        # index arrays separated by a slice: NumPy puts their broadcast shape k first, before the batch, so the
        # batch dimensions are moved back to the front: (*front, *batch, *rest) → (*batch, *front, *rest)
        out = cls.apply(physical(x, levels), index=(slice(None),) * n + _index_parts(index))
        k = len(front)
        return Permute.apply(out, dims=tuple(range(k, k + n)) + tuple(range(k)) + tuple(range(k + n, out.ndim)))
    # a batched integer index (embedding's rows): each example picks from its own x, paired by an arange per level
    if not all(isinstance(p, Tensor) for p in parts):
        raise RuntimeError("vmap: a batched tensor index can stand only alone, or beside other tensor indices")
    index_rank = max(p.ndim for p in parts)
    xp = backend.namespace(x._data)
    sizes = modes.current().vmap_sizes
    pairing = tuple(xp.arange(sizes[level]).reshape((-1,) + (1,) * (len(levels) - 1 - k + index_rank))
                    for k, level in enumerate(levels))
    arrays = tuple(full(p, levels)._data if levels_of(p) else p._data for p in parts)
    return cls.apply(full(x, levels), index=pairing + arrays)


def scatter(cls, inputs, options, levels):
    (x,) = inputs
    alias = full(x, levels)
    return cls.apply(alias, shape=alias.shape[:len(levels)] + tuple(options["shape"]),
                     index=_batched_index(options["index"], len(levels)))


def joining(cls, inputs, options, levels):
    return cls.apply(*[full(t, levels) for t in inputs], dim=options["dim"] + len(levels))


def matmul(cls, inputs, options, levels):
    a, b = inputs
    a_vector, b_vector = a.ndim == 1, b.ndim == 1
    rank = max(a.ndim + a_vector, b.ndim + b_vector)

    def operand(t, vector, axis):
        if not levels_of(t) and not open_tangents(t):  # unbatched: broadcasts over the batch as it is
            return t.unsqueeze(axis) if vector else t
        alias = physical(t, levels, rank - vector)
        return Reshape.apply(alias, shape=alias.shape[:-1] + (1,) + alias.shape[-1:]) if vector and axis == -2 \
            else Reshape.apply(alias, shape=alias.shape + (1,)) if vector else alias

    out = cls.apply(operand(a, a_vector, -2), operand(b, b_vector, -1))  # (*batch, …, n, m)
    if a_vector or b_vector:
        shape = out.shape[:-2] + (() if a_vector else out.shape[-2:-1]) + (() if b_vector else out.shape[-1:])
        out = Reshape.apply(out, shape=shape)
    return out


def set_item(cls, inputs, options, levels):
    x, value = inputs
    index = _batched_index(options["index"], len(levels))
    x_alias = full(x, levels)
    if levels_of(value):
        region = x_alias._data[index].ndim - len(levels)  # the written region's logical rank
        value = physical(value, levels, region)
    return cls.apply(x_alias, value, index=index)


def no_rule(cls, inputs, options, levels):
    raise RuntimeError(f"vmap: {cls.__name__} has no batching rule (a custom Function, an in-place write "
                       "through a view, a module hook's node): call it outside vmap")


RULES = {
    **dict.fromkeys((Add, Sub, Mul, Div, Pow, Where, Neg, Exp, Log, Sqrt, Tanh, Sigmoid, ReLU, Abs, To, Sin, Cos,
                     Clamp, Clone, OnceDifferentiable, NoGradElementwise), elementwise),
    **dict.fromkeys((Erf, Erfc, Erfinv, Asin, Acos, Atan, Atan2, Log1p, Expm1), elementwise),  # pointwise's
    **dict.fromkeys((LogGamma, Polygamma), elementwise),  # the distributions' special functions
    Sum: reduction, Amax: reduction,
    Softmax: along_dim("dim"), LogSoftmax: along_dim("dim"), Cumsum: along_dim("dim"), LayerNorm: along_dim("axes"),
    Reshape: reshape, Permute: permute, Expand: expand,
    GetItem: getitem, Scatter: scatter, SetItem: set_item,
    Concatenate: joining, Stack: joining,
    MatMul: matmul,
}


def rule_of(cls):
    for klass in cls.__mro__:
        rule = RULES.get(klass)
        if rule is not None:
            return rule
    return no_rule


def apply_batched(cls, inputs, options):
    """``Function.apply``'s step inside ``vmap``: ``None`` when no input is batched at an open level, else the
    primitive's rule applied, its result marked batched at the inputs' levels. (An index's tensors count as
    inputs: ``ops.getitem`` keeps them inside vmap.)"""
    index = options.get("index") if cls is GetItem else None
    index_tensors = [p for p in _index_parts(index) if isinstance(p, Tensor)] if index is not None else []
    if index_tensors and not any(levels_of(t) for t in (*inputs, *index_tensors)):
        return cls.apply(*inputs, index=index_arrays(index))  # nothing batched: the index as arrays
    levels = ()
    for t in index_tensors:
        levels += tuple(level for level in levels_of(t) if level not in levels)
    for t in inputs:
        if isinstance(t, BatchedTensor):
            if t._data.ndim < len(t.levels):  # a number lifted beside a batched tensor took its class: a constant
                t.__class__ = Tensor
                continue
            levels += tuple(level for level in t.levels if level not in levels)
    if not levels:
        return None
    levels = tuple(level for level in modes.current().vmap_levels if level in levels)  # outermost first
    return batched(rule_of(cls)(cls, inputs, options, levels), levels)
