"""``torch.distributions`` through compat: the native families, compat tensors out, a script's use of them
(a policy-gradient step, a VAE's reparameterised KL) giving torch's values and gradients."""

import numpy as np
import pytest
import torch

import tinyattn.compat as tc
from tinyattn.compat.core.tensor import Tensor as CompatTensor


@pytest.mark.parametrize("make", [
    lambda M: M.Normal(0.0, 1.0), lambda M: M.Categorical(logits=[0.0, 1.0]), lambda M: M.Bernoulli(probs=0.3),
    lambda M: M.OneHotCategorical(probs=[0.5, 0.5]), lambda M: M.Uniform(0.0, 2.0), lambda M: M.Exponential(1.5),
    lambda M: M.MultivariateNormal(np.zeros(2), scale_tril=np.eye(2)), lambda M: M.Gamma(2.0, 1.0),
    lambda M: M.Dirichlet([1.0, 2.0]), lambda M: M.Independent(M.Normal(np.zeros(3), 1.0), 1),
])
def test_numbers_in_compat_tensors_out(make):
    d = make(tc.distributions)
    x = d.sample((2,))
    assert type(x) is CompatTensor
    assert type(d.log_prob(x)) is CompatTensor
    assert isinstance(d, tc.distributions.Distribution)


def test_names_and_submodules_scripts_import():
    from tinyattn.compat.distributions import constraints, kl_divergence
    from tinyattn.compat.distributions.categorical import Categorical
    from tinyattn.compat.distributions.kl import register_kl
    from tinyattn.compat.distributions.normal import Normal

    assert Categorical is tc.distributions.Categorical and Normal is tc.distributions.Normal
    assert kl_divergence is register_kl.__globals__["kl_divergence"]
    assert bool(constraints.positive.check(tc.tensor([1.0])).all())
    from tinyattn.compat.distributions.transforms import TanhTransform

    assert TanhTransform is tc.distributions.TanhTransform
    with pytest.raises(AttributeError, match="tinyattn.compat.distributions has no `Wishart`: out of scope"):
        _ = tc.distributions.Wishart


def test_policy_gradient_and_vae_terms_match_torch():
    rng = np.random.default_rng(0)
    logits, mu, log_sigma = rng.standard_normal((4, 3)), rng.standard_normal((4, 2)), rng.standard_normal((4, 2))
    actions, rewards = np.array([0, 2, 1, 1]), rng.standard_normal(4)

    def run(lib):
        params = [lib.tensor(a, requires_grad=True) for a in (logits, mu, log_sigma)]
        policy = lib.distributions.Categorical(logits=params[0])
        pg = -(policy.log_prob(lib.tensor(actions)) * lib.tensor(rewards)).mean() - 0.01 * policy.entropy().mean()
        posterior = lib.distributions.Normal(params[1], params[2].exp())
        prior = lib.distributions.Normal(lib.zeros(4, 2, dtype=lib.float64), lib.ones(4, 2, dtype=lib.float64))
        kl = lib.distributions.kl_divergence(posterior, prior).sum(-1).mean()
        loss = pg + kl
        loss.backward()
        return loss, [p.grad for p in params]

    ours, our_grads = run(tc)
    theirs, their_grads = run(torch)
    assert type(ours) is CompatTensor
    np.testing.assert_allclose(ours.item(), theirs.item(), rtol=1e-10)
    for a, b in zip(our_grads, their_grads):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-9, atol=1e-12)
