"""The method registry: one table drives the CLI's flags, `gpdsl methods` and the one `run` function."""

import dataclasses
import json
from dataclasses import dataclass

import numpy as np
import pytest

from gpdsl import cli
from gpdsl.api import check_file, run
from gpdsl.errors import GpdslError, MethodError
from gpdsl.ir.families import ANY, LATENT_GP
from gpdsl.registry import Method, get_method, methods, register, unregister
from gpdsl.results import arviz_compat, read_netcdf
from gpdsl.results.method_output import MethodOutput, results_json
from gpdsl.settings import ChainSettings, option, require_number
from gpdsl.testing.imports import loaded_by

CLASSIFICATION = "models/gp_classification.gpm"


@dataclass(frozen=True)
class ConstantSettings(ChainSettings):
    """A toy method's settings: every parameter is drawn at ``value``."""

    value: float = option(1.0, "the value of every draw")
    label: str = option("a", "a label", choices=("a", "b_c"))

    def __post_init__(self):
        super().__post_init__()
        require_number("value", self.value, 0, open_low=True)


def run_constant(model, data, settings, context):
    shape = (settings.chains, settings.draws)
    posterior = {name: np.full(shape + tuple(var.type.concrete_shape({n: int(data[n]) for n in model.sizes})),
                               settings.value) for name, var in model.parameters.items()}
    return MethodOutput(posterior, timings={"sampling": 0.5, "total": 1.0}, report={"family": context.family})


@pytest.fixture
def toy():
    method = register(Method("constant", "every draw at one value (a test method)", (LATENT_GP,),
                             ConstantSettings, run_constant, requires_priors=False))
    yield method
    unregister("constant")


@pytest.fixture
def data_file(tmp_path):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(8, 2))
    path = tmp_path / "d.json"
    path.write_text(json.dumps({"N": 8, "D": 2, "X": X.tolist(), "y": (X[:, 0] > 0).astype(int).tolist()}))
    return path


def test_a_method_added_through_the_registry_alone_runs_from_the_cli(toy, data_file, tmp_path, capsys):
    out = tmp_path / "toy.nc"
    status = cli.main(["sample", CLASSIFICATION, "--data", str(data_file), "--method", "constant", "--value",
                       "2.5", "--label", "b-c", "--chains", "3", "--draws", "7", "--seed", "11", "--out", str(out),
                       "--quiet"])
    assert status == 0
    results = read_netcdf(out)
    posterior = arviz_compat.groups(results)["posterior"]
    assert posterior["sigma"].shape == (3, 7) and posterior["tau"].dims == ("chain", "draw", "D")
    assert np.all(posterior["tau"].values == 2.5)
    attrs = arviz_compat.root_attrs(results)
    assert attrs["method"] == "constant" and attrs["seed"] == 11
    assert results_json(results, "settings") == {"chains": 3, "warmup": 1000, "draws": 7, "thin": 1, "value": 2.5,
                                                 "label": "b_c"}
    assert results_json(results, "report") == {"family": LATENT_GP}
    timings = results_json(results, "timings")
    total = timings.pop("total")
    assert timings == {"compile": 0.0, "warmup": 0.0, "sampling": 0.5}
    assert 0.0 <= total < 1.0  # the wall time gpdsl measured around the run replaces the method's own claim
    assert "y" in arviz_compat.groups(results)["observed_data"]

    assert cli.main(["methods", CLASSIFICATION]) == 0
    listing = capsys.readouterr().out
    assert "yes  constant" in listing and "every draw at one value" in listing


def test_generated_flags_are_validated_and_refused_for_other_methods(toy, data_file, tmp_path, capsys):
    out = str(tmp_path / "x.nc")
    assert cli.main(["sample", CLASSIFICATION, "--data", str(data_file), "--method", "constant", "--value", "-1",
                     "--out", out]) == 1
    assert "value must be in (0, inf]; got -1.0" in capsys.readouterr().err
    assert cli.main(["sample", CLASSIFICATION, "--data", str(data_file), "--method", "nuts", "--value", "2",
                     "--out", out]) == 1
    assert "--value is an option of constant, not of nuts" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli.main(["sample", "--help"])
    assert "--value VALUE" in capsys.readouterr().out


def test_registry_refuses_duplicates_and_unknown_names(toy):
    with pytest.raises(MethodError, match="already registered"):
        register(dataclasses.replace(toy))
    with pytest.raises(MethodError, match="unknown method 'nope'; the methods are nuts, pm"):
        get_method("nope")


def test_every_method_settings_validate_on_creation():
    for method in methods().values():
        method.settings()
    for name, bad in [("pm", {"chains": 0}), ("pm", {"num_importance": 0}), ("pm", {"target_acceptance": 2.0}),
                      ("pm", {"tol": -1.0}), ("gibbs", {"surrogate_variance": -1.0}), ("gibbs", {"warmup": -5}),
                      ("gibbs", {"theta_update": "xx"}), ("nuts", {"adapt_delta": 1.5}), ("ep-ml", {"starts": 0}),
                      ("nuts", {"draws": 0}), ("nuts", {"backend": "rstan"})]:
        with pytest.raises(MethodError):
            get_method(name).settings(**bad)


def test_run_checks_everything_before_it_runs(tmp_path, data_file):
    model, _ = check_file(CLASSIFICATION)
    with pytest.raises(GpdslError, match="does not exist"):
        run(model, data_file, "pm", seed=1, out=tmp_path / "missing" / "x.nc")
    with pytest.raises(GpdslError, match="it is an input of this run"):
        run(model, data_file, "pm", seed=1, out=data_file)
    with pytest.raises(MethodError, match="seed must be an integer in"):
        run(model, data_file, "pm", seed=2**70)
    gplvm, _ = check_file("models/bayesian_gplvm_priors.gpm")
    with pytest.raises(MethodError, match="nuts predicts at new inputs for .*; this model is a Bayesian GPLVM"):
        run(gplvm, {"N": 3, "D": 2, "Q": 1, "Y": np.zeros((3, 2))}, "nuts", seed=1, new_inputs=np.zeros((1, 1)))
    with pytest.raises(MethodError, match="nuts writes no checkpoints; methods that do: pm, mcmc-ep, pm-gplvm, gibbs"):
        run(model, data_file, "nuts", seed=1, checkpoint=tmp_path / "c.npz")
    regression, _ = check_file("models/gp_regression.gpm")
    with pytest.raises(MethodError, match="mcmc-ep needs a model with one latent GP vector"):
        run(regression, {"N": 2, "D": 1, "X": [[0.0], [1.0]], "y": [0.0, 1.0]}, "mcmc-ep")
    gplvm, _ = check_file("models/bayesian_gplvm.gpm")
    with pytest.raises(MethodError, match="nuts samples every parameter and needs a prior on each"):
        run(gplvm, {"N": 3, "D": 2, "Q": 1, "Y": np.zeros((3, 2))}, "nuts")


def test_a_drawn_seed_is_recorded(toy, data_file):
    model, _ = check_file(CLASSIFICATION)
    results = run(model, data_file, "constant", ConstantSettings(chains=1, draws=2))
    seed = arviz_compat.root_attrs(results)["seed"]
    assert isinstance(int(seed), int) and 0 <= int(seed) < 2**31


@pytest.mark.parametrize("name, families", [
    ("gp_classification", {"latent_gp", ANY}),
    ("gp_regression", {"gp_regression", ANY}),
    ("bayesian_gplvm", {"bayesian_gplvm", ANY}),
    ("dynamical_gplvm", {"gp_prior_gplvm", ANY}),
    ("supervised_gplvm", {"gp_prior_gplvm", ANY}),
    ("deep_mahalanobis_gp", {"deep_mahalanobis_gp", ANY}),
    ("deep_gp", {"deep_gp_chain", ANY}),
    ("sequential_latent_gp", {"sequential_latent_gp", ANY}),
])
def test_model_families(name, families):
    from gpdsl.ir.families import classify

    model, _ = check_file(f"models/{name}.gpm")
    assert set(classify(model).families) == families


def test_methods_listing_covers_every_model(capsys):
    import glob

    assert cli.main(["methods", *sorted(glob.glob("models/*.gpm"))]) == 0
    listing = capsys.readouterr().out
    assert "models/gp_regression.gpm: GP regression" in listing
    width = max(len(name) for name in methods())
    assert (f"no   {'pm':<{width}} needs a latent GP with a factorised likelihood: this model's sampled latent GP "
            "values: none") in listing
    assert f"no   {'nuts':<{width}} needs a prior on every parameter: s2, w, noise have none" in listing
    names = [line[7:7 + width].strip() for line in listing.splitlines() if line.startswith(("  yes", "  no "))]
    assert set(names) == set(methods())  # every name, the longest included, fits its column


def test_the_command_line_builds_its_flags_without_jax_or_arviz():
    modules = ["gpdsl.cli", "gpdsl.registry", "gpdsl.cli.options"]
    assert loaded_by(modules, libraries=("jax", "jaxlib", "arviz", "xarray")) == []


def test_the_cli_reports_data_it_drops(toy, tmp_path, capsys):
    path = tmp_path / "extra.json"
    rng = np.random.default_rng(1)
    X = rng.normal(size=(5, 2))
    path.write_text(json.dumps({"N": 5, "D": 2, "X": X.tolist(), "y": [0, 1, 0, 1, 1], "z": [1.0]}))
    assert cli.main(["sample", CLASSIFICATION, "--data", str(path), "--method", "constant", "--draws", "2",
                     "--seed", "1", "--out", str(tmp_path / "x.nc"), "--quiet"]) == 0
    assert "warning:" in capsys.readouterr().err
