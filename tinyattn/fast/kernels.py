"""The array-level steps the fast nodes share: NumPy/CuPy arrays in, arrays out, no graph.

Each function is the forward or the backward of one piece of a Transformer layer, written for
speed (reductions as matrix-vector products, one softmax shift per piece of rows rather than per row,
in-place updates, large passes cut into pieces of rows for ``fast.parallel``'s pool); the nodes in
``fast.nodes`` and ``fast.blocks`` are built from them, and the test suite proves every node
equal to the reference definition in ``nn.functional``.
"""

import math

import numpy as np

from .. import backend
from . import buffers, parallel
from .activations import LOG2_E, gelu

# ----------------------------------------------------------------------------- sums as products


def column_sums(matrix):
    """``(M, N) -> (N,)``: the sum of the rows, as ``ones(M) @ matrix``: one BLAS call, faster than
    ``matrix.sum(axis=0)`` at every size a Transformer layer meets here."""
    return backend.filled_like(matrix.shape[0], 1, matrix) @ matrix  # (N,)


def row_sums(a):
    """``(…, N) -> (…, 1)``: ``a.sum(-1, keepdims=True)`` of a contiguous array, as one matrix-vector
    product (faster than NumPy's reduction along short rows)."""
    n = a.shape[-1]
    rows = a.reshape(math.prod(a.shape[:-1]), n)  # (R, N), a view
    return (rows @ backend.filled_like(n, 1, a)).reshape(a.shape[:-1] + (1,))


# ----------------------------------------------------------------------------- layer norm


def layer_norm_rows(rows, weight, bias, eps, schedule):
    """LayerNorm of each row of ``rows (M, N)``: ``(y, saved)``, ``y = x̂ · weight + bias`` (or ``x̂``
    when ``weight`` is ``None``; ``weight``, ``bias``: ``(N,)``) with ``x̂ = (x - μ) / √(σ² + eps)``,
    σ² the biased variance; ``saved`` is what ``layer_norm_rows_backward`` needs. The means are
    matrix-vector products with a vector of ``1/N`` (one BLAS call instead of a reduction). Rows
    are independent: they go in the runs of ``schedule`` (``router.row_schedule``), over the pool where it says."""
    M, N = rows.shape
    xp = backend.namespace(rows)
    average = backend.filled_like(N, 1 / max(N, 1), rows)  # (N,), 1/N each
    if len(schedule.ranges) == 1:  # one run: into fast.buffers' memory where it keeps arrays this large, else fresh
        x_hat = out = None
        if rows.nbytes >= buffers.SMALLEST_KEPT:
            x_hat = buffers.empty_like(xp, rows)
            out = None if weight is None else buffers.empty_like(xp, rows)
        x_hat, rstd, out = _normalize(rows, x_hat, None, out, average, eps, weight, bias, xp)
    else:
        x_hat, rstd = buffers.empty_like(xp, rows), xp.empty((M, 1), dtype=rows.dtype)  # (M, N), (M, 1)
        out = x_hat if weight is None else buffers.empty_like(xp, rows)  # weight and bias share the rows' dtype
        _by_rows(schedule, _normalize, (rows, x_hat, rstd, out), average, eps, weight, bias, xp)
    return out, (x_hat, rstd, average, weight, schedule)


_SPREAD = 1e-3  # a row whose standard deviation is below this fraction of its mean is centred again (_normalize)


def _normalize(x, x_hat, rstd, y, average, eps, weight, bias, xp):
    """LayerNorm of the rows ``x (R, N)`` into ``x̂``, ``r (R, 1)`` and ``y``, views of the whole pass's arrays
    or fresh arrays where they are ``None``; returns ``(x̂, r, y)``. The rows' means and biased variances are
    products with ``average`` (``N`` entries of ``1/N``), in two passes as the textbook's formula.

    The mean can be off by an ulp of itself, and a row whose spread is that small (a constant row above all)
    would come out as that error magnified by ``1/√eps``, where PyTorch gives 0. So a row whose standard
    deviation is below ``_SPREAD`` of its mean is centred again, shifted by its first entry before its mean is
    taken: exactly 0 for a constant row. (Such rows cost a second pass over themselves.)"""
    mean = x @ average  # μ (R,)
    x_hat = xp.subtract(x, mean[:, None], out=x_hat)  # x - μ
    variance = (x_hat * x_hat) @ average  # σ² (R,)
    near = variance <= xp.square(mean * _SPREAD)  # (a NaN row is not near: it stays as it is)
    if xp.count_nonzero(near):  # (one C call, where near.any() goes through NumPy's Python wrapper)
        again = xp.flatnonzero(near)
        shifted = x[again] - x[again, :1]  # (r, N): zeros for a constant row
        shifted -= (shifted @ average)[:, None]
        x_hat[again] = shifted
        variance[again] = (shifted * shifted) @ average
    variance += eps
    r = xp.reciprocal(xp.sqrt(variance, out=variance), out=variance)  # 1/√(σ² + eps) (R,), in place
    if rstd is None:
        rstd = r[:, None]
    else:
        rstd[:, 0] = r
    x_hat *= rstd  # x̂ = (x - μ) / √(σ² + eps)
    if weight is None:
        return x_hat, rstd, x_hat
    y = xp.multiply(x_hat, weight, out=y)  # (y None: a fresh array)
    y += bias
    return x_hat, rstd, y


def layer_norm_rows_backward(grad, saved):
    """``(dx, dweight, dbias)`` of ``layer_norm_rows`` for ``grad = ∂L/∂y (M, N)``, each a fresh array
    (``dweight`` and ``dbias`` ``None`` without a weight). With ``r = 1/√(σ²+eps)``
    and ``ĝ = g · weight``: ``dx = r · (ĝ - mean(ĝ) - x̂ · mean(ĝ · x̂))``, ``dweight = Σ_rows g · x̂``,
    ``dbias = Σ_rows g``. A constant row has x̂ = 0 and a finite gradient. Rows go in the forward's runs; the
    sums over rows are one BLAS call each, on the whole."""
    x_hat, rstd, average, weight, schedule = saved
    xp = backend.namespace(grad)
    dtype = grad.dtype if weight is None or weight.dtype == grad.dtype else np.promote_types(grad.dtype, weight.dtype)
    if average.dtype != dtype:
        average = average.astype(dtype)
    grad_times_x_hat = None  # g ∘ x̂ (with a weight): fast.buffers' memory from its size on, else the body's own
    if weight is not None and x_hat.nbytes >= buffers.SMALLEST_KEPT:
        grad_times_x_hat = buffers.empty_like(
            xp, x_hat, dtype if x_hat.dtype == dtype else np.promote_types(dtype, x_hat.dtype))
    if len(schedule.ranges) == 1:  # one run: the body makes dx
        grad_x, grad_times_x_hat = _normalize_backward(grad, x_hat, rstd, None, grad_times_x_hat, average, weight, xp)
    else:
        grad_x = xp.empty(x_hat.shape, dtype=dtype)  # (M, N)
        if weight is not None and grad_times_x_hat is None:  # (several runs each write their rows of it)
            grad_times_x_hat = xp.empty(x_hat.shape, dtype=np.promote_types(dtype, x_hat.dtype))
        _by_rows(schedule, _normalize_backward, (grad, x_hat, rstd, grad_x, grad_times_x_hat), average, weight, xp)
    if weight is None:
        return grad_x, None, None
    return grad_x, column_sums(grad_times_x_hat), column_sums(grad)  # (M, N), (N,), (N,)


def _normalize_backward(g, x_hat, rstd, grad_x, grad_times_x_hat, average, weight, xp):
    """The gradient of the rows ``g (R, N)`` into ``grad_x`` and (with a weight) ``g ∘ x̂``, views of the whole
    pass's arrays, or fresh arrays where they are ``None``; returns both. Its temporaries (``ĝ``, ``ĝ ∘ x̂``) are
    fresh arrays, or, from ``fast.buffers.SMALLEST_KEPT`` bytes, arrays of ``fast.buffers``."""
    kept = g.nbytes >= buffers.SMALLEST_KEPT
    if weight is not None:
        grad_times_x_hat = xp.multiply(g, x_hat, out=grad_times_x_hat)  # for dweight (out None: a fresh array)
        g = xp.multiply(g, weight, out=buffers.empty_like(xp, g, np.result_type(g, weight)) if kept else None)  # ĝ
    grad_x = xp.subtract(g, (g @ average)[:, None], out=grad_x)
    scratch = xp.multiply(g, x_hat, out=buffers.empty_like(xp, g, np.result_type(g, x_hat)) if kept else None)  # ĝ∘x̂
    xp.multiply(x_hat, (scratch @ average)[:, None], out=scratch)
    grad_x -= scratch
    grad_x *= rstd
    return grad_x, grad_times_x_hat


# ----------------------------------------------------------------------------- ReLU


def bias_relu(z, bias, schedule):
    """``A = relu(Z + b)`` in place for ``z (M, F)``, ``bias (F,)``; returns ``z``. In the runs of rows of
    ``schedule`` (``router.elementwise_schedule(z)``)."""
    _by_rows(schedule, _bias_relu, (z,), bias)
    return z


def _bias_relu(z, bias):  # rows of z
    z += bias
    z.clip(z.dtype.type(0), z.dtype.type(math.inf), out=z)  # NaN stays NaN, -0.0 stays -0.0 (as torch.relu);
    # with both bounds given NumPy runs its clip loop, faster here than np.maximum(z, 0)'s


def relu_backward(grad, activation, schedule):
    """``∂Z = ∂A ∘ [A > 0]`` in place for ``grad = ∂A (M, F)`` and the ReLU's output ``activation``;
    returns ``grad``. In the runs of rows of ``schedule`` (``router.elementwise_schedule`` of either: they have one
    shape and layout)."""
    _by_rows(schedule, _relu_gate, (grad, activation))
    return grad


def _relu_gate(grad, activation):  # rows of both
    grad *= activation > 0


def bias_gelu(z, bias, approximate, schedule, slope=True):
    """``(A, slope)`` for ``z (M, F)``: ``Z = z + b``, ``A = gelu(Z)`` (``activations.gelu``, exact or
    ``"tanh"``) written over ``z`` (returned: ``Z`` itself is not kept), and ``∂gelu/∂Z`` as a fresh ``(M, F)``
    array when ``slope`` (else ``None``). Elementwise, in the runs of rows of ``schedule``
    (``router.gelu_schedule(z)``)."""
    if not slope:
        _by_rows(schedule, _bias_gelu, (z,), bias, approximate)
        return z, None
    xp = backend.namespace(z)
    slopes = xp.empty_like(z) if z.nbytes < buffers.SMALLEST_KEPT else buffers.empty_like(xp, z)  # (M, F)
    _by_rows(schedule, _bias_gelu_and_slope, (z, slopes), bias, approximate)
    return z, slopes


def _bias_gelu(z, bias, approximate):  # rows of z
    z += bias
    gelu(z, approximate, out=z)


def _bias_gelu_and_slope(z, slope, bias, approximate):  # rows of z and of the slope
    z += bias
    gelu(z, approximate, out=z, slope=slope)


def gelu_backward_rows(grad, slope):
    """``∂Z = ∂A ∘ gelu'(Z)`` in place for ``grad = ∂A (M, F)`` and ``slope = gelu'(Z)`` (``bias_gelu``'s);
    returns ``grad``. One product, on this thread: a pass this light is bound by memory, and right after the
    GEMM that makes ``∂A`` the pool seldom pays for it (``benchmarks/pool_threshold.py --after-gemm``)."""
    grad *= slope
    return grad


def _by_rows(schedule, step, rows, *args):
    """``step(*rows, *args)``, work on the rows of the arrays ``rows`` (of as many rows each; ``None`` stays
    ``None``), in the runs of rows of ``schedule``, each run's rows a view of each array."""
    if len(schedule.ranges) == 1:
        step(*rows, *args)
        return

    def run(start, stop):
        step(*[None if r is None else r[start:stop] for r in rows], *args)

    parallel.run(run, schedule.ranges, schedule.pooled)


# ----------------------------------------------------------------------------- softmax


def softmax_into(scores, out):
    """``out = softmax(scores)`` over the last axis, ``scores (…, Lk)`` with forbidden entries already
    ``-inf`` (left as they are: the redo below reads them); ``out`` may be ``scores`` itself.

    The shift that keeps ``exp`` from overflowing is the largest score of the whole piece, not of
    each row: NumPy's maximum along short rows costs more than all the exponentials at the sizes
    attention meets. Softmax does not change when a row is shifted, so every weight above ``eps``
    of its row's largest comes out as exactly as with the row's own maximum (smaller ones, in a row
    far below the piece's maximum, may come out 0 where PyTorch gives a tiny number). A row whose
    entries all lie far below that maximum could underflow: any row whose sum falls under
    ``tiny / eps`` of the dtype (1e-31 in float32: its largest score more than about 71 below the
    piece's) is redone with its own maximum, which also leaves a row with no key at exactly 0.
    (Such rows cost a second pass over themselves.)
    """
    xp = backend.namespace(scores)
    lowest, tiny = _finfo(scores.dtype)
    peak = scores.max()  # all -inf: shift by lowest; NaN stays NaN (a NumPy scalar: Python's max, cheaper here)
    weights = scores - (max(peak, lowest) if isinstance(peak, np.generic) else xp.maximum(peak, lowest))  # (…, Lk)
    _exp_in_place(weights)  # exp(-inf) = 0 at forbidden keys
    total = _row_sums(weights)  # (…, 1)
    if not total.min() >= tiny:  # rows far below the largest score, with no key, or NaN: redo them alone
        low = ~(total[..., 0] >= tiny)  # (a NaN anywhere makes the piece's maximum NaN: each row then
        # gets its own, and the NaN stays in its row, as PyTorch keeps it)
        redo = scores[low]  # (r, Lk), a copy
        redo -= xp.maximum(redo.max(axis=1, keepdims=True), lowest)
        _exp_in_place(redo)
        weights[low] = redo
        total[low] = row_sums(redo)  # at least 1 (the row's maximum gives exp(0)), or 0 with no key
        total = xp.maximum(total, tiny)  # a row with no key: 0 / tiny = 0
    xp.divide(weights, total, out=out)
    return out


_LOG2_E32 = np.float32(LOG2_E)


def _exp_in_place(a):
    """``a = exp(a)`` in place; in float32 as ``exp2(a · log₂e)``, which NumPy computes faster with the extra product
    (its ``exp2`` is within 1 ulp; the product's rounding adds a few eps to the weights of rows far below a piece's
    maximum). Other dtypes keep ``exp``: in float16 ``log₂e`` itself would be off by 2e-4."""
    xp = backend.namespace(a)
    if a.dtype == np.float32:
        a *= _LOG2_E32
        xp.exp2(a, out=a)
    else:
        xp.exp(a, out=a)
    return a


def _row_sums(a):
    """``a.sum(-1, keepdims=True)`` as matrix-vector products, for a contiguous array or a view."""
    if a.flags.c_contiguous:
        return row_sums(a)
    return (a @ backend.filled_like(a.shape[-1], 1, a))[..., None]


_FINFO = {}


def _finfo(dtype):
    """``(lowest finite, tiny / eps)`` of a floating dtype, cached (``np.finfo`` is slow to ask).

    A row sum of at least ``tiny / eps`` (1e-31 in float32) keeps every entry that matters to the
    normalised row, one above ``eps`` of the sum, a normal number: its exponential lost nothing."""
    if dtype not in _FINFO:
        info = np.finfo(dtype)
        _FINFO[dtype] = (dtype.type(info.min), dtype.type(info.tiny / info.eps))
    return _FINFO[dtype]


def rows_dot(grad, output):
    """``D = rowsum(G ∘ O)`` ``(…, Lq, 1)`` for ``G``, ``O`` ``(…, Lq, Ev)``: each row's ``Σ_k dP·P`` in attention's
    backward (``fast.attention``), with no temporary of ``G``'s size."""
    return backend.namespace(grad).einsum("...k,...k->...", grad, output)[..., None]


# ----------------------------------------------------------------------------- heads and projections


# The heads' layouts on arrays: ``split_heads`` and ``merge_heads`` are ``nn.attention``'s on an array; the packed
# pair splits q, k and v's 3·H heads, side by side in the rows, at once, and merges them back.


def split_heads(x, num_heads):
    B, L, E = x.shape
    return x.reshape(B, L, num_heads, E // num_heads).transpose(0, 2, 1, 3)  # (B, L, E) -> (B, H, L, D), a view


def merge_heads(x):
    B, H, L, D = x.shape
    return x.transpose(0, 2, 1, 3).reshape(B, L, H * D)  # (B, H, L, D) -> (B, L, E), a copy unless laid out so


def split_packed_heads(x, num_heads):
    """``(B, L, 3·H·D) -> (3, B, H, L, D)``: q, k and v side by side in the rows, each split into ``num_heads``
    heads (``split_heads`` over the ``3·H`` heads), a view."""
    B, L, E3 = x.shape
    return x.reshape(B, L, 3, num_heads, E3 // (3 * num_heads)).transpose(2, 0, 3, 1, 4)  # (3, B, H, L, D)


def merge_packed_heads(x):
    """``(3, B, H, L, D) -> (B, L, 3·H·D)``, the inverse of ``split_packed_heads`` (a view when laid out as its
    result, else a copy)."""
    _, B, H, L, D = x.shape
    return x.transpose(1, 3, 0, 2, 4).reshape(B, L, 3 * H * D)  # (B, L, 3·H·D)


def times_weight_t(a, weight):
    """``a Wᵀ (M, N)`` for ``a (M, K)`` and a weight ``W (N, K)``, a fresh array (``fast.buffers``' memory from
    its size on), by ``parallel.matmul``."""
    M, N = len(a), len(weight)  # (len: no shape tuple made)
    if M * N * a.itemsize < buffers.SMALLEST_KEPT:  # (fast.buffers' own test, first: a small product's array is
        return parallel.matmul(a, weight.T)  # NumPy's own)
    xp = backend.namespace(a)
    dtype = a.dtype if a.dtype == weight.dtype else xp.result_type(a, weight)
    return parallel.matmul(a, weight.T, out=buffers.empty(xp, (M, N), dtype))


def in_projection(rows, weights, biases, batch_shape, num_heads, tokens=None):
    """``(qkv, W)``: ``rows (B·L, E)`` (``batch_shape = (B, L)``) projected by ``W = [W_q; W_k; W_v]``
    (``(3·H·D, E)``, stacked) and ``b = [b_q; b_k; b_v]`` (``biases`` may be ``None``) in one
    ``(B·L, 3·H·D)`` product, ``Y = X Wᵀ + b``; ``qkv (3, B, H, L, D)`` is ``Y`` split into heads (a view of it,
    or of the padded batch's rows with ``tokens``).

    ``tokens``: ``None``, or the positions ``(T,)`` among the ``B·L`` rows of the ``T`` rows given (the
    real tokens of a padded batch, ``rows (T, E)``); the product is ``T`` rows, and ``Y``'s other rows are 0."""
    xp = backend.namespace(rows)
    weight = xp.concatenate(weights)  # (3·H·D, E)
    out = times_weight_t(rows, weight)  # (B·L or T, 3·H·D)
    if biases is not None:
        out += xp.concatenate(biases)
    if tokens is not None:
        every_row = xp.zeros((batch_shape[0] * batch_shape[1], out.shape[1]), dtype=out.dtype)
        every_row[tokens] = out
        out = every_row  # (B·L, 3·H·D)
    return split_packed_heads(out.reshape(*batch_shape, out.shape[1]), num_heads), weight  # (3, B, H, L, D)


def in_projection_backward(grad, rows, weight, needs, tokens=None):
    """``[∂X, ∂W_q, ∂W_k, ∂W_v(, ∂b_q, ∂b_k, ∂b_v)]`` of ``in_projection`` for ``grad = ∂L/∂qkv
    (3, B, H, L, D)``, seen as ``G (B·L, 3·H·D)`` (a view when laid out as ``Y``), ``G = [G_q G_k G_v]``:

        ∂X = G W  (B·L, E)    ∂W_q = G_qᵀ X    ∂b_q = Σ_rows G_q    (and so for k, v)

    ``needs``: one boolean per input (x, three weights, and three biases or none); ``None`` where
    False. Each weight's and bias's gradient is its own product: a fresh array a leaf can keep.
    ``tokens`` as ``in_projection``'s: ``∂X`` is then ``(T, E)``."""
    _, B, H, L, D = grad.shape
    E = H * D
    grad = merge_packed_heads(grad).reshape(B * L, 3 * E)  # G (B·L, 3·H·D)
    if tokens is not None:
        grad = grad[tokens]  # G's rows of the tokens given to in_projection (T, 3·H·D)
    parts = (grad[:, :E], grad[:, E:2 * E], grad[:, 2 * E:])  # G_q, G_k, G_v (B·L, H·D), views
    grads = [parallel.matmul(grad, weight) if needs[0] else None]  # ∂X (B·L, E)
    for part, need in zip(parts, needs[1:4]):
        grads.append(parallel.matmul(part.T, rows) if need else None)  # ∂W (H·D, E)
    for part, need in zip(parts, needs[4:]):
        grads.append(column_sums(part) if need else None)  # ∂b (H·D,)
    return grads
