"""Likelihoods: a distribution on data, ``y ~ normal(f, sigma)`` or ``y ~ external("pkg.mod:fn", ...)``.

A likelihood must be one of the catalog's likelihoods, and integer data go with the integer
likelihoods (counts, binary, ordinal) and real data with the others. ``external`` names a Python
function that computes the log-likelihood; here only its name and arguments are checked. (The
likelihoods themselves, their densities and shapes, are :mod:`gpdsl.likelihoods`.)
"""

from __future__ import annotations

from gpdsl.ir import nodes as ir
from gpdsl.semantics import catalog
from gpdsl.semantics.context import CheckContext, fail, fail_unknown_callable
from gpdsl.semantics.distributions import check_distribution
from gpdsl.semantics.expressions import check_expr
from gpdsl.syntax import ast

_INTEGER_SUPPORTS = {"binary": "int<lower=0, upper=1>", "count": "int<lower=0>", "ordinal": "int<lower=1, upper=K>"}
"""Likelihood supports of integer data, with the declaration the hint suggests."""


def check_likelihood(ctx: CheckContext, statement: ast.Tilde, target: ir.Target) -> ir.Statement:
    """Check a likelihood of the catalog on a data target.

    Parameters
    ----------
    ctx : CheckContext
    statement : gpdsl.syntax.ast.Tilde
        ``data ~ distribution(...)``.
    target : gpdsl.ir.nodes.Target
        The checked data target.

    Returns
    -------
    gpdsl.ir.nodes.LikelihoodStatement

    Raises
    ------
    ModelCheckError
        For a distribution that is not a likelihood, bad arguments, or data of the wrong kind (int or real).
    """
    call = statement.distribution
    spec = catalog.DISTRIBUTIONS.get(call.function)
    if spec is None:
        fail_unknown_callable(call, "distribution")
    if not spec.likelihood:
        likelihoods = [d.name for d in catalog.DISTRIBUTIONS.values() if d.likelihood]
        hint = "likelihoods are: " + ", ".join(likelihoods + [catalog.EXTERNAL])
        if call.function == "gamma":
            hint = "for positive data write gamma_log(eta, shape), Stan's gamma(shape, shape / exp(eta)); " + hint
        fail(f"'{call.function}' is not a likelihood", call.name_span, hint)
    t = target.type
    integer = spec.support in _INTEGER_SUPPORTS
    if not integer and t.base == "int":
        fail(f"{spec.name} is a likelihood for real data but '{target.name}' is integer",
             statement.target.span)
    distribution = check_distribution(ctx, call, spec, target)
    if integer:
        if t.base != "int":
            fail(f"{spec.name} needs integer data but '{target.name}' is {t.describe()}", statement.target.span,
                 f"declare it e.g. 'array[N] {_INTEGER_SUPPORTS[spec.support]} {target.name};'")
    elif t.base == "int":
        fail(f"{spec.name} is a likelihood for real data but '{target.name}' is integer",
             statement.target.span)
    return ir.LikelihoodStatement(statement.span, target, distribution)


def check_external(ctx: CheckContext, statement: ast.Tilde, target: ir.Target) -> ir.ExternalLikelihood:
    """Check ``data ~ external("package.module:function", args...)``.

    Parameters
    ----------
    ctx : CheckContext
    statement : gpdsl.syntax.ast.Tilde
    target : gpdsl.ir.nodes.Target
        The checked data target.

    Returns
    -------
    gpdsl.ir.nodes.ExternalLikelihood

    Raises
    ------
    ModelCheckError
        Unless the first argument is a string naming a function (or an entry point) and the rest are
        positional expressions.
    """
    call = statement.distribution
    if not call.args or not isinstance(call.args[0], ast.String):
        fail('external needs the function as a string first: external("module:function", ...)', call.span)
    function = call.args[0].value
    module, _, name = function.partition(":")
    entry_point = not name and function.isidentifier()
    if not entry_point and not (module and name and all(p.isidentifier() for p in module.split(".") + [name])):
        path = any(mark in function for mark in ("/", "\\", "..")) or function.startswith(".")
        fail(f"'{function}' is {'a file path, ' if path else ''}not of the form 'package.module:function' (or an "
             "entry point's name): an external likelihood is a function Python imports, and gpdsl runs it only "
             "with --allow-external", call.args[0].span,
             "separate the module and the function with ':', e.g. \"mypkg.pricing:call_prices\"")
    if call.kwargs:
        fail("external takes positional arguments only", call.kwargs[0].span)
    args = tuple(check_expr(ctx, a) for a in call.args[1:])
    return ir.ExternalLikelihood(statement.span, target, function, args)
