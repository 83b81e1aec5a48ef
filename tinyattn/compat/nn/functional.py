"""``torch.nn.functional``: the native functions, and ``scaled_dot_product_attention`` returning one tensor."""

from ...nn.functional import (
    cross_entropy,
    dropout,
    embedding,
    gelu,
    layer_norm,
    linear,
    log_softmax,
    mse_loss,
    nll_loss,
    one_hot,
    pad,
    relu,
    softmax,
)
from ...nn.functional import scaled_dot_product_attention as _native_sdpa

__all__ = ["cross_entropy", "dropout", "embedding", "gelu", "layer_norm", "linear", "log_softmax", "mse_loss",
           "nll_loss", "one_hot", "pad", "relu", "softmax", "scaled_dot_product_attention", "tanh", "sigmoid", "silu"]


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None):
    """PyTorch's: the attention output alone (a boolean ``attn_mask`` already means ``True`` = may attend)."""
    output, _ = _native_sdpa(query, key, value, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal,
                             scale=scale, need_weights=False)
    return output


def silu(input, inplace=False):
    """``x · σ(x)`` (swish)."""
    return input * input.sigmoid()


def tanh(input):
    return input.tanh()


def sigmoid(input):
    return input.sigmoid()


def __getattr__(name):
    raise AttributeError(f"tinyattn.compat.nn.functional has no `{name}` yet")


