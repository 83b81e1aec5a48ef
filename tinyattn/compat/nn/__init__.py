"""``torch.nn`` with PyTorch's conventions: adapters over the native layers.

* ``Module``: the native one, with PyTorch's state-dict layout (``in_proj_weight``…, through
  ``tinyattn.interop``), so ``model.load_state_dict({k: v.numpy() for k, v in torch_sd.items()})``
  loads a torch model's weights directly; keys a module already has load as they are.
* ``MultiheadAttention``: PyTorch's parameters (``in_proj_weight``, ``in_proj_bias``, ``bias_k``,
  ``bias_v``, ``out_proj``), projections and extra keys, then the native attention on the heads.
* ``MultiheadAttention`` and the Transformer layers: sequence-first unless ``batch_first=True``;
  a boolean mask marks with ``True`` the positions that are **masked** (the native layers'
  ``True`` means *may attend*); ``key_padding_mask`` ``(B, S)``; attention weights averaged over
  heads. The Transformer layers convert their arguments and call the native layer they inherit from.
"""

from ... import checks as check
from ... import nn as _native
from ...creation import empty, full, zeros
from ...nn.attention import multi_head_attention
from ...nn.functional import legacy_reduction, linear
from ...nn.transformer import padding_to_zero, zeros_at_padding
from ...ops import cat
from ...ops_extra import triu
from ..core.tensor import TWINS, Parameter, as_compat
from ..refusals import refused
from ..scope import missing
from . import attention, functional, init, parallel, parameter, utils  # noqa: F401
from .module import Module
from .parallel import DataParallel  # noqa: F401
from .parameter import Buffer  # noqa: F401
from .rnn import GRU, LSTM, RNN, GRUCell, LSTMCell, RNNBase, RNNCell, RNNCellBase  # noqa: F401


def _compat_layer(native):
    """``native`` (a layer whose conventions are already PyTorch's) as a compat ``Module``: compat
    parameters, PyTorch's state-dict keys; otherwise the native class itself, which ``ta.compile`` and the
    fast layer take it for (``computes_as``). A native layer attached to a compat module takes this class
    (``as_compat``)."""
    doc = (f"``torch.nn.{native.__name__}``: the native ``{native.__module__}.{native.__name__}`` with compat "
           "parameters and PyTorch's state-dict keys (its docstring has the details).")
    twin = type(native.__name__, (Module, native), {"__module__": __name__, "__doc__": doc,
                                                    "computes_as": native})
    TWINS[native] = twin
    return twin


GELU = _compat_layer(_native.GELU)
CrossEntropyLoss = _compat_layer(_native.CrossEntropyLoss)
Dropout = _compat_layer(_native.Dropout)
Embedding = _compat_layer(_native.Embedding)
EmbeddingBag = _compat_layer(_native.EmbeddingBag)
Flatten = _compat_layer(_native.Flatten)
Identity = _compat_layer(_native.Identity)
KLDivLoss = _compat_layer(_native.KLDivLoss)
LayerNorm = _compat_layer(_native.LayerNorm)
LazyLinear = _compat_layer(_native.LazyLinear)
Linear = _compat_layer(_native.Linear)
LogSoftmax = _compat_layer(_native.LogSoftmax)
MSELoss = _compat_layer(_native.MSELoss)
NLLLoss = _compat_layer(_native.NLLLoss)
ReLU = _compat_layer(_native.ReLU)
Softmax = _compat_layer(_native.Softmax)
Tanh = _compat_layer(_native.Tanh)
LazyLinear.cls_to_become = Linear

# the layer families: activations, losses, normalisation, padding, dropout, rearrangements, distances, containers
CELU = _compat_layer(_native.CELU)
ELU = _compat_layer(_native.ELU)
GLU = _compat_layer(_native.GLU)
SELU = _compat_layer(_native.SELU)
Hardshrink = _compat_layer(_native.Hardshrink)
Hardsigmoid = _compat_layer(_native.Hardsigmoid)
Hardswish = _compat_layer(_native.Hardswish)
Hardtanh = _compat_layer(_native.Hardtanh)
LeakyReLU = _compat_layer(_native.LeakyReLU)
LogSigmoid = _compat_layer(_native.LogSigmoid)
Mish = _compat_layer(_native.Mish)
PReLU = _compat_layer(_native.PReLU)
ReLU6 = _compat_layer(_native.ReLU6)
RReLU = _compat_layer(_native.RReLU)
Sigmoid = _compat_layer(_native.Sigmoid)
SiLU = _compat_layer(_native.SiLU)
Softmax2d = _compat_layer(_native.Softmax2d)
Softmin = _compat_layer(_native.Softmin)
Softplus = _compat_layer(_native.Softplus)
Softshrink = _compat_layer(_native.Softshrink)
Softsign = _compat_layer(_native.Softsign)
Tanhshrink = _compat_layer(_native.Tanhshrink)
Threshold = _compat_layer(_native.Threshold)
BCELoss = _compat_layer(_native.BCELoss)
BCEWithLogitsLoss = _compat_layer(_native.BCEWithLogitsLoss)
CosineEmbeddingLoss = _compat_layer(_native.CosineEmbeddingLoss)
GaussianNLLLoss = _compat_layer(_native.GaussianNLLLoss)
HingeEmbeddingLoss = _compat_layer(_native.HingeEmbeddingLoss)
HuberLoss = _compat_layer(_native.HuberLoss)
L1Loss = _compat_layer(_native.L1Loss)
MarginRankingLoss = _compat_layer(_native.MarginRankingLoss)
MultiLabelMarginLoss = _compat_layer(_native.MultiLabelMarginLoss)
MultiLabelSoftMarginLoss = _compat_layer(_native.MultiLabelSoftMarginLoss)
MultiMarginLoss = _compat_layer(_native.MultiMarginLoss)
PoissonNLLLoss = _compat_layer(_native.PoissonNLLLoss)
SmoothL1Loss = _compat_layer(_native.SmoothL1Loss)
SoftMarginLoss = _compat_layer(_native.SoftMarginLoss)
TripletMarginLoss = _compat_layer(_native.TripletMarginLoss)
TripletMarginWithDistanceLoss = _compat_layer(_native.TripletMarginWithDistanceLoss)
BatchNorm1d = _compat_layer(_native.BatchNorm1d)
BatchNorm2d = _compat_layer(_native.BatchNorm2d)
BatchNorm3d = _compat_layer(_native.BatchNorm3d)
GroupNorm = _compat_layer(_native.GroupNorm)
InstanceNorm1d = _compat_layer(_native.InstanceNorm1d)
InstanceNorm2d = _compat_layer(_native.InstanceNorm2d)
InstanceNorm3d = _compat_layer(_native.InstanceNorm3d)
LocalResponseNorm = _compat_layer(_native.LocalResponseNorm)
RMSNorm = _compat_layer(_native.RMSNorm)
LazyBatchNorm1d = _compat_layer(_native.LazyBatchNorm1d)
LazyBatchNorm1d.cls_to_become = BatchNorm1d
LazyBatchNorm2d = _compat_layer(_native.LazyBatchNorm2d)
LazyBatchNorm2d.cls_to_become = BatchNorm2d
LazyBatchNorm3d = _compat_layer(_native.LazyBatchNorm3d)
LazyBatchNorm3d.cls_to_become = BatchNorm3d
LazyInstanceNorm1d = _compat_layer(_native.LazyInstanceNorm1d)
LazyInstanceNorm1d.cls_to_become = InstanceNorm1d
LazyInstanceNorm2d = _compat_layer(_native.LazyInstanceNorm2d)
LazyInstanceNorm2d.cls_to_become = InstanceNorm2d
LazyInstanceNorm3d = _compat_layer(_native.LazyInstanceNorm3d)
LazyInstanceNorm3d.cls_to_become = InstanceNorm3d
CircularPad1d = _compat_layer(_native.CircularPad1d)
CircularPad2d = _compat_layer(_native.CircularPad2d)
CircularPad3d = _compat_layer(_native.CircularPad3d)
ConstantPad1d = _compat_layer(_native.ConstantPad1d)
ConstantPad2d = _compat_layer(_native.ConstantPad2d)
ConstantPad3d = _compat_layer(_native.ConstantPad3d)
ReflectionPad1d = _compat_layer(_native.ReflectionPad1d)
ReflectionPad2d = _compat_layer(_native.ReflectionPad2d)
ReflectionPad3d = _compat_layer(_native.ReflectionPad3d)
ReplicationPad1d = _compat_layer(_native.ReplicationPad1d)
ReplicationPad2d = _compat_layer(_native.ReplicationPad2d)
ReplicationPad3d = _compat_layer(_native.ReplicationPad3d)
ZeroPad1d = _compat_layer(_native.ZeroPad1d)
ZeroPad2d = _compat_layer(_native.ZeroPad2d)
ZeroPad3d = _compat_layer(_native.ZeroPad3d)
AlphaDropout = _compat_layer(_native.AlphaDropout)
Dropout1d = _compat_layer(_native.Dropout1d)
Dropout2d = _compat_layer(_native.Dropout2d)
Dropout3d = _compat_layer(_native.Dropout3d)
FeatureAlphaDropout = _compat_layer(_native.FeatureAlphaDropout)
Bilinear = _compat_layer(_native.Bilinear)
CosineSimilarity = _compat_layer(_native.CosineSimilarity)
PairwiseDistance = _compat_layer(_native.PairwiseDistance)
ChannelShuffle = _compat_layer(_native.ChannelShuffle)
PixelShuffle = _compat_layer(_native.PixelShuffle)
PixelUnshuffle = _compat_layer(_native.PixelUnshuffle)
Unflatten = _compat_layer(_native.Unflatten)
ParameterDict = _compat_layer(_native.ParameterDict)
ParameterList = _compat_layer(_native.ParameterList)
Upsample = _compat_layer(_native.Upsample)
AdaptiveLogSoftmaxWithLoss = _compat_layer(_native.AdaptiveLogSoftmaxWithLoss)
UpsamplingNearest2d = _compat_layer(_native.UpsamplingNearest2d)
UpsamplingBilinear2d = _compat_layer(_native.UpsamplingBilinear2d)

# convolution and pooling
Conv1d = _compat_layer(_native.Conv1d)
Conv2d = _compat_layer(_native.Conv2d)
Conv3d = _compat_layer(_native.Conv3d)
ConvTranspose1d = _compat_layer(_native.ConvTranspose1d)
ConvTranspose2d = _compat_layer(_native.ConvTranspose2d)
ConvTranspose3d = _compat_layer(_native.ConvTranspose3d)
LazyConv1d = _compat_layer(_native.LazyConv1d)
LazyConv2d = _compat_layer(_native.LazyConv2d)
LazyConv3d = _compat_layer(_native.LazyConv3d)
LazyConvTranspose1d = _compat_layer(_native.LazyConvTranspose1d)
LazyConvTranspose2d = _compat_layer(_native.LazyConvTranspose2d)
LazyConvTranspose3d = _compat_layer(_native.LazyConvTranspose3d)
for _lazy, _layer in ((LazyConv1d, Conv1d), (LazyConv2d, Conv2d), (LazyConv3d, Conv3d),
                      (LazyConvTranspose1d, ConvTranspose1d), (LazyConvTranspose2d, ConvTranspose2d),
                      (LazyConvTranspose3d, ConvTranspose3d)):
    _lazy.cls_to_become = _layer  # the first call turns it into compat's layer, not the native one
Fold = _compat_layer(_native.Fold)
Unfold = _compat_layer(_native.Unfold)
MaxPool1d = _compat_layer(_native.MaxPool1d)
MaxPool2d = _compat_layer(_native.MaxPool2d)
MaxPool3d = _compat_layer(_native.MaxPool3d)
AvgPool1d = _compat_layer(_native.AvgPool1d)
AvgPool2d = _compat_layer(_native.AvgPool2d)
AvgPool3d = _compat_layer(_native.AvgPool3d)
AdaptiveAvgPool1d = _compat_layer(_native.AdaptiveAvgPool1d)
AdaptiveAvgPool2d = _compat_layer(_native.AdaptiveAvgPool2d)
AdaptiveAvgPool3d = _compat_layer(_native.AdaptiveAvgPool3d)
AdaptiveMaxPool1d = _compat_layer(_native.AdaptiveMaxPool1d)
AdaptiveMaxPool2d = _compat_layer(_native.AdaptiveMaxPool2d)
AdaptiveMaxPool3d = _compat_layer(_native.AdaptiveMaxPool3d)
LPPool1d = _compat_layer(_native.LPPool1d)
LPPool2d = _compat_layer(_native.LPPool2d)
LPPool3d = _compat_layer(_native.LPPool3d)
MaxUnpool1d = _compat_layer(_native.MaxUnpool1d)
MaxUnpool2d = _compat_layer(_native.MaxUnpool2d)
MaxUnpool3d = _compat_layer(_native.MaxUnpool3d)
FractionalMaxPool2d = refused("torch.nn.FractionalMaxPool2d", "pooling over pseudo-random regions is not built; use "
                              "nn.MaxPool2d or nn.AdaptiveMaxPool2d")
FractionalMaxPool3d = refused("torch.nn.FractionalMaxPool3d", "pooling over pseudo-random regions is not built; use "
                              "nn.MaxPool3d or nn.AdaptiveMaxPool3d")



class NLLLoss2d(NLLLoss):
    """PyTorch's deprecated name for ``NLLLoss`` on ``(N, C, H, W)`` inputs (``NLLLoss`` takes them)."""

    def __init__(self, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean"):
        super().__init__(ignore_index, legacy_reduction(size_average, reduce, reduction), weight=weight)


SyncBatchNorm = refused("torch.nn.SyncBatchNorm", "there is one process and no group to synchronise statistics "
                        "over; use nn.BatchNorm1d, nn.BatchNorm2d or nn.BatchNorm3d")


class Sequential(Module, _native.Sequential):
    pass


class ModuleList(Module, _native.ModuleList):
    pass


class Container(Module):
    """PyTorch's deprecated ``nn.Container(**modules)``: a module holding the keyword arguments as submodules
    (``Sequential`` or ``ModuleDict`` are the current forms)."""

    def __init__(self, **kwargs):
        super().__init__()
        for name, module in kwargs.items():
            self.add_module(name, module)


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
        return _rows_masked_as_floats(masks[0]) if masks else None
    first, second = masks
    if first.dtype == bool and second.dtype == bool:
        return _rows_masked_as_floats(first & second)
    float_mask = first if first.dtype != bool else second
    bool_mask = second if first.dtype != bool else first
    return float_mask.masked_fill(~bool_mask, float("-inf"))


def _rows_masked_as_floats(allowed):
    """A native boolean mask that leaves some query no key (which the native layers refuse, as PyTorch's convention
    read the native way) as the float mask of the same meaning: ``0`` where allowed, ``-inf`` elsewhere."""
    if allowed.dtype != bool or allowed.shape[-1] == 0 or bool(allowed.any(-1).all()):
        return allowed
    return zeros(*allowed.shape, device=allowed.device).masked_fill(~allowed, float("-inf"))


def _with_extra_key(mask):
    """A PyTorch-style mask ``(…, S)`` with one more key column that nothing masks: ``False`` or ``0.0``."""
    if mask is None:
        return None
    return cat([mask, zeros(*mask.shape[:-1], 1, dtype=mask.dtype, device=mask.device)], dim=-1)  # (…, S + 1)


class MultiheadAttention(Module):
    """``torch.nn.MultiheadAttention``, with its parameters: ``forward(query, key, value, key_padding_mask=None,
    need_weights=True, attn_mask=None, average_attn_weights=True, is_causal=False)`` → ``(output, weights or None)``.

    Inputs are ``(L, B, E)`` (``(B, L, E)`` with ``batch_first=True``, ``(L, E)`` unbatched); weights
    are ``(B, L, S)`` (averaged over heads) or ``(B, H, L, S)``. A boolean mask marks with ``True``
    the positions that are masked. A query whose keys are all masked gets zeros here (PyTorch: NaN).

    Parameters as PyTorch names and orders them: ``in_proj_weight (3E, E)`` (or ``q_proj_weight
    (E, E)``, ``k_proj_weight (E, kdim)``, ``v_proj_weight (E, vdim)`` when ``kdim`` or ``vdim``
    differ from ``E``), ``in_proj_bias (3E,)``, ``bias_k``, ``bias_v (1, 1, E)`` (``add_bias_kv``),
    ``out_proj``. The adapter projects with them, appends PyTorch's extra keys (``bias_k``/``bias_v``,
    then a zero key and value with ``add_zero_attn``, each with an unmasked mask column), and hands
    the rest to the native ``nn.attention.multi_head_attention``: the attention itself is the native one.

    >>> import tinyattn.compat as torch
    >>> mha = torch.nn.MultiheadAttention(8, 2, add_bias_kv=True)
    >>> [name for name, _ in mha.named_parameters()]
    ['in_proj_weight', 'in_proj_bias', 'bias_k', 'bias_v', 'out_proj.weight', 'out_proj.bias']
    >>> x = torch.randn(5, 3, 8)                                   # (L, B, E)
    >>> out, weights = mha(x, x, x)
    >>> out.shape, weights.shape                                   # a sixth key: bias_k
    ((5, 3, 8), (3, 5, 6))
    """

    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, add_bias_kv=False, add_zero_attn=False,
                 kdim=None, vdim=None, batch_first=False, device=None, dtype=None):
        super().__init__()
        check.attention_sizes("MultiheadAttention", embed_dim, num_heads, dropout)
        self.embed_dim, self.num_heads, self.dropout, self.batch_first = embed_dim, num_heads, dropout, batch_first
        self.head_dim = embed_dim // num_heads
        self.kdim = embed_dim if kdim is None else kdim
        self.vdim = embed_dim if vdim is None else vdim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        factory = dict(device=device, dtype=dtype)
        E = embed_dim
        if self._qkv_same_embed_dim:
            self.in_proj_weight = Parameter(empty(3 * E, E, **factory))
            for name in ("q_proj_weight", "k_proj_weight", "v_proj_weight"):
                self.register_parameter(name, None)
        else:
            self.q_proj_weight = Parameter(empty(E, E, **factory))
            self.k_proj_weight = Parameter(empty(E, self.kdim, **factory))
            self.v_proj_weight = Parameter(empty(E, self.vdim, **factory))
            self.register_parameter("in_proj_weight", None)
        if bias:
            self.in_proj_bias = Parameter(empty(3 * E, **factory))
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = Linear(E, E, bias=bias, **factory)
        if add_bias_kv:
            self.bias_k = Parameter(empty(1, 1, E, **factory))
            self.bias_v = Parameter(empty(1, 1, E, **factory))
        else:
            self.bias_k = self.bias_v = None
        self.add_zero_attn = add_zero_attn
        self._reset_parameters()

    def _reset_parameters(self):
        """PyTorch's: xavier-uniform projections, zero biases, xavier-normal ``bias_k``/``bias_v``."""
        if self._qkv_same_embed_dim:
            init.xavier_uniform_(self.in_proj_weight)
        else:
            for weight in (self.q_proj_weight, self.k_proj_weight, self.v_proj_weight):
                init.xavier_uniform_(weight)
        if self.in_proj_bias is not None:
            init.zeros_(self.in_proj_bias)
            init.zeros_(self.out_proj.bias)
        if self.bias_k is not None:
            init.xavier_normal_(self.bias_k)
            init.xavier_normal_(self.bias_v)

    def forward(self, query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
                average_attn_weights=True, is_causal=False):
        unbatched = query.ndim == 2
        if unbatched:  # (L, E) -> (1, L, E)
            query, key, value = query.unsqueeze(0), key.unsqueeze(0), value.unsqueeze(0)
            key_padding_mask = None if key_padding_mask is None else key_padding_mask.unsqueeze(0)  # (1, S)
        elif not self.batch_first:  # (L, B, E) -> (B, L, E)
            query, key, value = query.transpose(0, 1), key.transpose(0, 1), value.transpose(0, 1)
        B, H = query.shape[0], self.num_heads
        q, k, v = self._in_projection(query, key, value)  # (B, L, E), (B, S, E), (B, S, E)
        if self.bias_k is not None:  # one more key and value, learned
            k = cat([k, self.bias_k.expand(B, 1, self.embed_dim)], dim=1)  # (B, S + 1, E)
            v = cat([v, self.bias_v.expand(B, 1, self.embed_dim)], dim=1)
            attn_mask, key_padding_mask = _with_extra_key(attn_mask), _with_extra_key(key_padding_mask)
        if self.add_zero_attn:  # one more key and value of zeros, in every head
            k = cat([k, zeros(B, 1, self.embed_dim, dtype=k.dtype, device=k.device)], dim=1)  # (B, S + 1, E)
            v = cat([v, zeros(B, 1, self.embed_dim, dtype=v.dtype, device=v.device)], dim=1)
            attn_mask, key_padding_mask = _with_extra_key(attn_mask), _with_extra_key(key_padding_mask)
        mask = _native_mask(attn_mask, key_padding_mask, B, H)  # True = may attend, or float; (B, H|1, L|1, S)
        dropout_p = self.dropout if self.training else 0.0
        output, weights = multi_head_attention(q, k, v, H, self.out_proj, mask, dropout_p, is_causal and mask is None,
                                               need_weights)  # (B, L, E), (B, H, L, S) or None
        if weights is not None and average_attn_weights:
            weights = weights.mean(dim=1)  # (B, L, S)
        if unbatched:
            return output.squeeze(0), None if weights is None else weights.squeeze(0)
        return _batch_first(output, self.batch_first), weights

    def _in_projection(self, query, key, value):
        """``query @ W_qᵀ + b_q`` and the same for keys and values, with PyTorch's packed or separate weights."""
        if self._qkv_same_embed_dim:
            w_q, w_k, w_v = self.in_proj_weight.chunk(3)  # (E, E) each
        else:
            w_q, w_k, w_v = self.q_proj_weight, self.k_proj_weight, self.v_proj_weight
        b_q, b_k, b_v = (None,) * 3 if self.in_proj_bias is None else self.in_proj_bias.chunk(3)  # (E,) each
        return linear(query, w_q, b_q), linear(key, w_k, b_k), linear(value, w_v, b_v)


def _batch_first(x, batch_first):
    return x if batch_first else x.transpose(0, 1)


class TransformerEncoderLayer(Module, _native.TransformerEncoderLayer):
    """``torch.nn.TransformerEncoderLayer``: ``forward(src, src_mask=None, src_key_padding_mask=None,
    is_causal=False)``, sequence-first unless ``batch_first``, ``True`` = masked."""

    computes_as = _native.TransformerEncoderLayer  # its forward converts PyTorch's conventions, then runs:
    native_forward = _native.TransformerEncoderLayer.forward  # (ta.compile puts the fused form's here)

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
        x = self.native_forward(x, src_mask=mask, is_causal=is_causal and src_mask is None)
        return _batch_first(x, self.batch_first)


class TransformerDecoderLayer(Module, _native.TransformerDecoderLayer):
    """``torch.nn.TransformerDecoderLayer`` (its ``multihead_attn`` is the native ``cross_attn``)."""

    computes_as = _native.TransformerDecoderLayer  # as TransformerEncoderLayer's
    native_forward = _native.TransformerDecoderLayer.forward

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
        x = self.native_forward(x, memory, tgt_mask=self_mask, memory_mask=cross_mask,
                                tgt_is_causal=tgt_is_causal and tgt_mask is None)
        return _batch_first(x, self.batch_first)


class TransformerEncoder(Module, _native.TransformerEncoder):
    """``torch.nn.TransformerEncoder``: each layer gets PyTorch's arguments. Where PyTorch's would use
    nested tensors (``padding_to_zero``, with batch-first layers, a ``src_key_padding_mask``
    and no ``mask``), the outputs at the padding are zeros, as PyTorch's are."""

    def __init__(self, encoder_layer, num_layers, norm=None, enable_nested_tensor=True, mask_check=True):
        super().__init__(encoder_layer, num_layers, norm=norm, enable_nested_tensor=enable_nested_tensor)

    def forward(self, src, mask=None, src_key_padding_mask=None, is_causal=None):
        real = None
        padding = src_key_padding_mask  # (B, S): True (or a non-zero float, -inf say) = padding
        if (mask is None and padding is not None and src.ndim == 3
                and getattr(self.layers[0], "batch_first", False)):  # PyTorch's conditions in its conventions
            real_tokens = ~padding if padding.dtype == bool else padding == 0  # PyTorch's rule for a float mask too
            allowed = real_tokens.reshape(padding.shape[0], 1, 1, padding.shape[-1])  # (B, 1, 1, S), True = real
            real = padding_to_zero(self, src, allowed, bool(is_causal))
        x = src
        for layer in self.layers:
            x = layer(x, src_mask=mask, src_key_padding_mask=padding, is_causal=bool(is_causal))
        if real is not None:
            x = zeros_at_padding(x, real)
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
        return as_compat(triu(full((sz, sz), float("-inf"), dtype=dtype, device=device), diagonal=1))


def __getattr__(name):
    raise missing(__name__, name)
