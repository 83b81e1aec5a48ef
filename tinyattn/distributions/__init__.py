"""Floor 4: probability distributions, as ``torch.distributions``: sample, score (``log_prob``), ``entropy``,
moments, and ``kl_divergence`` between two of them.

Every formula is written in the library's differentiable operations, so ``log_prob``, ``entropy`` and the
reparameterised draws of ``rsample`` carry gradients back to the parameters: REINFORCE (``-log_prob(a) ·
reward``), a VAE's ``rsample``, an entropy bonus. Draws come from the library's generator
(``ta.manual_seed``). ``validate_args`` is on by default, as in torch.

>>> import tinyattn as ta
>>> from tinyattn.distributions import Categorical, Normal, kl_divergence
>>> logits = ta.tensor([0.0, 1.0, 2.0], requires_grad=True)
>>> policy = Categorical(logits=logits)
>>> action = policy.sample()
>>> (-policy.log_prob(action)).backward()
>>> logits.grad.shape
(3,)
>>> round(kl_divergence(Normal(0.0, 1.0), Normal(1.0, 1.0)).item(), 4)
0.5
"""

from . import constraints, transforms  # noqa: F401
from .derived import (
    Cauchy,
    Chi2,
    Geometric,
    Gumbel,
    HalfNormal,
    LogNormal,
    MixtureSameFamily,
    Multinomial,
    OneHotCategoricalStraightThrough,
    RelaxedBernoulli,
    RelaxedOneHotCategorical,
    StudentT,
)
from .distribution import Distribution
from .families import (
    Bernoulli,
    Beta,
    Binomial,
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
)
from .kl import kl_divergence, register_kl
from .transforms import (
    AbsTransform,
    AffineTransform,
    ComposeTransform,
    ExpTransform,
    PowerTransform,
    SigmoidTransform,
    SoftplusTransform,
    TanhTransform,
    Transform,
    TransformedDistribution,
    identity_transform,
)

__all__ = ["Distribution", "Bernoulli", "Beta", "Binomial", "Categorical", "Dirichlet", "Exponential", "Gamma",
           "Independent", "Laplace", "MultivariateNormal", "Normal", "OneHotCategorical", "Poisson", "Uniform",
           "Cauchy", "Chi2", "Geometric", "Gumbel", "HalfNormal", "LogNormal", "MixtureSameFamily", "Multinomial",
           "OneHotCategoricalStraightThrough", "RelaxedBernoulli", "RelaxedOneHotCategorical", "StudentT",
           "TransformedDistribution", "Transform", "ComposeTransform", "ExpTransform", "AffineTransform",
           "SigmoidTransform", "TanhTransform", "SoftplusTransform", "PowerTransform", "AbsTransform",
           "identity_transform", "kl_divergence", "register_kl", "constraints", "transforms"]
