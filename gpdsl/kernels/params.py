"""Hyperparameter conversion, input-column selection and numerically safe helpers."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from gpdsl.errors import ModelCheckError


def as_param(value, name: str, kernel: str, vector_allowed: bool, integer: bool = False,
             half_integer: bool = False, matrix: bool = False):
    """Convert a hyperparameter to a float64 JAX array (an integer one to a Python int), checking it.

    Parameters
    ----------
    value : float or array_like
        A number, array or tracer.
    name, kernel : str
        Parameter and kernel names, for the error message.
    vector_allowed : bool
        Whether a vector (one value per input dimension or per component) is accepted.
    integer : bool
        Whether the value must be a constant whole number of at least 1.
    half_integer : bool
        Whether the value must be a constant ``p + 1/2`` with a whole ``p >= 0`` (returned as a float).
    matrix : bool
        Whether the value must be a matrix.

    Raises
    ------
    ModelCheckError
        The value has too many dimensions, or is not a whole number of at least 1 (a half-integer) where
        one is needed.
    """
    if integer:
        return _whole(value, name, kernel)
    if half_integer:
        return _half_integer(value, name, kernel)
    array = jnp.asarray(value, dtype=jnp.float64)
    if matrix:
        if array.ndim != 2:
            raise ModelCheckError(f"{kernel}() parameter '{name}' must be a matrix, got shape {array.shape}")
        return array
    max_ndim = 1 if vector_allowed else 0
    if array.ndim > max_ndim:
        allowed = "a scalar or a vector" if vector_allowed else "a scalar"
        raise ModelCheckError(f"{kernel}() parameter '{name}' must be {allowed}, got shape {array.shape}")
    return array


def _whole(value, name: str, kernel: str) -> int:
    """A constant whole number of at least 1 as a Python int (converted without tracing, so also under jit)."""
    if isinstance(value, jax.core.Tracer):
        raise ModelCheckError(f"{kernel}() parameter '{name}' must be a constant whole number, not a traced value")
    if np.ndim(value) != 0:
        raise ModelCheckError(f"{kernel}() parameter '{name}' must be a scalar, got shape {np.shape(value)}")
    number = float(value)
    if not (number.is_integer() and number >= 1):
        raise ModelCheckError(f"{kernel}() parameter '{name}' must be a whole number of at least 1, got {number:g}")
    return int(number)


def _half_integer(value, name: str, kernel: str) -> float:
    """A constant ``p + 1/2`` (``p >= 0`` whole) as a Python float (converted without tracing)."""
    if isinstance(value, jax.core.Tracer):
        raise ModelCheckError(f"{kernel}() parameter '{name}' must be a constant half-integer, not a traced value")
    if np.ndim(value) != 0:
        raise ModelCheckError(f"{kernel}() parameter '{name}' must be a scalar, got shape {np.shape(value)}")
    number = float(value)
    if not is_half_integer(number):
        raise ModelCheckError(f"{kernel}() parameter '{name}' must be one of 1/2, 3/2, 5/2, ..., got {number:g}")
    return number


def is_half_integer(number: float) -> bool:
    """Whether ``number`` is ``p + 1/2`` for a whole ``p >= 0``."""
    return number > 0 and (number - 0.5).is_integer()


def check_ard(param, name: str, kernel: str, input_dim: int) -> None:
    """Raise ModelCheckError when a vector hyperparameter does not match the input dimension."""
    if param.ndim == 1 and param.shape[0] not in (1, input_dim):
        raise ModelCheckError(
            f"{kernel}() parameter '{name}' has {param.shape[0]} values but the kernel sees "
            f"{input_dim} input dimension(s)"
        )


def normalise_active_dims(active_dims):
    """Turn ``None``, an int, a sequence of ints or a slice into a hashable static form.

    Returns ``None``, a tuple of ints, or ``("slice", start, stop, step)``.
    """
    if active_dims is None:
        return None
    if isinstance(active_dims, slice):
        return ("slice", active_dims.start, active_dims.stop, active_dims.step)
    if isinstance(active_dims, int):
        return (active_dims,)
    dims = tuple(active_dims)
    if not dims or not all(isinstance(d, int) and not isinstance(d, bool) for d in dims):
        raise ModelCheckError(f"active_dims must be a non-empty sequence of ints or a slice, got {active_dims!r}")
    return dims


def select_columns(x, active_dims):
    """Restrict the last axis of ``x`` to ``active_dims`` (in normalised form)."""
    if active_dims is None:
        return x
    if active_dims[0] == "slice":
        return x[..., slice(*active_dims[1:])]
    if max(active_dims) >= x.shape[-1] or min(active_dims) < -x.shape[-1]:
        raise ModelCheckError(f"active_dims {active_dims} out of range for inputs with {x.shape[-1]} column(s)")
    return x[..., np.asarray(active_dims)]


def safe_sqrt(value):
    """Square root whose gradient is zero, not NaN, at zero."""
    positive = value > 0
    return jnp.where(positive, jnp.sqrt(jnp.where(positive, value, 1.0)), 0.0)


_UNROLLED_INPUT_COLUMNS = 16


def sum_over_inputs(terms):
    """Sum of a single point's per-input-column terms (last axis).

    Kernels are written for one pair of points and vectorised over all pairs, so this sum becomes a
    reduction over a short minor axis of an ``(n1, n2, d)`` array, which XLA's CPU backend runs about
    3x slower than ``d`` elementwise additions of ``(n1, n2)`` arrays. Up to
    ``_UNROLLED_INPUT_COLUMNS`` columns are therefore added one by one.
    """
    terms = jnp.asarray(terms)
    if terms.ndim == 0:
        return terms
    if terms.shape[-1] > _UNROLLED_INPUT_COLUMNS:
        return jnp.sum(terms, axis=-1)
    total = terms[..., 0]
    for column in range(1, terms.shape[-1]):
        total = total + terms[..., column]
    return total


def scaled_sqdist(x1, x2, lengthscale=None, inv_ls2=None):
    """``sum_d (x1_d - x2_d)^2 / l_d^2``, or ``sum_d w_d (x1_d - x2_d)^2`` given ``inv_ls2``."""
    diff2 = jnp.square(x1 - x2)
    if inv_ls2 is not None:
        return sum_over_inputs(inv_ls2 * diff2)
    return sum_over_inputs(diff2 / jnp.square(lengthscale))
