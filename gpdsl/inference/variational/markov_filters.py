"""The two filters of a linear-Gaussian state-space model with scalar sites, stepped together in one scan.

Along sorted points ``k = 0 .. N-1`` the state moves as ``s_k = A_k s_{k-1} + q_k``, ``q_k ~ N(0, Q_k)``
(``A_k = 0`` and ``Q_k = P_inf`` where a sequence starts), and each point has a Gaussian site on the first
component, precision ``lambda_k`` and natural mean ``eta_k``. Independently for every lane (latent
dimension):

* the Kalman filter forwards gives ``P_k``, ``m_k``: the moments of ``s_k`` given the sites up to and
  including ``k``, and ``v_k``, the predicted variance of the first component before site ``k``;
* the information filter backwards gives ``J_k``, ``h_k``: the information about ``s_k`` carried by the
  sites after ``k``, ``exp(-1/2 s^T J_k s + h_k^T s)``, propagated as
  ``J_{k-1} = A_k^T (I + J' Q_k)^-1 J' A_k`` with ``J' = J_k + lambda_k e e^T`` (no covariance is inverted);
* two linear recursions give ``K_s mu_bar`` for the prior covariance ``K_s`` of the first component:
  ``c_k = A_k c_{k-1} + P_inf e mu_k`` (causal) and ``a_{k-1} = A_k^T (a_k + e mu_k)`` (anticausal), so
  ``(K_s mu)_k = c_k[0] + (P_inf a_k)[0]``.

The smoothed covariance of ``s_k`` is then ``(I + P_k J_k)^-1 P_k`` and its mean ``(I + P_k J_k)^-1 (m_k +
P_k h_k)``. Both filters run in one :func:`~gpdsl.inference.variational.packed_scan.packed_scan`, the
backward one on the reversed points, each step a few dozen multiply-adds per lane. XLA computes every
entry of the packed carry from the step's inputs on its own (the arithmetic the entries share is repeated
for each), so the carry holds only what is needed: the entries on and above the diagonal of the symmetric
``P_k`` and ``J_k`` (:func:`~gpdsl.inference.variational.small_matrices.upper`), and ``m_k``, ``h_k``,
``c_k``, ``a_k`` only when asked for.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from gpdsl.inference.variational.packed_scan import packed_scan
from gpdsl.inference.variational.small_matrices import (
    add,
    eye_plus,
    from_upper,
    mm,
    mv,
    small_inverse,
    symmetric,
    symmetric_sandwich,
    to_tuples,
    transpose,
    upper,
)


class FilterPasses(NamedTuple):
    """What the two filters give at every sorted point; matrices and vectors as nested tuples of ``(N, Q)`` arrays.

    Attributes
    ----------
    filtered_cov : tuple
        ``P_k``, the covariance of ``s_k`` given the sites up to and including ``k``.
    predicted_var : jax.Array
        ``v_k``, the variance of the first component of ``s_k`` given the sites before ``k``, ``(N, Q)``.
    later_precision : tuple
        ``J_k``, the information about ``s_k`` from the sites after ``k``.
    filtered_mean, later_info : tuple or None
        ``m_k`` and ``h_k``, when the sites' natural means were given.
    causal, anticausal : tuple or None
        ``c_k`` and ``a_k`` of ``K_s mu_bar``, when ``mu_bar`` was given.
    """

    filtered_cov: tuple
    predicted_var: jax.Array
    later_precision: tuple
    filtered_mean: tuple | None
    later_info: tuple | None
    causal: tuple | None
    anticausal: tuple | None


def filter_passes(A, Qn, P_inf, lam, eta=None, mu_bar=None) -> FilterPasses:
    """Run the Kalman filter forwards and the information filter backwards (see the module docstring).

    Parameters
    ----------
    A, Qn : jax.Array, shape (N, d, d)
        Transition matrices and process-noise covariances along the sorted points.
    P_inf : jax.Array, shape (d, d)
        The stationary covariance of the state.
    lam : jax.Array, shape (N, Q)
        Site precisions on the first component, one column per lane.
    eta : jax.Array, shape (N, Q), optional
        Sites' natural means; adds ``filtered_mean`` and ``later_info``.
    mu_bar : jax.Array, shape (N, Q), optional
        Adds the recursions of ``K_s mu_bar``.

    Returns
    -------
    FilterPasses
    """
    N, lanes = lam.shape
    d = A.shape[-1]
    zero = jnp.zeros(lanes)
    vector_zero = tuple(zero for _ in range(d))
    P_inf = to_tuples(P_inf)
    points = {"A": to_tuples(A[:, None]), "Q": to_tuples(Qn[:, None]), "lam": lam}
    if eta is not None:
        points["eta"] = eta
    if mu_bar is not None:
        points["mu"] = mu_bar
    reversed_points = jax.tree_util.tree_map(lambda a: a[::-1], points)

    def forward(carry, x):
        P, m, c = carry["P"], carry.get("m"), carry.get("c")
        predicted = add(symmetric_sandwich(x["A"], from_upper(P)), x["Q"])
        v = predicted[0][0]
        scale = 1.0 / (1.0 + x["lam"] * v)
        gain = x["lam"] * scale
        column = tuple(predicted[i][0] for i in range(d))
        carry = {"P": upper(symmetric(lambda i, j: predicted[i][j] - gain * column[i] * column[j], d))}
        if "eta" in x:
            m = mv(x["A"], m)
            innovation = x["eta"] * scale - gain * m[0]
            carry["m"] = tuple(m[i] + column[i] * innovation for i in range(d))
        if "mu" in x:
            carry["c"] = tuple(mv(x["A"], c)[i] + P_inf[i][0] * x["mu"] for i in range(d))
        return carry, v

    def backward(carry, x):
        J, h, a = from_upper(carry["J"]), carry.get("h"), carry.get("a")
        informed = tuple(tuple(J[i][j] + x["lam"] if i == j == 0 else J[i][j] for j in range(d)) for i in range(d))
        damping = small_inverse(eye_plus(mm(informed, x["Q"])))  # (I + J' Q)^-1
        propagate = mm(transpose(x["A"]), damping)
        settled = mm(propagate, informed)
        carry = {"J": upper(symmetric(lambda i, j: sum(settled[i][k] * x["A"][k][j] for k in range(d)), d))}
        if "eta" in x:
            carry["h"] = mv(propagate, tuple(h[i] + x["eta"] if i == 0 else h[i] for i in range(d)))
        if "mu" in x:
            carry["a"] = mv(transpose(x["A"]), tuple(a[i] + x["mu"] if i == 0 else a[i] for i in range(d)))
        return carry, None

    def step(carry, x):
        ahead, behind = carry
        ahead, predicted_var = forward(ahead, x[0])
        behind, _ = backward(behind, x[1])
        return (ahead, behind), predicted_var

    ahead, behind = {"P": upper(((zero,) * d,) * d)}, {"J": upper(((zero,) * d,) * d)}
    if eta is not None:
        ahead["m"], behind["h"] = vector_zero, vector_zero
    if mu_bar is not None:
        ahead["c"], behind["a"] = vector_zero, vector_zero
    (ahead, behind), predicted_var = packed_scan(step, (ahead, behind), (points, reversed_points))
    ahead = jax.tree_util.tree_map(lambda z: z[1:], ahead)  # after step k
    behind = jax.tree_util.tree_map(lambda z: z[-2::-1], behind)  # entering step k, in point order
    return FilterPasses(from_upper(ahead["P"]), predicted_var, from_upper(behind["J"]), ahead.get("m"),
                        behind.get("h"), ahead.get("c"), behind.get("a"))


def smoothed_factor(passes: FilterPasses):
    """``(I + P_k J_k)^-1`` at every point: the smoothed covariance is this times ``P_k``."""
    return small_inverse(eye_plus(mm(passes.filtered_cov, passes.later_precision)))
