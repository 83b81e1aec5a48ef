"""Datasets: anything with ``__getitem__`` and ``__len__`` (map-style) or ``__iter__`` (iterable)."""

import bisect
import itertools
import math
import numbers
import warnings

from ...core.random import permutation


class Dataset:
    """A map-style dataset: subclasses define ``__getitem__(index)`` and, for most samplers, ``__len__``."""

    def __getitem__(self, index):
        raise NotImplementedError(f"{type(self).__name__} has no __getitem__; define it in the subclass")

    def __add__(self, other):
        return ConcatDataset([self, other])


class IterableDataset(Dataset):
    """A dataset read as a stream: subclasses define ``__iter__``."""

    def __iter__(self):
        raise NotImplementedError(f"{type(self).__name__} has no __iter__; define it in the subclass")


class TensorDataset(Dataset):
    """Samples ``tuple(t[i] for t in tensors)``; every tensor has the same first dimension."""

    def __init__(self, *tensors):
        if any(tensors[0].size(0) != t.size(0) for t in tensors):
            raise AssertionError("Size mismatch between tensors")
        self.tensors = tensors

    def __getitem__(self, index):
        return tuple(t[index] for t in self.tensors)

    def __len__(self):
        return self.tensors[0].size(0)


class ConcatDataset(Dataset):
    """The samples of several map-style datasets, one after the other."""

    def __init__(self, datasets):
        self.datasets = list(datasets)
        if not self.datasets:
            raise AssertionError("datasets should not be an empty iterable")
        for d in self.datasets:
            if isinstance(d, IterableDataset):
                raise AssertionError("ConcatDataset does not support IterableDataset")
        self.cumulative_sizes = list(itertools.accumulate(len(d) for d in self.datasets))

    def __len__(self):
        return self.cumulative_sizes[-1]

    def __getitem__(self, index):
        if index < 0:
            if -index > len(self):
                raise ValueError("absolute value of index should not exceed dataset length")
            index += len(self)
        which = bisect.bisect_right(self.cumulative_sizes, index)
        start = self.cumulative_sizes[which - 1] if which else 0
        return self.datasets[which][index - start]


class Subset(Dataset):
    """The samples of ``dataset`` at ``indices``, in that order."""

    def __init__(self, dataset, indices):
        self.dataset, self.indices = dataset, indices

    def __getitem__(self, index):
        if isinstance(index, list):
            return self.dataset[[self.indices[i] for i in index]]
        return self.dataset[self.indices[index]]

    def __len__(self):
        return len(self.indices)


def random_split(dataset, lengths, generator=None):
    """``dataset`` split at random into ``Subset``s of the given lengths (or fractions summing to 1,
    rounded down with the remainder handed out one by one from the first, as torch does)."""
    n = len(dataset)
    if math.isclose(sum(lengths), 1) and sum(lengths) <= 1:
        counts = []
        for i, fraction in enumerate(lengths):
            if not 0 <= fraction <= 1:
                raise ValueError(f"Fraction at index {i} is not between 0 and 1")
            counts.append(int(math.floor(n * fraction)))
        for i in range(n - sum(counts)):
            counts[i % len(counts)] += 1
        for i, count in enumerate(counts):
            if count == 0:
                warnings.warn(f"Length of split at index {i} is 0. This might result in an empty dataset.",
                              stacklevel=2)
        lengths = counts
    if any(not isinstance(length, numbers.Integral) or length < 0 for length in lengths):
        raise ValueError(f"random_split: lengths must be non-negative integers or fractions summing to 1, "
                         f"got {list(lengths)}")
    if sum(lengths) != n:
        raise ValueError("Sum of input lengths does not equal the length of the input dataset!")
    order = permutation(n, generator).tolist()
    return [Subset(dataset, order[end - length:end])
            for end, length in zip(itertools.accumulate(lengths), lengths)]
