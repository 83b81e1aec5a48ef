"""A small thread pool that spreads one pass over an array across the cores.

NumPy releases the GIL inside its loops (ufuncs, reductions, BLAS calls), so Python threads that
each take their own slice of the same arrays run on different cores. The fast kernels cut a large
pass into *pieces* (ranges of rows) and hand them to ``run``; the calling thread works too, and
every thread takes the next piece until none is left.

The pool decides nothing: the router's schedules (``fast.router``: ``RowSchedule``, ``TileSchedule``) say how a
pass is cut and whether its pieces go over the pool, and ``run`` does what they say.

- **The same answer on any machine.** The router's ``pieces`` depend on the shape alone (and ``fast.tuning``'s
  ``piece_elements``), never on the number of threads or on whether the pool runs, so a pooled pass gives bit
  for bit what the same pieces give one after another. (A large matrix product, ``matmul``, goes in one piece
  per thread, as OpenBLAS's own threads would split it.)
- **Only where the router says.** A small pass, anything but NumPy arrays (CuPy has its own parallelism, the
  strict test backend none) and anything inside a pooled task (no nesting) runs on the calling thread.
- **One thread per core.** As many threads as ``router.thread_count`` gives (the BLAS's own setting, else the
  cores). A pooled pass keeps the BLAS calls inside its pieces on one thread each: small enough that
  OpenBLAS runs them so, or inside ``one_blas_thread`` (attention's batch slices, ``matmul``'s pieces, and a
  layer's blocks while a graph is recorded: ``over_pool``), so it asks for no more threads than cores.
  The BLAS's thread count is set through ``threadpoolctl`` (OpenBLAS, MKL and BLIS, on every OS).
- **A pass costs two queue operations per helper.** ``count - 1`` threads, each waiting on its own
  ``queue.SimpleQueue`` (C code), and the caller works too: the helpers and the caller take pieces from a shared
  counter. A ``concurrent.futures.ThreadPoolExecutor`` doing the same (a future per helper) costs more per pass than
  a small pooled pass gains: ``python benchmarks/pool_threshold.py --executor`` times both.

>>> import numpy as np
>>> x = np.arange(12.0).reshape(6, 2)
>>> def double(start, stop):
...     x[start:stop] *= 2
>>> run(double, [(0, 3), (3, 6)], pooled=True)
>>> x[:, 0]
array([ 0.,  4.,  8., 12., 16., 20.])
"""

import atexit
import contextlib
import functools
import itertools
import os
import queue
import threading

import numpy as np

from .. import backend
from . import buffers, router


def run(task, ranges, pooled):
    """Call ``task(start, stop)`` for every range in ``ranges`` (disjoint pieces of the arrays it writes): over the
    pool where ``pooled`` (the router's answer, in a schedule of ``fast.router``), except inside a pooled task (no
    nesting); else one after another on this thread. The first exception a task raises is raised here."""
    if not pooled or _in_task.active:
        for start, stop in ranges:
            task(start, stop)
        return
    _pool().run(task, ranges)


# ----------------------------------------------------------------------------- the BLAS's own threads
#
# A pass whose pieces each hold whole products (attention, a few batch slices' products at a time)
# runs them on one BLAS thread per pool thread: OpenBLAS's thread count is set to 1 for the
# pass and set back after it (``one_blas_thread``). Two OpenBLAS calls that each split over every core,
# from two threads at once, run slower than one after another.


@contextlib.contextmanager
def one_blas_thread():
    """Within: the BLAS runs each product on the thread that calls it (``threadpoolctl`` sets each BLAS library's
    thread count to one; the counts they had come back at the end, when the last of several callers leaves)."""
    with _BLAS_LOCK:
        if _BLAS_USERS[0] == 0:
            libraries = _blas_libraries()
            _BLAS_USERS[1] = [library.num_threads for library in libraries]
            for library in libraries:
                library.set_num_threads(1)
        _BLAS_USERS[0] += 1
    try:
        yield
    finally:
        with _BLAS_LOCK:
            _BLAS_USERS[0] -= 1
            if _BLAS_USERS[0] == 0:
                for library, count in zip(_blas_libraries(), _BLAS_USERS[1]):
                    library.set_num_threads(count)


def matmul(a, b, out=None):
    """``a @ b`` for 2-D arrays, into ``out`` when given (C-ordered, of the product's shape), else a new array (that
    nothing else holds: from ``fast.buffers`` when the product is pooled). Inside
    a block that runs its products on the pool (``over_pool``), a product the router cuts
    (``router.product_schedule``: one run of ``a``'s rows per thread) goes over the pool, each run's product on one
    BLAS thread; anything else is one call."""
    schedule = router.product_schedule(a, b) if _products.on_pool else None  # (the flag first: the router's
    if schedule is None:  # checks cost more than a small product)
        if out is None:
            return a @ b
        return np.matmul(a, b, out) if type(a) is np.ndarray else backend.namespace(a).matmul(a, b, out=out)
    if out is None:  # (a pooled product is large: fast.buffers' memory, not pages mapped afresh at each call)
        out = buffers.empty(np, (a.shape[0], b.shape[-1]), np.result_type(a, b))

    def product_rows(start, stop):  # rows start:stop of a @ b, on one BLAS thread
        np.matmul(a[start:stop], b, out=out[start:stop])

    run(product_rows, schedule.ranges, schedule.pooled)
    return out


class _ProductsFlag(threading.local):
    on_pool = False  # this thread is inside over_pool (False in every thread until it is)


_products = _ProductsFlag()


def over_pool(function):
    """``function`` made to run with the BLAS on one thread (``one_blas_thread``) and its products over the pool
    (``matmul``): a block's ``apply`` where the router says its products go over the pool while a graph is recorded
    (``fast.router.LayerRoute``; the block's forward keeps that as ``on_pool``, and its backward, wearing
    ``products_on_pool``, runs so too). OpenBLAS's own threads, spinning after each call, then stay asleep: a
    pooled pass that comes next (GELU, attention's pieces) would share its core with them. Inside a call that
    already runs so, ``function`` runs as it is."""

    @functools.wraps(function)
    def run(*args, **kwargs):
        if _products.on_pool:
            return function(*args, **kwargs)
        _products.on_pool = True
        try:
            with one_blas_thread():
                return function(*args, **kwargs)
        finally:
            _products.on_pool = False
    return run


def products_on_pool(method):
    """For a block's ``backward``: it runs ``over_pool`` where the block's forward did (``self.on_pool``)."""
    pooled = over_pool(method)

    @functools.wraps(method)
    def wrapped(self, *args, **kwargs):
        return (pooled if self.on_pool else method)(self, *args, **kwargs)
    return wrapped


_BLAS_LOCK = threading.Lock()
_BLAS_USERS = [0, None]  # callers inside one_blas_thread, and the BLAS libraries' thread counts to restore
_LIBRARIES = []


def _blas_libraries():
    """``threadpoolctl``'s controllers of the BLAS libraries this process has loaded, found once (NumPy's BLAS is
    loaded by then)."""
    if not _LIBRARIES:
        from threadpoolctl import ThreadpoolController

        _LIBRARIES.append(ThreadpoolController().select(user_api="blas").lib_controllers)
    return _LIBRARIES[0]


class _TaskFlag(threading.local):
    active = False  # this thread is running a pooled task (False in every thread until it does)


_in_task = _TaskFlag()


class _Pool:
    """``count - 1`` threads, each idle on its own ``queue.SimpleQueue``; the caller is the ``count``-th. A pass puts
    one job in each helper's queue, and the helpers and the caller take pieces from the job's shared counter until
    none is left; each helper then puts a token in the pass's own queue of tokens, for which the caller waits."""

    def __init__(self, count):
        self.inboxes = [queue.SimpleQueue() for _ in range(max(1, count - 1))]
        self.busy = threading.Lock()  # one pass at a time: a second caller runs its pieces itself
        self.threads = [threading.Thread(target=_serve, args=(inbox,), daemon=True, name=f"tinyattn-pool-{i}")
                        for i, inbox in enumerate(self.inboxes)]
        for thread in self.threads:
            thread.start()

    def run(self, task, ranges):
        if not self.busy.acquire(blocking=False):
            for start, stop in ranges:
                task(start, stop)
            return
        try:
            # next(count) is atomic under the GIL; each pass has its own queue of tokens, so a pass interrupted
            # while it waits (KeyboardInterrupt) leaves no late token for the next pass to count
            done = queue.SimpleQueue()
            job = (task, ranges, itertools.count(), [], done)
            helpers = self.inboxes[:len(ranges) - 1]
            for inbox in helpers:
                inbox.put(job)
            _work(job)
            for _ in helpers:
                done.get()
        finally:
            self.busy.release()
        errors = job[3]
        if errors:
            raise errors[0]

    def close(self):
        for inbox in self.inboxes:
            inbox.put(None)
        for thread in self.threads:
            thread.join()


def _serve(inbox):
    """A helper thread: run each job put in its queue, then put a token in the job's queue of tokens."""
    while True:
        job = inbox.get()
        if job is None:
            return
        _work(job)
        done, job = job[4], None  # (drop the task and the arrays it holds before waiting for the next job)
        done.put(None)


def _work(job):
    """Take pieces of ``job`` until none is left (or one has failed)."""
    task, ranges, counter, errors, _ = job
    previous, _in_task.active = _in_task.active, True
    try:
        for index in counter:
            if index >= len(ranges) or errors:
                return
            try:
                task(*ranges[index])
            except BaseException as error:  # handed to the caller, which raises it
                errors.append(error)
    finally:
        _in_task.active = previous


_POOL = None
_CREATE = threading.Lock()


def _pool():
    global _POOL
    if _POOL is None:
        with _CREATE:
            if _POOL is None:
                _POOL = _Pool(router.thread_count())
    return _POOL


def shutdown():
    """Stop the pool's threads (at exit; a later pass starts a new pool)."""
    global _POOL
    pool, _POOL = _POOL, None
    if pool is not None:
        pool.close()


def _forget_after_fork():
    """A forked child has none of the parent's threads: it starts its own pool when it needs one, and no thread of
    its own is inside ``one_blas_thread`` (the parent's may have been: its lock and count are the parent's)."""
    global _POOL, _CREATE, _BLAS_LOCK
    _POOL, _CREATE, _BLAS_LOCK = None, threading.Lock(), threading.Lock()
    _BLAS_USERS[:] = [0, None]


atexit.register(shutdown)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_after_fork)
