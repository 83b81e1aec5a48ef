"""Floor 4: ``Distribution``, the base every family derives from, and the helpers the families share.

A distribution holds tensors (its parameters) and computes from them with the library's differentiable
operations, so ``log_prob``, ``entropy`` and ``rsample`` carry gradients back to the parameters.
Shapes follow torch: a draw of ``sample(sample_shape)`` has shape ``sample_shape + batch_shape + event_shape``.
"""

import math

import numpy as np
from scipy import special

from .. import backend
from ..engine import Function, Tensor
from ..grad_mode import enable_grad, no_grad
from . import constraints

_LOG_2PI = math.log(2 * math.pi)


# ----------------------------------------------------------------------------- special functions


def _polygamma(n, x):
    """ψ⁽ⁿ⁾ of a tensor (recorded, ``Polygamma``) or of an array (a constant): backward runs on either."""
    if isinstance(x, Tensor):
        return Polygamma.apply(x, n=n)
    return special.polygamma(n, backend.to_numpy(x)).astype(x.dtype, copy=False)


class LogGamma(Function):
    """``log Γ(x)``, elementwise; d/dx = ψ(x), the digamma function (``Polygamma`` with ``n = 0``). A primitive: Γ is
    no composition of the library's elementary operations."""

    differentiable, saved_as = True, {"x": 0}

    def forward(self, x):
        self.x = x
        return special.gammaln(backend.to_numpy(x)).astype(x.dtype, copy=False)

    def backward(self, grad):
        return (grad * _polygamma(0, self.x),)

    @staticmethod
    def jvp(tangents, inputs, out):  # d log Γ(x) = ψ(x)·dx
        (dx,), (x,) = tangents, inputs
        return dx * Polygamma.apply(x, n=0)


class Polygamma(Function):
    """``ψ⁽ⁿ⁾(x)``, the n-th derivative of the digamma function ``ψ = (log Γ)′`` (``n = 0``: ψ itself);
    d/dx = ψ⁽ⁿ⁺¹⁾(x), so every order of derivative is one more ``Polygamma``. A primitive, as ``LogGamma``."""

    differentiable, saved_as = True, {"x": 0}

    def forward(self, x, n=0):
        self.x, self.n = x, n
        return special.polygamma(n, backend.to_numpy(x)).astype(x.dtype, copy=False)

    def backward(self, grad):
        return (grad * _polygamma(self.n + 1, self.x),)

    @staticmethod
    def jvp(tangents, inputs, out, n=0):  # d ψ⁽ⁿ⁾(x) = ψ⁽ⁿ⁺¹⁾(x)·dx
        (dx,), (x,) = tangents, inputs
        return dx * Polygamma.apply(x, n=n + 1)


def lgamma(x):
    """``log Γ(x)`` of a tensor, differentiable (see ``LogGamma``).

    >>> import tinyattn as ta
    >>> from tinyattn.distributions.distribution import lgamma
    >>> lgamma(ta.tensor([1.0, 5.0])).tolist()  # log 0!, log 4!
    [0.0, 3.178053855895996]
    """
    return LogGamma.apply(x)


def digamma(x):
    """``ψ(x)``, the derivative of ``log Γ``, differentiable to any order (see ``Polygamma``).

    >>> import tinyattn as ta
    >>> from tinyattn.distributions.distribution import digamma
    >>> round(digamma(ta.tensor([1.0])).item(), 6)  # -γ, Euler's constant
    -0.577216
    """
    return Polygamma.apply(x, n=0)


# ----------------------------------------------------------------------------- arguments


def is_tensor_like(value):
    return isinstance(value, Tensor)


def broadcast_all(*values):
    """``values`` (tensors, numbers or arrays) as tensors of one broadcast shape; numbers take the tensors' float
    dtype (float32 when none is a tensor) and class, as torch's ``broadcast_all`` gives its default dtype.

    >>> import tinyattn as ta
    >>> loc, scale = broadcast_all(ta.zeros(2, dtype=ta.float64), 1.0)
    >>> scale
    tensor([1., 1.], dtype=float64)
    """
    converted = as_tensors(*values)
    shape = np.broadcast_shapes(*(t.shape for t in converted))
    return tuple(t if t.shape == shape else t.expand(*shape) for t in converted)


def as_tensors(*values):
    """``values`` (tensors, numbers or arrays) as float tensors, each of its own shape (``broadcast_all``'s
    conversion without its broadcast)."""
    tensors = [v for v in values if isinstance(v, Tensor)]
    like = tensors[0] if tensors else None
    floats = [t.dtype for t in tensors if t.dtype.kind == "f"]
    dtype = floats[0] if floats else np.dtype(np.float32)
    converted = []
    for v in values:
        if isinstance(v, Tensor):
            converted.append(v if v.dtype.kind == "f" else v.to(dtype))
        else:
            array = np.asarray(v, dtype=dtype)
            if like is not None:
                array = backend.to_device(array, like.device)
            converted.append(Tensor._wrap(array, like))
    return converted


def as_value(value, like):
    """A value handed to ``log_prob``/``cdf`` as a tensor beside ``like`` (a parameter)."""
    if isinstance(value, Tensor):
        return value
    return Tensor._wrap(backend.to_device(np.asarray(value, dtype=like.dtype), like.device), like)


def draw(like, shape, kind="normal"):
    """Standard normal (``"normal"``) or uniform ``[0, 1)`` (``"uniform"``) draws of ``shape`` from the library's
    generator, of ``like``'s dtype, device and class, cut from any graph."""
    dtype = like.dtype if like.dtype.kind == "f" else np.dtype(np.float32)
    array = (backend.random_normal if kind == "normal" else backend.random_uniform)(tuple(shape), dtype, like.device)
    return Tensor._wrap(array, like)


def from_host(array, like, dtype=None):
    """A NumPy array drawn on the host (``numpy.random.Generator``'s gamma, Poisson…) as a tensor beside ``like``."""
    array = np.asarray(array, dtype=dtype or like.dtype)
    return Tensor._wrap(backend.to_device(array, like.device), like)


def host_generator():
    """The library's generator for the host (seeded by ``ta.manual_seed``): the draws NumPy has and the GPU's lacks."""
    return backend.generator("cpu")


def clamp_probs(probs):
    """``probs`` kept inside ``[eps, 1 - eps]`` (eps: the dtype's machine epsilon), as torch's ``clamp_probs``."""
    eps = float(np.finfo(probs.dtype).eps)
    return probs.clamp(min=eps, max=1 - eps)


def logits_to_probs(logits, is_binary=False):
    return logits.sigmoid() if is_binary else logits.softmax(-1)


def probs_to_logits(probs, is_binary=False):
    clamped = clamp_probs(probs)
    return clamped.log() - (-clamped).log1p() if is_binary else clamped.log()


class lazy_property:
    """An attribute computed at its first access and kept (``probs`` from ``logits`` and the reverse), computed
    with grad mode on (as torch's), so that a first access inside ``no_grad`` (a ``sample``) keeps its graph."""

    def __init__(self, compute):
        self.compute, self.__doc__, self.name = compute, compute.__doc__, compute.__name__

    def __get__(self, instance, owner=None):
        if instance is None:
            return self
        with enable_grad():
            value = self.compute(instance)
        instance.__dict__[self.name] = value
        return value


# ----------------------------------------------------------------------------- the base


class Distribution:
    """A probability distribution over tensors: ``batch_shape`` independent ones, each over ``event_shape`` values.

    Subclasses give ``log_prob``, ``sample`` (or ``rsample``, the reparameterised draw that gradients flow
    through, where ``has_rsample``), ``entropy``, ``mean``, ``mode``, ``variance``; ``stddev`` and
    ``perplexity`` follow. With ``validate_args`` (on by default, as torch's), the parameters are checked
    against ``arg_constraints`` at construction and values against ``support`` in ``log_prob``; a failure
    raises ``ValueError`` naming the argument, the constraint and the values.

    >>> import tinyattn as ta
    >>> from tinyattn.distributions import Normal
    >>> d = Normal(ta.zeros(3), ta.ones(3))
    >>> d.batch_shape, d.event_shape, d.sample((2,)).shape
    ((3,), (), (2, 3))
    """

    has_rsample = False
    has_enumerate_support = False
    arg_constraints = {}
    support = None
    _validate_default = True

    @staticmethod
    def set_default_validate_args(value):
        """Turn argument validation on or off for distributions made from now on (on by default, as in torch).

        >>> Distribution.set_default_validate_args(True)
        """
        if value not in (True, False):
            raise ValueError(f"set_default_validate_args: expected True or False, got {value!r}")
        Distribution._validate_default = value

    def __init__(self, batch_shape=(), event_shape=(), validate_args=None):
        self._batch_shape, self._event_shape = tuple(batch_shape), tuple(event_shape)
        self._validate_args = Distribution._validate_default if validate_args is None else bool(validate_args)
        if self._validate_args:
            for name, constraint in self.arg_constraints.items():
                value = self.__dict__.get(name)  # a lazy parameter not given (logits beside probs) is not checked
                if constraint is constraints.dependent or not isinstance(value, Tensor):
                    continue
                if not constraint.check(value).all():
                    raise ValueError(
                        f"Expected parameter {name} (Tensor of shape {value.shape}) of distribution {self!r} to "
                        f"satisfy the constraint {constraint!r}, but found invalid values:\n{value}")

    @property
    def batch_shape(self):
        return self._batch_shape

    @property
    def event_shape(self):
        return self._event_shape

    def _extended_shape(self, sample_shape=()):
        if isinstance(sample_shape, int):
            sample_shape = (sample_shape,)
        return tuple(sample_shape) + self._batch_shape + self._event_shape

    def expand(self, batch_shape, _instance=None):
        """The same distribution with its parameters broadcast to ``batch_shape`` (a view, as torch's ``expand``)."""
        batch_shape = tuple(batch_shape)
        new = type(self).__new__(type(self))
        new.__dict__.update(self.__dict__)
        for name in self._parameter_names():
            value = self.__dict__.get(name)
            if isinstance(value, Tensor):
                event = value.shape[len(self._batch_shape):]
                new.__dict__[name] = value.expand(*(batch_shape + event))
        new._batch_shape = batch_shape
        return new

    def _parameter_names(self):
        return [name for name, value in self.__dict__.items() if isinstance(value, Tensor)]

    # ------------------------------------------------------------------------- what subclasses give

    def rsample(self, sample_shape=()):
        raise NotImplementedError(f"{type(self).__name__} has no reparameterised sample (rsample); use sample(), "
                                  "whose draws carry no gradient")

    def sample(self, sample_shape=()):
        """A draw of shape ``sample_shape + batch_shape + event_shape``, cut from the graph."""
        with no_grad():
            return self.rsample(sample_shape).detach()

    def sample_n(self, n):
        return self.sample((n,))

    def log_prob(self, value):
        raise NotImplementedError(f"{type(self).__name__} has no log_prob")

    def cdf(self, value):
        raise NotImplementedError(f"{type(self).__name__} has no cdf")

    def icdf(self, value):
        raise NotImplementedError(f"{type(self).__name__} has no icdf")

    def entropy(self):
        raise NotImplementedError(f"{type(self).__name__} has no entropy")

    def enumerate_support(self, expand=True):
        raise NotImplementedError(f"{type(self).__name__} has no enumerable support")

    @property
    def mean(self):
        raise NotImplementedError(f"{type(self).__name__} has no mean")

    @property
    def mode(self):
        raise NotImplementedError(f"{type(self).__name__} has no mode")

    @property
    def variance(self):
        raise NotImplementedError(f"{type(self).__name__} has no variance")

    @property
    def stddev(self):
        return self.variance.sqrt()

    def perplexity(self):
        return self.entropy().exp()

    # ------------------------------------------------------------------------- checks

    def _validate_sample(self, value):
        """Check ``value`` against the event shape, the batch shape and the support (with ``validate_args``)."""
        if not self._validate_args:
            return
        event_dim = len(self._event_shape)
        if value.shape[len(value.shape) - event_dim:] != self._event_shape:
            raise ValueError(f"The right-most size of value must match event_shape: {value.shape} vs "
                             f"{self._event_shape}.")
        try:
            np.broadcast_shapes(value.shape, self._batch_shape + self._event_shape)
        except ValueError:
            raise ValueError(f"Value is not broadcastable with batch_shape+event_shape: {value.shape} vs "
                             f"{self._batch_shape + self._event_shape}.") from None
        support = self.support
        if support is not None and not support.check(value).all():
            raise ValueError(f"Expected value argument (Tensor of shape {value.shape}) to be within the support "
                             f"({support!r}) of the distribution {self!r}, but found invalid values:\n{value}")

    def __repr__(self):
        shown = ", ".join(f"{name}: {tuple(self.__dict__[name].shape)}"
                          for name in self.arg_constraints if isinstance(self.__dict__.get(name), Tensor))
        return f"{type(self).__name__}({shown})"


def parameter_of(distribution):
    """A tensor ``distribution`` holds (its own, or one of a distribution it wraps): what values are made beside."""
    for value in distribution.__dict__.values():
        if isinstance(value, Tensor):
            return value
    return next(parameter_of(v) for v in distribution.__dict__.values() if isinstance(v, Distribution))


def checked(distribution, value):
    """``value`` as a tensor beside ``distribution``'s first parameter, validated (``_validate_sample``)."""
    like = parameter_of(distribution)
    value = as_value(value, like)
    distribution._validate_sample(value)
    return value
