"""The periodic terms of an HSGP statement's kernel: each a periodic kernel's truncated cosine series.

Under ``approx = hsgp(m = J)`` the kernel of a GP over one input column is a sum of terms; a term that is a periodic
kernel (possibly scaled) is approximated by its cosine series truncated after ``J`` harmonics (Solin & Särkkä 2014;
Riutort-Mayol et al. 2023, periodic covariance functions): the basis ``1, cos(j w t), sin(j w t)``, ``j = 1 .. J``,
``w = 2 pi / period``, its weights of variances the series' coefficients (``hsgp(constant = 0)`` drops the constant
``1``, which an intercept carries); the other terms share the Laplacian eigenfunctions. The series basis depends on
the period, so the period must be known before sampling: a number, or an expression of data alone (``period =
days_per_year``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from gpdsl.errors import DataError
from gpdsl.ir import nodes as ir
from gpdsl.ir.structure import sub_expressions
from gpdsl.ir.values import value


def sum_terms(kernel: ir.Kernel) -> list[ir.Kernel]:
    """The terms of a kernel's top-level sum, left to right (the kernel itself when it is no sum)."""
    if isinstance(kernel, ir.KernelSum):
        return sum_terms(kernel.left) + sum_terms(kernel.right)
    return [kernel]


def periodic_leaf(kernel: ir.Kernel) -> ir.KernelLeaf | None:
    """The periodic kernel under the scalings that make up ``kernel``, or None when ``kernel`` is anything else."""
    while isinstance(kernel, ir.KernelScale):
        kernel = kernel.kernel
    if isinstance(kernel, ir.KernelLeaf) and not isinstance(kernel, ir.KernelCombination) \
            and kernel.name == "periodic":
        return kernel
    return None


def reads_data_alone(expr: ir.Expr) -> bool:
    """Whether ``expr`` is a number or reads only data (its value is known before sampling)."""
    return all(e.role == "data" for e in sub_expressions(expr) if isinstance(e, ir.Ref))


def series_period_expr(term: ir.Kernel) -> ir.Expr | None:
    """The period of a periodic term (:func:`periodic_leaf`) that reads data alone, or None when the term is no such
    term (its cosine series is then not its basis)."""
    leaf = periodic_leaf(term)
    if leaf is None or not reads_data_alone(leaf.param("period")):
        return None
    return leaf.param("period")


def is_series_term(term: ir.Kernel) -> bool:
    """Whether a term of an HSGP kernel's sum takes a cosine series basis (:func:`series_period_expr`)."""
    return series_period_expr(term) is not None


def series_period(term: ir.Kernel, data: Mapping | None = None) -> float | None:
    """The period of a series term (:func:`is_series_term`), evaluated on ``data`` where it reads data, or None when
    ``term`` is no series term."""
    period = series_period_expr(term)
    if period is None:
        return None
    return float(value(period, data or {}))


def checked_series_period(statement: ir.GPStatement, term: ir.Kernel, data: Mapping | None = None) -> float | None:
    """:func:`series_period`, refused unless it is a positive, finite number.

    Raises
    ------
    DataError
        The period of a series term of ``statement``'s kernel is zero, negative or not finite on ``data``.
    """
    period = series_period(term, data)
    if period is not None and not (math.isfinite(period) and period > 0):
        raise DataError(f"the period of a periodic term of '{statement.target.name}' is {period:g}; "
                        "its cosine series needs a positive, finite period", term.span,
                        "give the period in the units of the inputs, e.g. 365.25 for yearly cycles over days")
    return period


def has_series(kernel: ir.Kernel) -> bool:
    """Whether some term of the kernel's sum takes a cosine series basis."""
    return any(is_series_term(term) for term in sum_terms(kernel))


def series_size(order: int, constant: bool = True) -> int:
    """The number of basis functions of a cosine series with ``order`` harmonics: ``2 order + 1``, or ``2 order``
    without its constant harmonic."""
    return 2 * int(order) + int(bool(constant))
