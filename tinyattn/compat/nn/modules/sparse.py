"""``torch.nn.modules.sparse``: the lookup tables (``tinyattn.compat.nn``'s)."""

from .. import Embedding, EmbeddingBag  # noqa: F401

__all__ = ["Embedding", "EmbeddingBag"]
