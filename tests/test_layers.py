"""The package's imports run one way: down the layers of ARCHITECTURE.md, lazy imports included.

Every ``import`` and ``from ... import`` of every module of ``gpdsl`` (inside functions too) is read from the
source, and each must go to a layer at or below its own; the two backends never import each other; no module
takes a private name of another; and no circle of imports ties more than three modules.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "gpdsl"

LAYERS = [
    ("front", ("gpdsl.cli", "gpdsl.testing")),
    ("api", ("gpdsl.api", "gpdsl.scale_out")),
    ("registry", ("gpdsl.registry",)),
    ("methods", ("gpdsl.inference.methods", "gpdsl.inference.forecast")),
    ("engines", ("gpdsl.inference",)),
    ("backends", ("gpdsl.backends",)),
    ("method settings", ("gpdsl.settings",)),
    ("tables", ("gpdsl.syntax", "gpdsl.semantics", "gpdsl.ir", "gpdsl.kernels", "gpdsl.kernel_table",
                "gpdsl.likelihoods", "gpdsl.priors", "gpdsl.datasets", "gpdsl.data", "gpdsl.results",
                "gpdsl.storage.compilation_cache")),
    ("ground", ("gpdsl.settings.fields", "gpdsl.source", "gpdsl.errors", "gpdsl.numerics", "gpdsl.suggest",
                "gpdsl.storage", "gpdsl.externals")),
]
"""From the top down; a module belongs to the layer of the longest prefix that names it."""

SIBLINGS_APART = [("gpdsl.backends.stan", "gpdsl.backends.jax")]
"""Packages of one layer that never import each other."""

ALLOWED_PRIVATE = {"__version__"}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports() -> list[tuple[str, str, int, tuple[str, ...]]]:
    """``(module, imported module, line, names)`` of every import of a gpdsl module in the package."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = module_name(path)
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                found += [(module, alias.name, node.lineno, ()) for alias in node.names
                          if alias.name.split(".")[0] == "gpdsl"]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[:len(package.split(".")) - node.level + 1]
                    target = ".".join([*base, *([node.module] if node.module else [])])
                else:
                    target = node.module or ""
                if target.split(".")[0] == "gpdsl":
                    found.append((module, target, node.lineno, tuple(alias.name for alias in node.names)))
    return found


def submodules() -> set[str]:
    return {module_name(path) for path in PACKAGE.rglob("*.py")}


def resolved(target: str, names: tuple[str, ...], known: set[str]) -> list[str]:
    """The modules an import reaches: ``from a import b`` reaches ``a.b`` when that is a module."""
    reached = [f"{target}.{name}" for name in names if f"{target}.{name}" in known]
    return reached if reached and len(reached) == len(names) else [target, *reached]


def layer_of(module: str) -> int:
    best, rank = -1, None
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best:
                best, rank = len(prefix), index
    return len(LAYERS) - 1 if rank is None else rank


def test_every_module_has_a_layer():
    unplaced = [m for m in submodules() if m != "gpdsl" and not any(
        m == p or m.startswith(p + ".") for _, prefixes in LAYERS for p in prefixes)]
    assert not unplaced, f"modules in no layer of LAYERS: {unplaced}"


def test_imports_run_down_the_layers():
    known = submodules()
    upward = []
    for module, target, line, names in imports():
        for reached in resolved(target, names, known):
            if reached != "gpdsl" and layer_of(reached) < layer_of(module):
                upward.append(f"{module}:{line} imports {reached} "
                              f"({LAYERS[layer_of(module)][0]} -> {LAYERS[layer_of(reached)][0]})")
    assert not upward, "imports that run back up:\n" + "\n".join(upward)


@pytest.mark.parametrize("first, second", SIBLINGS_APART)
def test_the_backends_never_import_each_other(first, second):
    crossing = [f"{m}:{line} imports {t}" for m, t, line, _ in imports()
                for a, b in ((first, second), (second, first))
                if (m == a or m.startswith(a + ".")) and (t == b or t.startswith(b + "."))]
    assert not crossing, "\n".join(crossing)


def test_no_module_takes_a_private_name_of_another():
    private = [f"{m}:{line} takes {name} from {t}" for m, t, line, names in imports() for name in names
               if name.startswith("_") and name not in ALLOWED_PRIVATE and t != m]
    assert not private, "\n".join(private)


def test_no_circle_of_more_than_three_modules():
    known = submodules()
    graph: dict[str, set[str]] = {m: set() for m in known}
    for module, target, _, names in imports():
        for reached in resolved(target, names, known):
            if reached in known and reached != module and reached != "gpdsl":
                graph[module].add(reached)
    circles = [c for c in strongly_connected(graph) if len(c) > 3]
    assert not circles, f"circles of imports: {circles}"


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components of ``graph`` (iterative)."""
    index, low, on_stack, stack, components, counter = {}, {}, set(), [], [], [0]
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            for successor in edges:
                if successor not in index:
                    index[successor] = low[successor] = counter[0]
                    counter[0] += 1
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append((successor, iter(sorted(graph[successor]))))
                    break
                if successor in on_stack:
                    low[node] = min(low[node], index[successor])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    components.append(sorted(component))
    return components


def test_a_forbidden_import_is_caught(tmp_path):
    """The walker sees a lazy import inside a function: an engine importing the registry fails the test."""
    package = tmp_path / "gpdsl"
    (package / "inference" / "mcmc").mkdir(parents=True)
    for folder in (package, package / "inference", package / "inference" / "mcmc"):
        (folder / "__init__.py").write_text("")
    (package / "registry.py").write_text("")
    (package / "inference" / "mcmc" / "engine.py").write_text("def f():\n    from gpdsl.registry import get_method\n")
    globals()["PACKAGE"] = package
    try:
        with pytest.raises(AssertionError, match="engines -> registry"):
            test_imports_run_down_the_layers()
    finally:
        globals()["PACKAGE"] = Path(__file__).resolve().parents[1] / "gpdsl"
