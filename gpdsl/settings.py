"""Method settings: dataclasses whose fields say how they appear on the command line, validated on creation.

Each method's settings class (declared in its module, listed in :mod:`gpdsl.registry`) is a frozen
dataclass whose fields are made with :func:`option`; the CLI's flags and ``--help`` are generated
from them, and ``__post_init__`` validates every value before anything compiles or runs (as
cmdstanpy's ``cmdstan_args`` does).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, Callable

from gpdsl.errors import MethodError


def option(default: Any, help: str, *, choices: tuple | None = None, flag: str | None = None,
           metavar: str | None = None, parse: Callable | None = None, repeat: bool = False,
           negate: str | None = None, cli: bool = True, reads_file: bool = False):
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
    """
    metadata = {"help": help, "choices": choices, "flag": flag, "metavar": metavar, "parse": parse,
                "repeat": repeat, "negate": negate, "cli": cli, "reads_file": reads_file}
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
    (:func:`gpdsl.cli_options.settings_from_args`).
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


@dataclass(frozen=True)
class ChainSettings:
    """Settings every Markov chain method shares.

    Attributes
    ----------
    chains : int
        Independent chains.
    warmup : int
        Warmup (adaptation, burn-in) iterations per chain, not kept.
    draws : int
        Kept iterations per chain.
    """

    chains: int = option(4, "independent chains")
    warmup: int = option(1000, "warmup iterations per chain (adaptation; not kept)")
    draws: int = option(1000, "kept draws per chain")

    def __post_init__(self):
        require_positive_int("chains", self.chains)
        require_positive_int("warmup", self.warmup, allow_zero=True)
        require_positive_int("draws", self.draws)


@dataclass(frozen=True)
class SegmentedChainSettings(ChainSettings):
    """Settings of the chain methods gpdsl's driver runs (:func:`gpdsl.inference.driver.run_chains`).

    Attributes
    ----------
    segment_size : int
        Iterations per compiled segment; progress and the checkpoint (``--checkpoint``) are written after each.
        The draws do not depend on it.
    initial_values : dict
        Hyperparameters every chain starts at, by name (constrained values; one value for a whole vector, or one
        per element); the others start where the method starts them (a draw from their priors, or the
        variational fit's estimate).
    """

    segment_size: int = option(100, "iterations per compiled segment: progress and the checkpoint are written "
                                    "after each (the draws do not depend on it)")
    initial_values: dict = option({}, "start every chain at this value of a hyperparameter (repeatable; vectors as "
                                      "v1,v2,...; default: where the method starts them)", flag="--init-value",
                                  metavar="NAME=VALUE", repeat=True, parse=initial_values_from_cli)

    def __post_init__(self):
        super().__post_init__()
        require_positive_int("segment_size", self.segment_size)
        if not isinstance(self.initial_values, dict):
            raise MethodError(f"initial_values must be a dict of name to value; got {self.initial_values!r}")


@dataclass(frozen=True)
class AdamScheduleSettings:
    """Settings every method fitted by Adam over de Souza's (2020) schedule shares
    (:mod:`gpdsl.inference.optimise.adam`): ``noise_fixed_steps`` with the likelihood's scale held, then ``steps``
    with everything free, fresh moments in each phase.

    Attributes
    ----------
    noise_fixed_steps, steps : int
        The two phases' steps.
    learning_rate : float
        Adam's step size.
    chunk : int
        Adam steps per compiled chunk: progress and the checkpoint (``--checkpoint``) are written after each.
    initial_values : dict
        Constrained starting values of hyperparameters by name.
    seed : int
        Seed of the start and of any minibatches and samples (the run's seed replaces it).
    """

    noise_fixed_steps: int = option(2000, "Adam steps with the likelihood's scale held at its initial value (0: none)")
    steps: int = option(5000, "Adam steps with every parameter free, after --noise-fixed-steps (fresh moments)")
    learning_rate: float = option(0.01, "Adam's step size")
    chunk: int = option(100, "Adam steps per compiled chunk: progress and the checkpoint are written after each")
    initial_values: dict = option({}, "initial value of a hyperparameter (repeatable; vectors as v1,v2,...)",
                                  flag="--init-value", metavar="NAME=VALUE", repeat=True,
                                  parse=initial_values_from_cli)
    seed: int = option(0, "seed (replaced by the run's)", cli=False)

    def __post_init__(self):
        if not isinstance(self.initial_values, dict):
            raise MethodError(f"initial_values must be a dict of name to value; got {self.initial_values!r}")
        require_positive_int("noise_fixed_steps", self.noise_fixed_steps, allow_zero=True)
        require_positive_int("steps", self.steps)
        require_positive_int("chunk", self.chunk)
        require_number("learning_rate", self.learning_rate, 0, open_low=True)
        require_positive_int("seed", self.seed, allow_zero=True)

    def phases(self, noise_held, held=None) -> list:
        """The schedule as :class:`~gpdsl.inference.optimise.adam.Phase` s over a flat vector: the coordinates of
        ``noise_held`` and ``held`` (boolean masks) still in the first, those of ``held`` in the second; empty
        phases dropped."""
        import numpy as np

        from gpdsl.inference.optimise.adam import Phase

        noise_held = np.asarray(noise_held, dtype=bool)
        first = noise_held if held is None else noise_held | held
        phases = [Phase(self.noise_fixed_steps, first), Phase(self.steps, held)]
        return [phase for phase in phases if phase.steps]
