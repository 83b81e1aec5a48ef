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


@given(data=st.data())
def test_summing_repeats_in_a_fixed_order_adds_as_add_at_does(data):
    """``backend._sum_repeats``, CuPy's way to ``scatter_add`` (sorted runs and a doubling scan, no atomic adds),
    run on NumPy against NumPy's ``add.at``: rows by an integer array (repeated, negative, 2-D), a slice beside an
    array, two arrays, a boolean mask; a target laid out as a transpose too. Values are whole numbers, so any
    order of summing gives the exact sums."""
    rows, cols = data.draw(st.integers(1, 6)), data.draw(st.integers(1, 4))
    kind = data.draw(st.sampled_from(["rows", "rows 2-D", "slice and array", "two arrays", "mask"]))
    some_rows = hnp.arrays(np.int64, st.integers(0, 12), elements=st.integers(-rows, rows - 1))
    if kind == "rows":
        index = data.draw(some_rows)
    elif kind == "rows 2-D":
        index = data.draw(some_rows).reshape(-1, 1)
    elif kind == "slice and array":
        index = (slice(None), data.draw(hnp.arrays(np.int64, st.integers(0, 9), elements=st.integers(0, cols - 1))))
    elif kind == "two arrays":
        picked = data.draw(hnp.arrays(np.int64, st.integers(0, 12), elements=st.integers(0, rows * cols - 1)))
        index = (picked // cols, picked % cols)
    else:
        index = data.draw(hnp.arrays(np.bool_, rows))
    transposed = data.draw(st.booleans())
    target = np.arange(rows * cols, dtype=np.float64).reshape(cols, rows).T if transposed else \
        np.arange(rows * cols, dtype=np.float64).reshape(rows, cols)
    shape = np.zeros((rows, cols))[index].shape
    values = data.draw(hnp.arrays(np.float64, shape, elements=st.integers(-1000, 1000).map(float)))
    expected = target.copy()
    np.add.at(expected, index, values)
    backend._sum_repeats(target, index, values, np)
    np.testing.assert_array_equal(target, expected)


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


def test_summing_a_long_run_of_repeats_keeps_the_dtype_and_is_exact():
    target = np.zeros(3, dtype=np.float32)
    backend._sum_repeats(target, np.array([1] * 1000 + [2, -1]), np.ones(1002, dtype=np.float32), np)
    assert target.dtype == np.float32
    np.testing.assert_array_equal(target, [0, 1000, 2])


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
