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

import contextlib
import enum
import warnings

from ... import utils as _native
from ...engine import Tensor as _NativeTensor
from ..core.tensor import as_compat
from ..refusals import refused
from ..scope import missing

__all__ = ["checkpoint", "checkpoint_sequential", "CheckpointError", "CheckpointPolicy", "DefaultDeviceType",
           "check_backward_validity", "detach_variable", "get_device_states", "set_device_states", "noop_context_fn",
           "set_checkpoint_debug_enabled", "set_checkpoint_early_stop", "SAC_IGNORED_OPS", "CheckpointFunction",
           "SelectiveCheckpointContext", "create_selective_checkpoint_contexts", "GraphExecGroup"]


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


class CheckpointError(RuntimeError):
    """torch's error of a recomputation that differs from the first run."""


class CheckpointPolicy(enum.Enum):
    """Selective checkpointing's choices per operation (named here; selective checkpointing is refused)."""

    MUST_SAVE, PREFER_SAVE, MUST_RECOMPUTE, PREFER_RECOMPUTE, MUST_CPU_OFFLOAD, PREFER_CPU_OFFLOAD = range(6)


SAC_IGNORED_OPS = set()  # the operations selective checkpointing ignores: none here (there is none)


class DefaultDeviceType:
    """The device whose random state ``checkpoint`` keeps: the library's generators cover every device at once."""

    _default_device_type = "cuda"

    @staticmethod
    def set_device_type(device="cuda"):
        DefaultDeviceType._default_device_type = device

    @staticmethod
    def get_device_type():
        return DefaultDeviceType._default_device_type


def check_backward_validity(inputs):
    """Warn when no tensor among ``inputs`` requires grad (then the checkpointed gradients are ``None``)."""
    if not any(isinstance(inp, _NativeTensor) and inp.requires_grad for inp in inputs):
        warnings.warn("None of the inputs have requires_grad=True. Gradients will be None", stacklevel=2)


def detach_variable(inputs):
    """``inputs`` (a tuple) with each tensor detached, keeping its ``requires_grad``, as torch's."""
    if not isinstance(inputs, tuple):
        raise RuntimeError(f"Only tuple of tensors is supported. Got Unsupported input type: {type(inputs).__name__}")
    out = []
    for inp in inputs:
        if not isinstance(inp, _NativeTensor):
            out.append(inp)
            continue
        detached = as_compat(inp.detach())
        detached.requires_grad = inp.requires_grad
        out.append(detached)
    return tuple(out)


def get_device_states(*args):
    """``(devices, states)`` of the GPUs the tensors in ``args`` are on: none on the host (the library's generators
    are saved whole by ``checkpoint`` itself)."""
    if any(isinstance(a, _NativeTensor) and a.device != "cpu" for a in args):
        raise NotImplementedError("torch.utils.checkpoint.get_device_states is not supported by tinyattn.compat for "
                                  "GPU tensors: the library's generators are one state, which checkpoint keeps")
    return [], []


def set_device_states(devices, states, *, device_type=None):
    """Put back states ``get_device_states`` gave: none to put back on the host."""
    if devices or states:
        raise NotImplementedError("torch.utils.checkpoint.set_device_states is not supported by tinyattn.compat "
                                  "for GPU states (see get_device_states)")


def noop_context_fn():
    """``checkpoint``'s default ``context_fn``: two contexts that do nothing."""
    return contextlib.nullcontext(), contextlib.nullcontext()


@contextlib.contextmanager
def set_checkpoint_debug_enabled(enabled):
    """torch's switch of the recomputation's debug trace; nothing is traced here."""
    yield


@contextlib.contextmanager
def set_checkpoint_early_stop(enable):
    """torch's switch of stopping the recomputation early; the recomputation here runs the function whole."""
    yield


_SELECTIVE = "selective activation checkpointing (per-operation save/recompute policies) is not done here; " \
             "checkpoint recomputes the whole function"
CheckpointFunction = refused("torch.utils.checkpoint.CheckpointFunction",
                             "the reentrant autograd.Function is not kept; call checkpoint(function, *args)")
SelectiveCheckpointContext = refused("torch.utils.checkpoint.SelectiveCheckpointContext", _SELECTIVE)
create_selective_checkpoint_contexts = refused("torch.utils.checkpoint.create_selective_checkpoint_contexts",
                                               _SELECTIVE)
GraphExecGroup = refused("torch.utils.checkpoint.GraphExecGroup", _SELECTIVE)


def __getattr__(name):
    raise missing(__name__, name)
