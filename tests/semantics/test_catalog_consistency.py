"""The kernel table (gpdsl.kernel_table) is the one description every consumer reads: the checker's
catalog, the JAX kernel classes and registry, and the Stan code generator; each entry has a JAX class
and a Stan spelling that exists in the template library with the matching signature."""

import inspect
import re

import pytest

from gpdsl.backends.stan.fragments import function_library
from gpdsl.kernel_table import KERNEL_SPECS, KernelParam, KernelSpec, StanCall
from gpdsl.kernels import KERNELS, Kernel
from gpdsl.semantics import catalog
from gpdsl.testing.imports import loaded_by


def table_gaps(table: dict[str, KernelSpec], classes: dict[str, type]) -> list[str]:
    """What keeps ``table`` from being complete: missing JAX classes or Stan spellings, disagreements."""
    library = function_library()
    gaps = []
    for name, spec in table.items():
        cls = classes.get(name)
        if cls is None:
            gaps.append(f"{name}: no JAX kernel class")
        elif cls.spec is not spec:
            gaps.append(f"{name}: the JAX class's spec is not the table entry")
        elif list(inspect.signature(cls).parameters) != [*spec.positional, "active_dims"]:
            gaps.append(f"{name}: the JAX constructor's parameters are not the table's")
        if not spec.stan:
            gaps.append(f"{name}: no Stan spelling")
        if {p for call in spec.stan for p in call.params} != {p.name for p in spec.params}:
            gaps.append(f"{name}: the Stan spellings do not pass every parameter")
        for call in spec.stan:
            if call.function not in library:
                gaps.append(f"{name}: Stan function {call.function} is not in stan_templates")
                continue
            points = "data array[] vector" if spec.index_input else "array[] vector"
            expected = [f"{points} x"] if call.warps_points else [f"{points} x1", f"{points} x2"]
            expected += [] if call.warps_points else [f"matrix {k}" for k in spec.kernels]
            expected += [f"{spec.param(p).stan_type} {p}" for p in call.params]
            expected += ["int same_points"] if call.same_points else []
            text = library[call.function].text
            returns = r"array\[\] vector" if call.warps_points else "matrix"
            signature = re.search(rf"\b{returns} {call.function}\((.*?)\)\s*\{{", text, re.DOTALL)
            args = [" ".join(arg.split()) for arg in signature.group(1).split(",")]
            if args != expected:
                gaps.append(f"{name}: {call.function} takes ({', '.join(args)}), not ({', '.join(expected)})")
        gaps += spectral_gaps(name, spec, cls, library)
    gaps += [f"{name}: a JAX class without a table entry" for name in classes if name not in table]
    return gaps


def spectral_gaps(name: str, spec: KernelSpec, cls, library) -> list[str]:
    """A spectral density spelt in the table needs its Stan function ``vector f(matrix omega, <params>)`` and the
    JAX class's ``spectral_density``; a class with one needs the table's spelling."""
    gaps = []
    overrides = cls is not None and cls.spectral_density is not Kernel.spectral_density
    if bool(spec.spectral_density) != overrides and cls is not None:
        gaps.append(f"{name}: the table and the JAX class disagree on a spectral density")
    for call in spec.spectral_density:
        if call.function not in library:
            gaps.append(f"{name}: Stan function {call.function} is not in stan_templates")
            continue
        expected = ["matrix omega"] + [f"{spec.param(p).stan_type} {p}" for p in call.params]
        signature = re.search(rf"\bvector {call.function}\((.*?)\)\s*\{{", library[call.function].text, re.DOTALL)
        args = [" ".join(arg.split()) for arg in signature.group(1).split(",")] if signature else []
        if args != expected:
            gaps.append(f"{name}: {call.function} takes ({', '.join(args)}), not ({', '.join(expected)})")
    return gaps


def test_every_kernel_has_a_jax_class_and_a_stan_spelling():
    assert table_gaps(KERNEL_SPECS, KERNELS) == []


def test_an_entry_without_class_or_stan_spelling_is_caught():
    toy = KernelSpec("toy", (KernelParam("variance", default=1.0),), stan=())
    assert table_gaps({**KERNEL_SPECS, "toy": toy}, KERNELS) == [
        "toy: no JAX kernel class",
        "toy: no Stan spelling",
        "toy: the Stan spellings do not pass every parameter",
    ]
    misspelt = KernelSpec("toy", toy.params, stan=(StanCall("toy_kernel", ("variance",)),))
    assert "toy: Stan function toy_kernel is not in stan_templates" in table_gaps({"toy": misspelt}, {})
    white = KERNEL_SPECS["white"]
    wrong_kind = KernelSpec("white", white.params, stan=(StanCall("white_kernel", ("variance",)),))
    assert table_gaps({"white": wrong_kind}, {})[-1] == (
        "white: white_kernel takes (array[] vector x1, array[] vector x2, real variance, int same_points), "
        "not (array[] vector x1, array[] vector x2, real variance)")


def test_a_spectral_density_without_its_stan_function_or_class_method_is_caught():
    rbf = KERNEL_SPECS["rbf"]
    misspelt = KernelSpec("rbf", rbf.params, stan=rbf.stan, exclusive=rbf.exclusive,
                          spectral_density=(StanCall("rbf_spectral", ("variance", "lengthscale")),))
    assert table_gaps({"rbf": misspelt}, {"rbf": KERNELS["rbf"]}) == [
        "rbf: the JAX class's spec is not the table entry",
        "rbf: Stan function rbf_spectral is not in stan_templates"]
    assert spectral_gaps("periodic", KERNEL_SPECS["periodic"], KERNELS["rbf"], function_library()) == [
        "periodic: the table and the JAX class disagree on a spectral density"]
    assert [spec.name for spec in KERNEL_SPECS.values() if spec.spectral_density] == [
        "rbf", "matern12", "matern32", "matern52", "matern"]


def test_one_table_for_checker_jax_and_stan():
    assert catalog.KERNELS is KERNEL_SPECS
    assert {name: cls.spec for name, cls in KERNELS.items()} == KERNEL_SPECS
    assert all(issubclass(cls, Kernel) for cls in KERNELS.values())


def test_table_checker_and_stan_backend_do_not_import_jax():
    assert loaded_by(["gpdsl.kernel_table", "gpdsl.semantics.check", "gpdsl.backends.stan.codegen"]) == []


@pytest.mark.parametrize("name", sorted(KERNEL_SPECS))
def test_python_rules_follow_the_table(name):
    spec = KERNEL_SPECS[name]
    cls = KERNELS[name]
    defaults = {p.name: p.default for p in inspect.signature(cls).parameters.values()}
    for param in spec.params:
        in_group = any(param.name in group for group in spec.exclusive)
        assert param.required == (defaults[param.name] is None and not in_group), param.name
