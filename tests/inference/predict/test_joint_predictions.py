"""Joint draws at new inputs (issue 36 item 6): ``--predictive joint`` draws f* from the full predictive covariance.

At fixed hyperparameters the sample covariance of many joint draws must match the closed-form covariance entry
by entry (within 5 Monte Carlo standard errors), and marginal draws must fail the same check where the
closed form has large off-diagonal terms: the check can fail. Command-line runs (``ml`` on GP regression,
``gibbs`` on GP classification) record the choice as the ``predictive`` attribute; methods that draw only one
kind refuse the other with one line naming the flag.
"""

import json
from pathlib import Path

import jax
import numpy as np
import pytest

from gpdsl.api import check_file, prepare
from gpdsl.cli import main
from gpdsl.errors import GpdslError, MethodError
from gpdsl.inference.families.gp_regression import gp_regression
from gpdsl.inference.families.latent_gp import latent_gp
from gpdsl.inference.predict.draws import gp_regression_new_draws, latent_new_draws
from gpdsl.inference.predict.latent_gp import approximate_moments
from gpdsl.registry import JOINT_LIMIT, get_method
from gpdsl.results.arviz_compat import groups, root_attrs
from gpdsl.results.io import read_netcdf
from gpdsl.settings import SGPRSettings

DRAWS = 2000
X_NEW = np.linspace(0.3, 0.7, 5)[:, None]


def data_of(family: str, n: int = 12, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    X = rng.uniform(size=(n, 1))
    y = np.sin(6 * X[:, 0]) + 0.1 * rng.normal(size=n) if family == "regression" else (X[:, 0] > 0.5).astype(int)
    return {"N": n, "D": 1, "X": X, "y": y}


def entrywise_z(draws: np.ndarray, covariance: np.ndarray) -> np.ndarray:
    """|sample covariance - covariance| in Monte Carlo standard errors, entry by entry (Gaussian draws)."""
    se = np.sqrt((np.outer(np.diag(covariance), np.diag(covariance)) + covariance ** 2) / len(draws))
    return np.abs(np.cov(draws.T) - covariance) / se


def assert_joint_law(joint: np.ndarray, marginal: np.ndarray, covariance: np.ndarray) -> None:
    """Joint draws within 5 SE of ``covariance`` everywhere; marginal draws far from it off the diagonal."""
    assert np.max(entrywise_z(joint, covariance)) < 5
    correlation = covariance / np.sqrt(np.outer(np.diag(covariance), np.diag(covariance)))
    assert np.max(np.abs(correlation - np.eye(len(correlation)))) > 0.5  # the check has something to find
    assert np.max(entrywise_z(marginal, covariance)) > 10
    assert np.max(np.abs(np.corrcoef(marginal.T) - np.eye(len(correlation)))) < 0.1


def fixed(theta, draws: int = DRAWS) -> np.ndarray:
    return np.broadcast_to(np.asarray(theta, dtype=float), (1, draws, len(theta)))


def test_gp_regression_joint_draws_have_the_closed_form_covariance():
    model, _ = check_file("models/gp_regression.gpm")
    data = data_of("regression")
    problem = gp_regression(model, data)
    theta = np.array([0.0, np.log(0.3), np.log(0.1)])
    kernel, X = problem.kernel(theta), np.asarray(problem.inputs(theta))
    C = np.asarray(kernel(X)) + (float(problem.noise_variance(theta)) + 1e-8) * np.eye(len(X))
    K_star = np.asarray(kernel(X, X_NEW))
    covariance = np.asarray(kernel(X_NEW)) - K_star.T @ np.linalg.solve(C, K_star)
    mean = K_star.T @ np.linalg.solve(C, data["y"])
    draws = {joint: gp_regression_new_draws(problem, fixed(theta), X_NEW, jax.random.PRNGKey(1), joint=joint)
             for joint in (True, False)}
    f_joint, f_marginal = draws[True]["f_new"][0], draws[False]["f_new"][0]
    assert_joint_law(f_joint, f_marginal, covariance)
    assert np.all(np.abs(f_joint.mean(0) - mean) < 5 * np.sqrt(np.diag(covariance) / DRAWS))
    noise = float(problem.noise_variance(theta)) * np.eye(len(X_NEW))
    assert np.max(entrywise_z(draws[True]["y_new"][0], covariance + noise)) < 5
    np.testing.assert_allclose(draws[True]["f_variance"][0, 0], np.diag(covariance), rtol=1e-8, atol=1e-12)


def test_latent_gp_joint_draws_given_f_have_the_gp_conditional_covariance():
    model, _ = check_file("models/gp_classification.gpm")
    data = data_of("classification")
    problem = latent_gp(model, data)
    theta = np.array([0.0, np.log(0.2)])
    K = np.asarray(problem.covariance(theta))
    f = np.linalg.cholesky(K) @ np.random.default_rng(3).normal(size=len(K))
    kernel = problem.jax_model.gp_kernel(problem.node.statement, problem.environment(theta))
    K_star = np.asarray(kernel(data["X"], X_NEW))
    covariance = np.asarray(kernel(X_NEW)) - K_star.T @ np.linalg.solve(K, K_star)
    f_draws = np.broadcast_to(f, (1, DRAWS, len(f)))
    draws = {joint: latent_new_draws(problem, fixed(theta), f_draws, X_NEW, jax.random.PRNGKey(2), joint=joint)
             for joint in (True, False)}
    assert_joint_law(draws[True]["f_new"][0], draws[False]["f_new"][0], covariance)
    assert set(draws[True]) == set(draws[False]) == {"f_new", "y_new", "y_prob"}


def test_latent_gp_joint_draws_from_the_approximation_have_its_covariance():
    """Samplers of theta alone (pm, mcmc-ep, ep-ml): f* from the EP Gaussian at theta, whose full covariance has
    the marginal path's variances on its diagonal."""
    model, _ = check_file("models/gp_classification.gpm")
    data = data_of("classification", n=8)
    problem = latent_gp(model, data)
    theta = np.array([0.0, np.log(0.2)])
    _, covariance = jax.jit(lambda t: approximate_moments(problem, t, X_NEW, "ep", full=True))(theta)
    _, variance = jax.jit(lambda t: approximate_moments(problem, t, X_NEW, "ep"))(theta)
    np.testing.assert_allclose(np.diag(covariance), variance, rtol=1e-8, atol=1e-12)
    draws = {joint: latent_new_draws(problem, fixed(theta), None, X_NEW, jax.random.PRNGKey(3), joint=joint)
             for joint in (True, False)}
    assert_joint_law(draws[True]["f_new"][0], draws[False]["f_new"][0], np.asarray(covariance))


@pytest.mark.parametrize("method,family,model,flags", [
    ("ml", "regression", "models/gp_regression.gpm", ["--max-iterations", "50"]),
    ("gibbs", "classification", "models/gp_classification.gpm",
     ["--chains", "1", "--warmup", "20", "--draws", "20"])])
def test_a_run_draws_jointly_by_default_and_marginally_when_asked(method, family, model, flags, tmp_path):
    data = data_of(family, n=10)
    path, new = tmp_path / "d.json", tmp_path / "new.json"
    path.write_text(json.dumps({k: np.asarray(v).tolist() for k, v in data.items()}))
    new.write_text(json.dumps({"X": X_NEW.tolist()}))
    command = "fit" if method == "ml" else "sample"
    for asked, expected in ((None, "joint"), ("marginal", "marginal")):
        out = tmp_path / f"{expected}.nc"
        extra = [] if asked is None else ["--predictive", asked]
        assert main([command, model, "--data", str(path), "--method", method, "--predict", str(new), "--quiet",
                     "--seed", "0", "--out", str(out), *flags, *extra]) == 0
        results = read_netcdf(out)
        assert root_attrs(results)["predictive"] == expected
        predictions = groups(results)["predictions"]
        assert predictions.attrs["predictive"] == expected
        assert predictions["f_new"].dims[2:] == ("N_new",) and np.all(np.isfinite(predictions["f_new"].values))


def test_the_default_turns_marginal_at_the_limit_and_runs_without_predictions_record_nothing():
    entry = get_method("gibbs")
    assert entry.predictive_choice(None, np.zeros((JOINT_LIMIT - 1, 1))) == "joint"
    assert entry.predictive_choice(None, np.zeros((JOINT_LIMIT, 1))) == "marginal"
    assert entry.predictive_choice(None, None) is None
    with pytest.raises(MethodError, match="--predictive joint needs new inputs"):
        entry.predictive_choice("joint", None)


@pytest.mark.parametrize("method,asked,says", [
    ("vem", "joint", "vem draws its predictions point by point"),
    ("sgpr", "joint", "sgpr draws its predictions point by point"),
    ("sequential", "marginal", "sequential draws its predictions jointly")])
def test_methods_that_draw_one_kind_refuse_the_other_naming_the_flag(method, asked, says):
    with pytest.raises(MethodError) as refused:
        get_method(method).predictive_choice(asked, np.zeros((3, 1)))
    message = str(refused.value)
    assert f"--predictive {asked}: {says}" in message and "\n" not in message
    assert "nuts" in message if asked == "joint" else "sequential" in message


def test_prepare_refuses_joint_for_a_method_without_joint_draws():
    data = data_of("regression")
    with pytest.raises(MethodError, match="--predictive joint: sgpr"):
        prepare("models/gp_regression.gpm", data, "sgpr", SGPRSettings(num_inducing=5), new_inputs=X_NEW,
                predictive="joint")


def test_a_run_file_chooses_the_predictive_per_run(tmp_path):
    """``predictive = "marginal"`` in a run file reaches the run; a choice the method does not draw is refused."""
    from gpdsl.cli.run_file import plan
    from gpdsl.storage import claims

    data = data_of("classification")
    (tmp_path / "d.json").write_text(json.dumps({k: np.asarray(v).tolist() for k, v in data.items()}))
    (tmp_path / "new.json").write_text(json.dumps({"X": X_NEW.tolist()}))
    head = f'model = "{Path("models/gp_classification.gpm").resolve()}"\ndata = "d.json"\npredict = "new.json"\n'
    runs = tmp_path / "runs.toml"
    runs.write_text(head + '[[run]]\nmethod = "gibbs"\nout = "a.nc"\n\n'
                    '[[run]]\nmethod = "pm"\nout = "b.nc"\npredictive = "marginal"\n')
    planned = plan(runs)
    for spec, _ in planned.runs:
        claims.release(spec.out)
    assert [prepared.context.predictive for _, prepared in planned.runs] == ["joint", "marginal"]
    runs.write_text(head + '[[run]]\nmethod = "gibbs"\nout = "a.nc"\npredictive = "both"\n')
    with pytest.raises(GpdslError, match="--predictive must be one of joint, marginal"):
        plan(runs)


def test_nuts_predictions_take_the_same_joint_path_from_its_draws():
    """NUTS's predictions are the engines' code run on its draws (no Stan generated quantities): given fixed
    draws, what :func:`add_draw_groups` writes for a prepared NUTS run has the closed-form joint covariance."""
    from gpdsl.inference.methods.draw_groups import add_draw_groups
    from gpdsl.results.method_output import MethodOutput

    data = data_of("regression")
    prepared = prepare("models/gp_regression.gpm", data, "nuts", new_inputs=X_NEW, seed=4)
    assert prepared.context.predictive == "joint"
    values = {"variance": 1.0, "lengthscale": np.array([0.3]), "noise": 0.1}
    output = MethodOutput({name: np.broadcast_to(value, (1, DRAWS, *np.shape(value))) for name, value in values.items()})
    add_draw_groups(output, prepared.model, prepared.data, prepared.context, pointwise=False)
    problem = gp_regression(prepared.model, prepared.data)
    theta = np.log([1.0, 0.3, 0.1])
    kernel, X = problem.kernel(theta), np.asarray(problem.inputs(theta))
    C = np.asarray(kernel(X)) + (0.01 + 1e-8) * np.eye(len(X))
    K_star = np.asarray(kernel(X, X_NEW))
    covariance = np.asarray(kernel(X_NEW)) - K_star.T @ np.linalg.solve(C, K_star)
    assert np.max(entrywise_z(output.predictions["f_new"][0], covariance)) < 5
    assert output.log_likelihood is None
