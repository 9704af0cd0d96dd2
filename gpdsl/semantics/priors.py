"""Priors: a distribution on a parameter or a latent variable, beside its declaration or in the model block.

A prior must be one of the catalog's priors. On a whole parameter it is also held against the declared
constraint: a constraint that reaches outside the prior's support is an error, one that cuts into it
truncates the prior (a warning), and a bounded prior (``uniform(0, 1)``) sets the bounds itself.
"""

from __future__ import annotations

import math
from dataclasses import replace

from gpdsl.errors import CheckWarning
from gpdsl.ir import nodes as ir
from gpdsl.semantics import catalog
from gpdsl.semantics.constants import constant_vector
from gpdsl.semantics.context import CheckContext, fail, fail_unknown_callable
from gpdsl.semantics.distributions import check_distribution
from gpdsl.semantics.support import SUPPORTS, Interval, declared_interval
from gpdsl.ir.types import VarType, number_text
from gpdsl.priors import PRIORS
from gpdsl.syntax import ast


def check_prior(ctx: CheckContext, target: ir.Target, call: ast.Call) -> ir.PriorStatement:
    """Check a prior on a parameter or latent target.

    Parameters
    ----------
    ctx : CheckContext
    target : gpdsl.ir.nodes.Target
        The checked parameter or latent variable (or element of one).
    call : gpdsl.syntax.ast.Call
        The distribution.

    Returns
    -------
    gpdsl.ir.nodes.PriorStatement

    Raises
    ------
    ModelCheckError
        For a kernel or a likelihood in place of a prior, bad arguments, or a constraint that does not fit.
    """
    spec = catalog.DISTRIBUTIONS.get(call.function)
    if spec is None:
        if call.function in catalog.KERNELS:
            fail(f"'{call.function}' is a kernel, not a distribution", call.name_span,
                 f"write '{target.name} ~ gp(inputs, {call.function}(...))'")
        fail_unknown_callable(call, "distribution")
    if not spec.prior:
        priors = [d.name for d in catalog.DISTRIBUTIONS.values() if d.prior]
        fail(f"'{spec.name}' is a likelihood for data; '{target.name}' is a {target.role}", call.name_span,
             "priors are: " + ", ".join(priors))
    distribution = check_distribution(ctx, call, spec, target)
    variable = ctx.variables.get(target.name)
    if spec.support in STRUCTURED_SUPPORTS or (variable is not None and variable.type.structure is not None):
        _verify_structure(target, variable, spec, call)
    elif target.role == "parameter" and not target.indices:
        _fit_bounds(ctx, target, spec, distribution, call)
    return ir.PriorStatement(call.span, target, distribution)


STRUCTURED_SUPPORTS = {
    "cholesky_corr": ("cholesky_factor_corr", "lkj_corr_cholesky(eta)",
                      "a Cholesky factor of a correlation matrix has its own set of values; lkj_corr_cholesky(1) is "
                      "uniform over correlation matrices"),
    "simplex": ("simplex", "dirichlet(alpha)",
                "a simplex has its own set of values (entries >= 0 summing to one); dirichlet(1) is uniform over it"),
}
"""The support of each prior on a whole structured parameter: the structure it needs, the prior a hint names for
it and why no other prior fits."""


def _verify_structure(target: ir.Target, variable, spec: catalog.DistributionSpec, call: ast.Call) -> None:
    """Fail unless a prior of a structure (``lkj_corr_cholesky``, ``dirichlet``) sits on a whole parameter of
    that structure, and only such a prior sits there."""
    structure = variable.type.structure if variable is not None else None
    own = next((facts for facts in STRUCTURED_SUPPORTS.values() if facts[0] == structure), None)
    if own is not None and STRUCTURED_SUPPORTS.get(spec.support) is not own:
        fail(f"'{target.name}' is declared {variable.type.describe()}, whose prior is {own[1]}, not {spec.name}",
             call.name_span, own[2])
    needed = STRUCTURED_SUPPORTS[spec.support][0]
    if structure != needed:
        described = variable.type.describe() if variable is not None else "not a parameter"
        fail(f"{spec.name} is a prior of a {needed} parameter; '{target.name}' is {described}",
             call.name_span, f"declare '{needed}[K] {target.name}' in the parameters block")
    if target.indices:
        fail(f"{spec.name} is a prior of the whole of '{target.name}', not of an element", call.name_span)


def _fit_bounds(ctx: CheckContext, target: ir.Target, spec: catalog.DistributionSpec,
                distribution: ir.Distribution, call: ast.Call):
    """Check the declared constraint against the prior's support; imply bounds for bounded priors.

    A constraint disjoint from the support, or reaching outside it, is an error; one inside a wider
    support truncates the prior, a warning.
    """
    var = ctx.variables[target.name]
    lower, upper = var.type.lower, var.type.upper
    declared = declared_interval(lower, upper)
    if spec.support == "bounded":
        lo = constant_vector(distribution.arg("lower"))
        hi = constant_vector(distribution.arg("upper"))
        if lo is None or hi is None:
            fail(f"the bounds of {spec.name} must be constants", call.span)
        lo_v, hi_v = (lo[0] if len(set(lo)) == 1 else None), (hi[0] if len(set(hi)) == 1 else None)
        if lower is not None or upper is not None:
            if (lower, upper) != (lo_v, hi_v):
                support = (f"({lo[0]:g}, {hi[0]:g})" if len(lo) == len(hi) == 1 else
                           f"lower [{', '.join(number_text(round(v, 12)) for v in lo)}], "
                           f"upper [{', '.join(number_text(round(v, 12)) for v in hi)}]")
                if not declared.overlaps(Interval(min(lo), max(hi))):
                    _disjoint(target.name, var.type, spec.name, support, call)
                fail(f"'{target.name}' is declared {var.type.describe()} but {spec.name} has support "
                     f"{support}", var.span, "drop the declared bounds: they are implied by the prior")
        ctx.variables[target.name] = replace(var, type=replace(var.type, lower=lo_v, upper=hi_v))
        return
    support = SUPPORTS[spec.support]
    if not declared.overlaps(support):
        _disjoint(target.name, var.type, spec.name, support.describe(), call)
    if not declared.within(support):
        fitted = replace(var.type, lower=max(lower, support.lower) if lower is not None else _finite(support.lower),
                         upper=min(upper, support.upper) if upper is not None else _finite(support.upper))
        bounds = ", ".join(f"{end}={number_text(value)}" for end, value in
                           (("lower", fitted.lower), ("upper", fitted.upper))
                           if value is not None and value != getattr(var.type, end))
        fail(f"{spec.name} has support {support.describe()} but '{target.name}' is declared "
             f"{var.type.describe()}", call.name_span,
             f"declare it with <{bounds}>, e.g. '{fitted.describe()} {target.name}'")
    if _halves(spec, distribution, declared):
        return
    if declared.lower > support.lower or declared.upper < support.upper:
        message = (f"{spec.name} has support {support.describe()} but '{target.name}' is declared "
                   f"{var.type.describe()}: the prior is truncated to {declared.describe()}")
        if any(constant_vector(value) is None for _, value in distribution.args):
            message += (f", and the truncation's normalising constant, which depends on the arguments of "
                        f"{spec.name}, is not included")
        ctx.warnings.append(CheckWarning(message, call.name_span))


def _halves(spec: catalog.DistributionSpec, distribution: ir.Distribution, declared: Interval) -> bool:
    """Whether the constraint keeps one half of a symmetric prior, cut at its constant centre (a half-Cauchy:
    ``real<lower=0> s ~ cauchy(0, 1)``): the prior is then the half-distribution, exactly, up to a factor 2."""
    prior = PRIORS.get(spec.name)
    centre = None if prior is None or prior.centre is None else constant_vector(distribution.arg(prior.centre))
    if centre is None or len(set(centre)) != 1:
        return False
    return (declared.lower, declared.upper) in ((centre[0], math.inf), (-math.inf, centre[0]))


def _disjoint(name: str, vartype: VarType, distribution: str, support: str, call: ast.Call):
    fail(f"'{name}' is declared {vartype.describe()} but {distribution} has support {support}: "
         "they do not overlap", call.name_span,
         "the prior gives no mass to the values the constraint allows: change the constraint or the prior")


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None
