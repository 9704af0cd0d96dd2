"""The likelihood objects: derivatives, EP moments, class probabilities and samplers agree with the log
density; the Stan spellings pass stanc; the catalog and the consumers read the registry."""

import itertools
from dataclasses import replace

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import integrate, stats

from gpdsl.api import check_file, check_text
from gpdsl.backends.jax.lowering import lower
from gpdsl.backends.jax.simulate import simulate
from gpdsl.backends.stan.codegen import generate_stan
from gpdsl.backends.stan.stanc import check_program
from gpdsl.errors import MethodError
from gpdsl.inference.approximations.ep import ep
from gpdsl.inference.approximations.gaussian import class_probability
from gpdsl.inference.approximations.laplace import laplace
from gpdsl.likelihoods import CAPABILITIES, LIKELIHOODS, supporting
from gpdsl.semantics.catalog import DISTRIBUTIONS
from gpdsl.testing.imports import loaded_by

NUM_DRAWS = 20_000
Z_LIMIT = 4.5  # per frequency; with about 20 frequencies per likelihood a false alarm has probability ~1e-4
PARAMETER_VALUES = {"f": 0.4, "eta": np.log(3.0), "mu": 0.3, "sigma": 1.7}
SUPPORT_DATA = {"real": "vector[N]", "binary": "array[N] int<lower=0, upper=1>", "count": "array[N] int<lower=0>"}
SUPPORT_SCALAR = {"real": "real", "binary": "int<lower=0, upper=1>", "count": "int<lower=0>"}


def with_capability(field):
    return [pytest.param(LIKELIHOODS[name], id=name) for name in supporting(field)]


def tilted_by_quadrature(likelihood, y, mean, var):
    """log Z, mean and variance of p(y | f) N(f | mean, var) by adaptive quadrature."""
    log_density = jax.jit(likelihood.log_density)
    scale = np.sqrt(var)

    def moment(power):
        integrand = lambda f: f**power * np.exp(float(log_density(y, f))) * stats.norm.pdf(f, mean, scale)
        return integrate.quad(integrand, mean - 12 * scale, mean + 12 * scale, epsabs=0, epsrel=1e-13, limit=200)[0]

    z, first, second = moment(0), moment(1), moment(2)
    return np.log(z), first / z, second / z - (first / z) ** 2


@pytest.mark.parametrize("likelihood", with_capability("derivatives"))
def test_derivatives_are_those_of_the_log_density(likelihood):
    y = jnp.tile(jnp.array([0.0, 1.0]), 25)
    f = jnp.linspace(-8.0, 8.0, 50)

    def total(f):
        return jnp.sum(likelihood.log_density(y, f))

    log_lik, grad, W = jax.jit(likelihood.derivatives)(y, f)
    assert float(log_lik) == pytest.approx(float(total(f)), rel=1e-13)
    np.testing.assert_allclose(grad, jax.jit(jax.grad(total))(f), rtol=1e-11, atol=1e-300)
    np.testing.assert_allclose(W, -jnp.diag(jax.jit(jax.hessian(total))(f)), rtol=1e-9, atol=1e-300)


@pytest.mark.parametrize("likelihood", with_capability("tilted_moments"))
@pytest.mark.parametrize("y", [0.0, 1.0])
@pytest.mark.parametrize("mean, var", [(0.0, 1.0), (-2.0, 0.1), (1.5, 5.0), (4.0, 0.5)])
def test_tilted_moments_match_quadrature(likelihood, y, mean, var):
    log_z, tilted_mean, tilted_var = (float(v) for v in likelihood.tilted_moments(jnp.asarray(y), mean, var))
    expected = tilted_by_quadrature(likelihood, y, mean, var)
    np.testing.assert_allclose([log_z, tilted_mean, tilted_var], expected, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("likelihood", with_capability("class_probability"))
@pytest.mark.parametrize("mean, var", [(0.0, 1.0), (-2.0, 0.1), (1.5, 5.0), (4.0, 0.5)])
def test_class_probability_matches_quadrature(likelihood, mean, var):
    probability = float(likelihood.class_probability(jnp.asarray(mean), jnp.asarray(var)))
    log_z, _, _ = tilted_by_quadrature(likelihood, 1.0, mean, var)
    assert probability == pytest.approx(np.exp(log_z), rel=1e-9)


def _frequencies_and_probabilities(likelihood, draws, params):
    """Observed frequencies of the values (binary, count) or of 20 equiprobable-ish bins (real)."""
    density = jax.jit(lambda y: jnp.exp(likelihood.log_density(y, *params)))
    if likelihood.support in ("binary", "count"):
        values = np.arange(2 if likelihood.support == "binary" else 15)
        return (np.array([np.mean(draws == v) for v in values]),
                np.asarray(density(jnp.asarray(values, dtype=float))))
    edges = np.quantile(draws, np.linspace(0.0, 1.0, 21)[1:-1])
    edges = np.concatenate([[-np.inf], edges, [np.inf]])
    observed = np.histogram(draws, edges)[0] / draws.size
    expected = [integrate.quad(lambda y: float(density(y)), lo, hi, epsrel=1e-12)[0]
                for lo, hi in itertools.pairwise(edges)]
    return observed, np.array(expected)


@pytest.mark.parametrize("likelihood", with_capability("sample"))
def test_simulation_frequencies_match_the_density(likelihood):
    params = [jnp.asarray(PARAMETER_VALUES[name]) for name in likelihood.params]
    draws = np.asarray(likelihood.sample(jax.random.PRNGKey(11), (NUM_DRAWS,), *params))
    assert draws.shape == (NUM_DRAWS,)
    observed, expected = _frequencies_and_probabilities(likelihood, draws, params)
    standard_error = np.sqrt(expected * (1 - expected) / NUM_DRAWS)
    assert np.all(np.abs(observed - expected) < Z_LIMIT * standard_error + 1e-12), (observed, expected)
    if likelihood.support != "real":
        assert observed.sum() > 1 - 1e-3  # the listed values hold (nearly) all the draws


def stan_model(likelihood) -> str:
    """A model using the likelihood on a vector with a shaped first argument, on a vector with scalar
    arguments, and on a scalar."""
    data, scalar = SUPPORT_DATA[likelihood.support], SUPPORT_SCALAR[likelihood.support]
    parameters = "\n".join(f"  real<lower=0> a_{p} ~ gamma(2, 2);" for p in likelihood.params)
    scalars = ", ".join(f"a_{p}" for p in likelihood.params)
    shaped = ", ".join(["v", *(f"a_{p}" for p in likelihood.params[1:])])
    return f"""
data {{
  int N;
  {data} y1;
  {data} y2;
  {scalar} z;
}}
parameters {{
  vector[N] v ~ normal(0, 1);
{parameters}
}}
model {{
  y1 ~ {likelihood.name}({shaped});
  y2 ~ {likelihood.name}({scalars});
  z ~ {likelihood.name}({scalars});
}}
"""


@pytest.mark.parametrize("likelihood", with_capability("stan"))
def test_stan_spelling_passes_stanc(likelihood):
    model, _ = check_text(stan_model(likelihood), f"{likelihood.name}.gpm")
    code = generate_stan(model).code
    check_program(code, likelihood.name)
    rest = {p: (f"a_{p}", False) for p in likelihood.params}
    first = likelihood.params[0]
    assert likelihood.stan("y1", {**rest, first: ("v", True)}, True) in code
    assert likelihood.stan("y2", rest, True) in code
    assert likelihood.stan("z", rest, False) in code


def test_every_catalog_likelihood_has_an_object():
    catalog_likelihoods = [name for name, spec in DISTRIBUTIONS.items() if spec.likelihood]
    assert catalog_likelihoods == list(LIKELIHOODS)
    for name, likelihood in LIKELIHOODS.items():
        spec = DISTRIBUTIONS[name]
        assert (spec.params, spec.support) == (likelihood.params, likelihood.support)
        assert likelihood.log_density is not None


def test_capabilities_are_callables_or_none():
    for likelihood in LIKELIHOODS.values():
        for field in CAPABILITIES:
            value = getattr(likelihood, field)
            assert value is None or callable(value), (likelihood.name, field)


def test_importing_the_likelihoods_does_not_import_jax():
    assert loaded_by(["gpdsl.likelihoods", "gpdsl.semantics.catalog", "gpdsl.numerics"]) == []


def test_approximations_refuse_a_likelihood_without_the_capability(monkeypatch):
    K, y = np.eye(3), np.array([0, 1, 1])
    monkeypatch.setitem(LIKELIHOODS, "poisson_log", replace(LIKELIHOODS["poisson_log"], derivatives=None))
    with pytest.raises(MethodError, match="Laplace approximation supports bernoulli_probit and bernoulli_logit; "
                                          "likelihood is poisson_log"):
        laplace(K, y, likelihood="poisson_log")
    with pytest.raises(MethodError, match="expectation propagation supports bernoulli_probit; "
                                          "likelihood is bernoulli_logit"):
        ep(K, y, likelihood="bernoulli_logit")
    with pytest.raises(MethodError, match="class probabilities need a Bernoulli likelihood"):
        class_probability(0.0, 1.0, "normal")


POISSON_MODEL = """
data {
  int N;
  matrix[N, 1] X;
  array[N] int<lower=0> counts;
}
model {
  f ~ gp(X, rbf(lengthscale = 0.5));
  counts ~ poisson_log(f);
}
"""


def test_backends_refuse_a_likelihood_without_a_sampler_or_stan_spelling(monkeypatch):
    model, _ = check_text(POISSON_MODEL)
    data = {"N": 3, "X": np.zeros((3, 1)) + [[0.0], [1.0], [2.0]], "counts": np.zeros(3, int)}
    monkeypatch.setitem(LIKELIHOODS, "poisson_log", replace(LIKELIHOODS["poisson_log"], sample=None, stan=None))
    with pytest.raises(MethodError, match="cannot simulate from 'poisson_log'"):
        simulate(lower(model, data), jax.random.PRNGKey(0))
    with pytest.raises(MethodError, match="no translation of the distribution 'poisson_log'"):
        generate_stan(model)


def test_lowering_uses_the_registry_log_density(monkeypatch):
    model, _ = check_file("models/gp_classification.gpm")
    data = {"N": 3, "D": 2, "X": np.array([[0.1, 0.2], [0.5, 0.5], [0.9, 0.1]]), "y": np.array([0, 1, 1])}
    jm = lower(model, data)
    z = jnp.linspace(-0.5, 0.5, jm.dim)
    f = jm.constrained(z)["f"]
    probit = LIKELIHOODS["bernoulli_probit"]
    without_likelihood = float(jm.log_density(z)) - float(jnp.sum(probit.log_density(data["y"] * 1.0, f)))
    monkeypatch.setitem(LIKELIHOODS, "bernoulli_probit", replace(probit, log_density=lambda y, f: f))
    assert float(lower(model, data).log_density(z)) == pytest.approx(without_likelihood + float(jnp.sum(f)),
                                                                     rel=1e-12)
