"""Families of ``q(X)`` for the latent inputs, each with its prior ``p(X)`` and their KL term.

The collapsed bound (:mod:`gpdsl.inference.variational.collapsed_bound`) sees ``q(X)`` only through
the means and variances of the points, which the Psi statistics consume, and
``KL(q(X) || p(X))``, which is subtracted from it. A :class:`LatentQ` gives both from its own
parameters and the hyperparameters ``theta`` (:meth:`LatentQ.moments`, :meth:`LatentQ.kl`), maps
its parameters to the unconstrained coordinates the optimiser moves and back, and starts them from
initial latent means (:func:`initial_means`).

* :class:`FactorisedGaussian`: ``q(X) = prod_n N(mu_n, diag(S_n))`` against the standard normal
  prior of the Bayesian GPLVM (Damianou, Titsias & Lawrence 2016, Sec. 3.3.1).

* :class:`~gpdsl.inference.variational.gp_prior_q.GPPriorGaussian`: a GP prior over time or observed
  inputs (Sec. 3.3.2), in the reparameterisation of Opper & Archambeau (2009).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from gpdsl.errors import MethodError
from gpdsl.inference.variational.softplus import inverse_softplus, log_softplus

DEFAULT_VARIANCE = 0.5


class LatentMoments(NamedTuple):
    """Means and variances of the marginals ``q(x_nq)``, shape ``(N, Q)`` each, for the Psi statistics."""

    mean: jax.Array
    variance: jax.Array


class LatentQ(ABC):
    """A family of ``q(X)`` with its prior ``p(X)``.

    Parameters of a family are a pytree (a ``NamedTuple`` of arrays) in their natural form, the one
    a fit reports; :meth:`unconstrain` and :meth:`constrain` map them to and from the unconstrained
    coordinates the optimiser moves, another pytree of arrays. ``theta`` is the unconstrained vector
    of the model's hyperparameters (:class:`~gpdsl.inference.families.gplvm.GPLVMProblem`), on which
    the moments and the KL term of a prior with hyperparameters depend. The moments are computed
    first and handed to :meth:`kl`, so a family can reuse its factorisations there.
    """

    @abstractmethod
    def initial(self, mean, theta, init_variance: float | None = None):
        """Starting parameters of ``q(X)`` whose means are (or smooth) ``mean``.

        Parameters
        ----------
        mean : array_like, shape (N, Q)
            Initial latent means (:func:`initial_means`).
        theta : array_like
            The starting hyperparameters (unconstrained), on which a prior may depend.
        init_variance : float, optional
            The initial variances of the latent points (each family says what its default is).

        Returns
        -------
        NamedTuple of arrays

        Raises
        ------
        MethodError
            A non-positive ``init_variance``.
        """

    @abstractmethod
    def moments(self, params, theta, xp=jnp) -> LatentMoments:
        """Means and variances of the marginals of ``q(X)`` at ``params`` and ``theta`` (traceable).

        ``xp=numpy`` asks for NumPy arrays, computed in NumPy where the family can. The result is a
        :class:`LatentMoments` or another object with ``mean`` and ``variance`` of shape ``(N, Q)``,
        which :meth:`kl` receives back.
        """

    @abstractmethod
    def kl(self, params, theta, moments=None) -> jax.Array:
        """``KL(q(X) || p(X))`` at ``params`` and ``theta``, a scalar.

        ``moments`` is :meth:`moments` of the same ``params`` and ``theta``, computed when not given.
        """

    @abstractmethod
    def unconstrain(self, params, xp=np):
        """The optimiser's coordinates of ``params``: NumPy arrays, or traceable ones with ``xp=jax.numpy``."""

    @abstractmethod
    def constrain(self, coordinates, xp=jnp):
        """The parameters at the optimiser's ``coordinates``; ``xp`` is ``jax.numpy`` or ``numpy``."""

    def unconstrained_moments(self, coordinates, theta) -> LatentMoments:
        """:meth:`moments` at the optimiser's coordinates (a family may map them more directly)."""
        return self.moments(self.constrain(coordinates), theta)

    @abstractmethod
    def covariance(self, params, theta) -> jax.Array:
        """The full covariance of each latent dimension under ``q(X)`` over the ``N`` points, shape ``(Q, N, N)``."""

    @abstractmethod
    def dense_prior_covariance(self, theta, num_points: int) -> jax.Array:
        """The covariance of one latent dimension under the prior ``p(X)``, shape ``(N, N)``."""

    def unconstrained_kl(self, coordinates, theta, moments) -> jax.Array:
        """:meth:`kl` at the optimiser's coordinates, given :meth:`unconstrained_moments`."""
        return self.kl(self.constrain(coordinates), theta, moments)


class GaussianQParams(NamedTuple):
    """Parameters of a factorised Gaussian ``q(X)``.

    Attributes
    ----------
    mean : array, shape (N, Q)
        Means ``mu_n``.
    log_variance : array, shape (N, Q)
        Logs of the diagonal variances ``S_n``.
    """

    mean: jax.Array
    log_variance: jax.Array


class _GaussianQCoordinates(NamedTuple):
    mean: jax.Array
    softplus_variance: jax.Array  # the variances are the softplus of these


class FactorisedGaussian(LatentQ):
    """``q(X) = prod_n N(mu_n, diag(S_n))`` against ``p(X) = N(0, I)``; parameters :class:`GaussianQParams`.

    The optimiser moves the means and the inverse softplus of the variances, as GPy does: on the log
    scale the first quasi-Newton steps overshoot by orders of magnitude and the fit can stall far
    from the optimum.
    """

    def initial(self, mean, theta, init_variance=None):
        """The given means with constant variances ``init_variance`` (default 0.5, as Damianou et al.)."""
        init_variance = DEFAULT_VARIANCE if init_variance is None else init_variance
        if init_variance <= 0:
            raise MethodError(f"init_variance must be positive; got {init_variance}")
        mean = np.asarray(mean, dtype=float)
        return GaussianQParams(mean, np.full(mean.shape, np.log(init_variance)))

    def moments(self, params, theta, xp=jnp):
        return LatentMoments(xp.asarray(params.mean), xp.exp(xp.asarray(params.log_variance)))

    def kl(self, params, theta, moments=None):
        moments = moments if moments is not None else self.moments(params, theta)
        return kl_standard_normal(moments.mean, moments.variance)

    def unconstrain(self, params, xp=np):
        return _GaussianQCoordinates(xp.asarray(params.mean, dtype=float),
                                     inverse_softplus(xp.exp(xp.asarray(params.log_variance, dtype=float)), xp))

    def constrain(self, coordinates, xp=jnp):
        return GaussianQParams(coordinates.mean, log_softplus(coordinates.softplus_variance, xp))

    def unconstrained_moments(self, coordinates, theta):
        return LatentMoments(coordinates.mean, jax.nn.softplus(coordinates.softplus_variance))

    def covariance(self, params, theta):
        variance = jnp.exp(jnp.asarray(params.log_variance)).T
        return jax.vmap(jnp.diag)(variance)

    def dense_prior_covariance(self, theta, num_points):
        return jnp.eye(num_points)


def kl_standard_normal(mean, variance) -> jax.Array:
    """``KL(prod N(mean, variance) || N(0, 1))`` summed over all entries.

    Parameters
    ----------
    mean : array_like
        Variational means.
    variance : array_like
        Variational variances (positive), same shape as ``mean``.

    Returns
    -------
    jax.Array
        ``0.5 * sum(variance + mean^2 - 1 - log(variance))``.
    """
    mean = jnp.asarray(mean)
    variance = jnp.asarray(variance)
    return 0.5 * jnp.sum(variance + mean * mean - 1.0 - jnp.log(variance))


def initial_means(Y: np.ndarray, latent_dim: int, rng: np.random.Generator, init: str = "pca") -> np.ndarray:
    """Initial latent means: :func:`pca_means` (``init="pca"``) or standard normal draws (``"random"``).

    Parameters
    ----------
    Y : numpy.ndarray, shape (N, D)
        Outputs, NaN where missing.
    latent_dim : int
        ``Q``.
    rng : numpy.random.Generator
        Source of any random draws.
    init : {"pca", "random"}

    Returns
    -------
    numpy.ndarray, shape (N, Q)

    Raises
    ------
    MethodError
        An unknown ``init``.
    """
    if init == "pca":
        return pca_means(Y, latent_dim, rng)
    if init == "random":
        return rng.standard_normal((Y.shape[0], latent_dim))
    raise MethodError(f"unknown initialisation '{init}'; use 'pca' or 'random'")


def pca_means(Y: np.ndarray, latent_dim: int, rng: np.random.Generator) -> np.ndarray:
    """PCA projection of the (column-mean imputed) outputs, each dimension scaled to unit variance.

    ``Y``, ``latent_dim`` and ``rng`` are those of :func:`initial_means`; the result has shape ``(N, Q)``.
    Dimensions beyond the outputs' rank are filled with standard normal draws (``N * Q`` are always drawn).
    """
    filled = np.where(np.isnan(Y), np.nanmean(Y, axis=0), Y)
    centred = filled - filled.mean(axis=0)
    _, _, vt = np.linalg.svd(centred, full_matrices=False)
    k = min(latent_dim, vt.shape[0])
    X = rng.standard_normal((Y.shape[0], latent_dim))
    X[:, :k] = centred @ vt[:k].T
    X -= X.mean(axis=0)
    sd = X.std(axis=0)
    return X / np.where(sd > 0, sd, 1.0)
