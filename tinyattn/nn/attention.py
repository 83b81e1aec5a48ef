"""Multi-head attention (Vaswani et al. 2017, section 3.2.2), batch-first.

    head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V)
    MultiHead(Q, K, V) = Concat(head_1, …, head_h) W^O

The ``h`` projections of width ``head_dim = embed_dim / num_heads`` are computed together by one
``nn.Linear`` each for queries, keys and values, then split into heads (a reshape and a
transpose); every head attends at once through ``F.scaled_dot_product_attention``, and the heads
are merged side by side again before ``out_proj``.

This file is the definition; ``ta.compile`` gives a faster form of the same numbers (``ta.explain`` says
which parts run it).

>>> import tinyattn as ta
>>> mha = MultiHeadAttention(embed_dim=8, num_heads=2)
>>> x = ta.randn(3, 5, 8)                              # (B, L, E)
>>> out, weights = mha(x, attn_mask=ta.nn.functional.padding_mask([5, 4, 2], 5))
>>> out.shape, weights.shape                            # (B, L, E), (B, H, Lq, Lk)
((3, 5, 8), (3, 2, 5, 5))
"""

import math

from .. import _checks as check
from .. import backend
from ..masks import per_batch_mask
from . import functional as F
from .layers import Linear
from .module import Module


def _split_heads(x, num_heads):
    """``(B, L, E) -> (B, H, L, D)``, ``E = H·D``: each head's slice of the features, heads first."""
    B, L, E = x.shape
    return x.reshape(B, L, num_heads, E // num_heads).transpose(1, 2)  # (B, H, L, D)


def _merge_heads(x):
    """``(B, H, L, D) -> (B, L, H·D)``: the heads side by side again."""
    B, H, L, D = x.shape
    return x.transpose(1, 2).reshape(B, L, H * D)  # (B, L, E)


class MultiHeadAttention(Module):
    """``MultiHeadAttention(embed_dim, num_heads, dropout=0.0, bias=True, kdim=None, vdim=None)``.

    Submodules ``q_proj`` (``Linear(embed_dim, embed_dim)``), ``k_proj`` (``Linear(kdim, embed_dim)``),
    ``v_proj`` (``Linear(vdim, embed_dim)``) and ``out_proj`` (``Linear(embed_dim, embed_dim)``);
    ``tinyattn.interop`` maps them to and from PyTorch's packed ``in_proj_weight``.

    ``forward(query, key=None, value=None, attn_mask=None, is_causal=False, need_weights=True)``
    → ``(output (B, Lq, E), weights (B, H, Lq, Lk) or None)``, the per-head weights (PyTorch's
    ``average_attn_weights=False``). ``key`` defaults to ``query`` and ``value`` to ``key``.

    ``attn_mask``: boolean (``True`` = may attend) or float (added to the scores), broadcasting
    to ``(B, H, Lq, Lk)``. A 2-D ``(Lq, Lk)`` mask and a 4-D one (``F.padding_mask``'s
    ``(B, 1, 1, Lk)``) broadcast as they are; a 3-D ``(B, Lq, Lk)`` mask is read per batch
    element and unsqueezed to ``(B, 1, Lq, Lk)`` (it is *not* PyTorch's ``(B·H, Lq, Lk)``).
    ``is_causal=True`` adds the causal mask (query ``i`` attends keys ``j <= i``) to ``attn_mask``.
    Dropout (probability ``dropout``) acts on the weights in training mode only.

    Initialisation, as PyTorch's ``nn.MultiheadAttention``: the input projections are
    xavier-uniform — drawn as one stacked ``(3E, E)`` matrix when ``kdim == vdim == embed_dim``
    (PyTorch's packed ``in_proj_weight``), each on its own otherwise — with zero biases;
    ``out_proj`` keeps ``nn.Linear``'s default weight and a zero bias.

    >>> import tinyattn as ta
    >>> mha = MultiHeadAttention(4, 2, kdim=3, vdim=6)
    >>> query, memory = ta.randn(2, 5, 4), ta.randn(2, 7, 3)
    >>> out, w = mha(query, memory, ta.randn(2, 7, 6), is_causal=True)
    >>> out.shape, w.shape, w.numpy()[0, 0, 0, 1:].max()        # query 0 sees key 0 only
    ((2, 5, 4), (2, 2, 5, 7), np.float32(0.0))
    """

    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, kdim=None, vdim=None, device=None, dtype=None):
        super().__init__()
        check.attention_sizes("MultiHeadAttention", embed_dim, num_heads, dropout)
        self.embed_dim, self.num_heads, self.dropout = embed_dim, num_heads, dropout
        self.head_dim = embed_dim // num_heads
        self.kdim = embed_dim if kdim is None else kdim
        self.vdim = embed_dim if vdim is None else vdim
        factory = dict(bias=bias, device=device, dtype=dtype)
        self.q_proj = Linear(embed_dim, embed_dim, **factory)
        self.k_proj = Linear(self.kdim, embed_dim, **factory)
        self.v_proj = Linear(self.vdim, embed_dim, **factory)
        self.out_proj = Linear(embed_dim, embed_dim, **factory)
        self.reset_parameters()

    def reset_parameters(self):
        """Xavier-uniform input projections, zero biases (see the class docstring)."""
        packed = self.kdim == self.vdim == self.embed_dim
        for projection in (self.q_proj, self.k_proj, self.v_proj):
            weight = projection.weight._data
            fan_out = 3 * self.embed_dim if packed else self.embed_dim
            bound = math.sqrt(6.0 / (projection.in_features + fan_out))
            uniform = backend.random_uniform(weight.shape, weight.dtype, backend.device_of(weight))
            weight[...] = (2 * uniform - 1) * bound  # U(-bound, bound)
        self.out_proj.reset_parameters()
        for projection in (self.q_proj, self.k_proj, self.v_proj, self.out_proj):
            if projection.bias is not None:
                projection.bias._data[...] = 0

    def forward(self, query, key=None, value=None, attn_mask=None, is_causal=False, need_weights=True):
        check.attention_inputs("MultiHeadAttention", ("query", query), ("key", key), ("value", value))
        key = query if key is None else key
        value = key if value is None else value
        self._check_inputs(query, key, value)
        H = self.num_heads
        attn_mask = per_batch_mask(attn_mask)
        dropout_p = self.dropout if self.training else 0.0

        q = _split_heads(self.q_proj(query), H)  # (B, Lq, E) -> (B, H, Lq, D)
        k = _split_heads(self.k_proj(key), H)  # (B, Lk, kdim) -> (B, Lk, E) -> (B, H, Lk, D)
        v = _split_heads(self.v_proj(value), H)  # (B, Lk, vdim) -> (B, Lk, E) -> (B, H, Lk, D)
        heads, weights = F.scaled_dot_product_attention(
            q, k, v, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal, need_weights=need_weights,
        )  # (B, H, Lq, D), (B, H, Lq, Lk) or None
        concat = _merge_heads(heads)  # (B, H, Lq, D) -> (B, Lq, E)
        return self.out_proj(concat), weights  # (B, Lq, E)

    def _check_inputs(self, query, key, value):
        expected = [("query", query, self.embed_dim), ("key", key, self.kdim), ("value", value, self.vdim)]
        for name, t, size in expected:
            if t.ndim != 3 or t.shape[-1] != size:
                raise ValueError(
                    f"MultiHeadAttention: {name} must be batch-first (B, L, {size}), got shape {t.shape}"
                )
        if key.shape[:2] != value.shape[:2] or key.shape[0] != query.shape[0]:
            raise ValueError(
                f"MultiHeadAttention: query {query.shape}, key {key.shape} and value {value.shape} must share "
                "the batch size B, and key and value the length Lk"
            )

    def extra_repr(self):
        text = f"embed_dim={self.embed_dim}, num_heads={self.num_heads}, dropout={self.dropout}"
        if self.kdim != self.embed_dim or self.vdim != self.embed_dim:
            text += f", kdim={self.kdim}, vdim={self.vdim}"
        return text
