"""The checker: AST to typed IR, with name resolution, types, shapes and constraints.

``check_program`` returns the :class:`~gpdsl.ir.nodes.Model` and a list of warnings, or raises a
:class:`~gpdsl.errors.ModelCheckError` carrying a span.
"""

from __future__ import annotations

import math
from dataclasses import replace

from gpdsl.errors import CheckWarning, ModelCheckError
from gpdsl.ir import nodes as ir
from gpdsl.likelihoods import LIKELIHOODS
from gpdsl.semantics import catalog
from gpdsl.semantics.dependencies import distributions, verify_acyclic
from gpdsl.semantics.support import SUPPORTS, Interval, declared_interval
from gpdsl.semantics.types import Dim, VarType, is_label_array, number_text
from gpdsl.source import Span
from gpdsl.suggest import closest, did_you_mean, edit_distance
from gpdsl.syntax import ast

_BLOCK_ORDER = ("data", "parameters", "latent", "model")
LARGEST_SIZE = 2**31 - 1
"""The largest literal size (``vector[3]``) accepted: Stan's int."""

_FOLDABLE = {"sqrt": math.sqrt, "exp": math.exp, "log": math.log, "inv": lambda x: 1 / x,
             "inv_sqrt": lambda x: 1 / math.sqrt(x), "square": lambda x: x * x, "abs": abs}
"""Functions whose value at a constant the checker computes, to check constant arguments."""

_INTEGER_SUPPORTS = {"binary": "int<lower=0, upper=1>", "count": "int<lower=0>", "ordinal": "int<lower=1, upper=K>"}
"""Likelihood supports of integer data, with the declaration the hint suggests."""


def check_program(program: ast.Program) -> tuple[ir.Model, list[CheckWarning]]:
    """Check a parsed program and build its typed IR.

    Parameters
    ----------
    program : gpdsl.syntax.ast.Program
        The parsed model.

    Returns
    -------
    model : gpdsl.ir.nodes.Model
    warnings : list of CheckWarning

    Raises
    ------
    ModelCheckError
        The first problem found, with its span.
    """
    return _Checker(program).run()


def _fail(message: str, span: Span, hint: str | None = None):
    raise ModelCheckError(message, span, hint)


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


def _same_dim(a: Dim, b: Dim) -> bool:
    return a == b


def _shape_text(shape) -> str:
    return "[" + ", ".join(str(d) for d in shape) + "]" if shape else "scalar"


def _check_gp_arguments(call: ast.Call) -> None:
    """``gp(inputs, kernel)`` or ``gp(inputs, kernel, mean = EXPR)``."""
    if len(call.args) != 2 or len(call.kwargs) > 1 or (call.kwargs and call.kwargs[0].name != "mean"):
        span = call.kwargs[-1].span if call.kwargs and len(call.args) == 2 else call.span
        hint = did_you_mean(call.kwargs[-1].name, ["mean"]) if call.kwargs else None
        _fail("gp takes two arguments and an optional mean: gp(inputs, kernel) or gp(inputs, kernel, mean = m)", span,
              hint)


def _value_type(t: VarType) -> VarType:
    return VarType(t.base, t.container, t.dims, t.array_dims)


def _element_count(shape) -> int | None:
    n = 1
    for d in shape:
        if not isinstance(d, int):
            return None
        n *= d
    return n


class _Checker:
    def __init__(self, program: ast.Program):
        self.program = program
        self.source = program.source
        self.variables: dict[str, ir.Variable] = {}
        self.sizes: list[str] = []
        self.used: set[str] = set()
        self.loops: dict[str, tuple[ast.Expr, ast.Expr]] = {}
        self.warnings: list[CheckWarning] = []
        self.defined: dict[str, Span] = {}
        self.declarations: dict[str, ast.Declaration] = {}
        self.parameter_arguments: list[tuple[str, Interval, ir.Ref]] = []

    # ---- driver ------------------------------------------------------------------------------
    def run(self):
        blocks = self._blocks()
        for kind in _BLOCK_ORDER:
            for decl in blocks[kind].declarations:
                self.declarations.setdefault(decl.name, decl)
        for decl in blocks["data"].declarations:
            self._declare(decl, "data")
        statements: list[ir.Statement] = []
        for decl in blocks["parameters"].declarations:
            self._declare(decl, "parameter")
        for decl in blocks["latent"].declarations:
            self._declare(decl, "latent")
        self._verify_acyclic(blocks)
        for decl in blocks["parameters"].declarations + blocks["latent"].declarations:
            if decl.prior is not None:
                statements.append(self._declared_prior(decl))
        self._infer_latents(blocks["model"].statements)
        for statement in blocks["model"].statements:
            statements.append(self._statement(statement))
        self._final_checks()
        model = ir.Model(
            source=self.source,
            sizes=tuple(self.sizes),
            data={n: v for n, v in self.variables.items() if v.role == "data"},
            parameters={n: v for n, v in self.variables.items() if v.role == "parameter"},
            latents={n: v for n, v in self.variables.items() if v.role == "latent"},
            statements=tuple(statements),
        )
        return model, self.warnings

    def _verify_acyclic(self, blocks: dict[str, ast.Block]):
        tildes = [ast.Tilde(decl.span, ast.Target(decl.name_span, decl.name, ()), decl.prior)
                  for decl in blocks["latent"].declarations if decl.prior is not None]
        tildes += distributions(blocks["model"].statements)
        latent = {t.target.name for t in tildes
                  if t.target.name not in self.variables or self.variables[t.target.name].role == "latent"}
        verify_acyclic(tildes, latent)

    def _blocks(self) -> dict[str, ast.Block]:
        found: dict[str, ast.Block] = {}
        last = -1
        for block in self.program.blocks:
            if block.kind in found:
                _fail(f"the {block.kind} block appears twice", block.span,
                      f"merge it with the one at line {found[block.kind].span.line}")
            order = _BLOCK_ORDER.index(block.kind)
            if order < last:
                _fail(f"the {block.kind} block must come before the {_BLOCK_ORDER[last]} block", block.span,
                      "blocks go in the order: " + ", ".join(_BLOCK_ORDER))
            last = order
            found[block.kind] = block
        if "model" not in found:
            span = self.program.blocks[-1].span if self.program.blocks else Span.point(self.source, 1, 1)
            _fail("the program has no model block", span, "add 'model { ... }' with at least one likelihood")
        empty = Span.point(self.source, 1, 1)
        for kind in _BLOCK_ORDER:
            found.setdefault(kind, ast.Block(empty, kind))
        return found

    # ---- declarations ------------------------------------------------------------------------
    def _declare(self, decl: ast.Declaration, role: str):
        if decl.name in self.variables:
            previous = self.variables[decl.name]
            _fail(f"'{decl.name}' is already declared (line {previous.span.line})", decl.name_span)
        if decl.name in catalog.known_callables() or decl.name in catalog.CONSTANTS:
            _fail(f"'{decl.name}' is a built-in name and cannot be declared", decl.name_span)
        if role == "data" and decl.prior is not None:
            _fail(f"data '{decl.name}' cannot have a prior", decl.prior.span,
                  "priors go beside parameters; a distribution on data is a likelihood in the model block")
        spec = decl.type
        dims = tuple(self._dim(d) for d in spec.dims)
        array_dims = tuple(self._dim(d) for d in spec.array_dims)
        lower = self._bound(spec.lower, role) if spec.lower is not None else None
        upper = self._bound(spec.upper, role) if spec.upper is not None else None
        if isinstance(lower, float) and isinstance(upper, float) and not lower < upper:
            _fail(f"empty constraint: lower={lower:g} is not below upper={upper:g}", spec.span)
        if spec.base == "int" and role != "data":
            _fail(f"{role} '{decl.name}' cannot be an int", spec.span,
                  "only data may be integer; use real, vector or matrix")
        base = "int" if spec.base == "int" else "real"
        container = {"int": "scalar", "real": "scalar"}.get(spec.base, spec.base)
        vartype = VarType(base, container, dims, array_dims, lower, upper)
        self.variables[decl.name] = ir.Variable(decl.name, role, vartype, decl.name_span)

    def _dim(self, expr: ast.Expr) -> Dim:
        if isinstance(expr, ast.Number):
            if not expr.is_int or expr.value < 0:
                _fail("a size must be a non-negative integer", expr.span)
            if expr.value > LARGEST_SIZE:
                _fail(f"a size must be an integer from 0 to {LARGEST_SIZE}", expr.span)
            return int(expr.value)
        if isinstance(expr, ast.Name):
            var = self.variables.get(expr.name)
            if var is None and expr.name in self.declarations:
                self._used_before_declaration(f"size '{expr.name}'", expr.span, self.declarations[expr.name])
            if var is None:
                _fail(f"size '{expr.name}' is not declared", expr.span,
                      did_you_mean(expr.name, self.variables) or f"declare 'int {expr.name};' in the data block")
            if var.role != "data":
                _fail(f"size '{expr.name}' is a {var.role}; a size must be an int declared in the data block",
                      expr.span)
            if var.type != VarType("int", lower=var.type.lower, upper=var.type.upper):
                _fail(f"size '{expr.name}' is {var.type.describe()}; a size must be a single int", expr.span)
            self.used.add(expr.name)
            if expr.name not in self.sizes:
                self.sizes.append(expr.name)
            return expr.name
        if isinstance(expr, ast.Negate):
            _fail("a size must be a non-negative integer", expr.span)
        _fail("a size must be an integer or the name of an int in the data block", expr.span)

    def _used_before_declaration(self, what: str, span: Span, decl: ast.Declaration):
        where = (f"line {decl.name_span.line}" if decl.name_span.line != span.line
                 else f"line {span.line}, column {decl.name_span.column}")
        is_size = decl.type.base == "int" and not decl.type.dims and not decl.type.array_dims
        _fail(f"{what} is used at line {span.line} before its declaration at {where}", span,
              f"move 'int {decl.name};' above its first use" if is_size
              else "a size must be an int declared in the data block, above its first use")

    def _bound(self, expr: ast.Expr, role: str) -> float | str:
        if isinstance(expr, ast.Name) and expr.name not in catalog.CONSTANTS:
            if role != "data":
                _fail(f"a bound of a {role} must be a constant number", expr.span,
                      "only data bounds may name a size, e.g. array[N] int<lower=1, upper=G> group")
            return self._dim(expr)
        return self._constant(expr)

    def _constant(self, expr: ast.Expr) -> float:
        value = self._fold(expr)
        if value is None:
            _fail("a bound must be a constant number or a size", expr.span,
                  "write e.g. <lower=0>, <lower=0, upper=1> or (on data) <lower=1, upper=G> with 'int G;'")
        return value

    def _fold(self, expr: ast.Expr) -> float | None:
        """The value of a constant expression, None if it is not constant; errors for non-finite values."""
        if isinstance(expr, ast.Number):
            value = expr.value
        elif isinstance(expr, ast.Negate):
            inner = self._fold(expr.operand)
            return None if inner is None else -inner
        elif isinstance(expr, ast.Name) and expr.name in catalog.CONSTANTS:
            value = catalog.CONSTANTS[expr.name]
        elif isinstance(expr, ast.BinaryOp):
            a, b = self._fold(expr.left), self._fold(expr.right)
            if a is None or b is None:
                return None
            try:
                value = {"+": lambda: a + b, "-": lambda: a - b, "*": lambda: a * b, "/": lambda: a / b,
                         "^": lambda: a ** b}[expr.op]()
            except ZeroDivisionError:
                _fail("division by zero in a constant", expr.span)
            except OverflowError:
                value = math.inf
        elif isinstance(expr, ast.Call) and expr.function in ("sqrt", "exp", "log") and len(expr.args) == 1:
            inner = self._fold(expr.args[0])
            if inner is None:
                return None
            try:
                value = getattr(math, expr.function)(inner)
            except ValueError:
                _fail(f"{expr.function}({inner:g}) is undefined", expr.span)
            except OverflowError:
                value = math.inf
        else:
            return None
        if isinstance(value, complex) or not math.isfinite(value):
            _fail("a constant must be a finite real number", expr.span)
        return float(value)

    # ---- latent shape inference --------------------------------------------------------------
    def _infer_latents(self, statements):
        """Give undeclared GP targets a type: vector over the inputs' points, or the data's matrix shape."""
        likelihood_shapes: dict[str, VarType] = {}
        gp_targets: list[ast.Tilde] = []
        loop_variables: set[str] = set()

        def visit(items):
            for s in items:
                if isinstance(s, ast.For):
                    loop_variables.add(s.variable)
                    visit(s.body)
                elif isinstance(s, ast.Tilde):
                    if s.distribution.function == "gp":
                        gp_targets.append(s)
                    var = self.variables.get(s.target.name)
                    first = s.distribution.args[0] if s.distribution.args else None
                    if (var is not None and var.role == "data" and not s.target.indices
                            and isinstance(first, ast.Name)):
                        likelihood_shapes.setdefault(first.name, var.type)

        visit(statements)
        for s in gp_targets:
            name = s.target.name
            if name in self.variables:
                continue
            if s.target.indices:
                _fail(f"cannot infer the shape of latent '{name}' from an indexed statement", s.target.span,
                      f"declare it in a latent block, e.g. 'latent {{ array[Q] matrix[N, D] {name}; }}'")
            _check_gp_arguments(s.distribution)
            if any(ref.name in loop_variables for ref in ast.references(s.distribution.args[0])):
                _fail(f"cannot infer the shape of latent '{name}' inside a loop", s.target.span,
                      f"declare it in a latent block, e.g. 'latent {{ array[T] vector[N] {name}; }}'")
            inputs = self._inputs(s.distribution.args[0])
            observed = likelihood_shapes.get(name)
            index_shape = inputs.index_shape
            if (observed is not None and observed.container == "matrix" and not observed.array_dims
                    and len(index_shape) == 1 and _same_dim(observed.dims[0], index_shape[0])):
                vartype = VarType("real", "matrix", observed.dims)
            elif len(index_shape) == 1:
                vartype = VarType("real", "vector", index_shape)
            else:
                vartype = VarType("real", "vector", index_shape[-1:], index_shape[:-1])
            self.variables[name] = ir.Variable(name, "latent", vartype, s.target.span, declared=False)

    # ---- statements --------------------------------------------------------------------------
    def _declared_prior(self, decl: ast.Declaration) -> ir.Statement:
        var = self.variables[decl.name]
        target = ir.Target(decl.name, var.role, (), _value_type(var.type), decl.name_span)
        self.defined[decl.name] = decl.prior.span
        return self._prior(target, decl.prior)

    def _statement(self, statement: ast.Statement) -> ir.Statement:
        if isinstance(statement, ast.For):
            return self._for(statement)
        return self._tilde(statement)

    def _for(self, loop: ast.For) -> ir.ForLoop:
        if loop.variable in self.variables or loop.variable in self.loops:
            _fail(f"loop variable '{loop.variable}' hides another variable", loop.span)
        start, stop = self._expr(loop.start), self._expr(loop.stop)
        for bound in (start, stop):
            if bound.type != ir.INT:
                _fail("loop bounds must be integers", bound.span)
        self.loops[loop.variable] = (loop.start, loop.stop)
        body = tuple(self._statement(s) for s in loop.body)
        del self.loops[loop.variable]
        return ir.ForLoop(loop.span, loop.variable, start, stop, body)

    def _target(self, target: ast.Target) -> ir.Target:
        var = self.variables.get(target.name)
        if var is None:
            if target.name in self.loops:
                _fail(f"loop variable '{target.name}' cannot be the target of '~'", target.span)
            _fail(f"'{target.name}' is not declared", target.span,
                  did_you_mean(target.name, self.variables) or
                  "declare data in the data block, parameters in the parameters block, latent values "
                  "in a latent block (GP values may also be introduced by 'f ~ gp(...)')")
        self.used.add(target.name)
        base = ir.Ref(_value_type(var.type), target.span, target.name, var.role)
        for i in target.indices:
            if isinstance(i, ast.Slice):
                _fail("the target of '~' cannot be sliced", i.span,
                      "loop over the elements: for (i in a:b) x[i] ~ ...;")
        indices = tuple(self._expr(i) for i in target.indices)
        for i in indices:
            if isinstance(i, ir.Slice) or i.type != ir.INT:
                _fail("the target of '~' may only be indexed by integers", i.span if not isinstance(i, ir.Slice)
                      else target.span)
        vartype = self._index_type(base.type, indices, target.span) if indices else base.type
        return ir.Target(target.name, var.role, indices, vartype, target.span)

    def _tilde(self, statement: ast.Tilde) -> ir.Statement:
        call = statement.distribution
        target = self._target(statement.target)
        if call.function == "gp":
            if target.role != "latent":
                what = "data" if target.role == "data" else "a parameter"
                _fail(f"'{target.name}' is {what}; only latent values can have a gp prior", statement.target.span,
                      "GP values are latent: write 'f ~ gp(X, k);' and put the data on top, "
                      f"e.g. '{target.name} ~ normal(f, sigma);'")
            self._define(target, statement)
            return self._gp(statement, target)
        if call.function == catalog.EXTERNAL:
            if target.role != "data":
                _fail("external(...) is a likelihood: its target must be data", statement.target.span)
            return self._external(statement, target)
        if target.role == "data":
            return self._likelihood(statement, target)
        self._define(target, statement)
        return self._prior(target, call)

    def _define(self, target: ir.Target, statement: ast.Tilde):
        key = target.name
        if target.indices:
            key += "[" + ",".join(_describe_index(i) for i in target.indices) + "]"
        whole = self.defined.get(target.name)
        if key in self.defined or (whole is not None and key != target.name):
            previous = self.defined.get(key) or whole
            what = "prior" if target.role == "parameter" else "distribution"
            _fail(f"'{target.name}' already has a {what} (line {previous.line})", statement.target.span,
                  "give each parameter or latent variable exactly one prior")
        self.defined[key] = statement.span

    def _gp(self, statement: ast.Tilde, target: ir.Target) -> ir.GPStatement:
        call = statement.distribution
        _check_gp_arguments(call)
        inputs = self._inputs(call.args[0])
        self._verify_kernel_names(call.args[1])
        kernel = self._kernel(call.args[1], inputs)
        points = inputs.index_shape
        t = target.type
        if t.container == "matrix" and not t.array_dims:
            rows, ok = t.dims[:1], len(points) == 1 and _same_dim(t.dims[0], points[0])
        else:
            rows = t.shape
            ok = len(rows) == len(points) and all(_same_dim(a, b) for a, b in zip(rows, points))
        if not ok or t.base != "real" or t.container == "scalar":
            _fail(f"'{target.name}' has shape {_shape_text(t.shape)} but its gp inputs have "
                  f"{_shape_text(points)} points", statement.target.span,
                  "a GP over N points gives vector[N] (or matrix[N, C] for C independent columns)")
        mean = self._gp_mean(call, target) if call.kwargs else None
        return ir.GPStatement(statement.span, target, inputs, kernel, mean)

    def _gp_mean(self, call: ast.Call, target: ir.Target) -> ir.Expr:
        """The ``mean = EXPR`` of ``gp(inputs, kernel, mean = EXPR)``: a real scalar, or of the GP's shape (a vector
        over its points, or a matrix of its columns, e.g. ``mean = X`` for a hidden layer of a deep GP)."""
        argument = call.kwargs[0]
        mean = self._expr(argument.value)
        t = target.type
        value_shape = t.dims if t.array_dims and target.indices else t.shape
        if mean.type.array_dims or (mean.type.shape and (
                len(mean.type.shape) != len(value_shape)
                or not all(_same_dim(a, b) for a, b in zip(mean.type.shape, value_shape)))):
            _fail(f"the mean of '{target.name}' is {mean.type.describe()}; it must be a real number or of the GP's "
                  f"shape ({_shape_text(value_shape)})", argument.value.span)
        return mean

    def _likelihood(self, statement: ast.Tilde, target: ir.Target) -> ir.Statement:
        call = statement.distribution
        spec = catalog.DISTRIBUTIONS.get(call.function)
        if spec is None:
            self._unknown_callable(call, "distribution")
        if not spec.likelihood:
            likelihoods = [d.name for d in catalog.DISTRIBUTIONS.values() if d.likelihood]
            hint = "likelihoods are: " + ", ".join(likelihoods + [catalog.EXTERNAL])
            if call.function == "gamma":
                hint = "for positive data write gamma_log(eta, shape), Stan's gamma(shape, shape / exp(eta)); " + hint
            _fail(f"'{call.function}' is not a likelihood", call.name_span, hint)
        t = target.type
        integer = spec.support in _INTEGER_SUPPORTS
        if not integer and t.base == "int":
            _fail(f"{spec.name} is a likelihood for real data but '{target.name}' is integer",
                  statement.target.span)
        distribution = self._distribution(call, spec, target)
        if integer:
            if t.base != "int":
                _fail(f"{spec.name} needs integer data but '{target.name}' is {t.describe()}", statement.target.span,
                      f"declare it e.g. 'array[N] {_INTEGER_SUPPORTS[spec.support]} {target.name};'")
        elif t.base == "int":
            _fail(f"{spec.name} is a likelihood for real data but '{target.name}' is integer",
                  statement.target.span)
        return ir.LikelihoodStatement(statement.span, target, distribution)

    def _external(self, statement: ast.Tilde, target: ir.Target) -> ir.ExternalLikelihood:
        call = statement.distribution
        if not call.args or not isinstance(call.args[0], ast.String):
            _fail('external needs the function as a string first: external("module:function", ...)', call.span)
        function = call.args[0].value
        module, _, name = function.partition(":")
        entry_point = not name and function.isidentifier()
        if not entry_point and not (module and name and all(p.isidentifier() for p in module.split(".") + [name])):
            _fail(f"'{function}' is not of the form 'package.module:function' (or an entry point's name)",
                  call.args[0].span,
                  "separate the module and the function with ':', e.g. \"mypkg.pricing:call_prices\"")
        if call.kwargs:
            _fail("external takes positional arguments only", call.kwargs[0].span)
        args = tuple(self._expr(a) for a in call.args[1:])
        return ir.ExternalLikelihood(statement.span, target, function, args)

    def _prior(self, target: ir.Target, call: ast.Call) -> ir.PriorStatement:
        spec = catalog.DISTRIBUTIONS.get(call.function)
        if spec is None:
            if call.function in catalog.KERNELS:
                _fail(f"'{call.function}' is a kernel, not a distribution", call.name_span,
                      f"write '{target.name} ~ gp(inputs, {call.function}(...))'")
            self._unknown_callable(call, "distribution")
        if not spec.prior:
            priors = [d.name for d in catalog.DISTRIBUTIONS.values() if d.prior]
            _fail(f"'{spec.name}' is a likelihood for data; '{target.name}' is a {target.role}", call.name_span,
                  "priors are: " + ", ".join(priors))
        distribution = self._distribution(call, spec, target)
        if target.role == "parameter" and not target.indices:
            self._fit_bounds(target, spec, distribution, call)
        return ir.PriorStatement(call.span, target, distribution)

    def _fit_bounds(self, target: ir.Target, spec: catalog.DistributionSpec, distribution: ir.Distribution,
                    call: ast.Call):
        """Check the declared constraint against the prior's support; imply bounds for bounded priors.

        A constraint disjoint from the support, or reaching outside it, is an error; one inside a wider
        support truncates the prior, a warning.
        """
        var = self.variables[target.name]
        lower, upper = var.type.lower, var.type.upper
        declared = declared_interval(lower, upper)
        if spec.support == "bounded":
            lo = self._constant_vector(distribution.arg("lower"))
            hi = self._constant_vector(distribution.arg("upper"))
            if lo is None or hi is None:
                _fail(f"the bounds of {spec.name} must be constants", call.span)
            lo_v, hi_v = (lo[0] if len(set(lo)) == 1 else None), (hi[0] if len(set(hi)) == 1 else None)
            if lower is not None or upper is not None:
                if (lower, upper) != (lo_v, hi_v):
                    support = (f"({lo[0]:g}, {hi[0]:g})" if len(lo) == len(hi) == 1 else
                               f"lower [{', '.join(number_text(round(v, 12)) for v in lo)}], "
                               f"upper [{', '.join(number_text(round(v, 12)) for v in hi)}]")
                    if not declared.overlaps(Interval(min(lo), max(hi))):
                        self._disjoint(target.name, var.type, spec.name, support, call)
                    _fail(f"'{target.name}' is declared {var.type.describe()} but {spec.name} has support "
                          f"{support}", var.span, "drop the declared bounds: they are implied by the prior")
            self.variables[target.name] = replace(var, type=replace(var.type, lower=lo_v, upper=hi_v))
            return
        support = SUPPORTS[spec.support]
        if not declared.overlaps(support):
            self._disjoint(target.name, var.type, spec.name, support.describe(), call)
        if not declared.within(support):
            fitted = replace(var.type, lower=max(lower, support.lower) if lower is not None else _finite(support.lower),
                             upper=min(upper, support.upper) if upper is not None else _finite(support.upper))
            bounds = ", ".join(f"{end}={number_text(value)}" for end, value in
                               (("lower", fitted.lower), ("upper", fitted.upper))
                               if value is not None and value != getattr(var.type, end))
            _fail(f"{spec.name} has support {support.describe()} but '{target.name}' is declared "
                  f"{var.type.describe()}", call.name_span,
                  f"declare it with <{bounds}>, e.g. '{fitted.describe()} {target.name}'")
        if declared.lower > support.lower or declared.upper < support.upper:
            message = (f"{spec.name} has support {support.describe()} but '{target.name}' is declared "
                       f"{var.type.describe()}: the prior is truncated to {declared.describe()}")
            if any(self._constant_vector(value) is None for _, value in distribution.args):
                message += (f", and the truncation's normalising constant, which depends on the arguments of "
                            f"{spec.name}, is not included")
            self.warnings.append(CheckWarning(message, call.name_span))

    def _disjoint(self, name: str, vartype: VarType, distribution: str, support: str, call: ast.Call):
        _fail(f"'{name}' is declared {vartype.describe()} but {distribution} has support {support}: "
              "they do not overlap", call.name_span,
              "the prior gives no mass to the values the constraint allows: change the constraint or the prior")

    def _constant_vector(self, expr: ir.Expr) -> list[float] | None:
        if isinstance(expr, ir.Binary) and not expr.type.shape:
            a, b = self._constant_vector(expr.left), self._constant_vector(expr.right)
            if a is None or b is None:
                return None
            try:
                value = {"+": a[0] + b[0], "-": a[0] - b[0], "*": a[0] * b[0]}.get(expr.op) \
                    if expr.op in "+-*" else (a[0] / b[0] if expr.op == "/" else a[0] ** b[0])
            except (ZeroDivisionError, OverflowError):
                return None
            return None if isinstance(value, complex) or not math.isfinite(value) else [float(value)]
        if isinstance(expr, ir.Constant):
            return [expr.value]
        if isinstance(expr, ir.VectorLiteral) and all(isinstance(i, ir.Constant) for i in expr.items):
            return [i.value for i in expr.items]
        if isinstance(expr, ir.Negate):
            inner = self._constant_vector(expr.operand)
            return None if inner is None else [-v for v in inner]
        if isinstance(expr, ir.Apply) and expr.function in _FOLDABLE:
            inner = self._constant_vector(expr.args[0])
            try:
                values = None if inner is None else [float(_FOLDABLE[expr.function](v)) for v in inner]
            except (ValueError, ZeroDivisionError, OverflowError):
                return None
            return values if values is not None and all(math.isfinite(v) for v in values) else None
        return None

    def _distribution(self, call: ast.Call, spec: catalog.DistributionSpec, target: ir.Target) -> ir.Distribution:
        values: dict[str, ir.Expr] = {}
        if len(call.args) > len(spec.params):
            _fail(f"{spec.name} takes at most {len(spec.params)} arguments ({', '.join(spec.params)}), "
                  f"got {len(call.args)}", call.span)
        for name, arg in zip(spec.params, call.args):
            values[name] = self._expr(arg)
        for kw in call.kwargs:
            if kw.name not in spec.params:
                _fail(f"{spec.name} has no argument '{kw.name}'", kw.name_span,
                      did_you_mean(kw.name, spec.params) or f"its arguments are {', '.join(spec.params)}")
            if kw.name in values:
                _fail(f"argument '{kw.name}' of {spec.name} given twice", kw.name_span)
            values[kw.name] = self._expr(kw.value)
        for name in spec.params:
            if name not in values:
                if name in spec.defaults:
                    values[name] = ir.Constant(ir.REAL, call.span, float(spec.defaults[name]))
                else:
                    _fail(f"{spec.name} needs the argument '{name}' ({', '.join(spec.params)})", call.span)
        shape = target.type.shape
        likelihood = LIKELIHOODS.get(spec.name) if spec.likelihood else None
        own_shape = likelihood.own_shape if likelihood is not None else ()
        integers = likelihood.integer_params if likelihood is not None else ()
        for name, value in values.items():
            if isinstance(value, ir.StringConstant):
                _fail(f"argument '{name}' of {spec.name} cannot be a string", value.span)
            vshape = value.type.shape
            if name in integers and value.type.base != "int":
                _fail(f"argument '{name}' of {spec.name} must be integer data, got {value.type.describe()}",
                      value.span, f"declare it e.g. 'array[N] int<lower=0> {name};' in the data block")
            if name in own_shape:
                if len(vshape) != 1 or value.type.container != "vector":
                    _fail(f"argument '{name}' of {spec.name} must be a vector, got {value.type.describe()}",
                          value.span, "write the increasing cutpoints as data 'vector[K1] c' or as a literal "
                                      "such as '[c1, c1 + d2, c1 + d2 + d3]' with d2, d3 declared <lower=0>")
                constants = self._constant_vector(value)
                if constants is not None and any(b <= a for a, b in zip(constants, constants[1:])):
                    _fail(f"argument '{name}' of {spec.name} must increase, got "
                          f"[{', '.join(number_text(v) for v in constants)}]", value.span)
                if isinstance(value, ir.Ref) and value.role == "parameter":
                    self.warnings.append(CheckWarning(
                        f"argument '{name}' of {spec.name} is the vector parameter '{value.name}', which nothing "
                        f"keeps increasing; where it is not, the likelihood is zero (Stan rejects the draw): write "
                        f"it as a literal such as '[c1, c1 + d2, c1 + d2 + d3]' with d2, d3 declared <lower=0>",
                        value.span))
                continue
            if vshape and not self._shapes_agree(vshape, shape):
                _fail(f"argument '{name}' of {spec.name} has shape {_shape_text(vshape)} but "
                      f"'{target.name}' has shape {_shape_text(shape)}", value.span,
                      "arguments are scalars (applied to every element) or match the variate's shape")
        self._verify_arguments(spec, values, call)
        return ir.Distribution(spec.name, tuple((n, values[n]) for n in spec.params), call.span)

    def _verify_arguments(self, spec: catalog.DistributionSpec, values: dict[str, ir.Expr], call: ast.Call):
        """Fail at a constant argument outside its support, or constant bounds that are not increasing."""
        for name, value in values.items():
            support = SUPPORTS[spec.argument_support(name)]
            for x, span in self._constant_items(value):
                if not support.contains(x):
                    _fail(f"argument '{name}' of {spec.name} must be in {support.describe()}, got {x:g}", span)
            self._note_parameter_argument(f"argument '{name}' of {spec.name}", support, value)
        if spec.ordered is not None:
            first, second = spec.ordered
            lower, upper = self._constant_vector(values[first]), self._constant_vector(values[second])
            if lower is not None and upper is not None:
                n = max(len(lower), len(upper))
                pairs = zip(lower * n if len(lower) == 1 else lower, upper * n if len(upper) == 1 else upper)
                for k, (a, b) in enumerate(pairs):
                    if not a < b:
                        element = f" in element {k + 1}" if n > 1 else ""
                        _fail(f"{spec.name} needs {first} < {second}, got {first} = {a:g} and {second} = {b:g}"
                              f"{element}", call.span)

    def _note_parameter_argument(self, what: str, support: Interval, value: ir.Expr):
        """Remember a parameter passed where ``support`` is required; :meth:`_final_checks` compares."""
        base = value.base if isinstance(value, ir.Index) else value
        if isinstance(base, ir.Ref) and base.role == "parameter" and support != SUPPORTS["real"]:
            what += " is an element of" if isinstance(value, ir.Index) else " is"
            self.parameter_arguments.append((what, support, base))

    def _constant_items(self, expr: ir.Expr) -> list[tuple[float, Span]]:
        """The constant values in an argument, each with its span: a vector literal's items one by one."""
        if isinstance(expr, ir.VectorLiteral):
            return [item for i in expr.items for item in self._constant_items(i)]
        values = self._constant_vector(expr)
        return [(v, expr.span) for v in values or ()]

    def _shapes_agree(self, a, b) -> bool:
        if len(a) == len(b) and all(_same_dim(x, y) for x, y in zip(a, b)):
            return True
        return _element_count(a) is not None and _element_count(a) == _element_count(b) and len(a) == len(b)

    # ---- GP inputs and kernels ---------------------------------------------------------------
    def _inputs(self, expr: ast.Expr) -> ir.Inputs:
        items = expr.items if isinstance(expr, ast.Tuple) else (expr,)
        components, names, dims, index_shapes = [], [], [], []
        for item in items:
            if isinstance(item, ast.Call) and item.function == "project":
                value = self._project(item)
            else:
                value = self._expr(item)
            if isinstance(value, ir.StringConstant):
                _fail("GP inputs must be a vector or a matrix, got a string", item.span)
            t = value.type
            if t.base != "real" and t.base != "int":
                _fail("GP inputs must be numeric", item.span)
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
                _fail("GP inputs must be a vector (one input per point), a matrix (one row per point) or a "
                      "one-dimensional int array (a label per point)", item.span, f"got {t.describe()}")
            components.append(value)
            names.append(item.name if isinstance(item, ast.Name) else None)
        longest = max(index_shapes, key=len)
        for item, shape in zip(items, index_shapes):
            if tuple(longest[: len(shape)]) != tuple(shape):
                _fail(f"GP input components disagree on the points: {_shape_text(shape)} vs "
                      f"{_shape_text(longest)}", item.span,
                      "a component may be broadcast over a trailing index (e.g. time t over the N points "
                      "of each X[t]) but must otherwise index the same points")
        return ir.Inputs(tuple(components), tuple(names), tuple(dims), tuple(longest), expr.span)

    def _project(self, call: ast.Call) -> ir.Project:
        if len(call.args) != 2 or call.kwargs:
            _fail("project takes two arguments: project(W, X)", call.span)
        weights, inputs = self._expr(call.args[0]), self._expr(call.args[1])
        w, x = weights.type, inputs.type
        if not (w.container == "matrix" and len(w.array_dims) == 1 and x.container == "matrix"
                and not x.array_dims and w.dims == x.dims):
            _fail(f"project(W, X) needs W: array[Q] matrix[N, D] and X: matrix[N, D]; got "
                  f"{w.describe()} and {x.describe()}", call.span)
        return ir.Project(VarType("real", "matrix", (x.dims[0], w.array_dims[0])), call.span, weights, inputs)

    def _kernel(self, expr: ast.Expr, inputs: ir.Inputs) -> ir.Kernel:
        if isinstance(expr, ast.BinaryOp) and expr.op in "+*":
            left_is_kernel, right_is_kernel = self._is_kernel(expr.left), self._is_kernel(expr.right)
            if expr.op == "+":
                if not (left_is_kernel and right_is_kernel):
                    bad = expr.right if left_is_kernel else expr.left
                    _fail("a kernel can only be added to another kernel", bad.span,
                          "to add a constant covariance write constant(c)")
                return ir.KernelSum(expr.span, self._kernel(expr.left, inputs), self._kernel(expr.right, inputs))
            if left_is_kernel and right_is_kernel:
                return ir.KernelProduct(expr.span, self._kernel(expr.left, inputs),
                                        self._kernel(expr.right, inputs))
            if left_is_kernel or right_is_kernel:
                scale_ast, kernel_ast = (expr.right, expr.left) if left_is_kernel else (expr.left, expr.right)
                scale = self._expr(scale_ast)
                if scale.type.shape:
                    _fail("a kernel can only be scaled by a scalar", scale_ast.span)
                return ir.KernelScale(expr.span, scale, self._kernel(kernel_ast, inputs))
        if isinstance(expr, ast.Call):
            if expr.function in catalog.KERNELS:
                return self._kernel_leaf(expr, inputs)
            if expr.function in catalog.DISTRIBUTIONS:
                _fail(f"'{expr.function}' is a distribution, not a kernel", expr.name_span,
                      "kernels are: " + ", ".join(catalog.KERNELS))
            if expr.function not in catalog.FUNCTIONS:
                self._unknown_callable(expr, "kernel")
        _fail("expected a kernel expression (kernels combined with +, * and scaled by scalars)", expr.span,
              "kernels are: " + ", ".join(catalog.KERNELS))

    def _verify_kernel_names(self, expr: ast.Expr):
        """Fail at a misspelt kernel among the terms and factors of a kernel expression."""
        if isinstance(expr, ast.BinaryOp) and expr.op in "+*":
            self._verify_kernel_names(expr.left)
            self._verify_kernel_names(expr.right)
        elif isinstance(expr, ast.Call) and expr.function not in catalog.known_callables():
            self._unknown_callable(expr, "kernel")
        elif isinstance(expr, ast.Name) and expr.name in catalog.KERNELS:
            _fail(f"'{expr.name}' must be called: {expr.name}(...)", expr.span)
        elif (isinstance(expr, ast.Name) and expr.name not in self.variables and expr.name not in self.loops
              and expr.name not in catalog.CONSTANTS):
            kernel = closest(expr.name, catalog.KERNELS, fallback=False)
            variable = closest(expr.name, self.variables, fallback=False)
            if kernel is not None and (variable is None or
                                       edit_distance(expr.name, kernel) <= edit_distance(expr.name, variable)):
                _fail(f"unknown kernel '{expr.name}'", expr.span, f"did you mean '{kernel}(...)'?")

    def _is_kernel(self, expr: ast.Expr) -> bool:
        if isinstance(expr, ast.Call):
            return expr.function in catalog.KERNELS
        if isinstance(expr, ast.BinaryOp) and expr.op in "+*":
            return self._is_kernel(expr.left) or self._is_kernel(expr.right)
        return False

    def _kernel_leaf(self, call: ast.Call, inputs: ir.Inputs) -> ir.KernelLeaf:
        spec = catalog.KERNELS[call.function]
        args = list(call.args)
        component, columns = None, None
        if args and self._names_input_part(args[0]):
            component, columns = self._input_part(args[0], inputs)
            args = args[1:]
        input_dim = inputs.dims[component] if component is not None else inputs.dim
        if columns is not None:
            input_dim = columns[1] - columns[0]
        values: dict[str, ir.Expr] = {}
        if len(args) > len(spec.params):
            _fail(f"{spec.name} takes at most {len(spec.params)} positional hyperparameters", call.span)
        for param, arg in zip(spec.params, args):
            values[param.name] = self._expr(arg)
        for kw in call.kwargs:
            param = spec.param(kw.name)
            if param is None:
                _fail(f"kernel {spec.name} has no parameter '{kw.name}'", kw.name_span,
                      did_you_mean(kw.name, [p.name for p in spec.params])
                      or "its parameters are " + ", ".join(p.name for p in spec.params))
            if kw.name in values:
                _fail(f"parameter '{kw.name}' of {spec.name} given twice", kw.name_span)
            values[kw.name] = self._expr(kw.value)
        for group in spec.exclusive:
            given = [g for g in group if g in values]
            if len(given) > 1:
                _fail(f"{spec.name} takes one of {' or '.join(group)}, not both", call.span)
        for param in spec.params:
            excluded = any(param.name in g and any(o in values for o in g if o != param.name)
                           for g in spec.exclusive)
            if param.name not in values and not excluded:
                if param.default is None and not any(param.name in g for g in spec.exclusive):
                    _fail(f"kernel {spec.name} needs '{param.name}'", call.span,
                          f"e.g. {spec.name}(1e-6)" if spec.name == "white" else f"e.g. {spec.name}({param.name} = 1)")
                if param.default is not None:
                    values[param.name] = ir.Constant(ir.REAL, call.span, float(param.default))
        for name, value in values.items():
            param = spec.param(name)
            shape = value.type.shape
            if value.type.container == "matrix" or value.type.array_dims or isinstance(value, ir.StringConstant):
                _fail(f"{spec.name} parameter '{name}' must be a scalar or a vector", value.span)
            if shape:
                if not param.ard_allowed:
                    _fail(f"{spec.name} parameter '{name}' must be a scalar", value.span)
                if not self._dims_agree(shape[0], input_dim):
                    _fail(f"{spec.name} parameter '{name}' has length {shape[0]} but the kernel acts on "
                          f"{input_dim} input dimension(s)", value.span,
                          "an ARD vector has one entry per input column")
            support = SUPPORTS["positive" if param.positive else "real"]
            for x, span in self._constant_items(value):
                if not support.contains(x):
                    _fail(f"{spec.name} parameter '{name}' must be in {support.describe()}, got {x:g}", span)
            self._note_parameter_argument(f"{spec.name} parameter '{name}'", support, value)
        ordered = tuple((p.name, values[p.name]) for p in spec.params if p.name in values)
        return ir.KernelLeaf(call.span, spec.name, ordered, component, input_dim, columns)

    def _names_input_part(self, arg: ast.Expr) -> bool:
        """Whether a kernel's first argument names inputs (``t``, ``X[:, 1]``) rather than a hyperparameter."""
        base = arg.base if isinstance(arg, ast.Index) else arg
        var = self.variables.get(base.name) if isinstance(base, ast.Name) else None
        return var is not None and var.role in ("data", "latent") and bool(var.type.shape)

    def _input_part(self, arg: ast.Expr, inputs: ir.Inputs) -> tuple[int, tuple[int, int] | None]:
        """The input component a kernel is bound to, and the column range it selects (None for all)."""
        name = arg.base.name if isinstance(arg, ast.Index) else arg.name
        if name not in inputs.names:
            _fail(f"'{name}' is not one of this GP's inputs", arg.span,
                  "bind a kernel to an input by naming one of the inputs of gp((t, X), ...), or to columns "
                  "of a matrix input with X[:, j] or X[:, a:b]")
        component = inputs.names.index(name)
        if isinstance(arg, ast.Name):
            return component, None
        value = self._expr(arg)
        t = inputs.components[component].type
        rows, cols = (value.indices + (None, None))[:2]
        whole_rows = isinstance(arg.indices[0], ast.Slice) and arg.indices[0].start is None
        if t.container != "matrix" or t.array_dims or len(arg.indices) != 2 or not whole_rows:
            _fail(f"a kernel binds to whole columns of a matrix input: write {name}[:, j] or {name}[:, a:b]",
                  arg.span, f"'{name}' is {t.describe()}; '{name}[...]' here selects "
                  f"{_shape_text(value.type.shape)} values, not columns")
        if isinstance(cols, ir.Slice) and isinstance(cols.start, ir.Constant) and isinstance(cols.stop, ir.Constant):
            return component, (int(cols.start.value) - 1, int(cols.stop.value))
        if isinstance(cols, ir.Constant):
            return component, (int(cols.value) - 1, int(cols.value))
        _fail("the columns a kernel binds to must be constants: X[:, 2] or X[:, 2:3]", arg.indices[1].span)

    def _dims_agree(self, a: Dim, b) -> bool:
        return a == b or (isinstance(b, str) and "+" in b)

    # ---- expressions -------------------------------------------------------------------------
    def _expr(self, expr: ast.Expr) -> ir.Expr:
        method = getattr(self, "_expr_" + type(expr).__name__)
        return method(expr)

    def _expr_Number(self, expr: ast.Number) -> ir.Expr:
        return ir.Constant(ir.INT if expr.is_int else ir.REAL, expr.span, expr.value)

    def _expr_String(self, expr: ast.String) -> ir.Expr:
        return ir.StringConstant(ir.REAL, expr.span, expr.value)

    def _expr_Name(self, expr: ast.Name) -> ir.Expr:
        if expr.name in self.loops:
            return ir.Ref(ir.INT, expr.span, expr.name, "loop")
        var = self.variables.get(expr.name)
        if var is None:
            if expr.name in catalog.CONSTANTS:
                return ir.Constant(ir.REAL, expr.span, catalog.CONSTANTS[expr.name])
            if expr.name in catalog.KERNELS or expr.name in catalog.DISTRIBUTIONS:
                _fail(f"'{expr.name}' must be called: {expr.name}(...)", expr.span)
            _fail(f"'{expr.name}' is not declared", expr.span,
                  did_you_mean(expr.name, list(self.variables) + list(self.loops)))
        self.used.add(expr.name)
        return ir.Ref(_value_type(var.type), expr.span, expr.name, var.role)

    def _expr_Negate(self, expr: ast.Negate) -> ir.Expr:
        operand = self._expr(expr.operand)
        if isinstance(operand, ir.Constant):
            return ir.Constant(operand.type, expr.span, -operand.value)
        return ir.Negate(operand.type, expr.span, operand)

    def _expr_BinaryOp(self, expr: ast.BinaryOp) -> ir.Expr:
        if self._is_kernel(expr):
            _fail("a kernel expression can only appear as the second argument of gp(...)", expr.span)
        left, right = self._expr(expr.left), self._expr(expr.right)
        for side in (left, right):
            if isinstance(side, ir.StringConstant):
                _fail("strings cannot be used in arithmetic", side.span)
        lt, rt = left.type, right.type
        if not lt.shape:
            shape_type = rt
        elif not rt.shape:
            shape_type = lt
        elif lt.container == rt.container and lt.shape == rt.shape:
            shape_type = lt
        else:
            _fail(f"shapes do not match for '{expr.op}': {lt.describe()} and {rt.describe()}", expr.span,
                  "operators act elementwise: both sides need the same shape, or one side a scalar")
        base = "int" if lt.base == rt.base == "int" and expr.op in "+-*" else "real"
        return ir.Binary(replace(shape_type, base=base), expr.span, expr.op, left, right)

    def _expr_Index(self, expr: ast.Index) -> ir.Expr:
        base = self._expr(expr.base)
        shape = base.type.shape + (None,) * len(expr.indices)
        indices = tuple(self._index_item(i, dim) for i, dim in zip(expr.indices, shape))
        return ir.Index(self._index_type(base.type, indices, expr.span), expr.span, base, indices)

    def _index_item(self, item: ast.Expr, dim: Dim | None):
        """An index; a full slice ``:`` becomes ``1:dim`` (``dim`` None past the last dimension)."""
        if isinstance(item, ast.Slice) and item.start is None:
            if dim is None:
                _fail("too many indices", item.span)
            stop = (ir.Constant(ir.INT, item.span, dim) if isinstance(dim, int)
                    else ir.Ref(ir.INT, item.span, dim, "data"))
            return ir.Slice(ir.Constant(ir.INT, item.span, 1), stop)
        if isinstance(item, ast.Slice):
            start, stop = self._expr(item.start), self._expr(item.stop)
            for bound in (start, stop):
                if bound.type != ir.INT:
                    _fail("slice bounds must be integers", bound.span)
            return ir.Slice(start, stop)
        value = self._expr(item)
        if value.type != ir.INT and not is_label_array(value.type):
            _fail(f"an index must be an integer or a one-dimensional int array, got {value.type.describe()}",
                  item.span, "index by integer data, e.g. u[group] with array[N] int<lower=1, upper=G> group")
        return value

    def _index_type(self, t: VarType, indices, span: Span) -> VarType:
        shape = list(t.shape)
        if len(indices) > len(shape):
            _fail(f"too many indices: {t.describe()} has {len(shape)} dimension(s)", span)
        if sum(map(_is_multi_index, indices)) > 1:
            _fail("at most one index may be an int array", span, "index one dimension at a time")
        new_dims = []
        column = len(t.array_dims) + 1 if t.container == "matrix" else None
        for position, (index, dim) in enumerate(zip(indices, shape)):
            what = "column" if position == column else "index"
            if isinstance(index, ir.Slice):
                new_dims.append(self._slice_length(index))
                ends = (index.start, index.stop)
                if isinstance(dim, int) and all(isinstance(e, ir.Constant) for e in ends) \
                        and not 1 <= index.start.value <= index.stop.value <= dim:
                    _fail(f"{what} range {int(index.start.value)}:{int(index.stop.value)} is out of range 1..{dim}",
                          index.start.span)
            elif _is_multi_index(index):
                new_dims.append(index.type.array_dims[0])
            else:
                if isinstance(index, ir.Constant) and isinstance(dim, int) and not 1 <= index.value <= dim:
                    _fail(f"{what} {int(index.value)} is out of range 1..{dim}", index.span)
                if isinstance(index, ir.Constant) and index.value < 1:
                    _fail("indices start at 1", index.span)
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

    def _slice_length(self, index: ir.Slice) -> Dim:
        if isinstance(index.start, ir.Constant) and isinstance(index.stop, ir.Constant):
            length = int(index.stop.value) - int(index.start.value) + 1
            if length < 1:
                _fail("empty slice", index.start.span)
            return length
        if (isinstance(index.start, ir.Constant) and index.start.value == 1 and isinstance(index.stop, ir.Ref)
                and index.stop.name in self.sizes):
            return index.stop.name
        _fail("slice bounds must be constants (or 1:N with a size N)", index.start.span)

    def _expr_Call(self, expr: ast.Call) -> ir.Expr:
        name = expr.function
        if name in catalog.KERNELS:
            _fail(f"kernel '{name}' can only appear inside gp(inputs, kernel)", expr.name_span)
        if name in catalog.DISTRIBUTIONS or name in ("gp", catalog.EXTERNAL):
            _fail(f"'{name}' can only appear on the right of '~'", expr.name_span)
        if name == "project":
            return self._project(expr)
        if name not in catalog.FUNCTIONS:
            self._unknown_callable(expr, "function")
        if len(expr.args) != 1 or expr.kwargs:
            _fail(f"{name} takes one argument", expr.span)
        arg = self._expr(expr.args[0])
        return ir.Apply(replace(arg.type, base="real"), expr.span, name, (arg,))

    def _expr_Tuple(self, expr: ast.Tuple) -> ir.Expr:
        _fail("a tuple can only be the inputs of gp((t, X), kernel)", expr.span)

    def _expr_VectorLiteral(self, expr: ast.VectorLiteral) -> ir.Expr:
        items = tuple(self._expr(i) for i in expr.items)
        for item in items:
            if item.type.shape:
                _fail("vector literal items must be scalars", item.span)
        return ir.VectorLiteral(VarType("real", "vector", (len(items),)), expr.span, items)

    def _expr_Slice(self, expr: ast.Slice) -> ir.Expr:
        _fail("a range a:b can only be used as an index", expr.span)

    def _unknown_callable(self, call: ast.Call, kind: str):
        pool = {"distribution": list(catalog.DISTRIBUTIONS) + ["gp", catalog.EXTERNAL],
                "kernel": list(catalog.KERNELS),
                "function": list(catalog.FUNCTIONS) + ["project"]}[kind]
        hint = did_you_mean(call.function, pool) or did_you_mean(call.function, catalog.known_callables())
        _fail(f"unknown {kind} '{call.function}'", call.name_span, hint or f"{kind}s are: " + ", ".join(pool))

    # ---- whole-program checks ----------------------------------------------------------------
    def _final_checks(self):
        for what, support, ref in self.parameter_arguments:
            t = self.variables[ref.name].type
            if not declared_interval(t.lower, t.upper).within(support):
                self.warnings.append(CheckWarning(
                    f"{what} the parameter '{ref.name}', declared {t.describe()}, which can leave its "
                    f"support {support.describe()}", ref.span))
        for name, var in self.variables.items():
            if var.role == "data" and name not in self.used:
                self.warnings.append(CheckWarning(f"data '{name}' is declared but never used", var.span))
            if var.role == "parameter" and name not in self.defined:
                self.warnings.append(CheckWarning(
                    f"parameter '{name}' has no prior: methods that optimise point-estimate it, "
                    "samplers refuse it", var.span))
            if var.role == "parameter" and name not in self.used:
                self.warnings.append(CheckWarning(f"parameter '{name}' is never used", var.span))
            if var.role == "latent" and not any(k == name or k.startswith(name + "[") for k in self.defined):
                _fail(f"latent '{name}' has no distribution", var.span,
                      f"give it one in the model block, e.g. '{name} ~ normal(0, 1);' or '{name} ~ gp(X, k);'")
        has_likelihood = False

        def visit(statements):
            nonlocal has_likelihood
            for s in statements:
                if isinstance(s, ast.For):
                    visit(s.body)
                elif isinstance(s, ast.Tilde) and self.variables.get(s.target.name) is not None \
                        and self.variables[s.target.name].role == "data":
                    has_likelihood = True

        for block in self.program.blocks:
            if block.kind == "model":
                visit(block.statements)
        if not has_likelihood:
            model_block = next(b for b in self.program.blocks if b.kind == "model")
            _fail("the model has no likelihood: no data appear on the left of '~'", model_block.span,
                  "add e.g. 'y ~ normal(f, sigma);'")


def _is_multi_index(index) -> bool:
    """Whether an index is an int array (``u[group]``): it keeps its dimension, at the array's length."""
    return not isinstance(index, ir.Slice) and is_label_array(index.type)


def _describe_index(index: ir.Expr) -> str:
    if isinstance(index, ir.Constant):
        return str(int(index.value))
    if isinstance(index, ir.Ref):
        return index.name
    return "?"
