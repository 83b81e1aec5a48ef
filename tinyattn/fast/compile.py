"""``ta.compile``: speed you ask for. A model's submodules, and the library's functions, swapped once for
their fused forms; nothing else changes.

``compile(model)`` returns a copy of the module tree in which each module whose class has a fused form is an
instance of that form (a subclass of the reference class, whose ``forward`` runs fused nodes), and every other
module is a copy of itself. The copies hold the very same ``Parameter`` and buffer objects and share the hook
tables of the modules they copy: the compiled model trains the original's weights, its ``state_dict`` is the
original's, and ``load_state_dict`` or ``to`` on either changes both. ``train``/``eval`` set the compiled
model's own modes (as on any module tree).

The choice is made once, by class, in ``compile``; what can change from one call to the next (dropout active,
the weights asked for, the dtype, a mask a fused node does not take, a hook on a part, a transform open) is
tested by the fused form on each call, and where its fused nodes do not apply it runs the reference
``forward`` on the spot. Every fused node gives, under ``create_graph=True``, the gradient of its reference
form (``Function.reference``): gradient penalties and higher order see the reference's numbers.

    reference (nn)                 fused form (fast.compile)        its fused nodes
    nn.Linear                      Linear                           fast.Linear
    nn.LayerNorm                   LayerNorm                        fast.Normalize
    nn.MultiHeadAttention          MultiHeadAttention               fast.InProjection + fast.PackedSelfAttention,
                                                                    fast.HeadsAttention, fast.Attention
    nn.TransformerEncoderLayer     TransformerEncoderLayer          fast.SelfAttentionBlock, fast.FeedForwardBlock
    nn.TransformerDecoderLayer     TransformerDecoderLayer          the same two blocks
    nn.TransformerEncoder          TransformerEncoder               fast.encoder_on_real_tokens (inference)
    F.linear, F.layer_norm         linear, layer_norm               fast.Linear, fast.Normalize
    F.cross_entropy                cross_entropy                    fast.CrossEntropy
    F.scaled_dot_product_attention scaled_dot_product_attention     fast.Attention, fast.BlockedAttention

>>> import tinyattn as ta
>>> layer = ta.nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0)
>>> fast = ta.compile(layer)
>>> x = ta.randn(2, 3, 8, requires_grad=True)
>>> type(layer(x).grad_fn).__name__, type(fast(x).grad_fn).__name__
('Add', 'FeedForwardBlock')
>>> fast.linear1.weight is layer.linear1.weight
True
"""

import functools
import math

from .. import nn
from ..engine import Tensor, transforming
from ..masks import checked_mask, layer_mask, split_mask
from ..nn import functional as F
from ..nn.attention import multi_head_attention
from ..nn.transformer import residual
from . import router
from .blocked import blocked_attention
from .blocks import encoder_on_real_tokens, feed_forward_block, self_attention_block
from .nodes import Attention, CrossEntropy, HeadsAttention, InProjection, Normalize, packed_self_attention
from .nodes import Linear as LinearNode

# ----------------------------------------------------------------------------- functions


def linear(input, weight, bias=None):
    """``F.linear`` as one ``fast.Linear`` node; any other case (a bias that broadcasts, mixed dtypes, bad input)
    runs ``F.linear``, with its errors."""
    if transforming() or router.why_not_linear(input, weight, bias):
        return F.linear(input, weight, bias)
    return linear_node(input, weight, bias)


def linear_node(input, weight, bias):
    """``x Wᵀ + b`` as one ``fast.Linear`` node, on arguments ``router.why_not_linear`` accepts."""
    return LinearNode.apply(input, weight) if bias is None else LinearNode.apply(input, weight, bias)


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    """``F.layer_norm`` as one ``fast.Normalize`` node (weight and bias inside it), else ``F.layer_norm``."""
    if type(normalized_shape) is int:
        normalized_shape = (normalized_shape,)
    if transforming() or router.why_not_layer_norm(input, normalized_shape, weight, bias):
        return F.layer_norm(input, normalized_shape, weight, bias, eps)
    return normalized(input, len(normalized_shape), weight, bias, eps)


def normalized(input, ndim, weight, bias, eps):
    """LayerNorm over the last ``ndim`` axes as one ``fast.Normalize`` node (weight and bias inside it when both
    are given), on arguments ``router.why_not_layer_norm`` accepts."""
    if weight is not None and bias is not None:
        return Normalize.apply(input, weight, bias, ndim=ndim, eps=eps)  # (…, *normalized_shape)
    output = Normalize.apply(input, ndim=ndim, eps=eps)
    if weight is not None:
        output = output * weight
    return output if bias is None else output + bias


def cross_entropy(input, target, ignore_index=-100, reduction="mean", label_smoothing=0.0):
    """``F.cross_entropy`` as one ``fast.CrossEntropy`` node (its gradient ``p - onehot`` written out), else
    ``F.cross_entropy``."""
    if transforming() or router.why_not_cross_entropy(input, target, ignore_index, reduction, label_smoothing):
        return F.cross_entropy(input, target, ignore_index, reduction, label_smoothing)
    target = target._data if isinstance(target, Tensor) else target
    return CrossEntropy.apply(input, target=target, ignore_index=ignore_index, reduction=reduction,
                              label_smoothing=label_smoothing)


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                                 need_weights=True):
    """``F.scaled_dot_product_attention``, its arguments checked by the same function
    (``F.attention_arguments``), then ``attention``."""
    attn_mask, dropout_p, scale = F.attention_arguments(query, key, value, attn_mask, dropout_p, scale)
    return attention(query, key, value, attn_mask, dropout_p, is_causal, scale, need_weights)


def attention(query, key, value, attn_mask, dropout_p, is_causal, scale, need_weights):
    """Attention on checked arguments: one ``fast.Attention`` node over the whole scores, or
    ``fast.BlockedAttention`` a block of keys at a time (long keys), or the definition (``F.attention_definition``:
    the weights asked for, mixed dtypes, a transform open)."""
    args = (query, key, value, attn_mask, dropout_p, is_causal, scale, need_weights)
    if transforming():
        return F.attention_definition(*args)
    if router.why_not_whole_attention(*args) is None:
        float_mask, allowed = split_mask(attn_mask)
        return Attention.apply(query, key, value, *float_mask, allowed=allowed, is_causal=is_causal, scale=scale,
                               dropout_p=dropout_p), None
    if router.why_not_blocked_attention(*args) is None:
        return blocked_attention(query, key, value, attn_mask, is_causal, scale), None
    return F.attention_definition(*args)


FUNCTIONS = {F.linear: linear, F.layer_norm: layer_norm, F.cross_entropy: cross_entropy,
             F.scaled_dot_product_attention: scaled_dot_product_attention}

# ----------------------------------------------------------------------------- modules


def compiled_repr(module):
    """A compiled module's ``repr``: the reference's, with the fused nodes its form may run."""
    return f"{super(type(module), module).__repr__()}  # compiled: {module.fused_nodes}"



class Linear(nn.Linear):
    """``nn.Linear``, compiled: one ``fast.Linear`` node."""

    computes_as = compiled_from = nn.Linear
    fused_nodes = "fast.Linear"
    __repr__ = compiled_repr

    def forward(self, input):
        if transforming() or router.why_not_linear(input, self.weight, self.bias):
            return nn.Linear.forward(self, input)
        return linear_node(input, self.weight, self.bias)


class LayerNorm(nn.LayerNorm):
    """``nn.LayerNorm``, compiled: one ``fast.Normalize`` node."""

    computes_as = compiled_from = nn.LayerNorm
    fused_nodes = "fast.Normalize"
    __repr__ = compiled_repr

    def forward(self, input):
        if transforming() or router.why_not_layer_norm(input, self.normalized_shape, self.weight, self.bias):
            return nn.LayerNorm.forward(self, input)
        return normalized(input, len(self.normalized_shape), self.weight, self.bias, self.eps)


class MultiHeadAttention(nn.MultiHeadAttention):
    """``nn.MultiHeadAttention``, compiled: self-attention without the weights as ``fast.InProjection`` (q, k
    and v by one GEMM) and ``fast.PackedSelfAttention`` (attention and the heads merged, one node); any other
    call without the weights (cross-attention) as its projections and ``fast.HeadsAttention`` (every head's attention,
    the heads split and merged inside, one node); any other (the weights asked for, a ``kv_cache``, long keys) as the
    reference composes it (``nn.attention.multi_head_attention``), with attention's fused form
    (``scaled_dot_product_attention``)."""

    computes_as = compiled_from = nn.MultiHeadAttention
    fused_nodes = "fast.InProjection + fast.PackedSelfAttention; fast.HeadsAttention; fast.Attention"
    __repr__ = compiled_repr

    def forward(self, query, key=None, value=None, attn_mask=None, is_causal=False, need_weights=True,
                kv_cache=None):
        if transforming():
            return nn.MultiHeadAttention.forward(self, query, key, value, attn_mask, is_causal, need_weights, kv_cache)
        dropout_p = self.dropout if self.training else 0.0
        attn_mask = layer_mask(attn_mask, "MultiHeadAttention")  # the reference's check, on the same mask
        if kv_cache is None and not router.why_not_packed_self_attention(self, query, key, value, attn_mask,
                                                                         is_causal, need_weights):
            q, k, v = self.q_proj, self.k_proj, self.v_proj
            params = (q.weight, k.weight, v.weight) + ((q.bias, k.bias, v.bias) if q.bias is not None else ())
            qkv = InProjection.apply(query, *params, num_heads=self.num_heads)  # (3, B, H, L, D)
            heads = packed_self_attention(qkv, attn_mask, dropout_p, is_causal)  # (B, L, E)
            return self.out_proj(heads), None
        query, key, value = self.inputs(query, key, value)
        q, k, v = self.q_proj(query), self.k_proj(key), self.v_proj(value)  # (B, Lq, E), (B, Lk, E) twice
        if kv_cache is None and not need_weights:
            heads = heads_attention(q, k, v, self.num_heads, attn_mask, dropout_p, is_causal)  # (B, Lq, E) or None
            if heads is not None:
                return self.out_proj(heads), None
        return multi_head_attention(q, k, v, self.num_heads, self.out_proj, attn_mask, dropout_p, is_causal,
                                    need_weights, kv_cache, attention=scaled_dot_product_attention)


def heads_attention(q, k, v, num_heads, attn_mask, dropout_p, is_causal):
    """Every head's attention of projected ``q (B, Lq, E)``, ``k`` and ``v`` ``(B, Lk, E)``, the weights not
    returned, as one ``fast.HeadsAttention`` node (the heads split and merged inside): ``(B, Lq, E)``; ``None`` where
    the whole-matrix attention does not apply (``router.why_not_whole_attention``: dtypes, long keys), and the
    composition runs instead."""
    B, Lq, E = q.shape
    attn_mask = checked_mask(attn_mask, q, (B, num_heads, Lq, k.shape[1]))  # (the reference's check of it)
    scale = 1.0 / math.sqrt(E // num_heads)
    if router.why_not_whole_attention(q, k, v, attn_mask, dropout_p, is_causal, scale, False):
        return None
    float_mask, allowed = split_mask(attn_mask)
    return HeadsAttention.apply(q, k, v, *float_mask, num_heads=num_heads, allowed=allowed, is_causal=is_causal,
                                scale=scale, dropout_p=float(dropout_p))  # (B, Lq, E)


class TransformerEncoderLayer(nn.TransformerEncoderLayer):
    """``nn.TransformerEncoderLayer``, compiled: each residual block the router allows on this call as one fused
    node (``fast.SelfAttentionBlock``, ``fast.FeedForwardBlock``), the layer's own lines for the other."""

    computes_as = compiled_from = nn.TransformerEncoderLayer
    fused_nodes = "fast.SelfAttentionBlock, fast.FeedForwardBlock"
    __repr__ = compiled_repr

    def forward(self, src, src_mask=None, is_causal=False):
        route = None if transforming() else router.encoder_layer(self, src, src_mask)
        if route is None:
            return nn.TransformerEncoderLayer.forward(self, src, src_mask, is_causal)
        x = self_attention_residual(self, route, src, src_mask, is_causal)  # (B, S, E)
        return feed_forward_residual(self, route, x, self.norm2)  # (B, S, E)


class TransformerDecoderLayer(nn.TransformerDecoderLayer):
    """``nn.TransformerDecoderLayer``, compiled: its self-attention and feed-forward residuals as
    ``TransformerEncoderLayer``'s; the cross-attention residual runs the layer's own lines (``cross_attn``
    compiled)."""

    computes_as = compiled_from = nn.TransformerDecoderLayer
    fused_nodes = "fast.SelfAttentionBlock, fast.FeedForwardBlock"
    __repr__ = compiled_repr

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_is_causal=False):
        route = None if transforming() else router.decoder_layer(self, tgt, memory, tgt_mask)
        if route is None:
            return nn.TransformerDecoderLayer.forward(self, tgt, memory, tgt_mask, memory_mask, tgt_is_causal)
        x = self_attention_residual(self, route, tgt, tgt_mask, tgt_is_causal)  # (B, T, E)
        ca_block = functools.partial(self._ca_block, memory=memory, attn_mask=memory_mask)
        x = residual(x, ca_block, self.norm2, self.norm_first)  # (B, T, E)
        return feed_forward_residual(self, route, x, self.norm3)  # (B, T, E)


def self_attention_residual(layer, route, x, attn_mask, is_causal):
    """A layer's self-attention residual: one ``fast.SelfAttentionBlock`` where ``route`` says so, else the
    layer's own lines."""
    if route.self_attention_block:
        return self_attention_block(x, layer.norm1, layer.self_attn, attn_mask, is_causal, layer.norm_first,
                                    products_on_pool=route.self_attention_on_pool)
    sa_block = functools.partial(layer._sa_block, attn_mask=attn_mask, is_causal=is_causal)
    return residual(x, sa_block, layer.norm1, layer.norm_first)


def feed_forward_residual(layer, route, x, norm):
    """A layer's feed-forward residual: one ``fast.FeedForwardBlock`` where ``route`` names its activation,
    else the layer's own lines."""
    if route.feed_forward_block:
        return feed_forward_block(x, norm, layer.linear1, layer.linear2, layer.norm_first, route.feed_forward_block,
                                  products_on_pool=route.feed_forward_on_pool)
    return residual(x, layer._ff_block, norm, layer.norm_first)


class TransformerEncoder(nn.TransformerEncoder):
    """``nn.TransformerEncoder``, compiled: where its outputs at the padding are zeros (inference on a padded
    batch, ``nn.transformer.padding_to_zero``), the real tokens alone (``fast.encoder_on_real_tokens``); else
    its reference ``forward``, each layer compiled."""

    computes_as = compiled_from = nn.TransformerEncoder
    fused_nodes = "fast.encoder_on_real_tokens"
    __repr__ = compiled_repr

    def forward(self, src, mask=None, is_causal=False):
        reason, real, activations = router.encoder(self, src, mask, is_causal)
        if reason is not None or transforming():
            return nn.TransformerEncoder.forward(self, src, mask, is_causal)
        x = encoder_on_real_tokens(self.layers, activations, src, mask, real)  # zeros at the padding
        return x if self.norm is None else self.norm(x)  # (B, S, E)


MODULES = {nn.Linear: Linear, nn.LayerNorm: LayerNorm, nn.MultiHeadAttention: MultiHeadAttention,
           nn.TransformerEncoderLayer: TransformerEncoderLayer, nn.TransformerDecoderLayer: TransformerDecoderLayer,
           nn.TransformerEncoder: TransformerEncoder}


def compile(model=None, **options):
    """``model`` with each submodule that has a fused form replaced by it (see the module's docstring), or, for
    a library function that has one (``F.scaled_dot_product_attention``, ``F.layer_norm``, ``F.linear``,
    ``F.cross_entropy``), that form; any other function comes back as it is. ``options`` (PyTorch's
    ``fullgraph``, ``mode``…) are accepted and change nothing. Without ``model``, a decorator.

    A subclass whose own ``forward`` (or block methods) differ from the library's keeps its class: it computes
    something else, and ``ta.explain`` names it so. ``compiled.compile_notes`` maps each submodule's dotted name
    to what ``compile`` chose for it.

    Args:
        model: an ``nn.Module``, a library function, or ``None`` for a decorator.
        **options: PyTorch's options, accepted and ignored.

    >>> import tinyattn as ta
    >>> model = ta.compile(ta.nn.Linear(2, 2))
    >>> model(ta.zeros(1, 2)).shape
    (1, 2)
    >>> model
    Linear(in_features=2, out_features=2, bias=True)  # compiled: fast.Linear
    """
    if model is None:
        return lambda model: compile(model, **options)
    if isinstance(model, nn.Module):
        notes = {}
        compiled = _compiled(model, "", notes)
        object.__setattr__(compiled, "compile_notes", notes)
        return compiled
    if not callable(model):
        raise TypeError(f"compile: expected a Module or a function, got {type(model).__name__}")
    return FUNCTIONS.get(model, model)


def _compiled(module, name, notes):
    """A copy of ``module`` (its class, or its fused form), holding its parameters, buffers and hook tables,
    with its submodules compiled in turn."""
    module.own_hook_tables()  # (so that a hook added to either one later fires on both)
    cls = type(module)
    fused, notes[name] = _fused_class(module)
    copy = object.__new__(fused or cls)
    state = dict(module.__dict__)
    state["_parameters"] = type(module._parameters)(module._parameters)
    state["_buffers"] = type(module._buffers)(module._buffers)
    state["_non_persistent_buffers"] = set(module._non_persistent_buffers)
    state["_modules"] = type(module._modules)()
    state.pop("compile_notes", None)
    for child_name, child in module._modules.items():
        child = None if child is None else _compiled(child, f"{name}.{child_name}" if name else child_name, notes)
        state["_modules"][child_name] = state[child_name] = child
    copy.__dict__.update(state)
    return copy


def _fused_class(module):
    """``(the fused class for module, or None; what compile chose, in words)``."""
    cls = type(module)
    if is_compiled(module):
        return cls, "already compiled"
    native = cls.__dict__.get("computes_as", cls)
    fused = MODULES.get(native)
    if fused is None and any(base in MODULES for base in cls.__mro__[1:]):
        return None, f"reference ({cls.__name__} has a forward of its own)"  # a subclass: it computes something else
    if fused is None:
        return None, "reference (no fused form)"
    if "forward" in module.__dict__:
        return None, "reference (a forward is set on the instance)"
    chosen = f"fast.compile.{fused.__name__}"
    if native is cls:
        return fused, chosen
    # a class that computes the native one's forward in its own conventions (tinyattn.compat's): its own
    # forward converts them and calls ``native_forward``, or it has the native forward as it is
    if "native_forward" in dir(cls):
        return _subclass(cls, native, "native_forward", fused.forward), chosen
    if cls.forward is native.forward:
        return _subclass(cls, native, "forward", fused.forward), chosen
    return None, f"reference ({cls.__name__} has a forward of its own)"


_SUBCLASSES = {}  # (a class with conventions of its own, the method replaced) -> its compiled subclass


def _subclass(cls, native, method, forward):
    """``cls`` with the fused form's ``forward`` as its ``method`` (made once per class)."""
    compiled = _SUBCLASSES.get((cls, method))
    if compiled is None:
        compiled = _SUBCLASSES[cls, method] = type(cls.__name__, (cls,), {
            "__module__": cls.__module__, "__doc__": cls.__doc__, method: forward, "computes_as": native,
            "compiled_from": cls, "fused_nodes": MODULES[native].fused_nodes, "__repr__": compiled_repr})
    return compiled


def compile_in_place(model):
    """``model`` with each of its modules that has a fused form switched to that form's class, in place
    (PyTorch's ``nn.Module.compile``); returns ``model``."""
    for module in model.modules():
        fused, _ = _fused_class(module)
        if fused is not None and fused is not type(module):
            module.__class__ = fused
    return model


def is_compiled(module):
    """Whether ``module`` is of a fused form's class, made by ``compile`` (it names the class it was compiled
    from: ``compiled_from``)."""
    return "compiled_from" in type(module).__dict__

