"""The latent-GP view engines use: covariance, prior, likelihood, and refusals."""

import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from gpdsl.api import check_file
from gpdsl.errors import MethodError
from gpdsl.inference.families.latent_gp import latent_gp
from gpdsl.numerics import GP_JITTER


def test_classification_view():
    model, _ = check_file("models/gp_classification.gpm")
    rng = np.random.default_rng(0)
    X, y = rng.uniform(size=(9, 2)), rng.integers(0, 2, 9)
    problem = latent_gp(model, {"N": 9, "D": 2, "X": X, "y": y})
    assert problem.theta_names == ["sigma", "tau"] and problem.theta_dim == 3 and problem.n == 9
    theta = jnp.asarray([0.3, -0.2, 0.4])
    sigma, tau = np.exp(0.3), np.exp([-0.2, 0.4])
    K = sigma * np.exp(-0.5 * (((X[:, None] - X[None]) / tau) ** 2).sum(-1)) + GP_JITTER * np.eye(9)
    np.testing.assert_allclose(problem.covariance(theta), K, rtol=1e-12)
    prior = stats.gamma.logpdf(sigma, 1.2, scale=5) + stats.gamma.logpdf(tau, 1, scale=np.sqrt(2)).sum() + 0.3 + 0.2
    assert float(problem.log_prior(theta)) == pytest.approx(prior, rel=1e-12)
    f = rng.normal(size=9)
    assert float(problem.log_likelihood(jnp.asarray(f), theta)) == pytest.approx(
        stats.norm.logcdf((2 * y - 1) * f).sum(), rel=1e-12)
    values = problem.theta_values(theta)
    np.testing.assert_allclose(problem.unconstrain_theta(values), theta, rtol=1e-12)


def test_gaussian_likelihood_kept_when_not_marginalised():
    model, _ = check_file("models/gp_regression.gpm")
    rng = np.random.default_rng(1)
    data = {"N": 5, "D": 2, "X": rng.normal(size=(5, 2)), "y": rng.normal(size=5)}
    with pytest.raises(MethodError, match="integrated out"):
        latent_gp(model, data, "ESS")
    problem = latent_gp(model, data, "ESS", marginalise=False)
    assert problem.likelihood == "normal"


@pytest.mark.parametrize("name, message", [
    ("supervised_gplvm", "'Z' is matrix"),
    ("bayesian_gplvm", "none"),
])
def test_refusals_say_what_is_needed(name, message):
    model, _ = check_file(f"models/{name}.gpm")
    rng = np.random.default_rng(2)
    data = {"N": 4, "D": 2, "Q": 1, "X": rng.normal(size=(4, 1)), "Y": rng.normal(size=(4, 2))}
    with pytest.raises(MethodError, match=message) as error:
        latent_gp(model, data, "pseudo-marginal MCMC")
    assert "needs a model with one latent GP vector" in str(error.value)
