"""Floor 4: ``kl_divergence(p, q)`` = ``E_p[log p(x) - log q(x)]`` in closed form, for the pairs registered with
``register_kl``; the most specific registered pair of classes wins, as in torch.
"""

import math

import numpy as np

from ..engine import Tensor
from ..ops import where
from .distribution import digamma, lgamma
from .families import (
    Bernoulli,
    Beta,
    Categorical,
    Dirichlet,
    Exponential,
    Gamma,
    Independent,
    Laplace,
    MultivariateNormal,
    Normal,
    OneHotCategorical,
    Poisson,
    Uniform,
    solve_lower,
)

__all__ = ["kl_divergence", "register_kl"]

_KL_REGISTRY = {}  # {(type_p, type_q): fn}


def register_kl(type_p, type_q):
    """A decorator that registers ``fn(p, q)`` as ``kl_divergence`` for ``p`` of class ``type_p`` and ``q`` of
    ``type_q`` (or subclasses: the most specific registered pair wins).

    >>> import tinyattn as ta
    >>> from tinyattn.distributions import Normal, kl_divergence, register_kl
    >>> class Wide(Normal): pass
    >>> @register_kl(Wide, Normal)
    ... def _kl_wide_normal(p, q): return ta.zeros(1)
    >>> kl_divergence(Wide(0.0, 1.0), Normal(0.0, 2.0)).item()
    0.0
    """
    if not (isinstance(type_p, type) and isinstance(type_q, type)):
        raise TypeError(f"register_kl: expected two distribution classes, got {type_p!r} and {type_q!r}")

    def decorator(fn):
        _KL_REGISTRY[type_p, type_q] = fn
        return fn

    return decorator


def _dispatch(type_p, type_q):
    matches = [(super_p, super_q) for super_p, super_q in _KL_REGISTRY
               if issubclass(type_p, super_p) and issubclass(type_q, super_q)]
    if not matches:
        return None
    # the pair nearest in both classes' method resolution orders
    return _KL_REGISTRY[min(matches, key=lambda pair: (type_p.__mro__.index(pair[0]) + type_q.__mro__.index(pair[1]),
                                                       type_p.__mro__.index(pair[0])))]


def kl_divergence(p, q):
    """``KL(p ‖ q) = E_p[log p(x) - log q(x)]``, per batch element, in closed form.

    Raises ``NotImplementedError`` for a pair with no registered formula.

    >>> import tinyattn as ta
    >>> from tinyattn.distributions import Bernoulli, kl_divergence
    >>> round(kl_divergence(Bernoulli(ta.tensor([0.5])), Bernoulli(ta.tensor([0.25]))).item(), 4)
    0.1438
    """
    fn = _dispatch(type(p), type(q))
    if fn is None:
        raise NotImplementedError(f"No KL(p || q) is implemented for p type {type(p).__name__} and q type "
                                  f"{type(q).__name__}")
    return fn(p, q)


def _infinity_where(condition, value):
    return where(condition, Tensor._wrap(np.array(math.inf, dtype=value.dtype), value), value)


@register_kl(Normal, Normal)
def _kl_normal_normal(p, q):
    var_ratio = (p.scale / q.scale) ** 2
    t1 = ((p.loc - q.loc) / q.scale) ** 2
    return 0.5 * (var_ratio + t1 - 1 - var_ratio.log())


@register_kl(Bernoulli, Bernoulli)
def _kl_bernoulli_bernoulli(p, q):
    def softplus(x):
        return x.clamp(min=0) + (-x.abs()).exp().log1p()

    t1 = p.probs * (softplus(-q.logits) - softplus(-p.logits))
    t1 = where(p.probs == 0, 0.0, _infinity_where(q.probs == 0, t1))
    t2 = (1 - p.probs) * (softplus(q.logits) - softplus(p.logits))
    t2 = where(p.probs == 1, 0.0, _infinity_where(q.probs == 1, t2))
    return t1 + t2


@register_kl(Categorical, Categorical)
def _kl_categorical_categorical(p, q):
    t = p.probs * (p.logits - q.logits)
    shape = t.shape
    t = _infinity_where((q.probs == 0).expand(*shape), t)
    t = where((p.probs == 0).expand(*shape), 0.0, t)
    return t.sum(-1)


@register_kl(OneHotCategorical, OneHotCategorical)
def _kl_onehotcategorical_onehotcategorical(p, q):
    return _kl_categorical_categorical(p._categorical, q._categorical)


@register_kl(Uniform, Uniform)
def _kl_uniform_uniform(p, q):
    result = ((q.high - q.low) / (p.high - p.low)).log()
    return _infinity_where((q.low > p.low) | (q.high < p.high), result)


@register_kl(Exponential, Exponential)
def _kl_exponential_exponential(p, q):
    rate_ratio = q.rate / p.rate
    return -rate_ratio.log() + rate_ratio - 1


@register_kl(Laplace, Laplace)
def _kl_laplace_laplace(p, q):
    scale_ratio = p.scale / q.scale
    loc_abs_diff = (p.loc - q.loc).abs()
    t1 = -scale_ratio.log()
    t2 = loc_abs_diff / q.scale
    t3 = scale_ratio * (-loc_abs_diff / p.scale).exp()
    return t1 + t2 + t3 - 1


@register_kl(Poisson, Poisson)
def _kl_poisson_poisson(p, q):
    return p.rate * (p.rate.log() - q.rate.log()) - (p.rate - q.rate)


@register_kl(Gamma, Gamma)
def _kl_gamma_gamma(p, q):
    t1 = q.concentration * (p.rate / q.rate).log()
    t2 = lgamma(q.concentration) - lgamma(p.concentration)
    t3 = (p.concentration - q.concentration) * digamma(p.concentration)
    t4 = (q.rate - p.rate) * (p.concentration / p.rate)
    return t1 + t2 + t3 + t4


@register_kl(Dirichlet, Dirichlet)
def _kl_dirichlet_dirichlet(p, q):
    sum_p = p.concentration.sum(-1)
    sum_q = q.concentration.sum(-1)
    t1 = lgamma(sum_p) - lgamma(sum_q)
    t2 = (lgamma(p.concentration) - lgamma(q.concentration)).sum(-1)
    t3 = p.concentration - q.concentration
    t4 = digamma(p.concentration) - digamma(sum_p).unsqueeze(-1)
    return t1 - t2 + (t3 * t4).sum(-1)


@register_kl(Beta, Beta)
def _kl_beta_beta(p, q):
    return _kl_dirichlet_dirichlet(p._dirichlet, q._dirichlet)


@register_kl(MultivariateNormal, MultivariateNormal)
def _kl_multivariatenormal_multivariatenormal(p, q):
    """``½ (‖L_q⁻¹ L_p‖²_F + ‖L_q⁻¹ (μ_q - μ_p)‖² - n) + log |L_q| - log |L_p|``."""
    if p.event_shape != q.event_shape:
        raise ValueError("KL-divergence between two Multivariate Normals with different event shapes cannot be "
                         "computed")
    Lp, Lq = p._unbroadcasted_scale_tril, q._unbroadcasted_scale_tril
    n = p.event_shape[0]
    half_term1 = q._half_log_det() - p._half_log_det()
    term2 = (solve_lower(Lq.unsqueeze(-3), Lp.mT) ** 2).sum((-2, -1))  # the columns of L_q⁻¹ L_p, solved one by one
    term3 = (solve_lower(Lq, q.loc - p.loc) ** 2).sum(-1)
    return half_term1 + 0.5 * (term2 + term3 - n)


@register_kl(Independent, Independent)
def _kl_independent_independent(p, q):
    if p.reinterpreted_batch_ndims != q.reinterpreted_batch_ndims:
        raise NotImplementedError("KL between Independents with different reinterpreted_batch_ndims")
    return p._sum_rightmost(kl_divergence(p.base_dist, q.base_dist))
