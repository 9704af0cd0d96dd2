"""External likelihoods: user Python functions a model names with ``external("...", args...)``.

A statement ``y ~ external("mypkg.pricing:call_prices", softplus(f + mu), sigma_c);`` calls
``call_prices(y, softplus(f + mu), sigma_c)``, which returns the log likelihood of ``y`` (a scalar). The
name is either ``package.module:function`` (imported) or a bare name declared by an installed package in
the entry-point group ``gpdsl.likelihoods``::

    [project.entry-points."gpdsl.likelihoods"]
    dupire_call_prices = "mypkg.pricing:call_prices"

Running it means running arbitrary code, so it is loaded only when the run allows it
(``--allow-external`` on the command line, ``allow_external=True`` in :mod:`gpdsl.api`); no file (a run file, a
checkpoint, a results file) can allow it. A refusal is one line naming the flag (:func:`refused`); a function
that fails is a user error naming it (:class:`ExternalError`, raised by :func:`failures_named`).

A JAX-traceable function is compiled with the rest of the model. A function that is not (it calls NumPy
or SciPy on its arguments) runs on the host through :func:`jax.pure_callback`: every evaluation then
copies its arguments to the host and back, cannot be fused or differentiated, and runs one chain at a
time. Which of the two applies is found by tracing the function once on abstract arguments; a function
may also say so itself with an attribute ``gpdsl_traceable = True`` or ``False``.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

from gpdsl.errors import MethodError

ENTRY_POINT_GROUP = "gpdsl.likelihoods"

_TRACING_ERRORS = (jax.errors.TracerArrayConversionError, jax.errors.ConcretizationTypeError,
                   jax.errors.TracerIntegerConversionError, jax.errors.TracerBoolConversionError)


class ExternalError(MethodError):
    """An external likelihood failed: the message names the function (and the step, where there is one)."""


class ExternalRefused(MethodError):
    """A run that has not allowed external code meets an external likelihood: one line, where and which flag.

    Attributes
    ----------
    function : str
        The external likelihood's name, as the model writes it.
    """

    function = ""

    def render(self) -> str:
        """``file:line:col: method error: ...`` on one line (no excerpt, no hint)."""
        return super().render().split("\n")[0]


_failures: list[ExternalError] = []


class _OwnFailures(logging.Filter):
    """Drops JAX's log record (with its traceback) of a host callback that raised an :class:`ExternalError`:
    the error itself is reported, once, as the run's error."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        while error is not None:
            if isinstance(error, ExternalError):
                return False
            error = error.__cause__ or error.__context__
        return True


logging.getLogger("jax._src.callback").addFilter(_OwnFailures())


def pending_failure() -> ExternalError | None:
    """The error an external likelihood raised inside a compiled run (JAX reports it wrapped in its own), once."""
    failure = _failures[-1] if _failures else None
    _failures.clear()
    return failure


@contextlib.contextmanager
def failures_named():
    """Re-raise an error an external likelihood raised inside compiled code as itself (a user error naming the
    function) rather than as the runtime error JAX wraps it in."""
    pending_failure()
    try:
        yield
    except Exception as error:
        failure = pending_failure()
        if failure is None or failure is error:
            raise
        raise failure from error


@dataclass(frozen=True)
class External:
    """A loaded external likelihood.

    Attributes
    ----------
    name : str
        As written in the model.
    function : callable
        ``function(y, *args) -> log likelihood``.
    """

    name: str
    function: Callable

    def __call__(self, y, *args, where: str = ""):
        """The log likelihood, traced where the function allows it and through a host callback otherwise."""
        if self.traceable(y, *args):
            try:
                return jnp.asarray(self.function(y, *args), dtype=jnp.float64)
            except MethodError:
                raise
            except (Exception, SystemExit) as error:  # noqa: BLE001 - the user's code: any error, named
                raise ExternalError(self.failure(error, where)) from error
        return self.on_host(y, *args, where=where)

    def traceable(self, y, *args) -> bool:
        """Whether the function runs on JAX values (declared by ``gpdsl_traceable``, else tried once)."""
        declared = getattr(self.function, "gpdsl_traceable", None)
        if declared is not None:
            return bool(declared)
        shapes = [jax.ShapeDtypeStruct(np.shape(a), jnp.result_type(a)) for a in (y, *args)]
        try:
            jax.eval_shape(self.function, *shapes)
        except _TRACING_ERRORS:
            return False
        except Exception:  # noqa: BLE001 - it fails on JAX values for its own reasons: run it on the host
            return False
        return True

    def on_host(self, y, *args, where: str = ""):
        """The log likelihood computed by NumPy code through :func:`jax.pure_callback`."""
        def host(*values):
            try:
                value = np.asarray(self.function(*(np.asarray(v) for v in values)), dtype=np.float64)
            except (Exception, SystemExit) as error:  # noqa: BLE001 - the user's code: any error, named
                _failures.append(ExternalError(self.failure(error, where)))
                raise _failures[-1] from error
            if value.shape != ():
                _failures.append(ExternalError(f"external likelihood {self.name} returned shape {value.shape}{where}; "
                                               "it must return one number, the log likelihood"))
                raise _failures[-1]
            return value

        result = jax.ShapeDtypeStruct((), jnp.float64)
        return jax.pure_callback(host, result, y, *args, vmap_method="sequential")

    def failure(self, error: Exception, where: str) -> str:
        return f"external likelihood {self.name} failed{where}: {type(error).__name__}: {error}"


FLAG = "--allow-external"
"""The command-line flag that allows external code (``allow_external=True`` in Python)."""


def refusal(name: str) -> str:
    """Why a run that has not allowed external code does not run ``name``, naming the flag that would."""
    return (f"the external likelihood {name} runs arbitrary Python code, which gpdsl runs only with {FLAG} on the "
            "command line (allow_external=True in Python); give it if you trust that code")


def refused(name: str, span=None) -> ExternalRefused:
    """The one-line error of a run that meets the external likelihood ``name`` without being allowed to run it."""
    error = ExternalRefused(refusal(name), span)
    error.function = name
    return error


def import_path_hint(module_name: str) -> str:
    """Where Python looks for an external likelihood's module, and how to put one there."""
    top = module_name.split(".")[0]
    here = Path.cwd() / f"{top}.py"
    if here.is_file() or (Path.cwd() / top).is_dir():
        return (f"{top} is in the working directory, which Python does not search when gpdsl runs as a command: "
                f"run PYTHONPATH=. gpdsl ... (or install the module)")
    return "Python imports it from its import path: install the module, or add its directory to PYTHONPATH"


def load(name: str) -> External:
    """Resolve ``"package.module:function"``, or a name in the entry-point group ``gpdsl.likelihoods``.

    Raises
    ------
    MethodError
        Naming what could not be found.
    """
    if ":" not in name:
        found = [e for e in metadata.entry_points(group=ENTRY_POINT_GROUP) if e.name == name]
        if not found:
            raise MethodError(f"no installed package declares the external likelihood '{name}' (entry-point "
                              f"group {ENTRY_POINT_GROUP})", hint="name it as \"package.module:function\"")
        try:
            return External(name, found[0].load())
        except (ImportError, AttributeError) as error:
            raise MethodError(f"cannot load external likelihood {name} ({found[0].value}): {error}") from None
    module_name, _, attribute = name.partition(":")
    try:
        function = getattr(importlib.import_module(module_name), attribute)
    except ModuleNotFoundError as error:
        raise MethodError(f"cannot load external likelihood {name}: {error}", hint=import_path_hint(module_name)) \
            from None
    except (ImportError, AttributeError) as error:
        raise MethodError(f"cannot load external likelihood {name}: {error}") from None
    if not callable(function):
        raise MethodError(f"external likelihood {name} is not a function")
    return External(name, function)
