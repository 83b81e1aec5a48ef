"""Module hooks: the handle that takes one off again, and the graph nodes that bring a module's gradients to its
full backward hooks (PyTorch's ``torch.utils.hooks.RemovableHandle`` and ``BackwardHook``).

A full backward hook needs, at one moment, the gradients of all of a module's Tensor inputs and of all its
outputs; a graph node here has one output and receives one gradient. So each side of the module goes through
a hub, as ``tinyattn.autograd`` joins a custom function's several outputs:

    x_1 … x_n ── _Hub ── Pick(0) … Pick(n-1) ── x_1' … x_n' ── forward ── y_1 … y_m
    y_1 … y_m ── _Hub ── Pick(0) … Pick(m-1) ── y_1' … y_m' ── what the caller computes from them

A pick passes its array through unchanged; in backward it hands its gradient to its hub as an
``autograd.OutputGradients`` (the gradients by position, summed like arrays when several picks send theirs). So a
hub's backward runs once, after every pick that got a gradient: the outputs' hub runs the backward pre-hooks on
``grad_output``, the inputs' hub the backward hooks on ``grad_input`` and ``grad_output``, and each returns the
gradients (the hooks' replacements, where they gave some) to the tensors it was made of.
"""

import itertools
import weakref
from collections import namedtuple

from .. import backend
from ..autograd import Pick  # (a hub's picks are the same node as a custom Function's outputs)
from ..engine import Function, Tensor, is_grad_enabled
from ..ops import TangentPack

_IDS = itertools.count()  # one number per hook ever registered, as PyTorch's RemovableHandle.next_id


class RemovableHandle:
    """What ``Module.register_*_hook`` returns: ``remove()`` takes the hook off its module (a second ``remove()``
    does nothing). As a context manager it removes the hook on exit:
    ``with model.register_forward_hook(hook): model(x)``."""

    def __init__(self, module, tables):
        self.id = next(_IDS)  # the hook's key in each of the module's hook tables named in ``tables``
        self.tables = tables
        self.module_ref = weakref.ref(module)

    def remove(self):
        module = self.module_ref()
        if module is not None:
            module._remove_hook(self.id, self.tables)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


def hook_name(hook):
    return getattr(hook, "__qualname__", None) or repr(hook)


class _Hub(Function):
    """The tensors of one side of a hooked module, joined: its output is an empty array, and its backward hands
    the gradients its picks collected to ``on_backward`` (a ``BackwardHook`` method), which returns them for the
    tensors, replaced where a hook said so. (Under ``create_graph`` the gradients are tensors, and stay so.)"""

    saved_inputs, saves_output, differentiable = (), False, True

    def forward(self, *arrays, on_backward, positions):
        self.on_backward = on_backward
        return backend.namespace(arrays[0]).empty((0,))

    def backward(self, grads):
        return self.on_backward(grads.grads)

    @staticmethod
    def jvp(tangents, inputs, out, on_backward, positions):  # the joined tensors' tangents, by position
        if all(t is None for t in tangents):
            return None
        return TangentPack(out, dict(zip(positions, tangents)))


class BackwardHook:
    """One call of a module with full backward hooks (``hooks``) or backward pre-hooks (``pre_hooks``):
    ``setup_input_hook`` routes its positional Tensor arguments through a hub before ``forward``,
    ``setup_output_hook`` its Tensor outputs after, and the hubs' backward calls the hooks (PyTorch's
    ``torch.utils.hooks.BackwardHook``).

    ``grad_input`` has one entry per positional argument (``None`` for one that is not a Tensor needing a
    gradient, or that got none), ``grad_output`` one per output (a tuple's entries, or the one output).
    The hooks get tensors; a hook's replacement may hold tensors or backend arrays, each of the shape and dtype
    of the tensor it is the gradient of."""

    def __init__(self, module, hooks, pre_hooks):
        self.module, self.hooks, self.pre_hooks = module, hooks, pre_hooks
        self.n_inputs, self.inputs = 0, None  # inputs: {position: _Joined} of the arguments routed through a hub
        self.n_outputs, self.outputs = 0, None  # the same of the outputs
        self.grad_outputs = None  # set by the outputs' hub, read (and cleared) by the inputs' hub

    def setup_input_hook(self, args):
        self.n_inputs = len(args)
        self.inputs, picked = _join(args, self._input_backward)
        return picked

    def setup_output_hook(self, result):
        outputs = result if isinstance(result, tuple) else (result,)
        self.outputs, picked = _join(outputs, self._output_backward)
        self.n_outputs = len(outputs)
        if self.outputs is None:
            return result
        return picked if isinstance(result, tuple) else picked[0]

    def _output_backward(self, grads):
        grad_outputs, on_tensors = _packed(grads, self.outputs, self.n_outputs)
        for hook in self.pre_hooks:
            replaced = hook(self.module, grad_outputs)
            if replaced is not None:
                grad_outputs = _checked(replaced, grad_outputs, self.outputs, hook, "backward pre-hook",
                                        "grad_output")
        self.grad_outputs = grad_outputs
        if self.inputs is None:  # no input needs a gradient: the hooks are called now, with grad_input all None
            grad_inputs = (None,) * self.n_inputs
            for hook in self.hooks:
                replaced = hook(self.module, grad_inputs, grad_outputs)
                if replaced is not None and any(g is not None for g in replaced):
                    raise RuntimeError(
                        f"full backward hook {hook_name(hook)} of {type(self.module).__name__} returned gradients, "
                        "but no input of the module needs one: return None (or None for every gradient)"
                    )
            self.grad_outputs = None
        return _unpacked(grad_outputs, self.outputs, on_tensors)

    def _input_backward(self, grads):
        grad_inputs, on_tensors = _packed(grads, self.inputs, self.n_inputs)
        if self.grad_outputs is None:  # the gradient reached the inputs without passing through the outputs
            return _unpacked(grad_inputs, self.inputs, on_tensors)
        for hook in self.hooks:
            replaced = hook(self.module, grad_inputs, self.grad_outputs)
            if replaced is not None:
                grad_inputs = _checked(replaced, grad_inputs, self.inputs, hook, "full backward hook", "grad_input")
        self.grad_outputs = None
        return _unpacked(grad_inputs, self.inputs, on_tensors)


_Joined = namedtuple("_Joined", "shape dtype kind")  # what a hook's gradient for a joined tensor must be, and
# its class (for Tensor._wrap); not the tensor, which would tie the outputs' graph to the inputs' hub in a cycle


def _join(values, on_backward):
    """``(joined, values')``: the Tensors among ``values`` that need a gradient, by position (as ``_Joined``), each
    replaced in ``values'`` by a pick of one hub (``joined`` ``None`` and ``values`` as they are when none needs
    one, or no graph is recorded)."""
    tensors = {i: v for i, v in enumerate(values) if isinstance(v, Tensor) and v.requires_grad}
    if not tensors or not is_grad_enabled():
        return None, values
    hub = _Hub.apply(*tensors.values(), on_backward=on_backward, positions=tuple(tensors))
    picked = list(values)
    for i, t in tensors.items():
        picked[i] = Pick.apply(hub, index=i, array=t._data)
    return {i: _Joined(t.shape, t.dtype, type(t)) for i, t in tensors.items()}, tuple(picked)


def _packed(grads, joined, count):
    """``(gradients, on_tensors)``: the gradients by position (arrays, or tensors under ``create_graph``) as the
    tuple a hook receives, tensors with ``None`` where none came; and whether they came as tensors."""
    on_tensors = any(isinstance(g, Tensor) for g in grads.values())
    return tuple(None if i not in grads else grads[i] if on_tensors else Tensor._wrap(grads[i], joined[i].kind)
                 for i in range(count)), on_tensors


def _unpacked(packed, joined, on_tensors):
    """What a hub's backward returns: one gradient (or ``None``) per tensor it joined, in order: arrays, or
    tensors where the walk handed tensors (``create_graph``)."""
    result = []
    for i in joined:
        g = packed[i]
        if g is not None and on_tensors != isinstance(g, Tensor):
            g = Tensor._wrap(g, joined[i].kind) if on_tensors else g._data
        result.append(g)
    return tuple(result)


def _checked(replaced, original, joined, hook, kind, name):
    """A hook's replacement of ``original`` (``grad_input`` or ``grad_output``) as a tuple, each gradient of its
    tensor's shape and dtype; else an error naming the hook and both shapes (or dtypes)."""
    where = f"{kind} {hook_name(hook)}"
    if not isinstance(replaced, (tuple, list)):
        raise TypeError(f"{where} returned a {type(replaced).__name__}; expected None or a tuple of "
                        f"{len(original)} gradients ({name})")
    if len(replaced) != len(original):
        one_per = "positional argument" if name == "grad_input" else "output"
        raise RuntimeError(f"{where} returned {len(replaced)} gradients; expected {len(original)} ({name} has "
                           f"one per {one_per})")
    result = list(original)  # a position without a tensor that needs a gradient keeps its None
    for i, expected in joined.items():
        g = replaced[i]
        if g is None:
            result[i] = None
            continue
        array = g._data if isinstance(g, Tensor) else g
        if not backend.is_array(array):
            raise TypeError(f"{where} returned a {type(g).__name__} as {name}[{i}]; expected a Tensor, a backend "
                            "array or None")
        if array.shape != expected.shape:
            raise RuntimeError(f"{where} returned {name}[{i}] of shape {tuple(array.shape)}; expected "
                               f"{expected.shape}, the shape of the tensor it is the gradient of")
        if array.dtype != expected.dtype:
            raise RuntimeError(f"{where} returned {name}[{i}] of dtype {array.dtype}; expected {expected.dtype}, "
                               "the dtype of the tensor it is the gradient of")
        result[i] = g if isinstance(g, Tensor) else Tensor._wrap(array, expected.kind)
    return tuple(result)
