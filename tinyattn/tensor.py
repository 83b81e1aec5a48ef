"""Floor 2: the Tensor, the operation node, and the reverse-mode graph walk.

A ``Tensor`` holds a backend array (``.data``) and, when it was made by an operation
that needs a gradient, a reference to that operation (``._ctx``), a ``Function``
instance which keeps its inputs (``parents``) and whatever its backward needs.

``backward()`` orders the graph topologically without recursion, walks it from the
output to the leaves, and hands each node the gradient of its output; the node returns
one gradient per input. Unless ``retain_graph=True``, each node drops its saved arrays
as soon as it has run, so a second walk through it raises a ``RuntimeError``.

The arithmetic operators (``+ - * / ** @``, comparisons, indexing) and the methods that are
operations (``sum``, ``exp``, ``reshape``, ``masked_fill``…) are attached to ``Tensor`` at the
end of ``ops.py``, beside the ``Function``s they call; this file holds only what a tensor is.

Two extension points, for the floors above, and nothing else of theirs:

- ``LEAF_ACCUMULATOR``: how a leaf takes its gradient (``_accumulate_leaf``: a copy, then ``+=``), one
  slot that the fast layer fills with its own (``fast.gradients``: a fresh gradient kept, not copied);
  the graph walk reads it once per ``backward()``, and with fast paths off takes the reference.
- ``_result_class``: a subclass of ``Tensor`` that names its own (``tinyattn.compat``'s tensor, whose
  ``.grad`` and ``.data`` are tensors) gets results of that class from every operation on it
  (``Tensor._wrap``); until a subclass names one, no operation looks.

>>> import tinyattn as ta
>>> x = ta.tensor([1.0, 2.0, 3.0], requires_grad=True)
>>> y = (x * x).sum()
>>> y.backward()
>>> x.grad
array([2., 4., 6.], dtype=float32)
"""

import inspect
import itertools
import operator

import numpy as np

from . import backend, dispatch

_GRAD_ENABLED = [True]


class no_grad:
    """Context manager and decorator: no graph is recorded inside.

    >>> import tinyattn as ta
    >>> w = ta.ones(2, requires_grad=True)
    >>> with ta.no_grad():
    ...     y = w * 2
    >>> y.requires_grad
    False
    """

    def __new__(cls, fn=None):
        if fn is not None:  # used bare, as ``@no_grad``
            return cls()(fn)
        return super().__new__(cls)

    def __enter__(self):
        self._previous = _GRAD_ENABLED[0]
        _GRAD_ENABLED[0] = False

    def __exit__(self, *exc):
        _GRAD_ENABLED[0] = self._previous

    def __call__(self, fn):
        def wrapper(*args, **kwargs):
            with no_grad():
                return fn(*args, **kwargs)

        wrapper.__name__, wrapper.__doc__ = fn.__name__, fn.__doc__
        return wrapper


class enable_grad(no_grad):
    """Context manager and decorator: record the graph again, inside a ``no_grad`` block.

    >>> import tinyattn as ta
    >>> w = ta.ones(2, requires_grad=True)
    >>> with ta.no_grad(), ta.enable_grad():
    ...     y = w * 2
    >>> y.requires_grad
    True
    """

    def __enter__(self):
        self._previous = _GRAD_ENABLED[0]
        _GRAD_ENABLED[0] = True

    def __call__(self, fn):
        def wrapper(*args, **kwargs):
            with enable_grad():
                return fn(*args, **kwargs)

        wrapper.__name__, wrapper.__doc__ = fn.__name__, fn.__doc__
        return wrapper


def is_grad_enabled():
    return _GRAD_ENABLED[0]


def records_graph(tensors):
    """Whether an operation on ``tensors`` is linked into the graph (``Function.apply``): gradients are
    enabled and one of them requires a gradient. A fused node may skip what only its backward needs when not."""
    if _GRAD_ENABLED[0]:
        for t in tensors:
            if t.requires_grad:
                return True
    return False


class Function:
    """One differentiable operation: ``forward`` on arrays, ``backward`` on gradients.

    Subclasses implement ``forward(*arrays, **options) -> array`` (saving on ``self``
    what backward needs) and ``backward(grad) -> tuple`` with one gradient (or ``None``)
    per input, each of that input's shape. ``apply`` runs forward and links the graph.

    Every linked node gets the next number of one global counter (``sequence``). A node's
    inputs exist before it does, so sorting nodes by decreasing number orders them
    topologically: the graph walk needs no recursion and no visit bookkeeping.

    In-place changes are caught by version counters, as in PyTorch: a linked node notes the
    version of each tensor whose array it may keep (``saved_inputs``, ``saves_output``), and
    the graph walk refuses to run its backward once one of them has been written to since.
    """

    __slots__ = ("parents", "edges", "sequence", "released", "versions", "__dict__")

    #: True in a subclass whose ``backward`` returns arrays that it keeps no reference to, in a
    #: tuple it keeps none to either (the library's own nodes whose gradients feed parameters):
    #: a leaf may then keep such an array as its ``.grad`` without a copy (see ``_accumulate_leaf``).
    fresh_gradients = False

    #: The inputs (positions) whose arrays backward may read; ``None``: all of them. An operation
    #: that keeps none of its inputs' values (``Add``, a reshape) says ``()``.
    saved_inputs = None
    #: Whether backward may read the output's array (``Exp`` keeps ``exp(x)``); ``None``: whether
    #: ``forward`` kept the very array it returned as an attribute.
    saves_output = None
    #: True in an operation whose output is a view of its first input's array (reshape, transpose,
    #: basic indexing): the two then share one version counter, as a view and its base do in PyTorch.
    is_view = False

    @classmethod
    def apply(cls, *inputs, **options):
        try:
            device = type(inputs[0]._data)
            for t in inputs:
                if type(t._data) is not device:
                    raise RuntimeError(
                        f"{cls.__name__.lower()}: tensors on different devices: "
                        f"{', '.join(repr(i.device) for i in inputs)}; move them with .to(device)"
                    )
        except (IndexError, AttributeError):
            raise _apply_error(cls, inputs) from None
        fn = cls()
        try:
            out = fn.forward(*[t._data for t in inputs], **options)
        except TypeError as error:
            if _pytorch_style(cls):
                raise _apply_error(cls, inputs) from error
            raise
        if type(out) is not device and isinstance(out, np.generic):  # NumPy turns 0-d results into scalars
            out = np.asarray(out)
        result = Tensor._wrap(out, _kind_of(inputs) if _SUBCLASS_RESULTS[0] else None)
        if fn.is_view:
            result._version, result._view = inputs[0]._version, _view_record(inputs[0], cls, options)
        if records_graph(inputs):
            fn.parents, fn.sequence, fn.released = inputs, next(_SEQUENCE), False
            fn.edges = tuple([p._ctx for p in inputs])  # their nodes now: an in-place op moves a tensor on
            fn.versions = _versions(fn, inputs, result)
            result.requires_grad, result._ctx = True, fn
        return result

    def release(self):
        """Drop the arrays saved for backward; the node stays in the graph, marked."""
        self.__dict__ = {}
        self.released = True


#: True once a subclass of Tensor names its own ``_result_class`` (``tinyattn.compat``'s tensor): results
#: then take the class of their inputs (``_kind_of``); until then every result is a plain Tensor.
_SUBCLASS_RESULTS = [False]


def _kind_of(inputs):
    """The input whose ``_result_class`` a result takes: the first one of a subclass's kind, else none."""
    for t in inputs:
        if t._result_class is not Tensor:
            return t
    return None


def _versions(fn, inputs, result):
    """``(counter, version)`` for each tensor whose array ``fn``'s backward may read."""
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


def _modified(fn, now, version):
    raise RuntimeError(
        f"one of the arrays {type(fn).__name__} saved for its backward was modified by an in-place "
        f"operation (its version is now {now}, it was {version} when the graph was recorded); "
        "use the out-of-place form (x = x + y rather than x += y), or clone() the tensor first"
    )


def _view_record(source, cls, options):
    """``(base, steps)``: the tensor whose array a view looks into, and the view operations from it."""
    if source._view is None:
        return source, ((cls, options),)
    base, steps = source._view
    return base, steps + ((cls, options),)


def _pytorch_style(cls):
    """Whether ``cls.forward`` is written as PyTorch's ``torch.autograd.Function`` is: static, ``ctx`` first."""
    forward = inspect.getattr_static(cls, "forward", None)
    if not isinstance(forward, staticmethod):
        return False
    parameters = list(inspect.signature(forward.__func__).parameters)
    return bool(parameters) and parameters[0] == "ctx"


def _apply_error(cls, inputs):
    if _pytorch_style(cls):
        return TypeError(
            f"{cls.__name__}.apply: forward(ctx, ...) is written in PyTorch's style; ta.Function's forward is an "
            "instance method on arrays, forward(self, *arrays) saving on self, with backward(self, grad) returning "
            "one gradient per input. For PyTorch's style (ctx, save_for_backward), subclass ta.autograd.Function"
        )
    kinds = ", ".join(type(t).__name__ for t in inputs) or "nothing"
    return TypeError(f"{cls.__name__}.apply: expects one or more Tensors as inputs, got {kinds}")


_SEQUENCE = itertools.count()
_by_sequence = operator.attrgetter("sequence")


def _topological_order(root):
    """Nodes reachable from ``root``, each before the nodes it depends on. No recursion."""
    nodes, stack = {root}, [root]
    while stack:
        for ctx in stack.pop().edges:
            if ctx is not None and ctx not in nodes:
                nodes.add(ctx)
                stack.append(ctx)
    return sorted(nodes, key=_by_sequence, reverse=True)


def _accumulate_leaf(t, grad, fresh=False):
    """Add ``grad`` to the leaf's ``.grad``, never writing to an array anyone else can see: the first
    gradient is copied, in the leaf's dtype. ``fresh``: ``grad`` comes from a node that keeps no reference
    to it (``Function.fresh_gradients``), which the fast layer may keep instead of copying."""
    if t._grad is not None:
        t._grad += grad
    else:
        t._grad = backend.namespace(t._data).array(grad, dtype=t._data.dtype)


LEAF_ACCUMULATOR = [_accumulate_leaf]  # the extension slot (see the module's docstring)


def _run_backward(root, grad, retain_graph):
    if root._ctx is None:  # backward() on a leaf: the gradient is the caller's array
        _accumulate_leaf(root, grad)  # (the caller's array: always copied)
        return
    accumulate = LEAF_ACCUMULATOR[0] if dispatch.enabled() else _accumulate_leaf
    grads = {root._ctx: grad}  # node -> the gradient of its output, summed so far
    owned = set()  # nodes whose summed gradient is an array made here: safe to add to in place
    for fn in _topological_order(root._ctx):
        grad = grads.pop(fn, None)
        if grad is None:
            continue
        if fn.released:
            raise RuntimeError(
                f"backward through the graph a second time: the arrays saved by "
                f"{type(fn).__name__} were freed after the first backward(). "
                "Call backward(retain_graph=True) the first time to walk it again."
            )
        for counter, version in fn.versions:  # was an array it saved written to since?
            if counter[0] != version:
                _modified(fn, counter[0], version)
        input_grads = fn.backward(grad)
        if not retain_graph:
            fn.release()
        fresh = fn.fresh_gradients
        for p, ctx, g in zip(fn.parents, fn.edges, input_grads):
            if g is None:
                continue
            if ctx is None:  # a leaf when the node was recorded
                if p.requires_grad and p._ctx is None:
                    accumulate(p, g, fresh)
                continue
            previous = grads.get(ctx)
            if previous is None:
                grads[ctx] = g  # may be another node's array: never written to
            elif ctx in owned:
                grads[ctx] += g  # in place (a NumPy 0-d scalar, being immutable, is replaced)
            else:
                grads[ctx] = previous + g
                owned.add(ctx)


class Tensor:
    """An n-dimensional array that remembers how it was computed.

    ``Tensor(data, requires_grad=False, dtype=None, device=None)``: Python floats become
    float32, a NumPy/CuPy array keeps its dtype, integers stay integers.

    >>> import tinyattn as ta
    >>> ta.tensor([[1, 2]]).dtype, ta.tensor(1.5).dtype
    (dtype('int64'), dtype('float32'))
    """

    # _version: a one-element list, the count of in-place writes to the array, shared with views
    # _view: None, or (base tensor, the view operations from it) for a view of another tensor
    # _data, _grad: the backend array and its gradient (the public ``data`` and ``grad`` below read them;
    #   the library's own code reads these slots, so that a subclass may give ``data``/``grad`` another face)
    __slots__ = ("_data", "_grad", "requires_grad", "_ctx", "_version", "_view", "__weakref__")
    __array_ufunc__ = None  # ``ndarray + tensor`` defers to Tensor.__radd__

    def __init__(self, data, requires_grad=False, dtype=None, device=None):
        if isinstance(data, Tensor):
            data = data._data
        if backend.is_array(data):
            if device is not None and backend.device_of(data) != device:
                data = backend.to_device(data, device)
            array = data if dtype is None else data.astype(dtype, copy=False)
        else:
            device = device or "cpu"
            try:
                host = np.asarray(data)
            except ValueError as error:  # a ragged list
                raise ValueError(f"tensor: data must be a number or a rectangular nested list, got {error}") from None
            if dtype is None and host.dtype == np.float64 and not isinstance(data, (np.ndarray, np.generic)):
                dtype = np.float32  # Python floats become float32, as in PyTorch
            if dtype is not None:
                host = host.astype(dtype, copy=False)
            array = backend.to_device(host, device) if device != "cpu" else host
        if array.dtype.kind not in "biufc":
            raise TypeError(f"tensor: unsupported data of dtype {array.dtype}")
        if requires_grad and array.dtype.kind not in "fc":
            raise RuntimeError(
                f"requires_grad=True needs a floating-point tensor, got dtype {array.dtype}; "
                "convert with .float() first (integer tensors hold indices and targets)"
            )
        self._data = array
        self._grad = None
        self.requires_grad = bool(requires_grad)
        self._ctx = None
        self._version, self._view = [0], None

    # ----------------------------------------------------------------- properties

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "_result_class" in cls.__dict__:
            _SUBCLASS_RESULTS[0] = True

    def _set_data(self, value):
        self._data = value._data if isinstance(value, Tensor) else value
        dispatch.changed()  # a route that read the old array's shape or dtype may now be another

    def _set_grad(self, value):
        self._grad = value._data if isinstance(value, Tensor) else value

    data = property(operator.attrgetter("_data"), _set_data, doc="The backend array (NumPy or CuPy).")
    grad = property(operator.attrgetter("_grad"), _set_grad,
                    doc="``None``, or the accumulated gradient: a backend array of the tensor's shape and dtype.")
    shape = property(operator.attrgetter("_data.shape"))  # a tuple on every backend; attrgetter: no Python frame
    ndim = property(operator.attrgetter("_data.ndim"))
    dtype = property(operator.attrgetter("_data.dtype"))
    device = property(lambda self: backend.device_of(self._data))
    is_leaf = property(lambda self: self._ctx is None)

    def size(self, dim=None):
        if dim is None:
            return self.shape
        if isinstance(dim, int) and -self.ndim <= dim < self.ndim:
            return self.shape[dim]
        raise IndexError(f"size(): dim {dim!r} is out of range [{-self.ndim}, {self.ndim - 1}] for shape {self.shape}")

    def numel(self):
        return int(self._data.size)

    def __len__(self):
        if self.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def __repr__(self):
        body = np.array2string(backend.to_numpy(self._data), separator=", ", prefix="tensor(")
        extra = ""
        if self.dtype != np.float32 and self.dtype != np.int64 and self.dtype != np.bool_:
            extra += f", dtype={self.dtype}"
        if self.device != "cpu":
            extra += f", device='{self.device}'"
        if self._ctx is not None:
            extra += f", grad_fn=<{type(self._ctx).__name__}>"
        elif self.requires_grad:
            extra += ", requires_grad=True"
        return f"tensor({body}{extra})"

    __hash__ = object.__hash__

    # ----------------------------------------------------------------- autograd

    def backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None, *, grad=None):
        """Accumulate d(self)/d(leaf) · gradient into every leaf's ``.grad``.

        ``gradient`` (PyTorch's name; ``grad`` is accepted too) is a tensor or array of this
        tensor's shape; it may be omitted for a one-element tensor. ``create_graph`` and
        ``inputs`` are PyTorch's, not supported here: they must keep their defaults.
        """
        if create_graph or inputs is not None:
            raise NotImplementedError("backward(): create_graph and inputs are not supported")
        grad = gradient if grad is None else grad
        retain_graph = bool(retain_graph)
        if not self.requires_grad:
            raise RuntimeError(
                "backward() on a tensor that does not require grad: no input of its "
                "computation had requires_grad=True (or it was computed under no_grad)"
            )
        if grad is None:
            if self._data.size != 1:
                raise RuntimeError(
                    f"backward() without grad works only for a one-element tensor; this one "
                    f"has shape {self.shape}: pass grad, an array of that shape"
                )
            grad = backend.namespace(self._data).ones(self._data.shape, dtype=self.dtype)
        else:
            grad = grad._data if isinstance(grad, Tensor) else grad
            if not backend.is_array(grad):
                try:
                    grad = backend.to_device(np.asarray(grad, dtype=self.dtype), self.device)
                except (ValueError, TypeError):
                    raise TypeError(f"backward(): grad must be a tensor or an array of shape {self.shape}, "
                                    f"got {type(grad).__name__} {grad!r}") from None
            if tuple(grad.shape) != self.shape:
                raise RuntimeError(
                    f"backward(): grad has shape {tuple(grad.shape)}, expected the tensor's shape {self.shape}"
                )
            if type(grad) is not type(self._data):
                raise RuntimeError(
                    f"backward(): grad is on device {backend.device_of(grad)!r}, "
                    f"the tensor on {self.device!r}"
                )
            if grad.dtype != self.dtype:
                grad = grad.astype(self.dtype)
        _run_backward(self, grad, retain_graph)

    def detach(self):
        """The same data, cut from the graph. It shares this tensor's count of in-place writes (as in PyTorch):
        a write through it is seen by any node that saved this tensor for its backward."""
        detached = Tensor._wrap(self._data, self)
        detached._version = self._version
        return detached

    def requires_grad_(self, requires_grad=True):
        if requires_grad and self.dtype.kind not in "fc":
            raise RuntimeError(f"requires_grad=True needs a floating-point tensor, got dtype {self.dtype}")
        self.requires_grad = requires_grad
        return self

    @staticmethod
    def _wrap(array, like=None):
        """A leaf tensor around an existing backend array (no checks, no copy), of ``like``'s kind:
        the class that ``like`` (a tensor the result comes from, or a tensor class) names in
        ``_result_class`` (``Tensor``, or a subclass such as ``tinyattn.compat``'s, whose results stay
        of that class); a plain ``Tensor`` when ``like`` is ``None``."""
        t = Tensor.__new__(Tensor if like is None else like._result_class)
        t._data, t._grad, t.requires_grad, t._ctx, t._version, t._view = array, None, False, None, [0], None
        return t

    # ----------------------------------------------------------------- conversion

    def numpy(self):
        """A NumPy copy of the data (copied from the GPU if need be)."""
        return backend.to_numpy(self._data)

    def item(self):
        if self._data.size != 1:
            raise ValueError(f"item(): only one-element tensors convert to a Python number, shape is {self.shape}")
        return self._data.item()

    def __bool__(self):
        if self._data.size != 1:
            raise RuntimeError(
                f"bool() of a tensor of shape {self.shape} is ambiguous: only a one-element tensor "
                "has a truth value (reduce it first, or test t.numpy())"
            )
        return bool(self._data.item())

    def __float__(self):
        return float(self.item())

    def __int__(self):
        return int(self.item())

    def tolist(self):
        return self.numpy().tolist()

    def float(self):
        return self.to(np.float32)

    def double(self):
        return self.to(np.float64)

    def long(self):
        return self.to(np.int64)

    def cpu(self):
        return self.to("cpu")

    def cuda(self):
        return self.to("cuda")


Tensor._result_class = Tensor  # the class of a result computed from this tensor (see ``Tensor._wrap``)
