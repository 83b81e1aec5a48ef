"""The fast layer's large arrays, made in memory it keeps: a caching allocator, as PyTorch keeps GPU memory.

A training or inference step makes the same large arrays at every step. glibc's ``malloc`` maps an
allocation of 128 KiB or more afresh, and hands the free top of its heap back to the kernel, so the
next step's array of the same size pays a page fault for each 4 KiB it writes first. The fast layer
makes instead its large arrays (its kernels' results and scratch, the arrays its nodes save for backward)
as views of blocks of memory it keeps, per thread: ``empty(xp, shape, dtype)`` views a kept block that
nothing else refers to any more (its reference count says so: every view of a block refers to it as its
``base``), and makes a new block otherwise. Nothing about ``malloc`` changes for the rest of the process
(``ta.backend.keep_freed_memory()`` remains the opt-in that does that).

Rules that keep it safe and lean:

- A block is in use while anything refers to it (an array viewing it, a tensor or a node holding such an
  array); only a block that this module's list alone refers to is handed out again.
- A block serves a request of at least half its size, the smallest free one first, so that a step's arrays
  of several sizes do not hold on to much more memory than they use. Blocks are kept by their size: the usual
  request, for the size an array of the last step had, looks among the blocks of that size alone, starting after
  the one it handed out last (blocks a step holds to its end are passed once a round, not at every request).
- A gradient bound for a leaf is not made here: the leaf keeps it as its ``.grad``, and the engine copies a view
  (the fused attention makes such gradients as arrays of their own: ``fast.attention.attention_backward``'s
  ``fresh``).
- On CuPy (which pools its own memory) and below 128 KiB, ``empty`` is ``xp.empty``.
- At most ``_MOST_KEPT`` blocks per thread; past it, the free ones are let go. ``clear()`` lets go of all.

>>> import numpy as np
>>> f32 = np.dtype(np.float32)
>>> a = empty(np, (256, 256), f32)
>>> b = empty(np, (256, 256), f32)                 # a is in use: another block
>>> np.shares_memory(a, b)
False
>>> address = a.__array_interface__["data"][0]
>>> del a                                           # a's block is free again: viewed anew
>>> empty(np, (128, 512), f32).__array_interface__["data"][0] == address
True
"""

import math
import sys
import threading

import numpy as np

SMALLEST_KEPT = 128 << 10  # glibc's mmap threshold at start: from here an allocation is mapped afresh (callers that
# make many small arrays test it first, and make a small one plainly: a call here costs more than such an array)
_MOST_KEPT = 64  # blocks kept per thread (a deep model's saved arrays beyond them are plain allocations)


class _Kept(threading.local):
    sizes = None  # this thread's kept blocks of memory by their size: {bytes: [1-D uint8 array, …]}
    count = 0  # how many blocks that is


_KEPT = _Kept()
_FREE = [0]  # sys.getrefcount of a kept block that nothing else refers to, read where empty() reads it


def empty(xp, shape, dtype):
    """An uninitialised C-ordered array of ``shape`` and ``dtype`` (a NumPy dtype) in the namespace ``xp``: on
    NumPy, from 128 KiB, a view of the smallest kept block that is free and large enough (at most twice the size
    asked for), or of a new block kept from now on (see the module's docstring)."""
    nbytes = math.prod(shape) * dtype.itemsize
    if xp is not np or nbytes < SMALLEST_KEPT:
        return xp.empty(shape, dtype)  # (dtype positional, which NumPy parses faster)
    sizes = _KEPT.sizes
    if sizes is None:
        sizes = _KEPT.sizes = {}
    best, blocks = None, sizes.get(nbytes, ())
    index = 0  # (counted by hand: enumerate's reused result tuple would hold the block and raise its count)
    for block in blocks:  # a free block of this very size is the smallest that fits: the usual case
        if sys.getrefcount(block) <= _FREE[0]:
            best = block
            # it and the blocks in use before it go to the end, so that the next search starts with the blocks
            # after it, which have not been looked at since they were last handed out (a clock: a step's arrays
            # held to its end are passed once per round, not at every call)
            if index:
                blocks[:] = blocks[index + 1:] + blocks[:index + 1]
            else:
                blocks.append(blocks.pop(0))
            break
        index += 1
    else:  # else the smallest free one up to twice the size
        for size, blocks in sizes.items():
            if nbytes < size <= 2 * nbytes and (best is None or size < best.size):
                for block in blocks:
                    if sys.getrefcount(block) <= _FREE[0]:
                        best = block
                        break
    if best is None:
        best = np.empty(nbytes, dtype=np.uint8)
        if _KEPT.count >= _MOST_KEPT:
            _let_free_ones_go(sizes)
        if _KEPT.count < _MOST_KEPT:
            sizes.setdefault(nbytes, []).append(best)
            _KEPT.count += 1
    return best[:nbytes].view(dtype).reshape(shape)  # (a view: its base, the block, counts it as in use)


def _let_free_ones_go(sizes):
    """Drop from ``sizes`` (this thread's blocks) those that nothing else refers to."""
    for size in list(sizes):
        sizes[size] = [block for block in sizes[size] if sys.getrefcount(block) > _FREE[0]]
        if not sizes[size]:
            del sizes[size]
    _KEPT.count = sum(map(len, sizes.values()))


def empty_like(xp, x, dtype=None):
    """``empty`` of ``x``'s shape (and dtype, or ``dtype``), in ``x``'s memory order where ``x`` is F-ordered (as
    ``xp.empty_like`` keeps it), else C-ordered."""
    dtype = x.dtype if dtype is None else dtype
    if xp is np and x.size * dtype.itemsize < SMALLEST_KEPT:  # (``empty``'s own test, first: every call runs it)
        return np.empty_like(x, dtype, "A")  # (order "A": F where x is F-ordered and not C, else C)
    if x.flags.f_contiguous and not x.flags.c_contiguous:
        return empty(xp, x.shape[::-1], dtype).T
    return empty(xp, x.shape, dtype)


def clear():
    """Let go of every block this thread keeps (those still in use live on with their arrays)."""
    _KEPT.sizes, _KEPT.count = {}, 0


def keeps(array):
    """Whether ``array`` is one of the blocks this thread keeps."""
    return any(block is array for block in (_KEPT.sizes or {}).get(array.size, ()))


def kept_bytes():
    """The bytes of the blocks this thread keeps, in use or not."""
    return sum(size * len(blocks) for size, blocks in (_KEPT.sizes or {}).items())


def _measure():
    """Set ``_FREE``: the count ``empty`` reads for a block only its list refers to (the list, the loop's name and
    getrefcount's argument)."""
    probe = [np.empty(1, dtype=np.uint8)]
    for block in probe:
        _FREE[0] = sys.getrefcount(block)


_measure()
