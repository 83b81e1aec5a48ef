"""Parametrizations: a module's tensor computed, at each access, from another (PyTorch's
``torch.nn.utils.parametrize``).

    register_parametrization(layer, "weight", P)      layer.weight  =  P(layer.parametrizations.weight.original)

The tensor stops being a parameter of the module: its value before becomes ``original`` (or, where ``P`` has a
``right_inverse``, what that gives: one tensor, or several as ``original0``, ``original1``…), held with the
parametrizations in ``layer.parametrizations[name]``, a ``ParametrizationList``. The module's class becomes a
subclass (``ParametrizedLinear``) with a property of that name, whose getter runs the list and whose setter runs
``right_inverse``. Gradients flow to ``original`` through ``P``, as they would through any function; the
state dict holds ``parametrizations.weight.original``, PyTorch's keys.

>>> import tinyattn as ta
>>> class Symmetric(ta.nn.Module):
...     def forward(self, x):
...         return x.triu() + x.triu(1).transpose(0, 1)
>>> layer = ta.nn.Linear(3, 3)
>>> _ = register_parametrization(layer, "weight", Symmetric())
>>> w = layer.weight
>>> bool((w == w.T).all()), type(layer).__name__, sorted(layer.state_dict())
(True, 'ParametrizedLinear', ['bias', 'parametrizations.weight.original'])
"""

import contextlib
import threading

from ..engine import Tensor, no_grad
from .layers import ModuleList
from .module import Module, Parameter

_CACHE = threading.local()  # ``cached()``: the values computed inside the block, per thread


class ParametrizationList(ModuleList):
    """The parametrizations of one tensor, applied in order to ``original`` (or ``original0``, ``original1``… when
    the first one's ``right_inverse`` gives several tensors).

    >>> import tinyattn as ta
    >>> layer = ta.nn.Linear(2, 2)
    >>> plist = register_parametrization(layer, "weight", ta.nn.Identity()).parametrizations.weight
    >>> type(plist).__name__, plist.original.shape
    ('ParametrizationList', (2, 2))
    """

    def __init__(self, modules, original, unsafe=False):
        super().__init__(modules)
        self.unsafe = unsafe
        first = modules[0]
        with no_grad():
            value = first.right_inverse(original) if hasattr(first, "right_inverse") else original
        self.is_tensor = isinstance(value, Tensor)
        values = [value] if self.is_tensor else list(value)
        for i, v in enumerate(values):
            name = "original" if self.is_tensor else f"original{i}"
            if v is original and isinstance(original, Parameter):
                setattr(self, name, original)  # the same parameter object, as PyTorch keeps it
            elif isinstance(original, Parameter):
                setattr(self, name, type(original)(v.detach(), requires_grad=original.requires_grad))
            else:
                self.register_buffer(name, v.detach())
        self.ntensors = len(values)

    def originals(self):
        """The unparametrised tensors, ``(original,)`` or ``(original0, original1, …)``."""
        if self.is_tensor:
            return (self.original,)
        return tuple(getattr(self, f"original{i}") for i in range(self.ntensors))

    def forward(self):
        x = self[0](*self.originals())
        for parametrization in list(self)[1:]:
            x = parametrization(x)
        return x

    def right_inverse(self, value):
        """Set the originals so that the list gives ``value`` (each parametrization's ``right_inverse``, last first)."""
        with no_grad():
            for parametrization in reversed(list(self)):
                if hasattr(parametrization, "right_inverse"):
                    value = parametrization.right_inverse(value)
                elif parametrization is not self[0] or self.is_tensor is False:
                    raise RuntimeError(f"parametrization {type(parametrization).__name__} has no right_inverse, so "
                                       "the parametrized tensor cannot be assigned")
            values = [value] if self.is_tensor else list(value)
            for original, v in zip(self.originals(), values):
                original.copy_(v)


class ParametrizationDict(Module):
    """``module.parametrizations``: a ``ParametrizationList`` per parametrized tensor, by name."""

    def __getitem__(self, name):
        return self._modules[name]

    def __contains__(self, name):
        return name in self._modules

    def __iter__(self):
        return iter(self._modules)

    def __len__(self):
        return len(self._modules)


def _parametrized_property(name):
    def get(module):
        cache = getattr(_CACHE, "values", None)
        if cache is None:
            return module.parametrizations[name]()
        key = (id(module), name)
        if key not in cache:
            cache[key] = module.parametrizations[name]()
        return cache[key]

    def set_(module, value):
        module.parametrizations[name].right_inverse(value)

    return property(get, set_)


def _parametrized_class(module):
    """The subclass of ``module``'s class that parametrized tensors' properties live on (made once per module)."""
    cls = type(module)
    if getattr(cls, "is_parametrized_class", False):
        return cls

    def __setattr__(self, name, value):
        if name in type(self).parametrized_names:
            return type(self).__dict__[name].fset(self, value)
        return cls.__setattr__(self, name, value)

    return type(f"Parametrized{cls.__name__}", (cls,), {
        "is_parametrized_class": True, "parametrized_names": frozenset(), "__setattr__": __setattr__,
        "__module__": cls.__module__, "__doc__": cls.__doc__, "original_class": cls})


def register_parametrization(module, tensor_name, parametrization, *, unsafe=False):
    """Make ``module.<tensor_name>`` be ``parametrization(original)``, computed at each access; a second call on
    the same tensor appends to its list. Returns the module.

    Args:
        module: the module owning the tensor (a parameter or a buffer).
        tensor_name: its name.
        parametrization: a module whose ``forward`` maps the original to the tensor, optionally with a
            ``right_inverse`` (the original for a given tensor).
        unsafe: skip the check that the parametrization keeps the tensor's shape and dtype.

    >>> import tinyattn as ta
    >>> class Positive(ta.nn.Module):
    ...     def forward(self, x):
    ...         return x.exp()
    ...     def right_inverse(self, y):
    ...         return y.log()
    >>> layer = ta.nn.Linear(2, 2)
    >>> _ = ta.nn.init.ones_(layer.bias)                 # a positive bias, which Positive's inverse takes
    >>> layer = register_parametrization(layer, "bias", Positive())
    >>> layer.bias = ta.tensor([1.0, 2.0])              # stored as log([1, 2])
    >>> layer.bias, layer.parametrizations.bias.original
    (tensor([1., 2.], grad_fn=<Exp>), Parameter containing:
    tensor([0.       , 0.6931472], requires_grad=True))
    """
    if is_parametrized(module, tensor_name):
        plist = module.parametrizations[tensor_name]
        plist.append(parametrization)
        if not unsafe:
            _check_keeps_shape(module, tensor_name, plist.original if plist.is_tensor else None)
        return module
    original = getattr(module, tensor_name)
    if not isinstance(original, Tensor):
        raise ValueError(f"register_parametrization: {type(module).__name__}.{tensor_name} is not a parameter or "
                         f"a buffer, got {type(original).__name__}")
    plist = ParametrizationList([parametrization], original, unsafe=unsafe)
    delattr(module, tensor_name)
    if not is_parametrized(module):
        parametrized = _parametrized_class(module)
        object.__setattr__(module, "__class__", parametrized)
        module.parametrizations = ParametrizationDict()
    cls = type(module)
    setattr(cls, tensor_name, _parametrized_property(tensor_name))
    cls.parametrized_names = cls.parametrized_names | {tensor_name}
    module.parametrizations.add_module(tensor_name, plist)
    if not unsafe:
        _check_keeps_shape(module, tensor_name, original)
    return module


def _check_keeps_shape(module, tensor_name, original):
    value = getattr(module, tensor_name)
    if original is not None and (value.shape != original.shape or value.dtype != original.dtype):
        raise ValueError(f"register_parametrization: the parametrization changes {tensor_name}'s shape or dtype "
                         f"({original.shape} {original.dtype} -> {value.shape} {value.dtype}); pass unsafe=True if "
                         "that is meant")


def is_parametrized(module, tensor_name=None):
    """Whether ``module`` has a parametrized tensor (named ``tensor_name``, where given).

    >>> import tinyattn as ta
    >>> layer = ta.nn.Linear(2, 2)
    >>> is_parametrized(layer), is_parametrized(register_parametrization(layer, "weight", ta.nn.Identity()), "bias")
    (False, False)
    """
    parametrizations = module.__dict__.get("parametrizations")
    if not isinstance(parametrizations, ParametrizationDict):
        return False
    return len(parametrizations) > 0 if tensor_name is None else tensor_name in parametrizations


def remove_parametrizations(module, tensor_name, leave_parametrized=True):
    """Undo ``register_parametrization`` on ``tensor_name``: the tensor becomes a parameter (or buffer) again,
    holding its parametrized value (``leave_parametrized=True``) or the original. Returns the module.

    >>> import tinyattn as ta
    >>> layer = register_parametrization(ta.nn.Linear(2, 2), "weight", ta.nn.Identity())
    >>> type(remove_parametrizations(layer, "weight")).__name__, sorted(layer.state_dict())
    ('Linear', ['bias', 'weight'])
    """
    if not is_parametrized(module, tensor_name):
        raise ValueError(f"Module {type(module).__name__} does not have a parametrization on {tensor_name}")
    plist = module.parametrizations[tensor_name]
    originals = plist.originals()
    if leave_parametrized:
        with no_grad():
            value = getattr(module, tensor_name)
    elif plist.is_tensor:
        value = originals[0]
    else:
        raise ValueError("Cannot leave unparametrized (`leave_parametrized=False`) a tensor that is parametrized "
                         "in terms of a sequence of tensors.")
    cls = type(module)
    delattr(cls, tensor_name)
    cls.parametrized_names = cls.parametrized_names - {tensor_name}
    del module.parametrizations._modules[tensor_name]
    first = originals[0]
    if isinstance(first, Parameter):
        restored = value if isinstance(value, Parameter) else type(first)(value.detach(), first.requires_grad)
        module.register_parameter(tensor_name, restored)
    else:
        module.register_buffer(tensor_name, value.detach())
    if not is_parametrized(module):
        del module.parametrizations
        object.__setattr__(module, "__class__", cls.original_class)
    return module


def type_before_parametrizations(module):
    """The module's class before any parametrization (``Linear`` for a ``ParametrizedLinear``).

    >>> import tinyattn as ta
    >>> layer = register_parametrization(ta.nn.Linear(2, 2), "weight", ta.nn.Identity())
    >>> type_before_parametrizations(layer).__name__
    'Linear'
    """
    return getattr(type(module), "original_class", type(module)) if is_parametrized(module) else type(module)


@contextlib.contextmanager
def cached():
    """Inside the block, each parametrized tensor is computed once, at its first access, and reused (this thread).

    >>> import tinyattn as ta
    >>> layer = register_parametrization(ta.nn.Linear(2, 2), "weight", ta.nn.Identity())
    >>> with cached():
    ...     layer.weight is layer.weight
    True
    """
    outer = getattr(_CACHE, "values", None)
    if outer is None:
        _CACHE.values = {}
    try:
        yield
    finally:
        if outer is None:
            _CACHE.values = None


__all__ = ["register_parametrization", "remove_parametrizations", "is_parametrized", "type_before_parametrizations",
           "cached", "ParametrizationList"]
