"""GELU's array kernels (``tinyattn/fast/activations.py``) against float64 oracles.

- The float32 normal CDF (the exact GELU's ``Φ``) over the whole float32 range against ``scipy.special.ndtr``:
  every 1009th positive bit pattern (all binades, subnormals included), every 16th float32 of ``[0.5, 4]``, a
  million random bit patterns, and ±0, ±inf, the extremes. Bound: within 2.3e-7, and within 1.2e-5 relatively
  for ``z < 0`` while ``Φ`` is a normal float32 (measured: 2.13e-7, 8.2e-6).
- ``gelu`` (``A`` and its slope, exact and tanh) against the float64 formulas; its ``A`` is ``z · Φ``
  with ``normal_cdf``'s ``Φ``, bit for bit; float64 inputs keep scipy's erf, bit for bit the reference
  ``F.gelu``'s ``Φ``.
- ``out=`` slices of rows give the rows of the whole, ``gelu`` may write over its input; the strict
  backend runs the same code.
"""

import math

import numpy as np
import pytest
import scipy.special

import tinyattn as ta
import tinyattn.nn as nn
from tinyattn import backend
from tinyattn.fast import activations

F32 = np.float32
CDF_ABS, CDF_REL_NEGATIVE = 2.3e-7, 1.2e-5


def float32_sweep():
    """float32 values from every part of the range (NaN left out: checked on its own)."""
    rng = np.random.default_rng(0)
    strided = np.arange(0, 0x7F800000, 1009, dtype=np.uint32).view(F32)  # +0 … the largest binade
    lo, hi = np.array([0.5, 4.0], dtype=F32).view(np.uint32)
    seam = np.arange(lo, hi, 16, dtype=np.uint32).view(F32)  # [0.5, 4), every 16th float32: where Φ bends
    random_bits = rng.integers(0, 2**32, 1_000_000, dtype=np.uint64).astype(np.uint32).view(F32)
    info = np.finfo(F32)
    specials = np.array([0.0, info.tiny, info.smallest_subnormal, info.max, np.inf, 1.0, np.nextafter(F32(1), F32(0)),
                         np.nextafter(F32(1), F32(2)), 0.8, np.nextafter(F32(0.8), F32(0)), 3.9, 10.0, 10.5], dtype=F32)
    values = np.concatenate([strided, -strided, seam, -seam, random_bits, specials, -specials])
    return values[~np.isnan(values)]


def test_float32_normal_cdf_is_accurate_absolutely_and_relatively_below_zero():
    z = float32_sweep()
    with np.errstate(over="raise", divide="raise", invalid="raise", under="ignore"):  # nothing overflows
        cdf = activations.normal_cdf(z)
    exact = scipy.special.ndtr(z.astype(np.float64))
    error = np.abs(cdf.astype(np.float64) - exact)
    worst = int(error.argmax())
    assert error[worst] <= CDF_ABS, f"Φ({z[worst]!r}) = {cdf[worst]!r}, scipy {exact[worst]!r}"
    negative = (z < 0) & (exact >= np.finfo(F32).tiny)
    relative = error[negative] / exact[negative]
    assert relative.max() <= CDF_REL_NEGATIVE, z[negative][relative.argmax()]
    assert np.isnan(activations.normal_cdf(np.array([np.nan], dtype=F32))).all()
    np.testing.assert_array_equal(activations.normal_cdf(np.array([-np.inf, np.inf, -0.0], dtype=F32)),
                                  [0.0, 1.0, 0.5])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gelu_and_its_slope_at_special_values(dtype):
    """NaN stays NaN, ±0 gives ±0 with slope ½, far out the activation is z or 0 and the slope 1 or 0; no
    floating-point warning, not even where ``z²`` overflows float32 (the exact form; the tanh form caps its
    exponent, so past |z| ≈ 1e9 it is not held to this)."""
    z = np.array([np.nan, 0.0, -0.0, 40.0, -40.0, 3e38, -3e38], dtype=dtype)
    slope = np.empty_like(z)
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        a = activations.gelu(z, slope=slope)
    assert np.isnan(a[0]) and np.isnan(slope[0])
    np.testing.assert_array_equal(a[1:], np.array([0.0, -0.0, 40.0, 0.0, 3e38, 0.0], dtype=dtype))
    assert np.signbit(a[2]) and not np.signbit(a[1])
    np.testing.assert_array_equal(slope[1:], [0.5, 0.5, 1.0, 0.0, 1.0, 0.0])
    tanh_slope = np.empty(5, dtype=dtype)
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        a = activations.gelu(z[:5], "tanh", slope=tanh_slope)
    assert np.isnan(a[0]) and np.isnan(tanh_slope[0])
    np.testing.assert_allclose(a[1:], [0.0, 0.0, 40.0, 0.0], atol=1e-30)
    np.testing.assert_allclose(tanh_slope[1:], [0.5, 0.5, 1.0, 0.0], atol=1e-30)


def float64_formulas(z, approximate):
    """``(Φ, ∂gelu/∂z)`` in float64, written out from the definitions."""
    if approximate == "tanh":
        u = math.sqrt(2 / math.pi) * (z + 0.044715 * z**3)
        cdf = 0.5 * (1 + np.tanh(u))
        slope = 0.5 * (1 - np.tanh(u) ** 2) * math.sqrt(2 / math.pi) * (1 + 3 * 0.044715 * z**2)
    else:
        cdf = scipy.special.ndtr(z)
        slope = np.exp(-z * z / 2) / math.sqrt(2 * math.pi)
    return cdf, cdf + z * slope


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_float32_kernels_against_their_float64_formulas(approximate):
    z = np.random.default_rng(1).standard_normal((300, 257)).astype(F32) * 3  # more than one block of elements
    cdf = activations.normal_cdf(z, approximate)
    slope = np.empty_like(z)
    a = activations.gelu(z, approximate, slope=slope)
    exact_cdf, exact_slope = float64_formulas(z.astype(np.float64), approximate)
    assert cdf.dtype == a.dtype == slope.dtype == F32
    np.testing.assert_allclose(cdf, exact_cdf, rtol=0, atol=3e-7)
    np.testing.assert_array_equal(a, z * cdf)  # gelu's Φ is normal_cdf's, bit for bit
    np.testing.assert_allclose(slope, exact_slope, rtol=2e-6, atol=2e-6)
    np.testing.assert_array_equal(activations.gelu(z, approximate), a)  # with or without the slope


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_float64_keeps_scipy_erf_and_the_reference_formulas(approximate):
    z = np.random.default_rng(3).standard_normal((7, 9)) * 3
    cdf = activations.normal_cdf(z, approximate)
    if approximate == "none":  # the reference F.gelu's Φ, bit for bit
        np.testing.assert_array_equal(cdf, 0.5 * (1 + scipy.special.erf(z * (1 / math.sqrt(2)))))
    exact_cdf, exact_slope = float64_formulas(z, approximate)
    np.testing.assert_allclose(cdf, exact_cdf, rtol=1e-14, atol=1e-15)
    slope = np.empty_like(z)
    np.testing.assert_array_equal(activations.gelu(z, approximate, slope=slope), z * cdf)
    np.testing.assert_allclose(slope, exact_slope, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_kernels_write_row_slices_into_out(dtype, approximate):
    """A caller may hand the kernels rows of a larger array, ``out=`` the same rows of the result; ``gelu``
    may write over its input."""
    z = (np.random.default_rng(5).standard_normal((40, 3000)) * 2).astype(dtype)
    whole_cdf = activations.normal_cdf(z, approximate)
    whole_slope = np.empty_like(z)
    whole_gelu = activations.gelu(z, approximate, slope=whole_slope)
    cdf, a, slope = (np.empty_like(z) for _ in range(3))
    for start, stop in ((0, 13), (13, 29), (29, 40)):
        rows = slice(start, stop)
        activations.normal_cdf(z[rows], approximate, out=cdf[rows])
        activations.gelu(z[rows], approximate, out=a[rows], slope=slope[rows])
    np.testing.assert_array_equal(cdf, whole_cdf)
    np.testing.assert_array_equal(a, whole_gelu)
    np.testing.assert_array_equal(slope, whole_slope)
    in_place, in_place_slope = z.copy(), np.empty_like(z)
    assert activations.gelu(in_place, approximate, out=in_place, slope=in_place_slope) is in_place
    np.testing.assert_array_equal(in_place, whole_gelu)
    np.testing.assert_array_equal(in_place_slope, whole_slope)
    columns = slice(100, 2100)  # out= a non-contiguous view: written through, not into a copy
    for kernel, expected in ((lambda o: activations.normal_cdf(z[:, columns], approximate, out=o), whole_cdf),
                             (lambda o: activations.gelu(z[:, columns], approximate, out=o), whole_gelu),
                             (lambda o: (activations.gelu(z[:, columns], approximate, slope=o), o)[1], whole_slope)):
        target = np.zeros_like(z)
        assert kernel(target[:, columns]).base is target
        np.testing.assert_array_equal(target[:, columns], expected[:, columns])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_strict_backend_runs_the_same_kernels(dtype):
    """No NumPy-only call: the kernels run on the strict backend (a stand-in for CuPy) and agree."""
    z = (np.random.default_rng(7).standard_normal((5, 6)) * 3).astype(dtype)
    device_z = backend.to_device(z, "strict")
    for approximate in ("none", "tanh"):
        cdf = activations.normal_cdf(device_z, approximate)
        assert isinstance(cdf, backend.StrictArray)
        np.testing.assert_array_equal(backend.to_numpy(cdf), activations.normal_cdf(z, approximate))
        device_slope, slope = backend.to_device(np.empty_like(z), "strict"), np.empty_like(z)
        a = activations.gelu(device_z, approximate, slope=device_slope)
        assert isinstance(a, backend.StrictArray)
        np.testing.assert_array_equal(backend.to_numpy(a), activations.gelu(z, approximate, slope=slope))
        np.testing.assert_array_equal(backend.to_numpy(device_slope), slope)


def test_a_gelu_layer_not_compiled_runs_the_reference_gelu():
    """The reference ``F.gelu`` (scipy's erf, one node per step) is what a layer not compiled runs; compiled, the
    feed-forward block with these kernels."""
    from graph_checks import node_types

    layer = nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0, activation="gelu")
    x = ta.randn(2, 3, 8, requires_grad=True)
    types = node_types(layer(x))
    assert "Erf" in types and "FeedForwardBlock" not in types
    assert "FeedForwardBlock" in node_types(ta.compile(layer)(x))
