"""``torch.save`` / ``torch.load`` and ``torch.serialization``'s allowlist, without pickle.

Checkpoints are tinyattn's ``.npz`` archives with a manifest (``tinyattn.save``): nested dicts,
lists and tuples of tensors, arrays, numbers, strings, ``None`` and ``argparse.Namespace``; paths or
open binary files. ``load`` returns tensors as NumPy arrays (``Module.load_state_dict`` and the
optimizers take them as they are).

A whole model (``torch.save(model, f)``) is stored as its class, its constructor's arguments and
its ``state_dict()``. ``torch.load`` rebuilds it only for a class the caller allowlists, as torch's
``weights_only`` loading does for the classes in a pickle, or with ``weights_only=False`` for any class it can
import:

>>> import io
>>> import tinyattn.compat as torch
>>> buffer = io.BytesIO()
>>> torch.save(torch.nn.Linear(3, 2), buffer)
>>> _ = buffer.seek(0)
>>> torch.load(buffer)  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
_pickle.UnpicklingError: Weights only load failed: the checkpoint holds a whole tinyattn.compat.nn.Linear ...
>>> _ = buffer.seek(0)
>>> with torch.serialization.safe_globals([torch.nn.Linear]):
...     model = torch.load(buffer)
>>> model
Linear(in_features=3, out_features=2, bias=True)
"""

import contextlib
import enum
import pickle
import shutil
import tempfile
import warnings

import numpy as np

from .. import serialization as _native
from .nn.module import Module, class_path
from .refusals import refused

__all__ = ["save", "load", "safe_globals", "add_safe_globals", "get_safe_globals", "clear_safe_globals",
           "LoadEndianness", "SourceChangeWarning", "check_module_version_greater_or_equal", "mkdtemp",
           "get_crc32_options", "set_crc32_options", "get_default_load_endianness", "set_default_load_endianness",
           "get_default_mmap_options", "set_default_mmap_options", "StorageType", "default_restore_location",
           "get_unsafe_globals_in_checkpoint", "location_tag", "normalize_storage_type", "register_package",
           "skip_data", "storage_to_tensor_type", "validate_cuda_device", "validate_hpu_device"]

_SAFE_GLOBALS = []  # classes allowed everywhere (add_safe_globals)
_SCOPED = []  # classes allowed inside the active safe_globals blocks


def save(obj, f, pickle_module=None, pickle_protocol=2, _use_new_zipfile_serialization=True,
         _disable_byteorder_record=False):
    """Write ``obj`` to ``f`` (a path or an open binary file); see the module."""
    if pickle_module is not None:
        raise ValueError("torch.save: tinyattn.compat never pickles; leave pickle_module unset")
    _native.save(obj, f)


def load(f, map_location=None, pickle_module=None, *, weights_only=None, mmap=None, **pickle_load_args):
    """What ``save`` wrote to ``f``. ``map_location`` may name the CPU (everything loads there).

    A whole model comes back for an allowlisted class (``safe_globals``); with ``weights_only=False``, torch's
    escape hatch, for any class its record names that can be imported, as torch's unpickler imports it. Either
    way the class is called with the constructor arguments the checkpoint records and loads its ``state_dict``:
    nothing in the file is executed.
    """
    if pickle_module is not None:
        raise ValueError("torch.load: tinyattn.compat never unpickles; leave pickle_module unset")
    _check_location(map_location)
    return _native.load(f, rebuild=_rebuild_any if weights_only is False else _rebuild)


def _check_location(map_location):
    from . import cuda

    name = str(map_location) if isinstance(map_location, str) or hasattr(map_location, "type") else ""
    if name.startswith("cuda") and not cuda.is_available():
        raise RuntimeError("Attempting to deserialize object on a CUDA device but torch.cuda.is_available() is False. "
                           "If you are running on a CPU-only machine, please use torch.load with "
                           "map_location=torch.device('cpu') to map your storages to the CPU.")


def _imported_class(path):
    """The class ``module.QualName`` names, imported; an error that says which one otherwise."""
    import importlib

    module_name, _, qualname = path.rpartition(".")
    while module_name:
        try:
            target = importlib.import_module(module_name)
            break
        except ModuleNotFoundError:  # the class is nested: its qualname has a dot
            module_name, _, outer = module_name.rpartition(".")
            qualname = f"{outer}.{qualname}"
    else:
        raise pickle.UnpicklingError(f"torch.load(weights_only=False): cannot import the saved class {path}")
    for part in qualname.split("."):
        target = getattr(target, part, None)
        if target is None:
            raise pickle.UnpicklingError(f"torch.load(weights_only=False): {module_name} has no class {qualname} "
                                         f"(the checkpoint holds a whole {path} model)")
    return target


def _rebuild_any(path, init, state):
    return _rebuild(path, init, state, cls=_imported_class(path))


def _rebuild(path, init, state, cls=None):
    allowed = {class_path(cls): cls for cls in _SAFE_GLOBALS + _SCOPED}
    cls = cls or allowed.get(path)
    if cls is None:
        name = path.rsplit(".", 1)[-1]
        raise pickle.UnpicklingError(
            f"Weights only load failed: the checkpoint holds a whole {path} model, which is rebuilt only for an "
            f"allowlisted class: with torch.serialization.safe_globals([{name}]): torch.load(f) "
            f"(or torch.serialization.add_safe_globals([{name}])). Or save model.state_dict() and load it into a "
            "model built in code."
        )
    model = cls(*init["args"], **init["kwargs"])
    if isinstance(model, Module):
        _load_state(model, state["state_dict"])
        for name, module in model.named_modules():
            if name in state["training"]:
                object.__setattr__(module, "training", state["training"][name])
    return model


def _load_state(model, state_dict):
    """Load ``state_dict``, first casting the model to the dtype its floating-point values were saved in."""
    dtypes = {np.asarray(v).dtype for v in state_dict.values() if np.asarray(v).dtype.kind == "f"}
    own = {p.dtype for p in model.parameters() if p.dtype.kind == "f"}
    if len(dtypes) == 1 and dtypes != own:
        model.to(dtypes.pop())
    model.load_state_dict(state_dict)


class safe_globals(contextlib.ContextDecorator):
    """``with torch.serialization.safe_globals([MyModel]):``: the classes ``load`` may rebuild in the block."""

    def __init__(self, safe_globals):
        self.classes = [item[0] if isinstance(item, tuple) else item for item in safe_globals]

    def __enter__(self):
        _SCOPED.extend(self.classes)
        return self

    def __exit__(self, *exc):
        del _SCOPED[len(_SCOPED) - len(self.classes):]
        return False


def add_safe_globals(safe_globals):
    """Allow ``load`` to rebuild these classes from now on."""
    _SAFE_GLOBALS.extend(item[0] if isinstance(item, tuple) else item for item in safe_globals)


def get_safe_globals():
    return list(_SAFE_GLOBALS)


def clear_safe_globals():
    _SAFE_GLOBALS.clear()


# ----------------------------------------------------------------------------- torch's settings and helpers


class LoadEndianness(enum.Enum):
    NATIVE, LITTLE, BIG = 1, 2, 3


class SourceChangeWarning(Warning):
    """torch's warning that a pickled module's source changed since it was saved (never raised here: no pickle)."""


_SETTINGS = {"crc32": True, "endianness": None, "mmap_flags": None}


def get_crc32_options():
    """Whether ``save`` computes checksums: always, here (the archive's manifest carries one per array)."""
    return _SETTINGS["crc32"]


def set_crc32_options(compute_crc32):
    """Stored for ``get_crc32_options``; the ``.npz`` manifest keeps its checksums either way."""
    _SETTINGS["crc32"] = bool(compute_crc32)


def get_default_load_endianness():
    return _SETTINGS["endianness"]


def set_default_load_endianness(endianness):
    """Stored for ``get_default_load_endianness``; the ``.npz`` arrays carry their own byte order."""
    if endianness is not None and not isinstance(endianness, LoadEndianness):
        raise TypeError("Invalid argument type in function set_default_load_endianness")
    _SETTINGS["endianness"] = endianness


def get_default_mmap_options():
    return _SETTINGS["mmap_flags"]


def set_default_mmap_options(flags):
    """Stored for ``get_default_mmap_options``; ``load`` reads the archive whole (no ``mmap``)."""
    _SETTINGS["mmap_flags"] = flags


def check_module_version_greater_or_equal(module, req_version_tuple, error_if_malformed=True):
    """Whether ``module.__version__`` (``"x.y.z"``) is at least ``req_version_tuple``, as torch's."""
    try:
        parts = module.__version__.split(".")
        version = tuple(type(field)(parts[i]) for i, field in enumerate(req_version_tuple))
        return version >= req_version_tuple
    except Exception as error:
        message = (f"'{module.__name__}' module version string is malformed '{module.__version__}' and cannot be "
                   f"compared with tuple {req_version_tuple}")
        if error_if_malformed:
            raise RuntimeError(message) from error
        warnings.warn(message + ", but continuing assuming that requirement is met", stacklevel=2)
        return True


@contextlib.contextmanager
def mkdtemp():
    """A temporary directory's path for the block, removed after it."""
    path = tempfile.mkdtemp()
    try:
        yield path
    finally:
        shutil.rmtree(path)


_STORAGES = "compat's checkpoints hold arrays, not torch storages"
StorageType = refused("torch.serialization.StorageType", _STORAGES)
default_restore_location = refused("torch.serialization.default_restore_location", _STORAGES + "; pass map_location")
location_tag = refused("torch.serialization.location_tag", _STORAGES)
normalize_storage_type = refused("torch.serialization.normalize_storage_type", _STORAGES)
storage_to_tensor_type = refused("torch.serialization.storage_to_tensor_type", _STORAGES)
register_package = refused("torch.serialization.register_package",
                           "load's devices are 'cpu' and 'cuda' alone; pass map_location")
validate_cuda_device = refused("torch.serialization.validate_cuda_device", _STORAGES + "; pass map_location")
validate_hpu_device = refused("torch.serialization.validate_hpu_device", "compat reaches no HPU")
get_unsafe_globals_in_checkpoint = refused(
    "torch.serialization.get_unsafe_globals_in_checkpoint",
    "compat's checkpoints are .npz archives without pickle: the classes a whole model needs are named in its "
    "error at load; a torch pickle is not read here")
skip_data = refused("torch.serialization.skip_data", "compat's save writes the arrays always; save a state_dict "
                                                     "of the parts you need")
