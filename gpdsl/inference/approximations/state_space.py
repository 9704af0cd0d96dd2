"""The Laplace approximation and EP of a latent state-space GP by Kalman smoothing: ``O(N)`` per Newton step or sweep.

``f ~ N(0, K)`` over a scalar input whose kernel has a state-space form (:mod:`gpdsl.kernels.kalman`), ``y | f``
factorised. Both approximations put a Gaussian site on every ``f_k``,

    q(f) = N(f | 0, K) prod_k exp(-s_k f_k^2 / 2 + nu_k f_k) / Z,    Sigma = (K^-1 + diag(s))^-1,

and all they need of ``q`` the Kalman filter and the RTS smoother give under those sites in ``O(N)``
(:func:`~gpdsl.kernels.kalman.kalman_filter`, :func:`~gpdsl.kernels.kalman.rts_smoother`); the transitions are
computed once per kernel, outside the iterations.

* **Laplace.** The Newton step from ``f`` is the posterior mean under the sites ``s = W``, ``nu = W f + g`` (``g``,
  ``W`` the gradient and negative Hessian diagonal of ``log p(y | f)``): the smoothing of the pseudo-observations
  ``y~ = f + g / W`` with noise variances ``1 / W``. ``a = K^-1 f`` is carried along, ``K^-1 f_new = nu - W f_new``,
  so a step that does not increase ``log p(y | f) - a^T f / 2`` is halved as in
  :func:`~gpdsl.inference.approximations.laplace.laplace`, and the log marginal is that function's,
  ``log p(y | f_hat) - a^T f_hat / 2 - log|B| / 2`` (``= log p(y | f_hat) + log N(y~ | 0, K + W^-1) - log N(y~ |
  f_hat, W^-1)``), with the ``W`` of the last iteration.
* **EP.** The parallel sweeps of :func:`~gpdsl.inference.approximations.ep.parallel_sweeps` (cavities from the
  smoothed marginals, the likelihood's tilted moments, damped site updates) and its ``log Z_EP``.
* **log|B|.** ``B = I + S^1/2 K S^1/2`` taken in the order of the sorted times has the Cholesky diagonal
  ``sqrt(1 + s_k v_k)``, ``v_k`` the filter's predicted variance of ``f_k``. The approximations keep that diagonal
  as ``chol_b`` (shape ``(N,)``, sorted order): it is all of ``B`` they use.
* **Draws** of ``q`` by forward filtering, backward sampling of the state and its innovations (:func:`sample_path`,
  :func:`sample`), ``O(N)`` each.
* **Importance weights.** ``q(f) = p(f) prod_k exp(-s_k f_k^2 / 2 + nu_k f_k) / Z`` with ``log Z = nu^T m / 2 -
  log|B| / 2`` (``m = Sigma nu`` the mean of ``q``), so ``log N(f | 0, K) - log q(f) = log Z + sum_k (s_k f_k^2 / 2
  - nu_k f_k)`` (:func:`log_prior_minus_log_q`), ``O(N)`` and without ``K``.

The results are :class:`~gpdsl.inference.approximations.gaussian.GaussianApproximation` of ``f`` with the fields of
the dense ones (``alpha = K^-1 mean = site_location - site_precision * mean``) except ``chol_b`` (above);
``cubic_ops`` counts filter-and-smoother passes, the ``O(N)`` operation here. A missing outcome (NaN) has no site.
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from gpdsl.inference.approximations.ep import SMALLEST_SITE_PRECISION, ep_inputs, parallel_sweeps, shifted_moments
from gpdsl.inference.approximations.gaussian import GaussianApproximation, iteration_setup
from gpdsl.inference.approximations.laplace import check_laplace_likelihood, halve_along
from gpdsl.kernels.kalman import kalman_filter, rts_smoother, sort_times, symmetric_square_root, transitions
from gpdsl.kernels.state_space import PERIODIC_ORDER
from gpdsl.numerics.linalg import cho_solve, cholesky


class Chain(NamedTuple):
    """The Markov chain of a state-space GP's state along the sorted times.

    Attributes
    ----------
    order : jax.Array, shape (N,)
        ``times[order]`` is sorted (stably).
    unsort : jax.Array, shape (N,)
        The inverse permutation: sorted values ``[unsort]`` are in the caller's order.
    A, Q : jax.Array, shape (N, d, d)
        Transitions and process noise into each sorted point (:func:`~gpdsl.kernels.kalman.transitions`).
    H : jax.Array, shape (d,)
        ``f = H s``.
    P_inf : jax.Array, shape (d, d)
        The stationary covariance of the state, that of the first point.
    """

    order: jax.Array
    unsort: jax.Array
    A: jax.Array
    Q: jax.Array
    H: jax.Array
    P_inf: jax.Array


def markov_chain(kernel, times, periodic_order: int = PERIODIC_ORDER) -> Chain:
    """The :class:`Chain` of ``kernel`` (with ``has_state_space``) at ``times`` (shape ``(N,)``, any order)."""
    sorted_times = sort_times(times)
    return Chain(sorted_times.order, jnp.argsort(sorted_times.order),
                 *transitions(kernel, sorted_times.steps, periodic_order))


def _smoothed(chain: Chain, precision, natural_mean):
    """Posterior means and variances of ``f`` under the sites (caller's order) and the Cholesky diagonal of ``B``
    (sorted order)."""
    precision_sorted = precision[chain.order]
    filtered = kalman_filter(chain.A, chain.Q, chain.H, chain.P_inf, precision_sorted, natural_mean[chain.order],
                             keep_states=True)
    marginals = rts_smoother(chain.A, chain.Q, chain.H, filtered)
    root_spread = jnp.sqrt(1.0 + precision_sorted * filtered.predicted_var)
    return marginals.mean[chain.unsort], marginals.variance[chain.unsort], root_spread


def _offset_and_args(n: int, offset, args):
    offset = jnp.zeros(n) if offset is None else jnp.broadcast_to(jnp.asarray(offset, dtype=jnp.float64), (n,))
    return offset, tuple(jnp.asarray(a, dtype=jnp.float64) for a in args)


def laplace(kernel, times, y, likelihood: str = "poisson_log", tol=None, max_iter: int = 100, args=(), offset=None,
            periodic_order: int = PERIODIC_ORDER) -> GaussianApproximation:
    """The Laplace approximation ``q(f | y) = N(f_hat, (K^-1 + W)^-1)`` and its ``log p(y | theta)`` by smoothing.

    The iterations, convergence test and log marginal of :func:`~gpdsl.inference.approximations.laplace.laplace`,
    each Newton step one Kalman filter and smoother pass (see the module docstring). Works under ``jit`` and
    ``vmap``.

    Parameters
    ----------
    kernel : Kernel
        The GP's kernel, with ``has_state_space``.
    times : array_like, shape (N,)
        Its scalar inputs, any order, repeats allowed.
    y : array_like, shape (N,)
        Observations (NaN where missing).
    likelihood : str
        A likelihood with ``derivatives`` (as for the dense Laplace approximation). Static under ``jit``.
    tol : float, optional
        Threshold on ``||f_new - f_old||^2``; ``N / 1e4`` by default.
    max_iter : int
        Iteration limit (``converged`` False when reached). Static under ``jit``.
    args : tuple of array_like
        The likelihood's other parameters, in positional order.
    offset : array_like, shape (N,), optional
        The likelihood acts on ``f + offset``.
    periodic_order : int
        Harmonics of a periodic kernel's truncated series.

    Returns
    -------
    GaussianApproximation
        Of ``f``; ``chol_b`` the Cholesky diagonal of ``B`` in sorted order, ``cubic_ops`` the smoothing passes.

    Raises
    ------
    MethodError
        For a likelihood without ``derivatives``.
    """
    check_laplace_likelihood(likelihood)
    y = jnp.asarray(y)
    offset, args = _offset_and_args(y.shape[0], offset, args)
    return _laplace(kernel, jnp.asarray(times, dtype=jnp.float64), y, likelihood, tol, max_iter, args, offset,
                    periodic_order)


@partial(jax.jit, static_argnames=("likelihood", "max_iter", "periodic_order"))
def _laplace(kernel, times, y, likelihood, tol, max_iter, args, offset, periodic_order):
    chain = markov_chain(kernel, times, periodic_order)
    n, tol, y, derivatives_with_args = iteration_setup(jnp.zeros(y.shape[0]), y, tol, likelihood, "laplace")

    def derivatives(f):
        return derivatives_with_args(y, f + offset, *args)

    def objective(a, f):
        return -0.5 * a @ f + derivatives(f)[0]

    def newton_step(state):
        f, a, _, _, _, iteration = state
        _, grad, W = derivatives(f)
        natural_mean = W * f + grad
        f_newton, _, root_spread = _smoothed(chain, W, natural_mean)
        a_newton = natural_mean - W * f_newton
        a_new, f_new = halve_along(objective, a, f,
                                   lambda step: (a + step * (a_newton - a), f + step * (f_newton - f)))
        return f_new, a_new, W, root_spread, jnp.sum((f_new - f) ** 2), iteration + 1

    def not_done(state):
        return (state[4] >= tol) & (state[5] < max_iter)

    zeros = jnp.zeros(n)
    start = (zeros, zeros, zeros, jnp.ones(n), jnp.asarray(jnp.inf), jnp.asarray(0))
    f, a, W, root_spread, change, iterations = lax.while_loop(not_done, newton_step, start)
    return GaussianApproximation(
        mean=f, alpha=a, site_precision=W, site_location=W * f + a, chol_b=root_spread,
        log_marginal=objective(a, f) - jnp.sum(jnp.log(root_spread)),
        converged=change < tol, iterations=iterations, cubic_ops=iterations, log_marginal_ops=jnp.asarray(0))


def ep(kernel, times, y, likelihood: str = "bernoulli_logit", tol=None, max_sweeps: int = 100, damping: float = 0.7,
       initial_sites=None, offset=None, args=(), periodic_order: int = PERIODIC_ORDER) -> GaussianApproximation:
    """Parallel EP ``q(f | y) = N(mu, (K^-1 + diag(tau))^-1)`` and its ``log Z_EP`` by smoothing.

    The sweeps of :func:`~gpdsl.inference.approximations.ep.ep` with ``schedule="parallel"``, the marginals of
    ``q`` from one Kalman filter and smoother pass per sweep. Parameters are those of
    :func:`~gpdsl.inference.approximations.ep.ep` with ``kernel`` and ``times`` in place of ``K`` (as in
    :func:`laplace`); the schedule is always parallel. Works under ``jit`` and ``vmap``.

    Returns
    -------
    GaussianApproximation
        Of ``f``; ``chol_b`` the Cholesky diagonal of ``B`` in sorted order, ``cubic_ops`` the smoothing passes.

    Raises
    ------
    MethodError
        For fewer than one sweep, or a likelihood without ``tilted_moments``.
    """
    y = jnp.asarray(y)
    initial_sites, offset, args = ep_inputs(y.shape[0], likelihood, max_sweeps, initial_sites, offset, args)
    return _ep(kernel, jnp.asarray(times, dtype=jnp.float64), y, tol, max_sweeps, damping, likelihood, initial_sites,
               offset, args, periodic_order)


@partial(jax.jit, static_argnames=("max_sweeps", "likelihood", "periodic_order"))
def _ep(kernel, times, y, tol, max_sweeps, damping, likelihood, initial_sites, offset, args, periodic_order):
    chain = markov_chain(kernel, times, periodic_order)
    n, tol, y, tilted_moments = iteration_setup(jnp.zeros(y.shape[0]), y, tol, likelihood, "ep")

    def factor(tau, nu):
        mean, variance, root_spread = _smoothed(chain, tau, nu)
        return (root_spread, variance), nu - tau * mean, mean

    prior_variance = chain.H @ chain.P_inf @ chain.H
    fit = parallel_sweeps(factor, lambda tau, smoothed: smoothed[1], jnp.full(n, prior_variance), y, tol, max_sweeps,
                          damping, shifted_moments(tilted_moments, args), initial_sites, offset,
                          half_log_det=lambda smoothed: jnp.sum(jnp.log(smoothed[0])))
    return fit._replace(chol_b=fit.chol_b[0], cubic_ops=fit.iterations + (initial_sites is not None),
                        log_marginal_ops=jnp.asarray(0))


@partial(jax.jit, static_argnames="periodic_order")
def from_sites(kernel, times, site_precision, site_location,
               periodic_order: int = PERIODIC_ORDER) -> GaussianApproximation:
    """The Gaussian that fixed sites give under the state-space prior, no sweep (the state-space
    :func:`~gpdsl.inference.approximations.ep.gaussian_from_sites`: precisions raised to machine epsilon,
    ``log_marginal`` NaN, ``cubic_ops`` 1)."""
    tau = jnp.maximum(jnp.asarray(site_precision, dtype=jnp.float64), SMALLEST_SITE_PRECISION)
    nu = jnp.asarray(site_location, dtype=jnp.float64)
    mean, _, root_spread = _smoothed(markov_chain(kernel, times, periodic_order), tau, nu)
    return GaussianApproximation(
        mean=mean, alpha=nu - tau * mean, site_precision=tau, site_location=nu, chol_b=root_spread,
        log_marginal=jnp.asarray(jnp.nan), converged=jnp.asarray(True), iterations=jnp.asarray(0),
        cubic_ops=jnp.asarray(1), log_marginal_ops=jnp.asarray(0))


def sample_path(A, R, H, precision, natural_mean, key, num: int) -> tuple[jax.Array, jax.Array]:
    """Joint draws of the states and innovations of ``s_k = A_k s_{k-1} + R_k z_k`` (``s_{-1} = 0``, ``z_k ~ N(0,
    I)``) under Gaussian sites on ``f_k = H s_k``, along sorted points, by forward filtering, backward sampling.

    Backwards from ``s_{N-1}`` (drawn from its filtered moments), each step draws ``s_{k-1}`` and ``z_k`` together
    given ``s_k``: a draw ``(s', z')`` of their law before the constraint (``s'`` from the filtered moments ``m_{k-1},
    P_{k-1}``, ``z'`` standard normal) is moved onto ``A_k s + R_k z = s_k`` (Matheron's rule): with ``d = s_k - A_k
    s' - R_k z'`` and ``u = (A_k P_{k-1} A_k^T + R_k R_k^T)^-1 d``, ``s_{k-1} = s' + P_{k-1} A_k^T u`` and ``z_k = z'
    + R_k^T u``. So the innovations reproduce the states exactly, and where ``R_k`` is singular (a repeated time, a
    periodic term) they keep their prior. ``O(N d^3)`` and ``O(N d^2)`` per draw.

    Parameters
    ----------
    A, R : jax.Array, shape (N, d, d)
        Transitions and roots of the process noise into each sorted point (``A_0`` unused but for the form,
        ``R_0 R_0^T = P_inf``).
    H : jax.Array, shape (d,)
    precision, natural_mean : jax.Array, shape (N,)
        The sites, sorted.
    key : jax.Array
        A PRNG key.
    num : int
        Number of draws.

    Returns
    -------
    states, innovations : jax.Array, shape (num, N, d)
        Along the sorted points.
    """
    n, d = A.shape[0], A.shape[-1]
    Q = R @ jnp.swapaxes(R, -1, -2)
    filtered = kalman_filter(A, Q, H, jnp.zeros((d, d)), precision, natural_mean, keep_states=True)
    last_key, state_key, innovation_key = jax.random.split(key, 3)
    last_cov = filtered.filtered_cov[-1]
    last = filtered.filtered_mean[-1][:, None] + symmetric_square_root(0.5 * (last_cov + last_cov.T)) @ \
        jax.random.normal(last_key, (d, num))
    earlier_means = jnp.concatenate([jnp.zeros((1, d)), filtered.filtered_mean[:-1]])
    earlier_covs = jnp.concatenate([jnp.zeros((1, d, d)), filtered.filtered_cov[:-1]])
    state_noise = jax.random.normal(state_key, (n, d, num))
    innovation_noise = jax.random.normal(innovation_key, (n, d, num))

    def step(state, point):
        A_k, R_k, Q_k, mean, cov, e_state, e_innovation = point
        earlier = mean[:, None] + symmetric_square_root(0.5 * (cov + cov.T)) @ e_state
        predicted = A_k @ cov @ A_k.T + Q_k
        u = cho_solve((cholesky(0.5 * (predicted + predicted.T)), True),
                      state - A_k @ earlier - R_k @ e_innovation)
        return earlier + cov @ A_k.T @ u, (state, e_innovation + R_k.T @ u)

    points = (A, R, Q, earlier_means, earlier_covs, state_noise, innovation_noise)
    _, (states, innovations) = lax.scan(step, last, points, reverse=True)
    return jnp.moveaxis(states, -1, 0), jnp.moveaxis(innovations, -1, 0)


@partial(jax.jit, static_argnames=("num", "periodic_order"))
def sample(kernel, times, approx: GaussianApproximation, key, num: int,
           periodic_order: int = PERIODIC_ORDER) -> jax.Array:
    """``num`` draws of ``f ~ q``, shape ``(num, N)`` in the order of ``times``, ``O(N)`` each (:func:`sample_path`,
    the process noise's roots by :func:`~gpdsl.kernels.kalman.symmetric_square_root`)."""
    chain = markov_chain(kernel, times, periodic_order)
    R = symmetric_square_root(chain.Q.at[0].set(chain.P_inf))
    states, _ = sample_path(chain.A, R, chain.H, approx.site_precision[chain.order],
                            approx.site_location[chain.order], key, num)
    return (states @ chain.H)[:, chain.unsort]


def log_prior_minus_log_q(approx: GaussianApproximation, draws) -> jax.Array:
    """``log N(f | 0, K) - log q(f)`` for draws ``f`` (..., N) in ``O(N)`` each: ``nu^T m / 2 - log|B| / 2 + sum_k
    (s_k f_k^2 / 2 - nu_k f_k)`` (module docstring)."""
    precision, location = approx.site_precision, approx.site_location
    log_normaliser = 0.5 * location @ approx.mean - jnp.sum(jnp.log(approx.chol_b))
    return log_normaliser + jnp.sum(0.5 * precision * draws ** 2 - location * draws, axis=-1)
