"""The grid GP by Kronecker algebra (gpdsl.inference.approximations.kronecker) against dense NumPy/SciPy computations.

The reference covariance is the product kernel written out in NumPy on the rows in their own (shuffled) order,
factorised by SciPy's Cholesky; its gradient is the closed form ``1/2 tr((alpha alpha^T - (K + s^2 I)^-1) dK)``
with the kernels' derivatives written out by hand. Prior draws are compared with ``K`` within the Monte Carlo
standard error of the sample covariance.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg

from gpdsl.errors import DataError
from gpdsl.inference.approximations import kronecker
from gpdsl.kernels import RBF, Matern32

VARIANCE = 1.7


def rbf(a, b, lengthscale):
    """RBF kernel matrix of unit variance and its derivative in the length-scale."""
    r2 = (a[:, None] - b[None, :]) ** 2
    k = np.exp(-0.5 * r2 / lengthscale**2)
    return k, k * r2 / lengthscale**3


def matern32(a, b, lengthscale):
    """Matern 3/2 kernel matrix of unit variance and its derivative in the length-scale."""
    r = np.abs(a[:, None] - b[None, :])
    u = np.sqrt(3.0) * r / lengthscale
    return (1.0 + u) * np.exp(-u), u**2 / lengthscale * np.exp(-u)


NUMPY_KERNELS = (rbf, matern32, rbf)
GPDSL_KERNELS = (RBF, Matern32, RBF)


def shuffled_grid(rng, sizes):
    """Input columns of a full grid with uneven spacing, rows in a random order."""
    axes = [np.sort(rng.uniform(0.0, 3.0 + d, n)) for d, n in enumerate(sizes)]
    mesh = np.meshgrid(*axes, indexing="ij")
    columns = [m.ravel() for m in mesh]
    order = rng.permutation(columns[0].size)
    return [c[order] for c in columns]


def dense_lml_and_gradient(columns, lengthscales, noise, y):
    """Log marginal likelihood and its gradient in (length-scales..., noise variance), dense, rows' order."""
    parts = [kernel(c, c, ell) for kernel, c, ell in zip(NUMPY_KERNELS, columns, lengthscales)]
    K = VARIANCE * np.prod([k for k, _ in parts], axis=0)
    C = K + noise * np.eye(y.size)
    factor = scipy.linalg.cho_factor(C, lower=True)
    alpha = scipy.linalg.cho_solve(factor, y)
    lml = -0.5 * (y @ alpha + 2 * np.sum(np.log(np.diag(factor[0]))) + y.size * np.log(2 * np.pi))
    inner = np.outer(alpha, alpha) - scipy.linalg.cho_solve(factor, np.eye(y.size))
    gradient = []
    for d in range(len(parts)):
        dK = VARIANCE * np.prod([dk if e == d else k for e, (k, dk) in enumerate(parts)], axis=0)
        gradient.append(0.5 * np.sum(inner * dK))
    gradient.append(0.5 * np.trace(inner))
    return lml, np.array(gradient), K, C


def kronecker_lml(columns, layout):
    """The Kronecker log marginal likelihood as a function of (length-scales, noise variance, y in rows' order)."""
    def lml(lengthscales, noise, y):
        factors = [kernel(VARIANCE if d == 0 else 1.0, ell)(axis[:, None])
                   for d, (kernel, axis, ell) in enumerate(zip(GPDSL_KERNELS, layout.axes, lengthscales))]
        return kronecker.log_marginal_likelihood(factors, noise, kronecker.to_grid_order(y, layout))
    return lml


@pytest.mark.parametrize("sizes", [(7, 5), (4, 3, 5)], ids=["2 axes", "3 axes"])
def test_log_marginal_likelihood_and_gradient_equal_the_dense_ones(sizes):
    rng = np.random.default_rng(len(sizes))
    columns = shuffled_grid(rng, sizes)
    layout = kronecker.grid_layout(columns)
    lengthscales = np.array([0.8, 1.3, 0.6][: len(sizes)])
    noise = 0.05
    y = rng.normal(size=columns[0].size)
    expected, expected_gradient, _, C = dense_lml_and_gradient(columns, lengthscales, noise, y)
    lml = kronecker_lml(columns, layout)
    value, (grad_ell, grad_noise, grad_y) = jax.value_and_grad(lml, argnums=(0, 1, 2))(
        jnp.asarray(lengthscales), noise, jnp.asarray(y))
    np.testing.assert_allclose(value, expected, rtol=1e-8)
    np.testing.assert_allclose(np.append(grad_ell, grad_noise), expected_gradient, rtol=1e-8)
    np.testing.assert_allclose(grad_y, -scipy.linalg.solve(C, y, assume_a="pos"), rtol=1e-8)


def test_forward_mode_derivative_equals_reverse_mode():
    rng = np.random.default_rng(5)
    columns = shuffled_grid(rng, (6, 4))
    lml = kronecker_lml(columns, kronecker.grid_layout(columns))
    y = jnp.asarray(rng.normal(size=24))
    theta = jnp.array([0.9, 1.1])
    forward = jax.jacfwd(lml)(theta, 0.1, y)
    np.testing.assert_allclose(forward, jax.grad(lml)(theta, 0.1, y), rtol=1e-10)


def test_posterior_mean_equals_the_dense_one():
    rng = np.random.default_rng(7)
    columns = shuffled_grid(rng, (6, 5))
    layout = kronecker.grid_layout(columns)
    y = rng.normal(size=30)
    _, _, K, C = dense_lml_and_gradient(columns, (0.7, 1.2), 0.2, y)
    factors = [RBF(VARIANCE, 0.7)(layout.axes[0][:, None]), Matern32(1.0, 1.2)(layout.axes[1][:, None])]
    mean = kronecker.from_grid_order(kronecker.posterior_mean(factors, 0.2, kronecker.to_grid_order(y, layout)),
                                     layout)
    np.testing.assert_allclose(mean, K @ scipy.linalg.solve(C, y, assume_a="pos"), rtol=1e-8, atol=1e-12)


def test_kron_matvec_equals_the_dense_kronecker_product():
    rng = np.random.default_rng(11)
    factors = [rng.normal(size=(3, 4)), rng.normal(size=(2, 2)), rng.normal(size=(5, 3))]
    v = rng.normal(size=(2, 24))
    dense = np.kron(np.kron(factors[0], factors[1]), factors[2])
    np.testing.assert_allclose(kronecker.kron_matvec(factors, v), v @ dense.T, rtol=1e-12)


def test_grid_layout_of_a_permuted_grid_puts_rows_in_grid_order():
    rng = np.random.default_rng(13)
    columns = shuffled_grid(rng, (4, 3, 2))
    layout = kronecker.grid_layout(columns)
    assert layout.shape == (4, 3, 2)
    mesh = np.meshgrid(*layout.axes, indexing="ij")
    for column, expected in zip(columns, mesh):
        np.testing.assert_array_equal(column[layout.order], expected.ravel())
    np.testing.assert_array_equal(kronecker.from_grid_order(kronecker.to_grid_order(columns[0], layout), layout),
                                  columns[0])


def test_grid_layout_refuses_partial_and_repeated_grids():
    rng = np.random.default_rng(17)
    t, x = shuffled_grid(rng, (4, 3))
    assert kronecker.grid_layout([t[1:], x[1:]]) is None
    repeated = [np.append(t[1:], t[2]), np.append(x[1:], x[2])]
    assert kronecker.grid_layout(repeated) is None
    assert kronecker.grid_layout([np.append(t, t[0]), np.append(x, x[0])]) is None
    assert kronecker.grid_layout([t, x[:-1]]) is None


def test_missing_outcomes_are_refused():
    with pytest.raises(DataError, match="2 missing entries"):
        kronecker.require_complete(np.array([1.0, np.nan, 2.0, np.nan]))
    kronecker.require_complete(np.array([1.0, 2.0]))


def test_prior_draws_have_the_kronecker_covariance():
    axes = [np.linspace(0.0, 2.0, 4), np.linspace(0.0, 1.0, 3)]
    factors = [RBF(VARIANCE, 0.9)(axes[0][:, None]), Matern32(1.0, 0.5)(axes[1][:, None])]
    K = np.kron(*[np.asarray(f) for f in factors])
    n_draws = 40000
    draws = np.asarray(kronecker.prior_draws(jax.random.PRNGKey(0), factors, n_draws))
    sample = draws.T @ draws / n_draws
    mcse = np.sqrt((K**2 + np.outer(np.diag(K), np.diag(K))) / n_draws)
    assert np.all(np.abs(sample - K) <= 4.5 * mcse)
