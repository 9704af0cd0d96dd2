"""The LKJ prior on Cholesky factors of correlation matrices and Stan's Cholesky-correlation bijector.

- the density over 2 x 2 factors is SciPy's Beta(eta, eta) of (1 + r) / 2, halved (r the correlation);
- over 3 x 3 factors the density times the bijector's Jacobian integrates to one over the unconstrained space
  (Gauss-Legendre on the partial correlations), for a uniform and a non-uniform eta: the normalising constant,
  Stan's formula and the log-Jacobian together;
- the log-Jacobian equals log |det| of a finite-difference Jacobian of the map to the strict lower triangle;
- onion draws have the LKJ marginals: every correlation r_ij of L L' is (2 Beta(b, b) - 1), b = eta + (K - 2) / 2;
- the Stan form is ``lkj_corr_cholesky_lpdf(L | eta)`` on a ``cholesky_factor_corr[K]`` parameter, which stanc
  accepts.
"""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

import gpdsl.numerics.float64  # noqa: F401
from gpdsl.api import check_text
from gpdsl.backends.jax.bijectors import cholesky_corr_constrain, cholesky_corr_unconstrain
from gpdsl.backends.stan.codegen import generate_stan
from gpdsl.backends.stan.stanc import check_program
from gpdsl.priors import PRIORS

LKJ = PRIORS["lkj_corr_cholesky"]


@pytest.mark.parametrize("eta", [0.7, 1.0, 3.5])
def test_two_by_two_density_is_a_beta_of_the_correlation(eta):
    for r in (-0.93, -0.2, 0.0, 0.61):
        L = jnp.array([[1.0, 0.0], [r, np.sqrt(1 - r**2)]])
        reference = stats.beta.logpdf((1 + r) / 2, eta, eta) - np.log(2)
        np.testing.assert_allclose(LKJ.log_density(L, eta), reference, rtol=1e-12)


@pytest.mark.parametrize("eta", [1.0, 2.5])
def test_three_by_three_density_with_the_jacobian_integrates_to_one(eta):
    nodes, weights = np.polynomial.legendre.leggauss(48)
    w = np.array(list(itertools.product(nodes, repeat=3)))
    weight = np.prod(np.array(list(itertools.product(weights, repeat=3))), axis=1)

    def integrand(partial):
        z = jnp.arctanh(partial)
        L, log_jacobian = cholesky_corr_constrain(z, 3)
        return jnp.exp(LKJ.log_density(L, eta) + log_jacobian - jnp.sum(jnp.log1p(-jnp.square(partial))))

    total = float(jnp.sum(jax.vmap(integrand)(jnp.asarray(w)) * weight))
    assert abs(total - 1.0) < 1e-4, total  # Gauss-Legendre converges slowly at the square-root edges


def strict_lower(L):
    K = L.shape[0]
    return jnp.stack([L[i, j] for i in range(1, K) for j in range(i)])


def test_log_jacobian_matches_a_finite_difference_jacobian():
    K, eps = 4, 1e-6
    rng = np.random.default_rng(0)
    for _ in range(3):
        z = rng.normal(size=K * (K - 1) // 2)
        L, log_jacobian = cholesky_corr_constrain(jnp.asarray(z), K)
        columns = [(np.asarray(strict_lower(cholesky_corr_constrain(jnp.asarray(z + eps * e), K)[0]))
                    - np.asarray(strict_lower(cholesky_corr_constrain(jnp.asarray(z - eps * e), K)[0]))) / (2 * eps)
                   for e in np.eye(len(z))]
        np.testing.assert_allclose(log_jacobian, np.linalg.slogdet(np.column_stack(columns))[1], rtol=1e-7, atol=1e-8)
        L = np.asarray(L)
        np.testing.assert_allclose(np.sum(L**2, axis=1), 1.0, rtol=1e-14)
        assert np.all(np.triu(L, 1) == 0) and np.all(np.diag(L) > 0)
        np.testing.assert_allclose(cholesky_corr_unconstrain(L), z, rtol=1e-10, atol=1e-12)


def test_onion_draws_have_the_lkj_marginals():
    K, eta, draws = 4, 1.5, 20_000
    keys = jax.random.split(jax.random.PRNGKey(3), draws)
    L = np.asarray(jax.jit(jax.vmap(lambda key: LKJ.sample(key, (K, K), eta)))(keys))
    R = np.einsum("nij,nkj->nik", L, L)
    np.testing.assert_allclose(np.diagonal(R, axis1=1, axis2=2), 1.0, rtol=1e-12)
    b = eta + (K - 2) / 2
    for i, j in itertools.combinations(range(K), 2):
        r = R[:, i, j]
        assert stats.kstest((1 + r) / 2, stats.beta(b, b).cdf).pvalue > 1e-4, (i, j)
        assert abs(np.mean(r**2) - 1 / (2 * b + 1)) < 5 * np.std(r**2) / np.sqrt(draws), (i, j)
    assert np.all(np.isfinite(jax.vmap(lambda m: LKJ.log_density(m, eta))(jnp.asarray(L[:100]))))


def test_stan_form_on_a_cholesky_factor_corr_parameter():
    model, _ = check_text("""
    data { int N; int K; vector[N] y; }
    parameters { cholesky_factor_corr[K] L ~ lkj_corr_cholesky(2.5); real<lower=0> s ~ half_normal(1); }
    model { y ~ normal(L[2, 1], s); }
    """)
    code = generate_stan(model).code
    assert "cholesky_factor_corr[K] L;" in code
    assert "target += lkj_corr_cholesky_lpdf(L | 2.5);" in code
    check_program(code)
