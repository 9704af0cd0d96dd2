"""Supports by name: the intervals that distributions' variates and arguments live on.

The catalog names a support (``"positive"``) for each distribution and for each of its arguments; this
table says what the name means. A declared constraint ``<lower=a, upper=b>`` is the closed interval
``[a, b]``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Interval:
    """An interval of the real line, each end open or closed.

    Parameters
    ----------
    lower, upper : float
        The ends; ``-inf`` and ``inf`` for none.
    closed_lower, closed_upper : bool
        Whether each end belongs to the interval (an infinite end never does).
    """

    lower: float = -math.inf
    upper: float = math.inf
    closed_lower: bool = False
    closed_upper: bool = False

    def contains(self, x: float) -> bool:
        """Whether ``x`` lies in the interval."""
        above = x > self.lower or (self.closed_lower and x == self.lower)
        below = x < self.upper or (self.closed_upper and x == self.upper)
        return above and below

    def within(self, other: Interval) -> bool:
        """Whether the interval lies in the closure of ``other`` (ends compared as numbers)."""
        return other.lower <= self.lower and self.upper <= other.upper

    def overlaps(self, other: Interval) -> bool:
        """Whether the two intervals share more than an end point."""
        return max(self.lower, other.lower) < min(self.upper, other.upper)

    def describe(self) -> str:
        """``(0, inf)``, ``[0, 1]``, ``[0, inf)``: the interval in the usual notation."""
        return (("[" if self.closed_lower and math.isfinite(self.lower) else "(") + _end(self.lower) + ", "
                + _end(self.upper) + ("]" if self.closed_upper and math.isfinite(self.upper) else ")"))


def _end(x: float) -> str:
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return f"{x:g}"


SUPPORTS: dict[str, Interval] = {
    "real": Interval(),
    "positive": Interval(0.0),
    "nonnegative": Interval(0.0, closed_lower=True),
    "unit": Interval(0.0, 1.0, True, True),
    "binary": Interval(0.0, 1.0, True, True),
    "count": Interval(0.0, closed_lower=True),
    "ordinal": Interval(1.0, closed_lower=True),
    "cholesky_corr": Interval(-1.0, 1.0, True, True),
    "simplex": Interval(0.0, 1.0, True, True),
    "censoring": Interval(-1.0, 2.0, True, True),
}
"""Every support by the name the catalog and the likelihoods use; ``"bounded"`` takes its ends from the
distribution's ``lower`` and ``upper`` arguments. ``"cholesky_corr"`` (the entries of a Cholesky factor of a
correlation matrix) belongs to a ``cholesky_factor_corr`` declaration, which its prior requires, as
``"simplex"`` belongs to a ``simplex`` declaration. ``"censoring"``
holds brms' censoring codes -1, 0, 1 and 2 (the checker adds that they are integers)."""


def declared_interval(lower: float | None, upper: float | None) -> Interval:
    """The interval ``[lower, upper]`` of a declared constraint; a missing bound is infinite."""
    return Interval(-math.inf if lower is None else lower, math.inf if upper is None else upper,
                    lower is not None, upper is not None)
