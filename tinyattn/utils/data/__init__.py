"""``ta.utils.data``: datasets, samplers, ``DataLoader`` and its default collation, with
``torch.utils.data``'s names, arguments and defaults; batches are native tensors.

>>> import tinyattn as ta
>>> from tinyattn.utils.data import DataLoader, TensorDataset, random_split
>>> dataset = TensorDataset(ta.arange(10).float(), ta.arange(10) % 2)
>>> train, test = random_split(dataset, [8, 2])
>>> [x.shape for x, y in DataLoader(train, batch_size=3, shuffle=True)]
[(3,), (3,), (2,)]
"""

from .dataloader import DataLoader, default_collate, default_convert, get_worker_info
from .dataset import (
    ChainDataset,
    ConcatDataset,
    Dataset,
    IterableDataset,
    StackDataset,
    Subset,
    TensorDataset,
    random_split,
)
from .sampler import BatchSampler, RandomSampler, Sampler, SequentialSampler, SubsetRandomSampler, WeightedRandomSampler

__all__ = ["Dataset", "IterableDataset", "TensorDataset", "StackDataset", "ConcatDataset", "ChainDataset", "Subset",
           "random_split", "Sampler", "SequentialSampler", "RandomSampler", "SubsetRandomSampler",
           "WeightedRandomSampler", "BatchSampler", "DataLoader", "default_collate", "default_convert",
           "get_worker_info"]
