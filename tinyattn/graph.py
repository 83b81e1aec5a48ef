"""Floor 1: the general graph walk, for what a plain ``backward()`` does not ask: gradients for some tensors alone
(``inputs=``, ``autograd.grad``), a walk that records its own graph (``create_graph``), anomaly checks, and the
checks of a walk's roots and inputs.

The engine (``tinyattn/engine.py``) holds the graph and its short walk; this module works on its nodes and tensors
by their attributes alone (a node's ``parents``, ``edges``, ``sequence``, ``backward``…; a tensor's ``_ctx``,
``requires_grad``, ``_data``). Both walks visit the nodes in one order (``topological_order``): by decreasing
number, each node before the nodes of its inputs, as ``Function.apply`` numbers them.
"""

import inspect
import math
import operator

import numpy as np

from . import anomaly, backend, modes
from .grad_mode import enable_grad

_by_sequence = operator.attrgetter("sequence")


def topological_order(roots, boundary=-math.inf):
    """The nodes reachable from ``roots``, each before the nodes it depends on (by decreasing number). A node
    numbered below ``boundary`` is listed, but not followed."""
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




def walk(roots, retain_graph, create_graph, inputs=None, boundary=-math.inf, accumulate=None):
    """Backpropagate from ``roots`` (pairs of a tensor and its gradient: arrays, or tensors under
    ``create_graph``) and return ``{id(leaf): (leaf, gradient, made here)}`` for the leaves reached
    (see ``add``); with ``inputs`` (tensors, leaves or not), return ``{id(tensor): gradient}`` for those
    reached (and any leaf on the way), running only the nodes that lead to them (``needed``). With
    ``accumulate`` (``backward()``: no ``inputs``), a leaf without hooks takes each gradient as it comes.

    With ``create_graph`` every backward runs on tensors, with the graph recorded
    (``Function.backward_on_tensors``), so that what comes out can be differentiated again. Nodes numbered
    below ``boundary`` are not run: the gradients reaching them are only taken for ``inputs`` (the engine's
    ``recomputed`` differentiates a subgraph so).
    """
    grads, leaves, owned = {}, {}, set()  # node -> the gradient of its output, summed so far; leaves likewise
    order = topological_order([t._ctx for t, _ in roots if t._ctx is not None], boundary)
    for tensor, grad in roots:
        if tensor._ctx is None:
            add(leaves, id(tensor), grad, tensor)
        elif tensor._ctx in grads:
            add(grads, tensor._ctx, grad)
        else:
            grads[tensor._ctx] = grad
    wanted = runs = None
    if inputs is not None:
        wanted = {t._ctx: t for t in inputs if t._ctx is not None}
        wanted_leaves = {id(t) for t in inputs if t._ctx is None}
        runs = needed(order, inputs, wanted)
        order = [fn for fn in order if fn in runs or fn in wanted]
    taken = {}
    check_nan = modes.current().anomaly is True
    grad_mode = modes.change(grad_enabled=True) if create_graph else {}  # (create_graph: the backward
    # formulas record their graph; hooks otherwise run under no_grad: hooks.Hooks.run)
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
                freed(fn)
            for counter, version in fn.versions:  # was an array it saved written to since?
                if counter[0] != version:
                    modified(fn, counter[0], version)
            if wanted is not None:  # which inputs lead to a wanted tensor: the others' gradients are not computed
                fn.__dict__["needed"] = tuple(
                    e in runs or e in wanted or (e is None and p.requires_grad and id(p) in wanted_leaves)
                    for p, e in zip(fn.parents, fn.edges))
                try:
                    input_grads = fn.backward_on_tensors(grad) if create_graph else fn.backward(grad)
                finally:
                    fn.__dict__.pop("needed", None)
            else:
                input_grads = fn.backward_on_tensors(grad) if create_graph else fn.backward(grad)
            if check_nan:
                anomaly.check_finite(fn, input_grads)
            if not retain_graph:
                fn.release()
            hand_down(fn, input_grads, grads, None if create_graph else owned, leaves, accumulate)
        hooked = [key for key, entry in leaves.items() if entry[0]._hooks is not None] if leaves else ()
        for key in hooked:  # a leaf's hooks, for the leaves asked for (not in a recomputation: ``recomputed``)
            leaf, grad = leaves[key][:2]
            if boundary == -math.inf and (inputs is None or any(t is leaf for t in inputs)):
                leaves[key] = (leaf, leaf._hooks.run(grad), False)  # (a hook's: the user may hold it)
    finally:
        modes.change(**grad_mode)
    if inputs is None:
        return leaves
    taken.update((key, entry[1]) for key, entry in leaves.items())
    return taken


def add(table, key, grad, tensor=None):
    """Sum ``grad`` into ``table[key]``: a node's entry is the gradient; a leaf's is ``(tensor, gradient,
    made here)``, made here when the walk's own sum made it (then later gradients are added to it in place;
    any other array may be seen elsewhere, so it is never written to)."""
    if tensor is None:
        table[key] = grad if key not in table else table[key] + grad
    elif key not in table:
        table[key] = (tensor, grad, False)
    else:
        _, total, made_here = table[key]
        if made_here and backend.is_array(total) and total.shape == grad.shape and total.dtype == grad.dtype:
            total += grad
        else:
            total = total + grad
        table[key] = (tensor, total, True)


def freed(fn):
    raise RuntimeError(
        f"backward through the graph a second time: the arrays saved by {type(fn).__name__} were freed after "
        "the first backward(). Call backward(retain_graph=True) the first time to walk it again."
    )


def needed(order, inputs, wanted):
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


def hand_down(fn, input_grads, grads, owned, leaves, accumulate):
    """Hand ``fn``'s input gradients down, for both walks: a node's is summed into ``grads`` (in place where the sum
    is an array made here, ``owned``; ``None`` under ``create_graph``, where every sum stays out of place); a leaf
    without hooks takes its own at once through ``accumulate`` (when given), any other leaf's is summed into
    ``leaves`` (see ``add``)."""
    for p, ctx, g in zip(fn.parents, fn.edges, input_grads):
        if g is None:
            continue
        if ctx is None:  # a leaf when the node was recorded
            if p.requires_grad and p._ctx is None:
                if accumulate is not None and p._hooks is None:
                    accumulate(p, g)
                else:
                    add(leaves, id(p), g, p)
        elif ctx not in grads:
            grads[ctx] = g  # may be another node's array: never written to
        elif owned is not None and ctx in owned:
            grads[ctx] += g  # in place (a NumPy 0-d scalar, being immutable, is replaced)
        else:
            grads[ctx] = grads[ctx] + g
            if owned is not None:
                owned.add(ctx)


def view_node(view):
    """The node a view's value comes from now, which a new node takes as its edge: the view's own ``_ctx``, unless
    its base's array was written since that node was made (directly, or through another view of the base) while the
    base is in a graph. The view is then made again from the base as the base is now, and keeps that node, as
    PyTorch regenerates a view's ``grad_fn`` (``a, b = x.view(2), x.view(2); a[0] *= 2``: ``b``'s gradient path
    goes through the write)."""
    base, steps, version = view._view
    if view._version[0] == version or not base.requires_grad:
        return view._ctx
    regenerated = base
    for cls, options in steps:
        regenerated = cls.apply(regenerated, **options)
    view._ctx, view.requires_grad, view._view = regenerated._ctx, True, (base, steps, view._version[0])
    return view._ctx


def modified(fn, now, version):
    raise RuntimeError(
        f"one of the arrays {type(fn).__name__} saved for its backward was modified by an in-place "
        f"operation (its version is now {now}, it was {version} when the graph was recorded); "
        "use the out-of-place form (x = x + y rather than x += y), or clone() the tensor first"
    )


def root_gradient(name, tensor, grad, create_graph):
    """The gradient a walk starts from, for ``tensor``: ones for a one-element tensor when ``grad`` is
    ``None``; an array of the tensor's shape, dtype and device (a tensor as it is under ``create_graph``)."""
    if grad is None:
        if tensor._data.size != 1:
            raise RuntimeError(
                f"{name} without grad works only for a one-element tensor (grad can be implicitly created only "
                f"for scalar outputs); this one has shape {tensor.shape}: pass grad, an array of that shape"
            )
        grad = backend.namespace(tensor._data).ones(tensor._data.shape, dtype=tensor.dtype)
        return tensor._wrap(grad) if create_graph else grad
    if not backend.is_array(grad) and hasattr(grad, "_data"):  # a tensor
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
    return tensor._wrap(grad) if create_graph else grad


def input_tensors(name, inputs, tensor_type):
    """``inputs`` (a tensor or a sequence of them) as a tuple, each checked to require a gradient."""
    inputs = (inputs,) if isinstance(inputs, tensor_type) else tuple(inputs)
    if not inputs:
        raise RuntimeError(f"{name}: inputs is empty; give at least one tensor")
    for i, t in enumerate(inputs):
        if not isinstance(t, tensor_type):
            raise TypeError(f"{name}: inputs[{i}] is a {type(t).__name__}, expected a Tensor")
        if not t.requires_grad:
            raise RuntimeError(f"{name}: inputs[{i}] (shape {t.shape}) does not require grad, so it has no "
                               "gradient to compute")
    return inputs


OUTPUT = "output"  # ``Function.saved_as``'s name for the operation's output


class AsTensors:
    """A node as its backward sees it under ``create_graph``: the arrays it saved of its inputs and its
    output (``Function.saved_as``) are those tensors, so that the formula records a graph through them."""

    def __init__(self, fn):
        self._fn = fn
        for name, position in fn.saved_as.items():
            setattr(self, name, output_of(fn) if position == OUTPUT else fn.parents[position])

    def __getattr__(self, name):
        return getattr(self._fn, name)


def output_of(fn):
    """``fn``'s output as a tensor in the graph (the one ``apply`` returned may be gone): its saved array
    (``saved_as``'s ``OUTPUT`` attribute), with ``fn`` as its node."""
    name = next(name for name, position in fn.saved_as.items() if position == OUTPUT)
    array = getattr(fn, name)
    out = fn.parents[0]._wrap(array)
    out.requires_grad, out._ctx = True, fn
    out._tangents = fn.__dict__.get("output_tangents")  # forward mode over a backward: the output's tangents too
    return out


def backward(root, grad, retain_graph, create_graph, inputs, accumulate_leaf):
    """``Tensor.backward`` other than a plain walk (the engine's ``backpropagate``): on a leaf, for ``inputs``
    alone, with ``create_graph`` or in anomaly mode; each leaf's ``.grad`` gets what the walk gives it, through
    the engine's ``accumulate_leaf(leaf, array)``."""
    if root._ctx is None and inputs is None:  # backward() on a leaf: the gradient is the caller's array
        grad = root._hooks.run(grad) if root._hooks is not None else grad
        accumulate_leaf(root, grad if backend.is_array(grad) else grad._data)  # (always copied)
    elif inputs is not None:
        taken = walk([(root, grad)], retain_graph, create_graph, inputs)
        for t in inputs:
            if id(t) in taken:
                accumulate_leaf(t, _array(taken[id(t)]))
    elif not create_graph:  # (a leaf without hooks takes its gradients as they come; the others', summed, here)
        for leaf, g, _ in walk([(root, grad)], retain_graph, False, accumulate=accumulate_leaf).values():
            accumulate_leaf(leaf, g)
    else:
        for leaf, g, _ in walk([(root, grad)], retain_graph, True).values():
            if backend.is_array(g):
                accumulate_leaf(leaf, g)
                continue
            with enable_grad():  # create_graph: the sum keeps its graph too (compat's ``.grad`` shows it)
                kept = leaf._grad_graph is not None and leaf._grad_graph._data is leaf._grad
                total = g.clone() if leaf._grad is None else \
                    (leaf._grad_graph if kept else g._wrap(leaf._grad)) + g
            leaf._grad, leaf._grad_graph = total._data, total


def recomputed(fn, grad, create_graph=True):
    """The gradients of ``fn``'s inputs from its output recomputed by ``fn.reference(*inputs)``: the output
    recorded afresh from the input tensors, then differentiated through that subgraph alone, down to the inputs
    (a fused node's backward under ``create_graph``: ``Function.backward_on_tensors``; ``utils.Checkpoint``).
    The recomputation is recorded after everything in the graph so far, so its nodes number above the inputs'
    nodes, and the walk stops at the inputs (``boundary``)."""
    parents = fn.parents
    low = max([p._ctx.sequence for p in parents if p._ctx is not None], default=-1)
    with enable_grad():
        out = fn.reference(*parents)
    if not out.requires_grad:
        return (None,) * len(parents)
    needed = [i for i, p in enumerate(parents) if fn.needs_grad(i)]
    boundary = low + 0.5  # the inputs' nodes lie below; every recomputed node above
    taken = walk([(out, grad)], create_graph, create_graph, [parents[i] for i in needed], boundary)
    grads, given = [], set()
    for i, p in enumerate(parents):  # a tensor in two input slots: its whole gradient once (the walk sums them)
        grads.append(taken.get(id(p)) if i in needed and id(p) not in given else None)
        given.add(id(p))
    return tuple(grads)


def _array(g):
    """A walk's gradient as a backend array: a tensor's array; a NumPy scalar (a 0-d result) as a 0-d array."""
    if isinstance(g, np.generic):
        return np.asarray(g)
    return g if backend.is_array(g) else g._data


def pytorch_style(cls):
    """Whether ``cls.forward`` is written as PyTorch's ``torch.autograd.Function`` is: static, ``ctx`` first."""
    forward = inspect.getattr_static(cls, "forward", None)
    if not isinstance(forward, staticmethod):
        return False
    parameters = list(inspect.signature(forward.__func__).parameters)
    return bool(parameters) and parameters[0] == "ctx"


def apply_error(cls, inputs):
    """The error for ``cls.apply`` on what are not tensors, or for a ``forward`` in PyTorch's style."""
    if pytorch_style(cls):
        return TypeError(
            f"{cls.__name__}.apply: forward(ctx, ...) is written in PyTorch's style; ta.Function's forward is an "
            "instance method on arrays, forward(self, *arrays) saving on self, with backward(self, grad) returning "
            "one gradient per input. For PyTorch's style (ctx, save_for_backward), subclass ta.autograd.Function")
    kinds = ", ".join(type(t).__name__ for t in inputs) or "nothing"
    return TypeError(f"{cls.__name__}.apply: expects one or more Tensors as inputs, got {kinds}")
