"""Predictions at new inputs of multiclass GP classification, ``y ~ categorical_logit(f)`` with ``matrix[N, K] f``.

At fixed ``(theta, f)`` each column of ``f*`` has the GP conditional of that column computed in NumPy; at fixed
``theta`` the multiclass Laplace predictive equals the Gaussian ``q(f | y) = N(f_hat, (K^-1 + W)^-1)`` pushed
through the GP conditional in NumPy (with ``f_hat`` checked to be the mode: ``K^-1 f_hat = onehot(y) - pi``).
Draws of ``f*`` have those moments, ``y_prob`` is the softmax of each drawn row, and a gibbs and a pm run through
:func:`gpdsl.run` write the predictions group with dims ``(chain, draw, N_new, K)``. The slow tier compares the
class probabilities at new inputs of gibbs, pm with ``--sample-latent`` and NUTS
(``tests/inference/methods/test_categorical_vs_nuts.py``).
"""

import jax
import numpy as np
import pytest
from scipy.linalg import block_diag
from scipy.special import softmax

from gpdsl.api import check_file, run
from gpdsl.inference.families.latent_gp import latent_gp
from gpdsl.inference.predict.multiclass import (column_conditional_moments, column_laplace_moments,
                                                multiclass_new_draws)
from gpdsl.numerics import GP_JITTER
from gpdsl.registry import get_method
from gpdsl.results.arviz_compat import groups
from gpdsl.settings import GibbsSettings, PseudoMarginalSettings
from tests.inference.methods.test_categorical_vs_nuts import MODEL, three_class_data

X_NEW = np.array([[-1.8], [-0.3], [0.4], [2.5]])


@pytest.fixture(scope="module")
def problem():
    model, _ = check_file(MODEL)
    return latent_gp(model, three_class_data(N=8))


def rbf(sigma, ell, A, B):
    return sigma * np.exp(-0.5 * (A[:, None, 0] - B[None, :, 0]) ** 2 / ell ** 2)


def reference_covariances(problem, theta):
    values = problem.theta_values(theta)
    sigma, ell = float(values["sigma"]), float(values["ell"])
    X = np.asarray(problem.jax_model.data["X"])
    K = rbf(sigma, ell, X, X) + GP_JITTER * np.eye(len(X))
    return K, rbf(sigma, ell, X, X_NEW), rbf(sigma, ell, X_NEW, X_NEW)


THETA = np.log([1.3, 0.7])


def test_each_column_has_the_gp_conditional_of_its_column_of_f(problem):
    K, K_star, K_new = reference_covariances(problem, THETA)
    f = np.random.default_rng(0).normal(size=(8, 3))
    expected_mean = K_star.T @ np.linalg.solve(K, f)
    expected_covariance = K_new - K_star.T @ np.linalg.solve(K, K_star)
    mean, covariance = column_conditional_moments(problem, THETA, f.ravel(), X_NEW, full=True)
    np.testing.assert_allclose(mean, expected_mean, atol=1e-7)
    np.testing.assert_allclose(covariance, expected_covariance, atol=1e-7)
    mean, variances = column_conditional_moments(problem, THETA, f.ravel(), X_NEW)
    np.testing.assert_allclose(variances, np.diag(expected_covariance), atol=1e-7)


def test_the_laplace_predictive_is_the_gaussian_approximation_through_the_gp_conditional(problem):
    from gpdsl.inference.approximations.multiclass_laplace import multiclass_laplace

    K, K_star, K_new = reference_covariances(problem, THETA)
    K_rows, eye = np.kron(K, np.eye(3)), np.eye(3)
    approx = multiclass_laplace(K_rows, problem.y, 3, tol=1e-12)
    f_hat = np.asarray(approx.mean)
    pi = softmax(f_hat.reshape(8, 3), axis=-1)
    onehot = np.eye(3)[np.asarray(problem.y, dtype=int) - 1]
    np.testing.assert_allclose(np.linalg.solve(K_rows, f_hat), (onehot - pi).ravel(), atol=1e-5)
    W = block_diag(*[np.diag(p) - np.outer(p, p) for p in pi])
    sigma = np.linalg.inv(np.linalg.inv(K_rows) + W)
    K_star_rows, K_new_rows = np.kron(K_star, eye), np.kron(K_new, eye)
    projection = np.linalg.solve(K_rows, K_star_rows)
    expected_mean = projection.T @ f_hat
    expected_covariance = K_new_rows - K_star_rows.T @ projection + projection.T @ sigma @ projection
    mean, covariance = column_laplace_moments(problem, THETA, X_NEW, tol=1e-12, full=True)
    np.testing.assert_allclose(mean, expected_mean.reshape(4, 3), atol=1e-5)
    np.testing.assert_allclose(covariance, expected_covariance, atol=1e-6)
    mean, per_point = column_laplace_moments(problem, THETA, X_NEW, tol=1e-12)
    for j in range(4):
        np.testing.assert_allclose(per_point[j], expected_covariance[3 * j:3 * j + 3, 3 * j:3 * j + 3], atol=1e-6)


@pytest.mark.parametrize("joint", [True, False])
def test_draws_have_the_conditional_moments_and_softmax_probabilities(problem, joint):
    """4000 draws at one ``(theta, f)``: the sample mean within 4 standard errors of the conditional mean, the
    sample covariance of the new points in a column (joint) near the conditional one, ``y_prob`` the softmax of each
    drawn row (rows sum to one) and labels in ``1..K``."""
    f = np.random.default_rng(1).normal(size=24)
    draws = 4000
    theta_draws = np.broadcast_to(THETA, (1, draws, 2))
    f_draws = np.broadcast_to(f, (1, draws, 24))
    values = multiclass_new_draws(problem, theta_draws, f_draws, X_NEW, jax.random.PRNGKey(2), joint=joint)
    f_new = np.asarray(values["f_new"])[0]
    assert f_new.shape == (draws, 4, 3)
    mean, covariance = column_conditional_moments(problem, THETA, f, X_NEW, full=True)
    standard_error = np.sqrt(np.diag(covariance) / draws)[:, None]
    assert np.all(np.abs(f_new.mean(axis=0) - mean) < 4 * standard_error)
    if joint:
        for k in range(3):
            np.testing.assert_allclose(np.cov(f_new[:, :, k].T), covariance, atol=0.1 * np.max(np.diag(covariance)))
    probabilities = np.asarray(values["y_prob"])[0]
    np.testing.assert_allclose(probabilities, softmax(f_new, axis=-1), rtol=1e-10)
    np.testing.assert_allclose(probabilities.sum(axis=-1), 1.0, rtol=1e-12)
    labels = np.asarray(values["y_new"])[0]
    assert labels.shape == (draws, 4) and set(np.unique(labels)) <= {1, 2, 3}
    frequency = (labels[:, 0] == 1).mean()
    expected = probabilities[:, 0, 0].mean()
    assert abs(frequency - expected) < 4 * np.sqrt(expected * (1 - expected) / draws)


@pytest.mark.parametrize("method", ["gibbs", "nuts", "pm"])
def test_the_methods_that_run_the_model_predict_at_new_inputs(method):
    model, _ = check_file(MODEL)
    assert get_method(method).prediction_refusal(model) is None


@pytest.mark.parametrize("method,settings", [
    ("gibbs", GibbsSettings(chains=1, warmup=10, draws=6)),
    ("pm", PseudoMarginalSettings(chains=1, warmup=4, draws=3, approximation="laplace")),
])
def test_a_run_writes_the_predictions_group_with_a_class_dim(method, settings):
    model, _ = check_file(MODEL)
    found = groups(run(model, three_class_data(N=8), method, settings, seed=1, new_inputs=X_NEW,
                       predictive="joint"))
    predictions = found["predictions"]
    assert predictions["f_new"].dims == ("chain", "draw", "N_new", "K")
    assert predictions["y_prob"].dims == ("chain", "draw", "N_new", "K")
    assert predictions["y_new"].dims == ("chain", "draw", "N_new")
    assert predictions["f_new"].shape == (1, settings.draws, 4, 3)
    np.testing.assert_allclose(predictions["y_prob"].sum("K").values, 1.0, rtol=1e-12)
    np.testing.assert_allclose(predictions["y_prob"].values, softmax(predictions["f_new"].values, axis=-1),
                               rtol=1e-10)
