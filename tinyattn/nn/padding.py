"""Floor 4: padding (``F.pad`` in its four modes, ``torch.constant_pad_nd``), composed from indexing and ``where``.

Every mode is one gather: along each padded dimension of size ``n``, the output's positions are
``-before, …, n - 1 + after`` of the input, each mapped back inside it — reflected about the edges
(``reflect``), clamped to them (``replicate``), taken modulo ``n`` (``circular``), or filled with ``value``
where it falls outside (``constant``). A negative ``before`` or ``after`` crops instead. The gradient of a gather
sums back into the positions read, so every mode is differentiable to any order.

>>> import tinyattn as ta
>>> import tinyattn.nn.functional as F
>>> F.pad(ta.tensor([[1.0, 2.0, 3.0]]), (2, 1), mode="reflect")
tensor([[3., 2., 1., 2., 3., 2.]])
"""

import numpy as np

from .. import backend, ops
from ..engine import Tensor

__all__ = ["pad", "constant_pad_nd"]

MODES = ("constant", "reflect", "replicate", "circular")


def _source_positions(size, before, after, mode):
    """The input positions (an int64 array) that the output's ``size + before + after`` positions read along one
    dimension, and a boolean array: where they fall outside the input (for ``constant``)."""
    positions = np.arange(-before, size + after)
    outside = (positions < 0) | (positions >= size)
    if mode == "reflect":
        period = 2 * (size - 1)
        positions = np.abs(positions) % period if period else np.zeros_like(positions)
        positions = np.where(positions >= size, period - positions, positions)
    elif mode == "circular":  # as PyTorch: the negative amounts crop first, the positive ones wrap the rest
        start, stop = max(-before, 0), size - max(-after, 0)
        positions = start + np.arange(-max(before, 0), stop - start + max(after, 0)) % (stop - start)
    else:  # replicate, and constant (whose outside positions are then replaced by the value)
        positions = np.clip(positions, 0, size - 1)
    return positions, outside


def pad(input, pad, mode="constant", value=None):
    """Pads the last ``len(pad) // 2`` dimensions: ``pad = (left, right)`` for the last, then ``(top, bottom)``
    for the one before, and so on; a negative amount crops.

    ``mode``: ``"constant"`` (fill with ``value``, default 0), ``"reflect"`` (mirror about the edge, the edge
    not repeated), ``"replicate"`` (repeat the edge) or ``"circular"`` (wrap around). Differentiable in ``input``.

    >>> import tinyattn as ta
    >>> import tinyattn.nn.functional as F
    >>> F.pad(ta.tensor([[1.0, 2.0]]), (1, 2))
    tensor([[0., 1., 2., 0., 0.]])
    >>> F.pad(ta.tensor([[1.0, 2.0]]), (1, -1), mode="replicate")
    tensor([[1., 1.]])
    """
    return padded(input, pad, mode, value)


def padded(input, pad, mode, value):
    """``pad``'s definition (a function of its own, as ``pad``'s argument of the same name hides it)."""
    if mode not in MODES:
        raise NotImplementedError(f"pad: mode must be one of {', '.join(MODES)}, got {mode!r}")
    pad = tuple(int(p) for p in pad)
    if len(pad) % 2 or len(pad) // 2 > input.ndim:
        raise ValueError(f"Padding length must be divisible by 2 and at most twice the input's dimensions "
                         f"({input.ndim}), got {len(pad)} (pad={pad})")
    if mode != "constant" and value not in (None, 0, 0.0):
        raise ValueError(f"pad: value is only used in constant mode, got value={value} with mode {mode!r}")
    output, xp = input, backend.namespace(input._data)
    fill = Tensor._wrap(xp.asarray(0 if value is None else value, dtype=input.dtype))  # (), in the input's dtype
    for i in range(len(pad) // 2):
        dim, before, after = input.ndim - 1 - i, pad[2 * i], pad[2 * i + 1]
        size = input.shape[dim]
        new_size = size + before + after
        if new_size < 0:
            raise ValueError(f"pad: the padding {(before, after)} of dimension {dim} (size {size}) leaves a "
                             f"negative size {new_size}")
        if mode == "reflect" and (before >= size or after >= size):
            raise ValueError(f"Argument #4: Padding size should be less than the corresponding input dimension, "
                             f"but got: padding ({before}, {after}) at dimension {dim} of input {input.shape}")
        if mode == "circular" and (before > size or after > size):
            raise ValueError("Padding value causes wrapping around more than once.")
        if size == 0 and new_size > 0:
            if mode != "constant":
                raise ValueError(f"pad: cannot pad an empty dimension {dim} in mode {mode!r}")
            shape = list(output.shape)
            shape[dim] = new_size
            empty_sum = output.sum(dim, keepdim=True)  # (…, 1, …): zeros, still in the graph (and batched in vmap)
            output = ops.expand(empty_sum, *shape) + fill
            continue
        positions, outside = _source_positions(size, before, after, mode)
        index = (slice(None),) * dim + (Tensor._wrap(xp.asarray(positions)),)
        output = output[index]  # (…, new_size, …): dimension dim gathered
        if mode == "constant" and outside.any():
            mask = Tensor._wrap(xp.asarray(outside).reshape((new_size,) + (1,) * (input.ndim - 1 - dim)))
            output = ops.where(mask, fill, output)
    return output if output is not input else input.reshape(input.shape)


def constant_pad_nd(input, pad, value=0):
    """``F.pad(input, pad, "constant", value)`` (``torch.constant_pad_nd``).

    >>> import tinyattn as ta
    >>> constant_pad_nd(ta.tensor([1.0]), (1, 0), 5.0)
    tensor([5., 1.])
    """
    return padded(input, pad, "constant", value)
