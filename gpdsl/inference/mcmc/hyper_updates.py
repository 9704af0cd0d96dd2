"""Hyperparameter updates given the latent values: SA, AA and SURR (Filippone & Girolami 2014, Sec. 3.2).

Each update moves the unconstrained hyperparameters ``theta`` of a :class:`LatentGP` while keeping
a different function of the latent values fixed:

- SA (sufficient augmentation) keeps ``f``; target ``p(theta) N(f; 0, K_theta) L(y | f, theta)``. Where the
  sampled vector is whitened, ``z = D_theta^{-1} x`` for centred ``x ~ N(0, D_theta^2)`` (an HSGP's weights and its
  basis coefficients, :meth:`LatentGP.centring_scale`), SA keeps ``x``.
- AA (ancillary augmentation) keeps ``nu = L_theta^{-1} f``; target ``p(theta) L(y | L_theta nu, theta)``.
- SURR (surrogate data, Murray & Adams 2010) draws ``g ~ N(f, S)`` and keeps
  ``eta = D_theta^{-1} (f - m_theta)``, where ``p(f | g, theta) = N(m_theta, D_theta D_theta^T)``;
  target ``p(theta) N(g; 0, K_theta + S) L(y | f(theta), theta)``.

SA, AA and SURR use a Gaussian random-walk Metropolis-Hastings proposal with a (per-coordinate)
scale (the core in :mod:`gpdsl.inference.mcmc.mh`); :func:`surr_slice_step` slice-samples the SURR
target instead (Neal 2003, stepping out and shrinkage, one coordinate at a time or along a random
direction), as Murray & Adams do.

Surrogate noise ``S`` is diagonal and given by ``surrogate_variance``: a scalar, a length-``n``
vector, or a function ``theta -> (n,)`` vector. For a Gaussian likelihood the noise variance is the
natural choice (then ``p(f | g, theta)`` is the exact posterior); for probit or logistic
classification Murray & Adams match each site's posterior variance, and a fixed value of order one
(the default, 1.0) works. Any positive choice leaves the posterior invariant; it only affects mixing.

With ``S`` diagonal the SURR quantities need two Cholesky factorisations per ``theta``:
``K = L L^T`` and ``C = I + L^T S^{-1} L = L_C L_C^T``. Then ``D = L L_C^{-T}``,
``m = D L_C^{-1} L^T S^{-1} g``, ``log det(K + S) = log det S + log det C`` and
``g^T (K + S)^{-1} g = g^T S^{-1} g - |L_C^{-1} L^T S^{-1} g|^2`` (Woodbury); ``C`` has eigenvalues
at least one, so the factorisation is well conditioned.

For a whitened view (:attr:`LatentGP.white`: the sampled vector is ``v = L^-1 f``, whose prior is ``N(0, I)`` whatever
``theta``, as for a latent GP on a grid) the prior's factor is the identity's diagonal, a vector of ones
(:mod:`gpdsl.inference.mcmc.prior_factor`): SA and AA both move ``theta`` with ``v`` fixed
(the ancillary update of ``f``), and SURR runs on ``f = L v`` with ``L`` and ``C``'s factor from Kronecker algebra
(:mod:`gpdsl.inference.mcmc.grid_surrogate`); none factorises anything of size ``n`` (``cubic_ops`` 0).

Every update returns a :class:`HyperInfo` whose ``cubic_ops`` counts the ``n x n`` Cholesky
factorisations done (Table 2 of the paper): 1 per proposal for SA and AA, 3 per SURR-MH step
(2 at the proposal, 1 at the current point), and ``1 + 2 * num_evaluations`` per SURR-slice step.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax
from jax.scipy.special import ndtri

from gpdsl.inference.families.latent_gp import LatentGP
from gpdsl.inference.mcmc.mh import MHState, accept_reject, random_walk
from gpdsl.inference.mcmc import prior_factor
from gpdsl.inference.mcmc.latent_position import LatentPosition



class HyperInfo(NamedTuple):
    """What one hyperparameter update did.

    Attributes
    ----------
    accepted : jax.Array (bool)
        Whether ``theta`` moved (always True for slice sampling).
    acceptance_rate : jax.Array
        The MH acceptance probability ``min(1, ratio)`` (1 for slice sampling).
    num_evaluations : jax.Array (int)
        Target evaluations at new ``theta`` values (1 for MH).
    cubic_ops : jax.Array (int)
        ``n x n`` Cholesky factorisations done.
    """

    accepted: jax.Array
    acceptance_rate: jax.Array
    num_evaluations: jax.Array
    cubic_ops: jax.Array


SurrogateVariance = float | jax.Array | Callable[[jax.Array], jax.Array]


def latent_position(problem: LatentGP, theta, f) -> LatentPosition:
    """The :class:`LatentPosition` at ``theta`` and ``f`` (one Cholesky factorisation, none for a diagonal prior)."""
    theta = jnp.asarray(theta, dtype=jnp.float64)
    f = jnp.asarray(f, dtype=jnp.float64)
    chol_K = problem.prior_factor(theta)
    return LatentPosition(theta, f, chol_K, problem.log_likelihood(f, theta))



def _cubic(factor, count):
    """``count`` ``n x n`` factorisations, or none where the prior's factor is diagonal (held as a vector)."""
    return 0 * count if prior_factor.is_diagonal(factor) else count

def sa_step(rng_key, position: LatentPosition, problem: LatentGP, scale):
    """Random-walk MH on ``theta`` with ``f`` fixed (sufficient augmentation).

    Parameters
    ----------
    rng_key : jax.Array
        PRNG key.
    position : LatentPosition
        Current point.
    problem : LatentGP
        The model view.
    scale : float or jax.Array, shape (theta_dim,)
        Proposal standard deviation(s) on the unconstrained scale.

    Returns
    -------
    position : LatentPosition
    info : HyperInfo
    """
    normals, log_uniform = _normals_and_log_uniform(rng_key, position.theta.shape[0])
    theta_new = random_walk(position.theta, normals, scale)
    centring = problem.centring_scale(position.theta)
    if centring is not None:
        return _centred_sa(log_uniform, position, theta_new, centring, problem)
    chol_new = problem.prior_factor(theta_new)
    proposal = LatentPosition(theta_new, position.f, chol_new, problem.log_likelihood(position.f, theta_new))

    def target(point: LatentPosition):
        return MHState(point, problem.log_prior(point.theta) + prior_factor.logpdf(point.f, point.chol_K) +
                       point.loglik)

    return _metropolis(log_uniform, target(position), target(proposal), cubic_ops=_cubic(chol_new, 1))


def _centred_sa(log_uniform, position: LatentPosition, theta_new, centring, problem: LatentGP):
    """SA for a sampled vector of whitened coordinates (:meth:`LatentGP.centring_scale`): ``x = D_theta z`` stays, ``z``
    moves to ``x / D_theta'``; the target is ``p(theta) N(x; 0, D_theta^2) L(y | z, theta)`` (the change of variables'
    Jacobian turns ``N(z; 0, I)`` into ``x``'s density)."""
    x = position.f * centring
    centring_new = problem.centring_scale(theta_new)
    z_new = x / centring_new
    proposal = position._replace(theta=theta_new, f=z_new, loglik=problem.log_likelihood(z_new, theta_new))

    def target(point: LatentPosition, point_centring):
        return MHState(point, problem.log_prior(point.theta) + prior_factor.logpdf(x, point_centring) + point.loglik)

    return _metropolis(log_uniform, target(position, centring), target(proposal, centring_new), cubic_ops=0)


def aa_step(rng_key, position: LatentPosition, problem: LatentGP, scale):
    """Random-walk MH on ``theta`` with ``nu = L_theta^{-1} f`` fixed (ancillary augmentation).

    Parameters and returns as in :func:`sa_step`; ``f`` moves to ``L_theta' nu`` on acceptance.
    """
    normals, log_uniform = _normals_and_log_uniform(rng_key, position.theta.shape[0])
    nu = prior_factor.solve(position.chol_K, position.f)
    theta_new = random_walk(position.theta, normals, scale)
    chol_new = problem.prior_factor(theta_new)
    f_new = prior_factor.times(chol_new, nu)
    proposal = LatentPosition(theta_new, f_new, chol_new, problem.log_likelihood(f_new, theta_new))

    def target(point: LatentPosition):
        return MHState(point, problem.log_prior(point.theta) + point.loglik)

    return _metropolis(log_uniform, target(position), target(proposal), cubic_ops=_cubic(chol_new, 1))


def surr_step(rng_key, position: LatentPosition, problem: LatentGP, scale, surrogate_variance: SurrogateVariance = 1.0):
    """Random-walk MH on ``theta`` with surrogate data ``g`` and whitened ``eta`` fixed (SURR).

    Parameters
    ----------
    rng_key, position, problem, scale
        As in :func:`sa_step`.
    surrogate_variance : float, jax.Array of shape (n,), or callable
        Diagonal of the surrogate noise ``S`` (see the module docstring).

    Returns
    -------
    position : LatentPosition
    info : HyperInfo
    """
    d = position.theta.shape[0]
    normals, log_uniform = _normals_and_log_uniform(rng_key, d + problem.n)
    surrogate = surrogate_data(problem, surrogate_variance)
    g, eta, current = surrogate.fix(normals[d:], position)
    log_target_new, proposal = surrogate.evaluate(random_walk(position.theta, normals[:d], scale), g, eta)
    return _metropolis(log_uniform, MHState(position, current), MHState(proposal, log_target_new),
                       cubic_ops=_cubic(position.chol_K, 3))


def surr_slice_step(rng_key, position: LatentPosition, problem: LatentGP, scale,
                    surrogate_variance: SurrogateVariance = 1.0, direction: str = "coordinate",
                    max_steps_out: int = 10, max_shrinks: int = 100):
    """Slice sampling of ``theta`` on the SURR target (Murray & Adams 2010; Neal 2003).

    Parameters
    ----------
    rng_key, position, problem
        As in :func:`sa_step`.
    scale : float or jax.Array, shape (theta_dim,)
        Initial bracket width per coordinate (for ``"random"``, the direction is scaled by it).
    surrogate_variance : float, jax.Array of shape (n,), or callable
        Diagonal of the surrogate noise ``S``.
    direction : {"coordinate", "random"}
        Update each coordinate in turn, or move once along a random direction.
    max_steps_out : int
        Largest number of stepping-out expansions on each side.
    max_shrinks : int
        Safety cap on shrinkage steps; reaching it keeps the current point.

    Returns
    -------
    position : LatentPosition
    info : HyperInfo
        ``num_evaluations`` counts target evaluations; ``cubic_ops`` is ``1 + 2 * num_evaluations``.
    """
    if direction not in ("coordinate", "random"):
        raise ValueError(f"direction must be 'coordinate' or 'random', not {direction!r}")
    d = position.theta.shape[0]
    draws = jax.random.uniform(rng_key, (problem.n + 2 * d + d * (3 + max_shrinks),), dtype=jnp.float64)
    noise, direction_noise = _standard_normal(draws[:problem.n]), _standard_normal(draws[problem.n:problem.n + d])
    slice_uniforms = draws[problem.n + 2 * d:].reshape(d, 3 + max_shrinks)
    surrogate = surrogate_data(problem, surrogate_variance)
    g, eta, current = surrogate.fix(noise, position)
    width = jnp.broadcast_to(jnp.asarray(scale, dtype=jnp.float64), position.theta.shape)

    def slice_along(carry, inputs):
        point, log_target, evaluations = carry
        uniforms, unit = inputs
        point, log_target, count = _slice_1d(uniforms, point, log_target, unit * width, surrogate, g, eta,
                                             max_steps_out)
        return (point, log_target, evaluations + count), None

    if direction == "coordinate":
        units = jnp.eye(d, dtype=jnp.float64)
    else:
        units = (direction_noise / jnp.linalg.norm(direction_noise))[None]
        slice_uniforms = slice_uniforms[:1]
    start = (position, current, jnp.zeros((), jnp.int32))
    (point, _, evaluations), _ = lax.scan(slice_along, start, (slice_uniforms, units))
    info = HyperInfo(accepted=jnp.ones((), bool), acceptance_rate=jnp.ones(()), num_evaluations=evaluations,
                     cubic_ops=_cubic(position.chol_K, 1 + 2 * evaluations))
    return point, info


def surrogate_data(problem: LatentGP, surrogate_variance: SurrogateVariance):
    """SURR's target for ``problem``: :class:`SurrogateData`, or for a latent GP on a grid its Kronecker form
    (:class:`~gpdsl.inference.mcmc.grid_surrogate.GridSurrogateData`)."""
    from gpdsl.inference.families.latent_grid import GridLatent

    if isinstance(problem, GridLatent):
        from gpdsl.inference.mcmc.grid_surrogate import GridSurrogateData

        return GridSurrogateData(problem, surrogate_variance)
    return SurrogateData(problem, surrogate_variance)


class SurrogateData:
    """The SURR target at fixed surrogate data ``g`` and whitened values ``eta``."""

    def __init__(self, problem: LatentGP, surrogate_variance: SurrogateVariance):
        self.problem = problem
        self.surrogate_variance = surrogate_variance

    def variance(self, theta):
        s = self.surrogate_variance(theta) if callable(self.surrogate_variance) else self.surrogate_variance
        return jnp.broadcast_to(jnp.asarray(s, dtype=jnp.float64), (self.problem.n,))

    def factors(self, theta, chol_K):
        """``S`` diagonal and ``L_C``."""
        s = self.variance(theta)
        return s, prior_factor.surrogate_factor(chol_K, s)

    def whitening(self, g, chol_K, s, chol_C):
        """``a = L_C^{-1} L^T S^{-1} g`` and ``log N(g; 0, K + S)``."""
        a = prior_factor.solve(chol_C, prior_factor.transpose_times(chol_K, g / s))
        quadratic = jnp.sum(g * g / s) - jnp.sum(a * a)
        log_det = jnp.sum(jnp.log(s)) + 2.0 * jnp.sum(jnp.log(prior_factor.diagonal(chol_C)))
        log_density = -0.5 * (quadratic + log_det + self.problem.n * math.log(2.0 * math.pi))
        return a, log_density

    def fix(self, noise, position: LatentPosition):
        """``g = f + S^(1/2) noise``; return ``g``, ``eta`` and the log target at the current point."""
        s, chol_C = self.factors(position.theta, position.chol_K)
        g = position.f + jnp.sqrt(s) * noise
        a, log_density = self.whitening(g, position.chol_K, s, chol_C)
        eta = prior_factor.transpose_times(chol_C, prior_factor.solve(position.chol_K, position.f)) - a
        log_target = self.problem.log_prior(position.theta) + log_density + position.loglik
        return g, eta, log_target

    def evaluate(self, theta, g, eta):
        """Log target and the :class:`LatentPosition` at ``theta`` with ``g`` and ``eta`` fixed."""
        chol_K = self.problem.prior_factor(theta)
        s, chol_C = self.factors(theta, chol_K)
        a, log_density = self.whitening(g, chol_K, s, chol_C)
        f = prior_factor.times(chol_K, prior_factor.transpose_solve(chol_C, a + eta))
        loglik = self.problem.log_likelihood(f, theta)
        log_target = self.problem.log_prior(theta) + log_density + loglik
        return _finite_or_minus_inf(log_target), LatentPosition(theta, f, chol_K, loglik)


def _slice_1d(uniforms, point: LatentPosition, log_target, step, surrogate: SurrogateData, g, eta, max_steps_out):
    """One stepping-out and shrinkage slice update along ``theta + t * step``, ``t`` in units of one width.

    ``uniforms`` holds the slice height, bracket offset and split of the stepping-out budget, then
    one value per shrinkage step (their number caps the shrinks; reaching it keeps the point).
    """
    log_height = log_target + jnp.log1p(-uniforms[0])
    low = -uniforms[1]
    high = low + 1.0
    steps_left = jnp.minimum(jnp.floor(uniforms[2] * (max_steps_out + 1)), max_steps_out).astype(jnp.int32)
    steps_right = max_steps_out - steps_left
    shrink_uniforms = uniforms[3:]
    max_shrinks = shrink_uniforms.shape[0]

    def log_at(t):
        return surrogate.evaluate(point.theta + t * step, g, eta)[0]

    def step_out(edge, direction, budget):
        def keep_going(carry):
            edge, budget, _ = carry
            return jnp.logical_and(budget > 0, log_at(edge) > log_height)

        def widen(carry):
            edge, budget, count = carry
            return edge + direction, budget - 1, count + 1

        edge, _, count = lax.while_loop(keep_going, widen, (edge, budget, jnp.zeros((), jnp.int32)))
        return edge, count

    # the loop condition evaluates the target once more than it widens, on each side
    low, widened_low = step_out(low, -1.0, steps_left)
    high, widened_high = step_out(high, 1.0, steps_right)
    evaluations = widened_low + widened_high + 2

    def outside(carry):
        _, _, accepted, shrinks, _, _ = carry
        return jnp.logical_and(~accepted, shrinks < max_shrinks)

    def shrink(carry):
        low, high, _, shrinks, _, _ = carry
        t = low + (high - low) * shrink_uniforms[shrinks]
        value, proposal = surrogate.evaluate(point.theta + t * step, g, eta)
        accepted = value > log_height
        low = jnp.where(jnp.logical_or(accepted, t >= 0.0), low, t)
        high = jnp.where(jnp.logical_or(accepted, t < 0.0), high, t)
        return low, high, accepted, shrinks + 1, value, proposal

    start = (low, high, jnp.zeros((), bool), jnp.zeros((), jnp.int32), log_target, point)
    _, _, accepted, shrinks, value, proposal = lax.while_loop(outside, shrink, start)
    new_point = jax.tree.map(lambda new, old: jnp.where(accepted, new, old), proposal, point)
    return new_point, jnp.where(accepted, value, log_target), evaluations + shrinks


def _standard_normal(uniforms):
    return ndtri(jnp.maximum(uniforms, jnp.finfo(jnp.float64).tiny))


def _normals_and_log_uniform(rng_key, size):
    """``size`` standard normals and the log of one uniform from a single draw (one PRNG call compiles fastest)."""
    uniforms = jax.random.uniform(rng_key, (size + 1,), dtype=jnp.float64)
    return _standard_normal(uniforms[:size]), jnp.log1p(-uniforms[size])


def _finite_or_minus_inf(value):
    return jnp.where(jnp.isnan(value), -jnp.inf, value)


def _metropolis(log_uniform, current: MHState, proposal: MHState, cubic_ops: int):
    state, info = accept_reject(log_uniform, current, proposal)
    return state.position, HyperInfo(accepted=info.accepted, acceptance_rate=info.acceptance_rate,
                                     num_evaluations=jnp.ones((), jnp.int32),
                                     cubic_ops=jnp.asarray(cubic_ops, jnp.int32))
