"""Forward simulation: prior draws have the prior's moments, restricted to declared bounds; GP values have the
kernel's covariance."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from gpdsl.api import check_file, check_text
from gpdsl.backends.jax.lowering import lower
from gpdsl.backends.jax.simulate import simulate
from gpdsl.backends.jax.truncated_draws import draw_within
from gpdsl.priors import PRIORS


def test_classification_simulation_moments():
    model, _ = check_file("models/gp_classification.gpm")
    X = np.array([[0.1, 0.2], [0.5, 0.5], [0.9, 0.1]])
    jm = lower(model, {"N": 3, "D": 2, "X": X, "y": np.zeros(3, int)})
    draws = [simulate(jm, key, fixed={"sigma": 2.0, "tau": np.array([0.4, 0.7])})
             for key in jax.random.split(jax.random.PRNGKey(0), 400)]
    f = np.array([np.asarray(truth["f"]) for truth, _ in draws])
    y = np.array([np.asarray(observed["y"]) for _, observed in draws])
    K = 2.0 * np.exp(-0.5 * (((X[:, None] - X[None]) / np.array([0.4, 0.7])) ** 2).sum(-1))
    se = np.sqrt(K.diagonal() ** 2 * 2 / len(f))
    np.testing.assert_array_less(np.abs(f.var(axis=0) - K.diagonal()), 4 * se)
    assert set(np.unique(y)) <= {0, 1}
    # P(y = 1) = E[Phi(f)] = 1/2 for a zero-mean GP; the mean over correlated rows has sd <= 1/2/sqrt(reps)
    assert abs(y.mean() - 0.5) < 4 * np.sqrt(0.25 / len(y))


def test_prior_draws_match_prior_mean():
    model, _ = check_file("models/gp_classification.gpm")
    jm = lower(model, {"N": 2, "D": 1, "X": np.zeros((2, 1)) + [[0.0], [1.0]], "y": np.zeros(2, int)})
    sigma = np.array([float(simulate(jm, key)[0]["sigma"]) for key in jax.random.split(jax.random.PRNGKey(1), 400)])
    mean, sd = 1.2 / 0.2, np.sqrt(1.2) / 0.2
    assert abs(sigma.mean() - mean) < 4 * sd / np.sqrt(sigma.size)


@pytest.mark.parametrize("name, data, shapes", [
    ("sequential_latent_gp", {"T": 3, "N": 4, "t": np.arange(3.0), "X": np.random.default_rng(0).normal(size=(3, 4, 2)),
                              "y": np.zeros((3, 4))}, {"f": (3, 4), "y": (3, 4)}),
    ("deep_mahalanobis_gp", {"N": 5, "D": 3, "Q": 2, "X": np.random.default_rng(1).normal(size=(5, 3)),
                             "y": np.zeros(5)}, {"W": (2, 5, 3), "y": (5,)}),
])
def test_simulation_shapes_and_determinism(name, data, shapes):
    model, _ = check_file(f"models/{name}.gpm")
    jm = lower(model, data)
    truth, observed = simulate(jm, jax.random.PRNGKey(3))
    again, _ = simulate(jm, jax.random.PRNGKey(3))
    values = {**truth, **observed}
    for var, shape in shapes.items():
        assert np.shape(values[var]) == shape
    for var in truth:
        np.testing.assert_array_equal(np.asarray(truth[var]), np.asarray(again[var]))


HALF_PRIORS = """
data { int N; matrix[N, 1] X; array[N] int<lower=0, upper=1> y; }
parameters { real<lower=0> alpha ~ normal(0, 2); vector<lower=0.5, upper=3>[2] ell ~ student_t(3, 0, 1); }
model { f ~ gp(X, alpha * rbf(lengthscale = ell[1])); y ~ bernoulli_probit(f); }
"""


def test_simulated_bounded_parameters_follow_the_restricted_prior():
    model, _ = check_text(HALF_PRIORS)
    jm = lower(model, {"N": 2, "X": np.array([[0.0], [1.0]]), "y": np.zeros(2, int)})
    draws = jax.jit(jax.vmap(lambda key: simulate(jm, key, observe=False)[0]))(jax.random.split(jax.random.key(2), 2000))
    alpha, ell = np.asarray(draws["alpha"]), np.asarray(draws["ell"])
    assert np.all(alpha > 0) and np.all((ell > 0.5) & (ell < 3))
    assert stats.kstest(alpha, stats.halfnorm(scale=2).cdf).pvalue > 1e-3
    t = stats.t(3)
    assert stats.kstest(ell.ravel(), lambda x: (t.cdf(x) - t.cdf(0.5)) / (t.cdf(3) - t.cdf(0.5))).pvalue > 1e-3


def test_a_prior_without_cdf_is_drawn_by_rejection():
    normal = dataclasses.replace(PRIORS["normal"], cdf=None)
    draws = np.asarray(draw_within(normal, jax.random.key(3), (4000,), (jnp.asarray(0.0), jnp.asarray(1.0)), 0.5, None))
    assert np.all(draws > 0.5)
    assert stats.kstest(draws, stats.truncnorm(0.5, np.inf).cdf).pvalue > 1e-3


@pytest.mark.parametrize("prior", [PRIORS["normal"], dataclasses.replace(PRIORS["normal"], cdf=None)])
def test_bounds_without_mass_give_stan_default_initial_values(prior):
    """normal(0, 1) above 40: no mass in floating point, nor a draw inside; Stan's default is 40 + exp(U(-2, 2))."""
    draws = np.asarray(draw_within(prior, jax.random.key(4), (500,), (jnp.asarray(0.0), jnp.asarray(1.0)), 40.0, None))
    assert np.all(np.isfinite(draws)) and np.all(draws > 40.0 + np.exp(-2)) and np.all(draws < 40.0 + np.exp(2))
    assert np.unique(draws).size == 500
