"""The Transformer's layers (Vaswani et al. 2017): positional encoding, encoder and decoder, batch-first.

Each layer is a residual sum around multi-head attention and a feed-forward block, with LayerNorm
after the sum (``norm_first=False``, the paper and PyTorch's default) or before the block
(``norm_first=True``, "pre-norm"). Dropout sits where PyTorch puts it: on the attention weights,
after each block (``dropout1``, ``dropout2``, ``dropout3``) and after the feed-forward activation
(``dropout``). ``eval()`` turns every dropout off; nothing else differs between train and eval.

Where nothing random acts (eval mode, or dropout 0) and the activation is ReLU, the feed-forward
block and its residual sum run as one graph node (``FeedForwardResidual``), with the same results.

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
import math

import numpy as np

from .. import backend
from ..tensor import Function, Tensor
from . import functional as F
from .attention import MultiHeadAttention
from .layers import Dropout, LayerNorm, Linear, ModuleList
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


class FeedForwardResidual(Function):
    """The feed-forward block and its residual sum as one node (ReLU, no active dropout):

        y = r + relu(x W1ᵀ + b1) W2ᵀ + b2       x, r: (…, E) seen as rows (M, E); W1 (F, E), W2 (E, F)

    Backward, with ``G = ∂L/∂y`` as ``(M, E)`` and ``A = relu(x W1ᵀ + b1)`` kept from forward:

        ∂r = G    ∂W2 = Gᵀ A    ∂b2 = Σ_rows G    ∂Z = (G W2) ∘ [A > 0]
        ∂W1 = ∂Zᵀ x    ∂b1 = Σ_rows ∂Z    ∂x = ∂Z W1

    It replaces four nodes (``linear1``, ``relu``, ``linear2``, ``+``) and one ``(M, F)`` array
    (ReLU acts in place). The test suite checks it against that composed form.
    """

    fresh_gradients = True  # keeps no reference to what backward returns (see Function)

    def forward(self, x, residual, w1, b1, w2, b2):
        M, E = math.prod(x.shape[:-1]), x.shape[-1]
        self.x, self.w1, self.w2, self.shape = x.reshape(M, E), w1, w2, x.shape  # x as rows (M, E)
        hidden = self.x @ w1.T  # (M, F), a fresh array
        hidden += b1
        self.hidden = backend.namespace(x).maximum(hidden, 0, out=hidden)  # A, in place
        out = self.hidden @ w2.T  # (M, E)
        out += b2
        out += residual.reshape(M, E)
        return out.reshape(x.shape)

    def backward(self, grad):
        needs = [p.requires_grad for p in self.parents]
        rows = grad.reshape(self.x.shape[0], grad.shape[-1])  # G (M, E)
        grad_w2 = rows.T @ self.hidden if needs[4] else None  # (E, F)
        grad_b2 = rows.sum(axis=0) if needs[5] else None  # (E,)
        grad_x = grad_w1 = grad_b1 = None
        if needs[0] or needs[2] or needs[3]:
            grad_hidden = rows @ self.w2  # (M, F), a fresh array
            grad_hidden *= self.hidden > 0  # ∂Z
            grad_x = (grad_hidden @ self.w1).reshape(self.shape) if needs[0] else None  # (…, E)
            grad_w1 = grad_hidden.T @ self.x if needs[2] else None  # (F, E)
            grad_b1 = grad_hidden.sum(axis=0) if needs[3] else None  # (F,)
        return grad_x, grad if needs[1] else None, grad_w1, grad_b1, grad_w2, grad_b2


def _activation(activation):
    if activation == "relu":
        return F.relu
    if activation == "gelu":
        return F.gelu
    if callable(activation):
        return activation
    raise ValueError(f"activation must be 'relu', 'gelu' or a callable, got {activation!r}")


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
        _check_batch_first("TransformerEncoderLayer: src", src, self.self_attn.embed_dim)
        x = src  # (B, S, E)
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), src_mask, is_causal)
            x = _feed_forward_residual(self, self.norm2(x), x, self.dropout2)
        else:
            x = self.norm1(x + self._sa_block(x, src_mask, is_causal))
            x = self.norm2(_feed_forward_residual(self, x, x, self.dropout2))
        return x  # (B, S, E)

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
        d_model = self.self_attn.embed_dim
        _check_batch_first("TransformerDecoderLayer: tgt", tgt, d_model)
        _check_batch_first("TransformerDecoderLayer: memory", memory, d_model)
        x = tgt  # (B, T, E)
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), tgt_mask, tgt_is_causal)
            x = x + self._ca_block(self.norm2(x), memory, memory_mask)
            x = _feed_forward_residual(self, self.norm3(x), x, self.dropout3)
        else:
            x = self.norm1(x + self._sa_block(x, tgt_mask, tgt_is_causal))
            x = self.norm2(x + self._ca_block(x, memory, memory_mask))
            x = self.norm3(_feed_forward_residual(self, x, x, self.dropout3))
        return x  # (B, T, E)

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


def _feed_forward_residual(layer, x, residual, output_dropout):
    """``residual + layer._ff_block(x)``: one ``FeedForwardResidual`` node when the activation is
    ReLU, no dropout acts (eval mode or ``p = 0``; ``output_dropout`` is the block's last one), the
    block's parts are the layer's own (plain ``Linear`` and ``Dropout``, ``_ff_block`` not
    overridden) and one dtype runs throughout; composed otherwise."""
    linear1, linear2, dropout = layer.linear1, layer.linear2, layer.dropout
    if type(linear1) is not Linear or type(linear2) is not Linear or type(dropout) is not Dropout \
            or type(output_dropout) is not Dropout or type(layer)._ff_block not in _OWN_FF_BLOCKS:
        return residual + layer._ff_block(x)  # replaced parts run their own forward
    inputs = (x, residual, linear1.weight, linear1.bias, linear2.weight, linear2.bias)
    if (layer.activation is F.relu and not (dropout.training and dropout.p)
            and not (output_dropout.training and output_dropout.p)
            and x.shape[-1] == linear1.in_features and linear1.bias is not None and linear2.bias is not None
            and all(t.dtype == x.dtype for t in inputs)):
        return FeedForwardResidual.apply(*inputs)  # (…, E)
    return residual + layer._ff_block(x)


_OWN_FF_BLOCKS = (TransformerEncoderLayer._ff_block, TransformerDecoderLayer._ff_block)


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

    >>> import tinyattn as ta
    >>> encoder = TransformerEncoder(TransformerEncoderLayer(4, 1, dim_feedforward=8), num_layers=2)
    >>> bool((encoder.layers[0].linear1.weight.numpy() != encoder.layers[1].linear1.weight.numpy()).all())
    True
    """

    def __init__(self, encoder_layer, num_layers, norm=None):
        super().__init__()
        self.layers = _fresh_copies(encoder_layer, num_layers)
        self.num_layers = num_layers
        self.norm = norm

    def forward(self, src, mask=None, is_causal=False):
        x = src  # (B, S, E)
        for layer in self.layers:
            x = layer(x, src_mask=mask, is_causal=is_causal)
        return x if self.norm is None else self.norm(x)  # (B, S, E)


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
