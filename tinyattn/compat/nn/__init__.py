"""``torch.nn`` with PyTorch's conventions: adapters over the native layers.

* ``Module``: the native one, with PyTorch's state-dict layout (``in_proj_weight``…, through
  ``tinyattn.interop``), so ``model.load_state_dict({k: v.numpy() for k, v in torch_sd.items()})``
  loads a torch model's weights directly.
* ``MultiheadAttention`` and the Transformer layers: sequence-first unless ``batch_first=True``;
  a boolean mask marks with ``True`` the positions that are **masked** (the native layers'
  ``True`` means *may attend*); ``key_padding_mask`` ``(B, S)``; attention weights averaged over
  heads. Each converts its arguments and calls the native layer it inherits from.
"""

from collections import OrderedDict

from ... import nn as _native
from ...creation import full
from ...interop import from_torch, to_torch
from ...nn import (  # noqa: F401
    GELU,
    CrossEntropyLoss,
    Dropout,
    Embedding,
    Flatten,
    Identity,
    KLDivLoss,
    LayerNorm,
    Linear,
    LogSoftmax,
    MSELoss,
    NLLLoss,
    Parameter,
    ReLU,
    Softmax,
    Tanh,
)
from ...ops_extra import triu
from . import functional, init, utils  # noqa: F401


class Module(_native.Module):
    """The native ``Module`` whose ``state_dict`` and ``load_state_dict`` speak PyTorch's key layout."""

    def state_dict(self):
        return OrderedDict(to_torch(super().state_dict()))

    def load_state_dict(self, state_dict, strict=True):
        return super().load_state_dict(from_torch(state_dict), strict=strict)


class Sequential(Module, _native.Sequential):
    pass


class ModuleList(Module, _native.ModuleList):
    pass


class ModuleDict(Module):
    """Submodules by name, in insertion order."""

    def __init__(self, modules=None):
        super().__init__()
        for name, module in (modules or {}).items():
            self.add_module(name, module)

    def __getitem__(self, name):
        return self._modules[name]

    def __setitem__(self, name, module):
        self.add_module(name, module)

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules)

    def __contains__(self, name):
        return name in self._modules

    def keys(self):
        return self._modules.keys()

    def values(self):
        return self._modules.values()

    def items(self):
        return self._modules.items()


def _native_mask(attn_mask, key_padding_mask, batch, num_heads):
    """PyTorch's masks as one native mask (bool ``True`` = may attend, or float added), ``(B, H|1, L|1, S)``.

    ``attn_mask``: ``(L, S)`` or ``(B·H, L, S)``; ``key_padding_mask``: ``(B, S)``. A boolean mask
    is inverted; a float one is added. A boolean and a float mask together become one float mask."""
    masks = []
    if attn_mask is not None:
        if attn_mask.ndim == 3:
            attn_mask = attn_mask.reshape(batch, num_heads, *attn_mask.shape[1:])  # (B, H, L, S)
        masks.append(attn_mask)
    if key_padding_mask is not None:
        masks.append(key_padding_mask.reshape(batch, 1, 1, key_padding_mask.shape[-1]))  # (B, 1, 1, S)
    masks = [~m if m.dtype == bool else m for m in masks]
    if len(masks) < 2:
        return masks[0] if masks else None
    first, second = masks
    if first.dtype == bool and second.dtype == bool:
        return first & second
    float_mask = first if first.dtype != bool else second
    bool_mask = second if first.dtype != bool else first
    return float_mask.masked_fill(~bool_mask, float("-inf"))


class MultiheadAttention(Module, _native.MultiHeadAttention):
    """``torch.nn.MultiheadAttention``: ``forward(query, key, value, key_padding_mask=None, need_weights=True,
    attn_mask=None, average_attn_weights=True, is_causal=False)`` → ``(output, weights or None)``.

    Inputs are ``(L, B, E)`` (``(B, L, E)`` with ``batch_first=True``); weights are ``(B, L, S)``
    (averaged over heads) or ``(B, H, L, S)``. A query whose keys are all masked gets zeros here
    (PyTorch gives NaN).
    """

    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, add_bias_kv=False, add_zero_attn=False,
                 kdim=None, vdim=None, batch_first=False, device=None, dtype=None):
        if add_bias_kv or add_zero_attn:
            raise NotImplementedError("MultiheadAttention: add_bias_kv and add_zero_attn are not supported")
        super().__init__(embed_dim, num_heads, dropout=dropout, bias=bias, kdim=kdim, vdim=vdim, device=device,
                         dtype=dtype)
        self.batch_first = batch_first

    def forward(self, query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
                average_attn_weights=True, is_causal=False):
        if not self.batch_first:  # (L, B, E) -> (B, L, E)
            query, key, value = query.transpose(0, 1), key.transpose(0, 1), value.transpose(0, 1)
        mask = _native_mask(attn_mask, key_padding_mask, query.shape[0], self.num_heads)
        output, weights = super().forward(query, key, value, attn_mask=mask, is_causal=is_causal and mask is None,
                                          need_weights=need_weights)  # (B, L, E), (B, H, L, S)
        if not self.batch_first:
            output = output.transpose(0, 1)
        if weights is not None and average_attn_weights:
            weights = weights.mean(dim=1)  # (B, L, S)
        return output, weights


def _batch_first(x, batch_first):
    return x if batch_first else x.transpose(0, 1)


class TransformerEncoderLayer(Module, _native.TransformerEncoderLayer):
    """``torch.nn.TransformerEncoderLayer``: ``forward(src, src_mask=None, src_key_padding_mask=None,
    is_causal=False)``, sequence-first unless ``batch_first``, ``True`` = masked."""

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation="relu", layer_norm_eps=1e-5,
                 batch_first=False, norm_first=False, bias=True, device=None, dtype=None):
        if not bias:
            raise NotImplementedError("TransformerEncoderLayer: bias=False is not supported")
        super().__init__(d_model, nhead, dim_feedforward=dim_feedforward, dropout=dropout, activation=activation,
                         layer_norm_eps=layer_norm_eps, norm_first=norm_first, device=device, dtype=dtype)
        self.batch_first = batch_first

    def forward(self, src, src_mask=None, src_key_padding_mask=None, is_causal=False):
        x = _batch_first(src, self.batch_first)  # (B, S, E)
        mask = _native_mask(src_mask, src_key_padding_mask, x.shape[0], self.self_attn.num_heads)
        x = super().forward(x, src_mask=mask, is_causal=is_causal and src_mask is None)
        return _batch_first(x, self.batch_first)


class TransformerDecoderLayer(Module, _native.TransformerDecoderLayer):
    """``torch.nn.TransformerDecoderLayer`` (its ``multihead_attn`` is the native ``cross_attn``)."""

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation="relu", layer_norm_eps=1e-5,
                 batch_first=False, norm_first=False, bias=True, device=None, dtype=None):
        if not bias:
            raise NotImplementedError("TransformerDecoderLayer: bias=False is not supported")
        super().__init__(d_model, nhead, dim_feedforward=dim_feedforward, dropout=dropout, activation=activation,
                         layer_norm_eps=layer_norm_eps, norm_first=norm_first, device=device, dtype=dtype)
        self.batch_first = batch_first

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal=False, memory_is_causal=False):
        x, memory = _batch_first(tgt, self.batch_first), _batch_first(memory, self.batch_first)  # (B, T|S, E)
        heads = self.self_attn.num_heads
        self_mask = _native_mask(tgt_mask, tgt_key_padding_mask, x.shape[0], heads)
        cross_mask = _native_mask(memory_mask, memory_key_padding_mask, x.shape[0], heads)
        x = super().forward(x, memory, tgt_mask=self_mask, memory_mask=cross_mask,
                            tgt_is_causal=tgt_is_causal and tgt_mask is None)
        return _batch_first(x, self.batch_first)


class TransformerEncoder(Module, _native.TransformerEncoder):
    """``torch.nn.TransformerEncoder``: each layer gets PyTorch's arguments."""

    def __init__(self, encoder_layer, num_layers, norm=None, enable_nested_tensor=True, mask_check=True):
        super().__init__(encoder_layer, num_layers, norm=norm)

    def forward(self, src, mask=None, src_key_padding_mask=None, is_causal=None):
        x = src
        for layer in self.layers:
            x = layer(x, src_mask=mask, src_key_padding_mask=src_key_padding_mask, is_causal=bool(is_causal))
        return x if self.norm is None else self.norm(x)


class TransformerDecoder(Module, _native.TransformerDecoder):
    """``torch.nn.TransformerDecoder``: each layer gets PyTorch's arguments."""

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal=None, memory_is_causal=False):
        x = tgt
        for layer in self.layers:
            x = layer(x, memory, tgt_mask=tgt_mask, memory_mask=memory_mask, tgt_key_padding_mask=tgt_key_padding_mask,
                      memory_key_padding_mask=memory_key_padding_mask, tgt_is_causal=bool(tgt_is_causal))
        return x if self.norm is None else self.norm(x)


class Transformer(Module):
    """``torch.nn.Transformer``: an encoder and a decoder stack of the layers above, each with a final LayerNorm."""

    def __init__(self, d_model=512, nhead=8, num_encoder_layers=6, num_decoder_layers=6, dim_feedforward=2048,
                 dropout=0.1, activation="relu", custom_encoder=None, custom_decoder=None, layer_norm_eps=1e-5,
                 batch_first=False, norm_first=False, bias=True, device=None, dtype=None):
        super().__init__()
        layer = dict(dim_feedforward=dim_feedforward, dropout=dropout, activation=activation,
                     layer_norm_eps=layer_norm_eps, batch_first=batch_first, norm_first=norm_first, bias=bias,
                     device=device, dtype=dtype)
        self.encoder = custom_encoder or TransformerEncoder(
            TransformerEncoderLayer(d_model, nhead, **layer), num_encoder_layers,
            LayerNorm(d_model, eps=layer_norm_eps, device=device, dtype=dtype))
        self.decoder = custom_decoder or TransformerDecoder(
            TransformerDecoderLayer(d_model, nhead, **layer), num_decoder_layers,
            LayerNorm(d_model, eps=layer_norm_eps, device=device, dtype=dtype))
        self.d_model, self.nhead, self.batch_first = d_model, nhead, batch_first

    def forward(self, src, tgt, src_mask=None, tgt_mask=None, memory_mask=None, src_key_padding_mask=None,
                tgt_key_padding_mask=None, memory_key_padding_mask=None, src_is_causal=None, tgt_is_causal=None,
                memory_is_causal=False):
        memory = self.encoder(src, mask=src_mask, src_key_padding_mask=src_key_padding_mask, is_causal=src_is_causal)
        return self.decoder(tgt, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                            tgt_key_padding_mask=tgt_key_padding_mask,
                            memory_key_padding_mask=memory_key_padding_mask, tgt_is_causal=tgt_is_causal)

    @staticmethod
    def generate_square_subsequent_mask(sz, device=None, dtype=None):
        """PyTorch's float causal mask: ``-inf`` above the diagonal, ``0`` elsewhere."""
        return triu(full((sz, sz), float("-inf"), dtype=dtype, device=device), diagonal=1)


def __getattr__(name):
    raise AttributeError(f"tinyattn.compat.nn has no `{name}` yet")
