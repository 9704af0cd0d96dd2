"""The Student-t process's exact marginal (Shah, Wilson & Ghahramani 2014), the noise inside its kernel.

``y ~ MVT(nu, 0, C)`` with covariance ``C = K + s^2 I`` (``nu > 2``), i.e. Stan's ``multi_student_t(nu, 0, S)``
with scale matrix ``S = (nu - 2) / nu * C``. With ``beta = y' C^-1 y``::

    log p(y) = lgamma((nu + n) / 2) - lgamma(nu / 2) - n/2 log((nu - 2) pi) - 1/2 log|C|
               - (nu + n) / 2 log(1 + beta / (nu - 2))
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from gpdsl.numerics.linalg import solve_triangular


def student_t_process_log_marginal(residual, L, nu) -> jax.Array:
    """``log MVT(residual; nu, 0, C)`` with covariance ``C = L L'`` (not the scale matrix), ``nu > 2``.

    Parameters
    ----------
    residual : array (n,)
        The observations less the process's mean (zero).
    L : array (n, n)
        Lower Cholesky factor of the covariance ``K + s^2 I``.
    nu : float
        Degrees of freedom, above 2.
    """
    n = L.shape[0]
    alpha = solve_triangular(L, residual, lower=True)
    beta = alpha @ alpha
    return (jax.scipy.special.gammaln((nu + n) / 2) - jax.scipy.special.gammaln(nu / 2)
            - 0.5 * n * jnp.log((nu - 2) * jnp.pi) - jnp.sum(jnp.log(jnp.diag(L)))
            - 0.5 * (nu + n) * jnp.log1p(beta / (nu - 2)))
