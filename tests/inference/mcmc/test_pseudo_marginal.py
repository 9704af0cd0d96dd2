"""Pseudo-marginal MH against exact answers: the estimator is unbiased, the chain targets p(theta | y).

With n = 10 probit observations the exact marginal likelihood is an orthant probability of a
10-dimensional normal (y_i = 1 iff f_i + e_i > 0), computed by scipy's Genz algorithm; quadrature over
log tau then gives the exact posterior of the single hyperparameter.
"""

import arviz as az
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from gpdsl.api import check_text
from gpdsl.errors import MethodError
from gpdsl.inference.approximations.ep import ep
from gpdsl.inference.driver import run_chains
from gpdsl.inference.families.latent_gp import latent_gp
from gpdsl.inference.mcmc.pseudo_marginal import (
    make_importance_estimator,
    make_pseudo_marginal,
    proposal_covariance_of,
)

ONE_HYPERPARAMETER = """
data { int N; int D; matrix[N, D] X; array[N] int<lower=0, upper=1> y; }
parameters { real<lower=0> tau ~ gamma(1, 1 / sqrt(D)); }
model { f ~ gp(X, 2.08 * rbf(lengthscale = tau)); y ~ bernoulli_probit(f); }
"""
N = 10


@pytest.fixture(scope="module")
def problem():
    model, _ = check_text(ONE_HYPERPARAMETER)
    rng = np.random.default_rng(0)
    X = rng.uniform(size=(N, 2))
    y = (X[:, 0] > 0.5).astype(int)
    return latent_gp(model, {"N": N, "D": 2, "X": X, "y": y})


def exact_log_marginal(problem, log_tau):
    X, s = problem.jax_model.data["X"], 2 * problem.y - 1
    K = 2.08 * np.exp(-0.5 * (((X[:, None] - X[None]) / np.exp(log_tau)) ** 2).sum(-1)) + 1e-8 * np.eye(N)
    cov = (K + np.eye(N)) * np.outer(s, s)
    # relative error 1e-4 (the posterior mean and quantile below move by < 1e-5; 1e-6 took 4x as long)
    return np.log(stats.multivariate_normal.cdf(np.zeros(N), mean=np.zeros(N), cov=cov, abseps=1e-12,
                                                releps=1e-4, maxpts=100_000))


@pytest.fixture(scope="module")
def exact_posterior(problem):
    """Grid over log tau with normalised exact posterior weights."""
    grid = np.linspace(-5, 3, 161)
    log_post = np.array([exact_log_marginal(problem, g) + stats.gamma.logpdf(np.exp(g), 1, scale=np.sqrt(2)) + g
                         for g in grid])
    weights = np.exp(log_post - log_post.max())
    return grid, weights / weights.sum()


@pytest.mark.parametrize("approximation", ["ep", "laplace"])
def test_importance_estimate_is_unbiased(problem, approximation):
    estimate = jax.jit(jax.vmap(make_importance_estimator(problem, approximation, num_importance=1),
                                in_axes=(0, None)))
    theta = jnp.asarray([np.log(0.6)])
    log_p_hat = np.asarray(estimate(jax.random.split(jax.random.PRNGKey(0), 4000), theta)[0])
    exact = np.exp(exact_log_marginal(problem, np.log(0.6)))
    ratio = np.exp(log_p_hat) / exact
    assert abs(ratio.mean() - 1) < 4 * ratio.std() / np.sqrt(ratio.size)


@pytest.mark.parametrize("frozen", [False, True])
def test_warm_started_estimate_is_unbiased(problem, frozen):
    """EP started from (or, frozen, q made of) the sites of a fit at another theta: the estimate stays unbiased."""
    reference = ep(problem.covariance(jnp.asarray([np.log(2.0)])), problem.y, schedule="parallel")
    sites = jnp.stack([reference.site_precision, reference.site_location])
    estimate = jax.jit(jax.vmap(make_importance_estimator(problem, "ep", num_importance=1),
                                in_axes=(0, None, None, None)))
    theta = jnp.asarray([np.log(0.6)])
    log_p_hat = np.asarray(estimate(jax.random.split(jax.random.PRNGKey(10), 4000), theta, sites,
                                    jnp.asarray(frozen))[0])
    ratio = np.exp(log_p_hat) / np.exp(exact_log_marginal(problem, np.log(0.6)))
    assert abs(ratio.mean() - 1) < 4 * ratio.std() / np.sqrt(ratio.size)


@pytest.mark.parametrize("schedule", ["parallel", "sequential"])
def test_warm_started_ep_reaches_the_cold_fixed_point_in_fewer_sweeps(problem, schedule):
    tight = {"tol": 1e-14, "max_sweeps": 200, "schedule": schedule}
    K = problem.covariance(jnp.asarray([np.log(0.6)]))
    cold = ep(K, problem.y, **tight)
    nearby = ep(problem.covariance(jnp.asarray([np.log(0.7)])), problem.y, **tight)
    warm = ep(K, problem.y, initial_sites=(nearby.site_precision, nearby.site_location), **tight)
    np.testing.assert_allclose(warm.mean, cold.mean, atol=1e-6)
    np.testing.assert_allclose(warm.site_precision, cold.site_precision, atol=1e-5)
    assert float(warm.log_marginal) == pytest.approx(float(cold.log_marginal), abs=1e-8)
    sites = (nearby.site_precision, nearby.site_location)
    default_tol = {"schedule": schedule}
    assert int(ep(K, problem.y, initial_sites=sites, **default_tol).iterations) < int(
        ep(K, problem.y, **default_tol).iterations)
    at_fixed_point = ep(K, problem.y, initial_sites=(cold.site_precision, cold.site_location), schedule=schedule)
    assert int(at_fixed_point.iterations) == 1 and bool(at_fixed_point.converged)
    start_ops = {"parallel": 2, "sequential": 3}[schedule]
    per_sweep = {"parallel": 2, "sequential": 5}[schedule]
    expected = per_sweep * int(warm.iterations) - (schedule == "parallel") + start_ops
    assert int(warm.cubic_ops) == expected


def test_reference_sites_move_in_warmup_and_are_frozen_after(problem):
    init, step = make_pseudo_marginal(problem, "ep", 4)
    states = jax.vmap(init)(jax.random.split(jax.random.PRNGKey(11), 2), jnp.zeros((2, 1)))
    result = run_chains(step, states, jax.random.PRNGKey(12), 100, 200, extract=lambda s: s.reference_sites,
                        progress=False, segment_size=100, keep_warmup=True)
    warmup, sampling = np.asarray(result.warmup_draws), np.asarray(result.draws)
    assert np.ptp(warmup, axis=1).max() > 0
    assert np.ptp(sampling, axis=1).max() == 0
    np.testing.assert_array_equal(sampling[:, 0], warmup[:, -1])


def test_the_selected_f_moves_only_with_its_estimate(problem):
    init, step = make_pseudo_marginal(problem, "ep", 8, sample_latent=True, refresh_steps=0)
    states = jax.vmap(init)(jax.random.split(jax.random.PRNGKey(13), 2), jnp.zeros((2, 1)))
    result = run_chains(step, states, jax.random.PRNGKey(14), 0, 200, progress=False, segment_size=200,
                        extract=lambda s: {"f": s.f, "selected": s.selection.f, "loglik": s.loglik_f,
                                           "theta": s.theta})
    f, selected = np.asarray(result.draws["f"]), np.asarray(result.draws["selected"])
    np.testing.assert_array_equal(f, selected)
    accepted = np.asarray(result.infos.accepted)
    assert 0 < accepted.mean() < 1
    moved = np.any(selected[:, 1:] != selected[:, :-1], axis=-1)
    np.testing.assert_array_equal(moved, accepted[:, 1:])
    loglik = jax.vmap(jax.vmap(problem.log_likelihood))(jnp.asarray(f), jnp.asarray(result.draws["theta"]))
    np.testing.assert_allclose(np.asarray(result.draws["loglik"]), np.asarray(loglik), rtol=1e-10)


def test_the_refreshed_f_is_recorded_but_not_fed_back(problem):
    init, step = make_pseudo_marginal(problem, "laplace", 4, sample_latent=True)
    states = jax.vmap(init)(jax.random.split(jax.random.PRNGKey(15), 2), jnp.zeros((2, 1)))
    result = run_chains(step, states, jax.random.PRNGKey(16), 0, 200, progress=False, segment_size=200,
                        extract=lambda s: {"f": s.f, "selected": s.selection.f})
    f, selected = np.asarray(result.draws["f"]), np.asarray(result.draws["selected"])
    assert np.all(np.any(f != selected, axis=-1))
    rejected = ~np.asarray(result.infos.accepted)[:, 1:]
    np.testing.assert_array_equal(selected[:, 1:][rejected], selected[:, :-1][rejected])
    assert np.all(np.any(f[:, 1:][rejected] != f[:, :-1][rejected], axis=-1))


@pytest.mark.parametrize("approximation, num_importance, ep_start",
                         [pytest.param("ep", 16, "reference", marks=pytest.mark.slow), ("ep", 16, "frozen"),
                          ("ep", 16, "zero"), ("laplace", 1, "reference")])
def test_chain_matches_quadrature_posterior(problem, exact_posterior, approximation, num_importance, ep_start):
    init, step = make_pseudo_marginal(problem, approximation, num_importance, ep_start=ep_start)
    chains = 4
    states = jax.vmap(init)(jax.random.split(jax.random.PRNGKey(1), chains), jnp.zeros((chains, 1)))
    result = run_chains(step, states, jax.random.PRNGKey(2), 1000, 4000, extract=lambda s: s.theta,
                        progress=False, segment_size=1000)
    log_tau = np.asarray(result.draws)[..., 0]

    grid, weights = exact_posterior
    exact_mean = (weights * grid).sum()
    exact_below = weights[grid < exact_mean].sum()

    mcse = float(az.mcse(log_tau))
    assert abs(log_tau.mean() - exact_mean) < 4 * mcse
    below = (log_tau < exact_mean).astype(float)
    assert abs(below.mean() - exact_below) < 4 * float(az.mcse(below))
    assert float(az.rhat(log_tau)) < 1.01
    scales = np.asarray(result.final_state.log_scale)
    assert np.all(np.isfinite(scales))
    assert 0.1 < np.asarray(result.infos.acceptance_rate).mean() < 0.5


def test_fixed_proposal_is_kept_and_the_chain_still_targets_the_posterior(problem, exact_posterior):
    covariance = np.array([[0.8]])
    init, step = make_pseudo_marginal(problem, "laplace", 1, proposal_covariance=covariance)
    chains = 4
    states = jax.vmap(init)(jax.random.split(jax.random.PRNGKey(5), chains), jnp.zeros((chains, 1)))
    result = run_chains(step, states, jax.random.PRNGKey(6), 300, 4000, extract=lambda s: s.theta,
                        progress=False, segment_size=1000)
    np.testing.assert_allclose(proposal_covariance_of(result.final_state), np.broadcast_to(covariance, (4, 1, 1)))
    log_tau = np.asarray(result.draws)[..., 0]
    grid, weights = exact_posterior
    exact_mean = (weights * grid).sum()
    assert abs(log_tau.mean() - exact_mean) < 4 * float(az.mcse(log_tau))


@pytest.mark.parametrize("covariance", [[[1.0, 0.0]], [[-1.0]], [[np.nan]]])
def test_bad_fixed_proposal_is_refused(problem, covariance):
    with pytest.raises(MethodError, match="proposal covariance"):
        make_pseudo_marginal(problem, "laplace", 1, proposal_covariance=covariance)


def test_scale_is_frozen_after_warmup(problem):
    init, step = make_pseudo_marginal(problem, "laplace", 1)
    states = jax.vmap(init)(jax.random.split(jax.random.PRNGKey(3), 2), jnp.zeros((2, 1)))
    result = run_chains(step, states, jax.random.PRNGKey(4), 50, 50, extract=lambda s: s.log_scale,
                        progress=False, segment_size=50, keep_warmup=True)
    warmup, sampling = np.asarray(result.warmup_draws), np.asarray(result.draws)
    assert np.ptp(warmup, axis=1).min() > 0
    assert np.ptp(sampling, axis=1).max() == 0


def test_a_rejected_proposal_keeps_the_current_estimate(problem):
    init, step = make_pseudo_marginal(problem, "ep", 1)
    states = jax.vmap(init)(jax.random.split(jax.random.PRNGKey(7), 2), jnp.zeros((2, 1)))
    result = run_chains(step, states, jax.random.PRNGKey(8), 0, 200, progress=False, segment_size=200,
                        extract=lambda s: {"theta": s.theta, "log_marginal": s.log_marginal})
    theta, estimate = np.asarray(result.draws["theta"]), np.asarray(result.draws["log_marginal"])
    accepted = np.asarray(result.infos.accepted)
    assert 0 < accepted.mean() < 1
    rejected = ~accepted[:, 1:]
    np.testing.assert_array_equal(estimate[:, 1:][rejected], estimate[:, :-1][rejected])
    np.testing.assert_array_equal(theta[:, 1:][rejected], theta[:, :-1][rejected])
    np.testing.assert_array_equal(estimate[accepted], np.asarray(result.infos.proposed_log_marginal)[accepted])


def test_ep_takes_logit_by_quadrature_tilted_moments(problem):
    model, _ = check_text(ONE_HYPERPARAMETER.replace("bernoulli_probit", "bernoulli_logit"))
    logit = latent_gp(model, {"N": 3, "D": 2, "X": np.zeros((3, 2)), "y": np.array([0, 1, 1])})
    init, _ = make_pseudo_marginal(logit, "ep", 1)
    state = init(jax.random.PRNGKey(3), jnp.zeros(1))
    assert np.isfinite(float(state.log_marginal))
