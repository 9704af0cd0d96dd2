"""NUTS on a state-space GP (the Kalman filter in the Stan program) and NUTS on the exact GP of the same model agree on
the hyperparameters' posterior means within four combined Monte Carlo standard errors, both converged (slow tier):
a Matérn-5/2 regression of 100 irregular times, whose state-space form is exact. The program's generated quantities
(leave-one-out densities by the smoother) equal the exact leave-one-out densities at the same draws, and ``ml`` on the
same data with predictions runs through the state-space view; NUTS's predictions at new times (the smoother at each
draw) are the exact predictive at the same draws."""

import re

import jax
import numpy as np
import pytest

from gpdsl.api import check_text, run
from gpdsl.data.validation import validate_data
from gpdsl.inference.families.gp_regression import gp_regression_view
from gpdsl.inference.predict import draws
from gpdsl.ir.families import GP_REGRESSION, classify
from gpdsl.results.method_output import results_json
from gpdsl.settings import NUTSSettings
from tests.inference.methods.test_kernels_vs_nuts import convergence_problems
from tests.inference.methods.test_pm_vs_nuts import disagreements

MODEL = """
data {{ int N; vector[N] t; vector[N] y; }}
parameters {{
  real<lower=0> alpha ~ half_normal(2);
  real<lower=0> ell ~ inv_gamma(5, 5);
  real<lower=0> sigma ~ half_normal(1);
}}
model {{
  f ~ gp(t, square(alpha) * matern52(lengthscale = ell){approx});
  y ~ normal(f, sigma);
}}
"""

SETTINGS = NUTSSettings(chains=4, warmup=1000, draws=1000)
NAMES = ["alpha", "ell", "sigma"]


def series(seed=3, n=100):
    rng = np.random.default_rng(seed)
    t = rng.uniform(0, 10, n)  # unsorted, as a user's file may be
    return {"N": n, "t": t, "y": np.sin(t) + 0.5 * np.cos(2.3 * t) + 0.3 * rng.normal(size=n)}


@pytest.mark.slow
def test_state_space_and_exact_gp_agree_under_nuts():
    data = series()
    exact_model = check_text(MODEL.format(approx=""))[0]
    exact = run(exact_model, data, "nuts", SETTINGS, seed=11)
    new = np.array([-0.5, 3.3, 10.2])
    state_space = run(check_text(MODEL.format(approx=", approx = state_space"))[0], data, "nuts", SETTINGS, seed=12,
                      new_inputs=new)
    for label, results in (("exact", exact), ("state_space", state_space)):
        print(f"{label}: {results_json(results, 'timings')['total']:.0f} s")
    problems = convergence_problems(exact, NAMES, "exact") + convergence_problems(state_space, NAMES, "state_space")
    assert not problems, problems
    failures = disagreements(state_space, exact, NAMES)
    assert not failures, f"posterior means differ by more than 4 combined MCSEs for {failures}"
    # Stan's leave-one-out densities (the smoother, sorted and unsorted) are the exact ones at the same draws
    validated, _ = validate_data(exact_model, data)
    view = gp_regression_view(exact_model, validated, classify(exact_model).facts[GP_REGRESSION])
    posterior = {name: np.asarray(state_space.posterior[name])[:, :20] for name in NAMES}
    theta = draws.unconstrained_draws(view, posterior)
    np.testing.assert_allclose(np.asarray(state_space.log_likelihood["y"])[:, :20],
                               draws.gp_regression_log_likelihood(view, theta), rtol=1e-6, atol=1e-8)
    # predictions at new times by the smoother are the exact predictive at each draw
    exact_predictions = draws.gp_regression_new_draws(view, theta, new[:, None], jax.random.PRNGKey(0))
    for name in ("y_mean", "y_variance", "f_variance"):
        np.testing.assert_allclose(np.asarray(state_space.predictions[name])[:, :20], exact_predictions[name],
                                   rtol=1e-6, atol=1e-9)
    replicates = float(np.asarray(state_space.posterior_predictive["y"]).mean())
    assert abs(replicates - float(np.mean(data["y"]))) < 0.1


@pytest.mark.slow
def test_ml_predicts_at_new_times_by_the_smoother():
    data = series(n=60)
    data["t"] = 3 * data["t"]
    new = np.array([-0.5, 2.25, 5.0, 40.5])
    text = open("models/gp_state_space.gpm").read()
    exact_text = re.sub(r",\s*approx = state_space\(order = 10\)", "", text)
    assert exact_text != text
    results = run(check_text(text)[0], data, "ml", seed=1, new_inputs=new)
    exact = run(check_text(exact_text)[0], data, "ml", seed=1, new_inputs=new)
    for name in ("trend", "ell", "weekly", "sigma"):
        assert float(results.posterior[name].values.ravel()[0]) == pytest.approx(
            float(exact.posterior[name].values.ravel()[0]), rel=1e-4), name
    for name in ("y_mean", "y_variance", "f_variance"):
        np.testing.assert_allclose(results.predictions[name].values, exact.predictions[name].values, rtol=1e-4)
    assert results.predictions["f_new"].shape == (1, 1, 4)
