"""The library API the CLI and case studies use: load and check models, and run any method on them."""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from gpdsl.errors import CheckWarning
from gpdsl.ir.nodes import Model
from gpdsl.semantics.check import check_program
from gpdsl.syntax.parser import parse, parse_file


def check_text(text: str, name: str = "<string>") -> tuple[Model, list[CheckWarning]]:
    """Parse and check model text.

    Parameters
    ----------
    text : str
        Model source.
    name : str
        File name for messages.

    Returns
    -------
    model : Model
        The typed IR.
    warnings : list of CheckWarning
    """
    return check_program(parse(text, name))


def check_file(path: str | Path) -> tuple[Model, list[CheckWarning]]:
    """Parse and check a ``.gpm`` file (see :func:`check_text`)."""
    return check_program(parse_file(path))


def load_model(path_or_text: str | Path) -> Model:
    """The checked model of a file path, or of model text if it contains a newline or brace."""
    text = str(path_or_text)
    if isinstance(path_or_text, Path) or ("{" not in text and "\n" not in text):
        return check_file(path_or_text)[0]
    return check_text(text)[0]


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
    new_inputs : numpy.ndarray, optional
        Inputs to predict at.
    """

    family: str
    facts: Any
    seed: int
    progress: bool = False
    checkpoint: str | Path | None = None
    new_inputs: Any = None


def run(model: Model, data: Mapping[str, Any] | str | Path, method: str = "nuts", settings=None, *,
        seed: int | None = None, out: str | Path | None = None, progress: bool = False,
        checkpoint: str | Path | None = None, new_inputs=None, keep_state: bool = False, inputs=(),
        on_warning=None):
    """Run an inference method on a model: the one entry point of the CLI and the Python API.

    Everything is checked before anything compiles or runs: the method exists and fits the model's
    family (else the refusal says what it needs), every parameter has a prior if the method samples
    them, the settings are valid, the data match the declarations, predictions are supported, and
    ``out`` can be written.

    Parameters
    ----------
    model : Model
        The checked model (:func:`check_file`).
    data : mapping or path
        Data values or a data file (validated here against the declarations).
    method : str
        A registered method (:func:`gpdsl.registry.methods`).
    settings : dataclass, optional
        The method's settings (its ``settings`` class in the registry); defaults when omitted.
    seed : int, optional
        Random seed; one is drawn and recorded in the results when omitted.
    out : path, optional
        Write the results here (NetCDF, atomically).
    progress : bool
        Show progress.
    checkpoint : path, optional
        Chain methods: write the draws so far after each compiled segment, and resume from it.
    new_inputs : array_like, optional
        Inputs at which to predict (methods with ``predicts``).
    keep_state : bool
        Also return the method's own result object (e.g. the variational fit).
    inputs : sequence of path
        Files the run reads (model, data): ``out`` must not be one of them.
    on_warning : callable, optional
        Called with each data warning (names the model does not declare, dropped).

    Returns
    -------
    results : arviz.InferenceData or xarray.DataTree
    state : object
        Only with ``keep_state``.
    """
    from gpdsl.atomic import check_writable
    from gpdsl.data_io import load_data
    from gpdsl.errors import MethodError
    from gpdsl.ir.families import classify, require_priors
    from gpdsl.registry import get_method
    from gpdsl.results.io import write_netcdf
    from gpdsl.results.method_output import method_results

    entry = get_method(method)
    family, facts = classify(model).require(entry.families, entry.name)
    if entry.requires_priors:
        require_priors(model, entry.name)
    settings = entry.settings() if settings is None else settings
    if not isinstance(settings, entry.settings):
        raise MethodError(f"{entry.name} takes {entry.settings.__name__}, not {type(settings).__name__}")
    refusal = entry.prediction_refusal(model) if new_inputs is not None else None
    if refusal:
        raise MethodError(refusal)
    if checkpoint is not None and not entry.checkpoints:
        raise MethodError(f"{entry.name} writes no checkpoints; methods that do: "
                          f"{', '.join(m.name for m in _methods_with('checkpoints'))}")
    if out is not None:
        check_writable(out, "results", inputs=[*inputs, *([data] if isinstance(data, (str, Path)) else [])])
    data, warnings = load_data(data, model, allow_missing=output_variables(model) if entry.missing_outputs else ())
    for warning in warnings if on_warning else ():
        on_warning(warning)
    seed = draw_seed() if seed is None else verify_seed(seed)
    context = RunContext(family, facts, seed, progress, checkpoint, new_inputs)
    output = entry.run(model, data, settings, context)
    results = method_results(model, data, entry.name, entry.engine, settings, seed, output)
    if out is not None:
        write_netcdf(results, out)
    return (results, output.state) if keep_state else results


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
    """Real-valued observed variables (their missing entries are allowed for methods that say so)."""
    return [s.target.name for s in model.likelihoods()
            if s.target.name in model.data and model.data[s.target.name].type.base == "real"]


def _methods_with(capability: str):
    from gpdsl.registry import methods

    return [m for m in methods().values() if getattr(m, capability)]
