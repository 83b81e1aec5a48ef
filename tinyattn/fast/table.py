"""The fast layer's rows of the table: for each reference unit, the router's test and the fused form that runs.

``register()`` (called once, by ``tinyattn.fast``'s ``__init__``) puts them into ``tinyattn.dispatch``:

    unit (reference)                               fast form                         the router's test
    F.linear, nn.Linear (F._linear)                fast.Linear                       (always)
    F.layer_norm, nn.LayerNorm (F._layer_norm)     fast.Normalize                    (always)
    F.cross_entropy (F._cross_entropy)             fast.CrossEntropy                 (always)
    attention's softmax (F._softmax_over_allowed)  fast.MaskedSoftmax                (always)
    heads split and merged (attention._split_heads, _merge_heads)
                                                   fast.SplitHeads, fast.MergeHeads  (always)
    scaled dot-product attention (F._attention)    fast.Attention                    why_not_whole_attention
                                                   fast.BlockedAttention             why_not_blocked_attention
    nn.MultiHeadAttention,                         the module's own forward, no fused
      nn.TransformerEncoderLayer,                    node inside (reference_lines)     why_not_reference_lines
      nn.TransformerDecoderLayer                     (tried first)
    nn.MultiHeadAttention                          fast.InProjection + PackedSelfAttention
                                                                                     why_not_packed_self_attention
    nn.TransformerEncoderLayer                     fast.SelfAttentionBlock, FeedForwardBlock
                                                                                     why_not_encoder_layer
    nn.TransformerDecoderLayer                     the same two blocks               why_not_decoder_layer
    nn.TransformerEncoder                          fast.encoder_on_real_tokens       why_not_encoder

(always): whenever fast paths are on; the row has no test.

A layer's row composes the layer as its reference ``forward`` does, with each residual block that the
router allows as one fused node and the layer's own lines for the other. A module whose gradient is being
differentiated again (a backward with ``create_graph=True`` after each call) runs its own lines instead,
with no fused node inside: a fused node would be recomputed by its reference definition there anyway.
"""

from .. import dispatch
from ..masks import per_batch_mask, split_mask
from ..nn import attention as _attention_module
from ..nn import functional as F
from ..nn import transformer as _transformer
from ..tensor import Tensor
from . import router
from .blocked import blocked_attention
from .blocks import encoder_on_real_tokens, feed_forward_block, self_attention_block
from .nodes import (
    Attention,
    CrossEntropy,
    InProjection,
    Linear,
    MaskedSoftmax,
    MergeHeads,
    Normalize,
    SplitHeads,
    packed_self_attention,
)

# ----------------------------------------------------------------------------- functions


def linear(input, weight, bias):
    return Linear.apply(input, weight) if bias is None else Linear.apply(input, weight, bias)


def layer_norm(input, ndim, weight, bias, eps):
    if weight is not None and bias is not None:
        return Normalize.apply(input, weight, bias, ndim=ndim, eps=eps)  # (…, *normalized_shape)
    output = Normalize.apply(input, ndim=ndim, eps=eps)
    if weight is not None:
        output = output * weight
    return output if bias is None else output + bias


def cross_entropy(logits, target, ignore_index, reduction, label_smoothing):
    return CrossEntropy.apply(logits, target=target._data, ignore_index=ignore_index, reduction=reduction,
                              label_smoothing=label_smoothing)


def split_heads(x, num_heads):
    return SplitHeads.apply(x, num_heads=num_heads)


def merge_heads(x):
    return MergeHeads.apply(x)


def masked_softmax(scores, allowed):
    return MaskedSoftmax.apply(scores, *(() if allowed is None else (Tensor._wrap(allowed),)))


def attention_blocked(query, key, value, attn_mask, dropout_p, is_causal, scale, need_weights):
    return blocked_attention(query, key, value, attn_mask, is_causal, scale), None  # keys per tile: the router's


def attention_fused(query, key, value, attn_mask, dropout_p, is_causal, scale, need_weights):
    float_mask, allowed = split_mask(attn_mask)
    options = dict(allowed=allowed, is_causal=is_causal, scale=scale, dropout_p=dropout_p)
    return Attention.apply(query, key, value, *float_mask, **options), None  # one node


# ----------------------------------------------------------------------------- layers


def reference_lines(unit):
    """The row's run for the module class ``unit``: its ``forward`` with the table not read inside
    (``dispatch.reference_only``), so that every part runs its reference definition and records the graph
    that a ``create_graph`` walk differentiates as it is. (``unit.forward``, not the module's class's: compat's
    layers run the native class's rows on native arguments.)"""
    def run(module, *args, **kwargs):
        with dispatch.reference_only():
            return unit.forward(module, *args, **kwargs)
    return run


def multi_head_attention(module, query, key=None, value=None, attn_mask=None, is_causal=False, need_weights=True):
    """Self-attention without the weights: q, k and v by one GEMM, then attention and the heads merged by one node."""
    q, k, v = module.q_proj, module.k_proj, module.v_proj
    params = (q.weight, k.weight, v.weight) + ((q.bias, k.bias, v.bias) if q.bias is not None else ())
    qkv = InProjection.apply(query, *params, num_heads=module.num_heads)  # (3, B, H, L, D)
    dropout_p = module.dropout if module.training else 0.0
    heads = packed_self_attention(qkv, per_batch_mask(attn_mask), dropout_p, is_causal)  # (B, L, E)
    return module.out_proj(heads), None


def _own_self_attention_residual(layer, x, attn_mask, is_causal):
    """The layer's own lines for its self-attention residual (no fused node)."""
    if layer.norm_first:
        return x + layer._sa_block(layer.norm1(x), attn_mask, is_causal)
    return layer.norm1(x + layer._sa_block(x, attn_mask, is_causal))


def _own_feed_forward_residual(layer, x, norm):
    """The layer's own lines for its feed-forward residual (no fused node)."""
    if layer.norm_first:
        return x + layer._ff_block(norm(x))
    return norm(x + layer._ff_block(x))


def encoder_layer(layer, src, src_mask=None, is_causal=False):
    route = router.answered(router.encoder_layer, layer, src, src_mask)
    if route.self_attention_block:  # one fused node, else the layer's own lines
        x = self_attention_block(src, layer.norm1, layer.self_attn, src_mask, is_causal, layer.norm_first,
                                 products_on_pool=route.self_attention_on_pool)
    else:
        x = _own_self_attention_residual(layer, src, src_mask, is_causal)  # (B, S, E)
    activation = route.feed_forward_block  # the activation's name ("relu", "gelu", "gelu_tanh"), or None
    if activation:
        return feed_forward_block(x, layer.norm2, layer.linear1, layer.linear2, layer.norm_first, activation,
                                  products_on_pool=route.feed_forward_on_pool)
    return _own_feed_forward_residual(layer, x, layer.norm2)  # (B, S, E)


def decoder_layer(layer, tgt, memory, tgt_mask=None, memory_mask=None, tgt_is_causal=False):
    route = router.answered(router.decoder_layer, layer, tgt, tgt_mask)
    if route.self_attention_block:
        x = self_attention_block(tgt, layer.norm1, layer.self_attn, tgt_mask, tgt_is_causal, layer.norm_first,
                                 products_on_pool=route.self_attention_on_pool)
    else:
        x = _own_self_attention_residual(layer, tgt, tgt_mask, tgt_is_causal)  # (B, T, E)
    if layer.norm_first:
        x = x + layer._ca_block(layer.norm2(x), memory, memory_mask)
    else:
        x = layer.norm2(x + layer._ca_block(x, memory, memory_mask))
    activation = route.feed_forward_block
    if activation:
        return feed_forward_block(x, layer.norm3, layer.linear1, layer.linear2, layer.norm_first, activation,
                                  products_on_pool=route.feed_forward_on_pool)
    return _own_feed_forward_residual(layer, x, layer.norm3)  # (B, T, E)


def encoder(module, src, mask=None, is_causal=False):
    real, activations = router.answered(lambda *args: router.encoder(*args, is_causal)[1:], module, src, mask)
    if activations is None:  # (the module changed between its test and this call, in another thread)
        return type(module).forward(module, src, mask, is_causal)
    x = encoder_on_real_tokens(module.layers, activations, src, mask, real)  # zeros at the padding
    return x if module.norm is None else module.norm(x)  # (B, S, E)


def register():
    """Put the fast layer's rows into the table (once)."""
    rows = [
        (F._linear, "fast.Linear", None, linear),  # (None: whenever fast paths are on)
        (F._layer_norm, "fast.Normalize", None, layer_norm),
        (F._cross_entropy, "fast.CrossEntropy", None, cross_entropy),
        (F._softmax_over_allowed, "fast.MaskedSoftmax", None, masked_softmax),
        (_attention_module._split_heads, "fast.SplitHeads", None, split_heads),
        (_attention_module._merge_heads, "fast.MergeHeads", None, merge_heads),
        (F._attention, "fast.Attention", router.why_not_whole_attention, attention_fused),  # (the common one first)
        (F._attention, "fast.BlockedAttention", router.why_not_blocked_attention, attention_blocked),
        *((unit, f"the reference lines, no fused node inside ({name})", router.why_not_reference_lines,
           reference_lines(unit)) for unit, name in ((_attention_module.MultiHeadAttention, "multi-head attention"),
                                               (_transformer.TransformerEncoderLayer, "encoder layer"),
                                               (_transformer.TransformerDecoderLayer, "decoder layer"))),
        (_attention_module.MultiHeadAttention, "fast.InProjection + fast.PackedSelfAttention",
         router.why_not_packed_self_attention, multi_head_attention),
        (_transformer.TransformerEncoderLayer, "fast.SelfAttentionBlock, fast.FeedForwardBlock (encoder layer)",
         router.why_not_encoder_layer, encoder_layer),
        (_transformer.TransformerDecoderLayer, "fast.SelfAttentionBlock, fast.FeedForwardBlock (decoder layer)",
         router.why_not_decoder_layer, decoder_layer),
        (_transformer.TransformerEncoder, "fast.encoder_on_real_tokens", router.why_not_encoder, encoder),
    ]
    for unit, name, why_not, run in rows:
        dispatch.register(unit, name, why_not, run)
