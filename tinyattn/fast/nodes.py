"""The fused nodes: one graph node where the reference definition makes several.

Each node's forward and backward sit side by side, on the array kernels of ``fast.kernels``;
the test suite's equivalence table proves each equal to the reference definition it replaces
(``nn.functional``, ``nn.attention``), values and gradients.

A backward on arrays cannot record a graph of itself. So each node also gives ``reference(*inputs)``:
its output recomputed from its input tensors by the reference definition of the unit it stands for
(``unit.reference``, never routed back to this node; a smaller unit inside may run fast, with its own
``reference``), which ``create_graph=True`` differentiates instead (``tensor._recomputed``). A node that drew at
random (dropout's mask) draws again there from the generators as its forward found them: the same mask.
"""

import math

from .. import backend, ops
from ..engine import Function, Tensor
from ..masks import checked_mask, split_mask
from ..nn import functional as F
from ..nn.attention import merge_heads, split_heads
from ..nn.functional import log_softmax_of_array
from . import attention, buffers, kernels, router


def attention_reference(node, query, key, value, attn_mask=None):
    """A fused attention node's output by the reference attention's lines (``F.attention_definition``), for its
    ``reference``: its boolean mask (``node.allowed``, an array) or float one (``attn_mask``, an input), its
    causality and scale, and its dropout drawn again from the generators as its forward found them
    (``node.rng_state``: the same keep-mask)."""
    if attn_mask is None and node.allowed is not None:
        attn_mask = Tensor._wrap(node.allowed)
    with backend.rng_state(node.rng_state):
        out, _ = F.attention_definition(query, key, value, attn_mask, node.dropout_p, node.is_causal, node.scale, False)
    return out  # (…, Lq, Ev)


# ----------------------------------------------------------------------------- linear, layer norm, cross entropy


class Linear(Function):
    """``y = x Wᵀ + b`` as one node, the batch dimensions folded into rows (one 2-D GEMM each way).

    With ``x`` seen as ``X (M, in)`` (``M`` = the product of the batch sizes) and the
    output's gradient as ``G (M, out)``:

        Y = X Wᵀ + b    ∂L/∂X = G W  (M, in)    ∂L/∂W = Gᵀ X  (out, in)    ∂L/∂b = Σ_rows G  (out,)

    Reference: ``F.linear``  (``x @ weight.T + bias``).
    """

    saved_inputs, saves_output = (0, 1), False  # backward reads x and W, not b nor y (see Function)

    def forward(self, x, weight, bias=None):
        shape = self.x_shape = x.shape  # (…, in)
        self.weight = weight
        self.x = rows = x.reshape(math.prod(shape[:-1]), shape[-1])  # (M, in); a view when x is contiguous
        if len(rows) * len(weight) * rows.itemsize < buffers.SMALLEST_KEPT:  # (times_weight_t's own test, first:
            out = rows @ weight.T  # a small product's array is NumPy's own; no block pools a Linear node's product)
        else:
            out = kernels.times_weight_t(rows, weight)  # (M, out), fresh: fast.buffers' memory
        if bias is not None and bias.dtype == out.dtype:
            out += bias  # in place: out is a fresh array
        elif bias is not None:
            out = out + bias  # mixed dtypes promote, as x @ Wᵀ + b does
        return out.reshape(shape[:-1] + (len(weight),))  # (…, out)

    def backward(self, grad):
        needs = self.needs_grads()
        grad = grad.reshape(self.x.shape[0], grad.shape[-1])  # (M, out)
        grad_x = (grad @ self.weight).reshape(self.x_shape) if needs[0] else None  # (…, in)
        grad_weight = grad.T @ self.x if needs[1] else None  # (out, in), W's own layout
        grad_bias = kernels.column_sums(grad) if len(needs) > 2 and needs[2] else None  # (out,)
        return grad_x, grad_weight, grad_bias

    def reference(self, x, weight, bias=None):
        return F.linear_definition(x, weight, bias)


class Normalize(Function):
    """LayerNorm over the last ``ndim`` axes as one node (``kernels.layer_norm_rows`` on the input seen
    as rows ``(M, N)``, ``N`` the number of normalised elements); ``weight`` and ``bias`` are optional
    inputs (both or neither), of the normalised shape. Reference: ``F.layer_norm`` ."""


    def forward(self, x, weight=None, bias=None, *, ndim, eps):
        size = math.prod(x.shape[x.ndim - ndim:])
        rows = x.reshape(math.prod(x.shape[:x.ndim - ndim]), size)  # (M, N)
        if weight is not None:
            weight, bias = weight.reshape(size), bias.reshape(size)  # (N,)
        out, self.saved = kernels.layer_norm_rows(rows, weight, bias, eps, router.row_schedule(rows, *rows.shape))
        self.ndim, self.eps = ndim, eps
        self.saves_output = weight is None  # without a weight the output is x̂, which backward reads
        self.shape = x.shape
        return out.reshape(x.shape)

    def backward(self, grad):
        grad_x, grad_weight, grad_bias = kernels.layer_norm_rows_backward(
            grad.reshape(self.saved[0].shape), self.saved)
        grad_x = grad_x.reshape(self.shape)  # a view: a leaf input copies it (writing dx into an array of the
        # input's shape instead costs a second pass over it, and LayerNorm's input is rarely a leaf)
        if grad_weight is None:
            return (grad_x,)
        shape = self.parents[1].shape
        if shape != grad_weight.shape:
            grad_weight, grad_bias = grad_weight.reshape(shape), grad_bias.reshape(shape)
        return grad_x, grad_weight, grad_bias

    def reference(self, x, weight=None, bias=None):
        return F.layer_norm_definition(x, self.ndim, weight, bias, self.eps)


class CrossEntropy(Function):
    """Softmax cross entropy with class-index targets, fused.

    Per position ``i`` (class axis last here), with ``log p = log_softmax(z)``, ``C`` classes
    and smoothing ``ε``: ``loss_i = -(1-ε) log p[t_i] - (ε/C) Σ_c log p[c]``, zero where
    ``t_i == ignore_index``. Its gradient: ``dz_ic = p_ic - (1-ε)·[c = t_i] - ε/C``.
    Reference: ``F.cross_entropy`` .
    """

    def forward(self, logits, target, ignore_index, reduction, label_smoothing):
        xp = backend.namespace(logits)
        num_classes = logits.shape[1]
        self.shape, self.target = logits.shape, target  # (the target: for ``reference``)
        z = xp.moveaxis(logits, 1, -1).reshape(-1, num_classes)  # (M, C), M = N·d…
        target = target.reshape(-1)  # (M,)
        valid = target != ignore_index
        safe_target = xp.where(valid, target, 0)
        log_p = log_softmax_of_array(z, 1)  # (M, C)
        picked = xp.take_along_axis(log_p, safe_target[:, None], axis=1)[:, 0]  # (M,)
        losses = -(1 - label_smoothing) * picked
        if label_smoothing:
            losses = losses - (label_smoothing / num_classes) * log_p.sum(axis=1)
        losses = xp.where(valid, losses, 0)  # ignored positions count zero (even where log p is -inf)
        self.log_p, self.safe_target, self.valid = log_p, safe_target, valid
        self.reduction, self.label_smoothing, self.ignore_index = reduction, label_smoothing, ignore_index
        if reduction == "none":
            return losses.reshape((self.shape[0],) + tuple(self.shape[2:]))
        total = losses.sum()
        if reduction == "sum":
            return total
        self.count = valid.sum().astype(logits.dtype)
        return total / self.count  # 0/0 = NaN when every target is ignored, as in PyTorch

    def backward(self, grad):
        xp = backend.namespace(grad)
        log_p, valid = self.log_p, self.valid
        num_classes = log_p.shape[1]
        rows = xp.arange(log_p.shape[0])
        dz = xp.exp(log_p)  # (M, C): p
        dz[rows, self.safe_target] -= 1 - self.label_smoothing
        if self.label_smoothing:
            dz -= self.label_smoothing / num_classes
        if self.reduction == "none":
            scale = grad.reshape(-1) * valid  # (M,)
        elif self.reduction == "sum":
            scale = grad * valid
        else:
            scale = (grad / xp.maximum(self.count, 1)) * valid  # zero, not NaN, when all are ignored
        dz *= scale[:, None].astype(dz.dtype)
        moved = (self.shape[0],) + self.shape[2:] + (num_classes,)  # (N, d…, C)
        return (xp.moveaxis(dz.reshape(moved), -1, 1),)

    def reference(self, logits):
        return F.cross_entropy_definition(logits, self.target, self.ignore_index, self.reduction, self.label_smoothing)


# ----------------------------------------------------------------------------- attention


class InProjection(Function):
    """Self-attention's three input projections as one GEMM: ``x (B, L, E) -> qkv (3, B, H, L, D)``
    (``kernels.in_projection``; ``forward(x, w_q, w_k, w_v, b_q=None, b_k=None, b_v=None, *, num_heads)``).
    Reference: three ``F.linear`` and the heads split."""


    def forward(self, x, w_q, w_k, w_v, b_q=None, b_k=None, b_v=None, *, num_heads):
        biases = None if b_q is None else (b_q, b_k, b_v)
        self.num_heads = num_heads
        self.x, self.shape = x.reshape(x.shape[0] * x.shape[1], x.shape[2]), x.shape  # (B·L, E)
        qkv, self.weight = kernels.in_projection(self.x, (w_q, w_k, w_v), biases, x.shape[:2], num_heads)
        return qkv  # (3, B, H, L, D)

    def backward(self, grad):
        needs = self.needs_grads()
        grads = kernels.in_projection_backward(grad, self.x, self.weight, needs)
        if grads[0] is not None:
            grads[0] = grads[0].reshape(self.shape)  # ∂x (B, L, E)
        return tuple(grads)

    def reference(self, x, w_q, w_k, w_v, b_q=None, b_k=None, b_v=None):
        heads = [split_heads(F.linear_definition(x, w, b), self.num_heads)  # (B, H, L, D) each
                 for w, b in ((w_q, b_q), (w_k, b_k), (w_v, b_v))]
        return ops.stack(heads)  # (3, B, H, L, D)


class Attention(Function):
    """The whole-matrix attention as one node, for when the weights are not returned.

    ``forward(query, key, value, attn_mask=None, *, allowed, is_causal, scale, dropout_p)``:
    ``attn_mask`` a float mask added to the scores, ``allowed`` a boolean one (``True`` = may
    attend); ``dropout_p`` > 0 drops weights as ``F.dropout`` does (same generator, same draw).

        S = Q Kᵀ·scale + mask   (…, Lq, Lk)      P = masked softmax(S)      P̃ = P ∘ M / (1 - p)
        O = P̃ V                 (…, Lq, Ev)

    and backward, with ``G = ∂L/∂O``:

        dV = P̃ᵀ G    dP = (G Vᵀ) ∘ M / (1 - p)    dS = P ∘ (dP - Σ_k dP·P)
        dQ = dS K · scale    dK = dSᵀ Q · scale    dmask = dS

    each summed back over the leading axes its input broadcast along, with each row's ``Σ_k dP·P``
    read as ``rowsum(G ∘ O)`` (the same sum: ``fast.attention.attention_backward``). It runs the tiled kernel
    (``fast.attention``) under the router's schedule (``router.attention_schedule``). It replaces the reference
    attention's nodes (scale, transpose, product, mask, softmax, product) and keeps ``P`` (and
    ``M``) and its output ``O`` besides its inputs.
    """

    saves_output = True  # backward reads the output (``self.arrays.out``; see Function)

    def forward(self, query, key, value, attn_mask=None, *, allowed, is_causal, scale, dropout_p):
        self.scale, self.allowed, self.is_causal, self.dropout_p = scale, allowed, is_causal, dropout_p
        self.rng_state = backend.get_rng_state() if dropout_p else None  # (for ``reference``: the same draw)
        self.schedule = router.attention_schedule(query, key, value)
        out, self.arrays = attention.attention(query, key, value, attn_mask, allowed, is_causal, scale, dropout_p,
                                               self.schedule)
        return out  # (…, Lq, Ev); backward reads it (rowsum(G ∘ O))

    def backward(self, grad):
        needs = self.needs_grads()
        leaves = tuple(p._ctx is None and p._hooks is None and p.shape == grad.shape[:-2] + p.shape[-2:]
                       for p in self.parents[:3])  # (their gradients, unsummed, become their .grad)
        grads = attention.attention_backward(grad, self.arrays, self.schedule, self.scale,
                                             mask_shape=self.parents[3].shape if len(needs) > 3 and needs[3] else None,
                                             fresh=leaves)
        return tuple(ops.sum_to(g, p.shape) if need else None for g, p, need in zip(grads, self.parents, needs))

    def reference(self, query, key, value, attn_mask=None):
        return attention_reference(self, query, key, value, attn_mask)


class HeadsAttention(Function):
    """``Attention`` for multi-head attention on projected inputs with the heads side by side: ``q (B, Lq, H·D)``,
    ``k`` and ``v`` ``(B, Lk, H·D)`` in, every head attending at once, ``(B, Lq, H·D)`` out: one node where the
    reference composition (``nn.attention.multi_head_attention``) makes three splits of the heads, the attention and
    a merge. ``forward(q, k, v, attn_mask=None, *, num_heads, allowed, is_causal, scale, dropout_p)`` as
    ``Attention``'s, ``attn_mask`` broadcasting to ``(B, H, Lq, Lk)``. The heads are split as views and merged by
    one copy; the gradients go back the same way.
    """

    saves_output = False  # backward reads the heads' output before the merge, which no one else sees (see Function)

    def forward(self, q, k, v, attn_mask=None, *, num_heads, allowed, is_causal, scale, dropout_p):
        self.scale, self.allowed, self.is_causal, self.dropout_p = scale, allowed, is_causal, dropout_p
        self.num_heads = num_heads
        self.rng_state = backend.get_rng_state() if dropout_p else None  # (for ``reference``: the same draw)
        q, k, v = (kernels.split_heads(t, num_heads) for t in (q, k, v))  # (B, H, L, D) views
        self.schedule = router.attention_schedule(q, k, v)
        out, self.arrays = attention.attention(q, k, v, attn_mask, allowed, is_causal, scale, dropout_p,
                                               self.schedule)
        return kernels.merge_heads(out)  # (B, Lq, H·D)

    def backward(self, grad):
        needs = self.needs_grads()
        mask_shape = self.parents[3].shape if len(needs) > 3 and needs[3] else None
        grads = attention.attention_backward(kernels.split_heads(grad, self.num_heads), self.arrays, self.schedule,
                                             self.scale, mask_shape=mask_shape)
        merged = tuple(kernels.merge_heads(g) if need else None for g, need in zip(grads[:3], needs))  # (B, L, H·D)
        return merged + (grads[3],) if len(needs) > 3 else merged  # the mask's, summed to its shape

    def reference(self, q, k, v, attn_mask=None):
        H = self.num_heads
        return merge_heads(attention_reference(self, split_heads(q, H), split_heads(k, H), split_heads(v, H),
                                               attn_mask))  # (B, Lq, H·D)


class PackedSelfAttention(Function):
    """``Attention`` for multi-head self-attention: queries, keys and values arrive packed as one
    ``qkv (3, B, H, L, D)`` (``InProjection``'s output) and the heads leave merged, ``(B, L, H·D)``
    (``fast.attention.packed_attention``). ``forward(qkv, attn_mask=None, *, allowed, is_causal, scale,
    dropout_p)`` as ``Attention``'s.

    The gradient goes back packed the same way, laid out as ``qkv`` is, so that the projection's
    backward sees it as one ``(B·L, 3·H·D)`` matrix without a copy.
    """

    saves_output = True  # backward reads the output (``self.arrays.out``, a view of it; see Function)

    def forward(self, qkv, attn_mask=None, *, allowed, is_causal, scale, dropout_p):
        self.scale, self.allowed, self.is_causal, self.dropout_p = scale, allowed, is_causal, dropout_p
        self.rng_state = backend.get_rng_state() if dropout_p else None  # (for ``reference``: the same draw)
        self.schedule = router.packed_attention_schedule(qkv)
        merged, self.arrays = attention.packed_attention(qkv, attn_mask, allowed, is_causal, scale, dropout_p,
                                                         self.schedule)
        return merged  # (B, L, H·D); backward reads it (rowsum(G ∘ O))

    def backward(self, grad):
        needs_mask = len(self.parents) > 1 and self.needs_grad(1)
        return attention.packed_attention_backward(grad, self.arrays, self.schedule, self.scale,
                                                   mask_shape=self.parents[1].shape if needs_mask else None)

    def reference(self, qkv, attn_mask=None):
        return merge_heads(attention_reference(self, qkv[0], qkv[1], qkv[2], attn_mask))  # (B, L, H·D)


def packed_self_attention(qkv, attn_mask=None, dropout_p=0.0, is_causal=False):
    """Multi-head self-attention from packed ``qkv (3, B, H, L, D)`` to merged heads ``(B, L, H·D)``,
    weights not returned: ``PackedSelfAttention``, one node. ``attn_mask`` as in
    ``scaled_dot_product_attention``, broadcasting to ``(B, H, L, L)``; ``scale = 1/√D``."""
    _, B, H, L, D = qkv.shape
    attn_mask = checked_mask(attn_mask, qkv, (B, H, L, L))
    float_mask, allowed = split_mask(attn_mask)
    return PackedSelfAttention.apply(
        qkv, *float_mask, allowed=allowed, is_causal=is_causal, scale=1.0 / math.sqrt(D), dropout_p=float(dropout_p)
    )  # (B, L, H·D)
