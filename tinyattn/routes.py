"""Which route runs: the reference definition or a fast one, decided here and nowhere else.

Every choice between a layer's reference definition (``nn.functional``, ``nn.sdpa``,
``nn.attention``, ``nn.transformer``) and a fused node of ``tinyattn.fast`` is made by the
functions below. Each ``why_not_*`` function returns the reason a fast route does not apply, or
``None`` when it does (the pattern of PyTorch's ``why_not_sparsity_fast_path``); the layers make
one call each (``routes.linear``, ``routes.layer_norm``, ``routes.cross_entropy``,
``routes.attention``, ``routes.multi_head_attention``, ``routes.encoder_layer``,
``routes.decoder_layer``, ``routes.encoder``), and ``ta.explain`` prints what the same functions answer.

The switch: ``ta.use_fast_paths(False)`` (a function, and a context manager that restores the
previous settings on exit) or ``TINYATTN_FAST=0`` in the environment at import. With fast paths
off every op and layer runs its reference definition. Its keyword settings move the thresholds:
``blocked_attention_min_keys`` (513: from this many keys on, attention without weights or dropout
goes a block of keys at a time), ``attention_block_size`` (keys per block; ``None`` chooses),
``pool_min_elements`` (from this many elements on, a fast kernel's pass is spread over the cores)
and ``piece_elements`` (the size of the pieces a large pass is cut into; see ``fast.parallel``).

>>> import tinyattn as ta
>>> from tinyattn import routes
>>> routes.why_not_fused_linear() is None
True
>>> with ta.use_fast_paths(False):
...     routes.why_not_fused_linear()
'fast paths are off'
"""

import math
import os
import weakref
from collections import namedtuple
from functools import partial

import numpy as np


class _Settings:
    enabled = os.environ.get("TINYATTN_FAST", "1") != "0"
    blocked_attention_min_keys = 513  # past 512 keys the blocked path is faster (and far leaner): up to 512, one
    # batch slice of self-attention's scores (512² = 2¹⁸, piece_elements) fits one piece, and the whole-matrix
    # path, slice by slice, is faster (benchmarks/blocked_threshold.py measures both routes of self-attention)
    attention_block_size = None  # keys per block: None lets BlockedAttention choose
    pool_min_elements = 3 << 18  # from this many elements on, a fast kernel's pass runs on every core
    # (fast.parallel). A pass alone pays from 2¹⁸–2¹⁹ (benchmarks/pool_threshold.py); a layer's passes mostly follow
    # a GEMM, whose second BLAS thread then spins on the other core a while, and there it pays later
    # (benchmarks/pool_threshold.py --after-gemm)
    piece_elements = 1 << 18  # about this many elements per piece of a pooled pass: 1 MiB of float32,
    # half a core's L2 cache
    transposed_products_rows = 512  # in inference on the real tokens alone, up to this many rows a block's products
    # run as (W aᵀ)ᵀ (fast.blocks.times_weight_t): past 512 the gain is a few hundredths, and it turns to a loss
    # (benchmarks/pool_threshold.py --products times both forms by rows)
    products_on_pool = True  # while a graph is recorded, a residual block whose widest pass reaches pool_min_elements
    # runs with OpenBLAS on one thread and its products over the pool (fast.parallel.products_on_pool): OpenBLAS's
    # own threads spin after each product on the core the pooled passes need (benchmarks/pool_threshold.py
    # --products-on-pool times attention's backward after a GEMM, and steps both ways)
    sequence_attention_min_length = 3.0  # in inference on the real tokens alone, attention runs sentence by sentence
    # (fast.kernels.attention_by_sequences) when the sentences average at least this many real tokens, else on the
    # padded batch: each sentence costs two calls, and sentences of a token or two save too little padding to pay
    # for them (benchmarks/pool_threshold.py --sequences times both)

    def __setattr__(self, name, value):
        object.__setattr__(self, name, value)
        changed()  # a route may now be another


settings = _Settings()


class use_fast_paths:
    """``use_fast_paths(enabled=True, *, blocked_attention_min_keys=None, attention_block_size=None,
    pool_min_elements=None, piece_elements=None, transposed_products_rows=None, sequence_attention_min_length=None,
    products_on_pool=None)``:
    turn the fast routes on or off, now; used as a context manager, the previous settings come back on exit. The
    keywords, when given, set the blocked-attention threshold (keys) and block size, the size from which a fast
    kernel's pass runs on every core (elements), the size of the pieces it is cut into (``fast.parallel``), the
    most rows whose products run transposed in inference (``fast.blocks.times_weight_t``; 0: none) and the
    shortest average sentence (real tokens) for which inference on the real tokens alone runs attention sentence
    by sentence (``fast.kernels.attention_by_sequences``; 0: always), and whether a large residual block runs its
    products over the pool while a graph is recorded (``fast.parallel.products_on_pool``).

    >>> import tinyattn as ta
    >>> layer = ta.nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0)
    >>> x = ta.randn(2, 3, 8, requires_grad=True)
    >>> type(layer(x)._ctx).__name__
    'FeedForwardBlock'
    >>> with ta.use_fast_paths(False):                 # norm2(x + _ff_block(x)): LayerNorm, then weight and bias
    ...     type(layer(x)._ctx).__name__
    'Add'
    """

    def __init__(self, enabled=True, *, blocked_attention_min_keys=None, attention_block_size=None,
                 pool_min_elements=None, piece_elements=None, transposed_products_rows=None,
                 sequence_attention_min_length=None, products_on_pool=None):
        self._previous = tuple(getattr(settings, name) for name in _SETTING_NAMES)
        given = {"blocked_attention_min_keys": (blocked_attention_min_keys, int),
                 "attention_block_size": (attention_block_size, int), "pool_min_elements": (pool_min_elements, int),
                 "piece_elements": (piece_elements, lambda n: max(1, int(n))),
                 "transposed_products_rows": (transposed_products_rows, int),
                 "sequence_attention_min_length": (sequence_attention_min_length, float),
                 "products_on_pool": (products_on_pool, bool)}
        values = {name: convert(value) for name, (value, convert) in given.items() if value is not None}  # all
        # converted before any is set: a value that is not a number changes nothing
        settings.enabled = bool(enabled)
        for name, value in values.items():
            setattr(settings, name, value)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        for name, value in zip(_SETTING_NAMES, self._previous):
            setattr(settings, name, value)


_SETTING_NAMES = ("enabled", "blocked_attention_min_keys", "attention_block_size", "pool_min_elements",
                  "piece_elements", "transposed_products_rows", "sequence_attention_min_length", "products_on_pool")


FAST_OFF = "fast paths are off"  # by ta.use_fast_paths(False), or TINYATTN_FAST=0 at import

# ----------------------------------------------------------------------------- ops


def why_not_fused_linear():
    """``None`` when ``F.linear`` and ``nn.Linear`` run one ``fast.Linear`` node."""
    return None if settings.enabled else FAST_OFF


def why_not_fused_layer_norm():
    """``None`` when ``F.layer_norm`` runs one ``fast.Normalize`` node."""
    return None if settings.enabled else FAST_OFF


def why_not_fused_cross_entropy():
    """``None`` when ``F.cross_entropy`` runs one ``fast.CrossEntropy`` node."""
    return None if settings.enabled else FAST_OFF


def why_not_masked_softmax():
    """``None`` when attention's softmax is ``fast.MaskedSoftmax`` (whole-array shift, underflowing
    rows redone) instead of the reference ``F.softmax`` over the masked scores."""
    return None if settings.enabled else FAST_OFF


def linear():
    """``"fast"`` or ``"reference"`` for ``F.linear`` and ``nn.Linear``."""
    return "reference" if why_not_fused_linear() else "fast"


def layer_norm():
    """``"fast"`` or ``"reference"`` for ``F.layer_norm`` and ``nn.LayerNorm``."""
    return "reference" if why_not_fused_layer_norm() else "fast"


def cross_entropy():
    """``"fast"`` or ``"reference"`` for ``F.cross_entropy``."""
    return "reference" if why_not_fused_cross_entropy() else "fast"


# ----------------------------------------------------------------------------- attention


def _one_float_dtype(query, key, value, attn_mask):
    """True when query, key, value (and a float mask) share one floating dtype: no promotion needed."""
    dtypes = {query.dtype, key.dtype, value.dtype}
    if attn_mask is not None and attn_mask.dtype != np.bool_:
        dtypes.add(attn_mask.dtype)
    return len(dtypes) == 1 and query.dtype.kind == "f"


def why_not_fused_attention(query, key, value, attn_mask, need_weights):
    """``None`` when ``scaled_dot_product_attention`` runs as one ``fast.Attention`` node."""
    if not settings.enabled:
        return FAST_OFF
    if need_weights:
        return "the weights are returned (need_weights=True), so they stay in the graph"
    if not _one_float_dtype(query, key, value, attn_mask):
        return "query, key, value and the float mask are not of one floating dtype"
    return None


def why_not_blocked_attention(query, key, value, attn_mask, dropout_p, need_weights):
    """``None`` when ``scaled_dot_product_attention`` goes a block of keys at a time
    (``fast.BlockedAttention``, never holding the whole ``(…, Lq, Lk)`` scores)."""
    reason = why_not_fused_attention(query, key, value, attn_mask, need_weights)
    if reason:
        return reason
    if dropout_p > 0.0:
        return f"dropout acts on the weights (p={dropout_p}): the blocked backward cannot redraw it"
    Lk, threshold = key.shape[-2], settings.blocked_attention_min_keys
    if Lk < threshold:
        return f"{Lk} keys, fewer than the blocked-attention threshold of {threshold}"
    return None


def attention(query, key, value, attn_mask, dropout_p, need_weights):
    """The route of ``scaled_dot_product_attention``: ``"blocked"``, ``"fused"`` (one ``Attention``
    node), ``"masked softmax"`` (the reference's nodes with ``fast.MaskedSoftmax``) or ``"reference"``."""
    if why_not_blocked_attention(query, key, value, attn_mask, dropout_p, need_weights) is None:
        return "blocked"
    if why_not_fused_attention(query, key, value, attn_mask, need_weights) is None:
        return "fused"
    return "masked softmax" if why_not_masked_softmax() is None else "reference"


def why_not_packed_self_attention(attention_module, query, key, value, need_weights):
    """``None`` when ``MultiHeadAttention`` runs as ``InProjection`` (one GEMM for q, k and v) and
    ``PackedSelfAttention`` (attention and the heads merged, one node)."""
    if not settings.enabled:
        return FAST_OFF
    if need_weights:
        return "the weights are returned (need_weights=True)"
    if not (query is key is value):
        return "not self-attention (query, key and value are not one tensor)"
    reason = _why_not_packable(attention_module, query)
    if reason:
        return reason
    q, k, v = attention_module.q_proj, attention_module.k_proj, attention_module.v_proj
    params = (q.weight, k.weight, v.weight) + ((q.bias, k.bias, v.bias) if q.bias is not None else ())
    if query.dtype.kind != "f" or not _all_of_dtype(query.dtype, params):
        return "the input and the projections' parameters are not of one floating dtype"
    return None


def _why_not_packable(attention_module, x):
    """Why ``x`` cannot go through the packed whole-matrix self-attention of ``attention_module``."""
    threshold = settings.blocked_attention_min_keys
    if x.shape[1] >= threshold:
        return f"{x.shape[1]} keys, at least the blocked-attention threshold of {threshold}"
    if not attention_module.kdim == attention_module.vdim == attention_module.embed_dim:
        return "kdim or vdim differs from embed_dim"
    for name in ("q_proj", "k_proj", "v_proj"):
        if not _runs_own_forward(getattr(attention_module, name), "Linear"):
            return f"{name} is not a plain nn.Linear with its own forward"
    return None


def multi_head_attention(module, query, key, value, attn_mask, dropout_p, need_weights):
    """The route of ``MultiHeadAttention.forward``: ``"packed"``, ``"fused"`` (heads split and merged
    by one node each, attention by ``routes.attention``) or ``"reference"``."""
    reason = why_not_packed_self_attention(module, query, key, value, need_weights)
    route = "packed" if reason is None else "fused" if settings.enabled else "reference"
    if _TRACE is not None:
        _record(module, "projections and attention", "fast.InProjection + fast.PackedSelfAttention", reason)
        if reason is not None:
            inner = attention(query, key, value, attn_mask, dropout_p, need_weights)
            why = why_not_blocked_attention(query, key, value, attn_mask, dropout_p, need_weights)
            note = "" if why is None else f" ({why})" if why == FAST_OFF else f" (not blocked: {why})"
            _record(module, "scaled dot-product attention", inner + note, None)
    return route


# ----------------------------------------------------------------------------- Transformer layers


def why_not_self_attention_block(layer, x, attn_mask):
    """``None`` when a Transformer layer's self-attention residual (``norm1``, ``self_attn``,
    ``dropout1`` and the sum) runs as one ``fast.SelfAttentionBlock``."""
    if not settings.enabled:
        return FAST_OFF
    attention, norm, dropout = layer.self_attn, layer.norm1, layer.dropout1
    if layer.keep_attn_weights:
        return "the attention weights are kept (keep_attn_weights=True)"
    if type(layer)._sa_block not in _own_methods("_sa_block") or "_sa_block" in layer.__dict__:
        return "_sa_block is overridden"
    for part, class_name in ((attention, "MultiHeadAttention"), (norm, "LayerNorm"), (dropout, "Dropout"),
                             (attention.out_proj, "Linear")):
        if not _runs_own_forward(part, class_name):
            return f"{_name_in(layer, part)} is not the library's {class_name} with its own forward"
    if attention.training and attention.dropout:
        return f"dropout acts on the attention weights (p={attention.dropout}, training)"
    if dropout.training and dropout.p:
        return f"dropout1 acts (p={dropout.p}, training)"
    reason = _why_not_packable(attention, x)
    if reason:
        return reason
    q, k, v, out = attention.q_proj, attention.k_proj, attention.v_proj, attention.out_proj
    E, dtype = x.shape[-1], x.dtype
    if (norm.normalized_shape != (E,) or dtype.kind != "f"
            or not _fit(dtype, (E,), (norm.weight, norm.bias, q.bias, k.bias, v.bias, out.bias))
            or not _fit(dtype, (E, E), (q.weight, k.weight, v.weight, out.weight))):
        return "a parameter is missing or not of the input's shape and floating dtype"
    if attn_mask is not None and getattr(attn_mask, "dtype", None) != np.bool_ and getattr(
            attn_mask, "requires_grad", False):
        return "the float mask needs a gradient"
    return None


def feed_forward_activation(activation):
    """The name ``fast.FeedForwardBlock`` knows ``activation`` by: ``"relu"`` (``F.relu``, a plain
    ``nn.ReLU``), ``"gelu"`` (``F.gelu``, the layers' ``"gelu"``, a plain ``nn.GELU()``, or
    ``functools.partial(F.gelu, approximate=...)``), ``"gelu_tanh"`` (``nn.GELU(approximate="tanh")``),
    or ``None`` for any other callable (a subclass with its own ``forward`` included)."""
    library = _LIBRARY or _library()
    if activation in library["relu"] or _runs_own_forward(activation, "ReLU"):
        return "relu"
    if activation in library["gelu"]:
        return "gelu"
    if _runs_own_forward(activation, "GELU"):
        approximate = activation.approximate
    elif isinstance(activation, partial) and activation.func in library["gelu"] and not activation.args and set(
            activation.keywords) <= {"approximate"}:
        approximate = activation.keywords.get("approximate", "none")
    else:
        return None
    return {"none": "gelu", "tanh": "gelu_tanh"}.get(approximate)


def why_not_feed_forward_block(layer, norm, x, output_dropout):
    """``None`` when a Transformer layer's feed-forward residual (``norm``, ``linear1``, the
    activation (ReLU or GELU), ``dropout``, ``linear2``, ``output_dropout`` and the sum) runs as one
    ``fast.FeedForwardBlock``."""
    if not settings.enabled:
        return FAST_OFF
    linear1, linear2, dropout = layer.linear1, layer.linear2, layer.dropout
    activation = feed_forward_activation(layer.activation)
    if activation is None:
        name = getattr(layer.activation, "__name__", type(layer.activation).__name__)
        return f"the activation is {name}, not relu or gelu"
    if type(layer)._ff_block not in _own_methods("_ff_block") or "_ff_block" in layer.__dict__:
        return "_ff_block is overridden"
    for part, class_name in ((linear1, "Linear"), (linear2, "Linear"), (norm, "LayerNorm"), (dropout, "Dropout"),
                             (output_dropout, "Dropout")):
        if not _runs_own_forward(part, class_name):
            return f"{_name_in(layer, part)} is not the library's {class_name} with its own forward"
    for part in (dropout, output_dropout):
        if part.training and part.p:
            return f"{_name_in(layer, part)} acts (p={part.p}, training)"
    E, hidden, dtype = x.shape[-1], linear1.out_features, x.dtype  # hidden: dim_feedforward
    if not (norm.normalized_shape == (E,) and _fit(dtype, (E,), (norm.weight, norm.bias, linear2.bias))
            and _fit(dtype, (hidden,), (linear1.bias,)) and _fit(dtype, (hidden, E), (linear1.weight,))
            and _fit(dtype, (E, hidden), (linear2.weight,))):
        return "a parameter is missing or not of the input's shape and floating dtype"
    if activation != "relu" and dtype not in (np.float32, np.float64):
        return f"GELU's kernels take float32 and float64, not {dtype}"
    return None


LayerRoute = namedtuple("LayerRoute", "self_attention_block feed_forward_block")
LayerRoute.__doc__ = """Which residual blocks of a Transformer layer run as one fused node each:
``self_attention_block`` True/False; ``feed_forward_block`` the activation's name for the block
(``"relu"``, ``"gelu"``, ``"gelu_tanh"``), or ``None`` when it runs the layer's own lines."""


def encoder_layer(layer, src, src_mask):
    """The route of ``TransformerEncoderLayer.forward``: a ``LayerRoute``."""
    return _layer_route(layer, src, src_mask, layer.norm2, layer.dropout2)


def decoder_layer(layer, tgt, tgt_mask):
    """The route of ``TransformerDecoderLayer.forward`` (its cross-attention has no block: it runs
    ``cross_attn``'s own route): a ``LayerRoute``."""
    return _layer_route(layer, tgt, tgt_mask, layer.norm3, layer.dropout3)


def padding_to_zero(encoder, src, mask, is_causal):
    """The real tokens ``(B, L)`` (``True``) of ``src`` when ``encoder`` (a ``TransformerEncoder``)
    returns zeros at the padding, else ``None``: PyTorch's nested-tensor conditions (its encoder then
    computes the real tokens alone, and fills the padding with zeros before the final norm). They are
    ``enable_nested_tensor`` (the default), and as the first layer (PyTorch looks at no other) the
    library's post-norm encoder layer with ReLU or GELU, equal LayerNorm eps and an even number of
    heads, in eval mode; no graph recorded (``ta.no_grad()``, or nothing needs a gradient); ``is_causal``
    False; and as the mask a boolean padding mask ``(B, 1, 1, L)`` (``F.padding_mask``) whose real tokens
    come first in each row.

    This decides what the encoder returns, and so holds with fast paths on or off; the route below
    decides only how the real tokens are computed. (PyTorch asks for a gradient of ``src`` and of the
    first layer's parameters only; here no parameter of the stack may need one.)"""
    layers = encoder.layers
    if not encoder.enable_nested_tensor or not len(layers) or is_causal or src.ndim != 3:
        return None
    first = layers[0]
    if (not _runs_own_forward(first, "TransformerEncoderLayer") or first.norm_first or first.training
            or feed_forward_activation(first.activation) is None
            or first.norm1.eps != first.norm2.eps or first.self_attn.num_heads % 2):
        return None
    B, L, _ = src.shape
    mask = getattr(mask, "_data", mask)  # a tensor's array, or an array as it is
    if getattr(mask, "dtype", None) != np.bool_ or mask.shape != (B, 1, 1, L):
        return None
    from .backend import namespace
    from .tensor import records_graph

    if records_graph([src, *encoder.parameters()]):
        return None
    real = mask[:, 0, 0, :]  # (B, L)
    xp = namespace(real)
    first_tokens = xp.arange(L)[None, :] < real.sum(axis=1)[:, None]  # each row's real tokens, moved to its start
    return real if bool((real == first_tokens).all()) else None


def why_not_attention_by_sequences(sentences, tokens):
    """``None`` when attention on the real tokens alone (``fast.encoder_on_real_tokens``) runs sentence by
    sentence (``fast.kernels.attention_by_sequences``: no padded batch) for ``sentences`` sentences of ``tokens``
    real tokens in all; else why it runs on the padded batch with its padding mask."""
    if tokens < settings.sequence_attention_min_length * sentences:
        return (f"the sentences average {tokens / max(sentences, 1):.3g} real tokens, under the sentence-by-sentence "
                f"threshold {settings.sequence_attention_min_length:g}")
    return None


def runs_attention_by_sequences(sentences, tokens):
    """Whether ``why_not_attention_by_sequences(sentences, tokens)`` is ``None``."""
    return why_not_attention_by_sequences(sentences, tokens) is None


def why_not_products_on_pool(elements):
    """``None`` when a residual block whose widest elementwise pass (hidden activations, or attention's scores) has
    ``elements`` elements runs, while a graph is recorded, with OpenBLAS on one thread and its products over the
    pool (``fast.parallel.products_on_pool``); else why it keeps OpenBLAS's threads."""
    if not settings.products_on_pool:
        return "turned off (ta.use_fast_paths(products_on_pool=False))"
    if elements < settings.pool_min_elements:
        return f"its widest pass, {elements:,} elements, is under the pool's threshold {settings.pool_min_elements:,}"
    return None


def why_not_real_tokens_only(encoder, src, mask):
    """``None`` when an encoder that returns zeros at the padding (``padding_to_zero``) computes its real
    tokens alone (``fast.encoder_on_real_tokens``): each layer runs both residual blocks as fused nodes."""
    return _real_tokens_route(encoder, src, mask)[0]


def _real_tokens_route(encoder, src, mask):
    """``(reason, activations)``: ``why_not_real_tokens_only``'s answer, and each layer's activation name."""
    if not settings.enabled:
        return FAST_OFF, None
    activations = []
    for i, layer in enumerate(encoder.layers):
        if not _runs_own_forward(layer, "TransformerEncoderLayer"):
            return f"layers.{i} is not the library's TransformerEncoderLayer with its own forward", None
        route = encoder_layer(layer, src, mask)
        if not route.self_attention_block or not route.feed_forward_block:
            return f"layers.{i} does not run both residual blocks as fused nodes", None
        activations.append(route.feed_forward_block)
    return None, activations


def encoder(module, src, mask, is_causal):
    """The route of ``TransformerEncoder.forward``: ``(real, activations)``, the real tokens ``(B, L)``
    when the padding's outputs are zeros (``padding_to_zero``, else ``None``), and when the real tokens
    are computed alone (``why_not_real_tokens_only``) each layer's activation name, else ``None``."""
    real = padding_to_zero(module, src, mask, is_causal)
    if real is None:
        return None, None
    reason, activations = _real_tokens_route(module, src, mask)
    _record(module, "padding", "fast.encoder_on_real_tokens (the real tokens alone; zeros at the padding)", reason)
    if activations and _TRACE is not None:
        _record(module, "attention on the real tokens", "fast.kernels.attention_by_sequences (sentence by sentence)",
                why_not_attention_by_sequences(real.shape[0], int(real.sum())))
    return real, activations


# A layer asks for its route on every call, and the answer reads some thirty attributes of its parts,
# a cost that shows on a small model. The answer changes only when one of them does: a module's
# attribute is set or deleted (a submodule or parameter replaced, training mode, a dropout's p:
# ``Module.__setattr__``, ``__delattr__``, ``train``, ``eval``), a parameter's array is replaced
# (``Tensor.data``, ``Module.to``), or a setting changes (``use_fast_paths``). Each of those calls
# ``changed()``, which forgets every remembered route. The input's shape and dtype, the mask's kind and
# the layer class's own block methods are part of the key; ``explain`` always asks afresh.

_REMEMBERED = {}  # (id(layer), x's shape, x's dtype, mask kind, _sa_block, _ff_block) -> (weakref(layer), route)
_GENERATION = [0]  # how many times they were forgotten: a route found across a change is not kept


def changed():
    """Forget the remembered layer routes: a module, a parameter's array or a setting has changed."""
    _GENERATION[0] += 1
    if _REMEMBERED:
        _REMEMBERED.clear()


def _mask_kind(attn_mask):
    """What of a mask a route reads: ``None``, or whether it is boolean and whether it needs a gradient."""
    if attn_mask is None:
        return None
    return getattr(attn_mask, "dtype", None) == np.bool_, getattr(attn_mask, "requires_grad", False)


def _layer_route(layer, x, attn_mask, ff_norm, ff_dropout):
    if _TRACE is not None:
        return _find_layer_route(layer, x, attn_mask, ff_norm, ff_dropout)
    cls = type(layer)
    key = (id(layer), x.shape, x.dtype, _mask_kind(attn_mask), cls._sa_block, cls._ff_block)
    remembered = _REMEMBERED.get(key)
    if remembered is not None and remembered[0]() is layer:  # (a copy or unpickled layer may reuse a dead one's id)
        return remembered[1]
    generation = _GENERATION[0]
    route = _find_layer_route(layer, x, attn_mask, ff_norm, ff_dropout)
    if _GENERATION[0] == generation:  # nothing changed while the checks ran (another thread, say)
        _REMEMBERED[key] = (weakref.ref(layer), route)
    return route


def _find_layer_route(layer, x, attn_mask, ff_norm, ff_dropout):
    sa_reason = why_not_self_attention_block(layer, x, attn_mask)
    ff_reason = why_not_feed_forward_block(layer, ff_norm, x, ff_dropout)
    activation = None if ff_reason else feed_forward_activation(layer.activation)  # "relu", "gelu", "gelu_tanh"
    if _TRACE is not None:
        keys, threshold = x.shape[1], settings.blocked_attention_min_keys
        whole_matrix = f" ({keys} keys, under the blocked-attention threshold {threshold})"
        _record(layer, "self-attention residual", "fast.SelfAttentionBlock" + whole_matrix, sa_reason)
        _record(layer, "feed-forward residual", f"fast.FeedForwardBlock ({activation})", ff_reason)
        rows, keys, on_pool = math.prod(x.shape[:-1]), x.shape[-2], "over the pool, OpenBLAS on one thread"
        if sa_reason is None:
            scores = rows // keys * layer.self_attn.num_heads * keys * keys  # (B, H, L, L)
            _record(layer, "self-attention products, training", on_pool, why_not_products_on_pool(scores))
        if ff_reason is None:
            hidden = rows * layer.linear1.out_features
            _record(layer, "feed-forward products, training", on_pool, why_not_products_on_pool(hidden))
    return LayerRoute(sa_reason is None, activation)


# ----------------------------------------------------------------------------- the checks' helpers

_LIBRARY = {}


def _library():
    """The layer classes and the layers' own block methods, looked up on first use (the layers
    import this module, so it cannot import them at its top)."""
    if not _LIBRARY:
        from .nn import attention, functional, layers, transformer

        _LIBRARY.update(
            Linear=layers.Linear, LayerNorm=layers.LayerNorm, Dropout=layers.Dropout, ReLU=layers.ReLU,
            GELU=layers.GELU, MultiHeadAttention=attention.MultiHeadAttention, relu=(functional.relu,),
            TransformerEncoderLayer=transformer.TransformerEncoderLayer,
            gelu=(functional.gelu,),
            _sa_block=(transformer.TransformerEncoderLayer._sa_block, transformer.TransformerDecoderLayer._sa_block),
            _ff_block=(transformer.TransformerEncoderLayer._ff_block, transformer.TransformerDecoderLayer._ff_block),
        )
    return _LIBRARY


def _runs_own_forward(module, class_name):
    """``module`` is exactly the library's ``class_name`` (or its ``tinyattn.compat`` twin, which names it
    in its own ``_routes_as``) and its ``forward`` is the class's (not one set on the instance, such as a
    wrapper that records activations): a fused path computes what it would."""
    cls = type(module)
    return (cls.__dict__.get("_routes_as", cls) is (_LIBRARY or _library())[class_name]
            and "forward" not in module.__dict__)


def _own_methods(name):
    return (_LIBRARY or _library())[name]


def _name_in(layer, part):
    for name, child in layer.__dict__.get("_modules", {}).items():
        if child is part:
            return name
    return "self_attn.out_proj" if part is getattr(layer.self_attn, "out_proj", None) else "a part"


def _fit(dtype, shape, tensors):
    """Every one of ``tensors`` is a tensor (not ``None``) of ``dtype`` and ``shape``, as the reference
    takes it. A plain loop: the layers ask this on every call."""
    for t in tensors:
        if t is None or t.dtype != dtype or t.shape != shape:
            return False
    return True


def _all_of_dtype(dtype, tensors):
    for t in tensors:
        if t is None or t.dtype != dtype:
            return False
    return True


# ----------------------------------------------------------------------------- explain

_TRACE = None  # while ta.explain runs: {id(module): [(part, fast route, reason or None)]}


def _record(module, part, fast_route, reason):
    if _TRACE is not None and module is not None:
        _TRACE.setdefault(id(module), []).append((part, fast_route, reason))


def explain(module, *inputs, file=None, **kwargs):
    """Print, per submodule of ``module``, which route its forward takes on ``inputs`` and, where a
    fast route does not apply, why. It runs ``module(*inputs, **kwargs)`` once, without recording a
    graph, and asks the same functions the forward passes ask; a submodule the route did not call on
    its own (it runs inside a fused node of its parent) says so. Returns the printed text.

    >>> import tinyattn as ta
    >>> layer = ta.nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, activation="gelu").eval()
    >>> _ = ta.explain(layer, ta.randn(2, 3, 8))  # doctest: +NORMALIZE_WHITESPACE
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
    global _TRACE
    from .tensor import no_grad

    previous, _TRACE = _TRACE, {}
    try:
        with no_grad():
            module(*inputs, **kwargs)
        trace = _TRACE
    finally:
        _TRACE = previous
    lines, called = [], set()
    for name, sub in module.named_modules():
        entries = trace.get(id(sub))
        label = f"{name} ({type(sub).__name__})" if name else type(sub).__name__
        if entries:
            called.add(id(sub))
            if len(entries) == 1:
                lines.append(f"{label}: {_describe(*entries[0])}")
            else:
                lines.append(label)
                lines.extend(f"  {part}: {_describe(part, fast_route, reason)}" for part, fast_route, reason in entries)
        elif any(id(parent) in called and _is_fused_part(trace[id(parent)], parent, sub)
                 for parent in _ancestors(module, name)):
            lines.append(f"{label}: inside a fused node of its parent")
        elif isinstance(sub, _library()["Linear"]):
            lines.append(f"{label}: {_describe('linear', 'fast.Linear', why_not_fused_linear())}")
        elif isinstance(sub, _library()["LayerNorm"]):
            lines.append(f"{label}: {_describe('layer norm', 'fast.Normalize', why_not_fused_layer_norm())}")
        elif _routable(sub):
            lines.append(f"{label}: not called")
        else:
            lines.append(f"{label}: reference (no fast route)")
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
    return isinstance(module, tuple(_library()[name] for name in ("Linear", "LayerNorm", "MultiHeadAttention"))) or (
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
