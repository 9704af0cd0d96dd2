"""What the language knows by name: distributions, likelihoods, kernels and functions.

Each entry states its parameterisation; the documentation site's catalogue page
(``docs/reference/catalogue.rst``, written by ``docs/_ext/gpdsl_reference.py`` when ``make docs`` builds it) is
generated from the same facts, so it lists exactly what the checker accepts. The
priors' entries are read from their objects in :mod:`gpdsl.priors`, the likelihoods' from theirs in
:mod:`gpdsl.likelihoods`, the kernels' from the table of :mod:`gpdsl.kernel_table`, each when looked up,
so elements registered after import are known.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from gpdsl.kernel_table import KERNEL_SPECS, KernelSpec
from gpdsl.likelihoods import LIKELIHOODS, Likelihood
from gpdsl.priors import PRIORS, Prior


@dataclass(frozen=True)
class DistributionSpec:
    """A distribution usable as a prior (on parameters or latent values) or a likelihood.

    Parameters
    ----------
    name : str
        Name in model files.
    params : tuple of str
        Parameter names in positional order.
    defaults : dict
        Default values of optional parameters.
    support : {"real", "positive", "bounded", "binary", "count", "ordinal"}
        Support of the variate; "bounded" takes its bounds from the ``lower`` and ``upper`` arguments.
    arg_support : dict
        Support of each argument by name, a key of :data:`gpdsl.semantics.support.SUPPORTS`; an argument
        not listed is real.
    ordered : tuple of str, optional
        Two arguments that must be strictly increasing, elementwise (``("lower", "upper")``).
    likelihood : bool
        Usable on data.
    prior : bool
        Usable on parameters and latent values.
    doc : str
        The density, as written in the docs.
    """

    name: str
    params: tuple[str, ...]
    defaults: dict = field(default_factory=dict)
    support: str = "real"
    likelihood: bool = False
    prior: bool = True
    doc: str = ""
    arg_support: dict = field(default_factory=dict)
    ordered: tuple[str, str] | None = None

    def argument_support(self, name: str) -> str:
        """The support of the argument ``name``: ``"real"`` unless the table says otherwise."""
        return self.arg_support.get(name, "real")


def _prior_spec(prior: Prior) -> DistributionSpec:
    """The catalog entry of a prior, from its :mod:`gpdsl.priors` object."""
    return DistributionSpec(prior.name, prior.params, defaults=dict(prior.defaults), support=prior.support,
                            doc=prior.doc, arg_support=dict(prior.arg_support), ordered=prior.ordered)


def _likelihood_spec(likelihood: Likelihood, prior: DistributionSpec | None) -> DistributionSpec:
    """The catalog entry of a likelihood; a prior of the same name (and parameters) stays one too."""
    if prior is not None:
        return replace(prior, likelihood=True)
    return DistributionSpec(likelihood.name, likelihood.params, support=likelihood.support, likelihood=True,
                            prior=False, doc=likelihood.doc, arg_support=dict(likelihood.param_support))


class _Distributions(Mapping):
    """The catalog entries of :data:`gpdsl.priors.PRIORS` and :data:`gpdsl.likelihoods.LIKELIHOODS`, read when
    looked up, so priors and likelihoods registered after import are seen; rebuilt when either table changes."""

    def __init__(self):
        self._tables = None
        self._entries: dict[str, DistributionSpec] = {}

    def _current(self) -> dict[str, DistributionSpec]:
        tables = (tuple(PRIORS.items()), tuple(LIKELIHOODS.items()))
        if tables != self._tables:
            entries = {name: _prior_spec(prior) for name, prior in PRIORS.items()}
            entries.update({name: _likelihood_spec(likelihood, entries.get(name))
                            for name, likelihood in LIKELIHOODS.items()})
            self._tables, self._entries = tables, entries
        return self._entries

    def __getitem__(self, name: str) -> DistributionSpec:
        return self._current()[name]

    def __iter__(self):
        return iter(self._current())

    def __len__(self) -> int:
        return len(self._current())

    def __repr__(self) -> str:
        return f"DISTRIBUTIONS({', '.join(self._current())})"


DISTRIBUTIONS: Mapping[str, DistributionSpec] = _Distributions()
"""Every distribution by name: the priors, then the likelihoods not already listed as priors (a read-only view
of the two tables)."""

EXTERNAL = "external"
"""``external("module:function", args...)``: a likelihood computed by user Python code."""


KERNELS: dict[str, KernelSpec] = KERNEL_SPECS
"""Every kernel by name: the table of :mod:`gpdsl.kernel_table`."""

FUNCTIONS: dict[str, str] = {
    "sqrt": "square root", "exp": "exponential", "log": "natural logarithm",
    "inv_sqrt": "1 / sqrt(x)", "inv": "1 / x", "square": "x^2", "softplus": "log(1 + exp(x))",
    "inv_logit": "1 / (1 + exp(-x))", "log1p_exp": "log(1 + exp(x)), as softplus", "abs": "|x|",
    "Phi": "standard normal CDF",
}
"""Elementwise functions of expressions."""

REDUCTIONS: dict[str, str] = {
    "sum": "sum of the elements of a vector or matrix", "mean": "mean of the elements of a vector or matrix",
    "dot_product": "dot_product(a, b): sum of a[i] * b[i] over two vectors of the same length",
}
"""Functions of whole vectors and matrices whose value is a real."""

STUDENT_T_PROCESS = "student_t_process"
"""``f ~ student_t_process(nu, inputs, kernel)``: a Student-t process prior, checked like ``gp``."""

PROCESSES = ("gp", STUDENT_T_PROCESS)
"""The priors of latent function values over inputs (what may stand right of ``~`` with a latent target and take
inputs and a kernel)."""

SPECIAL_FUNCTIONS = {*PROCESSES, "project", EXTERNAL}

CONSTANTS = {"pi": math.pi}


def known_callables() -> list[str]:
    """Every name that may be called in a model file (for 'did you mean' suggestions)."""
    return sorted(set(DISTRIBUTIONS) | set(KERNELS) | set(FUNCTIONS) | set(REDUCTIONS) | SPECIAL_FUNCTIONS)
