"""What the checker knows while it walks a program, and how it fails.

The checker is a set of plain functions, one module per concern (declarations, expressions, GP
statements, kernels, distributions, priors, likelihoods, statements, whole-program checks), that all
take a :class:`CheckContext` first. The context holds everything learnt so far: the declared
variables, the sizes, the names used, the loop variables in scope, the warnings. Functions rather
than one class or mixins, so that each module says by its imports which other concerns it relies on,
and ``check_expr(ctx, expr)`` is found by following an import rather than a method resolution order.

Naming: ``check_*`` returns a typed IR node (or a type), ``verify_*`` returns nothing or raises.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpdsl.errors import CheckWarning, ModelCheckError
from gpdsl.ir import nodes as ir
from gpdsl.semantics import catalog
from gpdsl.semantics.support import Interval
from gpdsl.source import Source, Span
from gpdsl.suggest import did_you_mean
from gpdsl.syntax import ast


@dataclass
class CheckContext:
    """The state of one check of one program, shared by the checking functions.

    Parameters
    ----------
    program : gpdsl.syntax.ast.Program
        The program being checked.

    Attributes
    ----------
    variables : dict of str to Variable
        Data, parameters and latent variables declared (or inferred) so far, in order.
    sizes : list of str
        The data ints used as sizes, in order of first use.
    used : set of str
        Names of variables referred to anywhere.
    loops : dict of str to (Expr, Expr)
        The loop variables in scope, with their bounds.
    warnings : list of CheckWarning
        Warnings so far, in the order they are reported.
    defined : dict of str to Span
        Targets given a distribution (``x``, or an element ``x[1]``), where.
    declarations : dict of str to Declaration
        Every declaration in the program, by name, to tell "used before its declaration" from "not declared".
    parameter_arguments : list of (str, Interval, Ref)
        Parameters passed where an argument needs a support, judged once all constraints are known.
    transformed : dict of str to Expr
        The checked value of each transformed parameter, which stands in for its name.
    """

    program: ast.Program
    variables: dict[str, ir.Variable] = field(default_factory=dict)
    sizes: list[str] = field(default_factory=list)
    used: set[str] = field(default_factory=set)
    loops: dict[str, tuple[ast.Expr, ast.Expr]] = field(default_factory=dict)
    warnings: list[CheckWarning] = field(default_factory=list)
    defined: dict[str, Span] = field(default_factory=dict)
    declarations: dict[str, ast.Declaration] = field(default_factory=dict)
    parameter_arguments: list[tuple[str, Interval, ir.Ref]] = field(default_factory=list)
    transformed: dict[str, ir.Expr] = field(default_factory=dict)

    @property
    def source(self) -> Source:
        """The source text of the program."""
        return self.program.source


def fail(message: str, span: Span, hint: str | None = None):
    """Raise a :class:`~gpdsl.errors.ModelCheckError`.

    Parameters
    ----------
    message : str
        What is wrong.
    span : Span
        Where.
    hint : str, optional
        What to try.

    Raises
    ------
    ModelCheckError
        Always.
    """
    raise ModelCheckError(message, span, hint)


def fail_unknown_callable(call: ast.Call, kind: str):
    """Fail at a call of a name that is not a known ``kind``, suggesting the closest known name.

    Parameters
    ----------
    call : gpdsl.syntax.ast.Call
        The call.
    kind : {"distribution", "kernel", "function"}
        What the call should have named.

    Raises
    ------
    ModelCheckError
        Always: ``unknown kernel 'rbg'``, with a suggestion or the list of known names.
    """
    pool = {"distribution": list(catalog.DISTRIBUTIONS) + [*catalog.PROCESSES, catalog.EXTERNAL],
            "kernel": list(catalog.KERNELS),
            "function": list(catalog.FUNCTIONS) + list(catalog.REDUCTIONS) + ["project"]}[kind]
    hint = did_you_mean(call.function, pool) or did_you_mean(call.function, catalog.known_callables())
    fail(f"unknown {kind} '{call.function}'", call.name_span, hint or f"{kind}s are: " + ", ".join(pool))
