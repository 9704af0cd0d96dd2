"""``q(X)`` under a Markovian GP prior over time, in ``O(N)``: Matérn-1/2, 3/2 and 5/2 as state-space models.

The family is the one of :class:`~gpdsl.inference.variational.gp_prior_q.GPPriorGaussian`, in the same
coordinates: per latent dimension ``q(x_q) ∝ N(x_q | 0, K) prod_n N(sites)``, with ``mu_q = K mu_bar_q``
and ``S_q = (K^-1 + diag(lambda_q))^-1`` (Opper & Archambeau 2009). Only the way its marginals and KL
term are computed differs. A half-integer Matérn kernel of order ``nu = p + 1/2`` over a scalar time is
the covariance of the first component of a linear stochastic differential equation with a state of
dimension ``d = p + 1`` (Hartikainen & Särkkä 2010), so between sorted times ``t_{k-1} <= t_k`` the state
moves as ``s_k = A_k s_{k-1} + q_k``, ``q_k ~ N(0, Q_k)``, with ``A_k = expm(F (t_k - t_{k-1}))`` and
``Q_k = P_inf - A_k P_inf A_k^T`` (the state-space GP's :func:`gpdsl.kernels.kalman.transitions`).
Every quantity below is a sum over the points or a recursion along them, ``O(N d^3)`` per latent
dimension instead of the dense ``O(N^3)``.

The prior of the latent inputs may add white noise to the Matérn term, ``k_x = k_s + w delta`` (the
dense covariance also carries ``GP_JITTER`` on its diagonal, which joins ``w``). Then ``x = s + e`` with
``s`` Markov and ``e ~ N(0, w I)`` independent, and the computation is still exact:

* the sites on ``x`` with precisions ``lambda`` act on ``s`` as observations of precision
  ``lambda_s = lambda / (1 + w lambda)``;
* ``mu = K mu_bar = K_s mu_bar + w mu_bar``, where ``K_s mu_bar`` is a causal plus an anticausal linear
  recursion through the state;
* ``var(x_n) = w / (1 + w lambda_n) + var(s_n) / (1 + w lambda_n)^2``, with ``var(s_n)`` the smoothed
  variance of the state-space model observed with precisions ``lambda_s`` (a forward Kalman filter
  combined with a backward information filter: no inverse of a predicted covariance is ever taken);
* ``log|B| = log|I + Lambda^1/2 K Lambda^1/2| = sum_n log(1 + w lambda_n) + sum_n log(1 + lambda_s,n v_n)``
  with ``v_n`` the filter's one-step predictive variance of ``s_n`` (the prediction-error decomposition),
  and ``tr(B^-1) = N - sum_n lambda_n var(x_n)``;
* ``KL_q = 1/2 [tr(B^-1) + mu_bar^T K mu_bar + log|B| - N]``, as in the dense family.

Unsorted and repeated times are allowed: points are sorted internally (a time step of zero has
``A = I, Q = 0``; the white and jitter terms keep ``K`` itself positive definite, exactly as the dense
matrix). Independent sequences (``* same(sequence)`` in the kernel) are concatenated, the state restarting
from ``N(0, P_inf)`` (``A = 0``) at the first point of each.

By default (``method="filters"``) the Kalman filter forwards, the information filter backwards and the
two linear recursions of ``K_s mu_bar`` step point by point in one scan
(:mod:`~gpdsl.inference.variational.markov_filters`), and the gradient of the bound goes through a
hand-written reverse pass, itself a pair of linear recursions with coefficients from the stored filter
passes (:mod:`~gpdsl.inference.variational.markov_adjoint`): JAX's reverse mode through the scan stored
and replayed every intermediate of every step, about ten times the cost of the value.

The other methods compose the filtering elements ``(A, b, C, eta, J)`` of Särkkä & García-Fernández
(2021, "Temporal parallelization of Bayesian smoothers"), an associative operation (:func:`combine`), in
one prefix scan that runs the filter forwards and, through the duality :func:`dual`, the backward
information filter; the causal and anticausal recursions of ``K_s mu_bar`` are elements of the same kind
with ``C = J = 0``. ``"blocked"`` (:func:`prefixes`: about ``2 sqrt(N)`` sequential steps, each
vectorised over the blocks), ``"sequential"`` (one ``lax.scan`` over the ``N`` points) and ``"parallel"``
(:func:`jax.lax.associative_scan`, ``O(log N)`` depth, but slow to compile and, on CPU, slower to run)
are differentiated by JAX; each element costs several times a filter step. Small matrices are nested
tuples of arrays (:mod:`~gpdsl.inference.variational.small_matrices`). ``benchmarks/dynamical_bound.py``
compares them.

Site updates (:mod:`~gpdsl.inference.variational.site_updates`) map sites ``(eta, lambda)`` back to
``mu_bar`` through the dense blocks of :meth:`GPPriorGaussian.covariance_blocks`, which this class
inherits; :meth:`MarkovGaussian.mu_bar_from_sites` is the ``O(N)`` version of that map. The full
covariance (:meth:`~GPPriorGaussian.covariance`) and the dense prior covariance are also the inherited
dense ones.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from gpdsl.errors import MethodError
from gpdsl.inference.variational.gp_prior_q import (
    DEFAULT_MEDIAN_VARIANCE,
    LAMBDA_RANGE,
    GPPriorGaussian,
    GPPriorMoments,
    GPPriorQParams,
)
from gpdsl.inference.variational.markov_adjoint import smoothed_marginals
from gpdsl.inference.variational.markov_filters import FilterPasses, filter_passes, smoothed_factor
from gpdsl.inference.variational.small_matrices import (
    add,
    eye_plus,
    mm,
    mv,
    neg,
    small_inverse,  # noqa: F401 (part of this module's interface)
    to_tuples,
    transpose,
)
from gpdsl.kernels import kalman
from gpdsl.kernels.composite import Product, Scale, Sum
from gpdsl.kernels.registry import KERNELS
from gpdsl.kernels.static import Same, White
from gpdsl.numerics import GP_JITTER

MARKOV_KERNELS = {int(cls.two_nu): cls for cls in KERNELS.values()
                  if cls.has_state_space and hasattr(cls, "two_nu")}
"""The state-space kernels of a variance and a length-scale (the half-integer Matérns), by ``2 nu``."""
MATERN_ORDERS = {cls.spec.name: two_nu for two_nu, cls in MARKOV_KERNELS.items()}  # kernel name -> 2 nu
SCAN_METHODS = ("blocked", "parallel", "sequential")  # of prefixes()
METHODS = ("filters", *SCAN_METHODS)  # of MarkovGaussian; the first is the default


class MarkovHyperparameters(NamedTuple):
    """The numbers of a Markovian time prior ``k_x = variance * matern(lengthscale) [* same] + white``.

    Attributes
    ----------
    variance : jax.Array
        The Matérn term's variance (its own times any scale factors).
    lengthscale : jax.Array
        Its length-scale, a scalar.
    white : jax.Array
        The total variance of the white-noise terms (0 without any).
    """

    variance: jax.Array
    lengthscale: jax.Array
    white: jax.Array


class Elements(NamedTuple):
    """Filtering elements of Särkkä & García-Fernández (2021): matrices and vectors as nested tuples of arrays.

    An element stands for ``p(s_k | s_{k-1}, y_k) = N(A s_{k-1} + b, C)`` and for the likelihood of the
    observations as a function of ``s_{k-1}``, ``exp(-1/2 s^T J s + eta^T s)``; :func:`combine` composes
    two consecutive stretches.
    """

    A: jax.Array
    b: jax.Array
    C: jax.Array
    eta: jax.Array
    J: jax.Array


def markov_hyperparameters(kernel) -> MarkovHyperparameters:
    """Read variance, length-scale and white-noise variance off a kernel of the Markovian form.

    Parameters
    ----------
    kernel : gpdsl.kernels.Kernel
        A sum of one term ``[c *] matern{12,32,52}(...) [* same(...)]`` and any number of white-noise
        terms, as recognised on the model by ``gpdsl.inference.families.gplvm`` (traceable).

    Returns
    -------
    MarkovHyperparameters

    Raises
    ------
    MethodError
        The kernel is not of that form.
    """
    terms = _terms(kernel)
    markov = [(coefficient, matern) for coefficient, matern, white in terms if matern is not None]
    if len(markov) != 1 or any(white and matern is not None for _, matern, white in terms):
        raise MethodError("a Markovian time prior needs exactly one Matérn term plus white noise")
    coefficient, matern = markov[0]
    white = sum((c for c, _, is_white in terms if is_white), jnp.zeros(()))
    return MarkovHyperparameters(coefficient * matern.variance, jnp.reshape(matern.lengthscale, ()), white)


def _terms(kernel) -> list:
    """The kernel as a sum of ``(coefficient, matern leaf or None, is_white)`` products."""
    if isinstance(kernel, Sum):
        return _terms(kernel.k1) + _terms(kernel.k2)
    if isinstance(kernel, Scale):
        return [(kernel.scale * c, m, w) for c, m, w in _terms(kernel.kernel)]
    if isinstance(kernel, Product):
        pairs = [(a, b) for a in _terms(kernel.k1) for b in _terms(kernel.k2)]
        if any((a[1] is not None and b[1] is not None) or (a[2] and b[2]) or (a[1] is not None and b[2])
               or (a[2] and b[1] is not None) for a, b in pairs):
            raise MethodError("a Markovian time prior cannot multiply Matérn or white-noise terms together")
        return [(a[0] * b[0], a[1] if a[1] is not None else b[1], a[2] or b[2]) for a, b in pairs]
    if isinstance(kernel, tuple(MARKOV_KERNELS.values())):
        return [(jnp.ones(()), kernel, False)]
    if isinstance(kernel, White):
        return [(kernel.variance, None, True)]
    if isinstance(kernel, Same):
        return [(jnp.ones(()), None, False)]
    raise MethodError(f"{type(kernel).__name__} is not part of a Markovian time prior")


# ---- the state-space form of the Matérn kernel ---------------------------------------------------
def markov_kernel_class(two_nu: int) -> type:
    """The kernel class of :data:`MARKOV_KERNELS` of order ``nu = two_nu / 2``.

    Raises
    ------
    MethodError
        There is none.
    """
    if two_nu not in MARKOV_KERNELS:
        orders = ", ".join(str(order) for order in MARKOV_KERNELS)
        raise MethodError(f"Matérn order 2 nu = {two_nu} has no state-space form here; use one of {orders}")
    return MARKOV_KERNELS[two_nu]


def transitions(two_nu: int, variance, lengthscale, dt, first) -> tuple[jax.Array, jax.Array, jax.Array]:
    """``(A, Q, P_inf)``: transition matrices and process-noise covariances ``(N, d, d)`` along sorted times.

    ``dt[k] = t_k - t_{k-1} >= 0``; where ``first[k]`` (the first point of a sequence) ``A = 0`` and ``Q =
    P_inf``, so the state restarts from the stationary distribution. Elsewhere they are those of the
    state-space GP (:func:`gpdsl.kernels.kalman.transitions` of the kernel of :func:`markov_kernel_class`),
    whose first state component is the process.
    """
    A, Q, _, P_inf = kalman.transitions(markov_kernel_class(two_nu)(variance, lengthscale), jnp.asarray(dt))
    restart = jnp.asarray(first)[:, None, None]
    return jnp.where(restart, 0.0, A), jnp.where(restart, P_inf, Q), P_inf


# ---- associative scan -----------------------------------------------------------------------------
def combine(first: Elements, second: Elements) -> Elements:
    """The element of two consecutive stretches, ``first`` before ``second`` (Särkkä & García-Fernández 2021, Lemma 8).

    With ``M = (I + C_1 J_2)^-1``::

        A = A_2 M A_1,   b = A_2 M (b_1 + C_1 eta_2) + b_2,   C = A_2 M C_1 A_2^T + C_2,
        eta = A_1^T M^T (eta_2 - J_2 b_1) + eta_1,   J = A_1^T M^T J_2 A_1 + J_1.

    ``C`` and ``J`` are covariances and precisions, so ``I + C_1 J_2`` has eigenvalues at least 1.
    Matrices and vectors are nested tuples of arrays (see :func:`to_tuples`).
    """
    A1, b1, C1, eta1, J1 = first
    A2, b2, C2, eta2, J2 = second
    M = small_inverse(eye_plus(mm(C1, J2)))
    A2M = mm(A2, M)
    A1tMt = transpose(mm(M, A1))
    return Elements(mm(A2M, A1), add(mv(A2M, add(b1, mv(C1, eta2))), b2), add(mm(mm(A2M, C1), transpose(A2)), C2),
                    add(mv(A1tMt, add(eta2, neg(mv(J2, b1)))), eta1), add(mm(mm(A1tMt, J2), A1), J1))


def dual(elements: Elements) -> Elements:
    """``(A^T, eta, J, -b, C)``: ``dual(combine(e, f)) = combine(dual(f), dual(e))``.

    So the suffixes ``e_k ... e_N`` are the duals of the prefixes of the reversed duals, and one prefix
    scan over both (batched) gives the forward filter and the backward information filter.
    """
    return Elements(transpose(elements.A), elements.eta, elements.J, neg(elements.b), elements.C)


def undual(elements: Elements) -> Elements:
    """The inverse of :func:`dual`, ``(A^T, -eta, J, b, C)``."""
    return Elements(transpose(elements.A), neg(elements.eta), elements.J, elements.b, elements.C)


def identity_elements(shape: tuple[int, ...], d: int) -> Elements:
    """The neutral element of :func:`combine` (``A = I``, the rest zero), entries of shape ``shape``."""
    zero, one = jnp.zeros(shape), jnp.ones(shape)
    matrix = tuple(tuple(zero for _ in range(d)) for _ in range(d))
    vector = tuple(zero for _ in range(d))
    eye = tuple(tuple(one if i == j else zero for j in range(d)) for i in range(d))
    return Elements(eye, vector, matrix, vector, matrix)


def prefixes(elements: Elements, method: str = "blocked") -> Elements:
    """``e_1 ... e_k`` for every ``k``: all prefix combinations along axis 0 of every entry.

    Parameters
    ----------
    elements : Elements
        Nested tuples of arrays of one shape ``(N, ...)``, the sequence along axis 0.
    method : {"blocked", "parallel", "sequential"}
        ``"parallel"``: :func:`jax.lax.associative_scan` (``O(log N)`` depth, but many small strided
        slices). ``"sequential"``: one :func:`jax.lax.scan` (depth ``N``). ``"blocked"``: the sequence cut
        into about ``sqrt(N)`` blocks of about ``sqrt(N)`` points; one scan builds the prefixes within every
        block at once, a short one those of the blocks' totals, and one vectorised combination joins them
        (depth about ``2 sqrt(N)``).

    Returns
    -------
    Elements
        Shaped as ``elements``.
    """
    if method == "parallel":
        return jax.lax.associative_scan(combine, elements)
    if method == "sequential":
        return _sequential(elements)
    if method != "blocked":
        raise MethodError(f"method must be one of {', '.join(SCAN_METHODS)}; got {method!r}")
    leaf = jax.tree_util.tree_leaves(elements)[0]
    N, batch, d = leaf.shape[0], leaf.shape[1:], len(elements.A)
    length = max(1, int(np.ceil(np.sqrt(N))))
    count = -(-N // length)
    identity = identity_elements(batch, d)
    padded = jax.tree_util.tree_map(
        lambda a, e: jnp.concatenate([a, jnp.broadcast_to(e, (count * length - N, *e.shape))]), elements, identity)
    by_step = jax.tree_util.tree_map(lambda a: jnp.swapaxes(jnp.reshape(a, (count, length, *batch)), 0, 1), padded)
    local = _sequential(by_step)  # (length, count, ...): prefixes within each block
    totals = _sequential(jax.tree_util.tree_map(lambda a: a[-1], local))  # prefixes of whole blocks
    before = jax.tree_util.tree_map(lambda e, a: jnp.concatenate([e[None], a[:-1]])[None], identity, totals)
    joined = combine(before, local)
    return jax.tree_util.tree_map(lambda a: jnp.reshape(jnp.swapaxes(a, 0, 1), (count * length, *batch))[:N], joined)


def _sequential(elements: Elements) -> Elements:
    leaf = jax.tree_util.tree_leaves(elements)[0]

    def step(prefix, element):
        prefix = combine(prefix, element)
        return prefix, prefix

    return jax.lax.scan(step, identity_elements(leaf.shape[1:], len(elements.A)), elements)[1]


def element_passes(A_array, Q_array, P_array, lam, eta=None, mu_bar=None, method: str = "blocked") -> FilterPasses:
    """:class:`~gpdsl.inference.variational.markov_filters.FilterPasses` from one prefix scan of filtering elements.

    The same quantities as :func:`~gpdsl.inference.variational.markov_filters.filter_passes` (same
    arguments, plus the scan ``method`` of :func:`prefixes`): the sites' elements run the filter forwards
    and, through :func:`dual`, the information filter backwards; ``K_s mu_bar`` comes from elements with
    ``C = J = 0`` batched with them.
    """
    N, Q = lam.shape
    d = A_array.shape[-1]
    A, Qn, P_inf = to_tuples(A_array[:, None]), to_tuples(Q_array[:, None]), to_tuples(P_array)
    v = Qn[0][0]
    gain = lam / (1.0 + lam * v)  # (N, Q): the scalar S^-1 of the update
    QH, AH = tuple(Qn[i][0] for i in range(d)), A[0]  # Q H^T and A^T H^T
    zero = jnp.zeros((N, Q))
    observed = zero if eta is None else eta / (1.0 + lam * v)  # S^-1 y
    filtering = Elements(
        tuple(tuple(A[i][j] - gain * QH[i] * AH[j] for j in range(d)) for i in range(d)),
        tuple(QH[i] * observed for i in range(d)),
        tuple(tuple(Qn[i][j] - gain * QH[i] * QH[j] for j in range(d)) for i in range(d)),
        tuple(AH[i] * observed for i in range(d)),
        tuple(tuple(gain * AH[i] * AH[j] for j in range(d)) for i in range(d)))
    parts = [filtering]
    if mu_bar is not None:
        zeros = tuple(tuple(zero for _ in range(d)) for _ in range(d))
        parts.append(Elements(A, tuple(P_inf[i][0] * mu_bar for i in range(d)), zeros,
                              tuple(AH[i] * mu_bar for i in range(d)), zeros))
    forward = jax.tree_util.tree_map(lambda *a: jnp.stack([jnp.broadcast_to(x, (N, Q)) for x in a], 1), *parts)
    backward = jax.tree_util.tree_map(lambda a: a[::-1], dual(forward))
    both = jax.tree_util.tree_map(lambda a, b: jnp.stack([a, b], 1), forward, backward)
    scanned = prefixes(both, method)  # entries (N, 2, parts, Q)
    suffix = undual(jax.tree_util.tree_map(lambda a: a[::-1, 1], scanned))
    later = jax.tree_util.tree_map(lambda a: jnp.concatenate([a[1:], jnp.zeros_like(a[:1])]), suffix)
    pick = (lambda tree, k: jax.tree_util.tree_map(lambda a: a[:, k], tree))
    prefix = jax.tree_util.tree_map(lambda a: a[:, 0], scanned)
    P = pick(prefix.C, 0)
    P_before = jax.tree_util.tree_map(lambda a: jnp.concatenate([jnp.zeros_like(a[:1]), a[:-1]]), P)
    predicted = sum(AH[i] * P_before[i][j] * AH[j] for i in range(d) for j in range(d)) + v
    with_mean = mu_bar is not None
    return FilterPasses(P, predicted, pick(later.J, 0), None if eta is None else pick(prefix.b, 0),
                        None if eta is None else pick(later.eta, 0), pick(prefix.b, 1) if with_mean else None,
                        pick(later.eta, 1) if with_mean else None)


# ---- the family ------------------------------------------------------------------------------------
class _Smoothed(NamedTuple):
    """Marginals of the state's first component under sites, per point and latent dimension (sorted order)."""

    mean: jax.Array | None  # smoothed E[s_k] under the sites (None when not asked for)
    variance: jax.Array  # smoothed var(s_k)
    log_det: jax.Array  # sum_k log(1 + lambda_s v_k), shape (Q,)
    prior_mean: jax.Array | None  # (K_s mu_bar)_k, when mu_bar was given


class MarkovGaussian(GPPriorGaussian):
    """:class:`GPPriorGaussian` for a Matérn-1/2, 3/2 or 5/2 time prior, evaluated in ``O(N)`` by state-space recursions.

    Parameters are :class:`~gpdsl.inference.variational.gp_prior_q.GPPriorQParams` (``mu_bar``,
    ``lambda``), the same coordinates and the same family as the dense class: the bound, its gradient
    and its optimum agree with it to rounding. See the module docstring for the computation.

    Parameters
    ----------
    prior_covariance : callable
        The dense prior covariance, as for :class:`GPPriorGaussian` (used only by the inherited dense
        methods: :meth:`covariance`, :meth:`dense_prior_covariance`, :meth:`covariance_blocks`).
    blocks : sequence of array_like of int or None
        As for :class:`GPPriorGaussian`.
    times : array_like, shape (N,)
        The scalar time of each point (any order, repeats allowed).
    groups : array_like, shape (N,), optional
        A label per point; points with different labels are independent (``same(sequence)``).
    hyperparameters : callable
        ``theta -> MarkovHyperparameters`` (traceable).
    two_nu : {1, 3, 5}
        ``2 nu`` of the Matérn kernel (a key of :data:`MARKOV_KERNELS`).
    method : {"filters", "blocked", "parallel", "sequential"}
        How the recursions run: ``"filters"`` (the default) steps the two filters point by point
        (:func:`~gpdsl.inference.variational.markov_filters.filter_passes`) and differentiates them by the
        hand-written reverse pass of :mod:`~gpdsl.inference.variational.markov_adjoint`; the others are
        prefix scans of filtering elements (:func:`prefixes`) differentiated by JAX.
    """

    def __init__(self, prior_covariance: Callable, blocks, times, groups, hyperparameters: Callable, two_nu: int,
                 method: str = "filters"):
        super().__init__(prior_covariance, blocks)
        markov_kernel_class(two_nu)
        if method not in METHODS:
            raise MethodError(f"method must be one of {', '.join(METHODS)}; got {method!r}")
        times = np.asarray(times, dtype=float).ravel()
        groups = np.zeros(times.shape, dtype=int) if groups is None else np.unique(
            np.asarray(groups).reshape(times.size, -1), axis=0, return_inverse=True)[1].ravel()
        self.order = np.lexsort((times, groups))
        self.inverse_order = np.argsort(self.order)
        sorted_times, sorted_groups = times[self.order], groups[self.order]
        self.first = np.concatenate([[True], sorted_groups[1:] != sorted_groups[:-1]])
        self.dt = np.where(self.first, 0.0, np.diff(sorted_times, prepend=sorted_times[0]))
        self.hyperparameters = hyperparameters
        self.two_nu = two_nu
        self.method = method

    def _state_space(self, theta):
        """``(A, Q, P_inf)`` along the sorted points and the white-noise variance ``w`` (jitter included)."""
        variance, lengthscale, white = self.hyperparameters(theta)
        return transitions(self.two_nu, variance, lengthscale, self.dt, self.first), white + GP_JITTER

    def _smooth(self, theta, lam, eta=None, mu_bar=None) -> tuple[_Smoothed, jax.Array]:
        """Smoothed marginals of ``s`` under sites ``(eta, lam)`` on ``x`` (sorted rows), and ``w``.

        ``eta=None`` computes variances only; ``mu_bar`` adds ``K_s mu_bar``. The passes come from
        :func:`~gpdsl.inference.variational.markov_filters.filter_passes` (``method="filters"``) or from a
        prefix scan of filtering elements (:func:`element_passes`).
        """
        (A, Qn, P_inf), w = self._state_space(theta)
        lam_s = lam / (1.0 + w * lam)
        eta_s = None if eta is None else eta / (1.0 + w * lam)
        if self.method == "filters":
            passes = filter_passes(A, Qn, P_inf, lam_s, eta_s, mu_bar)
        else:
            passes = element_passes(A, Qn, P_inf, lam_s, eta_s, mu_bar, self.method)
        factor = smoothed_factor(passes)
        P = passes.filtered_cov
        smoothed = mm(factor, P)
        mean = None if eta is None else mv(factor, add(passes.filtered_mean, mv(P, passes.later_info)))[0]
        log_det = jnp.sum(jnp.log1p(lam_s * passes.predicted_var), axis=0)
        prior_mean = None
        if mu_bar is not None:
            prior_mean = passes.causal[0] + sum(P_inf[0, i] * passes.anticausal[i] for i in range(len(P)))
        return _Smoothed(mean, smoothed[0][0], log_det, prior_mean), w

    def moments(self, params, theta, xp=jnp) -> GPPriorMoments:
        """Marginal means and variances with the pieces of the KL term (see the module docstring), in ``O(N)``.

        With ``method="filters"`` the gradient goes through the hand-written reverse pass of
        :func:`~gpdsl.inference.variational.markov_adjoint.smoothed_marginals`.
        """
        mu_bar = jnp.asarray(params.mu_bar)[self.order]
        lam = jnp.asarray(params.lam)[self.order]
        if self.method == "filters":
            (A, Qn, P_inf), w = self._state_space(theta)
            smoothed = _Smoothed(None, *smoothed_marginals(A, Qn, P_inf, lam / (1.0 + w * lam), mu_bar))
        else:
            smoothed, w = self._smooth(theta, lam, mu_bar=mu_bar)
        mean = smoothed.prior_mean + w * mu_bar
        scale = 1.0 / (1.0 + w * lam)
        variance = w * scale + smoothed.variance * scale * scale
        N = lam.shape[0]
        moments = GPPriorMoments(mean[self.inverse_order], variance[self.inverse_order], jnp.sum(mu_bar * mean),
                                 jnp.sum(jnp.log1p(w * lam), axis=0) + smoothed.log_det,
                                 N - jnp.sum(lam * variance, axis=0))
        if xp is np:
            return GPPriorMoments(*(np.asarray(part) for part in moments))
        return moments

    def marginal_variances(self, lam, theta) -> jax.Array:
        """``diag((K^-1 + diag(lambda_q))^-1)`` per latent dimension, shape ``(N, Q)``, in ``O(N)``."""
        lam = jnp.asarray(lam)[self.order]
        smoothed, w = self._smooth(theta, lam)
        scale = 1.0 / (1.0 + w * lam)
        return (w * scale + smoothed.variance * scale * scale)[self.inverse_order]

    def mu_bar_from_sites(self, eta, lam, theta) -> jax.Array:
        """``mu_bar = eta - lambda * mu`` with ``mu = (K^-1 + diag(lambda))^-1 eta``: sites in natural form to ``mu_bar``.

        The ``O(N)`` counterpart of the dense map in :mod:`~gpdsl.inference.variational.site_updates`.
        """
        eta, lam = jnp.asarray(eta)[self.order], jnp.asarray(lam)[self.order]
        smoothed, w = self._smooth(theta, lam, eta=eta)
        mean = (smoothed.mean + w * eta) / (1.0 + w * lam)
        return (eta - lam * mean)[self.inverse_order]

    def initial(self, mean, theta, init_variance=None):
        """As :meth:`GPPriorGaussian.initial` (one ``lambda`` calibrated on the median variance, ``mu_bar = (K +
        I / lambda)^-1 mean``), by the recursions instead of dense factorisations."""
        target = DEFAULT_MEDIAN_VARIANCE if init_variance is None else init_variance
        if not np.isscalar(target) or target <= 0:
            raise MethodError(f"init_variance must be positive; got {init_variance}")
        mean = jnp.asarray(mean)
        N = mean.shape[0]

        def bisect(_, bounds):
            low, high = bounds
            middle = 0.5 * (low + high)
            too_large = jnp.median(self.marginal_variances(jnp.full((N, 1), jnp.exp(middle)), theta)) > target
            return jnp.where(too_large, middle, low), jnp.where(too_large, high, middle)

        low, high = jax.lax.fori_loop(0, 50, bisect, (jnp.log(LAMBDA_RANGE[0]), jnp.log(LAMBDA_RANGE[1])))
        lam = jnp.exp(0.5 * (low + high))
        lam_full = jnp.full(mean.shape, lam)
        return GPPriorQParams(self.mu_bar_from_sites(lam * mean, lam_full, theta), lam_full)
