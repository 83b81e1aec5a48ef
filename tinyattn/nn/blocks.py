"""A Transformer layer's residual blocks, each as one graph node.

Composed, a pre-norm encoder layer is seven graph nodes: LayerNorm, the q/k/v projection,
attention, the output projection, the residual sum, LayerNorm, and the feed-forward block with its
sum. On a small model the Python that builds and walks a node costs about as much as the
arithmetic inside it. So where no dropout acts, the layers run each residual block as one node:

    SelfAttentionBlock   pre-norm:   y = x + out_proj(attention(in_proj(norm(x))))
                         post-norm:  y = norm(x + out_proj(attention(in_proj(x))))
    FeedForwardBlock     pre-norm:   y = x + linear2(relu(linear1(norm(x))))
                         post-norm:  y = norm(x + linear2(relu(linear1(x))))

A block runs the composed form's own nodes as **stages**: instances of ``Normalize``,
``InProjection``, ``PackedSelfAttention``, ``Linear`` and ``FeedForwardResidual``, called by hand
on arrays (``forward`` in order, ``backward`` in reverse) and never linked into the graph. The
arithmetic is the composed form's, operation for operation; only the bookkeeping of five graph
nodes goes. The test suite checks each block against the composed form, against PyTorch and by
finite differences. ``tinyattn.nn.transformer.FUSED_BLOCKS = False`` turns the blocks off (to step
through the composed nodes in a debugger, say).
"""

import math

from .. import backend
from ..tensor import Function
from .attention import InProjection
from .functional import Linear, Normalize, column_sums
from .sdpa import PackedSelfAttention


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
        grad_b2 = column_sums(rows) if needs[5] else None  # (E,)
        grad_x = grad_w1 = grad_b1 = None
        if needs[0] or needs[2] or needs[3]:
            grad_hidden = rows @ self.w2  # (M, F), a fresh array
            grad_hidden *= self.hidden > 0  # ∂Z
            grad_x = (grad_hidden @ self.w1).reshape(self.shape) if needs[0] else None  # (…, E)
            grad_w1 = grad_hidden.T @ self.x if needs[2] else None  # (F, E)
            grad_b1 = column_sums(grad_hidden) if needs[3] else None  # (F,)
        return grad_x, grad if needs[1] else None, grad_w1, grad_b1, grad_w2, grad_b2


class _Intermediate:
    """A stage's parent that stands for an array made inside the block: its gradient is wanted."""

    requires_grad = True


_INTERMEDIATE = _Intermediate()


def _stage(stage, *parents):
    """``stage`` with its ``parents`` set, as a linked node's are: its backward reads them to tell
    which gradients are needed (and a parameter's shape). A parameter is the block's own parent."""
    stage.parents = parents
    return stage


class SelfAttentionBlock(Function):
    """Multi-head self-attention with its LayerNorm and residual sum, as one node.

    ``forward(x, norm_weight, norm_bias, w_q, w_k, w_v, b_q, b_k, b_v, w_o, b_o, *, num_heads,
    norm_first, eps, attn_mask, allowed, is_causal)``: ``x (B, L, E)``; ``attn_mask`` a float mask
    array added to the scores (one that needs no gradient) or ``None``; ``allowed`` a boolean one
    (``True`` = may attend) or ``None``; no dropout.

    With ``s = x + out_proj(attention(in_proj(h)))``, ``h = norm(x)`` (pre-norm) or ``x``
    (post-norm, where ``y = norm(s)``), and ``G = ∂L/∂y``, backward is the stages' in reverse:

        pre-norm:   ∂x = G + ∂norm(∂in_proj(∂attention(∂out_proj(G))))
        post-norm:  ∂s = ∂norm(G);   ∂x = ∂s + ∂in_proj(∂attention(∂out_proj(∂s)))
    """

    fresh_gradients = True  # every stage's are, and the upstream gradient is only read

    def forward(self, x, norm_weight, norm_bias, w_q, w_k, w_v, b_q, b_k, b_v, w_o, b_o, *, num_heads,
                norm_first, eps, attn_mask, allowed, is_causal):
        self.norm, self.in_proj, self.attention = Normalize(), InProjection(), PackedSelfAttention()
        self.out_proj = Linear()
        self.norm_first = norm_first
        h = self.norm.forward(x, norm_weight, norm_bias, ndim=1, eps=eps) if norm_first else x  # (B, L, E)
        qkv = self.in_proj.forward(h, w_q, w_k, w_v, b_q, b_k, b_v, num_heads=num_heads)  # (3, B, H, L, D)
        heads = self.attention.forward(qkv, attn_mask, allowed=allowed, is_causal=is_causal,
                                       scale=1.0 / math.sqrt(qkv.shape[-1]), dropout_p=0.0)  # (B, L, E)
        s = self.out_proj.forward(heads, w_o, b_o)  # (B, L, E), a fresh array
        s += x  # the residual sum
        return s if norm_first else self.norm.forward(s, norm_weight, norm_bias, ndim=1, eps=eps)

    def backward(self, grad):
        _, norm_weight, norm_bias, w_q, w_k, w_v, b_q, b_k, b_v, w_o, b_o = self.parents
        norm = _stage(self.norm, _INTERMEDIATE, norm_weight, norm_bias)
        grad_norm = ()
        if not self.norm_first:
            grad, *grad_norm = norm.backward(grad)  # ∂s
        grad_heads, grad_w_o, grad_b_o = _stage(self.out_proj, _INTERMEDIATE, w_o, b_o).backward(grad)
        grad_qkv, _ = _stage(self.attention, _INTERMEDIATE).backward(grad_heads)
        in_proj = _stage(self.in_proj, _INTERMEDIATE, w_q, w_k, w_v, b_q, b_k, b_v)
        grad_x, *grad_in_proj = in_proj.backward(grad_qkv)  # ∂h, a fresh array
        if self.norm_first:
            grad_x, *grad_norm = norm.backward(grad_x)
        grad_x += grad  # the residual path
        return (grad_x, *grad_norm, *grad_in_proj, grad_w_o, grad_b_o)


class FeedForwardBlock(Function):
    """The feed-forward block (ReLU) with its LayerNorm and residual sum, as one node.

    ``forward(x, norm_weight, norm_bias, w1, b1, w2, b2, *, norm_first, eps)``: ``x (…, E)``.
    With ``s = x + FF(h)`` (``FeedForwardResidual``), ``h = norm(x)`` (pre-norm) or ``x``
    (post-norm, where ``y = norm(s)``), and ``G = ∂L/∂y``:

        pre-norm:   ∂x = G + ∂norm(∂FF(G))
        post-norm:  ∂s = ∂norm(G);   ∂x = ∂s + ∂FF(∂s)
    """

    fresh_gradients = True  # every stage's are, and the upstream gradient is only read

    def forward(self, x, norm_weight, norm_bias, w1, b1, w2, b2, *, norm_first, eps):
        self.norm, self.feed_forward, self.norm_first = Normalize(), FeedForwardResidual(), norm_first
        h = self.norm.forward(x, norm_weight, norm_bias, ndim=1, eps=eps) if norm_first else x  # (…, E)
        s = self.feed_forward.forward(h, x, w1, b1, w2, b2)  # x + FF(h), (…, E)
        return s if norm_first else self.norm.forward(s, norm_weight, norm_bias, ndim=1, eps=eps)

    def backward(self, grad):
        _, norm_weight, norm_bias, w1, b1, w2, b2 = self.parents
        norm = _stage(self.norm, _INTERMEDIATE, norm_weight, norm_bias)
        grad_norm = ()
        if not self.norm_first:
            grad, *grad_norm = norm.backward(grad)  # ∂s
        feed_forward = _stage(self.feed_forward, _INTERMEDIATE, _INTERMEDIATE, w1, b1, w2, b2)
        grad_x, grad_residual, *grad_feed_forward = feed_forward.backward(grad)  # ∂h (fresh), ∂s
        if self.norm_first:
            grad_x, *grad_norm = norm.backward(grad_x)
        grad_x += grad_residual  # the residual path
        return (grad_x, *grad_norm, *grad_feed_forward)
