"""Floor 2: the engine. A tensor, the operation that made it, and the walk that gives every leaf its gradient.

A ``Tensor`` holds a backend array. An operation is a ``Function``: ``forward`` on arrays, ``backward`` on the
gradient of its output, one gradient per input. ``Function.apply`` runs ``forward`` and, when an input needs a
gradient, keeps the node in the graph: the result's ``_ctx`` is the node, and the node's ``parents`` are its
inputs. Every kept node gets the next number of one counter (``sequence``); an input exists before the node that
uses it, so a node's number is below the numbers of every node that uses its output. ``Tensor.backward()``
runs the nodes it reaches by decreasing number, taking from a heap each node that has received a gradient, hands
each one the sum of its output's gradients, and adds what reaches a leaf into its ``.grad`` (``backpropagate``): no
recursion, no visit marks, no pass over the graph first.

That is the idea, in the first part of this file. The rest: what else ``apply`` does (devices, views, in-place
version counters, tensor subclasses), the ``Tensor`` class, and the general walk's entry, for ``create_graph``
and ``inputs=`` (the walk itself is ``graph.walk``). The grad modes (``grad_mode``), hooks (``hooks``), anomaly
detection (``anomaly``) and forward mode (``forward_mode``) each have their module, below this one; the calling
thread's modes (``modes``) are read once per operation. The operators and the methods that are operations
(``+``, ``@``, ``sum``, ``reshape``…) are attached to ``Tensor`` in ``ops.py``, beside their ``Function``s.

>>> import tinyattn as ta
>>> x = ta.tensor([1.0, 2.0, 3.0], requires_grad=True)
>>> (x * x).sum().backward()
>>> x.grad
array([2., 4., 6.], dtype=float32)
"""

import heapq
import itertools
import operator
import sys

import numpy as np

from . import anomaly, backend, forward_mode, graph, hooks, modes
from .forward_mode import transforming  # noqa: F401  (re-exported: the fast floor asks it)
from .grad_mode import (  # noqa: F401  (re-exported: the engine's grad modes)
    enable_grad,
    inference_mode,
    is_grad_enabled,
    is_inference_mode_enabled,
    no_grad,
    set_grad_enabled,
)
from .graph import OUTPUT  # noqa: F401  (``Function.saved_as``'s name for the output)

_SEQUENCE = itertools.count()  # the nodes' numbers (next() on it is atomic: two threads never share one)


class Function:
    """One differentiable operation: ``forward(*arrays, **options) -> array`` (keeping on ``self`` what backward
    needs) and ``backward(grad) -> tuple``, one gradient (or ``None``) per input, of that input's shape.

    >>> import tinyattn as ta
    >>> class Double(ta.Function):
    ...     def forward(self, x): return 2 * x
    ...     def backward(self, grad): return (2 * grad,)
    >>> x = ta.tensor([1.0], requires_grad=True); Double.apply(x).backward(ta.ones(1)); x.grad
    array([2.], dtype=float32)
    """

    __slots__ = ("parents", "edges", "sequence", "released", "versions", "hooks", "__dict__")

    saved_inputs = None  # the inputs (positions) whose arrays backward reads; None: all; () for Add, a reshape
    saves_output = None  # whether backward reads the output's array (Exp); None: whether forward kept it
    is_view = False  # the output is a view of the first input's array (reshape): they share a version counter
    differentiable = False  # backward is written in operations tensors have too: create_graph records through it
    saved_as = {}  # {attribute: input position, or OUTPUT}: the arrays a differentiable backward reads as tensors

    @classmethod
    def apply(cls, *inputs, **options):
        mode = modes.current()  # the calling thread's modes: grad mode, anomaly mode, vmap, forward mode
        if mode.batching is not None:  # inside ``ta.func.vmap``: a batched input takes its batching rule
            result = mode.batching(cls, inputs, options)
            if result is not None:
                return forward_mode.with_tangents(cls, inputs, result, options) if mode.dual_levels else result
        fn = cls()
        out, like = _forward(fn, inputs, options)
        result = Tensor._wrap(out, like)
        if fn.is_view:
            result._version, result._view = inputs[0]._version, _view_record(inputs[0], cls, options)
        if mode.grad_enabled and any(map(_requires_grad, inputs)):  # the node joins the graph
            fn.parents, fn.edges = inputs, tuple([p._ctx if p._view is None else graph.view_node(p) for p in inputs])
            fn.sequence, fn.released, fn.hooks = next(_SEQUENCE), False, None
            fn.versions = _versions(fn, inputs, result)
            if mode.anomaly:
                fn.__dict__["_created_at"] = anomaly.user_frame()
            result.requires_grad, result._ctx = True, fn
        return forward_mode.with_tangents(cls, inputs, result, options) if mode.dual_levels else result

    def needs_grad(self, i):
        """Whether backward must give input ``i``'s gradient: the input requires one, and, in a walk for some
        tensors' gradients alone (``autograd.grad``), it leads to one of them."""
        needed = self.__dict__.get("needed")
        return self.parents[i].requires_grad if needed is None else needed[i]

    def needs_grads(self):
        """``needs_grad`` for every input, as a list."""
        needed = self.__dict__.get("needed")
        return list(map(_requires_grad, self.parents) if needed is None else needed)

    def release(self):
        """Drop the arrays kept for backward (after a walk without ``retain_graph``); the node stays, marked. A
        node that kept no array (an ``Add``, a reshape) stays as it is: a second walk may run it, as in PyTorch."""
        if self.saved_inputs == () and self.saves_output is not True:
            if not any(map(_holds_array, self.__dict__.values())):
                return
        self.__dict__ = {}
        self.released = True

    def backward_on_tensors(self, grad):
        """The input gradients as tensors with a graph of their own (``create_graph=True``): ``backward`` run on
        tensors where it is written for them, else the output recomputed by ``reference(*inputs)`` and
        differentiated (``recomputed``), else gradients that refuse to be differentiated again."""
        if self.differentiable:
            return type(self).backward(graph.AsTensors(self), grad)
        if hasattr(self, "reference"):
            return graph.recomputed(self, grad)
        with no_grad():
            grads = self.backward(grad._data)
        name = type(self).__name__
        return tuple(None if g is None else OnceDifferentiable.apply(grad, *self.parents, array=g, name=name)
                     for g in grads)


_requires_grad = operator.attrgetter("requires_grad")


def backpropagate(root, grad, retain_graph):
    """A plain ``backward()``'s walk (every training step's), from one node and its output's gradient (an array).
    Each node, by decreasing number, gets the sum of its output's gradients and hands one gradient to each input:
    to the input's node, summed there, or, for a leaf, into its ``.grad`` (a leaf with hooks: its sum, seen by
    its hooks, at the end). What else a walk may do (``create_graph``, ``inputs=``, NaN checks) is ``graph.walk``."""
    grads, owned, hooked = {root: grad}, set(), {}  # node -> its output's gradient so far; leaves with hooks
    waiting = [(-root.sequence, root)]  # the nodes given a gradient, by decreasing number: a node runs after every
    while waiting:                      # node made after it (its users), as in PyTorch's engine
        fn = heapq.heappop(waiting)[1]
        grad = grads.pop(fn)
        if fn.hooks is not None:
            grad = fn.hooks.run(grad)
        if fn.released:
            graph.freed(fn)
        for counter, version in fn.versions:  # was an array it saved written to since?
            if counter[0] != version:
                graph.modified(fn, counter[0], version)
        input_grads = fn.backward(grad)
        if not retain_graph:
            fn.release()
        for i, p in enumerate(fn.parents):  # (graph.hand_down's lines, written out: a call per node costs more)
            g = input_grads[i]
            if g is None:
                continue
            ctx = fn.edges[i]
            if ctx is None:  # a leaf when the node was recorded
                if p.requires_grad and p._ctx is None:
                    if p._hooks is None:
                        probe = object()  # (made after g; counted before the call: see _accumulate_leaf)
                        unshared = sys.getrefcount(g) == sys.getrefcount(probe) + 1  # (+1: input_grads)
                        _accumulate_leaf(p, g, unshared)
                    else:
                        graph.add(hooked, id(p), g, p)
            elif ctx not in grads:
                grads[ctx] = g  # may be another node's array: never written to
                heapq.heappush(waiting, (-ctx.sequence, ctx))
            elif ctx in owned:
                grads[ctx] += g  # in place (a NumPy 0-d scalar, being immutable, is replaced)
            else:
                grads[ctx] = grads[ctx] + g
                owned.add(ctx)
    for leaf, g, _ in hooked.values():
        _accumulate_leaf(leaf, leaf._hooks.run(g))  # (a hook's result: the user may hold it)


def _accumulate_leaf(t, grad, unshared=False):
    """Add ``grad`` to the leaf's ``.grad``, never writing to an array anyone else can see. The first gradient
    is copied, in the leaf's dtype, unless it is ``unshared`` and owns its memory (not a view) in the leaf's
    dtype and shape: then it is taken as it is, as PyTorch's ``AccumulateGrad`` steals a gradient no one holds.

    ``unshared`` is ``backpropagate``'s count of references, taken before the call: the array is held only by
    the walk's local name and the tuple the node's backward returned when ``sys.getrefcount`` finds it one above
    a ``probe`` object made just after it and held by a local name alone. Anything else holding it (the node
    that returned it, another input's entry, the upstream gradient it is) adds a reference, and it is copied.
    """
    data = t._data
    if t._grad is not None and t._grad_graph is not None and t._grad_graph._data is t._grad:
        t._grad = t._grad + grad  # the array is a graph's tensor's (create_graph): never written to
    elif t._grad is not None:
        t._grad += grad
    elif type(grad) is type(data) and grad.dtype == data.dtype:
        t._grad = grad if unshared and grad.base is None and grad.shape == data.shape else grad.copy()
    else:
        t._grad = backend.namespace(data).array(grad, dtype=data.dtype)


# ----------------------------------------------------------------------------- the tensor


def _documented(summary, example, result):
    """A property's docstring: its summary, and an example (one expression and its result) run as a doctest."""
    return f"{summary}\n\n>>> import tinyattn as ta\n>>> {example}\n{result}\n"


class Tensor(hooks.TensorHooks):
    """An n-dimensional array that remembers how it was computed (its gradient hooks: ``hooks.TensorHooks``).

    ``Tensor(data, requires_grad=False, dtype=None, device=None)``: Python floats become float32, a NumPy/CuPy
    array keeps its dtype, integers stay integers. ``requires_grad`` (an attribute): whether operations on it are
    recorded for its gradient.

    >>> import tinyattn as ta
    >>> ta.tensor([[1, 2]]).dtype, ta.tensor(1.5).dtype
    (dtype('int64'), dtype('float32'))
    """

    # _data, _grad: the backend array and its gradient (``data`` and ``grad`` read them; the library reads these
    #   slots, so that a subclass may give ``data``/``grad`` another face); _ctx: the node that made it, or None
    # _version: a one-element list, the count of in-place writes to the array, shared with views
    # _view: None, or (base tensor, the view operations from it, the array's version when _ctx was set) for a view
    # _hooks: None, or the ``hooks.Hooks`` of a leaf's gradient (a non-leaf's live on its node)
    # _grad_graph: after ``backward(create_graph=True)``, the tensor (with its graph) whose array is ``_grad``
    # _tangents: None, or {forward-mode level: tangent tensor} (``forward_mode``)
    __slots__ = ("_data", "_grad", "requires_grad", "_ctx", "_version", "_view", "_hooks", "_grad_graph",
                 "_tangents", "__weakref__")
    __array_ufunc__ = None  # ``ndarray + tensor`` defers to Tensor.__radd__

    def __init__(self, data, requires_grad=False, dtype=None, device=None):
        if isinstance(data, Tensor):
            data = data._data
        if backend.is_array(data):
            if device is not None and backend.device_of(data) != device:
                data = backend.to_device(data, device)
            array = data if dtype is None else data.astype(dtype, copy=False)
        else:
            try:
                host = np.asarray(data)
            except ValueError as error:  # a ragged list
                raise ValueError(f"tensor: data must be a number or a rectangular nested list, got {error}") from None
            if dtype is None and host.dtype == np.float64 and not isinstance(data, (np.ndarray, np.generic)):
                dtype = np.float32  # Python floats become float32, as in PyTorch
            host = host if dtype is None else host.astype(dtype, copy=False)
            array = backend.to_device(host, device) if (device or "cpu") != "cpu" else host
        if array.dtype.kind not in "biufc":
            raise TypeError(f"tensor: unsupported data of dtype {array.dtype}")
        if requires_grad and array.dtype.kind not in "fc":
            raise RuntimeError(f"requires_grad=True needs a floating-point tensor, got dtype {array.dtype}; "
                               "convert with .float() first (integer tensors hold indices and targets)")
        self._data, self._grad, self.requires_grad, self._ctx = array, None, bool(requires_grad), None
        self._version, self._view = [0], None
        self._hooks = self._grad_graph = self._tangents = None

    @staticmethod
    def _wrap(array, like=None):
        """A leaf tensor around a backend array (no checks, no copy), of the class ``like`` (a tensor or a tensor
        class) names in ``_result_class`` (compat's tensor names its own); a plain ``Tensor`` for ``None``. Every
        result is wrapped here, so here a NumPy scalar (NumPy's arithmetic on 0-d arrays gives one) becomes the
        0-d array it stands for: a tensor always holds an array."""
        t = Tensor.__new__(Tensor if like is None else like._result_class)
        array = np.asarray(array) if isinstance(array, np.generic) else array
        t._data, t._grad, t.requires_grad, t._ctx, t._version, t._view = array, None, False, None, [0], None
        t._hooks = t._grad_graph = t._tangents = None
        return t

    def _set_data(self, value):
        self._data = value._data if isinstance(value, Tensor) else value

    def _set_grad(self, value):
        self._grad = value._data if isinstance(value, Tensor) else value

    # (attrgetter: a property without a Python frame; ``_documented``: its docstring, whose example runs as a doctest)
    data = property(operator.attrgetter("_data"), _set_data, doc=_documented(
        "The backend array (NumPy or CuPy), shared with the tensor.", "ta.tensor([1.0, 2.0]).data",
        "array([1., 2.], dtype=float32)"))
    grad = property(operator.attrgetter("_grad"), _set_grad, doc=_documented(
        "``None``, or the accumulated gradient: a backend array of the tensor's shape and dtype.",
        "ta.tensor([1.0], requires_grad=True).grad is None", "True"))
    shape = property(operator.attrgetter("_data.shape"), doc=_documented(
        "The sizes, a tuple.", "ta.zeros(2, 3).shape", "(2, 3)"))
    ndim = property(operator.attrgetter("_data.ndim"), doc=_documented(
        "The number of axes.", "ta.zeros(2, 3).ndim", "2"))
    dtype = property(operator.attrgetter("_data.dtype"), doc=_documented(
        "The NumPy dtype of the data.", "ta.zeros(2).dtype", "dtype('float32')"))
    device = property(lambda self: backend.device_of(self._data), doc=_documented(
        "Where the data lives: ``'cpu'``, ``'cuda'`` (CuPy) or ``'strict'`` (the test backend).", "ta.zeros(2).device",
        "'cpu'"))
    is_leaf = property(lambda self: self._ctx is None, doc=_documented(
        "Whether no recorded operation made it (a leaf keeps its ``.grad``).",
        "ta.ones(2, requires_grad=True).is_leaf, (ta.ones(2, requires_grad=True) * 2).is_leaf", "(True, False)"))
    grad_fn = property(operator.attrgetter("_ctx"), doc=_documented(
        "The node that made this tensor (``None`` for a leaf).",
        "type((ta.ones(2, requires_grad=True) * 2).grad_fn).__name__", "'Mul'"))
    __hash__ = object.__hash__

    def backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None, *, grad=None):
        """Accumulate d(self)/d(leaf) · gradient into every leaf's ``.grad``.

        ``gradient`` (PyTorch's name; ``grad`` is accepted too): a tensor or array of this tensor's shape, which a
        one-element tensor may omit. ``retain_graph`` (default: ``create_graph``) keeps the saved arrays for
        another walk. ``create_graph=True`` runs every backward on tensors, recording its graph (the native
        ``.grad`` stays an array: a gradient to differentiate again comes from ``ta.autograd.grad``).
        ``inputs``: accumulate into these tensors' ``.grad`` alone (leaves or not).

        >>> import tinyattn as ta
        >>> x = ta.tensor([1.0, 2.0], requires_grad=True); (x * x).sum().backward(); x.grad
        array([2., 4.], dtype=float32)
        """
        retain_graph = create_graph if retain_graph is None else bool(retain_graph)
        if inputs is not None:
            inputs = graph.input_tensors("backward", inputs, Tensor)
        if not self.requires_grad:
            raise RuntimeError("backward() on a tensor that does not require grad: no input of its computation had "
                               "requires_grad=True (or it was computed under no_grad)")
        grad = graph.root_gradient("backward()", self, gradient if grad is None else grad, create_graph)
        if self._ctx is not None and inputs is None and not create_graph and modes.current().anomaly is not True:
            backpropagate(self._ctx, grad, retain_graph)
        else:
            graph.backward(self, grad, retain_graph, create_graph, inputs, _accumulate_leaf)

    def detach(self):
        """The same data, cut from the graph. It shares this tensor's count of in-place writes (as in PyTorch): a
        write through it is seen by any node that saved this tensor for its backward.

        >>> import tinyattn as ta
        >>> (ta.ones(2, requires_grad=True) * 2).detach().requires_grad
        False
        """
        detached = Tensor._wrap(self._data, self)
        detached._version = self._version
        return detached

    def requires_grad_(self, requires_grad=True):
        """Set ``requires_grad`` on a leaf, in place; returns the tensor.

        >>> import tinyattn as ta
        >>> ta.zeros(2).requires_grad_().requires_grad
        True
        """
        if modes.inside_transform():
            raise RuntimeError("requires_grad_() inside a function transformed by ta.func (grad, vjp, jacrev, vmap…) "
                               "is refused, as torch.func refuses it: let the transform differentiate, or call "
                               "requires_grad_() outside the function")
        if requires_grad and self.dtype.kind not in "fc":
            raise RuntimeError(f"requires_grad=True needs a floating-point tensor, got dtype {self.dtype}")
        if not requires_grad and self._ctx is not None:
            raise RuntimeError("requires_grad_(False): you can only change requires_grad flags of leaf tensors; this "
                               "one was computed by an operation. For a value outside the graph use t.detach()")
        self.requires_grad = requires_grad
        return self


Tensor._result_class = Tensor  # the class of a result computed from this tensor (see ``Tensor._wrap``)
Tensor._constant_like = None  # the kind of a constant lifted beside it (``ops._lift``); None: its own


# ----------------------------------------------------------------------------- what else apply does


def _forward(fn, inputs, options):
    """``(fn.forward on the inputs' arrays, the input whose ``_result_class`` the result takes or None)``, once the
    inputs are checked to be tensors on one device (compat's tensor names its own result class)."""
    like = None
    try:
        device = type(inputs[0]._data)
        for t in inputs:
            if type(t._data) is not device:
                raise RuntimeError(f"{type(fn).__name__.lower()}: tensors on different devices: "
                                   f"{', '.join(repr(i.device) for i in inputs)}; move them with .to(device)")
            if t._result_class is not Tensor and like is None:
                like = t
    except (IndexError, AttributeError):
        raise graph.apply_error(type(fn), inputs) from None
    try:
        out = fn.forward(*[t._data for t in inputs], **options)
    except TypeError as error:
        if graph.pytorch_style(type(fn)):
            raise graph.apply_error(type(fn), inputs) from error
        raise
    return out, like


def _versions(fn, inputs, result):
    """``(counter, version)`` for each tensor whose array ``fn``'s backward may read (in-place writes after it
    are caught by the walk, as in PyTorch)."""
    saved_inputs, saves_output = fn.saved_inputs, fn.saves_output
    if saves_output is None:  # is the output's array one of the node's attributes? (ids compared in C)
        saves_output = id(result._data) in map(id, fn.__dict__.values())
    if saved_inputs is None:
        watched = inputs
    elif saved_inputs:
        watched = [inputs[i] for i in saved_inputs]
    elif not saves_output:
        return ()  # Add, a reshape: nothing to watch
    else:
        watched = []
    versions = [(t._version, t._version[0]) for t in watched]
    if saves_output:
        versions.append((result._version, result._version[0]))
    return versions


def _view_record(source, cls, options):
    """``(base, steps, version)``: the tensor whose array a view looks into, the view operations from it, and the
    array's version now (``graph.view_node``)."""
    if source._view is None:
        return source, ((cls, options),), source._version[0]
    base, steps, _ = source._view
    return base, steps + ((cls, options),), source._version[0]


def _holds_array(value):
    """Whether ``value`` is an array or a tensor, or a tuple or list holding one (what ``release`` drops)."""
    if isinstance(value, (tuple, list)):
        return any(map(_holds_array, value))
    return hasattr(value, "shape") and hasattr(value, "dtype")


def records_graph(tensors):
    """Whether an operation on ``tensors`` is linked into the graph (``Function.apply``): gradients are enabled
    and one of them requires a gradient. A fused node may skip what only its backward needs when not."""
    return modes.current().grad_enabled and any(map(_requires_grad, tensors))


# ----------------------------------------------------------------------------- a gradient that refuses a second


class OnceDifferentiable(Function):
    """A gradient computed by a backward written on arrays (PyTorch's ``once_differentiable``): its value is
    right, and it stays in the graph only to refuse, by name, a differentiation through it."""

    saved_inputs, saves_output = (), False

    def forward(self, *inputs, array, name):
        self.name = name
        return array

    def backward(self, grad):
        raise RuntimeError(
            f"{self.name}'s backward works on arrays (it is once differentiable): the gradient it gave under "
            "create_graph=True cannot be differentiated again. Write its backward in tensor operations, or "
            "give the node a reference(*inputs) that recomputes its output from differentiable operations")
