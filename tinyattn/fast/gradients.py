"""A leaf keeps a fresh gradient as its ``.grad``, instead of a copy (PyTorch's ``AccumulateGrad`` does the same).

The reference (``tensor._accumulate_leaf``) copies a leaf's first gradient, since the array may be
seen elsewhere. A node that declares its gradients fresh (``Function.fresh_gradients``: it keeps no
reference to what its backward returns) hands down arrays that nothing but the graph walk refers
to; ``steal`` keeps such an array as it is when its reference count says so: a NumPy/CuPy array of
the leaf's dtype, referred to only by the walk, and either not a view or a NumPy view that alone sees
the memory of its owner (a reshaped product; a block of ``fast.buffers``, which then serves the
``.grad``). It fills the engine's one extension slot for this (``tensor.LEAF_ACCUMULATOR``), which the
walk reads once per ``backward()``: a table row's test on every leaf would cost more than it saves.
``measure()`` finds the counts by sending an array down the same calls as the walk makes.
"""

import sys
import threading

import numpy as np

from .. import backend, dispatch
from ..tensor import LEAF_ACCUMULATOR, Function, Tensor, _accumulate_leaf
from . import buffers

_FRESH_REFERENCES = [0]  # sys.getrefcount inside steal of an array only the walk refers to
_VIEW_REFERENCES = [0]  # sys.getrefcount inside _viewed_alone of an owner only the view refers to
_references, _StrictArray = sys.getrefcount, backend.StrictArray


def steal(t, grad, fresh=False):
    """``tensor._accumulate_leaf``, keeping a fresh gradient (see the module's docstring) instead of copying it."""
    if t._grad is not None:
        if t._grad_graph is None:  # (the reference's += line, here: a leaf's later gradients take this branch)
            t._grad += grad
        else:
            _accumulate_leaf(t, grad)  # a create_graph gradient's array is never written to
        return
    data = t._data
    if (fresh and type(grad) is type(data) is not _StrictArray and grad.dtype is data.dtype
            and _references(grad) <= _FRESH_REFERENCES[0]
            and (grad.base is None or _viewed_alone(grad))):
        # (the dtype the very object: an equal one is copied; a strict array's wrapper does not tell whether
        # another wrapper shares its memory)
        t._grad = grad
    else:
        _accumulate_leaf(t, grad)  # the reference: a copy


def _viewed_alone(view):
    """Whether the memory that ``view`` (a view of a NumPy array) sees is seen by nothing else, and all of it: the
    array that owns it is referred to by ``view`` alone (every NumPy view refers to its owner as its ``base``),
    or by ``view`` and ``fast.buffers``' list (a kept block, which serves one array at a time)."""
    base = view.base
    flags = view.flags
    if type(base) is not np.ndarray or base.base is not None or not flags.c_contiguous or not flags.writeable:
        return False  # (a read-only view could not take the next backward's gradient in place)
    count = _references(base)
    if count <= _VIEW_REFERENCES[0]:
        return base.nbytes == view.nbytes  # (a view of part of an array would keep the rest alive with it)
    return count <= _VIEW_REFERENCES[0] + 1 and buffers.keeps(base)


def _owner_references(view):
    """The count ``_viewed_alone`` reads of ``view``'s owner when nothing else refers to it."""
    base = view.base
    return _references(base)  # (as there: the view's reference, the local name, the argument)


def install():
    """Fill the engine's slot with ``steal`` and measure the reference count it compares with."""
    LEAF_ACCUMULATOR[0] = steal
    measure()


class _ProbeNode(Function):
    """A node whose backward returns a fresh array, as the library's own nodes do."""

    fresh_gradients = True

    def forward(self, x):
        return x

    def backward(self, grad):
        return (backend.namespace(grad).ones(grad.shape, dtype=grad.dtype),)


def measure():
    """Set the reference count of a fresh gradient inside ``steal``, measured through the walk's own calls: a
    backward through a probe node, its fresh gradient handed to a probe in the slot, called as ``steal`` is; and
    that of an owner only its view refers to, as ``_viewed_alone`` reads it."""
    leaf = Tensor(np.zeros(1), requires_grad=True)
    counts, measuring = [], threading.get_ident()

    def probe(t, grad, fresh=False):  # (steal's signature: the same calls give the same count)
        if threading.get_ident() == measuring:
            counts.append(sys.getrefcount(grad))
        else:  # another thread's walk meanwhile: the reference
            _accumulate_leaf(t, grad)

    tracer, profiler = sys.gettrace(), sys.getprofile()
    sys.settrace(None)  # a debugger's tracer may hold frames' locals: it would raise the count
    sys.setprofile(None)
    previous, LEAF_ACCUMULATOR[0] = LEAF_ACCUMULATOR[0], probe
    try:
        with dispatch.use_fast_paths(True):  # (the walk takes the slot only with fast paths on)
            _ProbeNode.apply(leaf).backward(np.ones(1))
        _VIEW_REFERENCES[0] = _owner_references(np.empty(2)[:])
    finally:
        LEAF_ACCUMULATOR[0] = previous
        sys.settrace(tracer)
        sys.setprofile(profiler)
    _FRESH_REFERENCES[0] = counts[0]
