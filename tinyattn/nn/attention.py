"""Multi-head attention (Vaswani et al. 2017, section 3.2.2), batch-first.

    head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V)
    MultiHead(Q, K, V) = Concat(head_1, …, head_h) W^O

The ``h`` projections of width ``head_dim = embed_dim / num_heads`` are computed together by one
``nn.Linear`` each for queries, keys and values, then split into heads (``SplitHeads``: a reshape
and a transpose as one graph node); every head attends at once through
``F.scaled_dot_product_attention``, and ``MergeHeads`` puts the heads side by side again.

Self-attention without the weights (what the Transformer layers ask for) takes a shorter road
to the same numbers: ``InProjection`` computes queries, keys and values with one GEMM against
the three weights stacked, and ``PackedSelfAttention`` attends and merges the heads in one node:
three graph nodes in all instead of thirteen.

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
from ..tensor import Function
from . import functional as F
from .layers import Linear
from .module import Module, _runs_own_forward
from .sdpa import _BLOCKED_MIN_KEYS, packed_self_attention


def _split_heads(x, num_heads):
    B, L, E = x.shape
    return x.reshape(B, L, num_heads, E // num_heads).transpose(0, 2, 1, 3)  # (B, L, E) -> (B, H, L, D), a view


def _merge_heads(x):
    B, H, L, D = x.shape
    return x.transpose(0, 2, 1, 3).reshape(B, L, H * D)  # (B, H, L, D) -> (B, L, E), a copy


class SplitHeads(Function):
    """``(B, L, E) -> (B, H, L, D)``, ``E = H·D``: ``x.reshape(B, L, H, D).transpose(1, 2)`` as one
    node; the gradient goes back through the inverse, ``MergeHeads``."""

    def forward(self, x, num_heads):
        return _split_heads(x, num_heads)

    def backward(self, grad):
        return (_merge_heads(grad),)


class MergeHeads(Function):
    """``(B, H, L, D) -> (B, L, H·D)``: ``x.transpose(1, 2).reshape(B, L, H·D)`` as one node."""

    def forward(self, x):
        self.num_heads = x.shape[1]
        return _merge_heads(x)

    def backward(self, grad):
        return (_split_heads(grad, self.num_heads),)


class InProjection(Function):
    """Self-attention's three input projections as one GEMM: ``x (B, L, E) -> qkv (3, B, H, L, D)``
    (``_in_projection``; ``forward(x, w_q, w_k, w_v, b_q=None, b_k=None, b_v=None, *, num_heads)``).
    The test suite checks it against three ``Linear`` nodes and ``SplitHeads``."""

    fresh_gradients = True  # keeps no reference to what backward returns (see Function)

    def forward(self, x, w_q, w_k, w_v, b_q=None, b_k=None, b_v=None, *, num_heads):
        biases = None if b_q is None else (b_q, b_k, b_v)
        self.x, self.shape = x.reshape(x.shape[0] * x.shape[1], x.shape[2]), x.shape  # (B·L, E)
        qkv, self.weight = _in_projection(self.x, (w_q, w_k, w_v), biases, x.shape[:2], num_heads)
        return qkv  # (3, B, H, L, D)

    def backward(self, grad):
        grads = _in_projection_backward(grad, self.x, self.weight, [p.requires_grad for p in self.parents])
        if grads[0] is not None:
            grads[0] = grads[0].reshape(self.shape)  # ∂x (B, L, E)
        return tuple(grads)


def _in_projection(rows, weights, biases, batch_shape, num_heads):
    """``(qkv, W)``: ``rows (B·L, E)`` (``batch_shape = (B, L)``) projected by ``W = [W_q; W_k; W_v]``
    (``(3·H·D, E)``, stacked) and ``b = [b_q; b_k; b_v]`` (``biases`` may be ``None``) in one
    ``(B·L, 3·H·D)`` product, ``Y = X Wᵀ + b``; ``qkv (3, B, H, L, D)`` is a view of ``Y``, split into heads."""
    xp = backend.namespace(rows)
    weight = xp.concatenate(weights)  # (3·H·D, E)
    out = rows @ weight.T  # (B·L, 3·H·D), a fresh array
    if biases is not None:
        out += xp.concatenate(biases)
    H, D = num_heads, weights[0].shape[0] // num_heads
    return out.reshape(*batch_shape, 3, H, D).transpose(2, 0, 3, 1, 4), weight  # (3, B, H, L, D)


def _in_projection_backward(grad, rows, weight, needs):
    """``[∂X, ∂W_q, ∂W_k, ∂W_v(, ∂b_q, ∂b_k, ∂b_v)]`` of ``_in_projection`` for ``grad = ∂L/∂qkv
    (3, B, H, L, D)``, seen as ``G (B·L, 3·H·D)`` (a view when laid out as ``Y``), ``G = [G_q G_k G_v]``:

        ∂X = G W  (B·L, E)    ∂W_q = G_qᵀ X    ∂b_q = Σ_rows G_q    (and so for k, v)

    ``needs``: one boolean per input (x, three weights, and three biases or none); ``None`` where
    False. Each weight's and bias's gradient is its own product: a fresh array a leaf can keep."""
    _, B, H, L, D = grad.shape
    E = H * D
    grad = grad.transpose(1, 3, 0, 2, 4).reshape(B * L, 3 * E)  # G (B·L, 3·H·D)
    parts = (grad[:, :E], grad[:, E:2 * E], grad[:, 2 * E:])  # G_q, G_k, G_v (B·L, H·D), views
    grads = [grad @ weight if needs[0] else None]  # ∂X (B·L, E)
    for part, need in zip(parts, needs[1:4]):
        grads.append(part.T @ rows if need else None)  # ∂W (H·D, E)
    for part, need in zip(parts, needs[4:]):
        grads.append(F.column_sums(part) if need else None)  # ∂b (H·D,)
    return grads


def _all_of_dtype(dtype, tensors):
    """True when every one of ``tensors`` is a tensor (not ``None``) of ``dtype``. A plain loop: the
    fused paths ask this on every call."""
    for t in tensors:
        if t is None or t.dtype != dtype:
            return False
    return True


def _per_batch_mask(attn_mask):
    """A 3-D ``(B, Lq, Lk)`` mask as ``(B, 1, Lq, Lk)``, the same for every head; others as they are."""
    if attn_mask is not None and attn_mask.ndim == 3:
        return attn_mask[:, None]
    return attn_mask


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
        check.sizes("MultiHeadAttention", embed_dim=embed_dim, num_heads=num_heads)
        if embed_dim <= 0 or num_heads <= 0 or embed_dim % num_heads:
            raise ValueError(
                f"MultiHeadAttention: embed_dim ({embed_dim}) must be a positive multiple of num_heads ({num_heads})"
            )
        if not 0.0 <= dropout <= 1.0:
            raise ValueError(f"MultiHeadAttention: dropout must be in [0, 1], got {dropout}")
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
            weight = projection.weight.data
            fan_out = 3 * self.embed_dim if packed else self.embed_dim
            bound = math.sqrt(6.0 / (projection.in_features + fan_out))
            uniform = backend.random_uniform(weight.shape, weight.dtype, backend.device_of(weight))
            weight[...] = (2 * uniform - 1) * bound  # U(-bound, bound)
        self.out_proj.reset_parameters()
        for projection in (self.q_proj, self.k_proj, self.v_proj, self.out_proj):
            if projection.bias is not None:
                projection.bias.data[...] = 0

    def forward(self, query, key=None, value=None, attn_mask=None, is_causal=False, need_weights=True):
        check.attention_inputs("MultiHeadAttention", ("query", query), ("key", key), ("value", value))
        key = query if key is None else key
        value = key if value is None else value
        self._check_inputs(query, key, value)
        H = self.num_heads
        attn_mask = _per_batch_mask(attn_mask)
        dropout_p = self.dropout if self.training else 0.0
        params = self._packed_projection(query, key, value, need_weights)
        if params is not None:  # the same result, three nodes
            qkv = InProjection.apply(query, *params, num_heads=H)  # (B, L, E) -> (3, B, H, L, D)
            concat = packed_self_attention(qkv, attn_mask, dropout_p, is_causal)  # (B, L, E)
            return self.out_proj(concat), None

        q = SplitHeads.apply(self.q_proj(query), num_heads=H)  # (B, Lq, E) -> (B, H, Lq, D)
        k = SplitHeads.apply(self.k_proj(key), num_heads=H)  # (B, Lk, kdim) -> (B, Lk, E) -> (B, H, Lk, D)
        v = SplitHeads.apply(self.v_proj(value), num_heads=H)  # (B, Lk, vdim) -> (B, Lk, E) -> (B, H, Lk, D)
        heads, weights = F.scaled_dot_product_attention(
            q, k, v, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal, need_weights=need_weights,
        )  # (B, H, Lq, D), (B, H, Lq, Lk) or None
        concat = MergeHeads.apply(heads)  # (B, H, Lq, D) -> (B, Lq, E)
        return self.out_proj(concat), weights  # (B, Lq, E)

    def _packed_projection(self, query, key, value, need_weights):
        """The q, k and v projections' parameters ``(W_q, W_k, W_v[, b_q, b_k, b_v])`` when one
        ``InProjection`` computes what they do, else ``None``: self-attention (one tensor as query,
        key and value) without the weights, shorter than the blocked path's threshold, plain
        ``nn.Linear`` projections, with biases on all three or none, and one floating dtype."""
        if need_weights or not (query is key is value) or not self._packable(query):
            return None
        q, k, v = self.q_proj, self.k_proj, self.v_proj
        params = (q.weight, k.weight, v.weight) + ((q.bias, k.bias, v.bias) if q.bias is not None else ())
        return params if query.dtype.kind == "f" and _all_of_dtype(query.dtype, params) else None

    def _packable(self, x):
        """``x`` is short enough for the whole-matrix path, keys and values have ``embed_dim`` features,
        and the projections are plain ``nn.Linear`` (a replaced one runs its own forward)."""
        return (x.shape[1] < _BLOCKED_MIN_KEYS and self.kdim == self.vdim == self.embed_dim
                and _runs_own_forward(self.q_proj, Linear) and _runs_own_forward(self.k_proj, Linear)
                and _runs_own_forward(self.v_proj, Linear))

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
