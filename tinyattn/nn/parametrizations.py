"""Weight normalisation and spectral normalisation as parametrizations (PyTorch's
``torch.nn.utils.parametrizations``), and the hook forms PyTorch had before them (``weight_norm_hook`` and
``spectral_norm_hook``, compat's ``torch.nn.utils.weight_norm`` and ``spectral_norm``).

    weight norm (Salimans and Kingma):   w = g · v / ‖v‖          ‖·‖ over every dimension but ``dim``
    spectral norm (Miyato et al.):       w = W / σ(W)             σ by power iteration: u ← Wv/‖Wv‖, v ← Wᵀu/‖Wᵀu‖,
                                                                  σ = uᵀ W v, with u and v kept between calls

>>> import tinyattn as ta
>>> layer = weight_norm(ta.nn.Linear(3, 2))
>>> sorted(layer.state_dict())
['bias', 'parametrizations.weight.original0', 'parametrizations.weight.original1']
>>> g, v = layer.parametrizations.weight.originals()
>>> bool(((layer.weight - g * v / (v * v).sum(1, keepdim=True).sqrt()).abs() < 1e-6).all())
True
"""

from ..engine import no_grad
from . import functional as F
from .module import Module
from .parametrize import register_parametrization


def norm_except_dim(v, pow=2, dim=0):
    """``‖v‖`` (the ``pow``-norm) over every dimension but ``dim``, kept with size 1 elsewhere; over all of ``v``
    (a 0-d result) where ``dim`` is ``-1`` or ``None``, as PyTorch's ``torch.norm_except_dim``.

    >>> import tinyattn as ta
    >>> norm_except_dim(ta.tensor([[3.0, 4.0], [6.0, 8.0]])).tolist(), norm_except_dim(ta.ones(2, 2), dim=-1).item()
    ([[5.0], [10.0]], 2.0)
    """
    if dim is None or dim == -1:
        return (v.abs() ** pow).sum() ** (1.0 / pow)
    others = tuple(d for d in range(v.ndim) if d != dim)
    return (v.abs() ** pow).sum(dim=others, keepdim=True) ** (1.0 / pow)  # (1, …, size of dim, …, 1)


class WeightNorm(Module):
    """The weight-norm parametrization: ``forward(g, v) = v · g / ‖v‖``; ``right_inverse(w) = (‖w‖, w)``.

    >>> import tinyattn as ta
    >>> g, v = WeightNorm(0).right_inverse(ta.tensor([[3.0, 4.0]]))
    >>> g.tolist(), WeightNorm(0)(g, v).tolist()
    ([[5.0]], [[3.0, 4.0]])
    """

    def __init__(self, dim=0):
        super().__init__()
        self.dim = -1 if dim is None else dim

    def forward(self, weight_g, weight_v):
        return weight_v * (weight_g / norm_except_dim(weight_v, 2, self.dim))

    def right_inverse(self, weight):
        return norm_except_dim(weight, 2, self.dim), weight


def weight_norm(module, name="weight", dim=0):
    """Parametrize ``module.<name>`` as ``g · v / ‖v‖`` (``original0`` is ``g``, ``original1`` is ``v``), the norm
    over every dimension but ``dim`` (over all where ``dim`` is ``None``). Returns the module.

    >>> import tinyattn as ta
    >>> layer = weight_norm(ta.nn.Linear(4, 3))
    >>> layer.parametrizations.weight.original0.shape, layer.weight.shape
    ((3, 1), (3, 4))
    """
    return register_parametrization(module, name, WeightNorm(dim), unsafe=True)


def _as_matrix(weight, dim):
    """``weight`` with ``dim`` first and the rest flattened: ``(size of dim, everything else)``."""
    if dim != 0:
        weight = weight.permute(dim, *[d for d in range(weight.ndim) if d != dim])
    return weight.reshape(weight.shape[0], -1)


class SpectralNorm(Module):
    """The spectral-norm parametrization: ``forward(W) = W / σ``, σ estimated by power iteration on the buffers
    ``_u`` and ``_v`` (``n_power_iterations`` steps per call in training mode, none in eval mode; 15 at
    construction). A 1-D weight is divided by its norm.

    >>> import tinyattn as ta
    >>> W = ta.tensor([[3.0, 0.0], [0.0, 1.0]])
    >>> SpectralNorm(W).eval()(W).tolist()             # σ = 3
    [[1.0, 0.0], [0.0, 0.3333333432674408]]
    """

    def __init__(self, weight, n_power_iterations=1, dim=0, eps=1e-12):
        super().__init__()
        ndim = weight.ndim
        if dim >= ndim or dim < -ndim:
            raise IndexError(f"Dimension out of range (expected to be in range of [-{ndim}, {ndim - 1}] but got {dim})")
        if n_power_iterations <= 0:
            raise ValueError("Expected n_power_iterations to be positive, but got "
                             f"n_power_iterations={n_power_iterations}")
        self.dim = dim if dim >= 0 else dim + ndim
        self.eps, self.n_power_iterations = eps, n_power_iterations
        if ndim > 1:
            matrix = _as_matrix(weight.detach(), self.dim)  # (h, w)
            h, w = matrix.shape
            self.register_buffer("_u", F.normalize(weight.new_empty(h).normal_(0, 1), dim=0, eps=eps))
            self.register_buffer("_v", F.normalize(weight.new_empty(w).normal_(0, 1), dim=0, eps=eps))
            self._power_method(matrix, 15)

    @no_grad()
    def _power_method(self, matrix, n_power_iterations):
        for _ in range(n_power_iterations):
            self._u.copy_(F.normalize(matrix @ self._v, dim=0, eps=self.eps))  # u ← W v / ‖W v‖
            self._v.copy_(F.normalize(matrix.T @ self._u, dim=0, eps=self.eps))  # v ← Wᵀ u / ‖Wᵀ u‖

    def forward(self, weight):
        if weight.ndim == 1:
            return F.normalize(weight, dim=0, eps=self.eps)
        matrix = _as_matrix(weight, self.dim)
        if self.training:
            self._power_method(matrix, self.n_power_iterations)
        u, v = self._u.clone(), self._v.clone()
        sigma = (u * (matrix @ v)).sum()  # uᵀ W v
        return weight / sigma

    def right_inverse(self, value):
        return value


def spectral_norm(module, name="weight", n_power_iterations=1, eps=1e-12, dim=None):
    """Parametrize ``module.<name>`` as ``W / σ(W)`` (``SpectralNorm``); ``dim`` defaults to 1 for the transposed
    convolutions and 0 otherwise. Returns the module.

    >>> import tinyattn as ta
    >>> layer = spectral_norm(ta.nn.Linear(5, 4))
    >>> sorted(layer.state_dict())
    ['bias', 'parametrizations.weight.0._u', 'parametrizations.weight.0._v', 'parametrizations.weight.original']
    """
    weight = getattr(module, name, None)
    if weight is None:
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if dim is None:
        dim = 1 if type(module).__name__.startswith("ConvTranspose") else 0
    return register_parametrization(module, name, SpectralNorm(weight, n_power_iterations, dim, eps))


# ----------------------------------------------------------------------------- the hook forms, before parametrizations


def weight_norm_hook(module, name="weight", dim=0):
    """PyTorch's first weight norm (``torch.nn.utils.weight_norm``): parameters ``<name>_g`` and ``<name>_v``,
    and ``module.<name>`` recomputed from them by a forward pre-hook before each call. Returns the module.

    >>> import tinyattn as ta
    >>> layer = weight_norm_hook(ta.nn.Linear(3, 2))
    >>> [name for name, _ in layer.named_parameters()], layer(ta.ones(1, 3)).shape
    (['bias', 'weight_g', 'weight_v'], (1, 2))
    """
    weight = getattr(module, name)
    parameter = type(weight)
    dim = -1 if dim is None else dim
    delattr(module, name)
    module.register_parameter(name + "_g", parameter(norm_except_dim(weight, 2, dim).detach()))
    module.register_parameter(name + "_v", parameter(weight.detach()))

    def compute(module, args=None):
        g, v = getattr(module, name + "_g"), getattr(module, name + "_v")
        object.__setattr__(module, name, v * (g / norm_except_dim(v, 2, dim)))

    compute(module)
    module.weight_norm_hooks = getattr(module, "weight_norm_hooks", {})
    module.weight_norm_hooks[name] = (module.register_forward_pre_hook(compute), dim)
    return module


def remove_weight_norm_hook(module, name="weight"):
    """Undo ``weight_norm_hook``: ``<name>`` a parameter again, with the value ``g · v / ‖v‖``.

    >>> import tinyattn as ta
    >>> layer = remove_weight_norm_hook(weight_norm_hook(ta.nn.Linear(3, 2)))
    >>> [name for name, _ in layer.named_parameters()]
    ['bias', 'weight']
    """
    hooks = getattr(module, "weight_norm_hooks", {})
    if name not in hooks:
        raise ValueError(f"weight_norm of '{name}' not found in {module}")
    handle, dim = hooks.pop(name)
    handle.remove()
    g, v = getattr(module, name + "_g"), getattr(module, name + "_v")
    with no_grad():
        weight = v * (g / norm_except_dim(v, 2, dim))
    delattr(module, name + "_g")
    delattr(module, name + "_v")
    object.__delattr__(module, name)
    module.register_parameter(name, type(g)(weight))
    return module


def spectral_norm_hook(module, name="weight", n_power_iterations=1, eps=1e-12, dim=None):
    """PyTorch's first spectral norm (``torch.nn.utils.spectral_norm``): the parameter ``<name>_orig``, the
    buffers ``<name>_u`` and ``<name>_v``, and ``module.<name> = W / σ`` recomputed by a forward pre-hook (with
    ``n_power_iterations`` steps, v first, in training mode). Returns the module.

    >>> import tinyattn as ta
    >>> layer = spectral_norm_hook(ta.nn.Linear(5, 4))
    >>> sorted(layer.state_dict()), layer(ta.ones(1, 5)).shape
    (['bias', 'weight_orig', 'weight_u', 'weight_v'], (1, 4))
    """
    if n_power_iterations <= 0:
        raise ValueError(f"Expected n_power_iterations to be positive, but got n_power_iterations={n_power_iterations}")
    if dim is None:
        dim = 1 if type(module).__name__.startswith("ConvTranspose") else 0
    weight = getattr(module, name)
    h, w = _as_matrix(weight.detach(), dim).shape
    delattr(module, name)
    module.register_parameter(name + "_orig", type(weight)(weight.detach()))
    module.register_buffer(name + "_u", F.normalize(weight.new_empty(h).normal_(0, 1), dim=0, eps=eps))
    module.register_buffer(name + "_v", F.normalize(weight.new_empty(w).normal_(0, 1), dim=0, eps=eps))

    def compute(module, args=None):
        original = getattr(module, name + "_orig")
        u, v = getattr(module, name + "_u"), getattr(module, name + "_v")
        matrix = _as_matrix(original, dim)
        if module.training:
            with no_grad():
                for _ in range(n_power_iterations):
                    v.copy_(F.normalize(matrix.T @ u, dim=0, eps=eps))  # v ← Wᵀ u / ‖Wᵀ u‖
                    u.copy_(F.normalize(matrix @ v, dim=0, eps=eps))  # u ← W v / ‖W v‖
        u, v = u.clone(), v.clone()
        object.__setattr__(module, name, original / (u * (matrix @ v)).sum())

    with no_grad():
        object.__setattr__(module, name, weight.detach())
    module.spectral_norm_hooks = getattr(module, "spectral_norm_hooks", {})
    module.spectral_norm_hooks[name] = (module.register_forward_pre_hook(compute), dim)
    return module


def remove_spectral_norm_hook(module, name="weight"):
    """Undo ``spectral_norm_hook``: ``<name>`` a parameter again, holding ``W / σ`` (no further iteration).

    >>> import tinyattn as ta
    >>> layer = remove_spectral_norm_hook(spectral_norm_hook(ta.nn.Linear(5, 4)))
    >>> sorted(layer.state_dict())
    ['bias', 'weight']
    """
    hooks = getattr(module, "spectral_norm_hooks", {})
    if name not in hooks:
        raise ValueError(f"spectral_norm of '{name}' not found in {module}")
    handle, dim = hooks.pop(name)
    handle.remove()
    original = getattr(module, name + "_orig")
    u, v = getattr(module, name + "_u"), getattr(module, name + "_v")
    with no_grad():
        weight = original / (u * (_as_matrix(original, dim) @ v)).sum()
    for suffix in ("_orig", "_u", "_v"):
        delattr(module, name + suffix)
    module.__dict__.pop(name, None)
    module.register_parameter(name, type(original)(weight.detach()))
    return module


__all__ = ["weight_norm", "spectral_norm", "WeightNorm", "SpectralNorm", "norm_except_dim", "weight_norm_hook",
           "remove_weight_norm_hook", "spectral_norm_hook", "remove_spectral_norm_hook"]
