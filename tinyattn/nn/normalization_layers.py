"""Floor 5: the normalisation layers of ``nn.normalization`` as modules (``LayerNorm`` is in ``nn.layers``), with
PyTorch's constructor arguments, defaults, parameters, buffers and ``repr``.

``BatchNorm1d/2d/3d`` standardise each channel over the batch while training and move their running statistics
toward the batch's (``momentum``; ``None``: a cumulative average over ``num_batches_tracked``); after ``eval()``
they use the running statistics. ``InstanceNorm1d/2d/3d`` standardise each sample's channel over its positions.
The affine ``weight`` starts at ones and ``bias`` at zeros.

>>> import tinyattn as ta
>>> from tinyattn import nn
>>> norm = nn.BatchNorm1d(2)
>>> _ = norm(ta.tensor([[1.0, 2.0], [3.0, 6.0]]))
>>> norm.running_mean, norm.num_batches_tracked
(tensor([0.2, 0.4]), tensor(1))
"""

import numbers

import numpy as np

from .. import backend
from ..engine import Tensor
from . import functional as F
from .layers import _factory
from .module import Module, Parameter


class GroupNorm(Module):
    """The ``num_channels`` channels of ``(N, C, …)`` in ``num_groups`` groups, each sample's group standardised
    over its channels and positions, then ``· weight + bias`` per channel (``F.group_norm``).

    >>> import tinyattn as ta
    >>> GroupNorm(1, 2, eps=0.0)(ta.tensor([[1.0, 3.0]]))
    tensor([[-1.,  1.]], grad_fn=<Add>)
    """

    def __init__(self, num_groups, num_channels, eps=1e-5, affine=True, device=None, dtype=None, *, bias=True):
        super().__init__()
        if num_channels % num_groups:
            raise ValueError(f"num_channels ({num_channels}) must be divisible by num_groups ({num_groups})")
        self.num_groups, self.num_channels, self.eps, self.affine = num_groups, num_channels, eps, affine
        device, dtype = _factory(device, dtype)
        xp = backend.namespace_for(device)
        self.weight = Parameter(xp.ones((num_channels,), dtype=dtype)) if affine else None
        self.bias = Parameter(xp.zeros((num_channels,), dtype=dtype)) if affine and bias else None

    def reset_parameters(self):
        if self.weight is not None:
            self.weight._data[...] = 1
        if self.bias is not None:
            self.bias._data[...] = 0

    def forward(self, input):
        return F.group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return (f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}, "
                f"bias={self.bias is not None}")


class RMSNorm(Module):
    """``x / √(mean(x²) + eps) · weight`` over the trailing ``normalized_shape`` (``F.rms_norm``); ``eps=None``:
    the machine epsilon of the input's dtype.

    >>> import tinyattn as ta
    >>> RMSNorm(2, elementwise_affine=False)(ta.tensor([[1.0, 1.0]]))
    tensor([[1., 1.]])
    """

    def __init__(self, normalized_shape, eps=None, elementwise_affine=True, device=None, dtype=None):
        super().__init__()
        if isinstance(normalized_shape, numbers.Integral):
            normalized_shape = (normalized_shape,)
        self.normalized_shape, self.eps = tuple(normalized_shape), eps
        self.elementwise_affine = elementwise_affine
        device, dtype = _factory(device, dtype)
        xp = backend.namespace_for(device)
        self.weight = Parameter(xp.ones(self.normalized_shape, dtype=dtype)) if elementwise_affine else None

    def reset_parameters(self):
        if self.weight is not None:
            self.weight._data[...] = 1

    def forward(self, input):
        return F.rms_norm(input, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self):
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"


class _NormBase(Module):
    """Per-channel normalisation over ``num_features`` channels (dimension 1): the affine ``weight`` and ``bias``
    and, with ``track_running_stats``, the buffers ``running_mean`` (zeros), ``running_var`` (ones) and
    ``num_batches_tracked`` (an int64 count), as PyTorch's ``_NormBase`` holds them (``bias=False``: no
    ``bias``)."""

    batched_ndim = None  # (N, C, …)'s number of dimensions for a 1d/2d/3d layer

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True, device=None,
                 dtype=None, *, bias=True):
        super().__init__()
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        device, dtype = _factory(device, dtype)
        xp = backend.namespace_for(device)
        self.weight = Parameter(xp.ones((num_features,), dtype=dtype)) if affine else None
        self.bias = Parameter(xp.zeros((num_features,), dtype=dtype)) if affine and bias else None
        if track_running_stats:
            self.register_buffer("running_mean", Tensor._wrap(xp.zeros((num_features,), dtype=dtype)))
            self.register_buffer("running_var", Tensor._wrap(xp.ones((num_features,), dtype=dtype)))
            self.register_buffer("num_batches_tracked", Tensor._wrap(xp.zeros((), dtype=np.int64)))
        else:
            self.running_mean = self.running_var = self.num_batches_tracked = None

    def reset_running_stats(self):
        """``running_mean`` back to zeros, ``running_var`` to ones, ``num_batches_tracked`` to 0."""
        if self.track_running_stats:
            self.running_mean._data[...], self.running_var._data[...] = 0, 1
            self.num_batches_tracked._data[...] = 0

    def reset_parameters(self):
        """The running statistics reset, ``weight`` back to ones and ``bias`` to zeros."""
        self.reset_running_stats()
        if self.weight is not None:
            self.weight._data[...] = 1
        if self.bias is not None:
            self.bias._data[...] = 0

    def _momentum(self):
        """The factor the running statistics move by now: ``momentum``, or ``1 / num_batches_tracked`` (a
        cumulative average) for ``momentum=None``; the count goes up by one for every batch seen in training."""
        if not (self.training and self.track_running_stats):
            return 0.0 if self.momentum is None else self.momentum
        self.num_batches_tracked._data[...] += 1
        if self.momentum is None:
            return 1.0 / float(self.num_batches_tracked._data)
        return self.momentum

    def _check_input_dim(self, input):
        if input.ndim not in (self.batched_ndim - 1, self.batched_ndim):
            raise ValueError(f"expected {self.batched_ndim - 1}D or {self.batched_ndim}D input (got {input.ndim}D "
                             "input)")

    def extra_repr(self):
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
                f"bias={self.bias is not None}, track_running_stats={self.track_running_stats}")


class _BatchNorm(_NormBase):
    """Batch normalisation (Ioffe and Szegedy, 2015): ``F.batch_norm`` with the batch's statistics while training
    (or whenever there are no running statistics), the running ones after ``eval()``."""

    def forward(self, input):
        self._check_input_dim(input)
        momentum = self._momentum()
        use_batch = self.training or self.running_mean is None
        keep_running = not self.training or self.track_running_stats  # the running statistics to use or to update
        return F.batch_norm(input, self.running_mean if keep_running else None,
                            self.running_var if keep_running else None, self.weight, self.bias, use_batch, momentum,
                            self.eps)


class BatchNorm1d(_BatchNorm):
    """Batch normalisation of ``(N, C)`` or ``(N, C, L)``.

    >>> import tinyattn as ta
    >>> BatchNorm1d(1, eps=0.0)(ta.tensor([[1.0], [3.0]]))
    tensor([[-1.],
            [ 1.]], grad_fn=<Add>)
    """

    def _check_input_dim(self, input):
        if input.ndim not in (2, 3):
            raise ValueError(f"expected 2D or 3D input (got {input.ndim}D input)")


class BatchNorm2d(_BatchNorm):
    """Batch normalisation of ``(N, C, H, W)``.

    >>> import tinyattn as ta
    >>> BatchNorm2d(3)(ta.randn(2, 3, 4, 4)).shape
    (2, 3, 4, 4)
    """

    def _check_input_dim(self, input):
        if input.ndim != 4:
            raise ValueError(f"expected 4D input (got {input.ndim}D input)")


class BatchNorm3d(_BatchNorm):
    """Batch normalisation of ``(N, C, D, H, W)``.

    >>> import tinyattn as ta
    >>> BatchNorm3d(3)(ta.randn(2, 3, 2, 2, 2)).shape
    (2, 3, 2, 2, 2)
    """

    def _check_input_dim(self, input):
        if input.ndim != 5:
            raise ValueError(f"expected 5D input (got {input.ndim}D input)")


class _InstanceNorm(_NormBase):
    """Instance normalisation (Ulyanov et al., 2016): ``F.instance_norm``, unbatched inputs (one dimension fewer)
    taken as a batch of one. PyTorch's defaults: ``affine=False``, ``track_running_stats=False``."""

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=False, track_running_stats=False, device=None,
                 dtype=None, *, bias=True):
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype, bias=bias)

    def forward(self, input):
        self._check_input_dim(input)
        if input.ndim == self.batched_ndim - 1:  # (C, …) -> (1, C, …)
            return self.forward(input.unsqueeze(0)).squeeze(0)
        if self.affine and input.shape[1] != self.num_features:
            raise ValueError(f"expected input's size at dim=1 to match num_features ({self.num_features}), but got: "
                             f"{input.shape[1]}.")
        momentum = self.momentum if self.momentum is not None else 0.0  # (PyTorch counts no batches here)
        return F.instance_norm(input, self.running_mean, self.running_var, self.weight, self.bias,
                               self.training or not self.track_running_stats, momentum, self.eps)


class InstanceNorm1d(_InstanceNorm):
    """Instance normalisation of ``(N, C, L)`` or ``(C, L)``.

    >>> import tinyattn as ta
    >>> InstanceNorm1d(1, eps=0.0)(ta.tensor([[[1.0, 3.0]]]))
    tensor([[[-1.,  1.]]])
    """

    batched_ndim = 3


class InstanceNorm2d(_InstanceNorm):
    """Instance normalisation of ``(N, C, H, W)`` or ``(C, H, W)``.

    >>> import tinyattn as ta
    >>> InstanceNorm2d(3)(ta.randn(2, 3, 4, 4)).shape
    (2, 3, 4, 4)
    """

    batched_ndim = 4


class InstanceNorm3d(_InstanceNorm):
    """Instance normalisation of ``(N, C, D, H, W)`` or ``(C, D, H, W)``.

    >>> import tinyattn as ta
    >>> InstanceNorm3d(3)(ta.randn(3, 2, 2, 2)).shape
    (3, 2, 2, 2)
    """

    batched_ndim = 5


class LocalResponseNorm(Module):
    """Each channel divided by ``(k + alpha/size · Σ x²)^beta`` over the ``size`` channels around it
    (``F.local_response_norm``).

    >>> import tinyattn as ta
    >>> LocalResponseNorm(1, alpha=1.0, beta=1.0)(ta.tensor([[[2.0]]]))
    tensor([[[0.4]]])
    """

    def __init__(self, size, alpha=1e-4, beta=0.75, k=1.0):
        super().__init__()
        self.size, self.alpha, self.beta, self.k = size, alpha, beta, k

    def forward(self, input):
        return F.local_response_norm(input, self.size, self.alpha, self.beta, self.k)

    def extra_repr(self):
        return f"{self.size}, alpha={self.alpha}, beta={self.beta}, k={self.k}"


class _LazyNorm:
    """A per-channel normalisation whose ``num_features`` is the channel count of the first input it sees, as
    PyTorch's lazy layers: until then ``weight``, ``bias`` and the running statistics are empty ``(0,)``; the first
    call gives them their shape and initial values in place (the objects stay the same, so an optimizer built
    before the call still holds them), and the module becomes ``cls_to_become``."""

    cls_to_become = None

    def __init__(self, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True, device=None, dtype=None, *,
                 bias=True):
        super().__init__(0, eps, momentum, affine, track_running_stats, device, dtype, bias=bias)

    def forward(self, input):
        self.initialize_parameters(input)
        return self.forward(input)  # the module is a cls_to_become from now on

    def initialize_parameters(self, input):
        """Shape the parameters and buffers for ``input``'s channels, then reset them to their initial values."""
        self._check_input_dim(input)
        batched = self.batched_ndim is None or input.ndim == self.batched_ndim  # (an instance norm's (C, …): 0)
        self.num_features = input.shape[1 if batched else 0]
        for tensor in (self.weight, self.bias, self.running_mean, self.running_var):
            if tensor is not None:
                tensor._data = backend.namespace(tensor._data).empty((self.num_features,), dtype=tensor.dtype)
        self.reset_parameters()
        self.__class__ = self.cls_to_become


class LazyBatchNorm1d(_LazyNorm, BatchNorm1d):
    """``BatchNorm1d`` whose ``num_features`` is the first input's channel count.

    >>> import tinyattn as ta
    >>> norm = LazyBatchNorm1d()
    >>> norm(ta.randn(4, 3)).shape, norm
    ((4, 3), BatchNorm1d(3, eps=1e-05, momentum=0.1, affine=True, bias=True, track_running_stats=True))
    """

    cls_to_become = BatchNorm1d


class LazyBatchNorm2d(_LazyNorm, BatchNorm2d):
    """``BatchNorm2d`` whose ``num_features`` is the first input's channel count.

    >>> import tinyattn as ta
    >>> norm = LazyBatchNorm2d()
    >>> _ = norm(ta.randn(2, 5, 3, 3))
    >>> type(norm).__name__, norm.running_mean.shape
    ('BatchNorm2d', (5,))
    """

    cls_to_become = BatchNorm2d


class LazyBatchNorm3d(_LazyNorm, BatchNorm3d):
    """``BatchNorm3d`` whose ``num_features`` is the first input's channel count.

    >>> import tinyattn as ta
    >>> norm = LazyBatchNorm3d(affine=False)
    >>> _ = norm(ta.randn(2, 4, 2, 2, 2))
    >>> norm.num_features, norm.weight
    (4, None)
    """

    cls_to_become = BatchNorm3d


class LazyInstanceNorm1d(_LazyNorm, InstanceNorm1d):
    """``InstanceNorm1d`` whose ``num_features`` is the first input's channel count (PyTorch's lazy defaults,
    unlike ``InstanceNorm1d``'s: ``affine=True``, ``track_running_stats=True``).

    >>> import tinyattn as ta
    >>> norm = LazyInstanceNorm1d()
    >>> _ = norm(ta.randn(2, 3, 5))
    >>> norm.weight.shape
    (3,)
    """

    cls_to_become = InstanceNorm1d


class LazyInstanceNorm2d(_LazyNorm, InstanceNorm2d):
    """``InstanceNorm2d`` whose ``num_features`` is the first input's channel count.

    >>> import tinyattn as ta
    >>> norm = LazyInstanceNorm2d()
    >>> _ = norm(ta.randn(2, 3, 4, 4))
    >>> norm.running_var.shape
    (3,)
    """

    cls_to_become = InstanceNorm2d


class LazyInstanceNorm3d(_LazyNorm, InstanceNorm3d):
    """``InstanceNorm3d`` whose ``num_features`` is the first input's channel count.

    >>> import tinyattn as ta
    >>> LazyInstanceNorm3d()(ta.randn(3, 2, 2, 2)).shape
    (3, 2, 2, 2)
    """

    cls_to_become = InstanceNorm3d
