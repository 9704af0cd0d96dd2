"""The library API the CLI and case studies use: load and check models, and run any method on them.

:func:`run` is the one entry point: it checks everything a run needs (:func:`prepare`) before it runs the
method (:func:`execute`); run files prepare all their runs before the first executes. :func:`sample` and
:func:`fit` are :func:`run` with the settings as keyword arguments.
"""

from __future__ import annotations

import secrets
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from gpdsl.errors import CheckWarning
from gpdsl.ir.nodes import Model
from gpdsl.semantics.check import check_program
from gpdsl.semantics.model_text import check_text
from gpdsl.syntax.parser import parse_file

LARGE_RESULTS_MB = 50
"""Results at least this large (about two seconds to write) have their write shown as a progress stage."""


def check_file(path: str | Path) -> tuple[Model, list[CheckWarning]]:
    """Parse and check a ``.gpm`` file (see :func:`check_text`).

    Raises
    ------
    GpdslError
        ``no such model file`` when ``path`` is not a file; the model's own errors otherwise.
    """
    if not Path(path).is_file():
        from gpdsl.errors import GpdslError

        if Path(path).exists():
            raise GpdslError(f"model file {path} is {'a directory' if Path(path).is_dir() else 'not a regular file'}")
        raise GpdslError(f"no such model file: {path}", hint=f"relative paths start at the working directory, {Path.cwd()}")
    return check_program(parse_file(path))


def check(model: str | Path) -> tuple[Model, list[CheckWarning]]:
    """Parse and check a model: a ``.gpm`` file, or model text.

    Parameters
    ----------
    model : str or path
        A file path, or the model's text (recognised by a brace or a newline).

    Returns
    -------
    model : Model
        The typed IR that :func:`run` takes.
    warnings : list of CheckWarning
        Each with ``render()`` for ``file:line:col`` text.

    Raises
    ------
    GpdslError
        With the location of the first problem (``ModelSyntaxError``, ``ModelCheckError``), or
        ``no such model file``.

    Examples
    --------
    >>> import gpdsl
    >>> model, warnings = gpdsl.check("models/gp_classification.gpm")  # doctest: +SKIP
    >>> list(model.parameters)  # doctest: +SKIP
    ['sigma', 'tau']
    """
    if _is_text(model):
        return check_text(str(model))
    return check_file(model)


def load_model(path_or_text: str | Path) -> Model:
    """The checked model of a file path, or of model text if it contains a newline or brace."""
    return check(path_or_text)[0]


def _is_text(model) -> bool:
    return not isinstance(model, Path) and ("{" in str(model) or "\n" in str(model))


@dataclass(frozen=True)
class RunContext:
    """What a method's run function receives besides the model, data and settings.

    Attributes
    ----------
    family : str
        The model family the method runs it as (:mod:`gpdsl.ir.families`).
    facts
        That family's facts (e.g. which latent GP, which likelihood).
    seed : int
        The seed (drawn when the caller gave none, and recorded in the results).
    progress : bool
        Show progress.
    checkpoint : path, optional
        Where chain methods write their draws so far, and resume from.
    checkpoint_identity : dict, optional
        What the checkpoint records about the run (:func:`gpdsl.storage.checkpoint.run_identity`).
    new_inputs : numpy.ndarray, optional
        Inputs to predict at.
    chain_groups : int, optional
        Chain methods: advance the chains in this many groups, one vmap each (:mod:`gpdsl.inference.chain_groups`);
        None runs them in one vmap.
    allow_external : bool
        The run may import and run the model's external likelihoods (:mod:`gpdsl.externals`).
    predictive : {"joint", "marginal"}, optional
        How draws at ``new_inputs`` are made (:meth:`gpdsl.registry.Method.predictive_choice`); None
        without new inputs.
    device : {"cpu", "gpu"}, optional
        The platform gpdsl's JAX engines run on (:func:`gpdsl.numerics.devices.resolve_device`); None for Stan.
    """

    family: str
    facts: Any
    seed: int
    progress: bool = False
    checkpoint: str | Path | None = None
    new_inputs: Any = None
    chain_groups: int | None = None
    checkpoint_identity: dict | None = None
    allow_external: bool = False
    predictive: str | None = None
    device: str | None = None

    def chain_checkpoint(self) -> dict:
        """The checkpoint arguments of :func:`gpdsl.inference.driver.run_chains`: write ``checkpoint`` after each
        segment, and resume from it when it exists (:func:`prepare` checked it is this run's)."""
        return {"checkpoint_path": self.checkpoint, "resume": self.checkpoint is not None,
                "checkpoint_identity": self.checkpoint_identity}


@dataclass(frozen=True)
class PreparedRun:
    """A run whose every input was checked: what :func:`execute` runs.

    Attributes
    ----------
    model : Model
    data : dict
        The validated data.
    method : Method
        The registry entry.
    settings : dataclass
        The method's validated settings.
    context : RunContext
        Family, facts, seed, progress, checkpoint and new inputs.
    out : path, optional
        Where the results will be written (checked writable).
    scalings : dict of str to Scaling
        How data variables were standardised (:mod:`gpdsl.data.scaling`), recorded in the results.
    overwrite : bool
        ``out`` may replace an existing file; without it ``out`` is created new. Either way this process claims
        ``out`` (:mod:`gpdsl.storage.claims`) from :func:`prepare` until it is written.
    """

    model: Model
    data: dict
    method: Any
    settings: Any
    context: RunContext
    out: str | Path | None = None
    scalings: dict = field(default_factory=dict)
    overwrite: bool = False


def prepare(model: Model | str | Path, data: Mapping[str, Any] | str | Path, method: str = "nuts", settings=None,
            *, seed: int | None = None, out: str | Path | None = None, progress: bool = False,
            checkpoint: str | Path | None = None, new_inputs=None, inputs=(), on_warning=None, scheduler=None,
            chain_groups: int | None = None, overwrite: bool = False, command=None,
            allow_external: bool = False, predictive: str | None = None, device: str = "auto") -> PreparedRun:
    """Check everything a run needs, run nothing (see :func:`run` for the parameters; ``command``, the command
    line's arguments, is recorded in the checkpoint for ``gpdsl resume``).

    Returns
    -------
    PreparedRun

    Raises
    ------
    GpdslError
        The first problem found: a model error, an unknown method (with a suggestion), a method that does
        not fit the model, invalid settings, data that disagree with the declarations, a file that cannot
        be written.
    """
    from gpdsl.storage.atomic import check_writable, claim_output
    from gpdsl.storage.checkpoint import resumed_seed, run_identity, verify_resumable
    from gpdsl.data.io import read_scaled_data
    from gpdsl.data.outcome_scale import outcome_scale_warnings
    from gpdsl.data.missing import verify_missing_outcomes
    from gpdsl.data.validation import validate_data
    from gpdsl.errors import MethodError
    from gpdsl.ir.families import GP_REGRESSION, LATENT_GP, classify
    from gpdsl.data.new_inputs import verify_new_inputs
    from gpdsl.data.preflight import verify_runnable
    from gpdsl.registry import get_method
    from gpdsl.scale_out import check_scheduler_run

    if not isinstance(model, Model):
        inputs = (*inputs, *([] if _is_text(model) else [model]))
        model = load_model(model)
    entry = get_method(method)
    verify_external_allowed(model, allow_external)
    classification = classify(model)
    settings = entry.settings() if settings is None else settings
    if not isinstance(settings, entry.settings):
        raise MethodError(f"{entry.name} takes {entry.settings.__name__}, not {type(settings).__name__}")
    refusal = entry.refusal_error(model, classification, settings)
    if refusal is not None:
        raise refusal
    family, facts = classification.require(entry.families, entry.name)
    platform = _device_platform(entry, device)
    refusal = entry.prediction_refusal(model) if new_inputs is not None else None
    if refusal:
        raise MethodError(refusal)
    if checkpoint is not None and not entry.checkpoints:
        raise MethodError(f"{entry.name} writes no checkpoints; methods that do: "
                          f"{', '.join(m.name for m in _methods_with('checkpoints'))}")
    chain_groups = check_scheduler_run(entry, settings, scheduler, chain_groups, checkpoint)
    read = [*inputs, *([data] if isinstance(data, (str, Path)) else [])]
    if checkpoint is not None:
        check_writable(checkpoint, "checkpoint", inputs=read, overwrite=True)
    if out is not None:
        check_writable(out, "results", inputs=[*read, *([checkpoint] if checkpoint is not None else [])],
                       overwrite=overwrite)
    values, scalings = read_scaled_data(data, model)
    missing_family = next((f for f in entry.missing_outputs if f in classification.facts), None)
    data, warnings = validate_data(model, values, output_variables(model) if missing_family else ())
    if missing_family:
        verify_missing_outcomes(model, data, whole_vectors=missing_family in (LATENT_GP, GP_REGRESSION))
    warnings += outcome_scale_warnings(model, data, scalings)
    verify_runnable(model, data, settings)
    verify_new_inputs(model, data, new_inputs, by_name=entry.prediction_file == "variables")
    predictive = entry.predictive_choice(predictive, new_inputs)
    for warning in warnings if on_warning else ():
        on_warning(warning)
    identity = None
    if checkpoint is not None:
        seed = resumed_seed(checkpoint) if seed is None else seed
    seed = draw_seed() if seed is None else verify_seed(seed)
    if checkpoint is not None:
        identity = run_identity(model, data, entry.name, settings, seed, command)
        verify_resumable(checkpoint, identity)
    if out is not None:
        claim_output(out, "results", inputs=[*read, *([checkpoint] if checkpoint is not None else [])],
                     overwrite=overwrite)
    context = RunContext(family, facts, seed, progress, checkpoint, new_inputs, chain_groups, identity, allow_external,
                         predictive, platform)
    return PreparedRun(model, data, entry, settings, context, out,
                       {name: scaling for name, scaling in scalings.items() if name in model.data}, overwrite)


def execute(prepared: PreparedRun, keep_state: bool = False, client=None):
    """Run a prepared run, build its results and write them (see :func:`run` for what it returns).

    With ``client`` (a :class:`distributed.Client`), the run's chain groups are Dask tasks
    (:mod:`gpdsl.scale_out`). The run's claim on its output ends here, written or not.
    """
    from gpdsl.storage import claims

    try:
        return _execute(prepared, keep_state, client)
    finally:
        claims.release(prepared.out)


def _execute(prepared: PreparedRun, keep_state: bool, client):
    import contextlib
    import time

    from gpdsl.data.scaling import scalings_json
    from gpdsl.externals import failures_named
    from gpdsl.inference.progress import stage
    from gpdsl.results.io import write_netcdf
    from gpdsl.results.method_output import method_results
    from gpdsl.storage.checkpoint import elapsed_before

    started = time.perf_counter() - elapsed_before(prepared.context.checkpoint)
    platform = prepared.context.device
    with _on_device(platform, prepared.context.progress) if platform is not None else contextlib.nullcontext():
        if prepared.context.chain_groups is None:
            with failures_named():
                output = prepared.method.run(prepared.model, prepared.data, prepared.settings, prepared.context)
        else:
            from gpdsl.inference.chain_groups import chains_run_by
            from gpdsl.scale_out import RunTask, chain_executor

            task = RunTask.of(prepared) if client is not None else None
            with chains_run_by(chain_executor(prepared.context, client, task)), failures_named():
                output = prepared.method.run(prepared.model, prepared.data, prepared.settings, prepared.context)
            output.attrs = {**output.attrs, "chain_groups": prepared.context.chain_groups}
    if platform is not None:
        from gpdsl.numerics.devices import device_attributes

        output.attrs = {**output.attrs, **device_attributes(platform)}
    output.timings = {**output.timings, "total": time.perf_counter() - started}
    if output.predictions and prepared.context.predictive is not None:
        output.attrs = {**output.attrs, "predictive": prepared.context.predictive}
    if prepared.scalings:
        output.attrs = {**output.attrs, "data_scaling": scalings_json(prepared.scalings)}
    results = method_results(prepared.model, prepared.data, prepared.method.name, prepared.method.engine,
                             prepared.settings, prepared.context.seed, output)
    if prepared.out is not None:
        megabytes = _megabytes(results)
        with stage(f"writing {prepared.out} ({megabytes:.0f} MB)",
                   enabled=prepared.context.progress and megabytes >= LARGE_RESULTS_MB):
            write_netcdf(results, prepared.out, replace=prepared.overwrite)
    return (results, output.state) if keep_state else results


def _device_platform(entry, device: str) -> str | None:
    """The platform a run of ``entry`` runs on (None for Stan, which runs on the CPU), or a clear error."""
    from gpdsl.numerics.devices import DEVICE_CHOICES, DeviceError, resolve_device

    if entry.engine != "stan":
        return resolve_device(device)
    if device not in DEVICE_CHOICES:
        raise DeviceError(f"the device must be one of {', '.join(DEVICE_CHOICES)}; got {device!r}")
    if device == "gpu":
        raise DeviceError(f"{entry.name} runs in Stan, on the CPU: device gpu is for gpdsl's own (JAX) engines",
                          hint="leave the device out for nuts, or choose a JAX method (gpdsl methods FILE lists them)")
    return None


def _on_device(platform: str, say: bool):
    """Run on ``platform`` (:func:`gpdsl.numerics.devices.running_on`), said on standard error when ``say``."""
    from gpdsl.numerics.devices import device_line, running_on

    if say:
        print(device_line(platform), file=sys.stderr)
    return running_on(platform)


def _megabytes(results) -> float:
    from gpdsl.results.arviz_compat import groups

    return sum(group.nbytes for group in groups(results).values()) / 1e6


def run(model: Model | str | Path, data: Mapping[str, Any] | str | Path, method: str = "nuts", settings=None, *,
        seed: int | None = None, out: str | Path | None = None, progress: bool = False,
        checkpoint: str | Path | None = None, new_inputs=None, keep_state: bool = False, inputs=(),
        on_warning=None, scheduler=None, chain_groups: int | None = None, overwrite: bool = False,
        allow_external: bool = False, predictive: str | None = None, device: str = "auto"):
    """Run an inference method on a model: the one entry point of the CLI and the Python API.

    Everything is checked before anything compiles or runs (:func:`prepare`): the method exists and fits
    the model's family (else the refusal says what it needs), every parameter has a prior if the method
    samples them, the settings are valid, the data match the declarations, predictions are supported, and
    ``out`` can be written.

    Parameters
    ----------
    model : Model, str or path
        The checked model (:func:`check`), or a model file or model text to check.
    data : mapping or path
        Data values or a data file (validated here against the declarations).
    method : str
        A registered method (:func:`gpdsl.registry.methods`).
    settings : dataclass, optional
        The method's settings (its ``settings`` class in the registry); defaults when omitted.
    seed : int, optional
        Random seed; one is drawn and recorded in the results when omitted.
    out : path, optional
        Write the results here (NetCDF, atomically); an existing file is refused unless ``overwrite``, and
        an input (model, data, checkpoint) always is.
    progress : bool
        Show progress.
    checkpoint : path, optional
        Chain methods: write the draws so far after each compiled segment, and resume from it when it exists
        (the draws are then bit for bit those of an uninterrupted run). A checkpoint another run wrote (other
        model, data, method, settings or seed; see :mod:`gpdsl.storage.checkpoint`) is refused; without ``seed``, the
        checkpoint's is used.
    new_inputs : array_like, optional
        Inputs at which to predict (methods with ``predicts``).
    predictive : {"joint", "marginal"}, optional
        Draw ``f*`` at the new inputs jointly (from the full predictive covariance given each posterior draw) or
        point by point from each point's marginal (``--predictive``); default joint below 2,000 new points for
        the methods that draw both (:mod:`gpdsl.inference.predict.joint`), and the one kind the others draw. The
        choice is the results' ``predictive`` attribute.
    keep_state : bool
        Also return the method's own result object (e.g. the variational fit).
    inputs : sequence of path
        Files the run reads (model, data): ``out`` must not be one of them.
    on_warning : callable, optional
        Called with each data warning (names the model does not declare, dropped).
    scheduler : str or distributed.Client, optional
        Run on Dask (``pip install 'gpdsl[dask]'``): ``"local"`` (a local cluster of spawned worker processes),
        a scheduler's address (``"tcp://host:8786"``) or a Client. A chain method's chain groups become tasks
        (one group per chain unless ``chain_groups`` says otherwise); any other method runs as one task.
        The results equal, bit for bit, a local run with the same seed and ``chain_groups``.
    chain_groups : int, optional
        Chain methods (``pm``, ``mcmc-ep``, ``gibbs``, ``pm-gplvm``): advance the chains in this many groups,
        one vmap each (see :mod:`gpdsl.inference.chain_groups`); default one vmap over all chains.
    overwrite : bool
        Replace an existing ``out`` file.
    allow_external : bool
        Allow the model's ``external(...)`` likelihoods, which import and run arbitrary Python code
        (:mod:`gpdsl.externals`); a model with one is refused without it.
    device : {"auto", "cpu", "gpu"}
        Where gpdsl's JAX engines run (``--device``): ``auto`` is a GPU when JAX sees one, else the CPU; ``gpu``
        when JAX sees none is refused before the run (install JAX's CUDA wheels with ``pip install
        'gpdsl[cuda]'``). Said on standard error with ``progress``, and recorded in the results' ``device`` and
        ``device_name`` attributes. Stan (``nuts``) runs on the CPU: ``gpu`` is refused for it.

    Returns
    -------
    results : arviz.InferenceData or xarray.DataTree
        Timings (``compile``, ``warmup``, ``sampling``, ``total`` seconds) in the ``timings`` attribute; those of a
        run resumed from a checkpoint add up all its segments.
    state : object
        Only with ``keep_state``.
    """
    prepared = prepare(model, data, method, settings, seed=seed, out=out, progress=progress, checkpoint=checkpoint,
                       new_inputs=new_inputs, inputs=inputs, on_warning=on_warning, scheduler=scheduler,
                       chain_groups=chain_groups, overwrite=overwrite, allow_external=allow_external,
                       predictive=predictive, device=device)
    return execute_here_or_on(prepared, scheduler, keep_state=keep_state)


def execute_here_or_on(prepared: PreparedRun, scheduler=None, keep_state: bool = False):
    """:func:`execute` a prepared run here, or on a Dask ``scheduler`` (see :func:`run`)."""
    if scheduler is None:
        return execute(prepared, keep_state=keep_state)
    from gpdsl.scale_out import connect, execute_on

    with connect(scheduler) as client:
        return execute_on(client, prepared, keep_state=keep_state)


def sample(model: Model | str | Path, data: Mapping[str, Any] | str | Path, method: str = "nuts", *,
           seed: int | None = None, out: str | Path | None = None, progress: bool = False, new_inputs=None,
           scheduler=None, chain_groups: int | None = None, overwrite: bool = False, allow_external: bool = False,
           predictive: str | None = None, device: str = "auto", **settings):
    """Draw from the posterior with a sampler, its settings as keywords (``gpdsl sample``).

    Parameters
    ----------
    model : Model, str or path
        A checked model, a ``.gpm`` file or model text.
    data : mapping or path
        Data values or a data file (``.json``, ``.csv``, ``.nc``).
    method : str
        A method of ``gpdsl sample``: ``nuts`` (default), ``pm``, ``mcmc-ep``, ``gibbs``, ``pm-gplvm``, ...
    seed : int, optional
        Random seed (drawn and recorded when omitted).
    out : path, optional
        Also write the results to this NetCDF file (an existing one only with ``overwrite``).
    progress : bool
        Show progress.
    new_inputs : array_like, optional
        Inputs at which to predict (a ``predictions`` group).
    predictive : {"joint", "marginal"}, optional
        Joint or point-by-point draws at the new inputs (see :func:`run`).
    scheduler : str or distributed.Client, optional
        Run the chains as Dask tasks (see :func:`run`).
    chain_groups : int, optional
        Advance the chains in this many groups (see :func:`run`).
    overwrite : bool
        Replace an existing ``out`` file.
    allow_external : bool
        Allow ``external(...)`` likelihoods (arbitrary Python code; see :func:`run`).
    device : {"auto", "cpu", "gpu"}
        Where gpdsl's JAX engines run (``--device``; see :func:`run`).
    **settings
        The method's settings by name (``chains=4``, ``approximation="ep"``), validated as the
        command-line flags are; a misspelt name gets a suggestion.

    Returns
    -------
    arviz.InferenceData or xarray.DataTree

    Examples
    --------
    >>> import gpdsl
    >>> fit = gpdsl.sample("models/gp_classification.gpm", "data.json", "pm",
    ...                    approximation="ep", chains=4, seed=1)  # doctest: +SKIP
    """
    return _run_command("sample", model, data, method, seed, out, progress, new_inputs, settings, scheduler,
                        chain_groups, overwrite, allow_external, predictive, device)


def fit(model: Model | str | Path, data: Mapping[str, Any] | str | Path, method: str = "vem", *,
        seed: int | None = None, out: str | Path | None = None, progress: bool = False, new_inputs=None,
        scheduler=None, overwrite: bool = False, predictive: str | None = None, device: str = "auto", **settings):
    """Fit a model by an optimiser or variational method (``gpdsl fit``): ``vem`` (default) or ``ml``.

    Parameters are those of :func:`sample` (``scheduler`` runs the fit as one Dask task); the point estimates
    are stored as a one-draw posterior.

    Returns
    -------
    arviz.InferenceData or xarray.DataTree

    Examples
    --------
    >>> import gpdsl
    >>> result = gpdsl.fit("models/bayesian_gplvm.gpm", "oil.json", num_inducing=30, seed=0)  # doctest: +SKIP
    """
    return _run_command("fit", model, data, method, seed, out, progress, new_inputs, settings, scheduler,
                        overwrite=overwrite, predictive=predictive, device=device)


def _run_command(command, model, data, method, seed, out, progress, new_inputs, settings, scheduler=None,
                 chain_groups=None, overwrite=False, allow_external=False, predictive=None, device="auto"):
    from gpdsl.errors import MethodError
    from gpdsl.registry import get_method

    entry = get_method(method)
    if entry.command != command:
        raise MethodError(f"{entry.name} is a method of gpdsl.{entry.command}, not of gpdsl.{command}")
    chosen = entry.settings_from(settings, "settings")
    return run(model, data, entry.name, chosen, seed=seed, out=out, progress=progress, new_inputs=new_inputs,
               scheduler=scheduler, chain_groups=chain_groups, overwrite=overwrite, allow_external=allow_external,
               predictive=predictive, device=device)


def verify_external_allowed(model: Model, allow_external: bool) -> None:
    """Refuse a model with an ``external(...)`` likelihood unless the run allows arbitrary code.

    Raises
    ------
    MethodError
        At the first external likelihood, one line naming the flag that allows it.
    """
    from gpdsl import externals

    for statement in external_likelihoods(model) if not allow_external else ():
        raise externals.refused(statement.function, statement.span)


def external_likelihoods(model: Model) -> list:
    """The model's ``external(...)`` likelihood statements (:mod:`gpdsl.externals`), in order."""
    from gpdsl.ir.nodes import ExternalLikelihood

    return [statement for statement in model.likelihoods() if isinstance(statement, ExternalLikelihood)]


def new_inputs_from_file(path, model: Model, method: str):
    """The GP input variable's values in a prediction data file (same name as in the model): ``--predict``.

    For the GPLVM methods every variable of the file, by name: the new inputs of the latent inputs' GP prior
    and new (partially observed) outputs, which the method picks from.
    """
    from gpdsl.data.io import read_data
    from gpdsl.errors import DataError
    from gpdsl.ir.structure import process_nodes
    from gpdsl.registry import get_method

    values = read_data(path)
    if get_method(method).prediction_file == "variables":
        return values
    names = {name for node in process_nodes(model) for name in node.statement.inputs.names if name}
    found = [name for name in names if name in values]
    if len(found) != 1:
        raise DataError(f"{path} must hold the new inputs under the model's input name "
                        f"({' or '.join(sorted(names)) or 'none'})")
    return values[found[0]]


def draw_seed() -> int:
    """A fresh random seed in ``[0, 2**31)`` (Stan and JAX both accept it)."""
    return secrets.randbelow(2**31)


def verify_seed(seed) -> int:
    """The seed as an int in ``[0, 2**31)``, or a clear error."""
    from gpdsl.errors import MethodError

    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or not 0 <= int(seed) < 2**31:
        raise MethodError(f"the seed must be an integer in [0, 2^31); got {seed!r}")
    return int(seed)


def output_variables(model: Model) -> list[str]:
    """Observed variables (their missing entries are allowed for methods that say so)."""
    from gpdsl.data.missing import outcome_names

    return outcome_names(model)


def _methods_with(capability: str):
    from gpdsl.registry import methods

    return [m for m in methods().values() if getattr(m, capability)]
