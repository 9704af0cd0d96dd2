"""Statements of the model block: ``target ~ distribution(...)`` and ``for`` loops.

The target of ``~`` decides what the statement is: ``gp(...)`` on a latent variable is a GP
statement, a distribution on data a likelihood, on a parameter or a latent variable a prior. Each
parameter and latent variable (or element of one) gets exactly one distribution.
"""

from __future__ import annotations

from gpdsl.ir import nodes as ir
from gpdsl.semantics import catalog
from gpdsl.semantics.context import CheckContext, fail
from gpdsl.semantics.expressions import check_expr, check_indexed_type
from gpdsl.semantics.gp import check_gp, check_student_t_process
from gpdsl.semantics.likelihoods import check_external, check_likelihood
from gpdsl.semantics.priors import check_prior
from gpdsl.semantics.shapes import value_type
from gpdsl.semantics.vectorise import vectorised_likelihood
from gpdsl.suggest import did_you_mean
from gpdsl.syntax import ast


def check_declared_prior(ctx: CheckContext, decl: ast.Declaration) -> ir.Statement:
    """Check the prior written beside a declaration (``real<lower=0> s ~ half_normal(1);``).

    Parameters
    ----------
    ctx : CheckContext
    decl : gpdsl.syntax.ast.Declaration
        A declared parameter or latent variable with a prior.

    Returns
    -------
    gpdsl.ir.nodes.PriorStatement
    """
    var = ctx.variables[decl.name]
    target = ir.Target(decl.name, var.role, (), value_type(var.type), decl.name_span)
    ctx.defined[decl.name] = decl.prior.span
    return check_prior(ctx, target, decl.prior)


def check_statement(ctx: CheckContext, statement: ast.Statement) -> ir.Statement:
    """Check a statement of the model block.

    Parameters
    ----------
    ctx : CheckContext
    statement : gpdsl.syntax.ast.Statement
        A ``~`` statement or a ``for`` loop.

    Returns
    -------
    gpdsl.ir.nodes.Statement
        A GP, likelihood, external likelihood or prior statement, or a loop of them.

    Raises
    ------
    ModelCheckError
        At the first problem in the statement.
    """
    if isinstance(statement, ast.For):
        return _for(ctx, statement)
    return _tilde(ctx, statement)


def _for(ctx: CheckContext, loop: ast.For) -> ir.ForLoop:
    if loop.variable in ctx.variables or loop.variable in ctx.loops:
        fail(f"loop variable '{loop.variable}' hides another variable", loop.span)
    start, stop = check_expr(ctx, loop.start), check_expr(ctx, loop.stop)
    for bound in (start, stop):
        if bound.type != ir.INT:
            fail("loop bounds must be integers", bound.span)
    ctx.loops[loop.variable] = (loop.start, loop.stop)
    body = tuple(check_statement(ctx, s) for s in loop.body)
    del ctx.loops[loop.variable]
    checked = ir.ForLoop(loop.span, loop.variable, start, stop, body)
    return vectorised_likelihood(ctx, loop, checked, check_statement) or checked


def _target(ctx: CheckContext, target: ast.Target) -> ir.Target:
    var = ctx.variables.get(target.name)
    if var is None:
        if target.name in ctx.loops:
            fail(f"loop variable '{target.name}' cannot be the target of '~'", target.span)
        fail(f"'{target.name}' is not declared", target.span,
             did_you_mean(target.name, ctx.variables) or
             "declare data in the data block, parameters in the parameters block, latent values "
             "in a latent block (GP values may also be introduced by 'f ~ gp(...)')")
    if var.role == "transformed":
        fail(f"'{target.name}' is a transformed parameter: its value is computed, so it takes no distribution",
             target.span, "put the prior on the parameters it is computed from")
    ctx.used.add(target.name)
    base = ir.Ref(value_type(var.type), target.span, target.name, var.role)
    for i in target.indices:
        if isinstance(i, ast.Slice):
            fail("the target of '~' cannot be sliced", i.span,
                 "loop over the elements: for (i in a:b) x[i] ~ ...;")
    indices = tuple(check_expr(ctx, i) for i in target.indices)
    for i in indices:
        if isinstance(i, ir.Slice) or i.type != ir.INT:
            fail("the target of '~' may only be indexed by integers", i.span if not isinstance(i, ir.Slice)
                 else target.span)
    vartype = check_indexed_type(ctx, base.type, indices, target.span) if indices else base.type
    return ir.Target(target.name, var.role, indices, vartype, target.span)


def _tilde(ctx: CheckContext, statement: ast.Tilde) -> ir.Statement:
    call = statement.distribution
    target = _target(ctx, statement.target)
    if call.function in catalog.PROCESSES:
        if target.role != "latent":
            what = "data" if target.role == "data" else "a parameter"
            example = "gp(X, k)" if call.function == "gp" else f"{call.function}(nu, X, k)"
            fail(f"'{target.name}' is {what}; only latent values can have a {call.function} prior",
                 statement.target.span,
                 f"{'GP' if call.function == 'gp' else 'process'} values are latent: write 'f ~ {example};' and put "
                 f"the data on top, e.g. '{target.name} ~ normal(f, sigma);'")
        _define(ctx, target, statement)
        if call.function == catalog.STUDENT_T_PROCESS:
            return check_student_t_process(ctx, statement, target)
        return check_gp(ctx, statement, target)
    if call.function == catalog.EXTERNAL:
        if target.role != "data":
            fail("external(...) is a likelihood: its target must be data", statement.target.span)
        return check_external(ctx, statement, target)
    if target.role == "data":
        return check_likelihood(ctx, statement, target)
    _define(ctx, target, statement)
    return check_prior(ctx, target, call)


def _define(ctx: CheckContext, target: ir.Target, statement: ast.Tilde):
    key = target.name
    if target.indices:
        key += "[" + ",".join(_describe_index(i) for i in target.indices) + "]"
    whole = ctx.defined.get(target.name)
    if key in ctx.defined or (whole is not None and key != target.name):
        previous = ctx.defined.get(key) or whole
        what = "prior" if target.role == "parameter" else "distribution"
        fail(f"'{target.name}' already has a {what} (line {previous.line})", statement.target.span,
             "give each parameter or latent variable exactly one prior")
    ctx.defined[key] = statement.span


def _describe_index(index: ir.Expr) -> str:
    if isinstance(index, ir.Constant):
        return str(int(index.value))
    if isinstance(index, ir.Ref):
        return index.name
    return "?"
