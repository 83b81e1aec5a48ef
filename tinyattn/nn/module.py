"""Floor 5: ``Module``, the stateful container of parameters, buffers and submodules.

A module registers what is assigned to it: a ``Parameter`` becomes a parameter, a
``Module`` a submodule, in the order of assignment (PyTorch's bookkeeping). From that
order come the dotted names of ``named_parameters()`` and ``state_dict()``, and the
tree that ``repr`` prints.

>>> import tinyattn as ta
>>> import tinyattn.nn as nn
>>> class TwoLayer(nn.Module):
...     def __init__(self):
...         super().__init__()
...         self.hidden = nn.Linear(3, 4)
...         self.out = nn.Linear(4, 2)
...     def forward(self, x):
...         return self.out(self.hidden(x).relu())
>>> model = TwoLayer()
>>> [name for name, _ in model.named_parameters()]
['hidden.weight', 'hidden.bias', 'out.weight', 'out.bias']
>>> model(ta.randn(5, 3)).shape
(5, 2)
>>> model
TwoLayer(
  (hidden): Linear(in_features=3, out_features=4, bias=True)
  (out): Linear(in_features=4, out_features=2, bias=True)
)
"""

import warnings
from collections import OrderedDict, namedtuple
from types import MappingProxyType

import numpy as np

from .. import backend
from ..engine import Tensor
from .hooks import BackwardHook, RemovableHandle, hook_name


class Parameter(Tensor):
    """A tensor that a module learns: ``requires_grad=True`` and registered on assignment.

    ``Parameter(data)`` shares ``data``'s array when given a tensor or a backend array.

    >>> import tinyattn as ta
    >>> import tinyattn.nn as nn
    >>> p = nn.Parameter(ta.zeros(2))
    >>> p.requires_grad, isinstance(p, ta.Tensor)
    (True, True)
    """

    __slots__ = ()

    def __init__(self, data, requires_grad=True):
        super().__init__(data, requires_grad=requires_grad)

    def __repr__(self):
        return "Parameter containing:\n" + super().__repr__()


class Buffer(Tensor):
    """A tensor that registers itself as a buffer when assigned to a module's attribute, ``persistent`` as
    ``register_buffer``'s (PyTorch's ``nn.Buffer``).

    >>> import tinyattn as ta
    >>> import tinyattn.nn as nn
    >>> m = nn.Module()
    >>> m.steps, m.table = nn.Buffer(ta.zeros(1)), nn.Buffer(ta.ones(2), persistent=False)
    >>> list(m.state_dict()), [name for name, _ in m.named_buffers()], type(m.steps).__name__
    (['steps'], ['steps', 'table'], 'Tensor')
    """

    __slots__ = ("persistent",)

    def __init__(self, data, *, persistent=True):
        super().__init__(data)
        self.persistent = persistent


_REGISTRATIONS = [0]  # counts registrations anywhere; a cached parameter list is valid while it is unchanged

IncompatibleKeys = namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])


def _addindent(text, spaces):
    """Indent every line of ``text`` but the first (how PyTorch nests reprs)."""
    lines = text.split("\n")
    if len(lines) == 1:
        return text
    return lines[0] + "\n" + "\n".join(" " * spaces + line for line in lines[1:])


_TORCH_LAYOUT_KEYS = ("in_proj_weight", "in_proj_bias", "q_proj_weight", "multihead_attn.")


def _host_copy(value):
    """A state-dict value (NumPy array, backend array, tensor, number) as a NumPy array."""
    if isinstance(value, Tensor):
        return value.numpy()
    if backend.is_array(value):
        return backend.to_numpy(value)
    return np.asarray(value)


_NO_HOOKS = MappingProxyType({})  # every hook table of a module that never had a hook (read-only, shared)
# PyTorch's names for a module's hook tables: hook id -> hook, in calling order; the *_with_kwargs and
# *_always_called tables hold the ids of the hooks registered with that option
_HOOK_TABLES = ("_forward_pre_hooks", "_forward_pre_hooks_with_kwargs", "_forward_hooks", "_forward_hooks_with_kwargs",
                "_forward_hooks_always_called", "_backward_pre_hooks", "_backward_hooks")


class Module:
    """Base class of every layer: subclasses set attributes in ``__init__`` and define ``forward``.

    A ``Parameter`` or a ``Module`` set as an attribute is registered under that name: ``parameters()``,
    ``state_dict()``, ``to()``, ``train()`` and ``eval()`` reach it, and its ``state_dict`` keys are the dotted
    attribute paths. Calling the module runs its hooks and ``forward``.

    >>> import tinyattn as ta
    >>> from tinyattn import nn
    >>> class TwoLayer(nn.Module):
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.hidden = nn.Linear(3, 4)
    ...         self.out = nn.Linear(4, 1)
    ...
    ...     def forward(self, x):
    ...         return self.out(self.hidden(x).relu())
    >>> model = TwoLayer()
    >>> model(ta.zeros(2, 3)).shape
    (2, 1)
    >>> list(model.state_dict())
    ['hidden.weight', 'hidden.bias', 'out.weight', 'out.bias']
    """

    _forward_pre_hooks = _forward_pre_hooks_with_kwargs = _forward_hooks = _forward_hooks_with_kwargs = _NO_HOOKS
    _forward_hooks_always_called = _backward_pre_hooks = _backward_hooks = _NO_HOOKS

    def __init__(self):
        object.__setattr__(self, "training", True)
        object.__setattr__(self, "_parameters", OrderedDict())
        object.__setattr__(self, "_buffers", OrderedDict())
        object.__setattr__(self, "_non_persistent_buffers", set())
        object.__setattr__(self, "_modules", OrderedDict())

    def forward(self, *args, **kwargs):
        raise NotImplementedError(f"{type(self).__name__} has no forward(); define it in the subclass")

    def __call__(self, *args, **kwargs):
        if self._has_hooks:
            return self._call_with_hooks(args, kwargs)
        return self.forward(*args, **kwargs)

    @property
    def _has_hooks(self):
        """Whether one of the module's hook tables is not empty."""
        return bool(self._forward_pre_hooks or self._forward_hooks or self._backward_pre_hooks or self._backward_hooks)

    # ----------------------------------------------------------------- registration

    def __setattr__(self, name, value):
        if "_parameters" not in self.__dict__:
            raise AttributeError(
                f"cannot assign {name!r} before Module.__init__() has run: call super().__init__() first"
            )
        if isinstance(value, Buffer):
            for table in (self._parameters, self._modules):
                table.pop(name, None)
            self.register_buffer(name, value.detach(), persistent=value.persistent)  # a plain tensor, as registered
            return
        if isinstance(value, (Parameter, Module)):
            for table in (self._parameters, self._buffers, self._modules):
                table.pop(name, None)
            self._non_persistent_buffers.discard(name)
            (self._parameters if isinstance(value, Parameter) else self._modules)[name] = value
            self._registered(name, value)
            return
        for table, kind, expected in ((self._parameters, "parameter", "an nn.Parameter"),
                                      (self._modules, "submodule", "a Module"),
                                      (self._buffers, "buffer", "a Tensor")):
            if name in table:
                if value is not None and not (table is self._buffers and isinstance(value, Tensor)):
                    raise TypeError(
                        f"cannot assign a {type(value).__name__} as {kind} {name!r} of {type(self).__name__} "
                        f"({expected} or None expected)"
                    )
                table[name] = value
                self._registered(name, value)
                return
        object.__setattr__(self, name, value)

    def _registered(self, name, value):
        """Mirror a registered entry in the instance dict, so that ``module.name`` is a plain
        attribute lookup, and invalidate every cached parameter list."""
        object.__setattr__(self, name, value)
        _REGISTRATIONS[0] += 1

    def __getattr__(self, name):
        # only called when normal lookup fails (a table changed behind __setattr__'s back)
        tables = self.__dict__.get("_parameters"), self.__dict__.get("_buffers"), self.__dict__.get("_modules")
        for table in tables:
            if table is not None and name in table:
                return table[name]
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def __delattr__(self, name):
        for table in (self._parameters, self._buffers, self._modules):
            if name in table:
                del table[name]
                self._non_persistent_buffers.discard(name)
                self.__dict__.pop(name, None)
                _REGISTRATIONS[0] += 1
                return
        object.__delattr__(self, name)

    def register_parameter(self, name, param):
        """Register ``param`` (a ``Parameter`` or ``None``) under ``name``."""
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(
                f"register_parameter({name!r}): expected an nn.Parameter or None, got {type(param).__name__}"
            )
        self._parameters[name] = param
        self._registered(name, param)

    def register_buffer(self, name, tensor, persistent=True):
        """Register a tensor that is state but not a parameter (no gradient, moved by ``to``).

        A persistent buffer is in ``state_dict()``; a non-persistent one (a table computed
        from the constructor's arguments) is not.
        """
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"register_buffer({name!r}): expected a Tensor or None, got {type(tensor).__name__}")
        self._buffers[name] = tensor
        self._registered(name, tensor)
        if persistent:
            self._non_persistent_buffers.discard(name)
        else:
            self._non_persistent_buffers.add(name)

    def add_module(self, name, module):
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"add_module({name!r}): expected a Module or None, got {type(module).__name__}")
        self._modules[name] = module
        self._registered(name, module)

    # ----------------------------------------------------------------- hooks

    def register_forward_pre_hook(self, hook, *, prepend=False, with_kwargs=False):
        """Call ``hook(module, args)`` before each ``forward``: it returns ``None``, or the positional arguments
        ``forward`` gets instead (a tuple; a single value is made a one-element tuple). With ``with_kwargs=True``
        it is ``hook(module, args, kwargs)`` and returns ``None`` or ``(args, kwargs)``.

        Hooks run in the order they were registered; ``prepend=True`` puts this one before the others. Returns
        a handle whose ``remove()`` takes the hook off (also a context manager), as ``torch.nn.Module``'s.
        """
        return self._add_hook("_forward_pre_hooks", hook, prepend,
                              ("_forward_pre_hooks_with_kwargs",) if with_kwargs else ())

    def register_forward_hook(self, hook, *, prepend=False, with_kwargs=False, always_call=False):
        """Call ``hook(module, args, output)`` after each ``forward``: it returns ``None``, or the output the call
        returns instead. With ``with_kwargs=True`` it is ``hook(module, args, kwargs, output)``; with
        ``always_call=True`` it runs even when ``forward`` raises (with ``output`` ``None``; the error is then
        raised on). ``prepend`` and the returned handle as in ``register_forward_pre_hook``.

        The hook fires on a compiled model too (``ta.compile``): a fused parent layer that would compute a
        hooked module inside one node runs its reference ``forward`` instead, and ``ta.explain`` says so.

        >>> import tinyattn as ta
        >>> import tinyattn.nn as nn
        >>> layer = nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0)
        >>> seen = []
        >>> handle = layer.self_attn.register_forward_hook(lambda module, args, output: seen.append(output[0].shape))
        >>> _ = layer(ta.randn(2, 3, 8))                   # (B, L, E)
        >>> seen
        [(2, 3, 8)]
        >>> handle.remove()
        >>> _ = layer(ta.randn(2, 3, 8))
        >>> len(seen)
        1
        """
        flags = ("_forward_hooks_with_kwargs",) * with_kwargs + ("_forward_hooks_always_called",) * always_call
        return self._add_hook("_forward_hooks", hook, prepend, flags)

    def register_full_backward_pre_hook(self, hook, prepend=False):
        """Call ``hook(module, grad_output)`` when the gradients of the module's outputs have come, before they
        go on into the module: ``grad_output`` is a tuple of tensors (``None`` for an output that got none), one
        per output; the hook returns ``None`` or the tuple that goes on instead (gradients of the outputs' shapes
        and dtypes, tensors or backend arrays). ``prepend`` and the returned handle as in
        ``register_forward_pre_hook``."""
        return self._add_hook("_backward_pre_hooks", hook, prepend, ())

    def register_full_backward_hook(self, hook, prepend=False):
        """Call ``hook(module, grad_input, grad_output)`` when the gradients of the module's inputs are computed:
        ``grad_input`` has one entry per positional argument of the call, the gradient (a tensor) of a Tensor
        argument that needs one, else ``None``; ``grad_output`` one per output (the entries of a tuple, or the
        one output). The hook returns ``None`` or a tuple of as many gradients, which go on instead (each of its
        input's shape and dtype, tensors or backend arrays). When no input needs a gradient, the hook is called
        with ``grad_input`` all ``None`` as soon as ``grad_output`` is known. Keyword arguments get no entry, as
        in PyTorch. ``prepend`` and the returned handle as in ``register_forward_pre_hook``."""
        return self._add_hook("_backward_hooks", hook, prepend, ())

    def _add_hook(self, table, hook, prepend, flags):
        if not callable(hook):
            raise TypeError(f"{type(self).__name__}: a hook must be callable, got a {type(hook).__name__}")
        self.own_hook_tables()
        handle = RemovableHandle(self, (table, *flags))
        hooks = self.__dict__[table]
        hooks[handle.id] = hook
        if prepend:
            hooks.move_to_end(handle.id, last=False)
        for flag in flags:
            self.__dict__[flag][handle.id] = True
        return handle

    def own_hook_tables(self):
        """Give the module hook tables of its own, in place of the empty ones all modules share (done at the
        first hook; ``ta.compile`` does it so that a compiled copy and its original share their tables)."""
        if "_forward_hooks" not in self.__dict__:
            for name in _HOOK_TABLES:
                object.__setattr__(self, name, OrderedDict())

    def _remove_hook(self, hook_id, tables):
        """Take the hook ``hook_id`` out of ``tables`` (``RemovableHandle.remove``)."""
        for name in tables:
            self.__dict__.get(name, {}).pop(hook_id, None)

    def _call_with_hooks(self, args, kwargs):
        """``__call__`` of a module with hooks, in PyTorch's order: the forward pre-hooks, the inputs' side of the
        backward hooks, ``forward``, the forward hooks, the outputs' side of the backward
        hooks. If anything raises, the forward hooks registered with ``always_call`` that have not run yet run."""
        result, called = None, set()
        try:
            for hook_id, hook in self._forward_pre_hooks.items():
                if hook_id in self._forward_pre_hooks_with_kwargs:
                    replaced = hook(self, args, kwargs)
                    if replaced is not None:
                        if not (isinstance(replaced, tuple) and len(replaced) == 2):
                            raise RuntimeError(f"forward pre-hook {hook_name(hook)} (with_kwargs=True) must return "
                                               f"None or a tuple (new_args, new_kwargs), but got {replaced!r:.80}")
                        args, kwargs = replaced
                else:
                    replaced = hook(self, args)
                    if replaced is not None:
                        args = replaced if isinstance(replaced, tuple) else (replaced,)
            backward_hook = None
            if self._backward_hooks or self._backward_pre_hooks:
                backward_hook = BackwardHook(self, list(self._backward_hooks.values()),
                                             list(self._backward_pre_hooks.values()))
                args = backward_hook.setup_input_hook(args)
            result = self.forward(*args, **kwargs)
            for hook_id, hook in self._forward_hooks.items():
                called.add(hook_id)
                replaced = self._call_forward_hook(hook_id, hook, args, kwargs, result)
                if replaced is not None:
                    result = replaced
            if backward_hook is not None:
                result = backward_hook.setup_output_hook(result)
            return result
        except Exception:
            for hook_id, hook in self._forward_hooks.items():
                if hook_id in self._forward_hooks_always_called and hook_id not in called:
                    try:
                        self._call_forward_hook(hook_id, hook, args, kwargs, result)
                    except Exception as error:
                        warnings.warn(f"forward hook {hook_name(hook)} (always_call=True) raised an error that was "
                                      f"silenced, as another error was raised in forward: {error}", stacklevel=3)
            raise

    def _call_forward_hook(self, hook_id, hook, args, kwargs, result):
        if hook_id in self._forward_hooks_with_kwargs:
            return hook(self, args, kwargs, result)
        return hook(self, args, result)

    # ----------------------------------------------------------------- traversal

    def named_modules(self, memo=None, prefix=""):
        """``(dotted name, module)`` for this module and every descendant, each once, depth first."""
        memo = set() if memo is None else memo
        if self in memo:
            return
        memo.add(self)
        yield prefix, self
        for name, module in self._modules.items():
            if module is not None:
                yield from module.named_modules(memo, f"{prefix}.{name}" if prefix else name)

    def modules(self):
        for _, module in self.named_modules():
            yield module

    def named_children(self):
        seen = set()
        for name, module in self._modules.items():
            if module is not None and module not in seen:
                seen.add(module)
                yield name, module

    def children(self):
        for _, module in self.named_children():
            yield module

    def _named_members(self, table, prefix, recurse):
        seen = set()
        modules = self.named_modules(prefix=prefix) if recurse else [(prefix, self)]
        for module_prefix, module in modules:
            for name, value in getattr(module, table).items():
                if value is None or value in seen:
                    continue
                seen.add(value)
                yield (f"{module_prefix}.{name}" if module_prefix else name), value

    def named_parameters(self, prefix="", recurse=True):
        """``(dotted name, parameter)`` in registration order; a shared parameter appears once."""
        if prefix or not recurse:
            return self._named_members("_parameters", prefix, recurse)
        return iter(self._all_parameters())

    def parameters(self, recurse=True):
        return (param for _, param in self.named_parameters(recurse=recurse))

    def _all_parameters(self):
        """The list of ``named_parameters()``, cached until the next registration anywhere."""
        cached = self.__dict__.get("_parameters_cache")
        if cached is None or cached[0] != _REGISTRATIONS[0]:
            cached = (_REGISTRATIONS[0], list(self._named_members("_parameters", "", True)))
            object.__setattr__(self, "_parameters_cache", cached)
        return cached[1]

    def named_buffers(self, prefix="", recurse=True):
        yield from self._named_members("_buffers", prefix, recurse)

    def buffers(self, recurse=True):
        for _, buffer in self.named_buffers(recurse=recurse):
            yield buffer

    def apply(self, fn):
        """Call ``fn`` on every submodule, then on this module (as PyTorch does); returns self."""
        for module in self.children():
            module.apply(fn)
        fn(self)
        return self

    # ----------------------------------------------------------------- modes and gradients

    def train(self, mode=True):
        """Training mode (dropout active) for this module and all its descendants."""
        if not isinstance(mode, bool):
            raise ValueError(f"train(mode): mode must be a bool, got {mode!r}")
        for module in self.modules():
            object.__setattr__(module, "training", mode)
        return self

    def eval(self):
        """Evaluation mode: ``train(False)``."""
        return self.train(False)

    def zero_grad(self, set_to_none=True):
        """Forget the accumulated gradients (``None``, or zeros with ``set_to_none=False``)."""
        for _, param in self._all_parameters():
            if set_to_none or param._grad is None:
                param._grad = None
            else:
                param._grad[...] = 0

    def requires_grad_(self, requires_grad=True):
        for param in self.parameters():
            param.requires_grad_(requires_grad)
        return self

    # ----------------------------------------------------------------- device and dtype

    def to(self, *args, device=None, dtype=None):
        """Move every parameter and buffer to a device (``"cpu"``, ``"cuda"``) and/or cast the
        floating-point ones to a dtype, in place: the ``Parameter`` objects stay the same, so an
        optimizer built before ``to`` still holds them. Returns ``self``. As in PyTorch, the
        targets may be given positionally (``to("cuda")``, ``to(ta.float64)``) or by keyword.

        >>> import tinyattn as ta
        >>> import tinyattn.nn as nn
        >>> layer = nn.Linear(2, 2).to(ta.float64)
        >>> layer.weight.dtype, layer.bias.dtype
        (dtype('float64'), dtype('float64'))
        """
        for arg in args:
            if isinstance(arg, str):
                device = arg
            else:
                dtype = arg
        if device is not None and device not in backend.DEVICES:
            raise ValueError(f"to(): unknown device {device!r}, expected one of {backend.DEVICES}")
        if dtype is not None:
            dtype = np.dtype(dtype)
            if dtype.kind != "f":
                raise TypeError(f"Module.to() only casts to floating-point dtypes, got {dtype}")

        def convert(array):
            if device is not None:
                array = backend.to_device(array, device)
            if dtype is not None and array.dtype.kind == "f":
                array = array.astype(dtype, copy=False)
            return array

        for module in self.modules():
            for tensor in list(module._parameters.values()) + list(module._buffers.values()):
                if tensor is None:
                    continue
                tensor._data = convert(tensor._data)
                if tensor._grad is not None:
                    tensor._grad = convert(tensor._grad)
        return self

    def float(self):
        return self.to(np.float32)

    def double(self):
        return self.to(np.float64)

    def cpu(self):
        return self.to("cpu")

    def cuda(self):
        return self.to("cuda")

    # ----------------------------------------------------------------- state

    def _state_tensors(self):
        """Dotted name -> tensor for every parameter and persistent buffer, in state-dict order."""
        state = OrderedDict()
        for prefix, module in self.named_modules():
            dot = prefix + "." if prefix else ""
            for name, param in module._parameters.items():
                if param is not None:
                    state[dot + name] = param
            for name, buffer in module._buffers.items():
                if buffer is not None and name not in module._non_persistent_buffers:
                    state[dot + name] = buffer
        return state

    def state_dict(self):
        """An ordered dict of dotted name -> NumPy array (a host copy) for parameters and
        persistent buffers.

        >>> import tinyattn.nn as nn
        >>> {name: value.shape for name, value in nn.Linear(2, 3).state_dict().items()}
        {'weight': (3, 2), 'bias': (3,)}
        """
        return OrderedDict((name, tensor.numpy()) for name, tensor in self._state_tensors().items())

    def load_state_dict(self, state_dict, strict=True):
        """Copy values into the existing parameters and buffers, on their device and dtype.

        Everything is checked before anything is written: missing keys (with ``strict``),
        unexpected keys (with ``strict``) and shape mismatches (always) raise one
        ``RuntimeError`` naming them all, and then no parameter has changed. Returns
        ``(missing_keys, unexpected_keys)`` as PyTorch does.

        >>> import tinyattn.nn as nn
        >>> a, b = nn.Linear(2, 2), nn.Linear(2, 2)
        >>> b.load_state_dict(a.state_dict())
        IncompatibleKeys(missing_keys=[], unexpected_keys=[])
        >>> bool((a.weight.numpy() == b.weight.numpy()).all())
        True
        """
        own = self._state_tensors()
        missing = [name for name in own if name not in state_dict]
        unexpected = [name for name in state_dict if name not in own]
        values, mismatched = {}, []
        for name, tensor in own.items():
            if name not in state_dict:
                continue
            try:
                value = _host_copy(state_dict[name])
            except (ValueError, TypeError):  # a ragged list, an object NumPy cannot hold
                mismatched.append(f"value error for {name}: a {type(state_dict[name]).__name__} that is not "
                                  "a rectangular numeric array")
                continue
            if value.shape != tensor.shape:
                mismatched.append(
                    f"size mismatch for {name}: copying a value of shape {value.shape}, "
                    f"the parameter in the current model has shape {tensor.shape}"
                )
                continue
            if value.dtype.kind not in "biuf":
                mismatched.append(f"dtype mismatch for {name}: a value of dtype {value.dtype} is not numeric")
                continue
            values[name] = value
        problems = []
        if strict and missing:
            problems.append("Missing key(s) in state_dict: " + ", ".join(f'"{k}"' for k in missing) + ".")
        if strict and unexpected:
            problems.append("Unexpected key(s) in state_dict: " + ", ".join(f'"{k}"' for k in unexpected) + ".")
            if any(marker in k for k in unexpected for marker in _TORCH_LAYOUT_KEYS):
                problems.append("These keys follow PyTorch's layout (in_proj_weight, multihead_attn...): convert "
                                "the state dict with ta.interop.from_torch(state_dict) first.")
        problems += mismatched
        if problems:
            raise RuntimeError(
                f"Error(s) in loading state_dict for {type(self).__name__}:\n\t" + "\n\t".join(problems)
            )
        arrays = {}  # first every host -> device copy, so that a failure here leaves the model untouched
        for name, value in values.items():
            target = own[name]._data
            arrays[name] = backend.to_device(value.astype(target.dtype, copy=False), backend.device_of(target))
        for name, array in arrays.items():
            own[name]._data[...] = array
        return IncompatibleKeys(missing, unexpected)

    # ----------------------------------------------------------------- repr

    def extra_repr(self):
        """The module's own settings, printed inside its parentheses (override in layers)."""
        return ""

    def __repr__(self):
        extra = self.extra_repr()
        extra_lines = extra.split("\n") if extra else []
        child_lines = [f"({name}): " + _addindent(repr(module), 2) for name, module in self._modules.items()]
        lines = extra_lines + child_lines
        text = type(self).__name__ + "("
        if lines:
            if len(extra_lines) == 1 and not child_lines:
                text += extra_lines[0]
            else:
                text += "\n  " + "\n  ".join(lines) + "\n"
        return text + ")"
