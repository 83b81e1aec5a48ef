"""``torch.utils.data``: datasets, samplers, ``DataLoader`` and its default collation.

>>> import tinyattn.compat as torch
>>> from tinyattn.compat.utils.data import DataLoader, TensorDataset
>>> dataset = TensorDataset(torch.arange(10).float(), torch.arange(10) % 2)
>>> loader = DataLoader(dataset, batch_size=4, drop_last=True)
>>> [(x.tolist(), y.tolist()) for x, y in loader]
[([0.0, 1.0, 2.0, 3.0], [0, 1, 0, 1]), ([4.0, 5.0, 6.0, 7.0], [0, 1, 0, 1])]
"""

from .dataloader import DataLoader, default_collate, default_convert, get_worker_info
from .dataset import ConcatDataset, Dataset, IterableDataset, Subset, TensorDataset, random_split
from .sampler import BatchSampler, RandomSampler, Sampler, SequentialSampler, SubsetRandomSampler

__all__ = ["Dataset", "IterableDataset", "TensorDataset", "ConcatDataset", "Subset", "random_split", "Sampler",
           "SequentialSampler", "RandomSampler", "SubsetRandomSampler", "BatchSampler", "DataLoader",
           "default_collate", "default_convert", "get_worker_info"]


def __getattr__(name):
    raise AttributeError(f"tinyattn.compat.utils.data has no `{name}` yet")
