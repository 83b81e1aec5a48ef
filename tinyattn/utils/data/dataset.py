"""Datasets: anything with ``__getitem__`` and ``__len__`` (map-style) or ``__iter__`` (iterable), and the ways to
combine and split them (``torch.utils.data``'s ``dataset`` module)."""

import bisect
import itertools
import math
import numbers
import warnings

from .sampler import permutation


class Dataset:
    """A map-style dataset: subclasses define ``__getitem__(index)`` and, for most samplers, ``__len__``.
    ``a + b`` is ``ConcatDataset([a, b])``.

    >>> from tinyattn.utils.data import Dataset
    >>> class Squares(Dataset):
    ...     def __getitem__(self, index):
    ...         return index * index
    ...     def __len__(self):
    ...         return 4
    >>> both = Squares() + Squares()
    >>> len(both), both[5]
    (8, 1)
    """

    def __getitem__(self, index):
        raise NotImplementedError(f"{type(self).__name__} has no __getitem__; define it in the subclass")

    def __add__(self, other):
        return ConcatDataset([self, other])


class IterableDataset(Dataset):
    """A dataset read as a stream: subclasses define ``__iter__``. ``a + b`` is ``ChainDataset([a, b])``.

    >>> from tinyattn.utils.data import IterableDataset
    >>> class Count(IterableDataset):
    ...     def __init__(self, n):
    ...         self.n = n
    ...     def __iter__(self):
    ...         return iter(range(self.n))
    >>> list(Count(2) + Count(3))
    [0, 1, 0, 1, 2]
    """

    def __iter__(self):
        raise NotImplementedError(f"{type(self).__name__} has no __iter__; define it in the subclass")

    def __add__(self, other):
        return ChainDataset([self, other])


class TensorDataset(Dataset):
    """``TensorDataset(*tensors)``: sample ``i`` is ``tuple(t[i] for t in tensors)``; every tensor has the same
    first dimension.

    >>> import tinyattn as ta
    >>> from tinyattn.utils.data import TensorDataset
    >>> dataset = TensorDataset(ta.arange(3), ta.tensor([[1.0], [2.0], [3.0]]))
    >>> len(dataset), [t.tolist() for t in dataset[1]]
    (3, [1, [2.0]])
    """

    def __init__(self, *tensors):
        if any(tensors[0].size(0) != t.size(0) for t in tensors):
            raise AssertionError("Size mismatch between tensors: first dimensions "
                                 f"{[t.size(0) for t in tensors]}")
        self.tensors = tensors

    def __getitem__(self, index):
        return tuple(t[index] for t in self.tensors)

    def __len__(self):
        return self.tensors[0].size(0)


class StackDataset(Dataset):
    """``StackDataset(*datasets)`` or ``StackDataset(**datasets)``: sample ``i`` is the tuple (or the dict, by
    keyword) of every dataset's sample ``i``; the datasets have the same length.

    >>> from tinyattn.utils.data import StackDataset
    >>> StackDataset(["a", "b"], [1, 2])[1]
    ('b', 2)
    >>> StackDataset(text=["a", "b"], label=[1, 2])[0]
    {'text': 'a', 'label': 1}
    """

    def __init__(self, *args, **kwargs):
        if args and kwargs:
            raise ValueError("Supported either ``tuple``- (via ``args``) or``dict``- (via ``kwargs``) like "
                             "input/output, but both types are given.")
        if not args and not kwargs:
            raise ValueError("At least one dataset should be passed")
        self.datasets = args or kwargs
        lengths = {len(d) for d in (args or kwargs.values())}
        if len(lengths) != 1:
            raise ValueError(f"Size mismatch between datasets: lengths {sorted(lengths)}")
        self._length = lengths.pop()

    def __getitem__(self, index):
        if isinstance(self.datasets, dict):
            return {key: dataset[index] for key, dataset in self.datasets.items()}
        return tuple(dataset[index] for dataset in self.datasets)

    def __len__(self):
        return self._length


class ConcatDataset(Dataset):
    """``ConcatDataset(datasets)``: the samples of several map-style datasets, one after the other;
    ``cumulative_sizes[i]`` is where dataset ``i`` ends.

    >>> from tinyattn.utils.data import ConcatDataset
    >>> both = ConcatDataset([[10, 11], [20, 21, 22]])
    >>> len(both), both[2], both[-1], both.cumulative_sizes
    (5, 20, 22, [2, 5])
    """

    def __init__(self, datasets):
        self.datasets = list(datasets)
        if not self.datasets:
            raise AssertionError("datasets should not be an empty iterable")
        for d in self.datasets:
            if isinstance(d, IterableDataset):
                raise AssertionError("ConcatDataset does not support IterableDataset (use ChainDataset)")
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


class ChainDataset(IterableDataset):
    """``ChainDataset(datasets)``: the streams of several iterable datasets, one after the other (made lazily, at
    each pass); its length, where each has one, is their sum.

    >>> from tinyattn.utils.data import ChainDataset, IterableDataset
    >>> class Letters(IterableDataset):
    ...     def __init__(self, text):
    ...         self.text = text
    ...     def __iter__(self):
    ...         return iter(self.text)
    ...     def __len__(self):
    ...         return len(self.text)
    >>> chained = ChainDataset([Letters("ab"), Letters("cde")])
    >>> list(chained), len(chained)
    (['a', 'b', 'c', 'd', 'e'], 5)
    """

    def __init__(self, datasets):
        self.datasets = datasets

    def __iter__(self):
        for dataset in self.datasets:
            if not isinstance(dataset, IterableDataset):
                raise AssertionError(f"ChainDataset only supports IterableDataset, got a {type(dataset).__name__}")
            yield from dataset

    def __len__(self):
        total = 0
        for dataset in self.datasets:
            if not isinstance(dataset, IterableDataset):
                raise AssertionError(f"ChainDataset only supports IterableDataset, got a {type(dataset).__name__}")
            total += len(dataset)
        return total


class Subset(Dataset):
    """``Subset(dataset, indices)``: the samples of ``dataset`` at ``indices``, in that order.

    >>> from tinyattn.utils.data import Subset
    >>> part = Subset(["a", "b", "c", "d"], [3, 0])
    >>> len(part), part[0], part[1]
    (2, 'd', 'a')
    """

    def __init__(self, dataset, indices):
        self.dataset, self.indices = dataset, indices

    def __getitem__(self, index):
        if isinstance(index, list):
            return self.dataset[[self.indices[i] for i in index]]
        return self.dataset[self.indices[index]]

    def __len__(self):
        return len(self.indices)


def random_split(dataset, lengths, generator=None):
    """``dataset`` split at random into non-overlapping ``Subset``s of the given lengths, or of fractions of its
    length that sum to 1 (each rounded down, the remainder handed out one by one from the first split, as torch
    does). ``generator``: a ``numpy.random.Generator`` (or anything with its ``random(size)``) to draw the
    order from, instead of the library's seeded stream.

    >>> import numpy as np
    >>> from tinyattn.utils.data import random_split
    >>> train, test = random_split(range(10), [0.75, 0.25], generator=np.random.default_rng(0))
    >>> len(train), len(test), sorted(list(train) + list(test)) == list(range(10))
    (8, 2, True)
    """
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
        raise ValueError(f"Sum of input lengths does not equal the length of the input dataset! ({sum(lengths)} "
                         f"and {n})")
    order = permutation(n, generator).tolist()
    return [Subset(dataset, order[end - length:end])
            for end, length in zip(itertools.accumulate(lengths), lengths)]
