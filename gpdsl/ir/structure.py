"""Structural facts about a checked model that engines and backends need.

A flat log density is not enough for elliptical slice sampling, pseudo-marginal MCMC or Psi-statistic
methods: they need to know which variables are latent GP values, over which inputs and with which
kernel, and how the likelihood on top of them factorises.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

from gpdsl.ir import nodes as ir
from gpdsl.ir.approximations import STATE_SPACE
from gpdsl.ir.latent_hsgp import is_latent_hsgp
from gpdsl.ir.types import is_label_array
from gpdsl.likelihoods import LIKELIHOODS
from gpdsl.priors import PRIORS


@dataclass(frozen=True)
class GPNode:
    """A latent GP variable.

    Attributes
    ----------
    name : str
        The latent variable.
    statement : GPStatement
        Its ``~ gp(...)`` statement (inside ``loops`` when indexed, e.g. ``W[q]``).
    loops : tuple of ForLoop
        Enclosing loops.
    marginalised : bool
        True when its only use is in the location of a ``normal`` likelihood with a scalar standard
        deviation on data of the same shape, the location being the latent plus terms free of it
        (``offset``), and it is an exact GP: backends integrate it out exactly. An approximate GP
        (``approx = hsgp(...)``) over data inputs is always sampled, through its weights; over latent inputs it is
        the exact GP of its feature kernel (:mod:`gpdsl.ir.latent_hsgp`).
    likelihood : Statement or None
        The likelihood statement (built-in or external) that consumes it, if any.
    elementwise : bool
        True when that likelihood depends on the latent element by element through its latent argument
        (each observation on one latent value, possibly shifted by a scalar or by a term of the latent's
        shape, e.g. ``log_exposure + mu + f``) and its other arguments do not involve the latent, as ESS
        requires.
    shifted : bool
        True when that latent argument is the latent plus terms free of it (an offset, zero when there are
        none), as the Laplace and EP approximations require.
    offset : Expr or None
        Those terms (``mu + beta * x`` of ``normal(mu + beta * x + f, s)``), None when the latent argument
        is the latent itself.
    likelihood_loops : tuple of ForLoop
        The loops enclosing that likelihood statement.
    """

    name: str
    statement: ir.GPStatement
    loops: tuple[ir.ForLoop, ...]
    marginalised: bool
    likelihood: ir.Statement | None
    elementwise: bool
    shifted: bool = False
    offset: ir.Expr | None = None
    likelihood_loops: tuple[ir.ForLoop, ...] = ()

    @property
    def has_location(self) -> bool:
        """The GP has a mean (``gp(X, k, mean = m)``) or its likelihood adds terms to it (``normal(mu + f, s)``)."""
        return self.statement.mean is not None or self.offset is not None

    @property
    def plainly_marginalised(self) -> bool:
        """Integrated out under ``normal(f, s)`` with a zero mean and nothing added to ``f``: GP regression and GPLVM
        outputs as their engines take them."""
        return self.marginalised and not self.has_location

    @property
    def marginalised_whole(self) -> bool:
        """Marginalised over inputs with one index level, the likelihood outside any loop and on data of the
        latent's own container and shape (no array dimensions): one multivariate normal over all the latent's
        points (one per matrix column), as the Stan backend integrates it out."""
        if not self.marginalised or self.likelihood_loops or len(self.statement.inputs.index_shape) != 1:
            return False
        data, latent = self.likelihood.target.type, self.statement.target.type
        return (data.container, data.shape) == (latent.container, latent.shape) and not data.array_dims


def sub_expressions(expr: ir.Expr) -> Iterator[ir.Expr]:
    """``expr`` and every expression inside it, depth first (the bounds of index slices included)."""
    yield expr
    for child in _children(expr):
        yield from sub_expressions(child)


def _children(expr: ir.Expr) -> tuple[ir.Expr, ...]:
    if isinstance(expr, ir.Index):
        return (expr.base, *(bound for i in expr.indices
                             for bound in ((i.start, i.stop) if isinstance(i, ir.Slice) else (i,))))
    if isinstance(expr, ir.Binary):
        return expr.left, expr.right
    if isinstance(expr, ir.Negate):
        return (expr.operand,)
    if isinstance(expr, (ir.Apply, ir.Reduction)):
        return expr.args
    if isinstance(expr, ir.MatrixProduct):
        return expr.left, expr.right
    if isinstance(expr, ir.VectorLiteral):
        return expr.items
    if isinstance(expr, ir.Project):
        return expr.weights, expr.inputs
    return ()


def is_pairs_index(index: ir.Index) -> bool:
    """Whether ``index`` is ``G[a, b]`` with two int arrays: the entries at the pairs ``(a[n], b[n])``."""
    return len(index.indices) == 2 and all(not isinstance(i, ir.Slice) and is_label_array(i.type)
                                           for i in index.indices)


def expression_refs(expr: ir.Expr) -> set[str]:
    """Names an expression reads."""
    return {e.name for e in sub_expressions(expr) if isinstance(e, ir.Ref)}


def kernel_exprs(kernel: ir.Kernel) -> list[ir.Expr]:
    """A kernel's hyperparameter expressions, leaves and scales in order."""
    if isinstance(kernel, ir.KernelCombination):
        return [e for _, e in kernel.params] + [e for _, k in kernel.kernels for e in kernel_exprs(k)]
    if isinstance(kernel, ir.KernelLeaf):
        return [e for _, e in kernel.params]
    if isinstance(kernel, ir.KernelScale):
        return [kernel.scale] + kernel_exprs(kernel.kernel)
    return kernel_exprs(kernel.left) + kernel_exprs(kernel.right)


def kernel_nodes(kernel: ir.Kernel) -> Iterator[ir.Kernel]:
    """Every node of a kernel tree, parents before children (a combinator's kernel arguments included)."""
    yield kernel
    if isinstance(kernel, ir.KernelCombination):
        for _, sub in kernel.kernels:
            yield from kernel_nodes(sub)
    elif isinstance(kernel, ir.KernelScale):
        yield from kernel_nodes(kernel.kernel)
    elif isinstance(kernel, ir.KernelPair):
        yield from kernel_nodes(kernel.left)
        yield from kernel_nodes(kernel.right)


def kernel_refs(kernel: ir.Kernel) -> set[str]:
    """Names referenced by a kernel's hyperparameters."""
    return set().union(*(expression_refs(e) for e in kernel_exprs(kernel)))


def statement_exprs(statement: ir.Statement) -> list[ir.Expr]:
    """The expressions a statement reads, not counting its target's indices: GP inputs, kernel
    hyperparameters and mean; distribution or external arguments."""
    if isinstance(statement, ir.GPStatement):
        mean = [] if statement.mean is None else [statement.mean]
        return [*statement.inputs.components, *kernel_exprs(statement.kernel), *mean]
    if isinstance(statement, ir.StudentTProcessStatement):
        return [statement.dof, *statement.inputs.components, *kernel_exprs(statement.kernel)]
    if isinstance(statement, (ir.PriorStatement, ir.LikelihoodStatement)):
        return [e for _, e in statement.distribution.args]
    if isinstance(statement, ir.ExternalLikelihood):
        return list(statement.args)
    return []


def statement_refs(statement: ir.Statement, indices: bool = False) -> set[str]:
    """Names a statement reads (not its target; its target's indices too when ``indices``)."""
    exprs = statement_exprs(statement)
    target = getattr(statement, "target", None)
    if indices and target is not None:
        exprs = [*target.indices, *exprs]
    return set().union(*(expression_refs(e) for e in exprs))


def _is_elementwise_of(expr: ir.Expr, name: str) -> bool:
    """``expr`` is the latent (optionally indexed by the likelihood's own indices) plus or minus scalars or terms
    of its shape, or an elementwise function of such."""
    if isinstance(expr, ir.Apply) and len(expr.args) == 1:
        return _is_elementwise_of(expr.args[0], name)
    return _is_offset_of(expr, name, _is_elementwise_of, either_sign=True)


def _is_shift_of(expr: ir.Expr, name: str) -> bool:
    """``expr`` is the latent (optionally indexed) plus or minus terms free of it, the latent with a plus sign."""
    return _is_offset_of(expr, name, _is_shift_of, either_sign=False)


def _is_offset_of(expr: ir.Expr, name: str, inner, either_sign: bool) -> bool:
    if isinstance(expr, ir.Ref):
        return expr.name == name
    if isinstance(expr, ir.Index):
        return _is_offset_of(expr.base, name, inner, either_sign)
    if isinstance(expr, ir.Binary) and expr.op in "+-":
        left = inner(expr.left, name)
        right = (either_sign or expr.op == "+") and not left and inner(expr.right, name)
        latent_side, other = (expr.left, expr.right) if left else (expr.right, expr.left)
        return (left or right) and name not in expression_refs(other) and (
            not other.type.shape or other.type.shape == latent_side.type.shape)
    return False


def acts_elementwise(likelihood: ir.LikelihoodStatement, name: str) -> bool:
    """Every argument of ``likelihood`` is free of the latent ``name`` or depends on it element by element
    (``exp(g)`` or ``exp((mu_g + g) / 2)`` as the scale of ``normal(f, ...)``)."""
    return all(name not in expression_refs(v) or _depends_elementwise(v, name) for _, v in likelihood.distribution.args)


def _depends_elementwise(expr: ir.Expr, name: str) -> bool:
    """Element ``i`` of ``expr`` depends on the latent ``name`` through element ``i`` alone: elementwise functions
    and operators of the latent (never an element of it, ``g[1]``) and of terms free of it that are scalars or of
    the same shape."""
    if name not in expression_refs(expr):
        return True
    if isinstance(expr, ir.Apply) and len(expr.args) == 1:
        return _depends_elementwise(expr.args[0], name)
    if isinstance(expr, ir.Negate):
        return _depends_elementwise(expr.operand, name)
    if isinstance(expr, ir.Binary):
        return all(_depends_elementwise(side, name) if name in expression_refs(side)
                   else not side.type.shape or side.type.shape == expr.type.shape
                   for side in (expr.left, expr.right))
    return isinstance(expr, ir.Ref) and expr.name == name


def latent_offset(expr: ir.Expr, name: str) -> ir.Expr | None:
    """The terms of a shift of the latent (``_is_shift_of``) other than the latent: ``mu + beta * x`` of
    ``mu + beta * x + f``, ``-c`` of ``f - c``; None for the latent alone."""
    if isinstance(expr, (ir.Ref, ir.Index)):
        return None
    left_has = name in expression_refs(expr.left)
    inner, other = (expr.left, expr.right) if left_has else (expr.right, expr.left)
    if expr.op == "-" and left_has:
        other = ir.Negate(other.type, other.span, other)
    rest = latent_offset(inner, name)
    return other if rest is None else ir.Binary(expr.type, expr.span, "+", rest, other)


def _indexed_latent(expr: ir.Expr, name: str) -> bool:
    """The latent appears indexed (``f[i]``) in ``expr``."""
    if isinstance(expr, ir.Index):
        return isinstance(expr.base, ir.Ref) and expr.base.name == name
    if isinstance(expr, ir.Binary):
        return _indexed_latent(expr.left, name) or _indexed_latent(expr.right, name)
    return False


def _latent_argument(distribution: ir.Distribution) -> str:
    """The argument of a likelihood that carries the latent value (``mu`` of ``student_t``, ...)."""
    likelihood = LIKELIHOODS.get(distribution.name)
    return likelihood.latent_param if likelihood is not None else distribution.args[0][0]


def gp_nodes(model: ir.Model) -> list[GPNode]:
    """The latent GP variables of a model, with how they are used."""
    walked = list(model.walk())
    found = []
    for statement, loops in walked:
        if not isinstance(statement, ir.GPStatement):
            continue
        name = statement.target.name
        users = [s for s, _ in walked if s is not statement and name in statement_refs(s)]
        likelihoods = [s for s in users if isinstance(s, (ir.LikelihoodStatement, ir.ExternalLikelihood))]
        likelihood = likelihoods[0] if len(likelihoods) == 1 else None
        likelihood_loops = next((enclosing for s, enclosing in walked if s is likelihood), ())
        marginalised = False
        elementwise = shifted = False
        offset = None
        if isinstance(likelihood, ir.LikelihoodStatement):
            latent = _latent_argument(likelihood.distribution)
            first = dict(likelihood.distribution.args)[latent]
            others = [v for n, v in likelihood.distribution.args if n != latent]
            elementwise = _is_elementwise_of(first, name) and not any(name in expression_refs(v) for v in others)
            shifted = elementwise and _is_shift_of(first, name)
            offset = latent_offset(first, name) if shifted else None
            marginalised = (
                (statement.approximation is None or statement.approximated_by(STATE_SPACE) or is_latent_hsgp(statement))
                and len(users) == 1 and not loops and not statement.target.indices
                and likelihood.distribution.name == "normal"
                and ((isinstance(first, ir.Ref) and first.name == name)
                     or (shifted and not _indexed_latent(first, name) and statement.target.type.container == "vector"))
                and not likelihood.target.indices
                and likelihood.target.type.shape == statement.target.type.shape
                and all(not v.type.shape for v in others)
            )
        found.append(GPNode(name, statement, loops, marginalised, likelihood, elementwise, shifted, offset,
                            likelihood_loops))
    return found


def student_t_process_nodes(model: ir.Model) -> list[GPNode]:
    """The model's Student-t processes, each as a node integrated out under its ``y ~ normal(f, s)`` (the checker
    admits no other use, :func:`gpdsl.semantics.gp.verify_student_t_processes`)."""
    likelihoods = [s for s, _ in model.walk() if isinstance(s, ir.LikelihoodStatement)]
    found = []
    for statement in model.student_t_processes():
        name = statement.target.name
        likelihood = next(s for s in likelihoods if name in statement_refs(s))
        found.append(GPNode(name, statement, (), True, likelihood, True, True))
    return found


def process_nodes(model: ir.Model) -> list[GPNode]:
    """Every latent GP (:func:`gp_nodes`) and Student-t process (:func:`student_t_process_nodes`): whatever takes
    inputs and a kernel, for the checks of inputs, new inputs and memory."""
    return gp_nodes(model) + student_t_process_nodes(model)


def _constant_values(expr: ir.Expr) -> list[float] | None:
    if isinstance(expr, ir.Constant):
        return [expr.value]
    if isinstance(expr, ir.VectorLiteral) and all(isinstance(i, ir.Constant) for i in expr.items):
        return [i.value for i in expr.items]
    return None


def parameter_bounds(model: ir.Model, name: str) -> tuple[list[float] | None, list[float] | None]:
    """Lower and upper bounds of a parameter, scalar (one-element list) or elementwise.

    Declared bounds come from the type; bounded priors (support ``"bounded"`` in :mod:`gpdsl.priors`:
    ``uniform``, ``scaled_sigmoid_normal``) imply them, elementwise when given as vector literals.
    """
    var = model.parameters[name]
    lower = None if var.type.lower is None else [var.type.lower]
    upper = None if var.type.upper is None else [var.type.upper]
    prior = model.priors().get(name)
    if prior is not None and PRIORS[prior.distribution.name].support == "bounded":
        lower = _constant_values(prior.distribution.arg("lower")) or lower
        upper = _constant_values(prior.distribution.arg("upper")) or upper
    return lower, upper


def input_prediction_refusal(node: GPNode) -> str | None:
    """Why new inputs of ``node`` cannot be given as one row per point, or None: one input variable, or a tuple of
    them over one index (``(t, x)`` with a value of each per point), can; a tuple broadcast over several indexes
    (``(t, X)`` with ``vector[T] t`` and ``array[T] matrix[N, 2] X``) cannot."""
    inputs = node.statement.inputs
    if len(inputs.components) == 1 or len(inputs.index_shape) == 1:
        return None
    return (f"predictions at new inputs of '{node.name}' need one input variable or a tuple of them over one index; "
            f"its inputs are over {' x '.join(map(str, inputs.index_shape))}")


def mean_prediction_refusal(model: ir.Model, node: GPNode) -> str | None:
    """Why the mean of ``node`` has no value at new inputs, or None when it has one (no mean, or a mean of
    parameters and of the GP's own input variable)."""
    mean = node.statement.mean
    if mean is None:
        return None
    components = node.statement.inputs.components
    inputs = {c.name for c in components if isinstance(c, ir.Ref)} if input_prediction_refusal(node) is None else set()
    others = sorted(name for name in expression_refs(mean) if name in model.data and name not in inputs
                    and name not in model.sizes)
    if others:
        return (f"the mean of '{node.name}' uses {', '.join(others)}, which has no values at new inputs; a mean "
                f"of parameters and of the GP's input variable can be predicted")
    return None



def location_prediction_refusal(model: ir.Model, node: GPNode) -> str | None:
    """Why the location of ``y`` around a GP integrated out (its mean plus the terms the likelihood adds to it, as in
    ``normal(mu + beta * x + f, s)``) has no value at new inputs, or None when it has one."""
    refusal = mean_prediction_refusal(model, node)
    if refusal or node.offset is None:
        return refusal
    observed = sorted(name for name in expression_refs(node.offset) if name in model.data and name not in model.sizes)
    if observed:
        return (f"the terms added to '{node.name}' in the likelihood read {', '.join(observed)}, which "
                + ("have" if len(observed) > 1 else "has") + " no values at new inputs; terms of parameters alone "
                "can be predicted")
    return None


def column_factors(kernel: ir.Kernel, offsets) -> list[ir.KernelLeaf] | None:
    """The kernels of a product over input columns, or None when ``kernel`` is not one.

    ``kernel`` is separable by column when it is a product (with scalings) of plain catalog kernels, each acting
    on one column of the GP's inputs (bound to a one-column tuple component, or to ``X[:, j]``): then ``k(x, x') =
    c prod_j k_j(x_j, x'_j)``, and on a full grid of points its matrix is a Kronecker product.

    Parameters
    ----------
    kernel : ir.Kernel
    offsets : sequence of int
        Where each input component's columns start, and (last) the total width.
    """
    if isinstance(kernel, ir.KernelScale):
        return column_factors(kernel.kernel, offsets)
    if isinstance(kernel, ir.KernelProduct):
        left, right = column_factors(kernel.left, offsets), column_factors(kernel.right, offsets)
        return None if left is None or right is None else left + right
    if type(kernel) is not ir.KernelLeaf:
        return None
    active = kernel.active_columns(offsets)
    return [kernel] if active is not None and len(active) == 1 else None
