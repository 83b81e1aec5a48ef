"""Floor 4: convolution (``F.conv1d``/``2d``/``3d``, ``F.conv_transpose1d``/``2d``, ``F.unfold``, ``F.fold``) and
its layers, composed from indexing, ``where`` and ``matmul``.

A convolution is three steps, each an existing differentiable operation:

1. **gather the windows** — along each spatial dimension ``d`` of size ``S``, output position ``o`` and kernel
   position ``k`` read the input at ``o·stride + k·dilation - padding``: one integer-array index per dimension turns
   ``(N, C, S₁, S₂)`` into ``(N, C, O₁, O₂, K₁, K₂)``, and the positions that fall in the padding become zeros
   (``where``);
2. **multiply** — the windows ``(N, g, L, C/g·K)`` times the weight ``(g, C/g·K, C_out/g)``, one ``matmul`` per group;
3. **add the bias**.

The gradient of the gather sums back into the positions read, so gradients, forward-mode tangents, ``vmap`` and
higher derivatives come from the operations themselves. A transposed convolution is the convolution of the input
with zeros inserted between its elements (``stride - 1`` of them), padded by ``dilation·(K - 1) - padding``, with the
weight flipped and its two channel axes swapped: the adjoint of the convolution, written as one.

>>> import tinyattn as ta
>>> import tinyattn.nn.functional as F
>>> F.conv1d(ta.tensor([[[1.0, 2.0, 3.0, 4.0]]]), ta.tensor([[[1.0, -1.0]]]))
tensor([[[-1., -1., -1.]]])
"""

import math
import numbers

import numpy as np

from .. import backend, ops
from ..engine import Tensor
from ..shapes import flip
from .module import Module, Parameter
from .padding import pad as _pad

__all__ = ["conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d", "unfold",
           "fold"]


# ----------------------------------------------------------------------------- windows: the one gather


def as_tuple(name, argument, value, n):
    """``value`` (an int or a sequence of ``n`` ints) as a tuple of ``n`` ints."""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return (int(value),) * n
    value = tuple(value)
    if len(value) == 1 and n > 1:
        value = value * n
    if len(value) != n or not all(isinstance(v, numbers.Integral) and not isinstance(v, bool) for v in value):
        raise ValueError(f"{name}: {argument} must be an int or a tuple of {n} ints, got {value!r}")
    return tuple(int(v) for v in value)


def window_positions(size, kernel_size, stride, dilation, before, out):
    """The input position that each window element reads along one dimension: an int array ``(out, kernel_size)``,
    ``o·stride + k·dilation - before``; a position outside ``[0, size)`` lies in the padding."""
    return np.arange(out)[:, None] * stride + np.arange(kernel_size)[None, :] * dilation - before


def windows(input, positions, fill):
    """The windows of ``input`` ``(N, C, S₁, …, S_d)`` at ``positions`` (one int array ``(O_i, K_i)`` per spatial
    dimension, as ``window_positions`` makes): ``(N, C, O₁, …, O_d, K₁, …, K_d)``, with ``fill`` (a number) where a
    position falls outside the input."""
    d = len(positions)
    spatial = input.shape[2:]
    xp = backend.namespace(input._data)
    x = input
    inside = np.ones((1,) * (2 * d), dtype=bool)
    for i, (pos, size) in enumerate(zip(positions, spatial)):
        axis = 2 + 2 * i  # the dimension's axis once the earlier ones have become (O, K) pairs
        x = x[(slice(None),) * axis + (xp.asarray(np.clip(pos, 0, size - 1)),)]  # (N, C, …, O_i, K_i, S_{i+1}, …)
        shape = [1] * (2 * d)
        shape[2 * i], shape[2 * i + 1] = pos.shape
        inside = inside & ((pos >= 0) & (pos < size)).reshape(shape)  # (O₁, K₁, …, O_d, K_d)
    order = [2 + 2 * i for i in range(d)] + [3 + 2 * i for i in range(d)]
    x = x.permute(0, 1, *order)  # (N, C, O₁, …, O_d, K₁, …, K_d)
    if inside.all():
        return x
    inside = inside.transpose([2 * i for i in range(d)] + [2 * i + 1 for i in range(d)])  # (O₁, …, O_d, K₁, …, K_d)
    return ops.where(Tensor._wrap(xp.asarray(inside)), x, fill)


def sliding_size(name, size, kernel_size, stride, dilation, before, after):
    """``⌊(S + before + after - dilation·(K - 1) - 1) / stride⌋ + 1``, checked to be positive."""
    out = (size + before + after - dilation * (kernel_size - 1) - 1) // stride + 1
    if out <= 0:
        raise RuntimeError(f"{name}: the input's spatial size {size} (padded by {before} and {after}) is smaller "
                           f"than the kernel's extent {dilation * (kernel_size - 1) + 1}: the output would have size "
                           f"{out}")
    return out


# ----------------------------------------------------------------------------- convolution


def _batched(name, input, d):
    """``input`` as ``(N, C, *S)`` and whether it came unbatched ``(C, *S)``."""
    if not isinstance(input, Tensor) or input.ndim not in (d + 1, d + 2):
        got = input.ndim if isinstance(input, Tensor) else type(input).__name__
        raise RuntimeError(f"{name}: expected a {d + 1}D (unbatched) or {d + 2}D (batched) input, got {got}D")
    return (input.unsqueeze(0), True) if input.ndim == d + 1 else (input, False)


def _paddings(name, padding, kernel_size, stride, dilation):
    """``padding`` (an int, a tuple, ``"valid"`` or ``"same"``) as one ``(before, after)`` pair per dimension;
    ``"same"`` puts the odd element after, as PyTorch does."""
    d = len(kernel_size)
    if isinstance(padding, str):
        if padding == "valid":
            return [(0, 0)] * d
        if padding != "same":
            raise ValueError(f"{name}: invalid padding string {padding!r}, should be one of {{'valid', 'same'}}")
        if any(s != 1 for s in stride):
            raise ValueError(f"{name}: padding='same' is not supported for strided convolutions (stride={stride})")
        totals = [dil * (k - 1) for k, dil in zip(kernel_size, dilation)]
        return [(t // 2, t - t // 2) for t in totals]
    padding = as_tuple(name, "padding", padding, d)
    if any(p < 0 for p in padding):
        raise RuntimeError(f"{name}: negative padding is not supported, got {padding}")
    return [(p, p) for p in padding]


def convolution(input, weight, bias, stride, paddings, dilation, groups, name):
    """The convolution of ``input`` ``(N, C_in, *S)`` with ``weight`` ``(C_out, C_in/groups, *K)``, padded by
    ``paddings`` (a ``(before, after)`` pair per dimension; a negative one crops): ``(N, C_out, *O)``."""
    N, C_in = input.shape[:2]
    C_out, K = weight.shape[0], weight.shape[2:]
    g = groups
    out = [sliding_size(name, s, k, st, dil, b, a)
           for s, k, st, dil, (b, a) in zip(input.shape[2:], K, stride, dilation, paddings)]
    positions = [window_positions(s, k, st, dil, b, o)
                 for s, k, st, dil, (b, _), o in zip(input.shape[2:], K, stride, dilation, paddings, out)]
    cols = windows(input, positions, 0)  # (N, C_in, *O, *K)
    d, L, CK = len(K), math.prod(out), (C_in // g) * math.prod(K)
    cols = cols.reshape(N, g, C_in // g, L, math.prod(K))  # (N, g, C_in/g, L, K)
    cols = cols.permute(0, 1, 3, 2, 4).reshape(N, g, L, CK)  # (N, g, L, C_in/g·K)
    w = weight.reshape(g, C_out // g, CK).transpose(1, 2)  # (g, C_in/g·K, C_out/g)
    if cols.dtype == np.float16:  # a sum of C_in/g·K float16 products: accumulated in float32, as torch's kernels do
        y = ops.matmul(cols.float(), w.float()).to(np.float16)  # (N, g, L, C_out/g)
    else:
        y = ops.matmul(cols, w)  # (N, g, L, C_out/g)
    y = y.permute(0, 1, 3, 2).reshape(N, C_out, *out)  # (N, C_out, *O)
    if bias is not None:
        y = y + bias.reshape(C_out, *([1] * d))
    return y


def _check_conv(name, input, weight, bias, groups, d, transposed=False):
    if not isinstance(weight, Tensor) or weight.ndim != d + 2:
        got = weight.ndim if isinstance(weight, Tensor) else type(weight).__name__
        raise RuntimeError(f"{name}: expected a {d + 2}D weight, got {got}D")
    if not isinstance(groups, numbers.Integral) or groups <= 0:
        raise RuntimeError(f"{name}: non-positive groups is not supported, got {groups!r}")
    C_in = input.shape[1]
    if transposed:  # weight (C_in, C_out/groups, *K)
        if weight.shape[0] != C_in or C_in % groups:
            raise RuntimeError(f"{name}: weight of shape {weight.shape} expects input[:, {weight.shape[0]}] channels "
                               f"divisible by groups={groups}, but got input of shape {input.shape}")
        C_out = weight.shape[1] * groups
    else:  # weight (C_out, C_in/groups, *K)
        C_out = weight.shape[0]
        if weight.shape[1] * groups != C_in or C_out % groups:
            raise RuntimeError(f"{name}: given groups={groups}, weight of size {weight.shape}, expected input "
                               f"{input.shape} to have {weight.shape[1] * groups} channels and {C_out} output "
                               f"channels to be divisible by groups, but got {C_in} channels")
    if bias is not None and tuple(bias.shape) != (C_out,):
        raise RuntimeError(f"{name}: expected a bias of shape ({C_out},), got {bias.shape}")


def _conv(name, d, input, weight, bias, stride, padding, dilation, groups):
    input, unbatched = _batched(name, input, d)
    _check_conv(name, input, weight, bias, groups, d)
    K = tuple(weight.shape[2:])
    stride, dilation = as_tuple(name, "stride", stride, d), as_tuple(name, "dilation", dilation, d)
    if any(s <= 0 for s in stride) or any(dil <= 0 for dil in dilation):
        raise RuntimeError(f"{name}: stride {stride} and dilation {dilation} must be positive")
    y = convolution(input, weight, bias, stride, _paddings(name, padding, K, stride, dilation), dilation, groups, name)
    return y.squeeze(0) if unbatched else y


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """1-D convolution (PyTorch's cross-correlation): ``(N, C_in, L) -> (N, C_out, L_out)``.

    ``weight`` ``(C_out, C_in/groups, K)``; ``bias`` ``(C_out,)``; ``padding`` an int, ``"valid"`` (none) or
    ``"same"`` (the output as long as the input; stride 1 only); ``L_out = ⌊(L + 2·padding - dilation·(K - 1) - 1)
    / stride⌋ + 1``. An unbatched ``(C_in, L)`` input gives ``(C_out, L_out)``.

    >>> import tinyattn as ta
    >>> import tinyattn.nn.functional as F
    >>> x = ta.tensor([[[1.0, 2.0, 3.0, 4.0, 5.0]]])                  # (N=1, C=1, L=5)
    >>> F.conv1d(x, ta.tensor([[[1.0, 0.0, -1.0]]]), padding="same")
    tensor([[[-2., -2., -2., -2.,  4.]]])
    """
    return _conv("conv1d", 1, input, weight, bias, stride, padding, dilation, groups)


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """2-D convolution: ``(N, C_in, H, W) -> (N, C_out, H_out, W_out)``, as ``conv1d`` along each of the two
    dimensions (``stride``, ``padding``, ``dilation`` an int or a pair).

    >>> import tinyattn as ta
    >>> import tinyattn.nn.functional as F
    >>> x = ta.arange(16.0).reshape(1, 1, 4, 4)
    >>> F.conv2d(x, ta.ones(1, 1, 2, 2), stride=2)
    tensor([[[[10., 18.],
              [42., 50.]]]])
    """
    return _conv("conv2d", 2, input, weight, bias, stride, padding, dilation, groups)


def conv3d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """3-D convolution: ``(N, C_in, D, H, W) -> (N, C_out, D_out, H_out, W_out)``, as ``conv1d`` along each dimension.

    >>> import tinyattn as ta
    >>> import tinyattn.nn.functional as F
    >>> F.conv3d(ta.ones(1, 2, 3, 3, 3), ta.ones(4, 2, 2, 2, 2)).shape
    (1, 4, 2, 2, 2)
    """
    return _conv("conv3d", 3, input, weight, bias, stride, padding, dilation, groups)


# ----------------------------------------------------------------------------- transposed convolution


def _with_zeros_between(x, stride):
    """``x`` ``(N, C, *S)`` with ``stride - 1`` zeros between neighbours along each spatial dimension:
    ``(N, C, *((S - 1)·stride + 1))``; the scatter's gradient reads the strided positions back."""
    if all(s == 1 for s in stride):
        return x
    shape = (*x.shape[:2], *((size - 1) * s + 1 for size, s in zip(x.shape[2:], stride)))
    index = (slice(None), slice(None), *(slice(None, None, s) for s in stride))
    return ops.scatter(x, shape, index)


def _conv_transpose(name, d, input, weight, bias, stride, padding, output_padding, groups, dilation):
    input, unbatched = _batched(name, input, d)
    _check_conv(name, input, weight, bias, groups, d, transposed=True)
    K = tuple(weight.shape[2:])
    stride, dilation = as_tuple(name, "stride", stride, d), as_tuple(name, "dilation", dilation, d)
    padding, output_padding = as_tuple(name, "padding", padding, d), as_tuple(name, "output_padding", output_padding, d)
    if any(s <= 0 for s in stride) or any(dil <= 0 for dil in dilation) or any(p < 0 for p in padding):
        raise RuntimeError(f"{name}: stride {stride} and dilation {dilation} must be positive, padding {padding} "
                           "non-negative")
    for op, s, dil in zip(output_padding, stride, dilation):
        if not 0 <= op < max(s, dil):
            raise RuntimeError(f"{name}: output padding must be smaller than either stride or dilation, but got "
                               f"output_padding={output_padding}, stride={stride}, dilation={dilation}")
    C_in, C_out_g, g = weight.shape[0], weight.shape[1], groups
    w = weight.reshape(g, C_in // g, C_out_g, *K).transpose(1, 2)  # (g, C_out/g, C_in/g, *K)
    w = flip(w.reshape(g * C_out_g, C_in // g, *K), list(range(2, 2 + d)))  # (C_out, C_in/g, *K), flipped
    paddings = [(dil * (k - 1) - p, dil * (k - 1) - p + op)
                for k, dil, p, op in zip(K, dilation, padding, output_padding)]
    y = convolution(_with_zeros_between(input, stride), w, bias, (1,) * d, paddings, dilation, groups, name)
    return y.squeeze(0) if unbatched else y


def conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """1-D transposed convolution (the gradient of ``conv1d`` with respect to its input, as a layer):
    ``(N, C_in, L) -> (N, C_out, L_out)``, ``L_out = (L - 1)·stride - 2·padding + dilation·(K - 1) +
    output_padding + 1``.

    ``weight`` ``(C_in, C_out/groups, K)`` (the two channel axes the other way round from ``conv1d``'s).

    >>> import tinyattn as ta
    >>> import tinyattn.nn.functional as F
    >>> F.conv_transpose1d(ta.tensor([[[1.0, 2.0]]]), ta.tensor([[[1.0, 10.0, 100.0]]]), stride=2)
    tensor([[[  1.,  10., 102.,  20., 200.]]])
    """
    return _conv_transpose("conv_transpose1d", 1, input, weight, bias, stride, padding, output_padding, groups,
                           dilation)


def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """2-D transposed convolution: ``(N, C_in, H, W) -> (N, C_out, H_out, W_out)``, as ``conv_transpose1d`` along
    each dimension; ``weight`` ``(C_in, C_out/groups, K_h, K_w)``.

    >>> import tinyattn as ta
    >>> import tinyattn.nn.functional as F
    >>> F.conv_transpose2d(ta.ones(1, 1, 2, 2), ta.ones(1, 3, 2, 2), stride=2).shape
    (1, 3, 4, 4)
    """
    return _conv_transpose("conv_transpose2d", 2, input, weight, bias, stride, padding, output_padding, groups,
                           dilation)


def conv_transpose3d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """3-D transposed convolution, as ``conv_transpose1d`` along each dimension; ``weight``
    ``(C_in, C_out/groups, K_d, K_h, K_w)``.

    >>> import tinyattn as ta
    >>> import tinyattn.nn.functional as F
    >>> F.conv_transpose3d(ta.ones(1, 1, 2, 2, 2), ta.ones(1, 2, 3, 3, 3)).shape
    (1, 2, 4, 4, 4)
    """
    return _conv_transpose("conv_transpose3d", 3, input, weight, bias, stride, padding, output_padding, groups,
                           dilation)


# ----------------------------------------------------------------------------- unfold and fold (im2col, col2im)


def unfold(input, kernel_size, dilation=1, padding=0, stride=1):
    """The sliding blocks of a batched image, each flattened into a column (im2col):
    ``(N, C, H, W) -> (N, C·K_h·K_w, L)``, ``L`` the number of blocks (``O_h·O_w``), columns ordered
    ``(C, K_h, K_w)`` as PyTorch's.

    >>> import tinyattn as ta
    >>> import tinyattn.nn.functional as F
    >>> F.unfold(ta.arange(9.0).reshape(1, 1, 3, 3), kernel_size=2)
    tensor([[[0., 1., 3., 4.],
             [1., 2., 4., 5.],
             [3., 4., 6., 7.],
             [4., 5., 7., 8.]]])
    """
    input, unbatched = _batched("unfold", input, 2)
    K = as_tuple("unfold", "kernel_size", kernel_size, 2)
    dilation, stride = as_tuple("unfold", "dilation", dilation, 2), as_tuple("unfold", "stride", stride, 2)
    padding = as_tuple("unfold", "padding", padding, 2)
    N, C, H, W = input.shape
    out = [sliding_size("unfold", s, k, st, dil, p, p)
           for s, k, st, dil, p in zip((H, W), K, stride, dilation, padding)]
    positions = [window_positions(s, k, st, dil, p, o)
                 for s, k, st, dil, p, o in zip((H, W), K, stride, dilation, padding, out)]
    cols = windows(input, positions, 0)  # (N, C, O_h, O_w, K_h, K_w)
    cols = cols.permute(0, 1, 4, 5, 2, 3).reshape(N, C * K[0] * K[1], out[0] * out[1])  # (N, C·K_h·K_w, L)
    return cols.squeeze(0) if unbatched else cols


def fold(input, output_size, kernel_size, dilation=1, padding=0, stride=1):
    """``unfold``'s adjoint (col2im): columns ``(N, C·K_h·K_w, L)`` summed back into an image ``(N, C, H, W)`` of
    ``output_size``, overlapping blocks adding up.

    >>> import tinyattn as ta
    >>> import tinyattn.nn.functional as F
    >>> F.fold(ta.ones(1, 4, 4), output_size=3, kernel_size=2)
    tensor([[[[1., 2., 1.],
              [2., 4., 2.],
              [1., 2., 1.]]]])
    """
    if not isinstance(input, Tensor) or input.ndim not in (2, 3):
        raise RuntimeError(f"fold: expected a 2D (unbatched) or 3D (batched) input, got "
                           f"{getattr(input, 'ndim', type(input).__name__)}D")
    unbatched = input.ndim == 2
    x = input.unsqueeze(0) if unbatched else input
    size = as_tuple("fold", "output_size", output_size, 2)
    K = as_tuple("fold", "kernel_size", kernel_size, 2)
    dilation, stride = as_tuple("fold", "dilation", dilation, 2), as_tuple("fold", "stride", stride, 2)
    padding = as_tuple("fold", "padding", padding, 2)
    out = [(s + 2 * p - dil * (k - 1) - 1) // st + 1 for s, k, st, dil, p in zip(size, K, stride, dilation, padding)]
    N, CK, L = x.shape
    if CK % (K[0] * K[1]) or L != out[0] * out[1]:
        raise RuntimeError(f"fold: expected an input of shape (N, C·{K[0]}·{K[1]}, {out[0] * out[1]}) for "
                           f"output_size={size}, kernel_size={K}, got {tuple(x.shape)}")
    C = CK // (K[0] * K[1])
    x = x.reshape(N, C, K[0], K[1], out[0], out[1]).permute(0, 1, 4, 2, 5, 3)  # (N, C, O_h, K_h, O_w, K_w)
    pos_h, pos_w = (window_positions(s + 2 * p, k, st, dil, 0, o) for s, k, st, dil, p, o
                    in zip(size, K, stride, dilation, padding, out))  # in the padded image
    xp = backend.namespace(x._data)
    index = (slice(None), slice(None), xp.asarray(pos_h[:, :, None, None]), xp.asarray(pos_w[None, None, :, :]))
    padded = ops.scatter(x, (N, C, size[0] + 2 * padding[0], size[1] + 2 * padding[1]), index)  # overlaps add up
    image = padded[:, :, padding[0]:padding[0] + size[0], padding[1]:padding[1] + size[1]]  # (N, C, H, W)
    return image.squeeze(0) if unbatched else image


# ----------------------------------------------------------------------------- the layers


def _uniform(shape, bound, dtype, device):
    """Samples of U(-bound, bound) on ``device``, from the library's generator."""
    return (2 * backend.random_uniform(shape, dtype, device) - 1) * bound


PADDING_MODES = ("zeros", "reflect", "replicate", "circular")


class _ConvNd(Module):
    """What ``Conv1d``…``ConvTranspose3d`` share: PyTorch's parameters, initialisation and ``repr``."""

    dims, transposed = 1, False

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1, bias=True,
                 padding_mode="zeros", output_padding=0, device=None, dtype=None):
        super().__init__()
        name, d = type(self).__name__, self.dims
        if groups <= 0 or in_channels % groups or out_channels % groups:
            raise ValueError(f"{name}: in_channels ({in_channels}) and out_channels ({out_channels}) must be "
                             f"divisible by groups ({groups}), a positive integer")
        if padding_mode not in PADDING_MODES:
            raise ValueError(f"{name}: padding_mode must be one of {PADDING_MODES}, got {padding_mode!r}")
        if self.transposed and padding_mode != "zeros":
            raise ValueError(f'Only "zeros" padding mode is supported for {name}')
        self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
        self.kernel_size = as_tuple(name, "kernel_size", kernel_size, d)
        self.stride, self.dilation = as_tuple(name, "stride", stride, d), as_tuple(name, "dilation", dilation, d)
        if isinstance(padding, str):
            _paddings(name, padding, self.kernel_size, self.stride, self.dilation)  # checks "same" and "valid"
            self.padding = padding
        else:
            self.padding = as_tuple(name, "padding", padding, d)
        self.output_padding = as_tuple(name, "output_padding", output_padding, d)
        self.padding_mode = padding_mode
        device, dtype = device or "cpu", np.dtype(dtype or np.float32)
        xp = backend.namespace_for(device)
        shape = ((in_channels, out_channels // groups) if self.transposed
                 else (out_channels, in_channels // groups)) + self.kernel_size
        self.weight = Parameter(xp.empty(shape, dtype=dtype))
        self.bias = Parameter(xp.empty((out_channels,), dtype=dtype)) if bias else None
        self.reset_parameters()

    def reset_parameters(self):
        """PyTorch's: weight and bias from ``U(-1/√fan_in, 1/√fan_in)`` (kaiming-uniform with ``a=√5``), with
        ``fan_in = weight.shape[1] · ∏ kernel_size``."""
        weight = self.weight._data
        fan_in = weight.shape[1] * math.prod(self.kernel_size)
        bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0.0
        weight[...] = _uniform(weight.shape, bound, weight.dtype, backend.device_of(weight))
        if self.bias is not None:
            self.bias._data[...] = _uniform(self.bias.shape, bound, weight.dtype, backend.device_of(weight))

    def extra_repr(self):
        d = self.dims
        text = (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
                f"stride={self.stride}")
        if self.padding != (0,) * d:
            text += f", padding={self.padding}"
        if self.dilation != (1,) * d:
            text += f", dilation={self.dilation}"
        if self.output_padding != (0,) * d:
            text += f", output_padding={self.output_padding}"
        if self.groups != 1:
            text += f", groups={self.groups}"
        if self.bias is None:
            text += ", bias=False"
        if self.padding_mode != "zeros":
            text += f", padding_mode={self.padding_mode}"
        return text


class _Conv(_ConvNd):
    """A convolution layer: ``forward(input)`` is the ``F.conv{d}d`` of the parameters; a ``padding_mode`` other
    than ``"zeros"`` pads with ``F.pad`` first, as PyTorch does."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1, bias=True,
                 padding_mode="zeros", device=None, dtype=None):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias,
                         padding_mode, 0, device, dtype)

    def forward(self, input):
        conv = (conv1d, conv2d, conv3d)[self.dims - 1]
        if self.padding_mode == "zeros":
            return conv(input, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups)
        paddings = _paddings(type(self).__name__, self.padding, self.kernel_size, self.stride, self.dilation)
        amounts = [amount for pair in reversed(paddings) for amount in pair]  # F.pad's order: the last dim first
        return conv(_pad(input, amounts, mode=self.padding_mode), self.weight, self.bias, self.stride, 0,
                    self.dilation, self.groups)


class Conv1d(_Conv):
    """``Conv1d(in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1, bias=True,
    padding_mode="zeros")``: ``F.conv1d`` with ``weight`` ``(out_channels, in_channels/groups, kernel_size)`` and
    ``bias`` ``(out_channels,)``, initialised as PyTorch's. ``padding_mode`` ``"reflect"``, ``"replicate"`` or
    ``"circular"`` pads with ``F.pad`` first.

    >>> import tinyattn as ta
    >>> conv = Conv1d(4, 8, kernel_size=3, padding="same")
    >>> conv.weight.shape, conv(ta.randn(2, 4, 10)).shape
    ((8, 4, 3), (2, 8, 10))
    """

    dims = 1


class Conv2d(_Conv):
    """``Conv2d(in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1, bias=True,
    padding_mode="zeros")``: ``F.conv2d`` with ``weight`` ``(out_channels, in_channels/groups, K_h, K_w)``.

    >>> import tinyattn as ta
    >>> conv = Conv2d(3, 8, kernel_size=3, stride=2, padding=1)
    >>> conv
    Conv2d(3, 8, kernel_size=(3, 3), stride=(2, 2), padding=(1, 1))
    >>> conv(ta.randn(1, 3, 32, 32)).shape
    (1, 8, 16, 16)
    """

    dims = 2


class Conv3d(_Conv):
    """``Conv3d(in_channels, out_channels, kernel_size, …)``: ``F.conv3d`` with ``weight``
    ``(out_channels, in_channels/groups, K_d, K_h, K_w)``.

    >>> import tinyattn as ta
    >>> Conv3d(2, 4, kernel_size=2)(ta.randn(1, 2, 3, 3, 3)).shape
    (1, 4, 2, 2, 2)
    """

    dims = 3


class _ConvTranspose(_ConvNd):
    """A transposed convolution layer: ``forward(input, output_size=None)``; ``output_size`` (the spatial sizes
    wanted, or with the batch and channel sizes in front) picks the ``output_padding`` that gives them."""

    transposed = True

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, output_padding=0, groups=1,
                 bias=True, dilation=1, padding_mode="zeros", device=None, dtype=None):
        if isinstance(padding, str):
            raise ValueError(f"{type(self).__name__}: padding must be an int or a tuple, got {padding!r}")
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias,
                         padding_mode, output_padding, device, dtype)

    def forward(self, input, output_size=None):
        d = self.dims
        output_padding = self.output_padding
        if output_size is not None:
            wanted = tuple(output_size)[-d:]
            smallest = [(s - 1) * st - 2 * p + dil * (k - 1) + 1 for s, st, p, dil, k
                        in zip(input.shape[-d:], self.stride, self.padding, self.dilation, self.kernel_size)]
            output_padding = tuple(w - s for w, s in zip(wanted, smallest))
            largest = tuple(s + max(st, dil) - 1 for s, st, dil in zip(smallest, self.stride, self.dilation))
            if any(not 0 <= op < max(st, dil) for op, st, dil in zip(output_padding, self.stride, self.dilation)):
                raise ValueError(f"{type(self).__name__}: requested an output size of {wanted}, but the valid sizes "
                                 f"run from {tuple(smallest)} to {largest}")
        conv = (conv_transpose1d, conv_transpose2d, conv_transpose3d)[d - 1]
        return conv(input, self.weight, self.bias, self.stride, self.padding, output_padding, self.groups,
                    self.dilation)


class ConvTranspose1d(_ConvTranspose):
    """``ConvTranspose1d(in_channels, out_channels, kernel_size, stride=1, padding=0, output_padding=0, groups=1,
    bias=True, dilation=1)``: ``F.conv_transpose1d`` with ``weight`` ``(in_channels, out_channels/groups,
    kernel_size)``, initialised as PyTorch's.

    >>> import tinyattn as ta
    >>> up = ConvTranspose1d(4, 2, kernel_size=4, stride=2, padding=1)
    >>> up.weight.shape, up(ta.randn(1, 4, 8)).shape
    ((4, 2, 4), (1, 2, 16))
    """

    dims = 1


class ConvTranspose2d(_ConvTranspose):
    """``ConvTranspose2d(in_channels, out_channels, kernel_size, …)``: ``F.conv_transpose2d`` with ``weight``
    ``(in_channels, out_channels/groups, K_h, K_w)``.

    >>> import tinyattn as ta
    >>> ConvTranspose2d(3, 2, kernel_size=2, stride=2)(ta.randn(1, 3, 5, 5)).shape
    (1, 2, 10, 10)
    """

    dims = 2


class ConvTranspose3d(_ConvTranspose):
    """``ConvTranspose3d(in_channels, out_channels, kernel_size, …)``: ``F.conv_transpose3d`` with ``weight``
    ``(in_channels, out_channels/groups, K_d, K_h, K_w)``.

    >>> import tinyattn as ta
    >>> ConvTranspose3d(1, 1, kernel_size=2, stride=2)(ta.randn(1, 1, 2, 2, 2)).shape
    (1, 1, 4, 4, 4)
    """

    dims = 3


class Unfold(Module):
    """``F.unfold`` as a module: ``Unfold(kernel_size, dilation=1, padding=0, stride=1)``.

    >>> import tinyattn as ta
    >>> Unfold(kernel_size=2)(ta.randn(1, 3, 4, 4)).shape
    (1, 12, 9)
    """

    def __init__(self, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__()
        self.kernel_size, self.dilation, self.padding, self.stride = kernel_size, dilation, padding, stride

    def forward(self, input):
        return unfold(input, self.kernel_size, self.dilation, self.padding, self.stride)

    def extra_repr(self):
        return (f"kernel_size={self.kernel_size}, dilation={self.dilation}, padding={self.padding}, "
                f"stride={self.stride}")


class Fold(Module):
    """``F.fold`` as a module: ``Fold(output_size, kernel_size, dilation=1, padding=0, stride=1)``.

    >>> import tinyattn as ta
    >>> Fold(output_size=4, kernel_size=2)(ta.randn(1, 12, 9)).shape
    (1, 3, 4, 4)
    """

    def __init__(self, output_size, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__()
        self.output_size, self.kernel_size = output_size, kernel_size
        self.dilation, self.padding, self.stride = dilation, padding, stride

    def forward(self, input):
        return fold(input, self.output_size, self.kernel_size, self.dilation, self.padding, self.stride)

    def extra_repr(self):
        return (f"output_size={self.output_size}, kernel_size={self.kernel_size}, dilation={self.dilation}, "
                f"padding={self.padding}, stride={self.stride}")


class _LazyConv:
    """A convolution layer whose ``in_channels`` is the channel size of the first input it sees (as ``LazyLinear``):
    until then ``weight`` has no input channels; the first call shapes it, draws PyTorch's initial values in place
    (the ``Parameter`` objects stay the same) and turns the module into ``cls_to_become``."""

    cls_to_become = None

    def __init__(self, out_channels, kernel_size, *args, **kwargs):
        super().__init__(0, out_channels, kernel_size, *args, **kwargs)

    def forward(self, input, *args, **kwargs):
        layer = self.cls_to_become
        self.initialize_parameters(input)
        return layer.forward(self, input, *args, **kwargs)  # the module is a plain layer from now on

    def initialize_parameters(self, input):
        """Read ``in_channels`` from ``input`` (``(N, C, *S)`` or unbatched ``(C, *S)``), shape ``weight`` and draw
        both parameters afresh."""
        name, d = type(self).__name__, self.dims
        if not isinstance(input, Tensor) or input.ndim not in (d + 1, d + 2):
            raise RuntimeError(f"{name}: expected a {d + 1}D (unbatched) or {d + 2}D (batched) input, got "
                               f"{getattr(input, 'ndim', type(input).__name__)}D")
        in_channels = input.shape[0 if input.ndim == d + 1 else 1]
        if in_channels % self.groups:
            raise ValueError(f"{name}: in_channels ({in_channels}) must be divisible by groups ({self.groups})")
        self.in_channels = in_channels
        weight = self.weight._data
        shape = list(weight.shape)
        shape[0 if self.transposed else 1] = in_channels if self.transposed else in_channels // self.groups
        self.weight._data = backend.namespace(weight).empty(tuple(shape), dtype=weight.dtype)
        self.reset_parameters()
        self.__class__ = self.cls_to_become


class LazyConv1d(_LazyConv, Conv1d):
    """``Conv1d`` with ``in_channels`` read from the first input: ``LazyConv1d(out_channels, kernel_size, …)``.

    >>> import tinyattn as ta
    >>> conv = LazyConv1d(8, 3)
    >>> conv(ta.randn(2, 5, 10)).shape, conv
    ((2, 8, 8), Conv1d(5, 8, kernel_size=(3,), stride=(1,)))
    """

    cls_to_become = Conv1d


class LazyConv2d(_LazyConv, Conv2d):
    """``Conv2d`` with ``in_channels`` read from the first input.

    >>> import tinyattn as ta
    >>> LazyConv2d(4, 3, padding=1)(ta.randn(1, 3, 6, 6)).shape
    (1, 4, 6, 6)
    """

    cls_to_become = Conv2d


class LazyConv3d(_LazyConv, Conv3d):
    """``Conv3d`` with ``in_channels`` read from the first input.

    >>> import tinyattn as ta
    >>> LazyConv3d(2, 2)(ta.randn(1, 3, 3, 3, 3)).shape
    (1, 2, 2, 2, 2)
    """

    cls_to_become = Conv3d


class LazyConvTranspose1d(_LazyConv, ConvTranspose1d):
    """``ConvTranspose1d`` with ``in_channels`` read from the first input.

    >>> import tinyattn as ta
    >>> up = LazyConvTranspose1d(2, 2, stride=2)
    >>> up(ta.randn(1, 3, 4)).shape, up.weight.shape
    ((1, 2, 8), (3, 2, 2))
    """

    cls_to_become = ConvTranspose1d


class LazyConvTranspose2d(_LazyConv, ConvTranspose2d):
    """``ConvTranspose2d`` with ``in_channels`` read from the first input.

    >>> import tinyattn as ta
    >>> LazyConvTranspose2d(2, 2, stride=2)(ta.randn(1, 3, 4, 4)).shape
    (1, 2, 8, 8)
    """

    cls_to_become = ConvTranspose2d


class LazyConvTranspose3d(_LazyConv, ConvTranspose3d):
    """``ConvTranspose3d`` with ``in_channels`` read from the first input.

    >>> import tinyattn as ta
    >>> LazyConvTranspose3d(1, 2, stride=2)(ta.randn(1, 2, 2, 2, 2)).shape
    (1, 1, 4, 4, 4)
    """

    cls_to_become = ConvTranspose3d
