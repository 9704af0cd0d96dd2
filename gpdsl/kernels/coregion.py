"""The coregionalisation kernels: covariances between the outputs of a multi-output GP."""

from __future__ import annotations

import jax.numpy as jnp

from gpdsl.kernel_table import KERNEL_SPECS
from gpdsl.kernels.base import Kernel


def _output(x):
    """The 0-based output of a point's index column (rounded: an inducing input's may be a k-means centre)."""
    return jnp.round(x[0]).astype(jnp.int32) - 1


def _per_output(value, P):
    """A per-output vector of length ``P`` (a scalar ``value`` shared by every output)."""
    return jnp.broadcast_to(value, (P,))


class _OutputCovarianceKernel(Kernel):
    """``k(i, j) = B[i, j]`` over output indices ``i, j`` in ``1..P``, ``B`` the subclass's
    :meth:`output_covariance`."""

    def output_covariance(self):
        """``B``, shape ``(P, P)``."""
        raise NotImplementedError

    def evaluate(self, x1, x2):
        return self.output_covariance()[_output(x1), _output(x2)]


class Coregion(_OutputCovarianceKernel):
    """``k(i, j) = B[i, j]`` with ``B = W W^T + diag(kappa)`` over output indices ``i, j`` in ``1..P``.

    Multiplied by a kernel over the other inputs it is the intrinsic coregionalisation model
    (Bonilla, Chai & Williams 2008; GPy's ``Coregionalize``, GPflow's ``Coregion``): the outputs share
    one input kernel and are correlated through ``B``; a sum of such products is the linear model of
    coregionalisation. The input is one column holding each point's output index (1-based, as in the model
    language); an index outside ``1..P`` is not checked here (the model's data checks refuse it).

    Parameters
    ----------
    W : array_like, shape (P, R)
        Mixing weights of ``R`` shared latent functions; ``W W^T`` has rank ``R``.
    kappa : float or array_like, shape (P,)
        Each output's own variance (a scalar is shared).
    active_dims : tuple of int or slice, optional
        The column of output indices.
    """

    spec = KERNEL_SPECS["coregion"]

    def __init__(self, W=None, kappa=None, *, active_dims=None):
        self._set_hyperparameters(active_dims, W=W, kappa=kappa)

    def output_covariance(self):
        """``B = W W^T + diag(kappa)``, shape ``(P, P)``."""
        return self.W @ self.W.T + jnp.diag(_per_output(self.kappa, self.W.shape[0]))


class CoregionCorr(_OutputCovarianceKernel):
    """``k(i, j) = B[i, j]`` with ``B = diag(sigma) L L^T diag(sigma)`` over output indices ``i, j`` in ``1..P``.

    The same intrinsic coregionalisation as :class:`Coregion`, parameterised by the correlation matrix
    ``L L^T`` of the outputs (``L`` its Cholesky factor, in a model a ``cholesky_factor_corr[P]`` parameter with
    an LKJ prior) and their standard deviations ``sigma``.

    Parameters
    ----------
    L : array_like, shape (P, P)
        Cholesky factor of the outputs' correlation matrix.
    sigma : float or array_like, shape (P,)
        Each output's standard deviation (a scalar is shared).
    active_dims : tuple of int or slice, optional
        The column of output indices.
    """

    spec = KERNEL_SPECS["coregion_corr"]

    def __init__(self, L=None, sigma=None, *, active_dims=None):
        self._set_hyperparameters(active_dims, L=L, sigma=sigma)

    def output_covariance(self):
        """``B = diag(sigma) L L^T diag(sigma)``, shape ``(P, P)``."""
        scaled = _per_output(self.sigma, self.L.shape[0])[:, None] * self.L
        return scaled @ scaled.T
