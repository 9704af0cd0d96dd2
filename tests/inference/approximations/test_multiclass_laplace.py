"""The multiclass Laplace approximation (Williams & Barber 1998) against direct computations.

- its mode is the minimiser of ``-log p(y | f) + f^T K^-1 f / 2`` found by SciPy's BFGS;
- its log marginal is ``log p(y | f_hat) - f_hat^T K^-1 f_hat / 2 - log |I + K W| / 2`` computed densely with
  ``K^-1`` and the softmax Hessian by NumPy;
- its importance weights ``p(y | f) N(f | 0, K) / q(f)`` estimate ``p(y)`` without bias: on three points and
  three classes the mean weight agrees with a simple Monte Carlo average of ``p(y | f)`` over 400,000 prior draws
  within four combined standard errors.
"""

import jax
import numpy as np
import pytest
from scipy import optimize
from scipy.special import log_softmax, logsumexp

from gpdsl.inference.approximations.multiclass_laplace import (
    covariance,
    log_prior_minus_log_q,
    multiclass_laplace,
    sample,
    softmax_derivatives,
)


def problem(N=6, C=3, seed=0, variance=4.0):
    """A row-by-row prior covariance ``K_x kron I_C`` over ``N`` points and labels in ``1..C``."""
    rng = np.random.default_rng(seed)
    x = np.sort(rng.uniform(-2, 2, N))
    K_x = variance * np.exp(-0.5 * (x[:, None] - x[None, :]) ** 2) + 1e-8 * np.eye(N)
    return np.kron(K_x, np.eye(C)), rng.integers(1, C + 1, N), C


def log_likelihood(f, y, C):
    return float(np.sum(np.take_along_axis(log_softmax(f.reshape(-1, C), axis=1), (y - 1)[:, None], axis=1)))


def test_derivatives_are_those_of_the_softmax():
    K, y, C = problem()
    f = np.random.default_rng(1).normal(size=K.shape[0])
    log_lik, grad, blocks = (np.asarray(v) for v in softmax_derivatives(y, f, C))
    assert log_lik == pytest.approx(log_likelihood(f, y, C), rel=1e-12)
    np.testing.assert_allclose(grad, optimize.approx_fprime(f, log_likelihood, 1e-6, y, C), atol=1e-5)
    hessian = np.asarray(jax.hessian(lambda v: softmax_derivatives(y, v, C)[0])(f))
    np.testing.assert_allclose(-hessian, np.kron(np.eye(len(y)), np.ones((C, C))) * -hessian, atol=1e-15)
    for n in range(len(y)):
        np.testing.assert_allclose(blocks[n], -hessian[n * C:(n + 1) * C, n * C:(n + 1) * C], atol=1e-12)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_mode_is_the_direct_optimum(seed):
    K, y, C = problem(seed=seed)
    K_inverse = np.linalg.inv(K)

    def negative_log_posterior(f):
        return -log_likelihood(f, y, C) + 0.5 * f @ K_inverse @ f

    def gradient(f):
        return -np.asarray(softmax_derivatives(y, f, C)[1]) + K_inverse @ f

    direct = optimize.minimize(negative_log_posterior, np.zeros(K.shape[0]), jac=gradient, method="BFGS",
                               options={"gtol": 1e-10, "maxiter": 10_000})
    approx = multiclass_laplace(K, y, C, tol=1e-14)
    assert bool(approx.converged)
    np.testing.assert_allclose(approx.mean, direct.x, atol=1e-5)
    np.testing.assert_allclose(K @ np.asarray(approx.alpha), approx.mean, atol=1e-10)


@pytest.mark.parametrize("offset", [0.0, 0.7])
def test_log_marginal_is_the_dense_laplace_formula(offset):
    K, y, C = problem(seed=3)
    approx = multiclass_laplace(K, y, C, tol=1e-14, offset=offset)
    f = np.asarray(approx.mean)
    logits = (f + offset).reshape(-1, C)
    pi = np.exp(log_softmax(logits, axis=1))
    W = np.zeros_like(K)
    for n, p in enumerate(pi):
        W[n * C:(n + 1) * C, n * C:(n + 1) * C] = np.diag(p) - np.outer(p, p)
    expected = (log_likelihood(f + offset, y, C) - 0.5 * f @ np.linalg.solve(K, f)
                - 0.5 * np.linalg.slogdet(np.eye(K.shape[0]) + K @ W)[1])
    assert float(approx.log_marginal) == pytest.approx(expected, abs=1e-8)
    np.testing.assert_allclose(covariance(approx, K), np.linalg.inv(np.linalg.inv(K) + W), atol=1e-6)


def test_importance_weights_estimate_the_marginal_likelihood_without_bias():
    K, y, C = problem(N=3, seed=4, variance=2.0)
    approx = multiclass_laplace(K, y, C)
    num = 400_000
    draws = np.asarray(sample(approx, K, jax.random.PRNGKey(0), num))
    log_lik = np.sum(np.take_along_axis(log_softmax(draws.reshape(num, -1, C), axis=2),
                                        (y - 1)[None, :, None], axis=2)[..., 0], axis=1)
    weights = np.exp(log_lik + np.asarray(log_prior_minus_log_q(approx, draws)))
    prior = np.random.default_rng(5).multivariate_normal(np.zeros(K.shape[0]), K, size=num)
    likelihoods = np.exp(np.sum(np.take_along_axis(log_softmax(prior.reshape(num, -1, C), axis=2),
                                                   (y - 1)[None, :, None], axis=2)[..., 0], axis=1))
    error = np.hypot(weights.std() / np.sqrt(num), likelihoods.std() / np.sqrt(num))
    print(f"importance {weights.mean():.6f}, prior Monte Carlo {likelihoods.mean():.6f}, combined SE {error:.2e}, "
          f"Laplace {np.exp(float(approx.log_marginal)):.6f}")
    assert abs(weights.mean() - likelihoods.mean()) < 4 * error
    assert weights.std() < likelihoods.std()  # the point of the proposal: a smaller variance than the prior's
    assert abs(logsumexp(np.log(weights)) - np.log(num) - float(approx.log_marginal)) < 0.5
