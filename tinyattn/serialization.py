"""Checkpoints: ``save`` and ``load`` of state dicts as NumPy ``.npz`` archives.

A checkpoint is a zip archive holding one ``NAME.npy`` member per entry: the format
``np.savez`` writes and ``np.load`` reads, so any NumPy opens it without tinyattn. Pickle is
off both ways: ``save`` refuses object arrays, ``load`` reads with ``allow_pickle=False``.

``save`` is atomic. The archive is written to a temporary file in the target's folder,
flushed and fsynced, and only then renamed onto the target with ``os.replace`` (atomic on
POSIX and Windows). A crash mid-write leaves the previous checkpoint as it was.

>>> import os, tempfile
>>> import numpy as np
>>> import tinyattn as ta
>>> with tempfile.TemporaryDirectory() as folder:
...     path = os.path.join(folder, "model.ckpt")
...     ta.save({"linear.weight": ta.ones(2, 3), "step": np.array(7)}, path)
...     checkpoint = ta.load(path)
>>> list(checkpoint), checkpoint["linear.weight"].dtype, int(checkpoint["step"])
(['linear.weight', 'step'], dtype('float32'), 7)
"""

import collections
import contextlib
import numbers
import os
import secrets
import zipfile
import zlib

import numpy as np

from . import backend
from .tensor import Tensor


def save(state_dict, path):
    """Write ``state_dict`` (name -> array) to ``path`` as an ``.npz`` archive, atomically.

    Values may be NumPy arrays, tensors or backend arrays (copied to the host explicitly)
    or numbers (stored as 0-d arrays). The file is exactly ``path``: unlike ``np.savez``, no
    ``.npz`` is appended. Entries keep their order.
    """
    path = os.fspath(path)
    if not hasattr(state_dict, "items"):
        raise TypeError(f"save: expected a mapping of names to arrays (a state_dict), got {type(state_dict).__name__}")
    arrays = [(_checked_name(name), _host_array(name, value)) for name, value in state_dict.items()]
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise FileNotFoundError(f"save: cannot write {path!r}: the folder {folder!r} does not exist")
    temporary = os.path.join(folder, f".{os.path.basename(path)}.{secrets.token_hex(6)}.tmp")
    # 0o666 before the umask: the checkpoint gets the permissions of any new file, not mkstemp's 0o600
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
    try:
        with os.fdopen(descriptor, "wb") as file:
            _write_archive(file, arrays)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.remove(temporary)
        raise
    _fsync_folder(folder)


def load(path):
    """The state dict saved at ``path``: an ``OrderedDict`` of NumPy arrays, in saved order.

    A missing file raises ``FileNotFoundError``; a file that is not a readable ``.npz``
    archive (garbage, truncated, pickled data) raises ``ValueError``; both name the file.
    """
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"load: no checkpoint at {path!r}: the file does not exist")
    if os.path.isdir(path):
        raise IsADirectoryError(f"load: {path!r} is a folder, expected a checkpoint file written by tinyattn.save")
    if not zipfile.is_zipfile(path):
        raise ValueError(
            f"load: {path!r} is not a tinyattn checkpoint: expected a NumPy .npz (zip) archive, "
            "the file is not a zip archive (garbage or truncated?)"
        )
    try:
        with np.load(path, allow_pickle=False) as archive:
            state_dict = collections.OrderedDict((name, archive[name]) for name in archive.files)
        for name, value in state_dict.items():
            if not isinstance(value, np.ndarray):  # NpzFile hands back other members as raw bytes
                raise ValueError(f"its member {name!r} is not a NumPy array (.npy)")
        return state_dict
    except (zipfile.BadZipFile, ValueError, EOFError, zlib.error) as error:
        raise ValueError(f"load: {path!r} is not a readable tinyattn checkpoint (.npz archive): {error}") from error


def _checked_name(name):
    if not isinstance(name, str):
        raise TypeError(f"save: state_dict keys must be strings, got {name!r} of type {type(name).__name__}")
    return name


def _host_array(name, value):
    """``value`` as a NumPy array on the host; never an object array (that would need pickle)."""
    if isinstance(value, Tensor):
        array = value.numpy()
    elif isinstance(value, np.ndarray):
        array = value
    elif backend.is_array(value):
        array = backend.to_numpy(value)
    elif isinstance(value, (numbers.Number, np.generic)):
        array = np.asarray(value)
    else:
        raise TypeError(
            f"save: the value of {name!r} is a {type(value).__name__}; expected an array, a tensor or a number. "
            "A checkpoint is a flat mapping of names to arrays, such as a module's state_dict()"
        )
    if array.dtype.hasobject:
        raise TypeError(
            f"save: the value of {name!r} is an array of Python objects (dtype {array.dtype}); "
            "checkpoints hold numeric arrays only, because loading objects would need pickle"
        )
    return array


def _write_archive(file, arrays):
    """What ``np.savez`` writes, one ``NAME.npy`` per entry. (``np.savez(file, **arrays)``
    would clash with entries named ``file`` or ``allow_pickle``, hence the zip by hand.)"""
    with zipfile.ZipFile(file, mode="w", compression=zipfile.ZIP_STORED, allowZip64=True) as archive:
        for name, array in arrays:
            with archive.open(name + ".npy", mode="w", force_zip64=True) as member:
                np.lib.format.write_array(member, array, allow_pickle=False)


def _fsync_folder(folder):
    """Make the rename itself durable (POSIX; a folder cannot be opened this way on Windows)."""
    try:
        descriptor = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(descriptor)
    except OSError:
        pass
    finally:
        os.close(descriptor)
