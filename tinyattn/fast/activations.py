"""GELU's array kernels and a fast float32 erf: NumPy/CuPy arrays in, arrays out, no graph.

    gelu(z) = z · Φ(z)                           ∂gelu/∂z = Φ(z) + z · Φ'(z)
    exact (approximate="none"):  Φ(z) = (1 + erf(z / √2)) / 2        Φ'(z) = exp(-z² / 2) / √(2π)
    tanh  (approximate="tanh"):  Φ(z) = (1 + tanh(u)) / 2 = 1 / (1 + exp(-2u)),  u = √(2/π) (z + 0.044715 z³)
                                 Φ'(z) = 2 Φ (1 - Φ) · √(2/π) (1 + 3 · 0.044715 z²)

(``2 Φ (1 - Φ)`` is ``(1 - tanh²(u)) / 2``.) Every kernel works elementwise, so a caller may hand
it rows of a larger array (``out=`` a slice of the same rows).

**erf in float32.** ``scipy.special.erf`` computes float32 in double precision, one element at
a time; here erf is a few whole-array NumPy passes, on blocks of ``BLOCK`` elements (the scratch
arrays stay small; each pass is still long enough for the pool's threads, see ``BLOCK``). With ``a = |x|``:

    a < 0.8:   erf(x) = x · S(x²)                              S a degree-5 polynomial
    a ≥ 0.8:   erf(x) = sign(x) · (1 - erfc(a))
               erfc(a) = exp(-a²) · t · R(t),  t = 1 / (1 + a/2)     R a degree-8 polynomial

``S`` and ``R`` are near-minimax fits (Lawson's iteration on a dense grid, in float64, relative
error 3e-9 for ``S`` on ``[0, 0.8]``, 1.2e-8 for ``R`` on ``a ∈ [0, 4]``; past 4, ``erfc`` is
below float32's resolution of 1 and ``t → 0`` keeps ``R`` bounded). Evaluated in float32 the
result was within 1.2e-7 of erf (2.4 ulp) over 46 million float32 inputs (a dense grid and random
bit patterns: subnormals, ±0, ±inf, NaN) against ``scipy.special.erf`` in float64; the test suite
sweeps them and holds it to 1.3e-7 and 2.6 ulp. In erf, ``a`` is clamped at 10.5 first (``exp(-10.5²)``
is 0 in float32), so nothing overflows; Φ below skips the clamp (``z²`` may overflow to ``inf``, and
``exp(-inf) = 0``), as a clamp costs a pass as slow as ``exp``.

The exact GELU's ``Φ`` needs only the tail: ``Φ(z) = erfc(|z|/√2) / 2`` for ``z < 0`` and
``1 - erfc(|z|/√2) / 2`` otherwise, within 2.5e-7 of ``Φ`` (and within 6e-5 relatively
for ``z < 0``, where the textbook's ``1 + erf`` cancels). float64 (and every other floating dtype)
keeps ``backend.erf`` (``scipy.special.erf``, exact), as the reference ``F.gelu`` does.

>>> import numpy as np
>>> x = np.array([-1.0, 0.0, 0.5, 3.0], dtype=np.float32)
>>> erf(x).round(6)
array([-0.842701,  0.      ,  0.5205  ,  0.999978], dtype=float32)
>>> (x * normal_cdf(x)).round(4)                       # gelu
array([-0.1587,  0.    ,  0.3457,  2.996 ], dtype=float32)
"""

import math

import numpy as np

from .. import backend

BLOCK = 1 << 17  # elements per block of the float32 kernels on the CPU (512 KiB per scratch array). Smaller
# blocks stay in a core's cache but make every pass a short call, and the pool's threads take turns holding
# the GIL between calls: pooled, small blocks gain nothing (`benchmarks/pool_threshold.py --gelu` measures it)

# erf(x) = x · S(x²) on |x| < 0.8, coefficients of x⁰, x², …
_ERF_SMALL = (1.12837916, -0.376126038, 0.112831428, -0.0268221092, 0.00508744121, -0.000654960574)
_SEAM = 0.8  # the small branch below, the tail from here on
# erfc(a) = exp(-a²) · t · R(t), t = 1 / (1 + a/2), coefficients of t⁰, t¹, …
_ERFC_TAIL = (0.282370474, 0.278274777, 0.268376642, 0.115830528, 0.155491087, 0.0393421797, -0.29597257,
              0.198898641, -0.0426117701)
_TAIL_SCALE = 0.5
_HALF_ERFC_TAIL = tuple(c / 2 for c in _ERFC_TAIL)  # R / 2: Φ(-|z|) = erfc(|z|/√2) / 2
_CLAMP = 10.5  # exp(-10.5²) is 0 in float32 (erfc(10) is not: 2e-45, a subnormal)
_SQRT_HALF = 1 / math.sqrt(2)
_SQRT_2_OVER_PI = math.sqrt(2 / math.pi)
_INV_SQRT_2PI = 1 / math.sqrt(2 * math.pi)
_TANH_CUBIC = 0.044715


def _is_float32(x):
    return x.dtype == np.float32


def _blocks(x, *others):
    """``(flat slices of x and others, block by block)``: ``BLOCK`` elements at a time on NumPy, the
    whole array at once elsewhere (a GPU wants few large kernels)."""
    flat = [a.reshape(-1) for a in (x, *others)]
    n = flat[0].shape[0]
    step = BLOCK if backend.namespace(x) is np else max(n, 1)
    for start in range(0, n, step):
        yield [a[start:start + step] for a in flat]


def _horner(coefficients, u, out):
    """``out = c₀ + c₁ u + … + cₙ uⁿ`` (coefficients already of ``u``'s dtype), in place."""
    xp = backend.namespace(u)
    xp.multiply(u, coefficients[-1], out=out)
    out += coefficients[-2]
    for c in coefficients[-3::-1]:
        out *= u
        out += c
    return out


def _constants(dtype, values):
    return tuple(dtype.type(v) for v in values)


def _erfc_tail(x, out, t, scale=1.0, coefficients=_ERFC_TAIL):
    """``c · erfc(a)`` for ``a = scale · x``, ``x ≥ 0``, into ``out`` (``c = 1`` with R's own
    coefficients; ``Φ(-|z|) = erfc(|z|/√2) / 2`` passes ``scale = 1/√2`` and R/2); ``t`` scratch of ``x``'s
    shape. ``x²`` may overflow to ``inf`` (a huge ``x`` not clamped): ``exp(-inf) = 0``, no warning."""
    xp, dtype = backend.namespace(x), x.dtype.type
    xp.multiply(x, dtype(_TAIL_SCALE * scale), out=t)
    t += dtype(1)
    xp.divide(dtype(1), t, out=t)  # t = 1 / (1 + a/2)
    _horner(_constants(x.dtype, coefficients), t, out)  # c · R(t)
    out *= t
    with np.errstate(over="ignore"):  # (a clamp, np.minimum, would cost a pass as slow as exp)
        xp.multiply(x, x, out=t)
    t *= dtype(-scale * scale)  # -a²
    xp.exp(t, out=t)  # exp(-a²)
    out *= t
    return out


def _target(x, out):
    """Where a block loop writes: ``out`` when it is contiguous (its flat blocks are views), else a
    fresh array of ``x``'s shape and dtype that ``_deliver`` copies into ``out``."""
    if out is not None and out.flags.c_contiguous:
        return out
    return backend.namespace(x).empty(x.shape, dtype=x.dtype)


def _deliver(result, out):
    if out is None or result is out:
        return result
    out[...] = result
    return out


def erf(x, out=None):
    """The error function, elementwise, into ``out`` (or a fresh array): the float32 kernel above
    for float32, ``backend.erf`` (``scipy.special.erf``) for every other dtype."""
    if not _is_float32(x):
        result = backend.erf(x)
        if out is None:
            return result
        out[...] = result
        return out
    result = _target(x, out)
    xp, small, one = backend.namespace(x), _constants(x.dtype, _ERF_SMALL), x.dtype.type(1)
    for x_block, out_block in _blocks(x, result):
        a = xp.abs(x_block)
        xp.minimum(a, x.dtype.type(_CLAMP), out=a)  # NaN stays NaN
        s = xp.multiply(a, a)
        _horner(small, s, out_block)
        out_block *= a  # erf(|x|) = |x| · S(x²): the small branch
        tail = _erfc_tail(a, xp.empty_like(a), s)  # s: scratch from here on
        xp.subtract(one, tail, out=tail)  # erf(|x|) = 1 - erfc(|x|): the large branch
        xp.less(a, x.dtype.type(_SEAM), out=s)  # 1.0 where |x| < 0.8, else 0.0: a blend of 0/1 products is exact
        out_block *= s
        xp.subtract(one, s, out=s)
        tail *= s
        out_block += tail
        xp.copysign(out_block, x_block, out=out_block)  # erf is odd; erf(-0) = -0
    return _deliver(result, out)


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
        out *= z.dtype.type(-2 * _SQRT_2_OVER_PI)  # -2u
        xp.minimum(out, z.dtype.type(80), out=out)  # exp(80) is finite in float32; Φ there is 2e-35
        xp.exp(out, out=out)
        out += z.dtype.type(1)
        xp.divide(z.dtype.type(1), out, out=out)
        return out
    if not _is_float32(z):  # (1 + erf(z / √2)) / 2 with scipy's erf, as the reference
        erf(z * z.dtype.type(_SQRT_HALF), out=out)
        out += z.dtype.type(1)
        out *= z.dtype.type(0.5)
        return out
    one, result = z.dtype.type(1), _target(z, out)
    for z_block, out_block in _blocks(z, result):
        abs_z = xp.abs(z_block)
        t = xp.empty_like(abs_z)
        _erfc_tail(abs_z, out_block, t, _SQRT_HALF, _HALF_ERFC_TAIL)  # Φ(-|z|) = erfc(|z| / √2) / 2, unclamped
        w = xp.greater_equal(z_block, 0, out=abs_z)  # 1.0 where z ≥ 0, else 0.0 (abs_z's array, done with)
        xp.subtract(one, out_block, out=t)
        t -= out_block
        t *= w
        out_block += t  # Φ = Φ(-|z|) + w (1 - 2 Φ(-|z|)): Φ(-|z|) itself, exactly, where z < 0
    return _deliver(result, out)


def gelu_backward(grad, z, cdf, approximate="none", out=None):
    """``∂L/∂z = g · (Φ(z) + z Φ'(z))`` for ``grad = g``, the pre-activation ``z`` and ``cdf = Φ(z)``
    (``normal_cdf``'s), into ``out`` (``out=grad``: in place) or a fresh array."""
    xp, dtype, result = backend.namespace(z), z.dtype.type, _target(grad, out)
    for g_block, z_block, cdf_block, out_block in _blocks(grad, z, cdf, result):
        slope = xp.multiply(z_block, z_block)  # z²
        if approximate == "tanh":  # 2 Φ (1 - Φ) · √(2/π) (1 + 3 · 0.044715 z²)
            slope *= dtype(6 * _TANH_CUBIC * _SQRT_2_OVER_PI)
            slope += dtype(2 * _SQRT_2_OVER_PI)
            slope *= cdf_block
            slope *= xp.subtract(dtype(1), cdf_block)
        else:  # exp(-z²/2) / √(2π)
            slope *= dtype(-0.5)
            xp.exp(slope, out=slope)
            slope *= dtype(_INV_SQRT_2PI)
        slope *= z_block
        slope += cdf_block  # Φ + z Φ'
        xp.multiply(g_block, slope, out=out_block)
    return _deliver(result, out)
