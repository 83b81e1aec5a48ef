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

import functools
import math

import numpy as np

from .. import backend, graph, modes
from ..anomaly import detect_anomaly, is_anomaly_enabled, set_detect_anomaly
from ..creation import zeros_like
from ..engine import Function as _NativeFunction
from ..engine import (
    OnceDifferentiable,
    Tensor,
    enable_grad,
    no_grad,
)
from ..ops import TangentPack, sum_to
from . import forward_ad


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False, allow_unused=None,
         is_grads_batched=False, materialize_grads=False):
    """The gradients of ``outputs`` with respect to ``inputs``, as a tuple of tensors (PyTorch's
    ``torch.autograd.grad``). No ``.grad`` is touched.

    ``grad_outputs``: one gradient per output (``None`` for a one-element output: ones). With
    ``create_graph=True`` the gradients carry their own graph, so they can be differentiated again, to
    any order; ``retain_graph`` defaults to ``create_graph``. An input that the outputs do not depend
    on raises, unless ``allow_unused=True`` (its gradient is then ``None``, or zeros with
    ``materialize_grads=True``).

    >>> import tinyattn as ta
    >>> x = ta.tensor(2.0, requires_grad=True)
    >>> (dy,) = ta.autograd.grad(x ** 3, x, create_graph=True)    # 3x²
    >>> (d2y,) = ta.autograd.grad(dy, x)                           # 6x
    >>> dy.item(), d2y.item()
    (12.0, 12.0)
    """
    if is_grads_batched:
        raise NotImplementedError("autograd.grad: is_grads_batched=True is not supported; use ta.func.vmap")
    outputs = (outputs,) if isinstance(outputs, Tensor) else tuple(outputs)
    inputs = graph.input_tensors("autograd.grad", inputs, Tensor)
    allow_unused = materialize_grads if allow_unused is None else allow_unused
    if materialize_grads and not allow_unused:
        raise ValueError("autograd.grad: materialize_grads=True needs allow_unused=True (or left as None)")
    if grad_outputs is None or isinstance(grad_outputs, Tensor):
        grad_outputs = (grad_outputs,) * len(outputs) if grad_outputs is None else (grad_outputs,)
    grad_outputs = tuple(grad_outputs)
    if len(grad_outputs) != len(outputs):
        raise RuntimeError(f"autograd.grad: {len(grad_outputs)} grad_outputs for {len(outputs)} outputs")
    retain_graph = create_graph if retain_graph is None else retain_graph
    roots = []
    for i, (out, g) in enumerate(zip(outputs, grad_outputs)):
        if not isinstance(out, Tensor):
            raise TypeError(f"autograd.grad: outputs[{i}] is a {type(out).__name__}, expected a Tensor")
        if not out.requires_grad:
            raise RuntimeError(f"autograd.grad: outputs[{i}] (shape {out.shape}) does not require grad and has no "
                               "grad_fn: no input of its computation required grad")
        if isinstance(g, Tensor) and g._data.ndim != g.ndim:
            raise RuntimeError("autograd.grad: batched grad_outputs (inside ta.func.vmap) are not supported; use "
                               "ta.func.vjp, whose vjp_fn runs under vmap")
        roots.append((out, graph.root_gradient(f"autograd.grad: outputs[{i}]", out, g, True)))
    if not create_graph:  # the walk runs on arrays; its results become tensors at the end
        roots = [(out, g._data) for out, g in roots]
    taken = graph.walk(roots, retain_graph, create_graph, inputs)
    result = []
    for i, t in enumerate(inputs):
        g = taken.get(id(t))
        if g is None:
            if not allow_unused:
                raise RuntimeError(
                    f"autograd.grad: inputs[{i}] (shape {t.shape}) was not used to compute the outputs, so it has no "
                    "gradient; pass allow_unused=True to get None for it")
            g = Tensor._wrap(backend.namespace(t._data).zeros(t.shape, t.dtype), t) if materialize_grads else None
        elif not isinstance(g, Tensor):
            g = np.asarray(g) if isinstance(g, np.generic) else g  # (NumPy's 0-d results are scalars)
            g = Tensor._wrap(g if g.dtype == t.dtype else g.astype(t.dtype), t)
        result.append(g)
    return tuple(result)


def once_differentiable(backward):
    """Decorate a ``Function.backward`` written on arrays, or one that should not be differentiated again
    (PyTorch's ``torch.autograd.function.once_differentiable``): it runs with no graph recorded, and under
    ``create_graph`` the gradients it gives raise, naming the function, if differentiated again.

    >>> import numpy as np
    >>> import tinyattn as ta
    >>> class Exp(ta.autograd.Function):
    ...     @staticmethod
    ...     def forward(ctx, x):
    ...         ctx.result = np.exp(x.numpy())
    ...         return ta.tensor(ctx.result)
    ...
    ...     @staticmethod
    ...     @ta.autograd.once_differentiable
    ...     def backward(ctx, grad_output):
    ...         return grad_output.numpy() * ctx.result     # arrays: not differentiable again
    >>> x = ta.tensor([0.0], requires_grad=True)
    >>> Exp.apply(x).sum().backward()
    >>> x.grad
    array([1.], dtype=float32)
    """
    @functools.wraps(backward)
    def wrapper(ctx, *grads):
        with no_grad():
            return backward(ctx, *grads)
    wrapper.once_differentiable = True
    return wrapper


class FunctionCtx:
    """What ``forward`` hands to ``backward``: saved tensors and anything set as an attribute.

    ``save_for_backward(*tensors)`` and ``saved_tensors`` carry tensors (checked against in-place changes);
    ``needs_input_grad`` says which inputs want a gradient; ``mark_non_differentiable`` and
    ``set_materialize_grads`` shape what ``backward`` receives.

    >>> import tinyattn as ta
    >>> class Scale(ta.autograd.Function):
    ...     @staticmethod
    ...     def forward(ctx, x, factor):
    ...         ctx.factor = factor                 # a plain attribute, kept for backward
    ...         return x * factor
    ...
    ...     @staticmethod
    ...     def backward(ctx, grad_output):
    ...         return grad_output * ctx.factor, None
    >>> x = ta.tensor([1.0, 2.0], requires_grad=True)
    >>> Scale.apply(x, 3.0).sum().backward()
    >>> x.grad
    array([3., 3.], dtype=float32)
    """

    def save_for_backward(self, *tensors):
        self._saved = tensors
        self._saved_versions = [(t._version, t._version[0]) for t in tensors if isinstance(t, Tensor)]

    def save_for_forward(self, *tensors):
        """Tensors for ``jvp`` (forward mode), which reads them back as ``ctx.saved_tensors``, as in PyTorch."""
        self._saved_forward = tensors

    @property
    def saved_tensors(self):
        if self._in_jvp:
            return self._saved_forward
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
    """The native node ``apply`` records for one output: its backward runs the user's ``backward`` on tensors.
    Under ``create_graph`` it runs with the graph recorded, so that a backward written in tensor operations
    is differentiable again; one that gives arrays, or wears ``once_differentiable``, gives gradients that
    refuse a second differentiation, naming the function."""

    saved_inputs, saves_output, differentiable = (), False, True  # the user's ctx checks its own saved tensors

    def forward(self, *arrays, user, ctx, output):
        self.user, self.ctx = user, ctx
        return output

    def backward(self, grad):
        return self._input_grads((grad,))

    @staticmethod
    def jvp(tangents, inputs, out, user, ctx, output):  # the user's jvp(ctx, *tangents)
        return user.jvp(ctx, tangents, inputs, 1)[0]

    def _input_grads(self, grads):
        """The user's gradients as arrays, each summed back to its input's shape (a gradient of a
        broadcast shape, as PyTorch allows)."""
        on_tensors = any(isinstance(g, Tensor) for g in grads)  # create_graph: the walk hands tensors
        grads = self.user.backward(self.ctx, grads, on_tensors)
        if not on_tensors:
            return tuple(None if g is None else sum_to(g._data if isinstance(g, Tensor) else g, p.shape)
                         for g, p in zip(grads, self.parents))
        once = getattr(self.user.cls.backward, "once_differentiable", False)
        result = []
        for g, p in zip(grads, self.parents):
            if g is not None and (once or not isinstance(g, Tensor)):
                array = sum_to(g._data if isinstance(g, Tensor) else g, p.shape)
                g = OnceDifferentiable.apply(*self.parents, array=array, name=self.user.cls.__name__)
            elif g is not None:
                g = sum_to(g, p.shape)
            result.append(g)
        return tuple(result)


class OutputGradients:
    """The gradients of several outputs, by position, as they reach the node that joins them (``_Outputs``, a
    module hook's hub): summed like arrays when several arrive."""

    def __init__(self, grads):
        self.grads = grads

    def __add__(self, other):
        grads = dict(self.grads)
        for i, g in other.grads.items():
            grads[i] = g if i not in grads else grads[i] + g
        return OutputGradients(grads)


class _Outputs(_Node):
    """The native node of a ``forward`` with several outputs. Its own output is an empty array; each
    real output is a ``Pick`` of it, whose gradient comes back here as ``OutputGradients``."""

    def forward(self, *arrays, user, ctx, output):
        self.user, self.ctx, self.outputs = user, ctx, output
        return backend.namespace(output[0]).empty((0,))

    def backward(self, grads):
        xp, materialize = backend.namespace(self.outputs[0]), self.ctx._materialize_grads
        tensors = any(isinstance(g, Tensor) for g in grads.grads.values())

        def zeros(out):
            array = xp.zeros(out.shape, out.dtype)
            return Tensor._wrap(array) if tensors else array
        return self._input_grads(tuple(
            grads.grads[i] if i in grads.grads else zeros(out) if materialize else None
            for i, out in enumerate(self.outputs)))  # an output that got no gradient: zeros, or None

    @staticmethod
    def jvp(tangents, inputs, out, user, ctx, output):  # the user's tangents of the outputs, for the picks
        return TangentPack(out, user.jvp(ctx, tangents, inputs, len(output)))


class Pick(_NativeFunction):
    """Output ``index`` of a hub node (an ``_Outputs`` here, a hooked module's hub in ``nn.hooks``): its array
    passes through unchanged, and its gradient goes back to the hub as ``OutputGradients({index: grad})``."""

    saved_inputs, saves_output, differentiable = (), False, True

    def forward(self, hub, index, array):
        self.index = index
        return array

    def backward(self, grad):
        return (OutputGradients({self.index: grad}),)

    @staticmethod
    def jvp(tangents, inputs, out, index, array):
        return tangents[0].parts[index]


class Function:
    """Subclass with static ``forward(ctx, *args)`` and ``backward(ctx, *grad_outputs)``; call ``apply``.

    ``forward`` returns one tensor or a tuple of them; ``backward`` receives one gradient per output
    (zeros for an output that was not used, or that ``ctx.mark_non_differentiable`` marked) and
    returns one per argument of ``forward`` (``None`` for a non-tensor or an input that needs none).

    >>> import tinyattn as ta
    >>> class Square(ta.autograd.Function):
    ...     @staticmethod
    ...     def forward(ctx, x):
    ...         ctx.save_for_backward(x)
    ...         return x * x
    ...
    ...     @staticmethod
    ...     def backward(ctx, grad_output):
    ...         (x,) = ctx.saved_tensors
    ...         return 2 * x * grad_output
    >>> x = ta.tensor([3.0], requires_grad=True)
    >>> Square.apply(x).sum().backward()
    >>> x.grad
    array([6.], dtype=float32)
    """

    @staticmethod
    def forward(ctx, *args, **kwargs):
        raise NotImplementedError("autograd.Function subclasses define a static forward(ctx, *args)")

    @staticmethod
    def backward(ctx, *grad_outputs):
        raise NotImplementedError("autograd.Function subclasses define a static backward(ctx, *grad_outputs)")

    @staticmethod
    def jvp(ctx, *tangents):
        """Forward mode (optional): one tangent per argument of ``forward`` (``None`` for a non-tensor) →
        one per output; it reads what ``forward`` kept with ``ctx.save_for_forward`` as ``ctx.saved_tensors``."""
        raise NotImplementedError("autograd.Function subclasses define a static jvp(ctx, *tangents) for forward mode")

    @classmethod
    def apply(cls, *args, **kwargs):
        ctx = FunctionCtx()
        ctx.needs_input_grad = tuple(isinstance(a, Tensor) and a.requires_grad for a in args)
        ctx._saved, ctx._saved_versions, ctx._non_differentiable, ctx._materialize_grads = (), [], set(), True
        ctx._saved_forward, ctx._in_jvp = (), False
        # forward mode: the tangents come from the user's jvp, not from forward's operations
        seen = modes.change(seen_level=-math.inf) if modes.current().dual_levels else {}
        try:
            with no_grad():
                output = cls.forward(ctx, *args, **kwargs)
        finally:
            modes.change(**seen)
        outputs = output if isinstance(output, tuple) else (output,)
        if not outputs or not all(isinstance(o, Tensor) for o in outputs):
            kinds = ", ".join(type(o).__name__ for o in outputs) or "an empty tuple"
            raise TypeError(f"{cls.__name__}.forward must return a tensor or a tuple of tensors, got {kinds}")
        tensors = [a for a in args if isinstance(a, Tensor)]
        differentiable = [o.dtype.kind == "f" and id(o) not in ctx._non_differentiable for o in outputs]
        dual = modes.current().dual_levels and any(t._tangents for t in tensors)
        if not tensors or not (any(ctx.needs_input_grad) or dual) or not any(differentiable):
            return output
        user = _ByPosition(cls, [i for i, a in enumerate(args) if isinstance(a, Tensor)], len(args), type(outputs[0]))
        if not isinstance(output, tuple):
            return _Node.apply(*tensors, user=user, ctx=ctx, output=output._data)
        hub = _Outputs.apply(*tensors, user=user, ctx=ctx, output=tuple(o._data for o in outputs))
        return tuple(Pick.apply(hub, index=i, array=o._data) if keep else o
                     for i, (o, keep) in enumerate(zip(outputs, differentiable)))


class _ByPosition:
    """The user's ``backward`` on tensors, its gradients picked at the tensor arguments' positions."""

    def __init__(self, cls, positions, count, kind):
        self.cls, self.positions, self.count, self.kind = cls, positions, count, kind  # kind: a class, for Tensor._wrap

    def backward(self, ctx, grads, on_tensors=False):
        if on_tensors:  # create_graph: the user's backward records its graph
            with enable_grad():
                grads = self.cls.backward(ctx, *grads)
        else:
            with no_grad():
                grads = self.cls.backward(ctx, *[None if g is None else Tensor._wrap(g, self.kind) for g in grads])
        grads = grads if isinstance(grads, tuple) else (grads,)
        if len(grads) != self.count:
            raise RuntimeError(
                f"{self.cls.__name__}.backward returned {len(grads)} gradients; forward took {self.count} arguments"
            )
        return tuple(grads[i] for i in self.positions)

    def jvp(self, ctx, tangents, inputs, n_outputs):
        """The user's ``jvp(ctx, *tangents)``, given one tangent per argument (zeros for a tensor that has none,
        unless ``ctx.set_materialize_grads(False)``; ``None`` for a non-tensor), as a tuple of ``n_outputs``."""
        if self.cls.jvp is Function.jvp:
            raise RuntimeError(f"{self.cls.__name__} has no forward-mode rule: a tensor with a tangent (forward_ad) "
                               f"went into it; define a static jvp(ctx, *tangents) on {self.cls.__name__}")
        full = [None] * self.count
        for position, t, x in zip(self.positions, tangents, inputs):
            full[position] = zeros_like(x) if t is None and ctx._materialize_grads else t
        ctx._in_jvp = True
        try:
            result = self.cls.jvp(ctx, *full)
        finally:
            ctx._in_jvp = False
        result = result if isinstance(result, tuple) else (result,)
        if len(result) != n_outputs:
            raise RuntimeError(f"{self.cls.__name__}.jvp returned {len(result)} tangents; forward gave {n_outputs} "
                               "outputs")
        return result


__all__ = ["Function", "FunctionCtx", "forward_ad", "grad", "detect_anomaly", "set_detect_anomaly",
           "is_anomaly_enabled", "once_differentiable"]
