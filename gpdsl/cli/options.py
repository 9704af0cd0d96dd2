"""The ``sample`` and ``fit`` commands' flags, generated from the method registry.

Each registered method's settings fields (:func:`gpdsl.settings.option`) become flags; a flag shared
by several methods (``--chains``, ``--tol``) appears once and its help names them. A flag given for a
method that does not take it is refused, naming the methods that do.
"""

from __future__ import annotations

import argparse
import dataclasses

from gpdsl.errors import MethodError
from gpdsl.numerics.devices import CUDA_INSTALL, DEVICE_CHOICES
from gpdsl.registry import JOINT_LIMIT, PREDICTIVE_CHOICES, methods
from gpdsl.settings import SettingError, cli_fields, flag_of
from gpdsl.settings.fields import command_line_value

DEFAULT_METHOD = {"sample": "nuts", "fit": "vem"}


def add_method_command(sub, command: str, text: str, handler) -> argparse.ArgumentParser:
    """Add ``gpdsl sample`` or ``gpdsl fit`` with the flags of the methods it offers."""
    offered = [m for m in methods().values() if m.command == command]
    parser = sub.add_parser(command, help=text, description=text)
    parser.add_argument("file", metavar="FILE")
    parser.add_argument("--data", required=True, metavar="DATA", help=".json, .csv or .nc data file")
    default = DEFAULT_METHOD.get(command, offered[0].name if offered else None)
    parser.add_argument("--method", choices=[m.name for m in offered], default=default,
                        help="; ".join(f"{m.name}: {m.summary}" for m in offered) + f" (default {default})")
    parser.add_argument("--seed", type=int, default=None, help="random seed (default: drawn and recorded)")
    add_device_flag(parser)
    parser.add_argument("--out", required=True, metavar="FIT.nc", help="results file (NetCDF), written atomically")
    parser.add_argument("--quiet", action="store_true", help="no progress and no summary")
    parser.add_argument("--allow-external", action="store_true",
                        help="run the model's external(...) likelihoods: they import and run arbitrary Python code")
    add_overwrite_flag(parser)
    if any(m.predicts for m in offered):
        parser.add_argument("--predict", default=None, metavar="NEW.json",
                            help="new inputs (under the model's input name) for a predictions group "
                                 f"({', '.join(m.name for m in offered if m.predicts)})")
        both = ", ".join(m.name for m in offered if m.predicts and len(m.predictive) > 1)
        joint = ", ".join(m.name for m in offered if m.predicts and m.predictive == ("joint",))
        parser.add_argument("--predictive", default=None, choices=PREDICTIVE_CHOICES,
                            help="draw f at the new inputs jointly, from the full predictive covariance given each "
                                 "posterior draw (O(m^3) per draw for m points), or point by point from each "
                                 f"point's marginal (default for {both}: joint below {JOINT_LIMIT:,} new points, "
                                 "else marginal" + (f"; always joint: {joint}" if joint else "")
                                 + "; the other methods predict point by point)")
    add_scheduler_flag(parser, "the chains as tasks, one per chain group (other methods: the run as one task)"
                       if any(m.chain_groups for m in offered) else "the run as one task")
    if any(m.chain_groups for m in offered):
        parser.add_argument("--chain-groups", type=int, default=None, metavar="K",
                            help="advance the chains in K groups, one vmap each, the same on a scheduler and "
                                 "here: the results of runs with the same seed and K are equal bit for bit "
                                 f"({', '.join(m.name for m in offered if m.chain_groups)}; default: one "
                                 "group, or one per chain with --scheduler)")
    if any(m.checkpoints for m in offered):
        parser.add_argument("--checkpoint", default=None, metavar="FILE.npz",
                            help="write the draws so far after each compiled segment (--segment-size); the same "
                                 "command run again, or gpdsl resume FILE.npz, continues from it, bit for bit as an "
                                 "uninterrupted run (refused if the model, data, method, settings or seed differ; "
                                 f"{', '.join(m.name for m in offered if m.checkpoints)})")
    for title, entries in _flag_groups(offered):
        group = parser.add_argument_group(title)
        for flag, users in entries:
            _add_flag(group, flag, users)
    parser.set_defaults(run=handler, command_methods=[m.name for m in offered])
    return parser


def add_overwrite_flag(parser, text: str = "replace the output file if it exists (inputs are never replaced)") -> None:
    """Add ``--overwrite``: without it, a command refuses to replace an existing output file."""
    parser.add_argument("--overwrite", action="store_true", help=text)


def add_device_flag(parser) -> None:
    """Add ``--device auto|cpu|gpu``: where gpdsl's JAX engines run (:mod:`gpdsl.numerics.devices`)."""
    parser.add_argument("--device", choices=DEVICE_CHOICES, default="auto",
                        help="where gpdsl's JAX engines run: auto is a GPU when JAX sees one, else the CPU; gpu "
                             f"needs JAX's CUDA wheels ({CUDA_INSTALL}); said on standard error and recorded in "
                             "the results (default auto; nuts runs in Stan, on the CPU)")


def add_scheduler_flag(parser, what: str) -> None:
    """Add ``--scheduler local|ADDRESS`` (:mod:`gpdsl.scale_out`), saying what runs as Dask tasks."""
    parser.add_argument("--scheduler", default=None, metavar="local|ADDRESS",
                        help=f"run on Dask, {what}: 'local' starts a cluster of worker processes on this machine, "
                             "ADDRESS is a running scheduler's (tcp://host:8786); needs gpdsl[dask]")


def add_settings_flags(parser, settings_class, title: str, owner: str) -> None:
    """Add the flags of a settings class outside the method registry (``gpdsl forecast``) as one group."""
    group = parser.add_argument_group(title)
    user = argparse.Namespace(name=owner)
    for settings_field in cli_fields(settings_class):
        _add_flag(group, flag_of(settings_field), [(user, settings_field)])


def settings_from_flags(settings_class, args):
    """An instance of ``settings_class`` from the flags :func:`add_settings_flags` added (validated on creation).

    Raises
    ------
    MethodError
        A value is invalid.
    """
    values = {}
    for settings_field in cli_fields(settings_class):
        dest = _dest(flag_of(settings_field))
        if hasattr(args, dest):
            values[settings_field.name] = command_line_value(settings_field, getattr(args, dest))
    return _settings_named_by_flags(settings_class, values)


def settings_from_args(method, args):
    """The method's settings from the parsed flags (validated), refusing flags of other methods.

    Raises
    ------
    MethodError
        A flag given does not belong to ``method``, or a value is invalid.
    """
    own = {flag_of(f): f for f in cli_fields(method.settings)}
    values = {}
    for flag, users in _flags(m for m in methods().values() if m.name in args.command_methods).items():
        dest = _dest(flag)
        if not hasattr(args, dest):
            continue
        if flag not in own:
            names = ", ".join(sorted({m.name for m, _ in users}))
            raise MethodError(f"{flag} is an option of {names}, not of {method.name}")
        settings_field = own[flag]
        values[settings_field.name] = command_line_value(settings_field, getattr(args, dest))
    return _settings_named_by_flags(method.settings, values)


def _settings_named_by_flags(settings_class, values):
    """``settings_class(**values)``, a refused value named by its flag (``--chains``), as the user typed it."""
    try:
        return settings_class(**values)
    except SettingError as error:
        flags = {f.name: flag_of(f) for f in cli_fields(settings_class)}
        if error.setting not in flags:
            raise
        raise MethodError(f"{flags[error.setting]} {error.requirement}", hint=error.hint) from None


def file_arguments(args) -> list[str]:
    """The files named by the settings flags given that read one (``--proposal-from FIT.nc``): inputs of the run."""
    files = []
    for method in methods().values():
        for settings_field in cli_fields(method.settings):
            if settings_field.metadata.get("reads_file"):
                value = getattr(args, _dest(flag_of(settings_field)), None)
                if isinstance(value, str) and value not in files:
                    files.append(value)
    return files


def settings_from_mapping(method, values, where: str = "settings"):
    """The method's settings from a mapping (:meth:`gpdsl.registry.Method.settings_from`)."""
    return method.settings_from(values, where)


def _flags(offered) -> dict[str, list]:
    flags: dict[str, list] = {}
    for method in offered:
        for settings_field in cli_fields(method.settings):
            flags.setdefault(flag_of(settings_field), []).append((method, settings_field))
    return flags


def _flag_groups(offered) -> list[tuple[str, list]]:
    flags = _flags(offered)
    shared = [(flag, users) for flag, users in flags.items() if len(users) > 1]
    groups = [("options of several methods", shared)] if shared else []
    for method in offered:
        own = [(flag, users) for flag, users in flags.items() if len(users) == 1 and users[0][0] is method]
        if own:
            groups.append((f"options of {method.name}", own))
    return groups


def _add_flag(group, flag: str, users) -> None:
    method, settings_field = users[0]
    meta = settings_field.metadata
    names = ", ".join(m.name for m, _ in users)
    defaults = {m.name: _shown(f) for m, f in users}
    shown = next(iter(defaults.values())) if len(set(defaults.values())) == 1 else \
        ", ".join(f"{name} {value}" for name, value in defaults.items())
    help_text = f"{meta['help']} [{names}]" if meta.get("negate") else f"{meta['help']} [{names}; default {shown}]"
    kwargs = {"dest": _dest(flag), "default": argparse.SUPPRESS, "help": help_text.replace("%", "%%")}
    kind = _kind(settings_field)
    if kind == "bool":
        kwargs["action"] = "store_false" if meta.get("negate") else "store_true"
    else:
        if meta.get("repeat"):
            kwargs["action"] = "append"
        if meta.get("choices"):
            kwargs["choices"] = [str(c).replace("_", "-") for c in meta["choices"]]
        elif kind in ("int", "float") and not meta.get("parse"):
            kwargs["type"] = int if kind == "int" else float
        if not meta.get("choices"):
            kwargs["metavar"] = meta.get("metavar") or settings_field.name.upper()
    group.add_argument(flag, *meta.get("aliases", ()), **kwargs)


def _kind(settings_field) -> str:
    kind = settings_field.type
    text = kind.__name__ if isinstance(kind, type) else str(kind)
    for kind in ("bool", "int", "float"):
        if text == kind or text.startswith(f"{kind} ") or text.startswith(f"{kind}|"):
            return kind
    return "str"


def _shown(settings_field) -> str:
    if settings_field.default is not dataclasses.MISSING:
        value = settings_field.default
    else:
        value = settings_field.default_factory()
    if isinstance(value, str):
        return value.replace("_", "-")
    return "none" if value is None or value == {} or value == [] else str(value)


def _dest(flag: str) -> str:
    return "opt_" + flag.lstrip("-").replace("-", "_")
