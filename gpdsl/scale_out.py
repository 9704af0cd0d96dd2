"""Runs and chains on a Dask scheduler (``--scheduler local|ADDRESS``): the one place that decides where chains run.

A worker receives what a user would type, never compiled functions: the model's source text, the validated
data (numpy arrays), the method's name, its settings dataclass and the seed. It checks, lowers and
compiles there. Two kinds of task:

- a chain group: the worker runs the method up to its chains (everything before them is deterministic
  in the seed, e.g. the variational start and the initial states), advances only its block of chains
  (:mod:`gpdsl.inference.chain_groups`) and returns their draws; the driver gathers the groups and goes
  on with the method (draw groups, predictions, report) exactly as a local run does;
- a whole run (a run of a run file's grid, or a method without chains: ``nuts``, ``vem``, ``ml``,
  ``ep-ml``): the worker returns the results and the driver writes the file.

``local`` starts a :class:`distributed.LocalCluster` whose worker processes start by spawn (never fork
after JAX is imported). ``dask[distributed]`` is an optional extra (``pip install 'gpdsl[dask]'``).
"""

from __future__ import annotations

import re
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from gpdsl.errors import GpdslError, MethodError

LOCAL = "local"
SCHEDULER_ADDRESS = re.compile(r"^(?:(?P<scheme>[a-z]+)://)?(?P<host>[^\s/:\[\]]+|\[[0-9A-Fa-f:.]+\])(?::(?P<port>\d{1,5}))?$")
"""A Dask scheduler's address: ``tcp://host:8786``, ``host:8786`` or a bare host (an IPv6 one in brackets)."""
DEFAULT_PORT = 8786
REACH_SECONDS = 5.0
"""How long a scheduler's address may take to accept a connection before it is refused as unreachable."""
INSTALL_HINT = "install gpdsl[dask] (pip install 'gpdsl[dask]')"


def distributed():
    """The ``distributed`` package, or a one-line error saying how to install it.

    Raises
    ------
    GpdslError
        ``dask.distributed`` is not installed.
    """
    try:
        import distributed as module
    except ImportError:
        raise GpdslError(f"--scheduler needs dask.distributed, which is not installed: {INSTALL_HINT}") from None
    return module


def check_scheduler_run(method, settings, scheduler, chain_groups, checkpoint) -> int | None:
    """The chain groups of a run, checked before anything runs (see :func:`gpdsl.api.prepare`).

    Returns
    -------
    int or None
        The number of groups: as given; one per chain on a scheduler when not given; None for one vmap.

    Raises
    ------
    GpdslError
        The scheduler is neither ``"local"`` nor an address, ``dask.distributed`` is missing for it, the method
        has no chain groups, the number is out of range, or a checkpoint is asked for with groups or a scheduler.
    """
    if isinstance(scheduler, str):
        check_scheduler_address(scheduler)
    if scheduler is not None:
        distributed()
        if checkpoint is not None:
            raise MethodError("--checkpoint writes on this machine; it cannot be combined with --scheduler")
    if chain_groups is None:
        return settings.chains if scheduler is not None and method.chain_groups else None
    if not method.chain_groups:
        from gpdsl.registry import methods

        grouped = [m.name for m in methods().values() if m.chain_groups]
        raise MethodError(f"{method.name} has no chains gpdsl can group; chain groups are for "
                          f"{', '.join(grouped[:-1])} and {grouped[-1]}")
    if isinstance(chain_groups, bool) or not isinstance(chain_groups, int) or not 1 <= chain_groups <= settings.chains:
        raise MethodError(f"chain_groups must be an integer from 1 to the {settings.chains} chains; "
                          f"got {chain_groups!r}")
    if checkpoint is not None and chain_groups > 1:
        raise MethodError("--checkpoint needs the chains in one group (no --chain-groups)")
    return chain_groups


def check_scheduler_address(scheduler: str) -> None:
    """Refuse a ``--scheduler`` that is neither ``local`` nor a scheduler's address (``tcp://host:8786``).

    Raises
    ------
    MethodError
        Naming the value.
    """
    if scheduler == LOCAL:
        return
    found = SCHEDULER_ADDRESS.match(scheduler)
    if found is None or (found["port"] is not None and not 1 <= int(found["port"]) <= 65535):
        raise MethodError(f"--scheduler {scheduler!r} is neither 'local' nor a scheduler's address "
                          "(tcp://host:8786, host:8786)")


def reach(scheduler: str, seconds: float = REACH_SECONDS) -> None:
    """Refuse, within ``seconds``, a TCP scheduler's address that accepts no connection (nothing listens there,
    or the host is unknown or does not answer), instead of Dask's retries for half a minute.

    Raises
    ------
    MethodError
        Naming the address and why it cannot be reached.
    """
    import socket

    found = SCHEDULER_ADDRESS.match(scheduler)
    if found is None or (found["scheme"] or "tcp") != "tcp":
        return
    host, port = found["host"].strip("[]"), int(found["port"] or DEFAULT_PORT)
    try:
        socket.create_connection((host, port), timeout=seconds).close()
    except OSError as error:
        reason = "no answer" if isinstance(error, TimeoutError) else (error.strerror or str(error))
        raise MethodError(f"--scheduler {scheduler}: no Dask scheduler can be reached at {host}:{port} ({reason})",
                          hint="start one (dask scheduler) or give its address; 'local' starts one here") from None


@contextmanager
def connect(scheduler):
    """A :class:`distributed.Client` for ``scheduler``: ``"local"`` (a spawn-started LocalCluster), an address
    (``tcp://host:8786``, refused at once when unreachable, :func:`reach`) or a Client (used as is)."""
    module = distributed()
    if isinstance(scheduler, module.Client):
        yield scheduler
        return
    if scheduler == LOCAL:
        with local_cluster() as cluster, module.Client(cluster) as client:
            yield client
        return
    check_scheduler_address(str(scheduler))
    reach(str(scheduler))
    try:
        client = module.Client(str(scheduler), timeout=REACH_SECONDS * 2)
    except Exception as error:
        raise MethodError(f"--scheduler {scheduler}: cannot connect to a Dask scheduler there "
                          f"({type(error).__name__}: {str(error)[:200]})") from None
    with client:
        yield client


@contextmanager
def local_cluster(workers: int | None = None):
    """A :class:`distributed.LocalCluster` of one-thread worker processes started by spawn."""
    import dask

    module = distributed()
    with dask.config.set({"distributed.worker.multiprocessing-method": "spawn"}):
        with module.LocalCluster(n_workers=workers, processes=True, threads_per_worker=1,
                                 dashboard_address=None) as cluster:
            yield cluster


@dataclass(frozen=True)
class RunTask:
    """What a worker receives to redo a run: text and arrays, no compiled functions.

    Attributes
    ----------
    source, source_name : str
        The model's text and the name its messages use.
    data : dict
        The validated data.
    method : str
    settings : dataclass
        The method's settings.
    seed : int
    chain_groups : int or None
    new_inputs : array_like, optional
    allow_external : bool
        The command line (or Python call) that sent the run allowed its external likelihoods.
    predictive : {"joint", "marginal"}, optional
        How draws at the new inputs are made.
    device : {"auto", "cpu", "gpu"}
        Where the worker runs gpdsl's JAX engines: the platform the run chose where it was sent from.
    """

    source: str
    source_name: str
    data: dict
    method: str
    settings: Any
    seed: int
    chain_groups: int | None = None
    new_inputs: Any = None
    allow_external: bool = False
    predictive: str | None = None
    device: str = "auto"

    @classmethod
    def of(cls, prepared) -> RunTask:
        """The task of a :class:`~gpdsl.api.PreparedRun`."""
        from gpdsl.data.scaling import scaling_entries

        source = prepared.model.source
        recorded = {key: value for name, scaling in prepared.scalings.items()
                    for key, value in scaling_entries(name, scaling.centre, scaling.scale).items()}
        return cls(source.text, source.name, {**prepared.data, **recorded}, prepared.method.name, prepared.settings,
                   prepared.context.seed, prepared.context.chain_groups, prepared.context.new_inputs,
                   prepared.context.allow_external, prepared.context.predictive, prepared.context.device or "auto")

    def prepared(self):
        """Check the model text and the data again here, and prepare the run (no output file)."""
        from gpdsl.api import prepare
        from gpdsl.semantics.model_text import check_text

        model, _ = check_text(self.source, self.source_name)
        return prepare(model, self.data, self.method, self.settings, seed=self.seed, chain_groups=self.chain_groups,
                       new_inputs=self.new_inputs, allow_external=self.allow_external, predictive=self.predictive,
                       device=self.device)


def chain_executor(context, client=None, task: RunTask | None = None):
    """Who advances a run's chains: None (one vmap here), its groups here in turn, or its groups as Dask tasks."""
    from gpdsl.inference.chain_groups import in_process

    groups = context.chain_groups
    if groups is None:
        return None
    if client is None:
        return in_process(groups)

    def on_workers(run_block, num_chains):
        from gpdsl.inference.chain_groups import chain_blocks, gathered

        shared = client.scatter(task, broadcast=False)
        futures = [client.submit(advance_group, shared, block, pure=False)
                   for block in chain_blocks(num_chains, groups)]
        return gathered(client.gather(futures), concurrent=True)

    return on_workers


def execute_on(client, prepared, keep_state: bool = False):
    """Run a prepared run with ``client``: its chain groups as tasks, or (no chain groups) the whole run as one."""
    from gpdsl.api import execute
    from gpdsl.results.io import write_netcdf

    if prepared.context.chain_groups is not None:
        return execute(prepared, keep_state=keep_state, client=client)
    if keep_state:
        raise MethodError("keep_state returns the method's own objects, which stay on the worker; run without "
                          "a scheduler")
    results = client.submit(run_whole, RunTask.of(prepared), pure=False).result()
    if prepared.out is not None:
        write_netcdf(results, prepared.out, replace=prepared.overwrite)
    return results


def run_all(scheduler, prepared_runs):
    """Run prepared runs (a run file's) as Dask tasks, each whole, and write each one's file as it finishes.

    Yields
    ------
    index : int
        The position in ``prepared_runs`` of the run that finished.
    seconds : float
        Wall time since the runs were sent.

    Raises
    ------
    GpdslError
        A run writes a checkpoint (before any run is sent).
    """
    import time

    from gpdsl.results.io import write_netcdf

    for prepared in prepared_runs:
        if prepared.context.checkpoint is not None:
            raise MethodError("a run with a checkpoint cannot run on a scheduler (the checkpoint is written on the "
                              "worker); drop checkpoint or the scheduler")
    module = distributed()
    with connect(scheduler) as client:
        started = time.perf_counter()
        futures = {client.submit(run_whole, RunTask.of(prepared), pure=False): index
                   for index, prepared in enumerate(prepared_runs)}
        for future in module.as_completed(futures):
            index = futures[future]
            results = future.result()
            if prepared_runs[index].out is not None:
                write_netcdf(results, prepared_runs[index].out, replace=prepared_runs[index].overwrite)
            yield index, time.perf_counter() - started


def run_whole(task: RunTask):
    """On a worker: run the task and return its results."""
    from gpdsl.api import execute

    return execute(task.prepared())


class _GroupDone(BaseException):
    """Stops a worker's method once its chain group has run (not an error: a BaseException, so that no
    ``except Exception`` in a method takes it for one)."""

    def __init__(self, result):
        super().__init__("chain group done")
        self.result = result


def advance_group(task: RunTask, block: tuple[int, int]):
    """On a worker: run the task's method up to its chains, advance chains ``block`` and return their result."""
    import jax
    import numpy as np

    from gpdsl.externals import failures_named
    from gpdsl.inference.chain_groups import chains_run_by

    prepared = task.prepared()

    def stop_after_block(run_block, num_chains):
        result = run_block(chain_block=block)
        result.final_state = jax.tree.map(np.asarray, result.final_state)
        raise _GroupDone(result)

    try:
        with chains_run_by(stop_after_block), failures_named():
            prepared.method.run(prepared.model, prepared.data, prepared.settings, prepared.context)
    except _GroupDone as done:
        return done.result
    raise GpdslError(f"internal error: {task.method} returned without running chains")
