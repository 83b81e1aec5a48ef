"""Layers, losses and their functional forms: ``Module`` and PyTorch's layer names."""

from . import functional, init, utils  # noqa: F401
from .layers import (  # noqa: F401
    GELU,
    Bilinear,
    CosineSimilarity,
    Dropout,
    Embedding,
    EmbeddingBag,
    LayerNorm,
    LazyLinear,
    Linear,
    ModuleList,
    PairwiseDistance,
    ReLU,
    Sequential,
)
from .module import Buffer, Module, Parameter  # noqa: F401

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
# the families of layers: activations, losses, normalisation, dropout, padding, rearrangements, containers
from .activation_layers import (  # noqa: F401
    CELU,
    ELU,
    GLU,
    SELU,
    Hardshrink,
    Hardsigmoid,
    Hardswish,
    Hardtanh,
    LeakyReLU,
    LogSigmoid,
    Mish,
    PReLU,
    ReLU6,
    RReLU,
    Sigmoid,
    SiLU,
    Softmax2d,
    Softmin,
    Softplus,
    Softshrink,
    Softsign,
    Tanhshrink,
    Threshold,
)
from .adaptive import AdaptiveLogSoftmaxWithLoss  # noqa: F401
from .containers import ParameterDict, ParameterList  # noqa: F401
from .dropout_layers import AlphaDropout, Dropout1d, Dropout2d, Dropout3d, FeatureAlphaDropout  # noqa: F401
from .loss_layers import (  # noqa: F401
    BCELoss,
    BCEWithLogitsLoss,
    CosineEmbeddingLoss,
    GaussianNLLLoss,
    HingeEmbeddingLoss,
    HuberLoss,
    L1Loss,
    MarginRankingLoss,
    MultiLabelMarginLoss,
    MultiLabelSoftMarginLoss,
    MultiMarginLoss,
    PoissonNLLLoss,
    SmoothL1Loss,
    SoftMarginLoss,
    TripletMarginLoss,
    TripletMarginWithDistanceLoss,
)
from .normalization_layers import (  # noqa: F401
    BatchNorm1d,
    BatchNorm2d,
    BatchNorm3d,
    GroupNorm,
    InstanceNorm1d,
    InstanceNorm2d,
    InstanceNorm3d,
    LazyBatchNorm1d,
    LazyBatchNorm2d,
    LazyBatchNorm3d,
    LazyInstanceNorm1d,
    LazyInstanceNorm2d,
    LazyInstanceNorm3d,
    LocalResponseNorm,
    RMSNorm,
)
from .padding_layers import (  # noqa: F401
    CircularPad1d,
    CircularPad2d,
    CircularPad3d,
    ConstantPad1d,
    ConstantPad2d,
    ConstantPad3d,
    ReflectionPad1d,
    ReflectionPad2d,
    ReflectionPad3d,
    ReplicationPad1d,
    ReplicationPad2d,
    ReplicationPad3d,
    ZeroPad1d,
    ZeroPad2d,
    ZeroPad3d,
)
from .shape_layers import (  # noqa: F401
    ChannelShuffle,
    PixelShuffle,
    PixelUnshuffle,
    Unflatten,
    Upsample,
    UpsamplingBilinear2d,
    UpsamplingNearest2d,
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
