"""NumPy values of IR expressions: what the results report for transformed parameters, one draw at a time."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
from scipy import special

from gpdsl.ir import nodes as ir
from gpdsl.ir.structure import expression_refs

_FUNCTIONS = {
    "sqrt": np.sqrt, "exp": np.exp, "log": np.log, "inv_sqrt": lambda x: 1.0 / np.sqrt(x), "inv": lambda x: 1.0 / x,
    "square": np.square, "softplus": lambda x: np.logaddexp(0.0, x), "inv_logit": special.expit,
    "log1p_exp": lambda x: np.logaddexp(0.0, x), "abs": np.abs, "Phi": special.ndtr,
}
_REDUCTIONS = {"sum": np.sum, "mean": np.mean, "dot_product": np.dot}
_BINARY = {"+": np.add, "-": np.subtract, "*": np.multiply, "/": np.true_divide, "^": np.power}


def value(expr: ir.Expr, env: Mapping[str, np.ndarray]) -> np.ndarray:
    """The value of a checked expression.

    Parameters
    ----------
    expr : gpdsl.ir.nodes.Expr
        An expression of data, parameters and loop-free indexing (a transformed parameter's value).
    env : mapping of str to numpy.ndarray
        The value of every name it reads (data with their sizes, one draw of the parameters).

    Returns
    -------
    numpy.ndarray
        Float64, of the expression's shape.
    """
    if isinstance(expr, ir.Constant):
        return np.float64(expr.value)
    if isinstance(expr, ir.Ref):
        return np.asarray(env[expr.name], dtype=float)
    if isinstance(expr, ir.Index):
        key = tuple(_index(i, env) for i in expr.indices)
        return value(expr.base, env)[key]
    if isinstance(expr, ir.Binary):
        with np.errstate(all="ignore"):
            return _BINARY[expr.op](value(expr.left, env), value(expr.right, env))
    if isinstance(expr, ir.Negate):
        return -value(expr.operand, env)
    if isinstance(expr, ir.Apply):
        with np.errstate(all="ignore"):
            return _FUNCTIONS[expr.function](value(expr.args[0], env))
    if isinstance(expr, ir.Reduction):
        return np.float64(_REDUCTIONS[expr.function](*(value(a, env) for a in expr.args)))
    if isinstance(expr, ir.MatrixProduct):
        return value(expr.left, env) @ value(expr.right, env)
    if isinstance(expr, ir.VectorLiteral):
        return np.array([value(i, env) for i in expr.items], dtype=float)
    if isinstance(expr, ir.Project):
        return np.einsum("qnd,nd->nq", value(expr.weights, env), value(expr.inputs, env))
    raise TypeError(f"no NumPy value for {type(expr).__name__}")


def _index(index, env):
    """A 1-based index (an int, an int array or a slice) as a 0-based NumPy one."""
    if isinstance(index, ir.Slice):
        return slice(int(value(index.start, env)) - 1, int(value(index.stop, env)))
    return np.asarray(value(index, env)).astype(np.int64) - 1


def transformed_draws(model: ir.Model, data: Mapping[str, np.ndarray],
                      posterior: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The draws of each transformed parameter of ``model``, from the draws of what it reads.

    Parameters
    ----------
    model : gpdsl.ir.nodes.Model
    data : mapping of str to array_like
        The data the method ran on.
    posterior : mapping of str to numpy.ndarray
        Draws shaped ``(chain, draw, *shape)``.

    Returns
    -------
    dict of str to numpy.ndarray
        ``(chain, draw, *shape)`` per transformed parameter whose names all have draws (a method that does
        not report a parameter reports no value computed from it).
    """
    out = {}
    for name, transformed in model.transformed.items():
        reads = expression_refs(transformed.value) - set(data)
        if not reads <= set(posterior):
            continue
        chains, draws = next(iter(posterior.values())).shape[:2] if posterior else (1, 1)
        values = [value(transformed.value, {**data, **{n: posterior[n][c, d] for n in reads}})
                  for c in range(chains) for d in range(draws)]
        out[name] = np.reshape(np.asarray(values, dtype=float), (chains, draws) + np.shape(values[0]))
    return out

