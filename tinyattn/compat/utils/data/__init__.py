"""``torch.utils.data``: the native ``ta.utils.data`` (datasets, samplers, ``DataLoader``), whose batches here are
compat tensors. A ``torch.Generator`` drives the random samplers, ``random_split`` and ``shuffle=True``.

Batches are loaded in the calling process whatever ``num_workers`` says (the same batches, in the same order,
as torch's workers deliver them from a map-style dataset); ``pin_memory`` changes nothing on the host.
``DistributedSampler`` is refused: there is one process, whose sampler is the whole dataset's. So are the
DataPipes (``IterDataPipe``, ``MapDataPipe`` and their helpers), which torch deprecated and stopped developing:
``IterableDataset`` and ``Dataset`` do their work.

>>> import tinyattn.compat as torch
>>> from tinyattn.compat.utils.data import DataLoader, TensorDataset
>>> dataset = TensorDataset(torch.arange(10).float(), torch.arange(10) % 2)
>>> loader = DataLoader(dataset, batch_size=4, drop_last=True)
>>> [(x.tolist(), y.tolist()) for x, y in loader]
[([0.0, 1.0, 2.0, 3.0], [0, 1, 0, 1]), ([4.0, 5.0, 6.0, 7.0], [0, 1, 0, 1])]
"""

from ...refusals import refused
from ...scope import missing
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
           "WeightedRandomSampler", "BatchSampler", "DistributedSampler", "DataLoader", "default_collate",
           "default_convert", "get_worker_info", "IterDataPipe", "MapDataPipe", "DFIterDataPipe", "DataChunk",
           "functional_datapipe", "guaranteed_datapipes_determinism", "non_deterministic", "runtime_validation",
           "runtime_validation_disabled", "argument_validation"]

DistributedSampler = refused(
    "torch.utils.data.DistributedSampler",
    "there is one process and no process group to split the dataset across; use RandomSampler or a Subset")

_DATAPIPES = "DataPipes are deprecated in torch and not developed further; use IterableDataset (a stream) or Dataset"
IterDataPipe = refused("torch.utils.data.IterDataPipe", _DATAPIPES)
MapDataPipe = refused("torch.utils.data.MapDataPipe", _DATAPIPES)
DFIterDataPipe = refused("torch.utils.data.DFIterDataPipe", _DATAPIPES)
DataChunk = refused("torch.utils.data.DataChunk", _DATAPIPES)
functional_datapipe = refused("torch.utils.data.functional_datapipe", _DATAPIPES)
guaranteed_datapipes_determinism = refused("torch.utils.data.guaranteed_datapipes_determinism", _DATAPIPES)
non_deterministic = refused("torch.utils.data.non_deterministic", _DATAPIPES)
runtime_validation = refused("torch.utils.data.runtime_validation", _DATAPIPES)
runtime_validation_disabled = refused("torch.utils.data.runtime_validation_disabled", _DATAPIPES)
argument_validation = refused("torch.utils.data.argument_validation", _DATAPIPES)


def __getattr__(name):
    raise missing(__name__, name)
