"""The DVMGP's bound and predictive (issue 19, item 2; spec sheet C, Sec. 1.3): q(W)'s projected points against
Monte Carlo, the Psi statistics under them against Monte Carlo, the bound at zero hidden variance against Titsias's
SGPR bound written out densely, the KL against a direct computation, the predictive against SGPR's."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gpdsl.inference.variational.deep_mahalanobis import (
    JITTER, DMGPKernels, DMGPVariational, dmgp_bound, kl_projection, output_layer_bound, output_layer_predict,
    projected_inputs, projection_moments)
from gpdsl.kernels import RBF
from gpdsl.kernels.psi import psi_statistics

N, D, Q, M_U, M_V = 9, 2, 2, 5, 4


FIELD_VARIANCES, FIELD_LENGTHSCALES = [0.8, 0.3], [[1.0, 1.5], [0.7, 1.2]]


def parameters(seed=0):
    rng = np.random.default_rng(seed)
    return DMGPVariational(
        Z=jnp.asarray(rng.normal(size=(M_U, Q))), Xi=jnp.asarray(rng.normal(size=(M_V, D))),
        mean_v=jnp.asarray(rng.normal(size=(Q, D, M_V))), log_std_v=jnp.asarray(np.log(rng.uniform(0.2, 0.6, (Q, M_V)))))


def kernels():
    fields = tuple(RBF(v, np.asarray(ell)) for v, ell in zip(FIELD_VARIANCES, FIELD_LENGTHSCALES))
    return DMGPKernels(fields, RBF(1.3 ** 2, np.ones(Q)), jnp.asarray(0.05))


def inputs(seed=1):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N, D))
    return X, np.sin(X[:, 0]) + X[:, 1] ** 2 + 0.1 * rng.normal(size=N)


def sample_w(params, X, num, seed=2):
    """Joint draws of every w_qd field at X from q(W): v ~ q(V), then w | v from the GP conditional."""
    rng = np.random.default_rng(seed)
    draws = np.zeros((num, N, Q, D))
    for q in range(Q):
        kernel = kernels().fields[q]
        Kv = np.asarray(kernel(params.Xi)) + JITTER * np.eye(M_V)
        Kwv = np.asarray(kernel(X, params.Xi))
        Kw = np.asarray(kernel(X))
        P = Kwv @ np.linalg.inv(Kv)
        L = np.linalg.cholesky(Kw - P @ Kwv.T + 1e-9 * np.eye(N))
        std = np.exp(np.asarray(params.log_std_v[q]))
        for d in range(D):
            v = np.asarray(params.mean_v[q, d]) + std * rng.normal(size=(num, M_V))
            draws[:, :, q, d] = v @ P.T + rng.normal(size=(num, N)) @ L.T
    return draws


def test_projection_moments_match_monte_carlo():
    params, (X, _) = parameters(), inputs()
    mean_w, var_w = map(np.asarray, projection_moments(params, kernels(), X))
    draws = sample_w(params, X, 40000)
    error = draws.std(0) / np.sqrt(len(draws))
    assert np.all(np.abs(draws.mean(0) - mean_w) < 4.5 * error)
    np.testing.assert_allclose(draws.var(0), np.broadcast_to(var_w[:, :, None], draws.shape[1:]), rtol=0.05)
    z = np.einsum("snqd,nd->snq", draws, X)
    a, b = map(np.asarray, projected_inputs(params, kernels(), X))
    assert np.all(np.abs(z.mean(0) - a) < 4.5 * z.std(0) / np.sqrt(len(z)))
    np.testing.assert_allclose(z.var(0), b, rtol=0.05)


def test_psi_statistics_under_the_projection_match_monte_carlo():
    params, (X, _) = parameters(), inputs()
    a, b = projected_inputs(params, kernels(), X)
    kernel = kernels().output
    psi = psi_statistics(kernel, params.Z, a, b)
    z = np.einsum("snqd,nd->snq", sample_w(params, X, 20000, seed=3), X)
    k = np.asarray(jax.vmap(lambda points: kernel(points, params.Z))(jnp.asarray(z)))   # (S, N, M)
    psi1_error = k.std(0) / np.sqrt(len(k))
    assert np.all(np.abs(k.mean(0) - np.asarray(psi.psi1)) < 4.5 * psi1_error + 1e-12)
    per_draw = np.einsum("snm,snl->sml", k, k)
    psi2_error = per_draw.std(0) / np.sqrt(len(per_draw))
    assert np.all(np.abs(per_draw.mean(0) - np.asarray(psi.psi2)) < 4.5 * psi2_error + 1e-12)
    np.testing.assert_allclose(psi.psi0, np.full(N, 1.3 ** 2), rtol=1e-12)


def titsias_bound(points, Z, y, sigma_f2, noise, jitter=0.0):
    """Titsias's bound, dense; ``jitter`` is added to ``sigma^2 K_u + K_uf K_fu`` inside ``Q_ff``'s inverse."""
    kernel = RBF(sigma_f2, np.ones(Q))
    Kuu = np.asarray(kernel(Z)) + JITTER * sigma_f2 * np.eye(M_U)
    Kfu = np.asarray(kernel(points, Z))
    jittered = Kuu + jitter / noise * np.eye(M_U)
    Qff = Kfu @ np.linalg.solve(jittered, Kfu.T)
    from scipy.stats import multivariate_normal
    return (multivariate_normal(np.zeros(N), Qff + noise * np.eye(N)).logpdf(y)
            - (N * sigma_f2 - np.trace(Kfu @ np.linalg.solve(Kuu, Kfu.T))) / (2 * noise)
            + 0.5 * (np.linalg.slogdet(Kuu)[1] - np.linalg.slogdet(jittered)[1]))


def test_bound_at_zero_hidden_variance_is_the_sgpr_bound_on_the_projected_points():
    params, (X, y) = parameters(), inputs()
    a, _ = projected_inputs(params, kernels(), X)
    ours = float(output_layer_bound(params, kernels(), a, jnp.zeros_like(a), y))
    assert ours == pytest.approx(titsias_bound(np.asarray(a), np.asarray(params.Z), y, 1.3 ** 2, 0.05), rel=1e-5)
    # exactly the bound with the reference code's jitter on s^2 K_u + Psi2 (set on SRBF, so scaled by sigma_f^2)
    expected = titsias_bound(np.asarray(a), np.asarray(params.Z), y, 1.3 ** 2, 0.05, jitter=JITTER * 1.3 ** 2)
    assert ours == pytest.approx(expected, rel=1e-8)


def test_kl_of_the_projection_fields_is_the_sum_of_gaussian_kls():
    from scipy.stats import multivariate_normal

    params = parameters()
    expected = 0.0
    for q in range(Q):
        kernel = kernels().fields[q]
        Kv = np.asarray(kernel(params.Xi)) + JITTER * np.eye(M_V)
        S = np.diag(np.exp(2 * np.asarray(params.log_std_v[q])))
        for d in range(D):
            mu = np.asarray(params.mean_v[q, d])
            expected += 0.5 * (np.trace(np.linalg.solve(Kv, S)) + mu @ np.linalg.solve(Kv, mu) - M_V
                               + np.linalg.slogdet(Kv)[1] - np.linalg.slogdet(S)[1])
    assert float(kl_projection(params, kernels())) == pytest.approx(expected, rel=1e-9)
    assert multivariate_normal  # the formula above is the Gaussian KL in closed form


def test_predictive_at_zero_hidden_variance_is_sgpr_and_the_bound_has_finite_gradients():
    params, (X, y) = parameters(), inputs()
    a, _ = projected_inputs(params, kernels(), X)
    new = jnp.asarray(np.random.default_rng(4).normal(size=(3, Q)))
    mu, var = output_layer_predict(params, kernels(), a, jnp.zeros_like(a), y, new, jnp.zeros_like(new))
    kernel = RBF(1.3 ** 2, np.ones(Q))
    Kuu = np.asarray(kernel(params.Z)) + JITTER * 1.3 ** 2 * np.eye(M_U)
    Kfu, Ksu = np.asarray(kernel(a, params.Z)), np.asarray(kernel(new, params.Z))
    Sigma = np.linalg.inv(Kuu + (Kfu.T @ Kfu + JITTER * 1.3 ** 2 * np.eye(M_U)) / 0.05)  # the jitter on s^2 K_u + Psi2
    np.testing.assert_allclose(mu, Ksu @ Sigma @ Kfu.T @ y / 0.05, rtol=1e-6)
    expected_var = 1.3 ** 2 - np.sum(Ksu * np.linalg.solve(Kuu, Ksu.T).T, 1) + np.sum(Ksu * (Ksu @ Sigma), 1)
    np.testing.assert_allclose(var, expected_var, rtol=1e-5, atol=1e-8)
    gradient = jax.grad(lambda p, k: dmgp_bound(p, k, X, y), argnums=(0, 1))(params, kernels())
    assert all(np.all(np.isfinite(np.asarray(leaf))) for leaf in jax.tree_util.tree_leaves(gradient))
