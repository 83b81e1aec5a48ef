"""Gradient checkpointing: trade compute for memory.

``checkpoint(function, *args)`` runs ``function`` without recording its inside: the graph gets one
node (``Checkpoint``) that keeps only the inputs. Its backward runs ``function`` again, this time
recording, and backpropagates through that fresh graph. So a stack of layers, each checkpointed,
holds one layer's activations at a time during backward instead of all of them. The random state is
put back for the second run, so dropout drops the same positions both times.

Under ``create_graph`` the node recomputes through its inputs' own tensors (``Checkpoint.reference``),
so the gradient it gives can be differentiated again.

>>> import tinyattn as ta
>>> layer = ta.nn.Linear(4, 4)
>>> x = ta.randn(2, 4, requires_grad=True)
>>> y = ta.utils.checkpoint(lambda x: layer(x).tanh(), x)
>>> type(y.grad_fn).__name__
'Checkpoint'
>>> y.sum().backward()
>>> x.grad.shape
(2, 4)
"""

from . import backend
from .tensor import Function, Tensor, _walk, enable_grad, no_grad, records_graph


class Checkpoint(Function):
    """``function(*args)``'s output, recomputed in backward. ``forward(*input arrays, rerun, output)``:
    ``rerun(*input tensors)`` computes the output again (with the random state of the first run)."""

    saved_inputs, saves_output = (), False  # the inputs' tensors are the node's parents; nothing else is kept

    def forward(self, *arrays, rerun, output):
        self.rerun = rerun
        return output

    def reference(self, *inputs):
        return self.rerun(*inputs)

    def backward(self, grad):
        leaves = [Tensor._wrap(p._data, p).requires_grad_(p.requires_grad) for p in self.parents]
        with enable_grad():
            output = self.rerun(*leaves)  # the inside's graph, recorded this time, from detached inputs
        wanted = [leaf for leaf in leaves if leaf.requires_grad]
        taken = _walk([(output, grad)], False, False, wanted)
        return tuple(taken.get(id(leaf)) if leaf.requires_grad else None for leaf in leaves)


def checkpoint(function, *args, use_reentrant=None, preserve_rng_state=True, **kwargs):
    """``function(*args, **kwargs)``, one tensor, with its inside recomputed during backward instead of kept
    (PyTorch's ``torch.utils.checkpoint.checkpoint``; ``use_reentrant`` is accepted and changes nothing).
    The tensor arguments are the node's inputs; keyword arguments and other values pass through as they are.
    """
    positions = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
    state = backend.get_rng_state() if preserve_rng_state else None
    with no_grad():
        output = function(*args, **kwargs)
    if not isinstance(output, Tensor):
        raise TypeError(f"checkpoint: the function must return one tensor, got {type(output).__name__}")
    tensors = [args[i] for i in positions]
    if not records_graph(tensors):
        return output

    def rerun(*inputs):
        arguments = list(args)
        for i, t in zip(positions, inputs):
            arguments[i] = t
        if state is None:
            return function(*arguments, **kwargs)
        now = backend.get_rng_state()
        backend.set_rng_state(state)  # the same dropout draws as the first run
        try:
            return function(*arguments, **kwargs)
        finally:
            backend.set_rng_state(now)

    return Checkpoint.apply(*tensors, rerun=rerun, output=output._data)


__all__ = ["checkpoint", "Checkpoint"]
