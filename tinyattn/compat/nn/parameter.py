"""``torch.nn.parameter``: ``Parameter`` and ``Buffer``.

>>> import tinyattn.compat as torch
>>> torch.nn.parameter.Parameter is torch.nn.Parameter
True
"""

from ...nn.module import Buffer as _NativeBuffer
from ..core.tensor import Parameter, Tensor
from ..scope import missing


class Buffer(_NativeBuffer, Tensor):
    """``nn.Buffer``: registered as a (compat) buffer when assigned to a module's attribute."""

    __slots__ = ()


__all__ = ["Parameter", "Buffer"]


def __getattr__(name):
    raise missing(__name__, name)
