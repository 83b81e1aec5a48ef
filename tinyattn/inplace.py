"""In-place operations (``x[mask] = v``, ``x += y``, ``add_``, ``masked_fill_``…) under PyTorch's autograd rules.

Every in-place operation goes through ``_write``, which

1. refuses a leaf that requires grad (and a view of one) while the graph is recorded: its
   gradient would have nothing to flow into;
2. computes the new value out of place, as an ordinary differentiable operation of a copy of
   the old value (so the new node keeps what its backward needs);
3. writes it into the tensor's array, which every view of that array sees, and raises the
   array's version counter (shared by a tensor and its views): a node that saved the old
   array then refuses to run its backward instead of computing a wrong gradient;
4. moves the tensor onto the new node; a view's base is moved too (``CopySlices``), so that a
   later use of the base sees the write in its gradient as well.

>>> import tinyattn as ta
>>> x = ta.tensor([1.0, -2.0, 3.0], requires_grad=True)
>>> y = x * 2
>>> y[y < 0] = 0.0                       # differentiable, as in PyTorch
>>> y.backward(ta.ones(3))
>>> x.grad
array([2., 0., 2.], dtype=float32)
>>> e = x.exp()
>>> e += 1                               # exp saved its output for backward
>>> e.sum().backward()  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
RuntimeError: one of the arrays Exp saved for its backward was modified by an in-place operation ...
"""

import numpy as np

from . import backend, forward_mode, graph, modes
from . import checks as check
from .creation import zeros_like
from .engine import Function, Tensor, is_grad_enabled, no_grad
from .ops import _lift, index_arrays, kept_index, sum_to
from .ops_extra import clone


def _writable_copy(array):
    """A copy that can be written into (NumPy hands 0-d results over as immutable scalars)."""
    return np.array(array) if isinstance(array, np.generic) else array.copy()


class SetItem(Function):
    """``x[index] = value`` out of place: ``x``'s gradient is zero where it was overwritten,
    ``value``'s is the gradient at the written positions (summed over its broadcast)."""

    saved_inputs, saves_output, differentiable = (), False, True

    def forward(self, x, value, index):
        index = kept_index(index, x)  # (a list made an array, which release() drops after a walk)
        self.index, self.value_shape = index, value.shape
        out = x.copy()
        out[index] = value
        return out

    def backward(self, grad):
        if isinstance(grad, Tensor):  # create_graph: the same, as an operation on tensors
            zero = Tensor._wrap(backend.namespace(grad._data).zeros((), grad.dtype))
            return SetItem.apply(grad, zero, index=self.index), sum_to(grad[self.index], self.value_shape)
        grad_x = _writable_copy(grad)
        grad_x[self.index] = 0
        return grad_x, sum_to(grad[self.index], self.value_shape)

    @staticmethod
    def jvp(tangents, inputs, out, index):  # the same write, of the tangents: dx with dvalue at index
        (dx, dvalue), (x, value) = tangents, inputs
        if dx is None and dvalue is None:
            return None
        return SetItem.apply(zeros_like(x) if dx is None else dx, zeros_like(value) if dvalue is None else dvalue,
                             index=index)


def _replay(array, steps):
    """Apply a view's recorded operations (reshape, transpose, basic indexing) to another array."""
    for cls, options in steps:
        array = cls().forward(array, **options)
    return array


class CopySlices(Function):
    """A base tensor after an in-place write through one of its views: the written region's
    gradient goes to the new value, the rest to the base as it was."""

    saved_inputs, saves_output, differentiable = (), False, True

    def forward(self, base, value, steps):
        self.steps = steps
        return base  # the write already happened in the array (see ``_write``)

    def backward(self, grad):
        if isinstance(grad, Tensor):  # create_graph: zeros written through the view as a mask; the view replayed
            outside = backend.namespace(grad._data).ones(grad.shape, grad.dtype)
            _replay(outside, self.steps)[...] = 0
            value = grad
            for cls, options in self.steps:
                value = cls.apply(value, **options)
            return grad * outside, value
        grad_base = _writable_copy(grad)
        _replay(grad_base, self.steps)[...] = 0
        return grad_base, _replay(grad, self.steps).copy()

    @staticmethod
    def jvp(tangents, inputs, out, steps):  # the same write, of the tangents: a copy of dbase, dvalue written
        (dbase, dvalue), (base, value) = tangents, inputs  # through the same view of it
        if dbase is None and dvalue is None:
            return None
        tangent = zeros_like(base) if dbase is None else clone(dbase)
        view = tangent
        for cls, options in steps:
            view = cls.apply(view, **options)
        view.copy_(zeros_like(value) if dvalue is None else dvalue)
        return tangent


def _alias(t, copy):
    """A second tensor for ``t``'s value and graph position, on a copy of its array if asked."""
    old = Tensor._wrap(t._data.copy() if copy else t._data)
    old.requires_grad, old._ctx, old._tangents = t.requires_grad, t._ctx, t._tangents
    return old


def _rewritten(tangents, new):
    """A tensor's tangents after a write of ``new`` (forward mode): ``new``'s at the levels operations see
    now, the others (those of a level whose JVP rule is running) kept."""
    kept = {level: t for level, t in (tangents or {}).items() if level >= modes.current().seen_level}
    return {**kept, **(new._tangents or {})} or None


def _tangents_after(t, base, new, rewritten, view):
    """``(base's tangents, t's)`` after ``new`` was written into ``t``, a view of ``base`` (forward mode): those of
    ``rewritten`` (the base with the write: ``CopySlices``) and of ``view`` (``t`` in it). Where ``make_dual`` made
    a dual on the way from the base to ``t`` (``forward_mode.DualStep``), the dual stands for the base at its
    level, as in PyTorch: its tangent takes the write there, and the base keeps its own."""
    base_tangents, t_tangents = _rewritten(base._tangents, rewritten), _rewritten(t._tangents, view)
    marked = forward_mode.dual_step(t._view[1])
    if marked is None or marked[1] not in modes.current().dual_levels:
        return base_tangents, t_tangents
    dual, level, steps = marked
    base_tangents = _at_level(base_tangents, level, (base._tangents or {}).get(level))
    if dual is not t:  # (t the dual itself: its tangent is view's already)
        written = CopySlices.apply(_alias(dual, copy=False), new, steps=steps)
        dual._tangents = _at_level(dual._tangents, level, (written._tangents or {}).get(level))
    return base_tangents, t_tangents


def _at_level(tangents, level, tangent):
    """``tangents`` (a dict or ``None``) with ``tangent`` at ``level`` (``None``: none there)."""
    tangents = {k: v for k, v in (tangents or {}).items() if k != level}
    if tangent is not None:
        tangents[level] = tangent
    return tangents or None


def _check_writable(t, name):
    if not is_grad_enabled():
        return
    if t.requires_grad and t._ctx is None:
        raise RuntimeError(
            f"{name}: a leaf tensor that requires grad cannot be changed in place (its gradient would "
            "have nothing to flow into); do it inside `with ta.no_grad():`, or work on a clone()"
        )
    if t._view is not None:
        base = t._view[0]
        if base.requires_grad and base._ctx is None:
            raise RuntimeError(
                f"{name}: this tensor is a view of a leaf that requires grad, which cannot be changed in "
                "place; do it inside `with ta.no_grad():`, or work on a clone()"
            )


def _write(t, compute, name):
    """Replace ``t``'s value by ``compute(old value)`` in its own array (see the module docstring)."""
    _check_writable(t, name)
    recording = is_grad_enabled()
    if recording:
        if t._view is not None:
            graph.view_node(t)  # (a write through another view of its base since: t's value is made again from it)
        old = _alias(t, copy=True)
        new = compute(old)
        if old.requires_grad and not new.requires_grad:  # fill_ on a tensor in the graph: zero gradient
            everywhere = Tensor._wrap(backend.namespace(old._data).ones((), dtype=bool))
            new = new + old.masked_fill(everywhere, 0)  # (old * 0 would make an infinite element NaN)
    else:
        with no_grad():
            new = compute(t)
    if new.dtype != t.dtype:
        if not np.can_cast(new.dtype, t.dtype, "same_kind"):
            raise RuntimeError(f"{name}: the result's dtype {new.dtype} cannot be cast to the tensor's {t.dtype}")
        new = new._to_dtype(t.dtype)
    try:
        t._data[...] = new._data
    except ValueError as error:  # an expanded tensor's array is read-only
        raise RuntimeError(f"{name}: cannot write into this tensor ({error}); clone() it first") from None
    t._version[0] += 1
    base = None if t._view is None else t._view[0]
    dual = modes.current().dual_levels and (t._tangents or new._tangents or (base is not None and base._tangents))
    if not recording and not dual:
        return t
    if base is not None and (base.requires_grad or new.requires_grad or dual):
        rewritten = CopySlices.apply(_alias(base, copy=False), new, steps=t._view[1])
        view = rewritten
        for cls, options in t._view[1]:  # t becomes a view of the rewritten base again
            view = cls.apply(view, **options)
        if rewritten.requires_grad:
            base._ctx, base.requires_grad = rewritten._ctx, True
            t._ctx, t.requires_grad, t._view = view._ctx, True, (base, t._view[1], t._version[0])
        if dual:
            base._tangents, t._tangents = _tangents_after(t, base, new, rewritten, view)
    else:
        if recording:
            t._ctx, t.requires_grad = new._ctx, new.requires_grad
        if dual:
            t._tangents = _rewritten(t._tangents, new)
    return t


def rewrite(t, compute, name):
    """Replace ``t``'s value by ``compute(old)`` in place, under the rules above (a leaf that requires grad is
    refused, the version counter rises, a view's base sees the write); ``compute`` gets the old value as a
    tensor and returns a tensor of a shape that broadcasts to ``t``'s. ``name`` names the operation in errors.
    The one door through which the floors above write their own in-place operations (compat's ``exp_``…).

    >>> import tinyattn as ta
    >>> from tinyattn.inplace import rewrite
    >>> x = ta.tensor([1.0, 4.0])
    >>> rewrite(x, lambda old: old.sqrt(), "sqrt_") is x, x
    (True, tensor([1., 2.]))
    """
    return _write(t, compute, name)


def _as_value(value, like):
    return value if isinstance(value, Tensor) else _lift(value, like)


def setitem(self, index, value):
    index = index_arrays(index)
    value = _as_value(value, self)
    if value.dtype != self.dtype:
        value = value._to_dtype(self.dtype)
    _write(self, lambda old: SetItem.apply(old, value, index=index), "x[index] = value")


def _along_dim(dim, index, ndim):
    return (slice(None),) * (dim % ndim) + (index,)


def masked_fill_(self, mask, value):
    """Set the elements where ``mask`` is true to ``value``, in place (``ta.masked_fill`` written back).

    Args:
        mask: a bool tensor (or array) broadcastable to this tensor's shape.
        value: a Python number or a 0-d tensor.

    >>> import tinyattn as ta
    >>> ta.zeros(3).masked_fill_(ta.tensor([True, False, True]), -1.0)
    tensor([-1.,  0., -1.])
    """
    mask = mask if isinstance(mask, Tensor) else Tensor(mask)
    return _write(self, lambda old: old.masked_fill(mask, value), "masked_fill_")


def index_fill_(self, dim, index, value):
    """Set every slice ``index[i]`` along ``dim`` to ``value``, in place.

    Args:
        dim: the dimension the slices are taken along.
        index: the positions along ``dim``, an integer tensor or sequence.
        value: a Python number or a 0-d tensor.

    >>> import tinyattn as ta
    >>> ta.zeros(2, 3).index_fill_(1, ta.tensor([0, 2]), 1.0)
    tensor([[1., 0., 1.],
            [1., 0., 1.]])
    """
    positions = index._data if isinstance(index, Tensor) else np.asarray(index)
    value = _as_value(value, self)._to_dtype(self.dtype)
    return _write(self, lambda old: SetItem.apply(old, value, index=_along_dim(dim, positions, self.ndim)),
                  "index_fill_")


def scatter_(self, dim, index, src=None, *, value=None):
    """``self[i][index[i][j]] = src[i][j]`` (for ``dim=1``), in place; ``src`` a tensor or, as ``value``, a number.

    Args:
        dim: the dimension ``index`` points along.
        index: an integer tensor with this tensor's number of dimensions.
        src: the values to write (the part of it of ``index``'s shape); or
        value: one number written at every position ``index`` names.

    >>> import tinyattn as ta
    >>> ta.zeros(2, 3).scatter_(1, ta.tensor([[2], [0]]), ta.tensor([[5.0], [6.0]]))
    tensor([[0., 0., 5.],
            [6., 0., 0.]])
    """
    from .ops_extra import _along

    source = value if src is None else src
    positions = index._data if isinstance(index, Tensor) else index
    dim = dim % self.ndim
    if isinstance(source, Tensor):
        source = source[tuple(slice(0, n) for n in positions.shape)]  # the part of src that index covers
    source = _as_value(source, self)._to_dtype(self.dtype)
    return _write(self, lambda old: SetItem.apply(old, source, index=_along(positions, dim)), "scatter_")


def _filled(value):
    def compute(old):
        return Tensor._wrap(backend.namespace(old._data).full(old.shape, value, dtype=old.dtype))

    return compute


def fill_(self, value):
    """Set every element to ``value``, in place.

    Args:
        value: a Python number or a one-element tensor (``None`` or a string raises ``TypeError``, as in PyTorch).

    >>> import tinyattn as ta
    >>> ta.zeros(3).fill_(2)
    tensor([2., 2., 2.])
    """
    return _write(self, _filled(check.number("fill_", "value", value)), "fill_")


def zero_(self):
    """Set every element to zero, in place.

    >>> import tinyattn as ta
    >>> ta.tensor([1.0, 2.0]).zero_()
    tensor([0., 0.])
    """
    return _write(self, _filled(0), "zero_")


def copy_(self, src):
    """Copy ``src``'s values (broadcast to this shape, cast to this dtype) into this tensor.

    Args:
        src: a tensor, an array or a Python number, broadcastable to this tensor's shape.

    >>> import tinyattn as ta
    >>> ta.zeros(2, 2).copy_(ta.tensor([1.0, 2.0]))
    tensor([[1., 2.],
            [1., 2.]])
    """
    src = _as_value(src, self)
    return _write(self, lambda old: src.expand(old.shape), "copy_")


def normal_(self, mean=0.0, std=1.0):
    """Fill with draws from the normal distribution ``N(mean, std²)``, in place, from the library's generator
    (``ta.manual_seed``).

    Args:
        mean: the distribution's mean.
        std: its standard deviation.

    >>> import tinyattn as ta
    >>> _ = ta.manual_seed(0)
    >>> x = ta.zeros(1000).normal_(mean=5.0, std=0.1)
    >>> round(x.mean().item()), ta.zeros(2).normal_(mean=3.0, std=0.0)
    (5, tensor([3., 3.]))
    """
    def compute(old):
        draws = backend.random_normal(old.shape, np.dtype(np.float64), old.device)
        return Tensor._wrap((mean + std * draws).astype(old.dtype))

    return _write(self, compute, "normal_")


def uniform_(self, a=0.0, b=1.0):
    """Fill with draws from the uniform distribution on ``[a, b)``, in place, from the library's generator
    (``ta.manual_seed``).

    Args:
        a: the lower bound (included).
        b: the upper bound (excluded).

    >>> import tinyattn as ta
    >>> _ = ta.manual_seed(0)
    >>> x = ta.zeros(1000).uniform_(2.0, 3.0)
    >>> bool(((x >= 2.0) & (x < 3.0)).all())
    True
    """
    def compute(old):
        draws = backend.random_uniform(old.shape, np.dtype(np.float64), old.device)
        return Tensor._wrap((a + (b - a) * draws).astype(old.dtype))

    return _write(self, compute, "uniform_")


def add_(self, other, alpha=1):
    """``self += alpha * other``, in place, broadcasting ``other`` to this tensor's shape.

    Args:
        other: a tensor or a Python number.
        alpha: the factor ``other`` is multiplied by first.

    >>> import tinyattn as ta
    >>> ta.tensor([1.0, 2.0]).add_(1.0, alpha=2)
    tensor([3., 4.])
    """
    other = other if alpha == 1 else other * alpha
    return _write(self, lambda old: old + other, "add_")


def sub_(self, other, alpha=1):
    """``self -= alpha * other``, in place, broadcasting ``other`` to this tensor's shape.

    Args:
        other: a tensor or a Python number.
        alpha: the factor ``other`` is multiplied by first.

    >>> import tinyattn as ta
    >>> ta.tensor([3.0, 4.0]).sub_(ta.tensor([1.0, 1.0]))
    tensor([2., 3.])
    """
    other = other if alpha == 1 else other * alpha
    return _write(self, lambda old: old - other, "sub_")


def mul_(self, other):
    """``self *= other``, in place, broadcasting ``other`` to this tensor's shape.

    Args:
        other: a tensor or a Python number.

    >>> import tinyattn as ta
    >>> ta.tensor([2.0, 3.0]).mul_(2)
    tensor([4., 6.])
    """
    return _write(self, lambda old: old * other, "mul_")


def div_(self, other):
    """``self /= other`` (true division), in place, broadcasting ``other`` to this tensor's shape.

    Args:
        other: a tensor or a Python number.

    >>> import tinyattn as ta
    >>> ta.tensor([4.0, 6.0]).div_(4)
    tensor([1. , 1.5])
    """
    return _write(self, lambda old: old / other, "div_")


def clamp_(self, min=None, max=None):
    """Clamp every element into ``[min, max]``, in place (``ta.clamp`` written back).

    Args:
        min: the lower bound, or ``None`` for none.
        max: the upper bound, or ``None`` for none.

    >>> import tinyattn as ta
    >>> ta.tensor([-2.0, 0.5, 3.0]).clamp_(-1.0, 1.0)
    tensor([-1. ,  0.5,  1. ])
    """
    return _write(self, lambda old: old.clamp(min, max), "clamp_")


def _operator(op, name):
    return lambda self, other: _write(self, lambda old: op(old, other), name)


# One place where the in-place methods are attached to Tensor.
Tensor.__setitem__ = setitem
Tensor.masked_fill_, Tensor.index_fill_, Tensor.scatter_ = masked_fill_, index_fill_, scatter_
Tensor.fill_, Tensor.zero_, Tensor.copy_, Tensor.normal_, Tensor.uniform_ = fill_, zero_, copy_, normal_, uniform_
Tensor.add_, Tensor.sub_, Tensor.mul_, Tensor.div_, Tensor.clamp_ = add_, sub_, mul_, div_, clamp_
Tensor.__iadd__ = _operator(lambda a, b: a + b, "+=")
Tensor.__isub__ = _operator(lambda a, b: a - b, "-=")
Tensor.__imul__ = _operator(lambda a, b: a * b, "*=")
Tensor.__itruediv__ = _operator(lambda a, b: a / b, "/=")
