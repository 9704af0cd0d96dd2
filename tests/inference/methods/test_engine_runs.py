"""gpdsl's engines through the library and the CLI: results format, diagnostics, predictions, refusals."""

import dataclasses
import json
import subprocess
import sys

import jax.numpy as jnp
import numpy as np
import pytest
from scipy.special import ndtr

from gpdsl.api import check_file, run
from gpdsl.errors import MethodError
from gpdsl.inference.approximations.ep import ep
from gpdsl.inference.approximations.gaussian import predict
from gpdsl.inference.families.latent_gp import latent_gp
from gpdsl.settings import GibbsSettings
from gpdsl.settings import PseudoMarginalSettings
from gpdsl.settings.sampling import adapted_proposal_covariance
from gpdsl.inference.predict.latent_gp import (
    new_input_covariances,
    predict_from_latent_draws,
    predict_from_theta_draws,
)
from gpdsl.results import arviz_compat


@pytest.fixture(scope="module")
def classification():
    model, _ = check_file("models/gp_classification.gpm")
    rng = np.random.default_rng(0)
    X = rng.uniform(size=(15, 2))
    y = (X[:, 0] + 0.2 * rng.normal(size=15) > 0.5).astype(int)
    return model, {"N": 15, "D": 2, "X": X, "y": y}


def test_latent_predictions_at_training_inputs_use_f(classification):
    model, data = classification
    problem = latent_gp(model, data)
    rng = np.random.default_rng(1)
    theta = jnp.asarray(rng.normal(size=(1, 2, 3)) * 0.3)
    f = jnp.stack([jnp.linalg.cholesky(problem.covariance(t)) @ rng.normal(size=15) for t in theta[0]])[None]
    probabilities = predict_from_latent_draws(problem, theta, f, data["X"])
    np.testing.assert_allclose(probabilities, ndtr(np.asarray(f)), atol=1e-3)


def test_theta_predictions_are_the_approximation_average(classification):
    model, data = classification
    problem = latent_gp(model, data)
    X_new = np.array([[0.2, 0.3], [0.8, 0.1]])
    thetas = jnp.asarray([[[0.1, -0.3, 0.2], [0.5, 0.0, -0.4]]])
    expected = []
    for theta in thetas[0]:
        approx = ep(problem.covariance(theta), jnp.asarray(problem.y))
        K_star, k_diag = new_input_covariances(problem, theta, X_new)
        expected.append(np.asarray(predict(approx, K_star, k_diag)))
    np.testing.assert_allclose(predict_from_theta_draws(problem, thetas, X_new)[0], expected, rtol=1e-10)


@pytest.mark.parametrize("method, settings", [
    ("pm", PseudoMarginalSettings(chains=2, warmup=50, draws=60, approximation="laplace", num_importance=2)),
    ("gibbs", GibbsSettings(chains=2, warmup=50, draws=60, theta_update="aa", repeat_f=2)),
])
def test_engine_results_format(classification, method, settings):
    model, data = classification
    results = run(model, data, method, settings, seed=3, new_inputs=np.array([[0.1, 0.1], [0.9, 0.9]]))
    groups = arviz_compat.groups(results)
    posterior, stats = groups["posterior"], groups["sample_stats"]
    assert posterior["sigma"].shape == (2, 60) and posterior["tau"].dims == ("chain", "draw", "D")
    assert float(posterior["sigma"].min()) > 0
    assert {"acceptance_rate", "cubic_ops"} <= set(stats)
    if method == "gibbs":
        assert posterior["f"].dims == ("chain", "draw", "N") and "num_shrinks" in stats
    else:
        assert "log_marginal" in stats and "f" not in posterior
    probabilities = groups["predictions"]["y_prob"]
    assert probabilities.dims == ("chain", "draw", "N_new")
    assert np.all((probabilities.values > 0) & (probabilities.values < 1))
    attrs = arviz_compat.root_attrs(results)
    assert attrs["method"] == method and json.loads(attrs["settings"]) == dataclasses.asdict(settings)
    assert attrs["seed"] == 3 and attrs["engine"] == "gpdsl" and attrs["model_hash"] == model.source_hash
    timings = json.loads(attrs["timings"])
    assert set(timings) == {"compile", "warmup", "sampling", "total"}
    assert 0 < timings["sampling"] <= timings["total"] and timings["warmup"] > 0


def test_cli_refuses_engine_for_model_without_sampled_latent(tmp_path):
    data = tmp_path / "d.json"
    data.write_text(json.dumps({"N": 3, "D": 1, "X": [[0.0], [0.5], [1.0]], "y": [0.1, 0.2, 0.3]}))
    result = subprocess.run([sys.executable, "-m", "gpdsl.cli", "sample", "models/gp_regression.gpm", "--data",
                             str(data), "--method", "mcmc-ep", "--out", str(tmp_path / "f.nc")],
                            capture_output=True, text=True)
    assert result.returncode == 1
    assert "mcmc-ep needs a model with one latent GP vector" in result.stderr and "Traceback" not in result.stderr


def test_cli_pm_with_predictions(tmp_path, classification):
    model, data = classification
    data_file, new_file = tmp_path / "d.json", tmp_path / "new.json"
    data_file.write_text(json.dumps({k: np.asarray(v).tolist() for k, v in data.items()}))
    new_file.write_text(json.dumps({"X": [[0.5, 0.5]]}))
    fit = tmp_path / "fit.nc"
    result = subprocess.run([sys.executable, "-m", "gpdsl.cli", "sample", "models/gp_classification.gpm", "--data",
                             str(data_file), "--method", "pm", "--approximation", "ep", "--num-importance", "4",
                             "--chains", "2", "--warmup", "50", "--draws", "50", "--seed", "1", "--predict",
                             str(new_file), "--out", str(fit), "--quiet"], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    from gpdsl.results import read_netcdf

    groups = arviz_compat.groups(read_netcdf(fit))
    assert groups["predictions"]["y_prob"].shape == (2, 50, 1)

    adapted = adapted_proposal_covariance(read_netcdf(fit))
    assert np.shape(adapted) == (3, 3)
    refit = tmp_path / "refit.nc"
    result = subprocess.run([sys.executable, "-m", "gpdsl.cli", "sample", "models/gp_classification.gpm", "--data",
                             str(data_file), "--method", "pm", "--chains", "2", "--warmup", "10", "--draws", "20",
                             "--proposal-from", str(fit), "--out", str(refit), "--quiet"], capture_output=True,
                            text=True)
    assert result.returncode == 0, result.stderr
    reused = json.loads(arviz_compat.root_attrs(read_netcdf(refit))["report"])["proposal_covariance"]
    np.testing.assert_allclose(reused, [adapted, adapted], rtol=1e-10)


def test_proposal_from_a_gibbs_run_is_refused(classification):
    model, data = classification
    results = run(model, data, "gibbs", GibbsSettings(chains=1, warmup=5, draws=5), seed=0)
    with pytest.raises(MethodError, match="pm or mcmc-ep"):
        adapted_proposal_covariance(results)


def test_a_fixed_proposal_is_refused_by_gibbs(tmp_path, classification):
    model, data = classification
    data_file = tmp_path / "d.json"
    data_file.write_text(json.dumps({k: np.asarray(v).tolist() for k, v in data.items()}))
    result = subprocess.run([sys.executable, "-m", "gpdsl.cli", "sample", "models/gp_classification.gpm", "--data",
                             str(data_file), "--method", "gibbs", "--proposal-from", str(data_file), "--out",
                             str(tmp_path / "f.nc")], capture_output=True, text=True)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "--proposal-from is an option of mcmc-ep, pm, not of gibbs" in result.stderr
    with pytest.raises(MethodError, match="gibbs takes GibbsSettings, not PseudoMarginalSettings"):
        run(model, data, "gibbs", PseudoMarginalSettings(chains=1, warmup=5, draws=5), seed=0)


def test_ep_start_and_refresh_steps_reach_the_engine(classification):
    model, data = classification
    base = PseudoMarginalSettings(chains=1, warmup=40, draws=60, num_importance=2, sample_latent=True)
    frozen, zero = (arviz_compat.groups(run(model, data, "pm", dataclasses.replace(base, ep_start=start),
                                            seed=4))["sample_stats"]["cubic_ops"].values.mean()
                    for start in ("frozen", "zero"))
    assert frozen < zero  # frozen sites: no EP sweep per proposal
    posterior = arviz_compat.groups(run(model, data, "pm", dataclasses.replace(base, refresh_steps=0),
                                        seed=4))["posterior"]
    f_moved = np.any(np.diff(posterior["f"].values[0], axis=0) != 0, axis=1)
    theta_moved = np.diff(posterior["sigma"].values[0]) != 0
    np.testing.assert_array_equal(f_moved, theta_moved)  # without refresh f is the accepted estimate's draw
    with pytest.raises(MethodError, match="unknown EP start 'warm'"):
        PseudoMarginalSettings(ep_start="warm")
    with pytest.raises(MethodError, match="refresh_steps"):
        PseudoMarginalSettings(refresh_steps=-1)


def test_cli_takes_ep_start_and_refresh_steps(tmp_path):
    command = [sys.executable, "-m", "gpdsl.cli", "sample", "--help"]
    text = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    assert "--ep-start" in text and "--refresh-steps" in text
