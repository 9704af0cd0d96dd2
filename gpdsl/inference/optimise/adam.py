"""Adam (Kingma & Ba 2015) for stochastic variational objectives, in phases, minibatches and compiled chunks.

:func:`init` and :func:`update` are the pure optimiser on a flat vector (``State``: the step count and the
first and second moment estimates). :func:`maximise` runs a schedule of :class:`Phase` s: each phase
starts with fresh moments (a new Adam, as GPflow 1's ``AdamOptimizer`` per ``minimize`` call) and holds
the coordinates its mask names (the de Souza 2020 schedule: 2000 steps with the noise held, then 5000
with everything free). The steps run as a jitted ``lax.scan`` over ``chunk`` steps at a time; after
each chunk the mean objective of its steps is reported and the state may be written to a checkpoint,
from which a run resumes bit for bit (the PRNG key is stored with it).

The objective is ``objective(x, key, batch)``: ``batch`` holds ``batch_size`` indices of the ``data_size``
data points drawn afresh at each step, uniformly with replacement (``None`` for full-batch runs), and ``key``
a fresh PRNG key for reparameterised samples; an unbiased minibatch estimate is the objective's to form
(scale the batch's sum by ``data_size / batch_size``). Drawing with replacement costs ``O(batch_size)``;
``jax.random.choice`` without replacement permutes all ``data_size`` indices, 70 ms a step at 100,000 points.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from gpdsl.atomic import atomic_target
from gpdsl.checkpoint import CheckpointError

CHECKPOINT_KIND = "adam"


class State(NamedTuple):
    """Adam's state.

    Attributes
    ----------
    step : jax.Array
        Steps taken since the moments were reset (int).
    mean, second : jax.Array
        Exponential moving averages of the gradient and of its square.
    """

    step: jax.Array
    mean: jax.Array
    second: jax.Array


class Phase(NamedTuple):
    """A stretch of the schedule.

    Attributes
    ----------
    steps : int
        How many steps.
    held : numpy.ndarray of bool, optional
        Coordinates that do not move in this phase (None: all move).
    """

    steps: int
    held: np.ndarray | None = None


class AdamResult(NamedTuple):
    """Where :func:`maximise` ended.

    Attributes
    ----------
    x : numpy.ndarray
        The last point.
    gradient : numpy.ndarray
        The last step's (stochastic) gradient of the objective.
    trace : numpy.ndarray
        The mean objective of each chunk's steps, one entry per chunk.
    steps : int
        Steps taken over all phases.
    seconds : float
        Wall time of this call.
    """

    x: np.ndarray
    gradient: np.ndarray
    trace: np.ndarray
    steps: int
    seconds: float


def init(x) -> State:
    """A fresh state (zero moments) for the flat point ``x``."""
    zeros = jnp.zeros_like(jnp.asarray(x, dtype=jnp.float64))
    return State(jnp.asarray(0), zeros, zeros)


def update(gradient, state: State, learning_rate: float, b1: float = 0.9, b2: float = 0.999,
           eps: float = 1e-8) -> tuple[jax.Array, State]:
    """One Adam step for *maximising*: the increment of ``x`` along ``gradient`` and the new state (traceable).

    Parameters
    ----------
    gradient : jax.Array
        Gradient of the objective at the current point.
    state : State
    learning_rate, b1, b2, eps : float
        Kingma & Ba's ``alpha``, ``beta_1``, ``beta_2``, ``epsilon`` (their defaults).

    Returns
    -------
    increment : jax.Array
    state : State
    """
    step = state.step + 1
    mean = b1 * state.mean + (1 - b1) * gradient
    second = b2 * state.second + (1 - b2) * gradient ** 2
    mean_hat = mean / (1 - b1 ** step)
    second_hat = second / (1 - b2 ** step)
    return learning_rate * mean_hat / (jnp.sqrt(second_hat) + eps), State(step, mean, second)


def maximise(objective: Callable, x0, phases, *, learning_rate: float = 0.01, key=None, data_size: int | None = None,
             batch_size: int | None = None, chunk: int = 100, progress: bool = False,
             checkpoint=None, identity: dict | None = None, report: Callable | None = None) -> AdamResult:
    """Maximise ``objective`` by Adam over the phases of a schedule.

    Parameters
    ----------
    objective : callable
        ``objective(x, key, batch) -> scalar`` (traceable; see the module docstring).
    x0 : array_like
        Flat starting point.
    phases : sequence of Phase
        The schedule; moments are reset at the start of each phase.
    learning_rate : float
        Adam's step size.
    key : jax.Array, optional
        PRNG key of the minibatches and of ``objective``'s samples (default ``PRNGKey(0)``).
    data_size, batch_size : int, optional
        Minibatches of ``batch_size`` indices out of ``data_size``, drawn with replacement (both or neither; a
        batch as large as the data is the full batch, ``batch=None``).
    chunk : int
        Steps per compiled chunk.
    progress : bool
        Print the mean objective of each chunk.
    checkpoint : path, optional
        Write the state after each chunk; resume from it when it exists.
    identity : dict, optional
        The run's identity (:func:`gpdsl.checkpoint.run_identity`) to store in the checkpoint.
    report : callable, optional
        ``report(steps_done, mean_objective)`` after each chunk.

    Returns
    -------
    AdamResult

    Raises
    ------
    CheckpointError
        The checkpoint at ``checkpoint`` holds another schedule or cannot be read.
    """
    started = time.perf_counter()
    x = jnp.asarray(x0, dtype=jnp.float64)
    key = jax.random.PRNGKey(0) if key is None else _raw_key(key)
    if (data_size is None) != (batch_size is None):
        raise ValueError("give both data_size and batch_size for minibatches, or neither")
    full = batch_size is None or batch_size >= data_size
    held_masks = [np.zeros(x.shape, dtype=bool) if p.held is None else np.asarray(p.held, dtype=bool) for p in phases]
    schedule = [int(p.steps) for p in phases]
    run_chunk = _chunk_program(objective, learning_rate, None if full else (data_size, batch_size))

    phase, done, trace, state = 0, 0, [], init(x)
    gradient = jnp.zeros_like(x)
    stored = _load(checkpoint, schedule, x.shape) if checkpoint is not None else None
    if stored is not None:
        phase, done, trace, x, state, key, gradient = stored
    while phase < len(schedule):
        if done >= schedule[phase]:
            phase, done, state = phase + 1, 0, init(x)
            continue
        length = min(chunk, schedule[phase] - done)
        free = jnp.asarray(~held_masks[phase])
        key, chunk_key = jax.random.split(key)
        x, state, values, gradient = run_chunk(x, state, free, jax.random.split(chunk_key, length))
        done += length
        trace.append(float(jnp.mean(values)))
        total = sum(schedule[:phase]) + done
        if checkpoint is not None:
            _save(checkpoint, schedule, phase, done, trace, x, state, key, gradient, identity)
        if progress:
            print(f"  step {total}: objective {trace[-1]:.6g} (mean of the last {length} steps)", flush=True)
        if report is not None:
            report(total, trace[-1])
    return AdamResult(np.asarray(x), np.asarray(gradient), np.asarray(trace), sum(schedule),
                      time.perf_counter() - started)


def _chunk_program(objective, learning_rate, minibatch):
    value_and_grad = jax.value_and_grad(objective)

    def one_step(carry, step_key):
        x, state, free, _ = carry
        sample_key, batch_key = jax.random.split(step_key)
        batch = None if minibatch is None else jax.random.randint(batch_key, (minibatch[1],), 0, minibatch[0])
        value, gradient = value_and_grad(x, sample_key, batch)
        gradient = jnp.where(free, gradient, 0.0)
        increment, state = update(gradient, state, learning_rate)
        return (x + increment, state, free, gradient), value

    @jax.jit
    def run(x, state, free, keys):
        (x, state, _, gradient), values = jax.lax.scan(one_step, (x, state, free, jnp.zeros_like(x)), keys)
        return x, state, values, gradient

    return run


def _raw_key(key) -> jax.Array:
    """A PRNG key as its raw ``uint32`` data (typed keys and legacy keys alike)."""
    if jnp.issubdtype(key.dtype, jax.dtypes.prng_key):
        return jax.random.key_data(key)
    return jnp.asarray(key, dtype=jnp.uint32)


def _save(path, schedule, phase, done, trace, x, state, key, gradient, identity) -> None:
    meta = {"kind": CHECKPOINT_KIND, "schedule": schedule, "phase": phase, "done": done,
            **({"identity": identity} if identity is not None else {})}
    arrays = {"meta": np.asarray(json.dumps(meta)), "trace": np.asarray(trace), "x": np.asarray(x),
              "step": np.asarray(state.step), "mean": np.asarray(state.mean), "second": np.asarray(state.second),
              "key": np.asarray(key), "gradient": np.asarray(gradient)}
    with atomic_target(path, "checkpoint") as temporary:
        with open(temporary, "wb") as stream:
            np.savez(stream, **arrays)


def _load(path, schedule, shape):
    if not Path(path).exists():
        return None
    try:
        with np.load(path) as stored:
            meta = json.loads(str(stored["meta"]))
            arrays = {name: np.asarray(stored[name]) for name in ("trace", "x", "step", "mean", "second", "key",
                                                                  "gradient")}
    except (OSError, ValueError, KeyError, json.JSONDecodeError) as error:
        raise CheckpointError(f"{path} is not a gpdsl checkpoint ({error})",
                              hint="delete it to start the run afresh") from None
    if meta.get("kind") != CHECKPOINT_KIND or meta.get("schedule") != schedule or arrays["x"].shape != shape:
        raise CheckpointError(f"checkpoint {path} was written by another optimisation (its schedule "
                              f"{meta.get('schedule')}, this run's {schedule})",
                              hint="delete it or give another --checkpoint path to start afresh")
    state = State(jnp.asarray(arrays["step"]), jnp.asarray(arrays["mean"]), jnp.asarray(arrays["second"]))
    key = jnp.asarray(arrays["key"], dtype=jnp.uint32)
    return (int(meta["phase"]), int(meta["done"]), list(arrays["trace"]), jnp.asarray(arrays["x"]), state, key,
            jnp.asarray(arrays["gradient"]))
