"""The Hilbert-space approximation's diagnostics (Riutort-Mayol et al. 2023, section 4.3), after a run.

For each ``approx = hsgp(m, c)`` GP whose kernel terms are rbf, Matérn-3/2 or Matérn-5/2 with a length-scale that
is a constant or a parameter (ARD included), over inputs that are data variables: with ``S`` the inputs' half range
per column, the paper's rule says that ``m`` basis functions with boundary factor ``c`` represent length-scales
down to ``a c S / m``, and that ``c`` should be at least ``max(1.2, b l / S)`` for a length-scale ``l``
(:data:`gpdsl.numerics.hsgp.LENGTHSCALE_RULES`). :func:`hsgp_warnings` names the terms whose length-scale draws
fall below the first bound (more than :data:`TOLERATED_SHARE` of them), or whose median needs a larger ``c``: the
approximation is then poor there, and the fix is a larger ``m`` (or ``c``). Kernel terms of other kinds, length-scales
given by other expressions and inputs that are not plain data variables are not judged.
"""

from __future__ import annotations

import numpy as np

from gpdsl.ir import nodes as ir
from gpdsl.numerics.hsgp import shortest_lengthscale, smallest_boundary_factor

TOLERATED_SHARE = 0.05
"""The share of length-scale draws below the shortest length-scale the basis represents that is tolerated."""

_MATERN_ORDERS = {1.5: "matern32", 2.5: "matern52"}


def hsgp_warnings(model: ir.Model, data: dict, draws: dict) -> list[str]:
    """Warnings for the HSGP terms of ``model`` whose length-scales the basis does not represent well.

    Parameters
    ----------
    model : gpdsl.ir.nodes.Model
        The checked model.
    data : dict
        Its validated data, by name.
    draws : dict of str to array
        Draws of the parameters by name, ``(chain, draw, *shape)`` (or any leading shape), e.g. a sampler's
        posterior.

    Returns
    -------
    list of str
        One sentence per problem; empty when nothing was found.
    """
    warnings = []
    for statement in model.gp_statements():
        if statement.approximation is None or statement.approximation.name != "hsgp":
            continue
        half_range = _half_range(statement, data)
        if half_range is None:
            continue
        m = statement.approximation.value("m")
        m = np.broadcast_to(np.asarray(m, dtype=float), half_range.shape)
        c = float(statement.approximation.value("c"))
        for leaf in statement.kernel.leaves():
            rule = _rule_name(leaf)
            scales = _lengthscale_draws(leaf, draws, half_range.size)
            if rule is None or scales is None:
                continue
            warnings += _judge(statement.target.name, leaf, rule, scales, m, c, half_range)
    return warnings


def _judge(name, leaf, rule, scales, m, c, half_range) -> list[str]:
    found = []
    for d in range(half_range.size):
        column = f" (input column {d + 1})" if half_range.size > 1 else ""
        shortest = shortest_lengthscale(rule, int(m[d]), c, float(half_range[d]))
        below = float(np.mean(scales[:, d] < shortest))
        if below > TOLERATED_SHARE:
            low = float(np.quantile(scales[:, d], TOLERATED_SHARE))
            needed = int(np.ceil(shortest_lengthscale(rule, 1, c, float(half_range[d])) / low))
            what = (f"{100 * below:.0f}% of the {leaf.name} length-scale draws{column} lie" if len(scales) > 1
                    else f"the {leaf.name} length-scale{column}, {low:.3g}, lies")
            found.append(f"hsgp of '{name}': {what} below {shortest:.3g}, the shortest that m = {int(m[d])} basis "
                         f"functions with c = {c:g} represent over inputs of half range {half_range[d]:.3g} "
                         f"(Riutort-Mayol et al. 2023); the approximation is poor there: raise m to about {needed}")
        median = float(np.median(scales[:, d]))
        wanted = smallest_boundary_factor(rule, median, float(half_range[d]))
        if c < wanted:
            found.append(f"hsgp of '{name}': the median {leaf.name} length-scale{column}, {median:.3g}, needs a "
                         f"boundary factor c of at least {wanted:.3g} over inputs of half range {half_range[d]:.3g} "
                         f"(c = {c:g}); the box is too small for so smooth a function: raise c (and m with it)")
    return found


def _rule_name(leaf: ir.KernelLeaf) -> str | None:
    if leaf.name == "matern":
        nu = leaf.param("nu")
        return _MATERN_ORDERS.get(nu.value) if isinstance(nu, ir.Constant) else None
    return leaf.name if leaf.name in ("rbf", "matern32", "matern52") else None


def _lengthscale_draws(leaf: ir.KernelLeaf, draws: dict, dims: int) -> np.ndarray | None:
    """The leaf's length-scale draws as ``(S, D)``, or None when it is not a constant or a parameter."""
    expr, inverse = leaf.param("lengthscale"), False
    if expr is None:
        expr, inverse = leaf.param("inv_ls2"), True
    if isinstance(expr, ir.Constant):
        values = np.array([[float(expr.value)]])
    elif isinstance(expr, ir.VectorLiteral) and all(isinstance(i, ir.Constant) for i in expr.items):
        values = np.array([[float(i.value) for i in expr.items]])
    elif isinstance(expr, ir.Ref) and expr.role == "parameter" and expr.name in draws:
        value = np.asarray(draws[expr.name], dtype=float)
        trailing = 1 if expr.type.shape else 0
        values = value.reshape(-1, value.shape[-1] if trailing else 1)
    else:
        return None
    values = 1.0 / np.sqrt(values) if inverse else values
    return np.broadcast_to(values, (values.shape[0], dims))


def _half_range(statement: ir.GPStatement, data: dict) -> np.ndarray | None:
    """Each input column's half range, when the inputs are data variables; else None."""
    columns = []
    for component in statement.inputs.components:
        if not isinstance(component, ir.Ref) or component.name not in data:
            return None
        value = np.asarray(data[component.name], dtype=float)
        columns.append(value.reshape(value.shape[0], -1))
    X = np.concatenate(columns, axis=1)
    return (X.max(axis=0) - X.min(axis=0)) / 2.0
