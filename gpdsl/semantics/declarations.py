"""Declarations: ``vector<lower=0>[N] y;`` in the data, parameters and latent blocks.

A declaration gives a variable its role, its type, its sizes (a number or an int of the data block)
and its bounds (constants; on data also sizes). The checker declares every variable before it reads
any statement.
"""

from __future__ import annotations

from gpdsl.ir import nodes as ir
from gpdsl.semantics import catalog
from gpdsl.semantics.constants import fold
from gpdsl.semantics.context import CheckContext, fail
from gpdsl.ir.types import Dim, VarType
from gpdsl.source import Span
from gpdsl.suggest import did_you_mean
from gpdsl.syntax import ast

LARGEST_SIZE = 2**31 - 1
"""The largest literal size (``vector[3]``) accepted: Stan's int."""


def declare(ctx: CheckContext, decl: ast.Declaration, role: str):
    """Check a declaration and add its variable to ``ctx.variables``.

    Parameters
    ----------
    ctx : CheckContext
    decl : gpdsl.syntax.ast.Declaration
    role : {"data", "parameter", "latent"}
        The block it is in.

    Raises
    ------
    ModelCheckError
        For a name declared twice or built in, a prior on data, a bad size or bound, or an int that is not data.
    """
    if decl.name in ctx.variables:
        previous = ctx.variables[decl.name]
        fail(f"'{decl.name}' is already declared (line {previous.span.line})", decl.name_span)
    if (decl.name in catalog.known_callables() and decl.name not in catalog.DISTRIBUTIONS) \
            or decl.name in catalog.CONSTANTS:
        fail(f"'{decl.name}' is a built-in name and cannot be declared", decl.name_span)
    if role == "data" and decl.prior is not None:
        fail(f"data '{decl.name}' cannot have a prior", decl.prior.span,
             "priors go beside parameters; a distribution on data is a likelihood in the model block")
    spec = decl.type
    dims = tuple(check_dim(ctx, d) for d in spec.dims)
    array_dims = tuple(check_dim(ctx, d) for d in spec.array_dims)
    lower = _bound(ctx, spec.lower, role) if spec.lower is not None else None
    upper = _bound(ctx, spec.upper, role) if spec.upper is not None else None
    if isinstance(lower, float) and isinstance(upper, float) and not lower < upper:
        fail(f"empty constraint: lower={lower:g} is not below upper={upper:g}", spec.span)
    if spec.base == "int" and role != "data":
        fail(f"{role} '{decl.name}' cannot be an int", spec.span,
             "only data may be integer; use real, vector or matrix")
    if spec.base in STRUCTURES:
        vartype = _structured(decl, role, dims, array_dims)
    else:
        base = "int" if spec.base == "int" else "real"
        container = {"int": "scalar", "real": "scalar"}.get(spec.base, spec.base)
        vartype = VarType(base, container, dims, array_dims, lower, upper)
    ctx.variables[decl.name] = ir.Variable(decl.name, role, vartype, decl.name_span)


STRUCTURES = {
    "cholesky_factor_corr": ("matrix", "cholesky_factor_corr[P] L ~ lkj_corr_cholesky(2);"),
    "simplex": ("vector", "simplex[3] w ~ dirichlet([2, 2, 2]);"),
}
"""Each structured type: its container (``cholesky_factor_corr[K]`` is a ``matrix[K, K]``, ``simplex[K]`` a
``vector[K]``) and the declaration an error's hint shows."""


def _structured(decl: ast.Declaration, role: str, dims: tuple[Dim, ...], array_dims: tuple[Dim, ...]) -> VarType:
    """The type of a structured parameter (``cholesky_factor_corr[K] L``, ``simplex[K] w``): its container with
    the structure's name."""
    structure = decl.type.base
    container, example = STRUCTURES[structure]
    if role != "parameter" or array_dims:
        fail(f"{structure} declares a single parameter, not {'an array' if array_dims else role}",
             decl.type.span, f"e.g. '{example}' in the parameters block")
    shape = (dims[0], dims[0]) if container == "matrix" else (dims[0],)
    return VarType("real", container, shape, structure=structure)


def check_dim(ctx: CheckContext, expr: ast.Expr) -> Dim:
    """A size of a declared type: a non-negative integer, or the name of an int of the data block.

    Parameters
    ----------
    ctx : CheckContext
    expr : gpdsl.syntax.ast.Expr
        The size as written.

    Returns
    -------
    int or str
        The number, or the size's name (recorded in ``ctx.sizes``).

    Raises
    ------
    ModelCheckError
        For anything else, or a size used above its declaration.
    """
    if isinstance(expr, ast.Number):
        if not expr.is_int or expr.value < 0:
            fail("a size must be a non-negative integer", expr.span)
        if expr.value > LARGEST_SIZE:
            fail(f"a size must be an integer from 0 to {LARGEST_SIZE}", expr.span)
        return int(expr.value)
    if isinstance(expr, ast.Name):
        var = ctx.variables.get(expr.name)
        if var is None and expr.name in ctx.declarations:
            _used_before_declaration(f"size '{expr.name}'", expr.span, ctx.declarations[expr.name])
        if var is None:
            fail(f"size '{expr.name}' is not declared", expr.span,
                 did_you_mean(expr.name, ctx.variables) or f"declare 'int {expr.name};' in the data block")
        if var.role != "data":
            fail(f"size '{expr.name}' is a {var.role}; a size must be an int declared in the data block",
                 expr.span)
        if var.type != VarType("int", lower=var.type.lower, upper=var.type.upper):
            fail(f"size '{expr.name}' is {var.type.describe()}; a size must be a single int", expr.span)
        ctx.used.add(expr.name)
        if expr.name not in ctx.sizes:
            ctx.sizes.append(expr.name)
        return expr.name
    if isinstance(expr, ast.Negate):
        fail("a size must be a non-negative integer", expr.span)
    fail("a size must be an integer or the name of an int in the data block", expr.span)


def _used_before_declaration(what: str, span: Span, decl: ast.Declaration):
    where = (f"line {decl.name_span.line}" if decl.name_span.line != span.line
             else f"line {span.line}, column {decl.name_span.column}")
    is_size = decl.type.base == "int" and not decl.type.dims and not decl.type.array_dims
    fail(f"{what} is used at line {span.line} before its declaration at {where}", span,
         f"move 'int {decl.name};' above its first use" if is_size
         else "a size must be an int declared in the data block, above its first use")


def _bound(ctx: CheckContext, expr: ast.Expr, role: str) -> float | str:
    if isinstance(expr, ast.Name) and expr.name not in catalog.CONSTANTS:
        if role != "data":
            fail(f"a bound of a {role} must be a constant number", expr.span,
                 "only data bounds may name a size, e.g. array[N] int<lower=1, upper=G> group")
        return check_dim(ctx, expr)
    return _constant(expr)


def _constant(expr: ast.Expr) -> float:
    value = fold(expr)
    if value is None:
        fail("a bound must be a constant number or a size", expr.span,
             "write e.g. <lower=0>, <lower=0, upper=1> or (on data) <lower=1, upper=G> with 'int G;'")
    return value
