"""Floor 4: the functional forms of the layers (softmax, layer_norm, cross_entropy, ...).

Each function takes tensors and returns a tensor, with PyTorch's names and defaults, and is
written here as the textbook writes it: the reference definition. Most are compositions of the
primitives in ``tinyattn.ops``; ``softmax``, ``log_softmax`` and ``layer_norm`` are ``Function``s
with their backward written beside their forward. A public function first checks its arguments,
then calls its definition. What runs is what is written here; ``ta.compile`` gives faster forms of some
of these functions, proven equal to them.

The definitions on checked arguments are the small interface the floors above recompute
(``ta.compile``'s fused forms take them as their reference, and fall back to them on the spot). They check
nothing: a caller passes what the public function would have passed to them.

    linear_definition(input, weight, bias)                   F.linear: x Wᵀ + b
    layer_norm_definition(input, ndim, weight, bias, eps)    F.layer_norm over the last ndim axes
    cross_entropy_definition(logits, target, ignore_index, reduction, label_smoothing)
                                                             F.cross_entropy on (N, C, d…) logits
    attention_definition(query, key, value, attn_mask, dropout_p, is_causal, scale, need_weights)
                                                             F.scaled_dot_product_attention, with the
                                                             arguments attention_arguments returns

>>> import tinyattn as ta
>>> import tinyattn.nn.functional as F
>>> logits = ta.tensor([[2.0, 0.0, -1.0]])
>>> F.softmax(logits, dim=-1).sum().item()
1.0
>>> round(F.cross_entropy(logits, ta.tensor([0])).item(), 4)
0.1698
"""

import math
import numbers

import numpy as np

from .. import backend, modes, ops, ops_extra
from .. import checks as check
from ..engine import OUTPUT, Function, Tensor
from ..masks import checked_mask
from ..pointwise import Erf

# isort: split
# the functions of the families (activations, losses, normalisation, distances, padding), in modules of their own
from . import activations, conv, distances, dropouts, interpolation, losses, normalization, padding, pooling, shuffles
from .activations import *  # noqa: F401,F403
from .conv import *  # noqa: F401,F403
from .distances import *  # noqa: F401,F403
from .dropouts import *  # noqa: F401,F403
from .interpolation import *  # noqa: F401,F403
from .losses import *  # noqa: F401,F403
from .losses import _index_array, legacy_reduction
from .normalization import *  # noqa: F401,F403
from .padding import *  # noqa: F401,F403
from .pooling import *  # noqa: F401,F403
from .shuffles import *  # noqa: F401,F403

__all__ = [
    "relu", "gelu", "linear", "bilinear", "softmax", "log_softmax", "softmin", "layer_norm", "dropout", "embedding",
    "embedding_bag",
    "cross_entropy", "scaled_dot_product_attention", "causal_mask", "padding_mask", "one_hot",
    *activations.__all__, *conv.__all__, *distances.__all__, *dropouts.__all__, *interpolation.__all__,
    *losses.__all__, *normalization.__all__, *padding.__all__, *pooling.__all__, *shuffles.__all__,
]

# ----------------------------------------------------------------------------- activations


def relu(input):
    """``max(x, 0)``, elementwise; the gradient at 0 is 0, as in PyTorch.

    ``input``: a tensor of any shape.

    >>> import tinyattn as ta
    >>> import tinyattn.nn.functional as F
    >>> F.relu(ta.tensor([-1.0, 0.0, 2.0]))
    tensor([0., 0., 2.])
    """
    return ops.relu(input)


def gelu(input, approximate="none"):
    """Gaussian error linear unit ``x · Φ(x)``.

    ``approximate="none"``: ``Φ(x) = (1 + erf(x / √2)) / 2``, exactly.
    ``approximate="tanh"``: ``Φ(x) ≈ (1 + tanh(√(2/π) (x + 0.044715 x³))) / 2``.

    >>> import tinyattn as ta
    >>> [round(value, 4) for value in gelu(ta.tensor([-1.0, 0.0, 1.0])).tolist()]
    [-0.1587, 0.0, 0.8413]
    """
    check.floating("gelu", "input", input)
    if input.dtype == np.float16:  # computed in float32 and rounded back, as PyTorch does on the CPU
        return gelu(input.to(np.float32), approximate).to(np.float16)
    if approximate == "none":
        cdf = 0.5 * (1 + Erf.apply(input * (1 / math.sqrt(2))))
    elif approximate == "tanh":
        inner = math.sqrt(2 / math.pi) * (input + 0.044715 * input * input * input)
        cdf = 0.5 * (1 + inner.tanh())
    else:
        raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    return input * cdf


# ----------------------------------------------------------------------------- linear


def linear(input, weight, bias=None):
    """``y = x Wᵀ + b`` over the last dimension: ``(…, in) -> (…, out)``, weight ``(out, in)``.

    >>> import tinyattn as ta
    >>> linear(ta.ones(2, 3), ta.ones(4, 3), ta.zeros(4)).shape
    (2, 4)
    """
    broadcast_bias = check.linear_args(input, weight, bias)
    if broadcast_bias is not None:  # a bias that broadcasts, not of shape (out,): the composed form
        return ops.matmul(input, weight.T) + broadcast_bias
    in_features = weight.shape[-1]
    if input.ndim == 0 or input.shape[-1] != in_features:
        raise ValueError(
            f"linear: the input's last dimension has size {input.shape[-1] if input.ndim else None} "
            f"(input shape {input.shape}), but the weight {weight.shape} expects in_features={in_features}"
        )
    if weight.ndim != 2:
        raise ValueError(f"linear: weight must be (out_features, in_features), got shape {weight.shape}")
    return linear_definition(input, weight, bias)


def linear_definition(input, weight, bias):
    """The definition, on checked arguments: ``x Wᵀ + b``."""
    output = input @ weight.T  # (…, out)
    return output if bias is None else output + bias


def bilinear(input1, input2, weight, bias=None):
    """``y_k = x1ᵀ W_k x2 + b_k``: ``(…, in1)`` and ``(…, in2)`` to ``(…, out)``, weight ``(out, in1, in2)``.

    >>> import tinyattn as ta
    >>> bilinear(ta.ones(2, 3), ta.ones(2, 4), ta.ones(5, 3, 4)).shape
    (2, 5)
    """
    if weight.ndim != 3 or input1.shape[-1] != weight.shape[1] or input2.shape[-1] != weight.shape[2]:
        raise RuntimeError(f"bilinear: inputs {input1.shape} and {input2.shape} need a weight of shape "
                           f"(out, {input1.shape[-1]}, {input2.shape[-1]}), got {weight.shape}")
    if input1.shape[:-1] != input2.shape[:-1]:
        raise RuntimeError(f"bilinear: input1 {input1.shape} and input2 {input2.shape} must share their leading "
                           "dimensions")
    left = input1.unsqueeze(-2).unsqueeze(-2) @ weight  # (…, out, 1, in2): x1ᵀ W_k
    output = (left @ input2.unsqueeze(-2).unsqueeze(-1)).squeeze(-1).squeeze(-1)  # (…, out)
    return output if bias is None else output + bias


# ----------------------------------------------------------------------------- softmax


class Softmax(Function):
    """``y = exp(x - max x) / Σ exp(x - max x)`` along ``dim``; ``∂L/∂x = y ⊙ (g - Σ g ⊙ y)``.

    Subtracting the row's maximum changes nothing mathematically and keeps ``exp`` finite; a row of
    only ``-inf`` gives NaN, as in PyTorch.
    """

    differentiable, saved_as = True, {"y": OUTPUT}

    def forward(self, x, dim):
        xp = backend.namespace(x)
        self.dim = dim
        exps = xp.exp(x - x.max(axis=dim, keepdims=True))
        self.y = exps / exps.sum(axis=dim, keepdims=True)
        return self.y

    def backward(self, grad):
        y, xp = self.y, ops.namespace(grad)
        return (y * (grad - xp.sum(grad * y, axis=self.dim, keepdims=True)),)

    @staticmethod
    def jvp(tangents, inputs, out, dim):  # dy = y ⊙ (dx - Σ dx ⊙ y)
        dx = tangents[0]
        return out * (dx - (dx * out).sum(dim, keepdim=True))


class LogSoftmax(Function):
    """``y = x - max x - log Σ exp(x - max x)`` along ``dim``; ``∂L/∂x = g - exp(y) · Σ g``."""

    differentiable, saved_as = True, {"y": OUTPUT}

    def forward(self, x, dim):
        self.dim = dim
        self.y = log_softmax_of_array(x, dim)
        return self.y

    def backward(self, grad):
        xp = ops.namespace(grad)
        return (grad - xp.exp(self.y) * xp.sum(grad, axis=self.dim, keepdims=True),)

    @staticmethod
    def jvp(tangents, inputs, out, dim):  # dy = dx - Σ dx ⊙ exp(y)
        dx = tangents[0]
        return dx - (dx * out.exp()).sum(dim, keepdim=True)


def log_softmax_of_array(x, dim):
    """``x - max x - log Σ exp(x - max x)`` along ``dim``, on a backend array (``LogSoftmax``'s forward; one
    place for every log-softmax on arrays)."""
    xp = backend.namespace(x)
    shifted = x - x.max(axis=dim, keepdims=True)
    return shifted - xp.log(xp.exp(shifted).sum(axis=dim, keepdims=True))


def softmax(input, dim, dtype=None):
    """``exp(x_i) / Σ_j exp(x_j)`` along ``dim`` (computed with the max subtracted); ``dtype``: the input is
    cast to it first, as in PyTorch. Also ``ta.softmax`` and the method ``t.softmax(dim)``.

    >>> import tinyattn as ta
    >>> softmax(ta.tensor([0.0, 0.0]), dim=0)
    tensor([0.5, 0.5])
    """
    if dtype is not None:
        input = input.to(dtype)
    dim = check.reduction_input("softmax", input, dim)
    if input._data.size == 0:  # nothing to normalise
        return input.reshape(input.shape)
    if input.ndim == 0:  # over the one element (as a 1-d tensor, so that vmap's batch axis is never normalised)
        return Softmax.apply(input.reshape(1), dim=0).reshape(())
    return Softmax.apply(input, dim=dim)


def log_softmax(input, dim, dtype=None):
    """``x_i - log Σ_j exp(x_j)`` along ``dim``; finite for logits as large as 1e4; ``dtype`` as ``softmax``'s.
    Also ``ta.log_softmax`` and the method ``t.log_softmax(dim)``.

    >>> import tinyattn as ta
    >>> log_softmax(ta.tensor([1e4, 0.0]), dim=0)
    tensor([     0., -10000.])
    """
    if dtype is not None:
        input = input.to(dtype)
    dim = check.reduction_input("log_softmax", input, dim)
    if input._data.size == 0:  # nothing to normalise
        return input.reshape(input.shape)
    if input.ndim == 0:  # over the one element (as a 1-d tensor, so that vmap's batch axis is never normalised)
        return LogSoftmax.apply(input.reshape(1), dim=0).reshape(())
    return LogSoftmax.apply(input, dim=dim)


def softmin(input, dim=None, _stacklevel=3, dtype=None):
    """``softmax(-x)`` along ``dim``: ``exp(-x_i) / Σ_j exp(-x_j)``; ``dtype``: the input is cast to it first.
    Without ``dim``, PyTorch's implicit choice: 0 for 0-, 1- and 3-d inputs, else 1.

    >>> import tinyattn as ta
    >>> softmin(ta.tensor([1.0, 1.0]), dim=0)
    tensor([0.5, 0.5])
    """
    if dtype is not None:
        input = input.to(dtype)
    check.floating("softmin", "input", input)
    if dim is None:
        dim = 0 if input.ndim in (0, 1, 3) else 1
    return softmax(-input, dim=dim)


Tensor.softmax, Tensor.log_softmax = softmax, log_softmax  # the methods, as in PyTorch


# ----------------------------------------------------------------------------- layer norm


def _standardized(x, axes, eps):
    """``(x̂, r)``: ``x̂ = (x - μ) · r`` over the trailing ``axes``, ``r = 1/√(σ² + eps)`` (μ the mean, σ² the
    biased variance); on arrays (``LayerNorm``'s forward) or on tensors, recorded (its reference and JVP)."""
    xp = ops.namespace(x)
    centered = x - xp.mean(x, axis=axes, keepdims=True)
    rstd = 1 / xp.sqrt(xp.mean(centered * centered, axis=axes, keepdims=True) + eps)
    return centered * rstd, rstd


class LayerNorm(Function):
    """``x̂ = (x - μ) / √(σ² + eps)`` over the trailing ``axes`` (μ the mean, σ² the biased variance);
    with ``N`` normalised elements and ``r = 1/√(σ² + eps)``:

        ∂L/∂x = r · (g - mean(g) - x̂ · mean(g ⊙ x̂))

    The weight and the bias act afterwards, as a product and a sum (``layer_norm``).
    """

    def forward(self, x, axes, eps):
        self.axes, self.eps = axes, eps
        self.x_hat, self.rstd = _standardized(x, axes, eps)
        return self.x_hat

    def backward(self, grad):
        x_hat, axes = self.x_hat, self.axes
        mean_grad = grad.mean(axis=axes, keepdims=True)
        mean_grad_x_hat = (grad * x_hat).mean(axis=axes, keepdims=True)
        return (self.rstd * (grad - mean_grad - x_hat * mean_grad_x_hat),)

    @staticmethod
    def jvp(tangents, inputs, out, axes, eps):  # dx̂ = r · (dx - mean(dx) - x̂ · mean(dx ⊙ x̂)), x̂ the output
        (dx,), (x,) = tangents, inputs
        _, rstd = _standardized(x, axes, eps)
        return rstd * (dx - dx.mean(axes, keepdim=True) - out * (dx * out).mean(axes, keepdim=True))

    def reference(self, x):
        """The same ``x̂`` recorded on tensors, for a gradient that is differentiated again (``create_graph``)."""
        return _standardized(x, self.axes, self.eps)[0]


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    """``y = (x - E[x]) / √(Var[x] + eps) · weight + bias`` over the trailing ``normalized_shape``.

    >>> import tinyattn as ta
    >>> layer_norm(ta.tensor([[1.0, 3.0]]), (2,)).numpy().round(3).tolist()
    [[-1.0, 1.0]]
    """
    check.floating("layer_norm", "input", input)
    for name, parameter in (("weight", weight), ("bias", bias)):
        if parameter is not None:
            check.one_dtype("layer_norm", ("input", input), (name, parameter))
    if type(normalized_shape) is not tuple:  # (a tuple, as nn.LayerNorm passes, skips the slow abc check)
        is_int = isinstance(normalized_shape, numbers.Integral)
        normalized_shape = (normalized_shape,) if is_int else tuple(normalized_shape)
    ndim = len(normalized_shape)
    if ndim == 0 or input.ndim < ndim or input.shape[input.ndim - ndim:] != normalized_shape:
        raise ValueError(
            f"layer_norm: expected an input whose trailing dimensions are {normalized_shape}, got shape {input.shape}"
        )
    for name, affine in (("weight", weight), ("bias", bias)):
        if affine is not None and affine.shape != normalized_shape:
            raise ValueError(
                f"layer_norm: {name} has shape {affine.shape}, expected normalized_shape {normalized_shape}"
            )
    return layer_norm_definition(input, ndim, weight, bias, float(eps))  # (a NumPy float64 eps would promote float32)


def layer_norm_definition(input, ndim, weight, bias, eps):
    """The definition, on checked arguments: ``x̂ = LayerNorm(x)`` over the last ``ndim`` axes, then
    ``x̂ · weight + bias``. A float16 input is computed in float32 and rounded back, as PyTorch does (its
    ``(x - μ)²`` would overflow float16 once ``|x - μ| ≥ 256``)."""
    if input.dtype == np.float16:
        weight, bias = (None if t is None else t.to(np.float32) for t in (weight, bias))
        return layer_norm_definition(input.to(np.float32), ndim, weight, bias, eps).to(np.float16)
    output = LayerNorm.apply(input, axes=tuple(range(input.ndim - ndim, input.ndim)), eps=eps)
    if weight is not None:
        output = output * weight
    if bias is not None:
        output = output + bias
    return output


# ----------------------------------------------------------------------------- dropout


def dropout(input, p=0.5, training=True, inplace=False):
    """Inverted dropout: zero each element with probability ``p``, scale the rest by ``1/(1-p)``.

    Identity when ``training`` is false or ``p == 0``; all zeros when ``p == 1``. The mask
    comes from the library's generator on the input's device (``ta.manual_seed``). ``inplace`` is accepted and
    ignored (the result is always a new tensor).

    >>> import tinyattn as ta
    >>> dropout(ta.ones(4), p=0.5, training=False)
    tensor([1., 1., 1., 1.])
    """
    if check.dropout_input(input, p, training):  # a 0-d input: as one element (a 0-d mask is a NumPy scalar)
        return dropout(input.reshape(1), p, training).reshape(())
    if not isinstance(p, (int, float, numbers.Real)) or not 0 <= p <= 1:  # (int, float: no slow abc check)
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p!r}")
    if not training or p == 0:
        return input
    p = float(p)  # a NumPy float64 p would promote a float32 mask (NumPy 2 keeps a NumPy scalar's dtype)
    # 0, or 1/(1-p) with probability 1 - p; over the array as it lies (inside vmap: with the batch's axes in front)
    per_example = modes.current().per_example
    if per_example is not None and input._data.ndim == input.ndim:  # vmap(randomness="different") and an input
        # the same for every example: still a mask of its own for each
        mask = per_example(lambda shape: backend.dropout_mask(shape, p, input.dtype, input.device), input.shape)
        return input * mask
    mask = backend.dropout_mask(input._data.shape, p, input.dtype, input.device, input._data.ndim - input.ndim)
    return input * Tensor._wrap(mask, input)


# ----------------------------------------------------------------------------- embedding


def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
              sparse=False):
    """Rows of ``weight`` picked by the integer ``input``: ``(…) -> (…, embedding_dim)``.

    Indices are checked against the table (NumPy would wrap negatives, CuPy every index).
    Rows picked at ``padding_idx`` carry their value forward but pass no gradient back. ``max_norm``: each row
    picked whose ``norm_type``-norm exceeds it is first rescaled to that norm, in ``weight`` itself and outside
    the graph, as in PyTorch. ``sparse`` is accepted (the gradient is always dense); ``scale_grad_by_freq`` is not
    supported.

    >>> import tinyattn as ta
    >>> table = ta.tensor([[0.0, 0.0], [1.0, 2.0]])
    >>> embedding(ta.tensor([[1, 0]]), table)
    tensor([[[1., 2.],
             [0., 0.]]])
    """
    padding_idx = check.embedding_args(weight, padding_idx)
    index = _index_array(input, weight, "embedding")
    num_embeddings = weight.shape[0]
    out_of_range = (index < 0) | (index >= num_embeddings)
    if bool(out_of_range.any()):
        bad = backend.to_numpy(index[out_of_range])
        raise IndexError(
            f"embedding: index {int(bad[0])} is out of range for a table of {num_embeddings} rows "
            f"(valid: 0 to {num_embeddings - 1}); {bad.size} such index(es) in input of shape {tuple(index.shape)}"
        )
    if scale_grad_by_freq:
        raise NotImplementedError("embedding: scale_grad_by_freq=True is not supported")
    if max_norm is not None:
        _renormalize_rows(weight, index, max_norm, norm_type)
    rows = weight[input if isinstance(input, Tensor) else index]  # (…, embedding_dim); repeats accumulate in backward
    if padding_idx is None:
        return rows
    keep = Tensor._wrap((index != padding_idx)[..., None])  # (…, 1)
    return ops.where(keep, rows, rows.detach())


def _renormalize_rows(weight, index, max_norm, norm_type):
    """Rows of ``weight`` named in ``index`` whose ``norm_type``-norm exceeds ``max_norm``, scaled in place to
    ``max_norm`` (by ``max_norm / (norm + 1e-7)``, PyTorch's ``embedding_renorm_``)."""
    xp = backend.namespace(weight._data)
    rows = xp.unique(index.reshape(-1))
    picked = weight._data[rows]  # (rows, embedding_dim)
    norms = xp.sum(xp.abs(picked) ** norm_type, axis=1) ** (1.0 / norm_type)  # (rows,)
    scale = xp.where(norms > max_norm, max_norm / (norms + 1e-7), 1.0).astype(weight.dtype)
    weight._data[rows] = picked * scale[:, None]


def embedding_bag(input, weight, offsets=None, max_norm=None, norm_type=2, scale_grad_by_freq=False, mode="mean",
                  sparse=False, per_sample_weights=None, include_last_offset=False, padding_idx=None):
    """The rows of bags of indices reduced to one row per bag (``mode`` ``"sum"``, ``"mean"`` or ``"max"``, the
    last per feature): ``(B, embedding_dim)``, without the ``(…, embedding_dim)`` rows held per index for the sum
    and the mean (a ``(B, T)`` membership matrix times the rows picked).

    ``input``: ``(B, N)`` (each row a bag of ``N``), or 1-D with ``offsets`` ``(B,)``, the start of each bag in
    it (``include_last_offset``: ``B + 1`` offsets, the last one the end of the last bag). Indices at
    ``padding_idx`` are left out of their bag (and of its count, for the mean); an empty bag gives zeros.
    ``per_sample_weights`` (``input``'s shape, ``mode="sum"`` only) scale each row before the sum.

    >>> import tinyattn as ta
    >>> import tinyattn.nn.functional as F
    >>> table = ta.tensor([[1.0, 0.0], [0.0, 2.0], [3.0, 3.0]])
    >>> F.embedding_bag(ta.tensor([0, 1, 2, 2]), table, offsets=ta.tensor([0, 3]), mode="sum")
    tensor([[4., 5.],
            [3., 3.]])
    """
    if mode not in ("sum", "mean", "max"):
        raise ValueError(f"embedding_bag: mode has to be one of sum, mean or max, got {mode!r}")
    flat = backend.to_numpy(_index_array(input, weight, "embedding_bag"))
    if flat.ndim == 2:
        if offsets is not None:
            raise ValueError("embedding_bag: if input is 2D, then offsets has to be None, as input is treated as a "
                             "mini-batch of fixed length sequences")
        bags, per_bag = flat.shape
        starts = np.arange(bags) * per_bag
    elif flat.ndim == 1:
        if offsets is None:
            raise ValueError("embedding_bag: offsets has to be a 1D Tensor but got None")
        starts = np.asarray(backend.to_numpy(offsets._data) if isinstance(offsets, Tensor) else offsets,
                            dtype=np.int64).reshape(-1)
        if include_last_offset:
            starts = starts[:-1]
        bags = starts.size
        if bags and starts[0] != 0:
            raise ValueError(f"embedding_bag: offsets[0] has to be 0, i.e., the first sequence in the mini-batch has "
                             f"to start from position 0. However, got {int(starts[0])}")
    else:
        raise ValueError(f"embedding_bag: input has to be 1D or 2D Tensor, but got Tensor of dimension {flat.ndim}")
    if per_sample_weights is not None and mode != "sum":
        raise NotImplementedError(f"embedding_bag: per_sample_weights was not None. per_sample_weights is only "
                                  f"supported for mode='sum' (got mode='{mode}'). Please open a feature request on "
                                  "GitHub.")
    index = flat.reshape(-1)  # (T,)
    T = index.size
    padding_idx = check.embedding_args(weight, padding_idx)
    rows = embedding(Tensor._wrap(backend.namespace(weight._data).asarray(index)), weight, None, max_norm,
                     norm_type, scale_grad_by_freq)  # (T, embedding_dim)
    if per_sample_weights is not None:
        rows = rows * per_sample_weights.reshape(T, 1)
    bag_of = np.searchsorted(starts, np.arange(T), side="right") - 1  # (T,): the bag each index falls in
    counted = (index != padding_idx) if padding_idx is not None else np.ones(T, dtype=bool)  # (T,)
    xp = backend.namespace(weight._data)
    if mode == "max":
        sizes = np.bincount(bag_of[counted], minlength=bags) if T else np.zeros(bags, dtype=np.int64)
        width = max(int(sizes.max()) if bags else 0, 1)
        slots = np.zeros((bags, width), dtype=np.int64)  # (B, K): the rows of each bag, padded with row 0
        valid = np.zeros((bags, width), dtype=bool)
        for bag in range(bags):
            members = np.flatnonzero((bag_of == bag) & counted)
            slots[bag, :members.size], valid[bag, :members.size] = members, True
        if T == 0:
            return Tensor._wrap(xp.zeros((bags, weight.shape[1]), dtype=weight.dtype), weight)
        grouped = rows[xp.asarray(slots)]  # (B, K, embedding_dim)
        grouped = ops.where(Tensor._wrap(xp.asarray(valid[..., None])), grouped, -math.inf)
        largest = ops_extra.max(grouped, dim=1).values  # (B, embedding_dim)
        return ops.where(Tensor._wrap(xp.asarray(valid.any(axis=1)[:, None])), largest, 0.0)
    membership = np.zeros((bags, T), dtype=weight.dtype)  # (B, T): 1 where index t is counted in bag b
    membership[bag_of[counted], np.flatnonzero(counted)] = 1
    if mode == "mean":
        membership /= np.maximum(membership.sum(axis=1, keepdims=True), 1)
    return ops.matmul(Tensor._wrap(xp.asarray(membership)), rows)  # (B, embedding_dim)


# ----------------------------------------------------------------------------- cross entropy


def _target_shape(logits_shape):
    """The target's shape for logits of ``logits_shape``: ``(N, C, d…) -> (N, d…)``."""
    return (logits_shape[0],) + tuple(logits_shape[2:])


def cross_entropy(input, target, ignore_index=-100, reduction="mean", label_smoothing=0.0, *, weight=None,
                  size_average=None, reduce=None):
    """Cross entropy between logits and targets, PyTorch's semantics (``weight``, and PyTorch's deprecated
    ``size_average`` and ``reduce``, by keyword; ``tinyattn.compat`` takes them in PyTorch's positional order).

    ``input``: logits ``(N, C)``, ``(N, C, d1, …)`` or unbatched ``(C,)``. ``target``: class indices ``(N,)``,
    ``(N, d1, …)`` or ``()``, or class probabilities of the logits' own shape (a floating tensor).
    ``weight``: one weight per class (``(C,)``). ``reduction="mean"`` divides by the total weight of the targets
    that are not ``ignore_index`` (by their count without ``weight``; by ``N · d1 ⋯`` for probability targets);
    ``label_smoothing=ε`` mixes the target distribution with the uniform one: ``(1-ε)·target + ε/C``.

    >>> import tinyattn as ta
    >>> logits = ta.tensor([[0.0, 0.0], [0.0, 0.0]])
    >>> round(cross_entropy(logits, ta.tensor([1, -100])).item(), 4)
    0.6931
    >>> round(cross_entropy(logits, ta.tensor([[1.0, 0.0], [0.5, 0.5]])).item(), 4)
    0.6931
    """
    check.floating("cross_entropy", "input", input)
    reduction = legacy_reduction(size_average, reduce, reduction)
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"cross_entropy: reduction must be 'none', 'mean' or 'sum', got {reduction!r}")
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"cross_entropy: label_smoothing must be in [0, 1], got {label_smoothing!r}")
    if input.ndim == 0:
        raise ValueError("cross_entropy: logits must have a class dimension: (C,), (N, C) or (N, C, d…); got shape ()")
    unbatched = input.ndim == 1
    num_classes = input.shape[0 if unbatched else 1]
    if weight is not None and tuple(weight.shape) != (num_classes,):
        raise ValueError(f"cross_entropy: weight must have one entry per class ({num_classes},), got {weight.shape}")
    if isinstance(target, Tensor) and target.dtype.kind == "f":
        if target.shape != input.shape:
            raise TypeError(
                f"cross_entropy: targets must be class indices (integers) of shape "
                f"{() if unbatched else _target_shape(input.shape)} or class probabilities of the logits' shape "
                f"{input.shape}; got {target.dtype} of shape {target.shape}"
            )
        return _cross_entropy_probabilities(input, target, weight, reduction, label_smoothing)
    target_data = _index_array(target, input, "cross_entropy")
    target = target if isinstance(target, Tensor) else Tensor._wrap(target_data)  # (inside vmap: batched)
    expected = () if unbatched else _target_shape(input.shape)
    if target.shape != expected:
        raise ValueError(
            f"cross_entropy: logits of shape {input.shape} need class-index targets of shape {expected}, "
            f"got {target.shape}"
        )
    logits = input.reshape(1, -1) if unbatched else input  # (N, C, d…)
    target = target.reshape(1) if unbatched else target  # (N, d…)
    bad = ((target_data < 0) | (target_data >= num_classes)) & (target_data != ignore_index)
    if bool(bad.any()):
        value = int(backend.to_numpy(target_data[bad])[0])
        raise IndexError(
            f"cross_entropy: target {value} is out of bounds for {num_classes} classes "
            f"(valid: 0 to {num_classes - 1}, or ignore_index={ignore_index})"
        )
    if target_data.size == 0:  # no targets at all: PyTorch's mean over none is NaN, its sum 0
        per_target = logits.sum(dim=1)  # (0, d…), empty, still in the graph
        if reduction == "none":
            return per_target
        return per_target.sum() * (math.nan if reduction == "mean" else 1.0)
    loss = cross_entropy_definition(logits, target, ignore_index, reduction, label_smoothing, weight)
    return loss.reshape(()) if unbatched and reduction == "none" else loss


def _classes_last(logits):
    """``(N, C, d…) -> (M, C)``: the classes moved last, the other dimensions in order, then flattened."""
    if logits.ndim == 2:
        return logits
    return logits.permute(0, *range(2, logits.ndim), 1).reshape(-1, logits.shape[1])


def _cross_entropy_probabilities(input, target, weight, reduction, label_smoothing):
    """Cross entropy against class probabilities ``y`` of the logits' shape: with ``y' = (1-ε) y + ε/C``,
    ``loss_i = -Σ_c weight_c · y'_ic · log p_ic``; ``"mean"`` divides by the number of rows ``N · d1 ⋯``."""
    unbatched = input.ndim == 1
    logits = input.reshape(1, -1) if unbatched else input  # (N, C, d…)
    probabilities = target.reshape(1, -1) if unbatched else target  # (N, C, d…)
    num_classes = logits.shape[1]
    log_p = _classes_last(log_softmax(logits, dim=1))  # (M, C)
    y = _classes_last(probabilities)  # (M, C)
    if label_smoothing:
        y = (1 - label_smoothing) * y + label_smoothing / num_classes
    terms = y * log_p if weight is None else y * log_p * weight  # (M, C)
    losses = -terms.sum(dim=1)  # (M,)
    if reduction == "none":
        return losses.reshape(()) if unbatched else losses.reshape(_target_shape(logits.shape))
    return losses.sum() if reduction == "sum" else losses.mean()


def cross_entropy_definition(logits, target, ignore_index, reduction, label_smoothing, weight=None):
    """The definition: with ``log p = log_softmax(z)`` over the classes, ``C`` classes, smoothing ``ε`` and class
    weights ``w`` (1 without ``weight``), ``loss_i = -(1-ε) w[t_i] log p[t_i] - (ε/C) Σ_c w_c log p[c]``, zero
    where ``t_i == ignore_index``; ``"mean"`` divides by ``Σ_i w[t_i]`` over the kept targets.
    ``target``: an integer tensor (or array) of class indices."""
    target = target if isinstance(target, Tensor) else Tensor._wrap(target)
    num_classes = logits.shape[1]
    target = target.reshape(-1)  # (M,)
    valid = target != ignore_index  # (M,), boolean
    log_p = log_softmax(_classes_last(logits), dim=1)  # (M, C)
    safe = ops.where(valid, target, 0)  # (M,): an ignored target picks class 0, then counts zero
    rows = Tensor._wrap(backend.namespace(log_p._data).arange(target.shape[0]))
    picked = log_p[rows, safe]  # (M,): log p[t_i]
    if weight is None:
        losses = -(1 - label_smoothing) * picked
        if label_smoothing:
            losses = losses - (label_smoothing / num_classes) * log_p.sum(dim=1)
        target_weights = None
    else:
        target_weights = weight[safe]  # (M,): w[t_i]
        losses = -(1 - label_smoothing) * picked * target_weights
        if label_smoothing:
            losses = losses - (label_smoothing / num_classes) * (log_p * weight).sum(dim=1)
    losses = ops.where(valid, losses, 0.0)  # ignored positions count zero
    if reduction == "none":
        return losses.reshape(_target_shape(logits.shape))
    if reduction == "sum":
        return losses.sum()
    if target_weights is None:
        return losses.sum() / valid.to(logits.dtype).sum()  # 0/0 = NaN when every target is ignored, as in PyTorch
    return losses.sum() / ops.where(valid, target_weights, 0.0).sum()


# ----------------------------------------------------------------------------- scaled dot-product attention
#
# Scaled dot-product attention and the mask helpers.
#
#     scores  = query @ keyᵀ · scale  (+ attn_mask, when it is a float mask)     # (…, Lq, Lk)
#     weights = softmax(scores) over the keys a query may attend                  # (…, Lq, Lk)
#     output  = dropout(weights) @ value                                          # (…, Lq, Ev)
#
# ``scale`` defaults to ``1/√E``. A **boolean** mask marks with ``True`` the keys that may be
# attended; a **float** mask is added to the scores (``-inf`` forbids a key, and the mask may
# require a gradient); ``is_causal=True`` lets query ``i`` attend keys ``j <= i``. A mask and
# ``is_causal`` together: a key is attended only where both allow it. A query row with no key
# left gives zeros (output, weights and gradients), never NaN. ``attention_definition`` is the definition,
# node by node.


def scaled_dot_product_attention(
    query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, need_weights=True
):
    """``softmax(query @ keyᵀ · scale + mask) @ value`` → ``(output, weights or None)``.

    ``query (…, Lq, E)``, ``key (…, Lk, E)``, ``value (…, Lk, Ev)``; leading dimensions
    broadcast. ``attn_mask``: boolean (``True`` = may attend) or float (added to the scores),
    broadcasting to ``(…, Lq, Lk)``. ``is_causal``: query ``i`` attends keys ``j <= i`` (top-left
    aligned when ``Lq != Lk``), combined with ``attn_mask`` when both are given. ``scale``:
    ``1/√E`` by default. ``dropout_p``: dropout on the weights (applied whenever it is > 0, as
    in PyTorch; modules pass 0 in eval mode); the returned weights are the ones that multiplied
    ``value``, after dropout. A query with no key left to attend gets zeros, never NaN.

    ``need_weights=False`` returns ``None`` for the weights; its compiled form (``ta.compile``) then takes,
    for long keys and no dropout, a memory-efficient path that never holds the whole ``(…, Lq, Lk)`` scores.

    >>> import tinyattn as ta
    >>> q = ta.tensor([[[1.0, 0.0], [0.0, 1.0]]])             # (1, Lq=2, E=2)
    >>> out, w = scaled_dot_product_attention(q, q, q, is_causal=True)
    >>> w.numpy().round(2)                                    # row 0 sees only key 0
    array([[[1.  , 0.  ],
            [0.33, 0.67]]], dtype=float32)
    """
    if query.dtype == key.dtype == value.dtype == np.float16:  # computed in float32 and rounded back, as PyTorch
        # does on the CPU
        widened = [t.to(np.float32) for t in (query, key, value)]
        if attn_mask is not None and attn_mask.dtype == np.float16:
            attn_mask = attn_mask.to(np.float32)
        output, weights = scaled_dot_product_attention(*widened, attn_mask, dropout_p, is_causal, scale, need_weights)
        return output.to(np.float16), (None if weights is None else weights.to(np.float16))
    attn_mask, dropout_p, scale = attention_arguments(query, key, value, attn_mask, dropout_p, scale)
    return attention_definition(query, key, value, attn_mask, dropout_p, is_causal, scale, need_weights)


def attention_arguments(query, key, value, attn_mask, dropout_p, scale):
    """``scaled_dot_product_attention``'s checks: ``(attn_mask, dropout_p, scale)`` as its definition takes them
    (the mask checked against the scores' shape, ``dropout_p`` a float, ``scale`` a float), or an error that
    names what was expected and what came."""
    check.attention_inputs("scaled_dot_product_attention", ("query", query), ("key", key), ("value", value))
    check.one_dtype("scaled_dot_product_attention", ("query", query), ("key", key))
    check.one_dtype("scaled_dot_product_attention", ("query", query), ("value", value))
    scale = check.attention_scale(query, scale)
    for name, t in (("query", query), ("key", key), ("value", value)):
        if not isinstance(t, Tensor) or t.ndim < 2:
            shape = t.shape if isinstance(t, Tensor) else type(t).__name__
            raise ValueError(f"scaled_dot_product_attention: {name} must be a tensor of shape (…, L, E), got {shape}")
    if query.shape[-1] != key.shape[-1]:
        raise ValueError(
            f"scaled_dot_product_attention: query {query.shape} and key {key.shape} must share the last size E"
        )
    if key.shape[-2] != value.shape[-2]:
        raise ValueError(
            f"scaled_dot_product_attention: key {key.shape} and value {value.shape} must share the length Lk"
        )
    if not (isinstance(dropout_p, (int, float, numbers.Real)) and 0.0 <= dropout_p <= 1.0):  # (int, float: no ABC test)
        raise ValueError(f"scaled_dot_product_attention: dropout_p must be in [0, 1], got {dropout_p}")
    dropout_p = float(dropout_p)  # a NumPy float64 would promote float32 work
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else float(scale)
    scores_shape = _broadcast_batch(query, key) + (query.shape[-2], key.shape[-2])  # (…, Lq, Lk)
    return checked_mask(attn_mask, query, scores_shape), dropout_p, scale


def _broadcast_batch(*tensors):
    """The broadcast leading shape ``(…)`` of tensors shaped ``(…, L, E)``."""
    shapes = [t.shape[:-2] for t in tensors]
    if shapes.count(shapes[0]) == len(shapes):  # all alike, the common case (np.broadcast_shapes makes arrays)
        return shapes[0]
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        shapes = ", ".join(str(t.shape) for t in tensors)
        raise ValueError(f"scaled_dot_product_attention: leading dimensions of {shapes} cannot be broadcast") from None


def attention_definition(query, key, value, attn_mask, dropout_p, is_causal, scale, need_weights):
    """The definition, on checked arguments: ``weights = softmax(q kᵀ·scale + mask)``, dropout,
    ``output = weights @ v`` → ``(output, weights or None)``."""
    Lq, Lk = query.shape[-2], key.shape[-2]
    scores = (query * scale) @ key.transpose(-2, -1)  # (…, Lq, Lk); scaling the queries is the cheaper side
    allowed = None  # boolean, broadcasting to (…, Lq, Lk): True where a key may be attended
    if attn_mask is not None and attn_mask.dtype == np.bool_:
        allowed = attn_mask._data
    elif attn_mask is not None:
        scores = scores + attn_mask  # (…, Lq, Lk); -inf forbids a key
    if is_causal:
        causal = causal_mask(Lq, Lk, query.device)._data  # (Lq, Lk): key j <= query i
        allowed = causal if allowed is None else allowed & causal
    weights = _softmax_over_allowed(scores, allowed)  # (…, Lq, Lk)
    if dropout_p > 0.0:
        weights = dropout(weights, dropout_p)  # (…, Lq, Lk)
    output = weights @ value  # (…, Lq, Ev)
    return output, (weights if need_weights else None)


def _softmax_over_allowed(scores, allowed):
    """``F.softmax`` over the keys, forbidden keys scored ``-inf`` (their weight is 0). A query with no
    key left would divide 0 by 0: its row is zeroed instead (weights, and so its gradients)."""
    if allowed is not None:
        scores = scores.masked_fill(Tensor._wrap(~allowed), -math.inf)  # (…, Lq, Lk)
    empty = (scores._data == -math.inf).all(axis=-1, keepdims=True)  # (…, Lq, 1): rows with no key
    if not empty.any():
        return softmax(scores, dim=-1)
    empty = Tensor._wrap(empty, scores)  # (of scores' kind: inside vmap, batched as they are)
    return softmax(scores.masked_fill(empty, 0.0), dim=-1).masked_fill(empty, 0.0)


def causal_mask(Lq, Lk=None, device="cpu"):
    """Boolean ``(Lq, Lk)`` mask, ``True`` where key ``j <= i`` (query ``i`` may attend it).

    >>> causal_mask(2, 3).numpy()
    array([[ True, False, False],
           [ True,  True, False]])
    """
    Lk = Lq if Lk is None else Lk
    xp = backend.namespace_for(device)
    return Tensor._wrap(xp.tril(xp.ones((Lq, Lk), dtype=bool)))  # (Lq, Lk)


def padding_mask(lengths, max_len):
    """Boolean ``(B, 1, 1, max_len)`` mask, ``True`` at the positions ``< lengths[b]``.

    ``lengths``: a 1-D integer tensor (the mask lands on its device), array or list. The
    shape broadcasts over heads and queries to ``(B, H, Lq, Lk)``.

    >>> padding_mask([1, 3], 3)[:, 0, 0].numpy()
    array([[ True, False, False],
           [ True,  True,  True]])
    """
    if isinstance(lengths, Tensor):
        lengths = lengths._data
    elif not backend.is_array(lengths):
        lengths = np.asarray(lengths)
    if lengths.ndim != 1 or lengths.dtype.kind not in "iu":
        raise ValueError(
            f"padding_mask: lengths must be a 1-D integer sequence, got shape {tuple(lengths.shape)} "
            f"and dtype {lengths.dtype}"
        )
    xp = backend.namespace(lengths)
    positions = xp.arange(max_len)  # (max_len,)
    return Tensor._wrap((positions[None, :] < lengths[:, None])[:, None, None, :])  # (B, 1, 1, max_len)


# ----------------------------------------------------------------------------- one-hot


def one_hot(tensor, num_classes=-1):
    """An int64 tensor of shape ``(…, num_classes)`` with a 1 at each index and 0 elsewhere.

    ``tensor``: integer class indices of any shape; ``num_classes``: the last dimension's size (by default the
    largest index + 1).

    >>> import tinyattn as ta
    >>> import tinyattn.nn.functional as F
    >>> F.one_hot(ta.tensor([0, 2]), num_classes=3)
    tensor([[1, 0, 0],
            [0, 0, 1]])
    """
    indices = tensor._data
    if indices.dtype != np.int64:
        raise RuntimeError(f"one_hot is only applicable to index tensor of type LongTensor (int64), got "
                           f"{indices.dtype}")
    if num_classes == -1:
        if indices.size == 0:
            raise RuntimeError("Can not infer total number of classes from empty tensor.")
        num_classes = int(indices.max()) + 1
    if indices.size and bool((indices < 0).any()):
        raise RuntimeError(f"Class values must be non-negative; got {int(indices.min())}")
    if indices.size and bool((indices >= num_classes).any()):
        raise RuntimeError(f"Class values must be smaller than num_classes. Got {int(indices.max())} for "
                           f"num_classes={num_classes}")
    xp = backend.namespace(indices)
    return Tensor._wrap((indices[..., None] == xp.arange(num_classes)).astype("int64"), tensor)
