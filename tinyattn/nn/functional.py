"""Floor 4: the functional forms of the layers (softmax, layer_norm, cross_entropy, ...).

Each function takes tensors and returns a tensor, with PyTorch's names and defaults.
Most are compositions of the primitives in ``tinyattn.ops``; five are fused
``Function``s — ``linear``, ``softmax``, ``log_softmax``, ``layer_norm`` and
``cross_entropy`` — because their composed forms are slower (more graph nodes, many
saved temporaries) or lose precision. The test suite checks each fused one against its composed twin.

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

from .. import backend, ops
from ..tensor import Function, Tensor

# ----------------------------------------------------------------------------- activations


def relu(input):
    """``max(x, 0)``; the gradient at 0 is 0, as in PyTorch."""
    return ops.relu(input)


class Erf(Function):
    """The error function ``erf(x) = 2/√π ∫₀ˣ e^(-t²) dt``; d/dx = 2/√π · e^(-x²)."""

    def forward(self, x):
        self.x = x
        return backend.erf(x)

    def backward(self, grad):
        xp = backend.namespace(grad)
        return (grad * (2 / math.sqrt(math.pi)) * xp.exp(-self.x * self.x),)


def gelu(input, approximate="none"):
    """Gaussian error linear unit ``x · Φ(x)``.

    ``approximate="none"``: ``Φ(x) = (1 + erf(x / √2)) / 2``, exactly.
    ``approximate="tanh"``: ``Φ(x) ≈ (1 + tanh(√(2/π) (x + 0.044715 x³))) / 2``.

    >>> import tinyattn as ta
    >>> [round(value, 4) for value in gelu(ta.tensor([-1.0, 0.0, 1.0])).tolist()]
    [-0.1587, 0.0, 0.8413]
    """
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
    in_features = weight.shape[-1]
    if input.ndim == 0 or input.shape[-1] != in_features:
        raise ValueError(
            f"linear: the input's last dimension has size {input.shape[-1] if input.ndim else None} "
            f"(input shape {input.shape}), but the weight {weight.shape} expects in_features={in_features}"
        )
    if weight.ndim != 2:
        raise ValueError(f"linear: weight must be (out_features, in_features), got shape {weight.shape}")
    if bias is None:
        return Linear.apply(input, weight)
    return Linear.apply(input, weight, bias)


def column_sums(matrix):
    """``(M, N) -> (N,)``: the sum of the rows, as ``ones(M) @ matrix``: one BLAS call, faster than
    ``matrix.sum(axis=0)`` at every size a Transformer layer meets here (1.2 against 2.2 µs at
    32 × 128, 63 against 115 µs at 1024 × 1024, 0.20 against 0.86 ms at 2048 × 2048)."""
    return backend.filled(matrix.shape[0], 1, matrix.dtype, backend.namespace(matrix)) @ matrix  # (N,)


def row_sums(a):
    """``(…, N) -> (…, 1)``: ``a.sum(-1, keepdims=True)`` of a contiguous array, as one matrix-vector
    product (two to three times faster than NumPy's reduction along short rows)."""
    n = a.shape[-1]
    rows = a.reshape(math.prod(a.shape[:-1]), n)  # (R, N), a view
    return (rows @ backend.filled(n, 1, a.dtype, backend.namespace(a))).reshape(a.shape[:-1] + (1,))


class Linear(Function):
    """``y = x Wᵀ + b`` as one node, the batch dimensions folded into rows (one 2-D GEMM each way).

    With ``x`` seen as ``X (M, in)`` (``M`` = the product of the batch sizes) and the
    output's gradient as ``G (M, out)``:

        Y = X Wᵀ + b    ∂L/∂X = G W  (M, in)    ∂L/∂W = Gᵀ X  (out, in)    ∂L/∂b = Σ_rows G  (out,)

    The test suite checks it against the composed ``x @ weight.T + bias``.
    """

    fresh_gradients = True  # keeps no reference to what backward returns (see Function)

    def forward(self, x, weight, bias=None):
        rows = math.prod(x.shape[:-1])
        self.x_shape, self.weight = x.shape, weight
        self.x = x.reshape(rows, x.shape[-1])  # (M, in); a view when x is contiguous
        out = self.x @ weight.T  # (M, out)
        if bias is not None and bias.dtype == out.dtype:
            out += bias  # in place: out is a fresh array
        elif bias is not None:
            out = out + bias  # mixed dtypes promote, as x @ Wᵀ + b does
        return out.reshape(x.shape[:-1] + (weight.shape[0],))  # (…, out)

    def backward(self, grad):
        needs = [p.requires_grad for p in self.parents]
        grad = grad.reshape(self.x.shape[0], grad.shape[-1])  # (M, out)
        grad_x = (grad @ self.weight).reshape(self.x_shape) if needs[0] else None  # (…, in)
        grad_weight = grad.T @ self.x if needs[1] else None  # (out, in), W's own layout
        grad_bias = column_sums(grad) if len(needs) > 2 and needs[2] else None  # (out,)
        return grad_x, grad_weight, grad_bias


# ----------------------------------------------------------------------------- softmax


class Softmax(Function):
    """``y = exp(x - max x) / Σ exp(x - max x)`` along ``dim``; dx = y · (g - Σ g·y).

    The max shift keeps ``exp`` finite; a row of only ``-inf`` gives NaN, as in PyTorch.
    """

    def forward(self, x, dim):
        xp = backend.namespace(x)
        self.dim = dim
        exps = xp.exp(x - x.max(axis=dim, keepdims=True))  # a fresh array, normalised in place
        exps /= exps.sum(axis=dim, keepdims=True)
        self.out = exps
        return exps

    def backward(self, grad):
        y = self.out
        grad_x = grad * y  # g·y, then minus y · Σ g·y, in place
        grad_x -= y * grad_x.sum(axis=self.dim, keepdims=True)
        return (grad_x,)


class LogSoftmax(Function):
    """``y = x - max x - log Σ exp(x - max x)`` along ``dim``; dx = g - exp(y) · Σ g."""

    def forward(self, x, dim):
        xp = backend.namespace(x)
        self.dim = dim
        shifted = x - x.max(axis=dim, keepdims=True)
        self.out = shifted - xp.log(xp.exp(shifted).sum(axis=dim, keepdims=True))
        return self.out

    def backward(self, grad):
        xp = backend.namespace(grad)
        softmax_times_sum = xp.exp(self.out)
        softmax_times_sum *= grad.sum(axis=self.dim, keepdims=True)
        return (grad - softmax_times_sum,)


def _check_dim(name, input, dim):
    if not isinstance(dim, numbers.Integral) or not -input.ndim <= dim < max(input.ndim, 1):
        raise IndexError(f"{name}: dim {dim!r} is out of range for a tensor of shape {input.shape}")
    return dim % max(input.ndim, 1)


def softmax(input, dim):
    """``exp(x_i) / Σ_j exp(x_j)`` along ``dim`` (computed with the max subtracted).

    >>> import tinyattn as ta
    >>> softmax(ta.tensor([0.0, 0.0]), dim=0)
    tensor([0.5, 0.5])
    """
    return Softmax.apply(input, dim=_check_dim("softmax", input, dim))


def log_softmax(input, dim):
    """``x_i - log Σ_j exp(x_j)`` along ``dim``; finite for logits as large as 1e4.

    >>> import tinyattn as ta
    >>> log_softmax(ta.tensor([1e4, 0.0]), dim=0)
    tensor([     0., -10000.])
    """
    return LogSoftmax.apply(input, dim=_check_dim("log_softmax", input, dim))


# ----------------------------------------------------------------------------- layer norm


def _layer_norm_rows(rows, weight, bias, eps):
    """LayerNorm of each row of ``rows (M, N)``: ``(y, saved)``, ``y = x̂ · weight + bias`` (or ``x̂``
    when ``weight`` is ``None``; ``weight``, ``bias``: ``(N,)``) with ``x̂ = (x - μ) / √(σ² + eps)``,
    σ² the biased variance; ``saved`` is what ``_layer_norm_rows_backward`` needs. The means are
    matrix-vector products with a vector of ``1/N`` (one BLAS call: two to three times faster than
    NumPy's reduction along the rows, at 32 × 32 as at 2048 × 512)."""
    xp = backend.namespace(rows)
    average = backend.filled(rows.shape[1], 1 / max(rows.shape[1], 1), rows.dtype, xp)  # (N,), 1/N each
    centered = rows - (rows @ average)[:, None]  # (M, N), a fresh array
    variance = (centered * centered) @ average  # (M,); two passes, as the textbook's formula
    rstd = (1 / xp.sqrt(variance + eps))[:, None]  # (M, 1)
    centered *= rstd  # x̂
    saved = (centered, rstd, average, weight)
    if weight is None:
        return centered, saved
    out = centered * weight  # (M, N), a fresh array
    if bias.dtype == out.dtype:
        out += bias
    else:
        out = out + bias  # mixed dtypes promote, as the composed form does
    return out, saved


def _layer_norm_rows_backward(grad, saved):
    """``(dx, dweight, dbias)`` of ``_layer_norm_rows`` for ``grad = ∂L/∂y (M, N)``, each a fresh array
    (``dweight`` and ``dbias`` ``None`` without a weight). With ``r = 1/√(σ²+eps)``
    and ``ĝ = g · weight``: ``dx = r · (ĝ - mean(ĝ) - x̂ · mean(ĝ · x̂))``, ``dweight = Σ_rows g · x̂``,
    ``dbias = Σ_rows g``. A constant row has x̂ = 0 and a finite gradient."""
    x_hat, rstd, average, weight = saved
    grad_weight = grad_bias = None
    if weight is not None:
        grad_weight, grad_bias = column_sums(grad * x_hat), column_sums(grad)  # (N,)
        grad = grad * weight  # ĝ
    if grad.dtype != average.dtype:
        average = average.astype(grad.dtype)
    grad_x = grad - (grad @ average)[:, None]  # (M, N), a fresh array: updated in place
    grad_x -= x_hat * ((grad * x_hat) @ average)[:, None]
    grad_x *= rstd
    return grad_x, grad_weight, grad_bias


class Normalize(Function):
    """LayerNorm over the last ``ndim`` axes as one node (``_layer_norm_rows`` on the input seen as
    rows ``(M, N)``, ``N`` the number of normalised elements); ``weight`` and ``bias`` are optional
    inputs (both or neither), of the normalised shape."""

    fresh_gradients = True  # keeps no reference to what backward returns (see Function)

    def forward(self, x, weight=None, bias=None, *, ndim, eps):
        size = math.prod(x.shape[x.ndim - ndim:])
        rows = x.reshape(math.prod(x.shape[:x.ndim - ndim]), size)  # (M, N)
        if weight is not None:
            weight, bias = weight.reshape(size), bias.reshape(size)  # (N,)
        out, self.saved = _layer_norm_rows(rows, weight, bias, eps)
        self.shape = x.shape
        return out.reshape(x.shape)

    def backward(self, grad):
        grad_x, grad_weight, grad_bias = _layer_norm_rows_backward(grad.reshape(self.saved[0].shape), self.saved)
        grad_x = grad_x.reshape(self.shape)  # a view: a leaf input copies it (writing dx into an array of the
        # input's shape instead costs a second pass over it, and LayerNorm's input is rarely a leaf)
        if grad_weight is None:
            return (grad_x,)
        shape = self.parents[1].shape
        if shape != grad_weight.shape:
            grad_weight, grad_bias = grad_weight.reshape(shape), grad_bias.reshape(shape)
        return grad_x, grad_weight, grad_bias


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    """``y = (x - E[x]) / √(Var[x] + eps) · weight + bias`` over the trailing ``normalized_shape``.

    >>> import tinyattn as ta
    >>> layer_norm(ta.tensor([[1.0, 3.0]]), (2,)).numpy().round(3).tolist()
    [[-1.0, 1.0]]
    """
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
    if weight is not None and bias is not None:  # nn.LayerNorm's case: one fused node
        return Normalize.apply(input, weight, bias, ndim=ndim, eps=eps)  # (…, *normalized_shape)
    output = Normalize.apply(input, ndim=ndim, eps=eps)  # (…, *normalized_shape)
    if weight is not None:
        output = output * weight
    if bias is not None:
        output = output + bias
    return output


# ----------------------------------------------------------------------------- dropout


def dropout(input, p=0.5, training=True):
    """Inverted dropout: zero each element with probability ``p``, scale the rest by ``1/(1-p)``.

    Identity when ``training`` is false or ``p == 0``; all zeros when ``p == 1``. The mask
    comes from the library's generator on the input's device (``ta.manual_seed``).

    >>> import tinyattn as ta
    >>> dropout(ta.ones(4), p=0.5, training=False)
    tensor([1., 1., 1., 1.])
    """
    if not isinstance(p, (int, float, numbers.Real)) or not 0 <= p <= 1:  # (int, float: no slow abc check)
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p!r}")
    if not training or p == 0:
        return input
    p = float(p)  # a NumPy float64 p would promote a float32 mask (NumPy 2 keeps a NumPy scalar's dtype)
    uniform = backend.random_uniform(input.shape, input.dtype, input.device)
    scale = 0.0 if p == 1 else 1 / (1 - p)
    mask = (uniform >= p).astype(input.dtype) * scale  # kept with probability 1 - p
    return input * Tensor._wrap(mask)


# ----------------------------------------------------------------------------- embedding


def _index_array(indices, like, name):
    """``indices`` (tensor, backend array, list) as an integer array on ``like``'s device."""
    data = indices.data if isinstance(indices, Tensor) else indices
    if not backend.is_array(data):
        data = Tensor(data, device=like.device).data
    if data.dtype.kind not in "iu":
        raise TypeError(f"{name}: indices must be integers (int64 as in PyTorch), got dtype {data.dtype}")
    if backend.device_of(data) != like.device:
        raise RuntimeError(
            f"{name}: indices are on device {backend.device_of(data)!r}, the weight on {like.device!r}; "
            "move them with .to(device)"
        )
    return data


def embedding(input, weight, padding_idx=None):
    """Rows of ``weight`` picked by the integer ``input``: ``(…) -> (…, embedding_dim)``.

    Indices are checked against the table (NumPy would wrap negatives, CuPy every index).
    Rows picked at ``padding_idx`` carry their value forward but pass no gradient back.

    >>> import tinyattn as ta
    >>> table = ta.tensor([[0.0, 0.0], [1.0, 2.0]])
    >>> embedding(ta.tensor([[1, 0]]), table)
    tensor([[[1., 2.],
             [0., 0.]]])
    """
    index = _index_array(input, weight, "embedding")
    num_embeddings = weight.shape[0]
    out_of_range = (index < 0) | (index >= num_embeddings)
    if bool(out_of_range.any()):
        bad = backend.to_numpy(index[out_of_range])
        raise IndexError(
            f"embedding: index {int(bad[0])} is out of range for a table of {num_embeddings} rows "
            f"(valid: 0 to {num_embeddings - 1}); {bad.size} such index(es) in input of shape {tuple(index.shape)}"
        )
    rows = weight[index]  # (…, embedding_dim); repeated indices accumulate in backward
    if padding_idx is None:
        return rows
    keep = Tensor._wrap((index != padding_idx)[..., None])  # (…, 1)
    return ops.where(keep, rows, rows.detach())


# ----------------------------------------------------------------------------- cross entropy


class CrossEntropy(Function):
    """Softmax cross entropy with class-index targets, fused.

    Per position ``i`` (class axis last here), with ``log p = log_softmax(z)``, ``C`` classes
    and smoothing ``ε``: ``loss_i = -(1-ε) log p[t_i] - (ε/C) Σ_c log p[c]``, zero where
    ``t_i == ignore_index``. Its gradient: ``dz_ic = p_ic - (1-ε)·[c = t_i] - ε/C``.
    """

    def forward(self, logits, target, ignore_index, reduction, label_smoothing):
        xp = backend.namespace(logits)
        num_classes = logits.shape[1]
        self.shape = logits.shape
        z = xp.moveaxis(logits, 1, -1).reshape(-1, num_classes)  # (M, C), M = N·d…
        target = target.reshape(-1)  # (M,)
        valid = target != ignore_index
        safe_target = xp.where(valid, target, 0)
        shifted = z - z.max(axis=1, keepdims=True)
        log_p = shifted - xp.log(xp.exp(shifted).sum(axis=1, keepdims=True))  # (M, C)
        picked = xp.take_along_axis(log_p, safe_target[:, None], axis=1)[:, 0]  # (M,)
        losses = -(1 - label_smoothing) * picked
        if label_smoothing:
            losses = losses - (label_smoothing / num_classes) * log_p.sum(axis=1)
        losses = xp.where(valid, losses, 0)  # ignored positions count zero (even where log p is -inf)
        self.log_p, self.safe_target, self.valid = log_p, safe_target, valid
        self.reduction, self.label_smoothing = reduction, label_smoothing
        if reduction == "none":
            return losses.reshape(_target_shape(self.shape))
        total = losses.sum()
        if reduction == "sum":
            return total
        self.count = valid.sum().astype(logits.dtype)
        return total / self.count  # 0/0 = NaN when every target is ignored, as in PyTorch

    def backward(self, grad):
        xp = backend.namespace(grad)
        log_p, valid = self.log_p, self.valid
        num_classes = log_p.shape[1]
        rows = xp.arange(log_p.shape[0])
        dz = xp.exp(log_p)  # (M, C): p
        dz[rows, self.safe_target] -= 1 - self.label_smoothing
        if self.label_smoothing:
            dz -= self.label_smoothing / num_classes
        if self.reduction == "none":
            scale = grad.reshape(-1) * valid  # (M,)
        elif self.reduction == "sum":
            scale = grad * valid
        else:
            scale = (grad / xp.maximum(self.count, 1)) * valid  # zero, not NaN, when all are ignored
        dz *= scale[:, None].astype(dz.dtype)
        moved = (self.shape[0],) + self.shape[2:] + (num_classes,)  # (N, d…, C)
        return (xp.moveaxis(dz.reshape(moved), -1, 1),)


def _target_shape(logits_shape):
    """The target's shape for logits of ``logits_shape``: ``(N, C, d…) -> (N, d…)``."""
    return (logits_shape[0],) + tuple(logits_shape[2:])


def cross_entropy(input, target, ignore_index=-100, reduction="mean", label_smoothing=0.0):
    """Cross entropy between logits and class indices, PyTorch's semantics.

    ``input``: logits ``(N, C)``, ``(N, C, d1, …)`` or unbatched ``(C,)``; ``target``: class
    indices ``(N,)``, ``(N, d1, …)`` or ``()``. ``reduction="mean"`` averages over the targets
    that are not ``ignore_index``; ``label_smoothing=ε`` mixes the target distribution with
    the uniform one: ``(1-ε)·onehot + ε/C``.

    >>> import tinyattn as ta
    >>> logits = ta.tensor([[0.0, 0.0], [0.0, 0.0]])
    >>> round(cross_entropy(logits, ta.tensor([1, -100])).item(), 4)
    0.6931
    """
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"cross_entropy: reduction must be 'none', 'mean' or 'sum', got {reduction!r}")
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"cross_entropy: label_smoothing must be in [0, 1], got {label_smoothing!r}")
    target_data = _index_array(target, input, "cross_entropy")
    if input.ndim == 0:
        raise ValueError("cross_entropy: logits must have a class dimension: (C,), (N, C) or (N, C, d…); got shape ()")
    unbatched = input.ndim == 1
    expected = () if unbatched else _target_shape(input.shape)
    if tuple(target_data.shape) != expected:
        raise ValueError(
            f"cross_entropy: logits of shape {input.shape} need class-index targets of shape {expected}, "
            f"got {tuple(target_data.shape)}"
        )
    logits = input.reshape(1, -1) if unbatched else input  # (N, C, d…)
    target_data = target_data.reshape(1) if unbatched else target_data  # (N, d…)
    num_classes = logits.shape[1]
    bad = ((target_data < 0) | (target_data >= num_classes)) & (target_data != ignore_index)
    if bool(bad.any()):
        value = int(backend.to_numpy(target_data[bad])[0])
        raise IndexError(
            f"cross_entropy: target {value} is out of bounds for {num_classes} classes "
            f"(valid: 0 to {num_classes - 1}, or ignore_index={ignore_index})"
        )
    loss = CrossEntropy.apply(
        logits, target=target_data, ignore_index=ignore_index, reduction=reduction, label_smoothing=label_smoothing
    )
    return loss.reshape(()) if unbatched and reduction == "none" else loss


from .sdpa import causal_mask, padding_mask, scaled_dot_product_attention  # noqa: E402, F401  (built on the above)

# ----------------------------------------------------------------------------- everyday losses and helpers


def mse_loss(input, target, reduction="mean"):
    """``(input - target)²``, averaged (``"mean"``), summed (``"sum"``) or not (``"none"``)."""
    squared = (input - target) ** 2
    return _reduce(squared, reduction, "mse_loss")


def _reduce(losses, reduction, name):
    if reduction == "mean":
        return losses.mean()
    if reduction == "sum":
        return losses.sum()
    if reduction == "none":
        return losses
    raise ValueError(f"{name}: reduction must be 'mean', 'sum' or 'none', got {reduction!r}")


def nll_loss(input, target, ignore_index=-100, reduction="mean"):
    """``-input[n, target[n]]`` for log-probabilities ``input (N, C)``; ``"mean"`` over the kept targets."""
    if input.ndim != 2:
        raise ValueError(f"nll_loss: expected log-probabilities of shape (N, C), got {input.shape}")
    target = _index_array(target, input, "nll_loss")
    keep = target != ignore_index
    xp = backend.namespace(target)
    picked = input[xp.arange(target.shape[0]), xp.where(keep, target, 0)]  # (N,)
    losses = -picked * Tensor._wrap(keep.astype(input.dtype))
    if reduction == "mean":
        return losses.sum() / max(int(keep.sum()), 1)
    return _reduce(losses, reduction, "nll_loss")


def pad(input, pad, mode="constant", value=0.0):
    """Pad the last ``len(pad) // 2`` dims: ``(left, right)`` for the last, then the one before…"""
    if mode != "constant":
        raise NotImplementedError(f"pad: mode {mode!r}; only 'constant' is implemented")
    if len(pad) % 2 or len(pad) // 2 > input.ndim:
        raise ValueError(f"pad: {pad} is not pairs for at most {input.ndim} dims")
    shape, index = list(input.shape), [slice(None)] * input.ndim
    for i in range(len(pad) // 2):
        dim, before, after = input.ndim - 1 - i, pad[2 * i], pad[2 * i + 1]
        shape[dim] += before + after
        index[dim] = slice(before, before + input.shape[dim])
    out = Tensor._wrap(backend.namespace(input.data).full(shape, value, dtype=input.dtype))
    out[tuple(index)] = input  # differentiable in input (an in-place write into a new tensor)
    return out


def one_hot(tensor, num_classes=-1):
    """int64 ``(…, num_classes)`` with a 1 at each index (``num_classes`` = max + 1 by default)."""
    indices = tensor.data
    if num_classes == -1:
        num_classes = int(indices.max()) + 1
    xp = backend.namespace(indices)
    return Tensor._wrap((indices[..., None] == xp.arange(num_classes)).astype("int64"))


def kl_div(input, target, reduction="mean", log_target=False):
    """``target · (log target - input)`` for log-probabilities ``input``, taken as 0 where ``target`` is 0.

    ``reduction``: ``"mean"`` (over elements), ``"batchmean"`` (sum / batch size), ``"sum"`` or ``"none"``."""
    if log_target:
        losses = target.exp() * (target - input)
    else:
        positive = target > 0
        log_target_values = ops.where(positive, target, 1.0).log()
        losses = ops.where(positive, target * (log_target_values - input), 0.0)
    if reduction == "batchmean":
        return losses.sum() / input.shape[0]
    return _reduce(losses, reduction, "kl_div")
