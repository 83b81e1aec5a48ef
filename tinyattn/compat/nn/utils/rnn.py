"""``torch.nn.utils.rnn``: padding sequences, and packed sequences as torch keeps them.

A ``PackedSequence`` holds a batch of sequences of different lengths without padding: the sequences are sorted
by length, longest first (``sorted_indices``), and ``data`` lists their elements time step by time step — the
``batch_sizes[t]`` sequences still running at step ``t``, in sorted order. So ``data[:batch_sizes[0]]`` is every
sequence's first element, and a recurrent layer that reads step ``t`` updates only the first ``batch_sizes[t]``
rows of its state. Packing and unpacking are one integer-array gather and its scatter, differentiable in the data.

>>> import tinyattn.compat as torch
>>> from tinyattn.compat.nn.utils.rnn import pack_sequence, pad_packed_sequence, pad_sequence
>>> pad_sequence([torch.tensor([1, 2, 3]), torch.tensor([4])], padding_value=0)
tensor([[1, 4],
        [2, 0],
        [3, 0]])
>>> packed = pack_sequence([torch.tensor([4.0]), torch.tensor([1.0, 2.0, 3.0])], enforce_sorted=False)
>>> packed.data, packed.batch_sizes, packed.sorted_indices
(tensor([1., 4., 2., 3.]), tensor([2, 1, 1]), tensor([1, 0]))
>>> pad_packed_sequence(packed, batch_first=True)
(tensor([[4., 0., 0.],
        [1., 2., 3.]]), tensor([1, 3]))
"""

import collections

import numpy as np

from .... import backend
from ....creation import full, tensor
from ....engine import Tensor as _NativeTensor
from ....ops import cat, scatter, stack, where
from ...core.tensor import as_compat

__all__ = ["PackedSequence", "invert_permutation", "pack_padded_sequence", "pad_packed_sequence", "pack_sequence",
           "unpack_sequence", "pad_sequence", "unpad_sequence"]


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


def unpad_sequence(padded_sequences, lengths, batch_first=False):
    """``pad_sequence`` undone: the list of the ``B`` sequences ``(lengths[i], *)`` of a padded batch."""
    padded = padded_sequences if batch_first else padded_sequences.transpose(0, 1)  # (B, L, *)
    return [padded[i, :int(length)] for i, length in enumerate(_int_list(lengths))]


def invert_permutation(permutation):
    """The permutation that undoes ``permutation`` (a 1-D int64 tensor): ``inverse[permutation[i]] = i``."""
    if permutation is None:
        return None
    order = np.asarray(backend.to_numpy(permutation._data))
    inverse = np.empty_like(order)
    inverse[order] = np.arange(order.size)
    return as_compat(tensor(inverse, device=permutation.device))


def _int_list(values):
    if isinstance(values, _NativeTensor):
        return [int(v) for v in backend.to_numpy(values._data).reshape(-1)]
    return [int(v) for v in np.asarray(values).reshape(-1)]


class PackedSequence(collections.namedtuple("PackedSequence", ["data", "batch_sizes", "sorted_indices",
                                                                 "unsorted_indices"])):
    """torch's packed batch: ``data`` ``(Σ lengths, *)``, ``batch_sizes`` (an int64 CPU tensor: how many
    sequences run at each step), ``sorted_indices`` (the batch's order by decreasing length, or ``None`` when the
    batch came sorted) and ``unsorted_indices`` (its inverse). Build one with ``pack_padded_sequence`` or
    ``pack_sequence``, not by hand."""

    __slots__ = ()

    def __new__(cls, data, batch_sizes=None, sorted_indices=None, unsorted_indices=None):
        if batch_sizes is None:  # torch's older form: PackedSequence((data, batch_sizes))
            data, batch_sizes = data
        if unsorted_indices is None:
            unsorted_indices = invert_permutation(sorted_indices)
        return super().__new__(cls, data, batch_sizes, sorted_indices, unsorted_indices)

    def to(self, *args, **kwargs):
        """``data`` moved or cast as ``Tensor.to`` would; the indices follow ``data``'s device, ``batch_sizes``
        stays on the CPU."""
        data = self.data.to(*args, **kwargs)
        if data is self.data:
            return self
        move = (lambda t: None if t is None else t.to(data.device))
        return type(self)(data, self.batch_sizes, move(self.sorted_indices), move(self.unsorted_indices))

    def cpu(self):
        return self.to("cpu")

    def cuda(self, device=None):
        return self.to("cuda")

    def double(self):
        return self.to(np.float64)

    def float(self):
        return self.to(np.float32)

    def long(self):
        return self.to(np.int64)

    @property
    def is_cuda(self):
        return self.data.device == "cuda"

    def is_pinned(self):
        return False


def _steps(batch_sizes):
    """The (time, sorted batch slot) of each element of the packed data, as two int arrays ``(Σ lengths,)``."""
    sizes = _int_list(batch_sizes)
    times = np.repeat(np.arange(len(sizes)), sizes)
    slots = np.concatenate([np.arange(size) for size in sizes]) if sizes else np.zeros(0, dtype=np.int64)
    return times, slots


def pack_padded_sequence(input, lengths, batch_first=False, enforce_sorted=True):
    """A padded batch ``(T, B, *)`` (``(B, T, *)`` with ``batch_first``) of sequences of ``lengths`` as a
    ``PackedSequence``. With ``enforce_sorted`` the lengths must already decrease (``sorted_indices`` is then
    ``None``); without, the batch is sorted here and the order kept to undo it."""
    lengths = np.asarray(_int_list(lengths), dtype=np.int64)
    if input.ndim < 2:
        raise ValueError(f"pack_padded_sequence: expected a padded batch of at least 2 dimensions, got {input.ndim}D")
    if lengths.size != input.shape[0 if batch_first else 1]:
        raise ValueError(f"Expected `len(lengths)` to be equal to batch_size, but got {lengths.size} (batch_size="
                         f"{input.shape[0 if batch_first else 1]})")
    if (lengths <= 0).any():
        raise RuntimeError("Length of all samples has to be greater than 0, but found an element in 'lengths' that "
                           "is <= 0")
    if enforce_sorted:
        if (np.diff(lengths) > 0).any():
            raise RuntimeError("`lengths` array must be sorted in decreasing order when `enforce_sorted` is True. "
                               "You can pass `enforce_sorted=False` to pack_padded_sequence and/or pack_sequence to "
                               "sidestep this requirement if you do not need ONNX exportability.")
        order, sorted_indices = np.arange(lengths.size), None
    else:
        order = np.argsort(-lengths, kind="stable")  # longest first, ties in batch order (as torch's sort)
        sorted_indices = as_compat(tensor(order, device=input.device))
    longest = int(lengths.max())
    if longest > input.shape[1 if batch_first else 0]:
        raise RuntimeError(f"pack_padded_sequence: a length of {longest} is longer than the padded batch's "
                           f"{input.shape[1 if batch_first else 0]} steps")
    batch_sizes = (lengths[None, :] > np.arange(longest)[:, None]).sum(axis=1)  # (T,)
    times, slots = _steps(batch_sizes)
    xp = backend.namespace(input._data)
    index = (xp.asarray(order[slots]), xp.asarray(times)) if batch_first else (xp.asarray(times),
                                                                               xp.asarray(order[slots]))
    data = as_compat(input[index])  # (Σ lengths, *)
    return PackedSequence(data, as_compat(tensor(batch_sizes)), sorted_indices)


def pad_packed_sequence(sequence, batch_first=False, padding_value=0.0, total_length=None):
    """``pack_padded_sequence`` undone: ``(padded, lengths)``, the batch in its original order, padded with
    ``padding_value`` to the longest sequence (or to ``total_length`` steps), ``lengths`` an int64 tensor."""
    data, batch_sizes, sorted_indices, unsorted_indices = sequence
    sizes = _int_list(batch_sizes)
    steps = len(sizes)
    if total_length is not None:
        if total_length < steps:
            raise ValueError(f"Expected total_length to be at least the length of the longest sequence in input, "
                             f"but got total_length={total_length} and max sequence length being {steps}")
        steps = total_length
    B = sizes[0]
    order = np.arange(B) if sorted_indices is None else np.asarray(_int_list(sorted_indices))
    times, slots = _steps(sizes)
    xp = backend.namespace(data._data)
    rows, columns = (order[slots], times) if batch_first else (times, order[slots])
    index = (xp.asarray(rows), xp.asarray(columns))
    shape = (B, steps) if batch_first else (steps, B)
    padded = scatter(data, (*shape, *data.shape[1:]), index)  # (T, B, *) or (B, T, *); zeros elsewhere
    if padding_value:
        filled = np.zeros(shape, dtype=bool)
        filled[rows, columns] = True
        filled = _NativeTensor._wrap(xp.asarray(filled.reshape(*shape, *(1,) * (data.ndim - 1))))
        padded = where(filled, padded, padding_value)
    sorted_lengths = (np.asarray(sizes)[None, :] > np.arange(B)[:, None]).sum(axis=1)  # (B,), longest first
    lengths = np.empty(B, dtype=np.int64)
    lengths[order] = sorted_lengths
    return as_compat(padded), as_compat(tensor(lengths))


def pack_sequence(sequences, enforce_sorted=True):
    """A list of sequences ``(L_i, *)`` as a ``PackedSequence`` (``pad_sequence``, then ``pack_padded_sequence``)."""
    lengths = [s.shape[0] for s in sequences]
    return pack_padded_sequence(pad_sequence(sequences), lengths, enforce_sorted=enforce_sorted)


def unpack_sequence(packed_sequences):
    """``pack_sequence`` undone: the list of the sequences, in their original order."""
    padded, lengths = pad_packed_sequence(packed_sequences, batch_first=True)
    return unpad_sequence(padded, lengths, batch_first=True)
