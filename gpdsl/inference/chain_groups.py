"""Chains advanced in groups: one vmap per group, the groups run one after another here or elsewhere.

XLA's arithmetic for a chain depends on the batch the chain is vmapped in (its size and the chain's place
in it: reductions and vectorised loops are laid out per batch), so the last bits of a chain's draws differ
between a vmap over all chains and a vmap over part of them. They do not depend on where a group runs:
the same group gives the same bits in this process and in a Dask worker (same CPU type and versions). A
run split into groups, locally or on a scheduler, therefore equals bit for bit any other run with the
same seed and the same groups, and the results record the groups (root attribute ``chain_groups``).
"""

from __future__ import annotations

from contextlib import contextmanager

import jax
import numpy as np

from gpdsl.inference.driver import CHAIN_EXECUTOR, ChainResult

TIMING_NAMES = ("compile", "warmup", "sampling")


def chain_blocks(num_chains: int, groups: int) -> list[tuple[int, int]]:
    """``groups`` contiguous blocks ``(start, stop)`` of the chains, sizes as equal as possible (larger first).

    Parameters
    ----------
    num_chains : int
    groups : int
        Between 1 and ``num_chains``.

    Returns
    -------
    list of (int, int)
    """
    if not 1 <= groups <= num_chains:
        raise ValueError(f"{groups} groups of {num_chains} chains: give 1 to {num_chains}")
    sizes = [num_chains // groups + (1 if g < num_chains % groups else 0) for g in range(groups)]
    stops = np.cumsum(sizes)
    return [(int(stop - size), int(stop)) for size, stop in zip(sizes, stops)]


def gathered(parts: list[ChainResult], concurrent: bool = False) -> ChainResult:
    """One :class:`ChainResult` of the groups' results, in chain order.

    Parameters
    ----------
    parts : list of ChainResult
        One per group, in the order of their blocks.
    concurrent : bool
        The groups ran at the same time: each phase took the longest group's seconds (else their sum).
    """
    join = lambda *leaves: np.concatenate([np.asarray(leaf) for leaf in leaves], axis=0)  # noqa: E731
    first = parts[0]
    combine = max if concurrent else sum
    timings = {name: float(combine(part.timings.get(name, 0.0) for part in parts)) for name in TIMING_NAMES}
    timings.update(total=float(combine(part.timings.get("total", 0.0) for part in parts)), resumed_at=0)
    warmup = (None, None) if first.warmup_draws is None else (
        jax.tree.map(join, *[p.warmup_draws for p in parts]), jax.tree.map(join, *[p.warmup_infos for p in parts]))
    return ChainResult(draws=jax.tree.map(join, *[p.draws for p in parts]),
                       infos=jax.tree.map(join, *[p.infos for p in parts]),
                       final_state=jax.tree.map(join, *[p.final_state for p in parts]),
                       num_warmup=first.num_warmup, num_draws=first.num_draws, timings=timings,
                       warmup_draws=warmup[0], warmup_infos=warmup[1],
                       stuck_chains=[chain for part in parts for chain in part.stuck_chains],
                       stuck_described="; ".join(part.stuck_described for part in parts if part.stuck_described))


def in_process(groups: int):
    """A chain executor that advances ``groups`` groups of the chains here, one after another."""
    def executor(run_block, num_chains):
        return gathered([run_block(chain_block=block) for block in chain_blocks(num_chains, groups)])

    return executor


@contextmanager
def chains_run_by(executor):
    """Within the block, :func:`gpdsl.inference.driver.run_chains` hands its chains to ``executor`` (None: itself)."""
    token = CHAIN_EXECUTOR.set(executor)
    try:
        yield
    finally:
        CHAIN_EXECUTOR.reset(token)
