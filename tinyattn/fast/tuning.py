"""The fast layer's private tuning: every threshold and size its router reads, in one place.

None of these changes what is computed, only which fast route runs or how a pass is cut; the
benchmarks that measure the trades, and the values each one measures, are named in ``docs/performance.md``.
Tests and benchmarks move them with ``tuned(**values)``, a context manager that puts them back on exit.

>>> from tinyattn.fast import tuning
>>> with tuning.tuned(blocked_attention_min_keys=0):
...     tuning.values.blocked_attention_min_keys
0
>>> tuning.values.blocked_attention_min_keys
513
"""

import itertools
from types import SimpleNamespace

_COUNT = itertools.count(1)  # next() on it is atomic: two threads never take the same generation
GENERATION = [0]  # moved by every change of a value: a schedule remembered at another generation is stale


class _Values(SimpleNamespace):
    def __setattr__(self, name, value):
        super().__setattr__(name, value)
        GENERATION[0] = next(_COUNT)


values = _Values(
    # keys from which attention without weights or dropout goes a block of keys at a time (lean in memory)
    blocked_attention_min_keys=513,
    # keys per block of blocked attention; None lets the router choose (router.key_block_size)
    attention_block_size=None,
    # elements from which a fast kernel's pass is spread over the cores (smaller: the round trip costs more)
    pool_min_elements=3 << 18,
    # elements per piece of a pooled pass (about half a core's L2 cache in float32)
    piece_elements=1 << 18,
    # elements per piece of GELU's pass (smaller: its many passes stay in a core's cache, but each costs a call)
    gelu_piece_elements=1 << 17,
    # mean real tokens per sentence from which inference on the real tokens attends sentence by sentence
    sequence_attention_min_length=3.0,
    # whether a large residual block, while a graph is recorded, runs its products over the pool
    products_on_pool=True,
    # the most keys per block of blocked attention
    attention_max_block=1024,
    # the most scores per block of blocked attention over the whole batch (16 MiB in float32)
    attention_block_elements=1 << 22,
    # pieces that attention by batch slices leaves at least, where the batch allows (one per pool thread)
    min_batch_pieces=4,
    # the most threads of the pool
    max_threads=8,
    # m·n·k up to which OpenBLAS runs a GEMM on one thread (a piece's products stay under it)
    blas_one_thread_mnk=1 << 19,
)


class tuned:
    """``with tuned(name=value, …):`` set tuning values, each of a name above; the old ones come back on exit."""

    def __init__(self, **changes):
        unknown = sorted(set(changes) - set(vars(values)))
        if unknown:
            raise TypeError(f"tuned: unknown tuning values {unknown}; known: {sorted(vars(values))}")
        self._previous = {name: getattr(values, name) for name in changes}
        self._changes = changes

    def __enter__(self):
        for name, value in self._changes.items():
            setattr(values, name, value)
        return values

    def __exit__(self, *exc):
        for name, value in self._previous.items():
            setattr(values, name, value)
