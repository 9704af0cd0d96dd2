"""Kernels of sinusoids: a cosine, and Wilson & Adams's spectral mixture of Gaussian-windowed cosines."""

from __future__ import annotations

import jax.numpy as jnp

from gpdsl.errors import ModelCheckError
from gpdsl.kernel_table import KERNEL_SPECS
from gpdsl.kernels.base import Kernel
from gpdsl.kernels.params import check_ard, sum_over_inputs


class Cosine(Kernel):
    """Cosine kernel ``variance * cos(2 pi sum_d (x_d - x'_d) / p_d)``.

    The covariance of ``sqrt(variance) * cos(2 pi w.x + phase)`` with a uniform random phase and the
    frequency vector ``w_d = 1 / p_d``: positive semi-definite (of rank 2) in any number of input
    dimensions. Over one input it is GPy's and GPflow's ``Cosine`` with ``lengthscale = period / (2 pi)``;
    over several, theirs is the cosine of the Euclidean distance, which is not a covariance in general.

    Parameters
    ----------
    variance : float
        Marginal variance.
    period : float or array of shape (d,)
        The period along each input column (one shared, or one per column).
    active_dims : tuple of int or slice, optional
        Input columns the kernel sees.
    """

    spec = KERNEL_SPECS["cosine"]

    def __init__(self, variance=1.0, period=None, *, active_dims=None):
        self._set_hyperparameters(active_dims, variance=variance, period=period)

    def evaluate(self, x1, x2):
        check_ard(self.period, "period", self.spec.name, x1.shape[-1])
        return self.variance * jnp.cos(2.0 * jnp.pi * sum_over_inputs((x1 - x2) / self.period))


class SpectralMixture(Kernel):
    """Spectral mixture kernel over one input (Wilson & Adams 2013, eq. 12 with ``P = 1``).

    ``k(x, x') = sum_q w_q exp(-2 pi^2 s_q^2 tau^2) cos(2 pi m_q tau)`` with ``tau = x - x'``: the
    covariance whose spectral density is a mixture of ``Q`` Gaussians (and their mirror images) with
    weights ``w_q``, means ``m_q`` (frequencies, in cycles per input unit) and standard deviations
    ``s_q``. Component ``q`` is ``w_q * rbf(lengthscale = 1 / (2 pi s_q)) * cosine(period = 1 / m_q)``.

    Parameters
    ----------
    weights : float or array of shape (Q,)
        Component variances.
    means : float or array of shape (Q,)
        Component frequencies (the sign does not matter).
    scales : float or array of shape (Q,)
        Component frequency standard deviations (inverse length-scales over ``2 pi``).
    active_dims : tuple of int or slice, optional
        The one input column the kernel sees.

    Notes
    -----
    The three vectors share their length ``Q``; a scalar is broadcast over the components.
    """

    spec = KERNEL_SPECS["spectral_mixture"]

    def __init__(self, weights=None, means=None, scales=None, *, active_dims=None):
        self._set_hyperparameters(active_dims, weights=weights, means=means, scales=scales)
        lengths = {jnp.size(value) for value in (self.weights, self.means, self.scales)} - {1}
        if len(lengths) > 1:
            raise ModelCheckError("spectral_mixture() parameters weights, means and scales must have one entry "
                                  f"per component each; got lengths {jnp.size(self.weights)}, "
                                  f"{jnp.size(self.means)} and {jnp.size(self.scales)}")

    def evaluate(self, x1, x2):
        if x1.shape[-1] != 1:
            raise ModelCheckError(f"spectral_mixture() acts on one input column, got {x1.shape[-1]}")
        tau = x1[0] - x2[0]
        envelope = jnp.exp(-2.0 * jnp.pi ** 2 * jnp.square(self.scales * tau))
        return jnp.sum(self.weights * envelope * jnp.cos(2.0 * jnp.pi * self.means * tau))
