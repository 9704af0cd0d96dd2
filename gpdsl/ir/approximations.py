"""The approximations a GP statement may name: ``f ~ gp(x, k, approx = NAME(setting = value, ...))``.

One :class:`ApproximationSpec` per approximation, in :data:`APPROXIMATIONS`: its settings (constants of the
model, each with its default and the values it admits), its description, and the checker function that judges
whether a GP can take it (named by import path, ``"module:function"``, so this table stays below the checker).
A checked GP statement carries its :class:`Approximation` (``None`` for the exact GP). The first entry is the
Hilbert-space approximation (Solin & Särkkä 2020; Riutort-Mayol, Bürkner, Andersen, Solin & Vehtari 2023):
``hsgp(m, c)``, ``m`` basis functions per input dimension on the box ``[-L, L]``, ``L = c`` times the half
range of the inputs around their centre (:mod:`gpdsl.ir.hsgp`). The second is the state-space form of a GP over
one scalar input (Hartikainen & Särkkä 2010; Solin & Särkkä 2014): ``state_space`` or ``state_space(order = J)``,
its kernel a linear SDE (:mod:`gpdsl.kernels.state_space`) with a periodic kernel's cosine series truncated after
``J`` harmonics, so that Kalman filtering gives the Gaussian marginal likelihood in ``O(N)``
(:mod:`gpdsl.kernels.kalman`).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Callable

from gpdsl.kernel_table import PERIODIC_ORDER
from gpdsl.source import Span


@dataclass(frozen=True)
class ApproximationSetting:
    """One setting of an approximation: a constant of the model file.

    Parameters
    ----------
    name : str
        Keyword name, ``m`` in ``hsgp(m = 30)``.
    doc : str
        What it sets.
    default : float or None
        The value when it is omitted; None when it must be given.
    integer : bool
        Whether it is a whole number.
    per_dimension : bool
        Whether a vector literal with one value per input column is accepted (a scalar is shared by all).
    above : float or None
        A strict lower bound (``c > 1``).
    at_least : float or None
        An inclusive lower bound (``m >= 1``).
    at_most : float or None
        An inclusive upper bound (``constant <= 1``).
    """

    name: str
    doc: str
    default: float | None = None
    integer: bool = False
    per_dimension: bool = False
    above: float | None = None
    at_least: float | None = None
    at_most: float | None = None

    def admits(self, value: float) -> bool:
        """Whether one value is allowed by the bounds and integrality."""
        return ((not self.integer or float(value).is_integer())
                and (self.above is None or value > self.above)
                and (self.at_least is None or value >= self.at_least)
                and (self.at_most is None or value <= self.at_most))

    @property
    def requirement(self) -> str:
        """The allowed values in words, e.g. ``a whole number of at least 1``, ``0 or 1``."""
        if self.integer and self.at_least is not None and self.at_most == self.at_least + 1:
            return f"{self.at_least:g} or {self.at_most:g}"
        kind = "a whole number" if self.integer else "a number"
        bounds = ([f"of at least {self.at_least:g}"] if self.at_least is not None else []) + \
            ([f"greater than {self.above:g}"] if self.above is not None else []) + \
            ([f"of at most {self.at_most:g}"] if self.at_most is not None else [])
        return " ".join([kind, *bounds])


@dataclass(frozen=True)
class ApproximationSpec:
    """An approximation of the language.

    Parameters
    ----------
    name : str
        Its name in ``approx = NAME(...)``.
    settings : tuple of ApproximationSetting
        Its settings, in positional order.
    doc : str
        One line for the docs and error hints.
    verify : str
        ``"module:function"`` of ``verify(statement, approximation) -> None``, which raises
        :class:`~gpdsl.errors.ModelCheckError` at the part of the GP statement the approximation cannot take.
    """

    name: str
    settings: tuple[ApproximationSetting, ...]
    doc: str
    verify: str

    def setting(self, name: str) -> ApproximationSetting | None:
        """The setting called ``name``, or None."""
        return next((s for s in self.settings if s.name == name), None)

    def verifier(self) -> Callable:
        """The checker function named by :attr:`verify` (imported on first use)."""
        module, function = self.verify.split(":")
        return getattr(importlib.import_module(module), function)


@dataclass(frozen=True)
class Approximation:
    """The approximation a checked GP statement uses: its name and every setting's value (defaults filled in).

    A per-dimension setting holds one value per input column; any other one value.
    """

    name: str
    settings: tuple[tuple[str, tuple[float, ...] | float], ...]
    span: Span = field(repr=False, compare=False)

    def value(self, name: str):
        """The value of a setting."""
        return dict(self.settings)[name]


HSGP = "hsgp"
STATE_SPACE = "state_space"

APPROXIMATIONS: dict[str, ApproximationSpec] = {spec.name: spec for spec in [
    ApproximationSpec(
        HSGP,
        (ApproximationSetting("m", "the number of basis functions per input dimension; of a periodic term, the "
                                   "harmonics of its cosine series",
                              integer=True, per_dimension=True, at_least=1),
         ApproximationSetting("c", "boundary factor: the box is [-L, L] around the inputs' centre with L = c times "
                                   "their half range (over latent inputs, c times 3 prior standard deviations), per "
                                   "dimension", default=1.5, above=1),
         ApproximationSetting("constant", "1 keeps a periodic term's constant harmonic (j = 0), 0 drops it, as the "
                                          "HSGP paper's Stan code does where the model has an intercept",
                              default=1, integer=True, at_least=0, at_most=1),
         ApproximationSetting("centred", "1 makes the Stan program sample the basis coefficients sqrt(S) .* z "
                                         "themselves (centred; often better where the data pin them down, large N), "
                                         "0 the standard normal weights z (non-centred, brms's form); gpdsl's own "
                                         "engines whiten the weights either way",
                              default=0, integer=True, at_least=0, at_most=1),
         ApproximationSetting("max_columns", "the most input columns allowed: the basis grows as the product of m "
                                             "over the columns, so past 3 it is seldom cheaper than the exact GP",
                              default=3, integer=True, at_least=1)),
        "Hilbert-space approximate GP (Riutort-Mayol et al. 2023): f = PHI (sqrt(S(sqrt(lambda))) .* z), "
        "z ~ std_normal()",
        "gpdsl.semantics.approximations:verify_hsgp"),
    ApproximationSpec(
        STATE_SPACE,
        (ApproximationSetting("order", "harmonics of a periodic kernel's truncated cosine series (a state of "
                                       "2 order + 1 per periodic factor)", default=PERIODIC_ORDER, integer=True,
                              at_least=1),),
        "state-space GP over one scalar input (Hartikainen & Särkkä 2010): f = H s(t), ds = F s dt + L dW; the "
        "Gaussian marginal likelihood by Kalman filtering in O(N)",
        "gpdsl.semantics.approximations:verify_state_space"),
]}
"""Every approximation of the language by name."""
