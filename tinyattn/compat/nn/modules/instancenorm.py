"""``torch.nn.modules.instancenorm``: instance normalisation, the classes of ``compat.nn`` at PyTorch's path."""

from .. import InstanceNorm1d, InstanceNorm2d, InstanceNorm3d  # noqa: F401

__all__ = ["InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d"]


def __getattr__(name):
    raise AttributeError(f"tinyattn.compat.nn.modules.instancenorm has no `{name}` yet")
