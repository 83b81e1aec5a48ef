"""Floor 4: invertible maps of random variables and ``TransformedDistribution``, as torch's.

A transform ``y = f(x)`` gives its inverse (``inv``) and ``log |dy/dx|`` (``log_abs_det_jacobian(x, y)``);
``TransformedDistribution(base, transforms)`` draws ``f(x)`` for ``x`` from ``base`` and scores
``log p(y) = log p_base(f⁻¹(y)) - log |dy/dx|``. The transforms here act elementwise (``AffineTransform``
may reinterpret rightmost dimensions as the event's). The Soft Actor-Critic policy, a tanh-squashed
normal, is ``TransformedDistribution(Normal(μ, σ), [TanhTransform(cache_size=1)])``.
"""

import math

import numpy as np

from ..engine import Tensor
from . import constraints
from .distribution import Distribution, as_value, clamp_probs, parameter_of

__all__ = ["Transform", "ComposeTransform", "ExpTransform", "AffineTransform", "SigmoidTransform", "TanhTransform",
           "SoftplusTransform", "PowerTransform", "AbsTransform", "identity_transform", "TransformedDistribution"]


def _softplus(x):
    return x.clamp(min=0) + (-x.abs()).exp().log1p()


def _sum_rightmost(value, dims):
    return value.sum(tuple(range(-dims, 0))) if dims > 0 else value


class Transform:
    """An invertible map ``y = f(x)``: call it on ``x``; ``inv`` is ``f⁻¹`` (a transform too);
    ``log_abs_det_jacobian(x, y)`` is ``log |dy/dx|``, elementwise. With ``cache_size=1`` the last ``(x, y)``
    pair is kept, so that ``inv(y)`` of the ``y`` just made returns its ``x`` exactly (torch's cache).

    >>> import tinyattn as ta
    >>> from tinyattn.distributions.transforms import ExpTransform
    >>> t = ExpTransform()
    >>> t(ta.tensor([0.0])), t.inv(ta.tensor([1.0])), t.sign
    (tensor([1.]), tensor([0.]), 1)
    """

    bijective = True
    sign = 1
    domain = constraints.real
    codomain = constraints.real
    event_dim = 0

    def __init__(self, cache_size=0):
        if cache_size not in (0, 1):
            raise ValueError("cache_size must be 0 or 1")
        self._cache_size, self._cached = cache_size, None

    def __call__(self, x):
        if self._cache_size and self._cached is not None and self._cached[0] is x:
            return self._cached[1]
        y = self._call(x)
        if self._cache_size:
            self._cached = (x, y)
        return y

    def _inverse_of(self, y):
        if self._cache_size and self._cached is not None and self._cached[1] is y:
            return self._cached[0]
        x = self._inverse(y)
        if self._cache_size:
            self._cached = (x, y)
        return x

    @property
    def inv(self):
        return _InverseTransform(self)

    def _call(self, x):
        raise NotImplementedError(f"{type(self).__name__} has no forward map")

    def _inverse(self, y):
        raise NotImplementedError(f"{type(self).__name__} is not invertible")

    def log_abs_det_jacobian(self, x, y):
        raise NotImplementedError(f"{type(self).__name__} has no log_abs_det_jacobian")

    def __repr__(self):
        return f"{type(self).__name__}()"


class _InverseTransform(Transform):
    def __init__(self, transform):
        super().__init__()
        self._transform = transform
        self.domain, self.codomain, self.sign = transform.codomain, transform.domain, transform.sign
        self.event_dim = transform.event_dim

    @property
    def inv(self):
        return self._transform

    def __call__(self, y):
        return self._transform._inverse_of(y)

    def log_abs_det_jacobian(self, x, y):
        return -self._transform.log_abs_det_jacobian(y, x)


class ComposeTransform(Transform):
    """``parts`` applied in order: ``y = f_n(…f_1(x))``; its ``log |dy/dx|`` sums theirs at the intermediate values.

    >>> import tinyattn as ta
    >>> from tinyattn.distributions.transforms import AffineTransform, ComposeTransform, ExpTransform
    >>> ComposeTransform([AffineTransform(1.0, 2.0), ExpTransform()])(ta.tensor([0.0]))
    tensor([2.718282])
    """

    def __init__(self, parts, cache_size=0):
        super().__init__(cache_size)
        self.parts = list(parts)
        if self.parts:
            self.domain, self.codomain = self.parts[0].domain, self.parts[-1].codomain
            self.event_dim = max(p.event_dim for p in self.parts)
        self.sign = int(np.prod([p.sign for p in self.parts])) if self.parts else 1

    def _call(self, x):
        for part in self.parts:
            x = part(x)
        return x

    def _inverse(self, y):
        for part in reversed(self.parts):
            y = part.inv(y)
        return y

    def log_abs_det_jacobian(self, x, y):
        if not self.parts:
            return x * 0
        total = 0
        for part in self.parts:
            y_part = part(x)
            term = _sum_rightmost(part.log_abs_det_jacobian(x, y_part), self.event_dim - part.event_dim)
            total = total + term
            x = y_part
        return total


identity_transform = ComposeTransform([])
identity_transform.__doc__ = """The transform that changes nothing (torch's identity_transform, an empty composition).

    >>> import tinyattn as ta
    >>> identity_transform(ta.tensor([1.5]))
    tensor([1.5])
    """


class ExpTransform(Transform):
    """``y = eˣ``; ``log |dy/dx| = x``.

    >>> import tinyattn as ta
    >>> ExpTransform().log_abs_det_jacobian(ta.tensor([2.0]), None)
    tensor([2.])
    """

    codomain = constraints.positive

    def _call(self, x):
        return x.exp()

    def _inverse(self, y):
        return y.log()

    def log_abs_det_jacobian(self, x, y):
        return x


class AffineTransform(Transform):
    """``y = loc + scale · x``; ``log |dy/dx| = log |scale|``, summed over ``event_dim`` rightmost dimensions.

    >>> import tinyattn as ta
    >>> AffineTransform(1.0, 3.0)(ta.tensor([2.0]))
    tensor([7.])
    """

    def __init__(self, loc, scale, event_dim=0, cache_size=0):
        super().__init__(cache_size)
        self.loc, self.scale, self.event_dim = loc, scale, event_dim

    @property
    def sign(self):
        scale = self.scale
        return int(np.sign(scale)) if isinstance(scale, (int, float)) else scale.sign()

    def _call(self, x):
        return self.loc + self.scale * x

    def _inverse(self, y):
        return (y - self.loc) / self.scale

    def log_abs_det_jacobian(self, x, y):
        scale = self.scale if isinstance(self.scale, Tensor) else as_value(self.scale, x)
        result = scale.abs().log() + x * 0  # (x's shape)
        return _sum_rightmost(result, self.event_dim)


class SigmoidTransform(Transform):
    """``y = σ(x)`` (kept inside ``(0, 1)``); ``log |dy/dx| = -softplus(-x) - softplus(x)``.

    >>> import tinyattn as ta
    >>> SigmoidTransform()(ta.tensor([0.0]))
    tensor([0.5])
    """

    codomain = constraints.unit_interval

    def _call(self, x):
        return clamp_probs(x.sigmoid())

    def _inverse(self, y):
        finfo = np.finfo(y.dtype)
        y = y.clamp(min=float(finfo.tiny), max=1 - float(finfo.eps))
        return y.log() - (-y).log1p()

    def log_abs_det_jacobian(self, x, y):
        return -_softplus(-x) - _softplus(x)


class TanhTransform(Transform):
    """``y = tanh(x)``; ``log |dy/dx| = 2 (log 2 - x - softplus(-2x))`` (stable for large ``|x|``).

    >>> import tinyattn as ta
    >>> round(TanhTransform().log_abs_det_jacobian(ta.tensor([0.0]), None).item(), 6)
    0.0
    """

    codomain = constraints.Constraint("interval(-1.0, 1.0)", lambda y: (y >= -1) & (y <= 1))

    def _call(self, x):
        return x.tanh()

    def _inverse(self, y):
        return y.atanh()

    def log_abs_det_jacobian(self, x, y):
        return 2.0 * (math.log(2.0) - x - _softplus(-2.0 * x))


class SoftplusTransform(Transform):
    """``y = log(1 + eˣ)``; ``log |dy/dx| = -softplus(-x)``.

    >>> import tinyattn as ta
    >>> round(SoftplusTransform()(ta.tensor([0.0])).item(), 6)
    0.693147
    """

    codomain = constraints.positive

    def _call(self, x):
        return _softplus(x)

    def _inverse(self, y):
        return y + (-(-y).expm1()).log()

    def log_abs_det_jacobian(self, x, y):
        return -_softplus(-x)


class PowerTransform(Transform):
    """``y = x^exponent`` on the positive reals; ``log |dy/dx| = log |exponent · y / x|``.

    >>> import tinyattn as ta
    >>> PowerTransform(2.0)(ta.tensor([3.0]))
    tensor([9.])
    """

    domain = constraints.positive
    codomain = constraints.positive

    def __init__(self, exponent, cache_size=0):
        super().__init__(cache_size)
        self.exponent = exponent

    def _call(self, x):
        return x ** self.exponent

    def _inverse(self, y):
        return y ** (1 / self.exponent)

    def log_abs_det_jacobian(self, x, y):
        return (self.exponent * y / x).abs().log()


class AbsTransform(Transform):
    """``y = |x|``, not injective: its ``inv`` gives ``y`` back (one of the preimages), as torch's.

    >>> import tinyattn as ta
    >>> AbsTransform()(ta.tensor([-2.0]))
    tensor([2.])
    """

    bijective = False
    codomain = constraints.nonnegative

    def _call(self, x):
        return x.abs()

    def _inverse(self, y):
        return y


class TransformedDistribution(Distribution):
    """``f(x)`` for ``x`` drawn from ``base_distribution``, ``f`` the ``transforms`` applied in order:
    ``log p(y) = log p_base(f⁻¹(y)) - Σ log |d fᵢ / dx|`` (summed over the event's dimensions).

    >>> import tinyattn as ta
    >>> from tinyattn.distributions import Normal, TransformedDistribution
    >>> from tinyattn.distributions.transforms import TanhTransform
    >>> policy = TransformedDistribution(Normal(ta.zeros(2), ta.ones(2)), [TanhTransform(cache_size=1)])
    >>> action = policy.rsample()
    >>> policy.log_prob(action).shape, bool((action.abs() < 1).all())
    ((2,), True)
    """

    arg_constraints = {}

    def __init__(self, base_distribution, transforms, validate_args=None):
        self.base_dist = base_distribution
        self.transforms = [transforms] if isinstance(transforms, Transform) else list(transforms)
        if not all(isinstance(t, Transform) for t in self.transforms):
            raise ValueError(f"transforms must be a Transform or a list of Transforms, but was {transforms}")
        super().__init__(base_distribution.batch_shape, base_distribution.event_shape, validate_args=validate_args)

    @property
    def has_rsample(self):
        return self.base_dist.has_rsample

    @property
    def support(self):
        return self.transforms[-1].codomain if self.transforms else self.base_dist.support

    def expand(self, batch_shape, _instance=None):
        return TransformedDistribution(self.base_dist.expand(batch_shape), self.transforms, validate_args=False)

    def sample(self, sample_shape=()):
        x = self.base_dist.sample(sample_shape)
        for transform in self.transforms:
            x = transform(x)
        return x

    def rsample(self, sample_shape=()):
        x = self.base_dist.rsample(sample_shape)
        for transform in self.transforms:
            x = transform(x)
        return x

    def log_prob(self, value):
        if not isinstance(value, Tensor):
            value = as_value(value, parameter_of(self.base_dist))
        if self._validate_args:
            self._validate_sample(value)
        event_dim = len(self._event_shape)
        log_prob = 0.0
        y = value
        for transform in reversed(self.transforms):
            x = transform.inv(y)
            log_prob = log_prob - _sum_rightmost(transform.log_abs_det_jacobian(x, y), event_dim - transform.event_dim)
            y = x
        return log_prob + self.base_dist.log_prob(y)

    def _monotone_sign(self):
        sign = 1
        for transform in self.transforms:
            sign = sign * transform.sign
        if isinstance(sign, Tensor):
            raise NotImplementedError("cdf of a transform whose sign varies per element")
        return sign

    def cdf(self, value):
        y = value
        for transform in reversed(self.transforms):
            y = transform.inv(y)
        value = self.base_dist.cdf(y)
        return value if self._monotone_sign() == 1 else 1 - value

    def icdf(self, value):
        x = self.base_dist.icdf(value if self._monotone_sign() == 1 else 1 - value)
        for transform in self.transforms:
            x = transform(x)
        return x

    def __repr__(self):
        return f"TransformedDistribution({self.base_dist!r}, {self.transforms})"
