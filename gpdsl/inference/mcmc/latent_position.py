"""Where a latent-GP chain stands: hyperparameters, latent values and what is cached at them."""

from __future__ import annotations

from typing import NamedTuple

import jax


class LatentPosition(NamedTuple):
    """Hyperparameters, latent values and what is cached at them.

    Attributes
    ----------
    theta : jax.Array, shape (theta_dim,)
        Unconstrained hyperparameters.
    f : jax.Array, shape (n,)
        Latent GP values.
    chol_K : jax.Array, shape (n, n) or (n,)
        Lower Cholesky factor of ``K(theta)``, or the diagonal of a diagonal one (the view's
        :meth:`~gpdsl.inference.families.latent_gp.LatentGP.prior_factor`).
    loglik : jax.Array
        ``log p(y | f, theta)``.
    """

    theta: jax.Array
    f: jax.Array
    chol_K: jax.Array
    loglik: jax.Array
