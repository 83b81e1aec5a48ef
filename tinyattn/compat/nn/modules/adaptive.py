"""``torch.nn.modules.adaptive``: the adaptive softmax, the class of ``compat.nn`` at PyTorch's path."""

from ...scope import missing
from .. import AdaptiveLogSoftmaxWithLoss  # noqa: F401

__all__ = ["AdaptiveLogSoftmaxWithLoss"]


def __getattr__(name):
    raise missing(__name__, name)
