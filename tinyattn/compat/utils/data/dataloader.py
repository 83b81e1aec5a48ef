"""``torch.utils.data.dataloader``: ``DataLoader``, ``default_collate``, ``default_convert`` and
``get_worker_info``: the native ones (``ta.utils.data``), batches made of compat tensors."""

import collections.abc

from ....engine import Tensor as _NativeTensor
from ....utils import data as _native
from ....utils.data import get_worker_info
from ...core.tensor import as_compat

__all__ = ["DataLoader", "default_collate", "default_convert", "get_worker_info"]


def _compat(value):
    """The native collation's result with every tensor a compat tensor (containers rebuilt as they came)."""
    if isinstance(value, _NativeTensor):
        return as_compat(value)
    if isinstance(value, collections.abc.Mapping):
        items = {key: _compat(v) for key, v in value.items()}
        try:
            return type(value)(items)
        except TypeError:
            return items
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return type(value)(*(_compat(v) for v in value))
    if isinstance(value, list):
        value[:] = [_compat(v) for v in value]
        return value
    return value


def default_collate(batch):
    """``ta.utils.data.default_collate``, its tensors compat tensors."""
    return _compat(_native.default_collate(batch))


def default_convert(data):
    """``ta.utils.data.default_convert``, its tensors compat tensors."""
    return _compat(_native.default_convert(data))


class DataLoader(_native.DataLoader):
    """``ta.utils.data.DataLoader``, with ``default_collate`` and ``default_convert`` giving compat tensors."""

    def __init__(self, dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None, num_workers=0,
                 collate_fn=None, pin_memory=False, drop_last=False, timeout=0, worker_init_fn=None,
                 multiprocessing_context=None, generator=None, *, prefetch_factor=None, persistent_workers=False,
                 pin_memory_device="", in_order=True):
        super().__init__(dataset, batch_size, shuffle, sampler, batch_sampler, num_workers, collate_fn, pin_memory,
                         drop_last, timeout, worker_init_fn, multiprocessing_context, generator,
                         prefetch_factor=prefetch_factor, persistent_workers=persistent_workers,
                         pin_memory_device=pin_memory_device, in_order=in_order)
        if collate_fn is None:
            self.collate_fn = {_native.default_collate: default_collate,
                               _native.default_convert: default_convert}[self.collate_fn]
