"""``torch.nn.utils.rnn``: ``pad_sequence`` (packed sequences are not supported by tinyattn.compat).

>>> import tinyattn.compat as torch
>>> from tinyattn.compat.nn.utils.rnn import pad_sequence
>>> pad_sequence([torch.tensor([1, 2, 3]), torch.tensor([4])], padding_value=0)
tensor([[1, 4],
        [2, 0],
        [3, 0]])
"""

from ....creation import full
from ....ops import cat, stack
from ...core.tensor import as_compat

__all__ = ["pad_sequence", "pack_padded_sequence", "pad_packed_sequence", "pack_sequence"]


def pad_sequence(sequences, batch_first=False, padding_value=0.0, padding_side="right"):
    """Sequences ``(L_i, *)`` padded with ``padding_value`` to the longest one and stacked:
    ``(L, B, *)``, or ``(B, L, *)`` with ``batch_first``; differentiable in the sequences."""
    if padding_side not in ("right", "left"):
        raise ValueError(f"Expected padding_side to be one of left or right, but got {padding_side}.")
    sequences = list(sequences)
    if not sequences:
        raise RuntimeError("received an empty list of sequences")
    longest = max(s.shape[0] for s in sequences)
    padded = []
    for s in sequences:
        missing = longest - s.shape[0]
        if missing:
            pad = full((missing, *s.shape[1:]), padding_value, dtype=s.dtype, device=s.device)
            parts = [s, pad] if padding_side == "right" else [pad, s]
            s = cat(parts, dim=0)
        padded.append(s)
    return as_compat(stack(padded, dim=0 if batch_first else 1))


def _not_supported(name):
    def refuse(*args, **kwargs):
        raise NotImplementedError(f"torch.nn.utils.rnn.{name}: packed sequences are not supported by "
                                  "tinyattn.compat; pad with pad_sequence and pass the lengths as a mask")

    refuse.__name__ = name
    return refuse


pack_padded_sequence = _not_supported("pack_padded_sequence")
pad_packed_sequence = _not_supported("pad_packed_sequence")
pack_sequence = _not_supported("pack_sequence")
