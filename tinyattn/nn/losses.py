"""Floor 4: ``torch.nn.functional``'s losses, each composed from the primitives in ``tinyattn.ops``.

Every loss computes a per-element (or per-sample) loss as PyTorch's documentation writes it, then reduces it:
``reduction="mean"`` averages, ``"sum"`` sums, ``"none"`` returns it as it is. PyTorch's deprecated
``size_average`` and ``reduce`` arguments are accepted and mapped onto ``reduction`` as PyTorch maps them.
Gradient, JVP, batching rule and second derivative come from the primitives.

>>> import tinyattn as ta
>>> import tinyattn.nn.functional as F
>>> F.l1_loss(ta.tensor([1.0, -1.0]), ta.tensor([0.0, 0.0])).item()
1.0
"""

import math

from .. import backend, ops
from ..engine import Tensor
from .activations import logsigmoid
from .distances import pairwise_distance

__all__ = ["mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "nll_loss", "kl_div", "binary_cross_entropy",
           "binary_cross_entropy_with_logits", "soft_margin_loss", "margin_ranking_loss", "hinge_embedding_loss",
           "cosine_embedding_loss", "poisson_nll_loss", "gaussian_nll_loss", "multilabel_soft_margin_loss",
           "multi_margin_loss", "multilabel_margin_loss", "triplet_margin_loss", "triplet_margin_with_distance_loss"]


def legacy_reduction(size_average, reduce, reduction):
    """PyTorch's mapping of the deprecated ``size_average`` and ``reduce`` onto ``reduction``."""
    if size_average is None and reduce is None:
        return reduction
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    return ("mean" if size_average else "sum") if reduce else "none"


def reduce_loss(losses, reduction, name):
    """``losses`` averaged (``"mean"``), summed (``"sum"``) or as they are (``"none"``)."""
    if reduction == "mean":
        return losses.mean()
    if reduction == "sum":
        return losses.sum()
    if reduction == "none":
        return losses
    raise ValueError(f"{name}: reduction must be 'mean', 'sum' or 'none', got {reduction!r}")


def mse_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    """The squared error ``(input - target)²`` (times ``weight`` where given), reduced.

    ``input``, ``target``: tensors of one shape (or broadcastable); ``reduction``: how to combine the elements.

    >>> import tinyattn as ta
    >>> import tinyattn.nn.functional as F
    >>> F.mse_loss(ta.tensor([1.0, 3.0]), ta.tensor([0.0, 0.0]), reduction="sum").item()
    10.0
    """
    squared = (input - target) ** 2
    if weight is not None:
        squared = squared * weight
    return reduce_loss(squared, legacy_reduction(size_average, reduce, reduction), "mse_loss")


def l1_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    """The absolute error ``|input - target|`` (times ``weight`` where given), reduced.

    >>> import tinyattn as ta
    >>> l1_loss(ta.tensor([1.0, -3.0]), ta.tensor([0.0, 0.0]), reduction="none")
    tensor([1., 3.])
    """
    absolute = (input - target).abs()
    if weight is not None:
        absolute = absolute * weight
    return reduce_loss(absolute, legacy_reduction(size_average, reduce, reduction), "l1_loss")


def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction="mean", beta=1.0):
    """With ``d = |input - target|``: ``0.5 d² / beta`` where ``d < beta``, else ``d - 0.5 beta``
    (``beta = 0``: the L1 loss), reduced.

    >>> import tinyattn as ta
    >>> smooth_l1_loss(ta.tensor([0.5, 3.0]), ta.tensor([0.0, 0.0]), reduction="none")
    tensor([0.125, 2.5  ])
    """
    if beta < 0:
        raise ValueError(f"smooth_l1_loss: beta must be at least 0, got {beta}")
    distance = (input - target).abs()
    losses = distance if beta == 0 else ops.where(distance < beta, 0.5 * distance * distance / beta,
                                                  distance - 0.5 * beta)
    return reduce_loss(losses, legacy_reduction(size_average, reduce, reduction), "smooth_l1_loss")


def huber_loss(input, target, reduction="mean", delta=1.0, weight=None):
    """With ``d = |input - target|``: ``0.5 d²`` where ``d < delta``, else ``delta · (d - 0.5 delta)``, reduced.

    >>> import tinyattn as ta
    >>> huber_loss(ta.tensor([0.5, 3.0]), ta.tensor([0.0, 0.0]), reduction="none")
    tensor([0.125, 2.5  ])
    """
    if delta <= 0:
        raise ValueError(f"huber_loss: delta must be positive, got {delta}")
    distance = (input - target).abs()
    losses = ops.where(distance < delta, 0.5 * distance * distance, delta * (distance - 0.5 * delta))
    if weight is not None:
        losses = losses * weight
    return reduce_loss(losses, reduction, "huber_loss")


def _index_array(indices, like, name):
    """``indices`` (tensor, backend array, list) as an integer array on ``like``'s device."""
    data = indices._data if isinstance(indices, Tensor) else indices
    if not backend.is_array(data):
        data = Tensor(data, device=like.device)._data
    if data.dtype.kind not in "iu":
        raise TypeError(f"{name}: indices must be integers (int64 as in PyTorch), got dtype {data.dtype}")
    if backend.device_of(data) != like.device:
        raise RuntimeError(
            f"{name}: indices are on device {backend.device_of(data)!r}, the weight on {like.device!r}; "
            "move them with .to(device)"
        )
    return data


def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean"):
    """The negative log-likelihood ``-weight[t] · input[n, t]`` at each target class ``t = target[n]``.

    ``input``: log-probabilities ``(N, C)``, ``(N, C, d1, …)`` or unbatched ``(C,)``; ``target``: class indices
    ``(N,)``, ``(N, d1, …)`` or ``()``; ``weight``: one weight per class; ``ignore_index``: targets equal to it add
    nothing. ``reduction="mean"`` divides the sum by the total weight of the kept targets (NaN when none is kept,
    as in PyTorch).

    >>> import tinyattn as ta
    >>> import tinyattn.nn.functional as F
    >>> log_p = ta.tensor([[-1.0, -2.0], [-3.0, -4.0]])
    >>> F.nll_loss(log_p, ta.tensor([0, 1])).item(), F.nll_loss(log_p, ta.tensor([0, -100])).item()
    (2.5, 1.0)
    """
    reduction = legacy_reduction(size_average, reduce, reduction)
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"nll_loss: reduction must be 'mean', 'sum' or 'none', got {reduction!r}")
    target_data = _index_array(target, input, "nll_loss")
    target = target if isinstance(target, Tensor) else Tensor._wrap(target_data)
    if input.ndim == 0:
        raise ValueError("nll_loss: expected log-probabilities of shape (C,), (N, C) or (N, C, d…), got shape ()")
    unbatched = input.ndim == 1
    expected = () if unbatched else (input.shape[0],) + tuple(input.shape[2:])
    if target.shape != expected:
        raise ValueError(f"nll_loss: input of shape {input.shape} needs targets of shape {expected}, "
                         f"got {target.shape}")
    num_classes = input.shape[0 if unbatched else 1]
    if weight is not None and tuple(weight.shape) != (num_classes,):
        raise ValueError(f"nll_loss: weight must have one entry per class ({num_classes},), got {weight.shape}")
    bad = ((target_data < 0) | (target_data >= num_classes)) & (target_data != ignore_index)
    if bool(bad.any()):
        value = int(backend.to_numpy(target_data[bad])[0])
        raise IndexError(f"nll_loss: target {value} is out of bounds for {num_classes} classes")
    log_p = input.reshape(1, -1) if unbatched else input  # (N, C, d…)
    if log_p.ndim > 2:  # (N, C, d…) -> (M, C): the classes moved last, the rest in order
        log_p = log_p.permute(0, *range(2, log_p.ndim), 1).reshape(-1, num_classes)
    flat_target = target.reshape(-1)  # (M,)
    valid = flat_target != ignore_index  # (M,), boolean
    safe = ops.where(valid, flat_target, 0)  # (M,): an ignored target picks class 0, then counts zero
    rows = Tensor._wrap(backend.namespace(target_data).arange(flat_target.shape[0]))
    picked = log_p[rows, safe]  # (M,): log p[t_i]
    weights = valid.to(input.dtype) if weight is None else ops.where(valid, weight[safe], 0.0)  # (M,)
    losses = -picked * weights
    if reduction == "none":
        return losses.reshape(expected)
    if reduction == "sum":
        return losses.sum()
    return losses.sum() / weights.sum()


def kl_div(input, target, size_average=None, reduce=None, reduction="mean", log_target=False):
    """The Kullback-Leibler divergence ``target · (log target - input)`` for log-probabilities ``input``.

    Taken as 0 where ``target`` is 0. ``target``: probabilities, or log-probabilities with ``log_target=True``
    (then ``e^target · (target - input)``). ``reduction``: ``"mean"`` (over elements), ``"batchmean"``
    (sum / batch size), ``"sum"`` or ``"none"``.

    >>> import math
    >>> import tinyattn as ta
    >>> import tinyattn.nn.functional as F
    >>> log_q = ta.tensor([[math.log(0.5), math.log(0.5)]])
    >>> round(F.kl_div(log_q, ta.tensor([[1.0, 0.0]]), reduction="batchmean").item(), 4)   # log 2
    0.6931
    """
    reduction = legacy_reduction(size_average, reduce, reduction)
    if log_target:
        losses = target.exp() * (target - input)
    else:
        positive = target > 0
        log_target_values = ops.where(positive, target, 1.0).log()
        losses = ops.where(positive, target * (log_target_values - input), 0.0)
    if reduction == "batchmean":
        return losses.sum() / (input.shape[0] if input.ndim else 1)
    return reduce_loss(losses, reduction, "kl_div")


def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None, reduction="mean"):
    """``-weight · (y log x + (1 - y) log(1 - x))`` for probabilities ``x = input`` and targets ``y``; each log is
    clamped at -100, as in PyTorch, so that a probability of exactly 0 or 1 gives a finite loss.

    >>> import tinyattn as ta
    >>> round(binary_cross_entropy(ta.tensor([0.5]), ta.tensor([1.0])).item(), 4)
    0.6931
    """
    if tuple(target.shape) != tuple(input.shape):
        raise ValueError(f"Using a target size ({target.shape}) that is different to the input size ({input.shape}) "
                         "is deprecated. Please ensure they have the same size.")
    if bool(((input._data < 0) | (input._data > 1)).any()):
        raise RuntimeError("all elements of input should be between 0 and 1")

    def clamped_log(p):
        log = p.log()
        return ops.where(log < -100, -100.0, log)

    losses = -(target * clamped_log(input) + (1 - target) * clamped_log(1 - input))
    if weight is not None:
        losses = losses * weight
    return reduce_loss(losses, legacy_reduction(size_average, reduce, reduction), "binary_cross_entropy")


def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None, reduce=None, reduction="mean",
                                     pos_weight=None):
    """The binary cross entropy of ``σ(x)``, from the logits ``x`` and written without ``σ`` so that it stays
    finite: ``(1 - y) x - (1 + (pos_weight - 1) y) · log σ(x)``, times ``weight`` where given.

    >>> import tinyattn as ta
    >>> round(binary_cross_entropy_with_logits(ta.tensor([0.0]), ta.tensor([1.0])).item(), 4)
    0.6931
    """
    if tuple(target.shape) != tuple(input.shape):
        raise ValueError(f"Target size ({target.shape}) must be the same as input size ({input.shape})")
    log_weight = 1 if pos_weight is None else (pos_weight - 1) * target + 1
    losses = (1 - target) * input - log_weight * logsigmoid(input)
    if weight is not None:
        losses = losses * weight
    return reduce_loss(losses, legacy_reduction(size_average, reduce, reduction), "binary_cross_entropy_with_logits")


def soft_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """The logistic loss ``log(1 + e^(-y x))``, reduced; computed as PyTorch computes it, so that it overflows
    where PyTorch's does (in float16, once ``-y x`` passes about 11).

    >>> import tinyattn as ta
    >>> round(soft_margin_loss(ta.tensor([0.0]), ta.tensor([1.0])).item(), 4)
    0.6931
    """
    losses = (1 + (-target * input).exp()).log()
    return reduce_loss(losses, legacy_reduction(size_average, reduce, reduction), "soft_margin_loss")


def margin_ranking_loss(input1, input2, target, margin=0.0, size_average=None, reduce=None, reduction="mean"):
    """``max(0, -y · (x1 - x2) + margin)``, reduced.

    >>> import tinyattn as ta
    >>> margin_ranking_loss(ta.tensor([1.0]), ta.tensor([2.0]), ta.tensor([1.0])).item()
    1.0
    """
    losses = ops.relu(-target * (input1 - input2) + margin)
    return reduce_loss(losses, legacy_reduction(size_average, reduce, reduction), "margin_ranking_loss")


def hinge_embedding_loss(input, target, margin=1.0, size_average=None, reduce=None, reduction="mean"):
    """PyTorch's definition: ``x`` where ``y ≠ -1``, plus ``max(0, margin - x)`` where ``y ≠ 1`` (for targets of
    ±1: ``x`` for ``y = 1``, ``max(0, margin - x)`` for ``y = -1``), reduced.

    >>> import tinyattn as ta
    >>> hinge_embedding_loss(ta.tensor([0.3, 0.3]), ta.tensor([1.0, -1.0]), reduction="none")
    tensor([0.3, 0.7])
    """
    margin_part = ops.where(target != 1, ops.relu(margin - input), 0.0)
    self_part = ops.where(target != -1, input, 0.0)
    return reduce_loss(margin_part + self_part, legacy_reduction(size_average, reduce, reduction),
                       "hinge_embedding_loss")


def cosine_embedding_loss(input1, input2, target, margin=0.0, size_average=None, reduce=None, reduction="mean"):
    """With ``cos`` the cosine similarity of ``x1`` and ``x2`` along the last dimension: ``1 - cos`` where
    ``y = 1``, ``max(0, cos - margin)`` where ``y = -1`` (0 for other targets), reduced.

    >>> import tinyattn as ta
    >>> cosine_embedding_loss(ta.tensor([[1.0, 0.0]]), ta.tensor([[0.0, 1.0]]), ta.tensor([1.0])).item()
    1.0
    """
    if input1.ndim not in (1, 2) or input1.shape != input2.shape:
        raise ValueError(f"cosine_embedding_loss: inputs must be 1-d or 2-d and of one shape, got {input1.shape} "
                         f"and {input2.shape}")
    dim = input1.ndim - 1
    eps = 1e-12  # PyTorch's, added to each squared magnitude
    product = (input1 * input2).sum(dim)
    magnitudes = (((input1 * input1).sum(dim) + eps) * ((input2 * input2).sum(dim) + eps)).sqrt()
    cos = product / magnitudes
    losses = ops.where(target == 1, 1 - cos, 0.0) + ops.where(target == -1, ops.relu(cos - margin), 0.0)
    return reduce_loss(losses, legacy_reduction(size_average, reduce, reduction), "cosine_embedding_loss")


def poisson_nll_loss(input, target, log_input=True, full=False, size_average=None, eps=1e-8, reduce=None,
                     reduction="mean"):
    """The Poisson negative log-likelihood: ``e^x - y x`` for a log-rate ``x`` (``log_input=True``), else
    ``x - y log(x + eps)``; ``full=True`` adds Stirling's ``y log y - y + ½ log(2π y)`` where ``y > 1``.

    >>> import tinyattn as ta
    >>> poisson_nll_loss(ta.tensor([0.0]), ta.tensor([1.0])).item()
    1.0
    """
    reduction = legacy_reduction(size_average, reduce, reduction)
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"poisson_nll_loss: reduction must be 'mean', 'sum' or 'none', got {reduction!r}")
    losses = input.exp() - target * input if log_input else input - target * (input + eps).log()
    if full:
        counted = target > 1
        safe = ops.where(counted, target, 2.0)  # the log never sees a target of 0 (the "double where")
        stirling = safe * safe.log() - safe + 0.5 * (2 * math.pi * safe).log()
        losses = losses + ops.where(counted, stirling, 0.0)
    return reduce_loss(losses, reduction, "poisson_nll_loss")


def gaussian_nll_loss(input, target, var, full=False, eps=1e-6, reduction="mean"):
    """The Gaussian negative log-likelihood ``½ (log v + (x - y)² / v)`` (``full``: plus ``½ log 2π``).

    ``var``: one variance per element, or one fewer dimension (or a size-1 one) shared along it, or a number.
    The variance is clamped at ``eps`` with its gradient passing unchanged, as PyTorch clamps it under
    ``no_grad``.

    >>> import tinyattn as ta
    >>> gaussian_nll_loss(ta.tensor([1.0]), ta.tensor([1.0]), ta.tensor([1.0])).item()
    0.0
    """
    if isinstance(var, (int, float)):
        if var < 0:
            raise ValueError("var has negative entry/entries")
        var = ops.expand(Tensor(float(var), dtype=input.dtype, device=input.device), *input.shape)
    elif bool((var._data < 0).any()):
        raise ValueError("var has negative entry/entries")
    if tuple(var.shape) != tuple(input.shape):
        if tuple(input.shape[:-1]) == tuple(var.shape):
            var = var.unsqueeze(-1)  # homoscedastic: one variance shared along the last dimension
        elif not (input.ndim == var.ndim and sum(v for i, v in zip(input.shape, var.shape) if i != v) == 1):
            raise ValueError("var is of incorrect size")
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(reduction + " is not valid")
    floor = backend.namespace(var._data).maximum(var._data, eps)
    var = var + Tensor._wrap(floor - var._data, var)  # clamped at eps, the gradient passing as through identity
    losses = 0.5 * (var.log() + (input - target) ** 2 / var)
    if full:
        losses = losses + 0.5 * math.log(2 * math.pi)
    return reduce_loss(losses, reduction, "gaussian_nll_loss")


def multilabel_soft_margin_loss(input, target, weight=None, size_average=None, reduce=None, reduction="mean"):
    """``-mean_c (y_c log σ(x_c) + (1 - y_c) log σ(-x_c))`` over the classes (the last dimension), each term
    times ``weight`` where given, then reduced over the samples.

    >>> import tinyattn as ta
    >>> round(multilabel_soft_margin_loss(ta.tensor([[0.0, 0.0]]), ta.tensor([[1.0, 0.0]])).item(), 4)
    0.6931
    """
    losses = -(target * logsigmoid(input) + (1 - target) * logsigmoid(-input))
    if weight is not None:
        losses = losses * weight
    losses = losses.sum(input.ndim - 1) / input.shape[-1]  # (N,): one loss per sample
    return reduce_loss(losses, legacy_reduction(size_average, reduce, reduction), "multilabel_soft_margin_loss")


def multi_margin_loss(input, target, p=1, margin=1.0, weight=None, size_average=None, reduce=None,
                      reduction="mean"):
    """The multi-class hinge loss of each sample, with ``y`` its target class and ``C`` the classes:
    ``Σ_{i ≠ y} w[y] · max(0, margin - x[y] + x[i])^p / C``, then reduced over the samples.

    >>> import tinyattn as ta
    >>> multi_margin_loss(ta.tensor([[1.0, 0.0]]), ta.tensor([0])).item()
    0.0
    """
    if p not in (1, 2):
        raise ValueError(f"multi_margin_loss: only p == 1 and p == 2 are supported, got {p}")
    reduction = legacy_reduction(size_average, reduce, reduction)
    if input.ndim > 2:
        raise ValueError(f"multi_margin_loss: expected an input of 0, 1 or 2 dimensions, got shape {input.shape}")
    unbatched = input.ndim < 2
    scores = input.reshape(1, -1) if unbatched else input  # (N, C)
    target_data = _index_array(target, input, "multi_margin_loss").reshape(-1)  # (N,)
    num_classes = scores.shape[1]
    if target_data.shape[0] != scores.shape[0]:
        raise ValueError(f"multi_margin_loss: input {input.shape} needs one target per sample, got {target_data.shape}")
    if bool(((target_data < 0) | (target_data >= num_classes)).any()):
        raise IndexError(f"multi_margin_loss: a target is out of bounds for {num_classes} classes")
    xp = backend.namespace(target_data)
    rows = Tensor._wrap(xp.arange(target_data.shape[0]))
    classes = Tensor._wrap(target_data)
    picked = scores[rows, classes].unsqueeze(1)  # (N, 1): x[y]
    hinge = ops.relu(margin - picked + scores)  # (N, C)
    if p == 2:
        hinge = hinge * hinge
    if weight is not None:
        hinge = hinge * weight[classes].unsqueeze(1)
    others = Tensor._wrap(xp.arange(num_classes)[None, :] != target_data[:, None])  # (N, C): i ≠ y
    losses = ops.where(others, hinge, 0.0).sum(1) / num_classes  # (N,)
    if unbatched:
        losses = losses.reshape(())
    return reduce_loss(losses, reduction, "multi_margin_loss")


def multilabel_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """The multi-label hinge loss of each sample: with ``Y`` its target classes (``target``'s entries up to the
    first -1) and ``C`` the classes, ``Σ_{j ∈ Y} Σ_{i ∉ Y} max(0, 1 - (x[j] - x[i])) / C``, then reduced.

    >>> import tinyattn as ta
    >>> round(multilabel_margin_loss(ta.tensor([[0.1, 0.2, 0.4, 0.8]]), ta.tensor([[3, 0, -1, 1]])).item(), 4)
    0.85
    """
    reduction = legacy_reduction(size_average, reduce, reduction)
    if input.ndim > 2:
        raise ValueError(f"multilabel_margin_loss: expected an input of 0, 1 or 2 dimensions, got {input.shape}")
    unbatched = input.ndim < 2
    scores = input.reshape(1, -1) if unbatched else input  # (N, C)
    target_data = _index_array(target, input, "multilabel_margin_loss").reshape(scores.shape)  # (N, C)
    num_classes = scores.shape[1]
    if bool(((target_data < -1) | (target_data >= num_classes)).any()):
        raise IndexError(f"multilabel_margin_loss: a target is out of bounds for {num_classes} classes")
    xp = backend.namespace(target_data)
    listed = xp.cumprod(target_data != -1, axis=1).astype(bool)  # (N, C): the slots before the first -1
    safe = xp.where(listed, target_data, 0)
    rows = xp.arange(num_classes)
    is_target = ((safe[:, :, None] == rows[None, None, :]) & listed[:, :, None]).any(axis=1)  # (N, C)
    picked = scores[Tensor._wrap(xp.arange(scores.shape[0])[:, None]), Tensor._wrap(safe)]  # (N, C): x[j] per slot
    hinge = ops.relu(1 - picked.unsqueeze(2) + scores.unsqueeze(1))  # (N, slots, C): 1 - (x[j] - x[i])
    counted = Tensor._wrap(listed[:, :, None] & ~is_target[:, None, :])  # (N, slots, C): j ∈ Y, i ∉ Y
    losses = ops.where(counted, hinge, 0.0).sum((1, 2)) / num_classes  # (N,)
    if unbatched:
        losses = losses.reshape(())
    return reduce_loss(losses, reduction, "multilabel_margin_loss")


def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2, eps=1e-6, swap=False, size_average=None,
                        reduce=None, reduction="mean"):
    """``max(0, margin + d(a, p) - d(a, n))`` with ``d`` the ``p``-norm distance ``pairwise_distance``
    (``swap``: ``d(a, n)`` replaced by ``d(p, n)`` where that is smaller), reduced.

    >>> import tinyattn as ta
    >>> a, p_, n = ta.tensor([[0.0, 0.0]]), ta.tensor([[0.0, 1.0]]), ta.tensor([[3.0, 4.0]])
    >>> triplet_margin_loss(a, p_, n).item()
    0.0
    """
    def distance(x1, x2):
        return pairwise_distance(x1, x2, p, eps)

    return triplet_margin_with_distance_loss(anchor, positive, negative, distance_function=distance, margin=margin,
                                             swap=swap, reduction=legacy_reduction(size_average, reduce, reduction))


def triplet_margin_with_distance_loss(anchor, positive, negative, *, distance_function=None, margin=1.0,
                                      swap=False, reduction="mean"):
    """``max(0, margin + d(a, p) - d(a, n))`` for any distance function ``d`` (default: ``pairwise_distance``);
    ``swap``: ``d(a, n)`` replaced by ``d(p, n)`` where that is smaller (Balntas et al., 2016), reduced.

    >>> import tinyattn as ta
    >>> a, p_, n = ta.tensor([[0.0, 0.0]]), ta.tensor([[0.0, 1.0]]), ta.tensor([[0.0, 1.5]])
    >>> triplet_margin_with_distance_loss(a, p_, n).item()
    0.5
    """
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    if margin <= 0:
        raise ValueError(f"triplet_margin_with_distance_loss: margin must be greater than 0, got {margin}")
    if not anchor.ndim == positive.ndim == negative.ndim:
        raise RuntimeError(f"The anchor, positive, and negative tensors are expected to have the same number of "
                           f"dimensions, but got: anchor {anchor.ndim}D, positive {positive.ndim}D, and negative "
                           f"{negative.ndim}D inputs")
    distance_function = pairwise_distance if distance_function is None else distance_function
    positive_distance = distance_function(anchor, positive)
    negative_distance = distance_function(anchor, negative)
    if swap:
        swapped = distance_function(positive, negative)
        negative_distance = ops.where(swapped < negative_distance, swapped, negative_distance)
    losses = ops.relu(margin + positive_distance - negative_distance)
    return reduce_loss(losses, reduction, "triplet_margin_with_distance_loss")
