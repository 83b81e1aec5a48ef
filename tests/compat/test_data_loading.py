"""``torch.utils.data`` on compat against torch's: the same batches (values, dtypes, structure) for the same
options, the same lengths, the same errors in kind. Shuffled orders come from each library's own random
stream, so there the properties are checked (a permutation per pass, reproducible from a seed)."""

import collections
import warnings

import hypothesis.strategies as st
import numpy as np
import pytest
import torch
import torch.utils.data as torch_data
from hypothesis import given, settings

import tinyattn.compat as compat
import tinyattn.compat.utils.data as compat_data

SETTINGS = settings(max_examples=30, deadline=None)
Point = collections.namedtuple("Point", ["x", "label"])


def _plain(value):
    """A batch as nested Python values with dtype names, for comparing torch's and compat's."""
    if isinstance(value, torch.Tensor):
        return ("tensor", str(value.dtype).replace("torch.", ""), value.tolist())
    if isinstance(value, compat.Tensor):
        return ("tensor", str(value.dtype), value.tolist())
    if isinstance(value, dict):
        return {key: _plain(v) for key, v in value.items()}
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return (type(value).__name__, *(_plain(v) for v in value))
    if isinstance(value, (list, tuple)):
        return [type(value).__name__] + [_plain(v) for v in value]
    return value


def _samples(lib, kind, n):
    rng = np.random.default_rng(0)
    if kind == "tensors":
        return [(lib.tensor(rng.standard_normal(3)), lib.tensor(i)) for i in range(n)]
    if kind == "dicts":
        return [{"ids": lib.tensor([i, i + 1]), "mask": np.array([True, i % 2 == 0]), "weight": 0.5 * i,
                 "count": i, "name": f"s{i}", "flag": bool(i % 2)} for i in range(n)]
    if kind == "arrays":
        return [(np.full((2, 2), i, dtype=np.float32), np.int64(i), np.float64(i / 3)) for i in range(n)]
    if kind == "named":
        return [Point(lib.tensor([float(i)]), i) for i in range(n)]
    return [[i, [i, 2 * i]] for i in range(n)]  # lists


@SETTINGS
@given(kind=st.sampled_from(["tensors", "dicts", "arrays", "named", "lists"]), n=st.integers(1, 9),
       batch_size=st.one_of(st.none(), st.integers(1, 4)), drop_last=st.booleans())
def test_sequential_batches_match_torch(kind, n, batch_size, drop_last):
    if batch_size is None:
        drop_last = False
    results = []
    for lib, data in ((torch, torch_data), (compat, compat_data)):
        loader = data.DataLoader(_samples(lib, kind, n), batch_size=batch_size, drop_last=drop_last)
        results.append((len(loader), [_plain(batch) for batch in loader]))
    assert results[0] == results[1]


def test_tensor_dataset_subset_concat_and_collate_fn_match_torch():
    results = []
    for lib, data in ((torch, torch_data), (compat, compat_data)):
        dataset = data.TensorDataset(lib.arange(10).float(), lib.arange(10) % 3)
        subset = data.Subset(dataset, [9, 0, 4])
        both = data.ConcatDataset([subset, dataset])
        loader = data.DataLoader(both, batch_size=4, collate_fn=lambda batch: [int(x) for x, _ in batch])
        results.append((len(dataset), _plain(dataset[3]), len(subset), _plain(subset[0]), len(both),
                        _plain(both[-1]), _plain(both[4]), list(loader), len(loader)))
    assert results[0] == results[1]
    with pytest.raises(AssertionError, match="Size mismatch"):
        compat_data.TensorDataset(compat.ones(3), compat.ones(4))


def test_default_collate_refuses_what_it_cannot_batch():
    errors = []
    for data in (torch_data, compat_data):
        for batch in ([object(), object()], [[1, 2], [3]]):
            with pytest.raises(Exception) as info:
                data.default_collate(batch)
            errors.append((type(info.value), str(info.value).split(";")[0][:40]))
    assert errors[:2] == errors[2:]


@SETTINGS
@given(n=st.integers(1, 30), batch_size=st.integers(1, 7), seed=st.integers(0, 1000), drop_last=st.booleans())
def test_shuffled_passes_are_permutations_reproducible_from_a_generator(n, batch_size, seed, drop_last):
    dataset = compat_data.TensorDataset(compat.arange(n))

    def one_pass(generator):
        loader = compat_data.DataLoader(dataset, batch_size=batch_size, shuffle=True, drop_last=drop_last,
                                        generator=generator)
        return [b[0].tolist() for b in loader], len(loader)

    first, length = one_pass(compat.Generator().manual_seed(seed))
    again, _ = one_pass(compat.Generator().manual_seed(seed))
    assert first == again and len(first) == length
    expected_len = len(torch_data.DataLoader(list(range(n)), batch_size=batch_size, shuffle=True, drop_last=drop_last))
    assert length == expected_len
    seen = [i for batch in first for i in batch]
    assert len(set(seen)) == len(seen) and set(seen) <= set(range(n))
    if not drop_last:
        assert sorted(seen) == list(range(n))
    generator = compat.Generator().manual_seed(seed)
    loader = compat_data.DataLoader(dataset, batch_size=n, shuffle=True, generator=generator)
    assert sorted(next(iter(loader))[0].tolist()) == sorted(next(iter(loader))[0].tolist()) == list(range(n))


def test_random_sampler_with_replacement_is_lazy_and_bounded():
    sampler = compat_data.RandomSampler(list(range(5)), replacement=True, num_samples=int(1e10))
    assert len(sampler) == int(1e10)
    iterator = iter(sampler)
    draws = [next(iterator) for _ in range(200)]
    assert set(draws) <= set(range(5)) and len(set(draws)) == 5
    loader = compat_data.DataLoader(list(range(5)), sampler=sampler, batch_size=4)
    assert len(next(iter(loader))) == 4
    more = list(compat_data.RandomSampler(list(range(3)), num_samples=7))
    assert len(more) == 7 and sorted(more[:3]) == [0, 1, 2] and sorted(more[3:6]) == [0, 1, 2]
    for bad, error in ((dict(num_samples=0), ValueError), (dict(replacement=1), TypeError)):
        for data in (torch_data, compat_data):
            with pytest.raises(error):
                data.RandomSampler(list(range(3)), **bad)


@SETTINGS
@given(n=st.integers(0, 40), fractions=st.sampled_from([[0.8, 0.2], [0.5, 0.3, 0.2], [1.0], [0.25, 0.25, 0.5]]))
def test_random_split_lengths_match_torch(n, fractions):
    with warnings.catch_warnings(record=True) as ours_warned:
        warnings.simplefilter("always")
        ours = compat_data.random_split(list(range(n)), fractions, generator=compat.Generator().manual_seed(1))
    with warnings.catch_warnings(record=True) as theirs_warned:
        warnings.simplefilter("always")
        theirs = torch_data.random_split(list(range(n)), fractions, generator=torch.Generator().manual_seed(1))
    assert [str(w.message) for w in ours_warned] == [str(w.message) for w in theirs_warned]
    assert [len(s) for s in ours] == [len(s) for s in theirs]
    items = [x for subset in ours for x in subset]
    assert sorted(items) == list(range(n))
    lengths = [len(s) for s in theirs]
    assert [len(s) for s in compat_data.random_split(list(range(n)), lengths)] == lengths


def test_random_split_refuses_lengths_that_do_not_add_up_as_torch():
    for data in (torch_data, compat_data):
        with pytest.raises(ValueError, match="Sum of input lengths does not equal"):
            data.random_split(list(range(5)), [2, 2])


def test_iterable_datasets_batch_as_torch():
    def stream(data):
        class Numbers(data.IterableDataset):
            def __iter__(self):
                return iter(range(7))

        return Numbers()

    results = []
    for data in (torch_data, compat_data):
        results.append([[_plain(b) for b in data.DataLoader(stream(data), batch_size=3, drop_last=drop)]
                        for drop in (False, True)])
        with pytest.raises(ValueError):
            data.DataLoader(stream(data), shuffle=True)
    assert results[0] == results[1]


def test_workers_and_pinned_memory_load_in_this_process_with_the_same_batches():
    dataset = compat_data.TensorDataset(compat.arange(6))
    loader = compat_data.DataLoader(dataset, batch_size=2, num_workers=4, pin_memory=True, persistent_workers=True)
    assert [b[0].tolist() for b in loader] == [[0, 1], [2, 3], [4, 5]]
    assert compat_data.get_worker_info() is None
    from tinyattn.compat.utils.data.dataloader import DataLoader

    assert DataLoader is compat_data.DataLoader


@SETTINGS
@given(n=st.integers(0, 12), batch_size=st.integers(1, 5), drop_last=st.booleans())
def test_batch_sampler_and_default_convert_match_torch(n, batch_size, drop_last):
    ours = compat_data.BatchSampler(compat_data.SequentialSampler(range(n)), batch_size, drop_last)
    theirs = torch_data.BatchSampler(torch_data.SequentialSampler(range(n)), batch_size, drop_last)
    assert list(ours) == list(theirs) and len(ours) == len(theirs)
    sample = {"a": np.arange(3), "b": (np.float32(2.5), "word"), "c": [np.int64(n)]}
    assert _plain(compat_data.default_convert(sample)) == _plain(torch_data.default_convert(sample))
    loader = {data: [_plain(s) for s in data.DataLoader([sample] * 2, batch_size=None)]
              for data in (torch_data, compat_data)}
    assert loader[torch_data] == loader[compat_data]


def test_subset_random_sampler_is_a_permutation_of_its_indices():
    indices = [3, 9, 4, 1]
    drawn = list(compat_data.SubsetRandomSampler(indices, generator=compat.Generator().manual_seed(0)))
    assert sorted(drawn) == sorted(indices)
    assert drawn == list(compat_data.SubsetRandomSampler(indices, generator=compat.Generator().manual_seed(0)))
    for bad in (0, 2.5, True):
        for data in (torch_data, compat_data):
            with pytest.raises(ValueError):
                data.BatchSampler(range(4), bad, False)
