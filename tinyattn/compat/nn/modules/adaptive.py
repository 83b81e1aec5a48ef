"""``torch.nn.modules.adaptive``: the adaptive softmax, the class of ``compat.nn`` at PyTorch's path."""

from .. import AdaptiveLogSoftmaxWithLoss  # noqa: F401

__all__ = ["AdaptiveLogSoftmaxWithLoss"]


def __getattr__(name):
    raise AttributeError(f"tinyattn.compat.nn.modules.adaptive has no `{name}` yet")
