"""Floor 1: gradient hooks (``Tensor.register_hook``, ``retain_grad``) and the handle that removes one.

A leaf's hooks live on the tensor, a non-leaf's on its node (``Function.hooks``); the graph walk runs them on the
gradient as it passes (``Hooks.run``), under ``no_grad`` unless the walk records a graph (``create_graph``).
"""

import itertools
import weakref

from . import backend, modes
from .grad_mode import no_grad


class Hooks:
    """The hooks of one tensor's gradient, in order (``Tensor.register_hook``); ``tensor_type``: the engine's
    ``Tensor``, which a hook's result must be (or an array)."""

    def __init__(self, tensor, tensor_type):
        self.tensor_shape, self.hooks, self.retain = tensor.shape, {}, None
        self.kind = type(tensor)  # a hook sees a gradient of its tensor's class (``Tensor._wrap``)
        self.tensor_type = tensor_type

    def run(self, grad):
        """``grad`` (an array, or a tensor under ``create_graph``) after every hook has seen or replaced it."""
        if backend.is_array(grad):
            with no_grad():  # (as PyTorch runs them outside create_graph)
                return self._run(grad)
        return self._run(grad)

    def _run(self, grad):
        as_tensor = not backend.is_array(grad)
        current = grad if as_tensor else self.kind._wrap(grad, self.kind)
        for hook in list(self.hooks.values()):
            result = hook(current)
            if result is not None:
                current = self._checked(hook, result, current)
        if self.retain is not None:
            t = self.retain()
            if t is not None and as_tensor:  # create_graph: the retained gradient keeps its graph
                kept = t._grad_graph is not None and t._grad_graph._data is t._grad
                total = current.clone() if t._grad is None else \
                    (t._grad_graph if kept else self.kind._wrap(t._grad)) + current
                t._grad, t._grad_graph = total._data, total
            elif t is not None:
                t._grad = current._data.copy() if t._grad is None else t._grad + current._data
        return current if as_tensor else current._data

    def _checked(self, hook, result, current):
        if not isinstance(result, self.tensor_type):
            if not backend.is_array(result):
                raise TypeError(f"hook {_name_of(hook)} returned {type(result).__name__}; a gradient hook returns "
                                f"None or a tensor of shape {self.tensor_shape}")
            result = self.kind._wrap(result, self.kind)
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


class TensorHooks:
    """The engine's ``Tensor``'s methods for hooks on its gradient (the class it derives from)."""

    __slots__ = ()

    def register_hook(self, hook):
        """``hook(grad) -> None or a new gradient``, called with this tensor's gradient (a tensor) each time one
        is computed, before it goes further (a leaf: before it is added to ``.grad``). Returns a handle whose
        ``remove()`` takes the hook away.

        >>> import tinyattn as ta
        >>> x = ta.tensor([1.0, 2.0], requires_grad=True)
        >>> handle = (y := x * 3).register_hook(lambda g: g * 10)   # y's gradient, replaced on its way to x
        >>> y.sum().backward()
        >>> x.grad
        array([30., 30.], dtype=float32)
        """
        if not self.requires_grad:
            raise RuntimeError("register_hook: cannot register a hook on a tensor that does not require grad")
        table = self._gradient_hooks()
        handle = RemovableHandle(table.hooks)
        table.hooks[handle.id] = hook
        return handle

    def retain_grad(self):
        """Keep this non-leaf tensor's gradient in ``.grad`` (an array) during ``backward()``; a leaf keeps it.

        >>> import tinyattn as ta
        >>> x = ta.tensor([1.0, 2.0], requires_grad=True)
        >>> y = x * 3                     # a non-leaf: its gradient passes through and is dropped
        >>> y.retain_grad()
        >>> (y * y).sum().backward()
        >>> y.grad                        # d(sum y²)/dy = 2y
        array([ 6., 12.], dtype=float32)
        >>> x.grad                        # 2y · 3
        array([18., 36.], dtype=float32)
        """
        if modes.inside_transform():
            raise RuntimeError("retain_grad() inside a function transformed by ta.func (grad, vjp, jacrev, vmap…) is "
                               "refused, as torch.func refuses it: return the value (has_aux=True) and take its "
                               "gradient with the transform")
        if not self.requires_grad:
            raise RuntimeError("retain_grad: cannot retain the gradient of a tensor that does not require grad")
        if self._ctx is not None:
            self._gradient_hooks().retain = weakref.ref(self)

    @property
    def retains_grad(self):
        """Whether ``retain_grad()`` was called on this non-leaf tensor, so that ``backward()`` keeps its
        gradient in ``.grad``; ``False`` for a leaf, which keeps its gradient without it (as in PyTorch).

        >>> import tinyattn as ta
        >>> x = ta.tensor([1.0, 2.0], requires_grad=True)
        >>> y = x * 3
        >>> y.retains_grad
        False
        >>> y.retain_grad()
        >>> y.retains_grad, x.retains_grad
        (True, False)
        """
        table = None if self._ctx is None else self._ctx.hooks
        return table is not None and table.retain is not None and table.retain() is self

    def _gradient_hooks(self):
        """The ``hooks.Hooks`` of this tensor's gradient, made on first use: a leaf's on it, a non-leaf's on its
        node."""
        if self._ctx is None:
            self._hooks = self._hooks or Hooks(self, TensorHooks)
            return self._hooks
        self._ctx.hooks = self._ctx.hooks or Hooks(self, TensorHooks)
        return self._ctx.hooks
