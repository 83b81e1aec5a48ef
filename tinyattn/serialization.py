"""Checkpoints: ``save`` and ``load`` of nested training state as NumPy ``.npz`` archives.

A checkpoint holds what resuming a run needs, in one file::

    ta.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
             "scheduler": scheduler.state_dict(), "epoch": 3, "rng": ta.get_rng_state()}, path)

Values may be dicts (keys: strings, or integers such as an optimizer's parameter indices),
lists and tuples of values, arrays (NumPy, CuPy, strict), tensors, NumPy scalars, and Python
``None``, ``bool``, ``int``, ``float``, ``complex`` and ``str``. ``load`` returns the same
structure: every dict as an ``OrderedDict`` in saved order, lists as lists, tuples as tuples,
integer keys as integers, tensors and arrays as NumPy arrays (dtype, shape and bytes exact),
NumPy scalars as NumPy scalars, Python values as themselves (floats bit for bit, NaN and -0.0
included).

The file is a zip archive that any NumPy opens without tinyattn (``np.load``), no pickle
either way: one ``NAME.npy`` member per array, named by its keys joined with ``/``
(``model/linear.weight``), and first of all the member ``tinyattn_manifest.json``: the tree
of the whole structure, with the plain values in place and, for every array, its member,
dtype, shape and the CRC32 of its bytes. The zip comment marks the file as carrying a
manifest.

``load`` verifies everything before returning anything: the members are exactly those the
manifest lists (a damaged zip directory can hide members from ``np.load``), each member's zip
CRC, and each array's dtype, shape and CRC32 against the manifest. Anything else raises
``CheckpointError`` (``ta.CheckpointError``, a ``ValueError``) naming the file and, where it
can, the key: a damaged, truncated, empty or foreign file is refused, never loaded in part.
Checkpoints written before the manifest existed (plain ``np.savez`` archives) still load; see
``load``. ``benchmarks/checkpoint_corruption.py`` loads a small checkpoint truncated at every
length and with each single bit flipped.

Two more kinds of value go in, for ``tinyattn.compat``'s ``torch.save``: an
``argparse.Namespace`` (a script's arguments, kept in its checkpoint; it comes back as one), and
an object that records how to rebuild itself (``__checkpoint_record__()`` returning its class
path, its constructor's arguments and its state). ``load`` rebuilds such an object only through
the ``rebuild`` function its caller passes (``tinyattn.compat.load`` passes one that admits the
classes the caller allowlisted); without one it refuses, naming the class.

``save`` and ``load`` take an open binary file as well as a path (``with open(p, "wb") as f:
save(obj, f)``); writing into a file object the caller opened cannot be atomic.

``save`` to a path is atomic. The archive is written to a temporary file in the target's folder,
flushed and fsynced, and only then renamed onto the target with ``os.replace`` (atomic on
POSIX and Windows). A crash mid-write leaves the previous checkpoint as it was.

>>> import os, tempfile
>>> import numpy as np
>>> import tinyattn as ta
>>> with tempfile.TemporaryDirectory() as folder:
...     path = os.path.join(folder, "model.ckpt")
...     ta.save({"model": {"linear.weight": ta.ones(2, 3)}, "epoch": 7, "betas": (0.9, 0.999)}, path)
...     checkpoint = ta.load(path)
>>> checkpoint["model"]["linear.weight"].dtype, checkpoint["epoch"], checkpoint["betas"]
(dtype('float32'), 7, (0.9, 0.999))
"""

import argparse
import collections
import collections.abc
import contextlib
import io
import json
import math
import os
import secrets
import struct
import time
import unicodedata
import zipfile
import zlib

import numpy as np

from . import backend
from .engine import Tensor

MANIFEST = "tinyattn_manifest.json"
FORMAT = "tinyattn checkpoint 1"
COMMENT = b"tinyattn checkpoint: verify against its member tinyattn_manifest.json"


class CheckpointError(ValueError):
    """A file that is not a whole tinyattn checkpoint (damaged, truncated, empty or foreign); a ``ValueError``.

    >>> import io
    >>> import tinyattn as ta
    >>> try:
    ...     ta.load(io.BytesIO(b"not a checkpoint"))
    ... except ta.CheckpointError:
    ...     print("refused")
    refused
    """


def save(obj, path):
    """Write ``obj`` (nested dicts, lists, tuples, arrays, tensors, numbers, strings, ``None``)
    to ``path`` as an ``.npz`` archive with a checksummed manifest, atomically.

    ``path`` is a ``str``, ``bytes`` or ``os.PathLike``; the file is exactly ``path`` (unlike
    ``np.savez``, no ``.npz`` is appended). Dict keys must be strings without control
    characters, or integers; anything that could not come back as it went in (another key
    type, an object array, a set, an arbitrary object) raises ``TypeError`` or ``ValueError``
    naming where it sits, and nothing is written.

    Args:
        obj: the structure to save (a ``state_dict``, or a dict of model, optimizer, epoch…).
        path: the file, or an open binary file.

    >>> import io
    >>> import tinyattn as ta
    >>> buffer = io.BytesIO()
    >>> ta.save({"weight": ta.ones(2), "step": 3}, buffer)
    >>> _ = buffer.seek(0)
    >>> ta.load(buffer)
    OrderedDict([('weight', array([1., 1.], dtype=float32)), ('step', 3)])
    """
    if hasattr(path, "write"):  # an open binary file
        manifest, arrays = _manifest(obj)
        buffer = io.BytesIO()
        _write_archive(buffer, manifest, arrays)
        path.write(buffer.getvalue())
        return
    path = _path(path, "save")
    manifest, arrays = _manifest(obj)
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise FileNotFoundError(f"save: cannot write {path!r}: the folder {folder!r} does not exist")
    temporary = os.path.join(folder, f".{os.path.basename(path)}.{secrets.token_hex(6)}.tmp")
    # 0o666 before the umask: the checkpoint gets the permissions of any new file, not mkstemp's 0o600
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
    try:
        with os.fdopen(descriptor, "wb") as file:
            _write_archive(file, manifest, arrays)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.remove(temporary)
        raise
    _fsync_folder(folder)


def _manifest(obj):
    """The manifest's bytes and the ``(member, array)`` pairs of ``obj``'s arrays."""
    arrays = []  # (where, host array, manifest node), in the order the tree walk meets them
    root = _encode(obj, (), arrays, set())
    for (_, _, node), member in zip(arrays, _member_names([where for where, _, _ in arrays])):
        node["array"] = member
    manifest = json.dumps({"format": FORMAT, "root": root}, ensure_ascii=True, allow_nan=True)
    return manifest.encode("ascii"), [(node["array"], array) for _, array, node in arrays]


def load(path, *, rebuild=None):
    """The structure saved at ``path``, verified against its manifest (see the module's docstring).

    ``path`` is a ``str``, ``bytes`` or ``os.PathLike``, or an open binary file. A missing file raises
    ``FileNotFoundError``, a folder ``IsADirectoryError``; a file that is not a whole
    checkpoint raises ``CheckpointError`` (a ``ValueError``); each names the file.

    Files written before checkpoints carried a manifest (a flat ``np.savez`` archive of
    arrays, as ``save`` wrote a module's ``state_dict``) still load, as an ``OrderedDict`` of
    NumPy arrays; only their members' zip CRCs can be checked, so such a file whose zip
    directory lost members cannot be told from a smaller one.

    An object saved with its rebuild record comes back as ``rebuild(class_path, init, state)``
    (``init``: ``{"args": [...], "kwargs": {...}}``); without ``rebuild`` a ``TypeError`` names it.

    Args:
        path: the file, or an open binary file.
        rebuild: a function ``rebuild(class_path, init, state)`` for objects saved with a rebuild record.

    >>> import io
    >>> import tinyattn as ta
    >>> buffer = io.BytesIO()
    >>> ta.save({"epoch": 2, "losses": [0.5, 0.25]}, buffer)
    >>> _ = buffer.seek(0)
    >>> ta.load(buffer)
    OrderedDict([('epoch', 2), ('losses', [0.5, 0.25])])
    """
    if hasattr(path, "read"):  # an open binary file
        name = getattr(path, "name", None) or f"<{type(path).__name__}>"
        root, arrays = _verified(io.BytesIO(path.read()), str(name))
        return _decode(root, arrays, rebuild)
    path = _path(path, "load")
    if not os.path.exists(path):
        raise FileNotFoundError(f"load: no checkpoint at {path!r}: the file does not exist")
    if os.path.isdir(path):
        raise IsADirectoryError(f"load: {path!r} is a folder, expected a checkpoint file written by tinyattn.save")
    with open(path, "rb") as file:
        root, arrays = _verified(file, path)
    return _decode(root, arrays, rebuild)


def _verified(file, path):
    """The manifest's root node and the arrays by member, every check passed (see ``_read``)."""
    try:
        return _read(file, path)
    except CheckpointError:
        raise
    except Exception as error:  # whatever zipfile, json or NumPy make of a damaged file
        raise CheckpointError(
            f"load: {path!r} is not a readable tinyattn checkpoint (damaged or not a .npz archive): "
            f"{type(error).__name__}: {error}"
        ) from error


# ----------------------------------------------------------------------------- saving


def _path(path, function):
    """``path`` as a ``str`` (bytes decoded as the OS does, so the same file is meant)."""
    if not isinstance(path, (str, bytes, os.PathLike)):
        raise TypeError(f"{function}: path must be a str, bytes or os.PathLike, got {type(path).__name__}")
    return os.fsdecode(os.fspath(path))


def _describe(where):
    """``['optimizer']['state'][0]`` for the keys that lead to a value; the root is ``the object``."""
    return "".join(f"[{key!r}]" for key in where) or "the object"


def _encode(value, where, arrays, active):
    """The manifest node of ``value``: plain JSON for ``None``, ``bool``, ``int``, ``float`` and
    ``str``; ``{"dict": [[key, node], ...]}``, ``{"list": [...]}``, ``{"tuple": [...]}``, the
    bytes in hex of a NaN (``{"float": ...}``) or of a complex number (``{"complex": ...}``), or an
    array node (its member is named later)."""
    if isinstance(value, (Tensor, np.ndarray, np.generic)) or backend.is_array(value):
        array = _host_array(value, where)
        node = {"array": None, "dtype": _descr(array.dtype), "shape": list(array.shape), "crc32": _crc32(array)}
        if isinstance(value, np.generic):
            node["scalar"] = True
        arrays.append((where, array, node))
        return node
    if isinstance(value, float) and math.isnan(value):  # JSON's NaN would lose the sign and payload
        return {"float": struct.pack("<d", value).hex()}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, complex):
        return {"complex": struct.pack("<dd", value.real, value.imag).hex()}
    if isinstance(value, argparse.Namespace):
        return {"namespace": _encode(vars(value), where, arrays, active)}
    record = getattr(value, "__checkpoint_record__", None)
    if record is not None and not isinstance(value, type):
        class_path, init, state = record()
        return {"object": class_path, "init": _encode(init, where + ("<init>",), arrays, active),
                "state": _encode(state, where, arrays, active)}
    if not (isinstance(value, collections.abc.Mapping) or type(value) in (list, tuple)):
        hint = "; save its state_dict() instead" if callable(getattr(value, "state_dict", None)) else ""
        raise TypeError(
            f"save: the value at {_describe(where)} is a {type(value).__name__}; expected a dict, list, tuple, "
            f"array, tensor, number, string or None{hint}"
        )
    if id(value) in active:
        raise ValueError(f"save: the value at {_describe(where)} contains itself")
    active.add(id(value))
    if isinstance(value, collections.abc.Mapping):
        node = {"dict": [[_checked_key(key, where), _encode(item, where + (key,), arrays, active)]
                         for key, item in value.items()]}
    else:  # "list" or "tuple"
        node = {type(value).__name__: [_encode(item, where + (i,), arrays, active) for i, item in enumerate(value)]}
    active.discard(id(value))
    return node


def _checked_key(key, where):
    if isinstance(key, bool) or not isinstance(key, (str, int)):
        raise TypeError(
            f"save: dict keys must be strings (or integers, such as an optimizer's parameter indices), "
            f"got {key!r} of type {type(key).__name__} in {_describe(where)}"
        )
    if isinstance(key, str):
        for character in key:
            if unicodedata.category(character) in ("Cc", "Cs"):
                raise ValueError(
                    f"save: the key {key!r} in {_describe(where)} contains the character {character!r}; "
                    "keys are stored as zip member names and may not hold control characters or lone surrogates"
                )
    return key


def _host_array(value, where):
    """``value`` as a NumPy array on the host; never an object array (that would need pickle)."""
    if isinstance(value, Tensor):
        array = value.numpy()
    elif isinstance(value, (np.ndarray, np.generic)):
        array = np.asarray(value)
    else:
        array = backend.to_numpy(value)
    if array.dtype.hasobject:
        raise TypeError(
            f"save: the value at {_describe(where)} is an array of Python objects (dtype {array.dtype}); "
            "checkpoints hold numeric arrays only, because loading objects would need pickle"
        )
    return array


def _descr(dtype):
    """A dtype as the manifest's JSON holds it (NumPy's .npy header description, lists for tuples)."""
    return json.loads(json.dumps(np.lib.format.dtype_to_descr(dtype)))


def _crc32(array):
    return zlib.crc32(array.tobytes())


def _member_names(wheres):
    """One zip member per array: its keys joined with ``/`` plus ``.npy`` (what ``np.load`` shows
    as ``model/linear.weight``), or ``~N.npy`` where that name is empty, taken or unsafe."""
    natural = ["/".join(str(key) for key in where) for where in wheres]
    counts = collections.Counter(natural)
    used = set(natural)
    names = []
    for i, name in enumerate(natural):
        if not name or counts[name] > 1 or "\\" in name:
            name = f"~{i}"
            while name in used:
                name = "~" + name
            used.add(name)
        names.append(name + ".npy")
    return names


def _write_archive(file, manifest, arrays):
    """The manifest first (so that it survives any loss at the end of the zip directory), then
    one ``.npy`` per array, as ``np.savez`` writes them. (``np.savez(file, **arrays)`` would clash
    with entries named ``file`` or ``allow_pickle``, hence the zip by hand.)"""
    with zipfile.ZipFile(file, mode="w", compression=zipfile.ZIP_STORED, allowZip64=True) as archive:
        archive.writestr(zipfile.ZipInfo(MANIFEST, time.localtime()[:6]), manifest)
        for member, array in arrays:
            with archive.open(member, mode="w", force_zip64=True) as stream:
                np.lib.format.write_array(stream, array, allow_pickle=False)
        archive.comment = COMMENT


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


# ----------------------------------------------------------------------------- loading


def _read(file, path):
    def damaged(what):
        return CheckpointError(f"load: {path!r} is not a whole tinyattn checkpoint: {what}")

    if not zipfile.is_zipfile(file):
        raise CheckpointError(
            f"load: {path!r} is not a tinyattn checkpoint: expected a NumPy .npz (zip) archive, "
            "the file is not a zip archive (empty, truncated or something else?)"
        )
    size = file.seek(0, os.SEEK_END)
    file.seek(0)
    with zipfile.ZipFile(file) as archive:
        infos = archive.infolist()
        for info in infos:  # reads stay inside the file whatever a damaged directory says
            if info.header_offset < 0 or info.header_offset + info.compress_size > size:
                raise damaged(f"its zip directory puts the member {info.filename!r} outside the file")
        names = [info.filename for info in infos]
        if len(set(names)) != len(names):
            raise damaged(f"its zip directory lists a member twice: {sorted(names)}")
        if MANIFEST not in names and not archive.comment:
            return _read_plain(archive, names, damaged), None
        if archive.comment != COMMENT:
            raise damaged(
                f"its zip comment {archive.comment[:80]!r} is not the one tinyattn.save writes "
                "(a damaged checkpoint, or a zip archive from elsewhere)"
            )
        if MANIFEST not in names:
            raise damaged(f"its manifest {MANIFEST!r} is missing (the zip directory lists {len(names)} members)")
        manifest = json.loads(archive.read(MANIFEST).decode("ascii"))
        if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
            raise damaged(f"its manifest is not in the format {FORMAT!r}")
        leaves = list(_array_nodes(manifest["root"], ()))
        listed = {node["array"]: where for where, node in leaves}
        missing = [f"the array at {_describe(where)} (member {member!r})" for member, where in listed.items()
                   if member not in names]
        if missing:
            raise damaged(f"its manifest lists what the archive lacks: {', '.join(missing)}")
        unlisted = [member for member in names if member not in listed and member != MANIFEST]
        if unlisted:
            raise damaged(f"the archive holds members its manifest does not list: {unlisted}")
        arrays = {}
        for where, node in leaves:
            arrays[node["array"]] = _verified_array(archive, node, where, damaged)
        return manifest["root"], arrays


def _read_plain(archive, names, damaged):
    """A checkpoint without a manifest: one ``NAME.npy`` per entry of a flat state dict."""
    state_dict = collections.OrderedDict()
    for member in names:
        if not member.endswith(".npy"):
            raise damaged(f"its member {member!r} is not a NumPy array (.npy)")
        state_dict[member[: -len(".npy")]] = np.lib.format.read_array(io.BytesIO(archive.read(member)))
    return state_dict


def _array_nodes(node, where):
    """(where, node) for every array node of the manifest's tree, in saved order."""
    if isinstance(node, dict):
        if "array" in node:
            yield where, node
        elif "dict" in node:
            for key, child in node["dict"]:
                yield from _array_nodes(child, where + (key,))
        elif "list" in node or "tuple" in node:
            for i, child in enumerate(node.get("list", node.get("tuple"))):
                yield from _array_nodes(child, where + (i,))
        elif "namespace" in node:
            yield from _array_nodes(node["namespace"], where)
        elif "object" in node:
            yield from _array_nodes(node["init"], where + ("<init>",))
            yield from _array_nodes(node["state"], where)


def _verified_array(archive, node, where, damaged):
    """The array of ``node``'s member, read whole (zipfile checks its CRC) and checked against
    the manifest's dtype, shape and CRC32."""
    try:
        data = archive.read(node["array"])
        array = np.lib.format.read_array(io.BytesIO(data), allow_pickle=False)
    except Exception as error:
        raise damaged(
            f"the array at {_describe(where)} (member {node['array']!r}) cannot be read: "
            f"{type(error).__name__}: {error}"
        ) from error
    if _descr(array.dtype) != node["dtype"] or list(array.shape) != node["shape"]:
        raise damaged(
            f"the array at {_describe(where)} has dtype {array.dtype} and shape {array.shape}; its manifest says "
            f"dtype {node['dtype']} and shape {tuple(node['shape'])}"
        )
    if _crc32(array) != node["crc32"]:
        raise damaged(f"the bytes of the array at {_describe(where)} do not match their CRC32 in the manifest")
    return array


def _decode(node, arrays, rebuild=None):
    """The value a manifest node stands for (the inverse of ``_encode``); ``arrays`` is ``None`` for
    a plain ``np.savez`` archive, whose state dict ``node`` already is."""
    if arrays is None:
        return node
    if node is None or isinstance(node, (bool, int, float, str)):
        return node
    if "array" in node:
        array = arrays[node["array"]]
        return array[()] if node.get("scalar") else array
    if "dict" in node:
        return collections.OrderedDict((key, _decode(child, arrays, rebuild)) for key, child in node["dict"])
    if "list" in node:
        return [_decode(child, arrays, rebuild) for child in node["list"]]
    if "tuple" in node:
        return tuple(_decode(child, arrays, rebuild) for child in node["tuple"])
    if "float" in node:
        return struct.unpack("<d", bytes.fromhex(node["float"]))[0]
    if "complex" in node:
        return complex(*struct.unpack("<dd", bytes.fromhex(node["complex"])))
    if "namespace" in node:
        return argparse.Namespace(**_decode(node["namespace"], arrays, rebuild))
    if "object" in node:
        if rebuild is None:
            raise TypeError(
                f"load: the checkpoint holds a whole {node['object']} object, which tinyattn.load does not rebuild; "
                "load it with tinyattn.compat.load under tinyattn.compat.serialization.safe_globals([that class]), "
                "or save and load its state_dict() instead"
            )
        return rebuild(node["object"], _decode(node["init"], arrays, rebuild), _decode(node["state"], arrays, rebuild))
    raise ValueError(f"unknown manifest node {sorted(node)}")
