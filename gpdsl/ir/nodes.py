"""Typed IR: what the checker produces and every backend and engine consumes.

Expressions carry their :class:`~gpdsl.ir.types.VarType` (without bounds). Kernels are a
separate small algebra (leaves, sums, products, scalings). A :class:`Model` keeps the statements in
source order plus the structural facts engines need: which variables are latent GP values, with which
kernel over which inputs, and which likelihood sits on which data.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Iterator

from gpdsl.ir.approximations import Approximation
from gpdsl.ir.types import VarType
from gpdsl.source import Source, Span

REAL = VarType("real")
INT = VarType("int")


# ---- expressions -----------------------------------------------------------------------------
@dataclass(frozen=True)
class Expr:
    type: VarType
    span: Span = field(repr=False, compare=False)


@dataclass(frozen=True)
class Constant(Expr):
    value: float


@dataclass(frozen=True)
class StringConstant(Expr):
    value: str


@dataclass(frozen=True)
class Ref(Expr):
    """A reference to a variable; ``role`` is data, parameter, latent or loop."""

    name: str
    role: str


@dataclass(frozen=True)
class Slice:
    """A 1-based inclusive index range ``start:stop``."""

    start: Expr
    stop: Expr


@dataclass(frozen=True)
class Index(Expr):
    """``base[i, ...]`` with 1-based indices (Stan's convention)."""

    base: Expr
    indices: tuple[Expr | Slice, ...]


@dataclass(frozen=True)
class Binary(Expr):
    """Elementwise ``+ - * / ^`` with scalar broadcasting."""

    op: str
    left: Expr
    right: Expr


@dataclass(frozen=True)
class Negate(Expr):
    operand: Expr


@dataclass(frozen=True)
class Apply(Expr):
    """An elementwise function from :data:`~gpdsl.semantics.catalog.FUNCTIONS`."""

    function: str
    args: tuple[Expr, ...]


@dataclass(frozen=True)
class Reduction(Expr):
    """A scalar from whole containers: a function of :data:`~gpdsl.semantics.catalog.REDUCTIONS`
    (``sum(v)``, ``mean(M)``, ``dot_product(a, b)``)."""

    function: str
    args: tuple[Expr, ...]


@dataclass(frozen=True)
class MatrixProduct(Expr):
    """``A * b`` or ``A * B``: the matrix product of a matrix with a vector or with a matrix of another shape."""

    left: Expr
    right: Expr


@dataclass(frozen=True)
class VectorLiteral(Expr):
    items: tuple[Expr, ...]


# ---- GP inputs -------------------------------------------------------------------------------
@dataclass(frozen=True)
class Inputs:
    """The inputs of a GP: one or more components whose columns are concatenated per point.

    ``index_shape`` is the shape of the set of points, e.g. ``("N",)`` for ``matrix[N, D] X`` or
    ``("T", "N")`` for ``(t, X)`` with ``vector[T] t`` and ``array[T] matrix[N, 2] X``; a component
    with a shorter index shape is broadcast over the trailing index. ``dim`` is the total input
    dimension and ``offsets[name]`` the first column of each named component.
    """

    components: tuple[Expr, ...]
    names: tuple[str | None, ...]
    dims: tuple[int | str, ...]
    index_shape: tuple[int | str, ...]
    span: Span = field(repr=False, compare=False)

    @property
    def dim(self) -> int | str:
        if len(self.dims) == 1:
            return self.dims[0]
        if all(isinstance(d, int) for d in self.dims):
            return sum(self.dims)
        return "+".join(str(d) for d in self.dims)


@dataclass(frozen=True)
class Project(Expr):
    """``project(W, X)``: z[i, q] = sum_d W[q][i, d] * X[i, d] (the deep Mahalanobis GP's map)."""

    weights: Expr
    inputs: Expr


# ---- kernels ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Kernel:
    span: Span = field(repr=False, compare=False)

    def leaves(self) -> Iterator["KernelLeaf"]:
        raise NotImplementedError  # each concrete kernel node defines it


@dataclass(frozen=True)
class KernelLeaf(Kernel):
    """A named kernel with its hyperparameter expressions (defaults filled in).

    ``component`` is the index of the input component it is bound to, or None for all inputs;
    ``columns`` a 0-based ``(start, stop)`` range of that component's columns (``X[:, 2:3]`` is
    ``(1, 3)``), or None for all of them; ``input_dim`` the dimension it acts on.
    """

    name: str = ""
    params: tuple[tuple[str, Expr], ...] = ()
    component: int | None = None
    input_dim: int | str = 1
    columns: tuple[int, int] | None = None

    def param(self, name: str) -> Expr | None:
        return dict(self.params).get(name)

    def active_columns(self, offsets) -> list[int] | None:
        """The columns of the concatenated GP inputs this kernel acts on, None for all of them.

        Parameters
        ----------
        offsets : sequence of int
            Where each input component's columns start, and (last) the total width.
        """
        if self.component is None:
            return None
        first, end = int(offsets[self.component]), int(offsets[self.component + 1])
        start, stop = self.columns or (0, end - first)
        return list(range(first + start, first + min(stop, end - first)))

    def leaves(self):
        yield self


@dataclass(frozen=True)
class KernelCombination(KernelLeaf):
    """A kernel of the catalog with kernel-valued arguments (``changepoint(t, k1, k2, ...)``, ``warp(k, ...)``).

    ``kernels`` are the sub-kernels by argument name; ``params``, ``component``, ``columns`` and
    ``input_dim`` are as for :class:`KernelLeaf` and describe the combinator's own hyperparameters and
    the inputs it reads (a changepoint's column, the columns a warp transforms). Code that does not
    know the combinator treats it as one opaque leaf.
    """

    kernels: tuple[tuple[str, Kernel], ...] = ()

    def leaves(self):
        for _, kernel in self.kernels:
            yield from kernel.leaves()


@dataclass(frozen=True)
class KernelPair(Kernel):
    """Two kernels combined pointwise: the base of :class:`KernelSum` and :class:`KernelProduct`."""

    left: Kernel = None
    right: Kernel = None

    def leaves(self):
        yield from self.left.leaves()
        yield from self.right.leaves()


@dataclass(frozen=True)
class KernelSum(KernelPair):
    """``left + right``."""


@dataclass(frozen=True)
class KernelProduct(KernelPair):
    """``left * right``."""


@dataclass(frozen=True)
class KernelScale(Kernel):
    scale: Expr = None
    kernel: Kernel = None

    def leaves(self):
        yield from self.kernel.leaves()


# ---- statements ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Target:
    """The left of ``~``: a variable, optionally indexed by loop variables or constants."""

    name: str
    role: str
    indices: tuple[Expr, ...]
    type: VarType
    span: Span = field(repr=False, compare=False)


@dataclass(frozen=True)
class Statement:
    span: Span = field(repr=False, compare=False)


@dataclass(frozen=True)
class GPStatement(Statement):
    """``target ~ gp(inputs, kernel, mean = m, approx = a)``: target holds latent GP values, columns iid for
    matrices; ``mean`` is None for a zero mean, else a scalar or a vector of the target's shape; ``approximation``
    None for the exact GP, else the approximation it stands for (:mod:`gpdsl.ir.approximations`)."""

    target: Target = None
    inputs: Inputs = None
    kernel: Kernel = None
    mean: Expr | None = None
    approximation: "Approximation | None" = None

    def approximated_by(self, name: str) -> bool:
        """Whether the statement uses the approximation called ``name`` (``"hsgp"``, ``"state_space"``)."""
        return self.approximation is not None and self.approximation.name == name


@dataclass(frozen=True)
class StudentTProcessStatement(Statement):
    """``target ~ student_t_process(nu, inputs, kernel)``: a Student-t process prior (Shah, Wilson & Ghahramani
    2014), ``dof`` its degrees of freedom ``nu > 2``. The checker admits it only under ``y ~ normal(target, s)``
    with scalar ``s``, the noise entering the process's kernel: ``y ~ MVT(nu, 0, K + s^2 I)`` with that
    covariance (the scale matrix is ``(nu - 2) / nu`` times it). ``mean`` is always None (a zero mean)."""

    target: Target = None
    inputs: Inputs = None
    kernel: Kernel = None
    dof: Expr = None
    mean: Expr | None = None


@dataclass(frozen=True)
class Distribution:
    """A distribution with its arguments by canonical parameter name (defaults filled in)."""

    name: str
    args: tuple[tuple[str, Expr], ...]
    span: Span = field(repr=False, compare=False)

    def arg(self, name: str) -> Expr:
        return dict(self.args)[name]


@dataclass(frozen=True)
class PriorStatement(Statement):
    """``target ~ dist(...)`` on a parameter or latent variable (elementwise iid when scalar args)."""

    target: Target = None
    distribution: Distribution = None


@dataclass(frozen=True)
class LikelihoodStatement(Statement):
    """``data ~ dist(...)``: how observed data arise."""

    target: Target = None
    distribution: Distribution = None


@dataclass(frozen=True)
class ExternalLikelihood(Statement):
    """``data ~ external("module:function", args...)``: user Python code computes the log likelihood."""

    target: Target = None
    function: str = ""
    args: tuple[Expr, ...] = ()


@dataclass(frozen=True)
class ForLoop(Statement):
    """``for (var in start:stop) body`` with inclusive integer bounds."""

    variable: str = ""
    start: Expr = None
    stop: Expr = None
    body: tuple[Statement, ...] = ()


# ---- declarations and the model --------------------------------------------------------------
@dataclass(frozen=True)
class TransformedParameter:
    """``type name = value;`` of the transformed parameters block: ``value`` stands in for ``name`` in the
    model's statements; the results report it."""

    name: str
    type: VarType
    value: Expr
    span: Span = field(repr=False, compare=False)



@dataclass(frozen=True)
class Variable:
    """A declared (or, for latent GP values, inferred) variable."""

    name: str
    role: str  # "data" | "parameter" | "latent"
    type: VarType
    span: Span = field(repr=False, compare=False)
    declared: bool = True


@dataclass(frozen=True)
class Model:
    """A checked model.

    Attributes
    ----------
    source : Source
        The text it came from.
    sizes : tuple of str
        Size symbols (``int`` data used as dimensions); they name the results' dims.
    data, parameters, latents : dict of str to Variable
        Declared data, parameters (with effective bounds) and latent variables, in order.
    statements : tuple of Statement
        The model statements in source order, with parameter priors from declarations first.
    transformed : dict of str to TransformedParameter
        The transformed parameters, in order (their values already stand in for them in ``statements``).
    """

    source: Source
    sizes: tuple[str, ...]
    data: dict[str, Variable]
    parameters: dict[str, Variable]
    latents: dict[str, Variable]
    statements: tuple[Statement, ...]
    transformed: dict[str, TransformedParameter] = field(default_factory=dict)

    @property
    def name(self) -> str:
        from pathlib import Path

        return Path(self.source.name).stem if self.source.name != "<string>" else "model"

    @property
    def source_hash(self) -> str:
        """sha256 of the model text (the results' ``model_hash``)."""
        return hashlib.sha256(self.source.text.encode()).hexdigest()

    def walk(self) -> Iterator[tuple[Statement, tuple[ForLoop, ...]]]:
        """Every non-loop statement with the loops that enclose it."""
        def visit(statements, loops):
            for statement in statements:
                if isinstance(statement, ForLoop):
                    yield from visit(statement.body, loops + (statement,))
                else:
                    yield statement, loops
        yield from visit(self.statements, ())

    def gp_statements(self) -> list[GPStatement]:
        """Statements that define latent GP values."""
        return [s for s, _ in self.walk() if isinstance(s, GPStatement)]

    def student_t_processes(self) -> list[StudentTProcessStatement]:
        """Statements that define Student-t process values."""
        return [s for s, _ in self.walk() if isinstance(s, StudentTProcessStatement)]

    def likelihoods(self) -> list[Statement]:
        """Likelihood statements (built-in and external)."""
        return [s for s, _ in self.walk() if isinstance(s, (LikelihoodStatement, ExternalLikelihood))]

    def priors(self) -> dict[str, PriorStatement]:
        """The prior statement of each parameter or latent that has one (by variable name)."""
        return {s.target.name: s for s, _ in self.walk() if isinstance(s, PriorStatement)}

    def unpriored_parameters(self) -> list[str]:
        """Parameters that have no prior (point-estimated by optimisers, refused by samplers)."""
        priors = self.priors()
        return [name for name in self.parameters if name not in priors]
