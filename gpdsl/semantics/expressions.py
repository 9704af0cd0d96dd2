"""Expressions: names, numbers, arithmetic, indexing, function calls and vector literals.

:func:`check_expr` gives each expression its type (base, container, sizes) and fails at one that
cannot be typed: an undeclared name, shapes that do not match, an index out of range. Kernels,
distributions and ``gp`` are not expressions; they are refused here with a message that says where
they belong.
"""

from __future__ import annotations

from dataclasses import replace

from gpdsl.ir import nodes as ir
from gpdsl.semantics import catalog
from gpdsl.semantics.context import CheckContext, fail, fail_unknown_callable
from gpdsl.semantics.shapes import value_type
from gpdsl.ir.types import Dim, VarType, is_label_array
from gpdsl.source import Span
from gpdsl.suggest import did_you_mean
from gpdsl.syntax import ast


def check_expr(ctx: CheckContext, expr: ast.Expr) -> ir.Expr:
    """Check an expression and type it.

    Parameters
    ----------
    ctx : CheckContext
    expr : gpdsl.syntax.ast.Expr

    Returns
    -------
    gpdsl.ir.nodes.Expr

    Raises
    ------
    ModelCheckError
        At the first part of ``expr`` that is not a well-typed expression.
    """
    return _CHECKS[type(expr)](ctx, expr)


def _number(ctx: CheckContext, expr: ast.Number) -> ir.Expr:
    return ir.Constant(ir.INT if expr.is_int else ir.REAL, expr.span, expr.value)


def _string(ctx: CheckContext, expr: ast.String) -> ir.Expr:
    return ir.StringConstant(ir.REAL, expr.span, expr.value)


def _name(ctx: CheckContext, expr: ast.Name) -> ir.Expr:
    if expr.name in ctx.loops:
        return ir.Ref(ir.INT, expr.span, expr.name, "loop")
    var = ctx.variables.get(expr.name)
    if var is None:
        if expr.name in catalog.CONSTANTS:
            return ir.Constant(ir.REAL, expr.span, catalog.CONSTANTS[expr.name])
        if expr.name in catalog.KERNELS or expr.name in catalog.DISTRIBUTIONS:
            fail(f"'{expr.name}' must be called: {expr.name}(...)", expr.span)
        fail(f"'{expr.name}' is not declared", expr.span,
             did_you_mean(expr.name, list(ctx.variables) + list(ctx.loops)))
    ctx.used.add(expr.name)
    if var.role == "transformed":
        return ctx.transformed[expr.name]
    return ir.Ref(value_type(var.type), expr.span, expr.name, var.role)


def _negate(ctx: CheckContext, expr: ast.Negate) -> ir.Expr:
    operand = check_expr(ctx, expr.operand)
    if isinstance(operand, ir.Constant):
        return ir.Constant(operand.type, expr.span, -operand.value)
    return ir.Negate(operand.type, expr.span, operand)


def _binary(ctx: CheckContext, expr: ast.BinaryOp) -> ir.Expr:
    if is_kernel(expr):
        fail("a kernel expression can only appear as the second argument of gp(...)", expr.span)
    left, right = check_expr(ctx, expr.left), check_expr(ctx, expr.right)
    for side in (left, right):
        if isinstance(side, ir.StringConstant):
            fail("strings cannot be used in arithmetic", side.span)
    lt, rt = left.type, right.type
    product = _matrix_product(left, right, expr.span) if expr.op == "*" else None
    if product is not None:
        return product
    if not lt.shape:
        shape_type = rt
    elif not rt.shape:
        shape_type = lt
    elif lt.container == rt.container and lt.shape == rt.shape:
        shape_type = lt
    else:
        fail(f"shapes do not match for '{expr.op}': {lt.describe()} and {rt.describe()}", expr.span,
             "operators act elementwise: both sides need the same shape, or one side a scalar")
    base = "int" if lt.base == rt.base == "int" and expr.op in "+-*" else "real"
    return ir.Binary(replace(shape_type, base=base), expr.span, expr.op, left, right)


def _index(ctx: CheckContext, expr: ast.Index) -> ir.Expr:
    base = check_expr(ctx, expr.base)
    shape = base.type.shape + (None,) * len(expr.indices)
    indices = tuple(_index_item(ctx, i, dim) for i, dim in zip(expr.indices, shape))
    return ir.Index(check_indexed_type(ctx, base.type, indices, expr.span), expr.span, base, indices)


def _index_item(ctx: CheckContext, item: ast.Expr, dim: Dim | None):
    """An index; a full slice ``:`` becomes ``1:dim`` (``dim`` None past the last dimension)."""
    if isinstance(item, ast.Slice) and item.start is None:
        if dim is None:
            fail("too many indices", item.span)
        stop = (ir.Constant(ir.INT, item.span, dim) if isinstance(dim, int)
                else ir.Ref(ir.INT, item.span, dim, "data"))
        return ir.Slice(ir.Constant(ir.INT, item.span, 1), stop)
    if isinstance(item, ast.Slice):
        start, stop = check_expr(ctx, item.start), check_expr(ctx, item.stop)
        for bound in (start, stop):
            if bound.type != ir.INT:
                fail("slice bounds must be integers", bound.span)
        return ir.Slice(start, stop)
    value = check_expr(ctx, item)
    if value.type != ir.INT and not is_label_array(value.type):
        fail(f"an index must be an integer or a one-dimensional int array, got {value.type.describe()}",
             item.span, "index by integer data, e.g. u[group] with array[N] int<lower=1, upper=G> group")
    return value


def check_indexed_type(ctx: CheckContext, t: VarType, indices, span: Span) -> VarType:
    """The type of a value of type ``t`` indexed by checked ``indices``.

    Parameters
    ----------
    ctx : CheckContext
    t : VarType
        The type of the indexed value.
    indices : tuple of gpdsl.ir.nodes.Expr or gpdsl.ir.nodes.Slice
        One per indexed dimension, outermost first.
    span : Span
        The indexing expression, for errors about the indices as a whole.

    Returns
    -------
    VarType
        An integer keeps its dimension, a range or an int array (``u[group]``) keeps one of its length.

    Raises
    ------
    ModelCheckError
        For too many indices, two int arrays other than ``G[a, b]`` on a matrix with arrays of one length (the
        entries at the pairs ``(a[n], b[n])``), a constant index or range out of range, an empty range.
    """
    shape = list(t.shape)
    if len(indices) > len(shape):
        fail(f"too many indices: {t.describe()} has {len(shape)} dimension(s)", span)
    if sum(map(_is_multi_index, indices)) > 1:
        return _pairs_type(t, indices, span)
    new_dims = []
    column = len(t.array_dims) + 1 if t.container == "matrix" else None
    for position, (index, dim) in enumerate(zip(indices, shape)):
        what = "column" if position == column else "index"
        if isinstance(index, ir.Slice):
            new_dims.append(_slice_length(ctx, index))
            ends = (index.start, index.stop)
            if isinstance(dim, int) and all(isinstance(e, ir.Constant) for e in ends) \
                    and not 1 <= index.start.value <= index.stop.value <= dim:
                fail(f"{what} range {int(index.start.value)}:{int(index.stop.value)} is out of range 1..{dim}",
                     index.start.span)
        elif _is_multi_index(index):
            new_dims.append(index.type.array_dims[0])
        else:
            if isinstance(index, ir.Constant) and isinstance(dim, int) and not 1 <= index.value <= dim:
                fail(f"{what} {int(index.value)} is out of range 1..{dim}", index.span)
            if isinstance(index, ir.Constant) and index.value < 1:
                fail("indices start at 1", index.span)
    n_array = len(t.array_dims)
    kept = [(p, d) for p, d in enumerate(shape[: len(indices)])
            if isinstance(indices[p], ir.Slice) or _is_multi_index(indices[p])]
    array_dims = [new_dims[i] for i, (p, _) in enumerate(kept) if p < n_array] + \
        [d for p, d in enumerate(shape) if p >= len(indices) and p < n_array]
    container_dims = [new_dims[i] for i, (p, _) in enumerate(kept) if p >= n_array] + \
        [d for p, d in enumerate(shape) if p >= len(indices) and p >= n_array]
    container = {0: "scalar", 1: "vector", 2: "matrix"}[len(container_dims)]
    if t.base == "int" and container != "scalar":
        array_dims, container_dims, container = array_dims + container_dims, [], "scalar"
    return VarType(t.base, container, tuple(container_dims), tuple(array_dims))


def _pairs_type(t: VarType, indices, span: Span) -> VarType:
    """``G[a, b]`` with two int arrays of one length on a matrix: the entries at the pairs ``(a[n], b[n])``."""
    if t.container != "matrix" or t.array_dims or len(indices) != 2:
        fail("two int arrays may only index a matrix, as G[a, b]", span,
             "G[a, b] picks the entries G[a[n], b[n]]; index other containers one dimension at a time")
    rows, columns = (i.type.array_dims[0] for i in indices)
    if rows != columns:
        fail(f"the int arrays of G[a, b] must have the same length, got {rows} and {columns}", span,
             "G[a, b] picks one entry G[a[n], b[n]] per n")
    return VarType(t.base, "vector", (rows,))


def _is_multi_index(index) -> bool:
    """Whether an index is an int array (``u[group]``): it keeps its dimension, at the array's length."""
    return not isinstance(index, ir.Slice) and is_label_array(index.type)


def _slice_length(ctx: CheckContext, index: ir.Slice) -> Dim:
    if isinstance(index.start, ir.Constant) and isinstance(index.stop, ir.Constant):
        length = int(index.stop.value) - int(index.start.value) + 1
        if length < 1:
            fail("empty slice", index.start.span)
        return length
    if (isinstance(index.start, ir.Constant) and index.start.value == 1 and isinstance(index.stop, ir.Ref)
            and index.stop.name in ctx.sizes):
        return index.stop.name
    fail("slice bounds must be constants (or 1:N with a size N)", index.start.span)


def _call(ctx: CheckContext, expr: ast.Call) -> ir.Expr:
    name = expr.function
    if name in catalog.KERNELS:
        fail(f"kernel '{name}' can only appear inside gp(inputs, kernel)", expr.name_span)
    if name in catalog.DISTRIBUTIONS or name in (*catalog.PROCESSES, catalog.EXTERNAL):
        fail(f"'{name}' can only appear on the right of '~'", expr.name_span)
    if name == "project":
        return check_project(ctx, expr)
    if name in catalog.REDUCTIONS:
        return _reduction(ctx, expr)
    if name not in catalog.FUNCTIONS:
        fail_unknown_callable(expr, "function")
    if len(expr.args) != 1 or expr.kwargs:
        fail(f"{name} takes one argument", expr.span)
    arg = check_expr(ctx, expr.args[0])
    return ir.Apply(replace(arg.type, base="real"), expr.span, name, (arg,))


def _reduction(ctx: CheckContext, call: ast.Call) -> ir.Reduction:
    """``sum(x)`` and ``mean(x)`` of a vector or matrix, ``dot_product(a, b)`` of two vectors of one length."""
    name, arity = call.function, 2 if call.function == "dot_product" else 1
    if len(call.args) != arity or call.kwargs:
        fail(f"{name} takes {'two arguments: dot_product(a, b)' if arity == 2 else 'one argument'}", call.span)
    args = tuple(check_expr(ctx, a) for a in call.args)
    wanted = ("vector",) if arity == 2 else ("vector", "matrix")
    for arg in args:
        if arg.type.container not in wanted or arg.type.array_dims:
            fail(f"{name} needs {' or '.join(wanted)} arguments, got {arg.type.describe()}", arg.span)
    if arity == 2 and args[0].type.dims != args[1].type.dims:
        fail(f"dot_product needs two vectors of the same length, got {args[0].type.describe()} and "
             f"{args[1].type.describe()}", call.span)
    return ir.Reduction(ir.REAL, call.span, name, args)


def _matrix_product(left: ir.Expr, right: ir.Expr, span: Span) -> ir.MatrixProduct | None:
    """``A * b`` (matrix times vector) or ``A * B`` (matrices of different shapes) as a matrix product; None
    for operands that ``*`` multiplies element by element."""
    lt, rt = left.type, right.type
    if lt.container != "matrix" or rt.container not in ("vector", "matrix") or lt.array_dims or rt.array_dims \
            or lt.dims == rt.dims:
        return None
    if lt.dims[1] != rt.dims[0]:
        fail(f"shapes do not match for the matrix product '*': {lt.describe()} and {rt.describe()}", span,
             "A * b needs as many columns in A as rows in b")
    dims = (lt.dims[0],) + rt.dims[1:]
    return ir.MatrixProduct(VarType("real", rt.container, dims), span, left, right)


def check_project(ctx: CheckContext, call: ast.Call) -> ir.Project:
    """``project(W, X)``: the inputs ``X`` seen through each of the ``Q`` matrices of ``W``.

    Parameters
    ----------
    ctx : CheckContext
    call : gpdsl.syntax.ast.Call
        The call of ``project``.

    Returns
    -------
    gpdsl.ir.nodes.Project
        A ``matrix[N, Q]``.

    Raises
    ------
    ModelCheckError
        Unless ``W`` is ``array[Q] matrix[N, D]`` and ``X`` is ``matrix[N, D]``.
    """
    if len(call.args) != 2 or call.kwargs:
        fail("project takes two arguments: project(W, X)", call.span)
    weights, inputs = check_expr(ctx, call.args[0]), check_expr(ctx, call.args[1])
    w, x = weights.type, inputs.type
    if not (w.container == "matrix" and len(w.array_dims) == 1 and x.container == "matrix"
            and not x.array_dims and w.dims == x.dims):
        fail(f"project(W, X) needs W: array[Q] matrix[N, D] and X: matrix[N, D]; got "
             f"{w.describe()} and {x.describe()}", call.span)
    return ir.Project(VarType("real", "matrix", (x.dims[0], w.array_dims[0])), call.span, weights, inputs)


def _tuple(ctx: CheckContext, expr: ast.Tuple) -> ir.Expr:
    fail("a tuple can only be the inputs of gp((t, X), kernel)", expr.span)


def _vector_literal(ctx: CheckContext, expr: ast.VectorLiteral) -> ir.Expr:
    items = tuple(check_expr(ctx, i) for i in expr.items)
    for item in items:
        if item.type.shape:
            fail("vector literal items must be scalars", item.span)
    return ir.VectorLiteral(VarType("real", "vector", (len(items),)), expr.span, items)


def _slice(ctx: CheckContext, expr: ast.Slice) -> ir.Expr:
    fail("a range a:b can only be used as an index", expr.span)


def is_kernel(expr: ast.Expr) -> bool:
    """Whether an expression is a kernel, or a sum or product with a kernel in it.

    Parameters
    ----------
    expr : gpdsl.syntax.ast.Expr

    Returns
    -------
    bool
    """
    if isinstance(expr, ast.Call):
        return expr.function in catalog.KERNELS
    if isinstance(expr, ast.BinaryOp) and expr.op in "+*":
        return is_kernel(expr.left) or is_kernel(expr.right)
    return False


_CHECKS = {ast.Number: _number, ast.String: _string, ast.Name: _name, ast.Negate: _negate, ast.BinaryOp: _binary,
           ast.Index: _index, ast.Call: _call, ast.Tuple: _tuple, ast.VectorLiteral: _vector_literal,
           ast.Slice: _slice}
