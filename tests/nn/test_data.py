"""``ta.utils.data`` against ``torch.utils.data``: the same lengths, batch structure (dicts, tuples, named tuples,
lists, numbers, arrays), split sizes and errors for the same options, with native tensors in the batches. Random
orders come from each library's own stream, so there the properties are checked: permutations, supports,
reproducibility from a seed, a weighted sampler's frequencies."""

import collections
import warnings

import hypothesis.strategies as st
import numpy as np
import pytest
import torch
import torch.utils.data as torch_data
from hypothesis import given, settings

import tinyattn as ta
import tinyattn.compat as compat
import tinyattn.compat.utils.data as compat_data
import tinyattn.utils.data as data

SETTINGS = settings(max_examples=30, deadline=None)
Pair = collections.namedtuple("Pair", ["x", "y"])


def _plain(value):
    """A batch as nested Python values with dtype names, for comparing torch's and the native one."""
    if isinstance(value, torch.Tensor):
        return ("tensor", str(value.dtype).replace("torch.", ""), value.tolist())
    if isinstance(value, ta.Tensor):
        assert not isinstance(value, compat.Tensor), "native collation gives native tensors"
        return ("tensor", str(value.dtype), value.tolist())
    if isinstance(value, dict):
        return {key: _plain(v) for key, v in value.items()}
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return (type(value).__name__, *(_plain(v) for v in value))
    if isinstance(value, (list, tuple)):
        return [type(value).__name__] + [_plain(v) for v in value]
    return value


def _samples(make, kind, n):
    rng = np.random.default_rng(n)
    if kind == "tensors":
        return [(make(rng.standard_normal(3)), make(np.int64(i))) for i in range(n)]
    if kind == "dicts":
        return [{"ids": make(np.array([i, i + 1])), "mask": np.array([True, i % 2 == 0]), "w": 0.5 * i, "n": i,
                 "name": f"s{i}", "flag": bool(i % 2), "f32": np.float32(i)} for i in range(n)]
    if kind == "named":
        return [Pair(np.full((2,), i, dtype=np.float32), (i, [float(i)])) for i in range(n)]
    return [[i, [i, 2 * i], "t"] for i in range(n)]


@SETTINGS
@given(kind=st.sampled_from(["tensors", "dicts", "named", "lists"]), n=st.integers(1, 9),
       batch_size=st.one_of(st.none(), st.integers(1, 4)), drop_last=st.booleans())
def test_batches_match_torch(kind, n, batch_size, drop_last):
    drop_last = drop_last and batch_size is not None
    theirs = torch_data.DataLoader(_samples(torch.tensor, kind, n), batch_size=batch_size, drop_last=drop_last)
    ours = data.DataLoader(_samples(ta.tensor, kind, n), batch_size=batch_size, drop_last=drop_last)
    assert len(ours) == len(theirs)
    assert [_plain(b) for b in ours] == [_plain(b) for b in theirs]


@SETTINGS
@given(n=st.integers(1, 12), batch_size=st.integers(1, 5), drop_last=st.booleans())
def test_batch_sampler_and_custom_samplers_match_torch(n, batch_size, drop_last):
    order = list(range(n - 1, -1, -1))
    for lib, d in ((torch_data, torch_data), (data, data)):
        sampler = d.BatchSampler(order, batch_size, drop_last)
        loader = d.DataLoader(list(range(n)), batch_sampler=sampler)
        by_sampler = d.DataLoader(list(range(n)), sampler=order, batch_size=batch_size, drop_last=drop_last)
        result = (len(loader), [b.tolist() for b in loader], len(by_sampler), [b.tolist() for b in by_sampler],
                  list(sampler), len(sampler))
        if lib is torch_data:
            expected = result
    assert result == expected


@pytest.mark.parametrize("options", [
    dict(shuffle=True, sampler=[0, 1]),
    dict(batch_sampler=[[0, 1]], batch_size=2),
    dict(batch_sampler=[[0, 1]], shuffle=True),
    dict(batch_sampler=[[0, 1]], sampler=[0, 1]),
    dict(batch_sampler=[[0, 1]], drop_last=True),
    dict(batch_size=None, drop_last=True),
    dict(num_workers=-1),
    dict(prefetch_factor=2),
    dict(timeout=-1),
])
@pytest.mark.parametrize("ours", ["native", "compat"])
def test_conflicting_options_are_refused_as_torch_refuses_them(options, ours):
    errors = []
    for d in (torch_data, data if ours == "native" else compat_data):
        with pytest.raises(Exception) as info:
            d.DataLoader(list(range(4)), **options)
        errors.append(info.value)
    assert type(errors[0]) is type(errors[1]) and str(errors[0]).split(";")[0] == str(errors[1]).split(";")[0]


def test_iterable_datasets_and_chains_match_torch():
    def stream(d, items):
        class Stream(d.IterableDataset):
            def __iter__(self):
                return iter(items)

            def __len__(self):
                return len(items)

        return Stream()

    results = []
    for d in (torch_data, data):
        chained = d.ChainDataset([stream(d, [1, 2, 3]), stream(d, [4, 5])])
        added = stream(d, [0]) + stream(d, [9])
        loader = d.DataLoader(chained, batch_size=2)
        results.append((list(chained), len(chained), list(added), type(added).__name__, len(loader),
                        [b.tolist() for b in loader]))
        with pytest.raises(ValueError):
            d.DataLoader(chained, shuffle=True)
        with pytest.raises(AssertionError):
            d.ConcatDataset([chained])
    assert results[0] == results[1]


def test_stack_and_concat_datasets_match_torch():
    results, errors = [], []
    for lib, d in ((torch, torch_data), (ta, data)):
        xs, ys = lib.arange(5), lib.arange(5) * 2
        by_position = d.StackDataset(d.TensorDataset(xs), ys)
        by_name = d.StackDataset(x=xs, y=ys)
        concat = d.TensorDataset(xs) + d.TensorDataset(ys)
        batch = next(iter(d.DataLoader(by_name, batch_size=3)))
        results.append((len(by_position), _plain(by_position[2]), len(by_name), _plain(by_name[4]),
                        len(concat), _plain(concat[7]), _plain(concat[-1]), concat.cumulative_sizes, _plain(batch)))
        for args, kwargs in (((xs,), {"y": ys}), ((), {}), ((xs, lib.arange(4)), {})):
            with pytest.raises(ValueError) as info:
                d.StackDataset(*args, **kwargs)
            errors.append(str(info.value)[:20])
        with pytest.raises(AssertionError):
            d.ConcatDataset([])
    assert results[0] == results[1]
    assert errors[:3] == errors[3:]


@SETTINGS
@given(n=st.integers(0, 40), fractions=st.lists(st.integers(1, 10), min_size=1, max_size=4), seed=st.integers(0, 99))
def test_random_split_sizes_match_torch_and_cover_the_dataset(n, fractions, seed):
    fractions = [f / sum(fractions) for f in fractions]
    if abs(sum(fractions) - 1) > 1e-12 or sum(fractions) > 1:
        return
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ours = data.random_split(range(n), fractions, generator=np.random.default_rng(seed))
        theirs = torch_data.random_split(range(n), fractions, generator=torch.Generator().manual_seed(seed))
        again = data.random_split(range(n), fractions, generator=np.random.default_rng(seed))
    assert [len(s) for s in ours] == [len(s) for s in theirs]
    empty = sum(len(s) == 0 for s in ours)
    assert [str(w.message) for w in caught] == 3 * [str(w.message) for w in caught[:empty]]  # torch warns alike
    assert sorted(i for s in ours for i in s) == list(range(n))
    assert [list(s) for s in ours] == [list(s) for s in again]
    with pytest.raises(ValueError, match="Sum of input lengths does not equal"):
        data.random_split(range(n), [n + 2])


@SETTINGS
@given(n=st.integers(1, 20), num_samples=st.one_of(st.none(), st.integers(1, 50)), replacement=st.booleans(),
       seed=st.integers(0, 99))
def test_random_sampler_lengths_match_torch_and_draw_from_range(n, num_samples, replacement, seed):
    ours = data.RandomSampler(range(n), replacement, num_samples, generator=np.random.default_rng(seed))
    theirs = torch_data.RandomSampler(range(n), replacement, num_samples)
    drawn = list(ours)
    assert len(ours) == len(theirs) == len(drawn) == len(list(theirs))
    assert set(drawn) <= set(range(n))
    if not replacement:  # whole permutations, then a part of one
        full = len(drawn) // n * n
        for start in range(0, full, n):
            assert sorted(drawn[start:start + n]) == list(range(n))
        assert len(set(drawn[full:])) == len(drawn) - full
    assert drawn == list(data.RandomSampler(range(n), replacement, num_samples,
                                            generator=np.random.default_rng(seed)))


@SETTINGS
@given(weights=st.lists(st.sampled_from([0.0, 0.5, 1.0, 3.0]), min_size=1, max_size=8), num_samples=st.integers(1, 8),
       replacement=st.booleans())
def test_weighted_random_sampler_matches_torch_in_support_length_and_errors(weights, num_samples, replacement):
    def run(make, weights):
        try:
            sampler = make(weights, num_samples, replacement)
            return "ok", len(sampler), list(sampler)
        except (RuntimeError, ValueError) as error:
            return type(error).__name__, None, None

    (theirs, their_len, _), (ours, our_len, drawn) = (
        run(torch_data.WeightedRandomSampler, weights), run(data.WeightedRandomSampler, weights))
    assert ours == theirs and our_len == their_len
    if ours == "ok":
        positive = [i for i, w in enumerate(weights) if w > 0]
        assert len(drawn) == num_samples
        if replacement:
            assert all(i in positive for i in drawn)
        else:  # the indices of positive weight first, then those of weight 0 in order
            zeros = [i for i in range(len(weights)) if i not in positive]
            assert set(drawn[:len(positive)]) <= set(positive)
            assert drawn[len(positive):] == zeros[:max(0, num_samples - len(positive))]
            assert len(set(drawn)) == len(drawn)


def test_weighted_random_sampler_frequencies_follow_the_weights():
    weights = np.array([1.0, 0.0, 2.0, 5.0])
    drawn = np.array(list(data.WeightedRandomSampler(ta.tensor(weights), 40000, generator=np.random.default_rng(1))))
    frequencies = np.bincount(drawn, minlength=4) / len(drawn)
    assert np.abs(frequencies - weights / weights.sum()).max() < 0.01
    firsts = [next(iter(data.WeightedRandomSampler(weights, 1, replacement=False,
                                                   generator=np.random.default_rng(s)))) for s in range(4000)]
    assert np.abs(np.bincount(firsts, minlength=4) / 4000 - weights / weights.sum()).max() < 0.03
    with pytest.raises(ValueError, match="1d"):
        data.WeightedRandomSampler([[1.0]], 1)


def test_a_generator_reseeded_between_passes_repeats_its_order():
    for make in (lambda: np.random.default_rng(7), lambda: compat.Generator().manual_seed(7)):
        generator = make()
        loader = data.DataLoader(range(20), batch_size=20, shuffle=True, generator=generator)
        first = next(iter(loader)).tolist()
        second = next(iter(loader)).tolist()
        if isinstance(generator, compat.Generator):
            generator.manual_seed(7)
            assert next(iter(loader)).tolist() == first
        assert sorted(first) == sorted(second) == list(range(20))
    with pytest.raises(TypeError, match="numpy.random.Generator"):
        list(data.RandomSampler(range(3), generator=torch.Generator()))


def test_default_convert_and_collate_give_native_tensors_and_compat_gives_compat_ones():
    sample = {"x": np.arange(3), "t": (np.float32(1.0), "a")}
    ours, theirs = data.default_convert(sample), torch_data.default_convert(sample)
    assert _plain(ours) == _plain(theirs)
    batch = [Pair(ta.ones(2), 1), Pair(ta.zeros(2), 2)]
    collated = data.default_collate(batch)
    assert type(collated.x) is ta.Tensor and type(collated.y) is ta.Tensor
    compat_batch = compat_data.default_collate(batch)
    assert isinstance(compat_batch.x, compat.Tensor) and isinstance(compat_batch.y, compat.Tensor)
    assert data.get_worker_info() is None
    loader = data.DataLoader(range(6), batch_size=2, num_workers=3, prefetch_factor=2, persistent_workers=True)
    assert [b.tolist() for b in loader] == [[0, 1], [2, 3], [4, 5]]


def test_compat_re_exports_the_native_classes_and_refuses_distributed_sampling():
    for name in ("Dataset", "TensorDataset", "StackDataset", "ChainDataset", "WeightedRandomSampler", "random_split",
                 "BatchSampler", "get_worker_info"):
        assert getattr(compat_data, name) is getattr(data, name)
    assert issubclass(compat_data.DataLoader, data.DataLoader)
    with pytest.raises(NotImplementedError, match="DistributedSampler"):
        compat_data.DistributedSampler(range(4))
    for name in ("IterDataPipe", "MapDataPipe", "functional_datapipe", "runtime_validation"):
        with pytest.raises(NotImplementedError, match="DataPipes are deprecated"):
            getattr(compat_data, name)()
