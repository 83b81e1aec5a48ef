"""Gradient checkpointing: trade compute for memory.

``checkpoint(function, *args)`` keeps nothing of ``function``'s inside: the graph gets one node
(``Checkpoint``) that keeps only the tensors the function reads. Its backward runs ``function`` again, this time
recording, and backpropagates through that fresh graph. So a stack of layers, each checkpointed,
holds one layer's activations at a time during backward instead of all of them. The random state is
put back for the second run, so dropout drops the same positions both times.

Under ``create_graph`` the recomputed graph is differentiated with its graph recorded, so the gradient
it gives can be differentiated again.

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

from . import backend, modes
from .engine import _SEQUENCE, Function, Tensor, enable_grad, is_grad_enabled
from .graph import recomputed


class Checkpoint(Function):
    """``function(*args)``'s output, recomputed in backward. Its inputs are every tensor the function read
    from outside itself (its tensor arguments, the parameters it closes over); ``forward(*their arrays,
    rerun, output)``, where ``rerun()`` computes the output again from those same tensors (with the random
    state of the first run)."""

    saved_inputs, saves_output = None, False  # rerun reads every input: a write to one since is refused

    def forward(self, *arrays, rerun, output):
        self.rerun = rerun
        return output

    def reference(self, *inputs):
        return self.rerun()

    def backward(self, grad):
        return recomputed(self, grad, create_graph=False)  # recorded afresh, walked down


def checkpoint(function, *args, use_reentrant=None, preserve_rng_state=True, **kwargs):
    """``function(*args, **kwargs)``, one tensor, with its inside recomputed during backward instead of kept
    (PyTorch's ``torch.utils.checkpoint.checkpoint``; ``use_reentrant`` is accepted and changes nothing).
    Gradients reach every tensor the function reads, arguments and captured parameters alike: the first run
    records the graph once, to find them (the tensors its nodes read from outside it), then lets it go.

    >>> import numpy as np
    >>> import tinyattn as ta
    >>> w = ta.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)    # a parameter the function captures
    >>> x = ta.tensor([0.5, -1.0], requires_grad=True)
    >>> def block(x):
    ...     return (x @ w).tanh()
    >>> y = checkpoint(block, x)
    >>> type(y.grad_fn).__name__                 # one node in the graph; tanh's input is not kept
    'Checkpoint'
    >>> dx, dw = ta.autograd.grad(y.sum(), [x, w])
    >>> plain_dx, plain_dw = ta.autograd.grad(block(x).sum(), [x, w])    # the same without checkpointing
    >>> np.allclose(dx.numpy(), plain_dx.numpy()), np.allclose(dw.numpy(), plain_dw.numpy())
    (True, True)
    """
    if not is_grad_enabled() or modes.current().dual_levels:  # no graph: nothing to recompute; forward mode:
        return function(*args, **kwargs)  # tangents go through the operations inside, kept while a level is open
    state = backend.get_rng_state() if preserve_rng_state else None
    boundary = next(_SEQUENCE)  # the nodes the function records come after this number
    with enable_grad():
        output = function(*args, **kwargs)
    if not isinstance(output, Tensor):
        raise TypeError(f"checkpoint: the function must return one tensor, got {type(output).__name__}")
    if output._ctx is None or output._ctx.sequence < boundary:
        return output  # nothing recorded inside (no input needs a gradient, or no_grad around the call)
    inputs = _read_from_outside(output._ctx, boundary)
    output = Tensor._wrap(output._data, output)  # the inside's graph goes with the old output

    def rerun():
        with backend.rng_state(state):  # the same dropout draws as the first run
            return function(*args, **kwargs)

    return Checkpoint.apply(*inputs, rerun=rerun, output=output._data)


def _read_from_outside(root, boundary):
    """The tensors that the nodes recorded since ``boundary`` read from outside them: leaves that require a
    gradient, and tensors made by earlier nodes; each once, in the order met."""
    inputs, seen, stack, visited = [], set(), [root], {root}
    while stack:
        fn = stack.pop()
        for p, ctx in zip(fn.parents, fn.edges):
            if ctx is not None and ctx.sequence >= boundary:
                if ctx not in visited:
                    visited.add(ctx)
                    stack.append(ctx)
            elif p.requires_grad and id(p) not in seen:
                seen.add(id(p))
                inputs.append(p)
    return inputs


__all__ = ["checkpoint", "Checkpoint"]
