"""Loops of likelihood statements rewritten as one vectorised statement.

``for (n in 1:N) y[n] ~ normal(f[n] + u[group[n]], s);`` on data ``y`` of length ``N`` means
``y ~ normal(f + u[group], s);``: each argument element ``n`` is the loop's value at ``n``. The checker
checks the loop as written (so errors point into it), then replaces it with the vectorised statement when
the rewrite keeps its meaning: the loop runs over ``1:N`` and its body is one likelihood on ``y[n]`` with
``y`` one-dimensional of length ``N``; every part of an argument that involves ``n`` is a scalar inside the
loop; ``n`` appears only as the first index of a variable of length ``N`` (``x[n]``, ``X[n, 2]``) or inside
indices (``u[group[n]]`` becomes ``u[group]``, ``G[a[n], b[n]]`` the pairs ``G[a, b]``). Engines that need a
vectorised likelihood (gibbs, pm, vem) then run the model; a loop that cannot be rewritten stays a loop.
"""

from __future__ import annotations

from dataclasses import replace

from gpdsl.errors import ModelCheckError
from gpdsl.ir import nodes as ir
from gpdsl.ir.structure import sub_expressions
from gpdsl.ir.types import Dim
from gpdsl.semantics import catalog
from gpdsl.semantics.context import CheckContext
from gpdsl.syntax import ast


class _Keep(Exception):
    """The loop cannot be rewritten without changing its meaning."""


def vectorised_likelihood(ctx: CheckContext, loop: ast.For, checked: ir.ForLoop, check) -> ir.Statement | None:
    """The vectorised statement of a checked loop, or None when it must stay a loop.

    Parameters
    ----------
    ctx : CheckContext
    loop : gpdsl.syntax.ast.For
        The loop as written.
    checked : gpdsl.ir.nodes.ForLoop
        The loop as checked.
    check : callable
        ``check(ctx, statement)``: checks an AST statement of the model block.

    Returns
    -------
    gpdsl.ir.nodes.LikelihoodStatement or None
    """
    if len(loop.body) != 1 or not isinstance(loop.body[0], ast.Tilde) \
            or not isinstance(checked.body[0], ir.LikelihoodStatement):
        return None
    statement, body = loop.body[0], checked.body[0]
    length = _loop_length(ctx, loop)
    variable = ctx.variables[statement.target.name]
    whole = (ast.Name(None, loop.variable),)
    if length is None or variable.type.shape != (length,) or statement.target.indices != whole:
        return None
    if any(_mentions(e, loop.variable) and e.type.shape for _, arg in body.distribution.args
           for e in sub_expressions(arg)):
        return None
    try:
        call = statement.distribution
        rewritten = replace(call, args=tuple(_strip(ctx, a, loop.variable, length) for a in call.args),
                            kwargs=tuple(replace(k, value=_strip(ctx, k.value, loop.variable, length))
                                         for k in call.kwargs))
    except _Keep:
        return None
    if any(name.name == loop.variable for name in ast.references(rewritten)):
        return None
    state = (len(ctx.warnings), len(ctx.parameter_arguments))
    try:
        result = check(ctx, ast.Tilde(statement.span, replace(statement.target, indices=()), rewritten))
    except ModelCheckError:
        return None
    finally:
        del ctx.warnings[state[0]:], ctx.parameter_arguments[state[1]:]
    return result


def _loop_length(ctx: CheckContext, loop: ast.For) -> Dim | None:
    """``N`` of a loop over ``1:N`` (a size or an integer constant), else None."""
    if not (isinstance(loop.start, ast.Number) and loop.start.is_int and loop.start.value == 1):
        return None
    if isinstance(loop.stop, ast.Number) and loop.stop.is_int:
        return int(loop.stop.value)
    if isinstance(loop.stop, ast.Name) and loop.stop.name in ctx.sizes:
        return loop.stop.name
    return None


def _mentions(expr: ir.Expr, variable: str) -> bool:
    return any(isinstance(e, ir.Ref) and e.role == "loop" and e.name == variable for e in sub_expressions(expr))


def _strip(ctx: CheckContext, expr: ast.Expr, variable: str, length: Dim) -> ast.Expr:
    """``expr`` over all ``n`` at once: ``x[n]`` becomes ``x``, ``X[n, j]`` becomes ``X[:, j]``, ``u[g[n]]``
    becomes ``u[g]``, ``G[a[n], b[n]]`` becomes ``G[a, b]``."""
    if isinstance(expr, ast.Index):
        return _strip_index(ctx, expr, variable, length)
    if isinstance(expr, ast.BinaryOp):
        return replace(expr, left=_strip(ctx, expr.left, variable, length),
                       right=_strip(ctx, expr.right, variable, length))
    if isinstance(expr, ast.Negate):
        return replace(expr, operand=_strip(ctx, expr.operand, variable, length))
    if isinstance(expr, ast.Call):
        if expr.function not in catalog.FUNCTIONS:
            return expr
        return replace(expr, args=tuple(_strip(ctx, a, variable, length) for a in expr.args))
    return expr


def _strip_index(ctx: CheckContext, expr: ast.Index, variable: str, length: Dim) -> ast.Expr:
    if not any(name.name == variable for name in ast.references(expr)):
        return expr
    if not isinstance(expr.base, ast.Name) or expr.base.name not in ctx.variables:
        raise _Keep
    shape = ctx.variables[expr.base.name].type.shape
    first, rest = expr.indices[0], expr.indices[1:]
    if isinstance(first, ast.Name) and first.name == variable:
        if shape[0] != length or len(expr.indices) != len(shape) \
                or any(name.name == variable for item in rest for name in ast.references(item)):
            raise _Keep
        return expr.base if not rest else replace(expr, indices=(ast.Slice(first.span, None, None), *rest))
    return replace(expr, indices=tuple(_strip(ctx, item, variable, length) for item in expr.indices))
