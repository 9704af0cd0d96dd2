"""The one sampling loop: compiled segments of a pure transition, vmapped over chains.

A transition is ``step_fn(rng_key, state, adapting) -> (state, info)`` with ``state`` and ``info``
pytrees. :func:`run_chains` compiles ``segment_size`` iterations at a time (``lax.scan`` inside
``jit``, ``vmap`` over chains) and loops in Python only over segments, to show progress and to write
checkpoints. Iteration ``i`` of chain ``c`` uses the key ``split(fold_in(rng_key, i), chains)[c]``,
so results depend only on the key, never on the segment size or on where a run was resumed.

When the run's platform (:func:`gpdsl.numerics.devices.run_platform`: the CPU, or a GPU with ``--device gpu``)
has several devices (on CPU: ``XLA_FLAGS=--xla_force_host_platform_device_count=2`` set before JAX starts, as
``import gpdsl`` does; on a GPU machine: its GPUs), the chains are split over them with ``shard_map`` along the
chain axis (each device runs a vmap over its share), the same code on both; with one device (one GPU) all chains
are one vmap.

A run can also advance only a block of its chains (``chain_block=(start, stop)``: chain ``c`` of the
block still uses key ``c`` of the full split), and a chain executor set in :data:`CHAIN_EXECUTOR`
(:mod:`gpdsl.inference.chain_groups`, :mod:`gpdsl.scale_out`) decides where the blocks run, e.g. as
Dask tasks.

Before the first iteration every chain's initial state must be finite, and after warmup a chain that never moved
is named (:mod:`gpdsl.inference.chain_health`): when all of them are stuck the run stops before sampling, otherwise
:attr:`ChainResult.stuck_chains` lists them.
"""

from __future__ import annotations

import json
import time
from contextvars import ContextVar
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.sharding import Mesh, PartitionSpec

import gpdsl.numerics.float64  # noqa: F401
from gpdsl.storage import compilation_cache
from gpdsl.storage.atomic import atomic_target
from gpdsl.errors import GpdslError
from gpdsl.numerics.devices import run_devices
from gpdsl.inference.progress import bar as progress_bar
from gpdsl.inference.chain_health import (
    TRY_WHEN_STUCK,
    StuckChainsError,
    WarmupWatch,
    describe_chains,
    stuck_message,
    verify_start,
)

CHECKPOINT_VERSION = 1
SEGMENT_PARTS = ("compile", "warmup", "sampling")
"""The timings that add up segment by segment, recorded in the checkpoint with the wall seconds so far (``elapsed``)."""

CHAIN_EXECUTOR: ContextVar[Callable | None] = ContextVar("gpdsl_chain_executor", default=None)
"""``executor(run_block, num_chains) -> ChainResult`` that :func:`run_chains` hands its chains to when set;
``run_block(chain_block=(start, stop))`` runs one block of them here."""


@dataclass
class ChainResult:
    """Draws, per-iteration infos and timings of :func:`run_chains`.

    Attributes
    ----------
    draws : pytree
        ``extract(state)`` after each sampling iteration; every leaf shaped ``(chain, draw, ...)``.
    infos : pytree
        The transition's infos, every leaf shaped ``(chain, draw, ...)``.
    final_state : pytree
        The chains' last states (leading chain axis), to continue sampling.
    num_warmup, num_draws : int
        Iterations run in each phase.
    timings : dict
        Seconds: ``total`` (the whole call), ``compile`` (ahead-of-time compilation), ``warmup`` and
        ``sampling`` (compiled execution only, compilation excluded), ``resumed_at`` (the iteration
        a resumed run started from; 0 otherwise). A resumed run's seconds are those of all its segments: the
        checkpoint records the seconds so far, and the run adds its own.
    warmup_draws, warmup_infos : pytree or None
        As ``draws`` and ``infos`` for warmup, when ``keep_warmup`` was set.
    stuck_chains : list of int
        Chains (from 0) that did not move in warmup (:class:`~gpdsl.inference.chain_health.WarmupWatch`).
    stuck_described : str
        Those chains with their values (:func:`~gpdsl.inference.chain_health.describe_chains`).
    """

    draws: Any
    infos: Any
    final_state: Any
    num_warmup: int
    num_draws: int
    timings: dict = field(default_factory=dict)
    warmup_draws: Any = None
    warmup_infos: Any = None
    stuck_chains: list = field(default_factory=list)
    stuck_described: str = ""

    @property
    def num_chains(self) -> int:
        """Number of chains."""
        return int(jax.tree.leaves(self.final_state)[0].shape[0])

    @property
    def stuck_message(self) -> str | None:
        """A sentence naming the chains that did not move in warmup, with their values; None if there are none."""
        return stuck_message(len(self.stuck_chains), self.num_chains, self.stuck_described) if self.stuck_chains \
            else None

    def draws_per_second(self) -> float:
        """Sampling iterations per second of compiled execution, summed over chains."""
        seconds = self.timings.get("sampling", 0.0)
        return self.num_chains * self.num_draws / seconds if seconds > 0 else float("nan")


class Interrupted(GpdslError):
    """Raised by an ``on_segment`` callback to stop a run early; the checkpoint is already written."""


def _default_extract(state):
    return state.position


def run_chains(step_fn: Callable, initial_states, rng_key, num_warmup: int, num_draws: int, *,
               extract: Callable = _default_extract, segment_size: int = 100, progress: bool = True,
               checkpoint_path: str | Path | None = None, resume: bool = False, keep_warmup: bool = False,
               on_segment: Callable | None = None, chain_block: tuple[int, int] | None = None,
               checkpoint_identity: dict | None = None, describe: Callable | None = None,
               vectorised: bool = True, thin: int = 1) -> ChainResult:
    """Run chains of a transition in compiled segments.

    Parameters
    ----------
    step_fn : callable
        ``step_fn(rng_key, state, adapting) -> (state, info)`` for one chain; ``adapting`` is True
        during warmup (the transition may tune parameters kept in its state) and False afterwards.
    initial_states : pytree
        One state per chain, stacked on a leading chain axis.
    rng_key : jax.Array
        PRNG key (typed or raw ``uint32[2]``).
    num_warmup, num_draws : int
        Iterations of warmup (not returned unless ``keep_warmup``) and draws kept after it.
    extract : callable
        ``extract(state) -> pytree`` of the values to record; defaults to ``state.position``.
    segment_size : int
        Iterations per compiled segment.
    progress : bool
        Show a tqdm progress bar on stderr.
    checkpoint_path : str or Path, optional
        After each segment, write the draws so far and the chains' states there atomically (``.npz``).
    resume : bool
        Continue from ``checkpoint_path`` if it exists (same key, chains and iteration counts required).
        ``initial_states`` then only gives the state's structure.
    keep_warmup : bool
        Also return warmup draws and infos.
    on_segment : callable, optional
        ``on_segment(iteration, phase)`` called after each segment (and its checkpoint); raising
        :class:`Interrupted` (or anything else) stops the run.
    chain_block : (int, int), optional
        Advance only chains ``start`` to ``stop - 1`` of ``initial_states`` (no checkpoint); each still uses
        its own key of the split over all chains (XLA's rounding depends on the batch: the last bits of its
        draws can differ from a vmap over all chains, see :mod:`gpdsl.inference.chain_groups`). Without it,
        a chain executor set in :data:`CHAIN_EXECUTOR` runs the chains.
    checkpoint_identity : dict, optional
        What the checkpoint records about the run besides the driver's own counts (JSON-ready; see
        :mod:`gpdsl.storage.checkpoint`, which checks it before a run resumes).
    describe : callable, optional
        ``describe(state_of_one_chain) -> {name: value}``: the parameter values that name a chain that cannot start
        or is stuck.
    vectorised : bool
        Advance a device's chains together (``vmap``), or one after the other (``lax.map``): a transition whose
        work differs between chains (a loop to convergence, a branch that skips an expensive step) then does only
        each chain's own work, where a ``vmap`` runs every chain through the longest loop and both branches.
    thin : int
        Run ``num_draws * thin`` iterations after warmup and keep the first of every ``thin`` (draws and infos),
        as Stan does.

    Returns
    -------
    ChainResult

    Raises
    ------
    GpdslError
        The checkpoint does not match this run.
    ChainStartError
        A chain's initial state is not finite (its log density is -inf or NaN, its kernel not positive definite).
    StuckChainsError
        No chain moved in warmup (when all chains run here, not in blocks).
    """
    executor = CHAIN_EXECUTOR.get()
    if executor is not None and chain_block is None:
        run_block = partial(run_chains, step_fn, initial_states, rng_key, num_warmup, num_draws, extract=extract,
                            segment_size=segment_size, progress=False, keep_warmup=keep_warmup, describe=describe,
                            vectorised=vectorised, thin=thin)
        return executor(run_block, int(jax.tree.leaves(initial_states)[0].shape[0]))
    started = time.perf_counter()
    compilation_cache.enable()
    if num_warmup < 0 or num_draws < 0 or segment_size < 1 or thin < 1:
        raise ValueError("num_warmup and num_draws must be non-negative, segment_size and thin positive")
    rng_key = _typed_key(rng_key)
    states = jax.tree.map(jnp.asarray, initial_states)
    total_chains = int(jax.tree.leaves(states)[0].shape[0])
    block = _checked_block(chain_block, total_chains, checkpoint_path)
    states = jax.tree.map(lambda leaf: leaf[block[0]:block[1]], states) if chain_block is not None else states
    num_chains = block[1] - block[0]
    record = _Record(num_warmup, num_draws, num_chains, keep_warmup, checkpoint_identity, thin)
    runner = _SegmentRunner(step_fn, extract, rng_key, total_chains, block[0], vectorised)
    if resume and checkpoint_path is not None and Path(checkpoint_path).exists():
        states = record.load(checkpoint_path, states, rng_key, runner.output_shapes(states))
    if record.iteration == 0:
        verify_start(states, describe, first_chain=block[0])
    earlier = record.seconds.pop("elapsed", 0.0)
    timings = {**record.seconds, "resumed_at": record.iteration}

    total = num_warmup + num_draws * thin
    bar = progress_bar(total, initial=record.iteration, enabled=progress)
    try:
        while record.iteration < total:
            if record.iteration == num_warmup and chain_block is None:
                _stop_if_all_stuck(record.watch.stuck(), num_chains, states, describe)
            adapting = record.iteration < num_warmup
            phase_end = num_warmup if adapting else total
            length = min(segment_size, phase_end - record.iteration)
            if bar is not None and length not in runner.compiled:
                bar.set_description("compiling")
            compile_seconds = runner.prepare(states, length)
            timings["compile"] += compile_seconds
            if bar is not None:
                bar.set_description("warmup" if adapting else "sampling")
            tic = time.perf_counter()
            states, draws, infos = runner.run(states, record.iteration, length, adapting)
            jax.block_until_ready((states, draws, infos))
            timings["warmup" if adapting else "sampling"] += time.perf_counter() - tic
            record.append(draws, infos, length, adapting)
            if checkpoint_path is not None:
                record.seconds = {**{part: timings[part] for part in SEGMENT_PARTS},
                                  "elapsed": earlier + time.perf_counter() - started}
                record.save(checkpoint_path, states, rng_key)
            if bar is not None:
                bar.update(length)
            if on_segment is not None:
                on_segment(record.iteration, "warmup" if adapting else "sampling")
    finally:
        if bar is not None:
            bar.close()
    if record.sample_draws is None:
        empty = lambda s: np.zeros((s.shape[0], 0, *s.shape[2:]), s.dtype)  # noqa: E731
        draws, infos = jax.tree.map(empty, runner.output_shapes(states))
        record.sample_draws, record.sample_infos = [draws], [infos]
    timings["total"] = earlier + time.perf_counter() - started
    draws, infos = record.collected(sampling=True)
    warmup_draws, warmup_infos = record.collected(sampling=False) if keep_warmup else (None, None)
    stuck = record.watch.stuck()
    described = describe_chains(stuck, states, describe, block[0])
    return ChainResult(draws=draws, infos=infos, final_state=states, num_warmup=num_warmup, num_draws=num_draws,
                       timings=timings, warmup_draws=warmup_draws, warmup_infos=warmup_infos,
                       stuck_chains=[block[0] + chain for chain in stuck], stuck_described=described)


def segment_function(step_fn: Callable, rng_key, num_chains: int, *, extract: Callable = _default_extract,
                     vectorised: bool = True) -> Callable:
    """The function :func:`run_chains` compiles for ``num_chains`` chains (see its parameters).

    Returns
    -------
    callable
        ``segment(rng_key, states, start, adapting, length) -> (states, draws, infos)``: ``length`` (static)
        iterations from iteration ``start`` of every chain, as one ``lax.scan``; for ``jax.make_jaxpr`` (a test
        checks that no segment calls back to the host) or ``jax.jit(..., static_argnums=4)``.
    """
    return _SegmentRunner(step_fn, extract, _typed_key(rng_key), num_chains, 0, vectorised)._segment


def _typed_key(rng_key):
    """A typed PRNG key of a typed one or of raw ``uint32[2]`` key data."""
    if jnp.issubdtype(jnp.asarray(rng_key).dtype, jax.dtypes.prng_key):
        return rng_key
    return jax.random.wrap_key_data(jnp.asarray(rng_key, dtype=jnp.uint32))


def _stop_if_all_stuck(stuck, num_chains, states, describe):
    if stuck and len(stuck) == num_chains:
        raise StuckChainsError(stuck_message(len(stuck), num_chains, describe_chains(stuck, states, describe))
                               + "; stopped before sampling",
                               hint=TRY_WHEN_STUCK)


def _checked_block(chain_block, total_chains, checkpoint_path) -> tuple[int, int]:
    if chain_block is None:
        return 0, total_chains
    start, stop = (int(bound) for bound in chain_block)
    if not 0 <= start < stop <= total_chains:
        raise ValueError(f"chain_block {chain_block} is not a block of the {total_chains} chains")
    if checkpoint_path is not None:
        raise ValueError("a block of chains writes no checkpoint")
    return start, stop


def split_over_devices(batched: Callable, num_chains: int, split: tuple[bool, ...]) -> Callable:
    """``batched`` (a function vmapped over a leading chain axis) with its chains split over the run's devices
    (:func:`gpdsl.numerics.devices.run_devices`: the host devices on a CPU, the GPUs on a GPU machine).

    Parameters
    ----------
    batched : callable
        Takes arrays (pytrees) with a leading axis of ``num_chains``, where ``split`` says so, and returns such.
    num_chains : int
        The chains; they are split over the largest number of devices that divides them.
    split : tuple of bool
        Per argument: split along the chains (True) or the same on every device (False).

    Returns
    -------
    callable
        ``batched`` itself on one device, else its ``shard_map`` over the devices.
    """
    devices = run_devices()
    shards = max(k for k in range(1, len(devices) + 1) if num_chains % k == 0)
    if shards == 1:
        return batched
    mesh = Mesh(np.asarray(devices[:shards]), ("chains",))
    specs = tuple(PartitionSpec("chains") if along else PartitionSpec() for along in split)
    return jax.shard_map(batched, mesh=mesh, in_specs=specs, out_specs=PartitionSpec("chains"), check_vma=False)


class _SegmentRunner:
    """Compiled segments of ``length`` iterations, one executable per length (``adapting`` is traced).

    The chains it advances are ``first_chain, first_chain + 1, ...`` of ``total_chains``: their keys are
    those rows of the split over all of them.
    """

    def __init__(self, step_fn, extract, rng_key, total_chains, first_chain=0, vectorised=True):
        self.step_fn = step_fn
        self.vectorised = vectorised
        self.extract = extract
        self.rng_key = rng_key
        self.total_chains = total_chains
        self.first_chain = first_chain
        self.compiled = {}

    def _step_all(self, num_chains):
        """The transition of all chains: a vmap (or a ``lax.map``), split over the devices when there are several."""
        if self.vectorised:
            step_local = jax.vmap(lambda key, state, adapting: self.step_fn(key, state, adapting),
                                  in_axes=(0, 0, None))
        else:
            def step_local(keys, states, adapting):
                return jax.lax.map(lambda pair: self.step_fn(pair[0], pair[1], adapting), (keys, states))
        return split_over_devices(step_local, num_chains, (True, True, False))

    def _segment(self, rng_key, states, start, adapting, length):
        num_chains = jax.tree.leaves(states)[0].shape[0]
        step_sharded = self._step_all(num_chains)
        step_all = lambda keys, states: step_sharded(keys, states, adapting)  # noqa: E731

        def body(states, iteration):
            keys = jax.random.split(jax.random.fold_in(rng_key, iteration), self.total_chains)
            if num_chains != self.total_chains:
                keys = keys[self.first_chain:self.first_chain + num_chains]
            states, info = step_all(keys, states)
            return states, (jax.vmap(self.extract)(states), info)

        states, (draws, infos) = lax.scan(body, states, start + jnp.arange(length))
        chain_first = lambda leaf: jnp.swapaxes(leaf, 0, 1)  # noqa: E731
        return states, jax.tree.map(chain_first, draws), jax.tree.map(chain_first, infos)

    def prepare(self, states, length) -> float:
        """Compile the segment of ``length`` iterations if needed; return the seconds spent."""
        if length in self.compiled:
            return 0.0
        tic = time.perf_counter()
        jitted = jax.jit(self._segment, static_argnums=4)
        lowered = jitted.lower(self.rng_key, states, jnp.asarray(0, jnp.int32), jnp.asarray(True), length)
        self.compiled[length] = lowered.compile()
        return time.perf_counter() - tic

    def run(self, states, start, length, adapting):
        return self.compiled[length](self.rng_key, states, jnp.asarray(start, jnp.int32), jnp.asarray(adapting))

    def output_shapes(self, states):
        """Shapes of one iteration's ``(draws, infos)``, each leaf ``(chain, 1, ...)``."""
        segment = partial(self._segment, length=1)
        shapes = jax.eval_shape(segment, self.rng_key, states, jnp.asarray(0, jnp.int32), jnp.asarray(False))
        return shapes[1], shapes[2]


class _Record:
    """Draws and infos collected segment by segment, and their checkpoint."""

    def __init__(self, num_warmup, num_draws, num_chains, keep_warmup, identity=None, thin=1):
        self.num_warmup, self.num_draws, self.num_chains, self.thin = num_warmup, num_draws, num_chains, thin
        self.keep_warmup = keep_warmup
        self.identity = identity
        self.watch = WarmupWatch()
        self.iteration = 0
        self.warmup_draws, self.warmup_infos = None, None
        self.sample_draws, self.sample_infos = None, None
        self.seconds = {part: 0.0 for part in SEGMENT_PARTS}

    def append(self, draws, infos, length, adapting):
        draws, infos = jax.tree.map(np.asarray, draws), jax.tree.map(np.asarray, infos)
        if adapting:
            self.watch.add(draws, infos)
            if self.keep_warmup:
                self.warmup_draws = (self.warmup_draws or []) + [draws]
                self.warmup_infos = (self.warmup_infos or []) + [infos]
        else:
            if self.thin > 1:
                after_warmup = self.iteration - self.num_warmup + np.arange(length)
                kept = np.flatnonzero(after_warmup % self.thin == 0)
                draws, infos = (jax.tree.map(lambda leaf: leaf[:, kept], tree) for tree in (draws, infos))
            self.sample_draws = (self.sample_draws or []) + [draws]
            self.sample_infos = (self.sample_infos or []) + [infos]
        self.iteration += length

    def collected(self, sampling: bool):
        draws, infos = (self.sample_draws, self.sample_infos) if sampling else (self.warmup_draws, self.warmup_infos)
        if not draws:
            return None, None
        join = lambda *parts: np.concatenate(parts, axis=1)  # noqa: E731
        return jax.tree.map(join, *draws), jax.tree.map(join, *infos)

    def _meta(self, rng_key) -> dict:
        return {"version": CHECKPOINT_VERSION, "iteration": self.iteration, "num_warmup": self.num_warmup,
                "num_draws": self.num_draws, "thin": self.thin, "num_chains": self.num_chains,
                "keep_warmup": self.keep_warmup,
                "key": np.asarray(jax.random.key_data(rng_key)).tolist(),
                "timings": {part: self.seconds[part] for part in SEGMENT_PARTS},
                "elapsed": self.seconds.get("elapsed", 0.0),
                **({"identity": self.identity} if self.identity is not None else {})}

    def save(self, path, states, rng_key):
        arrays = {"meta": np.asarray(json.dumps(self._meta(rng_key)))}
        arrays.update(_flat("state", states))
        if self.watch.moved is not None:
            arrays["warmup_moved"] = self.watch.moved
        for prefix, sampling in (("draws", True), ("warmup", False)):
            draws, infos = self.collected(sampling)
            if draws is not None:
                arrays.update(_flat(f"{prefix}_draw", draws))
                arrays.update(_flat(f"{prefix}_info", infos))
        with atomic_target(path, "checkpoint") as temporary:
            with open(temporary, "wb") as stream:
                np.savez(stream, **arrays)

    def load(self, path, like_states, rng_key, like_outputs):
        import zipfile

        from gpdsl.storage.checkpoint import damaged

        try:
            states = self._load(path, like_states, rng_key, like_outputs)
        except (KeyError, ValueError, TypeError, IndexError, EOFError, OSError, zipfile.BadZipFile) as error:
            raise damaged(path, f"{type(error).__name__}: {str(error)[:160]}") from None
        if self.keep_warmup and self.warmup_draws is None and self.iteration > 0:
            raise GpdslError(f"checkpoint {path} holds no warmup draws; resume without keep_warmup")
        return states

    def _load(self, path, like_states, rng_key, like_outputs):
        with np.load(path, allow_pickle=False) as stored:
            meta = json.loads(str(stored["meta"]))
            expected = self._meta(rng_key)
            meta.setdefault("thin", 1)
            for name in ("version", "num_warmup", "num_draws", "thin", "num_chains", "key"):
                if meta[name] != expected[name]:
                    raise GpdslError(f"checkpoint {path} was written by a different run: its {name} is "
                                     f"{meta[name]}, this run's is {expected[name]}")
            states = jax.tree.map(jnp.asarray, _unflat(stored, "state", like_states))
            iteration = meta["iteration"]
            if isinstance(iteration, bool) or not isinstance(iteration, int) or \
                    not 0 <= iteration <= self.num_warmup + self.num_draws * self.thin:
                raise ValueError(f"its iteration {iteration!r} is not from 0 to "
                                 f"{self.num_warmup + self.num_draws * self.thin}")
            self.iteration = iteration
            recorded = meta.get("timings") if isinstance(meta.get("timings"), dict) else {}
            self.seconds = {**{part: _seconds(recorded.get(part)) for part in SEGMENT_PARTS},
                            "elapsed": _seconds(meta.get("elapsed"))}
            if "warmup_moved" in stored:
                self.watch.moved = np.asarray(stored["warmup_moved"])
                self.watch.iterations = min(self.iteration, self.num_warmup)
            like_draws, like_infos = like_outputs
            kept = {"draws": -(-max(0, iteration - self.num_warmup) // self.thin),
                    "warmup": min(iteration, self.num_warmup)}
            if "draws_draw_count" in stored:
                self.sample_draws = [_unflat(stored, "draws_draw", like_draws, kept["draws"])]
                self.sample_infos = [_unflat(stored, "draws_info", like_infos, kept["draws"])]
            if self.keep_warmup and "warmup_draw_count" in stored:
                self.warmup_draws = [_unflat(stored, "warmup_draw", like_draws, kept["warmup"])]
                self.warmup_infos = [_unflat(stored, "warmup_info", like_infos, kept["warmup"])]
        return states


def _seconds(value) -> float:
    """A number of seconds read from a checkpoint (0 for none, or for anything that is not one)."""
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0 else 0.0


def _flat(prefix, tree) -> dict:
    leaves, treedef = jax.tree.flatten(tree)
    arrays = {f"{prefix}_{i}": np.asarray(leaf) for i, leaf in enumerate(leaves)}
    arrays[f"{prefix}_count"] = np.asarray(len(leaves))
    arrays[f"{prefix}_treedef"] = np.asarray(_treedef_text(treedef))
    return arrays


def _treedef_text(treedef) -> str:
    return str(treedef)


def _unflat(stored, prefix, like, kept: int | None = None):
    """The tree ``prefix`` of a checkpoint, shaped as ``like`` (states), or as ``like`` with ``kept`` iterations in
    place of its one (draws and infos, each leaf ``(chain, iteration, ...)``)."""
    leaves, treedef = jax.tree.flatten(like)
    if str(stored[f"{prefix}_treedef"]) != _treedef_text(treedef):
        raise GpdslError(f"the checkpoint's {prefix.replace('_', ' ')} have a different structure from this run's")
    restored = [np.asarray(stored[f"{prefix}_{i}"]) for i in range(len(leaves))]
    for old, new in zip(leaves, restored):
        shape = tuple(old.shape) if kept is None else (old.shape[0], kept, *old.shape[2:])
        if shape != new.shape:
            what = "chain state" if kept is None else prefix.replace("_", " ")
            raise GpdslError(f"the checkpoint's {what} has shape {new.shape} where this run has {shape}")
    return jax.tree.unflatten(treedef, restored)
