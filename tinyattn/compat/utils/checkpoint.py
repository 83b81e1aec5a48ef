"""``torch.utils.checkpoint``: ``checkpoint`` and ``checkpoint_sequential``, trading compute for memory.

``checkpoint(function, *args)`` gives ``function(*args)``, one tensor, whose inside is recomputed during
backward instead of kept, with torch's non-reentrant semantics: every tensor that the inside reaches
from outside gets its gradient, the tensor arguments and also a module's parameters or a tensor that a
closure holds, and it works with ``torch.autograd.grad`` and ``backward(inputs=…)`` as well as with
``backward()``: the native ``ta.utils.checkpoint``, whose graph keeps one node (``Checkpoint``) whose
parents are those tensors. Its backward runs ``function`` again (with the random state of the first run,
so dropout drops the same positions) and walks that fresh graph; under ``create_graph=True`` the walk
records its own graph, so the gradients can be differentiated again.

``use_reentrant`` is accepted and changes nothing (both of torch's variants give these gradients when an
argument requires grad; the non-reentrant one also when none does, as here).

>>> import tinyattn.compat as torch
>>> layer = torch.nn.Linear(4, 4)
>>> x = torch.randn(2, 4, requires_grad=True)
>>> y = torch.utils.checkpoint.checkpoint(layer, x, use_reentrant=False)
>>> type(y.grad_fn).__name__
'Checkpoint'
>>> y.sum().backward()
>>> x.grad.shape, layer.weight.grad.shape
((2, 4), (4, 4))
"""

from ... import utils as _native
from ..core.tensor import as_compat

__all__ = ["checkpoint", "checkpoint_sequential"]


def checkpoint(function, *args, use_reentrant=None, context_fn=None, determinism_check="default", debug=False,
               early_stop=True, preserve_rng_state=True, **kwargs):
    """``function(*args, **kwargs)``, one tensor, with its inside recomputed during backward (see the module):
    ``ta.utils.checkpoint``, its result a compat tensor. ``preserve_rng_state=False`` lets the second run draw
    afresh; ``context_fn``, ``determinism_check``, ``debug`` and ``early_stop`` are accepted and change nothing."""
    return as_compat(_native.checkpoint(function, *args, preserve_rng_state=preserve_rng_state, **kwargs))


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
