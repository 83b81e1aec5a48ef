"""The Transformer's layers (Vaswani et al. 2017): positional encoding, encoder and decoder, batch-first.

Each layer is a residual sum around multi-head attention and a feed-forward block, with LayerNorm
after the sum (``norm_first=False``, the paper and PyTorch's default) or before the block
(``norm_first=True``, "pre-norm"). Dropout sits where PyTorch puts it: on the attention weights,
after each block (``dropout1``, ``dropout2``, ``dropout3``) and after the feed-forward activation
(``dropout``). ``eval()`` turns every dropout off; nothing else differs between train and eval.

Each ``forward`` is PyTorch's (its pre-norm and post-norm branches are ``residual``'s), is the definition, and
is what runs. ``ta.compile(layer)`` gives a
layer whose residual blocks (self-attention, or a ReLU or GELU feed-forward block, each with its LayerNorm
and sum) run as one fused node each, computing the same, where nothing random acts (eval mode, or
dropout 0); ``ta.explain(layer, x)`` says which.

The layers call attention with ``need_weights=False``, as PyTorch's do. To inspect the weights,
set ``layer.keep_attn_weights = True``: each forward then stores the last weights, detached,
``(B, H, Lq, Lk)``, in ``layer.attn_weights`` (encoder) or ``layer.self_attn_weights`` and
``layer.cross_attn_weights`` (decoder).

>>> import tinyattn as ta
>>> import tinyattn.nn as nn
>>> layer = nn.TransformerEncoderLayer(d_model=8, nhead=2, dim_feedforward=16, dropout=0.0)
>>> encoder = nn.TransformerEncoder(layer, num_layers=2, norm=nn.LayerNorm(8))
>>> src = nn.PositionalEncoding(8)(ta.randn(2, 5, 8))                 # (B, S, E)
>>> memory = encoder(src, mask=nn.functional.padding_mask([5, 3], 5))
>>> decoder = nn.TransformerDecoder(nn.TransformerDecoderLayer(8, 2, 16, dropout=0.0), num_layers=2)
>>> decoder(ta.randn(2, 4, 8), memory, tgt_is_causal=True).shape    # (B, T, E)
(2, 4, 8)
"""

import copy
import functools
import math

import numpy as np

from .. import backend
from .. import checks as check
from ..engine import Tensor, records_graph
from . import functional as F
from .attention import MultiHeadAttention
from .layers import GELU, Dropout, LayerNorm, Linear, ModuleList, ReLU
from .module import Module


class PositionalEncoding(Module):
    """Sinusoidal positions added to the input, then dropout: ``dropout(x + P[:L])``.

        P[pos, 2i]   = sin(pos / 10000^(2i / d_model))
        P[pos, 2i+1] = cos(pos / 10000^(2i / d_model))

    (interleaved, as in the Annotated Transformer). ``x`` is ``(…, L, d_model)``; ``P`` is a
    ``(max_len, d_model)`` non-persistent buffer: it moves with ``to(device)`` but is not in
    ``state_dict()`` (it is computed from the constructor's arguments). It is added in the
    input's dtype. ``L > max_len`` raises ``ValueError``.

    >>> import tinyattn as ta
    >>> pe = PositionalEncoding(4, max_len=10)
    >>> pe(ta.zeros(1, 2, 4)).numpy().round(3)            # row 0: sin 0, cos 0; row 1: sin 1, cos 1, ...
    array([[[0.   , 1.   , 0.   , 1.   ],
            [0.841, 0.54 , 0.01 , 1.   ]]], dtype=float32)
    >>> list(pe.state_dict())
    []
    """

    def __init__(self, d_model, max_len=5000, dropout=0.0, device=None, dtype=None):
        super().__init__()
        check.sizes("PositionalEncoding", d_model=d_model, max_len=max_len)
        self.d_model, self.max_len = d_model, max_len
        position = np.arange(max_len, dtype=np.float64)[:, None]  # (max_len, 1)
        div_term = np.exp(np.arange(0, d_model, 2, dtype=np.float64) * (-math.log(10000.0) / d_model))  # (⌈d/2⌉,)
        table = np.zeros((max_len, d_model))  # (max_len, d_model)
        table[:, 0::2] = np.sin(position * div_term)
        table[:, 1::2] = np.cos(position * div_term[: d_model // 2])
        table = backend.to_device(table.astype(dtype or np.float32), device or "cpu")
        self.register_buffer("pe", Tensor._wrap(table), persistent=False)
        self.dropout = Dropout(dropout)

    def forward(self, x):
        check.attention_inputs("PositionalEncoding", ("x", x))
        L = x.shape[-2]
        if L > self.max_len:
            raise ValueError(
                f"PositionalEncoding: the input has {L} positions (shape {x.shape}), more than max_len={self.max_len}"
            )
        if x.shape[-1] != self.d_model:
            raise ValueError(f"PositionalEncoding: expected (…, L, {self.d_model}), got shape {x.shape}")
        table = self.pe[:L].to(x.dtype)  # (L, d_model)
        return self.dropout(x + table)  # (…, L, d_model)

    def extra_repr(self):
        return f"d_model={self.d_model}, max_len={self.max_len}"


def _activation(activation):
    if activation == "relu":
        return F.relu
    if activation == "gelu":
        return F.gelu
    if callable(activation):
        return activation
    raise ValueError(f"activation must be 'relu', 'gelu' or a callable, got {activation!r}")


def residual(x, block, norm, norm_first):
    """A residual connection around ``block`` with its LayerNorm ``norm``: ``x + block(norm(x))`` pre-norm
    (``norm_first=True``), ``norm(x + block(x))`` post-norm (the paper's)."""
    if norm_first:
        return x + block(norm(x))
    return norm(x + block(x))


def _check_batch_first(name, t, d_model):
    if t.ndim != 3 or t.shape[-1] != d_model:
        raise ValueError(f"{name} must be batch-first (B, L, {d_model}), got shape {t.shape}")


class TransformerEncoderLayer(Module):
    """Self-attention and a feed-forward block, each inside a residual connection.

        post-norm (default):  x = norm1(x + SA(x));         x = norm2(x + FF(x))
        pre-norm:             x = x + SA(norm1(x));         x = x + FF(norm2(x))
        SA(x) = dropout1(self_attn(x, x, x, src_mask))
        FF(x) = dropout2(linear2(dropout(activation(linear1(x)))))

    ``forward(src, src_mask=None, is_causal=False)``: ``src (B, S, d_model)``; ``src_mask``
    as in ``MultiHeadAttention`` (``True`` = may attend, or added when float), e.g.
    ``F.padding_mask(lengths, S)``; ``is_causal`` adds the causal mask to it.
    ``activation``: ``"relu"``, ``"gelu"`` or a callable such as ``nn.GELU(approximate="tanh")``.

    >>> import tinyattn as ta
    >>> layer = TransformerEncoderLayer(8, 2, dim_feedforward=16, norm_first=True).eval()
    >>> layer.keep_attn_weights = True
    >>> layer(ta.randn(2, 3, 8), is_causal=True).shape, layer.attn_weights.shape
    ((2, 3, 8), (2, 2, 3, 3))
    """

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation="relu", layer_norm_eps=1e-5,
                 norm_first=False, device=None, dtype=None):
        super().__init__()
        check.transformer_sizes("TransformerEncoderLayer", d_model, nhead, dim_feedforward)
        factory = dict(device=device, dtype=dtype)
        self.self_attn = MultiHeadAttention(d_model, nhead, dropout=dropout, **factory)
        self.linear1 = Linear(d_model, dim_feedforward, **factory)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, **factory)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, **factory)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, **factory)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        self.activation = _activation(activation)
        self.keep_attn_weights = False
        self.attn_weights = None

    def forward(self, src, src_mask=None, is_causal=False):
        check.attention_inputs("TransformerEncoderLayer", ("src", src))
        _check_batch_first("TransformerEncoderLayer: src", src, self.self_attn.embed_dim)
        sa_block = functools.partial(self._sa_block, attn_mask=src_mask, is_causal=is_causal)
        x = residual(src, sa_block, self.norm1, self.norm_first)  # (B, S, E)
        return residual(x, self._ff_block, self.norm2, self.norm_first)  # (B, S, E)

    def _sa_block(self, x, attn_mask, is_causal):
        x, weights = self.self_attn(x, attn_mask=attn_mask, is_causal=is_causal, need_weights=self.keep_attn_weights)
        if self.keep_attn_weights:
            self.attn_weights = weights.detach()  # (B, H, S, S)
        return self.dropout1(x)  # (B, S, E)

    def _ff_block(self, x):
        x = self.linear2(self.dropout(self.activation(self.linear1(x))))  # (B, S, F) -> (B, S, E)
        return self.dropout2(x)


class TransformerDecoderLayer(Module):
    """Causal self-attention, cross-attention to the encoder's memory, and a feed-forward block.

        post-norm (default):  x = norm1(x + SA(x));  x = norm2(x + CA(x, memory));  x = norm3(x + FF(x))
        pre-norm:             x = x + SA(norm1(x));  x = x + CA(norm2(x), memory);  x = x + FF(norm3(x))
        SA(x) = dropout1(self_attn(x, x, x, tgt_mask))
        CA(x, m) = dropout2(cross_attn(x, m, m, memory_mask))
        FF(x) = dropout3(linear2(dropout(activation(linear1(x)))))

    ``forward(tgt, memory, tgt_mask=None, memory_mask=None, tgt_is_causal=False)``:
    ``tgt (B, T, d_model)``, ``memory (B, S, d_model)``; ``tgt_mask`` broadcasts to
    ``(B, H, T, T)``, ``memory_mask`` to ``(B, H, T, S)`` (e.g. ``F.padding_mask(src_lengths, S)``).
    PyTorch calls ``cross_attn`` ``multihead_attn``; ``tinyattn.interop`` renames it.

    >>> import tinyattn as ta
    >>> layer = TransformerDecoderLayer(8, 2, dim_feedforward=16)
    >>> layer(ta.randn(2, 3, 8), ta.randn(2, 5, 8), tgt_is_causal=True).shape
    (2, 3, 8)
    """

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation="relu", layer_norm_eps=1e-5,
                 norm_first=False, device=None, dtype=None):
        super().__init__()
        check.transformer_sizes("TransformerDecoderLayer", d_model, nhead, dim_feedforward)
        factory = dict(device=device, dtype=dtype)
        self.self_attn = MultiHeadAttention(d_model, nhead, dropout=dropout, **factory)
        self.cross_attn = MultiHeadAttention(d_model, nhead, dropout=dropout, **factory)
        self.linear1 = Linear(d_model, dim_feedforward, **factory)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, **factory)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, **factory)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, **factory)
        self.norm3 = LayerNorm(d_model, eps=layer_norm_eps, **factory)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        self.dropout3 = Dropout(dropout)
        self.activation = _activation(activation)
        self.keep_attn_weights = False
        self.self_attn_weights = self.cross_attn_weights = None

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_is_causal=False):
        check.attention_inputs("TransformerDecoderLayer", ("tgt", tgt), ("memory", memory))
        d_model = self.self_attn.embed_dim
        _check_batch_first("TransformerDecoderLayer: tgt", tgt, d_model)
        _check_batch_first("TransformerDecoderLayer: memory", memory, d_model)
        sa_block = functools.partial(self._sa_block, attn_mask=tgt_mask, is_causal=tgt_is_causal)
        ca_block = functools.partial(self._ca_block, memory=memory, attn_mask=memory_mask)
        x = residual(tgt, sa_block, self.norm1, self.norm_first)  # (B, T, E)
        x = residual(x, ca_block, self.norm2, self.norm_first)  # (B, T, E)
        return residual(x, self._ff_block, self.norm3, self.norm_first)  # (B, T, E)

    def _sa_block(self, x, attn_mask, is_causal):
        x, weights = self.self_attn(x, attn_mask=attn_mask, is_causal=is_causal, need_weights=self.keep_attn_weights)
        if self.keep_attn_weights:
            self.self_attn_weights = weights.detach()  # (B, H, T, T)
        return self.dropout1(x)  # (B, T, E)

    def _ca_block(self, x, memory, attn_mask):
        x, weights = self.cross_attn(x, memory, memory, attn_mask=attn_mask, need_weights=self.keep_attn_weights)
        if self.keep_attn_weights:
            self.cross_attn_weights = weights.detach()  # (B, H, T, S)
        return self.dropout2(x)  # (B, T, E)

    def _ff_block(self, x):
        x = self.linear2(self.dropout(self.activation(self.linear1(x))))  # (B, T, F) -> (B, T, E)
        return self.dropout3(x)


def _fresh_copies(layer, num_layers):
    """``num_layers`` deep copies of ``layer``, each re-initialised with new random values.

    ``apply`` visits children before their parent, so a parent's ``reset_parameters`` (e.g.
    attention's xavier projections) has the last word over its children's defaults.
    """
    copies = [copy.deepcopy(layer) for _ in range(num_layers)]
    for copied in copies:
        copied.apply(lambda module: module.reset_parameters() if hasattr(module, "reset_parameters") else None)
    return ModuleList(copies)


class TransformerEncoder(Module):
    """``num_layers`` encoder layers in sequence, then the optional final ``norm``.

    ``layers`` holds deep copies of ``encoder_layer``, each initialised afresh (the copies do not
    start equal). ``forward(src, mask=None, is_causal=False)`` passes ``mask`` and ``is_causal``
    to every layer. Use ``norm=nn.LayerNorm(d_model)`` with pre-norm layers.

    ``enable_nested_tensor=True`` (PyTorch's default) gives PyTorch's inference result on a padded
    batch: where PyTorch's encoder would use nested tensors (post-norm ReLU or GELU layers in eval
    mode, no graph recorded, a padding mask such as ``F.padding_mask(lengths, S)``; the full list is
    ``padding_to_zero``), the outputs at the padding are zeros (before ``norm``); compiled
    (``ta.compile``), the real tokens are then computed alone. Their outputs are what they would be with the padding
    computed: no real token attends to a padded one.

    >>> import tinyattn as ta
    >>> encoder = TransformerEncoder(TransformerEncoderLayer(4, 2, dim_feedforward=8), num_layers=2)
    >>> bool((encoder.layers[0].linear1.weight.numpy() != encoder.layers[1].linear1.weight.numpy()).all())
    True
    >>> with ta.no_grad():
    ...     out = encoder.eval()(ta.randn(2, 3, 4), mask=F.padding_mask([3, 1], 3))
    >>> out.numpy()[1, 1:].tolist()  # the second sentence's two padded positions
    [[0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]]
    """

    def __init__(self, encoder_layer, num_layers, norm=None, enable_nested_tensor=True):
        super().__init__()
        self.layers = _fresh_copies(encoder_layer, num_layers)
        self.num_layers = num_layers
        self.norm = norm
        self.enable_nested_tensor = enable_nested_tensor

    def forward(self, src, mask=None, is_causal=False):
        x = src  # (B, S, E)
        for layer in self.layers:
            x = layer(x, src_mask=mask, is_causal=is_causal)
        real = padding_to_zero(self, src, mask, is_causal)  # (B, S): the real tokens, or None
        if real is not None:
            x = zeros_at_padding(x, real)  # PyTorch's nested-tensor result
        return x if self.norm is None else self.norm(x)  # (B, S, E)


def padding_to_zero(encoder, src, mask, is_causal):
    """The real tokens ``(B, L)`` (``True``) of ``src`` when ``encoder`` (a ``TransformerEncoder``)
    returns zeros at the padding, else ``None``: PyTorch's nested-tensor conditions (its encoder then
    computes the real tokens alone, and fills the padding with zeros before the final norm). They are
    ``enable_nested_tensor`` (the default), and as the first layer (PyTorch looks at no other) a
    post-norm ``TransformerEncoderLayer`` with ReLU or GELU, equal LayerNorm eps and an even number of
    heads, in eval mode; no graph recorded (``ta.no_grad()``, or nothing needs a gradient); ``is_causal``
    False; and as the mask a boolean padding mask ``(B, 1, 1, L)`` (``F.padding_mask``) whose real tokens
    come first in each row. (PyTorch asks for a gradient of ``src`` and of the first layer's parameters
    only; here no parameter of the stack may need one.)"""
    layers = encoder.layers
    if not encoder.enable_nested_tensor or not len(layers) or is_causal or src.ndim != 3:
        return None
    first = layers[0]
    if (not computes_forward_of(first, TransformerEncoderLayer) or first.norm_first or first.training
            or activation_name(first.activation) is None
            or first.norm1.eps != first.norm2.eps or first.self_attn.num_heads % 2):
        return None
    B, L, _ = src.shape
    mask = getattr(mask, "_data", mask)  # a tensor's array, or an array as it is
    if getattr(mask, "dtype", None) != np.bool_ or mask.shape != (B, 1, 1, L):
        return None
    if records_graph([src, *encoder.parameters()]):
        return None
    real = mask[:, 0, 0, :]  # (B, L)
    xp = backend.namespace(real)
    first_tokens = xp.arange(L)[None, :] < real.sum(axis=1)[:, None]  # each row's real tokens, moved to its start
    return real if bool((real == first_tokens).all()) else None


def computes_forward_of(module, cls):
    """Whether ``module`` computes what ``cls``'s ``forward`` computes: it is exactly a ``cls`` (or a class that
    names ``cls`` in its own ``computes_as``: ``tinyattn.compat``'s layers, whose ``forward`` only converts
    PyTorch's conventions, and the compiled layers of ``ta.compile``), with no ``forward`` set on the instance
    (a wrapper that records activations, say)."""
    kind = type(module)
    return kind.__dict__.get("computes_as", kind) is cls and "forward" not in module.__dict__


def activation_name(activation):
    """A layer's activation by name: ``"relu"`` (``F.relu``, a plain ``nn.ReLU``), ``"gelu"`` (``F.gelu``, the
    layers' ``"gelu"``, a plain ``nn.GELU()``, ``functools.partial(F.gelu)``), ``"gelu_tanh"``
    (``nn.GELU(approximate="tanh")``, ``functools.partial(F.gelu, approximate="tanh")``), or ``None`` for any
    other callable (a subclass with its own ``forward`` included). PyTorch's nested-tensor encoder asks the same
    (its ``activation_relu_or_gelu``)."""
    if activation is F.relu or computes_forward_of(activation, ReLU):
        return "relu"
    if activation is F.gelu:
        return "gelu"
    if computes_forward_of(activation, GELU):
        approximate = activation.approximate
    elif (isinstance(activation, functools.partial) and activation.func is F.gelu and not activation.args
          and set(activation.keywords) <= {"approximate"}):
        approximate = activation.keywords.get("approximate", "none")
    else:
        return None
    return {"none": "gelu", "tanh": "gelu_tanh"}.get(approximate)


def zeros_at_padding(x, real):
    """``x (B, S, E)`` with zeros where ``real (B, S)`` (an array, ``True`` = a real token) is ``False``:
    PyTorch's nested-tensor result, where the padding is never computed."""
    return x.masked_fill(Tensor._wrap(~real[..., None], x), 0.0)


class TransformerDecoder(Module):
    """``num_layers`` decoder layers in sequence, then the optional final ``norm``.

    ``forward(tgt, memory, tgt_mask=None, memory_mask=None, tgt_is_causal=False)``: every layer
    attends to the same ``memory``. The copies are initialised afresh, as in ``TransformerEncoder``.

    >>> import tinyattn as ta
    >>> decoder = TransformerDecoder(TransformerDecoderLayer(4, 2, dim_feedforward=8), num_layers=2)
    >>> decoder(ta.randn(1, 3, 4), ta.randn(1, 6, 4), tgt_is_causal=True).shape
    (1, 3, 4)
    """

    def __init__(self, decoder_layer, num_layers, norm=None):
        super().__init__()
        self.layers = _fresh_copies(decoder_layer, num_layers)
        self.num_layers = num_layers
        self.norm = norm

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_is_causal=False):
        x = tgt  # (B, T, E)
        for layer in self.layers:
            x = layer(x, memory, tgt_mask=tgt_mask, memory_mask=memory_mask, tgt_is_causal=tgt_is_causal)
        return x if self.norm is None else self.norm(x)  # (B, T, E)
