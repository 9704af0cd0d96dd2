"""The dependency graph of latent variables: no latent value may be built from itself.

``X ~ gp(Z, k)`` makes ``X`` depend on ``Z``: ``Z`` must be set before ``X`` is. A cycle
(``X ~ gp(X, k)``, or ``X ~ gp(Z, k); Z ~ gp(X, k)``) has no order in which to set them, and the Stan
program would read a value before it is set.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence

from gpdsl.errors import ModelCheckError
from gpdsl.syntax import ast


def distributions(statements: Iterable[ast.Statement]) -> Iterator[ast.Tilde]:
    """The ``~`` statements among ``statements``, loops' bodies included, in source order."""
    for statement in statements:
        if isinstance(statement, ast.For):
            yield from distributions(statement.body)
        else:
            yield statement


def verify_acyclic(statements: Sequence[ast.Tilde], latent: set[str]):
    """Raise at the first statement, in source order, that closes a cycle among latent variables.

    Parameters
    ----------
    statements : sequence of Tilde
        The ``~`` statements (declared priors as statements too), in source order.
    latent : set of str
        The names of the latent variables: the nodes of the graph. Other names (data, parameters, loop
        variables) are not followed.

    Raises
    ------
    ModelCheckError
        ``cycle X -> Z -> X`` (``a -> b``: a's distribution uses b) at the reference that closes it. An
        indexed target may use other elements of itself (``x[i] ~ normal(x[i - 1], 1)``).
    """
    uses: dict[str, list[str]] = {name: [] for name in latent}
    for statement in statements:
        target = statement.target
        if target.name not in latent:
            continue
        for ref in ast.references(statement.distribution):
            if ref.name not in latent or (ref.name == target.name and target.indices):
                continue
            path = _path(uses, ref.name, target.name)
            if path is not None:
                cycle = " -> ".join([*path, ref.name])
                raise ModelCheckError(
                    f"cycle {cycle}: '{target.name}' cannot depend on itself", ref.span,
                    "a -> b: a's distribution uses b; a latent value cannot be built from itself, directly "
                    "or through others")
            uses[target.name].append(ref.name)


def _path(uses: Mapping[str, list[str]], start: str, goal: str) -> list[str] | None:
    """A path ``start -> ... -> goal`` along ``uses``, or None."""
    stack, seen = [[start]], {start}
    while stack:
        path = stack.pop()
        if path[-1] == goal:
            return path
        for name in reversed(uses[path[-1]]):
            if name not in seen:
                seen.add(name)
                stack.append([*path, name])
    return None
