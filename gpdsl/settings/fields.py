"""Settings fields: how a setting appears on the command line, and the checks every settings class uses.

A method's settings class (:mod:`gpdsl.settings`) is a frozen dataclass whose fields are made with
:func:`option`; the CLI's flags and ``--help`` are generated from them, and ``__post_init__`` validates every
value with the ``require_*`` checks before anything compiles or runs (as cmdstanpy's ``cmdstan_args`` does).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol, runtime_checkable

from gpdsl.errors import MethodError


def option(default: Any, help: str, *, choices: tuple | None = None, flag: str | None = None,
           metavar: str | None = None, parse: Callable | None = None, repeat: bool = False,
           negate: str | None = None, cli: bool = True, reads_file: bool = False, aliases: tuple[str, ...] = ()):
    """A settings field with its command-line form.

    Parameters
    ----------
    default
        The default value.
    help : str
        One line for ``--help``.
    choices : tuple, optional
        The allowed values (as typed on the command line; ``-`` stands for ``_``).
    flag : str, optional
        The flag, default ``--<name with dashes>``.
    metavar : str, optional
        The value's name in ``--help``.
    parse : callable, optional
        Turns the command-line string (or list of strings with ``repeat``) into the value.
    repeat : bool
        The flag may be given several times (values collected in a list).
    negate : str, optional
        For a boolean that defaults to True: the flag that sets it False (``--no-...``).
    cli : bool
        False keeps the field out of the command line (Python API only).
    reads_file : bool
        The flag's value is a file the run reads (an input the run's outputs must never replace).
    aliases : tuple of str
        Other spellings the command line and run files accept for the flag (``--no-standardise``).
    """
    metadata = {"help": help, "choices": choices, "flag": flag, "metavar": metavar, "parse": parse,
                "repeat": repeat, "negate": negate, "cli": cli, "reads_file": reads_file, "aliases": tuple(aliases)}
    if isinstance(default, (list, dict)):
        return field(default_factory=lambda: type(default)(default), metadata=metadata)
    return field(default=default, metadata=metadata)


def cli_fields(settings_class) -> list[dataclasses.Field]:
    """The fields of a settings class that appear on the command line."""
    return [f for f in dataclasses.fields(settings_class) if f.metadata.get("cli", False)]


def flag_of(settings_field: dataclasses.Field) -> str:
    """The command-line flag of a settings field."""
    meta = settings_field.metadata
    return meta.get("negate") or meta.get("flag") or "--" + settings_field.name.replace("_", "-")


LARGEST_INT = 2**31 - 1
"""The largest count a setting takes (CmdStan's ``int``; a count beyond it is a typing slip)."""


class SettingError(MethodError):
    """A setting's value is refused: ``setting`` names it (the field), ``requirement`` says what is allowed.

    The message is ``"<setting> <requirement>"``; the command line names the flag instead
    (:func:`gpdsl.cli.options.settings_from_args`).
    """

    def __init__(self, setting: str, requirement: str):
        super().__init__(f"{setting} {requirement}")
        self.args = (setting, requirement)
        self.setting = setting
        self.requirement = requirement


def require_positive_int(name: str, value, allow_zero: bool = False, high: int = LARGEST_INT) -> None:
    """Refuse a value that is not a (positive, or non-negative) integer at most ``high``, naming the setting."""
    low = 0 if allow_zero else 1
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise SettingError(name, f"must be an integer >= {low}; got {value!r}")
    if value > high:
        raise SettingError(name, f"must be an integer in [{low}, {high}]; got {value!r}")


def require_number(name: str, value, low: float | None = None, high: float | None = None,
                   open_low: bool = False, open_high: bool = False, optional: bool = False) -> None:
    """Refuse a value that is not a finite number in the given range, naming the setting."""
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise SettingError(name, f"must be a finite number; got {value!r}")
    below = low is not None and (value <= low if open_low else value < low)
    above = high is not None and (value >= high if open_high else value > high)
    if below or above:
        left = "(" if open_low else "["
        right = ")" if open_high else "]"
        span = f"{left}{'-inf' if low is None else low}, {'inf' if high is None else high}{right}"
        raise SettingError(name, f"must be in {span}; got {value!r}")


_TYPES = {"bool": "true or false", "int": "an integer", "float": "a number", "str": "a string", "list": "a list",
          "dict": "a table of names to values", "None": "none"}


def require_type(settings_field: dataclasses.Field, value) -> None:
    """Refuse a value that is not of the field's declared type (``int``, ``float | None``, ...), naming the field.

    Numbers are not booleans; an integer is a number.
    """
    kinds = [kind.strip() for kind in str(getattr(settings_field.type, "__name__", settings_field.type)).split("|")]
    plain = not isinstance(value, bool)
    accepted = {"bool": isinstance(value, bool), "int": plain and isinstance(value, int),
                "float": plain and isinstance(value, (int, float)), "str": isinstance(value, str),
                "list": isinstance(value, list), "dict": isinstance(value, dict), "None": value is None}
    if not any(accepted.get(kind, True) for kind in kinds):
        raise SettingError(settings_field.name, f"must be {' or '.join(_TYPES.get(k, k) for k in kinds)}; "
                                                f"got {value!r}")


def require_covariance(name: str, value) -> None:
    """Refuse a value that is not a symmetric positive-definite matrix of finite numbers (a list of rows)."""
    import numpy as np

    try:
        matrix = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        matrix = None
    if matrix is None or matrix.ndim != 2 or matrix.shape[0] != matrix.shape[1] or matrix.size == 0 \
            or not np.isfinite(matrix).all() or not np.allclose(matrix, matrix.T):
        raise SettingError(name, "must be a symmetric square matrix of finite numbers (a list of rows); got "
                                 f"{_shortened(value)}")
    if np.linalg.eigvalsh(matrix).min() <= 0:
        raise SettingError(name, "must be positive definite; its smallest eigenvalue is "
                                 f"{np.linalg.eigvalsh(matrix).min():.3g}")


def _shortened(value, width: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= width else f"{text[:width - 3]}..."


def require_choice(name: str, value, choices) -> None:
    """Refuse a value outside ``choices``, listing them."""
    if value not in choices:
        raise MethodError(f"unknown {name} '{value}'; use one of {', '.join(map(str, choices))}")


def initial_values_from_cli(items) -> dict:
    """``--init-value NAME=VALUE`` (repeatable; vectors as ``v1,v2,...``) as a dict of initial values."""
    values = {}
    for item in items or ():
        name, sep, text = item.partition("=")
        try:
            values[name.strip()] = [float(v) for v in text.split(",")] if "," in text else float(text)
        except ValueError:
            sep = ""
        if not sep:
            raise MethodError(f"--init-value expects name=value or name=v1,v2,...; got '{item}'")
    return values


def settings_from_mapping(method: str, settings_class, values, where: str = "settings", owners=None):
    """``settings_class`` (of the method called ``method``) from a mapping, validated as flags are.

    Keys are field names (``num_importance``) or flag names without dashes (``num-importance``, ``no-...``);
    strings are converted as on the command line (``--block s1,theta``, ``--approximation ep``).

    Parameters
    ----------
    method : str
        The method's name, for messages.
    settings_class : type
    values : mapping
    where : str
        What holds the mapping, for messages.
    owners : dict of str to type, optional
        Every method's settings class by name: a key that is another method's setting says whose.

    Raises
    ------
    MethodError
        A key is not a setting (with a suggestion), or a value is invalid.
    """
    from gpdsl.suggest import unknown_name_hint

    fields = {f.name: f for f in dataclasses.fields(settings_class)}
    flags = {flag.lstrip("-"): f for f in cli_fields(settings_class)
             for flag in (flag_of(f), *f.metadata.get("aliases", ()))}
    chosen = {}
    for key, value in dict(values).items():
        settings_field = fields.get(str(key).replace("-", "_")) or flags.get(str(key))
        if settings_field is None:
            name = str(key).replace("-", "_")
            found = [owner for owner, cls in (owners or {}).items()
                     if name in {f.name for f in dataclasses.fields(cls)}]
            owned = f" (a setting of {', '.join(found)})" if found else ""
            raise MethodError(f"{where}: '{key}' is not a setting of {method}{owned}",
                              hint=unknown_name_hint(key, fields, f"settings of {method}"))
        meta = settings_field.metadata
        spellings = (meta["negate"], *meta.get("aliases", ())) if meta.get("negate") else ()
        negated = str(key) in {name.lstrip("-") for name in spellings}
        if negated and isinstance(value, bool):
            value = not value
        elif meta.get("parse") and (isinstance(value, str) or
                                    (meta.get("repeat") and isinstance(value, list) and
                                     all(isinstance(v, str) for v in value))):
            value = command_line_value(settings_field, value)
        elif meta.get("choices") and isinstance(value, str):
            value = command_line_value(settings_field, value)
        require_type(settings_field, value)
        chosen[settings_field.name] = value
    return settings_class(**chosen)


def command_line_value(settings_field, value):
    """A command-line value of ``settings_field`` converted: by its ``parse``, or ``-`` to ``_`` in a choice."""
    meta = settings_field.metadata
    if meta.get("parse"):
        return meta["parse"](value)
    if meta.get("choices") and isinstance(value, str):
        return value.replace("-", "_")
    return value


@dataclass(frozen=True)
class RunPlan:
    """What a run's settings tell the checks made before it starts (:mod:`gpdsl.data.preflight`).

    Every method's settings class declares it through :meth:`PlannedRun.run_plan`, so that preflight never
    guesses a method's arrays from the names of its settings.

    Attributes
    ----------
    chains, draws : int, optional
        Chains run side by side (each with its own kernel matrices) and draws kept per chain.
    full_kernel : bool
        The run factorises ``N x N`` kernel matrices (False for sparse and variational methods).
    inducing : int, optional
        Inducing inputs (``--num-inducing``): an ``N x M`` cross-covariance, and ``M`` at most ``N``.
    importance : int, optional
        Importance draws per estimate, each a copy of the latent values.
    quadrature_nodes : int, optional
        Gauss-Hermite nodes per latent dimension of the Psi statistics.
    initial_values : dict
        Starting values of hyperparameters by name (``--init-value``), checked against their declarations.
    repeats : tuple of (str, int, str)
        Arrays a setting sizes, each ``(what, count, unit)``, per chain: ``count`` copies of a unit of
        :data:`REPEAT_UNITS` (``("the updates of one iteration (--repeat-f)", 10, "values")``).
    """

    chains: int | None = None
    draws: int | None = None
    full_kernel: bool = True
    inducing: int | None = None
    importance: int | None = None
    quadrature_nodes: int | None = None
    initial_values: dict = field(default_factory=dict)
    repeats: tuple = ()


REPEAT_UNITS = ("values", "parameters", "latent inputs", "latent inputs squared")
"""What a :attr:`RunPlan.repeats` entry counts copies of: one number, the model's parameter values, the values of its
declared latent variables (latent inputs), or their square (a Hessian over them)."""


@runtime_checkable
class PlannedRun(Protocol):
    """The protocol of a method's settings: :meth:`run_plan` says what its run allocates and starts from."""

    def run_plan(self) -> RunPlan:
        """The run's :class:`RunPlan`."""
