"""Floor 5: the activations as modules, each a thin wrapper over its function in ``nn.functional``
(``nn.activations``), with PyTorch's name, constructor arguments, defaults and ``repr``.

``inplace=`` is accepted, kept and shown as PyTorch shows it; the result is always a new tensor (no activation here
writes into its input). ``PReLU`` holds its slopes as a parameter; ``RReLU`` draws its slopes while training and uses
their mean after ``eval()``.

>>> import tinyattn as ta
>>> from tinyattn import nn
>>> nn.Sequential(nn.Linear(2, 2), nn.LeakyReLU(0.2), nn.Hardtanh(-2.0, 2.0))
Sequential(
  (0): Linear(in_features=2, out_features=2, bias=True)
  (1): LeakyReLU(negative_slope=0.2)
  (2): Hardtanh(min_val=-2.0, max_val=2.0)
)
"""

from .. import backend
from . import functional as F
from .module import Module, Parameter


def _inplace(inplace, first=False):
    """PyTorch's ``inplace`` in a ``repr``: nothing unless it was asked for."""
    if not inplace:
        return ""
    return "inplace=True" if first else ", inplace=True"


class Threshold(Module):
    """``x`` where ``x > threshold``, else ``value``.

    >>> import tinyattn as ta
    >>> Threshold(0.5, -1.0)(ta.tensor([0.2, 0.8]))
    tensor([-1. ,  0.8])
    """

    def __init__(self, threshold, value, inplace=False):
        super().__init__()
        self.threshold, self.value, self.inplace = threshold, value, inplace

    def forward(self, input):
        return F.threshold(input, self.threshold, self.value)

    def extra_repr(self):
        return f"threshold={self.threshold}, value={self.value}{_inplace(self.inplace)}"


class Hardtanh(Module):
    """``x`` clamped to ``[min_val, max_val]``.

    >>> import tinyattn as ta
    >>> Hardtanh()(ta.tensor([-3.0, 0.5, 3.0]))
    tensor([-1. ,  0.5,  1. ])
    """

    def __init__(self, min_val=-1.0, max_val=1.0, inplace=False, min_value=None, max_value=None):
        super().__init__()
        min_val = min_val if min_value is None else min_value  # (PyTorch's deprecated names)
        max_val = max_val if max_value is None else max_value
        if max_val <= min_val:
            raise ValueError(f"Hardtanh: max_val ({max_val}) must be greater than min_val ({min_val})")
        self.min_val, self.max_val, self.inplace = min_val, max_val, inplace

    def forward(self, input):
        return F.hardtanh(input, self.min_val, self.max_val)

    def extra_repr(self):
        return f"min_val={self.min_val}, max_val={self.max_val}{_inplace(self.inplace)}"


class ReLU6(Hardtanh):
    """``min(max(x, 0), 6)``.

    >>> import tinyattn as ta
    >>> ReLU6()(ta.tensor([-1.0, 3.0, 9.0]))
    tensor([0., 3., 6.])
    """

    def __init__(self, inplace=False):
        super().__init__(0.0, 6.0, inplace)

    def extra_repr(self):
        return _inplace(self.inplace, first=True)


class LeakyReLU(Module):
    """``x`` where ``x ≥ 0``, else ``negative_slope · x``.

    >>> import tinyattn as ta
    >>> LeakyReLU(0.1)(ta.tensor([-2.0, 2.0]))
    tensor([-0.2,  2. ])
    """

    def __init__(self, negative_slope=0.01, inplace=False):
        super().__init__()
        self.negative_slope, self.inplace = negative_slope, inplace

    def forward(self, input):
        return F.leaky_relu(input, self.negative_slope)

    def extra_repr(self):
        return f"negative_slope={self.negative_slope}{_inplace(self.inplace)}"


class PReLU(Module):
    """``x`` where ``x ≥ 0``, else ``a · x`` with a learned slope ``a``: one (``num_parameters=1``) or one per
    channel (dimension 1 of the input), each starting at ``init``.

    >>> import tinyattn as ta
    >>> layer = PReLU(num_parameters=2)
    >>> layer.weight
    Parameter containing:
    tensor([0.25, 0.25], requires_grad=True)
    >>> layer(ta.tensor([[-4.0, 4.0]]))
    tensor([[-1.,  4.]], grad_fn=<Where>)
    """

    def __init__(self, num_parameters=1, init=0.25, device=None, dtype=None):
        super().__init__()
        self.num_parameters, self.init = num_parameters, init
        xp = backend.namespace_for(device or "cpu")
        self.weight = Parameter(xp.full((num_parameters,), init, dtype=dtype or "float32"))

    def reset_parameters(self):
        self.weight._data[...] = self.init

    def forward(self, input):
        return F.prelu(input, self.weight)

    def extra_repr(self):
        return f"num_parameters={self.num_parameters}"


class RReLU(Module):
    """Randomized leaky ReLU: while training, each negative element gets its own slope ``a ~ U(lower, upper)``;
    after ``eval()`` the fixed slope ``(lower + upper) / 2``.

    >>> import tinyattn as ta
    >>> RReLU(0.1, 0.3).eval()(ta.tensor([-10.0, 1.0]))
    tensor([-2.,  1.])
    """

    def __init__(self, lower=1.0 / 8, upper=1.0 / 3, inplace=False):
        super().__init__()
        self.lower, self.upper, self.inplace = lower, upper, inplace

    def forward(self, input):
        return F.rrelu(input, self.lower, self.upper, self.training)

    def extra_repr(self):
        return f"lower={self.lower}, upper={self.upper}{_inplace(self.inplace)}"


class ELU(Module):
    """``x`` where ``x > 0``, else ``alpha · (eˣ - 1)`` (Clevert et al., 2015).

    >>> import tinyattn as ta
    >>> ELU()(ta.tensor([0.0, 1.0]))
    tensor([0., 1.])
    """

    def __init__(self, alpha=1.0, inplace=False):
        super().__init__()
        self.alpha, self.inplace = alpha, inplace

    def forward(self, input):
        return F.elu(input, self.alpha)

    def extra_repr(self):
        return f"alpha={self.alpha}{_inplace(self.inplace)}"


class CELU(ELU):
    """``max(0, x) + min(0, alpha · (e^(x/alpha) - 1))`` (Barron, 2017).

    >>> import tinyattn as ta
    >>> CELU(alpha=2.0)(ta.tensor([0.0, 1.0]))
    tensor([0., 1.])
    """

    def forward(self, input):
        return F.celu(input, self.alpha)


class SELU(Module):
    """``scale · ELU(x, alpha)`` with the self-normalising constants (Klambauer et al., 2017).

    >>> import tinyattn as ta
    >>> SELU()(ta.tensor([0.0]))
    tensor([0.])
    """

    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return F.selu(input)

    def extra_repr(self):
        return _inplace(self.inplace, first=True)


class GLU(Module):
    """Gated linear unit: the input halved along ``dim`` into ``a, b``, then ``a · σ(b)``.

    >>> import tinyattn as ta
    >>> GLU()(ta.tensor([[2.0, 0.0]]))
    tensor([[1.]])
    """

    def __init__(self, dim=-1):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return F.glu(input, self.dim)

    def extra_repr(self):
        return f"dim={self.dim}"


class Hardshrink(Module):
    """``x`` where ``|x| > lambd``, else 0.

    >>> import tinyattn as ta
    >>> Hardshrink()(ta.tensor([0.2, -0.8]))
    tensor([ 0. , -0.8])
    """

    def __init__(self, lambd=0.5):
        super().__init__()
        self.lambd = lambd

    def forward(self, input):
        return F.hardshrink(input, self.lambd)

    def extra_repr(self):
        return f"{self.lambd}"


class Softshrink(Hardshrink):
    """``x - lambd`` where ``x > lambd``, ``x + lambd`` where ``x < -lambd``, else 0.

    >>> import tinyattn as ta
    >>> Softshrink()(ta.tensor([0.2, -0.75]))
    tensor([ 0.  , -0.25])
    """

    def forward(self, input):
        return F.softshrink(input, self.lambd)


class Softplus(Module):
    """``log(1 + e^(beta·x)) / beta``, and ``x`` where ``beta · x > threshold``.

    >>> import tinyattn as ta
    >>> Softplus()(ta.tensor([30.0]))
    tensor([30.])
    """

    def __init__(self, beta=1.0, threshold=20.0):
        super().__init__()
        self.beta, self.threshold = beta, threshold

    def forward(self, input):
        return F.softplus(input, self.beta, self.threshold)

    def extra_repr(self):
        return f"beta={self.beta}, threshold={self.threshold}"


class _Elementwise(Module):
    """An activation with no arguments but PyTorch's ``inplace``: ``function`` applied to the input."""

    function = None

    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return type(self).function(input)

    def extra_repr(self):
        return _inplace(self.inplace, first=True)


class _Plain(Module):
    """An activation with no arguments at all: ``function`` applied to the input."""

    function = None

    def forward(self, input):
        return type(self).function(input)


class Sigmoid(_Plain):
    """``σ(x) = 1 / (1 + e⁻ˣ)``.

    >>> import tinyattn as ta
    >>> Sigmoid()(ta.tensor([0.0]))
    tensor([0.5])
    """

    function = F.sigmoid


class LogSigmoid(_Plain):
    """``log σ(x) = -softplus(-x)``, computed stably.

    >>> import tinyattn as ta
    >>> LogSigmoid()(ta.tensor([100.0]))
    tensor([-0.])
    """

    function = F.logsigmoid


class Softsign(_Plain):
    """``x / (1 + |x|)``.

    >>> import tinyattn as ta
    >>> Softsign()(ta.tensor([1.0, -3.0]))
    tensor([ 0.5 , -0.75])
    """

    function = F.softsign


class Tanhshrink(_Plain):
    """``x - tanh(x)``.

    >>> import tinyattn as ta
    >>> Tanhshrink()(ta.tensor([0.0]))
    tensor([0.])
    """

    function = F.tanhshrink


class SiLU(_Elementwise):
    """``x · σ(x)`` (swish).

    >>> import tinyattn as ta
    >>> SiLU()(ta.tensor([0.0]))
    tensor([0.])
    """

    function = F.silu


class Mish(_Elementwise):
    """``x · tanh(softplus(x))``.

    >>> import tinyattn as ta
    >>> Mish()(ta.tensor([0.0]))
    tensor([0.])
    """

    function = F.mish


class Hardsigmoid(_Elementwise):
    """``clamp(x / 6 + 1/2, 0, 1)``.

    >>> import tinyattn as ta
    >>> Hardsigmoid()(ta.tensor([-6.0, 0.0, 6.0]))
    tensor([0. , 0.5, 1. ])
    """

    function = F.hardsigmoid


class Hardswish(_Elementwise):
    """``x · hardsigmoid(x)`` (Howard et al., 2019).

    >>> import tinyattn as ta
    >>> Hardswish()(ta.tensor([-6.0, 6.0]))
    tensor([-0.,  6.])
    """

    function = F.hardswish


class Softmin(Module):
    """``softmax(-x)`` along ``dim``.

    >>> import tinyattn as ta
    >>> Softmin(dim=0)(ta.tensor([1.0, 1.0]))
    tensor([0.5, 0.5])
    """

    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return F.softmin(input, self.dim)

    def extra_repr(self):
        return f"dim={self.dim}"


class Softmax2d(Module):
    """Softmax over the channels at every position: ``(N, C, H, W)`` or ``(C, H, W)``, along dimension ``-3``.

    >>> import tinyattn as ta
    >>> Softmax2d()(ta.zeros(2, 1, 1)).reshape(2)
    tensor([0.5, 0.5])
    """

    def forward(self, input):
        if input.ndim not in (3, 4):
            raise ValueError(f"Softmax2d: expected input of 3 or 4 dimensions (C, H, W) or (N, C, H, W), got shape "
                             f"{input.shape}")
        return F.softmax(input, -3)
