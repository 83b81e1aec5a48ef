"""Floor 4: pooling (max, average, adaptive; 1-D, 2-D and 3-D) and its layers, composed from the convolution's
window gather (``conv.windows``) and a reduction.

* ``max_pool``: the windows, padded with ``-inf``, reduced by ``max`` over the window (the gradient reaches the
  element picked, the first of a tie as in PyTorch);
* ``avg_pool``: the windows, padded with zeros, summed and divided by each window's count (all its positions with
  ``count_include_pad``, the input's alone without, or ``divisor_override``);
* ``adaptive_*_pool``: output cell ``i`` of ``O`` along a dimension of size ``S`` covers
  ``[⌊i·S/O⌋, ⌈(i+1)·S/O⌉)``; the windows are gathered at the longest such width, the positions past each
  cell's end marked as outside, so one gather serves cells of different widths.

>>> import tinyattn as ta
>>> import tinyattn.nn.functional as F
>>> F.max_pool1d(ta.tensor([[[1.0, 3.0, 2.0, 5.0, 4.0]]]), kernel_size=2)
tensor([[[3., 5.]]])
"""

import math
import numbers

import numpy as np

from .. import backend
from ..engine import Tensor
from ..ops import scatter
from ..ops_extra import max as _max_along
from .conv import as_tuple, window_positions, windows
from .module import Module

__all__ = ["max_pool1d", "max_pool2d", "max_pool3d", "avg_pool1d", "avg_pool2d", "avg_pool3d",
           "adaptive_max_pool1d", "adaptive_max_pool2d", "adaptive_max_pool3d",
           "adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_avg_pool3d", "lp_pool1d", "lp_pool2d", "lp_pool3d",
           "max_unpool1d", "max_unpool2d", "max_unpool3d"]


def _batched(name, input, d):
    """``input`` as ``(N, C, *S)`` and whether it came unbatched ``(C, *S)``."""
    if not isinstance(input, Tensor) or input.ndim not in (d + 1, d + 2):
        got = input.ndim if isinstance(input, Tensor) else type(input).__name__
        raise RuntimeError(f"{name}: expected a {d + 1}D (unbatched) or {d + 2}D (batched) input, got {got}D")
    return (input.unsqueeze(0), True) if input.ndim == d + 1 else (input, False)


def _pool_size(size, kernel_size, stride, padding, dilation, ceil_mode):
    """PyTorch's output size: ``⌊ or ⌈(S + 2·padding - dilation·(K - 1) - 1) / stride⌉ + 1``; with ``ceil_mode``
    the last window must start inside the input or its left padding."""
    span = size + 2 * padding - dilation * (kernel_size - 1) - 1
    out = (-(-span // stride) if ceil_mode else span // stride) + 1
    if ceil_mode and (out - 1) * stride >= size + padding:
        out -= 1
    return out


def _pool_positions(name, input, d, kernel_size, stride, padding, dilation, ceil_mode):
    """The checked arguments' window positions, one ``(O, K)`` array per spatial dimension."""
    kernel_size = as_tuple(name, "kernel_size", kernel_size, d)
    stride = kernel_size if stride is None or stride == [] or stride == () else as_tuple(name, "stride", stride, d)
    padding, dilation = as_tuple(name, "padding", padding, d), as_tuple(name, "dilation", dilation, d)
    if any(k <= 0 for k in kernel_size) or any(s <= 0 for s in stride) or any(dil <= 0 for dil in dilation):
        raise RuntimeError(f"{name}: kernel_size {kernel_size}, stride {stride} and dilation {dilation} must be "
                           "positive")
    for p, k in zip(padding, kernel_size):
        if not 0 <= p <= k // 2:
            raise RuntimeError(f"{name}: padding should be at most half of kernel size, but got padding={padding} "
                               f"and kernel_size={kernel_size}")
    out = [_pool_size(s, k, st, p, dil, ceil_mode)
           for s, k, st, p, dil in zip(input.shape[2:], kernel_size, stride, padding, dilation)]
    if any(o <= 0 for o in out):
        raise RuntimeError(f"{name}: the input's spatial sizes {tuple(input.shape[2:])} are too small for "
                           f"kernel_size={kernel_size}, padding={padding}, dilation={dilation}: output size {out}")
    positions = [window_positions(s, k, st, dil, p, o)
                 for s, k, st, dil, p, o in zip(input.shape[2:], kernel_size, stride, dilation, padding, out)]
    return positions, padding


def _flat_positions(positions, spatial):
    """Each window element's index into the flattened spatial input: ``(*O, ∏K)`` (PyTorch's pooling indices)."""
    d = len(positions)
    flat = np.zeros((1,) * (2 * d), dtype=np.int64)
    for i, pos in enumerate(positions):
        shape = [1] * (2 * d)
        shape[i], shape[d + i] = pos.shape
        flat = flat * spatial[i] + np.clip(pos, 0, spatial[i] - 1).reshape(shape)  # (*O, *K) once all are in
    return flat.reshape(*flat.shape[:d], -1)


def _max_over_windows(input, positions, return_indices, unbatched):
    """The largest element of each window (``-inf`` outside the input) and, if asked, its flat index."""
    N, C = input.shape[:2]
    out = [pos.shape[0] for pos in positions]
    cols = windows(input, positions, -math.inf).reshape(N, C, *out, -1)  # (N, C, *O, ∏K)
    values, picked = _max_along(cols, dim=-1)  # (N, C, *O)
    if unbatched:
        values = values.squeeze(0)
    if not return_indices:
        return values
    xp = backend.namespace(picked._data)
    picked = picked._data  # (N, C, *O), with vmap's batch axes in front inside vmap
    flat = xp.broadcast_to(xp.asarray(_flat_positions(positions, input.shape[2:])), (*picked.shape, cols.shape[-1]))
    indices = xp.take_along_axis(flat, picked[..., None], axis=-1)[..., 0]  # (N, C, *O)
    indices = Tensor._wrap(indices.astype(np.int64), input)
    return values, indices.squeeze(0) if unbatched else indices


def _max_pool(name, d, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices):
    input, unbatched = _batched(name, input, d)
    positions, _ = _pool_positions(name, input, d, kernel_size, stride, padding, dilation, ceil_mode)
    return _max_over_windows(input, positions, return_indices, unbatched)


def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    """The largest element of each window: ``(N, C, L) -> (N, C, L_out)``; ``stride`` defaults to
    ``kernel_size``, ``padding`` (at most half the window) pads with ``-inf``, ``ceil_mode`` rounds the output size
    up. ``return_indices=True`` also returns each maximum's position in the input (into ``L``).

    >>> import tinyattn as ta
    >>> import tinyattn.nn.functional as F
    >>> F.max_pool1d(ta.tensor([[[1.0, 3.0, 2.0, 5.0, 4.0]]]), 2, ceil_mode=True, return_indices=True)
    (tensor([[[3., 5., 4.]]]), tensor([[[1, 3, 4]]]))
    """
    return _max_pool("max_pool1d", 1, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices)


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    """``max_pool1d`` along the last two dimensions: ``(N, C, H, W) -> (N, C, H_out, W_out)``; the indices are into
    the flattened ``H·W``.

    >>> import tinyattn as ta
    >>> import tinyattn.nn.functional as F
    >>> F.max_pool2d(ta.arange(16.0).reshape(1, 1, 4, 4), kernel_size=2)
    tensor([[[[ 5.,  7.],
              [13., 15.]]]])
    """
    return _max_pool("max_pool2d", 2, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices)


def max_pool3d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    """``max_pool1d`` along the last three dimensions: ``(N, C, D, H, W) -> (N, C, D_out, H_out, W_out)``.

    >>> import tinyattn as ta
    >>> import tinyattn.nn.functional as F
    >>> F.max_pool3d(ta.arange(8.0).reshape(1, 1, 2, 2, 2), kernel_size=2)
    tensor([[[[[7.]]]]])
    """
    return _max_pool("max_pool3d", 3, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices)


def _avg_pool(name, d, input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override):
    input, unbatched = _batched(name, input, d)
    positions, padding = _pool_positions(name, input, d, kernel_size, stride, padding, 1, ceil_mode)
    sums = windows(input, positions, 0).sum(dim=tuple(range(2 + d, 2 + 2 * d)))  # (N, C, *O)
    if divisor_override:
        averages = sums / divisor_override
    else:
        counts = np.ones((), dtype=np.int64)
        for pos, size, p in zip(positions, input.shape[2:], padding):
            low, high = (-p, size + p) if count_include_pad else (0, size)
            count = ((pos >= low) & (pos < high)).sum(axis=1)  # (O_i,): the window's positions that count
            counts = np.multiply.outer(counts, count)  # (O₁, …, O_i)
        xp = backend.namespace(input._data)
        averages = sums / Tensor._wrap(xp.asarray(counts, dtype=input.dtype))
    return averages.squeeze(0) if unbatched else averages


def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
    """The mean of each window: ``(N, C, L) -> (N, C, L_out)``, sizes as ``max_pool1d``'s. The padding (zeros)
    counts in the mean with ``count_include_pad`` (positions past it, from ``ceil_mode``, never do).

    >>> import tinyattn as ta
    >>> import tinyattn.nn.functional as F
    >>> F.avg_pool1d(ta.tensor([[[1.0, 3.0, 2.0, 6.0]]]), kernel_size=2)
    tensor([[[2., 4.]]])
    """
    return _avg_pool("avg_pool1d", 1, input, kernel_size, stride, padding, ceil_mode, count_include_pad, None)


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    """``avg_pool1d`` along the last two dimensions; ``divisor_override`` divides every window's sum by itself.

    >>> import tinyattn as ta
    >>> import tinyattn.nn.functional as F
    >>> F.avg_pool2d(ta.arange(16.0).reshape(1, 1, 4, 4), kernel_size=2)
    tensor([[[[ 2.5,  4.5],
              [10.5, 12.5]]]])
    """
    return _avg_pool("avg_pool2d", 2, input, kernel_size, stride, padding, ceil_mode, count_include_pad,
                     divisor_override)


def avg_pool3d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    """``avg_pool1d`` along the last three dimensions.

    >>> import tinyattn as ta
    >>> import tinyattn.nn.functional as F
    >>> F.avg_pool3d(ta.arange(8.0).reshape(1, 1, 2, 2, 2), kernel_size=2)
    tensor([[[[[3.5]]]]])
    """
    return _avg_pool("avg_pool3d", 3, input, kernel_size, stride, padding, ceil_mode, count_include_pad,
                     divisor_override)


def _adaptive_positions(name, input, d, output_size):
    """The cells' positions, ``(O, K_max)`` per dimension, ``-1`` past each cell's end."""
    if isinstance(output_size, numbers.Integral) or output_size is None:
        output_size = (output_size,) * d
    output_size = tuple(output_size)
    if len(output_size) != d:
        raise ValueError(f"{name}: output_size must be an int or a tuple of {d}, got {output_size!r}")
    positions = []
    for size, out in zip(input.shape[2:], output_size):
        out = size if out is None else int(out)
        if out <= 0:
            raise RuntimeError(f"{name}: output_size must be positive, got {output_size!r}")
        start = np.arange(out) * size // out
        end = -(-(np.arange(1, out + 1) * size) // out)
        pos = start[:, None] + np.arange((end - start).max())[None, :]  # (O, K_max)
        positions.append(np.where(pos < end[:, None], pos, -1))
    return positions


def _adaptive_avg(name, d, input, output_size):
    input, unbatched = _batched(name, input, d)
    positions = _adaptive_positions(name, input, d, output_size)
    sums = windows(input, positions, 0).sum(dim=tuple(range(2 + d, 2 + 2 * d)))  # (N, C, *O)
    counts = np.ones((), dtype=np.int64)
    for pos in positions:
        counts = np.multiply.outer(counts, (pos >= 0).sum(axis=1))  # (O₁, …, O_i)
    averages = sums / Tensor._wrap(backend.namespace(input._data).asarray(counts, dtype=input.dtype))
    return averages.squeeze(0) if unbatched else averages


def adaptive_avg_pool1d(input, output_size):
    """The mean over ``output_size`` cells that tile the input (cell ``i`` covers ``[⌊i·L/O⌋, ⌈(i+1)·L/O⌉)``):
    ``(N, C, L) -> (N, C, output_size)``.

    >>> import tinyattn as ta
    >>> import tinyattn.nn.functional as F
    >>> F.adaptive_avg_pool1d(ta.tensor([[[1.0, 2.0, 3.0, 4.0, 5.0]]]), 2)
    tensor([[[2., 4.]]])
    """
    return _adaptive_avg("adaptive_avg_pool1d", 1, input, output_size)


def adaptive_avg_pool2d(input, output_size):
    """``adaptive_avg_pool1d`` along the last two dimensions: ``(N, C, H, W) -> (N, C, *output_size)``
    (``None`` in ``output_size`` keeps that size); ``output_size=1`` is global average pooling.

    >>> import tinyattn as ta
    >>> import tinyattn.nn.functional as F
    >>> F.adaptive_avg_pool2d(ta.arange(16.0).reshape(1, 1, 4, 4), 1)
    tensor([[[[7.5]]]])
    """
    return _adaptive_avg("adaptive_avg_pool2d", 2, input, output_size)


def adaptive_avg_pool3d(input, output_size):
    """``adaptive_avg_pool1d`` along the last three dimensions.

    >>> import tinyattn as ta
    >>> import tinyattn.nn.functional as F
    >>> F.adaptive_avg_pool3d(ta.ones(1, 2, 3, 4, 5), (1, 2, 2)).shape
    (1, 2, 1, 2, 2)
    """
    return _adaptive_avg("adaptive_avg_pool3d", 3, input, output_size)


def _adaptive_max(name, d, input, output_size, return_indices):
    input, unbatched = _batched(name, input, d)
    return _max_over_windows(input, _adaptive_positions(name, input, d, output_size), return_indices, unbatched)


def adaptive_max_pool1d(input, output_size, return_indices=False):
    """The largest element of each of ``output_size`` cells that tile the input (as ``adaptive_avg_pool1d``'s);
    ``return_indices`` as ``max_pool1d``'s.

    >>> import tinyattn as ta
    >>> import tinyattn.nn.functional as F
    >>> F.adaptive_max_pool1d(ta.tensor([[[1.0, 5.0, 3.0, 4.0, 2.0]]]), 2)
    tensor([[[5., 4.]]])
    """
    return _adaptive_max("adaptive_max_pool1d", 1, input, output_size, return_indices)


def adaptive_max_pool2d(input, output_size, return_indices=False):
    """``adaptive_max_pool1d`` along the last two dimensions.

    >>> import tinyattn as ta
    >>> import tinyattn.nn.functional as F
    >>> F.adaptive_max_pool2d(ta.arange(16.0).reshape(1, 1, 4, 4), (1, 2))
    tensor([[[[13., 15.]]]])
    """
    return _adaptive_max("adaptive_max_pool2d", 2, input, output_size, return_indices)


def adaptive_max_pool3d(input, output_size, return_indices=False):
    """``adaptive_max_pool1d`` along the last three dimensions.

    >>> import tinyattn as ta
    >>> import tinyattn.nn.functional as F
    >>> F.adaptive_max_pool3d(ta.arange(8.0).reshape(1, 1, 2, 2, 2), 1)
    tensor([[[[[7.]]]]])
    """
    return _adaptive_max("adaptive_max_pool3d", 3, input, output_size, return_indices)


def _lp_pool(name, d, input, norm_type, kernel_size, stride, ceil_mode):
    kernel_size = as_tuple(name, "kernel_size", kernel_size, d)
    means = _avg_pool(name, d, input ** norm_type, kernel_size, stride, 0, ceil_mode, True, None)
    return (means * math.prod(kernel_size)) ** (1.0 / norm_type)  # PyTorch's: the mean times the window's size


def lp_pool1d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """The ``p``-norm of each window, ``(Σ xᵖ)^(1/p)`` with ``p = norm_type``: ``(N, C, L) -> (N, C, L_out)``, sizes
    as ``avg_pool1d``'s (PyTorch's: the window's mean of ``xᵖ`` times its size, so a ``ceil_mode`` window past the
    end counts as full).

    >>> import tinyattn as ta
    >>> import tinyattn.nn.functional as F
    >>> F.lp_pool1d(ta.tensor([[[3.0, 4.0, 6.0, 8.0]]]), norm_type=2, kernel_size=2)
    tensor([[[ 5., 10.]]])
    """
    return _lp_pool("lp_pool1d", 1, input, norm_type, kernel_size, stride, ceil_mode)


def lp_pool2d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """``lp_pool1d`` along the last two dimensions.

    >>> import tinyattn as ta
    >>> import tinyattn.nn.functional as F
    >>> F.lp_pool2d(ta.ones(1, 1, 4, 4), norm_type=1, kernel_size=2)
    tensor([[[[4., 4.],
              [4., 4.]]]])
    """
    return _lp_pool("lp_pool2d", 2, input, norm_type, kernel_size, stride, ceil_mode)


def lp_pool3d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """``lp_pool1d`` along the last three dimensions.

    >>> import tinyattn as ta
    >>> import tinyattn.nn.functional as F
    >>> F.lp_pool3d(ta.ones(1, 1, 2, 2, 2), norm_type=1, kernel_size=2)
    tensor([[[[[8.]]]]])
    """
    return _lp_pool("lp_pool3d", 3, input, norm_type, kernel_size, stride, ceil_mode)


def _max_unpool(name, d, input, indices, kernel_size, stride, padding, output_size):
    """Each value of ``input`` ``(N, C, *S)`` put at its flat ``indices`` in zeros ``(N, C, *output_size)``."""
    if not isinstance(indices, Tensor) or tuple(indices.shape) != tuple(getattr(input, "shape", ())):
        raise RuntimeError(f"{name}: expected indices of the input's shape {tuple(getattr(input, 'shape', ()))}, "
                           f"got {tuple(getattr(indices, 'shape', ()))}")
    input, unbatched = _batched(name, input, d)
    kernel_size = as_tuple(name, "kernel_size", kernel_size, d)
    stride = kernel_size if stride is None else as_tuple(name, "stride", stride, d)
    padding = as_tuple(name, "padding", padding, d)
    if output_size is None:
        output_size = [(s - 1) * st - 2 * p + k for s, st, p, k in zip(input.shape[2:], stride, padding, kernel_size)]
    output_size = tuple(int(s) for s in tuple(output_size)[-d:])
    N, C, size = input.shape[0], input.shape[1], math.prod(output_size)
    flat = backend.to_numpy(indices._data).reshape(N, C, -1)  # (N, C, ∏S)
    if flat.size and (flat.min() < 0 or flat.max() >= size):
        raise RuntimeError(f"{name}: found an index out of range for the output size {output_size}: "
                           f"{int(flat.min())} to {int(flat.max())}")
    n, c = np.indices(flat.shape[:2])[..., None]  # (N, C, 1) each
    first = np.zeros(flat.shape, dtype=bool)  # the first element of each group that shares an index
    order = np.argsort(flat, axis=-1, kind="stable")
    ordered = np.take_along_axis(flat, order, axis=-1)
    np.put_along_axis(first, order, np.concatenate([np.ones_like(ordered[..., :1], dtype=bool),
                                                    ordered[..., 1:] != ordered[..., :-1]], axis=-1), axis=-1)
    xp = backend.namespace(input._data)
    index = (xp.asarray(np.broadcast_to(n, flat.shape)), xp.asarray(np.broadcast_to(c, flat.shape)), xp.asarray(flat))
    values = input.reshape(N, C, -1)  # (N, C, ∏S)
    output = scatter(values, (N, C, size), index)  # (N, C, ∏output_size)
    if not first.all():  # overlapping windows repeat an index: torch writes one value there, yet sends the
        repeats = values.detach() * Tensor._wrap(xp.asarray(~first, dtype=input.dtype))  # gradient to every one
        output = output - scatter(repeats, (N, C, size), index)
    output = output.reshape(N, C, *output_size)  # (N, C, *output_size)
    return output.squeeze(0) if unbatched else output


def max_unpool1d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """``max_pool1d``'s partial inverse: every value put back at its index (``max_pool1d(…, return_indices=True)``'s),
    zeros elsewhere: ``(N, C, L) -> (N, C, L_out)``, ``L_out = (L - 1)·stride - 2·padding + kernel_size`` unless
    ``output_size`` says otherwise.

    >>> import tinyattn as ta
    >>> import tinyattn.nn.functional as F
    >>> values, indices = F.max_pool1d(ta.tensor([[[1.0, 3.0, 2.0, 5.0]]]), 2, return_indices=True)
    >>> F.max_unpool1d(values, indices, 2)
    tensor([[[0., 3., 0., 5.]]])
    """
    return _max_unpool("max_unpool1d", 1, input, indices, kernel_size, stride, padding, output_size)


def max_unpool2d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """``max_unpool1d`` along the last two dimensions (the indices into the flattened ``H_out·W_out``).

    >>> import tinyattn as ta
    >>> import tinyattn.nn.functional as F
    >>> values, indices = F.max_pool2d(ta.arange(16.0).reshape(1, 1, 4, 4), 2, return_indices=True)
    >>> F.max_unpool2d(values, indices, 2)[0, 0, 1]
    tensor([0., 5., 0., 7.])
    """
    return _max_unpool("max_unpool2d", 2, input, indices, kernel_size, stride, padding, output_size)


def max_unpool3d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """``max_unpool1d`` along the last three dimensions.

    >>> import tinyattn as ta
    >>> import tinyattn.nn.functional as F
    >>> values, indices = F.max_pool3d(ta.arange(8.0).reshape(1, 1, 2, 2, 2), 2, return_indices=True)
    >>> F.max_unpool3d(values, indices, 2).sum().item()
    7.0
    """
    return _max_unpool("max_unpool3d", 3, input, indices, kernel_size, stride, padding, output_size)


# ----------------------------------------------------------------------------- the layers


class _MaxPoolNd(Module):
    dims = 1

    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, return_indices=False, ceil_mode=False):
        super().__init__()
        self.kernel_size, self.stride = kernel_size, kernel_size if stride is None else stride
        self.padding, self.dilation = padding, dilation
        self.return_indices, self.ceil_mode = return_indices, ceil_mode

    def forward(self, input):
        pool = (max_pool1d, max_pool2d, max_pool3d)[self.dims - 1]
        return pool(input, self.kernel_size, self.stride, self.padding, self.dilation, self.ceil_mode,
                    self.return_indices)

    def extra_repr(self):
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"dilation={self.dilation}, ceil_mode={self.ceil_mode}")


class MaxPool1d(_MaxPoolNd):
    """``F.max_pool1d`` as a module: ``MaxPool1d(kernel_size, stride=None, padding=0, dilation=1,
    return_indices=False, ceil_mode=False)``.

    >>> import tinyattn as ta
    >>> MaxPool1d(2)(ta.randn(2, 3, 8)).shape
    (2, 3, 4)
    """

    dims = 1


class MaxPool2d(_MaxPoolNd):
    """``F.max_pool2d`` as a module.

    >>> import tinyattn as ta
    >>> MaxPool2d(2)
    MaxPool2d(kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=False)
    >>> MaxPool2d(2)(ta.randn(1, 3, 8, 8)).shape
    (1, 3, 4, 4)
    """

    dims = 2


class MaxPool3d(_MaxPoolNd):
    """``F.max_pool3d`` as a module.

    >>> import tinyattn as ta
    >>> MaxPool3d(2)(ta.randn(1, 1, 4, 4, 4)).shape
    (1, 1, 2, 2, 2)
    """

    dims = 3


class _AvgPoolNd(Module):
    dims = 1

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
                 divisor_override=None):
        super().__init__()
        self.kernel_size, self.stride = kernel_size, kernel_size if stride is None else stride
        self.padding, self.ceil_mode, self.count_include_pad = padding, ceil_mode, count_include_pad
        self.divisor_override = divisor_override

    def forward(self, input):
        if self.dims == 1:
            return avg_pool1d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                              self.count_include_pad)
        pool = (avg_pool2d, avg_pool3d)[self.dims - 2]
        return pool(input, self.kernel_size, self.stride, self.padding, self.ceil_mode, self.count_include_pad,
                    self.divisor_override)

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AvgPool1d(_AvgPoolNd):
    """``F.avg_pool1d`` as a module: ``AvgPool1d(kernel_size, stride=None, padding=0, ceil_mode=False,
    count_include_pad=True)``.

    >>> import tinyattn as ta
    >>> AvgPool1d(2)(ta.randn(2, 3, 8)).shape
    (2, 3, 4)
    """

    dims = 1

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
        stride = kernel_size if stride is None else stride
        super().__init__(*(as_tuple("AvgPool1d", name, value, 1) for name, value in
                           (("kernel_size", kernel_size), ("stride", stride), ("padding", padding))),
                         ceil_mode, count_include_pad)  # tuples of one, as PyTorch keeps them


class AvgPool2d(_AvgPoolNd):
    """``F.avg_pool2d`` as a module: ``AvgPool2d(kernel_size, stride=None, padding=0, ceil_mode=False,
    count_include_pad=True, divisor_override=None)``.

    >>> import tinyattn as ta
    >>> AvgPool2d(2)(ta.randn(1, 3, 8, 8)).shape
    (1, 3, 4, 4)
    """

    dims = 2


class AvgPool3d(_AvgPoolNd):
    """``F.avg_pool3d`` as a module.

    >>> import tinyattn as ta
    >>> AvgPool3d(2)(ta.randn(1, 1, 4, 4, 4)).shape
    (1, 1, 2, 2, 2)
    """

    dims = 3


class _AdaptivePoolNd(Module):
    dims, maximum = 1, False

    def __init__(self, output_size, return_indices=False):
        super().__init__()
        self.output_size, self.return_indices = output_size, return_indices

    def forward(self, input):
        if self.maximum:
            pool = (adaptive_max_pool1d, adaptive_max_pool2d, adaptive_max_pool3d)[self.dims - 1]
            return pool(input, self.output_size, self.return_indices)
        return (adaptive_avg_pool1d, adaptive_avg_pool2d, adaptive_avg_pool3d)[self.dims - 1](input, self.output_size)

    def extra_repr(self):
        return f"output_size={self.output_size}"


class AdaptiveAvgPool1d(_AdaptivePoolNd):
    """``F.adaptive_avg_pool1d`` as a module: ``AdaptiveAvgPool1d(output_size)``.

    >>> import tinyattn as ta
    >>> AdaptiveAvgPool1d(3)(ta.randn(2, 4, 10)).shape
    (2, 4, 3)
    """

    dims = 1

    def __init__(self, output_size):
        super().__init__(output_size)


class AdaptiveAvgPool2d(_AdaptivePoolNd):
    """``F.adaptive_avg_pool2d`` as a module: ``AdaptiveAvgPool2d(output_size)``.

    >>> import tinyattn as ta
    >>> AdaptiveAvgPool2d((1, 1))(ta.randn(2, 4, 7, 7)).shape
    (2, 4, 1, 1)
    """

    dims = 2

    def __init__(self, output_size):
        super().__init__(output_size)


class AdaptiveAvgPool3d(_AdaptivePoolNd):
    """``F.adaptive_avg_pool3d`` as a module: ``AdaptiveAvgPool3d(output_size)``.

    >>> import tinyattn as ta
    >>> AdaptiveAvgPool3d(1)(ta.randn(1, 2, 3, 3, 3)).shape
    (1, 2, 1, 1, 1)
    """

    dims = 3

    def __init__(self, output_size):
        super().__init__(output_size)


class AdaptiveMaxPool1d(_AdaptivePoolNd):
    """``F.adaptive_max_pool1d`` as a module: ``AdaptiveMaxPool1d(output_size, return_indices=False)``.

    >>> import tinyattn as ta
    >>> AdaptiveMaxPool1d(3)(ta.randn(2, 4, 10)).shape
    (2, 4, 3)
    """

    dims, maximum = 1, True


class AdaptiveMaxPool2d(_AdaptivePoolNd):
    """``F.adaptive_max_pool2d`` as a module: ``AdaptiveMaxPool2d(output_size, return_indices=False)``.

    >>> import tinyattn as ta
    >>> AdaptiveMaxPool2d(2)(ta.randn(1, 3, 5, 5)).shape
    (1, 3, 2, 2)
    """

    dims, maximum = 2, True


class AdaptiveMaxPool3d(_AdaptivePoolNd):
    """``F.adaptive_max_pool3d`` as a module: ``AdaptiveMaxPool3d(output_size, return_indices=False)``.

    >>> import tinyattn as ta
    >>> AdaptiveMaxPool3d(1)(ta.randn(1, 2, 3, 3, 3)).shape
    (1, 2, 1, 1, 1)
    """

    dims, maximum = 3, True


class _LPPoolNd(Module):
    dims = 1

    def __init__(self, norm_type, kernel_size, stride=None, ceil_mode=False):
        super().__init__()
        self.norm_type, self.kernel_size, self.stride, self.ceil_mode = norm_type, kernel_size, stride, ceil_mode

    def forward(self, input):
        pool = (lp_pool1d, lp_pool2d, lp_pool3d)[self.dims - 1]
        return pool(input, float(self.norm_type), self.kernel_size, self.stride, self.ceil_mode)

    def extra_repr(self):
        return f"norm_type={self.norm_type}, kernel_size={self.kernel_size}, stride={self.stride}, " \
               f"ceil_mode={self.ceil_mode}"


class LPPool1d(_LPPoolNd):
    """``F.lp_pool1d`` as a module: ``LPPool1d(norm_type, kernel_size, stride=None, ceil_mode=False)``.

    >>> import tinyattn as ta
    >>> LPPool1d(2, 3)(ta.randn(2, 4, 9)).shape
    (2, 4, 3)
    """

    dims = 1


class LPPool2d(_LPPoolNd):
    """``F.lp_pool2d`` as a module.

    >>> import tinyattn as ta
    >>> LPPool2d(2, 2)(ta.randn(1, 3, 4, 4)).shape
    (1, 3, 2, 2)
    """

    dims = 2


class LPPool3d(_LPPoolNd):
    """``F.lp_pool3d`` as a module.

    >>> import tinyattn as ta
    >>> LPPool3d(1, 2)(ta.randn(1, 1, 2, 2, 2)).shape
    (1, 1, 1, 1, 1)
    """

    dims = 3


class _MaxUnpoolNd(Module):
    dims = 1

    def __init__(self, kernel_size, stride=None, padding=0):
        super().__init__()
        d = self.dims
        name = type(self).__name__
        self.kernel_size = as_tuple(name, "kernel_size", kernel_size, d)
        self.stride = as_tuple(name, "stride", kernel_size if stride is None else stride, d)
        self.padding = as_tuple(name, "padding", padding, d)

    def forward(self, input, indices, output_size=None):
        unpool = (max_unpool1d, max_unpool2d, max_unpool3d)[self.dims - 1]
        return unpool(input, indices, self.kernel_size, self.stride, self.padding, output_size)

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class MaxUnpool1d(_MaxUnpoolNd):
    """``F.max_unpool1d`` as a module: ``MaxUnpool1d(kernel_size, stride=None, padding=0)``;
    ``forward(input, indices, output_size=None)``.

    >>> import tinyattn as ta
    >>> values, indices = MaxPool1d(2, return_indices=True)(ta.randn(1, 2, 6))
    >>> MaxUnpool1d(2)(values, indices).shape
    (1, 2, 6)
    """

    dims = 1


class MaxUnpool2d(_MaxUnpoolNd):
    """``F.max_unpool2d`` as a module.

    >>> import tinyattn as ta
    >>> values, indices = MaxPool2d(2, return_indices=True)(ta.randn(1, 2, 4, 4))
    >>> MaxUnpool2d(2)(values, indices).shape
    (1, 2, 4, 4)
    """

    dims = 2


class MaxUnpool3d(_MaxUnpoolNd):
    """``F.max_unpool3d`` as a module.

    >>> import tinyattn as ta
    >>> values, indices = MaxPool3d(2, return_indices=True)(ta.randn(1, 1, 2, 2, 2))
    >>> MaxUnpool3d(2)(values, indices).shape
    (1, 1, 2, 2, 2)
    """

    dims = 3
