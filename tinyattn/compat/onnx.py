"""``torch.onnx``: importable (scripts import it at the top), with the export refused: export from PyTorch after
loading the weights there (``tinyattn.interop.to_torch`` maps the ``state_dict``).

>>> import tinyattn.compat as torch
>>> torch.onnx.is_in_onnx_export()
False
>>> torch.onnx.export(None, None, "model.onnx")
Traceback (most recent call last):
...
NotImplementedError: torch.onnx.export is not supported by tinyattn.compat: ...
"""

from .refusals import refused
from .scope import missing

_INSTEAD = ("tinyattn does not export models; export from PyTorch after loading the weights there "
            "(tinyattn.interop.to_torch maps the state_dict)")

export = refused("torch.onnx.export", _INSTEAD)
refusal = _INSTEAD  # the inventory counts torch.onnx as refused


def is_in_onnx_export():
    """False: nothing here is being exported."""
    return False


__all__ = ["export", "is_in_onnx_export"]


def __getattr__(name):
    raise missing(__name__, name)
