"""The state-space form of a kernel over a scalar input: a linear SDE whose output has the kernel's covariance.

A stationary kernel ``k(tau)`` of a scalar input has a state-space form when it is the covariance of ``f(t) = H
s(t)``, ``s`` the stationary solution of ``ds = F s dt + L dW`` driven by white noise ``W`` of spectral density
``Qc`` (Hartikainen & Särkkä 2010; Särkkä & Solin 2019, ch. 12). The state's stationary covariance ``P_inf``
solves the Lyapunov equation ``F P_inf + P_inf F^T + L Qc L^T = 0`` and ``k(tau) = H expm(F tau) P_inf H^T`` for
``tau >= 0``. Between two times ``dt`` apart the state moves by ``A = expm(F dt)`` with noise covariance ``P_inf -
A P_inf A^T``, which gives Kalman filters and smoothers in ``O(N)``.

A kernel class says whether it has the form by its class attribute ``has_state_space``; one that has implements
:meth:`~gpdsl.kernels.base.Kernel.state_space` and, where a closed form is exact or cheaper than ``expm``,
:meth:`~gpdsl.kernels.base.Kernel.discretise`. The forms compose (not implemented yet): a sum stacks its terms'
states (``F``, ``L``, ``Qc`` and ``P_inf`` block diagonal, ``H`` side by side), a product takes Kronecker products
(``F = F_1 ⊕ F_2``, ``P_inf = P_1 ⊗ P_2``, ``H = H_1 ⊗ H_2``), a scale multiplies ``Qc`` and ``P_inf``.
"""

from __future__ import annotations

from typing import NamedTuple

import jax


class StateSpace(NamedTuple):
    """The linear SDE ``ds = F s dt + L dW``, ``f = H s``, of a kernel, with its stationary covariance.

    Attributes
    ----------
    F : jax.Array, shape (d, d)
        Feedback matrix.
    L : jax.Array, shape (d, m)
        Noise effect matrix.
    Qc : jax.Array, shape (m, m)
        Spectral density of the white noise ``W``.
    H : jax.Array, shape (1, d)
        Measurement matrix: ``f = H s``.
    P_inf : jax.Array, shape (d, d)
        Stationary covariance of ``s``: ``F P_inf + P_inf F^T + L Qc L^T = 0``.
    """

    F: jax.Array
    L: jax.Array
    Qc: jax.Array
    H: jax.Array
    P_inf: jax.Array
