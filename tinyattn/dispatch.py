"""Floor 1: one switch and one table, through which a faster form may stand in for a reference definition.

The reference layer (``tinyattn.nn``) knows nothing of speed. It only names the units that a faster
form may replace: a function by wearing ``@replaceable``, a module by being called (``Module.__call__``
asks ``replacement(type(module), module, …)``). The fast layer (``tinyattn.fast``) fills the table:
for each unit, one or more ``Replacement`` rows, tried in the order they were registered:

- ``name``: what runs instead, as ``ta.explain`` prints it (``"fast.Linear"``);
- ``why_not(*args, **kwargs)``: ``None`` when it applies to these arguments, else one sentence saying why not;
- ``run(*args, **kwargs)``: the replacement, computing what the unit computes.

A module's rows take the module as their first argument. A subclass finds its base class's rows only
while it keeps the base's ``forward`` (one that overrides it computes something else).

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
import os
from collections.abc import Callable
from typing import NamedTuple

FAST_OFF = "fast paths are off"  # the reason every row gives while the switch is off


class Replacement(NamedTuple):
    """One row of the table: a faster form of a unit, and when it applies."""

    name: str
    why_not: Callable
    run: Callable


_ENABLED = [os.environ.get("TINYATTN_FAST", "1") != "0"]
_GENERATION = [0]
_TABLE = {}  # unit (a function or a Module class) -> tuple of Replacement rows
_RESOLVED = {}  # a module class -> the rows it takes (its own, or its base's while it keeps the base's forward)


def register(unit, name, why_not, run):
    """Add a row for ``unit`` (a ``@replaceable`` function or a ``Module`` class), after its earlier rows."""
    _TABLE[unit] = _TABLE.get(unit, ()) + (Replacement(name, why_not, run),)
    _RESOLVED.clear()
    changed()


def rows(unit):
    """The rows registered for ``unit`` (a module class: its own or its base's), in the order they are tried."""
    if isinstance(unit, type):
        return _rows_of_class(unit)
    return _TABLE.get(unit, ())


def _rows_of_class(cls):
    found = _RESOLVED.get(cls)
    if found is None:
        found = ()
        for base in cls.__mro__:
            if base in _TABLE:
                found = _TABLE[base] if cls.forward is base.forward else ()
                break
        _RESOLVED[cls] = found
    return found


def replacement(unit, *args, **kwargs):
    """The first row of ``unit`` that applies to these arguments, or ``None`` (always ``None`` while
    fast paths are off)."""
    if _ENABLED[0]:
        for row in rows(unit):
            if row.why_not(*args, **kwargs) is None:
                return row
    return None


def replaceable(definition):
    """Mark ``definition`` as a unit the fast layer may replace. Called, the unit runs the first of its
    rows that applies, else the definition itself (``unit.reference``)."""

    @functools.wraps(definition)
    def unit(*args, **kwargs):
        if _ENABLED[0]:
            for row in _TABLE.get(unit, ()):
                if row.why_not(*args, **kwargs) is None:
                    return row.run(*args, **kwargs)
        return definition(*args, **kwargs)

    unit.reference = definition
    return unit


def enabled():
    """Whether fast paths are on."""
    return _ENABLED[0]


def changed():
    """Something a route reads has changed: routes remembered before now are stale."""
    _GENERATION[0] += 1


def generation():
    """How many times ``changed()`` has been called: a route remembered at another generation is stale."""
    return _GENERATION[0]


class use_fast_paths:
    """``use_fast_paths(enabled=True)``: turn the fast paths on or off, now; used as a context manager
    (``with ta.use_fast_paths(False): ...``), the previous setting comes back on exit. Off, every op and
    layer runs its reference definition.

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
