"""The view of a Hilbert-space approximate GP under a normal likelihood that ``ml`` works on: the weights integrated out.

``f = A z + m`` with ``A = PHI diag(sqrt(S_theta(omega)))`` (``N x M``) and ``z ~ N(0, I_M)``, and ``y ~ N(f, D)`` with
``D = diag(s^2)``, so ``y ~ N(m, A A^T + D)``. By the Woodbury identity and the determinant lemma, with
``P = I_M + A^T D^-1 A = L L^T`` and ``r = y - m``,

    log p(y | theta) = -(r^T D^-1 r - |L^-1 A^T D^-1 r|^2 + log|D| + 2 log|L| + N log(2 pi)) / 2,

``O(N M^2)`` and no ``N x N`` matrix. Given ``theta`` the weights' posterior is ``N(P^-1 A^T D^-1 r, P^-1)``, and
``f`` at new inputs ``X*`` is Gaussian with mean ``A* E[z] + m(X*)`` and covariance ``A* P^-1 A*^T``.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax.numpy as jnp

from gpdsl.errors import MethodError
from gpdsl.inference.approximations.weight_space import linear_map
from gpdsl.inference.families.hsgp import HSGPLatent, hsgp_view
from gpdsl.inference.families.hyperparameters import NormalObservations, complete_outputs
from gpdsl.ir.family_forms import LatentGPFacts
from gpdsl.numerics.linalg import cho_solve, cholesky, solve_triangular


@dataclass
class HSGPRegression(HSGPLatent, NormalObservations):
    """An HSGP observed through ``normal(offset + f, s)``, its weights integrated out (see the module docstring)."""

    @property
    def observed_gp(self):
        """The HSGP (observed through ``normal``)."""
        return self.node

    @property
    def target(self) -> str:
        """The observed outputs' name."""
        return self.facts.target

    @property
    def complete(self) -> bool:
        """Every output is observed (the view refuses missing ones)."""
        return True

    def _pieces(self, theta):
        A = linear_map(self.likelihood_operator(theta))
        noise = jnp.broadcast_to(self.noise_variance(theta), (A.shape[0],))
        residual = jnp.asarray(self.y, dtype=float) - self.location_offset(theta)
        L = cholesky(jnp.eye(A.shape[1], dtype=residual.dtype) + A.weighted(1.0 / noise))
        return A, noise, residual, L

    def log_marginal(self, theta):
        """``log N(y; m, A A^T + D)`` by the Woodbury identity (traceable; see the module docstring)."""
        A, noise, residual, L = self._pieces(theta)
        v = solve_triangular(L, A.rmatvec(residual / noise), lower=True)
        quadratic = jnp.sum(residual ** 2 / noise) - v @ v
        log_det = jnp.sum(jnp.log(noise)) + 2.0 * jnp.sum(jnp.log(jnp.diag(L)))
        return -0.5 * (quadratic + log_det + residual.shape[0] * jnp.log(2.0 * jnp.pi))

    def weights_posterior(self, theta):
        """The weights' posterior given ``theta``: its mean ``(M,)`` and the lower Cholesky factor of its precision
        ``P`` ``(M, M)``."""
        A, noise, residual, L = self._pieces(theta)
        return cho_solve((L, True), A.rmatvec(residual / noise)), L

    def predictive(self, theta, X_new, full: bool = False):
        """``f*`` at new inputs given ``theta``: its mean ``(m,)`` and covariance ``(m, m)`` (``full``) or variances
        ``(m,)``; and the noise variance, a scalar.

        Raises
        ------
        MethodError
            The noise or the likelihood's offset has one value per training observation (none at new inputs).
        """
        noise = self.noise_variance(theta)
        offset = self.latent_argument_at_zero(theta)
        if jnp.ndim(noise) or jnp.ndim(offset):
            raise MethodError(f"predictions of '{self.target}' at new inputs need a noise scale and a location "
                              "offset free of per-observation data", self.node.likelihood.span)
        mean_z, L = self.weights_posterior(theta)
        phi_new = jnp.asarray(self.basis.at(X_new))
        free = {**self.theta_values(theta), self.weights: mean_z}
        mean = self.values_at(free, phi_new, X_new)
        kernel = self.jax_model.gp_kernel(self.node.statement, self.environment(theta))
        A_new = phi_new * jnp.sqrt(self.basis.weight_variances(kernel))[None, :]
        V = solve_triangular(L, A_new.T, lower=True)
        covariance = V.T @ V if full else jnp.sum(V ** 2, axis=0)
        return mean, covariance, noise, offset


def hsgp_regression_view(model, data: dict, facts: LatentGPFacts) -> HSGPRegression:
    """The :class:`HSGPRegression` of an HSGP model under a normal likelihood (``facts``).

    Raises
    ------
    MethodError
        An output is missing.
    """
    view = hsgp_view(model, data, facts)
    complete_outputs(view.jax_model, view.node, "ml on an HSGP needs every output observed")
    return HSGPRegression(view.jax_model, view.node, view.theta_blocks, view.theta_dim, view.n, view.likelihood,
                          view.y, view.others, view.facts)
