"""compat's ``nn.Module``: the native one with PyTorch's state-dict layout and compat parameters, and the
record ``torch.save(model, f)`` keeps of it. A leaf of ``compat.nn``: its layers (``__init__``, ``rnn``)
subclass it from here, and ``compat.serialization`` reads its records.
"""

from collections import OrderedDict

import numpy as np

from ... import nn as _native
from ...fast.compile import compile_in_place
from ...interop import from_torch, to_torch
from ..core.tensor import as_compat


class Module(_native.Module):
    """The native ``Module`` whose ``state_dict`` and ``load_state_dict`` speak PyTorch's key layout, and
    whose parameters and buffers are compat's (``.data`` and ``.grad`` as tensors), a native submodule's too.

    Each module records its class and its constructor's arguments as it is made, so that
    ``torch.save(model, f)`` can store the whole model without pickle, and ``torch.load(f)`` can
    rebuild it for a class the caller allowlists (``torch.serialization.safe_globals``)."""

    def __new__(cls, *args, **kwargs):
        module = super().__new__(cls)
        object.__setattr__(module, "_constructor_arguments", (args, kwargs))
        return module

    def __checkpoint_record__(self):
        """``(class path, {"args", "kwargs"}, {"state_dict", "training"})``: what ``torch.save(model, f)``
        stores. Constructor arguments must be numbers, strings, ``None`` or lists, tuples and dicts of them."""
        args, kwargs = self.__dict__.get("_constructor_arguments", ((), {}))
        for where, value in _walk_arguments(args, kwargs):
            if not (value is None or isinstance(value, (bool, int, float, str))):
                raise TypeError(
                    f"torch.save: {type(self).__name__}'s constructor got {where} = {type(value).__name__} "
                    f"{value!r:.60}; a whole model is saved as its class and constructor arguments, which must be "
                    "numbers, strings, None, or lists and dicts of them. Save model.state_dict() instead and "
                    "build the model in code before loading it"
                )
        training = {name: module.training for name, module in self.named_modules()}
        return (class_path(type(self)), {"args": list(args), "kwargs": dict(kwargs)},
                {"state_dict": self.state_dict(), "training": training})

    def _registered(self, name, value):
        super()._registered(name, as_compat(value))

    def to(self, *args, device=None, dtype=None, non_blocking=False):
        """``model.to(device or dtype, non_blocking=False)``, as in torch (``non_blocking`` is moot on the host)."""
        return super().to(*args, device=device, dtype=dtype)

    def get_submodule(self, target):
        """The submodule at the dotted path ``target`` (``""`` is this module)."""
        module = self
        for i, name in enumerate(target.split(".") if target else []):
            if name not in module._modules:
                where = ".".join(target.split(".")[:i]) or "the model"
                raise AttributeError(f"{type(module).__name__} ({where}) has no attribute `{name}`")
            module = module._modules[name]
        return module

    def get_parameter(self, target):
        """The parameter at the dotted path ``target``."""
        return self._dotted_member(target, "_parameters", "parameter")

    def get_buffer(self, target):
        """The buffer at the dotted path ``target``."""
        return self._dotted_member(target, "_buffers", "buffer")

    def _dotted_member(self, target, table, kind):
        path, _, name = target.rpartition(".")
        module = self.get_submodule(path)
        if name not in getattr(module, table):
            raise AttributeError(f"`{name}` is not an nn.{kind.capitalize()}" if hasattr(module, name)
                                 else f"{type(module).__name__} has no attribute `{name}`")
        return getattr(module, table)[name]

    def register_module(self, name, module):
        """``add_module``'s other name."""
        self.add_module(name, module)

    def half(self):
        """Floating-point parameters and buffers cast to float16."""
        return self.to(np.float16)

    def bfloat16(self):
        raise TypeError("bfloat16 has no NumPy dtype, so tinyattn.compat cannot hold it; use .float() or .half()")

    def compile(self, *args, **kwargs):
        """``nn.Module.compile``: compiles the module in place (``ta.compile``'s fused forms, its arguments
        accepted and unused): each of its modules that has a fused form takes that form's class."""
        compile_in_place(self)

    def share_memory(self):
        """For worker processes; compat loads data in one process, so there is nothing to share: ``self``."""
        return self

    def state_dict(self):
        return OrderedDict(to_torch(super().state_dict()))

    def load_state_dict(self, state_dict, strict=True):
        """Keys this module has (``MultiheadAttention``'s own ``in_proj_weight``…) load as they are; the
        rest go through ``interop.from_torch`` into the native layers' layout."""
        own = self._state_tensors()
        kept = {name: value for name, value in state_dict.items() if name in own}
        converted = from_torch({name: value for name, value in state_dict.items() if name not in own})
        return super().load_state_dict({**kept, **converted}, strict=strict)


def class_path(cls):
    """``module.QualName``: how a checkpoint names a class (and how an allowlist matches it)."""
    return f"{cls.__module__}.{cls.__qualname__}"


def _walk_arguments(args, kwargs):
    """``(where, value)`` for every leaf of a constructor's arguments."""
    stack = [(f"argument {i}", a) for i, a in enumerate(args)] + [(f"argument {k!r}", v) for k, v in kwargs.items()]
    while stack:
        where, value = stack.pop()
        if isinstance(value, (list, tuple)):
            stack.extend((f"{where}[{i}]", v) for i, v in enumerate(value))
        elif isinstance(value, dict):
            for key, v in value.items():
                if not isinstance(key, str):
                    yield f"{where} key", key
                stack.append((f"{where}[{key!r}]", v))
        else:
            yield where, value
