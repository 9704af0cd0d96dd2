"""Static descriptions of kernel constructors, for checking calls without building kernels."""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from typing import Iterable

from gpdsl.errors import ModelCheckError
from gpdsl.source import Span


@dataclass(frozen=True)
class ParamSpec:
    """One hyperparameter of a kernel constructor.

    Parameters
    ----------
    name : str
        Keyword name, as in the Python constructor and the model language.
    default : float or None
        Value used when the argument is omitted; ``None`` when there is no default.
    required : bool
        Whether the argument must be given (alone, not as part of an exclusive group).
    ard_allowed : bool
        Whether a vector (one value per active input dimension) is accepted.
    positive : bool
        Whether the value must be strictly positive.
    """

    name: str
    default: float | None = None
    required: bool = False
    ard_allowed: bool = False
    positive: bool = True


@dataclass(frozen=True)
class KernelSpec:
    """The call signature of one kernel constructor.

    Parameters
    ----------
    name : str
        Name in the model language (``"rbf"``).
    params : dict of str to ParamSpec
        Accepted hyperparameters, in positional order.
    exclusive : tuple of tuple of str
        Groups of which exactly one member must be given, e.g. ``(("lengthscale", "inv_ls2"),)``.
    """

    name: str
    params: dict[str, ParamSpec]
    exclusive: tuple[tuple[str, ...], ...] = field(default=())

    @property
    def positional(self) -> tuple[str, ...]:
        """Parameter names in the order positional arguments bind to them."""
        return tuple(self.params)

    @property
    def required(self) -> frozenset[str]:
        """Names that must always be given."""
        return frozenset(n for n, p in self.params.items() if p.required)

    def bind(self, n_positional: int, keywords: Iterable[str], span: Span | None = None) -> tuple[str, ...]:
        """Check a call's argument names and return the parameter each argument binds to.

        Parameters
        ----------
        n_positional : int
            Number of positional arguments, which bind in :attr:`positional` order.
        keywords : iterable of str
            Keyword argument names, in call order.
        span : Span, optional
            Location of the call, attached to any error.

        Returns
        -------
        tuple of str
            Parameter names: the positional ones, then the keywords.

        Raises
        ------
        ModelCheckError
            Too many positional arguments, unknown or repeated names, a missing required
            parameter, or an exclusive group with none or several members given.
        """
        keywords = tuple(keywords)
        order = self.positional
        if n_positional > len(order):
            raise ModelCheckError(
                f"{self.name}() takes at most {len(order)} positional arguments ({', '.join(order)}), "
                f"got {n_positional}",
                span,
            )
        bound = list(order[:n_positional])
        for name in keywords:
            if name not in self.params:
                close = difflib.get_close_matches(name, order, n=1)
                hint = f"did you mean '{close[0]}'?" if close else f"accepted: {', '.join(order)}"
                raise ModelCheckError(f"{self.name}() has no parameter '{name}'", span, hint)
            if name in bound:
                raise ModelCheckError(f"{self.name}() got parameter '{name}' more than once", span)
            bound.append(name)
        missing = sorted(self.required - set(bound))
        if missing:
            raise ModelCheckError(f"{self.name}() is missing required parameter '{missing[0]}'", span)
        for group in self.exclusive:
            given = [n for n in group if n in bound]
            if len(given) != 1:
                raise ModelCheckError(
                    f"{self.name}() needs exactly one of {', '.join(group)}; got "
                    + (", ".join(given) if given else "none"),
                    span,
                )
        return tuple(bound)
