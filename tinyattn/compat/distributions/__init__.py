"""``torch.distributions``: the native ``tinyattn.distributions``, with compat tensors out.

Each family here is the native one (a subclass of it, so ``isinstance`` and ``kl_divergence``'s
registry see one family), whose parameters given as Python numbers, lists or arrays become compat
tensors: everything computed from them (``sample``, ``log_prob``, ``entropy``, the moments) is then a
compat tensor, as it is when the parameters are compat tensors already. ``validate_args`` is on by
default, as in torch. The transforms (``torch.distributions.transforms``) are the native ones; the
matrix families (``Wishart``, ``LKJCholesky``, ``LowRankMultivariateNormal``) are not here yet.

>>> import tinyattn.compat as torch
>>> dist = torch.distributions.Normal(0.0, 1.0)
>>> type(dist.sample()).__name__, dist.sample((3,)).shape
('Tensor', (3,))
>>> type(dist.sample()).__module__
'tinyattn.compat.core.tensor'
>>> policy = torch.distributions.Categorical(logits=torch.zeros(4, requires_grad=True))
>>> policy.log_prob(torch.tensor(2)).exp().item()
0.25
"""

from ... import distributions as _native
from ...engine import Tensor as _NativeTensor
from ..core.tensor import as_compat
from ..scope import missing
from . import constraints, transforms  # noqa: F401

__all__ = ["Distribution", "Bernoulli", "Beta", "Binomial", "Categorical", "Dirichlet", "Exponential", "Gamma",
           "Independent", "Laplace", "MultivariateNormal", "Normal", "OneHotCategorical", "Poisson", "Uniform",
           "Cauchy", "Chi2", "Geometric", "Gumbel", "HalfNormal", "LogNormal", "MixtureSameFamily", "Multinomial",
           "OneHotCategoricalStraightThrough", "RelaxedBernoulli", "RelaxedOneHotCategorical", "StudentT",
           "TransformedDistribution", "Transform", "ComposeTransform", "ExpTransform", "AffineTransform",
           "SigmoidTransform", "TanhTransform", "SoftplusTransform", "PowerTransform", "AbsTransform",
           "identity_transform", "kl_divergence", "register_kl", "constraints", "transforms"]

Distribution = _native.Distribution


def _compat_family(native):
    """``native`` (a family) whose parameters made from numbers, lists or arrays are compat tensors."""

    def __init__(self, *args, **kwargs):
        native.__init__(self, *args, **kwargs)
        if not any(isinstance(a, _NativeTensor) for a in (*args, *kwargs.values())):
            for value in list(self.__dict__.values()):  # made here from numbers: nobody else holds them
                if isinstance(value, _NativeTensor):
                    as_compat(value)
            for value in self.__dict__.values():  # a wrapped family (OneHotCategorical's Categorical)
                if isinstance(value, _native.Distribution):
                    for item in value.__dict__.values():
                        if isinstance(item, _NativeTensor):
                            as_compat(item)

    family = type(native.__name__, (native,), {"__init__": __init__, "__doc__": native.__doc__,
                                               "__module__": __name__})
    return family


for _name in __all__:
    _value = getattr(_native, _name)
    if isinstance(_value, type) and issubclass(_value, _native.Distribution) and _value is not _native.Distribution:
        globals()[_name] = _compat_family(_value)
    elif _name not in globals():  # the transforms, kl_divergence and register_kl: the native ones
        globals()[_name] = _value


def __getattr__(name):
    raise missing(__name__, name)
