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
from gpdsl.likelihoods.quadrature import quadrature_tilted_moments
from gpdsl.semantics.catalog import DISTRIBUTIONS
from gpdsl.testing.imports import loaded_by

NUM_DRAWS = 20_000
Z_LIMIT = 4.5  # per frequency; with about 20 frequencies per likelihood a false alarm has probability ~1e-4
CUTPOINTS = np.array([-0.5, 0.7, 1.5])
PARAMETER_VALUES = {"f": 0.4, "eta": np.log(3.0), "mu": 0.3, "sigma": 1.7, "nu": 4.0, "phi": 2.5, "trials": 12,
                    "c": CUTPOINTS, "shape": 2.0, "zi": 0.3, "hu": 0.25, "cens": 0, "upper": 1.0,
                    "logits": np.array([0.3, -1.2, 1.1, 0.0])}
SUPPORT_DATA = {"real": "vector[N]", "positive": "vector<lower=0>[N]", "binary": "array[N] int<lower=0, upper=1>",
                "count": "array[N] int<lower=0>", "ordinal": "array[N] int<lower=1, upper=4>",
                "unit": "vector<lower=0, upper=1>[N]"}
SUPPORT_SCALAR = {"real": "real", "positive": "real<lower=0>", "binary": "int<lower=0, upper=1>",
                  "count": "int<lower=0>", "ordinal": "int<lower=1, upper=4>", "unit": "real<lower=0, upper=1>"}
CENSORED = ("normal_censored", "lognormal_censored", "weibull_censored")


def with_capability(field):
    return [pytest.param(LIKELIHOODS[name], id=name) for name in supporting(field)]


def random_point(name, rng, n):
    """Valid observations (as floats) and random values of every parameter of the likelihood ``name``."""
    eta = rng.normal(0.0, 1.5, n)
    if name == "normal":
        return rng.normal(size=n) * 2, {"mu": eta, "sigma": rng.uniform(0.3, 3, n)}
    if name == "student_t":
        return rng.normal(size=n) * 3, {"nu": rng.uniform(0.5, 30, n), "mu": eta, "sigma": rng.uniform(0.3, 3, n)}
    if name.startswith("bernoulli"):
        return rng.integers(0, 2, n) * 1.0, {"f": eta}
    if name == "poisson_log":
        return rng.poisson(3.0, n) * 1.0, {"eta": eta}
    if name == "neg_binomial_2_log":
        return rng.poisson(rng.gamma(2.0, 2.0, n)) * 1.0, {"eta": eta, "phi": rng.uniform(0.2, 20, n)}
    if name == "binomial_logit":
        trials = rng.integers(0, 30, n)
        return rng.binomial(trials, 0.4) * 1.0, {"trials": trials * 1.0, "eta": eta}
    if name == "ordered_logistic":
        return rng.integers(1, 5, n) * 1.0, {"eta": eta, "c": np.sort(rng.normal(0, 2, 3))}
    if name == "gamma_log":
        return rng.gamma(2.0, 1.5, n), {"eta": eta, "shape": rng.uniform(0.3, 10, n)}
    if name == "categorical_logit":
        return rng.integers(1, 5, n) * 1.0, {"logits": rng.normal(0.0, 3.0, (n, 4))}
    if name.startswith("zero_inflated"):
        y = np.where(rng.uniform(size=n) < 0.4, 0.0, rng.poisson(3.0, n) * 1.0)
        zi = np.concatenate([[0.0, 1.0], rng.uniform(0, 1, n - 2)])  # the ends: no inflation, all zeros
        phi = {"phi": rng.uniform(0.2, 20, n)} if "neg_binomial" in name else {}
        return y, {"eta": eta, **phi, "zi": zi}
    if name == "hurdle_poisson_log":
        y = np.where(rng.uniform(size=n) < 0.4, 0.0, rng.poisson(3.0, n) * 1.0)
        return y, {"eta": eta, "hu": np.concatenate([[0.0, 1.0], rng.uniform(0, 1, n - 2)])}
    if name == "beta_logit":
        return rng.beta(2.0, 3.0, n), {"eta": eta, "phi": rng.uniform(0.3, 30, n)}
    if name in CENSORED:
        cens = np.resize([0, 1, -1, 2], n)
        y = rng.normal(size=n) * 2 if name == "normal_censored" else rng.gamma(2.0, 1.5, n)
        scale = {"sigma": rng.uniform(0.3, 3, n)} if "normal" in name else {"shape": rng.uniform(0.3, 5, n)}
        location = "mu" if "normal" in name else "eta"
        return y, {location: eta, **scale, "cens": cens, "upper": y + rng.uniform(0.05, 3, n)}
    raise AssertionError(f"no random point for {name}")


def scipy_log_density(name, y, a):
    """The log density of each built-in likelihood by scipy.stats (an independent implementation)."""
    from scipy.special import expit

    if name == "normal":
        return stats.norm.logpdf(y, a["mu"], a["sigma"])
    if name == "student_t":
        return stats.t.logpdf(y, a["nu"], a["mu"], a["sigma"])
    if name == "bernoulli_probit":
        return stats.bernoulli.logpmf(y, stats.norm.cdf(a["f"]))
    if name == "bernoulli_logit":
        return stats.bernoulli.logpmf(y, expit(a["f"]))
    if name == "poisson_log":
        return stats.poisson.logpmf(y, np.exp(a["eta"]))
    if name == "neg_binomial_2_log":
        return stats.nbinom.logpmf(y, a["phi"], a["phi"] / (a["phi"] + np.exp(a["eta"])))
    if name == "binomial_logit":
        return stats.binom.logpmf(y, a["trials"], expit(a["eta"]))
    if name == "ordered_logistic":
        edges = np.concatenate([[-np.inf], a["c"], [np.inf]])
        k = y.astype(int)
        return np.log(stats.logistic.cdf(edges[k] - a["eta"]) - stats.logistic.cdf(edges[k - 1] - a["eta"]))
    if name == "gamma_log":
        return stats.gamma.logpdf(y, a["shape"], scale=np.exp(a["eta"]) / a["shape"])
    if name == "categorical_logit":
        probabilities = np.exp(a["logits"]) / np.exp(a["logits"]).sum(axis=1, keepdims=True)
        return np.log([stats.multinomial.pmf(np.eye(4)[int(k) - 1], 1, p) for k, p in zip(y, probabilities)])
    if name.startswith("zero_inflated"):
        count = scipy_log_density(name.removeprefix("zero_inflated_"), y, a)
        with np.errstate(divide="ignore"):
            return np.log(np.where(y == 0, a["zi"], 0.0) + (1 - a["zi"]) * np.exp(count))
    if name == "hurdle_poisson_log":
        rate = np.exp(a["eta"])
        with np.errstate(divide="ignore"):
            return np.where(y == 0, np.log(a["hu"]), np.log1p(-a["hu"]) + stats.poisson.logpmf(y, rate)
                            - stats.poisson.logsf(0, rate))
    if name == "beta_logit":
        mean = expit(a["eta"])
        return stats.beta.logpdf(y, mean * a["phi"], (1 - mean) * a["phi"])
    if name in CENSORED:
        return scipy_censored_log_density(name, y, a)
    raise AssertionError(f"no scipy density for {name}")


def scipy_censored_log_density(name, y, a):
    """brms' censoring codes by scipy.stats: the log pdf, log survival, log CDF or the log of the CDF's difference
    (from the log survival functions above the median, the log CDFs below it)."""
    if name == "normal_censored":
        dist = stats.norm(a["mu"], a["sigma"])
    elif name == "lognormal_censored":
        dist = stats.lognorm(a["sigma"], scale=np.exp(a["mu"]))
    else:
        dist = stats.weibull_min(a["shape"], scale=np.exp(a["eta"]))
    with np.errstate(divide="ignore", invalid="ignore"):
        survival = dist.logsf(y) + np.log(-np.expm1(dist.logsf(a["upper"]) - dist.logsf(y)))
        cumulative = dist.logcdf(a["upper"]) + np.log(-np.expm1(dist.logcdf(y) - dist.logcdf(a["upper"])))
    interval = np.where(y > dist.median(), survival, cumulative)
    cens = a["cens"]
    return np.select([cens == 0, cens == 1, cens == -1, cens == 2],
                     [dist.logpdf(y), dist.logsf(y), dist.logcdf(y), interval])


@pytest.mark.parametrize("name", list(LIKELIHOODS))
def test_log_density_matches_scipy(name):
    rng = np.random.default_rng(5)
    y, args = random_point(name, rng, 200)
    ours = np.asarray(LIKELIHOODS[name].log_density(jnp.asarray(y), *(jnp.asarray(args[p])
                                                                     for p in LIKELIHOODS[name].params)))
    np.testing.assert_allclose(ours, scipy_log_density(name, y, args), rtol=1e-10, atol=1e-10)


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
    y, args = random_point(likelihood.name, np.random.default_rng(3), 50)
    y = jnp.asarray(y)
    f = jnp.linspace(-8.0, 8.0, 50)
    others = [jnp.asarray(args[p]) for p in likelihood.other_params]

    def total(f):
        values = {**args, likelihood.latent_param: f}
        return jnp.sum(likelihood.log_density(y, *(jnp.asarray(values[p]) for p in likelihood.params)))

    log_lik, grad, W = jax.jit(likelihood.derivatives)(y, f, *others)
    assert float(log_lik) == pytest.approx(float(total(f)), rel=1e-13)
    np.testing.assert_allclose(grad, jax.jit(jax.grad(total))(f), rtol=1e-11, atol=1e-300)
    # atol: a censored Weibull's W of 1e-9 (a tiny cumulative hazard) is rounded differently by the two orders
    np.testing.assert_allclose(W, -jnp.diag(jax.jit(jax.hessian(total))(f)), rtol=1e-9, atol=1e-12)
    assert np.all(np.asarray(W) >= 0)  # log-concave: what the Laplace approximation's Newton steps need
    step = 1e-5
    central = (np.asarray(jax.vmap(jax.grad(total))(f + step * jnp.eye(50))).diagonal()
               - np.asarray(jax.vmap(jax.grad(total))(f - step * jnp.eye(50))).diagonal()) / (2 * step)
    np.testing.assert_allclose(-central, W, rtol=1e-5, atol=1e-6)  # and by finite differences of the gradient


@pytest.mark.parametrize("likelihood", [pytest.param(LIKELIHOODS["bernoulli_probit"], id="bernoulli_probit")])
@pytest.mark.parametrize("y", [0.0, 1.0])
@pytest.mark.parametrize("mean, var", [(0.0, 1.0), (-2.0, 0.1), (1.5, 5.0), (4.0, 0.5)])
def test_tilted_moments_match_quadrature(likelihood, y, mean, var):
    log_z, tilted_mean, tilted_var = (float(v) for v in likelihood.tilted_moments(jnp.asarray(y), mean, var))
    expected = tilted_by_quadrature(likelihood, y, mean, var)
    np.testing.assert_allclose([log_z, tilted_mean, tilted_var], expected, rtol=1e-9, atol=1e-12)


CAVITIES = [(0.0, 1.0), (-2.0, 0.1), (1.5, 5.0), (4.0, 0.5)]


@pytest.mark.parametrize("name, y, others", [("bernoulli_probit", 1.0, {}), ("bernoulli_probit", 0.0, {}),
                                              ("normal", 0.7, {"sigma": 0.3}), ("normal", -3.0, {"sigma": 2.0})])
@pytest.mark.parametrize("mean, var", CAVITIES)
def test_quadrature_tilted_moments_equal_the_closed_forms(name, y, others, mean, var):
    likelihood = LIKELIHOODS[name]
    assert likelihood.closed_form_tilted_moments
    values = [others[p] for p in likelihood.other_params]
    by_quadrature = quadrature_tilted_moments(likelihood)(jnp.asarray(y), mean, var, *values)
    closed = likelihood.tilted_moments(jnp.asarray(y), mean, var, *values)
    np.testing.assert_allclose(np.array(by_quadrature, dtype=float), np.array(closed, dtype=float),
                               rtol=1e-9, atol=1e-12)


def tilted_by_scipy_quad(likelihood, y, mean, var, others):
    """log Z, mean and variance of p(y | f, others) N(f | mean, var) by scipy.integrate.quad, over an interval
    that holds the cavity and the tilted mode (found on a grid) with both as break points."""
    values = {**others}
    log_density = jax.jit(lambda f: likelihood.log_density(
        jnp.asarray(y), *(f if p == likelihood.latent_param else jnp.asarray(values[p]) for p in likelihood.params)))
    scale = np.sqrt(var)
    grid = np.linspace(mean - 20 * scale - 10, mean + 20 * scale + 10, 401)
    mode = grid[np.argmax([float(log_density(f)) + stats.norm.logpdf(f, mean, scale) for f in grid])]
    low, high = min(mean, mode) - 14 * scale - 3, max(mean, mode) + 14 * scale + 3

    def moment(power, log_shift):
        integrand = lambda f: f**power * np.exp(float(log_density(f)) + stats.norm.logpdf(f, mean, scale) - log_shift)
        return integrate.quad(integrand, low, high, epsabs=0, epsrel=1e-12, limit=1000, points=sorted({mean, mode}))[0]

    log_shift = np.log(moment(0, 0.0))
    z, first, second = moment(0, log_shift), moment(1, log_shift), moment(2, log_shift)
    return log_shift + np.log(z), first / z, second / z - (first / z) ** 2


QUADRATURE_CASES = [
    ("poisson_log", 3.0, {}), ("poisson_log", 50.0, {}), ("poisson_log", 0.0, {}),
    ("beta_logit", 0.9, {"phi": 20.0}), ("beta_logit", 0.05, {"phi": 2.0}),
    ("student_t", 2.0, {"nu": 3.0, "sigma": 0.5}), ("gamma_log", 2.5, {"shape": 3.0}),
    ("ordered_logistic", 2.0, {"c": CUTPOINTS}),
    ("weibull_censored", 2.0, {"shape": 1.5, "cens": 1, "upper": 2.0}),
    ("normal_censored", 0.5, {"sigma": 0.7, "cens": 2, "upper": 1.5}),
    ("zero_inflated_poisson_log", 0.0, {"zi": 0.3}),
]


@pytest.mark.parametrize("name, y, others", QUADRATURE_CASES)
@pytest.mark.parametrize("mean, var", CAVITIES)
def test_quadrature_tilted_moments_match_scipy_quad(name, y, others, mean, var):
    """A count of 50 is far narrower than every cavity; the censoring step and the zero-inflation wall are the
    least smooth tilted densities (relative error about 2e-6 there, below 1e-8 elsewhere)."""
    likelihood = LIKELIHOODS[name]
    assert not likelihood.closed_form_tilted_moments
    values = [jnp.asarray(others[p]) for p in likelihood.other_params]
    ours = np.array(likelihood.tilted_moments(jnp.asarray(y), mean, var, *values), dtype=float)
    np.testing.assert_allclose(ours, tilted_by_scipy_quad(likelihood, y, mean, var, others), rtol=1e-5, atol=1e-9)


def test_every_likelihood_has_tilted_moments_and_ep_runs_it():
    """EP (both schedules) converges on each scalar likelihood with its other parameters, and the sequential and
    parallel fixed points agree; a likelihood on rows of latent values (categorical_logit) has no tilted moments."""
    n = 8
    x = np.linspace(0.0, 3.0, n)
    K = 1.3 * np.exp(-0.5 * (x[:, None] - x[None, :]) ** 2 / 0.8 ** 2) + 1e-6 * np.eye(n)
    rng = np.random.default_rng(2)
    scalar = {name: likelihood for name, likelihood in LIKELIHOODS.items() if not likelihood.row_params}
    assert supporting("tilted_moments") == tuple(scalar) and "categorical_logit" not in scalar
    for name, likelihood in scalar.items():
        y, args = random_point(name, rng, n)
        args = {p: np.clip(v, 0.05, 0.95) if p in ("zi", "hu") else v for p, v in args.items()}  # no impossible y
        others = tuple(args[p] for p in likelihood.other_params)
        sequential = ep(K, y, likelihood=name, args=others, tol=1e-14, max_sweeps=200)
        parallel = ep(K, y, likelihood=name, args=others, tol=1e-14, max_sweeps=1000, schedule="parallel")
        assert bool(sequential.converged) and bool(parallel.converged), name
        np.testing.assert_allclose(parallel.mean, sequential.mean, rtol=1e-5, atol=1e-6, err_msg=name)
        assert float(parallel.log_marginal) == pytest.approx(float(sequential.log_marginal), rel=1e-6), name


@pytest.mark.parametrize("likelihood", with_capability("class_probability"))
@pytest.mark.parametrize("mean, var", [(0.0, 1.0), (-2.0, 0.1), (1.5, 5.0), (4.0, 0.5)])
def test_class_probability_matches_quadrature(likelihood, mean, var):
    probability = float(likelihood.class_probability(jnp.asarray(mean), jnp.asarray(var)))
    log_z, _, _ = tilted_by_quadrature(likelihood, 1.0, mean, var)
    assert probability == pytest.approx(np.exp(log_z), rel=1e-9)


def _frequencies_and_probabilities(likelihood, draws, params):
    """Observed frequencies of the values (binary, count) or of 20 equiprobable-ish bins (real)."""
    density = jax.jit(lambda y: jnp.exp(likelihood.log_density(y, *params)))
    if likelihood.support in ("binary", "count", "ordinal"):
        values = {"binary": np.arange(2), "count": np.arange(40), "ordinal": np.arange(1, 5)}[likelihood.support]
        if "trials" in likelihood.params:
            values = np.arange(PARAMETER_VALUES["trials"] + 1)
        return (np.array([np.mean(draws == v) for v in values]),
                np.asarray(density(jnp.asarray(values, dtype=float))))
    edges = np.quantile(draws, np.linspace(0.0, 1.0, 21)[1:-1])
    low, high = {"positive": (0.0, np.inf), "unit": (0.0, 1.0)}.get(likelihood.support, (-np.inf, np.inf))
    edges = np.concatenate([[low], edges, [high]])
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
    if likelihood.support not in ("real", "positive", "unit"):
        assert observed.sum() > 1 - 1e-3  # the listed values hold (nearly) all the draws


STAN_ARGUMENT = {"trials": ("int<lower=0> tr;", "tr"), "c": ("vector[3] cut;", "cut"),
                 "cens": ("int<lower=-1, upper=2> cens;", "cens"), "upper": ("real up;", "up")}
"""Arguments that are data in :func:`stan_model` (their declaration and name); the others are parameters."""
STAN_PARAMETER = {p: f"real<lower=0, upper=1> a_{p} ~ uniform(0, 1);" for p in ("zi", "hu")}
"""Parameters of :func:`stan_model` other than ``real<lower=0> a_<name> ~ gamma(2, 2)``."""


def stan_argument(p: str) -> str:
    return STAN_ARGUMENT[p][1] if p in STAN_ARGUMENT else f"a_{p}"


def stan_model(likelihood) -> str:
    """A model using the likelihood on a vector with a shaped latent argument, on a vector with scalar
    arguments, and on a scalar."""
    data, scalar = SUPPORT_DATA[likelihood.support], SUPPORT_SCALAR[likelihood.support]
    parameters = "\n".join("  " + STAN_PARAMETER.get(p, f"real<lower=0> a_{p} ~ gamma(2, 2);")
                           for p in likelihood.params if p not in STAN_ARGUMENT)
    declarations = " ".join(STAN_ARGUMENT[p][0] for p in likelihood.params if p in STAN_ARGUMENT)
    scalars = ", ".join(stan_argument(p) for p in likelihood.params)
    shaped = ", ".join("v" if p == likelihood.latent_param else stan_argument(p) for p in likelihood.params)
    return f"""
data {{
  int N;
  {data} y1;
  {data} y2;
  {scalar} z;
  {declarations}
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


@pytest.mark.parametrize("likelihood", [p for p in with_capability("stan") if not p.values[0].row_params])
def test_stan_spelling_passes_stanc(likelihood):
    model, _ = check_text(stan_model(likelihood), f"{likelihood.name}.gpm")
    code = generate_stan(model).code
    check_program(code, likelihood.name)
    rest = {p: (stan_argument(p), p in likelihood.own_shape) for p in likelihood.params}
    assert likelihood.stan("y1", {**rest, likelihood.latent_param: ("v", True)}, True) in code
    assert likelihood.stan("y2", rest, True) in code
    assert likelihood.stan("z", rest, False) in code


CATEGORICAL_MODEL = """
data {
  int N;
  int K;
  vector[N] x;
  array[N] int<lower=1, upper=K> y1;
  array[N] int<lower=1, upper=K> y2;
  array[3] int<lower=1, upper=K> z;
}
parameters {
  real mu ~ normal(0, 1);
}
latent {
  matrix[N, K] f;
  matrix[3, K] g;
}
model {
  f ~ gp(x, rbf());
  g ~ normal(0, 1);
  y1 ~ categorical_logit(f);
  y2 ~ categorical_logit(mu + f);
  z ~ categorical_logit(g);
}
"""


def test_categorical_logit_stan_spelling_passes_stanc():
    """Rows of a latent GP matrix, of an offset plus it, and of a latent matrix with a normal prior: one
    ``categorical_logit_lpmf`` per row in the model block and in generated quantities, and its ``_rng``."""
    model, _ = check_text(CATEGORICAL_MODEL, "categorical_logit.gpm")
    code = generate_stan(model).code
    check_program(code, "categorical_logit")
    for text in ("categorical_logit_rows_lpmf(y1 | f)", "categorical_logit_rows_lpmf(y2 | mu + f)",
                 "categorical_logit_rows_lpmf(z | g)", "categorical_logit_lpmf(y1[i1] | (f[i1])')",
                 "categorical_logit_rng((g[i1])')"):
        assert text in code, text


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
    with pytest.raises(MethodError, match="Laplace approximation supports bernoulli_probit, bernoulli_logit, "
                                          "neg_binomial_2_log, binomial_logit, ordered_logistic, gamma_log, "
                                          "hurdle_poisson_log, normal_censored, lognormal_censored and "
                                          "weibull_censored; "
                                          "likelihood is poisson_log: use --method gibbs"):
        laplace(K, y, likelihood="poisson_log")
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


def test_laplace_refuses_a_likelihood_that_is_not_log_concave_and_says_why():
    with pytest.raises(MethodError, match=r"concave in the latent value; likelihood is student_t, which is not "
                                          r"\(its heavy tails .*use --method gibbs"):
        laplace(np.eye(3), np.zeros(3), likelihood="student_t", args=(4.0, 1.0))
    assert np.isfinite(float(ep(np.eye(3), np.zeros(3), likelihood="student_t", args=(4.0, 1.0)).log_marginal))


def test_ordered_logistic_gives_no_mass_when_cutpoints_do_not_increase():
    density = LIKELIHOODS["ordered_logistic"].log_density
    assert float(density(jnp.asarray(2.0), 0.3, jnp.array([0.5, -0.5, 1.0]))) == -np.inf
    assert np.isfinite(float(density(jnp.asarray(1.0), 0.3, jnp.array([0.5, -0.5, 1.0]))))  # only c[1] involved
