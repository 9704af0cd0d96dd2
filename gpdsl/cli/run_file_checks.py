"""The checks a run file's values pass before its runs are built: the types of its keys, its output patterns,
the size of its grids, and that no two runs, checkpoints or comparison outputs share a file.

Each refusal is one :class:`~gpdsl.errors.GpdslError` naming the run (or ``[compare]``) and the value.
"""

from __future__ import annotations

import string
from pathlib import Path

from gpdsl.errors import GpdslError

STRING_KEYS = ("name", "model", "method", "out", "predict", "predictive", "checkpoint")
COMPARE_PATHS = ("reference", "table", "plot")
PATTERN_KEYS = ("out", "checkpoint")
"""Keys whose value is a pattern: ``{key}`` is replaced by the run's grid value (or its method or seed)."""
PATTERN_NAMES = ("method", "seed")
MAX_RUNS = 1000
"""Most runs one run file may expand into (its grids multiplied out)."""


def check_run_types(table: dict, where: str) -> None:
    """Refuse a run's key of the wrong type: paths, names and the method are strings, data a string or a table.

    Parameters
    ----------
    table : dict
        One run's keys (the file's defaults merged in).
    where : str
        The run, for messages (``runs.toml, run 2``).

    Raises
    ------
    GpdslError
        Naming the key and the value.
    """
    for key in STRING_KEYS:
        if key in table:
            _path_string(table[key], f"{where}: {key}")
    data = table.get("data")
    if data is not None and not isinstance(data, dict):
        _path_string(data, f"{where}: data", "a file name or a table of values (data = { N = 3, y = [1, 2, 3] })")


def check_compare_types(compare: dict, where: str) -> None:
    """Refuse a ``[compare]`` value of the wrong type: its paths are strings, ``vars`` a list of names."""
    for key in COMPARE_PATHS:
        if key in compare:
            _path_string(compare[key], f"{where}: {key}")
    names = compare.get("vars")
    if names is not None and (not isinstance(names, list) or not names
                              or not all(isinstance(n, str) and n for n in names)):
        raise GpdslError(f"{where}: vars must be a list of variable names (vars = [\"sigma\", \"tau\"]); "
                         f"got {_shown(names)}")


def _path_string(value, where: str, expected: str = "a string") -> None:
    if not isinstance(value, str):
        raise GpdslError(f"{where} must be {expected}; got {_shown(value)}")
    if not value:
        raise GpdslError(f"{where} is empty")
    if "\0" in value:
        raise GpdslError(f"{where} holds a NUL character, which no file name can hold")


def pattern_fields(pattern: str, names, where: str) -> list[str]:
    """The fields of an output pattern (``pm_{approximation}.nc``), each a plain name among ``names``.

    Parameters
    ----------
    pattern : str
        The value of ``out`` or ``checkpoint``; ``{{`` and ``}}`` are literal braces.
    names : collection of str
        The names it may use: the run's grid keys, ``method`` and ``seed``.
    where : str
        The run and key, for messages.

    Returns
    -------
    list of str
        The names it uses, in order.

    Raises
    ------
    GpdslError
        A stray brace, an empty or unknown name, or a conversion or format after a name.
    """
    try:
        parts = list(string.Formatter().parse(pattern))
    except ValueError as error:
        raise GpdslError(f"{where} '{pattern}' is not a pattern: {error}",
                         hint="write {{ and }} for a literal brace; {name} is replaced by a grid value") from None
    used = []
    for _, field, spec, conversion in parts:
        if field is None:
            continue
        if spec or conversion:
            raise GpdslError(f"{where} '{pattern}': {{{field}{'!' + conversion if conversion else ''}"
                             f"{':' + spec if spec else ''}}} has a conversion or format; write {{{field}}}")
        if field not in names:
            known = ", ".join(f"{{{n}}}" for n in names)
            raise GpdslError(f"{where} '{pattern}' names {{{field}}}, which is no grid key of the run (it may name "
                             f"{known})", hint="write {{ and }} for a literal brace")
        used.append(field)
    return used


def check_grid_size(grid: dict, where: str) -> None:
    """Refuse a grid that expands into more than :data:`MAX_RUNS` runs."""
    count = 1
    for values in grid.values():
        count *= len(values)
    if count > MAX_RUNS:
        sizes = " x ".join(f"{len(v)} {k}" for k, v in grid.items())
        raise GpdslError(f"{where}: the grid expands into {count} runs ({sizes}); a run file runs at most {MAX_RUNS}")


def check_distinct_files(specs, compare: dict | None, source: Path) -> None:
    """Refuse two runs that share a results file or a checkpoint, a checkpoint that is another run's results,
    and a comparison whose table and plot are one file.

    Parameters
    ----------
    specs : list of RunSpec
    compare : dict, optional
        The ``[compare]`` table, its paths resolved.
    source : Path
        The run file, for messages.
    """
    written: dict[Path, str] = {}
    for spec in specs:
        for what, path in (("out", spec.out), ("checkpoint", spec.checkpoint)):
            if path is None:
                continue
            key = Path(path).resolve()
            if key in written:
                raise GpdslError(f"{source}: several runs write {path}: {written[key]} and {spec.name} ({what})",
                                 hint="give each run its own out and checkpoint (with a grid, name every grid key in "
                                      "them: checkpoint = \"pm_{approximation}.npz\")")
            written[key] = f"{spec.name} ({what})"
    if compare and compare.get("table") and compare.get("plot") and \
            Path(compare["table"]).resolve() == Path(compare["plot"]).resolve():
        raise GpdslError(f"{source}, [compare]: table and plot are one file, {compare['table']}: the plot would "
                         "replace the table", hint="give the plot its own file (plot = \"forest.png\")")


def check_compare_vars(names, runs, source: Path) -> None:
    """Refuse ``[compare] vars`` naming what is no parameter or latent variable of a run's model.

    Parameters
    ----------
    names : list of str, optional
    runs : list of (RunSpec, prepared run)
        Each with the checked model (``prepared.model``).
    source : Path
    """
    from gpdsl.suggest import did_you_mean

    for spec, prepared in runs:
        model = prepared.model
        known = [*model.parameters, *model.latents]
        for name in names or ():
            if name not in known:
                raise GpdslError(f"{source}, [compare]: vars names '{name}', which is no parameter or latent "
                                 f"variable of the model of {spec.name} ({', '.join(known) or 'none'})",
                                 hint=did_you_mean(name, known))


def _shown(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
