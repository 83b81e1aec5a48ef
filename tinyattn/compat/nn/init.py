"""``torch.nn.init``: the native ``ta.nn.init``, which follows PyTorch already; a ``generator=`` is a
``torch.Generator`` here (the native functions take the NumPy generator behind it).

>>> import tinyattn.compat as torch
>>> torch.nn.init.zeros_(torch.ones(2))
tensor([0., 0.])
>>> g = torch.Generator().manual_seed(0)
>>> a = torch.nn.init.normal_(torch.empty(3), generator=g)
>>> bool((a == torch.nn.init.normal_(torch.empty(3), generator=g.manual_seed(0))).all())
True
"""

import functools
import inspect

from ...nn import init as _native
from ..core.random import numpy_generator
from ..scope import missing

__all__ = list(_native.__all__)


def _taking_torch_generators(function):
    """``function`` with its ``generator`` argument (a ``torch.Generator``) turned into the NumPy one behind it."""
    parameters = list(inspect.signature(function).parameters)
    if "generator" not in parameters:
        return function
    position = parameters.index("generator")

    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        if len(args) > position:
            args = (*args[:position], numpy_generator(args[position]), *args[position + 1:])
        elif "generator" in kwargs:
            kwargs["generator"] = numpy_generator(kwargs["generator"])
        return function(*args, **kwargs)

    return wrapper


globals().update({name: _taking_torch_generators(getattr(_native, name)) for name in __all__})


def __getattr__(name):
    raise missing(__name__, name)
