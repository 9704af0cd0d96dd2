"""The registry of closed-form psi statistics, and their assembly for a kernel tree.

A kernel tree with closed forms is flattened into a list of ``(coefficient, term)`` pairs, each
term a leaf kernel written in the full ``Q``-dimensional latent space (a kernel's ``active_dims``
become zero entries of its per-dimension parameters, see :func:`full_dims`). A term knows its own
``psi0`` and ``psi1``; ``Psi2`` of the tree is the sum over all ordered pairs of terms of
``E[k_i(x, z_m) k_j(x, z_m')]``, each from a registered cross rule (a term's own ``Psi2`` is its
pair with itself). Three tables hold the closed forms, filled by decorators in the module of each
kernel family (:mod:`~gpdsl.kernels.psi.rbf`, :mod:`~gpdsl.kernels.psi.linear`,
:mod:`~gpdsl.kernels.psi.static`, :mod:`~gpdsl.kernels.psi.composite`):

* :func:`register_term`: a leaf kernel type and the term class that writes it;
* :func:`register_expansion`: a composite kernel type and its weighted child kernels;
* :func:`register_cross`: the expectation of the product of two term classes, or of one term
  class with any other term.

:func:`unregister_closed_form` removes a kernel type's entries again.

Lookups are by exact type: a subclass may change the kernel's function, so it does not inherit its
parent's closed form. Weighted sums over points use a row-weight matrix ``W`` of shape ``(N, G)``
and return ``(G, M, M)``.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import combinations_with_replacement
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from gpdsl.kernels.params import check_ard, select_columns

_TERMS: dict[type, type] = {}
_EXPANSIONS: dict[type, Callable] = {}
_CROSS: dict[tuple[type, type], Callable] = {}
_CROSS_ANY: dict[type, Callable] = {}


class Inputs(NamedTuple):
    """What a cross rule integrates over.

    Attributes
    ----------
    Z : jax.Array, shape (M, Q)
        Inducing inputs.
    mean, variance : jax.Array, shape (N, Q)
        Means and diagonal variances of ``q(x_n)``.
    W : jax.Array, shape (N, G)
        Row weights: a rule returns ``sum_n W[n, g] E[k1(x_n, z_m) k2(x_n, z_m')]``, shape ``(G, M, M)``.
    """

    Z: jax.Array
    mean: jax.Array
    variance: jax.Array
    W: jax.Array


def register_term(kernel_type: type):
    """Class decorator: the term class that gives ``kernel_type`` its closed-form psi statistics.

    The term class is a pytree (typically a ``NamedTuple``) with

    * ``from_kernel(kernel, Q)`` (a classmethod): the term of a kernel over ``Q`` latent dimensions;
    * ``psi0(mean, variance)``: shape ``(N,)``;
    * ``psi1(Z, mean, variance)``: shape ``(N, M)``.

    Its ``Psi2`` is the cross rule of the pair ``(term, term)`` (:func:`register_cross`), which
    must be registered too.

    Parameters
    ----------
    kernel_type : type
        A leaf kernel class.
    """
    return _entry(_TERMS, kernel_type)


def register_expansion(kernel_type: type):
    """Function decorator: how a composite kernel splits into weighted child kernels.

    The function maps ``(kernel, coefficient)`` to a list of ``(coefficient, child)`` pairs, so that
    ``coefficient * kernel`` is the sum of ``c * child`` over them, or to ``None`` when this
    instance has no closed form (a product of two non-constant kernels).

    Parameters
    ----------
    kernel_type : type
        A composite kernel class.
    """
    return _entry(_EXPANSIONS, kernel_type)


def register_cross(first: type, second: type | None = None):
    """Function decorator: the closed form of ``sum_n W[n, g] E[k1(x_n, z_m) k2(x_n, z_m')]``.

    The rule is called as ``rule(t1, t2, psi1_1, psi1_2, inputs, symmetric)`` with the two terms,
    their ``psi1`` and the :class:`Inputs`, and returns shape ``(G, M, M)``; ``symmetric`` is True
    when ``t1`` and ``t2`` are the same term (only then may the rule use the symmetry of the result).
    The pair ``(second, first)`` is served by the transpose. With ``second=None`` the rule serves
    every pair that contains a ``first`` term, on either side; such rules (e.g. white noise, which
    never correlates a point with an inducing input) are tried first, in the order registered.

    Parameters
    ----------
    first : type
        A term class.
    second : type, optional
        The other term class; ``None`` for any.
    """
    return _entry(_CROSS_ANY, first) if second is None else _entry(_CROSS, (first, second))


def unregister_closed_form(kernel_type: type) -> None:
    """Remove the closed form of ``kernel_type`` (for plugins and tests).

    Drops its :func:`register_term` entry and every :func:`register_cross` rule of that term class (unless
    another kernel type still uses the term class), or its :func:`register_expansion` entry.

    Parameters
    ----------
    kernel_type : type
        A kernel class registered with :func:`register_term` or :func:`register_expansion`.
    """
    _EXPANSIONS.pop(kernel_type, None)
    term = _TERMS.pop(kernel_type, None)
    if term is None or term in _TERMS.values():
        return
    _CROSS_ANY.pop(term, None)
    for pair in [pair for pair in _CROSS if term in pair]:
        del _CROSS[pair]


def _entry(table: dict, key):
    """A decorator that files what it decorates in ``table`` under ``key`` (a later entry replaces it)."""

    def decorate(value):
        table[key] = value
        return value

    return decorate


def _cross_rule(first: type, second: type):
    """The rule for a pair of term classes and whether it computes the transpose, or ``(None, False)``."""
    for kind, rule in _CROSS_ANY.items():
        if kind is first or kind is second:
            return rule, False
    if (first, second) in _CROSS:
        return _CROSS[(first, second)], False
    return _CROSS.get((second, first)), True


def _collect_terms(kernel, kinds: dict):
    """Record the term class of every leaf of ``kernel`` in ``kinds``; the first sub-kernel without a
    closed form, or ``None``."""
    kind = type(kernel)
    if kind in _TERMS:
        kinds.setdefault(_TERMS[kind], kind.__name__)
        return None
    if kind not in _EXPANSIONS:
        return kernel
    parts = _EXPANSIONS[kind](kernel, 1.0)
    if parts is None:
        return kernel
    for _, part in parts:
        missing = _collect_terms(part, kinds)
        if missing is not None:
            return missing
    return None


def closed_form_gap(kernel) -> str | None:
    """What keeps ``kernel`` from closed-form psi statistics, or ``None`` if nothing does.

    Parameters
    ----------
    kernel : Kernel
        A kernel tree.

    Returns
    -------
    str or None
        ``"kernel <Name>"`` for the first sub-kernel with no registered closed form, or
        ``"the cross term of kernels <A> and <B>"`` for two parts of a sum whose product has no
        registered expectation.
    """
    kinds: dict[type, str] = {}
    missing = _collect_terms(kernel, kinds)
    if missing is not None:
        return f"kernel {type(missing).__name__}"
    for first, second in combinations_with_replacement(kinds, 2):
        if _cross_rule(first, second)[0] is None:
            if first is second:
                return f"kernel {kinds[first]}"
            return f"the cross term of kernels {kinds[first]} and {kinds[second]}"
    return None


def analytic_supported(kernel) -> bool:
    """Whether ``kind="analytic"`` psi statistics exist for the kernel tree ``kernel``.

    True when every leaf has a registered closed form (built in: RBF, Linear, Constant, White), every
    composite an expansion (sums, scalar scalings, products with a Constant) and every pair of leaf
    kinds a cross rule; False for any other kernel (Matérn, Periodic, MLP, ...) or a product of two
    non-constant kernels. :func:`closed_form_gap` says why.
    """
    return closed_form_gap(kernel) is None


def full_dims(value, kernel, name: str, Q: int):
    """A per-active-dimension parameter of ``kernel`` scattered into a length-``Q`` vector (0 elsewhere).

    Parameters
    ----------
    value : array_like
        A scalar or one value per active dimension.
    kernel : Kernel
        The kernel whose ``active_dims`` place the values.
    name : str
        The parameter's name, for the shape error.
    Q : int
        Latent dimension.

    Returns
    -------
    jax.Array, shape (Q,)
    """
    dims = select_columns(np.arange(Q), kernel.active_dims)
    check_ard(value, name, type(kernel).__name__.lower(), len(dims))
    value = jnp.broadcast_to(value, (len(dims),))
    if np.array_equal(dims, np.arange(Q)):
        return value
    return jnp.zeros(Q).at[dims].add(value)


def kernel_terms(kernel, Q: int, coefficient=1.0) -> list:
    """The ``(coefficient, term)`` pairs of a kernel tree with closed forms, in the order of its leaves."""
    kind = type(kernel)
    if kind in _TERMS:
        return [(coefficient, _TERMS[kind].from_kernel(kernel, Q))]
    return [pair for c, part in _EXPANSIONS[kind](kernel, coefficient) for pair in kernel_terms(part, Q, c)]


def cross_expectation(t1, t2, psi1_1, psi1_2, inputs: Inputs, symmetric: bool = False):
    """``sum_n W[n, g] E[k1(x_n, z_m) k2(x_n, z_m')]`` of two terms, shape ``(G, M, M)``."""
    rule, transposed = _cross_rule(type(t1), type(t2))
    if transposed:
        return jnp.swapaxes(rule(t2, t1, psi1_2, psi1_1, inputs, symmetric), -1, -2)
    return rule(t1, t2, psi1_1, psi1_2, inputs, symmetric)


def analytic_statistics(kernel, Z, mean, variance, W):
    """Closed-form ``psi0`` (N,), ``psi1`` (N, M) and weighted ``psi2`` (G, M, M).

    Parameters
    ----------
    kernel : Kernel
        A tree for which :func:`analytic_supported` is True.
    Z : jax.Array, shape (M, Q)
        Inducing inputs.
    mean, variance : jax.Array, shape (N, Q)
        Means and diagonal variances of ``q(x_n)``.
    W : jax.Array, shape (N, G)
        Row weights: ``psi2[g] = sum_n W[n, g] psi2_n``.

    Returns
    -------
    tuple of jax.Array
        ``(psi0, psi1, psi2)``.
    """
    terms = kernel_terms(kernel, mean.shape[1])
    psi0s = [term.psi0(mean, variance) for _, term in terms]
    psi1s = [term.psi1(Z, mean, variance) for _, term in terms]
    psi0 = sum(c * p for (c, _), p in zip(terms, psi0s))
    psi1 = sum(c * p for (c, _), p in zip(terms, psi1s))
    inputs = Inputs(Z, mean, variance, W)
    psi2 = 0.0
    for i, (ci, ti) in enumerate(terms):
        psi2 = psi2 + ci * ci * cross_expectation(ti, ti, psi1s[i], psi1s[i], inputs, symmetric=True)
        for j in range(i + 1, len(terms)):
            cj, tj = terms[j]
            cross = cross_expectation(ti, tj, psi1s[i], psi1s[j], inputs)
            psi2 = psi2 + ci * cj * (cross + jnp.swapaxes(cross, -1, -2))
    return psi0, psi1, psi2
