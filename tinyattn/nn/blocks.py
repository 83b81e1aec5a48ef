"""A Transformer layer's residual blocks, each as one graph node.

Composed, a pre-norm encoder layer is seven graph nodes: LayerNorm, the q/k/v projection,
attention, the output projection, the residual sum, LayerNorm, and the feed-forward block with its
sum. On a small model the Python that builds, walks and runs a node costs about as much as the
arithmetic inside it. So where no dropout acts, the layers run each residual block as one node:

    SelfAttentionBlock   pre-norm:   y = x + out_proj(attention(in_proj(norm(x))))
                         post-norm:  y = norm(x + out_proj(attention(in_proj(x))))
    FeedForwardBlock     pre-norm:   y = x + linear2(relu(linear1(norm(x))))
                         post-norm:  y = norm(x + linear2(relu(linear1(x))))

Each block is written out straight, forward and backward side by side, on the same array-level
steps as the nodes it replaces (``_layer_norm_rows``, ``_in_projection``, ``_packed_attention``
and their backwards), so the arithmetic is the composed form's, operation for operation. The
activations are handled as rows ``(M, E)``, ``M = B·L``. The test suite checks each block against
the composed form, against PyTorch and by finite differences.
``tinyattn.nn.transformer.FUSED_BLOCKS = False`` turns the blocks off (to step through the
composed nodes in a debugger, say).
"""

import math

from .. import backend
from ..tensor import Function
from .attention import _in_projection, _in_projection_backward
from .functional import _layer_norm_rows, _layer_norm_rows_backward, column_sums
from .sdpa import _packed_attention, _packed_attention_backward

_ALL = (True,) * 7  # every input of the q/k/v projection needs its gradient


def _with_residual(grad_h, grad, shape):
    """``∂x = ∂h + ∂s``: the residual path joins, into a fresh array of ``x``'s shape (a leaf may
    keep it as it is), written through its ``(M, E)`` view."""
    xp = backend.namespace(grad)
    grad_x = xp.empty(shape, dtype=grad_h.dtype)
    xp.add(grad_h, grad, out=grad_x.reshape(grad.shape))
    return grad_x


class SelfAttentionBlock(Function):
    """Multi-head self-attention with its LayerNorm and residual sum, as one node.

    ``forward(x, norm_weight, norm_bias, w_q, w_k, w_v, b_q, b_k, b_v, w_o, b_o, *, num_heads,
    norm_first, eps, attn_mask, allowed, is_causal)``: ``x (B, L, E)``; ``attn_mask`` a float mask
    array added to the scores (one that needs no gradient) or ``None``; ``allowed`` a boolean one
    (``True`` = may attend) or ``None``; no dropout.

        h = norm(x) (pre-norm) or x          qkv = in_proj(h)  (3, B, H, L, D)
        a = attention(qkv)  (M, E), heads merged        s = x + a W_oᵀ + b_o
        y = s (pre-norm) or norm(s)

    Backward, with ``G = ∂L/∂y`` (``∂s = G``, or ``∂norm(G)`` post-norm):

        ∂W_o = ∂sᵀ a    ∂b_o = Σ_rows ∂s    ∂a = ∂s W_o    ∂qkv = ∂attention(∂a)
        ∂h, ∂W, ∂b = ∂in_proj(∂qkv)        ∂x = ∂s + (∂norm(∂h) pre-norm, ∂h post-norm)
    """

    fresh_gradients = True  # keeps no reference to what backward returns (see Function)

    def forward(self, x, norm_weight, norm_bias, w_q, w_k, w_v, b_q, b_k, b_v, w_o, b_o, *, num_heads,
                norm_first, eps, attn_mask, allowed, is_causal):
        B, L, E = x.shape
        rows = x.reshape(B * L, E)  # (M, E)
        self.norm_first, self.w_o = norm_first, w_o
        h = rows
        if norm_first:
            h, self.norm = _layer_norm_rows(rows, norm_weight, norm_bias, eps)  # (M, E)
        qkv, self.w_qkv = _in_projection(h, (w_q, w_k, w_v), (b_q, b_k, b_v), (B, L), num_heads)  # (3, B, H, L, D)
        self.scale = 1.0 / math.sqrt(qkv.shape[-1])
        merged, self.weights, _ = _packed_attention(qkv, attn_mask, allowed, is_causal, self.scale, 0.0)
        self.h, self.qkv, self.merged = h, qkv, merged.reshape(B * L, E)  # merged heads a (M, E)
        s = self.merged @ w_o.T  # (M, E), a fresh array
        s += b_o
        s += rows  # the residual sum
        if not norm_first:
            s, self.norm = _layer_norm_rows(s, norm_weight, norm_bias, eps)
        return s.reshape(x.shape)

    def backward(self, grad):
        shape = grad.shape
        grad = grad.reshape(self.merged.shape)  # G (M, E)
        grad_norm = ()
        if not self.norm_first:
            grad, *grad_norm = _layer_norm_rows_backward(grad, self.norm)  # ∂s
        grad_w_o, grad_b_o = grad.T @ self.merged, column_sums(grad)  # (E, E), (E,)
        grad_qkv, _ = _packed_attention_backward(grad @ self.w_o, self.qkv, self.weights, None, self.scale)
        grad_h, *grad_in_proj = _in_projection_backward(grad_qkv, self.h, self.w_qkv, _ALL)  # ∂h (M, E), ...
        if self.norm_first:
            grad_h, *grad_norm = _layer_norm_rows_backward(grad_h, self.norm)
        return (_with_residual(grad_h, grad, shape), *grad_norm, *grad_in_proj, grad_w_o, grad_b_o)


class FeedForwardBlock(Function):
    """The feed-forward block (ReLU) with its LayerNorm and residual sum, as one node.

    ``forward(x, norm_weight, norm_bias, w1, b1, w2, b2, *, norm_first, eps)``: ``x (…, E)``,
    ``W1 (F, E)``, ``W2 (E, F)``.

        h = norm(x) (pre-norm) or x       A = relu(h W1ᵀ + b1)  (M, F)
        s = x + A W2ᵀ + b2                y = s (pre-norm) or norm(s)

    Backward, with ``G = ∂L/∂y`` (``∂s = G``, or ``∂norm(G)`` post-norm):

        ∂W2 = ∂sᵀ A    ∂b2 = Σ_rows ∂s    ∂Z = (∂s W2) ∘ [A > 0]    ∂W1 = ∂Zᵀ h    ∂b1 = Σ_rows ∂Z
        ∂h = ∂Z W1     ∂x = ∂s + (∂norm(∂h) pre-norm, ∂h post-norm)

    ReLU acts in place: the block keeps one ``(M, F)`` array, ``A``.
    """

    fresh_gradients = True  # keeps no reference to what backward returns (see Function)

    def forward(self, x, norm_weight, norm_bias, w1, b1, w2, b2, *, norm_first, eps):
        rows = x.reshape(-1, x.shape[-1])  # (M, E)
        self.norm_first, self.w1, self.w2 = norm_first, w1, w2
        h = rows
        if norm_first:
            h, self.norm = _layer_norm_rows(rows, norm_weight, norm_bias, eps)  # (M, E)
        hidden = h @ w1.T  # (M, F), a fresh array
        hidden += b1
        self.h, self.hidden = h, backend.namespace(x).maximum(hidden, 0, out=hidden)  # A, in place
        s = self.hidden @ w2.T  # (M, E)
        s += b2
        s += rows  # the residual sum
        if not norm_first:
            s, self.norm = _layer_norm_rows(s, norm_weight, norm_bias, eps)
        return s.reshape(x.shape)

    def backward(self, grad):
        shape = grad.shape
        grad = grad.reshape(self.h.shape)  # G (M, E)
        grad_norm = ()
        if not self.norm_first:
            grad, *grad_norm = _layer_norm_rows_backward(grad, self.norm)  # ∂s
        grad_w2, grad_b2 = grad.T @ self.hidden, column_sums(grad)  # (E, F), (E,)
        grad_hidden = grad @ self.w2  # (M, F), a fresh array
        grad_hidden *= self.hidden > 0  # ∂Z
        grad_w1, grad_b1 = grad_hidden.T @ self.h, column_sums(grad_hidden)  # (F, E), (F,)
        grad_h = grad_hidden @ self.w1  # (M, E)
        if self.norm_first:
            grad_h, *grad_norm = _layer_norm_rows_backward(grad_h, self.norm)
        return (_with_residual(grad_h, grad, shape), *grad_norm, grad_w1, grad_b1, grad_w2, grad_b2)
