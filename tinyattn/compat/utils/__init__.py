"""``torch.utils``: ``data`` (datasets, samplers and the loader), ``checkpoint`` (gradient checkpointing) and
``tensorboard`` (``SummaryWriter``, through tensorboardX)."""

from ..scope import missing
from . import checkpoint, data, tensorboard  # noqa: F401

__all__ = ["checkpoint", "data", "tensorboard"]


def __getattr__(name):
    raise missing(__name__, name)
