"""Adam (Kingma & Ba 2015) for stochastic variational objectives, in phases, minibatches and compiled chunks.

:func:`init` and :func:`update` are the pure optimiser on a flat vector (``State``: the step count and the
first and second moment estimates). :func:`maximise` runs a schedule of :class:`Phase` s: each phase
starts with fresh moments (a new Adam, as GPflow 1's ``AdamOptimizer`` per ``minimize`` call) and holds
the coordinates its mask names (the de Souza 2020 schedule: 2000 steps with the noise held, then 5000
with everything free). The steps run as a jitted ``lax.scan`` over ``chunk`` steps at a time; after
each chunk the mean objective of its steps is reported and the state may be written to a checkpoint,
from which a run resumes bit for bit (the PRNG key is stored with it).

The objective is ``objective(x, key, batch)``: ``batch`` holds ``batch_size`` indices of the ``data_size``
data points (``None`` for full-batch runs), and ``key`` a fresh PRNG key for reparameterised samples; an
unbiased minibatch estimate is the objective's to form (scale the batch's sum by ``data_size / batch_size``).
Batches are drawn in one of two ways (``sampling``):

``"replacement"``
    afresh at each step, uniformly with replacement, inside the compiled step: ``O(batch_size)``
    (``jax.random.choice`` without replacement permutes all ``data_size`` indices, 70 ms a step at 100,000
    points). A row may appear twice in a batch.
``"epochs"``
    epoch-wise shuffling (:func:`epoch_batches`): step ``s`` of the schedule (counted over all phases) takes
    the ``s % (N // B)``-th slice of ``B`` rows of a permutation of the ``N`` rows drawn on the host for its
    epoch ``s // (N // B)`` from the run's key and the epoch alone. No row appears twice in a batch, each
    epoch visits ``B (N // B)`` distinct rows, and a run resumed from a checkpoint draws the same batches.

Per-row ("local") parameters, such as the ``q(x_n)`` of a GPLVM, are given apart from the flat vector as an
``(N, P)`` array (``local``): the objective is then ``objective(x, rows, key, batch)`` with ``rows`` the
batch's rows of that array, and a step gathers those rows and their moments, updates them by Adam and
scatters them back, so no operation of a step is ``O(N)`` (see :func:`maximise`).
"""

from __future__ import annotations

import functools
import json
import time
from pathlib import Path
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

from gpdsl.inference.progress import say
from gpdsl.storage.atomic import atomic_target
from gpdsl.storage.checkpoint import CheckpointError, elapsed_before

CHECKPOINT_KIND = "adam"
SAMPLINGS = ("replacement", "epochs")
B1 = 0.9  # Kingma & Ba's beta_1


class State(NamedTuple):
    """Adam's state.

    Attributes
    ----------
    step : jax.Array
        Steps taken since the moments were reset (int): a scalar for a flat vector, one per row, shape
        ``(N, 1)``, for per-row parameters (lazy Adam).
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
        Coordinates of the flat vector that do not move in this phase (None: all move); per-row parameters
        move in every phase.
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
        Wall time of this call; of a call resumed from a checkpoint, that of every call that ran the optimisation.
    local : numpy.ndarray, optional
        The last per-row parameters, shape ``(N, P)`` (None without them).
    local_gradient : numpy.ndarray, optional
        The last step's gradient with respect to its batch's rows, shape ``(B, P)``.
    """

    x: np.ndarray
    gradient: np.ndarray
    trace: np.ndarray
    steps: int
    seconds: float
    local: np.ndarray | None = None
    local_gradient: np.ndarray | None = None


class _Carry(NamedTuple):
    """What a chunk carries from step to step (the ``local`` fields None without per-row parameters)."""

    x: jax.Array
    state: State
    gradient: jax.Array
    local: jax.Array | None = None
    local_state: State | None = None
    local_gradient: jax.Array | None = None


def init(x, per_row: bool = False) -> State:
    """A fresh state (zero moments) for the flat point ``x``, or for the rows of the ``(N, P)`` array ``x``
    with a step count per row (``per_row``)."""
    shape = jnp.shape(x)
    step = jnp.zeros((shape[0], 1), dtype=int) if per_row else jnp.asarray(0)
    # two buffers, not one zero array twice: maximise donates its chunks' carry
    return State(step, jnp.zeros(shape, jnp.float64), jnp.zeros(shape, jnp.float64))


def update(gradient, state: State, learning_rate: float, b1: float = B1, b2: float = 0.999,
           eps: float = 1e-8) -> tuple[jax.Array, State]:
    """One Adam step for *maximising*: the increment of ``x`` along ``gradient`` and the new state (traceable).

    Parameters
    ----------
    gradient : jax.Array
        Gradient of the objective at the current point.
    state : State
        A step count that broadcasts against ``gradient`` (one per row, ``(B, 1)``, for lazy updates of rows).
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


def ravel_rows(tree):
    """Per-row parameters as one ``(N, P)`` array, the row-wise analogue of ``jax.flatten_util.ravel_pytree``.

    Parameters
    ----------
    tree : pytree
        Leaves of a common leading length ``N`` (e.g. the means and variances of ``q(x_n)``, each ``(N, Q)``).

    Returns
    -------
    rows : jax.Array, shape (N, P)
        Row ``n`` holds the leaves' ``n``-th entries, raveled.
    unravel_rows : callable
        ``unravel_rows(rows[batch])``: the tree of those rows (traceable).
    """
    _, unravel_one = ravel_pytree(jax.tree_util.tree_map(lambda leaf: jnp.asarray(leaf)[0], tree))
    rows = jax.vmap(lambda row: ravel_pytree(row)[0])(jax.tree_util.tree_map(jnp.asarray, tree))
    return rows, jax.vmap(unravel_one)


def epoch_batches(seed, data_size: int, batch_size: int, first: int, length: int) -> np.ndarray:
    """The batches of steps ``first, ..., first + length - 1`` under epoch-wise shuffling.

    Step ``s`` belongs to epoch ``e = s // (data_size // batch_size)`` and takes the ``s % (data_size //
    batch_size)``-th consecutive slice of ``batch_size`` entries of a permutation of ``range(data_size)``
    drawn for that epoch from ``seed`` and ``e`` alone: no index appears twice in a batch or in an epoch, and
    the batches depend only on the step count. Each permutation costs ``O(data_size)`` once per epoch.

    Parameters
    ----------
    seed : sequence of int
        The run's seed (non-negative integers, e.g. the words of its PRNG key).
    data_size, batch_size : int
        ``N`` and ``B <= N``.
    first, length : int
        The first step and how many.

    Returns
    -------
    numpy.ndarray of int32, shape (length, batch_size)
    """
    per_epoch = data_size // batch_size
    steps = np.arange(first, first + length)
    epochs, offsets = np.divmod(steps, per_epoch)
    batches = np.empty((length, batch_size), dtype=np.int32)
    for epoch in np.unique(epochs):
        these = epochs == epoch
        starts = offsets[these, None] * batch_size
        batches[these] = _permutation(tuple(int(word) for word in seed), data_size, int(epoch))[
            starts + np.arange(batch_size)]
    return batches


@functools.lru_cache(maxsize=2)
def _permutation(seed: tuple, data_size: int, epoch: int) -> np.ndarray:
    return np.random.default_rng([*seed, epoch]).permutation(data_size).astype(np.int32)


def schedule_phases(schedule, noise_held, held=None) -> list[Phase]:
    """The two phases of ``schedule`` (:class:`~gpdsl.settings.AdamScheduleSettings`) over a flat vector.

    Parameters
    ----------
    schedule : AdamScheduleSettings
        ``noise_fixed_steps`` then ``steps``.
    noise_held : array_like of bool
        Coordinates held in the first phase (the likelihood's scale).
    held : array_like of bool, optional
        Coordinates held in both phases.

    Returns
    -------
    list of Phase
        The phases with at least one step.
    """
    noise_held = np.asarray(noise_held, dtype=bool)
    first = noise_held if held is None else noise_held | held
    phases = [Phase(schedule.noise_fixed_steps, first), Phase(schedule.steps, held)]
    return [phase for phase in phases if phase.steps]


def maximise(objective: Callable, x0, phases, *, learning_rate: float = 0.01, key=None, data_size: int | None = None,
             batch_size: int | None = None, local=None, local_learning_rate: float | None = None,
             sampling: str | None = None, chunk: int = 100,
             progress: bool = False, checkpoint=None, identity: dict | None = None,
             report: Callable | None = None, inner_step: Callable | None = None) -> AdamResult:
    """Maximise ``objective`` by Adam over the phases of a schedule.

    With per-row parameters (``local``) a step is lazy Adam (as TensorFlow Addons' ``LazyAdam``): it gathers
    the batch's rows and their moments, updates them with the gradient with respect to those rows and a step
    count per row for the bias correction, and scatters them back; rows outside the batch do not move and
    their moments do not decay until they are next in a batch. Dense Adam would update all ``N`` rows at
    every step (their gradient zero, their moments decaying and still moving them), which costs ``O(N)`` a
    step however small the batch; the lazy step costs ``O(B)``, so an epoch costs ``O(N)``. A row's moments
    hold what they were at its last visit, and its bias correction counts its own steps. When every row is in
    every batch the lazy step is dense Adam's; otherwise the rows' step size is larger by default
    (``local_learning_rate``). The batches are then drawn by epoch-wise shuffling (a
    scatter of a batch holding a row twice would keep one of its two updates).

    Parameters
    ----------
    objective : callable
        ``objective(x, key, batch) -> scalar``, or ``objective(x, rows, key, batch)`` with per-row parameters
        (traceable; see the module docstring).
    x0 : array_like
        Flat starting point.
    phases : sequence of Phase
        The schedule; moments (and the per-row step counts) are reset at the start of each phase.
    learning_rate : float
        Adam's step size.
    key : jax.Array, optional
        PRNG key of the minibatches and of ``objective``'s samples (default ``PRNGKey(0)``).
    data_size, batch_size : int, optional
        Minibatches of ``batch_size`` indices out of ``data_size`` (both or neither; a batch as large as the
        data is the full batch, ``batch=None``, without per-row parameters). With per-row parameters
        ``data_size`` is their number of rows and ``batch_size`` defaults to it.
    local : array_like, shape (N, P), optional
        Starting per-row parameters (:func:`ravel_rows` packs a tree of them), updated lazily.
    local_learning_rate : float, optional
        Adam's step size for the per-row parameters. A row takes one step an epoch, where dense Adam would
        have moved it at each of the ``N // B`` steps of an epoch along its decaying first moment, about
        ``1 / (1 - beta_1) = 10`` steps' worth a visit when ``N // B`` is large: the default is
        ``learning_rate`` times that sum, ``(1 - beta_1^(N // B)) / (1 - beta_1)`` (``learning_rate`` itself
        when every row is in every batch).
    sampling : {"replacement", "epochs"}, optional
        How batches are drawn (see the module docstring); ``"epochs"`` with per-row parameters, which
        require it, ``"replacement"`` otherwise.
    chunk : int
        Steps per compiled chunk.
    progress : bool
        Print the mean objective of each chunk on standard error.
    checkpoint : path, optional
        Write the state after each chunk; resume from it when it exists.
    identity : dict, optional
        The run's identity (:func:`gpdsl.storage.checkpoint.run_identity`) to store in the checkpoint.
    report : callable, optional
        ``report(steps_done, mean_objective)`` after each chunk.
    inner_step : callable, optional
        ``inner_step(x, key, batch) -> x`` (traceable): another optimiser's update of some coordinates of the flat
        vector on the step's batch before each Adam step (the natural-gradient steps of a sparse variational GP's
        ``q(u)``); the phases should hold those coordinates from Adam. Not with per-row parameters.

    Returns
    -------
    AdamResult

    Raises
    ------
    ValueError
        Only one of ``data_size`` and ``batch_size`` without per-row parameters, an unknown ``sampling``,
        or ``"replacement"`` with per-row parameters.
    CheckpointError
        The checkpoint at ``checkpoint`` holds another schedule or cannot be read.
    """
    started = time.perf_counter()
    key = jax.random.PRNGKey(0) if key is None else _raw_key(key)
    # copies: the chunks' carry is donated, which must not invalidate the caller's arrays
    x, rows = jnp.array(x0, dtype=jnp.float64), None if local is None else jnp.array(local, dtype=jnp.float64)
    minibatch, sampling = _minibatches(rows, data_size, batch_size, sampling)
    carry = _fresh_carry(x, rows, minibatch)
    held_masks = [np.zeros(carry.x.shape, dtype=bool) if p.held is None else np.asarray(p.held, dtype=bool)
                  for p in phases]
    schedule = [int(p.steps) for p in phases]
    if local_learning_rate is None and rows is not None:
        local_learning_rate = learning_rate * (1 - B1 ** (minibatch[0] // minibatch[1])) / (1 - B1)
    if inner_step is not None and rows is not None:
        raise ValueError("inner_step is not supported with per-row parameters")
    run_chunk = _chunk_program(objective, (learning_rate, local_learning_rate),
                               minibatch if sampling == "replacement" else None, inner_step)

    phase, done, trace, origin = 0, 0, [], key
    stored = _load(checkpoint, schedule, carry) if checkpoint is not None else None
    if stored is not None:
        phase, done, trace, carry, key, origin = stored
        started -= elapsed_before(checkpoint)
    while phase < len(schedule):
        if done >= schedule[phase]:
            phase, done, carry = phase + 1, 0, _new_phase(carry)
            continue
        length = min(chunk, schedule[phase] - done)
        total = sum(schedule[:phase]) + done
        batches = None if sampling != "epochs" else jnp.asarray(
            epoch_batches(np.asarray(origin), *minibatch, total, length))
        key, chunk_key = jax.random.split(key)
        carry, values = run_chunk(carry, jnp.asarray(~held_masks[phase]), jax.random.split(chunk_key, length),
                                  batches)
        done += length
        trace.append(float(jnp.mean(values)))
        if checkpoint is not None:
            _save(checkpoint, schedule, phase, done, trace, carry, key, origin, identity,
                  time.perf_counter() - started)
        if progress:
            say(f"  step {total + length}: objective {trace[-1]:.6g} (mean of the last {length} steps)")
        if report is not None:
            report(total + length, trace[-1])
    return AdamResult(np.asarray(carry.x), np.asarray(carry.gradient), np.asarray(trace), sum(schedule),
                      time.perf_counter() - started,
                      *(() if carry.local is None else (np.asarray(carry.local), np.asarray(carry.local_gradient))))


def _fresh_carry(x, local, minibatch) -> _Carry:
    """The carry at the start of a run: zero moments and gradients."""
    if local is None:
        return _Carry(x, init(x), jnp.zeros_like(x))
    return _Carry(x, init(x), jnp.zeros_like(x), local, init(local, per_row=True),
                  jnp.zeros((minibatch[1], local.shape[1])))


def _new_phase(carry: _Carry) -> _Carry:
    """The carry with fresh moments (and per-row step counts), its point and last gradients kept."""
    return carry._replace(state=init(carry.x),
                          local_state=None if carry.local is None else init(carry.local, per_row=True))


def _minibatches(local, data_size, batch_size, sampling):
    """``(data_size, batch_size)`` of the minibatches (None for the full batch) and how they are drawn."""
    if local is not None:
        data_size = local.shape[0] if data_size is None else data_size
        batch_size = data_size if batch_size is None else min(batch_size, data_size)
        if data_size != local.shape[0]:
            raise ValueError(f"data_size {data_size} is not the number of rows of the per-row parameters, "
                             f"{local.shape[0]}")
        if sampling not in (None, "epochs"):
            raise ValueError("per-row parameters need batches without duplicates: sampling='epochs'")
        return (data_size, batch_size), "epochs"
    if (data_size is None) != (batch_size is None):
        raise ValueError("give both data_size and batch_size for minibatches, or neither")
    sampling = "replacement" if sampling is None else sampling
    if sampling not in SAMPLINGS:
        raise ValueError(f"sampling must be one of {SAMPLINGS}; got {sampling!r}")
    if batch_size is None or batch_size >= data_size:
        return None, "full"
    return (data_size, batch_size), sampling


def _chunk_program(objective, learning_rates, replacement, inner_step=None):
    """The jitted chunk: ``run(carry, free, keys, batches) -> (carry, values)``; ``batches`` (one row per step)
    are given for epoch-wise shuffling, drawn inside the step with replacement (``replacement`` is then
    ``(data_size, batch_size)``), or None for the full batch; ``learning_rates`` are the flat vector's and the
    rows'; ``inner_step`` (optional) updates the flat vector before each dense step. The carry is donated: the
    per-row arrays are updated in place, not copied, from chunk to chunk."""
    learning_rate, local_learning_rate = learning_rates

    def global_update(carry, free, gradient):
        gradient = jnp.where(free, gradient, 0.0)
        increment, state = update(gradient, carry.state, learning_rate)
        return carry._replace(x=carry.x + increment, state=state, gradient=gradient)

    def dense_step(carry, free, sample_key, batch):
        if inner_step is not None:
            carry = carry._replace(x=inner_step(carry.x, sample_key, batch))
        value, gradient = jax.value_and_grad(objective)(carry.x, sample_key, batch)
        return value, global_update(carry, free, gradient)

    def lazy_step(carry, free, sample_key, batch):
        rows = carry.local[batch]
        row_state = jax.tree_util.tree_map(lambda leaf: leaf[batch], carry.local_state)
        value, (gradient, row_gradient) = jax.value_and_grad(objective, argnums=(0, 1))(carry.x, rows, sample_key,
                                                                                         batch)
        increment, row_state = update(row_gradient, row_state, local_learning_rate)
        scatter = functools.partial(_scatter, batch)
        return value, global_update(carry, free, gradient)._replace(
            local=scatter(carry.local, rows + increment),
            local_state=jax.tree_util.tree_map(scatter, carry.local_state, row_state), local_gradient=row_gradient)

    def one_step(carry_free, inputs):
        carry, free = carry_free
        step_key, batch = inputs
        sample_key, batch_key = jax.random.split(step_key)
        if replacement is not None:
            batch = jax.random.randint(batch_key, (replacement[1],), 0, replacement[0])
        value, carry = (dense_step if carry.local is None else lazy_step)(carry, free, sample_key, batch)
        return (carry, free), value

    @functools.partial(jax.jit, donate_argnums=0)
    def run(carry, free, keys, batches):
        (carry, _), values = jax.lax.scan(one_step, (carry, free), (keys, batches))
        return carry, values

    return run


def _scatter(batch, array, rows):
    """``array`` with ``rows`` at the (distinct) indices ``batch``."""
    return array.at[batch].set(rows, unique_indices=True, mode="promise_in_bounds")


def _raw_key(key) -> jax.Array:
    """A PRNG key as its raw ``uint32`` data (typed keys and legacy keys alike)."""
    if jnp.issubdtype(key.dtype, jax.dtypes.prng_key):
        return jax.random.key_data(key)
    return jnp.asarray(key, dtype=jnp.uint32)


def _save(path, schedule, phase, done, trace, carry: _Carry, key, origin, identity, elapsed: float) -> None:
    meta = {"kind": CHECKPOINT_KIND, "schedule": schedule, "phase": phase, "done": done, "elapsed": elapsed,
            **({"identity": identity} if identity is not None else {})}
    arrays = {"meta": np.asarray(json.dumps(meta)), "trace": np.asarray(trace), "key": np.asarray(key),
              "origin": np.asarray(origin), **_carry_arrays(carry)}
    with atomic_target(path, "checkpoint") as temporary:
        with open(temporary, "wb") as stream:
            np.savez(stream, **arrays)


def _carry_arrays(carry: _Carry) -> dict:
    """The carry's arrays by name (``x``, ``step``, ``mean``, ``second``, ``gradient``, and with per-row parameters
    ``local``, ``local_step``, ``local_mean``, ``local_second``, ``local_gradient``)."""
    arrays = {"x": carry.x, **carry.state._asdict(), "gradient": carry.gradient}
    if carry.local is not None:
        arrays.update({"local": carry.local, "local_gradient": carry.local_gradient,
                       **{f"local_{name}": value for name, value in carry.local_state._asdict().items()}})
    return {name: np.asarray(value) for name, value in arrays.items()}


def _load(path, schedule, fresh: _Carry):
    """``(phase, done, trace, carry, key, origin)`` from the checkpoint at ``path`` (None if there is none)."""
    if not Path(path).exists():
        return None
    shapes = {name: value.shape for name, value in _carry_arrays(fresh).items()}
    try:
        with np.load(path) as stored:
            meta = json.loads(str(stored["meta"]))
            arrays = {name: np.asarray(stored[name]) for name in ("trace", "key", *shapes)}
            origin = np.asarray(stored["origin"]) if "origin" in stored else arrays["key"]
    except (OSError, ValueError, KeyError, json.JSONDecodeError) as error:
        raise CheckpointError(f"{path} is not a gpdsl checkpoint ({error})",
                              hint="delete it to start the run afresh") from None
    if (meta.get("kind") != CHECKPOINT_KIND or meta.get("schedule") != schedule
            or any(arrays[name].shape != shape for name, shape in shapes.items())):
        raise CheckpointError(f"checkpoint {path} was written by another optimisation (its schedule "
                              f"{meta.get('schedule')}, this run's {schedule})",
                              hint="delete it or give another --checkpoint path to start afresh")
    state = {name: jnp.asarray(arrays[name]) for name in shapes}
    carry = _Carry(state["x"], State(state["step"], state["mean"], state["second"]), state["gradient"])
    if fresh.local is not None:
        carry = carry._replace(local=state["local"], local_gradient=state["local_gradient"],
                               local_state=State(state["local_step"], state["local_mean"], state["local_second"]))
    return (int(meta["phase"]), int(meta["done"]), list(arrays["trace"]), carry,
            jnp.asarray(arrays["key"], dtype=jnp.uint32), jnp.asarray(origin, dtype=jnp.uint32))
