"""The prior table (gpdsl.priors) is the one description every consumer reads: each prior's JAX density and CDF
agree with SciPy, its draws follow that density, its Stan form is what the code generator writes, and the checker's
catalog, the JAX densities and the z-space engine list exactly its entries."""

import ast
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import integrate, special, stats

import gpdsl.numerics.float64  # noqa: F401
from gpdsl.api import check_text
from gpdsl.backends.stan.codegen import generate_stan
from gpdsl.inference.mcmc.z_space import Z_PRIORS
from gpdsl.priors import PRIORS
from gpdsl.semantics import catalog
from gpdsl.testing.imports import loaded_by

NUM_DRAWS = 200_000
Z_LIMIT = 5.0  # standard errors; with 12 priors x 2 moments a false alarm has probability ~1e-5


def _ssn_reference(lower, upper, mu, sigma):
    """SciPy's view of scaled_sigmoid_normal: the normal density of z = logit((x - lower) / width) times |dz/dx|."""
    width = upper - lower

    def logpdf(x):
        p = (x - lower) / width
        return stats.norm.logpdf(special.logit(p), mu, sigma) - np.log(width * p * (1 - p))

    def cdf(x):
        return stats.norm.cdf(special.logit((x - lower) / width), mu, sigma)

    def moments():
        def moment(k):
            return integrate.quad(lambda z: (lower + width * special.expit(z)) ** k * stats.norm.pdf(z, mu, sigma),
                                  mu - 12 * sigma, mu + 12 * sigma, epsabs=1e-13, epsrel=1e-12)[0]
        mean = moment(1)
        return mean, moment(2) - mean ** 2

    return logpdf, cdf, moments()


def _frozen(name, args):
    """The SciPy distribution of a prior with arguments ``args``: (logpdf, cdf, (mean, variance))."""
    if name == "scaled_sigmoid_normal":
        return _ssn_reference(*args)
    if name == "normal":
        mu, sigma = args
        dist = stats.norm(mu, sigma)
    elif name == "lognormal":
        mu, sigma = args
        dist = stats.lognorm(s=sigma, scale=np.exp(mu))
    elif name == "gamma":
        shape, rate = args
        dist = stats.gamma(shape, scale=1 / rate)
    elif name == "inv_gamma":
        shape, scale = args
        dist = stats.invgamma(shape, scale=scale)
    elif name == "half_normal":
        (sigma,) = args
        dist = stats.halfnorm(scale=sigma)
    elif name == "student_t":
        nu, mu, sigma = args
        dist = stats.t(nu, mu, sigma)
    elif name == "uniform":
        lower, upper = args
        dist = stats.uniform(lower, upper - lower)
    elif name == "exponential":
        (rate,) = args
        dist = stats.expon(scale=1 / rate)
    elif name == "weibull":
        alpha, sigma = args
        dist = stats.weibull_min(alpha, scale=sigma)
    elif name == "cauchy":
        mu, sigma = args
        dist = stats.cauchy(mu, sigma)
        return dist.logpdf, dist.cdf, None
    elif name == "beta":
        alpha, beta = args
        dist = stats.beta(alpha, beta)
    return dist.logpdf, dist.cdf, (dist.mean(), dist.var())


# arguments (variance with a finite fourth moment, for the Monte Carlo error of the sample variance) and points
CASES = {
    "normal": ((0.3, 1.7), [-2.0, 0.3, 4.1]),
    "lognormal": ((0.2, 0.5), [0.1, 1.0, 3.5]),
    "gamma": ((2.5, 1.3), [0.05, 1.0, 6.0]),
    "inv_gamma": ((6.0, 2.0), [0.05, 0.4, 3.0]),
    "half_normal": ((1.3,), [0.01, 1.0, 4.0]),
    "student_t": ((7.0, 0.4, 1.2), [-5.0, 0.4, 2.2]),
    "uniform": ((-0.5, 2.0), [-0.4, 0.7, 1.99]),
    "scaled_sigmoid_normal": ((0.1, 2.0, 0.3, 1.4), [0.11, 1.0, 1.95]),
    "exponential": ((1.7,), [0.01, 0.5, 3.0]),
    "weibull": ((1.8, 0.9), [0.05, 0.8, 2.5]),
    "cauchy": ((0.4, 1.2), [-30.0, 0.4, 2.2]),
    "beta": ((2.5, 1.5), [0.02, 0.5, 0.97]),
}


MATRIX_PRIORS = {"lkj_corr_cholesky", "dirichlet"}
"""Priors of a whole matrix or simplex, tested in their own modules (tests/priors/test_lkj.py, test_dirichlet.py)."""
SCALAR_PRIORS = sorted(set(PRIORS) - MATRIX_PRIORS)


def test_every_prior_has_a_case():
    assert set(CASES) == set(SCALAR_PRIORS)


@pytest.mark.parametrize("name", SCALAR_PRIORS)
def test_density_and_cdf_agree_with_scipy(name):
    args, points = CASES[name]
    prior, x, vectors = PRIORS[name], jnp.asarray(points), [jnp.full(3, a) for a in args]
    logpdf, cdf, _ = _frozen(name, args)
    for function, reference, rtol in [(prior.log_density, logpdf, 1e-10), (prior.cdf, cdf, 1e-9)]:
        got = np.asarray(function(x, *args))
        np.testing.assert_allclose(got, reference(np.asarray(points)), rtol=rtol, atol=1e-12)
        np.testing.assert_allclose(np.asarray(function(x, *vectors)), got, rtol=1e-12)
    below_support = [-1e300] if prior.support == "real" else [-1e300, -3.0]
    np.testing.assert_array_equal(prior.cdf(jnp.asarray(below_support), *args), 0.0)
    np.testing.assert_array_equal(prior.cdf(jnp.asarray([1e300]), *args), 1.0)


@pytest.mark.parametrize("name", SCALAR_PRIORS)
def test_draws_follow_the_density(name):
    args, _ = CASES[name]
    _, cdf, moments = _frozen(name, args)
    draws = np.asarray(PRIORS[name].sample(jax.random.PRNGKey(0), (NUM_DRAWS,), *(jnp.asarray(a) for a in args)))
    assert draws.shape == (NUM_DRAWS,)
    assert np.all(np.isfinite(PRIORS[name].log_density(jnp.asarray(draws), *args)))
    assert stats.kstest(draws, cdf).pvalue > 1e-4
    if moments is None:  # no mean (cauchy): the fraction below each quartile, a binomial proportion
        for q in (0.25, 0.5, 0.75):
            below = np.mean(draws <= stats.cauchy(*args).ppf(q))
            assert abs(below - q) < Z_LIMIT * np.sqrt(q * (1 - q) / NUM_DRAWS), (q, below)
        return
    mean, variance = moments
    squares = (draws - draws.mean()) ** 2
    assert abs(draws.mean() - mean) < Z_LIMIT * draws.std() / np.sqrt(NUM_DRAWS), (draws.mean(), mean)
    assert abs(squares.mean() - variance) < Z_LIMIT * squares.std() / np.sqrt(NUM_DRAWS), (squares.mean(), variance)


def _declaration(name: str, variate: str, container: str) -> str:
    """A parameter declaration that the prior fits: its support's bounds, or none where the prior implies them."""
    bounds = {"positive": "<lower=0>", "unit": "<lower=0, upper=1>"}.get(PRIORS[name].support, "")
    return f"{container}{bounds}{'[N]' if container == 'vector' else ''} {variate}"


@pytest.mark.parametrize("name", SCALAR_PRIORS)
def test_stan_form_is_what_codegen_writes(name):
    prior = PRIORS[name]
    texts = dict(zip(prior.params, (str(a) for a in CASES[name][0])))
    # a data vector as the last argument that may be one (the bounds of a bounded prior must be constants)
    shaped = next((p for p in reversed(prior.params) if p not in (prior.ordered or ())), None)
    declarations = [f"{_declaration(name, 'a', 'real')} ~ {name}({', '.join(texts.values())});",
                    f"{_declaration(name, 'b', 'vector')} ~ {name}({', '.join(texts.values())});"]
    if shaped is not None:
        declarations.append(f"{_declaration(name, 'c', 'vector')} ~ "
                            f"{name}({', '.join({**texts, shaped: 'v'}.values())});")
    model, _ = check_text(f"""
    data {{ int N; vector<lower=1>[N] v; vector[N] y; }}
    parameters {{ {' '.join(declarations)} }}
    model {{ y ~ normal(0, 1); }}
    """)
    code = generate_stan(model).code
    scalars = {p: (t, False) for p, t in texts.items()}
    assert f"target += {prior.stan('a', scalars, None)};" in code
    assert f"target += {prior.stan('b', scalars, 'N')};" in code
    if shaped is not None:
        assert f"target += {prior.stan('c', {**scalars, shaped: ('v', True)}, 'N')};" in code


def test_half_normal_and_scaled_sigmoid_normal_stan_forms():
    args = {"sigma": ("2", False)}
    assert PRIORS["half_normal"].stan("x", args, None) == "normal_lpdf(x | 0, 2) + log2()"
    assert PRIORS["half_normal"].stan("x", args, "N * D") == "normal_lpdf(x | 0, 2) + N * D * log2()"
    ssn = {"lower": ("0", False), "upper": ("1", False), "mu": ("m", True), "sigma": ("1.5", False)}
    assert PRIORS["scaled_sigmoid_normal"].stan("x", ssn, None) == "scaled_sigmoid_normal_lpdf(x | 0, 1, m, 1.5)"
    assert PRIORS["scaled_sigmoid_normal"].stan("x", ssn, "N") == (
        "scaled_sigmoid_normal_lpdf(x | rep_vector(0, N), rep_vector(1, N), m, rep_vector(1.5, N))")


def test_catalog_densities_and_z_space_read_the_table():
    for name, prior in PRIORS.items():
        spec = catalog.DISTRIBUTIONS[name]
        assert spec.prior
        assert (spec.params, spec.defaults, spec.support, spec.arg_support, spec.ordered, spec.doc) == (
            prior.params, dict(prior.defaults), prior.support, dict(prior.arg_support), prior.ordered, prior.doc)
    assert [n for n, d in catalog.DISTRIBUTIONS.items() if d.prior] == list(PRIORS)
    assert Z_PRIORS == ("scaled_sigmoid_normal", "normal", "lognormal")
    assert {n: PRIORS[n].z_space.bounds for n in Z_PRIORS} == {
        "scaled_sigmoid_normal": "bounds", "normal": "unbounded", "lognormal": "positive"}


ALLOWED = ("jax", "numpy", "scipy", "gpdsl.errors", "gpdsl.numerics", "gpdsl.numerics.special", "gpdsl.source", "gpdsl.priors",
           "__future__", "collections", "dataclasses", "typing", "math")


def test_priors_import_only_what_the_layering_allows():
    root = Path(__file__).resolve().parents[2] / "gpdsl" / "priors"
    for path in root.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module] if isinstance(node, ast.ImportFrom) else [])
            for module in names:
                assert any(module == a or module.startswith(a + ".") for a in ALLOWED), (path.name, module)
    assert loaded_by(["gpdsl.priors"]) == []
