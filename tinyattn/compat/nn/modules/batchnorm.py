"""``torch.nn.modules.batchnorm``: batch normalisation, the classes of ``compat.nn`` at PyTorch's path."""

from .. import BatchNorm1d, BatchNorm2d, BatchNorm3d, SyncBatchNorm  # noqa: F401

__all__ = ["BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "SyncBatchNorm"]


def __getattr__(name):
    raise AttributeError(f"tinyattn.compat.nn.modules.batchnorm has no `{name}` yet")
