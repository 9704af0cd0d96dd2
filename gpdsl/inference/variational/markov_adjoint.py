"""Smoothed marginal variances, ``log|B|`` and ``K_s mu_bar`` of a state-space prior, with a hand-written reverse pass.

:func:`smoothed_marginals` is what :class:`~gpdsl.inference.variational.markov_q.MarkovGaussian` needs for
the bound: per point and lane the smoothed variance of the first state component under the sites, the
prediction-error decomposition ``sum_k log(1 + lambda_k v_k)`` of ``log|I + Lambda K_s|``, and ``K_s
mu_bar``, all from :func:`~gpdsl.inference.variational.markov_filters.filter_passes`. Reverse-mode
differentiation through that scan would store and replay every intermediate of every step; instead the
reverse pass is derived by hand. Perturbing the inputs perturbs the filters linearly:

* ``dP_k = L_k dPp_k L_k^T - r_k^2 dlambda_k (Pp_k e)(Pp_k e)^T`` with ``Pp_k = A_k P_{k-1} A_k^T + Q_k``,
  ``r_k = 1 / (1 + lambda_k v_k)`` and ``L_k = I - lambda_k r_k Pp_k e e^T`` (the Kalman update is stationary
  in its gain);
* ``dJ_{k-1} = A_k^T dX_k A_k + dA_k^T X_k A_k + A_k^T X_k dA_k`` with ``X_k = (J'^-1 + Q_k)^-1 = M_k J'``,
  ``M_k = (I + J' Q_k)^-1``, ``dX_k = M_k dJ' M_k^T - X_k dQ_k X_k``;
* the smoothed covariance ``S_k = G_k P_k``, ``G_k = (I + P_k J_k)^-1``, moves by ``G_k dP_k G_k^T - S_k dJ_k
  S_k``.

So the adjoints are linear recursions running the other way: ``Psi_k = T_k^T Psi_{k+1} T_k + D_k``
(backwards, ``T_k = A_{k+1} L_k``) for the forward filter, ``Gamma_k = B_k Gamma_{k-1} B_k^T + E_k``
(forwards, ``B_k = M_k^T A_k``) for the backward one, and the transposed recursions of ``K_s mu_bar``. Their
coefficients come from the stored filter passes, so one packed scan of sandwich products gives the
gradients with respect to every ``A_k``, ``Q_k``, ``P_inf``, ``lambda`` and ``mu_bar``; the chain rule
through the transition matrices to the kernel's hyperparameters is left to JAX. ``Psi_k`` and ``Gamma_k``
are symmetric: the scan carries and computes only their entries on and above the diagonal.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from gpdsl.inference.variational.markov_filters import filter_passes, smoothed_factor
from gpdsl.inference.variational.packed_scan import packed_scan
from gpdsl.inference.variational.small_matrices import (
    add,
    eye_plus,
    from_tuples,
    from_upper,
    mm,
    mv,
    neg,
    outer,
    quadratic,
    sandwich,
    small_inverse,
    symmetric_sandwich,
    to_tuples,
    transpose,
    upper,
)


@jax.custom_vjp
def smoothed_marginals(A, Qn, P_inf, lam, mu_bar):
    """Smoothed variances of the first state component, ``log|I + Lambda K_s|`` per lane and ``K_s mu_bar``.

    Parameters
    ----------
    A, Qn : jax.Array, shape (N, d, d)
        Transition matrices and process-noise covariances along the sorted points (``A = 0``, ``Q =
        P_inf`` where a sequence starts).
    P_inf : jax.Array, shape (d, d)
        The stationary covariance of the state.
    lam : jax.Array, shape (N, Q)
        Site precisions on the first component.
    mu_bar : jax.Array, shape (N, Q)

    Returns
    -------
    tuple of jax.Array
        Variances ``(N, Q)``, log-determinants ``(Q,)`` and ``K_s mu_bar`` ``(N, Q)``.
    """
    return _marginals(filter_passes(A, Qn, P_inf, lam, mu_bar=mu_bar), P_inf, lam)[0]


def _marginals(passes, P_inf, lam):
    factor = smoothed_factor(passes)
    smoothed = mm(factor, passes.filtered_cov)
    prior_mean = passes.causal[0] + sum(P_inf[0, i] * passes.anticausal[i] for i in range(len(smoothed)))
    log_det = jnp.sum(jnp.log1p(lam * passes.predicted_var), axis=0)
    return (smoothed[0][0], log_det, prior_mean), factor, smoothed


def _forward(A, Qn, P_inf, lam, mu_bar):
    passes = filter_passes(A, Qn, P_inf, lam, mu_bar=mu_bar)
    outputs, factor, smoothed = _marginals(passes, P_inf, lam)
    return outputs, (A, Qn, P_inf, lam, mu_bar, passes, factor, smoothed)


def _shift(tree, by: int):
    """Every entry moved ``by`` points along axis 0 (+1: the previous point's value), zeros entering."""
    def move(a):
        pad = jnp.zeros_like(a[:1])
        return jnp.concatenate([pad, a[:-1]]) if by > 0 else jnp.concatenate([a[1:], pad])
    return jax.tree_util.tree_map(move, tree)


def _scaled(c, matrix):
    return tuple(tuple(c * entry for entry in row) for row in matrix)


def _corner(value, d: int):
    """The ``d x d`` matrix ``value e e^T``."""
    return tuple(tuple(value if i == j == 0 else 0.0 for j in range(d)) for i in range(d))


def _backward(residuals, cotangents):
    A_array, Q_array, P_inf_array, lam, mu_bar, passes, factor, smoothed = residuals
    g, h, p = cotangents  # of the variances (N, Q), the log-determinants (Q,) and K_s mu_bar (N, Q)
    d = A_array.shape[-1]
    A, Qn, P_inf = to_tuples(A_array[:, None]), to_tuples(Q_array[:, None]), to_tuples(P_inf_array)
    e = tuple(1.0 if i == 0 else 0.0 for i in range(d))
    P, J = passes.filtered_cov, passes.later_precision
    P_before = _shift(P, 1)
    predicted = add(sandwich(A, P_before), Qn)
    column = tuple(predicted[i][0] for i in range(d))
    scale = 1.0 / (1.0 + lam * passes.predicted_var)
    gain = tuple(lam * scale * column[i] for i in range(d))
    L = tuple(tuple((i == j) - (gain[i] if j == 0 else 0.0) for j in range(d)) for i in range(d))
    informed = tuple(tuple(J[i][j] + lam if i == j == 0 else J[i][j] for j in range(d)) for i in range(d))
    M = small_inverse(eye_plus(mm(informed, Qn)))
    X = mm(M, informed)
    filtered_weight = tuple(factor[0][i] for i in range(d))  # G^T e
    smoothed_column = tuple(smoothed[i][0] for i in range(d))  # S e
    through_filter = mv(transpose(L), filtered_weight)
    A_after = _shift(A, -1)
    forcing_ahead = {"T": mm(A_after, L), "A": A_after, "p": p,
                     "D": upper(add(_scaled(g, outer(through_filter, through_filter)), _corner(h * scale * lam, d)))}
    forcing_behind = {"B": mm(transpose(M), A), "A": A, "p": p,
                      "E": upper(_scaled(-g, outer(smoothed_column, smoothed_column)))}

    def step(carry, x):
        (Psi, gamma), (Gamma, alpha) = carry
        later, earlier = x
        Psi = upper(add(symmetric_sandwich(transpose(later["T"]), from_upper(Psi)), from_upper(later["D"])))
        gamma = add(mv(transpose(later["A"]), gamma), tuple(later["p"] * e[i] for i in range(d)))
        Gamma = upper(add(symmetric_sandwich(earlier["B"], from_upper(Gamma)), from_upper(earlier["E"])))
        alpha = add(mv(earlier["A"], alpha), tuple(earlier["p"] * P_inf[i][0] for i in range(d)))
        return ((Psi, gamma), (Gamma, alpha)), None

    lanes = jnp.zeros_like(lam[0])
    matrix_zero = upper(((lanes,) * d,) * d)
    vector_zero = tuple(lanes for _ in range(d))
    reverse = (lambda tree: jax.tree_util.tree_map(lambda a: jnp.broadcast_to(a, lam.shape)[::-1], tree))
    ((Psi, gamma), (Gamma, alpha)), _ = packed_scan(
        step, ((matrix_zero, vector_zero), (matrix_zero, vector_zero)), (reverse(forcing_ahead), forcing_behind))
    Psi, gamma = jax.tree_util.tree_map(lambda a: a[:0:-1], (from_upper(Psi), gamma))  # after step k, in point order
    Gamma, alpha = jax.tree_util.tree_map(lambda a: a[1:], (from_upper(Gamma), alpha))
    Gamma_before, alpha_before = _shift(Gamma, 1), _shift(alpha, 1)
    Omega = add(_scaled(g, outer(filtered_weight, filtered_weight)), sandwich(transpose(A_after), _shift(Psi, -1)))
    Theta = sandwich(A, Gamma_before)
    M_e = tuple(M[i][0] for i in range(d))
    d_lam = -scale * scale * quadratic(column, Omega) + h * scale * passes.predicted_var + quadratic(M_e, Theta)
    d_Q = add(Psi, neg(sandwich(X, Theta)))
    later_mean = add(passes.anticausal, tuple(mu_bar * e[i] for i in range(d)))
    d_A = add(add(_scaled(2.0, add(mm(mm(Psi, A), P_before), mm(mm(X, A), Gamma_before))),
                  outer(gamma, _shift(passes.causal, 1))), outer(later_mean, alpha_before))
    d_P_inf = add(_scaled(mu_bar, outer(gamma, e)), _scaled(p, outer(e, passes.anticausal)))
    d_mu = mv(P_inf, gamma)[0] + mv(A, alpha_before)[0]
    lane_sum = (lambda tree: jax.tree_util.tree_map(lambda a: jnp.sum(a, axis=-1), tree))
    return (from_tuples(lane_sum(d_A)), from_tuples(lane_sum(d_Q)),
            from_tuples(jax.tree_util.tree_map(jnp.sum, d_P_inf)), d_lam, d_mu)


smoothed_marginals.defvjp(_forward, _backward)
