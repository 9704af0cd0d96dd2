"""Types of declared variables: base type, container, shape by size symbols, constraints."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Mapping, Union

Dim = Union[str, int]
"""One dimension: a size symbol (an ``int`` data variable, e.g. ``"N"``) or a literal size."""


@dataclass(frozen=True)
class VarType:
    """The type of a declared variable.

    Parameters
    ----------
    base : {"int", "real"}
        Element type.
    container : {"scalar", "vector", "matrix"}
        The innermost container (``int`` is always ``"scalar"``).
    dims : tuple of Dim
        Container dimensions: ``()`` for a scalar, ``(n,)`` for a vector, ``(r, c)`` for a matrix.
    array_dims : tuple of Dim
        Outer ``array[...]`` dimensions, ``()`` when not an array.
    lower, upper : float or str, optional
        Bounds from ``<lower=..., upper=...>``: constant-folded numbers, or (on data) a size symbol.
    structure : {"cholesky_factor_corr", "simplex"}, optional
        A matrix or vector constrained to a set of its own: ``cholesky_factor_corr[K]`` is a ``matrix[K, K]``
        that is the Cholesky factor of a correlation matrix (lower triangular, rows of unit length, positive
        diagonal); ``simplex[K]`` is a ``vector[K]`` of non-negative entries that sum to one.
    """

    base: Literal["int", "real"]
    container: Literal["scalar", "vector", "matrix"] = "scalar"
    dims: tuple[Dim, ...] = ()
    array_dims: tuple[Dim, ...] = ()
    lower: float | str | None = None
    upper: float | str | None = None
    structure: str | None = None

    @property
    def shape(self) -> tuple[Dim, ...]:
        """Full symbolic shape: array dimensions, then container dimensions."""
        return self.array_dims + self.dims

    @property
    def ndim(self) -> int:
        """Number of dimensions of the full shape."""
        return len(self.shape)

    def concrete_shape(self, sizes: Mapping[str, int]) -> tuple[int, ...]:
        """The shape with size symbols replaced by their values."""
        return tuple(d if isinstance(d, int) else int(sizes[d]) for d in self.shape)

    def concrete_bounds(self, sizes: Mapping[str, int]) -> "VarType":
        """The type with size-symbol bounds replaced by their values."""
        lower, upper = (int(sizes[b]) if isinstance(b, str) else b for b in (self.lower, self.upper))
        return VarType(self.base, self.container, self.dims, self.array_dims, lower, upper, self.structure)

    def dim_names(self, var: str) -> tuple[str, ...]:
        """Dimension names for results: the size symbol, or ``<var>_dim_<i>`` for literal sizes."""
        return tuple(d if isinstance(d, str) and d not in self.shape[:i] else f"{var}_dim_{i}"
                     for i, d in enumerate(self.shape))

    def describe(self) -> str:
        """Stan-like spelling, e.g. ``array[T] matrix[N, 2]`` or ``vector<lower=0>[D]``."""
        if self.structure is not None:
            return f"{self.structure}[{self.dims[0]}]"
        bounds = []
        if self.lower is not None:
            bounds.append(f"lower={number_text(self.lower)}")
        if self.upper is not None:
            bounds.append(f"upper={number_text(self.upper)}")
        constraint = f"<{', '.join(bounds)}>" if bounds else ""
        inner = "int" if self.base == "int" else {"scalar": "real", "vector": "vector",
                                                   "matrix": "matrix"}[self.container]
        inner += constraint
        if self.dims:
            inner += "[" + ", ".join(str(d) for d in self.dims) + "]"
        if self.array_dims:
            inner = "array[" + ", ".join(str(d) for d in self.array_dims) + "] " + inner
        return inner


def number_text(x: float | str) -> str:
    if isinstance(x, str):
        return x
    return str(int(x)) if float(x).is_integer() else repr(float(x))


def is_label_array(t: VarType) -> bool:
    """Whether ``t`` is a one-dimensional int array: a GP input component of one label per point."""
    return t.base == "int" and t.container == "scalar" and len(t.array_dims) == 1
