"""The HSGP feature kernel and its Psi statistics: the kernel against the NumPy basis, the closed-form expectations
against Gauss-Hermite quadrature (tight) and Monte Carlo (within its standard error), the Psi-table row with inducing
inputs against quadrature, and the inducing-feature bound against the exact log marginal likelihood of the feature
GP when ``q(X)`` collapses to points."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.stats import multivariate_normal

from gpdsl.kernels import build_kernel
from gpdsl.kernels.hsgp_features import HSGPFeatureKernel
from gpdsl.kernels.psi import PsiMethod, analytic_supported, psi_statistics
from gpdsl.kernels.psi.hsgp import feature_statistics, inducing_feature_statistics
from gpdsl.inference.variational.collapsed_bound import collapsed_bound, collapsed_bound_missing, missingness_groups
from gpdsl.numerics.hsgp import basis_indices, eigenfunctions

jax.config.update("jax_enable_x64", True)

GAUSS_HERMITE = PsiMethod("gauss_hermite", nodes=40)


def kernel_in(D):
    """An HSGP feature kernel over ``D`` columns with an off-centre box and unequal ``m``."""
    base = {1: build_kernel("rbf", variance=1.3, lengthscale=0.7),
            2: build_kernel("matern52", variance=0.9, lengthscale=jnp.array([0.8, 1.3])),
            3: build_kernel("rbf", variance=1.1, lengthscale=jnp.array([0.9, 1.2, 1.5]))}[D]
    centre, half_widths, m = [0.2, -0.3, 0.1][:D], [3.0, 4.0, 3.5][:D], [7, 5, 3][:D]
    return HSGPFeatureKernel(base, centre, half_widths, m)


def q_of(D, N=6, seed=0, scale=0.4):
    rng = np.random.default_rng(seed)
    return jnp.asarray(rng.normal(size=(N, D))), jnp.asarray(rng.uniform(0.02, 1.0, size=(N, D)) * scale)


def test_the_kernel_is_the_basis_expansion_of_the_numpy_eigenfunctions():
    kernel = kernel_in(2)
    X1, X2 = np.random.default_rng(3).normal(size=(2, 5, 2))
    phi1, phi2 = (eigenfunctions(X, kernel.centre, kernel.half_widths, basis_indices(kernel.m)) for X in (X1, X2))
    S = np.asarray(kernel.weight_variances())
    np.testing.assert_allclose(kernel(X1, X2), phi1 @ np.diag(S) @ phi2.T, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(kernel.diag(X1), np.diag(phi1 @ np.diag(S) @ phi1.T), rtol=1e-12)
    np.testing.assert_allclose(kernel.pair(X1[0], X2[1]), (phi1 @ np.diag(S) @ phi2.T)[0, 1], rtol=1e-12)


@pytest.mark.parametrize("D", [1, 2, 3])
def test_closed_form_feature_statistics_equal_gauss_hermite_quadrature(D):
    kernel = kernel_in(D)
    mean, variance = q_of(D)
    weights = np.random.default_rng(1).uniform(size=(mean.shape[0], 2))
    exact = feature_statistics(kernel, mean, variance, row_weights=weights)
    quadrature = feature_statistics(kernel, mean, variance, GAUSS_HERMITE if D < 3 else PsiMethod("gauss_hermite", 30),
                                    row_weights=weights)
    assert exact.psi2.shape == (2, kernel.size, kernel.size)
    for a, b in zip(exact, quadrature):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-12)


def test_closed_form_feature_means_agree_with_monte_carlo_within_its_standard_error():
    kernel = kernel_in(2)
    mean, variance = q_of(2, N=3)
    draws = 40_000
    eps = np.random.default_rng(7).normal(size=(draws, 3, 2))
    phi = np.asarray(kernel.features((mean + np.sqrt(variance) * eps).reshape(-1, 2))).reshape(draws, 3, -1)
    estimate, standard_error = phi.mean(axis=0), phi.std(axis=0) / np.sqrt(draws)
    exact = np.asarray(feature_statistics(kernel, mean, variance).psi1)
    assert np.all(np.abs(estimate - exact) <= 4.5 * standard_error + 1e-12)
    second = np.einsum("pni,pnj->pij", phi, phi)
    error = np.abs(second.mean(axis=0) - np.asarray(feature_statistics(kernel, mean, variance).psi2))
    assert np.all(error <= 4.5 * second.std(axis=0) / np.sqrt(draws) + 1e-12)


def test_the_psi_table_row_with_inducing_inputs_equals_quadrature():
    kernel = kernel_in(2)
    assert analytic_supported(kernel)
    mean, variance = q_of(2)
    Z = jnp.asarray(np.random.default_rng(2).normal(size=(4, 2)))
    exact = psi_statistics(kernel, Z, mean, variance)
    quadrature = psi_statistics(kernel, Z, mean, variance, GAUSS_HERMITE)
    for a, b in zip(exact, quadrature):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-12)


def test_with_zero_variance_the_statistics_are_the_features_at_the_means():
    kernel = kernel_in(2)
    mean, _ = q_of(2)
    stats = feature_statistics(kernel, mean, jnp.zeros_like(mean))
    phi = kernel.features(mean)
    np.testing.assert_allclose(stats.psi1, phi, atol=1e-14)
    np.testing.assert_allclose(stats.psi2, phi.T @ phi, atol=1e-13)
    np.testing.assert_allclose(stats.psi0, kernel.diag(mean), atol=1e-13)


def feature_gp_log_marginal(kernel, X, Y, noise, observed=None):
    """``sum_d log N(y_d; 0, Phi S Phi^T + noise I)`` over each column's observed rows."""
    K = np.asarray(kernel(X)) + noise * np.eye(len(X))
    observed = np.ones(Y.shape, dtype=bool) if observed is None else observed
    return sum(multivariate_normal(np.zeros(rows.sum()), K[np.ix_(rows, rows)]).logpdf(Y[rows, d])
               for d, rows in enumerate(observed.T))


@pytest.mark.parametrize("variance", [0.0, 1e-14])
def test_the_inducing_feature_bound_is_exact_when_q_collapses_to_points(variance):
    kernel = kernel_in(2)
    rng = np.random.default_rng(4)
    X = jnp.asarray(rng.normal(size=(9, 2)))
    Y = rng.normal(size=(9, 3))
    @jax.jit
    def bound(X):
        stats, Kuu = inducing_feature_statistics(kernel, X, jnp.full(X.shape, variance))
        return collapsed_bound(Y, stats.psi0, stats.psi1, stats.psi2, Kuu, 0.3)

    bound = bound(X)
    assert float(bound) == pytest.approx(feature_gp_log_marginal(kernel, X, Y, 0.3), abs=1e-8)


def test_the_inducing_feature_bound_with_missing_outputs_is_exact_at_points():
    kernel = kernel_in(1)
    rng = np.random.default_rng(5)
    X = jnp.asarray(rng.normal(size=(8, 1)))
    Y = rng.normal(size=(8, 3))
    observed = rng.uniform(size=Y.shape) > 0.3
    patterns, group_of_column = missingness_groups(observed)
    @jax.jit
    def bound(X):
        stats, Kuu = inducing_feature_statistics(kernel, X, jnp.zeros(X.shape), row_weights=patterns.astype(float))
        return collapsed_bound_missing(np.where(observed, Y, np.nan), stats.psi0, stats.psi1, stats.psi2,
                                       group_of_column, Kuu, 0.2, observed)

    bound = bound(X)
    assert float(bound) == pytest.approx(feature_gp_log_marginal(kernel, X, Y, 0.2, observed), abs=1e-8)


def test_the_bound_is_differentiable_where_spectral_densities_underflow():
    kernel = kernel_in(2)
    rng = np.random.default_rng(6)
    X = jnp.asarray(rng.normal(size=(7, 2)))
    Y = rng.normal(size=(7, 2))

    def bound(log_variance, lengthscale):
        k = HSGPFeatureKernel(build_kernel("rbf", variance=1.0, lengthscale=lengthscale), kernel.centre,
                              kernel.half_widths, (20, 20))
        stats, Kuu = inducing_feature_statistics(k, X, jnp.exp(log_variance))
        return collapsed_bound(Y, stats.psi0, stats.psi1, stats.psi2, Kuu, 0.1)

    # spectral densities far in the tail underflow to 0 (a length-scale of 5 over 20 frequencies): still finite
    gradient = jax.jit(jax.grad(bound, argnums=(0, 1)))(jnp.full(X.shape, -3.0), jnp.array([5.0, 5.0]))
    assert all(bool(jnp.all(jnp.isfinite(g))) for g in gradient)
