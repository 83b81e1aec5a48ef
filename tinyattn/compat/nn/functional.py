"""``torch.nn.functional``: the native functions, and ``scaled_dot_product_attention`` returning one tensor;
the softmaxes' implicit ``dim``, the in-place activations (``relu_``…) and ``gumbel_softmax`` as torch has them."""

import warnings

from ...nn import functional as _native
from ...nn.functional import scaled_dot_product_attention as _native_sdpa
from ..refusals import refused
from ..scope import missing

for _name in _native.__all__:
    globals()[_name] = getattr(_native, _name)

__all__ = [*_native.__all__]


def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean",
                  label_smoothing=0.0):
    """PyTorch's argument order (``weight`` third) for the native ``F.cross_entropy``."""
    return _native.cross_entropy(input, target, ignore_index, reduction, label_smoothing, weight=weight,
                                 size_average=size_average, reduce=reduce)


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                                 enable_gqa=False):
    """PyTorch's: the attention output alone (a boolean ``attn_mask`` already means ``True`` = may attend)."""
    if enable_gqa:
        raise NotImplementedError("scaled_dot_product_attention: enable_gqa=True is not supported")
    output, _ = _native_sdpa(query, key, value, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal,
                             scale=scale, need_weights=False)
    return output


def _with_indices(pool):
    def pool_with_indices(input, *args, **kwargs):
        return pool(input, *args, **{**kwargs, "return_indices": True})

    pool_with_indices.__name__ = pool_with_indices.__qualname__ = f"{pool.__name__}_with_indices"
    pool_with_indices.__doc__ = f"``{pool.__name__}(…, return_indices=True)``: ``(values, indices)``."
    return pool_with_indices


max_pool1d_with_indices = _with_indices(_native.max_pool1d)
max_pool2d_with_indices = _with_indices(_native.max_pool2d)
max_pool3d_with_indices = _with_indices(_native.max_pool3d)
adaptive_max_pool1d_with_indices = _with_indices(_native.adaptive_max_pool1d)
adaptive_max_pool2d_with_indices = _with_indices(_native.adaptive_max_pool2d)
adaptive_max_pool3d_with_indices = _with_indices(_native.adaptive_max_pool3d)


fractional_max_pool2d = fractional_max_pool2d_with_indices = refused(
    "torch.nn.functional.fractional_max_pool2d", "pooling over pseudo-random regions is not built; use max_pool2d or "
    "adaptive_max_pool2d")
fractional_max_pool3d = fractional_max_pool3d_with_indices = refused(
    "torch.nn.functional.fractional_max_pool3d", "pooling over pseudo-random regions is not built; use max_pool3d or "
    "adaptive_max_pool3d")


def _softmax_dim(name, ndim, stacklevel):
    """torch's deprecated implicit ``dim``: 0 for 0-, 1- and 3-D input, else 1, with its warning."""
    warnings.warn(f"Implicit dimension choice for {name} has been deprecated. Change the call to include dim=X as an "
                  "argument.", UserWarning, stacklevel=stacklevel)
    return 0 if ndim in (0, 1, 3) else 1


def softmax(input, dim=None, _stacklevel=3, dtype=None):
    """The native ``softmax``; without ``dim``, torch's deprecated implicit choice (and its warning)."""
    if dim is None:
        dim = _softmax_dim("softmax", input.ndim, _stacklevel)
    return _native.softmax(input, dim, dtype=dtype)


def log_softmax(input, dim=None, _stacklevel=3, dtype=None):
    """The native ``log_softmax``; without ``dim``, torch's deprecated implicit choice (and its warning)."""
    if dim is None:
        dim = _softmax_dim("log_softmax", input.ndim, _stacklevel)
    return _native.log_softmax(input, dim, dtype=dtype)


def _in_place(function, name):
    """torch's ``F.<name>_``: ``function`` written into ``input``, which it returns."""

    def in_place(input, *args, **kwargs):
        return input.copy_(function(input, *args, **kwargs))

    in_place.__name__ = in_place.__qualname__ = name
    in_place.__doc__ = f"``{function.__name__}`` written into ``input`` in place (torch's ``F.{name}``)."
    return in_place


relu_, elu_, celu_, selu_ = (_in_place(_native.relu, "relu_"), _in_place(_native.elu, "elu_"),
                             _in_place(_native.celu, "celu_"), _in_place(_native.selu, "selu_"))
leaky_relu_, hardtanh_ = _in_place(_native.leaky_relu, "leaky_relu_"), _in_place(_native.hardtanh, "hardtanh_")
threshold_, rrelu_ = _in_place(_native.threshold, "threshold_"), _in_place(_native.rrelu, "rrelu_")


def gumbel_softmax(logits, tau=1, hard=False, eps=1e-10, dim=-1):
    """Samples from the Gumbel-softmax distribution (Jang et al., Maddison et al.):
    ``softmax((logits + g) / tau)`` with ``g = -log(E)``, ``E ~ Exponential(1)``; with ``hard=True`` the one-hot
    of its argmax, through which the gradient of the soft sample passes (straight-through)."""
    uniform = logits.detach().new_empty(logits.shape).uniform_().clamp(min=1e-30)  # U ~ U(0, 1)
    gumbels = -(-uniform.log()).log()  # -log(E), E = -log(U) ~ Exponential(1): g ~ Gumbel(0, 1)
    y_soft = _native.softmax((logits + gumbels) / tau, dim)
    if not hard:
        return y_soft
    index = y_soft.argmax(dim, keepdim=True)
    y_hard = logits.new_zeros(logits.shape).scatter_(dim, index, 1.0)
    return y_hard - y_soft.detach() + y_soft


multi_head_attention_forward = refused(
    "torch.nn.functional.multi_head_attention_forward", "call nn.MultiheadAttention (torch's packed parameters and "
    "masks), or F.scaled_dot_product_attention on projected heads")

__all__ += ["softmax", "log_softmax", "relu_", "elu_", "celu_", "selu_", "leaky_relu_", "hardtanh_", "threshold_",
            "rrelu_", "gumbel_softmax", "multi_head_attention_forward"]


def __getattr__(name):
    raise missing(__name__, name)
