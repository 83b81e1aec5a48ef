"""``DataLoader`` and the default collation: samples in, batches of tensors out.

Batches are loaded in the calling process, whatever ``num_workers`` says: a map-style dataset gives the same
batches, in the same order, as torch's workers deliver them, and ``get_worker_info()`` is ``None`` (so an
``IterableDataset`` that shards itself by worker yields its whole stream once, where each of torch's workers
would yield its own copy or share). ``worker_init_fn`` has no worker to run in and is not called;
``pin_memory``, ``timeout``, ``prefetch_factor`` and ``persistent_workers`` are checked as torch checks them
and change nothing else.
"""

import collections.abc
import copy
import numbers

import numpy as np

from ...engine import Tensor
from ...ops import stack
from .dataset import IterableDataset
from .sampler import BatchSampler, RandomSampler, SequentialSampler


def default_collate(batch):
    """A list of samples as one batch, as ``torch.utils.data.default_collate`` makes it.

    Tensors and NumPy arrays are stacked along a new first dimension; Python numbers become a 1-D tensor
    (floats float64, ints int64, bools bool), NumPy scalars one of their dtype; strings stay as they came (a
    list, or, inside a tuple or list of fields, a tuple). A dict,
    named tuple, tuple or list of fields is collated field by field: a dict of batches, a named tuple of
    batches, and, for tuples and lists, a list of batches (a list keeps its own type where it can).

    >>> import tinyattn as ta
    >>> from tinyattn.utils.data import default_collate
    >>> batch = default_collate([{"x": ta.tensor([1.0, 2.0]), "y": 0}, {"x": ta.tensor([3.0, 4.0]), "y": 1}])
    >>> batch["x"].shape, batch["y"].tolist(), batch["y"].dtype
    ((2, 2), [0, 1], dtype('int64'))
    >>> [t.tolist() for t in default_collate([(1, 0.5), (2, 1.5)])]
    [[1, 2], [0.5, 1.5]]
    """
    elem = batch[0]
    if isinstance(elem, Tensor):
        return stack(list(batch), 0)
    if isinstance(elem, np.ndarray):
        _check_numeric(elem)
        return Tensor(np.stack(batch))
    if isinstance(elem, np.generic):
        _check_numeric(elem)
        return Tensor(np.asarray(batch))
    if isinstance(elem, bool):
        return Tensor(np.asarray(batch, dtype=np.bool_))
    if isinstance(elem, numbers.Integral):
        return Tensor(np.asarray(batch, dtype=np.int64))
    if isinstance(elem, float):
        return Tensor(np.asarray(batch, dtype=np.float64))
    if isinstance(elem, (str, bytes)):
        return batch
    if isinstance(elem, collections.abc.Mapping):
        collated = {key: default_collate([sample[key] for sample in batch]) for key in elem}
        try:
            return type(elem)(collated)
        except TypeError:  # a mapping type that cannot be built from a dict
            return collated
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):  # a named tuple
        return type(elem)(*(default_collate(samples) for samples in zip(*batch)))
    if isinstance(elem, collections.abc.Sequence):
        if any(len(sample) != len(elem) for sample in batch):
            raise RuntimeError("each element in list of batch should be of equal size")
        collated = [default_collate(samples) for samples in zip(*batch)]
        if isinstance(elem, tuple):
            return collated
        if isinstance(elem, collections.abc.MutableSequence):
            clone = copy.copy(elem)
            clone[:] = collated
            return clone
        try:
            return type(elem)(collated)
        except TypeError:
            return collated
    raise TypeError("default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; "
                    f"found {type(elem)}")


def _check_numeric(elem):
    if elem.dtype.kind not in "biufc":
        raise TypeError(f"default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; "
                        f"found a numpy array of dtype {elem.dtype}")


def default_convert(data):
    """One sample as the loader yields it with ``batch_size=None``: NumPy arrays and scalars of numbers become
    tensors, tuples become lists (as torch's does), containers are converted item by item, the rest is kept.

    >>> import numpy as np
    >>> from tinyattn.utils.data import default_convert
    >>> converted = default_convert({"x": np.arange(3), "name": "a"})
    >>> type(converted["x"]).__name__, converted["name"]
    ('Tensor', 'a')
    """
    if isinstance(data, (np.ndarray, np.generic)) and data.dtype.kind in "biufc":
        return Tensor(np.asarray(data))
    if isinstance(data, collections.abc.Mapping):
        try:
            return type(data)({key: default_convert(value) for key, value in data.items()})
        except TypeError:
            return {key: default_convert(value) for key, value in data.items()}
    if isinstance(data, tuple) and hasattr(data, "_fields"):
        return type(data)(*(default_convert(d) for d in data))
    if isinstance(data, (tuple, list)):
        return [default_convert(d) for d in data]
    return data


def get_worker_info():
    """``None``: batches are loaded in the calling process (see the module), never in a worker.

    >>> from tinyattn.utils.data import get_worker_info
    >>> get_worker_info() is None
    True
    """
    return None


class DataLoader:
    """``DataLoader(dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None, num_workers=0,
    collate_fn=None, pin_memory=False, drop_last=False, timeout=0, worker_init_fn=None,
    multiprocessing_context=None, generator=None, *, prefetch_factor=None, persistent_workers=False,
    pin_memory_device="", in_order=True)``: batches of a dataset, as ``torch.utils.data.DataLoader`` gives them.

    A map-style dataset is read through a sampler (``SequentialSampler``, or ``RandomSampler`` with
    ``shuffle=True`` and ``generator``) grouped by a ``BatchSampler(sampler, batch_size, drop_last)``, each
    list of indices collated by ``collate_fn`` (``default_collate``); ``batch_size=None`` yields samples one by
    one through ``default_convert``. An ``IterableDataset`` is read as its stream, ``batch_size`` samples at
    a time. The options' conflicts raise ``ValueError`` as torch's do. Everything runs in this process (see
    the module).

    >>> import tinyattn as ta
    >>> from tinyattn.utils.data import DataLoader, TensorDataset
    >>> dataset = TensorDataset(ta.arange(10).float(), ta.arange(10) % 2)
    >>> loader = DataLoader(dataset, batch_size=4, drop_last=True)
    >>> len(loader), [(x.tolist(), y.tolist()) for x, y in loader]
    (2, [([0.0, 1.0, 2.0, 3.0], [0, 1, 0, 1]), ([4.0, 5.0, 6.0, 7.0], [0, 1, 0, 1])])
    """

    def __init__(self, dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None, num_workers=0,
                 collate_fn=None, pin_memory=False, drop_last=False, timeout=0, worker_init_fn=None,
                 multiprocessing_context=None, generator=None, *, prefetch_factor=None, persistent_workers=False,
                 pin_memory_device="", in_order=True):
        if not isinstance(num_workers, numbers.Integral) or num_workers < 0:
            raise ValueError("num_workers option should be non-negative; use num_workers=0 to disable "
                             "multiprocessing.")
        if timeout < 0:
            raise ValueError("timeout option should be non-negative")
        if num_workers == 0 and prefetch_factor is not None:
            raise ValueError("prefetch_factor option could only be specified in multiprocessing.let num_workers "
                             "> 0 to enable multiprocessing, otherwise set prefetch_factor to None.")
        if prefetch_factor is not None and prefetch_factor < 0:
            raise ValueError("prefetch_factor option should be non-negative")
        self.dataset, self.num_workers, self.pin_memory, self.timeout = dataset, num_workers, pin_memory, timeout
        self.worker_init_fn, self.generator, self.drop_last = worker_init_fn, generator, drop_last
        self.prefetch_factor, self.persistent_workers = prefetch_factor, persistent_workers
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
        auto_batching = batch_size is not None or batch_sampler is not None
        self.collate_fn = collate_fn or (default_collate if auto_batching else default_convert)

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
