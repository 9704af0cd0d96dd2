"""Transformed parameters: ``real rho2 = rho^2;`` in the ``transformed parameters`` block.

Each is a value computed from data, parameters and the transformed parameters above it. The checker types
its definition against its declared type and stands the definition in for the name wherever the model uses
it, so every backend and engine sees the model written out (its structure unchanged); the results report
each one in the posterior group, computed from each draw.
"""

from __future__ import annotations

from dataclasses import replace

from gpdsl.ir import nodes as ir
from gpdsl.semantics import catalog
from gpdsl.semantics.context import CheckContext, fail
from gpdsl.semantics.declarations import declare
from gpdsl.semantics.expressions import check_expr
from gpdsl.semantics.shapes import value_type
from gpdsl.syntax import ast


def define(ctx: CheckContext, decl: ast.Declaration) -> ir.TransformedParameter:
    """Check one definition of the transformed parameters block and make its name stand for its value.

    Parameters
    ----------
    ctx : CheckContext
    decl : gpdsl.syntax.ast.Declaration
        ``type name = value;``.

    Returns
    -------
    gpdsl.ir.nodes.TransformedParameter

    Raises
    ------
    ModelCheckError
        For bounds on the declaration, or a value whose type is not the declared one.
    """
    if decl.type.lower is not None or decl.type.upper is not None:
        fail(f"transformed parameter '{decl.name}' cannot have bounds", decl.type.span,
             "its value follows from the parameters: constrain those instead")
    for name in ast.references(decl.value):
        if name.name not in ctx.variables and name.name not in catalog.CONSTANTS:
            fail(f"'{name.name}' is not known here: a transformed parameter is computed from data, parameters "
                 "and the transformed parameters above it", name.span,
                 "latent values and GP values are defined later, in the latent and model blocks")
    value = check_expr(ctx, decl.value)
    declare(ctx, replace(decl, value=None), "transformed")
    declared = value_type(ctx.variables[decl.name].type)
    got = replace(value.type, base=declared.base if value.type.base == "int" else value.type.base)
    if got != declared:
        fail(f"'{decl.name}' is declared {declared.describe()} but its value is {value.type.describe()}",
             decl.value.span)
    ctx.transformed[decl.name] = value
    return ir.TransformedParameter(decl.name, declared, value, decl.name_span)
