"""Layers, losses and their functional forms: ``Module`` and PyTorch's layer names."""

from . import functional, init, utils  # noqa: F401
from .layers import (  # noqa: F401
    GELU,
    Dropout,
    Embedding,
    EmbeddingBag,
    LayerNorm,
    LazyLinear,
    Linear,
    ModuleList,
    ReLU,
    Sequential,
)
from .module import Module, Parameter  # noqa: F401

# isort: split
# the attention and Transformer layers (built on the ones above)
from .attention import MultiHeadAttention  # noqa: F401
from .transformer import (  # noqa: F401
    PositionalEncoding,
    TransformerDecoder,
    TransformerDecoderLayer,
    TransformerEncoder,
    TransformerEncoderLayer,
)

# isort: split
# small modules and the losses
from .everyday import (  # noqa: F401
    CrossEntropyLoss,
    Flatten,
    Identity,
    KLDivLoss,
    LogSoftmax,
    MSELoss,
    NLLLoss,
    Softmax,
    Tanh,
)

# isort: split
# convolution and pooling
from .conv import (  # noqa: F401
    Conv1d,
    Conv2d,
    Conv3d,
    ConvTranspose1d,
    ConvTranspose2d,
    ConvTranspose3d,
    Fold,
    LazyConv1d,
    LazyConv2d,
    LazyConv3d,
    LazyConvTranspose1d,
    LazyConvTranspose2d,
    LazyConvTranspose3d,
    Unfold,
)
from .pooling import (  # noqa: F401
    AdaptiveAvgPool1d,
    AdaptiveAvgPool2d,
    AdaptiveAvgPool3d,
    AdaptiveMaxPool1d,
    AdaptiveMaxPool2d,
    AdaptiveMaxPool3d,
    AvgPool1d,
    AvgPool2d,
    AvgPool3d,
    LPPool1d,
    LPPool2d,
    LPPool3d,
    MaxPool1d,
    MaxPool2d,
    MaxPool3d,
    MaxUnpool1d,
    MaxUnpool2d,
    MaxUnpool3d,
)
