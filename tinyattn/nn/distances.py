"""Floor 4: distances and similarities between vectors (``torch.nn.functional``'s and ``torch.cdist``).

Each is a ``p``-norm of differences, or a product of normalised vectors, composed from the primitives in
``tinyattn.ops`` (gradient, JVP, batching rule and second derivative come from theirs).

>>> import tinyattn as ta
>>> import tinyattn.nn.functional as F
>>> F.pairwise_distance(ta.tensor([[0.0, 0.0]]), ta.tensor([[3.0, 4.0]]), eps=0.0)
tensor([5.])
"""

import math

import numpy as np

from .. import backend, ops
from ..engine import Tensor

__all__ = ["pairwise_distance", "cosine_similarity", "pdist", "cdist"]


def p_norm(v, p, dim, keepdim=False):
    """``(Σ |v|^p)^(1/p)`` along ``dim``: the sum of ``|v|`` for ``p = 1``, ``√Σ v²`` for 2, the largest ``|v|`` for
    ``inf`` (the smallest for ``-inf``), the count of nonzero entries for 0."""
    if p == 2:
        return (v * v).sum(dim, keepdim=keepdim).sqrt()
    magnitude = v.abs()
    if p == 1:
        return magnitude.sum(dim, keepdim=keepdim)
    if p == math.inf:
        return magnitude.amax(dim, keepdim=keepdim)
    if p == -math.inf:
        return -(-magnitude).amax(dim, keepdim=keepdim)
    if p == 0:  # 1 per nonzero entry, its gradient 0 (still in the graph, as PyTorch's is)
        return ops.where(v != 0, 1.0, v * 0).sum(dim, keepdim=keepdim)
    return (magnitude ** p).sum(dim, keepdim=keepdim) ** (1.0 / p)


def pairwise_distance(x1, x2, p=2.0, eps=1e-6, keepdim=False):
    """``‖x1 - x2 + eps‖_p`` along the last dimension (the two broadcast), as PyTorch computes it.

    >>> import tinyattn as ta
    >>> pairwise_distance(ta.tensor([1.0, 1.0]), ta.tensor([0.0, 0.0]), p=1.0, eps=0.0)
    tensor(2.)
    """
    difference = x1 - x2 + eps
    if difference.ndim == 0:  # PyTorch's norm over the one "dimension" of a 0-d tensor
        return p_norm(difference.reshape(1), p, 0, keepdim=False).reshape(())
    return p_norm(difference, p, difference.ndim - 1, keepdim=keepdim)


def _floored(norm, eps):
    """``max(norm, eps)`` with the gradient of ``norm`` passing unchanged (PyTorch clamps under ``no_grad``)."""
    floor = backend.namespace(norm._data).maximum(norm._data, eps)
    return norm + Tensor._wrap(floor - norm._data, norm)


def cosine_similarity(x1, x2, dim=1, eps=1e-8):
    """``Σ (x1 / max(‖x1‖, eps)) · (x2 / max(‖x2‖, eps))`` along ``dim`` (the inputs broadcast first), as
    PyTorch computes it: each vector normalised before the product.

    >>> import tinyattn as ta
    >>> [round(v, 4) for v in cosine_similarity(ta.tensor([[1.0, 0.0]]), ta.tensor([[1.0, 1.0]])).tolist()]
    [0.7071]
    """
    shape = tuple(np.broadcast_shapes(x1.shape, x2.shape))
    x1, x2 = ops.expand(x1, *shape), ops.expand(x2, *shape)
    if len(shape) == 0:
        x1, x2, dim = x1.reshape(1), x2.reshape(1), 0
    norm1 = _floored(p_norm(x1, 2, dim, keepdim=True), eps)
    norm2 = _floored(p_norm(x2, 2, dim, keepdim=True), eps)
    similarity = ((x1 / norm1) * (x2 / norm2)).sum(dim)
    return similarity.reshape(()) if len(shape) == 0 else similarity


def pdist(input, p=2.0):
    """The ``p``-norm distances between every pair of rows ``i < j`` of ``input (N, M)``, in row order:
    ``(N (N - 1) / 2,)``.

    >>> import tinyattn as ta
    >>> pdist(ta.tensor([[0.0, 0.0], [3.0, 4.0], [0.0, 1.0]]))
    tensor([5.       , 1.       , 4.2426405])
    """
    if input.ndim != 2:
        raise RuntimeError(f"pdist only supports 2D tensors, got: {input.ndim}D")
    if p < 0:
        raise RuntimeError(f"pdist only supports non-negative p values, got {p}")
    xp = backend.namespace(input._data)
    first, second = xp.triu_indices(input.shape[0], 1)  # (pairs,), (pairs,)
    difference = input[Tensor._wrap(first)] - input[Tensor._wrap(second)]  # (pairs, M)
    return p_norm(difference, p, 1)


def cdist(x1, x2, p=2.0, compute_mode="use_mm_for_euclid_dist_if_necessary"):
    """The ``p``-norm distance between each row of ``x1 (…, P, M)`` and each row of ``x2 (…, R, M)``:
    ``(…, P, R)``, the leading dimensions broadcast. Computed from the differences in every ``compute_mode``
    (PyTorch's matrix-product form for ``p = 2`` agrees with it to rounding).

    >>> import tinyattn as ta
    >>> cdist(ta.tensor([[0.0, 0.0]]), ta.tensor([[3.0, 4.0], [0.0, 1.0]]))
    tensor([[5., 1.]])
    """
    if x1.ndim < 2 or x2.ndim < 2:
        raise RuntimeError(f"cdist only supports at least 2D tensors, X1 got: {x1.ndim}D, X2 got: {x2.ndim}D")
    if x1.shape[-1] != x2.shape[-1]:
        raise RuntimeError(f"X1 and X2 must have the same number of columns. X1: {x1.shape[-1]} X2: {x2.shape[-1]}")
    if p < 0:
        raise RuntimeError(f"cdist only supports non-negative p values, got {p}")
    difference = x1.unsqueeze(-2) - x2.unsqueeze(-3)  # (…, P, R, M)
    return p_norm(difference, p, difference.ndim - 1)  # (…, P, R)
