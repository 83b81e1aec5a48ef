"""Small modules that model code reaches for: activations, ``Identity``, ``Flatten`` and the losses.

Each is a thin wrapper over one function, with PyTorch's name, arguments and defaults.

>>> import tinyattn as ta
>>> loss = CrossEntropyLoss(label_smoothing=0.1)
>>> round(loss(ta.tensor([[2.0, 0.0]]), ta.tensor([0])).item(), 4)
0.2269
"""

from .. import ops
from . import functional as F
from .module import Module


class Identity(Module):
    """Returns its input unchanged; a placeholder where a layer is optional (arguments are accepted and ignored).

    >>> import tinyattn as ta
    >>> from tinyattn import nn
    >>> nn.Identity(54, unused="ignored")(ta.tensor([1.0, 2.0]))
    tensor([1., 2.])
    """

    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, input):
        return input


class Tanh(Module):
    """The elementwise hyperbolic tangent, ``tanh(x)``, as a module.

    >>> import tinyattn as ta
    >>> from tinyattn import nn
    >>> nn.Tanh()(ta.tensor([0.0, 100.0]))
    tensor([0., 1.])
    """

    def forward(self, input):
        return input.tanh()


class Softmax(Module):
    """``exp(x) / Σ exp(x)`` along ``dim``, as a module (``F.softmax``).

    ``dim``: the dimension whose entries sum to 1.

    >>> import tinyattn as ta
    >>> from tinyattn import nn
    >>> nn.Softmax(dim=-1)(ta.tensor([[0.0, 0.0], [0.0, 2.0]])).numpy().round(3)
    array([[0.5  , 0.5  ],
           [0.119, 0.881]], dtype=float32)
    """

    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return F.softmax(input, self.dim)

    def extra_repr(self):
        return f"dim={self.dim}"


class LogSoftmax(Softmax):
    """``x - log Σ exp(x)`` along ``dim``, as a module (``F.log_softmax``): the log of ``Softmax``, computed stably.

    ``dim``: the dimension to normalise along.

    >>> import tinyattn as ta
    >>> from tinyattn import nn
    >>> nn.LogSoftmax(dim=-1)(ta.tensor([0.0, 0.0])).numpy().round(4)
    array([-0.6931, -0.6931], dtype=float32)
    """

    def forward(self, input):
        return F.log_softmax(input, self.dim)


class Flatten(Module):
    """Flattens dimensions ``start_dim`` to ``end_dim`` (inclusive) into one; by default all but the batch one.

    ``start_dim``, ``end_dim``: the first and last dimensions to merge (``1`` and ``-1``).

    >>> import tinyattn as ta
    >>> from tinyattn import nn
    >>> nn.Flatten()(ta.zeros(2, 3, 4)).shape
    (2, 12)
    """

    def __init__(self, start_dim=1, end_dim=-1):
        super().__init__()
        self.start_dim, self.end_dim = start_dim, end_dim

    def forward(self, input):
        return ops.flatten(input, self.start_dim, self.end_dim)

    def extra_repr(self):
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class CrossEntropyLoss(Module):
    """The cross-entropy of logits against class indices, as a module (``F.cross_entropy``).

    ``ignore_index``: targets equal to it add nothing (and are not counted by ``"mean"``); ``reduction``:
    ``"mean"``, ``"sum"`` or ``"none"``; ``label_smoothing``: the share of the target's mass spread evenly over
    all classes; ``weight`` (by keyword): one weight per class, kept as a buffer as in PyTorch. Called as
    ``loss(input, target)`` with logits ``(N, C)`` or ``(N, C, d…)`` and class indices, or class probabilities of
    the logits' shape.

    >>> import tinyattn as ta
    >>> from tinyattn import nn
    >>> loss = nn.CrossEntropyLoss()
    >>> round(loss(ta.tensor([[0.0, 0.0]]), ta.tensor([1])).item(), 4)      # log 2
    0.6931
    """

    def __init__(self, ignore_index=-100, reduction="mean", label_smoothing=0.0, *, weight=None):
        super().__init__()
        self.ignore_index, self.reduction, self.label_smoothing = ignore_index, reduction, label_smoothing
        self.register_buffer("weight", weight)

    def forward(self, input, target):
        """The loss of logits ``input`` against class indices (or probabilities) ``target``."""
        return F.cross_entropy(input, target, ignore_index=self.ignore_index, reduction=self.reduction,
                               label_smoothing=self.label_smoothing, weight=self.weight)


class NLLLoss(Module):
    """The negative log-likelihood of log-probabilities at the target classes, as a module (``F.nll_loss``).

    ``ignore_index``: targets equal to it are skipped; ``reduction``: ``"mean"`` (over the kept targets), ``"sum"``
    or ``"none"``; ``weight`` (by keyword): one weight per class, kept as a buffer as in PyTorch. Called as
    ``loss(input, target)`` with ``input (N, C)`` or ``(N, C, d…)`` (for instance ``LogSoftmax``'s output).

    >>> import tinyattn as ta
    >>> from tinyattn import nn
    >>> nn.NLLLoss()(ta.tensor([[-1.0, -2.0], [-3.0, -4.0]]), ta.tensor([0, 1])).item()
    2.5
    """

    def __init__(self, ignore_index=-100, reduction="mean", *, weight=None):
        super().__init__()
        self.ignore_index, self.reduction = ignore_index, reduction
        self.register_buffer("weight", weight)

    def forward(self, input, target):
        return F.nll_loss(input, target, weight=self.weight, ignore_index=self.ignore_index, reduction=self.reduction)


class MSELoss(Module):
    """The mean squared error ``(input - target)²``, as a module (``F.mse_loss``).

    ``reduction``: ``"mean"``, ``"sum"`` or ``"none"``.

    >>> import tinyattn as ta
    >>> from tinyattn import nn
    >>> nn.MSELoss()(ta.tensor([1.0, 2.0]), ta.tensor([0.0, 0.0])).item()
    2.5
    """

    def __init__(self, reduction="mean"):
        super().__init__()
        self.reduction = reduction

    def forward(self, input, target):
        return F.mse_loss(input, target, reduction=self.reduction)


class KLDivLoss(Module):
    """The Kullback-Leibler divergence ``target · (log target - input)``, as a module (``F.kl_div``).

    ``input`` holds log-probabilities; ``target`` probabilities, or log-probabilities with ``log_target=True``.
    ``reduction``: ``"mean"`` (over elements, PyTorch's default), ``"batchmean"`` (the mathematical KL divergence
    per example), ``"sum"`` or ``"none"``.

    >>> import math
    >>> import tinyattn as ta
    >>> from tinyattn import nn
    >>> log_q = ta.tensor([[math.log(0.5), math.log(0.5)]])
    >>> round(nn.KLDivLoss(reduction="batchmean")(log_q, ta.tensor([[1.0, 0.0]])).item(), 4)   # log 2
    0.6931
    """

    def __init__(self, reduction="mean", log_target=False):
        super().__init__()
        self.reduction, self.log_target = reduction, log_target

    def forward(self, input, target):
        return F.kl_div(input, target, reduction=self.reduction, log_target=self.log_target)
