"""Psi statistics of the Bayesian GPLVM: a registered closed form, or quadrature for any kernel.

For ``q(x_n) = N(mu_n, diag(S_n))`` and inducing inputs ``Z`` (Titsias & Lawrence 2010;
Damianou, Titsias & Lawrence 2016, Sec. 3.2 and App. B):

* ``psi0_n = E[k(x_n, x_n)]`` (same-index value, so white noise counts),
* ``psi1[n, m] = E[k(x_n, z_m)]``,
* ``psi2_n[m, m'] = E[k(z_m, x_n) k(x_n, z_m')]``, returned as weighted sums over ``n``.

``kind="analytic"`` uses the closed forms registered per kernel type
(:mod:`gpdsl.kernels.psi.closed_form`); ``"unscented"``, ``"gauss_hermite"`` and ``"monte_carlo"``
work for any kernel (de Souza 2020, Ch. 3; :mod:`gpdsl.kernels.psi.quadrature`).
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp

from gpdsl.errors import DataError, MethodError
from gpdsl.kernels.psi.closed_form import analytic_statistics, closed_form_gap
from gpdsl.kernels.psi.quadrature import (
    gauss_hermite_rule,
    monte_carlo_rule,
    quadrature_statistics,
    unscented_rule,
)

PSI_KINDS = ("analytic", "unscented", "gauss_hermite", "monte_carlo")
MAX_GAUSS_HERMITE_POINTS = 2**20


@dataclass(frozen=True)
class PsiMethod:
    """How to compute the psi statistics.

    Parameters
    ----------
    kind : {"analytic", "unscented", "gauss_hermite", "monte_carlo"}
        Closed forms, Uhlmann's ``2Q`` sigma points, a tensor Gauss-Hermite rule or
        reparameterised Monte Carlo draws.
    nodes : int
        Gauss-Hermite order ``H`` per dimension (``H**Q`` points).
    samples : int
        Number of Monte Carlo draws per point.

    Raises
    ------
    MethodError
        Unknown ``kind``, or ``nodes`` or ``samples`` not a positive integer.
    """

    kind: str = "analytic"
    nodes: int = 2
    samples: int = 10

    def __post_init__(self):
        if self.kind not in PSI_KINDS:
            raise MethodError(f"unknown psi-statistics method {self.kind!r}; use one of {', '.join(PSI_KINDS)}")
        for name in ("nodes", "samples"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
                raise MethodError(f"psi-statistics method '{name}' must be a positive integer, got {value!r}")


class PsiStatistics(NamedTuple):
    """Psi statistics of ``q(X)``.

    Attributes
    ----------
    psi0 : jax.Array, shape (N,)
        ``E[k(x_n, x_n)]`` per point.
    psi1 : jax.Array, shape (N, M)
        ``E[k(x_n, z_m)]``.
    psi2 : jax.Array, shape (M, M) or (G, M, M)
        ``sum_n w_n psi2_n``, or ``sum_n W[n, g] psi2_n`` for 2-D row weights.
    """

    psi0: jax.Array
    psi1: jax.Array
    psi2: jax.Array


def quadrature_points(mean, variance, method: PsiMethod, key=None) -> tuple[jax.Array, jax.Array]:
    """Points and weights of the unscented, Gauss-Hermite or Monte Carlo rule for each ``q(x_n)``.

    Parameters
    ----------
    mean, variance : array_like, shape (N, Q)
        Means and diagonal variances of ``q(x_n)``.
    method : PsiMethod
        A quadrature ``kind`` (not ``"analytic"``).
    key : jax.Array, optional
        PRNG key, required for ``"monte_carlo"``.

    Returns
    -------
    points : jax.Array, shape (P, N, Q)
        ``P = 2Q`` (unscented), ``nodes**Q`` (Gauss-Hermite) or ``samples`` (Monte Carlo).
    weights : jax.Array, shape (P,)
        Non-negative, summing to one.

    Raises
    ------
    MethodError
        ``kind="analytic"``, a Monte Carlo rule without ``key``, or a Gauss-Hermite grid too large.
    """
    mean = jnp.asarray(mean, dtype=jnp.float64)
    variance = jnp.asarray(variance, dtype=jnp.float64)
    if method.kind == "unscented":
        return unscented_rule(mean, variance)
    if method.kind == "gauss_hermite":
        size = method.nodes ** mean.shape[1]
        if size > MAX_GAUSS_HERMITE_POINTS:
            raise MethodError(
                f"a Gauss-Hermite rule with {method.nodes} nodes in {mean.shape[1]} dimensions has {size} points; "
                "use fewer nodes or kind 'unscented' or 'monte_carlo'"
            )
        return gauss_hermite_rule(mean, variance, method.nodes)
    if method.kind == "monte_carlo":
        if key is None:
            raise MethodError("psi statistics by 'monte_carlo' need a PRNG key: pass key=jax.random.key(...)")
        return monte_carlo_rule(mean, variance, method.samples, key)
    raise MethodError("kind 'analytic' has no quadrature points; use 'unscented', 'gauss_hermite' or 'monte_carlo'")


@partial(jax.jit, static_argnames=("method",))
def psi_statistics(kernel, Z, mean, variance, method: PsiMethod = PsiMethod(), *, key=None,
                   row_weights=None) -> PsiStatistics:
    """Psi statistics of ``kernel`` for ``q(x_n) = N(mean_n, diag(variance_n))`` and inducing inputs ``Z``.

    Jit-compiled (``method`` static; ``kernel`` is a pytree) and
    differentiable with respect to ``Z``, ``mean``, ``variance`` and the kernel's hyperparameters.

    Parameters
    ----------
    kernel : Kernel
        Any kernel for the quadrature kinds; for ``"analytic"`` one with registered closed forms
        (:func:`~gpdsl.kernels.psi.closed_form.analytic_supported`).
    Z : array_like, shape (M, Q)
        Inducing inputs.
    mean, variance : array_like, shape (N, Q)
        Means and diagonal variances of the latent points.
    method : PsiMethod, optional
        Closed form (default) or a quadrature rule.
    key : jax.Array, optional
        PRNG key for ``"monte_carlo"``; keep it fixed during a fit for a deterministic objective.
    row_weights : array_like, shape (N,) or (N, G), optional
        Weights of the points in ``psi2``; all ones by default.

    Returns
    -------
    PsiStatistics
        ``psi0`` (N,), ``psi1`` (N, M) and ``psi2`` of shape (M, M), or (G, M, M) for 2-D
        ``row_weights``.

    Raises
    ------
    MethodError
        ``"analytic"`` for a kernel without closed form, or ``"monte_carlo"`` without ``key``.
    DataError
        Inconsistent shapes of ``Z``, ``mean``, ``variance`` or ``row_weights``.
    """
    Z = jnp.asarray(Z, dtype=jnp.float64)
    mean = jnp.asarray(mean, dtype=jnp.float64)
    variance = jnp.asarray(variance, dtype=jnp.float64)
    if mean.ndim != 2 or variance.shape != mean.shape or Z.ndim != 2 or Z.shape[1] != mean.shape[1]:
        raise DataError(
            f"psi statistics need mean and variance of shape (N, Q) and Z of shape (M, Q); got mean {mean.shape}, "
            f"variance {variance.shape}, Z {Z.shape}"
        )
    W = _row_weight_matrix(row_weights, mean.shape[0])
    if method.kind == "analytic":
        gap = closed_form_gap(kernel)
        if gap is not None:
            raise MethodError(
                f"{gap} has no closed-form psi statistics; "
                "use PsiMethod kind 'unscented', 'gauss_hermite' or 'monte_carlo'"
            )
        psi0, psi1, psi2 = analytic_statistics(kernel, Z, mean, variance, W)
    else:
        points, weights = quadrature_points(mean, variance, method, key)
        psi0, psi1, psi2 = quadrature_statistics(kernel, Z, points, weights, W)
    if row_weights is None or jnp.ndim(row_weights) == 1:
        psi2 = psi2[0]
    return PsiStatistics(psi0, psi1, psi2)


def _row_weight_matrix(row_weights, N):
    if row_weights is None:
        return jnp.ones((N, 1))
    W = jnp.asarray(row_weights, dtype=jnp.float64)
    if W.ndim == 1:
        W = W[:, None]
    if W.ndim != 2 or W.shape[0] != N:
        raise DataError(f"row_weights must have shape (N,) or (N, G) with N = {N}, got {jnp.shape(row_weights)}")
    return W
