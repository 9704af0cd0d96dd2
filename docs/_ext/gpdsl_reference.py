"""The reference pages generated from gpdsl's own tables, as reStructuredText.

Every kernel (:data:`gpdsl.kernel_table.KERNEL_SPECS`), likelihood (:data:`gpdsl.likelihoods.LIKELIHOODS`), prior
(:data:`gpdsl.priors.PRIORS`), elementwise function and reduction (:mod:`gpdsl.semantics.catalog`) gets one row, and
every method of the registry (:func:`gpdsl.registry.methods`) one section, read when the page is built: the page and
the checker read the same objects, so they cannot disagree. The Sphinx directives of :mod:`gpdsl_sphinx` parse the
text this module writes; this module imports neither Sphinx nor docutils (the fast tests read its output).
"""

from __future__ import annotations

import dataclasses
import inspect
import re
import sys

CATALOGUES = ("kernels", "likelihoods", "priors", "functions")
"""The tables of the language catalogue page, one directive argument each."""

_INLINE_MARKUP = re.compile(r"([\\`*_|<>\[\]:])")


def escaped(text: str) -> str:
    """``text`` with every character that reStructuredText reads as inline markup escaped."""
    return _INLINE_MARKUP.sub(r"\\\1", " ".join(str(text).split()))


def literal(text: str) -> str:
    """``text`` as an inline literal."""
    return f"``{text}``"


def list_table(headers: list[str], rows: list[list[str]], widths: list[int]) -> str:
    """A ``list-table`` directive of cells already in reStructuredText."""
    lines = [".. list-table::", "   :header-rows: 1", f"   :widths: {' '.join(map(str, widths))}",
             "   :class: gpdsl-reference", ""]
    for row in [headers, *rows]:
        lines += [f"   {'*' if i == 0 else ' '} - {cell or '..'}" for i, cell in enumerate(row)]
    return "\n".join(lines) + "\n"


def _number(value) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def value_range(support: str) -> str:
    """The values a support (a name of :data:`gpdsl.semantics.support.SUPPORTS`) allows, escaped: ``> 0``,
    ``in [0, 1]``; empty for the whole real line."""
    import math

    from gpdsl.semantics.support import SUPPORTS

    interval = SUPPORTS.get(support)
    if interval is None:
        return escaped(support)
    low, high = _number(float(interval.lower)), _number(float(interval.upper))
    if math.isinf(interval.upper):
        return "" if math.isinf(interval.lower) else escaped(f"{'>=' if interval.closed_lower else '>'} {low}")
    if math.isinf(interval.lower):
        return escaped(f"{'<=' if interval.closed_upper else '<'} {high}")
    brackets = ("[" if interval.closed_lower else "(", "]" if interval.closed_upper else ")")
    return escaped(f"in {brackets[0]}{low}, {high}{brackets[1]}")


def _with_facts(text: str, facts: list[str]) -> str:
    facts = [fact for fact in facts if fact]
    return text + (f" ({'; '.join(facts)})" if facts else "")


def kernel_argument(param) -> str:
    """One hyperparameter of a kernel: name, default, shape and range, as the kernel table holds them."""
    text = literal(param.name if param.default is None else f"{param.name} = {_number(param.default)}")
    facts = []
    if param.required:
        facts.append("required in Python")
    if param.ard_allowed:
        facts.append("scalar or one per input column (ARD)")
    if param.per_component:
        facts.append("one per mixture component")
    if param.per_output:
        facts.append("scalar or one per output")
    if param.matrix:
        facts.append("a matrix, one row per output")
    if param.integer:
        facts.append(escaped("a constant whole number >= 1"))
    if param.half_integer:
        facts.append("a constant half-integer p + 1/2")
    if not (param.integer or param.half_integer or param.matrix):
        facts.append(value_range(param.support) or "any real")
    return _with_facts(text, facts)


def kernel_rows() -> list[list[str]]:
    """One row per kernel of :data:`gpdsl.kernel_table.KERNEL_SPECS`: name, arguments, inputs, covariance."""
    from gpdsl.kernel_table import KERNEL_SPECS

    rows = []
    for spec in KERNEL_SPECS.values():
        arguments = [f"kernel {literal(name)}" for name in spec.kernels]
        arguments += [kernel_argument(param) for param in spec.params]
        arguments += ["one of " + ", ".join(map(literal, group)) for group in spec.exclusive]
        inputs = ("an output index (``int`` data, ``<lower=1, upper=P>``)" if spec.index_input
                  else "any number of columns" if spec.input_dim is None else f"{spec.input_dim} column")
        rows.append([literal(spec.name), "; ".join(arguments) or "none", inputs, escaped(spec.doc)])
    return rows


def likelihood_rows() -> list[list[str]]:
    """One row per likelihood of :data:`gpdsl.likelihoods.LIKELIHOODS`: call, observations, density, engines."""
    from gpdsl.likelihoods import LIKELIHOODS
    from gpdsl.priors import PRIORS

    rows = []
    for likelihood in LIKELIHOODS.values():
        arguments = []
        for name in likelihood.params:
            facts = [fact for fact, holds in (
                ("the latent argument", name == likelihood.latent_param),
                (value_range(likelihood.param_support.get(name, "real")), True),
                ("one vector for all observations", name in likelihood.own_shape),
                ("a matrix, one row per observation", name in likelihood.row_params),
                ("integer data", name in likelihood.integer_params)) if holds]
            arguments.append(_with_facts(literal(name), facts))
        engines = ["Laplace" if likelihood.log_concave and likelihood.derivatives is not None else "",
                   "EP" + ("" if likelihood.closed_form_tilted_moments else " (by quadrature)")
                   if likelihood.tilted_moments is not None else "",
                   "Stan" if likelihood.stan is not None else ""]
        also_prior = " Also a prior." if likelihood.name in PRIORS else ""
        rows.append([literal(f"{likelihood.name}({', '.join(likelihood.params)})"), "; ".join(arguments),
                     likelihood.support, escaped(likelihood.doc) + also_prior,
                     ", ".join(e for e in engines if e) or "none"])
    return rows


def prior_rows() -> list[list[str]]:
    """One row per prior of :data:`gpdsl.priors.PRIORS`: call, defaults, supports, density, z-space use."""
    from gpdsl.priors import PRIORS

    rows = []
    for prior in PRIORS.values():
        arguments = []
        for name in prior.params:
            text = f"{name} = {_number(prior.defaults[name])}" if name in prior.defaults else name
            arguments.append(_with_facts(literal(text), [value_range(prior.arg_support.get(name, "real"))]))
        if prior.ordered:
            arguments.append(f"{literal(prior.ordered[0])} < {literal(prior.ordered[1])}")
        z_space = "" if prior.z_space is None else (f"Gaussian in z-space ({escaped(prior.z_space.requirement)})"
                                                      if prior.z_space.requirement else "Gaussian in z-space")
        rows.append([literal(prior.signature), "; ".join(arguments), prior.support, escaped(prior.doc),
                     z_space or "no"])
    return rows


def function_rows() -> list[list[str]]:
    """One row per elementwise function and reduction of :mod:`gpdsl.semantics.catalog`."""
    from gpdsl.semantics.catalog import FUNCTIONS, REDUCTIONS

    return ([[literal(name), "elementwise", escaped(text)] for name, text in FUNCTIONS.items()]
            + [[literal(name), "reduction", escaped(text)] for name, text in REDUCTIONS.items()])


_TABLES = {
    "kernels": (["kernel", "arguments (defaults)", "inputs", "covariance"], kernel_rows, [14, 38, 14, 34]),
    "likelihoods": (["likelihood", "arguments", "observations", "density", "engines"], likelihood_rows,
                    [22, 26, 10, 32, 10]),
    "priors": (["prior", "arguments (defaults)", "variate", "density", "ESS in z-space"], prior_rows,
               [20, 26, 10, 30, 14]),
    "functions": (["function", "kind", "value"], function_rows, [20, 15, 65]),
}


def catalogue_rst(kind: str) -> str:
    """The table of ``kind`` (one of :data:`CATALOGUES`) in reStructuredText.

    Raises
    ------
    KeyError
        ``kind`` is not one of :data:`CATALOGUES`.
    """
    headers, rows, widths = _TABLES[kind]
    return list_table(headers, rows(), widths)


def _default(settings_field) -> str:
    if settings_field.default is not dataclasses.MISSING:
        value = settings_field.default
    elif settings_field.default_factory is not dataclasses.MISSING:
        value = settings_field.default_factory()
    else:
        return "required"
    return literal(repr(value))


def settings_rows(settings_class) -> list[list[str]]:
    """One row per field of a method's settings class: flag (or Python name), default, choices, help."""
    from gpdsl.settings import flag_of

    rows = []
    for settings_field in dataclasses.fields(settings_class):
        meta = settings_field.metadata
        if "help" not in meta:
            continue
        name = literal(flag_of(settings_field)) if meta.get("cli") else f"{literal(settings_field.name)} (Python only)"
        choices = ", ".join(literal(str(choice)) for choice in meta.get("choices") or ())
        rows.append([name, _default(settings_field), choices, escaped(meta["help"])])
    return rows


def _run_module_doc(method) -> str:
    module = sys.modules.get(method.run.__module__)
    return inspect.cleandoc(module.__doc__ or "") if module is not None else ""


def methods_rst() -> str:
    """Every method of the registry, one section each: what it fits, how it runs, its settings and its account
    (the docstring of the module that runs it, with its references), in reStructuredText."""
    from gpdsl.ir.families import describe
    from gpdsl.registry import methods

    parts = []
    for method in methods().values():
        title = method.name
        facts = [
            ("command", literal(f"gpdsl {method.command} --method {method.name}")),
            ("fits", "; ".join(escaped(describe(family)) for family in method.families)),
            ("engine", "Stan (the generated program)" if method.engine == "stan" else "gpdsl's JAX engines"),
            ("priors", "needed on every parameter" if method.requires_priors
             else "optional (parameters without one are point-estimated)"),
            ("predicts at new inputs", "yes" if method.predicts else "no"),
            ("checkpoints", "yes" if method.checkpoints else "no"),
            ("settings class", f":class:`gpdsl.settings.{method.settings.__name__}`"),
        ]
        parts += [title, "-" * len(title), "", escaped(method.summary) + ".", ""]
        parts += [f":{name}: {value}" for name, value in facts] + [""]
        account = _run_module_doc(method)
        if account:
            parts += [".. rubric:: How it runs", "", account, ""]
        parts += [".. rubric:: Settings", "",
                  list_table(["flag", "default", "choices", "meaning"], settings_rows(method.settings),
                             [22, 14, 20, 44]), ""]
    return "\n".join(parts)


def subcommands(parser) -> dict:
    """The commands of an argparse parser by name (``check``, ``sample``, ...), in the order ``--help`` lists them."""
    import argparse

    found = [action for action in parser._actions if isinstance(action, argparse._SubParsersAction)]
    return dict(found[0].choices) if found else {}


def _literal_block(text: str) -> list[str]:
    """A literal block of ``text``, its lines kept as they are (usage lines, examples)."""
    return [".. code-block:: text", "", *[f"   {line}" if line.strip() else "" for line in text.rstrip().splitlines()],
            ""]


def argument_rows(parser) -> list[list[str]]:
    """One row per argument of an argparse parser: its flags (or name), value and help as ``--help`` shows it."""
    import argparse

    formatter = parser._get_formatter()
    rows = []
    for action in parser._actions:
        if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)) or action.help == argparse.SUPPRESS:
            continue
        names = ", ".join(action.option_strings) or action.dest
        value = formatter._format_args(action, action.metavar or action.dest.upper()) if action.nargs != 0 else ""
        rows.append([literal(names), literal(value) if value else "", escaped(formatter._expand_help(action))])
    return rows


EXIT_STATUS = "\nexit status:"
"""Where the exit statuses start in a command's epilog: shown once, with the top-level command, not per command."""


def cli_rst(parser=None) -> str:
    """Every command of ``gpdsl`` from the parser the command line runs: usage, description, arguments, examples."""
    if parser is None:
        from gpdsl.cli.main import build_parser

        parser = build_parser()
    parts = [escaped(parser.description or ""), "", *_literal_block(parser.format_usage().removeprefix("usage: "))]
    if parser.epilog:
        parts += _literal_block(parser.epilog)
    for name, command in subcommands(parser).items():
        title = f"gpdsl {name}"
        parts += [title, "-" * len(title), ""]
        if command.description:
            parts += _literal_block(command.description) if "\n" in command.description \
                else [escaped(command.description), ""]
        parts += ["Usage", "", *_literal_block(command.format_usage().removeprefix("usage: "))]
        parts += [list_table(["argument", "value", "meaning"], argument_rows(command), [24, 18, 58]), ""]
        examples = (command.epilog or "").split(EXIT_STATUS)[0].strip()
        if examples:
            parts += [".. rubric:: Examples", "", *_literal_block(examples)]
    return "\n".join(parts)
