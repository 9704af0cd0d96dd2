"""A GP over a scalar input in O(N) by its state-space form: Kalman filtering, RTS smoothing and prior draws.

A kernel with ``has_state_space`` (:mod:`gpdsl.kernels.state_space`) makes ``f(t) = H s(t)`` with a Markov
state ``s``: along sorted times ``t_0 <= ... <= t_{N-1}`` the state starts from ``N(0, P_inf)`` and moves as
``s_k = A_k s_{k-1} + q_k``, ``q_k ~ N(0, Q_k)``, ``A_k = expm(F (t_k - t_{k-1}))`` and ``Q_k = P_inf - A_k P_inf
A_k^T`` (a repeated time is a step of zero: ``A = I``, ``Q = 0``). Every point carries a Gaussian site on ``f``,
``exp(-lambda_k f_k^2 / 2 + eta_k f_k)`` (precision ``lambda``, natural mean ``eta``; ``lambda = eta = 0`` is no
site: a missing outcome, or a time where only a prediction is wanted). A Gaussian likelihood ``y_k ~ N(f_k,
sigma_k^2)`` is the site ``lambda = 1 / sigma^2``, ``eta = y / sigma^2`` times a constant; the sites of a Laplace or
EP approximation are their site precisions and locations
(:class:`~gpdsl.inference.approximations.gaussian.GaussianApproximation`).

* :func:`kalman_filter` (or, along times sorted once, :func:`grid_filter`: the distinct steps' transitions only and a
  checkpointed scan) runs forwards in one :func:`jax.lax.scan` and gives, at every point, the predicted mean
  ``mu_k`` and variance ``v_k`` of ``f_k`` given the sites before it; the log normaliser of the sites,
  ``log int N(f | 0, K) prod_k exp(-lambda_k f_k^2 / 2 + eta_k f_k) df``, is the sum of the one-dimensional
  integrals ``-1/2 log(1 + lambda v) + (eta (2 mu + eta v) - lambda mu^2) / (2 (1 + lambda v))``
  (:func:`site_log_normaliser`), and the Gaussian log marginal likelihood the sum of ``log N(y_k | mu_k, v_k +
  sigma_k^2)`` (:func:`log_marginal_likelihood`). Both are differentiable by ``jax.grad``.
* :func:`smooth` (and :func:`posterior_marginals` for a Gaussian likelihood) adds the Rauch-Tung-Striebel pass backwards (gain ``G_k = P_k A_{k+1}^T (P^-_{k+1})^-1`` by a
  Cholesky factor of the predicted covariance): the posterior marginals of ``f`` at every point, and so at new
  times merged in without sites (:func:`predict`).
* :func:`prior_draws` draws ``f`` at the sorted times by the same recursion, the noise of each step through a
  symmetric square root of ``Q_k`` (singular for a periodic state or a repeated time).

All functions sort the times themselves (stably) and return values in the caller's order; the order and the
time steps are computed outside any traced hyperparameter, so gradients flow only through the kernel. Times with a
group label per point (shape ``(N, 2)``, :func:`series_columns`) are independent series, the kernel ``k(t) *
same(g)``: sorted by group, then time, each group's first point entered by an infinite step that restarts the state
(``A = 0``, ``Q = P_inf``), so every function here takes them as it takes one series.
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from gpdsl.errors import DataError
from gpdsl.kernels.state_space import PERIODIC_ORDER
from gpdsl.numerics.linalg import cho_solve, cholesky, eigh


class SortedTimes(NamedTuple):
    """Times sorted for a scan.

    Attributes
    ----------
    order : jax.Array, shape (N,)
        ``times[order]`` is sorted (a stable sort).
    steps : jax.Array, shape (N,)
        ``t_k - t_{k-1}`` along the sorted times, 0 at the first.
    """

    order: jax.Array
    steps: jax.Array


class TimeGrid(NamedTuple):
    """The data's times sorted once, for the recursion (numpy, from data alone).

    Attributes
    ----------
    order : numpy.ndarray of int, shape (N,)
        ``times[order]`` is sorted (a stable sort).
    unsort : numpy.ndarray of int, shape (N,)
        Its inverse: sorted values ``v`` are ``v[unsort]`` in the data's order.
    distinct : numpy.ndarray, shape (U,)
        The distinct steps between sorted times (0 included when a time repeats).
    index : numpy.ndarray of int, shape (N,)
        Each sorted point's step among ``distinct`` (the first point's is unused: it starts from ``P_inf``).
    """

    order: np.ndarray
    unsort: np.ndarray
    distinct: np.ndarray
    index: np.ndarray

    @property
    def size(self) -> int:
        """The number of points."""
        return self.order.shape[0]


def series_columns(times):
    """``(times, groups)`` of the inputs of a state-space GP: shape ``(N,)`` or ``(N, 1)`` is one series (``groups``
    None), shape ``(N, 2)`` a time and a group label per point (independent series, ``k(t) * same(g)``). NumPy or
    JAX arrays alike; the parts have shape ``(N,)``."""
    if np.ndim(times) == 2 and np.shape(times)[1] == 2:
        return times[:, 0], times[:, 1]
    return times.reshape(-1), None


def time_grid(times, groups=None) -> TimeGrid:
    """The :class:`TimeGrid` of one column of times (shape ``(N,)`` or ``(N, 1)``), or of times and group labels
    (shape ``(N, 2)``, :func:`series_columns`).

    With ``groups`` (one label per time) the points are sorted by group, then time, and each group's first point
    follows the one before it by an infinite step: the state restarts from ``N(0, P_inf)`` there
    (:func:`transitions`), so the groups are independent series, the kernel ``k(t) * same(group)``.

    Raises
    ------
    DataError
        The times are not finite, or ``groups`` has another length.
    """
    if groups is None:
        times, groups = series_columns(np.asarray(times, dtype=float))
    times = np.ravel(np.asarray(times, dtype=float))
    if not np.all(np.isfinite(times)):
        raise DataError("the times of a state-space GP must be finite")
    if groups is None:
        order = np.argsort(times, kind="stable")
        steps = np.diff(times[order], prepend=times[order][:1])
    else:
        groups = np.ravel(np.asarray(groups))
        if groups.shape != times.shape:
            raise DataError(f"a state-space GP's groups need one label per time: {groups.size} labels for "
                            f"{times.size} times")
        order = np.lexsort((times, groups))
        steps = np.diff(times[order], prepend=times[order][:1])
        steps[1:][groups[order][1:] != groups[order][:-1]] = np.inf
    distinct, index = np.unique(steps[1:] if steps.size > 1 else steps, return_inverse=True)
    index = np.concatenate([[0], np.ravel(index)]) if steps.size > 1 else np.zeros(steps.size, dtype=int)
    return TimeGrid(order, np.argsort(order), distinct, index.astype(int))


class Marginals(NamedTuple):
    """Posterior (or predictive) means and variances of ``f`` at points, in the caller's order."""

    mean: jax.Array
    variance: jax.Array


def sort_times(times) -> SortedTimes:
    """The stable sort of ``times`` (shape ``(N,)``) and the steps between the sorted times; of times and group
    labels (shape ``(N, 2)``, :func:`series_columns`) the sort by group, then time, with an infinite step into each
    group's first time (as :func:`time_grid`)."""
    times, groups = series_columns(jnp.asarray(times, dtype=jnp.float64))
    order = jnp.argsort(times, stable=True) if groups is None else jnp.lexsort((times, groups))
    steps = jnp.concatenate([jnp.zeros(1), jnp.diff(times[order])])
    if groups is not None:
        sorted_groups = groups[order]
        steps = steps.at[1:].set(jnp.where(sorted_groups[1:] != sorted_groups[:-1], jnp.inf, steps[1:]))
    return SortedTimes(order, steps)


def merged_times(times, new_times):
    """The data's times and then new ones, as one array of either kind of :func:`series_columns` (new points of
    independent series need their group labels too).

    Raises
    ------
    DataError
        The new points have another width than the data's.
    """
    times, new_times = jnp.asarray(times, dtype=jnp.float64), jnp.asarray(new_times, dtype=jnp.float64)
    grouped = series_columns(times)[1] is not None
    if grouped != (series_columns(new_times)[1] is not None):
        raise DataError("new points of independent series need a time and a group label each, shape (M, 2)"
                        if grouped else f"new times of one series need shape (M,); got {new_times.shape}")
    if grouped:
        return jnp.concatenate([times, new_times])
    return jnp.concatenate([jnp.ravel(times), jnp.ravel(new_times)])


def transitions(kernel, steps, periodic_order: int = PERIODIC_ORDER):
    """``(A, Q, H, P_inf)`` of ``kernel`` over time steps: ``A`` and ``Q`` of shape ``(N, d, d)``.

    Parameters
    ----------
    kernel : Kernel
        A kernel with ``has_state_space``.
    steps : jax.Array, shape (N,)
        Non-negative time steps; an infinite step restarts the state (``A = 0``, ``Q = P_inf``), also for a
        periodic kernel, whose state never forgets over finite steps.
    periodic_order : int
        Harmonics of a periodic kernel's truncated series (:mod:`gpdsl.kernels.state_space`).

    Returns
    -------
    A, Q : jax.Array, shape (N, d, d)
    H : jax.Array, shape (d,)
    P_inf : jax.Array, shape (d, d)
    """
    steps = jnp.asarray(steps, dtype=jnp.float64)
    restart = jnp.isinf(steps)
    A, P_inf = kernel.discretise(jnp.where(restart, 0.0, steps), periodic_order)
    A = jnp.where(restart[..., None, None], 0.0, A)
    Q = P_inf - A @ P_inf @ jnp.swapaxes(A, -1, -2)
    Q = 0.5 * (Q + jnp.swapaxes(Q, -1, -2))
    return A, Q, kernel.state_space(periodic_order).H[0], P_inf


class FilterOutput(NamedTuple):
    """What :func:`kalman_filter` gives at every sorted point.

    Attributes
    ----------
    predicted_mean, predicted_var : jax.Array, shape (N,)
        ``mu_k``, ``v_k``: the moments of ``f_k`` given the sites before ``k``.
    filtered_mean : jax.Array, shape (N, d) or None
        The mean of ``s_k`` given the sites up to and including ``k`` (when asked for).
    filtered_cov : jax.Array, shape (N, d, d) or None
        Its covariance (when asked for).
    """

    predicted_mean: jax.Array
    predicted_var: jax.Array
    filtered_mean: jax.Array | None
    filtered_cov: jax.Array | None


def kalman_filter(A, Q, H, P_inf, precision, natural_mean, keep_states: bool = False) -> FilterOutput:
    """The Kalman filter with Gaussian sites on ``f = H s``, over sorted points (module docstring).

    Parameters
    ----------
    A, Q : jax.Array, shape (N, d, d)
        Transitions and process noise (:func:`transitions`); the state starts from ``N(0, P_inf)``.
    H : jax.Array, shape (d,)
    P_inf : jax.Array, shape (d, d)
    precision, natural_mean : jax.Array, shape (N,)
        The sites' ``lambda >= 0`` and ``eta``.
    keep_states : bool
        Whether to return the filtered moments of the state (the smoother needs them).

    Returns
    -------
    FilterOutput
    """
    def step(carry, point):
        carry, (mu, v) = _predict_and_update(carry, *point, H)
        return carry, ((mu, v, *carry) if keep_states else (mu, v))

    initial = (jnp.zeros(H.shape[0]), P_inf)
    _, out = jax.lax.scan(step, initial, (A, Q, precision, natural_mean))
    return FilterOutput(out[0], out[1], *(out[2:] if keep_states else (None, None)))


def _predict_and_update(carry, A_k, Q_k, lam, eta, H):
    """One step of the filter: the state's moments moved by ``(A_k, Q_k)``, ``f_k``'s predicted moments, the site."""
    mean, cov = carry
    mean = A_k @ mean
    cov = A_k @ cov @ A_k.T + Q_k
    column = cov @ H
    mu, v = H @ mean, H @ column
    scale = 1.0 / (1.0 + lam * v)
    mean = mean + column * ((eta - lam * mu) * scale)
    cov = cov - (lam * scale) * jnp.outer(column, column)
    return (mean, cov), (mu, v)


SEGMENT_STEPS = 512
"""Steps of :func:`grid_filter` between two states its gradient keeps (the steps between are recomputed)."""

CHECKPOINT_BYTES = 2 ** 30
"""Beyond about this much memory for a gradient's record of every step, :func:`grid_filter` recomputes each segment
instead (a third more time, against ``N d^2`` matrices kept)."""


def grid_filter(kernel, grid: TimeGrid, precision, natural_mean, periodic_order: int = PERIODIC_ORDER) -> FilterOutput:
    """The filter's predictions (:func:`kalman_filter`) along a :class:`TimeGrid`, lean in memory.

    The scan runs in segments of :data:`SEGMENT_STEPS` steps; where a gradient's record of every step's ``d x d``
    matrices would pass :data:`CHECKPOINT_BYTES`, their insides are recomputed for the gradient (:func:`jax.checkpoint`)
    and it holds ``O(N / SEGMENT_STEPS + SEGMENT_STEPS)`` state moments and transitions instead: a state of 17 runs at
    10^6 points. The transitions are computed
    once for the grid's distinct steps where they are few (one for a regular series) and looked up, else inside each
    segment.

    Parameters
    ----------
    kernel : Kernel
        A kernel with ``has_state_space``.
    grid : TimeGrid
        The times, sorted once.
    precision, natural_mean : jax.Array, shape (N,)
        The sites along the sorted times.
    periodic_order : int
        Harmonics of a periodic kernel's truncated series.

    Returns
    -------
    FilterOutput
        The predicted moments along the sorted times (no states).
    """
    n = grid.size
    blocks = -(-n // SEGMENT_STEPS)
    pad = blocks * SEGMENT_STEPS - n

    def padded(values):
        return jnp.concatenate([values, jnp.zeros(pad, dtype=values.dtype)]).reshape(blocks, -1)

    _, _, H, P_inf = transitions(kernel, jnp.zeros(1), periodic_order)
    if grid.distinct.size <= SEGMENT_STEPS:
        # few distinct steps (a regular series has one): their transitions once, looked up step by step
        A, Q, _, _ = transitions(kernel, jnp.asarray(grid.distinct, dtype=jnp.float64), periodic_order)
        d = H.shape[0]
        A = jnp.concatenate([A, jnp.eye(d)[None]])  # the last entry: no move, for the first point and the padding
        Q = jnp.concatenate([Q, jnp.zeros((1, d, d))])
        still = A.shape[0] - 1
        points = np.concatenate([[still], grid.index[1:], np.full(pad, still)]).reshape(blocks, -1)

        def moves(block):
            return A[block], Q[block]
    else:
        # as many as the points: each segment computes its own (a step of 0 does not move the state)
        points = padded(jnp.asarray(np.concatenate([[0.0], grid.distinct[grid.index[1:]]]), dtype=jnp.float64))

        def moves(block):
            return transitions(kernel, block, periodic_order)[:2]

    def segment(carry, block):
        A_block, Q_block = moves(block[0])

        def step(carry, point):
            return _predict_and_update(carry, *point, H)

        return jax.lax.scan(step, carry, (A_block, Q_block, block[1], block[2]))

    if n * H.shape[0] ** 2 * 48 > CHECKPOINT_BYTES:  # about what a gradient keeps of each step, in bytes
        segment = jax.checkpoint(segment)
    _, (mu, v) = jax.lax.scan(segment, (jnp.zeros(H.shape[0]), P_inf),
                              (jnp.asarray(points), padded(precision), padded(natural_mean)))
    return FilterOutput(jnp.ravel(mu)[:n], jnp.ravel(v)[:n], None, None)


def site_log_normaliser(filtered: FilterOutput, precision, natural_mean) -> jax.Array:
    """``log int N(f | 0, K) prod_k exp(-lambda_k f_k^2 / 2 + eta_k f_k) df`` from the filter's predictions."""
    mu, v = filtered.predicted_mean, filtered.predicted_var
    spread = 1.0 + precision * v
    return jnp.sum(-0.5 * jnp.log(spread)
                   + (natural_mean * (2.0 * mu + natural_mean * v) - precision * mu ** 2) / (2.0 * spread))


def _sorted_sites(times, precision, natural_mean):
    _check_lengths(times, precision=precision, natural_mean=natural_mean)
    sorted_times = sort_times(times)
    return sorted_times, precision[sorted_times.order], natural_mean[sorted_times.order]


def _check_lengths(times, **values) -> None:
    """Raise DataError unless ``times`` is one input per point and each of ``values`` has one entry per time."""
    if jnp.ndim(times) > 2 or (jnp.ndim(times) == 2 and jnp.shape(times)[-1] not in (1, 2)):
        raise DataError(f"a state-space GP takes a time per point, or a time and a group label; got inputs of shape "
                        f"{jnp.shape(times)}")
    n = jnp.shape(times)[0] if jnp.ndim(times) else 1
    for name, value in values.items():
        if jnp.ndim(value) > 1 or jnp.size(value) not in ((1, n) if name == "noise_variance" else (n,)):
            raise DataError(f"{name} has shape {jnp.shape(value)}; expected ({n},), one entry per time")


def _observations(y, noise_variance):
    """Sites of ``y ~ N(f, noise_variance)``; a NaN outcome is missing (no site)."""
    y = jnp.ravel(jnp.asarray(y, dtype=jnp.float64))
    noise_variance = jnp.broadcast_to(jnp.asarray(noise_variance, dtype=jnp.float64), y.shape)
    observed = ~jnp.isnan(y)
    y = jnp.where(observed, y, 0.0)
    precision = jnp.where(observed, 1.0 / noise_variance, 0.0)
    return y, noise_variance, observed, precision, precision * y


def log_marginal_likelihood(kernel, times, y, noise_variance, periodic_order: int = PERIODIC_ORDER) -> jax.Array:
    """``log N(y | 0, K + diag(sigma^2))`` in ``O(N)`` by the Kalman filter; NaN outcomes are missing.

    Parameters
    ----------
    kernel : Kernel
        A kernel with ``has_state_space`` (of the scalar input ``times``).
    times : array_like of shape (N,) or (N, 2) (:func:`series_columns`), or TimeGrid
        Inputs in any order, repeats allowed. Given as data (not traced) or sorted once (:func:`time_grid`), the
        filter is :func:`grid_filter`, lean in memory.
    y : array_like, shape (N,)
        Outcomes; NaN where missing.
    noise_variance : float or array_like of shape (N,)
        ``sigma^2``, positive.
    periodic_order : int
        Harmonics of a periodic kernel's truncated series.

    Returns
    -------
    jax.Array, shape ()
        Differentiable in the kernel's hyperparameters and ``noise_variance``.
    """
    if isinstance(times, jax.core.Tracer):
        return _log_marginal_over_traced_times(kernel, times, y, noise_variance, periodic_order)
    _check_lengths(times.order if isinstance(times, TimeGrid) else times, y=y, noise_variance=noise_variance)
    grid = times if isinstance(times, TimeGrid) else time_grid(times)
    y, noise_variance, observed, precision, natural_mean = _observations(y, noise_variance)
    order = grid.order
    filtered = grid_filter(kernel, grid, precision[order], natural_mean[order], periodic_order)
    return _gaussian_log_terms(filtered, y[order], noise_variance[order], observed[order])


@partial(jax.jit, static_argnames="periodic_order")
def _log_marginal_over_traced_times(kernel, times, y, noise_variance, periodic_order: int) -> jax.Array:
    _check_lengths(times, y=y, noise_variance=noise_variance)
    y, noise_variance, observed, precision, natural_mean = _observations(y, noise_variance)
    sorted_times, precision, natural_mean = _sorted_sites(times, precision, natural_mean)
    filtered = kalman_filter(*transitions(kernel, sorted_times.steps, periodic_order), precision, natural_mean)
    order = sorted_times.order
    return _gaussian_log_terms(filtered, y[order], noise_variance[order], observed[order])


def _gaussian_log_terms(filtered: FilterOutput, y, noise_variance, observed) -> jax.Array:
    """``sum_k log N(y_k | mu_k, v_k + sigma_k^2)`` over the observed sorted points."""
    total = filtered.predicted_var + noise_variance
    residual = y - filtered.predicted_mean
    terms = -0.5 * (jnp.log(2.0 * jnp.pi * total) + residual ** 2 / total)
    return jnp.sum(jnp.where(observed, terms, 0.0))


@partial(jax.jit, static_argnames="periodic_order")
def site_normaliser(kernel, times, precision, natural_mean, periodic_order: int = PERIODIC_ORDER) -> jax.Array:
    """``log int N(f | 0, K) prod_k exp(-lambda_k f_k^2 / 2 + eta_k f_k) df`` in ``O(N)``.

    With ``Sigma = (K^-1 + diag(lambda))^-1`` this is ``eta^T Sigma eta / 2 - log|I + K diag(lambda)| / 2``: the
    Gaussian-site part of a Laplace or EP approximation's log marginal likelihood.

    Parameters
    ----------
    kernel : Kernel
        A kernel with ``has_state_space``.
    times : array_like, shape (N,), or (N, 2) of times and group labels (:func:`series_columns`)
        Inputs in any order.
    precision, natural_mean : array_like, shape (N,)
        Site precisions ``lambda >= 0`` and natural means ``eta``.
    periodic_order : int
        Harmonics of a periodic kernel's truncated series.

    Returns
    -------
    jax.Array, shape ()
    """
    precision = jnp.asarray(precision, dtype=jnp.float64)
    natural_mean = jnp.asarray(natural_mean, dtype=jnp.float64)
    sorted_times, precision, natural_mean = _sorted_sites(times, precision, natural_mean)
    filtered = kalman_filter(*transitions(kernel, sorted_times.steps, periodic_order), precision, natural_mean)
    return site_log_normaliser(filtered, precision, natural_mean)


def rts_smoother(A, Q, H, filtered: FilterOutput) -> Marginals:
    """The Rauch-Tung-Striebel pass over :func:`kalman_filter`'s states: the posterior marginals of ``f``, sorted.

    Parameters
    ----------
    A, Q : jax.Array, shape (N, d, d)
    H : jax.Array, shape (d,)
    filtered : FilterOutput
        With the filtered states (``keep_states=True``).

    Returns
    -------
    Marginals
        Means and variances along the sorted points.
    """
    def step(carry, point):
        later_mean, later_cov = carry
        mean, cov, A_next, Q_next = point
        predicted = A_next @ cov @ A_next.T + Q_next
        factor = cholesky(0.5 * (predicted + predicted.T))
        gain = cho_solve((factor, True), A_next @ cov).T
        mean = mean + gain @ (later_mean - A_next @ mean)
        cov = cov + gain @ (later_cov - predicted) @ gain.T
        cov = 0.5 * (cov + cov.T)
        return (mean, cov), (H @ mean, H @ cov @ H)

    last_mean, last_cov = filtered.filtered_mean[-1], filtered.filtered_cov[-1]
    points = (filtered.filtered_mean[:-1], filtered.filtered_cov[:-1], A[1:], Q[1:])
    _, (means, variances) = jax.lax.scan(step, (last_mean, last_cov), points, reverse=True)
    return Marginals(jnp.append(means, H @ last_mean), jnp.append(variances, H @ last_cov @ H))


class SitePosterior(NamedTuple):
    """Posterior marginals of ``f`` under Gaussian sites and the sites' log normaliser.

    Attributes
    ----------
    mean, variance : jax.Array, shape (N,)
        ``Sigma eta`` and ``diag(Sigma)``, ``Sigma = (K^-1 + diag(lambda))^-1``, in the caller's order.
    log_normaliser : jax.Array, shape ()
        As :func:`site_normaliser`.
    """

    mean: jax.Array
    variance: jax.Array
    log_normaliser: jax.Array


@partial(jax.jit, static_argnames="periodic_order")
def smooth(kernel, times, precision, natural_mean, periodic_order: int = PERIODIC_ORDER) -> SitePosterior:
    """Posterior marginals of ``f`` under Gaussian sites: ``N(f | 0, K) prod_k exp(-lambda_k f_k^2 / 2 + eta_k f_k)``.

    The means are ``Sigma eta`` and the variances ``diag(Sigma)``, ``Sigma = (K^-1 + diag(lambda))^-1``, in
    ``O(N)``; a point with ``lambda = eta = 0`` gets the prediction from the others. The log normaliser comes from
    the same filter pass. With a Laplace approximation's sites (``W`` and ``W f_hat + a``) the mean is its mode
    ``f_hat`` and its log marginal likelihood is ``log p(y | f_hat) + f_hat^T W f_hat / 2 - eta^T f_hat +
    log_normaliser``.

    Parameters
    ----------
    kernel : Kernel
        A kernel with ``has_state_space``.
    times : array_like, shape (N,), or (N, 2) of times and group labels (:func:`series_columns`)
        Inputs in any order.
    precision, natural_mean : array_like, shape (N,)
        Site precisions ``lambda >= 0`` and natural means ``eta``.
    periodic_order : int
        Harmonics of a periodic kernel's truncated series.

    Returns
    -------
    SitePosterior
        In the order of ``times``.
    """
    precision = jnp.asarray(precision, dtype=jnp.float64)
    natural_mean = jnp.asarray(natural_mean, dtype=jnp.float64)
    sorted_times, precision, natural_mean = _sorted_sites(times, precision, natural_mean)
    A, Q, H, P_inf = transitions(kernel, sorted_times.steps, periodic_order)
    filtered = kalman_filter(A, Q, H, P_inf, precision, natural_mean, keep_states=True)
    marginals = rts_smoother(A, Q, H, filtered)
    unsort = jnp.argsort(sorted_times.order)
    return SitePosterior(marginals.mean[unsort], marginals.variance[unsort],
                         site_log_normaliser(filtered, precision, natural_mean))


@partial(jax.jit, static_argnames="periodic_order")
def posterior_marginals(kernel, times, y, noise_variance, periodic_order: int = PERIODIC_ORDER) -> Marginals:
    """Posterior means and variances of ``f`` at ``times`` given ``y ~ N(f, sigma^2)`` (NaN outcomes missing)."""
    _check_lengths(times, y=y, noise_variance=noise_variance)
    _, _, _, precision, natural_mean = _observations(y, noise_variance)
    return Marginals(*smooth(kernel, times, precision, natural_mean, periodic_order)[:2])


@partial(jax.jit, static_argnames="periodic_order")
def predict(kernel, times, y, noise_variance, new_times, periodic_order: int = PERIODIC_ORDER) -> Marginals:
    """Posterior predictive means and variances of ``f`` at ``new_times`` given ``y ~ N(f, sigma^2)`` at ``times``.

    The new times are merged into the data's without sites and the smoother runs over all of them, ``O(N + M)``.

    Parameters
    ----------
    kernel : Kernel
        A kernel with ``has_state_space``.
    times, y : array_like, shape (N,)
        Data inputs and outcomes (NaN where missing).
    noise_variance : float or array_like of shape (N,)
        ``sigma^2``.
    new_times : array_like, shape (M,), or (M, 2) as the times
        Where to predict, any order.
    periodic_order : int
        Harmonics of a periodic kernel's truncated series.

    Returns
    -------
    Marginals
        Of ``f`` (add ``sigma^2`` for a new outcome), in the order of ``new_times``.
    """
    _check_lengths(times, y=y, noise_variance=noise_variance)
    _check_lengths(new_times)
    _, _, _, precision, natural_mean = _observations(y, noise_variance)
    all_times = merged_times(times, new_times)
    no_sites = jnp.zeros(all_times.shape[0] - precision.shape[0])
    marginals = smooth(kernel, all_times, jnp.concatenate([precision, no_sites]),
                       jnp.concatenate([natural_mean, no_sites]), periodic_order)
    return Marginals(marginals.mean[precision.shape[0]:], marginals.variance[precision.shape[0]:])


def symmetric_square_root(S) -> jax.Array:
    """``R`` with ``R R^T = S`` for a symmetric positive semi-definite ``S``, by its eigenvectors.

    Eigenvalues that rounding made negative count as zero, so a singular ``S`` (zero process noise) is fine.
    """
    values, vectors = eigh(S)
    return vectors * jnp.sqrt(jnp.clip(values, 0.0))[..., None, :]


@partial(jax.jit, static_argnames=("n_draws", "periodic_order"))
def prior_draws(key, kernel, times, n_draws: int = 1, periodic_order: int = PERIODIC_ORDER) -> jax.Array:
    """Draws of ``f ~ N(0, K)`` at ``times`` in ``O(N)`` per draw, through the state-space recursion.

    Parameters
    ----------
    key : jax.Array
        A PRNG key.
    kernel : Kernel
        A kernel with ``has_state_space``.
    times : array_like, shape (N,), or (N, 2) of times and group labels (:func:`series_columns`)
        Inputs in any order, repeats allowed.
    n_draws : int
        Number of independent draws.
    periodic_order : int
        Harmonics of a periodic kernel's truncated series.

    Returns
    -------
    jax.Array, shape (n_draws, N)
        In the order of ``times``.
    """
    _check_lengths(times)
    sorted_times = sort_times(times)
    A, Q, H, P_inf = transitions(kernel, sorted_times.steps, periodic_order)
    Q = Q.at[0].set(P_inf)
    noise = jax.random.normal(key, (A.shape[0], A.shape[-1], n_draws))

    def step(state, point):
        A_k, Q_k, z = point
        state = A_k @ state + symmetric_square_root(Q_k) @ z
        return state, H @ state

    _, draws = jax.lax.scan(step, jnp.zeros((A.shape[-1], n_draws)), (A, Q, noise))
    return draws[jnp.argsort(sorted_times.order)].T
