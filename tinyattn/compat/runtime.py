"""torch's process-level queries and settings that scripts call at the top: threads, the version module, the
default generator and device, the legacy typed tensors, ``typename``; what cannot hold here is refused.

>>> import tinyattn.compat as torch
>>> torch.version.cuda is None, torch.get_num_threads() >= 1, torch.typename(torch.zeros(1))
(True, True, 'torch.FloatTensor')
"""

import operator
import os
import types

import numpy as np

from .core.random import Generator
from .refusals import refused

_THREADS = {"intra": None, "inter": None}  # what a script asked for: recorded, as NumPy's BLAS sets its own


def get_num_threads():
    """The threads a script set with ``set_num_threads``, else the machine's CPU count (BLAS's default)."""
    return _THREADS["intra"] or os.cpu_count() or 1


def set_num_threads(int):  # noqa: A002  (torch's parameter name)
    """Recorded (``get_num_threads`` returns it); NumPy's BLAS takes its thread count from the environment
    (``OMP_NUM_THREADS``) when it loads, so nothing changes in this process."""
    _THREADS["intra"] = _positive("set_num_threads", int)


def get_num_interop_threads():
    """The threads a script set with ``set_num_interop_threads``, else the CPU count."""
    return _THREADS["inter"] or os.cpu_count() or 1


def set_num_interop_threads(int):  # noqa: A002  (torch's parameter name)
    """Recorded; tinyattn runs operations one after another on the calling thread."""
    _THREADS["inter"] = _positive("set_num_interop_threads", int)


def _positive(name, n):
    n = operator.index(n)
    if n <= 0:
        raise RuntimeError(f"{name} expects a positive integer, got {n}")
    return n


def init_num_threads():
    """Nothing to initialise: NumPy's BLAS starts its threads itself."""


version = types.ModuleType("torch.version", "torch's build facts: a CPU build, with no CUDA or ROCm.")
__version__ = "2.13.0+tinyattn"  # the torch API compat follows, as a local version (PEP 440): >= 2.13.0
version.__version__ = __version__
version.cuda = version.hip = version.xpu = None
version.debug = False
version.git_version = "tinyattn.compat"

has_lapack, has_mkl, has_openmp, has_spectral = True, False, False, False  # NumPy brings LAPACK, nothing else

default_generator = Generator()  # the generator a script seeds as torch.default_generator.manual_seed(0)

def get_default_device():
    """``cpu``: tensors are made on the host unless a ``device=`` says otherwise."""
    from .core.devices import device

    return device("cpu")


set_default_device = refused("torch.set_default_device", "tensors are made on the host; pass device= to the "
                                                         "creation functions, or move them with .to(device)")
set_default_tensor_type = refused("torch.set_default_tensor_type", "pass dtype= and device= to the creation "
                                  "functions, or call .double() / .to(device) on the model")
set_flush_denormal = refused("torch.set_flush_denormal", "NumPy keeps the CPU's denormal handling as it is")


def typename(obj):
    """torch's type name of a tensor (``torch.FloatTensor``) or of anything else (its class's qualified name)."""
    from ..engine import Tensor

    if isinstance(obj, Tensor):
        names = {np.float32: "Float", np.float64: "Double", np.float16: "Half", np.int64: "Long", np.int32: "Int",
                 np.int16: "Short", np.int8: "Char", np.uint8: "Byte", np.bool_: "Bool"}
        prefix = "torch.cuda." if obj.device == "cuda" else "torch."
        return f"{prefix}{names.get(obj.dtype.type, obj.dtype.name)}Tensor"
    cls = obj if isinstance(obj, type) else type(obj)
    return cls.__qualname__ if cls.__module__ in ("builtins", "__builtin__") else f"{cls.__module__}.{cls.__qualname__}"


_WARN_ALWAYS = [False]


def set_warn_always(b):
    """Recorded: torch's warnings are warned once here as everywhere in Python (``warnings`` filters decide)."""
    _WARN_ALWAYS[0] = bool(b)


def is_warn_always_enabled():
    return _WARN_ALWAYS[0]


_DETERMINISM = {"mode": 0}


def set_deterministic_debug_mode(debug_mode):
    """Recorded: every tinyattn operation is deterministic on the host."""
    modes = {"default": 0, "warn": 1, "error": 2}
    _DETERMINISM["mode"] = modes[debug_mode] if isinstance(debug_mode, str) else int(debug_mode)


def get_deterministic_debug_mode():
    return _DETERMINISM["mode"]


def is_deterministic_algorithms_warn_only_enabled():
    """False: ``use_deterministic_algorithms(True, warn_only=True)`` has nothing to warn about here."""
    return False


class OutOfMemoryError(RuntimeError):
    """torch's out-of-memory error (``torch.OutOfMemoryError``, ``torch.cuda.OutOfMemoryError``)."""


def is_autocast_enabled(device_type=None):
    """False: compat's ``autocast`` never casts (it is refused where it would)."""
    return False


def get_autocast_dtype(device_type):
    """The dtype ``autocast`` would choose by default: float16 on CUDA, bfloat16 on the CPU, as torch's."""
    from .functions import bfloat16, float16

    return float16 if str(device_type) == "cuda" else bfloat16


def get_device_module(device=None):
    """The module of a device type: ``torch.cuda`` for ``cuda``, ``torch.cpu`` for ``cpu``."""
    import importlib

    name = str(device or "cuda").split(":")[0]
    if name in ("cuda", "cpu"):
        return getattr(importlib.import_module("tinyattn.compat"), name)
    raise RuntimeError(f"Device '{name}' does not have a corresponding module registered as 'torch.{name}'.")


__all__ = ["__version__", "get_num_threads", "set_num_threads", "get_num_interop_threads", "set_num_interop_threads",
           "init_num_threads", "version", "has_lapack", "has_mkl", "has_openmp", "has_spectral", "default_generator",
           "get_default_device", "set_default_device", "set_default_tensor_type", "set_flush_denormal", "typename",
           "set_warn_always", "is_warn_always_enabled", "set_deterministic_debug_mode",
           "get_deterministic_debug_mode", "is_deterministic_algorithms_warn_only_enabled", "OutOfMemoryError",
           "is_autocast_enabled", "get_autocast_dtype", "get_device_module"]

