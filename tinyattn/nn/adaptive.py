"""Floor 5: the adaptive softmax (Grave et al., 2017), ``AdaptiveLogSoftmaxWithLoss``: a softmax over many classes
made cheap by splitting them, by frequency, into a head and tail clusters.

The ``cutoffs`` split the classes ``0 … n_classes - 1`` into a shortlist ``[0, cutoffs[0])`` and clusters
``[cutoffs[i], cutoffs[i + 1])``. The head scores the shortlist and one entry per cluster; cluster ``i`` scores
its own classes through a bottleneck of ``in_features // div_value^(i + 1)`` features. A class's log-probability
is its head log-probability (shortlist), or its cluster's head log-probability plus its log-probability within
the cluster.

>>> import tinyattn as ta
>>> from tinyattn import nn
>>> asm = nn.AdaptiveLogSoftmaxWithLoss(8, 10, cutoffs=[4, 7])
>>> out = asm(ta.randn(5, 8), ta.tensor([0, 3, 4, 8, 9]))
>>> out.output.shape, out.loss.shape
((5,), ())
"""

from collections import namedtuple

from .. import ops
from . import functional as F
from .layers import Linear, ModuleList, Sequential
from .module import Module

ASMoutput = namedtuple("ASMoutput", ["output", "loss"])


class AdaptiveLogSoftmaxWithLoss(Module):
    """The adaptive softmax: ``forward(input (N, in_features) or (in_features,), target (N,) or ())`` returns
    ``(output, loss)``, the target classes' log-probabilities ``(N,)`` and their negative mean; ``log_prob(input)``
    every class's, ``(N, n_classes)``; ``predict(input)`` the most probable class. ``head`` is a ``Linear`` to
    ``cutoffs[0] + len(cutoffs)`` scores, ``tail[i]`` a ``Sequential`` of two bias-free ``Linear`` layers.

    >>> import tinyattn as ta
    >>> asm = AdaptiveLogSoftmaxWithLoss(8, 10, cutoffs=[4])
    >>> asm.log_prob(ta.randn(2, 8)).exp().sum(-1).numpy().round(5)
    array([1., 1.], dtype=float32)
    """

    def __init__(self, in_features, n_classes, cutoffs, div_value=4.0, head_bias=False, device=None, dtype=None):
        super().__init__()
        cutoffs = list(cutoffs)
        if len(cutoffs) == 0:
            raise ValueError("cutoffs should be a sequence of length larger than 0")
        if (cutoffs != sorted(cutoffs) or min(cutoffs) <= 0 or max(cutoffs) > n_classes - 1
                or len(set(cutoffs)) != len(cutoffs) or any(int(c) != c for c in cutoffs)):
            raise ValueError("cutoffs should be a sequence of unique, positive integers sorted in an increasing "
                             "order, where each value is between 1 and n_classes-1")
        self.in_features, self.n_classes, self.div_value, self.head_bias = in_features, n_classes, div_value, head_bias
        self.cutoffs = cutoffs + [n_classes]
        self.shortlist_size = self.cutoffs[0]
        self.n_clusters = len(self.cutoffs) - 1
        self.head_size = self.shortlist_size + self.n_clusters
        factory = dict(device=device, dtype=dtype)
        self.head = Linear(in_features, self.head_size, bias=head_bias, **factory)
        self.tail = ModuleList()
        for i in range(self.n_clusters):
            hidden = int(in_features // (div_value ** (i + 1)))
            size = self.cutoffs[i + 1] - self.cutoffs[i]
            self.tail.append(Sequential(Linear(in_features, hidden, bias=False, **factory),
                                        Linear(hidden, size, bias=False, **factory)))

    def reset_parameters(self):
        self.head.reset_parameters()
        for cluster in self.tail:
            for layer in cluster:
                layer.reset_parameters()

    def forward(self, input, target):
        if target.ndim not in (0, 1) or input.ndim != target.ndim + 1:
            raise RuntimeError(f"AdaptiveLogSoftmaxWithLoss: expected input (N, in_features) and target (N,), or "
                               f"input (in_features,) and a 0-d target, got {input.shape} and {target.shape}")
        if target.ndim == 0:  # unbatched: one row
            result = self.forward(input.unsqueeze(0), target.unsqueeze(0))
            return ASMoutput(result.output.squeeze(0), result.loss)
        if input.shape[0] != target.shape[0]:
            raise RuntimeError("Input and target should have the same size in the batch dimension.")
        target_values = target.numpy()
        if target_values.size and (target_values.min() < 0 or target_values.max() >= self.n_classes):
            raise RuntimeError(f"Target values should be in [0, {self.n_classes - 1}], but values in range "
                               f"[{target_values.min()}, {target_values.max()}] were found. ")
        head_index = target  # the shortlist's class, or the cluster's entry in the head
        output = None
        for i in range(self.n_clusters):
            low, high = self.cutoffs[i], self.cutoffs[i + 1]
            in_cluster = (target >= low) & (target < high)  # (N,)
            if not in_cluster.numpy().any():
                continue
            cluster_logprob = F.log_softmax(self.tail[i](input), dim=1)  # (N, high - low)
            relative = ops.where(in_cluster, target - low, 0)  # (N,): every row reads a valid column
            local = cluster_logprob.gather(1, relative.unsqueeze(1)).squeeze(1)  # (N,)
            local = ops.where(in_cluster, local, 0.0)
            output = local if output is None else output + local
            head_index = ops.where(in_cluster, self.shortlist_size + i, head_index)
        head_logprob = F.log_softmax(self.head(input), dim=1)  # (N, head_size)
        chosen = head_logprob.gather(1, head_index.unsqueeze(1)).squeeze(1)  # (N,)
        output = chosen if output is None else chosen + output
        return ASMoutput(output, (-output).mean())

    def log_prob(self, input):
        """Every class's log-probability: ``(N, in_features) -> (N, n_classes)`` (or unbatched)."""
        if input.ndim == 1:
            return self.log_prob(input.unsqueeze(0)).squeeze(0)
        head_logprob = F.log_softmax(self.head(input), dim=1)  # (N, head_size)
        parts = [head_logprob[:, :self.shortlist_size]]
        for i, cluster in enumerate(self.tail):
            cluster_logprob = F.log_softmax(cluster(input), dim=1)  # (N, cluster size)
            parts.append(cluster_logprob + head_logprob[:, self.shortlist_size + i:self.shortlist_size + i + 1])
        return ops.cat(parts, dim=1)  # (N, n_classes)

    def predict(self, input):
        """The most probable class of each row: ``(N, in_features) -> (N,)`` (or unbatched)."""
        return self.log_prob(input).argmax(-1)
