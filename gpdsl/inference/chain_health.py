"""Chains that cannot start or did not move, named with their parameter values: the checks
:func:`gpdsl.inference.driver.run_chains` makes for every Markov chain method.

A chain cannot start when its initial state holds a value that is not finite: a log density that is -inf or NaN,
a kernel matrix whose Cholesky factor is NaN (not positive definite even after jitter), a likelihood of -inf. Every
number an engine keeps in its state is finite in a chain that can move, so the check needs nothing from the engine.
A chain is stuck when, through a warmup of at least :data:`MIN_JUDGED_WARMUP` iterations, none of its proposals
was accepted (``accepted``, or else ``acceptance_rate``, in the transition's infos) or none of the values it records
changed.
"""

from __future__ import annotations

from typing import Callable

import jax
import numpy as np

from gpdsl.errors import NumericalError

MIN_JUDGED_WARMUP = 50
"""Shorter warmups are not judged: a chain accepting a quarter of its proposals accepts none of ``n`` with
probability ``0.75 ** n`` (6% for 10, 6e-7 for 50)."""
TRY_AT_START = ("look at the priors (the chains start at draws from them) and the kernel, which must be positive "
                "definite at every value they give, and the likelihood; or start the chains elsewhere with "
                "--init-value NAME=VALUE (initial_values in Python)")
TRY_WHEN_STUCK = ("look at the priors and the starting values shown, start the chains elsewhere with --init-value "
                  "NAME=VALUE (initial_values in Python), or run a longer warmup")


class ChainStartError(NumericalError):
    """Chains whose initial state is not finite: the run stops before its first iteration."""


class StuckChainsError(NumericalError):
    """Every chain stuck through warmup: the run stops before sampling."""


def _per_chain_finite(tree) -> np.ndarray:
    """Per chain (leading axis), whether every floating value of the pytree is finite."""
    finite = None
    for leaf in jax.tree.leaves(tree):
        leaf = np.asarray(leaf)
        if not np.issubdtype(leaf.dtype, np.floating) and not np.issubdtype(leaf.dtype, np.complexfloating):
            continue
        ok = np.isfinite(leaf).reshape(leaf.shape[0], -1).all(axis=1)
        finite = ok if finite is None else finite & ok
    return finite


def describe_chains(chains, states, describe: Callable | None, first_chain: int = 0) -> str:
    """``chain 2 (sigma = -0.4, tau = [1.2 0.3]); chain 3 (...)``: chains counted from 1 (the states' first being
    chain ``first_chain``, from 0), values from ``describe``."""
    parts = []
    for chain in chains:
        values = ""
        if describe is not None:
            one = jax.tree.map(lambda leaf: np.asarray(leaf)[chain], states)
            values = " (" + ", ".join(f"{name} = {np.array2string(np.asarray(value), precision=4)}"
                                      for name, value in describe(one).items()) + ")"
        parts.append(f"chain {first_chain + chain + 1}{values}")
    return "; ".join(parts)


def verify_start(states, describe: Callable | None = None, first_chain: int = 0) -> None:
    """Refuse initial states (leading chain axis) holding a value that is not finite, naming each such chain.

    Parameters
    ----------
    states : pytree
        The chains' initial states.
    describe : callable, optional
        ``describe(state_of_one_chain) -> {name: value}``, the parameter values to show.
    first_chain : int
        The number (from 0) of the first of the states' chains among all the run's.

    Raises
    ------
    ChainStartError
    """
    finite = _per_chain_finite(states)
    if finite is None or finite.all():
        return
    bad = np.flatnonzero(~finite)
    count = f"{bad.size} of {finite.size} chains" if finite.size > 1 else "the chain"
    raise ChainStartError(f"{count} cannot start: the log density (or a kernel's Cholesky factor) is -inf or NaN at "
                          f"the initial values: {describe_chains(bad, states, describe, first_chain)}", hint=TRY_AT_START)


class WarmupWatch:
    """Per chain, whether anything moved during warmup: fed every warmup segment's infos and recorded values."""

    def __init__(self):
        self.moved = None
        self.first = None
        self.iterations = 0

    def add(self, draws, infos) -> None:
        """Take one warmup segment (every leaf shaped ``(chain, iteration, ...)``)."""
        accepted = getattr(infos, "accepted", None)
        if accepted is None:
            accepted = getattr(infos, "acceptance_rate", None)
        if accepted is not None:
            accepted = np.asarray(accepted)
            moved = (accepted.reshape(accepted.shape[0], -1) > 0).any(axis=1)
        else:
            leaves = [np.asarray(leaf) for leaf in jax.tree.leaves(draws)]
            if self.first is None:
                self.first = [leaf[:, :1] for leaf in leaves]
            moved = np.zeros(leaves[0].shape[0], bool)
            for first, leaf in zip(self.first, leaves):
                moved |= (leaf != first).reshape(leaf.shape[0], -1).any(axis=1)
        self.moved = moved if self.moved is None else self.moved | moved
        self.iterations += int(np.asarray(jax.tree.leaves(draws)[0]).shape[1])

    def stuck(self) -> list[int]:
        """The chains (from 0) that never moved; empty after fewer than :data:`MIN_JUDGED_WARMUP` iterations."""
        if self.moved is None or self.iterations < MIN_JUDGED_WARMUP:
            return []
        return [int(chain) for chain in np.flatnonzero(~self.moved)]


def stuck_message(num_stuck: int, num_chains: int, described: str) -> str:
    """One sentence naming the stuck chains: ``described`` is :func:`describe_chains` of them."""
    count = f"{num_stuck} of {num_chains} chains" if num_chains > 1 else "the chain"
    return f"{count} did not move in warmup (no proposal accepted): {described}"
