"""``torch.nn.init``: the native ``ta.nn.init``, which follows PyTorch already; a ``generator=`` is a
``torch.Generator`` here (the native functions take the NumPy generator behind it). The names without the trailing
underscore (``normal``, ``xavier_uniform``…) are PyTorch's deprecated aliases: they warn and call the new ones.

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
import warnings

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


def _deprecated(new):
    """PyTorch's deprecated alias of ``new`` without the underscore: it warns as torch does, then calls ``new``."""
    name = new.__name__[:-1]

    def alias(*args, **kwargs):
        warnings.warn(f"`nn.init.{name}` is now deprecated in favor of `nn.init.{new.__name__}`.", FutureWarning,
                      stacklevel=2)
        return new(*args, **kwargs)

    alias.__name__ = alias.__qualname__ = name
    alias.__doc__ = f"PyTorch's deprecated ``{name}``: warns, then ``{new.__name__}``."
    return alias


for _new in ("normal_", "uniform_", "constant_", "xavier_uniform_", "xavier_normal_", "kaiming_uniform_",
             "kaiming_normal_", "eye_", "dirac_", "orthogonal_", "sparse_"):
    globals()[_new[:-1]] = _deprecated(globals()[_new])
    __all__.append(_new[:-1])


def __getattr__(name):
    raise missing(__name__, name)
