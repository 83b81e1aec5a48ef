"""``torch.nn.modules.distance``: the distances, the classes of ``compat.nn`` at PyTorch's path."""

from ...scope import missing
from .. import CosineSimilarity, PairwiseDistance  # noqa: F401

__all__ = ["CosineSimilarity", "PairwiseDistance"]


def __getattr__(name):
    raise missing(__name__, name)
