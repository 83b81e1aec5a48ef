"""Floor 2: the Tensor, the operation node, and the reverse-mode graph walk.

A ``Tensor`` holds a backend array (``.data``) and, when it was made by an operation
that needs a gradient, a reference to that operation (``._ctx``), a ``Function``
instance which keeps its inputs (``parents``) and whatever its backward needs.

``backward()`` orders the graph topologically without recursion, walks it from the
output to the leaves, and hands each node the gradient of its output; the node returns
one gradient per input. Unless ``retain_graph=True``, each node drops its saved arrays
as soon as it has run, so a second walk through it raises a ``RuntimeError``. A plain
``backward()`` runs that walk in its short form (``_backpropagate``); the general one (``_walk``)
does more: with ``create_graph=True`` it runs every backward on tensors instead of arrays, so the
gradients it gives have a graph of their own (``_on_tensors``), and for ``autograd.grad`` it walks
for some tensors' gradients alone. Gradient hooks (``register_hook``, ``retain_grad``) and the grad
modes live here too.

The arithmetic operators (``+ - * / ** @``, comparisons, indexing) and the methods that are
operations (``sum``, ``exp``, ``reshape``, ``masked_fill``…) are attached to ``Tensor`` at the
end of ``ops.py``, beside the ``Function``s they call; this file holds only what a tensor is.

The extension points, for the floors above, and nothing else of theirs:

- ``_result_class``: a subclass of ``Tensor`` that names its own (``tinyattn.compat``'s tensor, whose
  ``.grad`` and ``.data`` are tensors) gets results of that class from every operation on it
  (``Tensor._wrap``); until a subclass names one, no operation looks. ``_constant_like``: the kind a
  number or array lifted beside it takes (``ops._lift``).
- Forward mode and ``vmap`` step into ``Function.apply`` through the calling thread's modes
  (``tinyattn.modes``): a tensor's ``_tangents`` (one per open level of ``dual_levels``) get the operation's JVP
  rule (``_with_tangents``); while ``ta.func.vmap`` runs, its batching rules (``batching``) take an operation
  with a batched input, and ``per_example`` draws random tensors per example.

>>> import tinyattn as ta
>>> x = ta.tensor([1.0, 2.0, 3.0], requires_grad=True)
>>> y = (x * x).sum()
>>> y.backward()
>>> x.grad
array([2., 4., 6.], dtype=float32)
"""

import inspect
import itertools
import math
import operator
import sys
import weakref

import numpy as np

from . import backend, modes


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
        self._previous = modes.change(grad_enabled=False)  # (this thread's mode: ``tinyattn.modes``)

    def __exit__(self, *exc):
        modes.change(**self._previous)

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
        self._previous = modes.change(grad_enabled=True)

    def __call__(self, fn):
        def wrapper(*args, **kwargs):
            with enable_grad():
                return fn(*args, **kwargs)

        wrapper.__name__, wrapper.__doc__ = fn.__name__, fn.__doc__
        return wrapper


def is_grad_enabled():
    return modes.current().grad_enabled


class set_grad_enabled(no_grad):
    """``set_grad_enabled(mode)``: record the graph or not, from now on; used as a context manager or a
    decorator, the previous mode comes back on exit (PyTorch's ``torch.set_grad_enabled``).

    >>> import tinyattn as ta
    >>> w = ta.ones(2, requires_grad=True)
    >>> with ta.set_grad_enabled(False):
    ...     (w * 2).requires_grad
    False
    """

    def __new__(cls, mode):
        return object.__new__(cls)

    def __init__(self, mode):
        self.mode = bool(mode)
        self._previous = modes.change(grad_enabled=self.mode)

    def __enter__(self):
        pass

    def __exit__(self, *exc):
        modes.change(**self._previous)

    def __call__(self, fn):
        mode = self.mode
        modes.change(**self._previous)  # as a decorator it changes nothing until ``fn`` runs

        def wrapper(*args, **kwargs):
            with set_grad_enabled(mode):
                return fn(*args, **kwargs)

        wrapper.__name__, wrapper.__doc__ = fn.__name__, fn.__doc__
        return wrapper


class inference_mode(no_grad):
    """``inference_mode(mode=True)``: PyTorch's context manager and decorator for inference. Here it is
    ``no_grad`` (``mode=False``: ``enable_grad``'s opposite, nothing changes): the engine has no
    tensors that could be cheaper than those ``no_grad`` makes.

    >>> import tinyattn as ta
    >>> with ta.inference_mode():
    ...     ta.is_inference_mode_enabled(), (ta.ones(2, requires_grad=True) * 2).requires_grad
    (True, False)
    """

    def __new__(cls, mode=True):
        if callable(mode):  # used bare, as ``@inference_mode``
            return cls()(mode)
        return object.__new__(cls)

    def __init__(self, mode=True):
        self.mode = bool(mode)

    def __enter__(self):
        self._previous = modes.change(grad_enabled=False, inference=True) if self.mode else {}

    def __exit__(self, *exc):
        modes.change(**self._previous)

    def __call__(self, fn):
        mode = self.mode

        def wrapper(*args, **kwargs):
            with inference_mode(mode):
                return fn(*args, **kwargs)

        wrapper.__name__, wrapper.__doc__ = fn.__name__, fn.__doc__
        return wrapper



def is_inference_mode_enabled():
    return modes.current().inference


def records_graph(tensors):
    """Whether an operation on ``tensors`` is linked into the graph (``Function.apply``): gradients are
    enabled and one of them requires a gradient. A fused node may skip what only its backward needs when not."""
    if modes.current().grad_enabled:
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

    __slots__ = ("parents", "edges", "sequence", "released", "versions", "hooks", "__dict__")

    #: The inputs (positions) whose arrays backward may read; ``None``: all of them. An operation
    #: that keeps none of its inputs' values (``Add``, a reshape) says ``()``.
    saved_inputs = None
    #: Whether backward may read the output's array (``Exp`` keeps ``exp(x)``); ``None``: whether
    #: ``forward`` kept the very array it returned as an attribute.
    saves_output = None
    #: True in an operation whose output is a view of its first input's array (reshape, transpose,
    #: basic indexing): the two then share one version counter, as a view and its base do in PyTorch.
    is_view = False
    #: True in an operation whose ``backward`` is written in operations that tensors have as well as
    #: arrays (``*``, ``sum_to``, ``ops.namespace(grad).where``…): with ``create_graph=True`` the graph
    #: walk hands it tensors, and the gradient it computes records its own graph. The attributes that
    #: hold an input's array or the output's are named in ``saved_as``. A node whose backward works on
    #: arrays alone (a fused kernel) says False, and either gives ``reference(*inputs)`` (its output
    #: recomputed from its input tensors by differentiable operations, which ``create_graph``
    #: differentiates instead, inside the node's backward: ``_recomputed``) or gives a gradient that
    #: refuses a second differentiation.
    differentiable = False
    #: ``{attribute: input position, or OUTPUT}``: where ``forward`` kept an input's or the output's array,
    #: which a differentiable backward reads as the tensor itself under ``create_graph``.
    saved_as = {}

    @classmethod
    def apply(cls, *inputs, **options):
        mode = modes.current()  # this thread's modes: grad mode, anomaly mode, the transforms running
        if mode.batching is not None:  # inside ``ta.func.vmap``: a batched input takes its batching rule
            result = mode.batching(cls, inputs, options)
            if result is not None:
                return _with_tangents(cls, inputs, result, options) if mode.dual_levels else result
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
        if mode.grad_enabled and any(map(_requires_grad, inputs)):
            fn.parents, fn.sequence, fn.released, fn.hooks = inputs, next(_SEQUENCE), False, None
            if mode.anomaly:
                fn.__dict__["_created_at"] = _user_frame()
            fn.edges = tuple([p._ctx for p in inputs])  # their nodes now: an in-place op moves a tensor on
            fn.versions = _versions(fn, inputs, result)
            result.requires_grad, result._ctx = True, fn
        return _with_tangents(cls, inputs, result, options) if mode.dual_levels else result

    def needs_grad(self, i):
        """Whether backward must give input ``i``'s gradient: the input requires one, and, in a walk that
        wants some tensors' gradients alone (``autograd.grad``), it leads to one of them."""
        needed = self.__dict__.get("needed")
        return self.parents[i].requires_grad if needed is None else needed[i]

    def needs_grads(self):
        """``needs_grad`` for every input, as a list."""
        needed = self.__dict__.get("needed")
        return list(map(_requires_grad, self.parents) if needed is None else needed)

    def release(self):
        """Drop the arrays saved for backward; the node stays in the graph, marked. A node that kept no array (an
        ``Add``, a reshape: it saves neither its inputs nor its output, and holds only shapes and options) stays
        as it is, and a second walk runs it again, as PyTorch allows."""
        if self.saved_inputs == () and self.saves_output is not True:
            if not any(map(_holds_array, self.__dict__.values())):
                return
        self.__dict__ = {}
        self.released = True


def _holds_array(value):
    """Whether ``value`` is an array or a tensor, or a tuple or list holding one (what ``release`` drops)."""
    if isinstance(value, (tuple, list)):
        return any(map(_holds_array, value))
    return hasattr(value, "shape") and hasattr(value, "dtype")


OUTPUT = "output"  # ``saved_as``'s name for the operation's output


# ----------------------------------------------------------------------------- forward mode and vmap: the hooks

def transforming():
    """Whether ``ta.func.vmap`` runs or a forward-mode level is open: every operation then goes through its
    batching and JVP rules (an operation without them cannot take part)."""
    mode = modes.current()
    return mode.batching is not None or bool(mode.dual_levels)


def _with_tangents(cls, inputs, result, options):
    """``result`` with its tangent at every open level at which an input has one (forward mode): the
    operation's JVP rule, ``cls.jvp(tangents, inputs, result, **options)``, on tensors. While the rule for a
    level runs, operations see only the levels below it, so a nested level's tangents never mix into an
    outer one's (the perturbation confusion), while an outer level's flow through the rule's own operations."""
    mode = modes.current()
    levels = sorted({level for t in inputs if t._tangents for level in t._tangents
                     if level < mode.seen_level and level in mode.dual_levels})
    for level in levels:
        tangents = [t._tangents.get(level) if t._tangents else None for t in inputs]
        jvp = getattr(cls, "jvp", None)
        if jvp is None:
            raise RuntimeError(f"{cls.__name__} has no forward-mode rule (jvp): it cannot carry a tangent; every "
                               "operation of the reference definitions has one")
        seen = modes.change(seen_level=level)
        try:
            tangent = jvp(tangents, inputs, result, **options)
        finally:
            modes.change(**seen)
        if tangent is None:
            continue
        if tangent.shape != result.shape:
            tangent = tangent.expand(*result.shape)
        if tangent.dtype != result.dtype:
            tangent = tangent._to_dtype(result.dtype)
        result._tangents = {**(result._tangents or {}), level: tangent}
    if result._tangents and result._ctx is not None:  # for a backward that reads the output (``_output_of``); under
        result._ctx.__dict__.setdefault("output_tangents", result._tangents)  # vmap: the physical call's, set first
    return result


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


_requires_grad = operator.attrgetter("requires_grad")
_SEQUENCE = itertools.count()  # the node numbers' source (next() on it is atomic: threads never share a number)
_by_sequence = operator.attrgetter("sequence")


def _topological_order(roots, boundary=-math.inf):
    """Nodes reachable from ``roots``, each before the nodes it depends on. No recursion. A node numbered
    below ``boundary`` is listed, but not followed."""
    nodes, stack = set(roots), list(roots)
    while stack:
        fn = stack.pop()
        if fn.sequence < boundary:
            continue
        for ctx in fn.edges:
            if ctx is not None and ctx not in nodes:
                nodes.add(ctx)
                stack.append(ctx)
    return sorted(nodes, key=_by_sequence, reverse=True)


def _accumulate_leaf(t, grad, unshared=False):
    """Add ``grad`` to the leaf's ``.grad``, never writing to an array anyone else can see. The first
    gradient is copied, in the leaf's dtype, unless it is ``unshared`` and owns its memory (not a view) in the
    leaf's dtype and shape: then it is taken as it is, as PyTorch's ``AccumulateGrad`` steals a gradient that
    no one else holds.

    ``unshared`` is the walk's count of references (``_backpropagate``), taken before the call: the array is
    held only by the walk's local name and the tuple the node's backward returned when ``sys.getrefcount``
    finds it one above a ``probe`` object made just after it and held by a local name alone. Anything else
    holding it (the node that returned it, another input's entry, the upstream gradient it is) adds a
    reference, and it is copied.
    """
    data = t._data
    if t._grad is not None and t._grad_graph is not None and t._grad_graph._data is t._grad:
        t._grad = t._grad + grad  # the array is a graph's tensor's (create_graph): never written to
    elif t._grad is not None:
        t._grad += grad
    elif type(grad) is type(data) and grad.dtype == data.dtype:
        t._grad = grad if unshared and grad.base is None and grad.shape == data.shape else grad.copy()
    else:
        t._grad = backend.namespace(t._data).array(grad, dtype=t._data.dtype)



# ----------------------------------------------------------------------------- the graph walk


def _walk(roots, retain_graph, create_graph, inputs=None, boundary=-math.inf, accumulate=None):
    """Backpropagate from ``roots`` (pairs of a tensor and its gradient: arrays, or tensors under
    ``create_graph``) and return ``{id(leaf): (leaf, gradient, made here)}`` for the leaves reached
    (see ``_add``); with ``inputs`` (tensors, leaves or not), return ``{id(tensor): gradient}`` for those
    reached (and any leaf on the way), running only the nodes that lead to them (``_needed``). With
    ``accumulate`` (``backward()``: no ``inputs``), a leaf without hooks takes each gradient as it comes.

    With ``create_graph`` every backward runs on tensors, with the graph recorded (``_on_tensors``), so
    that what comes out can be differentiated again. Nodes numbered below ``boundary`` are not run: the
    gradients reaching them are only taken for ``inputs`` (``_recomputed`` differentiates a subgraph so).
    """
    grads, leaves, owned = {}, {}, set()  # node -> the gradient of its output, summed so far; leaves likewise
    for tensor, grad in roots:
        if tensor._ctx is None:
            _add(leaves, id(tensor), grad, tensor)
        elif tensor._ctx in grads:
            _add(grads, tensor._ctx, grad)
        else:
            grads[tensor._ctx] = grad
    order = _topological_order([t._ctx for t, _ in roots if t._ctx is not None], boundary)
    wanted = runs = None
    if inputs is not None:
        wanted = {t._ctx: t for t in inputs if t._ctx is not None}
        wanted_leaves = {id(t) for t in inputs if t._ctx is None}
        runs = _needed(order, inputs, wanted)
        order = [fn for fn in order if fn in runs or fn in wanted]
    taken = {}
    grad_mode = modes.change(grad_enabled=True) if create_graph else {}  # (create_graph: the backward
    # formulas record their graph; hooks otherwise run under no_grad: _Hooks.run)
    try:
        for fn in order:
            grad = grads.pop(fn, None)
            if grad is None:
                continue
            if wanted is None:
                if fn.hooks is not None:
                    grad = fn.hooks.run(grad)
            else:  # a walk for some tensors' gradients alone
                if fn.hooks is not None and fn.sequence >= boundary:  # (below it: the outer walk's to run)
                    grad = fn.hooks.run(grad)
                if fn in wanted:
                    taken[id(wanted[fn])] = grad
                    if fn not in runs:
                        continue  # nothing wanted lies beyond it
                if fn.sequence < boundary:
                    continue
            if fn.released:
                _freed(fn)
            for counter, version in fn.versions:  # was an array it saved written to since?
                if counter[0] != version:
                    _modified(fn, counter[0], version)
            if wanted is not None:  # which inputs lead to a wanted tensor: the others' gradients are not computed
                fn.__dict__["needed"] = tuple(
                    e in runs or e in wanted or (e is None and p.requires_grad and id(p) in wanted_leaves)
                    for p, e in zip(fn.parents, fn.edges))
                try:
                    input_grads = _on_tensors(fn, grad) if create_graph else fn.backward(grad)
                finally:
                    fn.__dict__.pop("needed", None)
            else:
                input_grads = _on_tensors(fn, grad) if create_graph else fn.backward(grad)
            if modes.current().anomaly is True:
                _check_finite(fn, input_grads)
            if not retain_graph:
                fn.release()
            _hand_down(fn, input_grads, grads, None if create_graph else owned, leaves, accumulate)
        hooked = [key for key, entry in leaves.items() if entry[0]._hooks is not None] if leaves else ()
        for key in hooked:  # a leaf's hooks, for the leaves asked for (not in a recomputation: see _recomputed)
            leaf, grad = leaves[key][:2]
            if boundary == -math.inf and (inputs is None or any(t is leaf for t in inputs)):
                leaves[key] = (leaf, leaf._hooks.run(grad), False)  # (a hook's: the user may hold it)
    finally:
        modes.change(**grad_mode)
    if inputs is None:
        return leaves
    taken.update((key, entry[1]) for key, entry in leaves.items())
    return taken


def _add(table, key, grad, tensor=None):
    """Sum ``grad`` into ``table[key]``: a node's entry is the gradient; a leaf's is ``(tensor, gradient,
    made here)``, made here when the walk's own sum made it (then later gradients are added to it in place;
    any other array may be seen elsewhere, so it is never written to)."""
    if tensor is None:
        table[key] = grad if key not in table else table[key] + grad
    elif key not in table:
        table[key] = (tensor, grad, False)
    else:
        _, total, made_here = table[key]
        if made_here and not isinstance(total, Tensor) and total.shape == grad.shape and total.dtype == grad.dtype:
            total += grad
        else:
            total = total + grad
        table[key] = (tensor, total, True)


def _freed(fn):
    raise RuntimeError(
        f"backward through the graph a second time: the arrays saved by {type(fn).__name__} were freed after "
        "the first backward(). Call backward(retain_graph=True) the first time to walk it again."
    )


def _needed(order, inputs, wanted):
    """The nodes of ``order`` whose backward must run for a gradient to reach one of ``inputs`` (the others
    need not run; a wanted node outside this set is only visited, for its gradient)."""
    leaves = {id(t) for t in inputs if t._ctx is None}
    runs = set()
    for fn in reversed(order):  # inputs before the nodes that use them
        for p, e in zip(fn.parents, fn.edges):
            if e in runs or e in wanted or (e is None and id(p) in leaves):
                runs.add(fn)
                break
    return runs


def _run_backward(root, grad, retain_graph, create_graph=False, inputs=None):
    """``Tensor.backward``: accumulate into the leaves' ``.grad`` (with ``inputs``, into theirs alone)."""
    if root._ctx is None and inputs is None:  # backward() on a leaf: the gradient is the caller's array
        grad = root._hooks.run(grad) if root._hooks is not None else grad
        _accumulate_leaf(root, grad._data if isinstance(grad, Tensor) else grad)  # (always copied)
        return
    if inputs is None and not create_graph and modes.current().anomaly is not True:
        _backpropagate(root._ctx, grad, retain_graph)
        return
    if inputs is not None:
        grads = _walk([(root, grad)], retain_graph, create_graph, inputs)
        for t in inputs:
            if id(t) in grads:
                g = grads[id(t)]
                _accumulate_leaf(t, g._data if isinstance(g, Tensor) else g)
        return
    if not create_graph:  # (a leaf without hooks takes its gradients as they come; the others', summed, here)
        for leaf, g, _ in _walk([(root, grad)], retain_graph, False, accumulate=_accumulate_leaf).values():
            _accumulate_leaf(leaf, g)
        return
    for leaf, g, _ in _walk([(root, grad)], retain_graph, True).values():
        if isinstance(g, Tensor):  # create_graph: the sum keeps its graph too (compat's ``.grad`` shows it)
            with enable_grad():
                kept = leaf._grad_graph is not None and leaf._grad_graph._data is leaf._grad
                total = _Copy.apply(g) if leaf._grad is None else \
                    (leaf._grad_graph if kept else Tensor._wrap(leaf._grad)) + g
            leaf._grad, leaf._grad_graph = total._data, total
        else:
            _accumulate_leaf(leaf, g)


def _backpropagate(root, grad, retain_graph):
    """The walk of a plain ``backward()`` (every training step's): ``_walk`` for one root node and its array
    gradient, with no ``create_graph``, no ``inputs`` and no NaN check, so that none of their tests runs per
    node. Each leaf without hooks takes its gradients as they come; the others' are summed, seen by their
    hooks, then accumulated. It hands gradients down with
    ``_hand_down``'s lines written out (the general walk calls it): a call per node costs more than they do."""
    grads, owned, hooked = {root: grad}, set(), {}  # node -> its output's gradient so far; leaves with hooks
    for fn in _topological_order((root,)):
        grad = grads.pop(fn, None)
        if grad is None:
            continue
        if fn.hooks is not None:
            grad = fn.hooks.run(grad)
        if fn.released:
            _freed(fn)
        for counter, version in fn.versions:  # was an array it saved written to since?
            if counter[0] != version:
                _modified(fn, counter[0], version)
        input_grads = fn.backward(grad)
        if not retain_graph:
            fn.release()
        for i, p in enumerate(fn.parents):  # _hand_down's lines, inline (every input's)
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
                        _add(hooked, id(p), g, p)
            elif ctx not in grads:
                grads[ctx] = g  # may be another node's array: never written to
            elif ctx in owned:
                grads[ctx] += g  # in place (a NumPy 0-d scalar, being immutable, is replaced)
            else:
                grads[ctx] = grads[ctx] + g
                owned.add(ctx)
    for leaf, g, _ in hooked.values():
        _accumulate_leaf(leaf, leaf._hooks.run(g))  # (a hook's result: the user may hold it)


def _hand_down(fn, input_grads, grads, owned, leaves, accumulate):
    """Hand ``fn``'s input gradients down, for both walks: a node's is summed into ``grads`` (in place where the sum
    is an array made here, ``owned``; ``None`` under ``create_graph``, where every sum stays out of place); a leaf
    without hooks takes its own at once through ``accumulate`` (when given), any other leaf's is summed into
    ``leaves`` (see ``_add``)."""
    for p, ctx, g in zip(fn.parents, fn.edges, input_grads):
        if g is None:
            continue
        if ctx is None:  # a leaf when the node was recorded
            if p.requires_grad and p._ctx is None:
                if accumulate is not None and p._hooks is None:
                    accumulate(p, g)
                else:
                    _add(leaves, id(p), g, p)
        elif ctx not in grads:
            grads[ctx] = g  # may be another node's array: never written to
        elif owned is not None and ctx in owned:
            grads[ctx] += g  # in place (a NumPy 0-d scalar, being immutable, is replaced)
        else:
            grads[ctx] = grads[ctx] + g
            if owned is not None:
                owned.add(ctx)


# ----------------------------------------------------------------------------- differentiating a backward


def _on_tensors(fn, grad):
    """``fn``'s input gradients as tensors that carry their own graph (``create_graph=True``): its backward
    formula run on tensors where it is written for them (``differentiable``), else its output recomputed
    by its ``reference`` and differentiated, else gradients that refuse to be differentiated again."""
    if fn.differentiable:
        return type(fn).backward(_AsTensors(fn), grad)
    if hasattr(fn, "reference"):
        return _recomputed(fn, grad)
    with no_grad():
        grads = fn.backward(grad._data)
    return tuple(None if g is None else OnceDifferentiable.apply(grad, *fn.parents, array=g, name=type(fn).__name__)
                 for g in grads)


class _AsTensors:
    """A node as its backward sees it under ``create_graph``: the arrays it saved of its inputs and its
    output (``Function.saved_as``) are those tensors, so that the formula records a graph through them."""

    def __init__(self, fn):
        self._fn = fn
        for name, position in fn.saved_as.items():
            setattr(self, name, _output_of(fn) if position == OUTPUT else fn.parents[position])

    def __getattr__(self, name):
        return getattr(self._fn, name)


def _output_of(fn):
    """``fn``'s output as a tensor in the graph (the one ``apply`` returned may be gone): its saved array
    (``saved_as``'s ``OUTPUT`` attribute), with ``fn`` as its node."""
    name = next(name for name, position in fn.saved_as.items() if position == OUTPUT)
    array = getattr(fn, name)
    out = Tensor._wrap(np.asarray(array) if isinstance(array, np.generic) else array)  # (0-d: a NumPy scalar)
    out.requires_grad, out._ctx = True, fn
    out._tangents = fn.__dict__.get("output_tangents")  # forward mode over a backward: the output's tangents too
    return out


def _recomputed(fn, grad, create_graph=True):
    """The gradients of ``fn``'s inputs from its output recomputed by ``fn.reference(*inputs)``: the output
    recorded afresh from the input tensors, then differentiated through that subgraph alone, down to the
    inputs (a fused node's backward under ``create_graph``; ``utils.Checkpoint`` always). The recomputation
    is recorded after everything in the graph so far, so its nodes number above the inputs' nodes, and the
    walk stops at the inputs (``boundary``)."""
    parents = fn.parents
    low = max([p._ctx.sequence for p in parents if p._ctx is not None], default=-1)
    with enable_grad():
        out = fn.reference(*parents)
    if not out.requires_grad:
        return (None,) * len(parents)
    needed = [i for i, p in enumerate(parents) if fn.needs_grad(i)]
    boundary = low + 0.5  # the inputs' nodes lie below; every recomputed node above
    taken = _walk([(out, grad)], create_graph, create_graph, [parents[i] for i in needed], boundary)
    grads, given = [], set()
    for i, p in enumerate(parents):  # a tensor in two input slots: its whole gradient once (the walk sums them)
        grads.append(taken.get(id(p)) if i in needed and id(p) not in given else None)
        given.add(id(p))
    return tuple(grads)


class _Copy(Function):
    """A copy of the array (a gradient kept as a leaf's ``.grad`` is never another's array)."""

    differentiable, saved_inputs, saves_output = True, (), False

    def forward(self, x):
        return x.copy()

    def backward(self, grad):
        return (grad,)

    @staticmethod
    def jvp(tangents, inputs, out):  # a copy's tangent is the input's
        return tangents[0]


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
            "give the node a reference(*inputs) that recomputes its output from differentiable operations"
        )


# ----------------------------------------------------------------------------- hooks and anomalies


class _Hooks:
    """The hooks of one tensor's gradient, in order (``Tensor.register_hook``)."""

    def __init__(self, tensor):
        self.tensor_shape, self.hooks, self.retain = tensor.shape, {}, None
        self.kind = type(tensor)  # a hook sees a gradient of its tensor's class (``Tensor._wrap``)

    def run(self, grad):
        """``grad`` (an array, or a tensor under ``create_graph``) after every hook has seen or replaced it."""
        if not isinstance(grad, Tensor):
            with no_grad():  # (as PyTorch runs them outside create_graph)
                return self._run(grad)
        return self._run(grad)

    def _run(self, grad):
        as_tensor = isinstance(grad, Tensor)
        current = grad if as_tensor else Tensor._wrap(grad, self.kind)
        for hook in list(self.hooks.values()):
            result = hook(current)
            if result is not None:
                current = self._checked(hook, result, current)
        if self.retain is not None:
            t = self.retain()
            if t is not None and as_tensor:  # create_graph: the retained gradient keeps its graph
                kept = t._grad_graph is not None and t._grad_graph._data is t._grad
                total = _Copy.apply(current) if t._grad is None else \
                    (t._grad_graph if kept else Tensor._wrap(t._grad)) + current
                t._grad, t._grad_graph = total._data, total
            elif t is not None:
                t._grad = current._data.copy() if t._grad is None else t._grad + current._data
        return current if as_tensor else current._data

    def _checked(self, hook, result, current):
        if not isinstance(result, Tensor):
            if not backend.is_array(result):
                raise TypeError(f"hook {_name_of(hook)} returned {type(result).__name__}; a gradient hook returns "
                                f"None or a tensor of shape {self.tensor_shape}")
            result = Tensor._wrap(result, self.kind)
        if result.shape != current.shape:
            raise RuntimeError(f"hook {_name_of(hook)} returned a gradient of shape {result.shape}, but the tensor's "
                               f"gradient has shape {current.shape}")
        if result.dtype != current.dtype:
            raise RuntimeError(f"hook {_name_of(hook)} returned a gradient of dtype {result.dtype}, but the tensor's "
                               f"gradient has dtype {current.dtype}")
        return result


def _name_of(hook):
    return getattr(hook, "__qualname__", None) or repr(hook)


class RemovableHandle:
    """What ``register_hook`` returns: ``remove()`` takes the hook away (also on leaving a ``with`` block)."""

    _ids = itertools.count()

    def __init__(self, table):
        self.table, self.id = table, next(RemovableHandle._ids)

    def remove(self):
        self.table.pop(self.id, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()



def _user_frame():
    """Where the user's code created a node: the innermost frame outside the library, as ``file:line``."""
    import traceback
    library = __file__.rsplit("/", 1)[0]
    for frame in reversed(traceback.extract_stack()[:-2]):
        if not frame.filename.startswith(library):
            return f'File "{frame.filename}", line {frame.lineno}, in {frame.name}\n    {frame.line}'
    return "(no frame outside the library)"


def _check_finite(fn, grads):
    xp = None
    for i, g in enumerate(grads):
        if g is None:
            continue
        array = g._data if isinstance(g, Tensor) else g
        xp = xp or backend.namespace(array)
        if array.dtype.kind in "fc" and bool(xp.isnan(array).any()):
            where = fn.__dict__.get("_created_at", "(the node was recorded before anomaly detection was on)")
            raise RuntimeError(f"Function {type(fn).__name__}Backward returned nan values in its {i}th output; "
                               f"the forward operation {type(fn).__name__} was created at:\n{where}")


def _root_grad(name, tensor, grad, create_graph):
    """The gradient a walk starts from, for ``tensor``: ones for a one-element tensor when ``grad`` is
    ``None``; an array of the tensor's shape, dtype and device (a tensor as it is under ``create_graph``)."""
    if grad is None:
        if tensor._data.size != 1:
            raise RuntimeError(
                f"{name} without grad works only for a one-element tensor (grad can be implicitly created only "
                f"for scalar outputs); this one has shape {tensor.shape}: pass grad, an array of that shape"
            )
        grad = backend.namespace(tensor._data).ones(tensor._data.shape, dtype=tensor.dtype)
        return Tensor._wrap(grad) if create_graph else grad
    if isinstance(grad, Tensor):
        if create_graph:
            if grad.shape != tensor.shape:
                raise RuntimeError(f"{name}: grad has shape {grad.shape}, expected the tensor's shape "
                                   f"{tensor.shape}")
            return grad if grad.dtype == tensor.dtype else grad._to_dtype(tensor.dtype)
        grad = grad._data
    if not backend.is_array(grad):
        try:
            grad = backend.to_device(np.asarray(grad, dtype=tensor.dtype), tensor.device)
        except (ValueError, TypeError):
            raise TypeError(f"{name}: grad must be a tensor or an array of shape {tensor.shape}, "
                            f"got {type(grad).__name__} {grad!r}") from None
    if tuple(grad.shape) != tensor.shape:
        raise RuntimeError(
            f"{name}: grad has shape {tuple(grad.shape)}, expected the tensor's shape {tensor.shape}"
        )
    if type(grad) is not type(tensor._data):
        raise RuntimeError(
            f"{name}: grad is on device {backend.device_of(grad)!r}, the tensor on {tensor.device!r}"
        )
    if grad.dtype != tensor.dtype:
        grad = grad.astype(tensor.dtype)
    return Tensor._wrap(grad) if create_graph else grad


def _input_tensors(name, inputs):
    """``inputs`` (a tensor or a sequence of them) as a tuple, each checked to require a gradient."""
    inputs = (inputs,) if isinstance(inputs, Tensor) else tuple(inputs)
    if not inputs:
        raise RuntimeError(f"{name}: inputs is empty; give at least one tensor")
    for i, t in enumerate(inputs):
        if not isinstance(t, Tensor):
            raise TypeError(f"{name}: inputs[{i}] is a {type(t).__name__}, expected a Tensor")
        if not t.requires_grad:
            raise RuntimeError(f"{name}: inputs[{i}] (shape {t.shape}) does not require grad, so it has no "
                               "gradient to compute")
    return inputs


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
    # _hooks: None, or the ``_Hooks`` of a leaf's gradient (a non-leaf's live on its node, ``Function.hooks``)
    # _grad_graph: after ``backward(create_graph=True)``, the tensor (with its graph) whose array is ``_grad``
    # _tangents: None, or {forward-mode level: tangent tensor} (``autograd.forward_ad``)
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
        self._hooks = self._grad_graph = self._tangents = None

    # ----------------------------------------------------------------- properties

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "_result_class" in cls.__dict__:
            _SUBCLASS_RESULTS[0] = True

    def _set_data(self, value):
        self._data = value._data if isinstance(value, Tensor) else value

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
        tensor's shape; it may be omitted for a one-element tensor. ``retain_graph`` (default:
        ``create_graph``) keeps the saved arrays for another walk. ``create_graph=True`` runs every
        backward on tensors, recording its graph: the native ``.grad`` stays an array, so a gradient to
        differentiate again comes from ``ta.autograd.grad``. ``inputs``: accumulate into these tensors'
        ``.grad`` alone (leaves or not).
        """
        grad = gradient if grad is None else grad
        retain_graph = create_graph if retain_graph is None else bool(retain_graph)
        if inputs is not None:
            inputs = _input_tensors("backward", inputs)
        if not self.requires_grad:
            raise RuntimeError(
                "backward() on a tensor that does not require grad: no input of its "
                "computation had requires_grad=True (or it was computed under no_grad)"
            )
        grad = _root_grad("backward()", self, grad, create_graph)
        _run_backward(self, grad, retain_graph, create_graph, inputs)

    def register_hook(self, hook):
        """``hook(grad) -> None or a new gradient``, called with this tensor's gradient (a tensor) each time
        one is computed, before it goes further (a leaf: before it is added to ``.grad``). Returns a handle
        whose ``remove()`` takes the hook away.

        >>> import tinyattn as ta
        >>> x = ta.tensor([1.0, 2.0], requires_grad=True)
        >>> y = x * 3
        >>> handle = y.register_hook(lambda g: g * 10)   # replace y's gradient on its way to x
        >>> y.sum().backward()
        >>> x.grad
        array([30., 30.], dtype=float32)
        """
        if not self.requires_grad:
            raise RuntimeError("register_hook: cannot register a hook on a tensor that does not require grad")
        if self._ctx is None:
            self._hooks = self._hooks or _Hooks(self)
            hooks = self._hooks
        else:
            self._ctx.hooks = self._ctx.hooks or _Hooks(self)
            hooks = self._ctx.hooks
        handle = RemovableHandle(hooks.hooks)
        hooks.hooks[handle.id] = hook
        return handle

    def retain_grad(self):
        """Keep this non-leaf tensor's gradient in ``.grad`` (as an array) during ``backward()``; a leaf
        keeps it anyway."""
        if not self.requires_grad:
            raise RuntimeError("retain_grad: cannot retain the gradient of a tensor that does not require grad")
        if self._ctx is not None:
            self._ctx.hooks = self._ctx.hooks or _Hooks(self)
            self._ctx.hooks.retain = weakref.ref(self)

    @property
    def retains_grad(self):
        hooks = None if self._ctx is None else self._ctx.hooks
        return hooks is not None and hooks.retain is not None and hooks.retain() is self

    @property
    def grad_fn(self):
        """The node that made this tensor (``None`` for a leaf)."""
        return self._ctx

    def detach(self):
        """The same data, cut from the graph. It shares this tensor's count of in-place writes (as in PyTorch):
        a write through it is seen by any node that saved this tensor for its backward."""
        detached = Tensor._wrap(self._data, self)
        detached._version = self._version
        return detached

    def detach_(self):
        """Cut this tensor from the graph, in place: it becomes a leaf that requires no gradient."""
        if self._view is not None and self._view[0].requires_grad:
            raise RuntimeError("detach_: cannot detach a view of a tensor that requires grad in place; use "
                               "detach(), which returns a new tensor")
        self._ctx, self.requires_grad = None, False
        return self

    def requires_grad_(self, requires_grad=True):
        if requires_grad and self.dtype.kind not in "fc":
            raise RuntimeError(f"requires_grad=True needs a floating-point tensor, got dtype {self.dtype}")
        if not requires_grad and self._ctx is not None:
            raise RuntimeError("requires_grad_(False): you can only change requires_grad flags of leaf tensors; this "
                               "one was computed by an operation. For a value outside the graph use t.detach()")
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
        t._hooks = t._grad_graph = t._tangents = None
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
Tensor._constant_like = None  # the kind of a constant lifted beside it (``ops._lift``); None: its own
