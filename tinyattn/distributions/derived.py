"""Floor 4: families built on the basic ones: the heavy-tailed and transformed continuous families (``Gumbel``,
``HalfNormal``, ``LogNormal``, ``Cauchy``, ``StudentT``, ``Chi2``), the discrete ``Geometric`` and
``Multinomial``, the relaxed (Gumbel-softmax) and straight-through categoricals, and ``MixtureSameFamily``.
Each writes torch's formulas in the library's differentiable operations.
"""

import math

import numpy as np

from ..engine import Tensor
from ..grad_mode import no_grad
from ..ops import where
from . import constraints
from .distribution import (
    Distribution,
    as_value,
    broadcast_all,
    checked,
    clamp_probs,
    digamma,
    draw,
    from_host,
    host_generator,
    lazy_property,
    lgamma,
    logits_to_probs,
    parameter_of,
    probs_to_logits,
)
from .families import Binomial, Categorical, Gamma, Normal, OneHotCategorical, OverCategorical

__all__ = ["Gumbel", "HalfNormal", "LogNormal", "Cauchy", "StudentT", "Chi2", "Geometric", "Multinomial",
           "OneHotCategoricalStraightThrough", "RelaxedBernoulli", "RelaxedOneHotCategorical", "MixtureSameFamily"]

_EULER_GAMMA = 0.57721566490153286060


def _full(like, shape, value):
    return Tensor._wrap(np.full(shape, value, dtype=like.dtype), like)


def _softplus(x):
    return x.clamp(min=0) + (-x.abs()).exp().log1p()


def _open_uniform(like, shape):
    """Uniform draws kept inside ``(tiny, 1 - eps)``, so that their logarithms and ``log(-log u)`` are finite."""
    return clamp_probs(draw(like, shape, "uniform").clamp(min=float(np.finfo(like.dtype).tiny)))


class Gumbel(Distribution):
    """The Gumbel distribution: with ``z = (x - loc) / scale``, ``log p(x) = -(log scale + z + e^(-z))``;
    ``rsample`` is ``loc - scale · log(-log u)``.

    >>> import tinyattn as ta
    >>> from tinyattn.distributions import Gumbel
    >>> round(Gumbel(ta.tensor([0.0]), ta.tensor([1.0])).log_prob(ta.tensor([0.0])).item(), 4)
    -1.0
    """

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        self.loc, self.scale = broadcast_all(loc, scale)
        super().__init__(self.loc.shape, validate_args=validate_args)

    @property
    def mean(self):
        return self.loc + self.scale * _EULER_GAMMA

    @property
    def mode(self):
        return self.loc

    @property
    def stddev(self):
        return (math.pi / math.sqrt(6)) * self.scale

    @property
    def variance(self):
        return self.stddev ** 2

    def rsample(self, sample_shape=()):
        u = _open_uniform(self.loc, self._extended_shape(sample_shape))
        return self.loc - self.scale * (-u.log()).log()

    def log_prob(self, value):
        value = checked(self, value)
        z = (value - self.loc) / self.scale
        return -(self.scale.log() + z + (-z).exp())

    def cdf(self, value):
        value = checked(self, value)
        return (-(-(value - self.loc) / self.scale).exp()).exp()

    def icdf(self, value):
        return self.loc - self.scale * (-as_value(value, self.loc).log()).log()

    def entropy(self):
        return self.scale.log() + (1 + _EULER_GAMMA)


class HalfNormal(Distribution):
    """``|X|`` for ``X ~ N(0, scale²)``: ``log p(x) = log 2 + log N(x; 0, scale)`` for ``x >= 0``.

    >>> import tinyattn as ta
    >>> from tinyattn.distributions import HalfNormal
    >>> round(HalfNormal(ta.tensor([1.0])).mean.item(), 4)
    0.7979
    """

    arg_constraints = {"scale": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True

    def __init__(self, scale, validate_args=None):
        (self.scale,) = broadcast_all(scale)
        self._normal = Normal(self.scale * 0, self.scale, validate_args=False)
        super().__init__(self.scale.shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return HalfNormal(self.scale.expand(*batch_shape), validate_args=False)

    @property
    def mean(self):
        return self.scale * math.sqrt(2 / math.pi)

    @property
    def mode(self):
        return self.scale * 0

    @property
    def variance(self):
        return self.scale ** 2 * (1 - 2 / math.pi)

    def rsample(self, sample_shape=()):
        return self._normal.rsample(sample_shape).abs()

    def log_prob(self, value):
        value = checked(self, value)
        log_prob = self._normal.log_prob(value) + math.log(2)
        return where(value >= 0, log_prob, _full(log_prob, log_prob.shape, -math.inf))

    def cdf(self, value):
        value = checked(self, value)
        return 2 * self._normal.cdf(value) - 1

    def icdf(self, prob):
        return self._normal.icdf((as_value(prob, self.scale) + 1) / 2)

    def entropy(self):
        return self._normal.entropy() - math.log(2)


class LogNormal(Distribution):
    """``exp(X)`` for ``X ~ N(loc, scale²)``: ``log p(x) = log N(log x; loc, scale) - log x``.

    >>> import tinyattn as ta
    >>> from tinyattn.distributions import LogNormal
    >>> round(LogNormal(ta.tensor([0.0]), ta.tensor([1.0])).mean.item(), 4)
    1.6487
    """

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.positive
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        self.loc, self.scale = broadcast_all(loc, scale)
        self._normal = Normal(self.loc, self.scale, validate_args=False)
        super().__init__(self.loc.shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return LogNormal(self.loc.expand(*batch_shape), self.scale.expand(*batch_shape), validate_args=False)

    @property
    def mean(self):
        return (self.loc + self.scale ** 2 / 2).exp()

    @property
    def mode(self):
        return (self.loc - self.scale ** 2).exp()

    @property
    def variance(self):
        scale_sq = self.scale ** 2
        return scale_sq.expm1() * (2 * self.loc + scale_sq).exp()

    def rsample(self, sample_shape=()):
        return self._normal.rsample(sample_shape).exp()

    def log_prob(self, value):
        value = checked(self, value)
        log_value = value.log()
        return self._normal.log_prob(log_value) - log_value

    def cdf(self, value):
        return self._normal.cdf(checked(self, value).log())

    def icdf(self, value):
        return self._normal.icdf(value).exp()

    def entropy(self):
        return self._normal.entropy() + self.loc


class Cauchy(Distribution):
    """The Cauchy distribution: ``log p(x) = -log π - log scale - log(1 + ((x - loc) / scale)²)``; no mean.

    >>> import tinyattn as ta
    >>> from tinyattn.distributions import Cauchy
    >>> round(Cauchy(ta.tensor([0.0]), ta.tensor([1.0])).log_prob(ta.tensor([0.0])).item(), 4)
    -1.1447
    """

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        self.loc, self.scale = broadcast_all(loc, scale)
        super().__init__(self.loc.shape, validate_args=validate_args)

    @property
    def mean(self):
        return _full(self.loc, self.loc.shape, np.nan)

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        return _full(self.loc, self.loc.shape, np.inf)

    def rsample(self, sample_shape=()):
        u = _open_uniform(self.loc, self._extended_shape(sample_shape))
        return self.loc + self.scale * (math.pi * (u - 0.5)).tan()

    def log_prob(self, value):
        value = checked(self, value)
        return -math.log(math.pi) - self.scale.log() - (((value - self.loc) / self.scale) ** 2).log1p()

    def cdf(self, value):
        value = checked(self, value)
        return ((value - self.loc) / self.scale).atan() / math.pi + 0.5

    def icdf(self, value):
        return (math.pi * (as_value(value, self.loc) - 0.5)).tan() * self.scale + self.loc

    def entropy(self):
        return math.log(4 * math.pi) + self.scale.log()


class Chi2(Gamma):
    """The chi-squared distribution with ``df`` degrees of freedom: ``Gamma(df / 2, 1 / 2)``.

    >>> import tinyattn as ta
    >>> from tinyattn.distributions import Chi2
    >>> Chi2(ta.tensor([4.0])).mean.item()
    4.0
    """

    arg_constraints = {"df": constraints.positive}

    def __init__(self, df, validate_args=None):
        (df,) = broadcast_all(df)
        super().__init__(0.5 * df, df * 0 + 0.5, validate_args=validate_args)
        self.df = df

    def expand(self, batch_shape, _instance=None):
        return Chi2(self.df.expand(*batch_shape), validate_args=False)


class StudentT(Distribution):
    """Student's t distribution of ``df`` degrees of freedom, location ``loc`` and scale ``scale``; ``rsample`` is
    ``loc + scale · X / √(Z / df)`` with ``X`` standard normal and ``Z ~ χ²(df)``.

    >>> import tinyattn as ta
    >>> from tinyattn.distributions import StudentT
    >>> round(StudentT(ta.tensor([3.0])).log_prob(ta.tensor([0.0])).item(), 4)
    -1.0009
    """

    arg_constraints = {"df": constraints.positive, "loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, df, loc=0.0, scale=1.0, validate_args=None):
        self.df, self.loc, self.scale = broadcast_all(df, loc, scale)
        self._chi2 = Chi2(self.df, validate_args=False)
        super().__init__(self.df.shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return StudentT(*(p.expand(*batch_shape) for p in (self.df, self.loc, self.scale)), validate_args=False)

    @property
    def mean(self):
        return where(self.df > 1, self.loc, _full(self.loc, self.loc.shape, np.nan))

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        df = self.df
        finite = self.scale ** 2 * df / where(df > 2, df - 2, 1.0)
        infinite = _full(df, df.shape, np.inf)
        return where(df > 2, finite, where(df > 1, infinite, _full(df, df.shape, np.nan)))

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        X = draw(self.df, shape)
        Z = self._chi2.rsample(sample_shape)
        return self.loc + self.scale * X * (Z / self.df).rsqrt()

    def log_prob(self, value):
        value = checked(self, value)
        y = (value - self.loc) / self.scale
        Z = (self.scale.log() + 0.5 * self.df.log() + 0.5 * math.log(math.pi) + lgamma(0.5 * self.df)
             - lgamma(0.5 * (self.df + 1.0)))
        return -0.5 * (self.df + 1.0) * (y ** 2 / self.df).log1p() - Z

    def entropy(self):
        df = self.df
        lbeta = lgamma(0.5 * df) + math.lgamma(0.5) - lgamma(0.5 * (df + 1))
        return (self.scale.log() + 0.5 * (df + 1) * (digamma(0.5 * (df + 1)) - digamma(0.5 * df))
                + 0.5 * df.log() + lbeta)


class Geometric(Distribution):
    """The number of failures before the first success, each trial succeeding with ``probs`` (or
    ``sigmoid(logits)``): ``log p(k) = k log(1 - p) + log p``.

    >>> import tinyattn as ta
    >>> from tinyattn.distributions import Geometric
    >>> d = Geometric(probs=ta.tensor([0.5]))
    >>> d.mean.item(), round(d.log_prob(ta.tensor([2.0])).item(), 4)
    (1.0, -2.0794)
    """

    arg_constraints = {"probs": constraints.Constraint("interval(0, 1]", lambda x: (x > 0) & (x <= 1)),
                       "logits": constraints.real}
    support = constraints.nonnegative_integer

    def __init__(self, probs=None, logits=None, validate_args=None):
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        if probs is not None:
            (self.probs,) = broadcast_all(probs)
        else:
            (self.logits,) = broadcast_all(logits)
        super().__init__(parameter_of(self).shape, validate_args=validate_args)

    @lazy_property
    def logits(self):
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self):
        return logits_to_probs(self.logits, is_binary=True)

    @property
    def mean(self):
        return 1.0 / self.probs - 1.0

    @property
    def mode(self):
        return self.probs * 0

    @property
    def variance(self):
        return (1.0 / self.probs - 1.0) / self.probs

    def sample(self, sample_shape=()):
        with no_grad():
            probs = self.probs.detach()
            u = draw(probs, self._extended_shape(sample_shape), "uniform").clamp(
                min=float(np.finfo(probs.dtype).tiny))
            return (u.log() / (-probs).log1p()).floor()

    def log_prob(self, value):
        value = checked(self, value)
        probs = self.probs
        safe = where((probs == 1) & (value == 0), 0.0, probs)  # 0 · log 0 at p = 1, k = 0: 0, as in torch
        return value * (-safe).log1p() + self.probs.log()

    def entropy(self):
        logits, probs = self.logits, self.probs
        return (logits.clamp(min=0) - logits * probs + (-logits.abs()).exp().log1p()) / probs


class Multinomial(OverCategorical):
    """Counts of ``total_count`` draws among ``K`` categories of probabilities ``probs`` (or ``softmax(logits)``):
    ``log p(x) = log n! - Σ log xᵢ! + Σ xᵢ log pᵢ``; ``event_shape`` is ``(K,)``.

    >>> import tinyattn as ta
    >>> from tinyattn.distributions import Multinomial
    >>> d = Multinomial(4, probs=ta.tensor([0.5, 0.5]))
    >>> round(d.log_prob(ta.tensor([2.0, 2.0])).item(), 4)
    -0.9808
    """

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}

    def __init__(self, total_count=1, probs=None, logits=None, validate_args=None):
        if not isinstance(total_count, (int, np.integer)):
            raise NotImplementedError("inhomogeneous total_count is not supported")
        self.total_count = int(total_count)
        super().__init__(probs, logits, validate_args=validate_args)

    @property
    def support(self):
        n = self.total_count
        return constraints.Constraint(f"multinomial(upper_bound={n})",  # torch's check: counts >= 0, sum <= n
                                      lambda x: (x >= 0).all(-1) & (x.sum(-1) <= n), event_dim=1, is_discrete=True)

    @property
    def mean(self):
        return self.probs * self.total_count

    @property
    def variance(self):
        return self.total_count * self.probs * (1 - self.probs)

    def sample(self, sample_shape=()):
        probs = self.probs.detach().numpy().astype(np.float64)
        shape = self._extended_shape(sample_shape)
        flat = probs.reshape(-1, probs.shape[-1])
        sample_size = int(np.prod(shape[:len(shape) - len(probs.shape)], dtype=np.int64))
        counts = host_generator().multinomial(self.total_count, flat / flat.sum(-1, keepdims=True),
                                              size=(sample_size, flat.shape[0]))
        return from_host(counts.reshape(shape), self.probs)

    def entropy(self):
        """torch's closed form: ``n H(categorical) - log n! + Σᵢ E[log xᵢ!]``, each count ``xᵢ`` binomial."""
        n = self.total_count
        binomial = Binomial(n, probs=self.probs, validate_args=False)
        support = binomial.enumerate_support(expand=False)[1:]  # (n, 1, …): 1 … n
        binomial_probs = binomial.log_prob(support).exp()  # (n, *batch_shape, K)
        weights = lgamma(support + 1)
        term2 = (binomial_probs * weights).sum(-1).sum(0)
        return n * self._categorical.entropy() - math.lgamma(n + 1) + term2

    def log_prob(self, value):
        value = checked(self, value)
        shape = np.broadcast_shapes(value.shape, self.logits.shape)
        logits, value = self.logits.expand(*shape), value.expand(*shape)
        logits = where((value == 0) & (logits == -math.inf), 0.0, logits)
        return lgamma(value.sum(-1) + 1) - lgamma(value + 1).sum(-1) + (logits * value).sum(-1)


class OneHotCategoricalStraightThrough(OneHotCategorical):
    """``OneHotCategorical`` whose ``rsample`` is the one-hot draw in the forward pass and lets the gradient through
    to ``probs`` (``sample + probs - probs.detach()``), the straight-through estimator.

    >>> import tinyattn as ta
    >>> from tinyattn.distributions import OneHotCategoricalStraightThrough
    >>> logits = ta.zeros(3, requires_grad=True)
    >>> draw = OneHotCategoricalStraightThrough(logits=logits).rsample()
    >>> (draw * ta.tensor([1.0, 2.0, 3.0])).sum().backward()
    >>> logits.grad.shape
    (3,)
    """

    has_rsample = True

    def rsample(self, sample_shape=()):
        samples = self.sample(sample_shape)
        probs = self._categorical.probs
        return samples + (probs - probs.detach())


class RelaxedOneHotCategorical(OverCategorical):
    """The Gumbel-softmax (Concrete) distribution on the simplex (Jang et al., Maddison et al., 2017):
    ``rsample`` is ``softmax((logits + g) / temperature)`` with ``g`` Gumbel noise; ``log_prob`` is torch's
    (the exp-relaxed categorical's density, moved onto the simplex).

    >>> import tinyattn as ta
    >>> from tinyattn.distributions import RelaxedOneHotCategorical
    >>> d = RelaxedOneHotCategorical(ta.tensor(0.5), logits=ta.zeros(3))
    >>> round(d.rsample().sum().item(), 5)
    1.0
    """

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}
    support = constraints.simplex
    has_rsample = True

    def __init__(self, temperature, probs=None, logits=None, validate_args=None):
        (self.temperature,) = broadcast_all(temperature) if not isinstance(temperature, Tensor) else (temperature,)
        super().__init__(probs, logits, validate_args=validate_args)

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        u = clamp_probs(draw(self.logits, shape, "uniform"))
        gumbels = -(-u.log()).log()
        scores = (self.logits + gumbels) / self.temperature
        return (scores - scores.logsumexp(-1, keepdim=True)).exp().clamp(min=float(np.finfo(scores.dtype).tiny))

    def log_prob(self, value):
        value = checked(self, value)
        x = value.log()  # the exp-relaxed categorical's value
        K = self._event_shape[0]
        log_scale = math.lgamma(K) + (K - 1) * self.temperature.log()
        score = self.logits - x * self.temperature
        score = (score - score.logsumexp(-1, keepdim=True)).sum(-1)
        return score + log_scale - x.sum(-1)


class RelaxedBernoulli(Distribution):
    """The relaxed (Concrete) Bernoulli on ``(0, 1)``: ``rsample`` is ``sigmoid((logits + log u - log(1 - u)) /
    temperature)``; ``log_prob`` is torch's (the logit-relaxed density, moved by the sigmoid).

    >>> import tinyattn as ta
    >>> from tinyattn.distributions import RelaxedBernoulli
    >>> 0 < RelaxedBernoulli(ta.tensor(0.5), probs=ta.tensor([0.3])).rsample().item() < 1
    True
    """

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.unit_interval
    has_rsample = True

    def __init__(self, temperature, probs=None, logits=None, validate_args=None):
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        if probs is not None:
            (self.probs,) = broadcast_all(probs)
        else:
            (self.logits,) = broadcast_all(logits)
        (self.temperature,) = broadcast_all(temperature) if not isinstance(temperature, Tensor) else (temperature,)
        super().__init__(parameter_of(self).shape, validate_args=validate_args)

    @lazy_property
    def logits(self):
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self):
        return logits_to_probs(self.logits, is_binary=True)

    def rsample(self, sample_shape=()):
        u = clamp_probs(draw(self.logits, self._extended_shape(sample_shape), "uniform"))
        x = (u.log() - (-u).log1p() + self.logits) / self.temperature
        return clamp_probs(x.sigmoid())

    def log_prob(self, value):
        value = checked(self, value)
        y = value.clamp(min=float(np.finfo(value.dtype).tiny), max=1 - float(np.finfo(value.dtype).eps))
        x = y.log() - (-y).log1p()  # logit(y)
        diff = self.logits - x * self.temperature
        base = self.temperature.log() + diff - 2 * _softplus(diff)
        return base + _softplus(-x) + _softplus(x)  # minus log|d sigmoid/dx| = softplus(-x) + softplus(x)


class MixtureSameFamily(Distribution):
    """A mixture: the component ``k ~ mixture_distribution`` (a ``Categorical`` over the last batch dimension of
    ``component_distribution``), then a draw of component ``k``. ``log p(x) = logsumexp_k(log πₖ + log pₖ(x))``.

    >>> import tinyattn as ta
    >>> from tinyattn.distributions import Categorical, MixtureSameFamily, Normal
    >>> mix = MixtureSameFamily(Categorical(probs=ta.tensor([0.5, 0.5])),
    ...                         Normal(ta.tensor([-1.0, 1.0]), ta.tensor([1.0, 1.0])))
    >>> mix.mean.item(), mix.variance.item()
    (0.0, 2.0)
    """

    arg_constraints = {}

    def __init__(self, mixture_distribution, component_distribution, validate_args=None):
        if not isinstance(mixture_distribution, Categorical):
            raise ValueError(" The Mixture distribution needs to be an  instance of torch.distributions.Categorical")
        if not isinstance(component_distribution, Distribution):
            raise ValueError("The Component distribution need to be an instance of torch.distributions.Distribution")
        mixture_batch, component_batch = mixture_distribution.batch_shape, component_distribution.batch_shape[:-1]
        if mixture_batch and np.broadcast_shapes(mixture_batch, component_batch) != component_batch:
            raise ValueError(f"`mixture_distribution.batch_shape` ({mixture_batch}) is not compatible with "
                             f"`component_distribution.batch_shape`({component_batch})")
        k_mix, k_comp = mixture_distribution.logits.shape[-1], component_distribution.batch_shape[-1]
        if k_mix != k_comp:
            raise ValueError(f"`mixture_distribution component` ({k_mix}) does not equal "
                             f"`component_distribution.batch_shape[-1]` ({k_comp})")
        self._mixture_distribution, self._component_distribution = mixture_distribution, component_distribution
        self._event_ndims = len(component_distribution.event_shape)
        super().__init__(component_batch, component_distribution.event_shape, validate_args=validate_args)

    @property
    def mixture_distribution(self):
        return self._mixture_distribution

    @property
    def component_distribution(self):
        return self._component_distribution

    @property
    def support(self):
        return self._component_distribution.support

    def _pad_mixture(self, probs):
        return probs.reshape(*probs.shape, *(1,) * self._event_ndims)  # (…, K, 1 per event dim)

    @property
    def mean(self):
        probs = self._pad_mixture(self._mixture_distribution.probs)
        return (probs * self._component_distribution.mean).sum(-1 - self._event_ndims)

    @property
    def variance(self):
        probs = self._pad_mixture(self._mixture_distribution.probs)
        k = -1 - self._event_ndims
        mean_cond_var = (probs * self._component_distribution.variance).sum(k)
        var_cond_mean = (probs * (self._component_distribution.mean - self.mean.unsqueeze(k)) ** 2).sum(k)
        return mean_cond_var + var_cond_mean

    def log_prob(self, value):
        value = as_value(value, parameter_of(self._component_distribution))
        if self._validate_args:
            self._validate_sample(value)
        value = value.unsqueeze(-1 - self._event_ndims)  # (…, 1, *event): against every component
        log_prob_x = self._component_distribution.log_prob(value)  # (…, K)
        log_mix = self._mixture_distribution.logits  # (…, K)
        return (log_prob_x + log_mix).logsumexp(-1)

    def cdf(self, value):
        value = as_value(value, parameter_of(self._component_distribution)).unsqueeze(-1 - self._event_ndims)
        return (self._component_distribution.cdf(value) * self._mixture_distribution.probs).sum(-1)

    def sample(self, sample_shape=()):
        with no_grad():
            sample_shape = (sample_shape,) if isinstance(sample_shape, int) else tuple(sample_shape)
            index = self._mixture_distribution.sample(sample_shape)  # (*sample_shape, *mixture_batch)
            components = self._component_distribution.sample(sample_shape)  # (*s, *batch, K, *event)
            index = index.reshape(*index.shape, 1, *(1,) * self._event_ndims)
            index = index.expand(*components.shape[:-1 - self._event_ndims], 1, *self._event_shape)
            return components.gather(-1 - self._event_ndims, index).squeeze(-1 - self._event_ndims)

