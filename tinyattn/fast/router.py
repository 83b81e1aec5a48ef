"""The fast layer's router: every decision about which code runs, each with its reason.

Each ``why_not_*`` function returns ``None`` when a fast route applies, else one sentence saying why
not (the pattern of PyTorch's ``why_not_sparsity_fast_path``). The compiled forms (``fast.compile``) ask them on
each call, beside the kernels they guard (a Transformer layer keeps what depends on its parts alone while it holds
the same parts: ``layer_structure``); the reference layer never calls them.
``explain`` prints what the same functions answer, module by module. The blocks take what is decided
here as arguments (``products_on_pool``, ``cu_seqlens``), and so do the kernels: attention's tile
schedule (``attention_schedule``, ``sequence_schedule``, ``key_block_size``: a ``TileSchedule``, with its pool and
BLAS-thread choices), how a pass over rows is cut (``row_schedule``, ``elementwise_schedule``: a ``RowSchedule``
for LayerNorm and the activations), how a product is split over the pool (``product_schedule``) and how many
threads the pool has (``thread_count``). ``fast.attention``, ``fast.kernels`` and ``fast.parallel`` run what they
are given.

The thresholds are the fast layer's private tuning (``fast.tuning``), which no other module reads.

>>> import tinyattn as ta
>>> from tinyattn.fast import router
>>> query = ta.randn(2, 4, 3)
>>> router.why_not_fused_attention(query, query, query, None, 0.0, False, 1.0, need_weights=False) is None
True
>>> router.why_not_blocked_attention(query, query, query, None, 0.0, False, 1.0, need_weights=False)
'4 keys, fewer than the blocked-attention threshold of 513'
"""

import contextvars
import functools
import math
import os
from collections import namedtuple
from typing import NamedTuple

import numpy as np

from ..engine import Tensor, no_grad
from ..nn import attention as _attention_module
from ..nn import layers as _layers
from ..nn import transformer as _transformer
from ..nn.module import Module
from .tuning import GENERATION as tuning_generation
from .tuning import values as tuning

# ----------------------------------------------------------------------------- ops


# Linear (one node, the batch folded into rows), layer norm (one node, the weight and bias inside it) and
# cross-entropy (one node, its gradient p - onehot written out) take their fused node whenever the arguments
# are the plain case the node takes; anything else runs the reference function, with its checks and errors.


def why_not_linear(input, weight, bias):
    """``None`` when ``F.linear(input, weight, bias)`` runs as one ``fast.Linear`` node: tensors of one floating
    dtype and one array type, ``weight (out, in)``, ``bias (out,)`` or ``None``, ``input (…, in)``."""
    if not (isinstance(input, Tensor) and isinstance(weight, Tensor) and (bias is None or isinstance(bias, Tensor))):
        return "an argument is not a tensor"
    x, w = input._data, weight._data
    if w.ndim != 2 or x.ndim == 0 or x.shape[-1] != w.shape[1] or x.dtype != w.dtype or x.dtype.kind != "f":
        return "the input and the weight are not (…, in) and (out, in) tensors of one floating dtype"
    if type(x) is not type(w) or (bias is not None and (bias.shape != (w.shape[0],) or bias.dtype != w.dtype
                                                         or type(bias._data) is not type(w))):
        return "the bias is not (out,) of the weight's dtype, or the arguments are on different devices"
    return None


def why_not_layer_norm(input, normalized_shape, weight, bias):
    """``None`` when ``F.layer_norm`` runs as one ``fast.Normalize`` node: a floating input whose trailing shape is
    ``normalized_shape`` (a tuple), the weight and bias ``None`` or of that shape, all of one dtype and device."""
    if not isinstance(input, Tensor) or type(normalized_shape) is not tuple or not normalized_shape:
        return "the input is not a tensor, or normalized_shape not a tuple of sizes"
    x = input._data
    if x.dtype.kind != "f" or x.shape[x.ndim - len(normalized_shape):] != normalized_shape:
        return f"the input is not floating, with trailing dimensions {normalized_shape}"
    for affine in (weight, bias):
        if affine is not None and not (isinstance(affine, Tensor) and affine.shape == normalized_shape
                                       and affine.dtype == x.dtype and type(affine._data) is type(x)):
            return "the weight or bias is not of normalized_shape and the input's dtype and device"
    return None


def why_not_cross_entropy(input, target, ignore_index, reduction, label_smoothing):
    """``None`` when ``F.cross_entropy`` runs as one ``fast.CrossEntropy`` node: floating logits ``(N, C)`` or
    ``(N, C, d…)``, class-index targets of the matching shape, each a class or ``ignore_index``, at least one."""
    if not isinstance(input, Tensor) or input.dtype.kind != "f" or input.ndim < 2 or input.shape[0] == 0:
        return "the logits are not floating (N, C) or (N, C, d…)"
    data = target._data if isinstance(target, Tensor) else target
    if (getattr(data, "dtype", None) is None or data.dtype.kind not in "iu" or type(data) is not type(input._data)
            or data.shape != (input.shape[0],) + input.shape[2:] or data.size == 0):
        return "the targets are not class indices of the logits' shape without C"
    if reduction not in ("none", "mean", "sum") or not 0.0 <= label_smoothing <= 1.0:
        return "reduction or label_smoothing is not one cross_entropy takes"
    num_classes = input.shape[1]
    if bool((((data < 0) | (data >= num_classes)) & (data != ignore_index)).any()):
        return "a target is out of range"
    return None


# ----------------------------------------------------------------------------- attention


def _one_float_dtype(query, key, value, attn_mask):
    """True when query, key, value (and a float mask) share one floating dtype: no promotion needed."""
    dtypes = {query.dtype, key.dtype, value.dtype}
    if attn_mask is not None and attn_mask.dtype != np.bool_:
        dtypes.add(attn_mask.dtype)
    return len(dtypes) == 1 and query.dtype.kind == "f"


def why_not_fused_attention(query, key, value, attn_mask, dropout_p, is_causal, scale, need_weights):
    """``None`` when scaled dot-product attention runs as one ``fast.Attention`` node."""
    if need_weights:
        return "the weights are returned (need_weights=True), so they stay in the graph"
    if not _one_float_dtype(query, key, value, attn_mask):
        return "query, key, value and the float mask are not of one floating dtype"
    return None


def why_not_whole_attention(query, key, value, attn_mask, dropout_p, is_causal, scale, need_weights):
    """``None`` when scaled dot-product attention runs as one ``fast.Attention`` node over the whole ``(…, Lq, Lk)``
    scores: the fused route applies, and the blocked one does not (``why_not_blocked_attention``). The table tries
    this row first, as the common one: a short sequence is decided by one test."""
    reason = why_not_fused_attention(query, key, value, attn_mask, dropout_p, is_causal, scale, need_weights)
    if reason is None and _by_blocks(key, dropout_p):
        return f"{key.shape[-2]} keys go a block at a time (fast.BlockedAttention)"
    return reason


def why_not_blocked_attention(query, key, value, attn_mask, dropout_p, is_causal, scale, need_weights):
    """``None`` when scaled dot-product attention goes a block of keys at a time
    (``fast.BlockedAttention``, never holding the whole ``(…, Lq, Lk)`` scores)."""
    return (why_not_fused_attention(query, key, value, attn_mask, dropout_p, is_causal, scale, need_weights)
            or _why_not_blocks(key, dropout_p))


def _by_blocks(key, dropout_p):
    """Where the fused route applies: whether keys go a block at a time (``_why_not_blocks`` says why not)."""
    return dropout_p <= 0.0 and key.shape[-2] >= tuning.blocked_attention_min_keys


def _why_not_blocks(key, dropout_p):
    """Where the fused route applies: why keys do not go a block at a time (``None``: they do)."""
    if _by_blocks(key, dropout_p):
        return None
    if dropout_p > 0.0:
        return f"dropout acts on the weights (p={dropout_p}): the blocked backward cannot redraw it"
    return f"{key.shape[-2]} keys, fewer than the blocked-attention threshold of {tuning.blocked_attention_min_keys}"


def attention_route(query, key, value, attn_mask, dropout_p, need_weights):
    """The name of the route scaled dot-product attention takes (for ``explain``), with the reason it is not
    blocked where it is not."""
    args = (query, key, value, attn_mask, dropout_p, False, 1.0, need_weights)
    why = why_not_blocked_attention(*args)
    if why is None:
        return "blocked"
    name = "fused" if why_not_fused_attention(*args) is None else "masked softmax"
    return f"{name} (not blocked: {why})"


def why_not_packed_self_attention(module, query, key=None, value=None, attn_mask=None, is_causal=False,
                                  need_weights=True):
    """``None`` when ``MultiHeadAttention`` (``module``, called with these arguments) runs as ``InProjection`` (one
    GEMM for q, k and v) and ``PackedSelfAttention`` (attention and the heads merged, one node)."""
    reason = _why_not_packed(module, query, key, value, need_weights)
    if TRACE.get() is not None:
        _record(module, "projections and attention", "fast.InProjection + fast.PackedSelfAttention", reason)
        if reason is not None:
            key = query if key is None else key
            value = key if value is None else value
            dropout_p = module.dropout if module.training else 0.0
            _record(module, "scaled dot-product attention",
                    attention_route(query, key, value, attn_mask, dropout_p, need_weights), None)
    return reason


def _why_not_packed(module, query, key, value, need_weights):
    if (not isinstance(query, Tensor) or query.ndim != 3 or query.shape[-1] != module.embed_dim
            or query.dtype.kind != "f"):
        return f"the query is not a batch-first (B, L, {module.embed_dim}) floating-point tensor"
    if need_weights:
        return "the weights are returned (need_weights=True)"
    if not _one_input(query, key, value):
        return "not self-attention (query, key and value are not one tensor)"
    reason = _why_not_packable(module, query)
    if reason:
        return reason
    q, k, v = module.q_proj, module.k_proj, module.v_proj
    reason = _why_not_hooked((("q_proj", q), ("k_proj", k), ("v_proj", v)))
    if reason:
        return reason
    params = (q.weight, k.weight, v.weight) + ((q.bias, k.bias, v.bias) if q.bias is not None else ())
    if query.dtype.kind != "f" or not _all_of_dtype(query.dtype, params):
        return "the input and the projections' parameters are not of one floating dtype"
    return None


def _one_input(query, key, value):
    """Whether multi-head attention's ``query``, ``key`` and ``value`` are one tensor (``None``: the one before)."""
    return (key is None or key is query) and (value is None or value is (query if key is None else key))


def _why_not_packable(attention_module, x):
    """Why ``x`` cannot go through the packed whole-matrix self-attention of ``attention_module``."""
    threshold = tuning.blocked_attention_min_keys
    if x.shape[1] >= threshold:
        return f"{x.shape[1]} keys, at least the blocked-attention threshold of {threshold}"
    if not attention_module.kdim == attention_module.vdim == attention_module.embed_dim:
        return "kdim or vdim differs from embed_dim"
    for name in ("q_proj", "k_proj", "v_proj"):
        if not _runs_own_forward(getattr(attention_module, name), "Linear"):
            return f"{name} is not a plain nn.Linear with its own forward"
    return None


# ----------------------------------------------------------------------------- Transformer layers


# A layer's residual block runs as one fused node when its parts are the library's own and nothing the node would
# skip acts. What depends only on which parts the layer holds (the block method, the parts' classes, the attention's
# sizes, the activation) is the block's *structure* (``_*_structure``); everything else (an instance's own forward
# or a hook on a part, dropout, the weights kept, the input's and parameters' dtypes and shapes, the mask) is asked
# on each call (``_why_not_*_now``). A compiled layer keeps its structure while it holds the same parts
# (``layer_structure``).


def why_not_self_attention_block(layer, x, attn_mask):
    """``None`` when a Transformer layer's self-attention residual (``norm1``, ``self_attn``,
    ``dropout1`` and the sum) runs as one ``fast.SelfAttentionBlock``."""
    reason, parts = _self_attention_structure(layer)
    return reason or _why_not_self_attention_now(layer, parts, x, attn_mask)


def _self_attention_structure(layer):
    """``(reason or None, parts)``: the self-attention block's structure (the block method, the parts' classes, the
    attention's sizes), and the parts it computes without calling them, as ``(name, part, class name)``."""
    attention = layer.self_attn
    parts = (("self_attn", attention, "MultiHeadAttention"), ("norm1", layer.norm1, "LayerNorm"),
             ("dropout1", layer.dropout1, "Dropout"))
    if type(layer)._sa_block not in _LIBRARY["_sa_block"]:
        return "_sa_block is overridden", parts
    reason = _why_not_library_parts(parts)
    if reason:
        return reason, parts
    parts += tuple((f"self_attn.{name}", getattr(attention, name), "Linear")
                   for name in ("q_proj", "k_proj", "v_proj", "out_proj"))
    reason = _why_not_library_parts(parts[3:])
    if reason:
        return reason, parts
    if not attention.kdim == attention.vdim == attention.embed_dim:
        return "kdim or vdim differs from embed_dim", parts
    return None, parts


def _why_not_self_attention_now(layer, parts, x, attn_mask):
    """What of the self-attention block is asked on each call, its structure allowing it."""
    if layer.keep_attn_weights:
        return "the attention weights are kept (keep_attn_weights=True)"
    if "_sa_block" in layer.__dict__:
        return "_sa_block is overridden"
    reason = _why_not_plain_parts(parts)
    if reason:
        return reason
    attention, norm, dropout = layer.self_attn, layer.norm1, layer.dropout1
    if attention.training and attention.dropout:
        return f"dropout acts on the attention weights (p={attention.dropout}, training)"
    if dropout.training and dropout.p:
        return f"dropout1 acts (p={dropout.p}, training)"
    threshold, shape, dtype = tuning.blocked_attention_min_keys, x._data.shape, x._data.dtype  # x (B, L, E)
    if shape[1] >= threshold:
        return f"{shape[1]} keys, at least the blocked-attention threshold of {threshold}"
    q, k, v, out = attention.q_proj, attention.k_proj, attention.v_proj, attention.out_proj
    E = shape[-1]
    if (norm.normalized_shape != (E,) or dtype.kind != "f"
            or not _fit(dtype, (E,), (norm.weight, norm.bias, q.bias, k.bias, v.bias, out.bias))
            or not _fit(dtype, (E, E), (q.weight, k.weight, v.weight, out.weight))):
        return "a parameter is missing or not of the input's shape and floating dtype"
    if attn_mask is not None and getattr(attn_mask, "dtype", None) != np.bool_ and getattr(
            attn_mask, "requires_grad", False):
        return "the float mask needs a gradient"
    return None


feed_forward_activation = _transformer.activation_name  # the name fast.FeedForwardBlock knows it by


def why_not_feed_forward_block(layer, norm, x, output_dropout):
    """``None`` when a Transformer layer's feed-forward residual (``norm``, ``linear1``, the
    activation (ReLU or GELU), ``dropout``, ``linear2``, ``output_dropout`` and the sum) runs as one
    ``fast.FeedForwardBlock``."""
    reason, parts, activation = _feed_forward_structure(layer, norm, output_dropout)
    return reason or _why_not_feed_forward_now(layer, parts, norm, x, output_dropout, activation)


def _feed_forward_structure(layer, norm, output_dropout):
    """``(reason or None, parts, the activation's name)``: the feed-forward block's structure (the activation, the
    block method, the parts' classes) and the parts it computes without calling them, as ``_self_attention_structure``
    gives them."""
    activation = feed_forward_activation(layer.activation)
    parts = (("linear1", layer.linear1, "Linear"), ("linear2", layer.linear2, "Linear"),
             (_name_in(layer, norm), norm, "LayerNorm"), ("dropout", layer.dropout, "Dropout"),
             (_name_in(layer, output_dropout), output_dropout, "Dropout"))
    if isinstance(layer.activation, Module):  # (its class is activation_name's to judge)
        parts += (("activation", layer.activation, type(layer.activation).__name__),)
    if activation is None:
        name = getattr(layer.activation, "__name__", type(layer.activation).__name__)
        return f"the activation is {name}, not relu or gelu", parts, None
    if type(layer)._ff_block not in _LIBRARY["_ff_block"]:
        return "_ff_block is overridden", parts, activation
    return _why_not_library_parts(parts[:5]), parts, activation


def _why_not_feed_forward_now(layer, parts, norm, x, output_dropout, activation):
    """What of the feed-forward block is asked on each call, its structure allowing it."""
    if "_ff_block" in layer.__dict__:
        return "_ff_block is overridden"
    reason = _why_not_plain_parts(parts)
    if reason:
        return reason
    linear1, linear2, dropout = layer.linear1, layer.linear2, layer.dropout
    for part in (dropout, output_dropout):
        if part.training and part.p:
            return f"{_name_in(layer, part)} acts (p={part.p}, training)"
    E, hidden, dtype = x._data.shape[-1], linear1.out_features, x._data.dtype  # hidden: dim_feedforward
    if not (norm.normalized_shape == (E,) and _fit(dtype, (E,), (norm.weight, norm.bias, linear2.bias))
            and _fit(dtype, (hidden,), (linear1.bias,)) and _fit(dtype, (hidden, E), (linear1.weight,))
            and _fit(dtype, (E, hidden), (linear2.weight,))):
        return "a parameter is missing or not of the input's shape and floating dtype"
    if activation != "relu" and dtype not in (np.float32, np.float64):
        return f"GELU's kernels take float32 and float64, not {dtype}"
    return None


class LayerStructure(NamedTuple):
    """A Transformer layer's blocks' structure (``_self_attention_structure``, ``_feed_forward_structure``), kept
    for ``key``: the layer's parts, its attention's, and its activation, the objects it was asked for."""

    key: tuple
    self_attention: object  # the self-attention block's structural reason, or None
    self_attention_parts: tuple
    feed_forward: object  # the feed-forward block's, or None
    feed_forward_parts: tuple
    activation: object  # the activation's name for the block ("relu", "gelu", "gelu_tanh"), or None


def layer_structure(layer, ff_norm, ff_dropout):
    """``layer``'s ``LayerStructure``: kept in the layer (``route_structure``) and given again while the layer holds
    the same parts and activation (the same objects; a part replaced, or an activation, asks afresh)."""
    key = (*layer._modules.values(), *getattr(layer.self_attn, "_modules", {}).values(), layer.activation)
    kept = layer.__dict__.get("route_structure")
    if kept is not None and kept.key == key:
        return kept
    sa_reason, sa_parts = _self_attention_structure(layer)
    ff_reason, ff_parts, activation = _feed_forward_structure(layer, ff_norm, ff_dropout)
    structure = LayerStructure(key, sa_reason, sa_parts, ff_reason, ff_parts, activation)
    layer.__dict__["route_structure"] = structure  # (a plain attribute: no parameter, no submodule)
    return structure


LayerRoute = namedtuple("LayerRoute", "self_attention_block feed_forward_block self_attention_on_pool "
                                      "feed_forward_on_pool")
LayerRoute.__doc__ = """Which residual blocks of a Transformer layer run as one fused node each:
``self_attention_block`` True/False; ``feed_forward_block`` the activation's name for the block
(``"relu"``, ``"gelu"``, ``"gelu_tanh"``), or ``None`` when it runs the layer's own lines; and whether each
fused block runs its products over the pool when a graph is recorded (``products_on_pool`` of its widest pass)."""


def _why_not_batch_first(x, d_model):
    data = x._data if isinstance(x, Tensor) else None  # (the array's own attributes: no Tensor property calls)
    if data is None or data.ndim != 3 or data.shape[-1] != d_model or data.dtype.kind != "f":
        return f"the input is not a batch-first (B, L, {d_model}) floating-point tensor"
    return None


def encoder_layer(layer, src, src_mask):
    """The route of ``TransformerEncoderLayer.forward``: a ``LayerRoute``, or ``None`` when neither residual
    block runs as a fused node (each block's own reason is ``why_not_self_attention_block`` /
    ``why_not_feed_forward_block``)."""
    if _why_not_batch_first(src, layer.self_attn.embed_dim):
        return None
    return _layer_route(layer, src, src_mask, layer.norm2, layer.dropout2)


def decoder_layer(layer, tgt, memory, tgt_mask):
    """The route of ``TransformerDecoderLayer.forward`` (its cross-attention has no block: it runs
    ``cross_attn``'s own route): a ``LayerRoute``, or ``None`` as ``encoder_layer``'s."""
    d_model = layer.self_attn.embed_dim
    if _why_not_batch_first(tgt, d_model) or _why_not_batch_first(memory, d_model):
        return None
    return _layer_route(layer, tgt, tgt_mask, layer.norm3, layer.dropout3)


def why_not_attention_by_sequences(sentences, tokens):
    """``None`` when attention on the real tokens alone (``fast.encoder_on_real_tokens``) runs sentence by
    sentence (``fast.attention.attention_by_sequences``: no padded batch) for ``sentences`` sentences of ``tokens``
    real tokens in all; else why it runs on the padded batch with its padding mask."""
    if tokens < tuning.sequence_attention_min_length * sentences:
        return (f"the sentences average {tokens / max(sentences, 1):.3g} real tokens, under the sentence-by-sentence "
                f"threshold {tuning.sequence_attention_min_length:g}")
    return None


# ----------------------------------------------------------------------------- attention's tiles


class TileSchedule(NamedTuple):
    """How one attention pass (``fast.attention``) cuts its scores ``(…, Lq, Lk)`` into tiles, and where they run.

    ``units``: ``((index, tiles), …)``, each ``index`` a basic index of the batch axes (``()``: the whole batch) and
    ``tiles`` its ``(q0, q1, k0, k1)`` in order, queries ``q0:q1`` against keys ``k0:k1``; a unit owns its rows of
    the output and of the gradients, so units may run at once. ``keeps``: what a unit's tiles keep for backward:
    ``"weights"`` (each row's keys in one tile: ``P`` whole), ``"lse"`` (several key tiles per row, combined by the
    online softmax: the log-sum-exp alone) or ``"nothing"`` (inference). ``pooled``: the units go over
    ``fast.parallel``'s pool; ``one_blas_thread``: each unit's products on one BLAS thread. ``key_units`` (and
    ``key_pooled``): backward's second pass, by runs of keys, for units that are runs of queries (their ``dK`` and
    ``dV`` would meet), else ``()``. ``one_tile``: the whole array is one tile."""

    units: tuple
    keeps: str = "weights"
    pooled: bool = False
    one_blas_thread: bool = False
    key_units: tuple = ()
    key_pooled: bool = False
    one_tile: bool = False


def _one_tile(Lq, Lk):
    """The schedule of one tile over ``(…, Lq, Lk)`` scores (``attention_schedule`` remembers it per shape)."""
    return TileSchedule(units=(((), ((0, Lq, 0, Lk),)),), one_tile=True)


def _batch_runs(batch, per_slice):
    """Basic indices of runs of batch slices (``(B, H, …)`` leading axes ``batch``), each about ``piece_elements``
    elements at ``per_slice`` a slice: ``(i, j, …, slice(h0, h1))``, one position of every leading axis but the
    last and a run of the last (the heads); or, where a run holds all the heads, ``(i, …, slice(b0, b1),
    slice(None))``, a run of the axis before them too (fewer, longer calls), leaving at least ``min_batch_pieces``
    runs where there are that many positions. A basic index is a view of any of the pass's arrays."""
    heads = batch[-1]
    run = max(1, min(heads, tuning.piece_elements // max(1, per_slice)))  # slices per run
    if run == heads and len(batch) >= 2:
        count = batch[-2]
        rows = max(1, min(tuning.piece_elements // (per_slice * heads), count // tuning.min_batch_pieces))
        number = -(-count // rows)
        size = -(-count // number)
        return [position + (slice(b, min(b + size, count)), slice(None))
                for position in np.ndindex(*batch[:-2]) for b in range(0, count, size)]
    return [position + (slice(h, min(h + run, heads)),) for position in np.ndindex(*batch[:-1])
            for h in range(0, heads, run)]


def pieces(count, elements_per_item, most_items=None, least_items=1, piece_elements=None):
    """``[(start, stop), …]``: ``range(count)`` cut into equal runs of items (rows, say) of about
    ``piece_elements`` (by default ``tuning.piece_elements``) elements each (``elements_per_item`` per item), at
    most ``most_items`` and at least ``least_items`` items each; one piece when the whole is that small.
    Depends on the shape only."""
    piece_elements = tuning.piece_elements if piece_elements is None else piece_elements
    per_piece = max(1, piece_elements // max(1, elements_per_item))
    if most_items is not None:
        per_piece = max(1, min(per_piece, most_items))
    per_piece = max(per_piece, least_items)
    if per_piece >= count:
        return [(0, count)]
    number = -(-count // per_piece)
    size = -(-count // number)  # equal sizes: the last piece is not a sliver
    return [(start, min(start + size, count)) for start in range(0, count, size)]


def _query_runs(like, Lq, Lk, batch, head_size):
    """``(runs, pooled)``: runs of query rows (of every slice at once) and whether they go over the pool.

    Each run's scores are about ``piece_elements``. Where that many rows keep its GEMMs on one BLAS thread,
    the runs go over the pool. With long keys they would be a few rows each, and every run reads all of K
    and V again for little work: there a run has at least ``head_size`` rows (re-reading K and V then costs no
    more than the scores), and the runs go one after another, each GEMM on the BLAS's own threads."""
    per_row = math.prod(batch) * Lk  # scores per query row
    one_thread_rows = tuning.blas_one_thread_mnk // max(1, Lk * head_size)
    if one_thread_rows >= head_size:
        runs = pieces(Lq, per_row, one_thread_rows)
        return runs, why_not_pool(like, runs, Lq * per_row) is None
    return pieces(Lq, per_row, least_items=head_size), False


_SCHEDULES = {}  # (array type, the shapes, is_causal, key_block, mask_grad) -> (generation, TileSchedule);
# packed self-attention's: (array type, qkv's shape) -> the same


def attention_schedule(query, key, value, is_causal=False, key_block=None, mask_grad=False):
    """``_attention_schedule``'s answer, remembered for the shapes while nothing it reads changes (``tuning``'s
    values move ``tuning.GENERATION``)."""
    memo = (type(query), query.shape, key.shape, value.shape, is_causal, key_block, mask_grad)
    generation = tuning_generation[0]
    remembered = _SCHEDULES.get(memo)
    if remembered is not None and remembered[0] == generation:
        return remembered[1]
    return _remember(memo, generation, _attention_schedule(query, key, value, is_causal, key_block, mask_grad))


def packed_attention_schedule(qkv):
    """``attention_schedule`` of self-attention over packed ``qkv (3, B, H, L, D)`` (q, k and v of one shape),
    remembered for that shape."""
    memo = (type(qkv), qkv.shape)
    generation = tuning_generation[0]
    remembered = _SCHEDULES.get(memo)
    if remembered is not None and remembered[0] == generation:
        return remembered[1]
    return _remember(memo, generation, _attention_schedule(qkv[0], qkv[1], qkv[2], False, None, False))


def _remember(memo, generation, schedule):
    if len(_SCHEDULES) > 1024:  # stale entries of earlier generations
        _SCHEDULES.clear()
    _SCHEDULES[memo] = (generation, schedule)
    return schedule


def _attention_schedule(query, key, value, is_causal, key_block, mask_grad):
    """The ``TileSchedule`` of attention over the arrays ``query (…, Lq, E)``, ``key (…, Lk, E)``, ``value (…, Lk,
    Ev)``: from their shapes, their array type and ``fast.tuning``'s values. ``key_block``: keys per tile, for the
    memory-lean route (``fast.BlockedAttention``; ``None``: every row's keys in one tile); ``mask_grad``: backward
    must give a float mask's gradient.

    - CuPy (and the strict test backend), or scores within ``piece_elements`` whose GEMMs stay on one BLAS thread:
      one tile (few large calls).
    - Q, K and V of one batch, a slice's scores within a piece and the slices not too few: runs of batch slices
      (``_batch_runs``), one tile each, over the pool, each run's products on one BLAS thread while its scores are
      in the cache; backward needs no second pass, since a slice's dK and dV come from that slice alone.
    - Else runs of query rows, one tile each with every key (``_query_runs``), and in backward runs of keys.
    - With ``key_block``: tiles of ``key_block`` keys (causal: a key tile meets only the queries at or after its
      first key, and tiles past the last query are left out), combined by the online softmax; per run of batch
      slices over the pool where Q, K and V are NumPy arrays of one batch (and no mask gradient is asked for: a
      broadcast mask's gradient sums over slices), else the whole batch as one unit."""
    Lq, Lk, head_size = query.shape[-2], key.shape[-2], max(query.shape[-1], value.shape[-1])
    batch = query.shape[:-2]
    shared = key.shape[:-2] == batch == value.shape[:-2]
    if not shared:
        batch = tuple(np.broadcast_shapes(batch, key.shape[:-2], value.shape[:-2]))
    numpy = type(query) is np.ndarray
    if key_block is not None:
        tiles = []
        for start in range(0, Lk, key_block):
            if is_causal and start >= Lq:
                break
            tiles.append((start if is_causal else 0, Lq, start, min(start + key_block, Lk)))
        tiles = tuple(tiles)
        if not (numpy and shared and batch and not mask_grad):
            return TileSchedule(units=(((), tiles),), keeps="lse")
        runs = _batch_runs(batch, Lq * key_block)
        pooled = why_not_pool(query, runs, math.prod(batch) * Lq * Lk) is None
        return TileSchedule(units=tuple((index, tiles) for index in runs), keeps="lse", pooled=pooled,
                            one_blas_thread=True)
    if not numpy or (Lq * Lk * math.prod(batch) <= tuning.piece_elements
                     and Lq * Lk * head_size <= tuning.blas_one_thread_mnk):
        return _one_tile(Lq, Lk)
    per_slice = Lq * Lk
    if (shared and batch and per_slice <= tuning.piece_elements
            and batch[-1] * per_slice >= tuning.piece_elements // 4):
        runs = _batch_runs(batch, per_slice)
        pooled = why_not_pool(query, runs, math.prod(batch) * per_slice) is None
        tile = ((0, Lq, 0, Lk),)
        return TileSchedule(units=tuple((index, tile) for index in runs), pooled=pooled, one_blas_thread=True)
    query_runs, pooled = _query_runs(query, Lq, Lk, batch, head_size)
    key_runs, key_pooled = _query_runs(query, Lk, Lq, batch, head_size)
    if len(query_runs) == 1 and len(key_runs) == 1:
        return _one_tile(Lq, Lk)
    return TileSchedule(units=tuple(((), ((q0, q1, 0, Lk),)) for q0, q1 in query_runs), pooled=pooled,
                        key_units=tuple(((), ((0, Lq, k0, k1),)) for k0, k1 in key_runs), key_pooled=key_pooled)


def key_block_size(query, key, value):
    """Keys per tile of the memory-lean attention: ``fast.tuning``'s ``attention_block_size`` when set, else
    ``attention_max_block``, fewer (down to 64: BLAS needs some width) when the whole batch's ``(…, Lq, block)``
    scores would pass ``attention_block_elements``."""
    if tuning.attention_block_size is not None:
        return int(tuning.attention_block_size)
    batch = np.broadcast_shapes(query.shape[:-2], key.shape[:-2], value.shape[:-2])
    most = tuning.attention_block_elements // max(math.prod(batch) * query.shape[-2], 1)  # rows: batch · Lq
    return min(tuning.attention_max_block, max(64, most))


def sequence_schedule(cu_seqlens, T):
    """The ``TileSchedule`` of self-attention over sequences laid back to back in ``T`` rows, sequence ``b`` the
    rows ``cu_seqlens[b]:cu_seqlens[b + 1]`` (``cu_seqlens (B + 1,)``, the cumulative sequence lengths of
    FlashAttention's variable-length kernels: ``0``, then ascending to ``T``): one unit per sequence of one tile, its
    rows against its own keys, one after another on the BLAS's threads; nothing kept (inference)."""
    starts = [int(o) for o in cu_seqlens]
    if not starts or starts[0] != 0 or starts[-1] != T or any(b < a for a, b in zip(starts, starts[1:])):
        raise ValueError(f"attention_by_sequences: cu_seqlens must run from 0 up to T = {T} (the rows of query), "
                         f"never down; got {starts}")
    return TileSchedule(units=tuple(((), ((a, b, a, b),)) for a, b in zip(starts, starts[1:]) if b > a),
                        keeps="nothing")


def products_on_pool(elements):
    """Whether a residual block whose widest elementwise pass (hidden activations, or attention's scores) has
    ``elements`` elements runs, while a graph is recorded, with OpenBLAS on one thread and its products over the
    pool (``fast.parallel.over_pool``); ``why_not_products_on_pool`` says why not."""
    return tuning.products_on_pool and elements >= tuning.pool_min_elements


def why_not_products_on_pool(elements):
    """``None`` where ``products_on_pool(elements)``; else why the block keeps OpenBLAS's threads."""
    if products_on_pool(elements):
        return None
    if not tuning.products_on_pool:
        return "turned off (fast.tuning: products_on_pool=False)"
    return f"its widest pass, {elements:,} elements, is under the pool's threshold {tuning.pool_min_elements:,}"


def why_not_pool(like, ranges, elements):
    """``None`` when a pass of ``elements`` elements over arrays like ``like``, cut into ``ranges``, goes over the
    thread pool (``fast.parallel.run``); else why it runs on the calling thread."""
    if len(ranges) < 2:
        return "one piece"
    if type(like) is not np.ndarray:
        return "not NumPy arrays (CuPy has its own parallelism, the strict test backend none)"
    if elements < tuning.pool_min_elements:
        return f"{elements:,} elements, under the pool's threshold {tuning.pool_min_elements:,}"
    return None


def thread_count():
    """Threads of the pool: the BLAS's own count when the environment sets it (``OPENBLAS_NUM_THREADS``,
    ``OMP_NUM_THREADS``), else the cores this process may run on; at most ``max_threads``."""
    for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"):
        value = os.environ.get(name, "").split(",")[0].strip()
        if value.isdigit() and int(value) > 0:
            return min(int(value), tuning.max_threads)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(1, min(cores, tuning.max_threads))


class RowSchedule(NamedTuple):
    """How one pass over the rows of a matrix (LayerNorm and its gradient, a bias with its activation, a gate of
    the activation's gradient) is cut: ``ranges``, ``((start, stop), …)`` runs of rows, and whether they go over
    ``fast.parallel``'s pool (``pooled``)."""

    ranges: tuple
    pooled: bool = False


@functools.lru_cache(maxsize=256)
def _one_run(rows):
    """The schedule of one run over ``rows`` rows (one object per count: a schedule never changes)."""
    return RowSchedule(((0, rows),))


def row_schedule(like, rows, width, piece_elements=None):
    """The ``RowSchedule`` of a pass over ``rows`` rows of ``width`` elements each, of arrays like ``like``.

    CuPy (and the strict test backend), or at most ``piece_elements`` (by default ``tuning.piece_elements``) in
    all: one run. Else ``pieces`` of rows, which depend on the shape alone, so a pooled pass gives the same bits as
    the same pieces one after another (a LayerNorm row's BLAS sums can depend on how many rows a call has); they go
    over the pool where ``why_not_pool`` allows."""
    piece_elements = tuning.piece_elements if piece_elements is None else piece_elements
    if rows * width <= piece_elements or type(like) is not np.ndarray:
        return _one_run(rows)
    ranges = tuple(pieces(rows, width, piece_elements=piece_elements))
    return RowSchedule(ranges, why_not_pool(like, ranges, rows * width) is None)


def elementwise_schedule(z, piece_elements=None):
    """``row_schedule`` of an elementwise pass over the matrix ``z (M, F)``, by its rows."""
    shape = z.shape
    return row_schedule(z, shape[0], math.prod(shape[1:]), piece_elements)


def gelu_schedule(z):
    """``elementwise_schedule`` of GELU's pass over ``z (M, F)`` (``fast.kernels.bias_gelu``), in pieces of
    ``tuning.gelu_piece_elements``: its kernel makes some thirty passes over a piece and its scratch arrays, which
    at that size stay in a core's cache between them."""
    return elementwise_schedule(z, tuning.gelu_piece_elements)


def product_schedule(a, b):
    """The ``RowSchedule`` of ``a @ b`` (2-D arrays) in a block that runs its products over the pool
    (``fast.parallel.matmul``), or ``None`` for one call: a product OpenBLAS would spread over its threads (m·n·k
    over ``blas_one_thread_mnk``) goes in one run of ``a``'s rows per thread, as OpenBLAS's own split of it
    does (on a machine with another number of cores it may differ in its last bits, pooled or not)."""
    threads = thread_count()
    M, K, N = a.shape[0], a.shape[-1], b.shape[-1]
    if (threads < 2 or type(a) is not np.ndarray or type(b) is not np.ndarray or a.ndim != 2 or b.ndim != 2
            or M < 2 * threads or M * N * K <= tuning.blas_one_thread_mnk):
        return None
    size = -(-M // threads)
    ranges = tuple((start, min(start + size, M)) for start in range(0, M, size))
    return RowSchedule(ranges, why_not_pool(a, ranges, M * N * K) is None)


def why_not_real_tokens_only(encoder, src, mask):
    """``None`` when an encoder that returns zeros at the padding (``padding_to_zero``) computes its real
    tokens alone (``fast.encoder_on_real_tokens``): each layer runs both residual blocks as fused nodes."""
    return _real_tokens_route(encoder, src, mask)[0]


def _real_tokens_route(encoder, src, mask):
    """``(reason, activations)``: ``why_not_real_tokens_only``'s answer, and each layer's activation name."""
    activations = []
    for i, layer in enumerate(encoder.layers):
        if not _runs_own_forward(layer, "TransformerEncoderLayer"):
            return f"layers.{i} is not the library's TransformerEncoderLayer with its own forward", None
        reason = _why_not_hooked(((f"layers.{i}", layer),))
        if reason:
            return reason, None
        route = encoder_layer(layer, src, mask)
        if route is None or not route.self_attention_block or not route.feed_forward_block:
            return f"layers.{i} does not run both residual blocks as fused nodes", None
        activations.append(route.feed_forward_block)
    return None, activations


def encoder(module, src, mask=None, is_causal=False):
    """``(reason, real, activations)`` for ``TransformerEncoder.forward``: ``real``, the real tokens ``(B, L)`` when
    the padding's outputs are zeros (``nn.transformer.padding_to_zero``, else ``None``), and, when the real tokens
    are computed alone (``reason`` is ``None``), each layer's activation name."""
    real = _transformer.padding_to_zero(module, src, mask, is_causal) if isinstance(src, Tensor) else None
    if real is None:
        return "the padding is computed (no padding to fill with zeros: padding_to_zero)", None, None
    reason, activations = _real_tokens_route(module, src, mask)
    _record(module, "padding", "fast.encoder_on_real_tokens (the real tokens alone; zeros at the padding)", reason)
    if activations and TRACE.get() is not None:
        _record(module, "attention on the real tokens", "fast.attention.attention_by_sequences (sentence by sentence)",
                why_not_attention_by_sequences(real.shape[0], int(real.sum())))
    return reason, real, activations


def _layer_route(layer, x, attn_mask, ff_norm, ff_dropout):
    """``LayerRoute`` of a layer on ``x``, or ``None`` when neither block runs as a fused node: its structure as
    kept (``layer_structure``), then what is asked on each call."""
    structure = layer_structure(layer, ff_norm, ff_dropout)
    sa_reason = structure.self_attention or _why_not_self_attention_now(
        layer, structure.self_attention_parts, x, attn_mask)
    ff_reason = structure.feed_forward or _why_not_feed_forward_now(
        layer, structure.feed_forward_parts, ff_norm, x, ff_dropout, structure.activation)
    activation = None if ff_reason else structure.activation  # "relu", "gelu", "gelu_tanh"
    # each fused block's widest elementwise pass, which decides whether its products go over the pool (on NumPy)
    batch, keys = x._data.shape[:2]  # x (B, L, E), batch-first
    scores = None if sa_reason else batch * layer.self_attn.num_heads * keys * keys  # (B, H, L, L)
    hidden = None if ff_reason else batch * keys * layer.linear1.out_features  # (M, F), M = B·L
    on_numpy = type(x._data) is np.ndarray
    if TRACE.get() is not None:
        threshold = tuning.blocked_attention_min_keys
        whole_matrix = f" ({keys} keys, under the blocked-attention threshold {threshold})"
        _record(layer, "self-attention residual", "fast.SelfAttentionBlock" + whole_matrix, sa_reason)
        _record(layer, "feed-forward residual", f"fast.FeedForwardBlock ({activation})", ff_reason)
        on_pool = "over the pool, OpenBLAS on one thread"
        if scores is not None:
            _record(layer, "self-attention products, training", on_pool, why_not_products_on_pool(scores))
        if hidden is not None:
            _record(layer, "feed-forward products, training", on_pool, why_not_products_on_pool(hidden))
    if sa_reason and ff_reason:
        return None
    return LayerRoute(sa_reason is None, activation, scores is not None and on_numpy and products_on_pool(scores),
                      hidden is not None and on_numpy and products_on_pool(hidden))


# ----------------------------------------------------------------------------- the checks' helpers

_LIBRARY = dict(
    Linear=_layers.Linear, LayerNorm=_layers.LayerNorm, Dropout=_layers.Dropout, ReLU=_layers.ReLU,
    GELU=_layers.GELU, MultiHeadAttention=_attention_module.MultiHeadAttention,
    TransformerEncoderLayer=_transformer.TransformerEncoderLayer,
    _sa_block=(_transformer.TransformerEncoderLayer._sa_block, _transformer.TransformerDecoderLayer._sa_block),
    _ff_block=(_transformer.TransformerEncoderLayer._ff_block, _transformer.TransformerDecoderLayer._ff_block),
)


def _runs_own_forward(module, class_name):
    """``module`` computes what the library's ``class_name`` computes (``nn.transformer.computes_forward_of``):
    a fused path computes what it would."""
    return _transformer.computes_forward_of(module, _LIBRARY[class_name])


def _why_not_library_parts(parts):
    """``None`` when each of ``parts`` (``(name, part, class name)``) is of the library's class (or computes as it:
    ``computes_as``), else which is not."""
    for name, part, class_name in parts:
        kind = type(part)
        if kind.__dict__.get("computes_as", kind) is not _LIBRARY[class_name]:
            return f"{name} is not the library's {class_name} with its own forward"
    return None


def _why_not_plain_parts(parts):
    """``None`` unless one of ``parts`` (``(name, part, class name)``: modules a fused route computes without calling
    them) has a ``forward`` of its own instance or a hook, which only its own call would run. Each part's
    ``__dict__`` is read directly (the layers ask this on every call): a module has hooks only in tables of its own
    (``Module.own_hook_tables``, made all at once), never in the empty ones all modules share."""
    for name, part, class_name in parts:
        own = part.__dict__
        if "forward" in own:
            return f"{name} is not the library's {class_name} with its own forward"
        if "_forward_hooks" in own and (own["_forward_pre_hooks"] or own["_forward_hooks"] or own["_backward_pre_hooks"]
                                        or own["_backward_hooks"]):
            return _why_not_hooked(((name, part),))
    return None


def _name_in(layer, part):
    for name, child in layer.__dict__.get("_modules", {}).items():
        if child is part:
            return name
    return "self_attn.out_proj" if part is getattr(layer.self_attn, "out_proj", None) else "a part"


_HOOK_KINDS = (("_forward_pre_hooks", "a forward pre-hook"), ("_forward_hooks", "a forward hook"),
               ("_backward_pre_hooks", "a full backward pre-hook"), ("_backward_hooks", "a full backward hook"))


def _why_not_hooked(parts):
    """``None`` unless one of ``parts`` (``(name, module)`` pairs: the modules a fused route computes without
    calling them) has a hook, which only its own call (``Module.__call__``) fires; else which part has which kind
    of hook."""
    for name, part in parts:
        if getattr(part, "_has_hooks", False):  # (an activation may be a plain function)
            kind = next(kind for table, kind in _HOOK_KINDS if getattr(part, table))
            return f"{name} has {kind}"
    return None


def _fit(dtype, shape, tensors):
    """Every one of ``tensors`` is a tensor (not ``None``) of ``dtype`` and ``shape``, as the reference
    takes it. A plain loop on the arrays' own attributes: the layers ask this on every call."""
    for t in tensors:
        if t is None:
            return False
        data = t._data
        if data.shape != shape or data.dtype is not dtype and data.dtype != dtype:  # (is: NumPy's own dtypes)
            return False
    return True


def _all_of_dtype(dtype, tensors):
    for t in tensors:
        if t is None or t.dtype != dtype:
            return False
    return True


# ----------------------------------------------------------------------------- explain

# while ta.explain runs, in its thread: {id(module): [(part, fast route, reason or None)]}
TRACE = contextvars.ContextVar("explain_trace", default=None)


def _record(module, part, fast_route, reason):
    """While ``explain`` runs: note a route of ``module`` (once: a row's test and its run both ask)."""
    trace = TRACE.get()
    if trace is not None and module is not None:
        entries = trace.setdefault(id(module), [])
        if (part, fast_route, reason) not in entries:
            entries.append((part, fast_route, reason))


def explain(module, *inputs, file=None, **kwargs):
    """Print, per submodule of ``module``, what runs for it on ``inputs`` and, where a fused form does not
    apply, why: what ``ta.compile`` chose for it (a module not compiled runs its reference), and, for a
    compiled one, what its fused form decided on this call. It runs ``module(*inputs, **kwargs)`` once,
    without recording a graph, and asks the same functions the forward passes ask; a submodule its parent
    did not call on its own (it runs inside a fused node of its parent) says so. Returns the printed text.

    >>> import tinyattn as ta
    >>> layer = ta.nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, activation="gelu").eval()
    >>> _ = ta.explain(ta.compile(layer), ta.randn(2, 3, 8))  # doctest: +NORMALIZE_WHITESPACE
    TransformerEncoderLayer
      self-attention residual: fast.SelfAttentionBlock (3 keys, under the blocked-attention threshold 513)
      feed-forward residual: fast.FeedForwardBlock (gelu)
      self-attention products, training: on OpenBLAS's threads (its widest pass, 36 elements, is under the pool's
        threshold 786,432)
      feed-forward products, training: on OpenBLAS's threads (its widest pass, 96 elements, is under the pool's
        threshold 786,432)
    self_attn (MultiHeadAttention): inside a fused node of its parent
    self_attn.q_proj (Linear): inside a fused node of its parent
    self_attn.k_proj (Linear): inside a fused node of its parent
    self_attn.v_proj (Linear): inside a fused node of its parent
    self_attn.out_proj (Linear): inside a fused node of its parent
    linear1 (Linear): inside a fused node of its parent
    dropout (Dropout): inside a fused node of its parent
    linear2 (Linear): inside a fused node of its parent
    norm1 (LayerNorm): inside a fused node of its parent
    norm2 (LayerNorm): inside a fused node of its parent
    dropout1 (Dropout): inside a fused node of its parent
    dropout2 (Dropout): inside a fused node of its parent
    """
    trace = {}
    token = TRACE.set(trace)
    try:
        with no_grad():
            module(*inputs, **kwargs)
    finally:
        TRACE.reset(token)
    notes = module.__dict__.get("compile_notes", {})
    lines, called = [], set()
    for name, sub in module.named_modules():
        entries = trace.get(id(sub))
        label = f"{name} ({type(sub).__name__})" if name else type(sub).__name__
        compiled = "compiled_from" in type(sub).__dict__
        if entries and compiled:
            called.add(id(sub))
            if len(entries) == 1:
                lines.append(f"{label}: {_describe(*entries[0])}")
            else:
                lines.append(label)
                lines.extend(f"  {part}: {_describe(part, fast_route, reason)}" for part, fast_route, reason in entries)
        elif any(id(parent) in called and _is_fused_part(trace[id(parent)], parent, sub)
                 for parent in _ancestors(module, name)):
            lines.append(f"{label}: inside a fused node of its parent")
        elif _routable(sub) and not compiled:
            note = notes.get(name) or "reference (not compiled: ta.compile swaps in its fused form)"
            lines.append(f"{label}: {note}")
        elif compiled and isinstance(sub, _LIBRARY["Linear"]):
            lines.append(f"{label}: fast.Linear")
        elif compiled and isinstance(sub, _LIBRARY["LayerNorm"]):
            lines.append(f"{label}: fast.Normalize")
        elif compiled:
            lines.append(f"{label}: not called")
        else:
            lines.append(f"{label}: reference (no fused form)")
    text = "\n".join(lines)
    print(text, file=file)
    return text


def _describe(part, fast_route, reason):
    if part == "scaled dot-product attention":
        return fast_route
    if part == "attention on the real tokens" and reason is not None:
        return f"on the padded batch with its padding mask ({reason})"
    if part.endswith("products, training") and reason is not None:
        return f"on OpenBLAS's threads ({reason})"
    return fast_route if reason is None else f"reference ({reason})"


def _routable(module):
    return isinstance(module, tuple(_LIBRARY[name] for name in ("Linear", "LayerNorm", "MultiHeadAttention"))) or (
        hasattr(module, "_sa_block") and hasattr(module, "_ff_block"))


def _ancestors(root, dotted_name):
    """The modules on the path from ``root`` down to (not including) the submodule ``dotted_name``."""
    found, node = [root], root
    parts = dotted_name.split(".") if dotted_name else []
    for part in parts[:-1]:
        node = node._modules[part]
        found.append(node)
    return found


def _is_fused_part(entries, parent, sub):
    """``sub`` is a part of ``parent`` that one of ``parent``'s fused routes ran inside."""
    for part, _, reason in entries:
        if reason is not None:
            continue
        if part == "self-attention residual":
            attention = parent.self_attn
            parts = (attention, attention.q_proj, attention.k_proj, attention.v_proj, attention.out_proj,
                     parent.norm1, parent.dropout1)
        elif part == "feed-forward residual":
            ff_norm, ff_dropout = (parent.norm3, parent.dropout3) if hasattr(parent, "norm3") else (
                parent.norm2, parent.dropout2)
            parts = (parent.linear1, parent.linear2, parent.dropout, ff_norm, ff_dropout, parent.activation)
        elif part == "projections and attention":
            parts = (parent.q_proj, parent.k_proj, parent.v_proj)
        else:
            parts = ()
        if any(sub is p for p in parts):
            return True
    return False
