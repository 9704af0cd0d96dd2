"""Constant folding: the values of expressions that do not depend on data or parameters.

Two folds, for two uses. :func:`fold` reads the syntax tree of a declared bound (``<lower=sqrt(2)>``)
and fails at a constant with no finite value. :func:`constant_vector` reads a checked argument
(``normal(0, exp(1))``, ``[0.5, 1]``) so that its values can be checked against a support, and
answers None for anything it cannot compute.
"""

from __future__ import annotations

import math

from gpdsl.ir import nodes as ir
from gpdsl.semantics import catalog
from gpdsl.semantics.context import fail
from gpdsl.source import Span
from gpdsl.syntax import ast

FOLDABLE = {"sqrt": math.sqrt, "exp": math.exp, "log": math.log, "inv": lambda x: 1 / x,
            "inv_sqrt": lambda x: 1 / math.sqrt(x), "square": lambda x: x * x, "abs": abs}
"""Functions whose value at a constant the checker computes, to check constant arguments."""


def fold(expr: ast.Expr) -> float | None:
    """The value of a constant expression of the syntax tree.

    Parameters
    ----------
    expr : gpdsl.syntax.ast.Expr
        Numbers, named constants (``pi``), ``+ - * / ^``, negation, and ``sqrt``, ``exp``, ``log`` of those.

    Returns
    -------
    float or None
        None if ``expr`` is not constant.

    Raises
    ------
    ModelCheckError
        For a division by zero, an undefined function value or a value that is not a finite real.
    """
    if isinstance(expr, ast.Number):
        value = expr.value
    elif isinstance(expr, ast.Negate):
        inner = fold(expr.operand)
        return None if inner is None else -inner
    elif isinstance(expr, ast.Name) and expr.name in catalog.CONSTANTS:
        value = catalog.CONSTANTS[expr.name]
    elif isinstance(expr, ast.BinaryOp):
        a, b = fold(expr.left), fold(expr.right)
        if a is None or b is None:
            return None
        try:
            value = {"+": lambda: a + b, "-": lambda: a - b, "*": lambda: a * b, "/": lambda: a / b,
                     "^": lambda: a ** b}[expr.op]()
        except ZeroDivisionError:
            fail("division by zero in a constant", expr.span)
        except OverflowError:
            value = math.inf
    elif isinstance(expr, ast.Call) and expr.function in ("sqrt", "exp", "log") and len(expr.args) == 1:
        inner = fold(expr.args[0])
        if inner is None:
            return None
        try:
            value = getattr(math, expr.function)(inner)
        except ValueError:
            fail(f"{expr.function}({inner:g}) is undefined", expr.span)
        except OverflowError:
            value = math.inf
    else:
        return None
    if isinstance(value, complex) or not math.isfinite(value):
        fail("a constant must be a finite real number", expr.span)
    return float(value)


def constant_vector(expr: ir.Expr) -> list[float] | None:
    """The values of a constant checked expression: one for a scalar, one per item of a vector literal.

    Parameters
    ----------
    expr : gpdsl.ir.nodes.Expr
        A checked expression.

    Returns
    -------
    list of float or None
        None if ``expr`` is not constant, or its value is not a finite real.
    """
    if isinstance(expr, ir.Binary) and not expr.type.shape:
        a, b = constant_vector(expr.left), constant_vector(expr.right)
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
        inner = constant_vector(expr.operand)
        return None if inner is None else [-v for v in inner]
    if isinstance(expr, ir.Apply) and expr.function in FOLDABLE:
        inner = constant_vector(expr.args[0])
        try:
            values = None if inner is None else [float(FOLDABLE[expr.function](v)) for v in inner]
        except (ValueError, ZeroDivisionError, OverflowError):
            return None
        return values if values is not None and all(math.isfinite(v) for v in values) else None
    return None


def constant_items(expr: ir.Expr) -> list[tuple[float, Span]]:
    """The constant values in an argument, each with its span: a vector literal's items one by one.

    Parameters
    ----------
    expr : gpdsl.ir.nodes.Expr
        A checked argument.

    Returns
    -------
    list of (float, Span)
        Empty if nothing in ``expr`` is constant.
    """
    if isinstance(expr, ir.VectorLiteral):
        return [item for i in expr.items for item in constant_items(i)]
    values = constant_vector(expr)
    return [(v, expr.span) for v in values or ()]
