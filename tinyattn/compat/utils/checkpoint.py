"""``torch.utils.checkpoint``: ``checkpoint`` and ``checkpoint_sequential``, trading compute for memory.

``checkpoint(function, *args)`` gives ``function(*args)``, one tensor, whose inside is recomputed during
backward instead of kept, with torch's non-reentrant semantics: every tensor that the inside reaches
from outside gets its gradient, the tensor arguments and also a module's parameters or a tensor that a
closure holds, and it works with ``torch.autograd.grad`` and ``backward(inputs=…)`` as well as with
``backward()``. The inside runs once with its graph recorded, to find those tensors, and that graph is
dropped when the call returns: the graph keeps one node (``CheckpointFunction``) whose parents are the
arguments and those tensors. Its backward runs ``function`` again (with the random state of the first
run, so dropout drops the same positions) and walks that fresh graph; under ``create_graph=True`` the
walk records its own graph, so the gradients can be differentiated again.

``use_reentrant`` is accepted and changes nothing (both of torch's variants give these gradients when an
argument requires grad; the non-reentrant one also when none does, as here). The native
``ta.utils.checkpoint`` takes its gradients through the tensor arguments alone.

>>> import tinyattn.compat as torch
>>> layer = torch.nn.Linear(4, 4)
>>> x = torch.randn(2, 4, requires_grad=True)
>>> y = torch.utils.checkpoint.checkpoint(layer, x, use_reentrant=False)
>>> type(y.grad_fn).__name__
'CheckpointFunction'
>>> y.sum().backward()
>>> x.grad.shape, layer.weight.grad.shape
((2, 4), (4, 4))
"""

from ... import backend
from ...tensor import _SEQUENCE, _topological_order, _walk, enable_grad, is_grad_enabled
from ...tensor import Tensor as _NativeTensor
from ...utils import Checkpoint
from .._tensor import as_compat

__all__ = ["checkpoint", "checkpoint_sequential", "CheckpointFunction"]


class CheckpointFunction(Checkpoint):
    """One checkpointed call. ``forward(*input arrays, rerun, output, count)``: the first ``count`` parents
    are the call's tensor arguments, the others the tensors from outside that its inside reached;
    ``rerun(*arguments)`` computes the output again. Its backward is written for arrays and tensors alike
    (under ``create_graph`` the walk hands it tensors and it records the graph of its own walk)."""

    differentiable = True

    def forward(self, *arrays, rerun, output, count):
        self.rerun, self.count = rerun, count
        return output

    def reference(self, *inputs):
        return self.rerun(*inputs[:self.count])

    def backward(self, grad):
        create_graph = isinstance(grad, _NativeTensor)
        parents = self.parents
        boundary = next(_SEQUENCE)  # the recomputed nodes come after it; the walk stops at the parents
        with enable_grad():
            output = self.reference(*parents)
        wanted = [p for p in parents if p.requires_grad]
        if not output.requires_grad or not wanted:
            return (None,) * len(parents)
        hooks = _take_hooks(wanted)  # the walk outside runs the parents' hooks, once
        try:
            taken = _walk([(output, grad)], create_graph, create_graph, wanted, boundary)
        finally:
            _put_back_hooks(hooks)
        grads, seen = [], set()
        for p in parents:  # a tensor given twice gets its whole gradient once
            grads.append(taken.get(id(p)) if p.requires_grad and id(p) not in seen else None)
            seen.add(id(p))
        return tuple(grads)


def _take_hooks(tensors):
    """Remove (and return, to put back) the gradient hooks of ``tensors``: a leaf's and a non-leaf's node's."""
    taken = []
    for t in tensors:
        owner = t if t._ctx is None else t._ctx
        attribute = "_hooks" if t._ctx is None else "hooks"
        if getattr(owner, attribute) is not None:
            taken.append((owner, attribute, getattr(owner, attribute)))
            setattr(owner, attribute, None)
    return taken


def _put_back_hooks(taken):
    for owner, attribute, hooks in taken:
        setattr(owner, attribute, hooks)


def _reached_from_outside(output, boundary, arguments):
    """The tensors that require grad, other than ``arguments``, that the nodes numbered from ``boundary`` on
    (the inside of the call) read, in the order first met: leaves (parameters) and tensors computed before."""
    seen, found = {id(t) for t in arguments}, []
    for fn in _topological_order([output._ctx], boundary):
        if fn.sequence < boundary:
            continue
        for p, edge in zip(fn.parents, fn.edges):
            if p.requires_grad and id(p) not in seen and (edge is None or edge.sequence < boundary):
                seen.add(id(p))
                found.append(p)
    return found


def checkpoint(function, *args, use_reentrant=None, context_fn=None, determinism_check="default", debug=False,
               early_stop=True, preserve_rng_state=True, **kwargs):
    """``function(*args, **kwargs)``, one tensor, with its inside recomputed during backward (see the module).
    Outside a grad mode it is the plain call. ``preserve_rng_state=False`` lets the second run draw afresh;
    ``context_fn``, ``determinism_check``, ``debug`` and ``early_stop`` are accepted and change nothing."""
    if not is_grad_enabled():
        return function(*args, **kwargs)
    state = backend.get_rng_state() if preserve_rng_state else None
    boundary = next(_SEQUENCE)
    output = function(*args, **kwargs)  # recorded once, to see what the inside reaches; dropped on return
    if not isinstance(output, _NativeTensor):
        raise TypeError(f"checkpoint: the function must return one tensor, got {type(output).__name__}")
    if not output.requires_grad or output._ctx is None or output._ctx.sequence < boundary:
        return output  # nothing inside the call to recompute
    positions = [i for i, a in enumerate(args) if isinstance(a, _NativeTensor)]
    arguments = [args[i] for i in positions]
    reached = _reached_from_outside(output, boundary, arguments)

    def rerun(*tensors):
        values = list(args)
        for i, t in zip(positions, tensors):
            values[i] = t
        if state is None:
            return function(*values, **kwargs)
        now = backend.get_rng_state()
        backend.set_rng_state(state)  # the same dropout draws as the first run
        try:
            return function(*values, **kwargs)
        finally:
            backend.set_rng_state(now)

    return as_compat(CheckpointFunction.apply(*arguments, *reached, rerun=rerun, output=output._data,
                                              count=len(arguments)))


def checkpoint_sequential(functions, segments, input, use_reentrant=None, **kwargs):
    """``functions`` (an ``nn.Sequential`` or a list of callables) applied in turn to ``input``, in
    ``segments`` groups of equal length, each but the last checkpointed (torch's ``checkpoint_sequential``;
    ``preserve_rng_state`` passes on to ``checkpoint``)."""
    preserve = kwargs.pop("preserve_rng_state", True)
    if kwargs:
        raise ValueError(f"checkpoint_sequential: unexpected keyword arguments {sorted(kwargs)}")
    functions = list(functions.children()) if hasattr(functions, "children") else list(functions)

    def run(start, end):
        def forward(x):
            for f in functions[start:end]:
                x = f(x)
            return x
        return forward

    size = len(functions) // segments
    end = 0
    for start in range(0, size * (segments - 1), size):
        end = start + size
        input = checkpoint(run(start, end), input, use_reentrant=use_reentrant, preserve_rng_state=preserve)
    return run(end, len(functions))(input)


def __getattr__(name):
    raise AttributeError(f"tinyattn.compat.utils.checkpoint has no `{name}` yet")
