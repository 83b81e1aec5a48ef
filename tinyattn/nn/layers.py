"""Floor 5: the layers, each a thin stateful wrapper over ``nn.functional``.

Constructors follow PyTorch (names, defaults, initialisation) and take ``device=`` and
``dtype=`` for where the parameters live (``"cpu"``, float32 unless told). Every
random initial value is drawn from the library's generator, so ``ta.manual_seed``
makes a model reproducible.

>>> import tinyattn as ta
>>> import tinyattn.nn as nn
>>> model = nn.Sequential(nn.Linear(4, 8), nn.GELU(), nn.Dropout(0.1), nn.Linear(8, 2))
>>> model
Sequential(
  (0): Linear(in_features=4, out_features=8, bias=True)
  (1): GELU(approximate='none')
  (2): Dropout(p=0.1, inplace=False)
  (3): Linear(in_features=8, out_features=2, bias=True)
)
>>> model(ta.randn(3, 4)).shape
(3, 2)
"""

import math
import numbers
from collections import OrderedDict

import numpy as np

from .. import backend
from .. import checks as check
from . import functional as F
from .module import Module, Parameter, _addindent


def _uniform(shape, bound, dtype, device):
    """Samples of U(-bound, bound) on ``device``, from the library's generator."""
    return (2 * backend.random_uniform(shape, dtype, device) - 1) * bound


def _factory(device, dtype):
    return device or "cpu", np.dtype(dtype or np.float32)


class Linear(Module):
    """``y = x Wᵀ + b``: ``(…, in_features) -> (…, out_features)``.

    Initialised as PyTorch does (kaiming-uniform with ``a=√5``): weight and bias drawn from
    ``U(-1/√in_features, 1/√in_features)``.

    >>> import tinyattn as ta
    >>> layer = Linear(3, 4)
    >>> layer.weight.shape, layer.bias.shape, layer(ta.ones(2, 3)).shape
    ((4, 3), (4,), (2, 4))
    """

    def __init__(self, in_features, out_features, bias=True, device=None, dtype=None):
        super().__init__()
        check.sizes("Linear", in_features=in_features, out_features=out_features)
        self.in_features, self.out_features = in_features, out_features
        device, dtype = _factory(device, dtype)
        xp = backend.namespace_for(device)
        self.weight = Parameter(xp.empty((out_features, in_features), dtype=dtype))
        self.bias = Parameter(xp.empty((out_features,), dtype=dtype)) if bias else None
        self.reset_parameters()

    def reset_parameters(self):
        """Fresh PyTorch-default values: ``U(-1/√fan_in, 1/√fan_in)``."""
        weight = self.weight._data
        bound = 1 / math.sqrt(self.in_features) if self.in_features > 0 else 0.0
        weight[...] = _uniform(weight.shape, bound, weight.dtype, backend.device_of(weight))
        if self.bias is not None:
            self.bias._data[...] = _uniform(self.bias.shape, bound, weight.dtype, backend.device_of(weight))

    def forward(self, input):
        check.floating("Linear", "input", input)
        weight = self.weight  # read once: a parametrized weight is computed at each read
        check.one_dtype("Linear", ("input", input), ("weight", weight))
        if input.ndim == 0 or input.shape[-1] != self.in_features:
            raise ValueError(
                f"Linear(in_features={self.in_features}, out_features={self.out_features}): the input's last "
                f"dimension has size {input.shape[-1] if input.ndim else None} (input shape {input.shape}), "
                f"expected {self.in_features}"
            )
        return F.linear_definition(input, weight, self.bias)  # F.linear's definition: the checks are made above

    def extra_repr(self):
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


class Bilinear(Module):
    """``y_k = x1ᵀ W_k x2 + b_k``: ``(…, in1_features)`` and ``(…, in2_features)`` to ``(…, out_features)``.

    Initialised as PyTorch does: weight ``(out, in1, in2)`` and bias drawn from
    ``U(-1/√in1_features, 1/√in1_features)``.

    >>> import tinyattn as ta
    >>> layer = Bilinear(3, 4, 5)
    >>> layer.weight.shape, layer(ta.ones(2, 3), ta.ones(2, 4)).shape
    ((5, 3, 4), (2, 5))
    """

    def __init__(self, in1_features, in2_features, out_features, bias=True, device=None, dtype=None):
        super().__init__()
        check.sizes("Bilinear", in1_features=in1_features, in2_features=in2_features, out_features=out_features)
        self.in1_features, self.in2_features, self.out_features = in1_features, in2_features, out_features
        device, dtype = _factory(device, dtype)
        xp = backend.namespace_for(device)
        self.weight = Parameter(xp.empty((out_features, in1_features, in2_features), dtype=dtype))
        self.bias = Parameter(xp.empty((out_features,), dtype=dtype)) if bias else None
        self.reset_parameters()

    def reset_parameters(self):
        """Fresh PyTorch-default values: ``U(-1/√in1_features, 1/√in1_features)``."""
        bound = 1 / math.sqrt(self.in1_features) if self.in1_features > 0 else 0.0
        for parameter in (self.weight, self.bias):
            if parameter is not None:
                data = parameter._data
                data[...] = _uniform(data.shape, bound, data.dtype, backend.device_of(data))

    def forward(self, input1, input2):
        return F.bilinear(input1, input2, self.weight, self.bias)

    def extra_repr(self):
        return (f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
                f"out_features={self.out_features}, bias={self.bias is not None}")


class LazyLinear(Linear):
    """``Linear`` whose ``in_features`` is the last size of the first input it sees, as PyTorch's.

    Until that first call ``weight`` is ``(out_features, 0)`` (on its device, in its dtype: ``to``
    and ``double`` move it as any parameter) and ``bias`` is zeros. The call gives ``weight`` its
    shape and both PyTorch's initial values in place (the ``Parameter`` objects stay the same, so an
    optimizer built before the call still holds them), and the module becomes a plain ``Linear``.

    >>> import tinyattn as ta
    >>> layer = LazyLinear(4)
    >>> layer.weight.shape
    (4, 0)
    >>> layer(ta.ones(2, 3)).shape, layer
    ((2, 4), Linear(in_features=3, out_features=4, bias=True))
    """

    cls_to_become = Linear  # PyTorch's name: the class the module takes at its first call

    def __init__(self, out_features, bias=True, device=None, dtype=None):
        super().__init__(0, out_features, bias=bias, device=device, dtype=dtype)

    def forward(self, input):
        self.initialize_parameters(input)
        return Linear.forward(self, input)  # the module is a Linear from now on

    def initialize_parameters(self, input):
        """Shape ``weight`` as ``(out_features, input.shape[-1])`` and draw both parameters afresh."""
        check.tensor("LazyLinear", "input", input)
        if input.ndim == 0:
            raise ValueError("LazyLinear: the input must have at least one dimension (…, in_features), "
                             "got a 0-d tensor")
        weight = self.weight._data
        self.in_features = input.shape[-1]
        self.weight._data = backend.namespace(weight).empty((self.out_features, self.in_features), dtype=weight.dtype)
        self.reset_parameters()
        self.__class__ = self.cls_to_become


class Embedding(Module):
    """A lookup table: integer indices ``(…) -> (…, embedding_dim)``.

    ``weight`` is drawn from N(0, 1); the row ``padding_idx`` (if given) starts at zero and
    receives no gradient. Out-of-range indices raise ``IndexError``, float indices ``TypeError``.
    ``max_norm``: each row looked up whose ``norm_type``-norm exceeds it is first rescaled to that norm,
    in ``weight`` itself (``F.embedding``). ``_weight`` (PyTorch's name): a ``(num_embeddings,
    embedding_dim)`` table to use as it is, shared, and not re-drawn; ``_freeze=True`` makes it a
    parameter with ``requires_grad=False``. ``Embedding.from_pretrained`` is the public way to both.

    >>> import tinyattn as ta
    >>> table = Embedding(10, 3, padding_idx=0)
    >>> table(ta.tensor([[0, 4, 9]])).shape, table.weight.numpy()[0].tolist()
    ((1, 3, 3), [0.0, 0.0, 0.0])
    """

    def __init__(self, num_embeddings, embedding_dim, padding_idx=None, max_norm=None, norm_type=2.0,
                 scale_grad_by_freq=False, sparse=False, _weight=None, _freeze=False, device=None, dtype=None):
        super().__init__()
        check.sizes("Embedding", num_embeddings=num_embeddings, embedding_dim=embedding_dim)
        if padding_idx is not None:
            padding_idx = check.integer("Embedding", "padding_idx", padding_idx)
            if not -num_embeddings <= padding_idx < num_embeddings:
                raise ValueError(
                    f"Embedding: padding_idx {padding_idx} must be within the {num_embeddings} rows "
                    f"(-{num_embeddings} to {num_embeddings - 1})"
                )
            padding_idx %= num_embeddings
        if scale_grad_by_freq:
            raise NotImplementedError("Embedding: scale_grad_by_freq=True is not supported")
        self.num_embeddings, self.embedding_dim, self.padding_idx = num_embeddings, embedding_dim, padding_idx
        self.max_norm, self.norm_type, self.scale_grad_by_freq, self.sparse = max_norm, norm_type, False, sparse
        if _weight is not None:
            if tuple(_weight.shape) != (num_embeddings, embedding_dim):
                raise ValueError(f"Embedding: _weight must have shape ({num_embeddings}, {embedding_dim}), "
                                 f"got {tuple(_weight.shape)}")
            self.weight = Parameter(_weight, requires_grad=not _freeze)
            return
        device, dtype = _factory(device, dtype)
        xp = backend.namespace_for(device)
        self.weight = Parameter(xp.empty((num_embeddings, embedding_dim), dtype=dtype), requires_grad=not _freeze)
        self.reset_parameters()

    @classmethod
    def from_pretrained(cls, embeddings, freeze=True, padding_idx=None, max_norm=None, norm_type=2.0,
                        scale_grad_by_freq=False, sparse=False):
        """An ``Embedding`` whose table is ``embeddings`` ``(num_embeddings, embedding_dim)`` (a tensor, shared, not
        copied); ``freeze=True`` keeps it out of training (``requires_grad=False``). The row ``padding_idx`` keeps
        its values (it is not zeroed) but receives no gradient.

        >>> import tinyattn as ta
        >>> table = Embedding.from_pretrained(ta.tensor([[1.0, 2.0], [3.0, 4.0]]))
        >>> table(ta.tensor([1])), table.weight.requires_grad
        (tensor([[3., 4.]]), False)
        """
        if embeddings.ndim != 2:
            raise ValueError(f"Embeddings parameter is expected to be 2-dimensional, got shape {embeddings.shape}")
        rows, cols = embeddings.shape
        return cls(rows, cols, padding_idx=padding_idx, max_norm=max_norm, norm_type=norm_type,
                   scale_grad_by_freq=scale_grad_by_freq, sparse=sparse, _weight=embeddings, _freeze=freeze)

    def reset_parameters(self):
        """Fresh N(0, 1) values, with the padding row zeroed."""
        weight = self.weight._data
        weight[...] = backend.random_normal(weight.shape, weight.dtype, backend.device_of(weight))
        if self.padding_idx is not None:
            weight[self.padding_idx] = 0

    def forward(self, input):
        return F.embedding(input, self.weight, self.padding_idx, self.max_norm, self.norm_type)

    def extra_repr(self):
        text = f"{self.num_embeddings}, {self.embedding_dim}"
        if self.padding_idx is not None:
            text += f", padding_idx={self.padding_idx}"
        if self.max_norm is not None:
            text += f", max_norm={self.max_norm}"
        if self.norm_type != 2:
            text += f", norm_type={self.norm_type}"
        if self.sparse:
            text += ", sparse=True"
        return text


class EmbeddingBag(Module):
    """A lookup table that reduces each bag of indices to one row (``F.embedding_bag``): ``forward(input,
    offsets=None, per_sample_weights=None)`` → ``(B, embedding_dim)``; ``mode`` ``"mean"`` (default), ``"sum"`` or
    ``"max"``. ``weight`` is drawn from N(0, 1), its ``padding_idx`` row zeroed; indices at ``padding_idx`` are left
    out of their bag.

    >>> import tinyattn as ta
    >>> bag = EmbeddingBag(10, 3, mode="sum")
    >>> bag(ta.tensor([1, 2, 4, 5, 4]), offsets=ta.tensor([0, 2])).shape
    (2, 3)
    """

    def __init__(self, num_embeddings, embedding_dim, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
                 mode="mean", sparse=False, _weight=None, include_last_offset=False, padding_idx=None, device=None,
                 dtype=None):
        super().__init__()
        if mode not in ("sum", "mean", "max"):
            raise ValueError(f"EmbeddingBag: mode has to be one of sum, mean or max, got {mode!r}")
        table = Embedding(num_embeddings, embedding_dim, padding_idx, max_norm, norm_type, scale_grad_by_freq,
                          sparse, _weight, False, device, dtype)  # the same checks and initial values
        self.num_embeddings, self.embedding_dim, self.padding_idx = num_embeddings, embedding_dim, table.padding_idx
        self.max_norm, self.norm_type, self.scale_grad_by_freq = max_norm, norm_type, scale_grad_by_freq
        self.mode, self.sparse, self.include_last_offset = mode, sparse, include_last_offset
        self.weight = table.weight

    reset_parameters = Embedding.reset_parameters

    @classmethod
    def from_pretrained(cls, embeddings, freeze=True, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
                        mode="mean", sparse=False, include_last_offset=False, padding_idx=None):
        """An ``EmbeddingBag`` whose table is ``embeddings`` (shared, not copied); ``freeze=True`` keeps it out of
        training.

        >>> import tinyattn as ta
        >>> bag = EmbeddingBag.from_pretrained(ta.tensor([[1.0, 2.0], [3.0, 4.0]]), mode="max")
        >>> bag(ta.tensor([[0, 1]]))
        tensor([[3., 4.]])
        """
        if embeddings.ndim != 2:
            raise ValueError(f"Embeddings parameter is expected to be 2-dimensional, got shape {embeddings.shape}")
        rows, cols = embeddings.shape
        bag = cls(rows, cols, max_norm, norm_type, scale_grad_by_freq, mode, sparse, embeddings, include_last_offset,
                  padding_idx)
        bag.weight.requires_grad = not freeze
        return bag

    def forward(self, input, offsets=None, per_sample_weights=None):
        return F.embedding_bag(input, self.weight, offsets, self.max_norm, self.norm_type, self.scale_grad_by_freq,
                               self.mode, self.sparse, per_sample_weights, self.include_last_offset, self.padding_idx)

    def extra_repr(self):
        text = f"{self.num_embeddings}, {self.embedding_dim}"
        if self.max_norm is not None:
            text += f", max_norm={self.max_norm}"
        if self.norm_type != 2:
            text += f", norm_type={self.norm_type}"
        text += f", mode='{self.mode}'"
        if self.padding_idx is not None:
            text += f", padding_idx={self.padding_idx}"
        return text


class LayerNorm(Module):
    """``y = (x - E[x]) / √(Var[x] + eps) · weight + bias`` over the trailing ``normalized_shape``.

    The variance is the biased one (divided by N); ``weight`` starts at ones, ``bias`` at zeros.

    >>> import tinyattn as ta
    >>> norm = LayerNorm(4)
    >>> norm(ta.randn(2, 4)).mean(-1).abs().amax().item() < 1e-6
    True
    """

    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, bias=True, device=None, dtype=None):
        super().__init__()
        if isinstance(normalized_shape, numbers.Integral):
            normalized_shape = (normalized_shape,)
        normalized_shape = check.shape("LayerNorm", "normalized_shape", (normalized_shape,))
        self.normalized_shape, self.eps, self.elementwise_affine = tuple(normalized_shape), eps, elementwise_affine
        device, dtype = _factory(device, dtype)
        xp = backend.namespace_for(device)
        if elementwise_affine:
            self.weight = Parameter(xp.ones(self.normalized_shape, dtype=dtype))
            self.bias = Parameter(xp.zeros(self.normalized_shape, dtype=dtype)) if bias else None
        else:
            self.weight = self.bias = None

    def reset_parameters(self):
        if self.weight is not None:
            self.weight._data[...] = 1
        if self.bias is not None:
            self.bias._data[...] = 0

    def forward(self, input):
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return (
            f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}, "
            f"bias={self.bias is not None}"
        )


class Dropout(Module):
    """Inverted dropout with probability ``p`` while training; the identity after ``eval()``.

    (``inplace=`` is accepted and shown in the repr; tinyattn's dropout never works in place.)

    >>> import tinyattn as ta
    >>> drop = Dropout(0.5).eval()
    >>> drop(ta.ones(3))
    tensor([1., 1., 1.])
    """

    def __init__(self, p=0.5, inplace=False):
        super().__init__()
        if not isinstance(p, numbers.Real) or not 0 <= p <= 1:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p!r}")
        self.p, self.inplace = p, inplace

    def forward(self, input):
        return F.dropout(input, self.p, self.training)

    def extra_repr(self):
        return f"p={self.p}, inplace={self.inplace}"


class ReLU(Module):
    """``max(x, 0)`` elementwise.

    >>> import tinyattn as ta
    >>> ReLU()(ta.tensor([-1.0, 2.0])).tolist() == [0.0, 2.0]
    True
    """

    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace  # (accepted and shown, as PyTorch shows it; the result is always a new tensor)

    def forward(self, input):
        return F.relu(input)

    def extra_repr(self):
        return "inplace=True" if self.inplace else ""


class GELU(Module):
    """``x · Φ(x)``, exact (``approximate="none"``, via erf) or with the tanh approximation.

    >>> GELU(approximate="tanh")
    GELU(approximate='tanh')
    """

    def __init__(self, approximate="none"):
        super().__init__()
        if approximate not in ("none", "tanh"):
            raise ValueError(f"GELU: approximate must be 'none' or 'tanh', got {approximate!r}")
        self.approximate = approximate

    def forward(self, input):
        return F.gelu(input, approximate=self.approximate)

    def extra_repr(self):
        return f"approximate={self.approximate!r}"


class CosineSimilarity(Module):
    """``x1 · x2 / max(‖x1‖ ‖x2‖, eps)`` along ``dim`` (``F.cosine_similarity``).

    >>> import tinyattn as ta
    >>> CosineSimilarity()(ta.tensor([[1.0, 0.0]]), ta.tensor([[1.0, 1.0]])).numpy().round(4)
    array([0.7071], dtype=float32)
    """

    def __init__(self, dim=1, eps=1e-8):
        super().__init__()
        self.dim, self.eps = dim, eps

    def forward(self, x1, x2):
        return F.cosine_similarity(x1, x2, self.dim, self.eps)


class PairwiseDistance(Module):
    """``‖x1 - x2 + eps‖_p`` along the last dimension (``F.pairwise_distance``).

    >>> import tinyattn as ta
    >>> PairwiseDistance(eps=0.0)(ta.tensor([[0.0, 0.0]]), ta.tensor([[3.0, 4.0]]))
    tensor([5.])
    """

    def __init__(self, p=2.0, eps=1e-6, keepdim=False):
        super().__init__()
        self.norm, self.eps, self.keepdim = p, eps, keepdim

    def forward(self, x1, x2):
        return F.pairwise_distance(x1, x2, self.norm, self.eps, self.keepdim)


def _check_index(container, index):
    length = len(container)
    if not -length <= index < length:
        raise IndexError(f"{type(container).__name__}: index {index} is out of range for {length} modules")
    return index % length


class Sequential(Module):
    """Modules applied one after another: ``Sequential(a, b)(x) == b(a(x))``.

    Built from modules (named ``"0"``, ``"1"``, …) or from an ``OrderedDict`` of named ones.

    >>> import tinyattn as ta
    >>> model = Sequential(Linear(2, 3), ReLU())
    >>> len(model), type(model[0]).__name__, len(model[1:])
    (2, 'Linear', 1)
    """

    def __init__(self, *modules):
        super().__init__()
        if len(modules) == 1 and isinstance(modules[0], OrderedDict):
            for name, module in modules[0].items():
                self.add_module(name, module)
        else:
            for i, module in enumerate(modules):
                self.add_module(str(i), module)

    def forward(self, input):
        for module in self._modules.values():
            input = module(input)
        return input

    def __getitem__(self, index):
        if isinstance(index, slice):
            return Sequential(OrderedDict(list(self._modules.items())[index]))
        return list(self._modules.values())[_check_index(self, index)]

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def append(self, module):
        self.add_module(str(len(self)), module)
        return self


class ModuleList(Module):
    """A list of modules whose parameters the parent registers (``layers.0.weight``, …).

    >>> layers = ModuleList([Linear(2, 2) for _ in range(3)])
    >>> len(layers), [name for name, _ in layers.named_parameters()][:2]
    (3, ['0.weight', '0.bias'])
    """

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.extend(modules)

    def __getitem__(self, index):
        if isinstance(index, slice):
            return ModuleList(list(self._modules.values())[index])
        return self._modules[str(_check_index(self, index))]

    def __setitem__(self, index, module):
        self.add_module(str(_check_index(self, index)), module)

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def append(self, module):
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules):
        for module in modules:
            self.append(module)
        return self

    def insert(self, index, module):
        modules = list(self._modules.values())
        modules.insert(index, module)
        self._modules.clear()
        self.extend(modules)

    def forward(self, *args, **kwargs):
        raise NotImplementedError("ModuleList is a container, not a layer: call the modules it holds")

    def __repr__(self):
        # PyTorch's compressed form: a run of identical modules prints once, as "(0-2): 3 x Linear(...)"
        reprs = [repr(module) for module in self]
        if not reprs:
            return type(self).__name__ + "()"
        runs = []  # [first index, last index, repr]
        for i, text in enumerate(reprs):
            if runs and runs[-1][2] == text:
                runs[-1][1] = i
            else:
                runs.append([i, i, text])
        lines = [
            _addindent(f"({first}): {text}" if first == last else f"({first}-{last}): {last - first + 1} x {text}", 2)
            for first, last, text in runs
        ]
        return type(self).__name__ + "(\n  " + "\n  ".join(lines) + "\n)"
