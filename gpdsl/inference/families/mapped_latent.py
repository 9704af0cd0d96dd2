"""A latent GP sampled through standard normal weights: ``f = M_theta z + m(x)``, ``z ~ N(0, I)`` whatever ``theta``.

The Hilbert-space approximation (``z`` the basis weights, :mod:`gpdsl.inference.families.hsgp`) and a state-space GP
(``z`` the innovations, :mod:`gpdsl.inference.families.state_space_latent`) are both of this form. To the latent-GP
engines the sampled vector is ``z``: its prior factor is the identity's diagonal (:mod:`gpdsl.inference.mcmc.
prior_factor`), the likelihood reads ``f``, and because ``M_theta`` is linear, elliptical slice sampling applies it once
per step rather than once per point it tries (:meth:`MappedLatent.image`, :func:`~gpdsl.inference.mcmc.ess.
mapped_ess_step`). A draw holds ``z`` under ``<f>_z`` and ``f`` beside it.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass

import jax.numpy as jnp
import numpy as np

from gpdsl.inference.families.latent_gp import LatentGP
from gpdsl.ir.family_forms import LatentGPFacts


@dataclass
class MappedLatent(LatentGP, abc.ABC):
    """A :class:`~gpdsl.inference.families.latent_gp.LatentGP` whose sampled vector ``z`` (``n`` standard normals) gives
    the GP's values at the ``points`` training inputs by a linear map plus the GP's mean.

    Subclasses say how (:meth:`values`) and where (:attr:`points`).

    Attributes
    ----------
    facts : LatentGPFacts
        The family's facts: the node and its likelihood.
    """

    facts: LatentGPFacts | None = None

    @property
    def weights(self) -> str:
        """The free variable of the sampled vector, ``<f>_z``."""
        return self.name + "_z"

    @property
    @abc.abstractmethod
    def points(self) -> int:
        """The number of training inputs (the length of ``f``)."""

    @abc.abstractmethod
    def values(self, z, env) -> jnp.ndarray:
        """``M_theta z`` plus the GP's mean, with ``theta`` read from ``env`` (traceable)."""

    @property
    def has_mean(self) -> bool:
        """The sampled vector has a zero mean (the GP's mean is added to ``f`` in :meth:`environment`)."""
        return False

    def mean(self, theta, env=None) -> jnp.ndarray:
        return jnp.zeros((self.n,))

    def environment(self, theta, f=None) -> dict:
        """Data, constrained hyperparameters and, given the sampled vector ``f``, it and the GP's values by name."""
        env = {**self.jax_model.data, **self.theta_values(theta)}
        if f is not None:
            env[self.weights] = f
            env[self.name] = self.values(f, env)
        return env

    def covariance(self, theta) -> jnp.ndarray:
        """The sampled vector's prior covariance, the identity."""
        return jnp.eye(self.n)

    def prior_factor(self, theta) -> jnp.ndarray:
        """The identity's factor as its diagonal, ``n`` ones: ESS draws ``n`` standard normals and the hyperparameter
        updates never form an ``n x n`` matrix."""
        return jnp.ones((self.n,))

    def latent(self, theta, z) -> jnp.ndarray:
        """``f`` at the training inputs (the GP's mean included) from ``(theta, z)`` (traceable)."""
        return self.environment(theta, z)[self.name]

    def image(self, theta):
        """The likelihood as a function of ``M_theta z``: ``(apply, log_likelihood)`` with ``apply(v) = M_theta v``
        (linear) and ``log_likelihood(g) = log p(y | f = g + m, theta)``, what
        :func:`~gpdsl.inference.mcmc.ess.mapped_ess_step` searches the ellipse with."""
        env = self.environment(theta)
        mean = jnp.broadcast_to(self.jax_model.gp_mean(self.node.statement, env), (self.points,))

        def apply(v):
            return self.values(v, env) - mean

        def log_likelihood(g):
            return self.jax_model.log_terms({**env, self.name: g + mean}, ("likelihood",))

        return apply, log_likelihood

    def with_mean(self, theta_draws, f_draws) -> np.ndarray:
        """The sampled vector's draws and ``f``'s beside them, ``(chain, draw, n + points)`` (what :meth:`split`
        names)."""
        from gpdsl.inference.draw_map import over_draws

        return np.concatenate([np.asarray(f_draws), over_draws(self.latent, theta_draws, f_draws)], axis=-1)

    def split(self, values) -> dict:
        """``<f>_z`` and, when present (:meth:`with_mean`), ``f`` from the last axis."""
        out = {self.weights: values[..., :self.n]}
        if np.shape(values)[-1] > self.n:
            out[self.name] = values[..., self.n:]
        return out

    def stack(self, values: dict):
        return np.asarray(values[self.weights])

    @property
    def mapped(self) -> bool:
        """The likelihood reads the sampled vector through a linear map (:meth:`likelihood_map`)."""
        return True

    def location_offset(self, theta) -> jnp.ndarray:
        """What the likelihood's latent argument adds to ``M z`` (:meth:`likelihood_map`), shape ``(points,)``: the
        GP's mean plus the likelihood's offset (``log_exposure`` of ``poisson_log(log_exposure + f)``).

        Raises
        ------
        MethodError
            The latent argument is not ``f`` plus terms free of it.
        """
        self.require_offset_form()
        env = self.environment(theta)
        at_zero = jnp.asarray(self.latent_argument_at_zero(theta), dtype=float)
        return jnp.broadcast_to(at_zero + self.jax_model.gp_mean(self.node.statement, env), (self.points,))

    @property
    def free_names(self) -> list[str]:
        """The free variables a draw holds, in the lowered model's order."""
        return [block.name for block in self.jax_model.blocks]

    def mean_at(self, free: dict, X_new):
        """The GP's mean at new inputs for one draw ``free`` of every free variable (0 without ``mean =``).

        Raises
        ------
        MethodError
            The mean reads per-observation data, which has no values at new inputs.
        """
        return self.mean_in({**self.jax_model.data, **free}, X_new)
