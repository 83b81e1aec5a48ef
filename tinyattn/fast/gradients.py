"""A leaf keeps a fresh gradient as its ``.grad``, instead of a copy (PyTorch's ``AccumulateGrad`` does the same).

The reference (``tensor._accumulate_leaf``) copies a leaf's first gradient, since the array may be
seen elsewhere. A node that declares its gradients fresh (``Function.fresh_gradients``: it keeps no
reference to what its backward returns) hands down arrays that nothing but the graph walk refers
to; ``steal`` keeps such an array as it is when its reference count says so: a NumPy/CuPy array of
the leaf's dtype, not a view, referred to only by the walk. ``measure()`` finds that count by sending
an array down the same calls as the walk makes.
"""

import sys

import numpy as np

from .. import backend, dispatch
from ..tensor import Tensor, _accumulate_leaf

_FRESH_REFERENCES = [0]  # sys.getrefcount inside steal of an array only the walk refers to
_PROBE = []  # while measure() runs: the counts steal sees


def why_not_steal(t, grad, fresh=False):
    if not fresh:
        return "the gradient's node does not declare it fresh: it may be referred to elsewhere"
    if t._grad is not None:
        return "the leaf has a gradient already: the new one is added to it"
    return None


def steal(t, grad, fresh=False):
    if _PROBE:
        _PROBE.append(sys.getrefcount(grad))
        return
    if (sys.getrefcount(grad) <= _FRESH_REFERENCES[0] and type(grad) is type(t._data)
            and grad.dtype == t._data.dtype and type(grad) is not backend.StrictArray and grad.base is None):
        # (not a view; a strict array's wrapper does not tell whether another wrapper shares its memory)
        t._grad = grad
    else:
        t._grad = backend.namespace(t._data).array(grad, dtype=t._data.dtype)


def measure():
    """Set the reference count of a fresh gradient inside ``steal``, measured through the walk's own calls
    (a tuple a ``backward`` returned, the walk's loop, the table's dispatch)."""
    leaf = Tensor(np.zeros(1))
    tracer, profiler = sys.gettrace(), sys.getprofile()
    sys.settrace(None)  # a debugger's tracer may hold frames' locals: it would raise the count
    sys.setprofile(None)
    _PROBE.append(None)  # (steal records while the probe is set)
    try:
        with dispatch.use_fast_paths(True):
            for p, _, g in zip((leaf,), (None,), (np.empty(1),)):
                _accumulate_leaf(p, g, True)
    finally:
        sys.settrace(tracer)
        sys.setprofile(profiler)
        counts = _PROBE[1:]
        _PROBE.clear()
    _FRESH_REFERENCES[0] = counts[0]
