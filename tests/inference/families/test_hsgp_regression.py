"""ml on a Hilbert-space approximate GP under a normal likelihood: the weights integrated out by the Woodbury
identity. Its objective equals SciPy's dense N(y | m, A A^T + s^2 I) log density, its predictive at new inputs the
dense Gaussian conditional of (f*, y) under that covariance, and the fit returns both at its estimate."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

import gpdsl
from gpdsl.api import check_text
from gpdsl.data.validation import validate_data
from gpdsl.errors import MethodError
from gpdsl.inference.families.hsgp_regression import hsgp_regression_view
from gpdsl.ir.families import HSGP_LATENT_GP, classify
from gpdsl.registry import methods

jax.config.update("jax_enable_x64", True)

NORMAL_HSGP = open("models/gp_hsgp.gpm").read().replace("array[N] int<lower=0> y;", "vector[N] y;").replace(
    "y ~ poisson_log(f);", "y ~ normal(f, noise);").replace(
    "real<lower=0> ell ~ inv_gamma(5, 5);", "real<lower=0> ell ~ inv_gamma(5, 5);\n  real<lower=0> noise ~ half_normal(1);")


def normal_data(n=50, seed=0):
    rng = np.random.default_rng(seed)
    t = np.sort(rng.uniform(0, 10, n))
    return {"N": n, "t": t, "y": 0.4 + np.sin(t) + 0.3 * rng.normal(size=n)}


def view(data):
    model = check_text(NORMAL_HSGP)[0]
    checked, _ = validate_data(model, data)
    return model, hsgp_regression_view(model, checked, classify(model).facts[HSGP_LATENT_GP])


def dense_pieces(problem, theta, X_new=None):
    A = np.asarray(problem.likelihood_map(theta))
    values = problem.theta_values(theta)
    mean, noise = float(values["mu"]), float(values["noise"]) ** 2
    if X_new is None:
        return A, mean, noise
    kernel = problem.jax_model.gp_kernel(problem.node.statement, problem.environment(theta))
    scale = np.sqrt(np.asarray(kernel.spectral_density(problem.basis.omega)))
    return A, mean, noise, problem.basis.at(X_new) * scale[None, :]


def test_the_objective_is_the_dense_normal_log_density():
    data = normal_data()
    _, problem = view(data)
    rng = np.random.default_rng(1)
    for _ in range(3):
        theta = jnp.asarray(rng.normal(scale=0.7, size=problem.theta_dim))
        A, mean, noise = dense_pieces(problem, theta)
        dense = stats.multivariate_normal(np.full(data["N"], mean), A @ A.T + noise * np.eye(data["N"]))
        assert float(problem.log_marginal(theta)) == pytest.approx(dense.logpdf(data["y"]), abs=1e-8)


def test_the_predictive_is_the_dense_gaussian_conditional():
    data = normal_data()
    _, problem = view(data)
    theta = jnp.asarray([0.3, np.log(0.8), np.log(1.2), np.log(0.35)])
    X_new = np.linspace(-1, 11, 7)[:, None]
    A, mean, noise, A_new = dense_pieces(problem, theta, X_new)
    C = A @ A.T + noise * np.eye(data["N"])
    gain = np.linalg.solve(C, A @ A_new.T).T
    expected_mean = mean + gain @ (data["y"] - mean)
    expected_cov = A_new @ A_new.T - gain @ A @ A_new.T
    f_mean, f_cov, noise_variance, offset = problem.predictive(theta, jnp.asarray(X_new), full=True)
    np.testing.assert_allclose(f_mean, expected_mean, atol=1e-8)
    np.testing.assert_allclose(f_cov, expected_cov, atol=1e-8)
    assert float(noise_variance) == pytest.approx(noise) and float(offset) == 0.0


@pytest.mark.slow
def test_ml_fits_the_hsgp_and_predicts_from_the_weights_posterior():
    data = normal_data()
    model, problem = view(data)
    X_new = np.linspace(0, 10, 4)
    results = gpdsl.fit(model, data, "ml", seed=1, new_inputs=X_new)
    estimate = {name: float(np.ravel(results.posterior[name].values)[0]) for name in problem.theta_names}
    theta = problem.unconstrain_theta({name: jnp.asarray(value) for name, value in estimate.items()})
    A, mean, noise, A_new = dense_pieces(problem, theta, X_new[:, None])
    C = A @ A.T + noise * np.eye(data["N"])
    dense = stats.multivariate_normal(np.full(data["N"], mean), C).logpdf(data["y"])
    assert float(np.ravel(results.sample_stats["log_marginal"].values)[0]) == pytest.approx(dense, abs=1e-6)
    gain = np.linalg.solve(C, A @ A_new.T).T
    f_variance = np.diag(A_new @ A_new.T - gain @ A @ A_new.T)
    np.testing.assert_allclose(results.predictions["y_mean"].values.ravel(), mean + gain @ (data["y"] - mean),
                               atol=1e-6)
    np.testing.assert_allclose(results.predictions["y_variance"].values.ravel(), f_variance + noise, atol=1e-6)
    # the estimate is a stationary point of the objective (marginal plus the hyperpriors)
    gradient = jax.grad(lambda t: problem.log_marginal(t) + problem.log_hyperprior(t))(theta)
    objective_gradient_at_softplus = np.abs(np.asarray(gradient)).max()
    assert objective_gradient_at_softplus < 1e-3


def test_ml_refuses_an_hsgp_under_another_likelihood_with_the_reason():
    model = check_text(open("models/gp_hsgp.gpm").read())[0]
    reason = methods()["ml"].refusal(model)
    assert "ml integrates out an HSGP's weights under a normal likelihood" in reason and "poisson_log" in reason
    assert methods()["ml"].refusal(check_text(NORMAL_HSGP)[0]) is None
    with pytest.raises(MethodError, match="under a normal likelihood"):
        gpdsl.fit(model, {"N": 3, "t": [0.0, 1.0, 2.0], "y": [1, 0, 2]}, "ml", seed=1)
