"""Covariance functions as JAX pytrees, composable with ``+`` and ``*``.

Every kernel evaluates on single points (:meth:`Kernel.evaluate`) and is vectorised by
:class:`Kernel`: ``k(X)`` is the Gram matrix of ``X`` with itself (including white-noise
terms), ``k(X1, X2)`` the cross-covariance and ``k.diag(X)`` the diagonal of ``k(X)``.
Kernels of a scalar input that are the covariance of a linear SDE (``has_state_space``) also give
that SDE (:meth:`Kernel.state_space`, :mod:`gpdsl.kernels.state_space`), and a GP of one in O(N) by Kalman
filtering and smoothing (:mod:`gpdsl.kernels.kalman`).
"""

import gpdsl.numerics.float64  # noqa: F401  (float64 before any array is made)
from gpdsl.kernel_table import KernelParam, KernelSpec
from gpdsl.kernels.base import Kernel
from gpdsl.kernels.combinators import Changepoint, Warp
from gpdsl.kernels.coregion import Coregion, CoregionCorr
from gpdsl.kernels.composite import Product, Scale, Sum
from gpdsl.kernels.dot_product import MLP, Linear, Polynomial
from gpdsl.kernels.nonstationary import Gibbs
from gpdsl.kernels.registry import KERNEL_SPECS, KERNELS, build_kernel, kernel_spec, register_kernel, unregister_kernel
from gpdsl.kernels.state_space import StateSpace
from gpdsl.kernels.spectral import Cosine, SpectralMixture
from gpdsl.kernels.static import Constant, Same, White
from gpdsl.kernels.stationary import RBF, Matern, Matern12, Matern32, Matern52, Periodic, RationalQuadratic

__all__ = [
    "Kernel",
    "RBF",
    "Matern12",
    "Matern32",
    "Matern52",
    "Periodic",
    "Matern",
    "Gibbs",
    "Changepoint",
    "Warp",
    "RationalQuadratic",
    "Cosine",
    "SpectralMixture",
    "Polynomial",
    "Linear",
    "MLP",
    "White",
    "Constant",
    "Same",
    "Coregion",
    "CoregionCorr",
    "Sum",
    "Product",
    "Scale",
    "StateSpace",
    "KernelSpec",
    "KernelParam",
    "KERNELS",
    "KERNEL_SPECS",
    "kernel_spec",
    "build_kernel",
    "register_kernel",
    "unregister_kernel",
]
