"""``torch.nn.utils.fuse_*``: a layer followed by a batch norm in eval mode, folded into one layer.

    y = γ · (W x + b − μ) / √(σ² + ε) + β   =   (s · W) x + (s · (b − μ) + β),    s = γ / √(σ² + ε)

>>> import tinyattn.compat as torch
>>> w, b = torch.nn.utils.fuse_linear_bn_weights(torch.ones(2, 3), None, torch.zeros(2), torch.full((2,), 3.0),
...                                              1.0, torch.ones(2), torch.zeros(2))
>>> w.tolist(), b.tolist()
([[0.5, 0.5, 0.5], [0.5, 0.5, 0.5]], [0.0, 0.0])
"""

import copy

from ...core.tensor import Parameter
from ...scope import missing


def fuse_linear_bn_weights(linear_w, linear_b, bn_rm, bn_rv, bn_eps, bn_w, bn_b):
    """The weight and bias of a linear layer followed by a batch norm (its running statistics and affine)."""
    if linear_b is None:
        linear_b = bn_rm.new_zeros(bn_rm.shape)
    scale = bn_w * (bn_rv + bn_eps).rsqrt()  # s
    fused_w = linear_w * scale.unsqueeze(-1)
    fused_b = (linear_b - bn_rm) * scale + bn_b
    return Parameter(fused_w.detach(), linear_w.requires_grad), Parameter(fused_b.detach(), linear_b.requires_grad)


def fuse_linear_bn_eval(linear, bn):
    """A copy of ``linear`` with ``bn`` (both in eval mode) folded into its weight and bias."""
    if linear.training or bn.training:
        raise AssertionError("Fusion only for eval!")
    if not (linear.out_features == bn.num_features or bn.num_features == 1):
        raise AssertionError("To fuse, linear.out_features must equal bn.num_features or bn.num_features must be 1")
    if bn.running_mean is None or bn.running_var is None:
        raise AssertionError("bn.running_mean and bn.running_var must not be None")
    fused = copy.deepcopy(linear)
    fused.weight, fused.bias = fuse_linear_bn_weights(fused.weight, fused.bias, bn.running_mean, bn.running_var,
                                                      bn.eps, bn.weight, bn.bias)
    return fused


def fuse_conv_bn_weights(conv_w, conv_b, bn_rm, bn_rv, bn_eps, bn_w, bn_b, transpose=False):
    """The weight and bias of a convolution followed by a batch norm (the scale along the output channels: dim 0,
    or dim 1 for a transposed convolution)."""
    if conv_b is None:
        conv_b = bn_rm.new_zeros(bn_rm.shape)
    if bn_w is None:
        bn_w = bn_rm.new_ones(bn_rm.shape)
    if bn_b is None:
        bn_b = bn_rm.new_zeros(bn_rm.shape)
    rsqrt = (bn_rv + bn_eps).rsqrt()
    shape = ([1, -1] if transpose else [-1, 1]) + [1] * (conv_w.ndim - 2)
    fused_w = conv_w * (bn_w * rsqrt).reshape(shape)
    fused_b = (conv_b - bn_rm) * rsqrt * bn_w + bn_b
    return Parameter(fused_w.detach(), conv_w.requires_grad), Parameter(fused_b.detach(), conv_b.requires_grad)


def fuse_conv_bn_eval(conv, bn, transpose=False):
    """A copy of ``conv`` with ``bn`` (both in eval mode) folded into its weight and bias."""
    if conv.training or bn.training:
        raise AssertionError("Fusion only for eval!")
    if bn.running_mean is None or bn.running_var is None:
        raise AssertionError("bn.running_mean and bn.running_var must not be None")
    fused = copy.deepcopy(conv)
    fused.weight, fused.bias = fuse_conv_bn_weights(fused.weight, fused.bias, bn.running_mean, bn.running_var,
                                                    bn.eps, bn.weight, bn.bias, transpose)
    return fused


__all__ = ["fuse_linear_bn_weights", "fuse_linear_bn_eval", "fuse_conv_bn_weights", "fuse_conv_bn_eval"]


def __getattr__(name):
    raise missing(__name__, name)
