"""Case studies and benchmarks go through the public API; tests never depend on case-study code.

Every ``import`` of every test module, of every case-study script and of every benchmark is read from the source
with :mod:`ast` (inside functions too, and in code that a module keeps in a string to run in a subprocess):

* no test imports ``case_studies`` or reads one of the case studies' files: what a test and a case study share
  lives in the package (``gpdsl.datasets.sinusoids``, ``gpdsl.testing.simulated_data``,
  ``gpdsl.testing.external_likelihoods``);
* no case study or benchmark takes an underscore name from ``gpdsl`` (by import, or as an attribute of ``gpdsl`` or
  of what it imported from it), and each takes a method's settings class from ``gpdsl.settings``, its one public
  place.
"""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import numpy as np
import pytest

import gpdsl

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"
FORBIDDEN_PACKAGE = "case_studies"


def scripts() -> list[Path]:
    """The case studies' and benchmarks' Python files."""
    return sorted((ROOT / FORBIDDEN_PACKAGE).rglob("*.py")) + sorted((ROOT / "benchmarks").glob("*.py"))


def trees(path: Path) -> list[tuple[ast.AST, int]]:
    """The module's syntax tree, and that of every string in it that is Python code importing something (a script
    run in a subprocess), each with the number of lines before it in the file."""
    tree = ast.parse(path.read_text(), str(path))
    found = [(tree, 0)]
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and "import " in node.value:
            try:
                found.append((ast.parse(textwrap.dedent(node.value)), node.lineno - 1))
            except SyntaxError:
                continue
    return found


def imports(path: Path) -> list[tuple[int, str, tuple[str, ...]]]:
    """``(line, module, names)`` of every absolute import of ``path`` (``names`` empty for ``import module``)."""
    found = []
    for tree, before in trees(path):
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                found += [(before + node.lineno, alias.name, ()) for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                found.append((before + node.lineno, node.module, tuple(alias.name for alias in node.names)))
    return found


NAMED_TUPLE_API = {"_fields", "_field_defaults", "_asdict", "_replace", "_make"}
"""Public names of every named tuple, underscored so as not to clash with its fields."""


def is_private(name: str) -> bool:
    return (name.startswith("_") and not (name.startswith("__") and name.endswith("__"))
            and name not in NAMED_TUPLE_API)


def private_names(path: Path) -> list[str]:
    """Underscore names of ``gpdsl`` that ``path`` imports, or reaches as attributes of ``gpdsl`` or of a name it
    imported from ``gpdsl``."""
    found = []
    for line, module, names in imports(path):
        if module.split(".")[0] != "gpdsl":
            continue
        taken = [part for part in module.split(".") if is_private(part)] + [name for name in names if is_private(name)]
        found += [f"{path.relative_to(ROOT)}:{line} takes {name} from {module}" for name in taken]
    for tree, before in trees(path):
        bound = {"gpdsl"} | {alias.asname or alias.name for node in ast.walk(tree)
                             if isinstance(node, ast.ImportFrom) and not node.level and node.module
                             and node.module.split(".")[0] == "gpdsl" for alias in node.names}
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute):
                chain, value = [node.attr], node.value
                while isinstance(value, ast.Attribute):
                    chain.append(value.attr)
                    value = value.value
                if isinstance(value, ast.Name) and value.id in bound and any(map(is_private, chain)):
                    found.append(f"{path.relative_to(ROOT)}:{before + node.lineno} uses "
                                 f"{value.id}.{'.'.join(reversed(chain))} of gpdsl")
    return found


def case_study_imports(path: Path) -> list[str]:
    return [f"{path.relative_to(ROOT)}:{line} imports {module}" for line, module, _ in imports(path)
            if module.split(".")[0] == FORBIDDEN_PACKAGE]


def case_study_files(path: Path) -> list[str]:
    """String constants of ``path`` naming a file of the case studies (a path through their folder)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and (
                f"{FORBIDDEN_PACKAGE}/" in node.value or f"{FORBIDDEN_PACKAGE}\\" in node.value):
            found.append(f"{path.relative_to(ROOT)}:{node.lineno} names {node.value!r}")
    return found


def test_no_test_imports_case_study_code():
    found = [line for path in sorted(TESTS.rglob("*.py")) for line in case_study_imports(path)]
    assert not found, "tests that import case-study code (move what they share into gpdsl):\n" + "\n".join(found)


def test_no_test_reads_a_case_study_file():
    found = [line for path in sorted(TESTS.rglob("*.py")) for line in case_study_files(path)]
    assert not found, "tests that read case-study files (write the model inline, or ship it in models/):\n" + \
        "\n".join(found)


def test_case_studies_and_benchmarks_take_no_private_name_of_gpdsl():
    assert len(scripts()) > 10
    found = [line for path in scripts() for line in private_names(path)]
    assert not found, "underscore names of gpdsl (make a documented public function):\n" + "\n".join(found)


def test_case_studies_and_benchmarks_take_settings_from_gpdsl_settings():
    import gpdsl.settings

    settings = {name for name in gpdsl.settings.__all__ if name.endswith("Settings")}
    found = [f"{path.relative_to(ROOT)}:{line} takes {name} from {module}" for path in scripts()
             for line, module, names in imports(path) for name in names
             if name in settings and module.split(".")[0] == "gpdsl" and module != "gpdsl.settings"]
    assert not found, "\n".join(found)


def test_the_walkers_see_imports_in_functions_and_in_code_strings(tmp_path):
    """A lazy import inside a function and one in a subprocess script kept in a string are both found."""
    private = "_" + "chain"
    source = tmp_path / "script.py"
    source.write_text(f"def f():\n    from gpdsl.inference.methods.sequential import {private}\n\n"
                      f"SCRIPT = '''\n    import gpdsl.api\n    from {FORBIDDEN_PACKAGE}.x import y\n'''\n"
                      f"value = gpdsl.syntax.parser.{private}\n"
                      f"from gpdsl.syntax import parser\nparser.{private}()\n")
    fake_root = globals()["ROOT"]
    globals()["ROOT"] = tmp_path
    try:
        assert len(private_names(source)) == 3
        assert case_study_imports(source) == [f"script.py:6 imports {FORBIDDEN_PACKAGE}.x"]
    finally:
        globals()["ROOT"] = fake_root


# The public places the case studies, the benchmarks and the tests share


def test_settings_is_a_public_module_of_gpdsl():
    assert "settings" in gpdsl.__all__ and "settings" in dir(gpdsl)
    assert gpdsl.settings.VEMSettings(num_inducing=5).num_inducing == 5
    assert "gpdsl.settings" in gpdsl.__doc__


@pytest.mark.parametrize("name", ["groups", "root_attrs", "results_json", "ess", "rhat", "save_png", "write_netcdf"])
def test_the_results_helpers_are_public_and_documented(name):
    function = getattr(gpdsl.results, name)
    assert name in gpdsl.results.__all__
    assert "Returns\n" in (function.__doc__ or "") or "Parameters\n" in (function.__doc__ or ""), name


def test_the_sinusoids_are_a_dataset():
    x, Y, f = gpdsl.datasets.sinusoids(30)
    assert x.shape == (30,) and Y.shape == (30, 6)
    np.testing.assert_allclose(Y, f(x), atol=0.25)
    np.testing.assert_array_equal(gpdsl.datasets.sinusoids(30)[1], Y)


def test_simulated_classification_data_are_balanced_and_seeded():
    from gpdsl.testing.simulated_data import simulate_classification

    model = gpdsl.load_model(ROOT / "models" / "gp_classification.gpm")
    data, truth = simulate_classification(model, 10, 2, seed=3)
    assert data["X"].shape == (10, 2) and np.bincount(data["y"]).tolist() == [5, 5]
    assert truth["f"].shape == (10,) and truth["tau"].shape == (2,) and truth["attempts"] >= 1
    again, _ = simulate_classification(ROOT / "models" / "gp_classification.gpm", 10, 2, seed=3)
    np.testing.assert_array_equal(again["X"], data["X"])
    with pytest.raises(ValueError, match="even number"):
        simulate_classification(model, 9)
