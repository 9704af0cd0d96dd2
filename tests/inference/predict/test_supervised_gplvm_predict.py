"""Predictions of a supervised GPLVM from (theta, Z) draws against direct NumPy computations."""

import math

import jax
import numpy as np
import pytest
from scipy.stats import norm

from gpdsl.api import load_model
from gpdsl.data.io import load_data
from gpdsl.inference.families.gplvm import gplvm_problem
from gpdsl.inference.predict.supervised_gplvm import (
    DrawPredictions,
    log_likelihood,
    log_predictive_density,
    predict,
    predictive_mae,
    replicate_outputs,
    sample_latent_functions,
)

NOISE_FREE_PRIOR = """
data {
  int N;
  int Q;
  int D;
  matrix[N, 1] X;
  matrix[N, D] Y;
}
parameters {
  real<lower=0> s1 ~ gamma(2, 2);
  vector<lower=0>[Q] theta ~ gamma(2, 2);
  real<lower=0> theta_S ~ gamma(2, 2);
  real<lower=0> noise ~ gamma(2, 2);
}
latent {
  matrix[N, Q] Z;
}
model {
  Z ~ gp(X, rbf(variance = 1, inv_ls2 = s1));
  F ~ gp(Z, rbf(variance = theta_S, inv_ls2 = theta));
  Y ~ normal(F, sqrt(noise));
}
"""
N, Q, D = 5, 2, 3
X = np.arange(N, dtype=float)[:, None] * 2.0
HYPERS = [{"s1": 1.0, "theta": np.array([0.7, 1.3]), "theta_S": 0.8, "noise": 0.05},
          {"s1": 1.4, "theta": np.array([0.4, 0.9]), "theta_S": 1.5, "noise": 0.2},
          {"s1": 0.9, "theta": np.array([1.1, 0.5]), "theta_S": 0.5, "noise": 0.01}]


def build(path):
    model = load_model(str(path))
    Y = np.random.default_rng(0).normal(size=(N, D))
    values, _ = load_data({"N": N, "Q": Q, "D": D, "X": X, "Y": Y}, model)
    return gplvm_problem(model, values)


@pytest.fixture(scope="module")
def setting(tmp_path_factory):
    """The noise-free-prior model, theta varying over 2 chains x 3 draws, Z drawn at random per draw."""
    path = tmp_path_factory.mktemp("model") / "sgplvm.gpm"
    path.write_text(NOISE_FREE_PRIOR)
    problem = build(path)
    theta = np.stack([np.asarray(problem.unconstrain_theta(h)) for h in HYPERS])
    theta_draws = np.stack([theta, theta[::-1]])
    Z_draws = np.random.default_rng(1).normal(size=(2, 3, N, Q))
    return problem, theta_draws, Z_draws


def rbf(A, B, variance, inv_ls2):
    return variance * np.exp(-0.5 * np.sum(inv_ls2 * (A[:, None] - B[None]) ** 2, axis=-1))


def numpy_gp(K, K_cross, k_diag, targets, noise):
    """GP regression with ``np.linalg.solve``: mean ``K*^T (K + noise I)^-1 targets`` and variance."""
    A = np.linalg.solve(K + noise * np.eye(len(K)), K_cross)
    return A.T @ targets, k_diag - np.sum(K_cross * A, axis=0)


def test_predictions_at_training_inputs_are_numpy_gp_regression(setting):
    problem, theta_draws, Z_draws = setting
    out = predict(problem, theta_draws, Z_draws, X, jax.random.key(0))
    assert out.latent_sample.shape == (2, 3, N, Q) and out.mean.shape == (2, 3, N, D) and out.variance.shape == (2, 3, N)
    assert np.all(out.latent_variance < 1e-7)  # zero but for the jitter on K_z
    np.testing.assert_allclose(out.latent_mean, Z_draws, atol=1e-6)
    np.testing.assert_allclose(out.latent_sample, Z_draws, atol=1e-3)
    for c in range(2):
        for g in range(3):
            h = problem.theta_values(theta_draws[c, g])
            Z, z = Z_draws[c, g], out.latent_sample[c, g]
            K = rbf(Z, Z, float(h["theta_S"]), np.asarray(h["theta"]))
            mean, variance = numpy_gp(K, rbf(Z, z, float(h["theta_S"]), np.asarray(h["theta"])),
                                      np.full(N, float(h["theta_S"])), problem.Y, float(h["noise"]) + 1e-8)
            np.testing.assert_allclose(out.mean[c, g], mean, atol=1e-8)
            np.testing.assert_allclose(out.variance[c, g], variance + float(h["noise"]), atol=1e-8)


def test_latent_conditional_at_new_inputs_is_eq_7(setting):
    problem, theta_draws, Z_draws = setting
    x_new = np.array([[0.5], [3.3], [9.0], [12.0]])
    out = predict(problem, theta_draws, Z_draws, x_new, jax.random.key(1))
    for c in range(2):
        for g in range(3):
            s1 = float(problem.theta_values(theta_draws[c, g])["s1"])
            mean, variance = numpy_gp(rbf(X, X, 1.0, s1), rbf(X, x_new, 1.0, s1), np.ones(4), Z_draws[c, g], 1e-8)
            np.testing.assert_allclose(out.latent_mean[c, g], mean, atol=1e-8)
            np.testing.assert_allclose(out.latent_variance[c, g], variance, atol=1e-8)
    assert out.latent_variance[0, 0, 3] > 0.9  # far from the data: back to the prior


def test_samples_follow_their_gaussians(setting):
    problem, theta_draws, Z_draws = setting
    many_theta = np.repeat(theta_draws, 200, axis=1)
    many_Z = np.repeat(Z_draws, 200, axis=1)
    x_new = np.array([[1.0], [5.0]])
    out = predict(problem, many_theta, many_Z, x_new, jax.random.key(2))
    latent = (out.latent_sample - out.latent_mean) / np.sqrt(out.latent_variance[..., None])
    output = (out.sample - out.mean) / np.sqrt(out.variance[..., None])
    for name, e in (("z*", latent), ("y*", output)):
        e = e.ravel()
        assert abs(e.mean()) < 4 / math.sqrt(e.size), name
        assert abs(e.var() - 1) < 4 * math.sqrt(2 / e.size), name
    assert np.std(out.latent_sample[0, :200, 0, 0]) > 0.1  # z* varies between repeats of one draw


def test_white_noise_in_k_z_enters_new_points_only_on_the_diagonal(tmp_path):
    """The paper's model: k_z = rbf + white(1e-6); at new inputs the cross-covariance has no white term."""
    model = load_model("models/supervised_gplvm.gpm")
    Y = np.random.default_rng(3).normal(size=(N, D))
    values, _ = load_data({"N": N, "Q": Q, "D": D, "X": X, "Y": Y}, model)
    problem = gplvm_problem(model, values)
    theta = np.asarray(problem.unconstrain_theta({"s1": 0.6, "theta": np.array([0.5, 0.8]), "theta_S": 1.0,
                                                   "noise": 0.1}))
    Z = np.random.default_rng(4).normal(size=(1, 1, N, Q))
    x_new = np.array([[1.0], [4.0], [7.5]])
    out = predict(problem, theta[None, None], Z, x_new, jax.random.key(5))
    K = rbf(X, X, 1.0, 0.6) + 1e-6 * np.eye(N)
    mean, variance = numpy_gp(K, rbf(X, x_new, 1.0, 0.6), np.full(3, 1.0 + 1e-6), Z[0, 0], 1e-8)
    np.testing.assert_allclose(out.latent_mean[0, 0], mean, atol=1e-8)
    np.testing.assert_allclose(out.latent_variance[0, 0], variance, atol=1e-8)


def test_mixture_log_density_is_a_log_mean_exp(setting):
    problem, theta_draws, Z_draws = setting
    out = predict(problem, theta_draws, Z_draws, np.array([[1.0], [3.0]]), jax.random.key(6))
    Y_test = np.array([[0.3, -0.2, 1.0], [1.5, 0.4, -0.7]])
    sd = np.sqrt(out.variance)[..., None]
    densities = norm.pdf(Y_test, out.mean, sd)  # (2, 3, 2, D)
    np.testing.assert_allclose(log_predictive_density(out, Y_test),
                               np.log(np.mean(np.prod(densities, axis=-1), axis=(0, 1))), rtol=1e-12)
    np.testing.assert_allclose(log_predictive_density(out, Y_test, per_output=True),
                               np.log(np.mean(densities, axis=(0, 1))), rtol=1e-12)
    partial = Y_test.copy()
    partial[1, 2] = np.nan
    expected = np.log(np.mean(np.prod(densities[..., 1, :2], axis=-1), axis=(0, 1)))
    np.testing.assert_allclose(log_predictive_density(out, partial)[1], expected, rtol=1e-12)


def test_mae_takes_one_sample_of_a_random_draw_per_point():
    points = 4000
    f = np.zeros((points, 2))
    sample = np.broadcast_to(np.arange(6.0).reshape(2, 3, 1, 1), (2, 3, points, 2))
    fake = DrawPredictions(*(None,) * 5, sample=sample)
    mae = predictive_mae(fake, f, 0.0, jax.random.key(7))
    assert np.all(np.abs(mae - 2.5) < 4 * np.std(np.arange(6.0)) / math.sqrt(points))  # uniform over the 6 draws
    exact = DrawPredictions(*(None,) * 5, sample=np.zeros((2, 3, points, 2)))
    mae = predictive_mae(exact, f, 0.05, jax.random.key(8))
    floor = 0.05 * math.sqrt(2 / math.pi)
    assert np.all(np.abs(mae - floor) < 4 * 0.05 * math.sqrt(1 - 2 / math.pi) / math.sqrt(points))


def numpy_function_posterior(problem, theta, Z):
    h = problem.theta_values(theta)
    K = rbf(Z, Z, float(h["theta_S"]), np.asarray(h["theta"]))
    mean, _ = numpy_gp(K, K, np.diag(K), problem.Y, float(h["noise"]))
    covariance = K - K @ np.linalg.solve(K + float(h["noise"]) * np.eye(N), K)
    return mean, covariance, K, float(h["noise"])


def test_log_likelihood_is_the_likelihood_at_the_drawn_F(setting):
    problem, theta_draws, Z_draws = setting
    ll = log_likelihood(problem, theta_draws, Z_draws, jax.random.key(9))
    assert ll.shape == (2, 3, N)
    keys = jax.random.split(jax.random.key(9), 6)
    for c in range(2):
        for g in range(3):
            F = np.asarray(sample_latent_functions(problem, theta_draws[c, g], Z_draws[c, g], keys[3 * c + g]))
            sd = math.sqrt(float(problem.theta_values(theta_draws[c, g])["noise"]))
            np.testing.assert_allclose(ll[c, g], norm.logpdf(problem.Y, F, sd).sum(axis=1), rtol=1e-10)
    repeated = log_likelihood(problem, np.repeat(theta_draws[:1, :1], 2, axis=1), np.repeat(Z_draws[:1, :1], 2, axis=1),
                              jax.random.key(9))
    assert not np.allclose(repeated[0, 0], repeated[0, 1])  # one (theta, Z), two draws of F


def test_latent_function_draws_follow_the_exact_posterior(setting):
    problem, theta_draws, Z_draws = setting
    theta, Z = theta_draws[0, 0], Z_draws[0, 0]
    draws = 4000
    F = np.asarray(jax.vmap(lambda k: sample_latent_functions(problem, theta, Z, k))(
        jax.random.split(jax.random.key(10), draws)))
    mean, covariance, _, _ = numpy_function_posterior(problem, theta, Z)
    assert_moments(F, mean, covariance)


def assert_moments(samples, mean, covariance):
    """iid ``samples`` (S, N, D), each column ``N(mean_d, covariance)``: sample mean and covariance within 5 s.e."""
    sd = np.sqrt(np.diag(covariance))[:, None]
    assert np.all(np.abs(samples.mean(0) - mean) < 5 * sd / math.sqrt(len(samples)))
    centred = samples - mean
    empirical = np.einsum("sid,sjd->sijd", centred, centred)
    standard_error = np.sqrt((np.outer(np.diag(covariance), np.diag(covariance)) + covariance**2) / len(samples))
    assert np.all(np.abs(empirical.mean(0) - covariance[..., None]) < 5 * standard_error[..., None])


@pytest.mark.parametrize("given_outputs", [True, False])
def test_replicates_follow_their_distribution(setting, given_outputs):
    problem, theta_draws, Z_draws = setting
    theta, Z = theta_draws[0, 1], Z_draws[0, 1]
    draws = 4000
    replicates = replicate_outputs(problem, np.broadcast_to(theta, (1, draws, len(theta))),
                                   np.broadcast_to(Z, (1, draws, N, Q)), jax.random.key(11),
                                   given_outputs=given_outputs)
    assert replicates.shape == (1, draws, N, D)
    mean, covariance, K, noise = numpy_function_posterior(problem, theta, Z)
    if not given_outputs:
        mean, covariance = np.zeros((N, D)), K
    assert_moments(replicates[0], mean, covariance + noise * np.eye(N))


def test_chunks_of_draws_give_the_values_of_one_map_over_all_draws(setting, monkeypatch):
    """Draws run a chunk of whole batches at a time (for progress): the values are bit for bit those of one program
    over all draws, and each chunk moves the stage's bar by its draws."""
    from gpdsl.inference import progress
    from gpdsl.inference.predict import supervised_gplvm

    problem, theta_draws, Z_draws = setting
    monkeypatch.setattr(supervised_gplvm, "BATCH", 2)
    monkeypatch.setattr(supervised_gplvm, "CHUNK", 100)
    whole = predict(problem, theta_draws, Z_draws, X[:2] + 0.5, jax.random.key(3))
    steps = []
    monkeypatch.setattr(supervised_gplvm, "CHUNK", 4)
    monkeypatch.setattr(progress, "advance", steps.append)
    chunked = predict(problem, theta_draws, Z_draws, X[:2] + 0.5, jax.random.key(3))
    for name, values in whole._asdict().items():
        np.testing.assert_array_equal(getattr(chunked, name), values, err_msg=name)
    assert steps == [4, 2]
