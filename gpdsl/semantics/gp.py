"""GP statements: ``f ~ gp(inputs, kernel)`` and ``f ~ gp(inputs, kernel, mean = m)``.

The inputs are one value or a tuple of them (``gp((t, X), k)``): vectors (one input per point),
matrices (one row per point), int arrays (a label per point) or ``project(W, X)``. They set the points
the GP is over, which the target's shape must match, and the input dimension its kernel acts on
(checked in :mod:`gpdsl.semantics.kernels`).
"""

from __future__ import annotations

from gpdsl.ir import nodes as ir
from gpdsl.semantics.context import CheckContext, fail
from gpdsl.semantics.expressions import check_expr, check_project
from gpdsl.semantics.kernels import check_kernel, verify_kernel_names
from gpdsl.semantics.shapes import same_dim, shape_text
from gpdsl.ir.types import is_label_array
from gpdsl.suggest import did_you_mean
from gpdsl.syntax import ast


def verify_gp_arguments(call: ast.Call) -> None:
    """Fail unless the call is ``gp(inputs, kernel)`` or ``gp(inputs, kernel, mean = EXPR)``.

    Parameters
    ----------
    call : gpdsl.syntax.ast.Call
        The call of ``gp``.

    Raises
    ------
    ModelCheckError
        For another number of arguments, or a keyword other than ``mean``.
    """
    if len(call.args) != 2 or len(call.kwargs) > 1 or (call.kwargs and call.kwargs[0].name != "mean"):
        span = call.kwargs[-1].span if call.kwargs and len(call.args) == 2 else call.span
        hint = did_you_mean(call.kwargs[-1].name, ["mean"]) if call.kwargs else None
        fail("gp takes two arguments and an optional mean: gp(inputs, kernel) or gp(inputs, kernel, mean = m)", span,
             hint)


def check_gp(ctx: CheckContext, statement: ast.Tilde, target: ir.Target) -> ir.GPStatement:
    """Check a GP statement whose (latent) target is already checked.

    Parameters
    ----------
    ctx : CheckContext
    statement : gpdsl.syntax.ast.Tilde
        ``target ~ gp(...)``.
    target : gpdsl.ir.nodes.Target
        The checked target.

    Returns
    -------
    gpdsl.ir.nodes.GPStatement

    Raises
    ------
    ModelCheckError
        For bad arguments, inputs or kernel, a target whose shape is not the GP's points, or a bad mean.
    """
    call = statement.distribution
    verify_gp_arguments(call)
    inputs = check_inputs(ctx, call.args[0])
    verify_kernel_names(ctx, call.args[1])
    kernel = check_kernel(ctx, call.args[1], inputs)
    points = inputs.index_shape
    t = target.type
    if t.container == "matrix" and not t.array_dims:
        rows, ok = t.dims[:1], len(points) == 1 and same_dim(t.dims[0], points[0])
    else:
        rows = t.shape
        ok = len(rows) == len(points) and all(same_dim(a, b) for a, b in zip(rows, points))
    if not ok or t.base != "real" or t.container == "scalar":
        fail(f"'{target.name}' has shape {shape_text(t.shape)} but its gp inputs have "
             f"{shape_text(points)} points", statement.target.span,
             "a GP over N points gives vector[N] (or matrix[N, C] for C independent columns)")
    mean = _gp_mean(ctx, call, target) if call.kwargs else None
    return ir.GPStatement(statement.span, target, inputs, kernel, mean)


def _gp_mean(ctx: CheckContext, call: ast.Call, target: ir.Target) -> ir.Expr:
    """The ``mean = EXPR`` of ``gp(inputs, kernel, mean = EXPR)``: a real scalar, or of the GP's shape (a vector
    over its points, or a matrix of its columns, e.g. ``mean = X`` for a hidden layer of a deep GP)."""
    argument = call.kwargs[0]
    mean = check_expr(ctx, argument.value)
    t = target.type
    value_shape = t.dims if t.array_dims and target.indices else t.shape
    if mean.type.array_dims or (mean.type.shape and (
            len(mean.type.shape) != len(value_shape)
            or not all(same_dim(a, b) for a, b in zip(mean.type.shape, value_shape)))):
        fail(f"the mean of '{target.name}' is {mean.type.describe()}; it must be a real number or of the GP's "
             f"shape ({shape_text(value_shape)})", argument.value.span)
    return mean


def check_inputs(ctx: CheckContext, expr: ast.Expr) -> ir.Inputs:
    """Check the inputs of a GP, the first argument of ``gp``.

    Parameters
    ----------
    ctx : CheckContext
    expr : gpdsl.syntax.ast.Expr
        One input, or a tuple of them.

    Returns
    -------
    gpdsl.ir.nodes.Inputs
        Its components, their names, input dimensions, and the shape of the points they index.

    Raises
    ------
    ModelCheckError
        For a component that is not numeric points, or components that index different points.
    """
    items = expr.items if isinstance(expr, ast.Tuple) else (expr,)
    components, names, dims, index_shapes = [], [], [], []
    for item in items:
        if isinstance(item, ast.Call) and item.function == "project":
            value = check_project(ctx, item)
        else:
            value = check_expr(ctx, item)
        if isinstance(value, ir.StringConstant):
            fail("GP inputs must be a vector or a matrix, got a string", item.span)
        t = value.type
        if t.base != "real" and t.base != "int":
            fail("GP inputs must be numeric", item.span)
        if t.container == "matrix":
            index_shapes.append(t.array_dims + t.dims[:1])
            dims.append(t.dims[1])
        elif t.container == "vector":
            index_shapes.append(t.array_dims + t.dims)
            dims.append(1)
        elif is_label_array(t):
            index_shapes.append(t.array_dims)
            dims.append(1)
        else:
            fail("GP inputs must be a vector (one input per point), a matrix (one row per point) or a "
                 "one-dimensional int array (a label per point)", item.span, f"got {t.describe()}")
        components.append(value)
        names.append(item.name if isinstance(item, ast.Name) else None)
    longest = max(index_shapes, key=len)
    for item, shape in zip(items, index_shapes):
        if tuple(longest[: len(shape)]) != tuple(shape):
            fail(f"GP input components disagree on the points: {shape_text(shape)} vs "
                 f"{shape_text(longest)}", item.span,
                 "a component may be broadcast over a trailing index (e.g. time t over the N points "
                 "of each X[t]) but must otherwise index the same points")
    return ir.Inputs(tuple(components), tuple(names), tuple(dims), tuple(longest), expr.span)
