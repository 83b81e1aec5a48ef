"""Floor 4: resizing the positions of ``(N, C, …)`` (``interpolate`` and its older names), composed from gathers and
arithmetic.

Every mode is separable: the output is resized one spatial dimension at a time. Along a dimension of size ``n``
resized to ``m``, each output position ``j`` reads the input at a source coordinate ``s(j)``, as PyTorch computes
it: ``scale = n / m`` (or ``1 / scale_factor`` where one is given), ``s = scale · j`` (``nearest``), ``scale ·
(j + ½)`` (``nearest-exact``), ``scale · (j + ½) - ½`` (``linear`` and ``cubic``; with ``align_corners``,
``s = j · (n - 1) / (m - 1)`` instead). ``nearest`` reads the position ``⌊s⌋``; ``linear`` mixes the two around
``s``, ``(1 - t) · x[i] + t · x[i + 1]``; ``cubic`` the four around it with Keys' cubic-convolution weights
(``A = -0.75``). The gradient of a gather sums back into the positions read, so every mode is differentiable to
any order.

>>> import tinyattn as ta
>>> import tinyattn.nn.functional as F
>>> F.interpolate(ta.tensor([[[0.0, 1.0]]]), scale_factor=2, mode="linear")
tensor([[[0.  , 0.25, 0.75, 1.  ]]])
"""

import math
import numbers

import numpy as np

from .. import backend
from ..engine import Tensor

__all__ = ["interpolate", "upsample", "upsample_nearest", "upsample_bilinear"]

# mode -> the number of spatial dimensions it takes (None: any)
MODES = {"nearest": None, "nearest-exact": None, "linear": 1, "bilinear": 2, "bicubic": 2, "trilinear": 3}
CUBIC_A = -0.75


def _per_dim(name, value, spatial):
    """``value`` (one number or one per spatial dimension) as a tuple of ``spatial`` entries."""
    if isinstance(value, (tuple, list)):
        if len(value) != spatial:
            raise ValueError(f"Input and {name} must have the same number of spatial dimensions, but got input with "
                             f"spatial dimensions of {spatial} and {name} of {tuple(value)}.")
        return tuple(value)
    return (value,) * spatial


def _output_sizes(input, size, scale_factor, recompute_scale_factor):
    """The output's spatial sizes, and the scales (``None``: ``n / m``) the source coordinates use."""
    spatial = input.ndim - 2
    if (size is None) == (scale_factor is None):
        raise ValueError("only one of size or scale_factor should be defined")
    if size is not None:
        if recompute_scale_factor:
            raise ValueError("recompute_scale_factor is not meaningful with an explicit size.")
        return tuple(int(s) for s in _per_dim("size", size, spatial)), (None,) * spatial
    factors = tuple(float(f) for f in _per_dim("scale_factor", scale_factor, spatial))
    sizes = tuple(int(math.floor(n * f)) for n, f in zip(input.shape[2:], factors))
    return sizes, (None,) * spatial if recompute_scale_factor else factors


def _source(n, m, factor, align_corners, mode):
    """The source coordinates ``s(j)`` (float64) of the ``m`` output positions along a dimension of size ``n``."""
    j = np.arange(m, dtype=np.float64)
    if mode in ("nearest", "nearest-exact"):  # (PyTorch holds this scale in float32, and so ⌊s⌋ is its)
        scale = np.float32(1.0 / factor if factor else n / m)
        return (j + 0.5) * np.float64(scale) if mode == "nearest-exact" else j.astype(np.float32) * scale
    if align_corners:
        return j * ((n - 1) / (m - 1) if m > 1 else 0.0)
    scale = 1.0 / factor if factor else n / m
    s = scale * (j + 0.5) - 0.5
    return s if mode == "bicubic" else np.maximum(s, 0.0)  # (linear clamps at the first position; cubic does not)


def _cubic_weights(t):
    """Keys' cubic-convolution weights of the four taps at ``i - 1, i, i + 1, i + 2`` for ``s = i + t``."""
    a = CUBIC_A

    def near(x):  # |x| ≤ 1
        return ((a + 2) * x - (a + 3)) * x * x + 1

    def far(x):  # 1 < |x| < 2
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a

    return [far(t + 1), near(t), near(1 - t), far(2 - t)]


def _resize_dim(x, dim, m, factor, align_corners, mode):
    """``x`` resized along ``dim`` to ``m`` positions: gathers at the source positions, mixed by their weights."""
    n = x.shape[dim]
    xp = backend.namespace(x._data)
    s = _source(n, m, factor, align_corners, mode)
    taps = []  # [(positions, weights or None)]
    if mode in ("nearest", "nearest-exact"):
        taps.append((np.minimum(np.floor(s), n - 1).astype(np.int64), None))
    elif mode == "bicubic":
        i = np.floor(s)
        taps = [(np.clip(i + k, 0, n - 1).astype(np.int64), w) for k, w in zip((-1, 0, 1, 2), _cubic_weights(s - i))]
    else:  # linear along this dimension
        i = np.floor(s).astype(np.int64)
        t = s - i
        taps = [(i, 1 - t), (np.minimum(i + 1, n - 1), t)]
    output = None
    for positions, weights in taps:
        index = (slice(None),) * dim + (Tensor._wrap(xp.asarray(positions)),)
        term = x[index]  # (…, m, …): dimension dim gathered
        if weights is not None:
            shape = (m,) + (1,) * (x.ndim - 1 - dim)
            term = term * Tensor._wrap(xp.asarray(weights.reshape(shape), dtype=x.dtype))
        output = term if output is None else output + term
    return output


def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None, recompute_scale_factor=None,
                antialias=False):
    """``input (N, C, d₁, …)`` resized to ``size`` (or ``⌊d · scale_factor⌋``) along its spatial dimensions:
    ``mode`` ``"nearest"``, ``"nearest-exact"``, ``"linear"`` (3-d input), ``"bilinear"`` or ``"bicubic"`` (4-d),
    ``"trilinear"`` (5-d). ``align_corners`` (the linear and cubic modes): the corner positions of input and output
    coincide. ``"area"`` and ``antialias=True`` are not supported here.

    >>> import tinyattn as ta
    >>> interpolate(ta.tensor([[[1.0, 2.0]]]), size=4)
    tensor([[[1., 1., 2., 2.]]])
    >>> interpolate(ta.tensor([[[0.0, 3.0]]]), size=4, mode="linear", align_corners=True)
    tensor([[[0., 1., 2., 3.]]])
    """
    if mode not in MODES:
        raise NotImplementedError(f"interpolate: mode {mode!r} is not supported; supported modes are "
                                  f"{', '.join(MODES)} ('area' and the antialiased modes are not)")
    if antialias:
        raise NotImplementedError("interpolate: antialias=True is not supported")
    if input.ndim < 3:
        raise ValueError(f"interpolate: expected an input (N, C, d₁, …) with at least one spatial dimension, got "
                         f"shape {input.shape}")
    spatial = input.ndim - 2
    if MODES[mode] is not None and MODES[mode] != spatial:
        raise NotImplementedError(f"Got {input.ndim}D input, but {mode} mode needs {MODES[mode] + 2}D input")
    if mode in ("nearest", "nearest-exact"):
        if align_corners is not None:
            raise ValueError("align_corners option can only be set with the interpolating modes: linear | bilinear | "
                             "bicubic | trilinear")
    elif align_corners is None:
        align_corners = False
    sizes, factors = _output_sizes(input, size, scale_factor, recompute_scale_factor)
    if any(m <= 0 for m in sizes):
        raise ValueError(f"interpolate: the output sizes {sizes} must be positive (input {input.shape})")
    output = input
    for k, (m, factor) in enumerate(zip(sizes, factors)):
        if isinstance(factor, numbers.Real) and factor <= 0:
            raise ValueError(f"interpolate: scale_factor must be positive, got {factor}")
        output = _resize_dim(output, 2 + k, m, factor, align_corners, mode)
    return output if output is not input else input.reshape(input.shape)


def upsample(input, size=None, scale_factor=None, mode="nearest", align_corners=None):
    """``interpolate`` under its older name.

    >>> import tinyattn as ta
    >>> upsample(ta.tensor([[[1.0, 2.0]]]), scale_factor=2)
    tensor([[[1., 1., 2., 2.]]])
    """
    return interpolate(input, size, scale_factor, mode, align_corners)


def upsample_nearest(input, size=None, scale_factor=None):
    """``interpolate(..., mode="nearest")``.

    >>> import tinyattn as ta
    >>> upsample_nearest(ta.tensor([[[1.0, 2.0]]]), size=3)
    tensor([[[1., 1., 2.]]])
    """
    return interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(input, size=None, scale_factor=None):
    """``interpolate(..., mode="bilinear", align_corners=True)`` of ``(N, C, H, W)``.

    >>> import tinyattn as ta
    >>> upsample_bilinear(ta.tensor([[[[0.0, 2.0]]]]), size=(1, 3))
    tensor([[[[0., 1., 2.]]]])
    """
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)
