"""A Transformer layer's residual blocks, each as one graph node.

Composed, a pre-norm encoder layer is ten graph nodes: LayerNorm, the q/k/v projection,
attention, the output projection, the residual sum, LayerNorm, two linear layers around a ReLU
(or the half-dozen nodes of a GELU), and the second sum. On a small model the Python that builds,
walks and runs a node costs about as much as the arithmetic inside it. So where no dropout acts,
the layers run each residual block as one node:

    SelfAttentionBlock   pre-norm:   y = x + out_proj(attention(in_proj(norm(x))))
                         post-norm:  y = norm(x + out_proj(attention(in_proj(x))))
    FeedForwardBlock     pre-norm:   y = x + linear2(act(linear1(norm(x))))
                         post-norm:  y = norm(x + linear2(act(linear1(x))))      act: ReLU or GELU

Each block is written out straight, forward and backward side by side, on the same array-level
steps as the fused nodes it replaces (``kernels.layer_norm_rows``, ``kernels.in_projection``,
``attention.packed_attention`` and their backwards; GELU's in ``activations``), operation for
operation. The activations are handled as rows ``(M, E)``, ``M = B·L`` (or ``T``, the real tokens
alone). ``router.why_not_self_attention_block`` and ``router.why_not_feed_forward_block`` decide when a
block runs; the equivalence table proves each equal to the layer's reference ``forward`` (the layer not
compiled).
A block skips the products for a weight or bias that needs no gradient (a frozen parameter); the
input's and the norm's gradients, cheap beside them, it always computes. A block large enough for the thread pool
runs, while a graph is recorded and where its caller passes the layer route's decision (``router.LayerRoute``), with
OpenBLAS on one thread and its products spread over the pool (``parallel.over_pool``, ``parallel.matmul``):
OpenBLAS's own threads, spinning after each product, would share a core with the pooled passes that follow.
"""

import functools
import math

import numpy as np

from .. import backend
from ..engine import Function, Tensor, records_graph
from ..masks import checked_mask, per_batch_mask
from ..nn import functional as F
from ..nn.attention import multi_head_attention
from ..nn.transformer import residual
from . import buffers, parallel, router
from .attention import attention_by_sequences, packed_attention, packed_attention_backward
from .kernels import (
    bias_gelu,
    bias_relu,
    column_sums,
    gelu_backward_rows,
    in_projection,
    in_projection_backward,
    layer_norm_rows,
    layer_norm_rows_backward,
    relu_backward,
    times_weight_t,
)


class _ResidualBlock(Function):
    """What both blocks share: a block is ``s = x + a Wᵀ + b`` with ``a = g(h)`` (its last linear layer
    and the residual sum), and LayerNorm sits around it:

        pre-norm:   h = norm(x),  y = s          post-norm:  h = x,  y = norm(s)

    A block's ``forward`` calls ``_norm_input`` (``h``), computes ``a``, and ends in ``_output``
    (``y``); its ``backward`` starts with ``_grad_of_output`` (``∂s``, ``∂a``, ``∂W``, ``∂b``) and ends
    in ``_grad_of_input`` (``∂x`` and the norm's gradients)."""


    def _norm_input(self, rows, norm_weight, norm_bias, eps, norm_first):
        self.norm_first = norm_first
        if not norm_first:
            return rows
        h, self.norm = layer_norm_rows(rows, norm_weight, norm_bias, eps, router.row_schedule(rows, *rows.shape))
        return h

    def _output(self, a, weight, bias, rows, norm_weight, norm_bias, eps):
        """``y`` (M, E) from ``a`` (M, K): ``s = x + a Wᵀ + b``, then the norm post-norm."""
        s = times_weight_t(a, weight)  # (M, E), fresh
        s += bias
        s += rows  # the residual sum
        if self.norm_first:
            return s
        y, self.norm = layer_norm_rows(s, norm_weight, norm_bias, eps, router.row_schedule(s, *s.shape))  # (M, E)
        return y

    def _grad_of_output(self, grad, a, weight, weight_needed, bias_needed):
        """``(∂s, ∂a, ∂W, ∂b, norm's gradients)`` for ``grad = ∂L/∂y``: ``∂s = G`` pre-norm (the norm's
        gradients come later), ``∂norm(G)`` post-norm; ``∂W = ∂sᵀ a`` and ``∂b = Σ_rows ∂s`` only when
        the parameter needs them (``weight_needed``, ``bias_needed``); ``∂a = ∂s W``, a fresh array."""
        grad_s, grad_norm = grad.reshape(a.shape[0], grad.shape[-1]), ()  # (M, E)
        if not self.norm_first:
            grad_s, *grad_norm = layer_norm_rows_backward(grad_s, self.norm)
        grad_weight = parallel.matmul(grad_s.T, a) if weight_needed else None  # (E, K)
        grad_bias = column_sums(grad_s) if bias_needed else None  # (E,)
        return grad_s, parallel.matmul(grad_s, weight), grad_weight, grad_bias, grad_norm

    def _grad_of_input(self, grad_h, grad_s, grad_norm, shape):
        """``(∂x, ∂norm_weight, ∂norm_bias)``: ``∂x = ∂s + ∂norm(∂h)`` pre-norm, ``∂s + ∂h`` post-norm,
        an array of ``x``'s shape that nothing else holds (a leaf may keep it as it is; ``fast.buffers``' memory from
        its size on), written through its ``(M, E)`` view."""
        if self.norm_first:
            grad_h, *grad_norm = layer_norm_rows_backward(grad_h, self.norm)
        xp = backend.namespace(grad_s)
        grad_x = buffers.empty(xp, shape, grad_h.dtype)  # (fast.buffers' memory from its size on)
        xp.add(grad_h, grad_s, out=grad_x.reshape(grad_s.shape))  # the residual path joins
        return (grad_x, *grad_norm)


class SelfAttentionBlock(_ResidualBlock):
    """Multi-head self-attention with its LayerNorm and residual sum, as one node.

    ``forward(x, norm_weight, norm_bias, w_q, w_k, w_v, b_q, b_k, b_v, w_o, b_o, *, num_heads,
    norm_first, eps, attn_mask, allowed, is_causal, tokens=None, for_backward=True, cu_seqlens=None)``:
    ``x (B, L, E)``; ``attn_mask`` a float mask array added to the scores (one that needs no gradient) or
    ``None``; ``allowed`` a boolean one (``True`` = may attend) or ``None``; no dropout.

    ``tokens``: ``None``, or ``(index, B, L)`` for ``x (T, E)`` that holds only the rows ``index (T,)`` of
    a padded ``(B·L, E)`` batch, its real tokens (``TransformerEncoder`` skipping the padding). Every step
    but attention is a step per row and runs on the ``T`` rows; attention scatters ``q``, ``k``, ``v`` into
    the padded ``(3, B, H, L, D)`` (zero rows where the padding is) and keeps the output's ``T`` rows. The
    mask must forbid the padded keys (a padding mask does): their zero rows would otherwise take weight.

    ``cu_seqlens`` (inference only, ``for_backward=False``; no mask, not causal): the cumulative lengths ``(B + 1,)``
    of ``B`` sentences laid back to back in ``x (T, E)``, each attending its own tokens alone
    (``attention.attention_by_sequences``): nothing is scattered into a padded batch; ``tokens`` is not read. Backward
    refuses.

        h = norm(x) (pre-norm) or x          qkv = in_proj(h)  (3, B, H, L, D)
        a = attention(qkv)  (M, E), heads merged        s = x + a W_oᵀ + b_o
        y = s (pre-norm) or norm(s)

    Backward, with ``G = ∂L/∂y`` (``∂s = G``, or ``∂norm(G)`` post-norm):

        ∂W_o = ∂sᵀ a    ∂b_o = Σ_rows ∂s    ∂a = ∂s W_o    ∂qkv = ∂attention(∂a)
        ∂h, ∂W, ∂b = ∂in_proj(∂qkv)        ∂x = ∂s + (∂norm(∂h) pre-norm, ∂h post-norm)
    """

    # backward reads x (as h, post-norm), the norm's weight and W_o; never its output (see Function)
    saved_inputs, saves_output = (0, 1, 9), False

    def forward(self, x, norm_weight, norm_bias, w_q, w_k, w_v, b_q, b_k, b_v, w_o, b_o, *, num_heads,
                norm_first, eps, attn_mask, allowed, is_causal, tokens=None, for_backward=True, cu_seqlens=None,
                products_on_pool=False):
        self.on_pool = products_on_pool  # (True: the caller runs apply through parallel.over_pool; backward follows)
        shape = x.shape
        E = shape[-1]
        rows = x.reshape(-1, E)  # (M, E): M = B·L, or T
        self.options = num_heads, eps, attn_mask, allowed, is_causal  # (for ``reference``)
        self.tokens, self.by_sequences = tokens, cu_seqlens is not None
        if self.by_sequences:
            return self._forward_by_sequences(x, rows, cu_seqlens, num_heads, for_backward, attn_mask, allowed,
                                              is_causal, (w_q, w_k, w_v), (b_q, b_k, b_v), w_o, b_o, norm_weight,
                                              norm_bias, eps, norm_first)
        if tokens is None:
            (B, L, _), index = shape, None
        else:
            index, B, L = tokens  # index (T,): the rows of x among the padded batch's B·L
        h = self._norm_input(rows, norm_weight, norm_bias, eps, norm_first)  # (M, E)
        qkv, self.w_qkv = in_projection(h, (w_q, w_k, w_v), (b_q, b_k, b_v), (B, L), num_heads,
                                        index)  # (3, B, H, L, D)
        self.scale = 1.0 / math.sqrt(E // num_heads)  # D: the head size
        self.schedule = router.packed_attention_schedule(qkv)
        merged, self.attention = packed_attention(qkv, attn_mask, allowed, is_causal, self.scale, 0.0, self.schedule)
        merged = merged.reshape(B * L, E) if index is None else merged.reshape(B * L, E)[index]
        self.h, self.merged, self.w_o = h, merged, w_o  # merged heads a (M, E)
        return self._output(self.merged, w_o, b_o, rows, norm_weight, norm_bias, eps).reshape(shape)

    def _forward_by_sequences(self, x, rows, cu_seqlens, num_heads, for_backward, attn_mask, allowed, is_causal,
                              weights, biases, w_o, b_o, norm_weight, norm_bias, eps, norm_first):
        """``forward`` with ``cu_seqlens``: the rows of ``x (T, E)`` are sequences back to back, each attending itself
        alone (``attention.attention_by_sequences``), and the sequences are the only mask. Inference only."""
        if for_backward:
            raise ValueError("SelfAttentionBlock: cu_seqlens= runs inference only (no attention weights are kept); "
                             "got for_backward=True")
        if attn_mask is not None or allowed is not None or is_causal:
            raise ValueError("SelfAttentionBlock: with cu_seqlens= each sequence attends all of itself, and nothing "
                             f"else masks it; got attn_mask={_kind(attn_mask)}, allowed={_kind(allowed)}, "
                             f"is_causal={is_causal}")
        if x.ndim != 2:
            raise ValueError(f"SelfAttentionBlock: with cu_seqlens= x holds the sequences' rows back to back, "
                             f"(T, E); got shape {tuple(x.shape)}")
        T, E = rows.shape
        h = self._norm_input(rows, norm_weight, norm_bias, eps, norm_first)  # (T, E)
        qkv, _ = in_projection(h, weights, biases, (1, T), num_heads)  # (3, 1, H, T, D)
        H, D = num_heads, E // num_heads
        merged = backend.namespace(rows).empty((T, E), dtype=qkv.dtype)
        out = merged.reshape(T, H, D).swapaxes(0, 1)  # (H, T, D), a view
        schedule = router.sequence_schedule(cu_seqlens, T)
        attention_by_sequences(qkv[0, 0], qkv[1, 0], qkv[2, 0], schedule, 1.0 / math.sqrt(D), out)
        return self._output(merged, w_o, b_o, rows, norm_weight, norm_bias, eps)  # (T, E)

    @parallel.products_on_pool
    def backward(self, grad):
        if self.by_sequences:
            raise RuntimeError("SelfAttentionBlock: backward of a forward run with cu_seqlens= (attention sentence by "
                               "sentence, inference only: no attention weights kept); apply it with tokens= and "
                               "for_backward=True when a graph is recorded")
        needs = self.needs_grads()  # a weight's or bias's product runs only when it needs its gradient
        grad_s, grad_merged, grad_w_o, grad_b_o, grad_norm = self._grad_of_output(
            grad, self.merged, self.w_o, needs[9], needs[10])  # ∂s, ∂a (M, E), ∂W_o, ∂b_o
        index = None
        if self.tokens is not None:  # ∂a's rows back in the padded batch; the padding's rows are 0
            index, B, L = self.tokens
            every_row = backend.namespace(grad_merged).zeros((B * L, grad_merged.shape[1]), dtype=grad_merged.dtype)
            every_row[index] = grad_merged
            grad_merged = every_row  # (B·L, E)
        grad_qkv, _ = packed_attention_backward(grad_merged, self.attention, self.schedule, self.scale)
        in_proj_needs = [True] + needs[3:9]  # ∂h, then W_q … b_v
        grad_h, *grad_in_proj = in_projection_backward(grad_qkv, self.h, self.w_qkv, in_proj_needs,
                                                       index)  # ∂h (M, E)
        return self._grad_of_input(grad_h, grad_s, grad_norm, grad.shape) + (*grad_in_proj, grad_w_o, grad_b_o)

    def reference(self, x, norm_weight, norm_bias, w_q, w_k, w_v, b_q, b_k, b_v, w_o, b_o):
        """The block's output by the reference layer's functions on these inputs (``create_graph``; see
        ``fast.nodes``): ``nn.transformer.residual`` around ``nn.attention.multi_head_attention``."""
        if self.tokens is not None or self.by_sequences:
            raise RuntimeError("SelfAttentionBlock: a block run on the real tokens alone records no graph")
        num_heads, eps, attn_mask, allowed, is_causal = self.options
        mask = allowed if allowed is not None else attn_mask  # (an array: the block takes none as an input)
        mask = None if mask is None else Tensor._wrap(mask)

        def attend(h):  # (B, L, E) -> (B, L, E)
            q, k, v = (F.linear_definition(h, w, b) for w, b in ((w_q, b_q), (w_k, b_k), (w_v, b_v)))
            out_proj = functools.partial(F.linear_definition, weight=w_o, bias=b_o)
            return multi_head_attention(q, k, v, num_heads, out_proj, mask, 0.0, is_causal, need_weights=False)[0]

        norm = functools.partial(F.layer_norm_definition, ndim=1, weight=norm_weight, bias=norm_bias, eps=eps)
        return residual(x, attend, norm, self.norm_first)  # (B, L, E)


class FeedForwardBlock(_ResidualBlock):
    """The feed-forward block (ReLU or GELU) with its LayerNorm and residual sum, as one node.

    ``forward(x, norm_weight, norm_bias, w1, b1, w2, b2, *, norm_first, eps, activation="relu",
    for_backward=True)``:
    ``x (…, E)``, ``W1 (F, E)``, ``W2 (E, F)``; ``activation`` is ``"relu"``, ``"gelu"`` (exact,
    with erf) or ``"gelu_tanh"`` (GELU's tanh approximation).

        h = norm(x) (pre-norm) or x       Z = h W1ᵀ + b1  (M, F)       A = act(Z)
        s = x + A W2ᵀ + b2                y = s (pre-norm) or norm(s)

    Backward, with ``G = ∂L/∂y`` (``∂s = G``, or ``∂norm(G)`` post-norm):

        ∂W2 = ∂sᵀ A    ∂b2 = Σ_rows ∂s    ∂Z = (∂s W2) ∘ act'(Z)    ∂W1 = ∂Zᵀ h    ∂b1 = Σ_rows ∂Z
        ∂h = ∂Z W1     ∂x = ∂s + (∂norm(∂h) pre-norm, ∂h post-norm)

    ReLU: ``act'(Z) = [A > 0]``; it acts in place, and the block keeps one ``(M, F)`` array, ``A``.
    GELU: ``A = Z ∘ Φ(Z)``, ``act'(Z) = Φ + Z Φ'(Z)`` (``fast.activations.gelu``), both computed in
    forward, where ``Φ`` and ``exp(-Z²/2)`` are at hand; the block keeps ``A`` and ``act'(Z)``, so its
    backward's GELU is one product. ``for_backward=False`` (no graph recorded: ``feed_forward_block``
    knows) skips ``act'(Z)``.
    """

    # backward reads x (as h, post-norm), the norm's weight, W1 and W2; never its output (see Function)
    saved_inputs, saves_output = (0, 1, 3, 5), False

    def forward(self, x, norm_weight, norm_bias, w1, b1, w2, b2, *, norm_first, eps, activation="relu",
                for_backward=True, products_on_pool=False):
        self.on_pool = products_on_pool  # (True: the caller runs apply through parallel.over_pool; backward follows)
        shape = x.shape
        rows = x.reshape(-1, shape[-1])  # (M, E)
        self.eps = eps  # (for ``reference``)
        h = self._norm_input(rows, norm_weight, norm_bias, eps, norm_first)  # (M, E)
        hidden = times_weight_t(h, w1)  # Z (M, F), fresh
        self.h, self.w1, self.w2, self.activation = h, w1, w2, activation
        if activation == "relu":  # A = relu(Z + b1), in place; backward's ∂A has Z's shape and layout
            self.rows_schedule = router.elementwise_schedule(hidden)
            self.hidden = bias_relu(hidden, b1, self.rows_schedule)
        else:  # A = gelu(Z + b1) over Z, and gelu'(Z) for backward (none when no graph is recorded)
            self.hidden, self.slope = bias_gelu(hidden, b1, _APPROXIMATE[activation], router.gelu_schedule(hidden),
                                                slope=for_backward)
        return self._output(self.hidden, w2, b2, rows, norm_weight, norm_bias, eps).reshape(shape)

    @parallel.products_on_pool
    def backward(self, grad):
        needs = self.needs_grads()  # a weight's or bias's product runs only when it needs its gradient
        grad_s, grad_hidden, grad_w2, grad_b2, grad_norm = self._grad_of_output(
            grad, self.hidden, self.w2, needs[5], needs[6])  # ∂s, ∂A (M, F), ∂W2, ∂b2
        if self.activation == "relu":
            relu_backward(grad_hidden, self.hidden, self.rows_schedule)  # ∂Z = ∂A ∘ [A > 0]
        elif self.slope is None:
            raise RuntimeError("FeedForwardBlock: backward of a forward run with for_backward=False (no GELU slope "
                               "kept); apply it with for_backward=True when a graph is recorded")
        else:
            gelu_backward_rows(grad_hidden, self.slope)  # ∂Z = ∂A ∘ gelu'(Z), in place
        grad_w1 = parallel.matmul(grad_hidden.T, self.h) if needs[3] else None  # (F, E)
        grad_b1 = column_sums(grad_hidden) if needs[4] else None  # (F,)
        grad_h = parallel.matmul(grad_hidden, self.w1)  # (M, E)
        return self._grad_of_input(grad_h, grad_s, grad_norm, grad.shape) + (grad_w1, grad_b1, grad_w2, grad_b2)

    def reference(self, x, norm_weight, norm_bias, w1, b1, w2, b2):
        """The block's output by the reference layer's functions on these inputs (``create_graph``; see
        ``fast.nodes``): ``nn.transformer.residual`` around ``linear2(activation(linear1(h)))``."""
        if self.activation == "relu":
            activation = F.relu
        else:
            activation = functools.partial(F.gelu, approximate=_APPROXIMATE[self.activation])

        def feed_forward(h):  # (…, E) -> (…, F) -> (…, E)
            return F.linear_definition(activation(F.linear_definition(h, w1, b1)), w2, b2)

        norm = functools.partial(F.layer_norm_definition, ndim=1, weight=norm_weight, bias=norm_bias, eps=self.eps)
        return residual(x, feed_forward, norm, self.norm_first)  # (…, E)


def _kind(mask):
    return "None" if mask is None else f"an array of shape {tuple(mask.shape)}"


_APPROXIMATE = {"gelu": "none", "gelu_tanh": "tanh"}  # FeedForwardBlock's activation -> GELU's approximate

# the blocks' apply with the BLAS on one thread and the products over the pool, for the calls the route pools
_self_attention_over_pool = parallel.over_pool(SelfAttentionBlock.apply)
_feed_forward_over_pool = parallel.over_pool(FeedForwardBlock.apply)


def self_attention_block(x, norm, attention, attn_mask, is_causal, norm_first, tokens=None, cu_seqlens=None,
                         products_on_pool=False):
    """``SelfAttentionBlock`` on a layer's parts: ``norm`` (its LayerNorm), ``attention`` (its
    multi-head attention with ``q_proj``, ``k_proj``, ``v_proj``, ``out_proj``) and the layer's mask;
    ``tokens`` and ``cu_seqlens`` as the block's (``x (T, E)``, the real tokens of a padded batch;
    with ``cu_seqlens`` the mask is not read: the sequences are the mask). ``products_on_pool``: the router's
    decision for a call that records a graph (``router.LayerRoute``); it applies only where one is recorded."""
    q, k, v, out = attention.q_proj, attention.k_proj, attention.v_proj, attention.out_proj
    float_mask = allowed = None
    if attn_mask is not None and cu_seqlens is None:
        B, L = x.shape[:2] if tokens is None else tokens[1:]
        mask = checked_mask(per_batch_mask(attn_mask), x, (B, attention.num_heads, L, L))
        float_mask, allowed = (None, mask._data) if mask.dtype == np.bool_ else (mask._data, None)
    inputs = (x, norm.weight, norm.bias, q.weight, k.weight, v.weight, q.bias, k.bias, v.bias, out.weight, out.bias)
    for_backward = records_graph(inputs)
    on_pool = products_on_pool and for_backward
    return (_self_attention_over_pool if on_pool else SelfAttentionBlock.apply)(
        *inputs, num_heads=attention.num_heads, norm_first=norm_first, eps=norm.eps, attn_mask=float_mask,
        allowed=allowed, is_causal=is_causal, tokens=tokens, cu_seqlens=cu_seqlens, for_backward=for_backward,
        products_on_pool=on_pool,
    )  # (B, L, E), or (T, E)


def feed_forward_block(x, norm, linear1, linear2, norm_first, activation="relu", products_on_pool=False):
    """``FeedForwardBlock`` on a layer's parts: its LayerNorm, its two linear layers and the
    activation's name (``"relu"``, ``"gelu"``, ``"gelu_tanh"``; ``router.feed_forward_activation``);
    ``products_on_pool`` as ``self_attention_block``'s."""
    inputs = (x, norm.weight, norm.bias, linear1.weight, linear1.bias, linear2.weight, linear2.bias)
    for_backward = records_graph(inputs)
    on_pool = products_on_pool and for_backward
    return (_feed_forward_over_pool if on_pool else FeedForwardBlock.apply)(
        *inputs, norm_first=norm_first, eps=norm.eps, activation=activation, for_backward=for_backward,
        products_on_pool=on_pool,
    )  # (…, E)


def encoder_on_real_tokens(layers, activations, src, mask, real):
    """A stack of encoder ``layers`` run on the real tokens of a padded batch alone: ``src (B, L, E)``,
    ``mask`` its boolean padding mask ``(B, 1, 1, L)`` and ``real (B, L)`` its real tokens (``True``, the
    mask's last axis), ``activations`` each layer's feed-forward activation's name. Returns ``(B, L, E)``
    with zeros at the padding, as PyTorch's encoder does with nested tensors; a leaf: the route
    (``nn.transformer.padding_to_zero``) takes it only where no graph is recorded.

    The ``T`` real tokens are gathered into ``(T, E)`` rows once, each sentence's back to back; each layer's two
    residual blocks run on them, and the rows are scattered back at the end. Every product and pass per row is
    ``T`` rows long, not ``B·L``. Attention runs sentence by sentence (``SelfAttentionBlock`` with ``cu_seqlens``,
    ``attention.attention_by_sequences``: no padded batch), or, where the sentences average fewer real tokens than
    ``fast.tuning's sequence_attention_min_length`` (``router.why_not_attention_by_sequences``), on the padded
    batch with its mask (``SelfAttentionBlock`` with ``tokens``: ``q``, ``k``, ``v`` scattered into it)."""
    xp = backend.namespace(src._data)
    B, L, E = src.shape
    index = xp.flatnonzero(real.reshape(-1))  # (T,): the real tokens' positions among the B·L rows
    x = Tensor._wrap(src._data.reshape(B * L, E)[index], src)  # (T, E), a copy
    cu_seqlens = None  # each sentence's rows lie back to back: their cumulative lengths (B + 1,)
    if router.why_not_attention_by_sequences(B, index.shape[0]) is None:
        cu_seqlens = backend.to_numpy(xp.concatenate([xp.zeros(1, dtype=index.dtype), xp.cumsum(real.sum(axis=1))]))
    for layer, activation in zip(layers, activations):
        x = self_attention_block(x, layer.norm1, layer.self_attn, mask, False, layer.norm_first,
                                 tokens=(index, B, L), cu_seqlens=cu_seqlens)
        x = feed_forward_block(x, layer.norm2, layer.linear1, layer.linear2, layer.norm_first, activation)
    out = xp.zeros((B * L, E), dtype=x.dtype)
    out[index] = x._data
    return Tensor._wrap(out.reshape(B, L, E), src)  # (B, L, E)
