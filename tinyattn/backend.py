"""Floor 1: which array library holds a tensor's data.

A tensor's data is a *backend array*. Three backends exist:

- ``"cpu"``: a ``numpy.ndarray`` (the default);
- ``"cuda"``: a ``cupy.ndarray``, imported only when asked for;
- ``"strict"``: a NumPy array behind a wrapper that, like CuPy, refuses implicit
  conversion to NumPy and refuses to be mixed with plain NumPy arrays. It exists so
  that the test suite proves, without a GPU, that the engine never hands device data
  to NumPy behind the backend's back.

The backend is chosen per array (the idea of CuPy's ``get_array_module``):
``namespace(array)`` returns the module whose functions operate on that array. What a
namespace lacks (``erf``, scatter-add, random numbers) lives here, in one place.

>>> import numpy as np
>>> namespace(np.zeros(2)) is np
True
>>> device_of(to_device(np.ones(3), "strict"))
'strict'
"""

import contextlib
import math
import sys

import numpy as np
from numpy.lib.mixins import NDArrayOperatorsMixin

from . import modes

DEVICES = ("cpu", "cuda", "strict")


# ----------------------------------------------------------------------------- strict


def _unwrap(obj):
    """StrictArray -> ndarray inside args; a plain ndarray here is an implicit mix."""
    if isinstance(obj, StrictArray):
        return obj._a
    if isinstance(obj, np.ndarray):
        raise TypeError(
            "strict backend: a NumPy array was combined with a strict-backend array "
            f"(NumPy array of shape {obj.shape}); move it with tensor.to(device) first"
        )
    if isinstance(obj, (tuple, list)):
        return type(obj)(_unwrap(o) for o in obj)
    if isinstance(obj, dict):
        return {k: _unwrap(v) for k, v in obj.items()}
    return obj


def _wrap(obj):
    """ndarray (and NumPy scalars, as CuPy returns 0-d arrays) -> StrictArray."""
    if isinstance(obj, np.ndarray):
        return StrictArray(obj)
    if isinstance(obj, np.generic):
        return StrictArray(np.asarray(obj))
    if isinstance(obj, (tuple, list)):
        return type(obj)(_wrap(o) for o in obj)
    return obj


class StrictArray(NDArrayOperatorsMixin):
    """A NumPy array that behaves like a device array: no implicit trip to NumPy."""

    __slots__ = ("_a",)

    def __init__(self, array):
        self._a = array

    def __array__(self, dtype=None, copy=None):
        raise TypeError(
            "strict backend: implicit conversion to a NumPy array is not allowed "
            "(CuPy refuses it too); use tensor.numpy() to copy to the host"
        )

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        return _wrap(getattr(ufunc, method)(*_unwrap(inputs), **_unwrap(kwargs)))

    def __array_function__(self, func, types, args, kwargs):
        return _wrap(func(*_unwrap(args), **_unwrap(kwargs)))

    def __getattr__(self, name):
        if name.startswith("__"):  # __array_interface__ and kin would hand NumPy the data
            raise AttributeError(f"strict backend: {name} is not available on a device array")
        attr = getattr(self._a, name)
        if callable(attr):
            return lambda *args, **kwargs: _wrap(attr(*_unwrap(args), **_unwrap(kwargs)))
        return _wrap(attr)

    def __getitem__(self, index):
        return _wrap(self._a[_unwrap(index)])

    def __setitem__(self, index, value):
        self._a[_unwrap(index)] = _unwrap(value)

    def __len__(self):
        return len(self._a)

    def __float__(self):
        return float(self._a)

    def __int__(self):
        return int(self._a)

    def __bool__(self):
        return bool(self._a)

    def __repr__(self):
        return "strict_" + repr(self._a)

    # properties that __getattr__ would wrap needlessly
    shape = property(lambda self: self._a.shape)
    dtype = property(lambda self: self._a.dtype)
    ndim = property(lambda self: self._a.ndim)
    size = property(lambda self: self._a.size)
    T = property(lambda self: StrictArray(self._a.T))


class _StrictNamespace:
    """``numpy`` as seen from the strict device: creation functions return StrictArrays."""

    def __getattr__(self, name):
        obj = getattr(np, name)
        if isinstance(obj, (type, np.ufunc)) or not callable(obj):
            return obj  # dtypes, constants, ufuncs (they dispatch through __array_ufunc__)
        if name in ("asarray", "array"):  # the explicit host -> device copy
            return lambda a, *args, **kw: _wrap(np.array(a._a if isinstance(a, StrictArray) else a, *args, **kw))
        return lambda *args, **kwargs: _wrap(obj(*_unwrap(args), **_unwrap(kwargs)))


strict = _StrictNamespace()


# ----------------------------------------------------------------------------- devices


def _cupy():
    try:
        import cupy
    except ImportError as error:
        raise RuntimeError(
            "device='cuda' needs CuPy and an NVIDIA GPU: pip install 'tinyattn[cuda]' "
            "(installs cupy-cuda12x)"
        ) from error
    return cupy


_NAMESPACE = {np.ndarray: np, StrictArray: strict}
_DEVICE = {np.ndarray: "cpu", StrictArray: "strict"}


def _register_cupy():
    cupy = _cupy()
    _NAMESPACE[cupy.ndarray] = cupy
    _DEVICE[cupy.ndarray] = "cuda"
    return cupy


def _is_unregistered_cupy(obj):
    """A CuPy array met before tinyattn has touched the GPU: register CuPy now."""
    cupy = sys.modules.get("cupy")
    if cupy is not None and cupy.ndarray not in _NAMESPACE and isinstance(obj, cupy.ndarray):
        _register_cupy()
        return True
    return False


def namespace(array):
    """The array module (``numpy``, ``cupy`` or the strict one) that owns ``array``."""
    xp = _NAMESPACE.get(type(array))
    if xp is None:
        if isinstance(array, np.generic):  # NumPy returns scalars from 0-d arithmetic
            return np
        if _is_unregistered_cupy(array):
            return _NAMESPACE[type(array)]
        raise TypeError(f"expected a backend array (NumPy, CuPy or strict), got {type(array).__name__}")
    return xp


def namespace_for(device):
    if device == "cpu":
        return np
    if device == "strict":
        return strict
    if device == "cuda":
        return _register_cupy()
    raise ValueError(f"unknown device {device!r}: expected one of {DEVICES}")


def device_of(array):
    device = _DEVICE.get(type(array))
    if device is None and _is_unregistered_cupy(array):
        return "cuda"
    if device is None:
        raise TypeError(f"expected a backend array (NumPy, CuPy or strict), got {type(array).__name__}")
    return device


# ----------------------------------------------------------------------------- host memory


def keep_freed_memory(enabled=True):
    """Let glibc's ``malloc`` keep freed memory for the next allocation (Linux; returns True if it took).

    A training step allocates the same large arrays at every step. By default glibc hands a freed
    block bigger than its mmap threshold back to the kernel, and trims the free top of its heap,
    so the next step's arrays are mapped and page-faulted afresh, one 4 KiB page at a time.
    ``mallopt(M_MMAP_THRESHOLD, 32 MiB)`` (the most it allows) and ``mallopt(M_TRIM_THRESHOLD, 1 GiB)``
    keep such blocks in the heap instead; the process then holds on to the memory of its largest
    step. It changes ``malloc`` for the whole process, the user's own code included, so ``tinyattn``
    never calls it by itself: a user opts in with ``ta.backend.keep_freed_memory()``.
    ``keep_freed_memory(False)`` sets both back to glibc's starting values (128 KiB), though not
    glibc's habit of raising the mmap threshold by itself, which any explicit setting turns off.
    """
    if not sys.platform.startswith("linux"):
        return False
    import ctypes

    try:
        mallopt = ctypes.CDLL("libc.so.6").mallopt
    except (OSError, AttributeError):  # not glibc (musl has no mallopt)
        return False
    M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
    trim, mmap = (1 << 30, 32 << 20) if enabled else (128 << 10, 128 << 10)  # glibc's defaults: 128 KiB
    return bool(mallopt(M_MMAP_THRESHOLD, mmap)) and bool(mallopt(M_TRIM_THRESHOLD, trim))


_FILLED = {}


def filled(n, value, dtype, xp):
    """A cached vector ``(n,)`` of ``value`` in the namespace ``xp`` (never write to it): the ones
    and ``1/N`` that turn sums and means into matrix-vector products."""
    key = (n, value, dtype, id(xp))
    vector = _FILLED.get(key)
    if vector is None:
        if len(_FILLED) > 64:  # many row counts (varying batch shapes): start afresh
            _FILLED.clear()
        vector = _FILLED[key] = xp.full(n, value, dtype=dtype)
    return vector


def filled_like(n, value, like):
    """``filled(n, value, like.dtype, namespace(like))``, the same cached vector, found by the array's type
    (which decides its namespace) without asking ``namespace``: the kernels' sums ask it many times a step."""
    key = (n, value, like.dtype, type(like))
    vector = _FILLED.get(key)
    if vector is None:
        vector = filled(n, value, like.dtype, namespace(like))
        _FILLED[key] = vector
    return vector


def is_array(obj):
    return type(obj) in _NAMESPACE or _is_unregistered_cupy(obj)


def to_numpy(array):
    """An explicit copy of ``array`` on the host, as a ``numpy.ndarray``."""
    kind = type(array)
    if kind is np.ndarray:
        return array.copy()
    if kind is StrictArray:
        return array._a.copy()
    return array.get()  # cupy


def to_device(array, device):
    """``array`` (any backend, or host data) as an array of ``device``; no copy if already there."""
    if is_array(array) and device_of(array) == device:
        return array
    host = to_numpy(array) if is_array(array) else np.asarray(array)
    if device == "cpu":
        return host
    if device == "strict":
        return StrictArray(host)
    return namespace_for(device).asarray(host)


# ----------------------------------------------------------------------------- what namespaces lack


def erf(x):
    """The error function, elementwise, on the array's own device."""
    kind = type(x)
    if kind is np.ndarray:
        from scipy.special import erf as _erf

        return _erf(x)
    if kind is StrictArray:
        from scipy.special import erf as _erf

        return StrictArray(_erf(x._a))
    from cupyx.scipy.special import erf as _erf

    return _erf(x)


def scatter_add(target, index, values):
    """``target[index] += values`` in place, accumulating repeated indices, with the same bits on every run.

    NumPy's ``add.at`` adds the repeats one after another. CuPy's adds them with atomic operations, in an order
    that changes from run to run, and a float sum with it: an embedding's gradient would differ in its last bits
    between two runs of the same training. So on CuPy the repeats are summed in a fixed order (``_sum_repeats``)."""
    kind = type(target)
    if kind is np.ndarray or kind is StrictArray:
        np.add.at(target, index, values)  # StrictArray dispatches through __array_ufunc__
    else:
        _sum_repeats(target, index, values, _cupy())
    return target


def _sum_repeats(target, index, values, xp):
    """``target[index] += values`` for an advanced ``index``, the values at a repeated position summed in a fixed
    order, without atomic operations (array module ``xp``; ``scatter_add`` uses it on CuPy).

    The positions (for integer arrays alone, as an embedding's or a cross-entropy's pick has, the rows of
    ``target`` over the axes they index; else positions in the flattened ``target``) are sorted, stably, so that
    each position's values form a run; a segmented scan by doubling (Hillis and Steele 1986) then sums each run:
    after the round with ``shift``, an entry holds the sum of the up to ``2·shift`` entries of its run that end at
    it, so after ``ceil(log2(longest run))`` rounds each run's last entry holds the run's sum. Those sums go to
    distinct positions: a plain ``work[positions] += sums``."""
    arrays = index if type(index) is tuple else (index,)
    destination = target  # where the sums go: target, or a contiguous copy of it written back at the end
    if len(arrays) <= target.ndim and all(isinstance(a, xp.ndarray) and a.dtype.kind in "iu" for a in arrays):
        lead, rest = target.shape[:len(arrays)], target.shape[len(arrays):]
        positions = None  # the row of each value among the prod(lead) rows of `work`
        for a, size in zip(arrays, lead):
            a = a.astype(xp.int64, copy=False)  # (a narrow type would overflow below)
            a = xp.where(a < 0, a + size, a)  # a negative index counts from the end
            positions = a if positions is None else positions * size + a  # (the arrays broadcast together)
        values = xp.broadcast_to(values, positions.shape + rest).reshape((positions.size,) + rest)
        positions = positions.reshape(-1)  # (n,)
        if len(arrays) > 1:  # rows over several axes: those axes as one, a view of a contiguous array
            destination = xp.ascontiguousarray(target)  # (target itself when it is contiguous)
        work = destination.reshape((math.prod(lead),) + rest)
    else:  # slices, integers, None, boolean masks beside or instead of arrays: positions in the flattened target
        destination = xp.ascontiguousarray(target)  # (target itself when it is contiguous)
        picked = xp.arange(target.size).reshape(target.shape)[index]
        positions, values = picked.reshape(-1), xp.broadcast_to(values, picked.shape).reshape(-1)
        work = destination.reshape(-1)  # a view
    order = positions.argsort(kind="stable") if xp is np else positions.argsort()  # (CuPy's sort is stable)
    # (summed in the target's dtype: Scatter's values have it)
    positions, sums = positions[order], values[order].astype(target.dtype, copy=False)  # (n,), (n, …)
    n, shift = len(positions), 1
    while shift < n:
        same = positions[shift:] == positions[:-shift]  # (n - shift,): an entry and the one shift before it
        if not same.any():  # no run is longer than shift: each run's last entry holds its sum
            break
        same = same.reshape(same.shape + (1,) * (sums.ndim - 1))
        sums[shift:] = sums[shift:] + xp.where(same, sums[:-shift], 0)  # (the right side read whole first)
        shift *= 2
    last = xp.ones(n, dtype=bool)  # each run's last entry
    last[:-1] = positions[1:] != positions[:-1]
    work[positions[last]] += sums[last]
    if destination is not target:  # (a copy of a target laid out otherwise: written back)
        target[...] = destination


_SEED = [None]
_GENERATORS = {}


def manual_seed(seed):
    """Seed every random draw of the library (init, dropout, ``ta.randn``…), on every backend.

    Args:
        seed: an integer.

    >>> import tinyattn as ta
    >>> ta.manual_seed(0)
    >>> a = ta.rand(3)
    >>> ta.manual_seed(0)
    >>> bool((ta.rand(3) == a).all())
    True
    """
    _SEED[0] = int(seed)
    _GENERATORS.clear()


def generator(device):
    """The library's random generator for ``device`` (created from the last seed)."""
    rng = _GENERATORS.get(device)
    if rng is None:
        if device == "cuda":
            rng = _register_cupy().random.default_rng(_SEED[0])
        else:
            rng = np.random.default_rng(_SEED[0])
        _GENERATORS[device] = rng
    return rng


def get_rng_state():
    """The state of the library's random generators, as a dict that ``ta.save`` can store.

    ``{"seed": the last manual_seed (or None), "generators": {device: state}}`` for each device
    whose generator has drawn: NumPy's ``bit_generator.state`` for ``"cpu"`` and ``"strict"``
    (Python ints and strings), and CuPy's cuRAND state bytes for ``"cuda"``. A device without a
    generator yet gets one from the seed at its first draw, as it would have.

    >>> manual_seed(0)
    >>> state = get_rng_state()
    >>> first = random_normal((2,), np.float64, "cpu")
    >>> set_rng_state(state)
    >>> bool((random_normal((2,), np.float64, "cpu") == first).all())
    True
    """
    generators = {}
    for device, rng in _GENERATORS.items():
        if device == "cuda":  # CuPy has no public getter: the cuRAND states are one int8 device array
            generators[device] = {"curand_states": rng.bit_generator._state.get()}
        else:
            generators[device] = rng.bit_generator.state
    return {"seed": _SEED[0], "generators": generators}


def set_rng_state(state):
    """Put the library's random generators back in a state from ``get_rng_state()``.

    Everything is checked before anything changes: a state that does not fit (an unknown
    device, another bit generator, cuRAND states of another GPU's size) raises ``ValueError``
    and the generators stay as they were.

    Args:
        state: the dict ``get_rng_state()`` returned.

    >>> import tinyattn as ta
    >>> state = ta.get_rng_state()
    >>> a = ta.randn(2)
    >>> ta.set_rng_state(state)
    >>> bool((ta.randn(2) == a).all())
    True
    """
    if not (isinstance(state, dict) and set(state) == {"seed", "generators"} and isinstance(state["generators"], dict)):
        raise ValueError(
            "set_rng_state: expected the dict get_rng_state() returns, with keys 'seed' and 'generators', "
            f"got {type(state).__name__}" + (f" with keys {sorted(state)}" if isinstance(state, dict) else "")
        )
    seed = state["seed"]
    if seed is not None and not isinstance(seed, (int, np.integer)):
        raise ValueError(f"set_rng_state: 'seed' must be an integer or None, got {seed!r}")
    generators = {}
    for device, saved in state["generators"].items():
        if device not in DEVICES:
            raise ValueError(f"set_rng_state: unknown device {device!r}: expected one of {DEVICES}")
        try:
            generators[device] = _generator_from_state(device, saved)
        except (ValueError, TypeError, KeyError) as error:
            raise ValueError(f"set_rng_state: the {device!r} generator's state does not fit: {error}") from error
    _SEED[0] = None if seed is None else int(seed)
    _GENERATORS.clear()
    _GENERATORS.update(generators)


@contextlib.contextmanager
def rng_state(state):
    """The library's generators in ``state`` (``get_rng_state()``'s) inside the block, and back as they were after
    it: a run that draws again what an earlier run drew (``ta.utils.checkpoint``'s, a fused node's reference).
    ``None``: the generators stay as they are."""
    if state is None:
        yield
        return
    now = get_rng_state()
    set_rng_state(state)
    try:
        yield
    finally:
        set_rng_state(now)


def _generator_from_state(device, saved):
    if device != "cuda":
        rng = np.random.default_rng()
        rng.bit_generator.state = dict(saved)
        return rng
    cupy = _register_cupy()
    rng = cupy.random.default_rng(0)
    states = rng.bit_generator._state
    saved = np.asarray(saved["curand_states"])
    if saved.dtype != states.dtype or saved.shape != states.shape:
        raise ValueError(
            f"expected cuRAND states of {states.shape[0]} bytes (this GPU), got {saved.dtype} {saved.shape}"
        )
    states[...] = cupy.asarray(saved)
    return rng


def _check_randomness():  # inside ``ta.func.vmap``, the thread's ``randomness`` mode: "error", "same" or "different"
    if modes.current().randomness == "error":
        raise RuntimeError("vmap: a random operation (dropout, a random draw) ran inside vmap(randomness='error'); "
                           "pass randomness='same' (one draw for the whole batch) or 'different' (one per example)")


def random_normal(shape, dtype, device):
    """Standard normal draws of ``dtype`` on ``device``, from the library's generator. NumPy's and CuPy's generators
    draw float32 and float64 alone: a float16 draw is a float32 draw rounded to float16."""
    _check_randomness()
    out = generator(device).standard_normal(shape, dtype=np.float32 if dtype == np.float16 else dtype)
    return _drawn(out, dtype, device)


def random_uniform(shape, dtype, device):
    """Uniform draws in ``[0, 1)`` of ``dtype`` on ``device``, from the library's generator. A float16 draw is a
    float32 draw floored to a multiple of ``2⁻¹¹`` (float16's 11 significant bits, as torch draws it), so that no
    rounding lifts it to 1."""
    _check_randomness()
    if dtype == np.float16:
        out = generator(device).random(shape, dtype=np.float32)
        out = namespace(out).floor(out * 2048) / 2048  # (k / 2048, k < 2048: exact in float16)
    else:
        out = generator(device).random(shape, dtype=dtype)
    return _drawn(out, dtype, device)


def _drawn(out, dtype, device):
    """A generator's draws as an array of ``dtype`` on ``device`` (NumPy draws a scalar for shape ``()``)."""
    if type(out) is not np.ndarray and isinstance(out, np.generic):
        out = np.asarray(out)
    out = out.astype(dtype, copy=False)
    return StrictArray(out) if device == "strict" else out


def dropout_mask(shape, p, dtype, device, batch_ndim=0):
    """Inverted dropout's mask: each element kept with probability ``1 - p`` and then worth ``1/(1-p)``, else 0
    (all zeros for ``p = 1``), drawn from the library's generator on ``device``. ``F.dropout`` and the fast
    layer's attention draw it here, so the same seed gives the same mask on either route. ``batch_ndim``: the
    leading axes that are ``vmap``'s batch; with ``randomness="same"`` one draw serves them all."""
    if batch_ndim and modes.current().randomness == "same":
        one = random_uniform(shape[batch_ndim:], dtype, device)
        uniform = namespace(one).broadcast_to(one, shape)
    else:
        uniform = random_uniform(shape, dtype, device)
    scale = 0.0 if p == 1 else 1 / (1 - p)
    return (uniform >= p).astype(dtype) * scale  # kept with probability 1 - p
