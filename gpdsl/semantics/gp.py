"""GP statements: ``f ~ gp(inputs, kernel)``, ``f ~ gp(inputs, kernel, mean = m)``, with an optional
``approx = hsgp(m = 30, c = 1.5)`` (:mod:`gpdsl.semantics.approximations`); and the Student-t process
``f ~ student_t_process(nu, inputs, kernel)``, whose inputs and kernel are checked alike.

The inputs are one value or a tuple of them (``gp((t, X), k)``): vectors (one input per point),
matrices (one row per point), int arrays (a label per point) or ``project(W, X)``. They set the points
the GP is over, which the target's shape must match, and the input dimension its kernel acts on
(checked in :mod:`gpdsl.semantics.kernels`).
"""

from __future__ import annotations

from gpdsl.ir import nodes as ir
from gpdsl.ir.approximations import APPROXIMATIONS
from gpdsl.semantics.approximations import check_approximation
from gpdsl.ir.structure import expression_refs, statement_refs
from gpdsl.semantics.constants import fold
from gpdsl.semantics.context import CheckContext, fail
from gpdsl.semantics.expressions import check_expr, check_project
from gpdsl.semantics.kernels import check_kernel, verify_kernel_names
from gpdsl.semantics.shapes import same_dim, shape_text
from gpdsl.ir.types import is_label_array
from gpdsl.suggest import did_you_mean
from gpdsl.syntax import ast


GP_KEYWORDS = ("mean", "approx")
"""The optional keyword arguments of ``gp``."""


def verify_gp_arguments(call: ast.Call) -> None:
    """Fail unless the call is ``gp(inputs, kernel)`` with optional ``mean = EXPR`` and ``approx = NAME(...)``.

    Parameters
    ----------
    call : gpdsl.syntax.ast.Call
        The call of ``gp``.

    Raises
    ------
    ModelCheckError
        For another number of arguments, a keyword other than ``mean`` and ``approx``, or one given twice.
    """
    names = [k.name for k in call.kwargs]
    wrong = next((k for k in call.kwargs if k.name not in GP_KEYWORDS or names.count(k.name) > 1), None)
    if len(call.args) != 2 or wrong is not None:
        span = wrong.span if wrong is not None and len(call.args) == 2 else call.span
        hint = did_you_mean(wrong.name, GP_KEYWORDS) if wrong is not None else None
        fail("gp takes two arguments and the optional mean and approx: gp(inputs, kernel), "
             "gp(inputs, kernel, mean = m, approx = hsgp(m = 30))", span,
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
    inputs, kernel = _process_inputs_and_kernel(ctx, statement, target, call.args[0], call.args[1])
    keywords = {k.name: k for k in call.kwargs}
    mean = _gp_mean(ctx, keywords["mean"], target) if "mean" in keywords else None
    if "approx" not in keywords:
        return ir.GPStatement(statement.span, target, inputs, kernel, mean)
    approximation = check_approximation(ctx, keywords["approx"], inputs)
    gp = ir.GPStatement(statement.span, target, inputs, kernel, mean, approximation)
    APPROXIMATIONS[approximation.name].verifier()(gp, approximation)
    return gp


def verify_student_t_process_arguments(call: ast.Call) -> None:
    """Fail unless the call is ``student_t_process(nu, inputs, kernel)``.

    Raises
    ------
    ModelCheckError
        For another number of arguments, or any keyword argument.
    """
    if len(call.args) != 3 or call.kwargs:
        fail("student_t_process takes three arguments: student_t_process(nu, inputs, kernel)",
             call.kwargs[0].span if call.kwargs else call.span,
             "nu > 2 is the degrees of freedom; the Student-t process has a zero mean")


def check_student_t_process(ctx: CheckContext, statement: ast.Tilde,
                            target: ir.Target) -> ir.StudentTProcessStatement:
    """Check a Student-t process statement ``target ~ student_t_process(nu, inputs, kernel)``.

    Its inputs and kernel are checked as those of ``gp``; ``nu`` is a real scalar, above 2 when it is a
    constant, and declared ``<lower=2>`` (or more) when it is data or a parameter. Where it may be used (only under
    ``y ~ normal(f, s)``) is judged once the whole program is checked (:func:`verify_student_t_processes`).

    Returns
    -------
    gpdsl.ir.nodes.StudentTProcessStatement

    Raises
    ------
    ModelCheckError
        For bad arguments, a ``nu`` that is not a scalar or may be 2 or less, or what :func:`check_gp` refuses.
    """
    call = statement.distribution
    verify_student_t_process_arguments(call)
    dof = check_expr(ctx, call.args[0])
    _verify_degrees_of_freedom(ctx, dof, call.args[0])
    if target.type.container != "vector" or target.type.array_dims or target.indices:
        fail(f"'{target.name}' is {target.type.describe()}; a Student-t process gives one vector[N] over its "
             "inputs' points", statement.target.span)
    inputs, kernel = _process_inputs_and_kernel(ctx, statement, target, call.args[1], call.args[2])
    return ir.StudentTProcessStatement(statement.span, target, inputs, kernel, dof)


def _verify_degrees_of_freedom(ctx: CheckContext, dof: ir.Expr, expr: ast.Expr) -> None:
    needs = "the degrees of freedom nu of student_t_process"
    if isinstance(dof, ir.StringConstant) or dof.type.shape or dof.type.array_dims \
            or dof.type.base not in ("real", "int"):
        got = "a string" if isinstance(dof, ir.StringConstant) else dof.type.describe()
        fail(f"{needs} must be a real number, got {got}", dof.span)
    value = fold(expr)
    if value is not None:
        if not value > 2:
            fail(f"{needs} must be greater than 2, got {value:g}", dof.span,
                 "the process's covariance is its kernel's (Shah et al. 2014), which needs nu > 2")
        return
    if isinstance(dof, ir.Ref) and dof.role in ("data", "parameter"):
        declared = ctx.variables[dof.name].type
        if declared.lower is None or declared.lower < 2:
            what = "data" if dof.role == "data" else "the parameter"
            fail(f"{needs} is {what} '{dof.name}', declared {declared.describe()}, which may be 2 or less",
                 dof.span, f"declare it 'real<lower=2> {dof.name}'")
        return
    fail(f"{needs} must be a constant, or data or a parameter declared <lower=2>", dof.span)


def verify_student_t_processes(statements: list[ir.Statement]) -> None:
    """Fail unless each Student-t process is observed directly through one ``y ~ normal(f, s)`` with scalar ``s``
    and nothing else reads it: the exact marginal ``y ~ MVT(nu, 0, K + s^2 I)`` is the only form gpdsl has.

    Parameters
    ----------
    statements : list of gpdsl.ir.nodes.Statement
        The model's checked statements (loops included).

    Raises
    ------
    ModelCheckError
        At the first statement that reads a Student-t process otherwise, or at the process with no likelihood.
    """
    walked = list(_walk(statements, ()))
    for process, loops in walked:
        if not isinstance(process, ir.StudentTProcessStatement):
            continue
        name = process.target.name
        if loops:
            fail(f"the Student-t process '{name}' sits in a loop; write it as one statement over all its points",
                 process.span)
        users = [(s, inner) for s, inner in walked if s is not process and name in statement_refs(s, indices=True)]
        if not users:
            fail(f"the Student-t process '{name}' is never observed; write e.g. 'y ~ normal({name}, sigma);'",
                 process.target.span)
        for user, inner in users:
            _verify_observation(name, user, inner, process)
        if len(users) > 1:
            fail(f"the Student-t process '{name}' is read by more than one statement; only 'y ~ normal({name}, s)' "
                 "may read it", users[1][0].span)


def _verify_observation(name: str, user: ir.Statement, loops, process: ir.StudentTProcessStatement) -> None:
    needs = (f"a Student-t process is observed only through y ~ normal({name}, s) with scalar s (its exact "
             "marginal); ")
    if not isinstance(user, ir.LikelihoodStatement):
        fail(needs + f"this statement reads '{name}' otherwise", user.span)
    distribution = user.distribution
    if distribution.name != "normal":
        fail(needs + f"'{distribution.name}' has no Student-t process marginal", user.span,
             "for a non-Gaussian likelihood use a GP: f ~ gp(X, k)")
    if loops or user.target.indices or user.target.type.shape != process.target.type.shape \
            or user.target.type.container != "vector" or user.target.type.array_dims:
        fail(needs + "the observations must be one vector of the process's shape, outside any loop", user.span)
    mu, sigma = distribution.arg("mu"), distribution.arg("sigma")
    if not (isinstance(mu, ir.Ref) and mu.name == name):
        fail(needs + f"its location must be '{name}' itself", mu.span)
    if sigma.type.shape or name in expression_refs(sigma):
        fail(needs + "its standard deviation must be a scalar free of the process", sigma.span)


def _walk(statements, loops):
    for statement in statements:
        if isinstance(statement, ir.ForLoop):
            yield from _walk(statement.body, loops + (statement,))
        else:
            yield statement, loops


def _process_inputs_and_kernel(ctx: CheckContext, statement: ast.Tilde, target: ir.Target, inputs_arg: ast.Expr,
                               kernel_arg: ast.Expr) -> tuple[ir.Inputs, ir.Kernel]:
    """The checked inputs and kernel of a GP or Student-t process whose target is already checked."""
    inputs = check_inputs(ctx, inputs_arg)
    verify_kernel_names(ctx, kernel_arg)
    kernel = check_kernel(ctx, kernel_arg, inputs)
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
    return inputs, kernel


def _gp_mean(ctx: CheckContext, argument: ast.KeywordArgument, target: ir.Target) -> ir.Expr:
    """The ``mean = EXPR`` of ``gp(inputs, kernel, mean = EXPR)``: a real scalar, or of the GP's shape (a vector
    over its points, or a matrix of its columns, e.g. ``mean = X`` for a hidden layer of a deep GP)."""
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
