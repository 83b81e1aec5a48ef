"""Floor 1 and the creation functions: backends, the strict device, sum_to, random numbers.

The strict device must refuse what CuPy refuses (implicit conversion to NumPy, mixing
with NumPy arrays), or it proves nothing. ``sum_to`` is checked as the adjoint of
broadcasting; creation functions against PyTorch's; ``manual_seed`` by reproducibility.
"""

import math
import warnings

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import tinyattn as ta
from tinyattn import backend
from tinyattn import testing as tt
from tinyattn.ops import sum_to

# ----------------------------------------------------------------------------- the strict device


def test_strict_refuses_implicit_conversion_to_numpy():
    strict = backend.to_device(np.ones(3), "strict")
    with pytest.raises(TypeError, match="implicit conversion"):
        np.asarray(strict)
    with pytest.raises(TypeError, match="implicit conversion"):
        np.array(strict)


def test_strict_refuses_mixing_with_numpy():
    strict = backend.to_device(np.ones(3), "strict")
    with pytest.raises(TypeError, match=r"combined with a strict-backend array \(NumPy array of shape \(3,\)\)"):
        strict + np.ones(3)
    with pytest.raises(TypeError, match="combined"):
        np.ones(3) * strict
    with pytest.raises(TypeError, match="combined"):
        backend.strict.where(strict > 0, strict, np.zeros(3))


def test_strict_computes_like_numpy_and_stays_strict():
    host = np.arange(6.0).reshape(2, 3)
    strict = backend.to_device(host, "strict")
    result = backend.strict.exp(strict).sum(axis=0) + 1.0
    assert type(result) is backend.StrictArray and backend.device_of(result) == "strict"
    np.testing.assert_array_equal(backend.to_numpy(result), np.exp(host).sum(axis=0) + 1.0)
    assert type(strict.sum()) is backend.StrictArray  # 0-d results stay on the device, as in CuPy


def test_namespace_and_device_of():
    assert backend.namespace(np.zeros(1)) is np
    assert backend.namespace(backend.to_device(np.zeros(1), "strict")) is backend.strict
    with pytest.raises(TypeError, match="expected a backend array .* got list"):
        backend.namespace([1.0])
    with pytest.raises(ValueError, match="unknown device 'tpu'"):
        backend.namespace_for("tpu")


def test_to_device_and_to_numpy_copy(device):
    host = np.array([1.0, 2.0])
    moved = backend.to_device(host, device)
    assert backend.device_of(moved) == device
    assert backend.to_device(moved, device) is moved  # no copy when already there
    back = backend.to_numpy(moved)
    back[0] = 5.0
    np.testing.assert_array_equal(backend.to_numpy(moved), [1.0, 2.0])


def test_erf_matches_torch(device):
    x = np.linspace(-3, 3, 13)
    result = backend.erf(backend.to_device(x, device))
    assert backend.device_of(result) == device
    np.testing.assert_allclose(backend.to_numpy(result), torch.erf(torch.from_numpy(x)).numpy(), rtol=1e-12)


@given(index=hnp.arrays(np.int64, st.integers(1, 8), elements=st.integers(0, 3)))
def test_scatter_add_accumulates_repeats(device, index):
    values = np.arange(1.0, len(index) + 1)
    expected = np.zeros(4)
    for i, v in zip(index, values):
        expected[i] += v
    target = backend.to_device(np.zeros(4), device)
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)  # no deprecated call on any backend
        backend.scatter_add(target, backend.to_device(index, device), backend.to_device(values, device))
    np.testing.assert_array_equal(backend.to_numpy(target), expected)


@pytest.mark.parametrize("module", ["numpy", pytest.param("cupy", marks=pytest.mark.cuda)])
@given(data=st.data())
def test_summing_repeats_in_a_fixed_order_adds_as_add_at_does(module, data):
    """``backend._sum_repeats``, CuPy's way to ``scatter_add`` (sorted runs and a doubling scan, no atomic adds),
    on NumPy and on CuPy, against NumPy's ``add.at``: rows by an integer array (repeated, negative, 2-D, 0-d, of
    a narrow type), two arrays (a cross-entropy's pick), arrays over the first axes of three, a slice, an integer,
    ``None`` or ``...`` beside an array, a boolean mask; a target laid out as a transpose; values that broadcast,
    and NaN. Values are whole numbers, so any order of summing gives the exact sums."""
    xp = backend.namespace_for("cpu" if module == "numpy" else "cuda")
    rows, cols = data.draw(st.integers(1, 6)), data.draw(st.integers(1, 4))
    shape = (rows, cols)
    dtype = data.draw(st.sampled_from([np.int64, np.int32, np.int8, np.uint8]))
    low = 0 if dtype == np.uint8 else -rows
    some_rows = hnp.arrays(dtype, st.integers(0, 12), elements=st.integers(low, rows - 1))
    some_cols = hnp.arrays(np.int64, st.integers(0, 9), elements=st.integers(-cols, cols - 1))
    kind = data.draw(st.sampled_from(["rows", "rows 2-D", "row 0-d", "two arrays", "first two of three",
                                      "slice and array", "integer and array", "None and array", "... and array",
                                      "mask"]))
    if kind == "rows":
        index = data.draw(some_rows)
    elif kind == "rows 2-D":
        index = data.draw(some_rows).reshape(-1, 1)
    elif kind == "row 0-d":
        index = np.array(data.draw(st.integers(-rows, rows - 1)))
    elif kind == "two arrays":
        picked = data.draw(some_cols)
        index = (picked % rows, picked)
    elif kind == "first two of three":
        shape = (rows, cols, 2)
        picked = data.draw(some_cols)
        index = (picked % rows, picked)
    elif kind == "slice and array":
        index = (slice(None), data.draw(some_cols))
    elif kind == "integer and array":
        index = (data.draw(st.integers(-rows, rows - 1)), data.draw(some_cols))
    elif kind == "None and array":
        index = (None, data.draw(some_rows))
    elif kind == "... and array":
        index = (Ellipsis, data.draw(some_cols))
    else:
        index = data.draw(hnp.arrays(np.bool_, rows))
    start = np.arange(math.prod(shape), dtype=np.float64)
    transposed = data.draw(st.booleans())
    target = start.reshape(shape[::-1]).transpose() if transposed else start.reshape(shape)
    picked_shape = np.zeros(shape)[index].shape
    value_shape = picked_shape[data.draw(st.integers(0, len(picked_shape))):]  # the whole shape, or a broadcast
    values = data.draw(hnp.arrays(np.float64, value_shape, elements=st.integers(-1000, 1000).map(float)))
    if values.size and data.draw(st.booleans()):
        values.flat[0] = np.nan
    expected = target.copy()
    np.add.at(expected, index, values)

    def on_device(a):
        return xp.asarray(a) if isinstance(a, np.ndarray) else a

    if xp is np:
        result = target.copy(order="K")  # (in the target's layout)
    else:  # the same layout on the GPU
        result = xp.asarray(target.transpose()).transpose() if transposed else xp.asarray(target)
    device_index = tuple(map(on_device, index)) if type(index) is tuple else on_device(index)
    backend._sum_repeats(result, device_index, on_device(values), xp)
    np.testing.assert_array_equal(result if xp is np else result.get(), expected)


def test_scatter_add_gives_the_same_bits_every_time(device):
    """Many float32 values onto few positions (an embedding's gradient over a batch of few distinct tokens): every
    run the same sums, bit for bit (atomic adds on a GPU would sum them in a varying order)."""
    rng = np.random.default_rng(0)
    index = backend.to_device(rng.integers(0, 7, 20000), device)
    values = backend.to_device(rng.standard_normal((20000, 3), dtype=np.float32), device)
    runs = []
    for _ in range(5):
        target = backend.to_device(np.zeros((7, 3), dtype=np.float32), device)
        runs.append(backend.to_numpy(backend.scatter_add(target, index, values)))
    assert all(np.array_equal(run, runs[0]) for run in runs)
    np.testing.assert_allclose(runs[0], np.stack([backend.to_numpy(values)[backend.to_numpy(index) == i].sum(0)
                                                  for i in range(7)]), rtol=1e-4, atol=1e-3)


def test_summing_repeats_casts_narrow_indices_and_sums_in_the_target_dtype():
    """A narrow index type on a long table (``-1 + 300`` overflows an int8) and a long run of repeats."""
    target = np.zeros(300, dtype=np.float32)
    backend._sum_repeats(target, np.array([-1, -1, 5], dtype=np.int8), np.ones(3, dtype=np.float32), np)
    backend._sum_repeats(target, np.array([255] * 1000, dtype=np.uint8), np.full(1000, 0.5), np)  # float64 values
    expected = np.zeros(300, dtype=np.float32)
    expected[[299, 5, 255]] = [2, 1, 500]
    np.testing.assert_array_equal(target, expected)


# ----------------------------------------------------------------------------- sum_to


@given(data=st.data())
def test_sum_to_is_the_adjoint_of_broadcasting(data):
    """<broadcast(x), g> = <x, sum_to(g)> for all x and g: sum_to is broadcasting's transpose."""
    shape, full = data.draw(tt.broadcastable_shapes(2, max_dims=4).filter(
        lambda s: np.broadcast_shapes(*s) == s[1]))
    x, g = data.draw(tt.arrays(shape)), data.draw(tt.arrays(full))
    reduced = sum_to(g, shape)
    assert reduced.shape == shape
    np.testing.assert_allclose(np.sum(np.broadcast_to(x, full) * g), np.sum(x * reduced), rtol=1e-12, atol=1e-12)


# ----------------------------------------------------------------------------- creation functions


@pytest.mark.parametrize("name", ["zeros", "ones"])
def test_zeros_ones_match_torch(name, device):
    ours = getattr(ta, name)(2, 3, device=device)
    assert ours.shape == (2, 3) and ours.dtype == np.float32 and ours.device == device and not ours.requires_grad
    np.testing.assert_array_equal(ours.numpy(), getattr(torch, name)(2, 3).numpy())
    as_tuple = getattr(ta, name)((2, 3), dtype=ta.float64, requires_grad=True)
    assert as_tuple.shape == (2, 3) and as_tuple.dtype == np.float64 and as_tuple.requires_grad


@pytest.mark.parametrize("name", ["zeros_like", "ones_like"])
def test_like_functions_follow_their_argument(name, device):
    x = ta.tensor(np.ones((2, 1)), device=device)
    ours = getattr(ta, name)(x)
    assert ours.shape == (2, 1) and ours.dtype == np.float64 and ours.device == device
    other = getattr(ta, name)(x, dtype=ta.float32, device="cpu", requires_grad=True)
    assert other.dtype == np.float32 and other.device == "cpu" and other.requires_grad
    np.testing.assert_array_equal(ours.numpy(), getattr(torch, name)(torch.from_numpy(x.numpy())).numpy())


@pytest.mark.parametrize("fill", [2, 1.5, True], ids=["int", "float", "bool"])
def test_full_infers_dtype_like_torch(fill, device):
    ours, theirs = ta.full((2, 2), fill, device=device), torch.full((2, 2), fill)
    assert ours.dtype.name == str(theirs.dtype).removeprefix("torch.") and ours.device == device
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
    assert ta.full(3, 0.5).shape == (3,)


@pytest.mark.parametrize("args", [(5,), (2, 7), (1, 2, 0.25), (0.5, 2.0, 0.5), (-3, 3, 2)])
def test_arange_matches_torch(args, device):
    ours, theirs = ta.arange(*args, device=device), torch.arange(*args)
    assert ours.dtype.name == str(theirs.dtype).removeprefix("torch.") and ours.device == device
    np.testing.assert_allclose(ours.numpy(), theirs.numpy())
    assert ta.arange(3, dtype=ta.float64).dtype == np.float64


@pytest.mark.parametrize("name", ["randn", "rand"])
def test_random_creation_is_seeded_and_reproducible(name, device):
    draw = getattr(ta, name)
    ta.manual_seed(7)
    first = draw(3, 4, device=device).numpy()
    second = draw(3, 4, device=device).numpy()
    ta.manual_seed(7)
    np.testing.assert_array_equal(draw(3, 4, device=device).numpy(), first)
    np.testing.assert_array_equal(draw((3, 4), device=device).numpy(), second)
    assert not np.array_equal(first, second)  # the generator moves on between draws
    ta.manual_seed(8)
    assert not np.array_equal(draw(3, 4, device=device).numpy(), first)
    sample = draw(2, dtype=ta.float64, device=device, requires_grad=True)
    assert sample.dtype == np.float64 and sample.device == device and sample.requires_grad


def test_random_distributions():
    ta.manual_seed(0)
    normal, uniform = ta.randn(20_000).numpy(), ta.rand(20_000).numpy()
    assert normal.dtype == np.float32 and uniform.dtype == np.float32
    tolerance = 5 / math.sqrt(20_000)  # five standard errors
    assert abs(normal.mean()) < tolerance and abs(normal.std() - 1) < tolerance
    assert uniform.min() >= 0 and uniform.max() < 1 and abs(uniform.mean() - 0.5) < tolerance


def test_keep_freed_memory_lets_the_next_step_reuse_a_freed_block():
    """An 8 MiB array freed and allocated again: with the setting, the second allocation page-faults
    nothing (the block stayed in the heap); with glibc's defaults it is mapped and faulted afresh."""
    import resource
    import sys

    if not sys.platform.startswith("linux"):
        pytest.skip("mallopt is glibc's")

    def faults_of_a_second_allocation():
        first = np.ones(8 << 20, dtype=np.uint8)
        del first
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        second = np.ones(8 << 20, dtype=np.uint8)
        del second
        return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before

    try:
        assert ta.backend.keep_freed_memory(False)
        released = min(faults_of_a_second_allocation() for _ in range(3))
        assert ta.backend.keep_freed_memory(True)
        kept = min(faults_of_a_second_allocation() for _ in range(3))
    finally:
        ta.backend.keep_freed_memory(False)  # as at import: tinyattn leaves malloc's settings alone unless asked
    assert kept < released, (kept, released)
