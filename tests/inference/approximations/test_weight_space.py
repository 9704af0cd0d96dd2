"""The Laplace approximation and EP over an HSGP's basis weights (z ~ N(0, I_M), likelihood on f = A z + offset)
against the dense Laplace approximation and parallel EP of the same model in f with covariance A A^T, and pm's
importance-sampling estimate of p(y | theta) built on them: its weights against SciPy's densities, its mean against
the marginal by quadrature."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from numpy.polynomial.hermite_e import hermegauss
from scipy import stats

from gpdsl.api import check_text
from gpdsl.data.validation import validate_data
from gpdsl.inference.approximations import weight_space
from gpdsl.inference.approximations.laplace import laplace
from gpdsl.inference.approximations.ep import ep
from gpdsl.inference.approximations.weight_space import ep_weights, laplace_weights, weights_from_sites
from gpdsl.inference.families.hsgp import hsgp_view
from gpdsl.inference.mcmc.pseudo_marginal import make_importance_estimator
from gpdsl.ir.families import HSGP_LATENT_GP, classify

jax.config.update("jax_enable_x64", True)

TIGHT = {"tol": 1e-20, "max_iter": 200}
TIGHT_EP = {"tol": 1e-22, "max_sweeps": 1000}


def hsgp_problem(m=40, n=30, likelihood="poisson_log", seed=0):
    text = open("models/gp_hsgp.gpm").read().replace("hsgp(m = 40", f"hsgp(m = {m}")
    if likelihood != "poisson_log":
        text = text.replace("array[N] int<lower=0> y;", "array[N] int<lower=0, upper=1> y;")
        text = text.replace("y ~ poisson_log(f);", f"y ~ {likelihood}(f);")
    model = check_text(text)[0]
    rng = np.random.default_rng(seed)
    t = np.sort(rng.uniform(0, 10, n))
    y = rng.poisson(np.exp(0.3 + np.sin(t))) if likelihood == "poisson_log" else \
        (rng.uniform(size=n) < 1 / (1 + np.exp(-2 * np.sin(t)))).astype(int)
    data, _ = validate_data(model, {"N": n, "t": t, "y": y})
    return hsgp_view(model, data, classify(model).facts[HSGP_LATENT_GP])


@pytest.mark.parametrize("likelihood", ["poisson_log", "bernoulli_logit"])
def test_laplace_of_the_weights_is_the_dense_laplace_with_covariance_a_a_transpose(likelihood):
    problem = hsgp_problem(likelihood=likelihood)
    theta = jnp.asarray([0.2, np.log(0.8), np.log(1.3)])
    A, offset = problem.likelihood_map(theta), problem.location_offset(theta)
    weights = laplace_weights(A, problem.y, likelihood, args=problem.likelihood_arguments(theta), offset=offset,
                              **TIGHT)
    N = A.shape[0]
    dense = laplace(A @ A.T + 1e-10 * jnp.eye(N), problem.y, likelihood, offset=offset, **TIGHT)
    assert bool(weights.converged) and bool(dense.converged)
    assert float(weights.log_marginal) == pytest.approx(float(dense.log_marginal), abs=1e-6)
    np.testing.assert_allclose(A @ weights.mean, dense.mean, atol=1e-6)
    np.testing.assert_allclose(weights.site_precision, dense.site_precision, atol=1e-6)
    log_det_weights = 2 * np.sum(np.log(np.diag(weights.chol_b)))
    log_det_dense = 2 * np.sum(np.log(np.diag(dense.chol_b)))
    assert log_det_weights == pytest.approx(log_det_dense, abs=1e-6)
    # the mode: the gradient of log p(y | A z + offset) - |z|^2 / 2 vanishes there
    log_lik = lambda z: problem.log_likelihood(z, theta)  # noqa: E731
    np.testing.assert_allclose(jax.grad(log_lik)(weights.mean) - weights.mean, 0.0, atol=1e-8)


def test_the_importance_weights_are_prior_over_q_by_scipy():
    problem = hsgp_problem(m=6)
    theta = jnp.asarray([0.1, np.log(0.9), np.log(1.5)])
    approx = laplace_weights(problem.likelihood_map(theta), problem.y, "poisson_log",
                             offset=problem.location_offset(theta))
    draws = weight_space.sample(approx, jax.random.PRNGKey(3), 5)
    precision = np.asarray(approx.chol_b @ approx.chol_b.T)
    q = stats.multivariate_normal(np.asarray(approx.mean), np.linalg.inv(precision))
    expected = stats.multivariate_normal(np.zeros(6), np.eye(6)).logpdf(draws) - q.logpdf(draws)
    np.testing.assert_allclose(weight_space.log_prior_minus_log_q(approx, draws), expected, rtol=1e-10)


def test_the_draws_have_the_laplace_covariance():
    problem = hsgp_problem(m=4)
    theta = jnp.asarray([0.1, np.log(0.9), np.log(1.5)])
    approx = laplace_weights(problem.likelihood_map(theta), problem.y, "poisson_log",
                             offset=problem.location_offset(theta))
    draws = np.asarray(weight_space.sample(approx, jax.random.PRNGKey(4), 200_000))
    covariance = np.linalg.inv(np.asarray(approx.chol_b @ approx.chol_b.T))
    np.testing.assert_allclose(draws.mean(axis=0), approx.mean, atol=5 * np.sqrt(np.diag(covariance).max() / 2e5))
    np.testing.assert_allclose(np.cov(draws.T), covariance, atol=0.02 * np.abs(covariance).max())


@pytest.mark.parametrize("approximation", ["laplace", "ep"])
def test_pm_estimate_is_unbiased_for_the_marginal_by_quadrature(approximation):
    # M = 2 weights: p(y | theta) = integral of p(y | A z + offset) N(z | 0, I) dz by 80 x 80 Gauss-Hermite nodes
    problem = hsgp_problem(m=2, n=12)
    theta = jnp.asarray([0.3, np.log(0.7), np.log(2.0)])
    A, offset = np.asarray(problem.likelihood_map(theta)), np.asarray(problem.location_offset(theta))
    nodes, weights = hermegauss(80)
    z1, z2 = np.meshgrid(nodes, nodes, indexing="ij")
    grid = np.stack([z1.ravel(), z2.ravel()], axis=1)
    log_lik = stats.poisson.logpmf(problem.y[None, :], np.exp(grid @ A.T + offset)).sum(axis=1)
    log_w = np.log(np.outer(weights, weights).ravel() / (2 * np.pi))
    exact = np.logaddexp.reduce(log_lik + log_w)
    estimate = make_importance_estimator(problem, approximation, num_importance=1)
    values = jax.vmap(lambda key: estimate(key, theta)[0])(jax.random.split(jax.random.PRNGKey(0), 4000))
    ratios = np.exp(np.asarray(values) - exact)
    assert abs(ratios.mean() - 1.0) <= 4 * ratios.std() / np.sqrt(ratios.size)
    assert ratios.std() > 0  # a real Monte Carlo estimate, not the exact value


@pytest.mark.parametrize("likelihood", ["poisson_log", "bernoulli_logit"])
def test_ep_of_the_weights_is_the_dense_parallel_ep_with_covariance_a_a_transpose(likelihood):
    problem = hsgp_problem(likelihood=likelihood)
    theta = jnp.asarray([0.2, np.log(0.8), np.log(1.3)])
    A, offset = problem.likelihood_map(theta), problem.location_offset(theta)
    weights = ep_weights(A, problem.y, likelihood, offset=offset, **TIGHT_EP)
    N = A.shape[0]
    dense = ep(A @ A.T + 1e-10 * jnp.eye(N), problem.y, schedule="parallel", likelihood=likelihood, offset=offset,
               **TIGHT_EP)
    assert bool(weights.converged) and bool(dense.converged)
    assert float(weights.log_marginal) == pytest.approx(float(dense.log_marginal), abs=1e-6)
    np.testing.assert_allclose(A @ weights.mean, dense.mean, atol=1e-6)
    np.testing.assert_allclose(weights.site_precision, dense.site_precision, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(weights.site_location, dense.site_location, rtol=1e-6, atol=1e-8)
    # fixed sites give back the same Gaussian of the weights without a sweep
    again = weights_from_sites(A, weights.site_precision, weights.site_location)
    np.testing.assert_allclose(again.mean, weights.mean, atol=1e-10)
    np.testing.assert_allclose(again.chol_b, weights.chol_b, atol=1e-10)


@pytest.mark.slow
def test_ep_ml_on_an_hsgp_maximises_the_weights_ep_marginal():
    import gpdsl

    problem = hsgp_problem(m=10, n=25)
    data = {"N": 25, "t": np.asarray(problem.jax_model.data["t"]), "y": np.asarray(problem.y, dtype=int)}
    results = gpdsl.sample(problem.jax_model.model, data, "ep-ml", starts=2, seed=3, new_inputs=data["t"][:4])
    estimate = {name: jnp.asarray(float(np.ravel(results.posterior[name].values)[0])) for name in problem.theta_names}
    theta = problem.unconstrain_theta(estimate)

    def log_marginal(t):
        return float(ep_weights(problem.likelihood_map(t), problem.y, "poisson_log",
                                offset=problem.location_offset(t)).log_marginal)

    best = log_marginal(theta)
    assert float(np.ravel(results.sample_stats["log_marginal"].values)[0]) == pytest.approx(best, abs=1e-8)
    for step in np.eye(problem.theta_dim) * 0.05:  # no coordinate step improves on the optimum
        assert log_marginal(theta + step) <= best + 1e-6 and log_marginal(theta - step) <= best + 1e-6
    assert results.predictions["f_new"].shape == (1, 1, 4)


@pytest.mark.slow
def test_mcmc_ep_on_an_hsgp_targets_the_weights_ep_marginal():
    import gpdsl

    problem = hsgp_problem(m=8, n=20)
    data = {"N": 20, "t": np.asarray(problem.jax_model.data["t"]), "y": np.asarray(problem.y, dtype=int)}
    results = gpdsl.sample(problem.jax_model.model, data, "mcmc-ep", chains=1, warmup=10, draws=15, tol=1e-14,
                           sample_latent=True, seed=2)
    posterior = results.posterior
    for draw in (0, 7, 14):
        theta = problem.unconstrain_theta({name: jnp.asarray(posterior[name].values[0, draw])
                                           for name in problem.theta_names})
        expected = ep_weights(problem.likelihood_map(theta), problem.y, "poisson_log", tol=1e-14, max_sweeps=1000,
                              offset=problem.location_offset(theta)).log_marginal
        assert float(results.sample_stats["log_marginal"].values[0, draw]) == pytest.approx(float(expected), abs=1e-6)
        z = jnp.asarray(posterior["f_z"].values[0, draw])
        np.testing.assert_allclose(posterior["f"].values[0, draw], problem.latent(theta, z), atol=1e-10)
    assert results.log_likelihood["y"].shape == (1, 15, 20)


def hsgp_2d_problem(likelihood, n=40, seed=3):
    text = open("models/gp_hsgp.gpm").read()
    text = text.replace("vector[N] t;", "matrix[N, 2] t;").replace("real<lower=0> ell", "vector<lower=0>[2] ell")
    text = text.replace("hsgp(m = 40", "hsgp(m = 6")
    if likelihood != "poisson_log":
        text = text.replace("array[N] int<lower=0> y;", "array[N] int<lower=0, upper=1> y;")
        text = text.replace("y ~ poisson_log(f);", f"y ~ {likelihood}(f);")
    model = check_text(text)[0]
    rng = np.random.default_rng(seed)
    t = rng.uniform(0, 5, size=(n, 2))
    rate = np.sin(t[:, 0]) * np.cos(t[:, 1])
    y = rng.poisson(np.exp(rate)) if likelihood == "poisson_log" else (rng.uniform(size=n) < 1 / (1 + np.exp(-rate)))
    data, _ = validate_data(model, {"N": n, "t": t, "y": y.astype(int)})
    return hsgp_view(model, data, classify(model).facts[HSGP_LATENT_GP])


@pytest.mark.parametrize("likelihood", ["poisson_log", "bernoulli_logit"])
def test_the_basis_map_gives_the_laplace_and_ep_of_the_matrix_in_two_dimensions(likelihood):
    problem = hsgp_2d_problem(likelihood)
    theta = jnp.asarray([0.1, np.log(0.9), np.log(1.4), np.log(0.7)])
    A, offset = problem.likelihood_map(theta), problem.location_offset(theta)
    operator = problem.likelihood_operator(theta)
    assert A.shape == (40, 36) and not isinstance(operator, jax.Array)
    for fit, settings in [(laplace_weights, TIGHT), (ep_weights, TIGHT_EP)]:
        plain = fit(A, problem.y, likelihood, offset=offset, **settings)
        mapped = fit(operator, problem.y, likelihood, offset=offset, **settings)
        assert bool(plain.converged) and bool(mapped.converged)
        assert float(mapped.log_marginal) == pytest.approx(float(plain.log_marginal), abs=1e-9)
        for field in ("mean", "site_precision", "site_location", "chol_b"):
            np.testing.assert_allclose(getattr(mapped, field), getattr(plain, field), rtol=1e-8, atol=1e-10)
    again = weights_from_sites(operator, plain.site_precision, plain.site_location)
    np.testing.assert_allclose(again.mean, plain.mean, atol=1e-10)


def test_newton_from_a_nearby_mode_reaches_the_same_laplace_approximation_in_fewer_steps():
    problem = hsgp_2d_problem("bernoulli_logit", n=60)
    theta = jnp.asarray([0.1, np.log(0.9), np.log(1.4), np.log(0.7)])
    near = theta + jnp.asarray([0.05, -0.05, 0.05, 0.0])
    fit = lambda t, start=None: laplace_weights(problem.likelihood_operator(t), problem.y,  # noqa: E731
                                                "bernoulli_logit", offset=problem.location_offset(t), start=start,
                                                tol=1e-14)
    cold, warm = fit(theta), fit(theta, start=fit(near).mean)
    assert bool(cold.converged) and bool(warm.converged) and int(warm.iterations) < int(cold.iterations)
    assert float(warm.log_marginal) == pytest.approx(float(cold.log_marginal), abs=1e-9)
    np.testing.assert_allclose(warm.mean, cold.mean, atol=1e-7)
