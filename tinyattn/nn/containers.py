"""Floor 5: containers of parameters, ``ParameterList`` and ``ParameterDict``, whose entries the parent module
registers (``weights.0``, ``scales.query``, …) as ``ModuleList`` registers modules. A tensor put in one becomes a
``Parameter`` (sharing its array), as in PyTorch.

>>> import tinyattn as ta
>>> from tinyattn import nn
>>> class Mixture(nn.Module):
...     def __init__(self):
...         super().__init__()
...         self.weights = nn.ParameterList([ta.ones(2), ta.zeros(3)])
>>> [name for name, _ in Mixture().named_parameters()]
['weights.0', 'weights.1']
"""

from ..engine import Tensor
from .module import Module, Parameter


def _as_parameter(value, where):
    if isinstance(value, Parameter):
        return value
    if isinstance(value, Tensor):
        return Parameter(value)
    raise TypeError(f"{where}: expected a Parameter or a Tensor, got {type(value).__name__}")


def _describe(value):
    """PyTorch's one-line description of a parameter in a container's ``repr``."""
    size = "x".join(str(s) for s in value.shape)
    return f"Parameter containing: [{value.dtype} of size {size}]"


class ParameterList(Module):
    """A list of parameters: ``params[i]``, ``len``, iteration, ``append``, ``extend``.

    >>> import tinyattn as ta
    >>> params = ParameterList([ta.zeros(2, 3)])
    >>> params.append(ta.ones(4))
    ParameterList(
        (0): Parameter containing: [float32 of size 2x3]
        (1): Parameter containing: [float32 of size 4]
    )
    >>> params[1].requires_grad, len(params)
    (True, 2)
    """

    def __init__(self, values=None):
        super().__init__()
        if values is not None:
            self.extend(values)

    def _index(self, index):
        length = len(self)
        if not -length <= index < length:
            raise IndexError(f"ParameterList: index {index} is out of range for {length} parameters")
        return str(index % length)

    def __getitem__(self, index):
        if isinstance(index, slice):
            return type(self)(list(self)[index])
        return getattr(self, self._index(index))

    def __setitem__(self, index, value):
        self.register_parameter(self._index(index), _as_parameter(value, "ParameterList"))

    def __len__(self):
        return len(self._parameters)

    def __iter__(self):
        return (getattr(self, str(i)) for i in range(len(self)))

    def __iadd__(self, values):
        return self.extend(values)

    def append(self, value):
        """Add ``value`` (a tensor made a ``Parameter``) at the end; returns the list."""
        self.register_parameter(str(len(self)), _as_parameter(value, "ParameterList.append"))
        return self

    def extend(self, values):
        """Append each of ``values``; returns the list."""
        for value in values:
            self.append(value)
        return self

    def forward(self, *args, **kwargs):
        raise NotImplementedError("ParameterList is a container, not a layer: use the parameters it holds")

    def extra_repr(self):
        return "\n".join(f"  ({i}): {_describe(value)}" for i, value in enumerate(self))


class ParameterDict(Module):
    """Parameters by name, in insertion order: ``params[name]``, ``in``, ``keys``, ``values``, ``items``,
    ``update``, ``pop``, ``get``.

    >>> import tinyattn as ta
    >>> params = ParameterDict({"scale": ta.ones(3)})
    >>> params["shift"] = ta.zeros(3)
    >>> list(params), "scale" in params
    (['scale', 'shift'], True)
    """

    def __init__(self, parameters=None):
        super().__init__()
        if parameters is not None:
            self.update(parameters)

    def __getitem__(self, key):
        if key not in self._parameters:
            raise KeyError(key)
        return getattr(self, key)

    def __setitem__(self, key, value):
        if not isinstance(key, str):
            raise TypeError(f"ParameterDict: keys must be strings, got {type(key).__name__}")
        self.register_parameter(key, _as_parameter(value, "ParameterDict"))

    def __delitem__(self, key):
        delattr(self, key)

    def __len__(self):
        return len(self._parameters)

    def __iter__(self):
        return iter(list(self._parameters))

    def __contains__(self, key):
        return key in self._parameters

    def keys(self):
        return list(self._parameters)

    def values(self):
        return [self[key] for key in self._parameters]

    def items(self):
        return [(key, self[key]) for key in self._parameters]

    def get(self, key, default=None):
        return self[key] if key in self else default

    def pop(self, key):
        """Remove ``key`` and return its parameter."""
        value = self[key]
        del self[key]
        return value

    def clear(self):
        for key in list(self._parameters):
            del self[key]

    def update(self, parameters):
        """Add or replace entries from a mapping or an iterable of ``(key, value)`` pairs."""
        pairs = parameters.items() if hasattr(parameters, "items") else parameters
        for key, value in pairs:
            self[key] = value

    def forward(self, *args, **kwargs):
        raise NotImplementedError("ParameterDict is a container, not a layer: use the parameters it holds")

    def extra_repr(self):
        return "\n".join(f"  ({key}): {_describe(value)}" for key, value in self.items())
