"""What one pseudo-marginal estimate of ``log p(y | theta)`` gives the chain: the estimate and the selected draw."""

from __future__ import annotations

from typing import NamedTuple

import jax


class LatentSelection(NamedTuple):
    """The ``f`` an estimate selected, kept with it in the chain's state.

    Attributes
    ----------
    f : jax.Array, shape (n,)
        The selected importance draw (MCMC-EP: one draw of ``q``).
    loglik : jax.Array, shape ()
        ``log p(y | f, theta)``.
    chol_k : jax.Array, shape (n, n) or (n,)
        Lower Cholesky factor of ``K(theta)``, or the diagonal of a diagonal one (the view's ``prior_factor``), for
        the elliptical slice refresh (empty when latent sampling is off).
    """

    f: jax.Array
    loglik: jax.Array
    chol_k: jax.Array


class Estimate(NamedTuple):
    """One estimate of ``log p(y | theta)`` with what the chain keeps of it.

    Attributes
    ----------
    log_marginal : jax.Array, shape ()
        ``log p_hat(y | theta)`` (or the approximation's log marginal, for MCMC-EP).
    selection : LatentSelection
        The selected draw of ``f``.
    sites : jax.Array, shape (2, n)
        EP's site precisions and locations (zeros for Laplace): reference sites to warm-start from.
    converged : jax.Array, shape (), bool
        Whether the approximation met its convergence criterion.
    iterations : jax.Array, shape (), int
        Newton iterations or EP sweeps.
    cubic_ops : jax.Array, shape (), int
        ``O(n^3)`` operations spent.
    """

    log_marginal: jax.Array
    selection: LatentSelection
    sites: jax.Array
    converged: jax.Array
    iterations: jax.Array
    cubic_ops: jax.Array
