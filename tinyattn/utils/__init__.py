"""Utilities beside the model: gradient checkpointing (``checkpoint``) and data loading (``data``).

>>> import tinyattn as ta
>>> from tinyattn.utils.data import DataLoader, TensorDataset
>>> loader = DataLoader(TensorDataset(ta.arange(6)), batch_size=4)
>>> [batch.tolist() for (batch,) in loader]
[[0, 1, 2, 3], [4, 5]]
"""

from ..checkpointing import Checkpoint, checkpoint
from . import data

__all__ = ["checkpoint", "Checkpoint", "data"]
