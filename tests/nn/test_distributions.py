"""``ta.distributions`` against ``torch.distributions``: values (log_prob, entropy, moments), gradients of log_prob,
entropy and KL under random upstream gradients (float64), reparameterised draws against finite differences and
against torch's transform of the same noise, sample shapes and seeded empirical moments, argument validation."""

import math

import numpy as np
import pytest
import torch
import torch.distributions as td

import tinyattn as ta
import tinyattn.distributions as D
from tinyattn.testing import gradcheck

RNG = np.random.default_rng(1234)


def real(*shape):
    return RNG.standard_normal(shape)


def positive(*shape):
    return RNG.uniform(0.5, 2.0, shape)


def unit(*shape):
    return RNG.uniform(0.05, 0.95, shape)


def spd(*shape):  # (…, n, n) symmetric positive-definite
    a = RNG.standard_normal(shape)
    return a @ np.swapaxes(a, -1, -2) + shape[-1] * np.eye(shape[-1])


def tril(*shape):
    L = np.tril(RNG.standard_normal(shape), -1)
    return L + np.eye(shape[-1]) * RNG.uniform(0.5, 2.0, shape[:-1])[..., None, :]


# name: (how to build it from a module and keyword tensors, {parameter: array, differentiable}, fixed keywords)
CASES = {
    "Normal": (lambda M, p: M.Normal(p["loc"], p["scale"]), {"loc": real(3, 4), "scale": positive(3, 4)}),
    "Uniform": (lambda M, p: M.Uniform(p["low"], p["low"] + p["width"]), {"low": real(5), "width": positive(5)}),
    "Exponential": (lambda M, p: M.Exponential(p["rate"]), {"rate": positive(2, 3)}),
    "Laplace": (lambda M, p: M.Laplace(p["loc"], p["scale"]), {"loc": real(4), "scale": positive(4)}),
    "Bernoulli(probs)": (lambda M, p: M.Bernoulli(probs=p["probs"]), {"probs": unit(3, 2)}),
    "Bernoulli(logits)": (lambda M, p: M.Bernoulli(logits=p["logits"]), {"logits": real(3, 2)}),
    "Categorical(probs)": (lambda M, p: M.Categorical(probs=p["probs"]), {"probs": positive(2, 3, 5)}),
    "Categorical(logits)": (lambda M, p: M.Categorical(logits=p["logits"]), {"logits": real(4, 6)}),
    "OneHotCategorical": (lambda M, p: M.OneHotCategorical(logits=p["logits"]), {"logits": real(3, 4)}),
    "MultivariateNormal(covariance)": (lambda M, p: M.MultivariateNormal(p["loc"], covariance_matrix=p["cov"]),
                                       {"loc": real(2, 3), "cov": spd(2, 3, 3)}),
    "MultivariateNormal(scale_tril)": (lambda M, p: M.MultivariateNormal(p["loc"], scale_tril=p["L"]),
                                       {"loc": real(4), "L": tril(2, 4, 4)}),
    "MultivariateNormal(precision)": (lambda M, p: M.MultivariateNormal(p["loc"], precision_matrix=p["P"]),
                                      {"loc": real(3), "P": spd(3, 3)}),
    "Independent(Normal)": (lambda M, p: M.Independent(M.Normal(p["loc"], p["scale"]), 1),
                            {"loc": real(3, 2), "scale": positive(3, 2)}),
    "Gamma": (lambda M, p: M.Gamma(p["concentration"], p["rate"]),
              {"concentration": positive(3) + 0.5, "rate": positive(3)}),
    "Beta": (lambda M, p: M.Beta(p["a"], p["b"]), {"a": positive(4), "b": positive(4)}),
    "Dirichlet": (lambda M, p: M.Dirichlet(p["concentration"]), {"concentration": positive(2, 4)}),
    "Poisson": (lambda M, p: M.Poisson(p["rate"]), {"rate": positive(5) * 3}),
    "Binomial": (lambda M, p: M.Binomial(6, logits=p["logits"]), {"logits": real(4)}),
    "Gumbel": (lambda M, p: M.Gumbel(p["loc"], p["scale"]), {"loc": real(3), "scale": positive(3)}),
    "HalfNormal": (lambda M, p: M.HalfNormal(p["scale"]), {"scale": positive(2, 2)}),
    "LogNormal": (lambda M, p: M.LogNormal(p["loc"], p["scale"] / 4), {"loc": real(3), "scale": positive(3)}),
    "Cauchy": (lambda M, p: M.Cauchy(p["loc"], p["scale"]), {"loc": real(3), "scale": positive(3)}),
    "StudentT": (lambda M, p: M.StudentT(p["df"], p["loc"], p["scale"]),
                 {"df": positive(3) + 4, "loc": real(3), "scale": positive(3)}),
    "Chi2": (lambda M, p: M.Chi2(p["df"]), {"df": positive(4) * 2}),
    "Geometric": (lambda M, p: M.Geometric(logits=p["logits"]), {"logits": real(4) + 1}),
    "Multinomial": (lambda M, p: M.Multinomial(5, logits=p["logits"]), {"logits": real(2, 3)}),
    "RelaxedBernoulli": (lambda M, p: M.RelaxedBernoulli(p["t"], logits=p["logits"]),
                         {"t": positive(1) + 0.5, "logits": real(3)}),
    "RelaxedOneHotCategorical": (lambda M, p: M.RelaxedOneHotCategorical(p["t"], probs=p["probs"]),
                                 {"t": positive(1) + 0.5, "probs": positive(2, 4)}),
    "OneHotCategoricalStraightThrough": (lambda M, p: M.OneHotCategoricalStraightThrough(logits=p["logits"]),
                                         {"logits": real(3)}),
    "MixtureSameFamily": (lambda M, p: M.MixtureSameFamily(M.Categorical(logits=p["mix"]),
                                                           M.Normal(p["loc"], p["scale"])),
                          {"mix": real(2, 3), "loc": real(2, 3), "scale": positive(2, 3)}),
}

# reparameterised through a transform of standard draws: the pathwise derivative is checked by finite differences
PATHWISE = ["Normal", "Uniform", "Exponential", "Laplace", "MultivariateNormal(covariance)",
            "MultivariateNormal(scale_tril)", "MultivariateNormal(precision)", "Independent(Normal)", "Gumbel",
            "HalfNormal", "LogNormal", "Cauchy", "RelaxedBernoulli", "RelaxedOneHotCategorical"]
# reparameterised otherwise: the Gamma family's implicit gradient, the straight-through estimator
REPARAMETERISED = PATHWISE + ["Gamma", "Beta", "Dirichlet", "Chi2", "StudentT", "OneHotCategoricalStraightThrough"]


def build(name, requires_grad=True):
    """(ours, theirs, our parameters, their parameters) for a case, float64, from the same arrays."""
    make, arrays = CASES[name]
    ours = {k: ta.tensor(v.copy(), requires_grad=requires_grad) for k, v in arrays.items()}
    theirs = {k: torch.tensor(v.copy(), requires_grad=requires_grad) for k, v in arrays.items()}
    return make(D, ours), make(td, theirs), ours, theirs


def values_of(theirs, n=2):
    """Values in the support: torch's own draws, seeded."""
    torch.manual_seed(0)
    return theirs.sample((n,))


def close(a, b, rtol=1e-9, atol=1e-10):
    np.testing.assert_allclose(np.asarray(a.detach().numpy() if hasattr(a, "detach") else a, dtype=float),
                               b.detach().numpy().astype(float), rtol=rtol, atol=atol, equal_nan=True)


@pytest.mark.parametrize("name", CASES)
def test_log_prob_moments_and_shapes_match_torch(name):
    ours, theirs, _, _ = build(name)
    value = values_of(theirs)
    assert ours.batch_shape == tuple(theirs.batch_shape) and ours.event_shape == tuple(theirs.event_shape)
    close(ours.log_prob(ta.tensor(value.numpy())), theirs.log_prob(value))
    for moment in ("mean", "variance", "stddev", "mode", "entropy"):
        try:
            expected = getattr(theirs, moment)
            expected = expected() if callable(expected) else expected
        except NotImplementedError:  # torch has none: neither have we
            with pytest.raises(NotImplementedError):
                got = getattr(ours, moment)
                got() if callable(got) else got
            continue
        got = getattr(ours, moment)
        # torch's Multinomial entropy takes log n! in float32 (torch.tensor(total_count)): ~5e-8 off
        close(got() if callable(got) else got, expected, rtol=1e-7 if name == "Multinomial" else 1e-9)
    assert ours.has_rsample == (name in REPARAMETERISED) == theirs.has_rsample


@pytest.mark.parametrize("name", CASES)
def test_log_prob_and_entropy_gradients_match_torch(name):
    ours, theirs, our_params, their_params = build(name)
    value = values_of(theirs, n=3)
    log_prob_t = theirs.log_prob(value)
    upstream = RNG.standard_normal(tuple(log_prob_t.shape))
    loss_t = (log_prob_t * torch.tensor(upstream)).sum()
    loss = (ours.log_prob(ta.tensor(value.numpy())) * ta.tensor(upstream)).sum()
    if _has_entropy(theirs):
        entropy_t = theirs.entropy()
        upstream2 = RNG.standard_normal(tuple(entropy_t.shape))
        loss_t = loss_t + (entropy_t * torch.tensor(upstream2)).sum()
        loss = loss + (ours.entropy() * ta.tensor(upstream2)).sum()
    loss_t.backward()
    loss.backward()
    for key in our_params:
        if their_params[key].grad is None:  # not on the log-density's path (a Multinomial's total)
            assert our_params[key].grad is None or not np.any(our_params[key].grad)
            continue
        np.testing.assert_allclose(our_params[key].grad, their_params[key].grad.numpy(), rtol=1e-8, atol=1e-10,
                                   err_msg=key)


def _has_entropy(distribution):
    try:
        distribution.entropy()
        return True
    except NotImplementedError:
        return False


@pytest.mark.parametrize("name", PATHWISE)
def test_rsample_gradients_against_finite_differences(name):
    make, arrays = CASES[name]
    keys = list(arrays)
    upstream = RNG.standard_normal((2,) + build(name)[0].batch_shape + build(name)[0].event_shape)

    def loss(*params):
        ta.manual_seed(7)  # the same standard draws at every evaluation: the pathwise derivative
        d = make(D, dict(zip(keys, params)))
        return (d.rsample((2,)) ** 2 * ta.tensor(upstream)).sum()

    inputs = [ta.tensor(arrays[k].copy(), requires_grad=True) for k in keys]
    D.Distribution.set_default_validate_args(False)  # a nudged scale_tril leaves the lower-triangular set
    try:
        assert gradcheck(loss, inputs, atol=1e-6, rtol=1e-5)
    finally:
        D.Distribution.set_default_validate_args(True)


@pytest.mark.parametrize("name", ["Normal", "MultivariateNormal(covariance)", "MultivariateNormal(scale_tril)",
                                  "Independent(Normal)"])
def test_rsample_is_torchs_transform_of_the_same_noise(name, monkeypatch):
    ours, _, our_params, _ = build(name)
    ta.manual_seed(3)
    sample = ours.rsample((2,))
    ta.manual_seed(3)
    eps = ta.randn(*sample.shape, dtype=ta.float64).numpy()
    import torch.distributions.multivariate_normal as mvn_module
    import torch.distributions.normal as normal_module

    def noise(shape, dtype, device):
        return torch.tensor(eps)

    monkeypatch.setattr(normal_module, "_standard_normal", noise)
    monkeypatch.setattr(mvn_module, "_standard_normal", noise)
    _, theirs, _, their_params = build(name)
    sample_t = theirs.rsample((2,))
    close(sample, sample_t)
    upstream = RNG.standard_normal(tuple(sample_t.shape))
    (sample_t ** 3 * torch.tensor(upstream)).sum().backward()
    (sample ** 3 * ta.tensor(upstream)).sum().backward()
    for key in our_params:
        np.testing.assert_allclose(our_params[key].grad, their_params[key].grad.numpy(), rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("name", CASES)
def test_sample_shapes_and_seeded_empirical_moments(name):
    ours, theirs, _, _ = build(name, requires_grad=False)
    ta.manual_seed(0)
    n = 20000
    samples = ours.sample((n,))
    assert samples.shape == (n,) + tuple(theirs.batch_shape) + tuple(theirs.event_shape)
    assert not samples.requires_grad
    assert ours.sample().shape == tuple(theirs.batch_shape) + tuple(theirs.event_shape)
    x = samples.numpy().astype(np.float64)
    if name in ("Cauchy", "RelaxedBernoulli", "RelaxedOneHotCategorical"):  # no moments: the support alone
        assert bool(theirs.support.check(torch.tensor(x)).all())
        return
    if isinstance(theirs, td.Categorical):  # moments of the indices: the probabilities' own
        probs = theirs.probs.numpy()
        frequencies = np.stack([(x == k).mean(0) for k in range(probs.shape[-1])], -1)
        np.testing.assert_allclose(frequencies, probs, atol=6 * 0.5 / math.sqrt(n))
        return
    mean, var = theirs.mean.detach().numpy(), theirs.variance.detach().numpy()
    # six standard errors: seeded draws, far from any edge
    assert np.all(np.abs(x.mean(0) - mean) <= 6 * np.sqrt(var / n) + 1e-12)
    fourth = np.mean((x - mean) ** 4, 0)
    assert np.all(np.abs(x.var(0) - var) <= 6 * np.sqrt(np.maximum(fourth - var ** 2, 0) / n) + 1e-9)
    assert bool(theirs.support.check(torch.tensor(x)).all())


def test_gamma_rsample_gradient_is_the_implicit_one_torch_computes():
    alpha = ta.tensor(np.array([0.3, 1.0, 2.5, 10.0, 50.0]), requires_grad=True)
    ta.manual_seed(0)
    x = D.Gamma(alpha, 1.0).rsample()
    upstream = RNG.standard_normal(5)
    (x * ta.tensor(upstream)).sum().backward()
    expected = torch._standard_gamma_grad(torch.tensor(alpha.detach().numpy()), torch.tensor(x.detach().numpy()))
    np.testing.assert_allclose(alpha.grad, expected.numpy() * upstream, rtol=1e-3)  # torch's series: ~1e-4


@pytest.mark.parametrize("name", ["Gamma", "Dirichlet", "Beta", "StudentT", "Chi2"])
def test_gamma_family_rsample_gradients_are_unbiased(name):
    """The mean over many draws of d(draw)/d(parameters) is the derivative of the mean: seeded, within six
    standard errors estimated from 40 batches of draws."""
    make, arrays = CASES[name]
    _, theirs, _, their_params = build(name)
    weights = RNG.standard_normal(tuple(theirs.batch_shape) + tuple(theirs.event_shape))
    (theirs.mean * torch.tensor(weights)).sum().backward()
    ta.manual_seed(1)
    batches = []
    for _ in range(40):
        params = {k: ta.tensor(v.copy(), requires_grad=True) for k, v in arrays.items()}
        draws = make(D, params).rsample((500,))  # (500, *batch, *event)
        (draws * ta.tensor(weights)).sum().backward()
        batches.append({k: p.grad / 500 for k, p in params.items()})
    for key in arrays:
        estimates = np.stack([batch[key] for batch in batches])
        error = estimates.std(0, ddof=1) / math.sqrt(len(batches))
        grad = their_params[key].grad
        expected = np.zeros_like(estimates[0]) if grad is None else grad.numpy()  # StudentT's mean: not of df
        assert np.all(np.abs(estimates.mean(0) - expected) <= 6 * error + 1e-9), key


def test_straight_through_gradient_is_the_probabilities_gradient_as_in_torch():
    ours, theirs, our_params, their_params = build("OneHotCategoricalStraightThrough")
    ta.manual_seed(0)
    torch.manual_seed(0)
    upstream = RNG.standard_normal(3)
    (ours.rsample() * ta.tensor(upstream)).sum().backward()
    (theirs.rsample() * torch.tensor(upstream)).sum().backward()
    np.testing.assert_allclose(our_params["logits"].grad, their_params["logits"].grad.numpy(), rtol=1e-10)


def test_sampling_inside_no_grad_keeps_the_lazy_parameters_graph():
    logits = ta.tensor([0.3, -0.2], requires_grad=True)
    d = D.Bernoulli(logits=logits)
    d.sample()  # computes probs first, inside no_grad
    d.entropy().sum().backward()
    assert logits.grad is not None and np.all(logits.grad != 0)


def test_seeded_draws_repeat():
    d = D.Normal(ta.zeros(3), ta.ones(3))
    ta.manual_seed(5)
    a = d.sample((2,))
    ta.manual_seed(5)
    assert (d.sample((2,)) == a).all().item()


KL_PAIRS = [("Normal", "Normal"), ("Bernoulli(probs)", "Bernoulli(logits)"), ("Categorical(probs)",),
            ("Uniform", "Uniform"), ("Exponential", "Exponential"), ("Laplace", "Laplace"), ("Gamma", "Gamma"),
            ("Beta", "Beta"), ("Dirichlet", "Dirichlet"), ("Poisson", "Poisson"),
            ("OneHotCategorical", "OneHotCategorical"),
            ("MultivariateNormal(covariance)", "MultivariateNormal(covariance)"),
            ("Independent(Normal)", "Independent(Normal)")]


def _shifted(name, module, params, shift):
    make, _ = CASES[name]
    moved = {k: v * shift if k not in ("loc", "logits", "low") else v + shift for k, v in params.items()}
    return make(module, moved)


@pytest.mark.parametrize("pair", KL_PAIRS, ids=lambda pair: "-".join(pair))
def test_kl_divergence_and_its_gradients_match_torch(pair):
    p_name = pair[0]
    q_name = pair[-1] if len(pair) > 1 else pair[0]
    p, p_t, p_params, p_params_t = build(p_name)
    if q_name == p_name:  # q: p's parameters moved, so that KL > 0 (a wider Uniform, to keep it finite)
        q, q_t = _shifted(q_name, D, p_params, 1.25), _shifted(q_name, td, p_params_t, 1.25)
        if p_name == "Uniform":
            q = D.Uniform(p_params["low"] - 0.5, p_params["low"] + p_params["width"] * 2)
            q_t = td.Uniform(p_params_t["low"] - 0.5, p_params_t["low"] + p_params_t["width"] * 2)
    else:
        q, q_t, _, _ = build(q_name)
    kl, kl_t = D.kl_divergence(p, q), td.kl_divergence(p_t, q_t)
    close(kl, kl_t)
    upstream = RNG.standard_normal(tuple(kl_t.shape))
    (kl_t * torch.tensor(upstream)).sum().backward()
    (kl * ta.tensor(upstream)).sum().backward()
    # ψ′ (trigamma) enters the Gamma family's gradients: torch's own differs from SciPy's by ~1e-7 relative
    rtol = 1e-6 if p_name in ("Gamma", "Beta", "Dirichlet") else 1e-8
    for key in p_params:
        np.testing.assert_allclose(p_params[key].grad, p_params_t[key].grad.numpy(), rtol=rtol, atol=1e-10,
                                   err_msg=key)


def test_kl_edge_values_match_torch():
    p, q = [0.0, 0.5, 1.0], [0.5, 0.0, 1.0]
    close(D.kl_divergence(D.Bernoulli(ta.tensor(p)), D.Bernoulli(ta.tensor(q))),
          td.kl_divergence(td.Bernoulli(torch.tensor(p)), td.Bernoulli(torch.tensor(q))))
    close(D.kl_divergence(D.Uniform(0.0, 2.0), D.Uniform(0.5, 3.0)),
          td.kl_divergence(td.Uniform(0.0, 2.0), td.Uniform(0.5, 3.0)))
    p, q = [0.5, 0.5, 0.0], [0.0, 0.5, 0.5]
    close(D.kl_divergence(D.Categorical(ta.tensor(p)), D.Categorical(ta.tensor(q))),
          td.kl_divergence(td.Categorical(torch.tensor(p)), td.Categorical(torch.tensor(q))))


def test_kl_dispatch_and_register():
    with pytest.raises(NotImplementedError, match="Normal.*Laplace"):
        D.kl_divergence(D.Normal(0.0, 1.0), D.Laplace(0.0, 1.0))

    class Narrow(D.Normal):
        pass

    assert D.kl_divergence(Narrow(0.0, 1.0), D.Normal(0.0, 1.0)).item() == 0.0  # the Normal pair, by inheritance

    @D.register_kl(Narrow, D.Laplace)
    def _kl(p, q):
        return ta.tensor(7.0)

    assert D.kl_divergence(Narrow(0.0, 1.0), D.Laplace(0.0, 1.0)).item() == 7.0


def test_float32_in_float32_out_and_numbers_as_parameters():
    d = D.Normal(0.0, 1.0)
    assert d.loc.dtype == np.float32 and d.sample((3,)).dtype == np.float32
    assert d.log_prob(0.5).dtype == np.float32
    close(d.log_prob(0.5), td.Normal(0.0, 1.0).log_prob(torch.tensor(0.5)), rtol=1e-6)
    assert D.Normal(ta.zeros(2, dtype=ta.float64), 1.0).scale.dtype == np.float64


def test_expand():
    d = D.Normal(ta.tensor([0.0, 1.0]), 1.0).expand((3, 2))
    assert d.batch_shape == (3, 2) and d.sample().shape == (3, 2)
    c = D.Categorical(logits=ta.zeros(4)).expand((2,))
    assert c.batch_shape == (2,) and c.log_prob(ta.tensor([0, 3])).shape == (2,)


def test_enumerate_support_matches_torch():
    for ours, theirs in [(D.Categorical(ta.ones(2, 3)), td.Categorical(torch.ones(2, 3))),
                         (D.Bernoulli(ta.ones(2) / 2), td.Bernoulli(torch.ones(2) / 2)),
                         (D.OneHotCategorical(ta.ones(3)), td.OneHotCategorical(torch.ones(3)))]:
        for expand in (True, False):
            np.testing.assert_array_equal(ours.enumerate_support(expand).numpy(),
                                          theirs.enumerate_support(expand).numpy())


def test_cdf_icdf_match_torch():
    x = torch.tensor([0.3, 1.2], dtype=torch.float64)
    for ours, theirs in [(D.Normal(ta.tensor([0.1, -0.2], dtype=ta.float64), 1.5), td.Normal(torch.tensor([0.1, -0.2],
                          dtype=torch.float64), 1.5)),
                         (D.Exponential(ta.tensor([2.0, 0.5], dtype=ta.float64)),
                          td.Exponential(torch.tensor([2.0, 0.5], dtype=torch.float64))),
                         (D.Uniform(ta.tensor([0.0, 1.0], dtype=ta.float64), 2.0),
                          td.Uniform(torch.tensor([0.0, 1.0], dtype=torch.float64), 2.0)),
                         (D.Laplace(ta.tensor([0.0, 1.0], dtype=ta.float64), 2.0),
                          td.Laplace(torch.tensor([0.0, 1.0], dtype=torch.float64), 2.0))]:
        close(ours.cdf(ta.tensor(x.numpy())), theirs.cdf(x))
        if not isinstance(ours, D.Laplace):
            close(ours.icdf(ta.tensor([0.25, 0.75], dtype=ta.float64)),
                  theirs.icdf(torch.tensor([0.25, 0.75], dtype=torch.float64)))


# the same wrong arguments in both libraries: each raises ValueError
INVALID = [
    ("Normal scale <= 0", lambda M, T: M.Normal(T([0.0]), T([-1.0]))),
    ("Normal scale NaN-free loc", lambda M, T: M.Normal(T([math.nan]), T([1.0]))),
    ("Bernoulli probs and logits", lambda M, T: M.Bernoulli(probs=T([0.5]), logits=T([0.0]))),
    ("Bernoulli neither", lambda M, T: M.Bernoulli()),
    ("Bernoulli probs > 1", lambda M, T: M.Bernoulli(probs=T([1.5]))),
    ("Categorical negative probs", lambda M, T: M.Categorical(probs=T([0.5, -0.5, 1.0]))),
    ("Categorical neither", lambda M, T: M.Categorical()),
    ("Exponential rate <= 0", lambda M, T: M.Exponential(T([0.0]))),
    ("Gamma concentration <= 0", lambda M, T: M.Gamma(T([-1.0]), T([1.0]))),
    ("Dirichlet concentration <= 0", lambda M, T: M.Dirichlet(T([1.0, 0.0]))),
    ("MVN two matrices", lambda M, T: M.MultivariateNormal(T([0.0, 0.0]), covariance_matrix=T([[1.0, 0], [0, 1]]),
                                                           scale_tril=T([[1.0, 0], [0, 1]]))),
    ("MVN no matrix", lambda M, T: M.MultivariateNormal(T([0.0, 0.0]))),
    ("MVN scalar loc", lambda M, T: M.MultivariateNormal(T(0.0), scale_tril=T([[1.0]]))),
    ("MVN not lower", lambda M, T: M.MultivariateNormal(T([0.0, 0.0]), scale_tril=T([[1.0, 1.0], [0.0, 1.0]]))),
    ("MVN not positive-definite", lambda M, T: M.MultivariateNormal(T([0.0, 0.0]),
                                                                    covariance_matrix=T([[1.0, 2.0], [2.0, 1.0]]))),
    ("Independent too many dims", lambda M, T: M.Independent(M.Normal(T([0.0]), T([1.0])), 2)),
    ("Normal log_prob NaN", lambda M, T: M.Normal(T([0.0]), T([1.0])).log_prob(T([math.nan]))),
    ("Normal log_prob event shape", lambda M, T: M.Independent(M.Normal(T([0.0, 0.0]), T([1.0, 1.0])), 1)
     .log_prob(T([0.0, 0.0, 0.0]))),
    ("Normal log_prob batch shape", lambda M, T: M.Normal(T([0.0, 0.0]), T([1.0, 1.0])).log_prob(T([0.0, 0.0, 0.0]))),
    ("Bernoulli log_prob 0.5", lambda M, T: M.Bernoulli(probs=T([0.5])).log_prob(T([0.5]))),
    ("Categorical log_prob out of range", lambda M, T: M.Categorical(probs=T([0.5, 0.5])).log_prob(T(2.0))),
    ("Exponential log_prob negative", lambda M, T: M.Exponential(T([1.0])).log_prob(T([-1.0]))),
    ("Uniform log_prob outside", lambda M, T: M.Uniform(T([0.0]), T([1.0])).log_prob(T([2.0]))),
    ("Poisson log_prob non-integer", lambda M, T: M.Poisson(T([1.0])).log_prob(T([0.5]))),
    ("Dirichlet log_prob off the simplex", lambda M, T: M.Dirichlet(T([1.0, 1.0])).log_prob(T([0.5, 0.6]))),
    ("StudentT df <= 0", lambda M, T: M.StudentT(T([0.0]))),
    ("Geometric probs 0", lambda M, T: M.Geometric(probs=T([0.0]))),
    ("Multinomial counts over the total", lambda M, T: M.Multinomial(3, probs=T([0.5, 0.5])).log_prob(T([2.0, 2.0]))),
    ("HalfNormal log_prob negative", lambda M, T: M.HalfNormal(T([1.0])).log_prob(T([-1.0]))),
    ("Mixture of a non-Categorical", lambda M, T: M.MixtureSameFamily(M.Normal(T([0.0]), T([1.0])),
                                                                       M.Normal(T([0.0]), T([1.0])))),
]


@pytest.mark.parametrize("case", INVALID, ids=lambda case: case[0])
def test_invalid_arguments_raise_value_error_as_in_torch(case):
    _, make = case
    with pytest.raises(ValueError):
        make(td, torch.tensor)
    with pytest.raises(ValueError):
        make(D, ta.tensor)


def test_validation_can_be_turned_off():
    d = D.Normal(ta.tensor([0.0]), ta.tensor([-1.0]), validate_args=False)
    assert np.isnan(d.log_prob(ta.tensor([0.0])).item())
    message = "Expected parameter scale (Tensor of shape (1,)) of distribution Normal"
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        D.Normal(ta.tensor([0.0]), ta.tensor([-1.0]))


def test_reinforce_step_lowers_the_loss_of_the_rewarded_action():
    logits = ta.zeros(3, requires_grad=True)
    policy = D.Categorical(logits=logits)
    (-policy.log_prob(ta.tensor(2)) * 1.0).backward()
    assert logits.grad[2] < 0 and logits.grad[0] > 0
    with pytest.raises(NotImplementedError, match="rsample"):
        policy.rsample()


# ----------------------------------------------------------------------------- transforms

TRANSFORMS = {  # name: (ours, theirs, a domain sample)
    "Exp": (lambda M: M.ExpTransform(), real),
    "Affine": (lambda M: M.AffineTransform(0.5, -2.0), real),
    "Sigmoid": (lambda M: M.SigmoidTransform(), real),
    "Tanh": (lambda M: M.TanhTransform(), real),
    "Softplus": (lambda M: M.SoftplusTransform(), real),
    "Power": (lambda M: M.PowerTransform(2.5), positive),
    "Compose": (lambda M: M.ComposeTransform([M.AffineTransform(0.1, 0.5), M.TanhTransform()]), real),
}


@pytest.mark.parametrize("name", TRANSFORMS)
def test_transforms_match_torch(name):
    make, domain = TRANSFORMS[name]
    x = domain(5)
    ours, theirs = make(D), make(td)
    y, y_t = ours(ta.tensor(x)), theirs(torch.tensor(x))
    close(y, y_t)
    close(ours.inv(ta.tensor(y_t.numpy())), theirs.inv(y_t), rtol=1e-7)
    close(ours.log_abs_det_jacobian(ta.tensor(x), y), theirs.log_abs_det_jacobian(torch.tensor(x), y_t))


@pytest.mark.parametrize("name", TRANSFORMS)
def test_transformed_log_prob_and_gradients_match_torch(name):
    make, domain = TRANSFORMS[name]
    loc, scale = real(3), positive(3)
    base = "LogNormal" if domain is positive else "Normal"
    our_params = [ta.tensor(loc.copy(), requires_grad=True), ta.tensor(scale.copy(), requires_grad=True)]
    their_params = [torch.tensor(loc.copy(), requires_grad=True), torch.tensor(scale.copy(), requires_grad=True)]
    ours = D.TransformedDistribution(getattr(D, base)(*our_params), [make(D)])
    theirs = td.TransformedDistribution(getattr(td, base)(*their_params), [make(td)])
    value = values_of(theirs, n=2)
    upstream = RNG.standard_normal(tuple(value.shape))
    # torch keeps PowerTransform's exponent as a float32 tensor (1 / 2.5 off by 6e-9): its log_prob is ~5e-8 off a
    # 40-digit reference, which ours matches to float64
    rtol = 1e-6 if name == "Power" else 1e-8
    log_prob, log_prob_t = ours.log_prob(ta.tensor(value.numpy())), theirs.log_prob(value)
    close(log_prob, log_prob_t, rtol=rtol)
    (log_prob * ta.tensor(upstream)).sum().backward()
    (log_prob_t * torch.tensor(upstream)).sum().backward()
    for a, b in zip(our_params, their_params):
        np.testing.assert_allclose(a.grad, b.grad.numpy(), rtol=rtol, atol=1e-10)


def test_tanh_squashed_policy_as_soft_actor_critic_writes_it(monkeypatch):
    """``rsample`` an action, score it with the cached pre-tanh value: values and gradients as torch's, given the
    same noise."""
    mu, log_std = real(4, 2), real(4, 2) * 0.3
    ours_p = [ta.tensor(mu.copy(), requires_grad=True), ta.tensor(log_std.copy(), requires_grad=True)]
    theirs_p = [torch.tensor(mu.copy(), requires_grad=True), torch.tensor(log_std.copy(), requires_grad=True)]
    ours = D.TransformedDistribution(D.Normal(ours_p[0], ours_p[1].exp()), [D.TanhTransform(cache_size=1)])
    ta.manual_seed(11)
    action = ours.rsample()
    ta.manual_seed(11)
    eps = ta.randn(4, 2, dtype=ta.float64).numpy()
    import torch.distributions.normal as normal_module

    monkeypatch.setattr(normal_module, "_standard_normal", lambda shape, dtype, device: torch.tensor(eps))
    theirs = td.TransformedDistribution(td.Normal(theirs_p[0], theirs_p[1].exp()), [td.TanhTransform(cache_size=1)])
    action_t = theirs.rsample()
    close(action, action_t)
    weights = RNG.standard_normal(4)
    ours_loss = (ours.log_prob(action).sum(-1) * ta.tensor(weights)).sum() + (action ** 2).sum()
    theirs_loss = (theirs.log_prob(action_t).sum(-1) * torch.tensor(weights)).sum() + (action_t ** 2).sum()
    close(ours_loss, theirs_loss)
    ours_loss.backward()
    theirs_loss.backward()
    for a, b in zip(ours_p, theirs_p):
        np.testing.assert_allclose(a.grad, b.grad.numpy(), rtol=1e-8, atol=1e-10)


def test_transformed_cdf_and_icdf_match_torch():
    base = (ta.tensor([0.2, -0.3], dtype=ta.float64), 1.5)
    base_t = (torch.tensor([0.2, -0.3], dtype=torch.float64), 1.5)
    for transforms in (lambda M: [M.ExpTransform()], lambda M: [M.AffineTransform(1.0, -2.0)]):
        ours = D.TransformedDistribution(D.Normal(*base), transforms(D))
        theirs = td.TransformedDistribution(td.Normal(*base_t), transforms(td))
        value = values_of(theirs)
        close(ours.cdf(ta.tensor(value.numpy())), theirs.cdf(value))
        close(ours.icdf(ta.tensor([0.25, 0.75], dtype=ta.float64)), theirs.icdf(torch.tensor([0.25, 0.75],
                                                                                           dtype=torch.float64)))
