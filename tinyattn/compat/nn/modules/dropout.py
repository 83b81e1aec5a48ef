"""``torch.nn.modules.dropout``: the dropout modules, the classes of ``compat.nn`` at PyTorch's path."""

from ...scope import missing
from .. import AlphaDropout, Dropout, Dropout1d, Dropout2d, Dropout3d, FeatureAlphaDropout  # noqa: F401

__all__ = ["AlphaDropout", "Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "FeatureAlphaDropout"]


def __getattr__(name):
    raise missing(__name__, name)
