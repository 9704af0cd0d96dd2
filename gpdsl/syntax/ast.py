"""The abstract syntax tree: frozen dataclasses, each carrying the :class:`Span` it came from."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from gpdsl.source import Source, Span


@dataclass(frozen=True)
class Node:
    """Base of every AST node."""

    span: Span = field(repr=False, compare=False)


# ---- expressions -----------------------------------------------------------------------------
@dataclass(frozen=True)
class Expr(Node):
    """Base of expressions."""


@dataclass(frozen=True)
class Number(Expr):
    value: float
    is_int: bool


@dataclass(frozen=True)
class String(Expr):
    value: str


@dataclass(frozen=True)
class Name(Expr):
    name: str


@dataclass(frozen=True)
class BinaryOp(Expr):
    op: str
    left: Expr
    right: Expr


@dataclass(frozen=True)
class Negate(Expr):
    operand: Expr


@dataclass(frozen=True)
class Slice(Expr):
    """``start:stop``, or ``:`` (the whole dimension) with both None."""

    start: Expr | None
    stop: Expr | None


@dataclass(frozen=True)
class Index(Expr):
    base: Expr
    indices: tuple[Expr, ...]


@dataclass(frozen=True)
class KeywordArgument(Node):
    name: str
    value: Expr
    name_span: Span = field(repr=False, compare=False, default=None)


@dataclass(frozen=True)
class Call(Expr):
    function: str
    args: tuple[Expr, ...]
    kwargs: tuple[KeywordArgument, ...]
    name_span: Span = field(repr=False, compare=False, default=None)


@dataclass(frozen=True)
class Tuple(Expr):
    items: tuple[Expr, ...]


@dataclass(frozen=True)
class VectorLiteral(Expr):
    items: tuple[Expr, ...]


# ---- declarations ----------------------------------------------------------------------------
@dataclass(frozen=True)
class TypeSpec(Node):
    """A declared type before checking: sizes and bounds are still expressions."""

    base: str  # "int" | "real" | "vector" | "matrix" | "cholesky_factor_corr" | "simplex"
    dims: tuple[Expr, ...] = ()
    array_dims: tuple[Expr, ...] = ()
    lower: Expr | None = None
    upper: Expr | None = None


@dataclass(frozen=True)
class Declaration(Node):
    """``type name;``, ``type name ~ prior;``, or in the transformed parameters block ``type name = value;``."""

    type: TypeSpec
    name: str
    prior: Call | None
    name_span: Span = field(repr=False, compare=False, default=None)
    value: Expr | None = None


# ---- statements ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Statement(Node):
    """Base of model statements."""


@dataclass(frozen=True)
class Target(Node):
    name: str
    indices: tuple[Expr, ...]


@dataclass(frozen=True)
class Tilde(Statement):
    target: Target
    distribution: Call


@dataclass(frozen=True)
class For(Statement):
    variable: str
    start: Expr
    stop: Expr
    body: tuple[Statement, ...]


@dataclass(frozen=True)
class Block(Node):
    kind: str  # "data" | "parameters" | "latent" | "model"
    declarations: tuple[Declaration, ...] = ()
    statements: tuple[Statement, ...] = ()


@dataclass(frozen=True)
class Program(Node):
    source: Source = field(repr=False, compare=False, default=None)
    blocks: tuple[Block, ...] = ()


def references(node: Node) -> Iterator[Name]:
    """Every name an expression (or a keyword argument) refers to, in source order.

    Parameters
    ----------
    node : Expr or KeywordArgument

    Yields
    ------
    Name
        Each occurrence, with its span; a call's function name is not a reference.
    """
    if isinstance(node, Name):
        yield node
        return
    for value in vars(node).values():
        for item in value if isinstance(value, tuple) else (value,):
            if isinstance(item, (Expr, KeywordArgument)):
                yield from references(item)
