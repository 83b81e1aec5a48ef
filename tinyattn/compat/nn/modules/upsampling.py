"""``torch.nn.modules.upsampling``: the upsampling modules, the classes of ``compat.nn`` at PyTorch's path."""

from ...scope import missing
from .. import Upsample, UpsamplingBilinear2d, UpsamplingNearest2d  # noqa: F401

__all__ = ["Upsample", "UpsamplingBilinear2d", "UpsamplingNearest2d"]


def __getattr__(name):
    raise missing(__name__, name)
