"""``torch.nn.modules.instancenorm``: instance normalisation, the classes of ``compat.nn`` at PyTorch's path."""

from ...scope import missing
from .. import (  # noqa: F401
    InstanceNorm1d,
    InstanceNorm2d,
    InstanceNorm3d,
    LazyInstanceNorm1d,
    LazyInstanceNorm2d,
    LazyInstanceNorm3d,
)

__all__ = [
    "InstanceNorm1d",
    "InstanceNorm2d",
    "InstanceNorm3d",
    "LazyInstanceNorm1d",
    "LazyInstanceNorm2d",
    "LazyInstanceNorm3d",
]


def __getattr__(name):
    raise missing(__name__, name)
