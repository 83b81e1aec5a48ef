"""Multi-head attention (Vaswani et al. 2017, section 3.2.2), batch-first.

    head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V)
    MultiHead(Q, K, V) = Concat(head_1, …, head_h) W^O

The ``h`` projections of width ``head_dim = embed_dim / num_heads`` are computed together by one
``nn.Linear`` each for queries, keys and values; ``multi_head_attention`` then splits them into heads (a
reshape and a transpose), lets every head attend at once through ``F.scaled_dot_product_attention``, and
merges the heads side by side again before ``out_proj``. The module's ``forward`` checks its inputs and
projects them; GPT-2's cached generation (``kv_cache``) and ``tinyattn.compat``'s ``MultiheadAttention``
(its own packed projection) use the same composition.

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

from .. import backend
from .. import checks as check
from ..masks import layer_mask
from ..ops import cat
from . import functional as F
from .layers import Linear
from .module import Module


def split_heads(x, num_heads):
    """``(B, L, E) -> (B, H, L, D)``, ``E = H·D``: each head's slice of the features, heads first."""
    B, L, E = x.shape
    return x.reshape(B, L, num_heads, E // num_heads).transpose(1, 2)  # (B, H, L, D)


def merge_heads(x):
    """``(B, H, L, D) -> (B, L, H·D)``: the heads side by side again."""
    B, H, L, D = x.shape
    return x.transpose(1, 2).reshape(B, L, H * D)  # (B, L, E)


def multi_head_attention(q, k, v, num_heads, out_proj, attn_mask=None, dropout_p=0.0, is_causal=False,
                         need_weights=True, kv_cache=None, attention=None):
    """Multi-head attention from projected queries ``q (B, Lq, E)``, keys ``k (B, Lk, E)`` and values
    ``v (B, Lk, E)``: each split into ``num_heads`` heads, every head attending at once, the heads merged
    and ``out_proj`` applied → ``(output (B, Lq, E), weights (B, H, Lq, Lk) or None)``.

    ``attn_mask``, ``dropout_p``, ``is_causal`` and ``need_weights`` go to ``attention``: a function with
    ``F.scaled_dot_product_attention``'s arguments, that one when ``None`` (``ta.compile`` passes its fused form).
    ``kv_cache``: ``None``, or a dict that carries the keys and values from one call to the next (generation one
    token at a time), empty at first: each call appends its heads' keys and values to ``kv_cache["key"]`` and
    ``kv_cache["value"]`` ``(B, H, T, D)`` and attends over all of them.

    >>> import tinyattn as ta
    >>> mha, cache = MultiHeadAttention(4, 2), {}
    >>> for step in range(3):                       # one new position a step: it sees the ones before
    ...     out, _ = multi_head_attention(*[p(ta.randn(1, 1, 4)) for p in (mha.q_proj, mha.k_proj, mha.v_proj)],
    ...                                   2, mha.out_proj, kv_cache=cache)
    >>> out.shape, cache["key"].shape               # (B, 1, E), (B, H, T, D)
    ((1, 1, 4), (1, 2, 3, 2))
    """
    q = split_heads(q, num_heads)  # (B, Lq, E) -> (B, H, Lq, D)
    k = split_heads(k, num_heads)  # (B, Lk, E) -> (B, H, Lk, D)
    v = split_heads(v, num_heads)  # (B, Lk, E) -> (B, H, Lk, D)
    if kv_cache is not None:  # the past positions' keys and values first
        if kv_cache:
            k = cat([kv_cache["key"], k], dim=2)  # (B, H, T + Lk, D)
            v = cat([kv_cache["value"], v], dim=2)  # (B, H, T + Lk, D)
        kv_cache["key"], kv_cache["value"] = k, v
    attention = F.scaled_dot_product_attention if attention is None else attention
    heads, weights = attention(q, k, v, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal,
                               need_weights=need_weights)  # (B, H, Lq, D), (B, H, Lq, Lk) or None
    concat = merge_heads(heads)  # (B, H, Lq, D) -> (B, Lq, E)
    return out_proj(concat), weights  # (B, Lq, E)


class MultiHeadAttention(Module):
    """``MultiHeadAttention(embed_dim, num_heads, dropout=0.0, bias=True, kdim=None, vdim=None)``.

    Submodules ``q_proj`` (``Linear(embed_dim, embed_dim)``), ``k_proj`` (``Linear(kdim, embed_dim)``),
    ``v_proj`` (``Linear(vdim, embed_dim)``) and ``out_proj`` (``Linear(embed_dim, embed_dim)``);
    ``tinyattn.interop`` maps them to and from PyTorch's packed ``in_proj_weight``.

    ``forward(query, key=None, value=None, attn_mask=None, is_causal=False, need_weights=True, kv_cache=None)``
    → ``(output (B, Lq, E), weights (B, H, Lq, Lk) or None)``, the per-head weights (PyTorch's
    ``average_attn_weights=False``). ``key`` defaults to ``query`` and ``value`` to ``key``. ``kv_cache``
    keeps the keys and values across calls (``multi_head_attention``).

    ``attn_mask``: boolean (``True`` = may attend) or float (added to the scores), broadcasting
    to ``(B, H, Lq, Lk)``. A 2-D ``(Lq, Lk)`` mask and a 4-D one (``F.padding_mask``'s
    ``(B, 1, 1, Lk)``) broadcast as they are; a 3-D ``(B, Lq, Lk)`` mask is read per batch
    element and unsqueezed to ``(B, 1, Lq, Lk)`` (it is *not* PyTorch's ``(B·H, Lq, Lk)``).
    ``is_causal=True`` adds the causal mask (query ``i`` attends keys ``j <= i``) to ``attn_mask``.
    A 2-D boolean mask that leaves some query no key in every sequence raises a ``ValueError``: it can only be
    PyTorch's convention (``True`` = masked) read the other way (its causal mask, its ``(B, S)`` padding mask), so
    such masks cannot invert silently; a query silenced on purpose is a float mask's ``-inf``.
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

    def forward(self, query, key=None, value=None, attn_mask=None, is_causal=False, need_weights=True,
                kv_cache=None):
        query, key, value = self.inputs(query, key, value)
        dropout_p = self.dropout if self.training else 0.0
        q, k, v = self.q_proj(query), self.k_proj(key), self.v_proj(value)  # (B, Lq, E), (B, Lk, E), (B, Lk, E)
        attn_mask = layer_mask(attn_mask, "MultiHeadAttention")  # a boolean mask leaving a query no key: refused
        return multi_head_attention(q, k, v, self.num_heads, self.out_proj, attn_mask, dropout_p,
                                    is_causal, need_weights, kv_cache)  # (B, Lq, E), weights or None

    def inputs(self, query, key, value):
        """``(query, key, value)`` checked, ``key`` defaulting to ``query`` and ``value`` to ``key``; an error that
        names the expected shapes otherwise."""
        check.attention_inputs("MultiHeadAttention", ("query", query), ("key", key), ("value", value))
        key = query if key is None else key
        value = key if value is None else value
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
        return query, key, value

    def extra_repr(self):
        text = f"embed_dim={self.embed_dim}, num_heads={self.num_heads}, dropout={self.dropout}"
        if self.kdim != self.embed_dim or self.vdim != self.embed_dim:
            text += f", kdim={self.kdim}, vdim={self.vdim}"
        return text
