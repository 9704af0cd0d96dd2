"""The arguments of a distribution: ``normal(mu, sigma)`` on the right of ``~``, for priors and likelihoods.

Arguments are matched to the catalog's parameters (by position, then by keyword, then defaults), and
each must be a scalar or of the variate's shape, inside its support when it is constant, and integer
where the likelihood needs counts. Whether the distribution is a prior or a likelihood, and whether
it suits its target, is for :mod:`gpdsl.semantics.priors` and :mod:`gpdsl.semantics.likelihoods`.
"""

from __future__ import annotations

from gpdsl.errors import CheckWarning
from gpdsl.ir import nodes as ir
from gpdsl.likelihoods import LIKELIHOODS
from gpdsl.semantics import catalog
from gpdsl.semantics.constants import constant_items, constant_vector
from gpdsl.semantics.context import CheckContext, fail
from gpdsl.semantics.expressions import check_expr
from gpdsl.semantics.shapes import same_dim, shape_text
from gpdsl.semantics.support import SUPPORTS
from gpdsl.ir.types import number_text
from gpdsl.semantics.whole_program import note_parameter_argument
from gpdsl.suggest import did_you_mean
from gpdsl.syntax import ast

_INTEGER_DECLARATIONS = {"count": "int<lower=0>", "censoring": "int<lower=-1, upper=2>"}
"""The declaration a hint suggests for integer data of each support."""


def check_distribution(ctx: CheckContext, call: ast.Call, spec: catalog.DistributionSpec,
                       target: ir.Target) -> ir.Distribution:
    """Check the arguments of a distribution for its target.

    Parameters
    ----------
    ctx : CheckContext
    call : gpdsl.syntax.ast.Call
        The right of ``~``.
    spec : gpdsl.semantics.catalog.DistributionSpec
        The catalog's entry for the distribution called.
    target : gpdsl.ir.nodes.Target
        The checked left of ``~``, whose shape the arguments must fit.

    Returns
    -------
    gpdsl.ir.nodes.Distribution
        Every argument, defaults filled in, in the catalog's order.

    Raises
    ------
    ModelCheckError
        For missing, unknown, repeated or misshapen arguments, or constants outside their support.
    """
    values: dict[str, ir.Expr] = {}
    if len(call.args) > len(spec.params):
        fail(f"{spec.name} takes at most {len(spec.params)} arguments ({', '.join(spec.params)}), "
             f"got {len(call.args)}", call.span)
    for name, arg in zip(spec.params, call.args):
        values[name] = check_expr(ctx, arg)
    for kw in call.kwargs:
        if kw.name not in spec.params:
            fail(f"{spec.name} has no argument '{kw.name}'", kw.name_span,
                 did_you_mean(kw.name, spec.params) or f"its arguments are {', '.join(spec.params)}")
        if kw.name in values:
            fail(f"argument '{kw.name}' of {spec.name} given twice", kw.name_span)
        values[kw.name] = check_expr(ctx, kw.value)
    for name in spec.params:
        if name not in values:
            if name in spec.defaults:
                values[name] = ir.Constant(ir.REAL, call.span, float(spec.defaults[name]))
            else:
                fail(f"{spec.name} needs the argument '{name}' ({', '.join(spec.params)})", call.span)
    shape = target.type.shape
    likelihood = LIKELIHOODS.get(spec.name) if spec.likelihood else None
    own_shape = likelihood.own_shape if likelihood is not None else ()
    integers = likelihood.integer_params if likelihood is not None else ()
    rows = likelihood.row_params if likelihood is not None else ()
    for name, value in values.items():
        if isinstance(value, ir.StringConstant):
            fail(f"argument '{name}' of {spec.name} cannot be a string", value.span)
        vshape = value.type.shape
        if name in integers and value.type.base != "int":
            declared = _INTEGER_DECLARATIONS.get(spec.argument_support(name), "int")
            fail(f"argument '{name}' of {spec.name} must be integer data, got {value.type.describe()}",
                 value.span, f"declare it e.g. 'array[N] {declared} {name};' in the data block")
        if name in rows:
            _verify_rows(ctx, spec, name, value, target)
            continue
        if name in own_shape:
            if len(vshape) != 1 or value.type.container != "vector":
                fail(f"argument '{name}' of {spec.name} must be a vector, got {value.type.describe()}",
                     value.span, "write the increasing cutpoints as data 'vector[K1] c' or as a literal "
                                 "such as '[c1, c1 + d2, c1 + d2 + d3]' with d2, d3 declared <lower=0>")
            constants = constant_vector(value)
            if constants is not None and any(b <= a for a, b in zip(constants, constants[1:])):
                fail(f"argument '{name}' of {spec.name} must increase, got "
                     f"[{', '.join(number_text(v) for v in constants)}]", value.span)
            if isinstance(value, ir.Ref) and value.role == "parameter":
                ctx.warnings.append(CheckWarning(
                    f"argument '{name}' of {spec.name} is the vector parameter '{value.name}', which nothing "
                    f"keeps increasing; where it is not, the likelihood is zero (Stan rejects the draw): write "
                    f"it as a literal such as '[c1, c1 + d2, c1 + d2 + d3]' with d2, d3 declared <lower=0>",
                    value.span))
            continue
        if vshape and not _shapes_agree(vshape, shape):
            fail(f"argument '{name}' of {spec.name} has shape {shape_text(vshape)} but "
                 f"'{target.name}' has shape {shape_text(shape)}", value.span,
                 "arguments are scalars (applied to every element) or match the variate's shape")
    _verify_arguments(ctx, spec, values, call)
    return ir.Distribution(spec.name, tuple((n, values[n]) for n in spec.params), call.span)


def _verify_rows(ctx: CheckContext, spec: catalog.DistributionSpec, name: str, value: ir.Expr, target: ir.Target):
    """Fail unless the row argument ``value`` is a matrix with one row per observation of a one-dimensional
    ``target``, and one column per label the target's declared upper bound allows."""
    shape = target.type.shape
    if len(shape) != 1:
        fail(f"{spec.name} needs one label per row of '{name}': its data must be a one-dimensional array, but "
             f"'{target.name}' has shape {shape_text(shape)}", target.span,
             f"declare it e.g. 'array[N] int<lower=1, upper=K> {target.name};'")
    if value.type.container != "matrix" or value.type.array_dims:
        fail(f"argument '{name}' of {spec.name} must be a matrix with one row per label and one column per class, "
             f"got {value.type.describe()}", value.span,
             "declare the latent values e.g. 'latent { matrix[N, K] f; }' and write 'f ~ gp(X, k);' for K "
             "independent GP columns")
    rows, columns = value.type.dims
    if not same_dim(rows, shape[0]):
        fail(f"argument '{name}' of {spec.name} has {rows} rows but '{target.name}' has {shape[0]} labels",
             value.span, "one row of logits per label")
    declared = ctx.variables[target.name].type if not target.indices else None
    upper = declared.upper if declared is not None else None
    if isinstance(upper, float) and upper == int(upper):
        upper = int(upper)
    if isinstance(upper, (int, str)) and type(upper) is type(columns) and not same_dim(upper, columns):
        fail(f"the labels of '{target.name}' go up to {upper} but argument '{name}' of {spec.name} has {columns} "
             f"columns, one per class", value.span,
             f"declare '{target.name}' as array[...] int<lower=1, upper={columns}>, or give '{name}' {upper} columns")


def _verify_arguments(ctx: CheckContext, spec: catalog.DistributionSpec, values: dict[str, ir.Expr],
                      call: ast.Call):
    """Fail at a constant argument outside its support, or constant bounds that are not increasing."""
    for name, value in values.items():
        support = SUPPORTS[spec.argument_support(name)]
        for x, span in constant_items(value):
            if not support.contains(x):
                fail(f"argument '{name}' of {spec.name} must be in {support.describe()}, got {x:g}", span)
        note_parameter_argument(ctx, f"argument '{name}' of {spec.name}", support, value)
    if spec.ordered is not None:
        first, second = spec.ordered
        lower, upper = constant_vector(values[first]), constant_vector(values[second])
        if lower is not None and upper is not None:
            n = max(len(lower), len(upper))
            pairs = zip(lower * n if len(lower) == 1 else lower, upper * n if len(upper) == 1 else upper)
            for k, (a, b) in enumerate(pairs):
                if not a < b:
                    element = f" in element {k + 1}" if n > 1 else ""
                    fail(f"{spec.name} needs {first} < {second}, got {first} = {a:g} and {second} = {b:g}"
                         f"{element}", call.span)


def _shapes_agree(a, b) -> bool:
    if len(a) == len(b) and all(same_dim(x, y) for x, y in zip(a, b)):
        return True
    return _element_count(a) is not None and _element_count(a) == _element_count(b) and len(a) == len(b)


def _element_count(shape) -> int | None:
    n = 1
    for d in shape:
        if not isinstance(d, int):
            return None
        n *= d
    return n
