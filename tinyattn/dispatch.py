"""Floor 1: one switch and one table, through which a faster form may stand in for a reference definition.

The reference layer (``tinyattn.nn``) knows nothing of speed. It only names the units that a faster
form may replace: a function by wearing ``@replaceable``, a module by being called (``Module.__call__``
asks ``module_replacement``). The fast layer (``tinyattn.fast``) fills the table:
for each unit, one or more ``Replacement`` rows, tried in the order they were registered:

- ``name``: what runs instead, as ``ta.explain`` prints it (``"fast.Linear"``);
- ``why_not(*args, **kwargs)``: ``None`` when it applies to these arguments, else one sentence saying why not
  (a row whose ``why_not`` is ``None`` applies whenever fast paths are on);
- ``run(*args, **kwargs)``: the replacement, computing what the unit computes.

A module's rows take the module as their first argument. They apply while the class's ``forward`` is
the one it had when its rows were registered: a subclass that overrides ``forward``, or a ``forward``
patched onto the class later, computes something else, and runs as written.

With fast paths off (``use_fast_paths(False)``, or ``TINYATTN_FAST=0`` in the environment at import)
the table is not read: every unit runs its reference definition. ``generation()`` counts the changes
that may turn a route into another (a module's attribute set, a parameter's array replaced, the switch
flipped: each calls ``changed()``), for whoever remembers routes. This module imports nothing of the library.

>>> import tinyattn as ta
>>> @replaceable
... def double(x):
...     return 2 * x
>>> register(double, "fast.double", why_not=lambda x: None if x > 0 else "not positive", run=lambda x: x + x)
>>> double(3), double(-3), double.reference(3)
(6, -6, 6)
>>> [(row.name, row.why_not(-3)) for row in rows(double)]
[('fast.double', 'not positive')]
>>> with use_fast_paths(False):
...     replacement(double, 3) is None
True
"""

import functools
import inspect
import itertools
import os
from collections.abc import Callable
from typing import NamedTuple

FAST_OFF = "fast paths are off"  # the reason ta.explain gives for every fast route while the switch is off


class Replacement(NamedTuple):
    """One row of the table: a faster form of a unit, and when it applies."""

    name: str
    why_not: Callable
    run: Callable


_ENABLED = [os.environ.get("TINYATTN_FAST", "1") != "0"]
_COUNT = itertools.count(1)  # next() on it is atomic: two threads never take the same generation
GENERATION = [0]  # generation()'s count, for a reader that cannot afford the call; changed() alone moves it
_TABLE = {}  # unit (a function or a Module class) -> tuple of Replacement rows
_FORWARDS = {}  # a Module class in the table -> its forward when its rows were registered
_RESOLVED = {}  # a module class -> the nearest class of its MRO that is in the table, or None
WITHOUT_ROWS = set()  # module classes that have no rows: Module.__call__ skips the table for them at once


def register(unit, name, why_not, run):
    """Add a row for ``unit`` (a ``@replaceable`` function or a ``Module`` class), after its earlier rows."""
    if not isinstance(unit, type) and not isinstance(getattr(unit, "calls", None), list):
        raise TypeError(f"register: {unit!r} is neither a @replaceable function nor a Module class")
    _TABLE[unit] = _TABLE.get(unit, ()) + (Replacement(name, why_not, run),)
    if isinstance(unit, type):
        _FORWARDS[unit] = unit.forward
    else:
        unit.calls[:] = [(row.why_not, row.run) for row in _TABLE[unit]]
    _RESOLVED.clear()
    WITHOUT_ROWS.clear()
    changed()


def rows(unit):
    """The rows registered for ``unit`` (a module class: its own or its base's), in the order they are tried."""
    if isinstance(unit, type):
        return _rows_of_class(unit)
    return _TABLE.get(unit, ())


def _rows_of_class(cls):
    base = _RESOLVED.get(cls, _UNSEEN)
    if base is _UNSEEN:
        base = _RESOLVED[cls] = next((base for base in cls.__mro__ if base in _TABLE), None)
        if base is None:
            WITHOUT_ROWS.add(cls)
    if base is None or cls.forward is not _FORWARDS[base]:
        return ()
    return _TABLE[base]


_UNSEEN = object()


def module_replacement(module, args, kwargs):
    """``replacement(type(module), module, *args, **kwargs)`` as ``Module.__call__`` asks it, on every call of
    every module: ``None`` at once for a module whose class has no rows, or whose ``forward`` is set on the
    instance (a user's wrapper runs as it is)."""
    cls = type(module)
    base = _RESOLVED.get(cls, _UNSEEN)
    if base is None or not _ENABLED[0] or "forward" in module.__dict__:
        return None
    if base is _UNSEEN or cls.forward is not _FORWARDS[base]:
        rows = _rows_of_class(cls)  # (resolves the class first)
    else:
        rows = _TABLE[base]
    for row in rows:
        try:
            reason = None if row.why_not is None else row.why_not(module, *args, **kwargs)
        except TypeError:
            if _binds(cls.forward, module, args, kwargs):
                raise
            return None  # arguments forward does not take: forward itself says so, in its own words
        if reason is None:
            return row
    return None


def _binds(function, module, args, kwargs):
    """Whether ``function`` takes ``(module, *args, **kwargs)``."""
    try:
        inspect.signature(function).bind(module, *args, **kwargs)
    except TypeError:
        return False
    return True


def replacement(unit, *args, **kwargs):
    """The first row of ``unit`` that applies to these arguments, or ``None`` (always ``None`` while
    fast paths are off)."""
    if _ENABLED[0]:
        for row in rows(unit):
            if row.why_not is None or row.why_not(*args, **kwargs) is None:
                return row
    return None


def replaceable(definition):
    """Mark ``definition`` as a unit the fast layer may replace. Called, the unit runs the first of its
    rows that applies, else the definition itself (``unit.reference``)."""

    calls = []  # the unit's rows as plain (why_not, run) pairs, read on every call (register() fills it)

    @functools.wraps(definition)
    def unit(*args, **kwargs):
        if _ENABLED[0]:
            for why_not, run in calls:
                if why_not is None or why_not(*args, **kwargs) is None:
                    return run(*args, **kwargs)
        return definition(*args, **kwargs)

    unit.reference, unit.calls = definition, calls
    return unit


def enabled():
    """Whether fast paths are on."""
    return _ENABLED[0]


def changed():
    """Something a route reads has changed: routes remembered before now are stale."""
    GENERATION[0] = next(_COUNT)


def generation():
    """How many times ``changed()`` has been called: a route remembered at another generation is stale."""
    return GENERATION[0]


class use_fast_paths:
    """``use_fast_paths(enabled=True)``: turn the fast paths on or off, now; used as a context manager
    (``with ta.use_fast_paths(False): ...``), the previous setting comes back on exit. Off, every op and
    layer runs its reference definition. The switch is the process's, shared by its threads.

    >>> import tinyattn as ta
    >>> layer = ta.nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0)
    >>> x = ta.randn(2, 3, 8, requires_grad=True)
    >>> type(layer(x)._ctx).__name__
    'FeedForwardBlock'
    >>> with ta.use_fast_paths(False):                 # norm2(x + _ff_block(x)): LayerNorm, then weight and bias
    ...     type(layer(x)._ctx).__name__
    'Add'
    """

    def __init__(self, enabled=True):
        self._previous = _ENABLED[0]
        _ENABLED[0] = bool(enabled)
        changed()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        _ENABLED[0] = self._previous
        changed()


class reference_only:
    """Context manager: the table is not read inside, with nothing else changed (the routes remembered stay
    right for when it is read again). For the library's own recomputations (a fused node's output recomputed by
    its reference definition, ``tensor._recomputed``); users switch with ``use_fast_paths``. Like that switch,
    it is the process's."""

    def __enter__(self):
        self._previous, _ENABLED[0] = _ENABLED[0], False
        return self

    def __exit__(self, *exc):
        _ENABLED[0] = self._previous
