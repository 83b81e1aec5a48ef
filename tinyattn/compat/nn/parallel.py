"""``torch.nn.parallel``: the data-parallel wrappers, refused (one process, no device to replicate onto).

>>> from tinyattn.compat.nn.parallel import DistributedDataParallel
>>> DistributedDataParallel.refusal.startswith("one process")
True
"""

from ..refusals import refused
from ..scope import missing

__all__ = ["DistributedDataParallel", "DataParallel", "data_parallel"]

DistributedDataParallel = refused(
    "torch.nn.parallel.DistributedDataParallel",
    "one process here, no process group to synchronise gradients across (torch.distributed.init_process_group is "
    "refused); train the module itself: model = model instead of DistributedDataParallel(model)")
DataParallel = refused(
    "torch.nn.parallel.DataParallel",
    "one process and no CUDA devices to replicate the module onto; call the module itself")
data_parallel = refused("torch.nn.parallel.data_parallel",
                        "one process and no CUDA devices to replicate the module onto; call the module itself")


def __getattr__(name):
    raise missing(__name__, name)
