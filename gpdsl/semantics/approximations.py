"""The ``approx = NAME(...)`` argument of a GP statement, checked against :data:`gpdsl.ir.approximations.APPROXIMATIONS`.

:func:`check_approximation` reads the call (its settings are constants of the model file, defaults filled in);
each approximation's ``verify`` function then judges the checked GP statement: :func:`verify_hsgp` for the
Hilbert-space approximation.
"""

from __future__ import annotations

from gpdsl.ir import nodes as ir
from gpdsl.ir.approximations import APPROXIMATIONS, Approximation, ApproximationSetting, ApproximationSpec
from gpdsl.ir.latent_hsgp import LATENT_PRIOR_SDS, is_latent_hsgp, latent_inputs, prior_scale
from gpdsl.ir.periodic_series import periodic_leaf, reads_data_alone, sum_terms
from gpdsl.ir.state_space import group_factor
from gpdsl.ir.structure import sub_expressions
from gpdsl.semantics import catalog
from gpdsl.semantics.constants import fold
from gpdsl.semantics.context import CheckContext, fail
from gpdsl.suggest import did_you_mean
from gpdsl.syntax import ast


def check_approximation(ctx: CheckContext, argument: ast.KeywordArgument, inputs: ir.Inputs) -> Approximation:
    """The approximation named by ``approx = NAME(setting = value, ...)`` (or ``approx = NAME``) of a GP.

    Parameters
    ----------
    ctx : CheckContext
    argument : gpdsl.syntax.ast.KeywordArgument
        The ``approx = ...`` argument.
    inputs : gpdsl.ir.nodes.Inputs
        The GP's checked inputs (a per-dimension setting has one value per input column).

    Returns
    -------
    gpdsl.ir.approximations.Approximation

    Raises
    ------
    ModelCheckError
        For an unknown approximation, an unknown, repeated or missing setting, a value that is not a constant
        of the kind the setting admits, or a GP statement inside a loop.
    """
    value = argument.value
    call = value if isinstance(value, ast.Call) else None
    name = call.function if call is not None else value.name if isinstance(value, ast.Name) else None
    if name is None:
        fail("approx must name an approximation, e.g. approx = hsgp(m = 30, c = 1.5)", value.span,
             "approximations: " + ", ".join(APPROXIMATIONS))
    spec = APPROXIMATIONS.get(name)
    if spec is None:
        span = call.name_span if call is not None and call.name_span is not None else value.span
        fail(f"unknown approximation '{name}'", span,
             did_you_mean(name, APPROXIMATIONS) or "approximations: " + ", ".join(APPROXIMATIONS))
    if ctx.loops:
        fail(f"an approximate GP ({name}) is one statement over all its points; it cannot sit in a loop",
             argument.span)
    given = _bind(spec, call) if call is not None else {}
    settings = []
    for setting in spec.settings:
        if setting.name in given:
            settings.append((setting.name, _setting_value(setting, given[setting.name], inputs, spec)))
        elif setting.default is not None:
            settings.append((setting.name, setting.default))
        else:
            fail(f"{spec.name}() needs the setting '{setting.name}' ({setting.doc})", value.span)
    return Approximation(spec.name, tuple(settings), value.span)


def _bind(spec: ApproximationSpec, call: ast.Call) -> dict[str, ast.Expr]:
    names = [s.name for s in spec.settings]
    if len(call.args) > len(names):
        fail(f"{spec.name}() takes at most {len(names)} settings ({', '.join(names)}), got {len(call.args)}",
             call.args[len(names)].span)
    given = dict(zip(names, call.args))
    for keyword in call.kwargs:
        if keyword.name not in names:
            fail(f"{spec.name}() has no setting '{keyword.name}'", keyword.span,
                 "settings: " + "; ".join(f"{s.name}, {s.doc}" for s in spec.settings))
        if keyword.name in given:
            fail(f"{spec.name}() got the setting '{keyword.name}' more than once", keyword.span)
        given[keyword.name] = keyword.value
    return given


def _setting_value(setting: ApproximationSetting, expr: ast.Expr, inputs: ir.Inputs, spec: ApproximationSpec):
    what = f"{spec.name}() setting '{setting.name}'"
    if setting.per_dimension and isinstance(expr, ast.VectorLiteral):
        values = tuple(_constant(setting, item, what) for item in expr.items)
        if isinstance(inputs.dim, int) and len(values) != inputs.dim:
            fail(f"{what} has {len(values)} values but the GP has {inputs.dim} input column(s)", expr.span,
                 "give one value per input column, or one value for all")
        return values
    return _constant(setting, expr, what)


def _constant(setting: ApproximationSetting, expr: ast.Expr, what: str) -> float:
    value = fold(expr)
    if value is None:
        hint = "a vector literal [a, b] gives one value per input column" if setting.per_dimension else None
        fail(f"{what} must be a constant", expr.span, hint)
    if not setting.admits(value):
        fail(f"{what} must be {setting.requirement}, got {value:g}", expr.span)
    return int(value) if setting.integer else float(value)


# ---- the Hilbert-space approximation -------------------------------------------------------------
def verify_hsgp(statement: ir.GPStatement, approximation: Approximation) -> None:
    """Fail unless the Hilbert-space approximation can stand for this GP.

    It needs one vector of latent values over data inputs of one index level with at most ``max_columns`` columns
    (a fixed number; 3 by default), and a stationary kernel with a spectral density: a
    kernel whose table entry spells one (rbf, the Matérn kernels), or sums and scalings of them, each over all
    the input columns.

    Over latent inputs (a GPLVM, ``F ~ gp(X, k, approx = hsgp(...))``, :mod:`gpdsl.ir.latent_hsgp`) the target may be
    a matrix of independent columns and the kernel has no periodic terms; the latent's prior must give the box a
    scale, which :func:`verify_latent_hsgp_priors` checks once the whole program is read.

    Raises
    ------
    ModelCheckError
        At the part of the statement that the approximation cannot take, with the reason.
    """
    if latent_inputs(statement) is not None:
        _verify_over_latent_inputs(statement, approximation)
        _verify_constant_harmonic(statement, approximation)
        if approximation.value("centred") == 1:
            fail("hsgp(centred = 1) samples the basis coefficients of data inputs; over latent inputs the weights "
                 "are the standard normal ones", approximation.span, "remove centred = 1")
        return
    _verify_one_vector_over_data(statement, "hsgp",
                                 "write one statement over all the points: f ~ gp(x, k, approx = hsgp(...))",
                                 "its basis functions are fixed by the range of the observed inputs, or over latent "
                                 "inputs by their prior: give one whole latent variable, gp(X, k, approx = hsgp(...)) "
                                 "with X ~ normal(mu, sigma)")
    inputs = statement.inputs
    _verify_dimension(inputs, approximation)
    for term in sum_terms(statement.kernel):
        if periodic_leaf(term) is not None:
            _verify_periodic_series(statement, periodic_leaf(term))
        else:
            _verify_spectral(term, inputs)
    _verify_constant_harmonic(statement, approximation)


def _verify_constant_harmonic(statement: ir.GPStatement, approximation: Approximation) -> None:
    if approximation.value("constant") == 0 and not any(periodic_leaf(term) for term in sum_terms(statement.kernel)):
        fail("hsgp(constant = 0) drops the constant harmonic of a periodic term's cosine series; this kernel has no "
             "periodic term", approximation.span,
             "remove constant = 0, or add the periodic term, e.g. periodic(lengthscale = ell, period = 7)")


def _verify_dimension(inputs: ir.Inputs, approximation: Approximation) -> None:
    if not isinstance(inputs.dim, int):
        fail(f"hsgp needs a fixed number of input columns; these have {inputs.dim}", inputs.span,
             "declare the columns as a number, e.g. matrix[N, 2] X")
    limit = approximation.value("max_columns")
    if inputs.dim > limit:
        fail(f"hsgp takes inputs of at most {limit} columns; these have {inputs.dim}", inputs.span,
             "its basis grows as the product of m over the input columns; use the exact GP or fewer inputs, or "
             f"allow them with hsgp(..., max_columns = {inputs.dim})")


def _verify_over_latent_inputs(statement: ir.GPStatement, approximation: Approximation) -> None:
    target = statement.target
    if target.indices or target.type.container not in ("vector", "matrix") or target.type.array_dims:
        fail(f"hsgp over latent inputs approximates a GP of a vector or of a matrix of independent columns; "
             f"'{target.name}' is {target.type.describe()}" + (" (indexed)" if target.indices else ""), target.span,
             "write one statement over all the points: F ~ gp(X, k, approx = hsgp(...))")
    if len(statement.inputs.index_shape) != 1:
        fail("hsgp needs inputs with one row per point (one index level)", statement.inputs.span)
    _verify_dimension(statement.inputs, approximation)
    for term in sum_terms(statement.kernel):
        if periodic_leaf(term) is not None:
            fail("hsgp over latent inputs takes no periodic term: its cosine series is in one observed variable",
                 term.span, "use a kernel with a spectral density (rbf, the Matérn kernels) or the exact GP")
        _verify_spectral(term, statement.inputs)


def verify_latent_hsgp_priors(statements: list[ir.Statement]) -> None:
    """Fail unless each HSGP over latent inputs ``X`` has the prior ``X ~ normal(mu, sigma)`` with constant ``mu``
    and ``sigma``: its box is ``mu +/- c * LATENT_PRIOR_SDS * sigma`` (:mod:`gpdsl.ir.latent_hsgp`).

    Parameters
    ----------
    statements : list of gpdsl.ir.nodes.Statement
        The model's checked statements.

    Raises
    ------
    ModelCheckError
        At the inputs of the first such GP whose latent inputs' prior gives no scale.
    """
    walked = list(_walk_statements(statements))
    priors = {s.target.name: s for s in walked if isinstance(s, ir.PriorStatement)}
    gps = {s.target.name for s in walked if isinstance(s, ir.GPStatement)}
    for statement in walked:
        if not is_latent_hsgp(statement):
            continue
        name = latent_inputs(statement)
        scale = "their prior is a GP, whose scale its kernel's parameters set" if name in gps and \
            name not in priors else prior_scale(priors.get(name))
        if isinstance(scale, str):
            fail(f"hsgp over the latent inputs '{name}' takes its box from their prior, which gives no scale: "
                 f"{scale}", statement.inputs.span,
                 f"give them the prior {name} ~ normal(mu, sigma) with constant mu and sigma (the box is mu +/- "
                 f"c * {LATENT_PRIOR_SDS:g} sigma), or use the exact GP")
        if scale[1] <= 0:
            fail(f"hsgp over the latent inputs '{name}' needs a positive prior scale; got sigma = {scale[1]:g}",
                 statement.inputs.span)


def _walk_statements(statements):
    for statement in statements:
        if isinstance(statement, ir.ForLoop):
            yield from _walk_statements(statement.body)
        else:
            yield statement


def _verify_periodic_series(statement: ir.GPStatement, leaf: ir.KernelLeaf) -> None:
    if statement.inputs.dim != 1:
        fail(f"hsgp of a periodic kernel takes inputs of one column (its cosine series is in one variable); these "
             f"have {statement.inputs.dim}", statement.inputs.span)
    if not reads_data_alone(leaf.param("period")):
        fail("hsgp of a periodic kernel takes a period of numbers and data, not of parameters: its basis "
             "cos(j 2 pi t / period), sin(j 2 pi t / period) is built before sampling", leaf.param("period").span,
             "give the period as a number or as data, e.g. periodic(lengthscale = ell, period = 365.25); "
             "the exact GP (without approx = hsgp(...)) samples a period")


def _role(role: str) -> str:
    return {"parameter": "a parameter", "latent": "a latent variable", "loop": "a loop variable"}.get(role, role)


def _verify_spectral(kernel: ir.Kernel, inputs: ir.Inputs) -> None:
    reason = "hsgp needs a stationary kernel with a spectral density (rbf, matern12, matern32, matern52, matern, " \
             "their sums and scalings) or periodic kernels as terms of the sum (their cosine series)"
    if isinstance(kernel, ir.KernelSum):
        _verify_spectral(kernel.left, inputs)
        _verify_spectral(kernel.right, inputs)
    elif isinstance(kernel, ir.KernelScale):
        _verify_spectral(kernel.kernel, inputs)
    elif isinstance(kernel, ir.KernelProduct):
        fail(f"{reason}; a product of kernels is not one of them", kernel.span,
             "a product over different input columns needs a basis per factor, which gpdsl's hsgp does not "
             "build; use one kernel over all the columns (ARD length-scales: rbf(lengthscale = ell) with "
             "vector ell)")
    elif isinstance(kernel, ir.KernelCombination):
        fail(f"{reason}; '{kernel.name}' is a combination of kernels", kernel.span)
    else:
        spec = catalog.KERNELS.get(kernel.name)
        if kernel.name == "periodic":
            fail(f"{reason}; this 'periodic' is inside a product or a scaled sum", kernel.span,
                 "make it a term of the kernel's sum, k + s * periodic(...), or a GP of its own")
        if spec is None or spec.spectral_call(dict(kernel.params)) is None:
            fail(f"{reason}; '{kernel.name}' has none", kernel.span)
        whole = kernel.component is None or (len(inputs.components) == 1 and kernel.columns is None)
        if not whole:
            fail(f"hsgp needs each kernel over all the GP's input columns; this '{kernel.name}' acts on some of "
                 "them", kernel.span, "an additive model over separate columns is one GP per column, each "
                 "with its own approx = hsgp(...)")


# ---- the state-space form ------------------------------------------------------------------------
def state_space_kernels() -> tuple[str, ...]:
    """The kernels of the language with a state-space form (:attr:`~gpdsl.kernel_table.KernelSpec.state_space`)."""
    return tuple(name for name, spec in catalog.KERNELS.items() if spec.state_space is not None)



def _verify_one_vector_over_data(statement: ir.GPStatement, name: str, one_statement: str, why_data: str) -> None:
    """Fail unless the GP is one statement over one vector of values at data inputs of one index level (what
    both approximations need); ``one_statement`` and ``why_data`` are the hints for the target and for latent
    inputs."""
    target = statement.target
    if target.indices or target.type.container != "vector" or target.type.array_dims:
        fail(f"{name} approximates a GP of one vector of values; '{target.name}' is {target.type.describe()}"
             + (" (indexed)" if target.indices else ""), target.span,
             one_statement)
    inputs = statement.inputs
    if len(inputs.index_shape) != 1:
        fail(f"{name} needs inputs with one row per point (one index level)", inputs.span)
    for expr in (e for component in inputs.components for e in sub_expressions(component)):
        if isinstance(expr, ir.Ref) and expr.role != "data":
            fail(f"{name} needs inputs that are data; '{expr.name}' is {_role(expr.role)}", expr.span, why_data)

def verify_state_space(statement: ir.GPStatement, approximation: Approximation) -> None:
    """Fail unless the state-space form can stand for this GP.

    It needs one vector of latent values over one column of data inputs (the times, sorted once for the Kalman
    filter), and a kernel that is a linear SDE of that input: a kernel whose table entry has a state-space form
    (the Matérn kernels of order 1/2, 3/2 and 5/2, periodic by its truncated series, constant), or sums, products
    and scalings of them. Independent series are two columns, a time and a group label, under ``k(t) * same(g)``
    with ``k`` such a kernel of the time alone: the state restarts at each group's first time
    (:func:`gpdsl.kernels.kalman.time_grid`).

    Raises
    ------
    ModelCheckError
        At the part of the statement that the approximation cannot take, with the reason.
    """
    _verify_one_vector_over_data(statement, "state_space",
                                 "write one statement over all the times: f ~ gp(t, k, approx = state_space)",
                                 "the Kalman filter runs along the times sorted once, before sampling; latent inputs "
                                 "need the exact GP")
    inputs = statement.inputs
    if inputs.dim == 1:
        _verify_markov(statement.kernel)
        return
    if inputs.dims != (1, 1):
        fail(f"state_space takes inputs of one column (a time), or a time and a group label (t, g); these have "
             f"{inputs.dim} columns", inputs.span,
             "a state-space form is a stochastic differential equation in one scalar input; independent series "
             "are gp((t, g), k(t) * same(g), approx = state_space); use the exact GP or approx = hsgp(...) for "
             "several input columns")
    parts = group_factor(statement.kernel)
    if parts is None:
        fail("state_space over a time and a group label needs the kernel k(t) * same(g), same(g) a factor of the "
             "whole kernel", statement.kernel.span,
             "independent series share one kernel over the time: gp((t, g), (k1(t) + k2(t)) * same(g), "
             "approx = state_space)")
    time_kernel, same = parts
    if same.component is None:
        fail("same(...) under state_space compares the group column alone; this one compares every input column",
             same.span, "write same(g) with g the group label: gp((t, g), k(t) * same(g), approx = state_space)")
    time = 1 - same.component
    for leaf in time_kernel.leaves():
        if leaf.component != time:
            fail(f"state_space runs along the time column; this '{leaf.name}' acts on "
                 + ("every input column" if leaf.component is None else "the group column"), leaf.span,
                 f"bind it to the time: {leaf.name}({inputs.names[time] or 't'}, ...)")
    _verify_markov(time_kernel)


def _verify_markov(kernel: ir.Kernel) -> None:
    if isinstance(kernel, ir.KernelPair):
        _verify_markov(kernel.left)
        _verify_markov(kernel.right)
    elif isinstance(kernel, ir.KernelScale):
        _verify_markov(kernel.kernel)
    else:
        spec = catalog.KERNELS.get(kernel.name)
        if isinstance(kernel, ir.KernelCombination) or spec is None or spec.state_space is None:
            fail(f"state_space needs a kernel with a state-space form; '{kernel.name}' has none", kernel.span,
                 "kernels with one: " + ", ".join(state_space_kernels()) + "; and their sums, products and "
                 "scalings" + ("; same(g) only as the outer factor of gp((t, g), k(t) * same(g))"
                               if kernel.name == "same" else ""))
