"""The site's generated reference pages list exactly what the tables hold, and the public API is documented.

The pages are written by ``docs/_ext/gpdsl_reference.py`` from the objects the checker, the registry and the command
line read; these tests read the text it writes (no Sphinx needed) and compare the rows with the tables, and check
that each row follows a change of a table (an entry registered at run time gets its row).
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import re
import sys
from pathlib import Path

import pytest

from gpdsl.cli.main import build_parser
from gpdsl.kernel_table import KERNEL_SPECS
from gpdsl.likelihoods import LIKELIHOODS, register_likelihood, unregister_likelihood
from gpdsl.priors import PRIORS, register_prior, unregister_prior
from gpdsl.registry import methods
from gpdsl.semantics.catalog import FUNCTIONS, REDUCTIONS

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "docs" / "_ext"))

import gpdsl_reference  # noqa: E402

ROW_NAME = re.compile(r"^   \* - ``([A-Za-z_][\w-]*)", re.M)
"""The name at the start of a table row's first cell (a kernel, ``name(args)`` of a likelihood or prior)."""


def row_names(kind: str) -> list[str]:
    """The names of the rows of the generated table ``kind``, in page order (the header row left out)."""
    return ROW_NAME.findall(gpdsl_reference.catalogue_rst(kind))


@pytest.mark.parametrize("kind, table", [("kernels", KERNEL_SPECS), ("likelihoods", LIKELIHOODS),
                                         ("priors", PRIORS)])
def test_each_catalogue_table_has_one_row_per_entry_in_table_order(kind, table):
    assert row_names(kind) == list(table)


def test_the_functions_table_lists_every_function_and_reduction():
    assert row_names("functions") == [*FUNCTIONS, *REDUCTIONS]


def test_kernel_rows_state_each_parameters_default_and_range():
    rows = {name: row for name, row in zip(KERNEL_SPECS, gpdsl_reference.kernel_rows())}
    assert "``lengthscale = 1``" in rows["rbf"][1] and "one of ``lengthscale``, ``inv_ls2``" in rows["rbf"][1]
    assert "``location`` (required in Python; any real)" in rows["changepoint"][1]
    assert "kernel ``before``; kernel ``after``" in rows["changepoint"][1]
    assert r"``bias = 1`` (\>= 0)" in rows["polynomial"][1]
    assert rows["spectral_mixture"][2] == "1 column"


def test_a_prior_registered_at_run_time_gets_its_row_and_loses_it_when_removed():
    added = dataclasses.replace(PRIORS["normal"], name="docs_test_normal")
    register_prior(added)
    try:
        assert row_names("priors")[-1] == "docs_test_normal"
    finally:
        unregister_prior("docs_test_normal")
    assert "docs_test_normal" not in row_names("priors")


def test_a_likelihood_registered_at_run_time_gets_its_row():
    added = dataclasses.replace(LIKELIHOODS["poisson_log"], name="docs_test_counts")
    register_likelihood(added)
    try:
        rows = gpdsl_reference.likelihood_rows()
        assert row_names("likelihoods")[-1] == "docs_test_counts"
        assert rows[-1][2] == "count" and "Laplace" in rows[-1][4]
    finally:
        unregister_likelihood("docs_test_counts")


def test_the_methods_page_has_a_section_and_every_setting_of_each_method():
    text = gpdsl_reference.methods_rst()
    titles = re.findall(r"^(\S+)\n-+\n", text, re.M)
    assert titles == list(methods())
    sections = dict(zip(titles, re.split(r"^\S+\n-+\n", text, flags=re.M)[1:]))
    for name, method in methods().items():
        documented = [f for f in dataclasses.fields(method.settings) if "help" in f.metadata]
        assert len(gpdsl_reference.settings_rows(method.settings)) == len(documented), name
        for row in gpdsl_reference.settings_rows(method.settings):
            assert row[0] in sections[name], (name, row[0])


def test_a_methods_settings_rows_give_the_defaults_of_its_settings_class():
    from gpdsl.settings import PseudoMarginalSettings, flag_of

    rows = {row[0]: row for row in gpdsl_reference.settings_rows(PseudoMarginalSettings)}
    defaults = PseudoMarginalSettings()
    for settings_field in dataclasses.fields(PseudoMarginalSettings):
        if settings_field.metadata.get("cli"):
            assert rows[f"``{flag_of(settings_field)}``"][1] == f"``{getattr(defaults, settings_field.name)!r}``"


def test_the_command_line_page_has_every_command_and_every_option():
    parser = build_parser()
    text = gpdsl_reference.cli_rst(parser)
    commands = gpdsl_reference.subcommands(parser)
    assert re.findall(r"^gpdsl (\S+)\n-+\n", text, re.M) == list(commands)
    assert text.count("exit status:") == 1, "the exit statuses are shown once, with the top-level command"
    for name, command in commands.items():
        for action in command._actions:
            for flag in action.option_strings:
                if flag not in ("-h", "--help"):
                    assert f"``{flag}" in text or f", {flag}" in text, (name, flag)


@pytest.mark.parametrize("support, shown", [("real", ""), ("positive", r"\> 0"), ("nonnegative", r"\>= 0"),
                                            ("unit", r"in \[0, 1\]"), ("censoring", r"in \[-1, 2\]")])
def test_an_arguments_range_is_read_from_the_checkers_support_intervals(support, shown):
    assert gpdsl_reference.value_range(support) == shown


def test_likelihood_and_prior_rows_give_each_arguments_range_and_default():
    likelihoods = dict(zip(LIKELIHOODS, gpdsl_reference.likelihood_rows()))
    assert likelihoods["zero_inflated_neg_binomial_2_log"][1] == (
        r"``eta`` (the latent argument); ``phi`` (\> 0); ``zi`` (in \[0, 1\])")
    priors = dict(zip(PRIORS, gpdsl_reference.prior_rows()))
    assert r"``sigma = 1.5`` (\> 0)" in priors["scaled_sigmoid_normal"][1]


def test_reference_text_escapes_inline_markup():
    assert gpdsl_reference.escaped("|x| * y_i `z`") == r"\|x\| \* y\_i \`z\`"


API_PAGE = ROOT / "docs" / "reference" / "api.rst"


def documented_modules() -> list[str]:
    """The modules whose members the API page documents (its ``automodule`` directives with members)."""
    text = API_PAGE.read_text()
    return [name for name, options in re.findall(r"^\.\. automodule:: (\S+)\n((?:   :.*\n)*)", text, re.M)
            if ":no-members:" not in options]


def public_names(module_name: str):
    """``(name, object)`` of the public functions and classes of a module as autodoc lists them (``__all__``, else
    those defined in it), and of the public methods and properties of each class."""
    module = importlib.import_module(module_name)
    names = getattr(module, "__all__", None) or [
        name for name, value in vars(module).items()
        if not name.startswith("_") and getattr(value, "__module__", None) == module_name]
    for name in names:
        value = getattr(module, name)
        if not (inspect.isfunction(value) or inspect.isclass(value)):
            continue
        yield f"{module_name}.{name}", value
        if inspect.isclass(value):
            for attribute, member in vars(value).items():
                if isinstance(member, (staticmethod, classmethod)):
                    member = member.__func__
                if not attribute.startswith("_") and (inspect.isfunction(member) or isinstance(member, property)):
                    yield f"{module_name}.{name}.{attribute}", getattr(value, attribute)


def test_the_api_page_documents_the_package_and_its_public_modules():
    modules = documented_modules()
    assert {"gpdsl.api", "gpdsl.settings", "gpdsl.results", "gpdsl.datasets", "gpdsl.registry"} <= set(modules)
    functions = re.findall(r"^\.\. autofunction:: gpdsl\.(\w+)$", API_PAGE.read_text(), re.M)
    import gpdsl

    assert sorted(functions) == sorted(name for name in gpdsl.__all__ if callable(getattr(gpdsl, name))
                                       and not inspect.ismodule(getattr(gpdsl, name)))


def test_every_public_name_on_the_api_page_has_a_docstring():
    import gpdsl

    names = [(f"gpdsl.{name}", getattr(gpdsl, name)) for name in gpdsl.__all__ if callable(getattr(gpdsl, name))]
    for module in documented_modules():
        names += list(public_names(module))
    assert len(names) > 200
    assert [name for name, value in names if not inspect.getdoc(value)] == []
