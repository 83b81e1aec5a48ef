"""The array-level steps the fast nodes share: NumPy/CuPy arrays in, arrays out, no graph.

Each function is the forward or the backward of one piece of a Transformer layer, written for
speed (reductions as matrix-vector products, one softmax shift per piece of rows rather than per row,
in-place updates, large passes cut into pieces of rows for ``fast.parallel``'s pool); the nodes in
``fast.nodes`` and ``fast.blocks`` are built from them, and the test suite proves every node
equal to the reference definition in ``nn.functional``.
"""

import math

import numpy as np

from .. import backend, ops
from . import parallel
from .activations import LOG2_E, gelu
from .tuning import values as tuning

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


def layer_norm_rows(rows, weight, bias, eps):
    """LayerNorm of each row of ``rows (M, N)``: ``(y, saved)``, ``y = x̂ · weight + bias`` (or ``x̂``
    when ``weight`` is ``None``; ``weight``, ``bias``: ``(N,)``) with ``x̂ = (x - μ) / √(σ² + eps)``,
    σ² the biased variance; ``saved`` is what ``layer_norm_rows_backward`` needs. The means are
    matrix-vector products with a vector of ``1/N`` (one BLAS call instead of a reduction). Rows
    are independent: a large array goes in pieces of rows over the pool (``fast.parallel``)."""
    M, N = rows.shape
    average = backend.filled_like(N, 1 / max(N, 1), rows)  # (N,), 1/N each
    # One piece (what parallel.pieces gives), or CuPy: the same steps on the whole array. Several pieces
    # always go as pieces, pooled or not: a row's BLAS sum can depend on how many rows a call has.
    if M * N <= tuning.piece_elements or type(rows) is not np.ndarray:
        return _layer_norm_whole(rows, weight, bias, eps, average)
    xp = backend.namespace(rows)
    ranges = parallel.pieces(M, N)
    x_hat, rstd = xp.empty_like(rows), xp.empty((M, 1), dtype=rows.dtype)  # (M, N), (M, 1)
    out = x_hat if weight is None else xp.empty_like(rows)  # weight and bias share the rows' dtype (the callers check)

    def normalize(start, stop):  # rows start:stop, every array below a piece of the ones above
        x, centered, r = rows[start:stop], x_hat[start:stop], rstd[start:stop]
        variance = _center(x, average, centered)
        r[:, 0] = 1 / xp.sqrt(variance + eps)
        centered *= r  # x̂
        if weight is None:
            return
        y = out[start:stop]
        xp.multiply(centered, weight, out=y)
        y += bias

    parallel.run(normalize, ranges, rows)
    return out, (x_hat, rstd, average, weight)


def _layer_norm_whole(rows, weight, bias, eps, average):
    """``layer_norm_rows`` in one piece: ``normalize`` above, on all rows at once, into fresh arrays."""
    xp = backend.namespace(rows)
    centered = xp.empty_like(rows)  # (M, N)
    variance = _center(rows, average, centered)  # (M,)
    rstd = (1 / xp.sqrt(variance + eps))[:, None]  # (M, 1)
    centered *= rstd  # x̂
    saved = (centered, rstd, average, weight)
    if weight is None:
        return centered, saved
    out = centered * weight  # (M, N), a fresh array
    out += bias
    return out, saved


_SPREAD = 1e-3  # a row whose standard deviation is below this fraction of its mean is centred again (_center)


def _center(x, average, centered):
    """``centered = x - mean(x)`` for each row of ``x (R, N)`` (into ``centered``), and the rows' biased variance
    ``(R,)``, in two passes as the textbook's formula; ``average`` is ``N`` entries of ``1/N``.

    The mean, a product with ``1/N``, can be off by an ulp of itself, and a row whose spread is that small (a
    constant row above all) would come out as that error magnified by ``1/√eps``, where PyTorch gives 0. So a
    row whose standard deviation is below ``_SPREAD`` of its mean is centred again, shifted by its first entry
    before its mean is taken: exactly 0 for a constant row. (Such rows cost a second pass over themselves.)"""
    xp = backend.namespace(x)
    mean = x @ average  # (R,)
    xp.subtract(x, mean[:, None], out=centered)
    variance = (centered * centered) @ average  # (R,)
    near = variance <= xp.square(mean * _SPREAD)  # (a NaN row is not near: it stays as it is)
    if near.any():
        again = xp.flatnonzero(near)
        shifted = x[again] - x[again, :1]  # (r, N): zeros for a constant row
        shifted -= (shifted @ average)[:, None]
        centered[again] = shifted
        variance[again] = (shifted * shifted) @ average
    return variance


def layer_norm_rows_backward(grad, saved):
    """``(dx, dweight, dbias)`` of ``layer_norm_rows`` for ``grad = ∂L/∂y (M, N)``, each a fresh array
    (``dweight`` and ``dbias`` ``None`` without a weight). With ``r = 1/√(σ²+eps)``
    and ``ĝ = g · weight``: ``dx = r · (ĝ - mean(ĝ) - x̂ · mean(ĝ · x̂))``, ``dweight = Σ_rows g · x̂``,
    ``dbias = Σ_rows g``. A constant row has x̂ = 0 and a finite gradient. Rows go in pieces over the
    pool; the sums over rows are one BLAS call each, on the whole."""
    x_hat, rstd, average, weight = saved
    M, N = x_hat.shape
    if M * N <= tuning.piece_elements or type(grad) is not np.ndarray:  # one piece, or CuPy (see above)
        return _layer_norm_whole_backward(grad, x_hat, rstd, average, weight)
    xp = backend.namespace(grad)
    ranges = parallel.pieces(M, N)
    dtype = grad.dtype if weight is None else xp.result_type(grad, weight)
    grad_x = xp.empty((M, N), dtype=dtype)
    grad_times_x_hat = None if weight is None else xp.empty((M, N), dtype=xp.result_type(grad, x_hat))
    if average.dtype != dtype:
        average = average.astype(dtype)

    def backward(start, stop):  # rows start:stop
        g, x, gx = grad[start:stop], x_hat[start:stop], grad_x[start:stop]
        if weight is not None:
            xp.multiply(g, x, out=grad_times_x_hat[start:stop])  # for dweight
            g = g * weight  # ĝ
        xp.subtract(g, (g @ average)[:, None], out=gx)
        gx -= x * ((g * x) @ average)[:, None]
        gx *= rstd[start:stop]

    parallel.run(backward, ranges, grad)
    if weight is None:
        return grad_x, None, None
    return grad_x, column_sums(grad_times_x_hat), column_sums(grad)  # (M, N), (N,), (N,)


def _layer_norm_whole_backward(grad, x_hat, rstd, average, weight):
    """``layer_norm_rows_backward`` in one piece: ``backward`` above, on all rows at once."""
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


# ----------------------------------------------------------------------------- ReLU


def bias_relu(z, bias):
    """``A = relu(Z + b)`` in place for ``z (M, F)``, ``bias (F,)``; returns ``z``. Pieces of rows over the pool."""
    rows, bias_args = _with_bias(z, bias)
    _by_rows(_bias_relu, rows, *bias_args, backend.namespace(z))
    return z


def _with_bias(z, bias, *others):
    """``(rows, bias_args)`` for ``_by_rows(step, rows, *bias_args, …)`` with ``step(z, *others, bias, …)``: the
    rows of ``z`` and ``others`` with the bias an argument, or, for an F-ordered ``z (M, F)`` (as
    ``blocks.times_weight_t`` makes) and a bias ``(F,)``, the rows of ``zᵀ`` (contiguous) with the bias a column
    among the rows."""
    if z.ndim == 2 and np.ndim(bias) == 1 and not z.flags.c_contiguous and z.T.flags.c_contiguous:
        return (z.T, *[o.T for o in others], bias[:, None]), ()
    return (z, *others), (bias,)


def _bias_relu(z, bias, xp):  # rows of z
    z += bias
    xp.clip(z, z.dtype.type(0), z.dtype.type(math.inf), out=z)  # NaN stays NaN, -0.0 stays -0.0 (as torch.relu);
    # with both bounds given NumPy runs its clip loop, faster here than np.maximum(z, 0)'s


def relu_backward(grad, activation):
    """``∂Z = ∂A ∘ [A > 0]`` in place for ``grad = ∂A (M, F)`` and the ReLU's output ``activation``;
    returns ``grad``. Pieces of rows over the pool."""
    _by_rows(_relu_gate, (grad, activation))
    return grad


def _relu_gate(grad, activation):  # rows of both
    grad *= activation > 0


def bias_gelu(z, bias, approximate, slope=True):
    """``(A, slope)`` for ``z (M, F)``: ``Z = z + b``, ``A = gelu(Z)`` (``activations.gelu``, exact or
    ``"tanh"``) written over ``z`` (returned: ``Z`` itself is not kept), and ``∂gelu/∂Z`` as a fresh ``(M, F)``
    array when ``slope`` (else ``None``). Elementwise, in pieces of rows over the pool."""
    if not slope:
        rows, bias_args = _with_bias(z, bias)
        _by_rows(_bias_gelu, rows, *bias_args, approximate)
        return z, None
    slopes = backend.namespace(z).empty_like(z)  # in z's order
    rows, bias_args = _with_bias(z, bias, slopes)
    _by_rows(_bias_gelu_and_slope, rows, *bias_args, approximate)
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


def _by_rows(step, rows, *args):
    """``step(*rows, *args)``, elementwise work on the arrays ``rows`` (of as many rows each): in pieces of rows on
    the pool when it pays, else once on the whole arrays (elementwise work gives the same bits however
    the rows are cut)."""
    first = rows[0]
    if first.size >= tuning.pool_min_elements:  # (smaller passes never go to the pool: no pieces to cut)
        ranges = parallel.pieces(first.shape[0], math.prod(first.shape[1:]))
        if parallel.pays(first, ranges):
            parallel.run(lambda start, stop: step(*[r[start:stop] for r in rows], *args), ranges, first)
            return
    step(*rows, *args)


# ----------------------------------------------------------------------------- masked softmax


def masked_softmax(scores, allowed):
    """Softmax of ``scores`` over the last axis among the ``allowed`` entries (``None``: all), as a
    fresh array; forbidden entries and rows with none allowed get 0. (``softmax_into`` does the work.)"""
    xp = backend.namespace(scores)
    if allowed is not None:
        scores = xp.where(allowed, scores, -math.inf)  # (…, Lq, Lk), a copy; a forbidden key scores -inf
    out = xp.empty(scores.shape, dtype=scores.dtype)
    if scores.size:
        softmax_into(scores, out)
    return out


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
    weights = scores - xp.maximum(scores.max(), lowest)  # (…, Lk), a fresh array; all -inf: shift by lowest
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


def _exp_in_place(a):
    """``a = exp(a)`` in place; in float32 as ``exp2(a · log₂e)``, which NumPy computes faster with the extra product
    (its ``exp2`` is within 1 ulp; the product's rounding adds a few eps to the weights of rows far below a piece's
    maximum). Other dtypes keep ``exp``: in float16 ``log₂e`` itself would be off by 2e-4."""
    xp = backend.namespace(a)
    if a.dtype == np.float32:
        a *= a.dtype.type(LOG2_E)
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


def masked_softmax_backward(grad, y, out=None, dot=None):
    """``∂L/∂s = y · (g - Σ g·y)`` for the softmax ``y`` of ``s``, into ``out`` (``out=grad``: in
    place) or a fresh array. ``dot``: each row's ``Σ g·y`` ``(…, 1)`` when the caller has it
    (attention's ``rows_dot(G, O)``), else computed here."""
    xp = backend.namespace(grad)
    if dot is None:
        dot = _row_sums(grad * y)  # (…, Lq, 1): Σ g·y
    grad_scores = xp.subtract(grad, dot, out=out)
    grad_scores *= y
    return grad_scores


# ----------------------------------------------------------------------------- attention
#
# The whole-matrix attention goes in pieces: forward and the scores' gradient a run of query rows
# of every (…) slice at a time, the keys' and values' gradients a run of keys at a time. A piece's
# scores fit in a core's cache (``fast.parallel.pieces``), so mask, softmax and product read them
# while they are hot, and the pieces run on every core. Each BLAS call in a piece is small enough
# that OpenBLAS runs it on one thread (``tuning.blas_one_thread_mnk``): one thread per core.
# Attention small enough to be one piece runs the same steps once over the whole arrays
# (``_attention_whole``, ``_attention_backward_whole``): no slicing, no products into strided views.
# Where Q, K and V share their batch and one slice's scores fit a piece, a piece is instead a few whole
# batch slices (``batch_slices``): its products are whole slices' (larger, faster GEMMs, on one BLAS
# thread each: ``parallel.one_blas_thread``), and backward needs no second pass by keys, since a
# slice's dK and dV come from that slice alone (``_attention_by_slices``, ``_attention_backward_by_slices``).


def _rows(mask, start, stop):
    """The part of a mask ``(…, Lq or 1, Lk or 1)`` (or fewer axes) that covers queries ``start:stop``."""
    if mask is None or mask.ndim < 2 or mask.shape[-2] == 1:
        return mask
    return mask[..., start:stop, :]


def _one_piece(like, Lq, Lk, batch, head_size):
    """Whether ``_query_pieces`` gives one piece both ways (queries and keys): all the scores within
    ``piece_elements`` and their GEMMs on one BLAS thread, or not NumPy. Asked first, as it is cheap."""
    return type(like) is not np.ndarray or (
        Lq * Lk * math.prod(batch) <= tuning.piece_elements
        and Lq * Lk * head_size <= tuning.blas_one_thread_mnk)


def _query_pieces(like, Lq, Lk, batch, head_size):
    """``(ranges, elements)``: runs of query rows, and the pass's size for the pool's choice (0: never pooled).

    Each piece's scores are about ``piece_elements``. Where that many rows keep its GEMMs on one BLAS thread,
    the pieces go over the pool. With long keys they would be a few rows each, and every piece reads all of K
    and V again for little work: there a piece has at least ``head_size`` rows (re-reading K and V then costs no
    more than the scores), and the pieces go one after another, each GEMM on the BLAS's own threads."""
    if type(like) is not np.ndarray:  # CuPy (and the strict test backend): the whole at once
        return [(0, Lq)], 0
    per_row = math.prod(batch) * Lk  # scores per query row
    one_thread_rows = tuning.blas_one_thread_mnk // max(1, Lk * head_size)
    if one_thread_rows >= head_size:
        return parallel.pieces(Lq, per_row, one_thread_rows), Lq * per_row
    return parallel.pieces(Lq, per_row, least_items=head_size), 0


def attention(query, key, value, attn_mask, allowed, is_causal, scale, dropout_p, out=None):
    """``(O, P, M)`` of ``O = dropout(masked softmax(Q Kᵀ·scale + mask)) V``: the output ``(…, Lq, Ev)``
    (written into ``out`` when given, e.g. a view laid out as merged heads), the weights ``P (…, Lq, Lk)``
    and dropout's scaled keep-mask ``M`` (or ``None``). ``attn_mask`` is added to the scores,
    ``allowed`` (boolean, ``True`` = may attend) and ``is_causal`` forbid keys; both broadcast."""
    Lq, Lk, E, Ev = query.shape[-2], key.shape[-2], query.shape[-1], value.shape[-1]
    batch = query.shape[:-2]
    if key.shape[:-2] != batch:
        batch = tuple(np.broadcast_shapes(batch, key.shape[:-2]))
    whole = (query, key, value, attn_mask, allowed, is_causal, scale, dropout_p, out)
    if _one_piece(query, Lq, Lk, batch, max(E, Ev)):  # one piece: the same steps on whole arrays, fewer calls
        return _attention_whole(*whole)
    slices = batch_slices(query, (query, key, value), Lq, Lk)
    if slices is not None:
        return _attention_by_slices(slices, *whole)
    ranges, elements = _query_pieces(query, Lq, Lk, batch, max(E, Ev))
    if len(ranges) == 1:
        return _attention_whole(*whole)
    xp = backend.namespace(query)
    weights = xp.empty(batch + (Lq, Lk), dtype=query.dtype)  # P, kept for backward
    keep = _dropout_keep(weights.shape, weights.dtype, weights, dropout_p)
    if out is None:
        out_batch = batch if value.shape[:-2] == batch else tuple(np.broadcast_shapes(batch, value.shape[:-2]))
        out = xp.empty(out_batch + (Lq, Ev), dtype=query.dtype)
    key_t = key.swapaxes(-1, -2)  # (…, E, Lk), a view

    def attend(start, stop):  # queries start:stop of every (…) slice
        rows = (Ellipsis, slice(start, stop), slice(None))
        above = xp.arange(Lk) > xp.arange(start, stop)[:, None] if is_causal else None  # (R, Lk)
        _attend(xp, query[rows], key_t, value, scale, _rows(attn_mask, start, stop), _rows(allowed, start, stop),
                above, None if keep is None else keep[rows], weights[rows], out[rows])

    parallel.run(attend, ranges, weights, elements)
    return out, weights, keep


def _attend(xp, query, key_t, value, scale, attn_mask, allowed, above, keep, scores=None, out=None):
    """One piece of ``attention`` (or the whole of it, as one piece): ``scores`` (a view of ``P``, or ``None``: a
    fresh array) becomes the masked softmax of ``Q Kᵀ·scale`` and ``out`` (or a fresh array) gets ``P̃ V``;
    returns both. ``attn_mask``, ``allowed``, ``above`` (the causal mask) and ``keep`` are the piece's parts of
    the masks (or ``None``); each broadcasts to ``scores``."""
    if scores is None:
        scores = (query * scale) @ key_t  # S = Q Kᵀ·scale; scaling Q is the cheaper side
    else:
        xp.matmul(query * scale, key_t, out=scores)
    if attn_mask is not None:
        scores += attn_mask  # the mask broadcasts to the scores (checked by the caller)
    forbidden = None if allowed is None else ~allowed
    if above is not None:  # query i may attend key j <= i
        forbidden = above if forbidden is None else forbidden | above
    if forbidden is not None:
        xp.copyto(scores, -math.inf, where=forbidden)
    if scores.size:
        softmax_into(scores, scores)  # P
    dropped = scores if keep is None else scores * keep  # P̃
    # O = P̃ V; `@` when there is no `out` (NumPy's matmul is slower with out=None)
    out = dropped @ value if out is None else xp.matmul(dropped, value, out=out)
    return scores, out


def batch_slices(like, arrays, Lq, Lk):
    """Pieces of whole batch slices for an attention pass, or ``None`` where it goes in runs of query rows.

    Each piece is an index ``(i, j, …, slice(h0, h1))``: one position of every leading axis but the last,
    and a run of the last (the heads); or, where a piece holds all the heads, ``(i, …, slice(b0, b1), slice(None))``:
    a run of the axis before them too (the batch of ``(B, H, L, D)``: fewer, longer calls). Either is a basic
    index, a view of any of the pass's arrays, whatever their strides. A piece holds about ``piece_elements``
    scores, and its products, each a whole slice's, run on one BLAS thread (``parallel.one_blas_thread``)
    while its scores are in the cache. Taken where
    ``arrays`` (Q, K, V, and the gradient in backward) are NumPy arrays of one batch (nothing broadcast),
    a slice's scores fit a piece, and the slices of one position are not too few to be worth a piece."""
    batch = arrays[0].shape[:-2]
    if type(like) is not np.ndarray or not batch or any(a.shape[:-2] != batch for a in arrays):
        return None
    per_slice, heads = Lq * Lk, batch[-1]
    if per_slice > tuning.piece_elements or heads * per_slice < tuning.piece_elements // 4:
        return None
    run = max(1, min(heads, tuning.piece_elements // per_slice))  # slices per piece
    if run == heads and len(batch) >= 2:  # whole heads: a piece may take several positions of the axis before,
        # leaving at least tuning.min_batch_pieces pieces (where there are that many positions) of equal sizes
        count = batch[-2]
        rows = max(1, min(tuning.piece_elements // (per_slice * heads), count // tuning.min_batch_pieces))
        number = -(-count // rows)
        size = -(-count // number)
        return [position + (slice(b, min(b + size, count)), slice(None))
                for position in np.ndindex(*batch[:-2]) for b in range(0, count, size)]
    return [position + (slice(h, min(h + run, heads)),) for position in np.ndindex(*batch[:-1])
            for h in range(0, heads, run)]


def _part(mask, batch, index):
    """The part of a mask that broadcasts to ``(batch…, Lq, Lk)`` covering the batch slices ``index``
    (``batch_slices``): an axis of size 1 is kept as it is, to broadcast."""
    if mask is None:
        return None
    mask = mask.reshape((1,) * (len(batch) + 2 - mask.ndim) + mask.shape)  # (…, Lq or 1, Lk or 1)
    return mask[tuple(i if n != 1 else 0 if type(i) is not slice else slice(None)
                      for n, i in zip(mask.shape[:-2], index))]


def _attention_by_slices(slices, query, key, value, attn_mask, allowed, is_causal, scale, dropout_p, out):
    """``attention`` a few whole batch slices at a time (``batch_slices``), over the pool."""
    xp, batch, Lq, Lk = backend.namespace(query), query.shape[:-2], query.shape[-2], key.shape[-2]
    weights = xp.empty(batch + (Lq, Lk), dtype=query.dtype)  # P, kept for backward
    keep = _dropout_keep(weights.shape, weights.dtype, weights, dropout_p)
    out = xp.empty(batch + (Lq, value.shape[-1]), dtype=query.dtype) if out is None else out
    above = xp.arange(Lk) > xp.arange(Lq)[:, None] if is_causal else None  # (Lq, Lk): query i attends keys j <= i

    def attend(first, last):  # pieces first:last, each (n, Lq, ·) views
        for index in slices[first:last]:
            _attend(xp, query[index], key[index].swapaxes(-1, -2), value[index], scale, _part(attn_mask, batch, index),
                    _part(allowed, batch, index), above, None if keep is None else keep[index], weights[index],
                    out[index])

    with parallel.one_blas_thread():
        parallel.run(attend, [(i, i + 1) for i in range(len(slices))], weights)
    return out, weights, keep


def _dropout_keep(shape, dtype, like, dropout_p):
    """F.dropout's scaled keep-mask over ``shape`` (``backend.dropout_mask``: the same draw), kept for backward;
    ``None`` without dropout."""
    if dropout_p == 0.0:
        return None
    return backend.dropout_mask(shape, dropout_p, dtype, backend.device_of(like))


def _attention_whole(query, key, value, attn_mask, allowed, is_causal, scale, dropout_p, out):
    """``attention`` as one piece: ``_attend`` once over the whole arrays."""
    xp = backend.namespace(query)
    Lq, Lk = query.shape[-2], key.shape[-2]
    keep = None
    if dropout_p:
        batch = query.shape[:-2] if key.shape[:-2] == query.shape[:-2] else tuple(
            np.broadcast_shapes(query.shape[:-2], key.shape[:-2]))
        keep = _dropout_keep(batch + (Lq, Lk), query.dtype, query, dropout_p)
    above = xp.arange(Lk) > xp.arange(Lq)[:, None] if is_causal else None  # (Lq, Lk)
    weights, out = _attend(xp, query, key.swapaxes(-1, -2), value, scale, attn_mask, allowed, above, keep, None, out)
    return out, weights, keep


def attention_backward(grad, query, key, value, weights, keep, scale, output, mask_shape=None, out=None):
    """``(dQ, dK, dV, dmask)`` of ``attention`` for ``grad = ∂L/∂O`` and the forward's output ``O`` (``output``,
    ``(…, Lq, Ev)`` as ``grad``), before any sum over broadcast axes (each of ``grad``'s leading shape; written into
    ``out = (dQ, dK, dV)`` when given); ``dmask`` is ``None`` unless ``mask_shape`` is given. With ``P̃ = P ∘ M``:

        dP = (G Vᵀ) ∘ M    D = rowsum(G ∘ O)    dS = P ∘ (dP - D)    dQ = dS K·scale   (a run of queries at a time)
        dV = P̃ᵀ G          dK = dSᵀ Q·scale                                          (a run of keys at a time)

    ``D`` is FlashAttention's (Dao et al. 2022): ``Σ_k dP_ik P_ik = Σ_k (G_i·V_k) M_ik P_ik = G_i · Σ_k P̃_ik V_k
    = G_i · O_i``, each row's ``Σ_k dP·P``: a sum over ``Ev`` per row instead of a pass over the ``(…, Lq, Lk)``
    scores and a temporary of their size (``rows_dot``, as ``BlockedAttention`` computes it too)."""
    xp = backend.namespace(grad)
    lead, (Lq, Lk) = grad.shape[:-2], weights.shape[-2:]
    E, Ev = query.shape[-1], value.shape[-1]
    size = max(E, Ev)
    arguments = (grad, query, key, value, weights, keep, scale, output, mask_shape, out)
    if _one_piece(grad, Lq, Lk, lead, size):  # one piece each way: the same steps on whole arrays, fewer calls
        return _attention_backward_whole(*arguments)
    slices = batch_slices(grad, (grad, query, key, value), Lq, Lk)
    if slices is not None:
        return _attention_backward_by_slices(slices, *arguments)
    query_ranges, query_elements = _query_pieces(grad, Lq, Lk, lead, size)
    key_ranges, key_elements = _query_pieces(grad, Lk, Lq, lead, size)  # keys, a run at a time
    if len(query_ranges) == 1 and len(key_ranges) == 1:
        return _attention_backward_whole(*arguments)
    if out is None:
        out = tuple(xp.empty(lead + (n, size), dtype=grad.dtype) for n, size in ((Lq, E), (Lk, E), (Lk, Ev)))
    grad_query, grad_key, grad_value = out
    grad_scores = xp.empty(lead + (Lq, Lk), dtype=grad.dtype)  # dS
    value_t = value.swapaxes(-1, -2)  # (…, Ev, Lk), a view

    def scores_grad(start, stop):  # queries start:stop
        rows = (Ellipsis, slice(start, stop), slice(None))
        grad_piece, p = grad_scores[rows], weights[rows]  # (…, R, Lk) views
        xp.matmul(grad[rows], value_t, out=grad_piece)  # G Vᵀ
        if keep is not None:
            grad_piece *= keep[rows]  # dP
        D = rows_dot(grad[rows], output[rows])  # (…, R, 1)
        masked_softmax_backward(grad_piece, p, out=grad_piece, dot=D)  # dS, in place
        xp.matmul(grad_piece, key, out=grad_query[rows])
        grad_query[rows] *= scale  # dQ = dS K·scale  (…, R, E)

    def keys_grad(start, stop):  # keys start:stop
        keys, columns = (Ellipsis, slice(start, stop), slice(None)), (Ellipsis, slice(start, stop))
        dropped = weights[columns] if keep is None else weights[columns] * keep[columns]  # P̃ (…, Lq, C)
        xp.matmul(dropped.swapaxes(-1, -2), grad, out=grad_value[keys])  # dV = P̃ᵀ G  (…, C, Ev)
        xp.matmul(grad_scores[columns].swapaxes(-1, -2), query, out=grad_key[keys])
        grad_key[keys] *= scale  # dK = dSᵀ Q·scale  (…, C, E)

    parallel.run(scores_grad, query_ranges, grad_scores, query_elements)
    parallel.run(keys_grad, key_ranges, grad_scores, key_elements)
    grad_mask = None
    if mask_shape is not None:
        grad_mask = ops.sum_to(grad_scores, mask_shape)
    return grad_query, grad_key, grad_value, grad_mask


def rows_dot(grad, output):
    """``D = rowsum(G ∘ O)`` ``(…, Lq, 1)`` for ``G``, ``O`` ``(…, Lq, Ev)``: each row's ``Σ_k dP·P`` in attention's
    backward (``attention_backward``, ``BlockedAttention``), with no temporary of ``G``'s size."""
    return backend.namespace(grad).einsum("...k,...k->...", grad, output)[..., None]


def _attend_backward(xp, grad, query, key, value, weights, keep, scale, output, grad_scores=None, out=(None,) * 3,
                     mask_shape=None, scale_first=False):
    """One piece's (or the whole's) backward, in the order of ``attention_backward``'s formulas: ``dS`` into
    ``grad_scores`` (or a fresh array), then ``dQ, dK, dV`` into ``out`` (or fresh arrays); returns ``dmask``
    (``dS`` summed to ``mask_shape``, or ``None``) and the three. ``scale_first``: the scale goes onto ``dS`` once,
    before both products (a fresh ``dS``: one pass over the scores), else onto ``dQ`` and ``dK`` after them (the
    same up to round-off)."""
    value_t = value.swapaxes(-1, -2)  # (…, Ev, Lk), a view
    if grad_scores is None:
        grad_scores = grad @ value_t  # G Vᵀ  (…, Lq, Lk)
    else:
        xp.matmul(grad, value_t, out=grad_scores)
    if keep is not None:
        grad_scores *= keep  # dP
    masked_softmax_backward(grad_scores, weights, out=grad_scores, dot=rows_dot(grad, output))  # dS, in place
    grad_mask = None
    if mask_shape is not None:
        grad_mask = ops.sum_to(grad_scores, mask_shape)
        if scale_first and grad_mask is grad_scores:
            grad_mask = grad_scores.copy()  # dS is scaled in place below
    if scale_first:
        grad_scores *= scale  # dS·scale
    dropped = weights if keep is None else weights * keep  # P̃
    products = ((grad_scores, key), (grad_scores.swapaxes(-1, -2), query), (dropped.swapaxes(-1, -2), grad))
    grads = [a @ b if o is None else xp.matmul(a, b, out=o) for (a, b), o in zip(products, out)]
    if not scale_first:
        grads[0] *= scale  # dQ = dS K·scale  (…, Lq, E)
        grads[1] *= scale  # dK = dSᵀ Q·scale  (…, Lk, E); dV = P̃ᵀ G  (…, Lk, Ev)
    return grad_mask, grads


def _attention_backward_whole(grad, query, key, value, weights, keep, scale, output, mask_shape, out):
    """``attention_backward`` as one piece: ``_attend_backward`` once over the whole arrays."""
    xp = backend.namespace(grad)
    grad_mask, grads = _attend_backward(xp, grad, query, key, value, weights, keep, scale, output,
                                        out=(None,) * 3 if out is None else out, mask_shape=mask_shape,
                                        scale_first=True)
    return (*grads, grad_mask)


def _attention_backward_by_slices(slices, grad, query, key, value, weights, keep, scale, output, mask_shape, out):
    """``attention_backward`` a few whole batch slices at a time (``batch_slices``), over the pool: a
    slice's dQ, dK and dV come from that slice alone."""
    xp, E, Ev = backend.namespace(grad), query.shape[-1], value.shape[-1]
    lead, (Lq, Lk) = grad.shape[:-2], weights.shape[-2:]
    if out is None:
        out = tuple(xp.empty(lead + (n, size), dtype=grad.dtype) for n, size in ((Lq, E), (Lk, E), (Lk, Ev)))
    every_grad_scores = None if mask_shape is None else xp.empty(lead + (Lq, Lk), dtype=grad.dtype)  # for dmask

    def backward(first, last):  # pieces first:last
        for index in slices[first:last]:
            _attend_backward(xp, grad[index], query[index], key[index], value[index], weights[index],
                             None if keep is None else keep[index], scale, output[index],
                             None if every_grad_scores is None else every_grad_scores[index],
                             tuple(o[index] for o in out))

    with parallel.one_blas_thread():
        parallel.run(backward, [(i, i + 1) for i in range(len(slices))], weights)
    grad_mask = None if mask_shape is None else ops.sum_to(every_grad_scores, mask_shape)
    return (*out, grad_mask)


def packed_attention(qkv, attn_mask, allowed, is_causal, scale, dropout_p):
    """``(O, P, M)``: attention over packed ``qkv (3, B, H, L, D)``, its output with the heads merged
    ``(B, L, H·D)`` (a fresh array, written in that layout), the weights ``P (B, H, L, L)`` and dropout's
    keep-mask ``M`` (or ``None``). Masks as ``Attention``'s."""
    _, B, H, L, D = qkv.shape
    merged = backend.namespace(qkv).empty((B, L, H, D), dtype=qkv.dtype)
    _, weights, keep = attention(qkv[0], qkv[1], qkv[2], attn_mask, allowed, is_causal, scale, dropout_p,
                                 out=merged.transpose(0, 2, 1, 3))  # heads written straight into (B, L, H, D)
    return merged.reshape(B, L, H * D), weights, keep  # (B, L, H·D), a view


def packed_attention_backward(grad, qkv, weights, keep, scale, output, mask_shape=None):
    """``(dqkv, dmask)`` of ``packed_attention`` for ``grad = ∂L/∂O (B, L, H·D)`` and its output ``O`` (``output``,
    ``(B, L, H·D)``): ``dqkv (3, B, H, L, D)`` a view of a fresh ``(B, L, 3, H, D)`` array, the layout
    ``InProjection``'s output has, so that its backward reads it as ``(B·L, 3·H·D)`` rows without a copy; ``dmask``
    ``None`` unless ``mask_shape`` is given."""
    _, B, H, L, D = qkv.shape
    grad, output = (a.reshape(B, L, H, D).transpose(0, 2, 1, 3) for a in (grad, output))  # (B, H, L, D), views
    grad_qkv = backend.namespace(grad).empty((B, L, 3, H, D), dtype=grad.dtype).transpose(2, 0, 3, 1, 4)
    *_, grad_mask = attention_backward(grad, qkv[0], qkv[1], qkv[2], weights, keep, scale, output, mask_shape,
                                       out=(grad_qkv[0], grad_qkv[1], grad_qkv[2]))  # written in place
    return grad_qkv, grad_mask  # (3, B, H, L, D)


def attention_by_sequences(query, key, value, cu_seqlens, scale, out):
    """Self-attention of ``B`` sequences laid back to back, each within itself: ``query``, ``key``, ``value``
    ``(H, T, D)`` (views, any strides), sequence ``b`` the rows ``cu_seqlens[b]:cu_seqlens[b + 1]`` (``cu_seqlens
    (B + 1,)``, the cumulative sequence lengths of FlashAttention's variable-length kernels: ``0``, then ascending
    to ``T``); ``O = softmax(Q·scale Kᵀ) V`` per sequence and head, written into ``out (H, T, D)`` (a view laid out
    as its reader wants) and returned. No mask, no dropout, no weights kept: inference on the real tokens of a
    padded batch (``blocks.SelfAttentionBlock`` with ``cu_seqlens``), where it gives what attention over the padded
    batch with its padding mask gives, without the padding's rows and columns in the products.

    The scores of every sequence go into one ``(H·T, l_max)`` array, sequence ``b``'s ``(H, l, l)`` in its rows
    ``H·cu_seqlens[b]:H·cu_seqlens[b + 1]`` and first ``l`` columns, the columns past ``l`` ``-inf`` (forbidden
    keys); the softmax is ``softmax_into`` once over that whole array (one shift for all; a row far below it is
    redone with its own maximum). The two products are one call per sequence, ``H`` small GEMMs each."""
    xp = backend.namespace(query)
    H, T, _ = query.shape
    starts = [int(o) for o in cu_seqlens]
    lengths = [stop - start for start, stop in zip(starts, starts[1:])]
    if not starts or starts[0] != 0 or starts[-1] != T or min(lengths, default=0) < 0:
        raise ValueError(f"attention_by_sequences: cu_seqlens must run from 0 up to T = {T} (the rows of query), "
                         f"never down; got {starts}")
    widest = max(lengths, default=0)
    if not T or not widest:
        return out
    query = query * query.dtype.type(scale)  # Q·scale (H, T, D), a fresh array, as the padded route scales it
    scores = xp.full((H * T, widest), -math.inf, dtype=query.dtype)  # every sequence's (H·l, l_max) rows

    def scores_of(b):  # sequence b's scores (H, l, l), a view
        l = lengths[b]
        return scores[H * starts[b]:H * starts[b + 1], :l].reshape(H, l, l)

    spans = [(b, slice(starts[b], starts[b + 1])) for b in range(len(lengths)) if lengths[b]]
    for b, span in spans:
        xp.matmul(query[:, span], key[:, span].swapaxes(-1, -2), out=scores_of(b))  # S = Q·scale Kᵀ (H, l, l)
    softmax_into(scores, scores)  # P; the padding columns: exp(-inf) = 0
    for b, span in spans:
        p, o = scores_of(b), out[:, span]  # (H, l, l), (H, l, D)
        if o.strides[-1] == o.itemsize:  # O = P V into row-major (l, D) matrices
            xp.matmul(p, value[:, span], out=o)
        else:  # Oᵀ = Vᵀ Pᵀ into row-major (D, l) ones (out laid out as (H, D, T))
            xp.matmul(value[:, span].swapaxes(-1, -2), p.swapaxes(-1, -2), out=o.swapaxes(-1, -2))
    return out


# ----------------------------------------------------------------------------- heads and projections


def split_heads(x, num_heads):
    B, L, E = x.shape
    return x.reshape(B, L, num_heads, E // num_heads).transpose(0, 2, 1, 3)  # (B, L, E) -> (B, H, L, D), a view


def merge_heads(x):
    B, H, L, D = x.shape
    return x.transpose(0, 2, 1, 3).reshape(B, L, H * D)  # (B, H, L, D) -> (B, L, E), a copy


def in_projection(rows, weights, biases, batch_shape, num_heads, tokens=None, transposed=False):
    """``(qkv, W)``: ``rows (B·L, E)`` (``batch_shape = (B, L)``) projected by ``W = [W_q; W_k; W_v]``
    (``(3·H·D, E)``, stacked) and ``b = [b_q; b_k; b_v]`` (``biases`` may be ``None``) in one
    ``(B·L, 3·H·D)`` product, ``Y = X Wᵀ + b``; ``qkv (3, B, H, L, D)`` is ``Y`` split into heads (a view of it,
    or of the padded batch's rows with ``tokens``).

    ``tokens``: ``None``, or the positions ``(T,)`` among the ``B·L`` rows of the ``T`` rows given (the
    real tokens of a padded batch, ``rows (T, E)``); the product is ``T`` rows, and ``Y``'s other rows are 0.

    ``transposed`` (``blocks.times_weight_t``'s products, in inference): ``Y`` is the transpose of ``Yᵀ = W Xᵀ``,
    made one weight at a time (``W_q Xᵀ`` into ``Yᵀ``'s first rows, …), with no stacked copy of ``W``: the ``W``
    returned is then ``None`` (nothing runs backward)."""
    xp = backend.namespace(rows)
    if transposed:
        n = weights[0].shape[0]  # H·D
        out_t = xp.empty((3 * n, rows.shape[0]), dtype=xp.result_type(rows, *weights))  # Yᵀ (3·H·D, M)
        for i, w in enumerate(weights):
            part = out_t[i * n:(i + 1) * n]  # (H·D, M), contiguous
            xp.matmul(w, rows.T, out=part)
            if biases is not None:
                part += biases[i][:, None]
        out, weight = out_t.T, None  # Y (M, 3·H·D), a view
    else:
        weight = xp.concatenate(weights)  # (3·H·D, E)
        out = parallel.matmul(rows, weight.T)  # (B·L, 3·H·D) or (T, 3·H·D), a fresh array
        if biases is not None:
            out += xp.concatenate(biases)
    if tokens is not None:
        every_row = xp.zeros((batch_shape[0] * batch_shape[1], out.shape[1]), dtype=out.dtype)
        every_row[tokens] = out
        out = every_row  # (B·L, 3·H·D)
    H, D = num_heads, weights[0].shape[0] // num_heads
    return out.reshape(*batch_shape, 3, H, D).transpose(2, 0, 3, 1, 4), weight  # (3, B, H, L, D)


def in_projection_backward(grad, rows, weight, needs, tokens=None):
    """``[∂X, ∂W_q, ∂W_k, ∂W_v(, ∂b_q, ∂b_k, ∂b_v)]`` of ``in_projection`` for ``grad = ∂L/∂qkv
    (3, B, H, L, D)``, seen as ``G (B·L, 3·H·D)`` (a view when laid out as ``Y``), ``G = [G_q G_k G_v]``:

        ∂X = G W  (B·L, E)    ∂W_q = G_qᵀ X    ∂b_q = Σ_rows G_q    (and so for k, v)

    ``needs``: one boolean per input (x, three weights, and three biases or none); ``None`` where
    False. Each weight's and bias's gradient is its own product: a fresh array a leaf can keep.
    ``tokens`` as ``in_projection``'s: ``∂X`` is then ``(T, E)``."""
    _, B, H, L, D = grad.shape
    E = H * D
    grad = grad.transpose(1, 3, 0, 2, 4).reshape(B * L, 3 * E)  # G (B·L, 3·H·D)
    if tokens is not None:
        grad = grad[tokens]  # G's rows of the tokens given to in_projection (T, 3·H·D)
    parts = (grad[:, :E], grad[:, E:2 * E], grad[:, 2 * E:])  # G_q, G_k, G_v (B·L, H·D), views
    grads = [parallel.matmul(grad, weight) if needs[0] else None]  # ∂X (B·L, E)
    for part, need in zip(parts, needs[1:4]):
        grads.append(parallel.matmul(part.T, rows) if need else None)  # ∂W (H·D, E)
    for part, need in zip(parts, needs[4:]):
        grads.append(column_sums(part) if need else None)  # ∂b (H·D,)
    return grads
