"""The LKJ prior on the Cholesky factor of a correlation matrix (Lewandowski, Kurowicka & Joe 2009)."""

from __future__ import annotations

import math

from gpdsl.priors.base import Prior, lpdf


def lkj_log_normaliser(eta, K: int):
    """``log c_K(eta)``: the LKJ density of a ``K x K`` correlation matrix is ``det(R)^(eta - 1) / c_K(eta)``.

    ``c_K(eta) = prod_{k=1}^{K-1} [2^(2 b_k - 1) B(b_k, b_k)]^(K-k)`` with ``b_k = eta + (K - k - 1) / 2``
    (Lewandowski, Kurowicka & Joe 2009, eq. 16), the constant Stan's ``lkj_corr_cholesky_lpdf`` includes.
    """
    import jax.numpy as jnp
    from jax.scipy.special import gammaln

    total = jnp.zeros(())
    for k in range(1, K):
        b = eta + (K - k - 1) / 2.0
        log_beta = 2 * gammaln(b) - gammaln(2 * b)
        total = total + (K - k) * ((2 * b - 1) * math.log(2.0) + log_beta)
    return total


def _log_density(L, eta):
    """``log p(L | eta) = -log c_K(eta) + sum_{k=2}^K (K - k + 2 eta - 2) log L_kk`` (Stan's formula)."""
    import jax.numpy as jnp

    K = L.shape[-1]
    k = jnp.arange(2, K + 1)
    log_diagonal = jnp.log(jnp.diagonal(L, axis1=-2, axis2=-1)[..., 1:])
    return jnp.sum((K - k + 2 * eta - 2) * log_diagonal, axis=-1) - lkj_log_normaliser(eta, K)


def _sample(key, shape, eta):
    """A draw by the onion method: row ``k + 1`` of ``L`` is ``(sqrt(y) u, sqrt(1 - y))`` with
    ``y ~ Beta(k/2, eta + (K - 1 - k)/2)`` and ``u`` uniform on the unit sphere in ``R^k``."""
    import jax
    import jax.numpy as jnp

    K = shape[-1]
    L = jnp.zeros((K, K)).at[0, 0].set(1.0)
    keys = jax.random.split(key, 2 * max(K - 1, 1))
    for k in range(1, K):
        y = jax.random.beta(keys[2 * k - 2], k / 2.0, eta + (K - 1 - k) / 2.0)
        u = jax.random.normal(keys[2 * k - 1], (k,))
        u = u / jnp.linalg.norm(u)
        L = L.at[k, :k].set(jnp.sqrt(y) * u).at[k, k].set(jnp.sqrt(1.0 - y))
    return L


def _stan(x, args, count):
    return lpdf("lkj_corr_cholesky", x, [args["eta"][0]])


LKJ_CORR_CHOLESKY = Prior(
    "lkj_corr_cholesky", ("eta",),
    "the Cholesky factor L of a correlation matrix L L' with density proportional to det(L L')^(eta - 1); "
    "eta = 1 is uniform over correlation matrices, a larger eta favours weaker correlations",
    log_density=_log_density, sample=_sample, stan=_stan, support="cholesky_corr",
    arg_support={"eta": "positive"})
"""The LKJ prior of a ``cholesky_factor_corr[K]`` parameter (Stan's ``lkj_corr_cholesky``)."""
