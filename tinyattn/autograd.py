"""Custom operations in PyTorch's style: ``ta.autograd.Function`` with a ``ctx``.

The native ``ta.Function`` keeps what backward needs on ``self`` and works on arrays. This one
is PyTorch's: static ``forward(ctx, *args)`` and ``backward(ctx, *grads)`` on tensors,
``ctx.save_for_backward``, ``ctx.saved_tensors``, ``ctx.needs_input_grad``, and ``apply``. Under
the hood ``apply`` records one native node whose backward calls yours.

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
        """Accepted for PyTorch code; outputs that are not floating point carry no gradient anyway."""


class _Node(_NativeFunction):
    """The native node ``apply`` records: its backward runs the user's ``backward`` on tensors."""

    saved_inputs, saves_output = (), False  # the user's ctx checks its own saved tensors

    def forward(self, *arrays, user, ctx, output):
        self.user, self.ctx = user, ctx
        return output

    def backward(self, grad):
        with no_grad():
            grads = self.user.backward(self.ctx, Tensor._wrap(grad))
        # a gradient of a broadcast shape is summed back to its input's shape, as PyTorch does
        return tuple(None if g is None else sum_to(g.data if isinstance(g, Tensor) else g, p.shape)
                     for g, p in zip(grads, self.parents))


class Function:
    """Subclass with static ``forward(ctx, *args)`` and ``backward(ctx, *grad_outputs)``; call ``apply``.

    ``backward`` returns one gradient per argument of ``forward`` (``None`` for a non-tensor or
    an input that needs none). One output tensor is supported.
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
        ctx._saved, ctx._saved_versions = (), []
        with no_grad():
            output = cls.forward(ctx, *args, **kwargs)
        if not isinstance(output, Tensor):
            raise TypeError(f"{cls.__name__}.forward must return one tensor, got {type(output).__name__}")
        tensors = [a for a in args if isinstance(a, Tensor)]
        ctx.tensor_positions = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
        if not tensors or not any(ctx.needs_input_grad) or output.dtype.kind != "f":
            return output
        return _Node.apply(*tensors, user=_ByPosition(cls, ctx.tensor_positions, len(args)), ctx=ctx,
                           output=output.data)


class _ByPosition:
    """The user's ``backward``, its gradients picked at the tensor arguments' positions."""

    def __init__(self, cls, positions, count):
        self.cls, self.positions, self.count = cls, positions, count

    def backward(self, ctx, grad):
        grads = self.cls.backward(ctx, grad)
        grads = grads if isinstance(grads, tuple) else (grads,)
        if len(grads) != self.count:
            raise RuntimeError(
                f"{self.cls.__name__}.backward returned {len(grads)} gradients; forward took {self.count} arguments"
            )
        return tuple(grads[i] for i in self.positions)


__all__ = ["Function", "FunctionCtx"]
