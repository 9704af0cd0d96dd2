"""Elliptical slice sampling of hyperparameters in z-space (Tegner et al. 2018, Sec. 2.4).

Under a scaled-sigmoid-normal hyperprior (``scaled_sigmoid_normal``, eq. 9) gpdsl's unconstrained
coordinate of a parameter is its ``z`` and the prior there is Gaussian, so ESS can move the
hyperparameters with that Gaussian as the ellipse's prior. The hyperparameters split into ``kappa``
(those the GP's kernel or inputs read) and ``alpha`` (the rest: likelihood parameters). Three updates:

- :func:`sdss_update`: surrogate-data slice sampling of ``kappa`` (Murray & Adams 2010) with ESS in
  z-space on ``N(z) N(g; 0, K_z + S) p(y | f(z), alpha)``, ``f(z) = chol(R_z) eta + m_{z,g}``;
- :func:`fixed_nu_update`: ``nu = L^{-1}(f - m)`` fixed, ESS in z-space on ``N(z) p(y | L_z nu + m_z)``
  (eq. 11), for a GP prior with a mean (the sequential sampler's conditional prior);
- :func:`alpha_update`: ``f`` fixed, ESS in z-space on ``N(z) p(y | f, alpha(z))``.

When the Gaussian over z couples kappa and alpha (the sequential sampler's moment-matched ``q``), each
update uses the conditional Gaussian of its block given the other.
"""

from __future__ import annotations

from functools import partial
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from gpdsl.errors import MethodError
from gpdsl.inference.mcmc.ess import ess_step
from gpdsl.inference.mcmc.hyper_updates import HyperInfo, LatentPosition, SurrogateVariance, SurrogateData
from gpdsl.ir.structure import statement_refs
from gpdsl.numerics.linalg import cholesky, solve_triangular
from gpdsl.priors import PRIORS

_BOUNDS_KINDS = ("bounds", "unbounded", "positive")
"""The bounds a prior Gaussian in z-space can need (:attr:`gpdsl.priors.ZSpace.bounds`), in the order the
advice lists them."""

Z_PRIORS = tuple(sorted((name for name, prior in PRIORS.items() if prior.z_space is not None),
                        key=lambda name: _BOUNDS_KINDS.index(PRIORS[name].z_space.bounds)))
"""The priors Gaussian in z-space on a parameter with the right bounds (:attr:`gpdsl.priors.Prior.z_space`)."""

_ADVICE = "give it one of: " + "; ".join(f"{PRIORS[name].signature} {PRIORS[name].z_space.requirement}".rstrip()
                                         for name in Z_PRIORS)


class ZPrior(NamedTuple):
    """A Gaussian over the unconstrained hyperparameters ``z``: ``N(mean, cov)``."""

    mean: jax.Array
    cov: jax.Array


class Split(NamedTuple):
    """Positions in ``theta`` of the kernel's hyperparameters (``kappa``) and of the others (``alpha``)."""

    kappa: np.ndarray
    alpha: np.ndarray


def z_prior(problem, method: str) -> ZPrior:
    """The model's hyperprior as a Gaussian in z-space (diagonal).

    Each parameter needs a prior that is Gaussian on gpdsl's unconstrained scale (:data:`Z_PRIORS`, each on
    a parameter with the bounds its :attr:`gpdsl.priors.Prior.z_space` names): ``scaled_sigmoid_normal``
    (bounds as declared), ``normal`` on an unbounded parameter, or ``lognormal`` on one declared
    ``<lower=0>``; its arguments must be known before the run.

    Raises
    ------
    MethodError
        At the first prior that is not of these forms.
    """
    priors = problem.jax_model.model.priors()
    means, sds = [], []
    for block in problem.theta_blocks:
        statement = priors[block.name]
        distribution = statement.distribution
        prior = PRIORS.get(distribution.name)
        z_space = None if prior is None else prior.z_space
        kind = _bounds_kind(block)
        if z_space is None or z_space.bounds != kind:
            raise MethodError(
                f"{method} runs elliptical slice sampling in z-space and needs a prior that is Gaussian on the "
                f"unconstrained scale; '{block.name}' has {distribution.name}"
                + ("" if z_space is None else f" on a parameter with {kind} bounds"),
                statement.span, _ADVICE)
        try:
            mu, sigma = (problem.jax_model.evaluate(distribution.arg(name), problem.jax_model.data)
                         for name in (z_space.mean, z_space.sd))
        except KeyError:
            raise MethodError(f"{method}: the prior of '{block.name}' must not depend on other parameters",
                              statement.span) from None
        means.append(np.broadcast_to(np.asarray(mu, float), block.shape).ravel())
        sds.append(np.broadcast_to(np.asarray(sigma, float), block.shape).ravel())
    mean, sd = (np.concatenate(means), np.concatenate(sds)) if means else (np.zeros(0), np.zeros(0))
    return ZPrior(jnp.asarray(mean), jnp.asarray(np.diag(sd ** 2)))


def _bounds_kind(block) -> str:
    if block.lower is None and block.upper is None:
        return "unbounded"
    if block.upper is None and np.all(np.asarray(block.lower) == 0):
        return "positive"
    if block.lower is not None and block.upper is not None:
        return "bounds"
    return "one-sided"


def split(problem) -> Split:
    """``kappa``: the positions in ``theta`` of parameters the GP statement reads; ``alpha``: the others."""
    read = statement_refs(problem.node.statement)
    kappa, alpha, start = [], [], 0
    for block in problem.theta_blocks:
        (kappa if block.name in read else alpha).extend(range(start, start + block.size))
        start += block.size
    return Split(np.asarray(kappa, dtype=int), np.asarray(alpha, dtype=int))


def conditional(prior: ZPrior, free: np.ndarray, theta) -> tuple[jax.Array, jax.Array]:
    """Mean and lower Cholesky factor of ``z[free] | z[rest] = theta[rest]`` under ``prior``."""
    rest = np.setdiff1d(np.arange(prior.mean.shape[0]), free)
    if rest.size == 0:
        return prior.mean, cholesky(prior.cov)
    cov_ff = prior.cov[np.ix_(free, free)]
    cov_fr = prior.cov[np.ix_(free, rest)]
    chol_rr = cholesky(prior.cov[np.ix_(rest, rest)])
    a = solve_triangular(chol_rr, cov_fr.T, lower=True)
    b = solve_triangular(chol_rr, theta[rest] - prior.mean[rest], lower=True)
    return prior.mean[free] + a.T @ b, cholesky(cov_ff - a.T @ a)


def z_ess(rng_key, theta, value, free: np.ndarray, prior: ZPrior, log_likelihood: Callable):
    """One ESS update of ``theta[free]`` with its conditional Gaussian prior and ``log_likelihood(theta)``
    (``value`` at the current ``theta``); returns ``theta``, its ``log_likelihood`` and the ESS info."""
    mean, chol = conditional(prior, free, theta)
    z, value, info = ess_step(rng_key, theta[free], value, chol,
                              lambda z: log_likelihood(theta.at[free].set(z)), mean=mean)
    return theta.at[free].set(z), value, info


def sdss_update(rng_key, position: LatentPosition, problem, prior: ZPrior, kappa: np.ndarray,
                surrogate_variance: SurrogateVariance = 1.0):
    """SDSS of ``kappa`` with ESS in z-space (zero-mean GP prior, :class:`LatentPosition` as in gibbs).

    Returns
    -------
    position : LatentPosition
    info : HyperInfo
        ``cubic_ops`` counts ``n x n`` Cholesky factorisations (2 per target evaluation, 1 to start).
    """
    key_noise, key_ess = jax.random.split(rng_key)
    surrogate = SurrogateData(problem, surrogate_variance)
    g, eta, current = surrogate.fix(jax.random.normal(key_noise, (problem.n,), jnp.float64), position)

    def value(theta):
        return surrogate.evaluate(theta, g, eta)[0] - problem.log_prior(theta)

    theta, _, info = z_ess(key_ess, position.theta, current - problem.log_prior(position.theta), kappa, prior,
                           value)
    _, moved = surrogate.evaluate(theta, g, eta)
    return moved, _info(info, per_evaluation=2, extra=3)


def fixed_nu_update(rng_key, theta, f, mean, chol, loglik, prior_of: Callable, log_likelihood: Callable,
                    prior: ZPrior, kappa: np.ndarray):
    """ESS of ``kappa`` in z-space with ``nu = chol^{-1}(f - mean)`` fixed (eq. 11).

    Parameters
    ----------
    rng_key : jax.Array
    theta, f : jax.Array
        Current hyperparameters (unconstrained) and latent values.
    mean, chol : jax.Array
        The GP prior of ``f`` at ``theta``: ``N(mean, chol chol^T)``.
    loglik : jax.Array
        ``log_likelihood(f, theta)``.
    prior_of : callable
        ``prior_of(theta) -> (mean, chol)``.
    log_likelihood : callable
        ``log_likelihood(f, theta)``.
    prior : ZPrior
    kappa : numpy.ndarray
        The positions of the kernel's hyperparameters in ``theta``.

    Returns
    -------
    theta, f, mean, chol, loglik : jax.Array
    info : HyperInfo
    """
    nu = solve_triangular(chol, f - mean, lower=True)

    def value(theta):
        m, c = prior_of(theta)
        return log_likelihood(c @ nu + m, theta)

    theta_new, loglik_new, info = z_ess(rng_key, theta, loglik, kappa, prior, value)
    mean_new, chol_new = prior_of(theta_new)
    f_new = chol_new @ nu + mean_new
    return theta_new, f_new, mean_new, chol_new, loglik_new, _info(info, per_evaluation=1, extra=1)


def sdss_mean_update(rng_key, theta, f, mean, chol, loglik, prior_of: Callable, log_likelihood: Callable,
                     prior: ZPrior, kappa: np.ndarray, surrogate_variance: SurrogateVariance = 1.0):
    """SDSS of ``kappa`` with ESS in z-space for a GP prior with a mean, ``f ~ N(mean_theta, K_theta)``: SURR on
    ``h = f - mean_theta ~ N(0, K_theta)`` (a shift of unit Jacobian), whose likelihood is ``p(y | h + mean_theta)``.

    Parameters and returns as :func:`fixed_nu_update`, with ``surrogate_variance`` the diagonal S. Each target
    evaluation factorises the prior twice and two ``n x n`` matrices: about three times fixed-nu's cost.
    """
    shifted = _Shifted(prior_of, log_likelihood, f.shape[0])
    position = LatentPosition(theta, f - mean, chol, loglik)
    moved, info = sdss_update(rng_key, position, shifted, prior, kappa, surrogate_variance)
    mean_new, chol_new = prior_of(moved.theta)
    return moved.theta, moved.f + mean_new, mean_new, chol_new, moved.loglik, info


class _Shifted:
    """What SURR reads of a problem, for ``h = f - mean_theta ~ N(0, K_theta)``."""

    def __init__(self, prior_of: Callable, log_likelihood: Callable, n: int):
        self.prior_of, self.likelihood, self.n = prior_of, log_likelihood, n

    def covariance(self, theta):
        _, chol = self.prior_of(theta)
        return chol @ chol.T

    def prior_factor(self, theta):
        return cholesky(self.covariance(theta))

    def log_likelihood(self, h, theta):
        mean, _ = self.prior_of(theta)
        return self.likelihood(h + mean, theta)

    def log_prior(self, theta):
        return jnp.zeros(())


def fixed_nu_latent_update(rng_key, position: LatentPosition, problem, prior: ZPrior, kappa: np.ndarray):
    """:func:`fixed_nu_update` on a zero-mean :class:`LatentPosition` (gibbs's ``fixed_nu``)."""
    def prior_of(theta):
        return jnp.zeros(problem.n), cholesky(problem.covariance(theta))

    theta, f, _, chol, loglik, info = fixed_nu_update(
        rng_key, position.theta, position.f, jnp.zeros(problem.n), position.chol_K, position.loglik, prior_of,
        problem.log_likelihood, prior, kappa)
    return LatentPosition(theta, f, chol, loglik), info


def alpha_update(rng_key, theta, f, loglik, log_likelihood: Callable, prior: ZPrior, alpha: np.ndarray):
    """ESS of ``alpha`` in z-space with ``f`` fixed; returns ``theta``, ``log_likelihood(f, theta)`` and info."""
    theta, loglik, info = z_ess(rng_key, theta, loglik, alpha, prior, lambda t: log_likelihood(f, t))
    return theta, loglik, _info(info, per_evaluation=0, extra=0)


def _info(ess_info, per_evaluation: int, extra: int) -> HyperInfo:
    evaluations = ess_info.num_shrinks + 1
    return HyperInfo(accepted=~ess_info.gave_up, acceptance_rate=jnp.ones(()), num_evaluations=evaluations,
                     cubic_ops=per_evaluation * evaluations + extra)


def hyper_update(rng_key, position: LatentPosition, problem, scale=None, *, kappa_update: str, prior: ZPrior,
                 blocks: Split, surrogate_variance: SurrogateVariance = 1.0):
    """Update 2 then Update 3 of Tegner et al. (2018) on a zero-mean :class:`LatentPosition`: ``kappa`` by
    SDSS (``kappa_update="sdss"``) or fixed-nu ESS (``"fixed_nu"``), then ``alpha`` by ESS, all in z-space
    (``scale`` is ignored: ESS has none)."""
    del scale
    key_kappa, key_alpha = jax.random.split(rng_key)
    infos = []
    if blocks.kappa.size:
        if kappa_update == "sdss":
            position, info = sdss_update(key_kappa, position, problem, prior, blocks.kappa, surrogate_variance)
        else:
            position, info = fixed_nu_latent_update(key_kappa, position, problem, prior, blocks.kappa)
        infos.append(info)
    if blocks.alpha.size:
        theta, loglik, info = alpha_update(key_alpha, position.theta, position.f, position.loglik,
                                           problem.log_likelihood, prior, blocks.alpha)
        position = position._replace(theta=theta, loglik=loglik)
        infos.append(info)
    if not infos:
        return position, HyperInfo(jnp.ones((), bool), jnp.ones(()), jnp.zeros((), jnp.int32), jnp.zeros((), jnp.int32))
    return position, HyperInfo(accepted=jnp.all(jnp.stack([i.accepted for i in infos])),
                               acceptance_rate=jnp.ones(()),
                               num_evaluations=sum(i.num_evaluations for i in infos),
                               cubic_ops=sum(i.cubic_ops for i in infos))


Z_SPACE_UPDATES = ("sdss", "fixed_nu")


def z_space_updates(problem, theta_update: str, surrogate_variance: SurrogateVariance = 1.0) -> dict:
    """``{theta_update: update}`` for gibbs when ``theta_update`` is one of :data:`Z_SPACE_UPDATES` (the model's
    priors checked), else empty."""
    if theta_update not in Z_SPACE_UPDATES:
        return {}
    method = f"gibbs --theta-update {theta_update.replace('_', '-')}"
    return {theta_update: partial(hyper_update, problem=problem, kappa_update=theta_update,
                                  prior=z_prior(problem, method), blocks=split(problem),
                                  surrogate_variance=surrogate_variance)}
