"""Kernels: the second argument of ``gp(inputs, kernel)``.

A kernel expression is kernels of the catalog (``rbf(lengthscale = l)``) added, multiplied and scaled
by scalars; a combinator of the catalog (``changepoint``, ``warp``) takes kernel expressions as its first
arguments. Kernels inside a ``warp`` act on the warp's (warped) inputs and cannot bind inputs themselves. Each kernel's hyperparameters are checked against its entry in the catalog: names,
defaults, groups of which one is given, scalar or one per input column (ARD), and constant values
against their support. A kernel may be bound to one input of the GP (``rbf(t, ...)``) or to columns of
a matrix input (``rbf(X[:, 2:3], ...)``).
"""

from __future__ import annotations

from dataclasses import dataclass

from gpdsl.ir import nodes as ir
from gpdsl.semantics import catalog
from gpdsl.semantics.constants import constant_items
from gpdsl.semantics.context import CheckContext, fail, fail_unknown_callable
from gpdsl.semantics.expressions import check_expr, is_kernel
from gpdsl.semantics.shapes import shape_text
from gpdsl.semantics.support import SUPPORTS
from gpdsl.ir.types import Dim, is_label_array
from gpdsl.semantics.whole_program import note_parameter_argument
from gpdsl.suggest import closest, did_you_mean, edit_distance
from gpdsl.syntax import ast


def check_kernel(ctx: CheckContext, expr: ast.Expr, inputs: ir.Inputs, within: "Binding | None" = None) -> ir.Kernel:
    """Check a kernel expression over a GP's inputs.

    Parameters
    ----------
    ctx : CheckContext
    expr : gpdsl.syntax.ast.Expr
        The second argument of ``gp``.
    inputs : gpdsl.ir.nodes.Inputs
        The GP's checked inputs, which set the input dimension of each kernel.
    within : Binding, optional
        The inputs of an enclosing ``warp``, which every kernel inside it acts on.

    Returns
    -------
    gpdsl.ir.nodes.Kernel
        A leaf, sum, product or scaled kernel.

    Raises
    ------
    ModelCheckError
        At the first part that is not a kernel, or a kernel with bad hyperparameters.
    """
    if isinstance(expr, ast.BinaryOp) and expr.op in "+*":
        left_is_kernel, right_is_kernel = is_kernel(expr.left), is_kernel(expr.right)
        if expr.op == "+":
            if not (left_is_kernel and right_is_kernel):
                bad = expr.right if left_is_kernel else expr.left
                fail("a kernel can only be added to another kernel", bad.span,
                     "to add a constant covariance write constant(c)")
            return ir.KernelSum(expr.span, check_kernel(ctx, expr.left, inputs, within),
                                check_kernel(ctx, expr.right, inputs, within))
        if left_is_kernel and right_is_kernel:
            return ir.KernelProduct(expr.span, check_kernel(ctx, expr.left, inputs, within),
                                    check_kernel(ctx, expr.right, inputs, within))
        if left_is_kernel or right_is_kernel:
            scale_ast, kernel_ast = (expr.right, expr.left) if left_is_kernel else (expr.left, expr.right)
            scale = check_expr(ctx, scale_ast)
            if scale.type.shape:
                fail("a kernel can only be scaled by a scalar", scale_ast.span)
            return ir.KernelScale(expr.span, scale, check_kernel(ctx, kernel_ast, inputs, within))
    if isinstance(expr, ast.Call):
        if expr.function in catalog.KERNELS:
            return _kernel_leaf(ctx, expr, inputs, within)
        if expr.function in catalog.DISTRIBUTIONS:
            fail(f"'{expr.function}' is a distribution, not a kernel", expr.name_span,
                 "kernels are: " + ", ".join(catalog.KERNELS))
        if expr.function not in catalog.FUNCTIONS:
            fail_unknown_callable(expr, "kernel")
    fail("expected a kernel expression (kernels combined with +, * and scaled by scalars)", expr.span,
         "kernels are: " + ", ".join(catalog.KERNELS))


def verify_kernel_names(ctx: CheckContext, expr: ast.Expr):
    """Fail at a misspelt kernel among the terms and factors of a kernel expression.

    Parameters
    ----------
    ctx : CheckContext
    expr : gpdsl.syntax.ast.Expr
        The second argument of ``gp``.

    Raises
    ------
    ModelCheckError
        At an unknown call, a kernel named without its call, or a name closer to a kernel than to a variable.
    """
    if isinstance(expr, ast.BinaryOp) and expr.op in "+*":
        verify_kernel_names(ctx, expr.left)
        verify_kernel_names(ctx, expr.right)
    elif isinstance(expr, ast.Call) and expr.function in catalog.KERNELS and catalog.KERNELS[expr.function].kernels:
        for arg in _kernel_arguments(ctx, expr).values():
            verify_kernel_names(ctx, arg)
    elif isinstance(expr, ast.Call) and expr.function not in catalog.known_callables():
        fail_unknown_callable(expr, "kernel")
    elif isinstance(expr, ast.Name) and expr.name in catalog.KERNELS:
        fail(f"'{expr.name}' must be called: {expr.name}(...)", expr.span)
    elif (isinstance(expr, ast.Name) and expr.name not in ctx.variables and expr.name not in ctx.loops
          and expr.name not in catalog.CONSTANTS):
        kernel = closest(expr.name, catalog.KERNELS, fallback=False)
        variable = closest(expr.name, ctx.variables, fallback=False)
        if kernel is not None and (variable is None or
                                   edit_distance(expr.name, kernel) <= edit_distance(expr.name, variable)):
            fail(f"unknown kernel '{expr.name}'", expr.span, f"did you mean '{kernel}(...)'?")


@dataclass(frozen=True)
class Binding:
    """The inputs a kernel acts on: a GP input component (None: all), a column range, their width."""

    component: int | None
    columns: tuple[int, int] | None
    input_dim: Dim


def _kernel_leaf(ctx: CheckContext, call: ast.Call, inputs: ir.Inputs, within: Binding | None) -> ir.KernelLeaf:
    spec = catalog.KERNELS[call.function]
    args = list(call.args)
    component, columns = None, None
    if args and _names_input_part(ctx, args[0]):
        if within is not None:
            fail(f"{spec.name} inside warp acts on the warp's inputs and cannot bind its own", args[0].span,
                 "bind the warp instead: warp(t, rbf(lengthscale = 0.3), a, b)")
        component, columns = _input_part(ctx, args[0], inputs)
        args = args[1:]
    input_dim = inputs.dims[component] if component is not None else inputs.dim
    if columns is not None:
        input_dim = columns[1] - columns[0]
    if within is not None:
        component, columns, input_dim = within.component, within.columns, within.input_dim
    kernel_args = _kernel_arguments(ctx, call)
    args = args[len(kernel_args) - sum(kw.name in spec.kernels for kw in call.kwargs):]
    sub_kernels = _sub_kernels(ctx, spec, kernel_args, inputs, Binding(component, columns, input_dim), within)
    values: dict[str, ir.Expr] = {}
    if len(args) > len(spec.params):
        fail(f"{spec.name} takes at most {len(spec.params)} positional hyperparameters", call.span)
    for param, arg in zip(spec.params, args):
        if is_kernel(arg):
            fail(f"{spec.name} parameter '{param.name}' must be a number, not a kernel", arg.span,
                 f"{spec.name} takes the kernels {', '.join(spec.kernels)} first" if spec.kernels else None)
        values[param.name] = check_expr(ctx, arg)
    for kw in call.kwargs:
        if kw.name in spec.kernels:
            continue
        param = spec.param(kw.name)
        if param is None:
            fail(f"kernel {spec.name} has no parameter '{kw.name}'", kw.name_span,
                 did_you_mean(kw.name, spec.positional) or "its parameters are " + ", ".join(spec.positional))
        if kw.name in values:
            fail(f"parameter '{kw.name}' of {spec.name} given twice", kw.name_span)
        values[kw.name] = check_expr(ctx, kw.value)
    for group in spec.exclusive:
        given = [g for g in group if g in values]
        if len(given) > 1:
            fail(f"{spec.name} takes one of {' or '.join(group)}, not both", call.span)
    for param in spec.params:
        excluded = any(param.name in g and any(o in values for o in g if o != param.name)
                       for g in spec.exclusive)
        if param.name not in values and not excluded:
            if param.default is None and not any(param.name in g for g in spec.exclusive):
                fail(f"kernel {spec.name} needs '{param.name}'", call.span,
                     f"e.g. {spec.name}(1e-6)" if spec.name == "white" else f"e.g. {spec.name}({param.name} = 1)")
            if param.default is not None:
                values[param.name] = ir.Constant(ir.REAL, call.span, float(param.default))
    if spec.input_dim is not None and input_dim != spec.input_dim and not spec.index_input:
        columns = "one input column" if spec.input_dim == 1 else f"{spec.input_dim} input columns"
        fail(f"{spec.name} acts on {columns}, here on {input_dim}", call.span,
             f"bind it to a vector input or to one column: {spec.name}(X[:, 1], ...)")
    components: tuple[str, Dim] | None = None
    for name, value in values.items():
        param = spec.param(name)
        shape = value.type.shape
        if param.matrix:
            if value.type.container != "matrix" or value.type.array_dims:
                fail(f"{spec.name} parameter '{name}' must be a matrix, one row per output", value.span,
                     f"e.g. a parameter matrix[P, R] {name}, with P outputs and R shared latent functions")
        elif value.type.container == "matrix" or value.type.array_dims or isinstance(value, ir.StringConstant):
            fail(f"{spec.name} parameter '{name}' must be a scalar or a vector", value.span)
        if shape and not param.matrix:
            if not param.vector_allowed:
                fail(f"{spec.name} parameter '{name}' must be a scalar", value.span)
            if param.ard_allowed and not _dims_agree(shape[0], input_dim):
                fail(f"{spec.name} parameter '{name}' has length {shape[0]} but the kernel acts on "
                     f"{input_dim} input dimension(s)", value.span,
                     "an ARD vector has one entry per input column")
            if param.per_component and components is not None and shape[0] != components[1]:
                fail(f"{spec.name} parameter '{name}' has length {shape[0]} but '{components[0]}' has "
                     f"{components[1]}", value.span, "each has one entry per component (a scalar is shared)")
            if param.per_component:
                components = components or (name, shape[0])
            if param.per_output:
                _verify_per_output(spec, name, value, values)
        if param.integer:
            _verify_whole(spec.name, name, value)
        support = SUPPORTS[param.support]
        for x, span in constant_items(value):
            if not support.contains(x):
                fail(f"{spec.name} parameter '{name}' must be in {support.describe()}, got {x:g}", span)
        note_parameter_argument(ctx, f"{spec.name} parameter '{name}'", support, value)
        if param.half_integer:
            _verify_half_integer(spec.name, name, value)
    if spec.index_input:
        _verify_output_index(ctx, spec, call, values, inputs, component)
    ordered = tuple((p.name, values[p.name]) for p in spec.params if p.name in values)
    if spec.kernels:
        return ir.KernelCombination(call.span, spec.name, ordered, component, input_dim, columns, sub_kernels)
    return ir.KernelLeaf(call.span, spec.name, ordered, component, input_dim, columns)


def _kernel_arguments(ctx: CheckContext, call: ast.Call) -> dict[str, ast.Expr]:
    """The kernel-valued arguments of a combinator's call by name (positional after an input part, or keywords)."""
    spec = catalog.KERNELS[call.function]
    if not spec.kernels:
        return {}
    args = list(call.args)
    if args and _names_input_part(ctx, args[0]):
        args = args[1:]
    keywords = {kw.name: kw.value for kw in call.kwargs if kw.name in spec.kernels}
    positional = [name for name in spec.kernels if name not in keywords]
    found = dict(zip(positional, args))
    for name in positional:
        if name not in found:
            fail(f"{spec.name} needs the kernel '{name}'", call.span,
                 f"{spec.name}'s first arguments are the kernels {', '.join(spec.kernels)}")
    return {name: {**found, **keywords}[name] for name in spec.kernels}


def _sub_kernels(ctx: CheckContext, spec, arguments: dict[str, ast.Expr], inputs: ir.Inputs, own: Binding,
                 within: Binding | None) -> tuple[tuple[str, ir.Kernel], ...]:
    """Check a combinator's kernel arguments; a warp's act on its own inputs, a changepoint's on any."""
    checked = []
    for name, arg in arguments.items():
        if not is_kernel(arg):
            fail(f"{spec.name} argument '{name}' must be a kernel", arg.span,
                 f"e.g. {spec.name}(" + ", ".join("rbf(lengthscale = 1)" for _ in spec.kernels) + ", ...)")
        checked.append((name, check_kernel(ctx, arg, inputs, own if spec.stan[0].warps_points else within)))
    return tuple(checked)
def _output_matrix(spec, values: dict) -> tuple[str, ir.Expr]:
    """The matrix parameter whose rows are the outputs, and its checked value."""
    name = next(p.name for p in spec.params if p.matrix)
    return name, values[name]


def _verify_per_output(spec, name: str, value: ir.Expr, values: dict) -> None:
    """Fail unless a vector given one entry per output has as many entries as the matrix has rows."""
    matrix_name, matrix = _output_matrix(spec, values)
    if matrix.type.container == "matrix" and value.type.shape[0] != matrix.type.shape[0]:
        fail(f"{spec.name} parameter '{name}' has length {value.type.shape[0]} but '{matrix_name}' has "
             f"{matrix.type.shape[0]} rows", value.span, "one entry per output (a scalar is shared)")


def _verify_output_index(ctx: CheckContext, spec, call: ast.Call, values: dict, inputs: ir.Inputs,
                         component: int | None) -> None:
    """Fail unless the kernel acts on an int data array declared ``<lower=1, upper=P>``, P the outputs."""
    if component is None and len(inputs.components) != 1:
        fail(f"{spec.name} acts on the output index: name it first, {spec.name}(output, ...)", call.span,
             "with array[N] int<lower=1, upper=P> output in the data and gp((x, output), ...)")
    span = call.args[0].span if component is not None else inputs.span
    index = inputs.components[component or 0]
    declared = ctx.variables.get(index.name) if isinstance(index, ir.Ref) else None
    example = "array[N] int<lower=1, upper=P> output"
    if declared is None or declared.role != "data" or not is_label_array(declared.type):
        fail(f"{spec.name} acts on an output index, an int data array; here on {index.type.describe()}", span,
             f"declare the index as {example}")
    _, matrix = _output_matrix(spec, values)
    outputs = matrix.type.shape[0] if matrix.type.container == "matrix" else None
    t = declared.type
    if t.lower != 1 or outputs is None or t.upper != outputs:
        fail(f"the output index '{index.name}' of {spec.name} must be declared <lower=1, upper={outputs}>, "
             f"one value per row of its matrix; it is {t.describe()}", span,
             f"the data are then checked against 1..{outputs}")


def _verify_whole(kernel: str, name: str, value: ir.Expr) -> None:
    """Fail unless ``value`` is a constant whole number of at least 1."""
    items = constant_items(value)
    if not items:
        fail(f"{kernel} parameter '{name}' must be a constant whole number", value.span,
             f"e.g. {kernel}({name} = 2)")
    for x, span in items:
        if not (float(x).is_integer() and x >= 1):
            fail(f"{kernel} parameter '{name}' must be a whole number of at least 1, got {x:g}", span)


def _verify_half_integer(kernel: str, name: str, value: ir.Expr) -> None:
    """Fail unless ``value`` is a constant ``p + 1/2`` with a whole ``p >= 0``."""
    items = constant_items(value)
    if not items:
        fail(f"{kernel} parameter '{name}' must be a constant half-integer", value.span,
             f"e.g. {kernel}({name} = 7/2)")
    for x, span in items:
        if not (x > 0 and float(x - 0.5).is_integer()):
            fail(f"{kernel} parameter '{name}' must be a half-integer 1/2, 3/2, 5/2, ..., got {x:g}", span,
                 "the Matérn kernel has a closed form at half-integer orders only")


def _names_input_part(ctx: CheckContext, arg: ast.Expr) -> bool:
    """Whether a kernel's first argument names inputs (``t``, ``X[:, 1]``) rather than a hyperparameter."""
    base = arg.base if isinstance(arg, ast.Index) else arg
    var = ctx.variables.get(base.name) if isinstance(base, ast.Name) else None
    return var is not None and var.role in ("data", "latent") and bool(var.type.shape)


def _input_part(ctx: CheckContext, arg: ast.Expr, inputs: ir.Inputs) -> tuple[int, tuple[int, int] | None]:
    """The input component a kernel is bound to, and the column range it selects (None for all)."""
    name = arg.base.name if isinstance(arg, ast.Index) else arg.name
    if name not in inputs.names:
        fail(f"'{name}' is not one of this GP's inputs", arg.span,
             "bind a kernel to an input by naming one of the inputs of gp((t, X), ...), or to columns "
             "of a matrix input with X[:, j] or X[:, a:b]")
    component = inputs.names.index(name)
    if isinstance(arg, ast.Name):
        return component, None
    value = check_expr(ctx, arg)
    t = inputs.components[component].type
    rows, cols = (value.indices + (None, None))[:2]
    whole_rows = isinstance(arg.indices[0], ast.Slice) and arg.indices[0].start is None
    if t.container != "matrix" or t.array_dims or len(arg.indices) != 2 or not whole_rows:
        fail(f"a kernel binds to whole columns of a matrix input: write {name}[:, j] or {name}[:, a:b]",
             arg.span, f"'{name}' is {t.describe()}; '{name}[...]' here selects "
             f"{shape_text(value.type.shape)} values, not columns")
    if isinstance(cols, ir.Slice) and isinstance(cols.start, ir.Constant) and isinstance(cols.stop, ir.Constant):
        return component, (int(cols.start.value) - 1, int(cols.stop.value))
    if isinstance(cols, ir.Constant):
        return component, (int(cols.value) - 1, int(cols.value))
    fail("the columns a kernel binds to must be constants: X[:, 2] or X[:, 2:3]", arg.indices[1].span)


def _dims_agree(a: Dim, b) -> bool:
    return a == b or (isinstance(b, str) and "+" in b)
