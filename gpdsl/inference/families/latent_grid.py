"""The view of a latent GP on a full grid with a separable kernel: a whitened latent vector and Kronecker factors.

``f ~ gp((t, x), rbf(t) * matern32(x))`` observed on every ``(t, x)`` of a grid has, with the rows in grid order,
``K = K_1 ⊗ K_2`` (:mod:`gpdsl.inference.families.grid` decides when). With ``L_d`` the Cholesky factor of each
``K_d``, ``f = (L_1 ⊗ L_2) v`` for ``v ~ N(0, I)``: the engines' sampled vector is ``v``, whose prior is the identity
whatever ``theta``, and the likelihood reads ``f`` computed from ``(theta, v)`` by :func:`kron_matvec
<gpdsl.inference.approximations.kronecker.kron_matvec>` in ``O(N sum n_d)``, never an ``N x N`` matrix.

Why the whitened vector rather than ``f`` itself: every update the latent-GP engines make needs the prior's factor
(ESS draws ``nu = L e``; SA evaluates ``N(f; 0, K)``; AA fixes ``L^-1 f``; SURR factorises ``I + L^T S^-1 L``). With
``v`` sampled, that factor is the identity (:attr:`GridLatent.white`), so ESS draws ``nu`` as standard normals, SA and
AA become the move of ``theta`` with ``v`` fixed (the ancillary update of ``f``), SURR's ``I + L^T S^-1 L = I + ⊗
L_d^T L_d / s`` is a Kronecker product (:mod:`gpdsl.inference.mcmc.grid_surrogate`), each at ``O(sum n_d^3 + N sum
n_d)`` per proposal, and ``pm``'s importance density is a Gaussian over ``v``
(:mod:`gpdsl.inference.approximations.kronecker_laplace`). Sampling ``f`` itself would need ``K^-1`` through the
small eigenvalues of smooth kernels' factors, which the whitened vector never divides by.

The factors carry the dense path's jitter ``j`` on the first one only, ``(K_1 + c I) ⊗ K_2 ⊗ ...`` with ``c = j /
prod_{d > 1} max diag K_d``: for a stationary kernel its diagonal is that of ``K + j I`` and its other entries differ
from ``K``'s by at most ``j``; a later factor gets jitter only where its Cholesky factorisation needs it.

Draws report ``f`` (the GP's values at the rows, mean included), as the dense view does.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from gpdsl.inference.approximations import kronecker
from gpdsl.inference.families.grid import grid_factors, separable_grid
from gpdsl.inference.families.latent_gp import LatentGP, latent_gp_view
from gpdsl.ir.family_forms import LatentGPFacts
from gpdsl.numerics import GP_JITTER
from gpdsl.numerics.linalg import cholesky_with_jitter, solve_triangular


@dataclass
class GridLatent(LatentGP):
    """A :class:`~gpdsl.inference.families.latent_gp.LatentGP` on a full grid whose sampled vector is the whitened
    ``v`` (grid order), ``f = (L_1 ⊗ ... ⊗ L_D) v`` in the rows' order (see the module docstring).

    Attributes
    ----------
    layout : GridLayout
        Where the rows sit on the grid.
    """

    layout: kronecker.GridLayout | None = None

    @property
    def white(self) -> bool:
        """The sampled vector's prior is ``N(0, I)`` at every ``theta``."""
        return True

    def prior_factor(self, theta) -> jax.Array:
        """The identity's factor held as its diagonal, ones (:mod:`gpdsl.inference.mcmc.prior_factor`)."""
        return jnp.ones((self.n,))

    @property
    def shape(self) -> tuple[int, ...]:
        """The grid's number of points per axis."""
        return self.layout.shape

    def factors(self, theta) -> list[jax.Array]:
        """``K_1 + c I, K_2, ..., K_D`` at ``theta`` (see the module docstring; traceable)."""
        points = self.jax_model.gp_inputs(self.node.statement, self.jax_model.data)
        factors = grid_factors(self.kernel(theta), points, self.layout)
        later = jnp.prod(jnp.asarray([jnp.max(jnp.diag(k)) for k in factors[1:]]))
        factors[0] = factors[0] + GP_JITTER / later * jnp.eye(factors[0].shape[0])
        return factors

    def roots(self, theta) -> list[jax.Array]:
        """The lower Cholesky factors ``L_d`` of :meth:`factors` (jitter added to a later one only where needed)."""
        return [cholesky_with_jitter(k)[0] for k in self.factors(theta)]

    def kernel(self, theta):
        """The GP's kernel at ``theta``."""
        return self.jax_model.gp_kernel(self.node.statement, self.environment(theta))

    def latent(self, theta, v, roots=None) -> jax.Array:
        """The centred ``f`` in the rows' order from the whitened ``v`` (grid order): ``(⊗ L_d) v``."""
        roots = self.roots(theta) if roots is None else roots
        return kronecker.from_grid_order(kronecker.kron_matvec(roots, v), self.layout)

    def image(self, theta):
        """The likelihood as a function of the centred ``f = (⊗ L_d) v``, with the factors computed once."""
        roots = self.roots(theta)

        def log_likelihood(f):
            return self.jax_model.log_terms(LatentGP.environment(self, theta, f), ("likelihood",))

        return (lambda v: self.latent(theta, v, roots)), log_likelihood

    def whiten(self, theta, f) -> jax.Array:
        """The whitened ``v`` (grid order) of a centred ``f`` in the rows' order: ``(⊗ L_d^-1) f``."""
        inverses = [solve_triangular(root, jnp.eye(root.shape[0]), lower=True) for root in self.roots(theta)]
        return kronecker.kron_matvec(inverses, kronecker.to_grid_order(f, self.layout))

    def environment(self, theta, f=None) -> dict:
        """Data, constrained hyperparameters and, given the whitened ``f`` (the sampled vector), the GP's values."""
        return super().environment(theta, None if f is None else self.latent(theta, f))

    def covariance(self, theta) -> jax.Array:
        """The sampled vector's prior covariance, the identity (``N x N``: the engines of this view never ask)."""
        return jnp.eye(self.n)

    def with_mean(self, theta_draws, f_draws) -> np.ndarray:
        """The GP's values ``f`` (mean included, rows' order) from the whitened draws, ``(chain, draw, n)``."""
        from gpdsl.inference.draw_map import over_draws

        return over_draws(lambda theta, v: self.latent(theta, v) + self.mean(theta), theta_draws, f_draws)

    def without_mean(self, theta_draws, f_draws) -> np.ndarray:
        """The whitened draws of reported ``f`` draws (the inverse of :meth:`with_mean`)."""
        from gpdsl.inference.draw_map import over_draws

        return over_draws(lambda theta, f: self.whiten(theta, f - self.mean(theta)), theta_draws, f_draws)

    def grid_likelihood_inputs(self, theta) -> tuple:
        """``(y, offset, args)`` in grid order: the observations, the likelihood's offset of ``f`` and its other
        parameters (each per-row one reordered, scalars kept), for the Laplace approximation over ``v``."""
        order = self.layout.order
        y = jnp.asarray(self.y, dtype=float)[order]
        offset = jnp.broadcast_to(self.location_offset(theta), (self.n,))[order]
        args = tuple(a if jnp.ndim(a) == 0 else jnp.broadcast_to(a, (self.n,))[order]
                     for a in self.likelihood_arguments(theta))
        return y, offset, args


def grid_layout_of(view: LatentGP) -> kronecker.GridLayout | None:
    """The grid of a latent-GP view's one latent vector when its prior covariance is a Kronecker product, else None
    (several latent vectors or a ``matrix`` latent are never one)."""
    if view.others or view.columns > 1:
        return None
    return separable_grid(view.jax_model, view.node.statement)


def on_grid(view: LatentGP) -> LatentGP:
    """``view`` as a :class:`GridLatent` where its latent GP sits on a full grid with a separable kernel
    (:func:`grid_layout_of`); ``view`` itself otherwise."""
    layout = grid_layout_of(view)
    if layout is None:
        return view
    return GridLatent(view.jax_model, view.node, view.theta_blocks, view.theta_dim, view.n, view.likelihood, view.y,
                      view.others, layout)


def grid_latent_view(model, data: dict, facts: LatentGPFacts, allow_external: bool = False) -> LatentGP:
    """The :class:`GridLatent` of a latent-GP model whose GP sits on a full grid with a separable kernel; the dense
    :class:`~gpdsl.inference.families.latent_gp.LatentGP` otherwise."""
    return on_grid(latent_gp_view(model, data, facts, allow_external=allow_external))
