"""Floor 5: the losses of ``nn.losses`` as modules, each a thin wrapper over its function, with PyTorch's name,
constructor arguments and defaults.

PyTorch's deprecated ``size_average`` and ``reduce`` are accepted and folded into ``reduction`` at construction,
as PyTorch folds them. A per-class or per-element ``weight`` (and ``BCEWithLogitsLoss``'s ``pos_weight``) is kept
as a buffer, as in PyTorch, so that ``to()`` moves it and ``state_dict()`` holds it.

>>> import tinyattn as ta
>>> from tinyattn import nn
>>> nn.L1Loss(reduction="sum")(ta.tensor([1.0, -2.0]), ta.tensor([0.0, 0.0])).item()
3.0
"""

from . import functional as F
from .losses import legacy_reduction
from .module import Module


class _Loss(Module):
    """A loss module: ``reduction`` (with PyTorch's legacy arguments folded in)."""

    def __init__(self, size_average=None, reduce=None, reduction="mean"):
        super().__init__()
        self.reduction = legacy_reduction(size_average, reduce, reduction)


class _WeightedLoss(_Loss):
    """A loss module with a ``weight`` buffer (``None`` unless given)."""

    def __init__(self, weight=None, size_average=None, reduce=None, reduction="mean"):
        super().__init__(size_average, reduce, reduction)
        self.register_buffer("weight", weight)


class L1Loss(_Loss):
    """The mean absolute error ``|input - target|`` (``F.l1_loss``).

    >>> import tinyattn as ta
    >>> L1Loss()(ta.tensor([1.0, -3.0]), ta.tensor([0.0, 0.0])).item()
    2.0
    """

    def forward(self, input, target):
        return F.l1_loss(input, target, reduction=self.reduction)


class SmoothL1Loss(_Loss):
    """``0.5 (x - y)² / beta`` where ``|x - y| < beta``, else ``|x - y| - 0.5 beta`` (``F.smooth_l1_loss``).

    >>> import tinyattn as ta
    >>> SmoothL1Loss()(ta.tensor([0.5, 3.0]), ta.tensor([0.0, 0.0])).item()
    1.3125
    """

    def __init__(self, size_average=None, reduce=None, reduction="mean", beta=1.0):
        super().__init__(size_average, reduce, reduction)
        self.beta = beta

    def forward(self, input, target):
        return F.smooth_l1_loss(input, target, reduction=self.reduction, beta=self.beta)


class HuberLoss(_Loss):
    """``0.5 (x - y)²`` where ``|x - y| < delta``, else ``delta (|x - y| - 0.5 delta)`` (``F.huber_loss``).

    >>> import tinyattn as ta
    >>> HuberLoss(delta=2.0)(ta.tensor([3.0]), ta.tensor([0.0])).item()
    4.0
    """

    def __init__(self, reduction="mean", delta=1.0):
        super().__init__(reduction=reduction)
        self.delta = delta

    def forward(self, input, target):
        return F.huber_loss(input, target, reduction=self.reduction, delta=self.delta)


class BCELoss(_WeightedLoss):
    """The binary cross entropy of probabilities ``-(y log x + (1 - y) log(1 - x))`` (``F.binary_cross_entropy``).

    >>> import tinyattn as ta
    >>> round(BCELoss()(ta.tensor([0.5]), ta.tensor([1.0])).item(), 4)
    0.6931
    """

    def forward(self, input, target):
        return F.binary_cross_entropy(input, target, weight=self.weight, reduction=self.reduction)


class BCEWithLogitsLoss(_Loss):
    """The binary cross entropy of ``σ(x)`` from logits, computed stably (``F.binary_cross_entropy_with_logits``);
    ``pos_weight``: a weight for the positive class, per class.

    >>> import tinyattn as ta
    >>> round(BCEWithLogitsLoss()(ta.tensor([0.0]), ta.tensor([1.0])).item(), 4)
    0.6931
    """

    def __init__(self, weight=None, size_average=None, reduce=None, reduction="mean", pos_weight=None):
        super().__init__(size_average, reduce, reduction)
        self.register_buffer("weight", weight)
        self.register_buffer("pos_weight", pos_weight)

    def forward(self, input, target):
        return F.binary_cross_entropy_with_logits(input, target, self.weight, pos_weight=self.pos_weight,
                                                  reduction=self.reduction)


class SoftMarginLoss(_Loss):
    """The two-class logistic loss ``log(1 + e^(-y x))`` with targets ``±1`` (``F.soft_margin_loss``).

    >>> import tinyattn as ta
    >>> round(SoftMarginLoss()(ta.tensor([0.0]), ta.tensor([1.0])).item(), 4)
    0.6931
    """

    def forward(self, input, target):
        return F.soft_margin_loss(input, target, reduction=self.reduction)


class MarginRankingLoss(_Loss):
    """``max(0, -y (x1 - x2) + margin)`` with targets ``±1`` (``F.margin_ranking_loss``).

    >>> import tinyattn as ta
    >>> MarginRankingLoss(margin=1.0)(ta.tensor([1.0]), ta.tensor([0.5]), ta.tensor([1.0])).item()
    0.5
    """

    def __init__(self, margin=0.0, size_average=None, reduce=None, reduction="mean"):
        super().__init__(size_average, reduce, reduction)
        self.margin = margin

    def forward(self, input1, input2, target):
        return F.margin_ranking_loss(input1, input2, target, margin=self.margin, reduction=self.reduction)


class HingeEmbeddingLoss(_Loss):
    """``x`` where ``y = 1``, ``max(0, margin - x)`` where ``y = -1`` (``F.hinge_embedding_loss``).

    >>> import tinyattn as ta
    >>> HingeEmbeddingLoss()(ta.tensor([0.25, 0.25]), ta.tensor([1.0, -1.0])).item()
    0.5
    """

    def __init__(self, margin=1.0, size_average=None, reduce=None, reduction="mean"):
        super().__init__(size_average, reduce, reduction)
        self.margin = margin

    def forward(self, input, target):
        return F.hinge_embedding_loss(input, target, margin=self.margin, reduction=self.reduction)


class CosineEmbeddingLoss(_Loss):
    """``1 - cos(x1, x2)`` where ``y = 1``, ``max(0, cos(x1, x2) - margin)`` where ``y = -1``
    (``F.cosine_embedding_loss``).

    >>> import tinyattn as ta
    >>> CosineEmbeddingLoss()(ta.tensor([[1.0, 0.0]]), ta.tensor([[0.0, 1.0]]), ta.tensor([1.0])).item()
    1.0
    """

    def __init__(self, margin=0.0, size_average=None, reduce=None, reduction="mean"):
        super().__init__(size_average, reduce, reduction)
        self.margin = margin

    def forward(self, input1, input2, target):
        return F.cosine_embedding_loss(input1, input2, target, margin=self.margin, reduction=self.reduction)


class MultiMarginLoss(_WeightedLoss):
    """The multi-class hinge loss ``Σ_{i≠y} max(0, margin - x_y + x_i)^p / C`` (``F.multi_margin_loss``).

    >>> import tinyattn as ta
    >>> MultiMarginLoss()(ta.tensor([[0.0, 1.0]]), ta.tensor([1])).item()
    0.0
    """

    def __init__(self, p=1, margin=1.0, weight=None, size_average=None, reduce=None, reduction="mean"):
        super().__init__(weight, size_average, reduce, reduction)
        if p not in (1, 2):
            raise ValueError(f"MultiMarginLoss: only p == 1 and p == 2 are supported, got p={p}")
        if weight is not None and weight.ndim != 1:
            raise ValueError(f"MultiMarginLoss: weight must be a 1D tensor, got shape {weight.shape}")
        self.p, self.margin = p, margin

    def forward(self, input, target):
        return F.multi_margin_loss(input, target, p=self.p, margin=self.margin, weight=self.weight,
                                   reduction=self.reduction)


class MultiLabelMarginLoss(_Loss):
    """The multi-label hinge loss over the target classes listed in ``target`` (ended by ``-1``)
    (``F.multilabel_margin_loss``).

    >>> import tinyattn as ta
    >>> MultiLabelMarginLoss()(ta.tensor([[0.0, 2.0]]), ta.tensor([[1, -1]])).item()
    0.0
    """

    def forward(self, input, target):
        return F.multilabel_margin_loss(input, target, reduction=self.reduction)


class MultiLabelSoftMarginLoss(_WeightedLoss):
    """The binary cross entropy of every class's logit, averaged over the classes
    (``F.multilabel_soft_margin_loss``).

    >>> import tinyattn as ta
    >>> round(MultiLabelSoftMarginLoss()(ta.tensor([[0.0, 0.0]]), ta.tensor([[1.0, 0.0]])).item(), 4)
    0.6931
    """

    def forward(self, input, target):
        return F.multilabel_soft_margin_loss(input, target, weight=self.weight, reduction=self.reduction)


class TripletMarginLoss(_Loss):
    """``max(0, margin + d(a, p) - d(a, n))`` with the ``p``-norm distance (``F.triplet_margin_loss``).

    >>> import tinyattn as ta
    >>> a, pos, neg = ta.tensor([[0.0]]), ta.tensor([[1.0]]), ta.tensor([[1.5]])
    >>> round(TripletMarginLoss()(a, pos, neg).item(), 4)
    0.5
    """

    def __init__(self, margin=1.0, p=2.0, eps=1e-6, swap=False, size_average=None, reduce=None, reduction="mean"):
        super().__init__(size_average, reduce, reduction)
        if margin <= 0:
            raise ValueError(f"TripletMarginLoss: expected margin to be greater than 0, got {margin} instead")
        self.margin, self.p, self.eps, self.swap = margin, p, eps, swap

    def forward(self, anchor, positive, negative):
        return F.triplet_margin_loss(anchor, positive, negative, margin=self.margin, p=self.p, eps=self.eps,
                                     swap=self.swap, reduction=self.reduction)


class TripletMarginWithDistanceLoss(_Loss):
    """``max(0, margin + d(a, p) - d(a, n))`` for any ``distance_function`` (default ``pairwise_distance``)
    (``F.triplet_margin_with_distance_loss``).

    >>> import tinyattn as ta
    >>> a, pos, neg = ta.tensor([[0.0]]), ta.tensor([[1.0]]), ta.tensor([[1.5]])
    >>> TripletMarginWithDistanceLoss(distance_function=lambda x, y: (x - y).abs().sum(-1))(a, pos, neg).item()
    0.5
    """

    def __init__(self, *, distance_function=None, margin=1.0, swap=False, reduction="mean"):
        super().__init__(reduction=reduction)
        if margin <= 0:
            raise ValueError(f"TripletMarginWithDistanceLoss: expected margin to be greater than 0, got {margin} "
                             "instead")
        self.distance_function = distance_function if distance_function is not None else F.pairwise_distance
        self.margin, self.swap = margin, swap

    def forward(self, anchor, positive, negative):
        return F.triplet_margin_with_distance_loss(anchor, positive, negative,
                                                   distance_function=self.distance_function, margin=self.margin,
                                                   swap=self.swap, reduction=self.reduction)


class PoissonNLLLoss(_Loss):
    """The negative log-likelihood of a Poisson target: ``eˣ - y x`` (``log_input``) or ``x - y log(x + eps)``,
    with Stirling's term where ``full`` (``F.poisson_nll_loss``).

    >>> import tinyattn as ta
    >>> PoissonNLLLoss()(ta.tensor([0.0]), ta.tensor([2.0])).item()
    1.0
    """

    def __init__(self, log_input=True, full=False, size_average=None, eps=1e-8, reduce=None, reduction="mean"):
        super().__init__(size_average, reduce, reduction)
        self.log_input, self.full, self.eps = log_input, full, eps

    def forward(self, log_input, target):
        return F.poisson_nll_loss(log_input, target, log_input=self.log_input, full=self.full, eps=self.eps,
                                  reduction=self.reduction)


class GaussianNLLLoss(_Loss):
    """The negative log-likelihood of a Gaussian target: ``(log var + (x - y)² / var) / 2``, plus ``log(2π) / 2``
    where ``full``; ``var`` clamped to ``eps`` (``F.gaussian_nll_loss``).

    >>> import tinyattn as ta
    >>> GaussianNLLLoss()(ta.tensor([1.0]), ta.tensor([3.0]), ta.tensor([1.0])).item()
    2.0
    """

    def __init__(self, *, full=False, eps=1e-6, reduction="mean"):
        super().__init__(reduction=reduction)
        self.full, self.eps = full, eps

    def forward(self, input, target, var):
        return F.gaussian_nll_loss(input, target, var, full=self.full, eps=self.eps, reduction=self.reduction)
