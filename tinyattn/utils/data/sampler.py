"""Samplers: iterables of dataset indices (or, for ``BatchSampler``, of lists of them).

Random draws come from the library's seeded stream (``ta.manual_seed``), or from the ``generator`` given: a
``numpy.random.Generator``, or any object with its ``random(size)`` method, read at each pass (so reseeding it
between passes takes effect). Every random sampler draws uniform float64 numbers ``u`` in ``[0, 1)`` and turns
them into indices: a permutation is the order that sorts ``u``; a draw with replacement is ``floor(u·n)``.
"""

import numbers

import numpy as np

from ... import backend
from ...engine import Tensor


def uniform(count, generator=None):
    """``count`` uniform float64 draws in ``[0, 1)`` on the host: from ``generator`` or the library's stream."""
    if generator is None:
        return backend.random_uniform((count,), np.dtype(np.float64), "cpu")
    if not callable(getattr(generator, "random", None)):
        raise TypeError(f"generator must be a numpy.random.Generator, got {type(generator).__name__}")
    return np.asarray(generator.random(count), dtype=np.float64)


def permutation(n, generator=None):
    """A random permutation of ``range(n)``, int64 NumPy indices: the order that sorts ``n`` uniform draws."""
    return np.argsort(uniform(n, generator), kind="stable").astype(np.int64)


class Sampler:
    """Base class: subclasses define ``__iter__`` over indices (and ``__len__`` where they know it).

    >>> from tinyattn.utils.data import Sampler
    >>> class Backwards(Sampler):
    ...     def __init__(self, data_source):
    ...         self.data_source = data_source
    ...     def __iter__(self):
    ...         return iter(range(len(self.data_source) - 1, -1, -1))
    >>> list(Backwards("abc"))
    [2, 1, 0]
    """

    def __init__(self, data_source=None):
        pass

    def __iter__(self):
        raise NotImplementedError(f"{type(self).__name__} has no __iter__; define it in the subclass")


class SequentialSampler(Sampler):
    """``0, 1, …, len(data_source) - 1``.

    >>> from tinyattn.utils.data import SequentialSampler
    >>> list(SequentialSampler("abc"))
    [0, 1, 2]
    """

    def __init__(self, data_source):
        self.data_source = data_source

    def __iter__(self):
        return iter(range(len(self.data_source)))

    def __len__(self):
        return len(self.data_source)


class RandomSampler(Sampler):
    """``RandomSampler(data_source, replacement=False, num_samples=None, generator=None)``: indices in random
    order, a fresh permutation per pass (``num_samples`` beyond ``len(data_source)`` continues with further
    permutations), or ``num_samples`` independent draws with ``replacement=True`` (drawn lazily, 32 at a time,
    so that a huge ``num_samples`` costs nothing up front).

    >>> import numpy as np
    >>> from tinyattn.utils.data import RandomSampler
    >>> sorted(RandomSampler(range(5), generator=np.random.default_rng(0)))
    [0, 1, 2, 3, 4]
    >>> len(list(RandomSampler(range(5), replacement=True, num_samples=12)))
    12
    """

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
                count = min(32, self.num_samples - start)
                yield from (uniform(count, self.generator) * n).astype(np.int64).tolist()
            return
        for _ in range(self.num_samples // n):
            yield from permutation(n, self.generator).tolist()
        yield from permutation(n, self.generator)[: self.num_samples % n].tolist()

    def __len__(self):
        return self.num_samples


class SubsetRandomSampler(Sampler):
    """``SubsetRandomSampler(indices, generator=None)``: the given ``indices`` in random order, afresh each pass.

    >>> from tinyattn.utils.data import SubsetRandomSampler
    >>> sorted(SubsetRandomSampler([7, 3, 5]))
    [3, 5, 7]
    """

    def __init__(self, indices, generator=None):
        self.indices, self.generator = indices, generator

    def __iter__(self):
        for i in permutation(len(self.indices), self.generator).tolist():
            yield self.indices[i]

    def __len__(self):
        return len(self.indices)


class WeightedRandomSampler(Sampler):
    """``WeightedRandomSampler(weights, num_samples, replacement=True, generator=None)``: ``num_samples`` indices
    of ``range(len(weights))``, index ``i`` drawn with probability ``weights[i] / sum(weights)`` (the weights
    need not sum to 1).

    With replacement each draw is independent: the first ``i`` whose cumulative weight exceeds ``u·sum``.
    Without, each index at most once, in the order of the keys ``-log(1 - u_i) / weights[i]`` (exponential
    races: the smallest key is a draw from the weights, the next one a draw from the rest, and so on); indices
    of weight 0 come after all the others, in order, as torch's do.

    >>> import numpy as np
    >>> from tinyattn.utils.data import WeightedRandomSampler
    >>> draws = list(WeightedRandomSampler([0.0, 1.0, 0.0, 3.0], 100, generator=np.random.default_rng(0)))
    >>> sorted(set(draws)), len(draws)
    ([1, 3], 100)
    >>> sorted(WeightedRandomSampler([1.0, 0.0, 2.0], 2, replacement=False))
    [0, 2]
    """

    def __init__(self, weights, num_samples, replacement=True, generator=None):
        if not isinstance(num_samples, numbers.Integral) or isinstance(num_samples, bool) or num_samples <= 0:
            raise ValueError(f"num_samples should be a positive integer value, but got num_samples={num_samples}")
        if not isinstance(replacement, bool):
            raise ValueError(f"replacement should be a boolean value, but got replacement={replacement}")
        weights = np.asarray(weights.numpy() if isinstance(weights, Tensor) else weights, dtype=np.float64)
        if weights.ndim != 1:
            raise ValueError(f"weights should be a 1d sequence but given weights have shape {weights.shape}")
        if weights.size == 0 or not (weights >= 0).all() or not np.isfinite(weights).all() or weights.sum() <= 0:
            raise RuntimeError(f"invalid multinomial distribution: weights must be finite, >= 0, with a positive "
                               f"sum; got {weights.tolist()}")
        self.weights, self.num_samples, self.replacement, self.generator = \
            weights, num_samples, replacement, generator

    def __iter__(self):
        if self.replacement:
            cumulative = np.cumsum(self.weights)
            draws = uniform(self.num_samples, self.generator) * cumulative[-1]
            indices = np.minimum(np.searchsorted(cumulative, draws, side="right"), len(self.weights) - 1)
            return iter(indices.tolist())
        if self.num_samples > len(self.weights):
            raise RuntimeError(f"cannot draw {self.num_samples} samples without replacement from "
                               f"{len(self.weights)} weights")
        with np.errstate(divide="ignore"):
            keys = -np.log1p(-uniform(len(self.weights), self.generator)) / self.weights  # weight 0: key inf
        return iter(np.argsort(keys, kind="stable")[: self.num_samples].tolist())

    def __len__(self):
        return self.num_samples


class BatchSampler(Sampler):
    """``BatchSampler(sampler, batch_size, drop_last)``: lists of ``batch_size`` indices from ``sampler``; the last,
    shorter one is dropped with ``drop_last=True``.

    >>> from tinyattn.utils.data import BatchSampler, SequentialSampler
    >>> list(BatchSampler(SequentialSampler(range(5)), batch_size=2, drop_last=False))
    [[0, 1], [2, 3], [4]]
    >>> len(BatchSampler(range(5), batch_size=2, drop_last=True))
    2
    """

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
