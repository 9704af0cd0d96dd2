"""Shapes as the checker compares and prints them: a shape is a tuple of dims, an int or a size's name."""

from __future__ import annotations

from gpdsl.ir.types import Dim, VarType


def value_type(t: VarType) -> VarType:
    """The type of a variable's value in an expression: its declared type without the bounds.

    Parameters
    ----------
    t : VarType
        A declared type.

    Returns
    -------
    VarType
    """
    return VarType(t.base, t.container, t.dims, t.array_dims)


def same_dim(a: Dim, b: Dim) -> bool:
    """Whether two dims are the same length: the same number or the same size's name."""
    return a == b


def shape_text(shape) -> str:
    """A shape as messages write it: ``[N, 2]``, or ``scalar`` for ``()``."""
    return "[" + ", ".join(str(d) for d in shape) + "]" if shape else "scalar"
