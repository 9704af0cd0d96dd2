"""Hyperparameter updates in z-space (Tegner et al. 2018): the scaled-sigmoid-normal prior, and SDSS, fixed-nu
and alpha ESS leaving a known one-dimensional posterior invariant (quadrature), within Monte Carlo error."""

import arviz as az
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from gpdsl import api
from gpdsl.errors import MethodError
from gpdsl.inference.families.latent_gp import latent_gp
from gpdsl.inference.mcmc.z_space import conditional, split, z_prior, ZPrior
from gpdsl.priors import PRIORS

X = np.array([0.0, 0.15, 0.4, 0.7, 1.0])
Y = np.array([0.3, 0.9, 0.2, -0.8, -0.1])
DATA = {"N": 5, "x": X, "y": Y}
KERNEL_MODEL = """
data { int N; vector[N] x; vector[N] y; }
parameters { real ell ~ scaled_sigmoid_normal(0.05, 2, 0.2, 1.2); }
model { f ~ gp(x, rbf(lengthscale = ell)); y ~ normal(f, 0.3); }
"""
NOISE_MODEL = """
data { int N; vector[N] x; vector[N] y; }
parameters { real s ~ scaled_sigmoid_normal(0, 1); }
model { f ~ gp(x, rbf(lengthscale = 0.3)); y ~ normal(f, s); }
"""


def test_scaled_sigmoid_normal_density_against_a_direct_computation():
    lower, upper, mu, sigma = 0.5, 3.0, 0.3, 1.5
    x = np.linspace(0.51, 2.99, 7)
    p = (x - lower) / (upper - lower)
    z = np.log(p / (1 - p))
    dx_dz = (upper - lower) * p * (1 - p)
    direct = stats.norm.logpdf(z, mu, sigma) - np.log(dx_dz)
    got = np.asarray(PRIORS["scaled_sigmoid_normal"].log_density(jnp.asarray(x), lower, upper, mu, sigma))
    np.testing.assert_allclose(got, direct, rtol=1e-12)
    draws = lower + (upper - lower) / (1 + np.exp(-np.random.default_rng(0).normal(mu, sigma, 200_000)))
    # the density integrates to one and matches a histogram of the generative definition (eq. 9)
    grid = np.linspace(lower + 1e-9, upper - 1e-9, 20001)
    density = np.exp(np.asarray(PRIORS["scaled_sigmoid_normal"].log_density(jnp.asarray(grid), lower, upper, mu, sigma)))
    assert abs(np.trapezoid(density, grid) - 1) < 1e-3
    counts, edges = np.histogram(draws, bins=10, range=(lower, upper))
    expected = [np.trapezoid(density[(grid >= a) & (grid <= b)], grid[(grid >= a) & (grid <= b)]) for a, b in
                zip(edges[:-1], edges[1:])]
    np.testing.assert_allclose(counts / draws.size, expected, atol=5 * np.sqrt(0.25 / draws.size) + 2e-4)


def test_the_unconstrained_coordinate_is_z_with_its_gaussian_prior():
    model, _ = api.check(KERNEL_MODEL)
    problem = latent_gp(model, DATA, marginalise=False)
    prior = z_prior(problem, "test")
    np.testing.assert_allclose(prior.mean, [0.2])
    np.testing.assert_allclose(prior.cov, [[1.2 ** 2]])
    for z in (-2.0, 0.0, 1.3):
        values = problem.theta_values(jnp.array([z]))
        assert float(values["ell"]) == pytest.approx(0.05 + 1.95 / (1 + np.exp(-z)), rel=1e-12)
        assert float(problem.log_prior(jnp.array([z]))) == pytest.approx(stats.norm.logpdf(z, 0.2, 1.2), rel=1e-12)
    assert split(problem).kappa.tolist() == [0] and split(problem).alpha.tolist() == []


def test_conditional_gaussian_of_one_block_given_the_other():
    cov = np.array([[2.0, 0.6, 0.3], [0.6, 1.0, 0.2], [0.3, 0.2, 1.5]])
    mean = np.array([0.1, -0.4, 1.0])
    theta = jnp.array([9.0, 0.5, 0.2])
    m, chol = conditional(ZPrior(jnp.asarray(mean), jnp.asarray(cov)), np.array([0]), theta)
    rest = [1, 2]
    gain = cov[0, rest] @ np.linalg.inv(cov[np.ix_(rest, rest)])
    assert float(m[0]) == pytest.approx(mean[0] + gain @ (np.array([0.5, 0.2]) - mean[rest]), rel=1e-12)
    assert float(chol[0, 0]) ** 2 == pytest.approx(cov[0, 0] - gain @ cov[rest, 0], rel=1e-12)


def test_a_prior_that_is_not_gaussian_in_z_is_refused():
    text = KERNEL_MODEL.replace("real ell ~ scaled_sigmoid_normal(0.05, 2, 0.2, 1.2)", "real<lower=0> ell ~ gamma(2, 2)")
    with pytest.raises(MethodError, match="Gaussian on the unconstrained scale; 'ell' has gamma"):
        api.sample(text, DATA, "gibbs", theta_update="sdss", chains=1, warmup=1, draws=1, seed=0)


def _quadrature(log_posterior):
    z = np.linspace(-9, 9, 4001)
    log_p = np.array([log_posterior(v) for v in z])
    weights = np.exp(log_p - log_p.max())
    weights /= weights.sum()
    mean = np.sum(weights * z)
    return mean, np.sum(weights * (z - mean) ** 2)


def _kernel_log_posterior(z):
    ell = 0.05 + 1.95 / (1 + np.exp(-z))
    K = np.exp(-0.5 * (X[:, None] - X[None]) ** 2 / ell ** 2) + 0.09 * np.eye(5)
    return stats.norm.logpdf(z, 0.2, 1.2) + stats.multivariate_normal(np.zeros(5), K).logpdf(Y)


def _noise_log_posterior(z):
    s = 1 / (1 + np.exp(-z))
    K = np.exp(-0.5 * (X[:, None] - X[None]) ** 2 / 0.3 ** 2) + s ** 2 * np.eye(5)
    return stats.norm.logpdf(z, 0.0, 1.5) + stats.multivariate_normal(np.zeros(5), K).logpdf(Y)


@pytest.mark.parametrize("model, name, bounds, log_posterior, update", [
    (KERNEL_MODEL, "ell", (0.05, 2.0), _kernel_log_posterior, "sdss"),
    (KERNEL_MODEL, "ell", (0.05, 2.0), _kernel_log_posterior, "fixed_nu"),
    (NOISE_MODEL, "s", (0.0, 1.0), _noise_log_posterior, "sdss"),
])
def test_leaves_the_exact_posterior_invariant(model, name, bounds, log_posterior, update):
    fit = api.sample(model, DATA, "gibbs", theta_update=update, surrogate_variance=0.09, chains=4, warmup=200,
                     draws=2000, seed=11)
    lower, upper = bounds
    p = (fit.posterior[name].values - lower) / (upper - lower)
    z = np.log(p / (1 - p))
    mean, variance = _quadrature(log_posterior)
    for values, exact in ((z, mean), ((z - mean) ** 2, variance)):
        mcse = float(az.mcse(az.convert_to_dataset(values[..., None].swapaxes(-1, -1)[..., 0]))["x"])
        assert abs(values.mean() - exact) < 4 * mcse, (update, values.mean(), exact, mcse)


JOINT_MODEL = """
data { int N; vector[N] x; vector[N] y; }
parameters { real ell ~ scaled_sigmoid_normal(0.05, 2, 0.2, 1.2); real s ~ scaled_sigmoid_normal(0, 1); }
model { f ~ gp(x, rbf(lengthscale = ell)); y ~ normal(f, s); }
"""


def test_kappa_and_alpha_together_against_two_dimensional_quadrature():
    grid = np.linspace(-6, 6, 241)
    ell = 0.05 + 1.95 / (1 + np.exp(-grid))
    s = 1 / (1 + np.exp(-grid))
    K = np.exp(-0.5 * (X[:, None] - X[None]) ** 2 / ell[:, None, None, None] ** 2) \
        + s[None, :, None, None] ** 2 * np.eye(5)
    _, log_det = np.linalg.slogdet(K)
    quadratic = np.einsum("i,abi->ab", Y, np.linalg.solve(K, np.broadcast_to(Y, K.shape[:-1])[..., None])[..., 0])
    log_p = (stats.norm.logpdf(grid, 0.2, 1.2)[:, None] + stats.norm.logpdf(grid, 0, 1.5)[None]
             - 0.5 * (log_det + quadratic))
    weights = np.exp(log_p - log_p.max())
    weights /= weights.sum()
    exact = {"ell": (0.05, 2.0, np.sum(weights.sum(1) * grid)), "s": (0.0, 1.0, np.sum(weights.sum(0) * grid))}
    fit = api.sample(JOINT_MODEL, DATA, "gibbs", theta_update="sdss", surrogate_variance=0.09, chains=4, warmup=200,
                     draws=2000, seed=12)
    for name, (lower, upper, mean) in exact.items():
        p = (fit.posterior[name].values - lower) / (upper - lower)
        z = np.log(p / (1 - p))
        assert abs(z.mean() - mean) < 4 * float(az.mcse(z)), (name, z.mean(), mean)
