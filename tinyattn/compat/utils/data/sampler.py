"""Samplers: iterables of dataset indices (or, for ``BatchSampler``, of lists of them)."""

import numbers

import numpy as np

from .... import backend
from ...core import random


class Sampler:
    """Base class: subclasses define ``__iter__`` (and ``__len__`` where they know it)."""

    def __init__(self, data_source=None):
        pass

    def __iter__(self):
        raise NotImplementedError(f"{type(self).__name__} has no __iter__; define it in the subclass")


class SequentialSampler(Sampler):
    """``0, 1, …, len(data_source) - 1``."""

    def __init__(self, data_source):
        self.data_source = data_source

    def __iter__(self):
        return iter(range(len(self.data_source)))

    def __len__(self):
        return len(self.data_source)


class RandomSampler(Sampler):
    """Indices in random order: a fresh permutation per pass (``replacement=False``), or
    ``num_samples`` independent draws (``replacement=True``, drawn lazily, 32 at a time, so that a
    huge ``num_samples`` costs nothing up front)."""

    def __init__(self, data_source, replacement=False, num_samples=None, generator=None):
        if not isinstance(replacement, bool):
            raise TypeError(f"replacement should be a boolean value, but got replacement={replacement}")
        self.data_source, self.replacement, self._num_samples, self.generator = \
            data_source, replacement, num_samples, generator
        if not isinstance(self.num_samples, numbers.Integral) or isinstance(self.num_samples, bool) \
                or self.num_samples <= 0:
            raise ValueError(f"num_samples should be a positive integer value, but got num_samples={self.num_samples}")

    @property
    def num_samples(self):
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self):
        n = len(self.data_source)
        if self.replacement:
            for start in range(0, self.num_samples, 32):
                yield from _draws(n, min(32, self.num_samples - start), self.generator)
            return
        for _ in range(self.num_samples // n):
            yield from random.permutation(n, self.generator).tolist()
        yield from random.permutation(n, self.generator)[: self.num_samples % n].tolist()

    def __len__(self):
        return self.num_samples


def _draws(n, count, generator):
    rng = random.numpy_generator(generator)
    if rng is None:
        return (backend.random_uniform((count,), np.dtype(np.float64), "cpu") * n).astype(np.int64).tolist()
    return rng.integers(0, n, count).tolist()


class SubsetRandomSampler(Sampler):
    """The given ``indices`` in random order."""

    def __init__(self, indices, generator=None):
        self.indices, self.generator = indices, generator

    def __iter__(self):
        for i in random.permutation(len(self.indices), self.generator).tolist():
            yield self.indices[i]

    def __len__(self):
        return len(self.indices)


class BatchSampler(Sampler):
    """Lists of ``batch_size`` indices from ``sampler``; the last shorter one dropped with ``drop_last``."""

    def __init__(self, sampler, batch_size, drop_last):
        if not isinstance(batch_size, numbers.Integral) or isinstance(batch_size, bool) or batch_size <= 0:
            raise ValueError(f"batch_size should be a positive integer value, but got batch_size={batch_size}")
        if not isinstance(drop_last, bool):
            raise ValueError(f"drop_last should be a boolean value, but got drop_last={drop_last}")
        self.sampler, self.batch_size, self.drop_last = sampler, batch_size, drop_last

    def __iter__(self):
        batch = []
        for index in self.sampler:
            batch.append(index)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __len__(self):
        if self.drop_last:
            return len(self.sampler) // self.batch_size
        return (len(self.sampler) + self.batch_size - 1) // self.batch_size
