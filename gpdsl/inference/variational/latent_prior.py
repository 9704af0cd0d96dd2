"""KL terms of the prior on the latent inputs, subtracted from the collapsed bound.

The Bayesian GPLVM (Damianou, Titsias & Lawrence 2016, Sec. 3.3.1) uses a factorised Gaussian
``q(X) = prod_n N(mu_n, diag(S_n))`` against the standard normal prior ``p(X)``. The dynamical GPLVM
(Sec. 3.3.2) will add here the KL term of a GP prior over time, with the reparametrised ``q(X)``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


def kl_standard_normal(mean, variance) -> jax.Array:
    """``KL(prod N(mean, variance) || N(0, 1))`` summed over all entries.

    Parameters
    ----------
    mean : array_like
        Variational means.
    variance : array_like
        Variational variances (positive), same shape as ``mean``.

    Returns
    -------
    jax.Array
        ``0.5 * sum(variance + mean^2 - 1 - log(variance))``.
    """
    mean = jnp.asarray(mean)
    variance = jnp.asarray(variance)
    return 0.5 * jnp.sum(variance + mean * mean - 1.0 - jnp.log(variance))
