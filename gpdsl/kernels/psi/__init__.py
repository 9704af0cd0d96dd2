"""Psi statistics of kernels under a factorised Gaussian: closed forms registered per kernel, quadrature for any.

:func:`psi_statistics` computes them by the rule a :class:`PsiMethod` names. ``"analytic"`` looks
the kernel tree up in the registry of closed forms (:mod:`~gpdsl.kernels.psi.closed_form`), which
the modules of this package fill, one per kernel family: :mod:`~gpdsl.kernels.psi.rbf`,
:mod:`~gpdsl.kernels.psi.linear`, :mod:`~gpdsl.kernels.psi.static` (constant and white noise) and
:mod:`~gpdsl.kernels.psi.composite` (sums, scalings, products with a constant) and
:mod:`~gpdsl.kernels.psi.hsgp` (the HSGP feature kernel, whose feature statistics also serve the GPLVM bound with
inducing features). A kernel without a
registered closed form is refused by ``"analytic"`` with a message naming it; ``"unscented"``,
``"gauss_hermite"`` and ``"monte_carlo"`` (:mod:`~gpdsl.kernels.psi.quadrature`) work for any
kernel. A new kernel's closed form is one module that decorates its term class with
:func:`register_term` and its expectations with :func:`register_cross`, imported below (a plugin's module
registers itself when imported; :func:`unregister_closed_form` removes the entries).
:mod:`~gpdsl.kernels.psi.projection` gives the statistics of the deep Mahalanobis GP's output kernel, the
standard RBF of a random per-point projection, through the RBF entry.
"""

from gpdsl.kernels.psi import composite, hsgp, linear, rbf, static  # noqa: F401  (register the closed forms)
from gpdsl.kernels.psi.closed_form import (
    Inputs,
    analytic_supported,
    closed_form_gap,
    full_dims,
    register_cross,
    register_expansion,
    register_term,
    unregister_closed_form,
)
from gpdsl.kernels.psi.statistics import PSI_KINDS, PsiMethod, PsiStatistics, psi_statistics, quadrature_points
from gpdsl.kernels.psi.projection import projected_inputs, projected_srbf_statistics

__all__ = [
    "PSI_KINDS",
    "PsiMethod",
    "PsiStatistics",
    "psi_statistics",
    "quadrature_points",
    "analytic_supported",
    "closed_form_gap",
    "register_term",
    "register_expansion",
    "register_cross",
    "unregister_closed_form",
    "full_dims",
    "Inputs",
    "projected_inputs",
    "projected_srbf_statistics",
]
