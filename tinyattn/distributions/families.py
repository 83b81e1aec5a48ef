"""Floor 4: the distribution families, each its formulas written in the library's differentiable operations.

Reparameterised draws (``rsample``) are the parameters transformed from standard draws, so a loss of
them differentiates back to the parameters: ``Normal``'s ``loc + scale · ε``, ``Uniform``'s
``low + (high - low) · u``, ``MultivariateNormal``'s ``loc + L ε``. The discrete families and the
Gamma family draw without a gradient (``sample``).
"""

import math

import numpy as np
from scipy import special

from .. import backend
from ..engine import Function, Tensor
from ..grad_mode import no_grad
from ..ops import stack, where
from . import constraints
from .distribution import (
    _LOG_2PI,
    Distribution,
    as_tensors,
    as_value,
    broadcast_all,
    checked,
    digamma,
    draw,
    from_host,
    host_generator,
    lazy_property,
    lgamma,
    logits_to_probs,
    probs_to_logits,
)

__all__ = ["Normal", "Uniform", "Bernoulli", "Categorical", "OneHotCategorical", "MultivariateNormal",
           "Independent", "Exponential", "Laplace", "Gamma", "Beta", "Dirichlet", "Poisson", "Binomial"]


def _full(like, shape, value):
    return Tensor._wrap(np.full(shape, value, dtype=like.dtype), like)


# ----------------------------------------------------------------------------- continuous, location and scale


class Normal(Distribution):
    """The normal distribution ``N(loc, scale²)``: ``log p(x) = -(x - loc)² / (2 scale²) - log scale - ½ log 2π``.

    Args:
        loc: the mean (a tensor or a number).
        scale: the standard deviation, positive.
        validate_args: check the arguments (and ``log_prob``'s values); torch's default is on.

    >>> import tinyattn as ta
    >>> from tinyattn.distributions import Normal
    >>> d = Normal(ta.tensor([0.0]), ta.tensor([2.0]))
    >>> round(d.log_prob(ta.tensor([0.0])).item(), 4), round(d.entropy().item(), 4)
    (-1.6121, 2.1121)
    """

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        self.loc, self.scale = broadcast_all(loc, scale)
        super().__init__(self.loc.shape, validate_args=validate_args)

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @property
    def stddev(self):
        return self.scale

    @property
    def variance(self):
        return self.scale ** 2

    def rsample(self, sample_shape=()):
        eps = draw(self.loc, self._extended_shape(sample_shape))  # (*sample_shape, *batch_shape)
        return self.loc + eps * self.scale

    def log_prob(self, value):
        value = checked(self, value)
        return -((value - self.loc) ** 2) / (2 * self.variance) - self.scale.log() - 0.5 * _LOG_2PI

    def cdf(self, value):
        value = checked(self, value)
        return 0.5 * (1 + ((value - self.loc) / (self.scale * math.sqrt(2))).erf())

    def icdf(self, value):
        value = as_value(value, self.loc)
        return self.loc + self.scale * (2 * value - 1).erfinv() * math.sqrt(2)

    def entropy(self):
        return 0.5 + 0.5 * _LOG_2PI + self.scale.log()


class Uniform(Distribution):
    """The uniform distribution on ``[low, high)``: density ``1 / (high - low)`` inside.

    >>> import tinyattn as ta
    >>> from tinyattn.distributions import Uniform
    >>> d = Uniform(ta.tensor([0.0]), ta.tensor([4.0]))
    >>> d.mean.item(), d.variance.item(), round(d.log_prob(ta.tensor([1.0])).item(), 4)
    (2.0, 1.3333333730697632, -1.3863)
    """

    arg_constraints = {"low": constraints.dependent, "high": constraints.dependent}
    has_rsample = True

    def __init__(self, low, high, validate_args=None):
        self.low, self.high = broadcast_all(low, high)
        if (validate_args is None and Distribution._validate_default or validate_args) and \
                not bool((self.low.detach() < self.high.detach()).all()):
            raise ValueError(f"Expected parameter low (Tensor of shape {self.low.shape}) of distribution Uniform "
                             f"to satisfy low < high, but found invalid values:\nlow: {self.low}\nhigh: {self.high}")
        super().__init__(self.low.shape, validate_args=validate_args)

    @property
    def support(self):
        return constraints.interval(self.low, self.high)

    @property
    def mean(self):
        return (self.high + self.low) / 2

    @property
    def mode(self):
        return _full(self.low, self.low.shape, np.nan)

    @property
    def stddev(self):
        return (self.high - self.low) / 12 ** 0.5

    @property
    def variance(self):
        return (self.high - self.low) ** 2 / 12

    def rsample(self, sample_shape=()):
        u = draw(self.low, self._extended_shape(sample_shape), "uniform")
        return self.low + u * (self.high - self.low)

    def log_prob(self, value):
        value = checked(self, value)
        inside = ((self.low <= value) & (self.high > value)).to(self.low.dtype)
        return inside.log() - (self.high - self.low).log()

    def cdf(self, value):
        value = checked(self, value)
        return ((value - self.low) / (self.high - self.low)).clamp(min=0, max=1)

    def icdf(self, value):
        value = as_value(value, self.low)
        return value * (self.high - self.low) + self.low

    def entropy(self):
        return (self.high - self.low).log()


class Exponential(Distribution):
    """The exponential distribution, density ``rate · e^(-rate · x)`` for ``x >= 0``.

    >>> import tinyattn as ta
    >>> from tinyattn.distributions import Exponential
    >>> d = Exponential(ta.tensor([2.0]))
    >>> d.mean.item(), round(d.log_prob(ta.tensor([1.0])).item(), 4)
    (0.5, -1.3069)
    """

    arg_constraints = {"rate": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True

    def __init__(self, rate, validate_args=None):
        (self.rate,) = broadcast_all(rate)
        super().__init__(self.rate.shape, validate_args=validate_args)

    @property
    def mean(self):
        return self.rate.reciprocal()

    @property
    def mode(self):
        return self.rate * 0

    @property
    def stddev(self):
        return self.rate.reciprocal()

    @property
    def variance(self):
        return self.rate ** -2

    def rsample(self, sample_shape=()):
        u = draw(self.rate, self._extended_shape(sample_shape), "uniform")
        return -(-u).log1p() / self.rate  # the inverse CDF of a uniform draw

    def log_prob(self, value):
        value = checked(self, value)
        return self.rate.log() - self.rate * value

    def cdf(self, value):
        value = checked(self, value)
        return 1 - (-self.rate * value).exp()

    def icdf(self, value):
        return -(-as_value(value, self.rate)).log1p() / self.rate

    def entropy(self):
        return 1.0 - self.rate.log()


class Laplace(Distribution):
    """The Laplace distribution, density ``e^(-|x - loc| / scale) / (2 scale)``.

    >>> import tinyattn as ta
    >>> from tinyattn.distributions import Laplace
    >>> d = Laplace(ta.tensor([0.0]), ta.tensor([1.0]))
    >>> d.variance.item(), round(d.entropy().item(), 4)
    (2.0, 1.6931)
    """

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        self.loc, self.scale = broadcast_all(loc, scale)
        super().__init__(self.loc.shape, validate_args=validate_args)

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @property
    def stddev(self):
        return math.sqrt(2) * self.scale

    @property
    def variance(self):
        return 2 * self.scale ** 2

    def rsample(self, sample_shape=()):
        eps = float(np.finfo(self.loc.dtype).eps)
        u = draw(self.loc, self._extended_shape(sample_shape), "uniform") * (2 - eps) + (eps - 1)  # in (-1, 1)
        return self.loc - self.scale * u.sign() * (-u.abs()).log1p()

    def log_prob(self, value):
        value = checked(self, value)
        return -(2 * self.scale).log() - (value - self.loc).abs() / self.scale

    def cdf(self, value):
        value = checked(self, value)
        return 0.5 - 0.5 * (value - self.loc).sign() * (-(value - self.loc).abs() / self.scale).expm1()

    def entropy(self):
        return 1 + (2 * self.scale).log()


# ----------------------------------------------------------------------------- discrete


class Bernoulli(Distribution):
    """Draws of 1 with probability ``probs`` (or ``sigmoid(logits)``) and 0 otherwise; give one of the two.

    ``log p(x) = x · logits - softplus(logits)``, computed without overflow.

    >>> import tinyattn as ta
    >>> from tinyattn.distributions import Bernoulli
    >>> d = Bernoulli(probs=ta.tensor([0.25]))
    >>> round(d.log_prob(ta.tensor([1.0])).item(), 4), d.mean.item(), d.variance.item()
    (-1.3863, 0.25, 0.1875)
    """

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.boolean
    has_enumerate_support = True

    def __init__(self, probs=None, logits=None, validate_args=None):
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        if probs is not None:
            (self.probs,) = broadcast_all(probs)
            shape = self.probs.shape
        else:
            (self.logits,) = broadcast_all(logits)
            shape = self.logits.shape
        super().__init__(shape, validate_args=validate_args)

    @lazy_property
    def logits(self):
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self):
        return logits_to_probs(self.logits, is_binary=True)

    @property
    def _param(self):
        return self.__dict__["probs"] if "probs" in self.__dict__ else self.__dict__["logits"]

    @property
    def mean(self):
        return self.probs

    @property
    def mode(self):
        probs = self.probs
        return where(probs == 0.5, _full(probs, probs.shape, np.nan), (probs >= 0.5).to(probs.dtype))

    @property
    def variance(self):
        return self.probs * (1 - self.probs)

    def sample(self, sample_shape=()):
        with no_grad():
            probs = self.probs.detach().expand(*self._extended_shape(sample_shape))
            return (draw(probs, probs.shape, "uniform") < probs).to(probs.dtype)

    def log_prob(self, value):
        value = checked(self, value)
        return -_bce_with_logits(self.logits, value)

    def entropy(self):
        return _bce_with_logits(self.logits, self.probs)

    def enumerate_support(self, expand=True):
        values = Tensor._wrap(np.arange(2, dtype=self._param.dtype).reshape((2,) + (1,) * len(self._batch_shape)),
                              self._param)
        return values.expand(2, *self._batch_shape) if expand else values


def _bce_with_logits(logits, target):
    """``-(target · log σ(l) + (1 - target) · log(1 - σ(l)))`` = ``max(l, 0) - l · target + log(1 + e^(-|l|))``."""
    return logits.clamp(min=0) - logits * target + (-logits.abs()).exp().log1p()


class Categorical(Distribution):
    """Draws of an index ``0 … K-1`` with probabilities ``probs`` (normalised along the last dimension) or
    ``softmax(logits)``; give one of the two. ``batch_shape`` is their shape less the last dimension.

    >>> import tinyattn as ta
    >>> from tinyattn.distributions import Categorical
    >>> d = Categorical(probs=ta.tensor([1.0, 3.0]))
    >>> d.probs, round(d.entropy().item(), 4), round(d.log_prob(ta.tensor(1)).item(), 4)
    (tensor([0.25, 0.75]), 0.5623, -0.2877)
    """

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}
    has_enumerate_support = True

    def __init__(self, probs=None, logits=None, validate_args=None):
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        if probs is not None:
            (probs,) = broadcast_all(probs)
            if probs.ndim < 1:
                raise ValueError("`probs` parameter must be at least one-dimensional.")
            self.probs = probs / probs.sum(-1, keepdim=True)
        else:
            (logits,) = broadcast_all(logits)
            if logits.ndim < 1:
                raise ValueError("`logits` parameter must be at least one-dimensional.")
            self.logits = logits - logits.logsumexp(-1, keepdim=True)
        self._num_events = self._param.shape[-1]
        super().__init__(self._param.shape[:-1], validate_args=validate_args)

    @lazy_property
    def logits(self):
        return probs_to_logits(self.probs)

    @lazy_property
    def probs(self):
        return logits_to_probs(self.logits)

    @property
    def _param(self):
        return self.__dict__["probs"] if "probs" in self.__dict__ else self.__dict__["logits"]

    @property
    def param_shape(self):
        return self._param.shape

    @property
    def support(self):
        return constraints.integer_interval(0, self._num_events - 1)

    @property
    def mean(self):
        return _full(self._param, self._batch_shape, np.nan)

    @property
    def mode(self):
        return self.probs.argmax(-1)

    @property
    def variance(self):
        return _full(self._param, self._batch_shape, np.nan)

    def sample(self, sample_shape=()):
        """Indices drawn by inverting the cumulative probabilities at a uniform draw."""
        with no_grad():
            cumulative = self.probs.detach().cumsum(-1)  # (*batch_shape, K)
            shape = self._extended_shape(sample_shape)
            u = draw(cumulative, shape + (1,), "uniform")  # (*sample_shape, *batch_shape, 1)
            index = (cumulative < u * cumulative[..., -1:]).sum(-1)  # the first k with u < F(k)
            return index.clamp(max=self._num_events - 1).long()

    def log_prob(self, value):
        value = checked(self, value).long()
        shape = np.broadcast_shapes(value.shape, self._batch_shape)
        logits = self.logits.expand(*shape, self._num_events)  # (*shape, K)
        return logits.gather(-1, value.expand(*shape).unsqueeze(-1)).squeeze(-1)

    def entropy(self):
        logits = self.logits.clamp(min=float(np.finfo(self.logits.dtype).min))
        return -(logits * self.probs).sum(-1)

    def enumerate_support(self, expand=True):
        values = Tensor._wrap(np.arange(self._num_events).reshape((-1,) + (1,) * len(self._batch_shape)),
                              self._param)
        return values.expand(self._num_events, *self._batch_shape) if expand else values


class OverCategorical(Distribution):
    """A distribution over vectors of ``K`` entries whose parameters are a ``Categorical``'s over ``K`` classes
    (``probs`` or ``logits``, the last dimension): it keeps that categorical as ``_categorical``; its batch shape is
    the categorical's and its event shape ``(K,)``. ``OneHotCategorical``, ``Multinomial`` and
    ``RelaxedOneHotCategorical`` are such distributions.

    >>> import tinyattn as ta
    >>> d = OverCategorical(logits=ta.zeros(3, 4))
    >>> d.batch_shape, d.event_shape, d.probs[0].tolist()
    ((3,), (4,), [0.25, 0.25, 0.25, 0.25])
    """

    def __init__(self, probs=None, logits=None, validate_args=None):
        self._categorical = Categorical(probs=probs, logits=logits, validate_args=validate_args)
        super().__init__(self._categorical.batch_shape, self._categorical.param_shape[-1:],
                         validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = super().expand(batch_shape)
        new._categorical = self._categorical.expand(batch_shape)
        return new

    @property
    def probs(self):
        return self._categorical.probs

    @property
    def logits(self):
        return self._categorical.logits


class OneHotCategorical(OverCategorical):
    """``Categorical`` with its draws as one-hot vectors: ``event_shape`` is ``(K,)``.

    >>> import tinyattn as ta
    >>> from tinyattn.distributions import OneHotCategorical
    >>> d = OneHotCategorical(probs=ta.tensor([0.0, 1.0]))
    >>> d.sample(), d.event_shape
    (tensor([0., 1.]), (2,))
    """

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}
    support = constraints.one_hot
    has_enumerate_support = True

    @property
    def _param(self):
        return self._categorical._param

    @property
    def mean(self):
        return self.probs

    @property
    def mode(self):
        probs = self._categorical.probs
        return (probs.argmax(-1, keepdim=True) == Tensor._wrap(np.arange(probs.shape[-1]), probs)).to(probs.dtype)

    @property
    def variance(self):
        return self.probs * (1 - self.probs)

    def sample(self, sample_shape=()):
        index = self._categorical.sample(sample_shape)  # (*sample_shape, *batch_shape)
        k = self._event_shape[0]
        return (index.unsqueeze(-1) == Tensor._wrap(np.arange(k), index)).to(self._param.dtype)

    def log_prob(self, value):
        value = checked(self, value)
        return self._categorical.log_prob(value.argmax(-1))

    def entropy(self):
        return self._categorical.entropy()

    def enumerate_support(self, expand=True):
        k = self._event_shape[0]
        values = Tensor._wrap(np.eye(k, dtype=self._param.dtype).reshape((k,) + (1,) * len(self._batch_shape) + (k,)),
                              self._param)
        return values.expand(k, *self._batch_shape, k) if expand else values

    def __repr__(self):
        return f"OneHotCategorical({'probs' if 'probs' in self._categorical.__dict__ else 'logits'}: " \
               f"{self._param.shape})"


class Poisson(Distribution):
    """The Poisson distribution: ``log p(k) = k log rate - rate - log k!``.

    >>> import tinyattn as ta
    >>> from tinyattn.distributions import Poisson
    >>> round(Poisson(ta.tensor([2.0])).log_prob(ta.tensor([3.0])).item(), 4)
    -1.7123
    """

    arg_constraints = {"rate": constraints.nonnegative}
    support = constraints.nonnegative_integer

    def __init__(self, rate, validate_args=None):
        (self.rate,) = broadcast_all(rate)
        super().__init__(self.rate.shape, validate_args=validate_args)

    @property
    def mean(self):
        return self.rate

    @property
    def mode(self):
        return self.rate.floor()

    @property
    def variance(self):
        return self.rate

    def sample(self, sample_shape=()):
        rate = self.rate.detach().expand(*self._extended_shape(sample_shape)).numpy()
        return from_host(host_generator().poisson(rate), self.rate)

    def log_prob(self, value):
        value = checked(self, value)
        return value.xlogy(self.rate) - self.rate - lgamma(value + 1)


class Binomial(Distribution):
    """The number of successes in ``total_count`` trials of probability ``probs`` (or ``sigmoid(logits)``).

    >>> import tinyattn as ta
    >>> from tinyattn.distributions import Binomial
    >>> d = Binomial(4, probs=ta.tensor([0.5]))
    >>> d.mean.item(), round(d.log_prob(ta.tensor([2.0])).item(), 4)
    (2.0, -0.9808)
    """

    arg_constraints = {"total_count": constraints.nonnegative_integer, "probs": constraints.unit_interval,
                       "logits": constraints.real}
    has_enumerate_support = True

    def __init__(self, total_count=1, probs=None, logits=None, validate_args=None):
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        if probs is not None:
            self.total_count, self.probs = broadcast_all(total_count, probs)
            self.total_count = self.total_count.to(self.probs.dtype)
            shape = self.probs.shape
        else:
            self.total_count, self.logits = broadcast_all(total_count, logits)
            self.total_count = self.total_count.to(self.logits.dtype)
            shape = self.logits.shape
        super().__init__(shape, validate_args=validate_args)

    @lazy_property
    def logits(self):
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self):
        return logits_to_probs(self.logits, is_binary=True)

    @property
    def support(self):
        return constraints.integer_interval(0, self.total_count)

    @property
    def mean(self):
        return self.total_count * self.probs

    @property
    def mode(self):
        return ((self.total_count + 1) * self.probs).floor().clamp(max=self.total_count.detach())

    @property
    def variance(self):
        return self.total_count * self.probs * (1 - self.probs)

    def sample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        n = self.total_count.detach().expand(*shape).numpy().astype(np.int64)
        p = self.probs.detach().expand(*shape).numpy()
        return from_host(host_generator().binomial(n, p), self.total_count)

    def log_prob(self, value):
        value = checked(self, value)
        n, logits = self.total_count, self.logits
        # log(1 + eˡ) = max(l, 0) + log1p(e^(-|l|)), its max written so that its gradient at 0 is ½ (torch's form)
        positive_part = (logits.clamp(min=0) + logits - logits.clamp(max=0)) / 2
        normaliser = n * positive_part + n * (-logits.abs()).exp().log1p() - lgamma(n + 1)
        return value * logits - lgamma(value + 1) - lgamma(n - value + 1) - normaliser

    def entropy(self):
        """``-Σₖ p(k) log p(k)`` over the support ``0 … n`` (one ``total_count`` for the whole batch)."""
        total = int(self.total_count.max().item())
        if not bool((self.total_count == total).all()):
            raise NotImplementedError("Inhomogeneous total count not supported by `entropy`.")
        log_prob = self.log_prob(self.enumerate_support(False))  # (n + 1, *batch_shape)
        return -(log_prob.exp() * log_prob).sum(0)

    def enumerate_support(self, expand=True):
        total = int(self.total_count.max().item())
        if not bool((self.total_count == total).all()):
            raise NotImplementedError("Inhomogeneous total count not supported by `enumerate_support`.")
        values = Tensor._wrap(np.arange(total + 1, dtype=self.total_count.dtype)
                              .reshape((-1,) + (1,) * len(self._batch_shape)), self.total_count)
        return values.expand(total + 1, *self._batch_shape) if expand else values


# ----------------------------------------------------------------------------- the Gamma family


class StandardGamma(Function):
    """A draw ``x ~ Gamma(α, 1)`` whose gradient is the implicit reparameterisation (Figurnov et al., 2018):
    holding the CDF ``P(α, x)`` fixed, ``dx/dα = -(∂P/∂α) / p(x; α)``; ``∂P/∂α`` by a central difference of
    SciPy's regularised incomplete gamma function (accurate to ~1e-9 relative; torch's own formula agrees to
    ~1e-4). A primitive: the draw is a rejection sampler, no composition of differentiable operations."""

    def forward(self, alpha):
        host = backend.to_numpy(alpha).astype(np.float64)
        x = np.maximum(host_generator().standard_gamma(host), np.finfo(alpha.dtype).tiny)
        self.alpha, self.x = host, x
        return backend.to_device(x.astype(alpha.dtype), backend.device_of(alpha))

    def backward(self, grad):
        alpha, x = self.alpha, self.x
        h = 1e-5 * np.maximum(alpha, 1.0)
        dP = (special.gammainc(alpha + h, x) - special.gammainc(np.maximum(alpha - h, alpha / 2), x)) / \
            (alpha + h - np.maximum(alpha - h, alpha / 2))
        log_pdf = (alpha - 1) * np.log(x) - x - special.gammaln(alpha)
        dx_dalpha = -dP / np.exp(log_pdf)
        return (grad * backend.to_device(dx_dalpha.astype(grad.dtype), backend.device_of(grad)),)


class Gamma(Distribution):
    """The Gamma distribution of shape ``concentration`` (α) and ``rate`` (β):
    ``log p(x) = α log β + (α - 1) log x - β x - log Γ(α)``. ``rsample`` is ``StandardGamma(α) / β``, its
    gradient the implicit reparameterisation.

    >>> import tinyattn as ta
    >>> from tinyattn.distributions import Gamma
    >>> d = Gamma(ta.tensor([2.0]), ta.tensor([1.0]))
    >>> d.mean.item(), round(d.log_prob(ta.tensor([1.0])).item(), 4), round(d.entropy().item(), 4)
    (2.0, -1.0, 1.5772)
    """

    arg_constraints = {"concentration": constraints.positive, "rate": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True

    def __init__(self, concentration, rate, validate_args=None):
        self.concentration, self.rate = broadcast_all(concentration, rate)
        super().__init__(self.concentration.shape, validate_args=validate_args)

    @property
    def mean(self):
        return self.concentration / self.rate

    @property
    def mode(self):
        return ((self.concentration - 1) / self.rate).clamp(min=0)

    @property
    def variance(self):
        return self.concentration / self.rate ** 2

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        return StandardGamma.apply(self.concentration.expand(*shape)) / self.rate.expand(*shape)

    def log_prob(self, value):
        value = checked(self, value)
        alpha, beta = self.concentration, self.rate
        return alpha.xlogy(beta) + (alpha - 1).xlogy(value) - beta * value - lgamma(alpha)

    def cdf(self, value):
        raise NotImplementedError("Gamma.cdf: the regularised incomplete gamma function is not differentiable here")

    def entropy(self):
        alpha = self.concentration
        return alpha - self.rate.log() + lgamma(alpha) + (1.0 - alpha) * digamma(alpha)


class Dirichlet(Distribution):
    """The Dirichlet distribution on the simplex, of ``concentration`` α (last dimension: the event):
    ``log p(x) = Σ (αᵢ - 1) log xᵢ + log Γ(Σ αᵢ) - Σ log Γ(αᵢ)``. ``rsample`` normalises ``StandardGamma``
    draws, its gradient through theirs (an unbiased pathwise gradient; torch's ``_dirichlet_grad`` is another).

    >>> import tinyattn as ta
    >>> from tinyattn.distributions import Dirichlet
    >>> d = Dirichlet(ta.tensor([1.0, 1.0, 1.0]))
    >>> d.mean, round(d.log_prob(ta.tensor([0.2, 0.3, 0.5])).item(), 4)
    (tensor([0.33333334, 0.33333334, 0.33333334]), 0.6931)
    """

    arg_constraints = {"concentration": constraints.positive}
    support = constraints.simplex
    has_rsample = True

    def __init__(self, concentration, validate_args=None):
        (self.concentration,) = broadcast_all(concentration)
        if self.concentration.ndim < 1:
            raise ValueError("`concentration` parameter must be at least one-dimensional.")
        super().__init__(self.concentration.shape[:-1], self.concentration.shape[-1:], validate_args=validate_args)

    @property
    def mean(self):
        return self.concentration / self.concentration.sum(-1, keepdim=True)

    @property
    def mode(self):
        """``(α - 1)₊ / Σ (α - 1)₊``; where every ``αᵢ < 1``, torch's choice: the one-hot vector of that ratio's
        argmax (0/0 everywhere: the first index)."""
        shifted = (self.concentration - 1).clamp(min=0)
        with np.errstate(invalid="ignore"):  # 0/0 where every αᵢ < 1: replaced below
            mode = shifted / shifted.sum(-1, keepdim=True)
        k = self.concentration.shape[-1]
        one_hot = (mode.argmax(-1, keepdim=True) == Tensor._wrap(np.arange(k), mode)).to(mode.dtype)
        return where((self.concentration < 1).all(-1, keepdim=True), one_hot, mode)

    @property
    def variance(self):
        total = self.concentration.sum(-1, keepdim=True)
        return self.concentration * (total - self.concentration) / (total ** 2 * (total + 1))

    def rsample(self, sample_shape=()):
        gamma = StandardGamma.apply(self.concentration.expand(*self._extended_shape(sample_shape)))
        return gamma / gamma.sum(-1, keepdim=True)

    def log_prob(self, value):
        value = checked(self, value)
        alpha = self.concentration
        return ((alpha - 1).xlogy(value)).sum(-1) + lgamma(alpha.sum(-1)) - lgamma(alpha).sum(-1)

    def entropy(self):
        alpha = self.concentration
        k = alpha.shape[-1]
        total = alpha.sum(-1)
        return (lgamma(alpha).sum(-1) - lgamma(total) - (k - total) * digamma(total)
                - ((alpha - 1) * digamma(alpha)).sum(-1))


class Beta(Distribution):
    """The Beta distribution on ``[0, 1]``, ``p(x) ∝ x^(α - 1) (1 - x)^(β - 1)``: a two-class ``Dirichlet``.

    >>> import tinyattn as ta
    >>> from tinyattn.distributions import Beta
    >>> d = Beta(ta.tensor([2.0]), ta.tensor([2.0]))
    >>> d.mean.item(), round(d.log_prob(ta.tensor([0.5])).item(), 4)
    (0.5, 0.4055)
    """

    arg_constraints = {"concentration1": constraints.positive, "concentration0": constraints.positive}
    support = constraints.unit_interval
    has_rsample = True

    def __init__(self, concentration1, concentration0, validate_args=None):
        self.concentration1, self.concentration0 = broadcast_all(concentration1, concentration0)
        self._dirichlet = Dirichlet(stack([self.concentration1, self.concentration0], -1),
                                    validate_args=validate_args)
        super().__init__(self._dirichlet.batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return Beta(self.concentration1.expand(*batch_shape), self.concentration0.expand(*batch_shape),
                    validate_args=False)

    @property
    def mean(self):
        return self.concentration1 / (self.concentration1 + self.concentration0)

    @property
    def mode(self):
        return self._dirichlet.mode[..., 0]

    @property
    def variance(self):
        total = self.concentration1 + self.concentration0
        return self.concentration1 * self.concentration0 / (total ** 2 * (total + 1))

    def rsample(self, sample_shape=()):
        return self._dirichlet.rsample(sample_shape)[..., 0]

    def log_prob(self, value):
        value = checked(self, value)
        heads_tails = stack([value, 1.0 - value], -1)
        return self._dirichlet.log_prob(heads_tails)

    def entropy(self):
        return self._dirichlet.entropy()


# ----------------------------------------------------------------------------- multivariate


def cholesky(A):
    """The lower-triangular ``L`` with ``L Lᵀ = A`` (``A`` symmetric positive-definite, ``(…, n, n)``), column by
    column (Cholesky–Crout), in differentiable operations: ``L[:, j] = (A[:, j] - Σₖ<ⱼ L[:, k] L[j, k]) / L[j, j]``.

    >>> import tinyattn as ta
    >>> from tinyattn.distributions.families import cholesky
    >>> cholesky(ta.tensor([[4.0, 2.0], [2.0, 2.0]]))
    tensor([[2., 0.],
            [1., 1.]])
    """
    n = A.shape[-1]
    A = (A + A.mT) / 2
    rows = Tensor._wrap(np.arange(n), A)
    columns = []
    for j in range(n):
        s = A[..., :, j]  # (…, n)
        for column in columns:
            s = s - column * column[..., j:j + 1]
        diagonal = s[..., j:j + 1].sqrt()  # (…, 1)
        safe = where(rows >= j, s, 0.0)  # above the diagonal: zeros, with zero gradients
        columns.append(safe / diagonal)
    return stack(columns, -1)  # (…, n, n)


def solve_lower(L, b):
    """``x`` with ``L x = b`` (``L`` lower-triangular ``(…, n, n)``, ``b`` of shape ``(…, n)``, broadcasting), by
    forward substitution: ``xᵢ = (bᵢ - Σₖ<ᵢ Lᵢₖ xₖ) / Lᵢᵢ``.

    >>> import tinyattn as ta
    >>> from tinyattn.distributions.families import solve_lower
    >>> solve_lower(ta.tensor([[2.0, 0.0], [1.0, 1.0]]), ta.tensor([2.0, 3.0]))
    tensor([1., 2.])
    """
    xs = []
    for i in range(L.shape[-1]):
        r = b[..., i]
        if xs:
            r = r - (L[..., i, :i] * stack(xs, -1)).sum(-1)
        xs.append(r / L[..., i, i])
    return stack(xs, -1)


def _batch_mahalanobis(scale_tril, diff):
    """``‖L⁻¹ diff‖²`` over the last dimension."""
    return (solve_lower(scale_tril, diff) ** 2).sum(-1)


class MultivariateNormal(Distribution):
    """The normal distribution over vectors, of mean ``loc`` and covariance ``Σ = L Lᵀ``; give one of
    ``covariance_matrix`` (Σ), ``precision_matrix`` (Σ⁻¹) or ``scale_tril`` (L, lower-triangular with a positive
    diagonal). ``log p(x) = -½ (n log 2π + ‖L⁻¹(x - loc)‖²) - Σ log Lᵢᵢ``; ``rsample`` is ``loc + L ε``.

    >>> import tinyattn as ta
    >>> from tinyattn.distributions import MultivariateNormal
    >>> d = MultivariateNormal(ta.zeros(2), covariance_matrix=ta.tensor([[4.0, 2.0], [2.0, 2.0]]))
    >>> d.scale_tril, round(d.log_prob(ta.zeros(2)).item(), 4)
    (tensor([[2., 0.],
            [1., 1.]]), -2.531)
    """

    arg_constraints = {"loc": constraints.real_vector, "covariance_matrix": constraints.positive_definite,
                       "precision_matrix": constraints.positive_definite, "scale_tril": constraints.lower_cholesky}
    support = constraints.real_vector
    has_rsample = True

    def __init__(self, loc, covariance_matrix=None, precision_matrix=None, scale_tril=None, validate_args=None):
        if len(loc.shape if isinstance(loc, Tensor) else np.shape(loc)) < 1:
            raise ValueError("loc must be at least one-dimensional.")
        if (covariance_matrix is not None) + (scale_tril is not None) + (precision_matrix is not None) != 1:
            raise ValueError("Exactly one of covariance_matrix or precision_matrix or scale_tril may be specified.")
        given = scale_tril if scale_tril is not None else \
            covariance_matrix if covariance_matrix is not None else precision_matrix
        loc, given = as_tensors(loc, given)
        scale_tril, covariance_matrix, precision_matrix = (given if m is not None else None
                                                           for m in (scale_tril, covariance_matrix, precision_matrix))
        name = "scale_tril" if scale_tril is not None else \
            "covariance_matrix" if covariance_matrix is not None else "precision_matrix"
        if given.ndim < 2:
            raise ValueError(f"{name} matrix must be at least two-dimensional, with optional leading batch "
                             "dimensions")
        batch_shape = np.broadcast_shapes(given.shape[:-2], loc.shape[:-1])
        n = loc.shape[-1]
        self.loc = loc.expand(*batch_shape, n)
        self.__dict__[name] = given.expand(*batch_shape, n, n)
        super().__init__(batch_shape, (n,), validate_args=validate_args)
        if scale_tril is not None:
            self._unbroadcasted_scale_tril = scale_tril
        elif covariance_matrix is not None:
            self._unbroadcasted_scale_tril = cholesky(covariance_matrix)
        else:
            self._unbroadcasted_scale_tril = _precision_to_scale_tril(precision_matrix)

    def expand(self, batch_shape, _instance=None):
        new = super().expand(batch_shape)
        new._unbroadcasted_scale_tril = self._unbroadcasted_scale_tril
        return new

    @lazy_property
    def scale_tril(self):
        return self._unbroadcasted_scale_tril.expand(*self._batch_shape, *self._event_shape * 2)

    @lazy_property
    def covariance_matrix(self):
        L = self._unbroadcasted_scale_tril
        return (L @ L.mT).expand(*self._batch_shape, *self._event_shape * 2)

    @lazy_property
    def precision_matrix(self):
        L = self._unbroadcasted_scale_tril
        n = self._event_shape[0]
        identity = Tensor._wrap(np.eye(n, dtype=L.dtype), L)
        inverse = solve_lower(L.unsqueeze(-3), identity).mT  # (…, n, n): L⁻¹, column by column
        return (inverse.mT @ inverse).expand(*self._batch_shape, n, n)

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        return (self._unbroadcasted_scale_tril ** 2).sum(-1).expand(*self._batch_shape, *self._event_shape)

    def rsample(self, sample_shape=()):
        eps = draw(self.loc, self._extended_shape(sample_shape))  # (*sample_shape, *batch_shape, n)
        return self.loc + (self._unbroadcasted_scale_tril @ eps.unsqueeze(-1)).squeeze(-1)

    def _half_log_det(self):
        return self._unbroadcasted_scale_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1)

    def log_prob(self, value):
        value = checked(self, value)
        n = self._event_shape[0]
        M = _batch_mahalanobis(self._unbroadcasted_scale_tril, value - self.loc)
        return -0.5 * (n * _LOG_2PI + M) - self._half_log_det()

    def entropy(self):
        n = self._event_shape[0]
        H = 0.5 * n * (1.0 + _LOG_2PI) + self._half_log_det()
        return H.expand(*self._batch_shape) if self._batch_shape else H

    def __repr__(self):
        return f"MultivariateNormal(loc: {self.loc.shape})"


def _precision_to_scale_tril(P):
    """``L`` with ``L Lᵀ = P⁻¹``, torch's route: with ``J`` the reversal, ``J P J = Lf Lfᵀ`` (Cholesky), so
    ``P = U Uᵀ`` with ``U = J Lf J`` upper-triangular, and ``L = U⁻ᵀ``, the inverse of the lower ``Uᵀ``."""
    Lf = cholesky(P.flip((-2, -1)))
    L_inv = Lf.flip((-2, -1)).mT  # Uᵀ, lower-triangular
    identity = Tensor._wrap(np.eye(P.shape[-1], dtype=P.dtype), P)
    return solve_lower(L_inv.unsqueeze(-3), identity).mT  # row c of the solve: column c of (Uᵀ)⁻¹


# ----------------------------------------------------------------------------- reinterpreting dimensions


class Independent(Distribution):
    """``base_distribution`` with its rightmost ``reinterpreted_batch_ndims`` batch dimensions read as event
    dimensions: ``log_prob`` and ``entropy`` sum over them (a diagonal Gaussian as one distribution over vectors).

    >>> import tinyattn as ta
    >>> from tinyattn.distributions import Independent, Normal
    >>> d = Independent(Normal(ta.zeros(3, 2), ta.ones(3, 2)), 1)
    >>> d.batch_shape, d.event_shape, d.log_prob(ta.zeros(3, 2)).shape
    ((3,), (2,), (3,))
    """

    arg_constraints = {}

    def __init__(self, base_distribution, reinterpreted_batch_ndims, validate_args=None):
        batch = base_distribution.batch_shape
        if reinterpreted_batch_ndims > len(batch):
            raise ValueError("Expected reinterpreted_batch_ndims <= len(base_distribution.batch_shape), actual "
                             f"{reinterpreted_batch_ndims} vs {len(batch)}")
        self.base_dist, self.reinterpreted_batch_ndims = base_distribution, reinterpreted_batch_ndims
        cut = len(batch) - reinterpreted_batch_ndims
        super().__init__(batch[:cut], batch[cut:] + base_distribution.event_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        batch_shape = tuple(batch_shape)
        extra = self._event_shape[:self.reinterpreted_batch_ndims]
        return Independent(self.base_dist.expand(batch_shape + extra), self.reinterpreted_batch_ndims,
                           validate_args=False)

    @property
    def has_rsample(self):
        return self.base_dist.has_rsample

    @property
    def has_enumerate_support(self):
        return self.reinterpreted_batch_ndims == 0 and self.base_dist.has_enumerate_support

    @property
    def support(self):
        return self.base_dist.support

    @property
    def mean(self):
        return self.base_dist.mean

    @property
    def mode(self):
        return self.base_dist.mode

    @property
    def variance(self):
        return self.base_dist.variance

    def sample(self, sample_shape=()):
        return self.base_dist.sample(sample_shape)

    def rsample(self, sample_shape=()):
        return self.base_dist.rsample(sample_shape)

    def _sum_rightmost(self, value):
        r = self.reinterpreted_batch_ndims
        return value.sum(tuple(range(-r, 0))) if r else value

    def log_prob(self, value):
        return self._sum_rightmost(self.base_dist.log_prob(value))

    def entropy(self):
        return self._sum_rightmost(self.base_dist.entropy())

    def enumerate_support(self, expand=True):
        if self.reinterpreted_batch_ndims > 0:
            raise NotImplementedError("Enumeration over cartesian product is not implemented")
        return self.base_dist.enumerate_support(expand=expand)

    def __repr__(self):
        return f"Independent({self.base_dist!r}, {self.reinterpreted_batch_ndims})"


