"""The Laplace proposal of the pseudo-marginal GPLVM estimate: the mixture's density and draws against direct
computations, and the mode search against a problem whose posterior mode is known."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.stats import multivariate_normal

from gpdsl.inference.mcmc.gplvm_laplace import LaplaceProposal, laplace_draws, laplace_log_density


def mixture(rng, K=3, Q=2, N=3):
    """A random mixture of K Gaussians over (Q, N) points, with its covariances."""
    modes = rng.normal(size=(K, Q, N))
    covariances, eigenvectors, precisions = [], [], []
    for _ in range(K):
        A = rng.normal(size=(Q * N, Q * N))
        precision = A @ A.T + np.eye(Q * N)
        values, vectors = np.linalg.eigh(precision)
        covariances.append(np.linalg.inv(precision))
        eigenvectors.append(vectors)
        precisions.append(values)
    log_weights = np.log(rng.dirichlet(np.ones(K)))
    proposal = LaplaceProposal(jnp.asarray(modes), jnp.asarray(np.stack(eigenvectors)), jnp.asarray(np.stack(precisions)),
                               jnp.zeros(K), jnp.asarray(log_weights), jnp.asarray(0))
    return proposal, modes, covariances, log_weights


def test_the_mixture_density_is_the_weighted_sum_of_gaussians():
    rng = np.random.default_rng(0)
    proposal, modes, covariances, log_weights = mixture(rng)
    points = rng.normal(size=(5, 2, 3))
    expected = [np.log(sum(np.exp(w) * multivariate_normal(m.reshape(-1), c).pdf(p.reshape(-1))
                           for m, c, w in zip(modes, covariances, log_weights))) for p in points]
    assert np.allclose(np.asarray(laplace_log_density(proposal, jnp.asarray(points))), expected, atol=1e-10)


def test_draws_pick_components_by_weight_and_have_their_moments():
    rng = np.random.default_rng(1)
    proposal, modes, covariances, log_weights = mixture(rng, K=2)
    S = 40000
    normals = jax.random.normal(jax.random.PRNGKey(0), (S, 2, 3))
    uniforms = jax.random.uniform(jax.random.PRNGKey(1), (S,))
    draws = np.asarray(laplace_draws(proposal, normals, uniforms)).reshape(S, -1)
    first = np.asarray(uniforms) < np.exp(log_weights[0])
    for component, chosen in ((0, first), (1, ~first)):
        picked = draws[chosen]
        standard_error = np.sqrt(np.diag(covariances[component]) / chosen.sum())
        assert np.all(np.abs(picked.mean(0) - modes[component].reshape(-1)) < 4 * standard_error)
        assert np.allclose(np.cov(picked.T), covariances[component], atol=0.05 * np.abs(covariances[component]).max())


@pytest.mark.parametrize("weights", [(1.0, 0.0), (0.3, 0.7)])
def test_uniform_edges_stay_inside_the_mixture(weights):
    rng = np.random.default_rng(2)
    proposal, _, _, _ = mixture(rng, K=2)
    proposal = proposal._replace(log_weights=jnp.log(jnp.asarray(weights)))
    draws = laplace_draws(proposal, jnp.zeros((3, 2, 3)), jnp.asarray([0.0, 0.5, 1.0]))
    assert np.all(np.isfinite(np.asarray(draws)))


CLOSED_FORM_MODEL = """
data { int N; int Q; int D; matrix[N, 1] X; matrix[N, D] Y; }
parameters { real<lower=0> s1 ~ gamma(4, 8); real<lower=0> ell ~ gamma(2, 2); }
latent { matrix[N, Q] Z; }
model {
  Z ~ gp(X, rbf(variance = 1, inv_ls2 = s1) + white(1e-6));
  F ~ gp(Z, KERNEL);
  Y ~ normal(F, 0.3);
}
"""


@pytest.mark.parametrize("kernel", ["rbf(variance = 1.3, lengthscale = ell)", "matern32(lengthscale = ell)",
                                    "linear(variance = 0.5) + rbf(lengthscale = ell)",
                                    "matern52(lengthscale = ell) + white(0.1)"])
def test_the_closed_form_hessian_equals_automatic_differentiation(kernel):
    from gpdsl.api import load_model
    from gpdsl.data.io import load_data
    from gpdsl.inference.families.gplvm import gplvm_problem
    from gpdsl.inference.mcmc.gplvm_laplace import prior_factor, whitened_log_posterior, whitened_negative_hessian

    rng = np.random.default_rng(4)
    N, Q, D = 7, 2, 3
    model = load_model(CLOSED_FORM_MODEL.replace("KERNEL", kernel))
    values, _ = load_data({"N": N, "Q": Q, "D": D, "X": np.linspace(0.0, 1.0, N)[:, None],
                           "Y": rng.normal(size=(N, D))}, model)
    problem = gplvm_problem(model, values)
    theta = jnp.asarray([0.2, -0.3])
    L_p = prior_factor(problem, theta)
    v = jnp.asarray(rng.normal(size=(Q, N)))
    expected = jax.hessian(lambda flat: -whitened_log_posterior(problem, theta, L_p, flat.reshape(Q, N)))(v.ravel())
    np.testing.assert_allclose(whitened_negative_hessian(problem, theta, L_p, v), expected, rtol=1e-9, atol=1e-10)


def test_a_looser_gradient_tolerance_stops_the_searches_sooner_at_nearly_the_same_modes():
    from gpdsl.api import load_model
    from gpdsl.data.io import load_data
    from gpdsl.inference.families.gplvm import gplvm_problem
    from gpdsl.inference.mcmc.gplvm_laplace import make_laplace
    from gpdsl.settings.fields import SettingError
    from gpdsl.settings.sampling import PMGPLVMSettings

    rng = np.random.default_rng(6)
    N, Q, D = 12, 1, 3
    model = load_model(CLOSED_FORM_MODEL.replace("KERNEL", "rbf(variance = 1.3, lengthscale = ell)"))
    values, _ = load_data({"N": N, "Q": Q, "D": D, "X": np.linspace(0.0, 1.0, N)[:, None],
                           "Y": rng.normal(size=(N, D))}, model)
    problem = gplvm_problem(model, values)
    theta = jnp.asarray([0.2, -0.3])
    start = rng.normal(size=(N, Q))
    tight = make_laplace(problem, start, starts=2, gtol=1e-8)(theta)
    loose = make_laplace(problem, start, starts=2, gtol=1e-2)(theta)
    assert int(loose.iterations) < int(tight.iterations)
    # the whitened curvature is at least 1, so a gradient below 1e-2 puts each mode within 1e-2 sqrt(N Q) of the tight one
    assert np.max(np.abs(np.asarray(loose.mode) - np.asarray(tight.mode))) < 1e-2 * np.sqrt(N * Q)
    np.testing.assert_allclose(loose.log_evidence, tight.log_evidence, atol=1e-2)
    with pytest.raises(SettingError, match="laplace_gtol"):
        PMGPLVMSettings(laplace_gtol=0.0)
