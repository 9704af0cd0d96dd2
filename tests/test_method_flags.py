"""Every registered method through every common flag of its command: a clean refusal or a run, never an internal
error.

The flags a method takes are read from its registry entry (``chain_groups``, ``checkpoints``, ``predicts``), so
the test also holds the entry's facts to what the run does: a flag the entry says it takes runs, and one it
does not take is refused before anything compiles, with a message and status 1. Each method runs once, with
every flag it takes and the smallest settings, on a small model of its family.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from gpdsl.api import check_file
from gpdsl.cli import EXIT_NOT_CONVERGED, EXIT_OK, EXIT_USER_ERROR, main
from gpdsl.registry import methods
from tests.command_line import run_in_process as cli
from tests.stan_available import needs_pystan

REPO = Path(__file__).resolve().parents[1]
QUICK = 20.0
"""Seconds a refusal may take: the model check and data load, never a compile or a run."""

CASES = {
    "nuts": ("gp_classification", "cls", ["--chains", 1, "--warmup", 30, "--draws", 20, "--thin", 2]),
    "pm": ("gp_classification", "cls", ["--chains", 2, "--warmup", 10, "--draws", 10, "--thin", 2,
                                     "--num-importance", 2]),
    "mcmc-ep": ("gp_classification", "cls", ["--chains", 2, "--warmup", 10, "--draws", 10, "--thin", 2]),
    "gibbs": ("gp_classification", "cls", ["--chains", 2, "--warmup", 10, "--draws", 10, "--thin", 2]),
    "ep-ml": ("gp_classification", "cls", []),
    "pm-gplvm": ("supervised_gplvm", "sup", ["--chains", 2, "--warmup", 4, "--draws", 4, "--thin", 2,
                                              "--num-importance", 4,
                                              "--latent-sweeps", 1]),
    "vem": ("bayesian_gplvm", "lvm", ["--num-inducing", 5, "--max-iterations", 5]),
    "ml": ("gp_regression", "reg", ["--max-iterations", 5]),
    "sgpr": ("gp_regression", "reg", ["--num-inducing", 4, "--optimizer", "adam", "--noise-fixed-steps", 0,
                                      "--steps", 5, "--chunk", 5]),
    "svgp": ("gp_classification", "cls", ["--num-inducing", 4, "--steps", 5, "--chunk", 5]),
    "svi-gplvm": ("bayesian_gplvm", "lvm", ["--num-inducing", 5, "--noise-fixed-steps", 0, "--steps", 5,
                                            "--chunk", 5]),
    "dmgp": ("deep_mahalanobis_gp", "deep", ["--num-inducing", 4, "--num-inducing-fields", 4,
                                             "--noise-fixed-steps", 0, "--steps", 5, "--chunk", 5]),
    "dsdgp": ("deep_gp", "deep", ["--num-inducing", 4, "--noise-fixed-steps", 0, "--steps", 5, "--chunk", 5]),
    "sequential": ("sequential_latent_gp", "seq", ["--states", 6, "--burn-in", 6, "--thin", 1]),
}
"""Per method: a model file of its family, its data and the smallest settings."""


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    """Data and new inputs for each model of :data:`CASES`."""
    root = tmp_path_factory.mktemp("flags")
    rng = np.random.default_rng(0)
    X = rng.normal(size=(12, 2))
    write(root / "reg.json", {"N": 12, "D": 2, "X": X, "y": np.sin(X[:, 0]) + 0.1 * rng.normal(size=12)})
    write(root / "cls.json", {"N": 12, "D": 2, "X": X, "y": [0, 1] * 6})
    write(root / "lvm.json", {"N": 20, "D": 3, "Q": 2, "Y": rng.normal(size=(20, 3))})
    write(root / "sup.json", {"N": 12, "Q": 1, "D": 2, "X": X[:, :1], "Y": rng.normal(size=(12, 2))})
    write(root / "deep.json", {"N": 12, "D": 2, "Q": 2, "X": X, "y": rng.normal(size=12)})
    write(root / "seq.json", {"T": 3, "N": 4, "t": [0.0, 1.0, 2.0], "X": rng.normal(size=(3, 4, 2)),
                              "y": rng.normal(size=(3, 4))})
    new = rng.normal(size=(3, 2))
    for name in ("reg", "cls", "deep"):
        write(root / f"{name}_new.json", {"X": new})
    write(root / "lvm_new.json", {"Y": rng.normal(size=(2, 3))})
    write(root / "sup_new.json", {"X": new[:, :1]})
    write(root / "seq_new.json", {"X": rng.normal(size=(3, 2, 2))})
    return root


def write(path: Path, values: dict) -> None:
    path.write_text(json.dumps({k: np.asarray(v).tolist() if not np.isscalar(v) else v for k, v in values.items()}))


def command(work, name, extra):
    model, data, settings = CASES[name]
    method = methods()[name]
    return [method.command, REPO / "models" / f"{model}.gpm", "--data", work / f"{data}.json", "--method", name,
            "--seed", 3, "--quiet", "--out", work / f"{name}{abs(hash(tuple(map(str, extra))))}.nc", *settings, *extra]


COMMON_FLAGS = ("--chain-groups", "--checkpoint", "--predict")


def flags(work, name) -> dict:
    """Each common flag of the method's command with the value it is tried with."""
    _, data, _ = CASES[name]
    return {"--chain-groups": ["--chain-groups", 1], "--checkpoint": ["--checkpoint", work / f"{name}.npz"],
            "--predict": ["--predict", work / f"{data}_new.json"]}


def takes(name, flag) -> bool:
    """Whether the registry entry says the method takes ``flag``."""
    method = methods()[name]
    if flag == "--chain-groups":
        return method.chain_groups
    if flag == "--checkpoint":
        return method.checkpoints
    model, _ = check_file(REPO / "models" / f"{CASES[name][0]}.gpm")
    return method.predicts and method.prediction_refusal(model) is None


def test_every_method_has_a_case():
    assert set(CASES) == set(methods())


@pytest.mark.parametrize("name, flag", [(name, flag) for name in sorted(CASES) for flag in COMMON_FLAGS
                                        if not takes(name, flag)])
def test_a_flag_a_method_does_not_take_is_refused_before_the_run(work, capsys, name, flag):
    status, _, err, seconds = cli(command(work, name, flags(work, name)[flag]), capsys)
    assert status == EXIT_USER_ERROR, err
    assert "Traceback" not in err and "internal error" not in err, err
    assert name in err or flag in err or "unrecognized" in err, err
    assert seconds < QUICK, f"the refusal took {seconds:.1f} s"


@pytest.mark.parametrize(
    "name", [pytest.param(name, marks=needs_pystan) if name == "nuts" else name for name in sorted(CASES)]
)
def test_every_method_runs_with_every_flag_it_takes(work, capsys, name):
    taken = [value for flag, value in flags(work, name).items() if takes(name, flag)]
    argv = command(work, name, [part for value in taken for part in value])
    status, out, err, _ = cli(argv, capsys)
    assert status in (EXIT_OK, EXIT_NOT_CONVERGED), err
    assert Path(argv[argv.index("--out") + 1]).is_file()
    if methods()[name].command == "fit":
        report = out.strip().splitlines()
        words = " ".join(report[:2]).replace(",", " ").split()
        assert len(report) >= 2 and "None" not in words and "nan" not in words, out


def test_the_deep_families_refuse_a_dynamical_gplvm_in_the_listing_and_the_run(work, capsys, tmp_path):
    """``gpdsl methods`` says no to dmgp and dsdgp on a dynamical GPLVM, and a run is refused the same way."""
    model = REPO / "models" / "dynamical_gplvm.gpm"
    capsys.readouterr()
    assert main(["methods", str(model)]) == EXIT_OK
    listing = capsys.readouterr().out
    write(tmp_path / "dyn.json", {"N": 8, "D": 2, "Q": 1, "t": np.arange(8.0), "Y": np.ones((8, 2))})
    for name in ("dmgp", "dsdgp"):
        line = next(line for line in listing.splitlines() if line.split()[:2] == ["no", name])
        status, _, err, seconds = cli(["fit", model, "--data", tmp_path / "dyn.json", "--method", name, "--seed", 1,
                                    "--out", tmp_path / f"{name}.nc"], capsys)
        assert status == EXIT_USER_ERROR and "internal error" not in err, err
        assert line.split(None, 2)[2].split(": ", 1)[1] in err
        assert seconds < QUICK


def test_every_method_declares_its_run_plan():
    """Preflight reads what a run allocates from the settings' run plan, never from the names of its settings."""
    from gpdsl.settings.fields import PlannedRun, RunPlan

    for method in methods().values():
        assert isinstance(method.settings(), PlannedRun), method.name
        assert isinstance(method.settings().run_plan(), RunPlan), method.name


def test_the_latent_plot_refuses_results_without_latent_inputs_naming_the_methods_it_plots(work, capsys):
    argv = command(work, "ml", [])
    assert cli(argv, capsys)[0] in (EXIT_OK, EXIT_NOT_CONVERGED)
    status, _, err, _ = cli(["plot", argv[argv.index("--out") + 1], "--kind", "latent", "-o", work / "latent.png"],
                            capsys)
    assert status == EXIT_USER_ERROR and "internal error" not in err, err
    assert "hold no variational fit" in err and "vem" in err
    assert not (work / "latent.png").exists()


@pytest.mark.parametrize("model_name, data_name", sorted({(model, data) for model, data, _ in CASES.values()}))
def test_a_method_the_listing_accepts_gets_its_family_view(work, model_name, data_name):
    """``gpdsl methods`` says yes only where the family's view, what the method's engines receive, builds."""
    from gpdsl.data.io import load_data
    from gpdsl.ir.families import ANY, FAMILIES, classify

    model, _ = check_file(REPO / "models" / f"{model_name}.gpm")
    data, _ = load_data(work / f"{data_name}.json", model)
    classification = classify(model)
    accepted = [m for m in methods().values() if m.refusal(model, classification) is None]
    assert accepted
    for method in accepted:
        family, facts = classification.require(method.families, method.name)
        if family != ANY:
            assert FAMILIES[family].view(model, data, facts) is not None, method.name


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(CASES))
def test_every_method_runs_on_a_local_dask_scheduler(work, capsys, name):
    """``--scheduler local``, which every method takes (chain groups as tasks, or the run as one task)."""
    pytest.importorskip("distributed")
    argv = command(work, name, ["--scheduler", "local"])
    status, _, err, _ = cli(argv, capsys)
    assert status in (EXIT_OK, EXIT_NOT_CONVERGED), err
    assert Path(argv[argv.index("--out") + 1]).is_file()
