"""``torch.nn.modules.distance``: the distances, the classes of ``compat.nn`` at PyTorch's path."""

from .. import CosineSimilarity, PairwiseDistance  # noqa: F401

__all__ = ["CosineSimilarity", "PairwiseDistance"]


def __getattr__(name):
    raise AttributeError(f"tinyattn.compat.nn.modules.distance has no `{name}` yet")
