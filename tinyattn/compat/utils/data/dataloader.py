"""``DataLoader`` and the default collation.

Batches are loaded in the calling process whatever ``num_workers`` says (the same batches, in the
same order, as torch's workers deliver them); ``pin_memory`` changes nothing on the host.
"""

import collections.abc
import numbers

import numpy as np

from ....engine import Tensor as _NativeTensor
from ....ops import stack
from ...core.tensor import as_compat
from .dataset import IterableDataset
from .sampler import BatchSampler, RandomSampler, SequentialSampler


def _stack(tensors):
    return as_compat(stack(tensors, 0))


def default_collate(batch):
    """A list of samples as one batch: tensors, NumPy arrays and numbers stacked along a new first
    dimension (Python floats as float64, ints as int64), strings kept as a list, and dicts, tuples,
    lists and named tuples collated field by field (a tuple of samples gives a list of batches)."""
    elem = batch[0]
    if isinstance(elem, _NativeTensor):
        return _stack(batch)
    if isinstance(elem, np.ndarray) and elem.dtype.kind in "biufc":
        return _stack([as_compat(_NativeTensor(np.asarray(b))) for b in batch])
    if isinstance(elem, np.generic) and elem.dtype.kind in "biufc":
        return as_compat(_NativeTensor(np.asarray(batch)))
    if isinstance(elem, bool):
        return as_compat(_NativeTensor(np.asarray(batch, dtype=np.bool_)))
    if isinstance(elem, numbers.Integral):
        return as_compat(_NativeTensor(np.asarray(batch, dtype=np.int64)))
    if isinstance(elem, float):
        return as_compat(_NativeTensor(np.asarray(batch, dtype=np.float64)))
    if isinstance(elem, (str, bytes)):
        return batch
    if isinstance(elem, collections.abc.Mapping):
        collated = {key: default_collate([sample[key] for sample in batch]) for key in elem}
        try:
            return type(elem)(collated)
        except TypeError:
            return collated
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):  # a named tuple
        return type(elem)(*(default_collate(list(samples)) for samples in zip(*batch)))
    if isinstance(elem, collections.abc.Sequence):
        if any(len(sample) != len(elem) for sample in batch):
            raise RuntimeError("each element in list of batch should be of equal size")
        collated = [default_collate(list(samples)) for samples in zip(*batch)]
        if isinstance(elem, tuple):
            return collated
        try:
            return type(elem)(collated)
        except TypeError:
            return collated
    raise TypeError("default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; "
                    f"found {type(elem)}")


def default_convert(data):
    """One sample as the loader yields it with ``batch_size=None``: NumPy arrays and scalars become tensors,
    tuples lists (as torch's does), containers are converted item by item."""
    if isinstance(data, (np.ndarray, np.generic)) and data.dtype.kind in "biufc":
        return as_compat(_NativeTensor(np.asarray(data)))
    if isinstance(data, collections.abc.Mapping):
        return type(data)({key: default_convert(value) for key, value in data.items()})
    if isinstance(data, tuple) and hasattr(data, "_fields"):
        return type(data)(*(default_convert(d) for d in data))
    if isinstance(data, tuple):
        return [default_convert(d) for d in data]
    if isinstance(data, list):
        return [default_convert(d) for d in data]
    return data


def get_worker_info():
    """``None``: batches are loaded in the calling process."""
    return None


class DataLoader:
    """``DataLoader(dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None, num_workers=0,
    collate_fn=None, pin_memory=False, drop_last=False, timeout=0, worker_init_fn=None, generator=None, …)``."""

    def __init__(self, dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None, num_workers=0,
                 collate_fn=None, pin_memory=False, drop_last=False, timeout=0, worker_init_fn=None,
                 multiprocessing_context=None, generator=None, *, prefetch_factor=None, persistent_workers=False,
                 pin_memory_device="", in_order=True):
        if not isinstance(num_workers, numbers.Integral) or num_workers < 0:
            raise ValueError("num_workers option should be non-negative; use num_workers=0 to disable "
                             "multiprocessing.")
        if timeout < 0:
            raise ValueError("timeout option should be non-negative")
        self.dataset, self.num_workers, self.pin_memory, self.timeout = dataset, num_workers, pin_memory, timeout
        self.worker_init_fn, self.generator, self.drop_last = worker_init_fn, generator, drop_last
        self._iterable = isinstance(dataset, IterableDataset)
        if self._iterable:
            if shuffle not in (None, False):
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified shuffle option, but got "
                                 f"shuffle={shuffle}")
            if sampler is not None:
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified sampler option, but got "
                                 f"sampler={sampler}")
            if batch_sampler is not None:
                raise ValueError("DataLoader with IterableDataset: expected unspecified batch_sampler option, but "
                                 f"got batch_sampler={batch_sampler}")
        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError("batch_sampler option is mutually exclusive with batch_size, shuffle, sampler, "
                                 "and drop_last")
            batch_size, drop_last = None, False
        elif batch_size is None and drop_last:
            raise ValueError("batch_size=None option disables auto-batching and is mutually exclusive with "
                             "drop_last")
        if sampler is None and not self._iterable:
            sampler = RandomSampler(dataset, generator=generator) if shuffle else SequentialSampler(dataset)
        if batch_size is not None and batch_sampler is None and not self._iterable:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        self.batch_size, self.sampler, self.batch_sampler = batch_size, sampler, batch_sampler
        self.collate_fn = collate_fn or (default_collate if batch_size is not None or batch_sampler is not None
                                         else default_convert)

    def __iter__(self):
        if self._iterable:
            yield from self._iterable_batches()
            return
        if self.batch_sampler is None:  # batch_size=None: one sample at a time
            for index in self.sampler:
                yield self.collate_fn(self.dataset[index])
            return
        for indices in self.batch_sampler:
            yield self.collate_fn([self.dataset[i] for i in indices])

    def _iterable_batches(self):
        if self.batch_size is None:
            for sample in self.dataset:
                yield self.collate_fn(sample)
            return
        batch = []
        for sample in self.dataset:
            batch.append(sample)
            if len(batch) == self.batch_size:
                yield self.collate_fn(batch)
                batch = []
        if batch and not self.drop_last:
            yield self.collate_fn(batch)

    def __len__(self):
        if self._iterable:
            n = len(self.dataset)
            if self.batch_size is None:
                return n
            return n // self.batch_size if self.drop_last else -(-n // self.batch_size)
        return len(self.batch_sampler if self.batch_sampler is not None else self.sampler)
