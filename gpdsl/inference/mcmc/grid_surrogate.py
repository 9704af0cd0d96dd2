"""SURR's target for a latent GP on a grid, by Kronecker algebra over the whitened vector.

The surrogate-data update (:func:`~gpdsl.inference.mcmc.hyper_updates.surr_step`) needs, for ``K = L L^T`` and ``S =
s I``, the factor ``L_C`` of ``C = I + L^T S^-1 L``. On a grid (:mod:`gpdsl.inference.families.latent_grid`) ``L =
A = ⊗ L_d``, so ``C = I + (⊗ L_d^T L_d) / s = P diag(1 + mu / s) P^T`` with ``L_d^T L_d = P_d diag(mu_d) P_d^T``
(one ``n_d x n_d`` eigendecomposition per axis, ``P = ⊗ P_d``, ``mu = ⊗ mu_d``). Its factor ``L_C = P diag(c)``, ``c =
(1 + mu / s)^1/2 >= 1``, is not triangular but any factor ``C = L_C L_C^T`` that is a function of ``theta`` alone gives
a valid update (Murray & Adams 2010): with ``a = L_C^-1 L^T g / s``, the chain's whitened ``v = L^-1 f`` and ``eta =
L_C^T v - a``, the new point is ``v' = L_C'^-T (a' + eta) = P' diag(1 / c') (a' + eta)``, and ``log N(g; 0, K + S) =
-(|g|^2 / s - |a|^2 + N log s + 2 sum(log c) + N log 2 pi) / 2``. Every piece costs ``O(sum n_d^3 + N sum n_d)`` and
nothing divides by ``K``'s small eigenvalues (``c >= 1``).
"""

from __future__ import annotations

import math

import jax.numpy as jnp

from gpdsl.inference.approximations.kronecker import kron_matvec
from gpdsl.inference.mcmc.latent_position import LatentPosition
from gpdsl.numerics.linalg import eigh


def _outer(vectors):
    result = jnp.ones(())
    for v in vectors:
        result = result[..., None] * v
    return jnp.ravel(result)


class GridSurrogateData:
    """SURR's target at fixed surrogate data ``g`` (grid order) and ``eta`` for a
    :class:`~gpdsl.inference.families.latent_grid.GridLatent` (the interface of
    :class:`~gpdsl.inference.mcmc.hyper_updates.SurrogateData`).

    Parameters
    ----------
    problem : GridLatent
    surrogate_variance : float
        ``s`` of ``S = s I`` (a vector or a function of ``theta`` would break the Kronecker structure).
    """

    def __init__(self, problem, surrogate_variance):
        if callable(surrogate_variance) or jnp.ndim(surrogate_variance) != 0:
            raise ValueError("SURR on a grid takes one surrogate variance for every point (a scalar)")
        self.problem = problem
        self.s = jnp.asarray(surrogate_variance, dtype=jnp.float64)

    def spectrum(self, theta):
        """``(L_d, P_d, c)`` at ``theta``."""
        roots = self.problem.roots(theta)
        values, vectors = zip(*(eigh(root.T @ root) for root in roots))
        return roots, vectors, jnp.sqrt(1.0 + jnp.maximum(_outer(values), 0.0) / self.s)

    def whitening(self, g, roots, vectors, c):
        """``a = L_C^-1 L^T g / s`` and ``log N(g; 0, K + s I)``."""
        a = kron_matvec([p.T for p in vectors], kron_matvec([r.T for r in roots], g)) / self.s / c
        n = g.shape[0]
        log_density = -0.5 * (g @ g / self.s - a @ a + n * jnp.log(self.s) + 2.0 * jnp.sum(jnp.log(c))
                              + n * math.log(2.0 * math.pi))
        return a, log_density

    def fix(self, noise, position):
        """``g = L v + s^1/2 noise``; ``g``, ``eta`` and the log target at the current point."""
        roots, vectors, c = self.spectrum(position.theta)
        g = kron_matvec(roots, position.f) + jnp.sqrt(self.s) * noise
        a, log_density = self.whitening(g, roots, vectors, c)
        eta = c * kron_matvec([p.T for p in vectors], position.f) - a
        return g, eta, self.problem.log_prior(position.theta) + log_density + position.loglik

    def evaluate(self, theta, g, eta):
        """Log target and the position (whitened ``v``, the identity's diagonal as its factor) at ``theta`` with ``g`` and ``eta`` fixed."""
        roots, vectors, c = self.spectrum(theta)
        a, log_density = self.whitening(g, roots, vectors, c)
        v = kron_matvec(vectors, (a + eta) / c)
        loglik = self.problem.log_likelihood(v, theta)
        log_target = self.problem.log_prior(theta) + log_density + loglik
        position = LatentPosition(theta, v, self.problem.prior_factor(theta), loglik)
        return jnp.where(jnp.isnan(log_target), -jnp.inf, log_target), position
