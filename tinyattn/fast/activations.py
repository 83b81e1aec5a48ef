"""GELU's array kernels: NumPy/CuPy arrays in, arrays out, no graph.

    gelu(z) = z · Φ(z)                           ∂gelu/∂z = Φ(z) + z · Φ'(z)
    exact (approximate="none"):  Φ(z) = (1 + erf(z / √2)) / 2        Φ'(z) = exp(-z² / 2) / √(2π)
    tanh  (approximate="tanh"):  Φ(z) = (1 + tanh(u)) / 2 = 1 / (1 + exp(-2u)),  u = √(2/π) (z + 0.044715 z³)
                                 Φ'(z) = 2 Φ (1 - Φ) · √(2/π) (1 + 3 · 0.044715 z²)

(``2 Φ (1 - Φ)`` is ``(1 - tanh²(u)) / 2``.) ``gelu`` returns ``gelu(z)`` and, when asked, the slope
``∂gelu/∂z`` beside it, computed in the same pass over the blocks (the exact form's ``exp(-z²/2)`` is
already there), so that a backward pass is one product, ``∂z = g · slope``. Every kernel works
elementwise, so a caller may hand it rows of a larger array (``out=`` a slice of the same rows).

In float32 the exact form's ``Φ`` is a few whole-array NumPy passes of its own (below); ``scipy.special.erf``
computes float32 in double precision, one element at a time. A large array comes in runs of rows from
``fast.kernels``, cut by ``router.gelu_schedule``, so the scratch arrays stay small. Nothing is clamped: ``z²`` may
overflow to ``inf``, and ``exp(-inf) = 0``.

Two rewrites save passes, the same sums up to round-off. ``t · P(t)`` runs as ``s · P̃(s)`` with
``s = k·t = 1 / (x + 1/k)`` (``k = 0.344`` below; ``P̃``'s coefficients ``pₙ / kⁿ⁺¹``):
two passes for ``s`` where ``t`` takes three. And ``exp(-c x²)`` runs as ``exp2(-c·log₂e · x²)``: NumPy's
float32 ``exp2`` is within 1 ulp and faster than its ``exp``.

**The exact GELU's Φ in float32** needs only a tail of its own, in ``x = |z|``:

    p = Φ(-x) = exp(-x² / 2) · t · P(t),  t = 1 / (1 + 0.344 x)      P a degree-6 polynomial
    Φ(z) = |p - [z ≥ 0]|                 (p where z < 0; 1 - p, rounded once, where z ≥ 0)

``P`` is fitted (Lawson's iteration, float64) to the error that matters rather than to a uniform
relative one: ``Φ`` itself within 1e-7 where ``p`` is large (``z`` near 0: GELU's absolute
error), within 3e-5 relatively where it is small (the negative tail); with the coefficients rounded to
float32 the fit stays within about 0.2 of that allowance on ``x ∈ [0, 13.5]``, and the ``0.344`` was
chosen with it. Evaluated in float32, the result is within 2.2e-7 of ``scipy.special.ndtr`` (over the
test's sweep of the float32 range, a grid of 40 million points on ``[-14, 14]`` and 5 million random bit
patterns), and within 1.1e-5 relatively for ``z < 0`` (where the textbook's ``1 + erf`` cancels); the test
suite holds it to 2.3e-7 and 1.2e-5. float64 (and every other floating dtype) keeps ``backend.erf``
(``scipy.special.erf``, exact), as the reference ``F.gelu`` does.

>>> import numpy as np
>>> x = np.array([-1.0, 0.0, 0.5, 3.0], dtype=np.float32)
>>> (x * normal_cdf(x)).round(4)
array([-0.1587,  0.    ,  0.3457,  2.996 ], dtype=float32)
>>> slope = np.empty_like(x)
>>> gelu(x, slope=slope).round(4), slope.round(4)
(array([-0.1587,  0.    ,  0.3457,  2.996 ], dtype=float32), array([-0.0833,  0.5   ,  0.8675,  1.0119], dtype=float32))
"""

import math
import threading

import numpy as np

from .. import backend
from . import buffers

# The tail below were fitted in t = 1 / (1 + k x) and run in s = k t = 1 / (x + 1/k): t · Q(t) = s · Q̃(s) with
# Q̃'s coefficients qₙ / kⁿ⁺¹ (``_in_s``), and s takes two passes where t takes three.


def _in_s(coefficients, k):
    """``(qₙ / kⁿ⁺¹)``: the coefficients of ``Q̃`` with ``t · Q(t) = s · Q̃(s)``, ``t = 1 / (1 + k x)``, ``s = k t``."""
    return tuple(c / k ** (n + 1) for n, c in enumerate(coefficients))


# Φ(-x) = exp(-x²/2) · t · P(t), t = 1 / (1 + 0.344 x), coefficients of t⁰, t¹, …, in s = 1 / (x + 1/0.344); the
# constant one is taken an ulp below its float32 rounding, with which Φ(0) comes out 0.49999994 rather than ½
_CDF_TAIL_SLOPE = 0.344
_CDF_TAIL = _in_s((0.13748806715011597, 0.13299717009067535, 0.14960256218910217, -0.011722455732524395,
                   0.23999273777008057, -0.19286231696605682, 0.04450425133109093), _CDF_TAIL_SLOPE)
_CDF_TAIL = (float(np.nextafter(np.float32(_CDF_TAIL[0]), np.float32(0))),) + _CDF_TAIL[1:]
_SQRT_HALF = 1 / math.sqrt(2)
_SQRT_2_OVER_PI = math.sqrt(2 / math.pi)
_INV_SQRT_2PI = 1 / math.sqrt(2 * math.pi)
_TANH_CUBIC = 0.044715
LOG2_E = 1 / math.log(2)


def _is_float32(x):
    return x.dtype == np.float32


def _horner(coefficients, u, out):
    """``out = c₀ + c₁ u + … + cₙ uⁿ`` (coefficients already of ``u``'s dtype), in place."""
    xp = backend.namespace(u)
    xp.multiply(u, coefficients[-1], out=out)
    out += coefficients[-2]
    for c in coefficients[-3::-1]:
        out *= u
        out += c
    return out


_CONSTANTS = {}  # (dtype, coefficients) -> the coefficients as scalars of that dtype


def _constants(dtype, values):
    """``values`` as scalars of ``dtype`` (so that a pass with them keeps its arrays' dtype), made once."""
    scalars = _CONSTANTS.get((dtype, values))
    if scalars is None:
        scalars = _CONSTANTS[dtype, values] = tuple(dtype.type(v) for v in values)
    return scalars


def _exp_tail(x, out, s, offset, square_scale, coefficients):
    """``exp(-c x²) · s · R(s)``, ``s = 1 / (|x| + offset)``, ``c = square_scale`` (with no array of ``|x|``), into
    ``out``; ``s`` scratch of ``x``'s shape, left holding ``exp(-c x²)``.
    ``Φ(-x)`` is ``(1/0.344, 1/2, _CDF_TAIL)``. ``exp(-c x²)`` is computed as
    ``exp2(-c·log₂e · x²)``: NumPy's float32 ``exp2`` is faster than its ``exp`` and within 1 ulp. ``x²`` may
    overflow to ``inf`` (a huge ``x``): ``exp2(-inf) = 0``, no warning."""
    xp, dtype = backend.namespace(x), x.dtype.type
    xp.abs(x, out=s)
    s += dtype(offset)
    xp.divide(dtype(1), s, out=s)  # s = 1 / (x + offset)
    _horner(_constants(x.dtype, coefficients), s, out)  # R(s)
    out *= s
    with np.errstate(over="ignore"):  # (a clamp would cost a pass)
        xp.multiply(x, x, out=s)
    s *= dtype(-square_scale * LOG2_E)  # -c x² · log₂e
    xp.exp2(s, out=s)  # exp(-c x²)
    out *= s
    return out


def _exact_cdf(z, out, t):
    """The exact ``Φ(z)`` of float32 ``z`` into ``out`` (the tail above, then the sign); ``t`` scratch of
    ``z``'s shape, left holding ``exp(-z²/2)``."""
    xp = backend.namespace(z)
    _exp_tail(z, out, t, 1 / _CDF_TAIL_SLOPE, 0.5, _CDF_TAIL)  # p = Φ(-|z|), unclamped
    xp.subtract(out, xp.greater_equal(z, 0, out=_scratch(z, "sign", np.bool_)), out=out)  # p - 1 where z ≥ 0
    # (-0 included), p where z < 0
    return xp.abs(out, out=out)  # Φ(z): 1 - p or p, exactly as rounded


class _Buffers(threading.local):
    arrays = None  # this thread's scratch arrays: {(dtype, slot): flat array}


_BUFFERS = _Buffers()


def _scratch(like, slot, dtype=None):
    """A scratch array of ``like``'s shape (and dtype, or ``dtype``): on NumPy this thread's own for ``slot``, kept
    and reused by the next call, so a pass's temporaries are not freed and faulted in again each time (glibc hands a
    freed heap top back to the kernel); a fresh array below ``fast.buffers.SMALLEST_KEPT`` bytes and on CuPy. Never
    returned to a caller. The kernels' callers hand them at most a piece of rows at a time
    (``router.gelu_schedule``), which bounds what is kept."""
    xp = backend.namespace(like)
    dtype = like.dtype if dtype is None else dtype
    if xp is not np or like.nbytes < buffers.SMALLEST_KEPT:  # (a small array costs less than the lookup)
        return xp.empty(like.shape, dtype=dtype)
    dtype = np.dtype(dtype)
    arrays = _BUFFERS.arrays
    if arrays is None:
        arrays = _BUFFERS.arrays = {}
    array = arrays.get((dtype, slot))
    if array is None or array.size < like.size:
        array = arrays[dtype, slot] = np.empty(like.size, dtype=dtype)
    return array[:like.size].reshape(like.shape)


def _target(x, out):
    """Where a kernel writes: ``out``, or a fresh array of ``x``'s shape and dtype."""
    return backend.namespace(x).empty(x.shape, dtype=x.dtype) if out is None else out


def normal_cdf(z, approximate="none", out=None):
    """``Φ(z)``, the standard normal CDF (``approximate="none"``) or GELU's tanh approximation of it
    (``"tanh"``), elementwise, into ``out`` (or a fresh array)."""
    xp = backend.namespace(z)
    if out is None:
        out = xp.empty(z.shape, dtype=z.dtype)
    if approximate == "tanh":  # (1 + tanh(u)) / 2 = 1 / (1 + exp(-2u)): no cancellation where tanh(u) ≈ -1
        xp.multiply(z, z, out=out)
        out *= z.dtype.type(_TANH_CUBIC)
        out += z.dtype.type(1)
        out *= z
        out *= z.dtype.type(-2 * _SQRT_2_OVER_PI * LOG2_E)  # -2u · log₂e
        out.clip(z.dtype.type(-math.inf), z.dtype.type(115), out=out)  # 2¹¹⁵ is finite in float32; Φ there 2e-35
        xp.exp2(out, out=out)  # exp(-2u)
        out += z.dtype.type(1)
        xp.divide(z.dtype.type(1), out, out=out)
        return out
    if not _is_float32(z):  # (1 + erf(z / √2)) / 2 with scipy's erf, as the reference
        out[...] = backend.erf(z * z.dtype.type(_SQRT_HALF))
        out += z.dtype.type(1)
        out *= z.dtype.type(0.5)
        return out
    return _exact_cdf(z, out, xp.empty_like(z))


def gelu(z, approximate="none", out=None, slope=None):
    """``A = gelu(z) = z · Φ(z)`` elementwise into ``out`` (or a fresh array; ``out=z`` works in place),
    and, when ``slope`` is an array of ``z``'s shape, ``∂gelu/∂z = Φ(z) + z Φ'(z)`` into it. Returns ``A``.

        exact:  Φ' = exp(-z²/2) / √(2π)        tanh:  Φ' = 2 Φ (1 - Φ) · √(2/π) (1 + 3 · 0.044715 z²)

    ``Φ`` into a scratch array, the slope from it, then ``A`` (``z`` is read last there)."""
    xp, dtype, out = backend.namespace(z), z.dtype.type, _target(z, out)
    cdf, t = _scratch(z, "cdf"), _scratch(z, "t")
    if approximate != "tanh" and _is_float32(z):
        _exact_cdf(z, cdf, t)  # t: exp(-z²/2)
    else:
        normal_cdf(z, approximate, out=cdf)
        if slope is not None and approximate != "tanh":
            xp.multiply(z, z, out=t)
            t *= dtype(-0.5)
            xp.exp(t, out=t)  # exp(-z²/2)
    if slope is not None:
        if approximate == "tanh":  # 2 Φ (1 - Φ) · √(2/π) (1 + 3 · 0.044715 z²)
            xp.multiply(z, z, out=t)
            t *= dtype(6 * _TANH_CUBIC * _SQRT_2_OVER_PI)
            t += dtype(2 * _SQRT_2_OVER_PI)
            t *= cdf
            t *= xp.subtract(dtype(1), cdf)
        else:  # exp(-z²/2) / √(2π)
            t *= dtype(_INV_SQRT_2PI)
        t *= z
        xp.add(t, cdf, out=slope)  # Φ + z Φ'
    return xp.multiply(z, cdf, out=out)
