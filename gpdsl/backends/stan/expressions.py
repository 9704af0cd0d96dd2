"""IR expressions to Stan expression text.

Operators between two non-scalars are elementwise in gpdsl, so ``*``, ``/`` and ``^`` become Stan's
``.*``, ``./`` and ``.^``; ``/`` between two integers is real division in gpdsl and is written so that
Stan does not truncate. Parentheses are added only where Stan's precedence needs them.
"""

from __future__ import annotations

from typing import Callable

from gpdsl.errors import MethodError
from gpdsl.ir import nodes as ir
from gpdsl.ir.structure import is_pairs_index

STAN_FUNCTIONS = {"softplus": "log1p_exp"}
"""gpdsl elementwise functions whose Stan name differs; the others keep their name."""

ATOM, POWER, UNARY, PRODUCT, SUM = 5, 4, 3, 2, 1
"""Precedence levels of translated expressions (higher binds tighter)."""


def format_number(value: float, integer: bool = False) -> str:
    """A Stan literal: ``2`` for integers, ``0.5``, ``1e-08`` or ``2.0`` for reals."""
    if integer:
        return str(int(value))
    return repr(float(value))


class ExpressionTranslator:
    """Translate IR expressions to Stan, renaming variables through ``stan_name``.

    Parameters
    ----------
    stan_name : callable
        The Stan name of a gpdsl variable or loop variable.
    """

    def __init__(self, stan_name: Callable[[str], str]):
        self.stan_name = stan_name

    def __call__(self, expr: ir.Expr) -> str:
        return self._translate(expr)[0]

    def index(self, base: str, indices) -> str:
        """``base[i, a:b, ...]`` from IR indices (1-based, like Stan)."""
        if not indices:
            return base
        return f"{base}[{', '.join(self._index_item(i) for i in indices)}]"

    def _index_item(self, item) -> str:
        if isinstance(item, ir.Slice):
            return f"{self.operand(item.start, SUM + 1)}:{self.operand(item.stop, SUM + 1)}"
        return self(item)

    def operand(self, expr: ir.Expr, minimum: int) -> str:
        """The translation of ``expr``, parenthesised unless it binds at least as tight as ``minimum``."""
        text, level = self._translate(expr)
        return text if level >= minimum else f"({text})"

    def _translate(self, expr: ir.Expr) -> tuple[str, int]:
        if isinstance(expr, ir.Constant):
            text = format_number(expr.value, expr.type.base == "int")
            return (text, ATOM) if expr.value >= 0 else (text, UNARY)
        if isinstance(expr, ir.Ref):
            return self.stan_name(expr.name), ATOM
        if isinstance(expr, ir.Index) and is_pairs_index(expr):
            rows, columns = expr.indices
            return f"matrix_pairs({self(expr.base)}, {self(rows)}, {self(columns)})", ATOM
        if isinstance(expr, ir.Index):
            return self.index(self.operand(expr.base, ATOM), expr.indices), ATOM
        if isinstance(expr, ir.Negate):
            return "-" + self.operand(expr.operand, UNARY), UNARY
        if isinstance(expr, ir.Apply):
            name = STAN_FUNCTIONS.get(expr.function, expr.function)
            return f"{name}({', '.join(self(a) for a in expr.args)})", ATOM
        if isinstance(expr, ir.Reduction):
            return f"{expr.function}({', '.join(self(a) for a in expr.args)})", ATOM
        if isinstance(expr, ir.MatrixProduct):
            return f"{self.operand(expr.left, PRODUCT)} * {self.operand(expr.right, PRODUCT + 1)}", PRODUCT
        if isinstance(expr, ir.VectorLiteral):
            return "[" + ", ".join(self(i) for i in expr.items) + "]'", ATOM
        if isinstance(expr, ir.Project):
            return f"project({self(expr.weights)}, {self(expr.inputs)})", ATOM
        if isinstance(expr, ir.Binary):
            return self._binary(expr)
        if isinstance(expr, ir.StringConstant):
            raise MethodError("a string cannot be used in a Stan expression", expr.span)
        raise TypeError(f"no Stan translation for {type(expr).__name__}")

    def _binary(self, expr: ir.Binary) -> tuple[str, int]:
        left_shaped, right_shaped = bool(expr.left.type.shape), bool(expr.right.type.shape)
        op = expr.op
        if op == "^":
            left = self.operand(expr.left, ATOM)
            right = self.operand(expr.right, UNARY)
            return f"{left} {'.^' if left_shaped or right_shaped else '^'} {right}", POWER
        level = SUM if op in "+-" else PRODUCT
        left = self.operand(expr.left, level)
        right = self.operand(expr.right, level + 1)
        if op == "*" and left_shaped and right_shaped:
            op = ".*"
        elif op == "/":
            if right_shaped:
                op = "./"
            elif expr.left.type.base == expr.right.type.base == "int":
                left = (format_number(expr.left.value) if isinstance(expr.left, ir.Constant)
                        and expr.left.value >= 0 else f"1.0 * {left}")
        return f"{left} {op} {right}", level
