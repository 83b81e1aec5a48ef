"""The API reference covers the public API.

Every callable a user reaches (``ta.*`` but the dtypes, ``Tensor``'s methods and properties, ``ta.nn``,
``ta.nn.functional``, ``ta.nn.init``, ``ta.optim``, ``ta.autograd``, ``ta.func``, ``ta.utils``, ``ta.utils.data``,
``ta.testing``, ``ta.viz``, ``ta.interop``, ``ta.pretrained``) has a docstring, the docstring has a ``>>>`` example,
and the callable is rendered on one of the pages under ``docs/api/`` by a ``::: path`` entry (a class's members by
the entry's ``members:`` list, or, without one, every public member the class defines). Each test names all the
callables that fail it, not only the first.

A name that a floor offers to the floors above it (the fast layer, compat) rather than to users is listed in
``INTERNAL`` with its reason; every other public name is the user's.
"""

import importlib
import inspect
import pathlib
import re
import types

import numpy as np
import pytest

import tinyattn as ta

ROOT = pathlib.Path(__file__).resolve().parents[2]
PAGES = sorted((ROOT / "docs" / "api").glob("*.md"))

# (namespace, the names to walk: None for every public class or function it defines or re-exports)
NAMESPACES = [
    ("tinyattn", ta.__all__),
    ("tinyattn.nn", None),
    ("tinyattn.nn.functional", None),
    ("tinyattn.nn.init", None),
    ("tinyattn.nn.parametrize", None),
    ("tinyattn.nn.parametrizations", None),
    ("tinyattn.nn.utils", None),
    ("tinyattn.optim", None),
    ("tinyattn.optim.lr_scheduler", None),
    ("tinyattn.optim.swa_utils", None),
    ("tinyattn.autograd", None),
    ("tinyattn.autograd.functional", None),
    ("tinyattn.autograd.forward_ad", None),
    ("tinyattn.func", None),
    ("tinyattn.utils", None),
    ("tinyattn.utils.data", None),
    ("tinyattn.testing", None),
    ("tinyattn.viz", None),
    ("tinyattn.interop", None),
    ("tinyattn.pretrained", None),
    ("tinyattn.distributions", None),
    ("tinyattn.distributions.constraints", None),
]

INTERNAL = {
    # the graph nodes the functions record, and the reference definitions the fused forms are proven equal to
    "tinyattn.nn.functional": {"Erf", "Softmax", "LogSoftmax", "LayerNorm", "linear_definition",
                               "layer_norm_definition", "cross_entropy_definition", "attention_definition",
                               "attention_arguments", "log_softmax_of_array", "checked_mask"},
    # the engine's nodes and helpers that autograd re-exports for the floors above it
    "tinyattn.autograd": {"OnceDifferentiable", "TangentPack", "sum_to", "OutputGradients", "Pick"},
    "tinyattn.utils": {"Checkpoint"},
    "tinyattn.pretrained": {"key_mask", "read_config", "resolve", "load"},
}


def _is_dtype(obj):
    return isinstance(obj, type) and issubclass(obj, np.generic)


def _public_names(module, names):
    if names is None:
        names = getattr(module, "__all__", None) or [n for n in vars(module) if not n.startswith("_")]
    internal = INTERNAL.get(module.__name__, set())
    for name in names:
        obj = getattr(module, name)
        if name.startswith("_") or name in internal or isinstance(obj, types.ModuleType) or _is_dtype(obj):
            continue
        if not (inspect.isclass(obj) or inspect.isfunction(obj) or callable(obj)):
            continue  # a constant
        if not getattr(obj, "__module__", "").startswith("tinyattn"):
            continue  # a library's own name imported for use (math, numpy…)
        yield name, obj


def _tensor_members():
    """``Tensor``'s public methods and properties: (name, the object that carries the docstring)."""
    for name in sorted(dir(ta.Tensor)):
        if name.startswith("_"):
            continue
        yield name, inspect.getattr_static(ta.Tensor, name)


def _key(obj):
    """What makes two names the same callable (``ta.add`` is ``Tensor.add``'s function; a property is its getter)."""
    if isinstance(obj, (staticmethod, classmethod)):
        obj = obj.__func__
    return id(obj.fget) if isinstance(obj, property) else id(obj)


def public_api():
    """{display name: object}, each callable once, under the first name the walk meets it by."""
    api, seen = {}, set()
    for module_name, names in NAMESPACES:
        module = importlib.import_module(module_name)
        for name, obj in _public_names(module, names):
            if _key(obj) not in seen:
                seen.add(_key(obj))
                api[f"{module_name}.{name}"] = obj
    for name, obj in _tensor_members():
        api[f"tinyattn.Tensor.{name}"] = obj  # by name: Tensor's page lists its members by name
    return api


def _doc(obj):
    if inspect.isclass(obj):
        return obj.__dict__.get("__doc__")  # its own, not a base class's
    if isinstance(obj, (staticmethod, classmethod)):
        obj = obj.__func__
    return getattr(obj, "__doc__", None)


def _has_own_doc(obj):
    doc = _doc(obj)
    if not doc or not doc.strip():
        return False
    # a built-in (operator.attrgetter, a lambda's absence of one) has its type's docstring, not its own
    return not (not inspect.isclass(obj) and doc == type(obj).__doc__)


def reference_entries():
    """[(page, path, members or None)] for every ``::: path`` entry of the pages under docs/api/."""
    entries = []
    for page in PAGES:
        lines = page.read_text().splitlines()
        for i, line in enumerate(lines):
            match = re.match(r":::\s*(\S+)", line)
            if not match:
                continue
            members = None
            for option in lines[i + 1:]:
                if option.strip() and not option.startswith(" "):
                    break
                found = re.match(r"\s+members:\s*\[(.*)\]", option)
                if found:
                    members = [m.strip().strip("\"'") for m in found.group(1).split(",") if m.strip()]
            entries.append((page.name, match.group(1), members))
    return entries


def _resolve(path):
    parts = path.split(".")
    for split in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:split]))
        except ImportError:
            continue
        for part in parts[split:]:
            obj = getattr(obj, part)
        return obj
    raise ImportError(path)


def documented():
    """(the keys of the callables the pages render, the names of Tensor's members they render)."""
    keys, tensor_members = set(), set()
    for _, path, members in reference_entries():
        obj = _resolve(path)
        keys.add(_key(obj))
        if inspect.isclass(obj):
            names = members if members is not None else [n for n in vars(obj) if not n.startswith("_")]
            for name in names:
                keys.add(_key(inspect.getattr_static(obj, name)))
                if obj is ta.Tensor:
                    tensor_members.add(name)
    return keys, tensor_members


API = public_api()


def _fail(what, names):
    if names:
        pytest.fail(f"{len(names)} public callables {what}:\n  " + "\n  ".join(names))


def _slot_documented(name, obj):
    """A slot (``Tensor.requires_grad``, a plain attribute) cannot carry a docstring: its class's docstring names it."""
    return isinstance(obj, types.MemberDescriptorType) and f"``{obj.__name__}``" in (obj.__objclass__.__doc__ or "")


def test_every_public_callable_has_a_docstring():
    _fail("have no docstring",
          [name for name, obj in API.items() if not _has_own_doc(obj) and not _slot_documented(name, obj)])


def test_every_docstring_shows_an_example():
    _fail("have a docstring without a >>> example",
          [name for name, obj in API.items() if _has_own_doc(obj) and ">>>" not in _doc(obj)])


def test_every_public_callable_is_on_a_reference_page():
    keys, tensor_members = documented()
    missing = []
    for name, obj in API.items():
        on_tensor = name.startswith("tinyattn.Tensor.")
        if on_tensor and name.rpartition(".")[2] in tensor_members or _key(obj) in keys:
            continue
        missing.append(name)
    _fail("are on no page under docs/api/", missing)


def test_reference_entries_are_callables_a_user_calls():
    """No entry renders a module, a constant or a ``_private`` name, and each resolves."""
    bad = []
    for page, path, members in reference_entries():
        try:
            obj = _resolve(path)
        except (ImportError, AttributeError):
            bad.append(f"{page}: {path} (does not resolve)")
            continue
        if isinstance(obj, types.ModuleType) or not callable(obj) or any(p.startswith("_") for p in path.split(".")):
            bad.append(f"{page}: {path} (a module, a constant or a private name)")
        for name in members or ():
            if name.startswith("_") or not hasattr(obj, name):
                bad.append(f"{page}: {path} members: {name}")
    assert not bad, "\n".join(bad)
