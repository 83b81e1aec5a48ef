"""Custom operations in PyTorch's style: ``ta.autograd.Function`` with a ``ctx``.

The native ``ta.Function`` keeps what backward needs on ``self`` and works on arrays. This one
is PyTorch's: static ``forward(ctx, *args)`` and ``backward(ctx, *grads)`` on tensors,
``ctx.save_for_backward``, ``ctx.saved_tensors``, ``ctx.needs_input_grad``, and ``apply``. Under
the hood ``apply`` records one native node whose backward calls yours. A ``forward`` that returns a
tuple of tensors gets one node for all of them and one small node per output that sends the output's
gradient to it; ``backward`` then receives one gradient per output (zeros for an output that was not
used, or marked with ``ctx.mark_non_differentiable``; ``None`` after ``ctx.set_materialize_grads(False)``).

>>> import numpy as np
>>> import tinyattn as ta
>>> class Cube(ta.autograd.Function):
...     @staticmethod
...     def forward(ctx, x):
...         ctx.save_for_backward(x)
...         return x * x * x
...
...     @staticmethod
...     def backward(ctx, grad_output):
...         (x,) = ctx.saved_tensors
...         return grad_output * 3 * x * x
>>> x = ta.tensor(np.array([1.0, -2.0]), requires_grad=True)
>>> Cube.apply(x).backward(ta.tensor(np.array([1.0, 1.0])))
>>> x.grad
array([ 3., 12.])
>>> ta.testing.gradcheck(Cube.apply, [x])
True
"""

from . import backend
from .ops import sum_to
from .tensor import Function as _NativeFunction
from .tensor import Tensor, no_grad


class FunctionCtx:
    """What ``forward`` hands to ``backward``: saved tensors and anything set as an attribute."""

    def save_for_backward(self, *tensors):
        self._saved = tensors
        self._saved_versions = [(t._version, t._version[0]) for t in tensors if isinstance(t, Tensor)]

    @property
    def saved_tensors(self):
        for counter, version in self._saved_versions:
            if counter[0] != version:
                raise RuntimeError(
                    "a tensor saved with save_for_backward was modified by an in-place operation "
                    f"(its version is now {counter[0]}, it was {version})"
                )
        return self._saved

    def mark_non_differentiable(self, *tensors):
        """These outputs get no gradient (``requires_grad=False``); ``backward`` receives zeros for them."""
        self._non_differentiable = {id(t) for t in tensors}

    def set_materialize_grads(self, value):
        """``False``: ``backward`` receives ``None`` instead of zeros for an output that got no gradient."""
        self._materialize_grads = bool(value)


class _Node(_NativeFunction):
    """The native node ``apply`` records for one output: its backward runs the user's ``backward`` on tensors."""

    saved_inputs, saves_output = (), False  # the user's ctx checks its own saved tensors

    def forward(self, *arrays, user, ctx, output):
        self.user, self.ctx = user, ctx
        return output

    def backward(self, grad):
        return self._input_grads((grad,))

    def _input_grads(self, grads):
        """The user's gradients as arrays, each summed back to its input's shape (a gradient of a
        broadcast shape, as PyTorch allows)."""
        grads = self.user.backward(self.ctx, grads)
        return tuple(None if g is None else sum_to(g._data if isinstance(g, Tensor) else g, p.shape)
                     for g, p in zip(grads, self.parents))


class _OutputGrads:
    """The gradients of several outputs, by position, as they reach ``_Outputs``: summed like arrays."""

    def __init__(self, grads):
        self.grads = grads

    def __add__(self, other):
        grads = dict(self.grads)
        for i, g in other.grads.items():
            grads[i] = g if i not in grads else grads[i] + g
        return _OutputGrads(grads)


class _Outputs(_Node):
    """The native node of a ``forward`` with several outputs. Its own output is an empty array; each
    real output is a ``_Pick`` of it, whose gradient comes back here as ``_OutputGrads``."""

    def forward(self, *arrays, user, ctx, output):
        self.user, self.ctx, self.outputs = user, ctx, output
        return backend.namespace(output[0]).empty((0,))

    def backward(self, grads):
        xp, materialize = backend.namespace(self.outputs[0]), self.ctx._materialize_grads
        return self._input_grads(tuple(
            grads.grads[i] if i in grads.grads else xp.zeros(out.shape, out.dtype) if materialize else None
            for i, out in enumerate(self.outputs)))  # an output that got no gradient: zeros, or None


class _Pick(_NativeFunction):
    """Output ``index`` of an ``_Outputs`` node."""

    saved_inputs, saves_output = (), False

    def forward(self, hub, index, array):
        self.index = index
        return array

    def backward(self, grad):
        return (_OutputGrads({self.index: grad}),)


class Function:
    """Subclass with static ``forward(ctx, *args)`` and ``backward(ctx, *grad_outputs)``; call ``apply``.

    ``forward`` returns one tensor or a tuple of them; ``backward`` receives one gradient per output
    (zeros for an output that was not used, or that ``ctx.mark_non_differentiable`` marked) and
    returns one per argument of ``forward`` (``None`` for a non-tensor or an input that needs none).
    """

    @staticmethod
    def forward(ctx, *args, **kwargs):
        raise NotImplementedError("autograd.Function subclasses define a static forward(ctx, *args)")

    @staticmethod
    def backward(ctx, *grad_outputs):
        raise NotImplementedError("autograd.Function subclasses define a static backward(ctx, *grad_outputs)")

    @classmethod
    def apply(cls, *args, **kwargs):
        ctx = FunctionCtx()
        ctx.needs_input_grad = tuple(isinstance(a, Tensor) and a.requires_grad for a in args)
        ctx._saved, ctx._saved_versions, ctx._non_differentiable, ctx._materialize_grads = (), [], set(), True
        with no_grad():
            output = cls.forward(ctx, *args, **kwargs)
        outputs = output if isinstance(output, tuple) else (output,)
        if not outputs or not all(isinstance(o, Tensor) for o in outputs):
            kinds = ", ".join(type(o).__name__ for o in outputs) or "an empty tuple"
            raise TypeError(f"{cls.__name__}.forward must return a tensor or a tuple of tensors, got {kinds}")
        tensors = [a for a in args if isinstance(a, Tensor)]
        differentiable = [o.dtype.kind == "f" and id(o) not in ctx._non_differentiable for o in outputs]
        if not tensors or not any(ctx.needs_input_grad) or not any(differentiable):
            return output
        user = _ByPosition(cls, [i for i, a in enumerate(args) if isinstance(a, Tensor)], len(args), type(outputs[0]))
        if not isinstance(output, tuple):
            return _Node.apply(*tensors, user=user, ctx=ctx, output=output._data)
        hub = _Outputs.apply(*tensors, user=user, ctx=ctx, output=tuple(o._data for o in outputs))
        return tuple(_Pick.apply(hub, index=i, array=o._data) if keep else o
                     for i, (o, keep) in enumerate(zip(outputs, differentiable)))


class _ByPosition:
    """The user's ``backward`` on tensors, its gradients picked at the tensor arguments' positions."""

    def __init__(self, cls, positions, count, kind):
        self.cls, self.positions, self.count, self.kind = cls, positions, count, kind  # kind: a class, for Tensor._wrap

    def backward(self, ctx, grads):
        with no_grad():
            grads = self.cls.backward(ctx, *[None if g is None else Tensor._wrap(g, self.kind) for g in grads])
        grads = grads if isinstance(grads, tuple) else (grads,)
        if len(grads) != self.count:
            raise RuntimeError(
                f"{self.cls.__name__}.backward returned {len(grads)} gradients; forward took {self.count} arguments"
            )
        return tuple(grads[i] for i in self.positions)


__all__ = ["Function", "FunctionCtx"]
