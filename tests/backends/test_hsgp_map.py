"""``A^T diag(w) A`` and ``diag(A V A^T)`` of an HSGP's Laplacian basis summed from cosines
(:mod:`gpdsl.backends.jax.hsgp_map`) against the products of the basis matrix itself."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gpdsl.backends.jax.hsgp import HSGPBasis
from gpdsl.numerics.hsgp import basis_indices, eigenfunctions, frequencies, hsgp_box

jax.config.update("jax_enable_x64", True)


def basis_on(X, m, c=1.3):
    indices = basis_indices(m)
    centre, L = hsgp_box(X, c)
    angles = (X - centre + L) * np.pi / (2.0 * L)
    return HSGPBasis(indices, centre, L, frequencies(indices, L), eigenfunctions(X, centre, L, indices), angles)


@pytest.mark.parametrize("m", [(9,), (6, 4), (3, 4, 2), (2, 3, 2, 2)])
def test_the_cosine_sums_are_the_basis_products(m):
    rng = np.random.default_rng(len(m))
    X = rng.uniform(-2.0, 3.0, size=(60, len(m))) * np.arange(1, len(m) + 1)
    basis = basis_on(X, m)
    scale = rng.uniform(0.1, 2.0, size=basis.size)
    operator = basis.linear_map(scale)
    A = basis.phi * scale
    w = rng.uniform(0.0, 4.0, size=len(X))
    np.testing.assert_allclose(operator.weighted(jnp.asarray(w)), A.T @ (w[:, None] * A), rtol=0, atol=1e-12)
    V = rng.normal(size=(basis.size, basis.size))
    np.testing.assert_allclose(operator.diagonal(jnp.asarray(V)), np.einsum("nj,jk,nk->n", A, V, A), rtol=0,
                               atol=1e-12)
    z, v = rng.normal(size=basis.size), rng.normal(size=len(X))
    np.testing.assert_allclose(operator.matvec(jnp.asarray(z)), A @ z, rtol=1e-13)
    np.testing.assert_allclose(operator.rmatvec(jnp.asarray(v)), A.T @ v, rtol=1e-13)


def test_the_map_is_traced_with_the_scale_and_weights():
    X = np.random.default_rng(0).uniform(size=(40, 2))
    basis = basis_on(X, (5, 5))

    @jax.jit
    def total(scale, w):
        return jnp.sum(basis.linear_map(scale).weighted(w))

    scale, w = jnp.linspace(0.5, 1.5, basis.size), jnp.linspace(0.0, 1.0, 40)
    A = basis.phi * np.asarray(scale)
    assert float(total(scale, w)) == pytest.approx(float(np.sum(A.T @ (np.asarray(w)[:, None] * A))), rel=1e-12)
    gradient = jax.grad(total, argnums=1)(scale, w)
    np.testing.assert_allclose(gradient, np.sum(A, axis=1) ** 2, rtol=1e-10)
