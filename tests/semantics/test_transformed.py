"""The transformed parameters block: each definition stands in for its name in the model (so the structure engines
read is the written-out model's) and the results report its draws, computed from the parameters' draws."""

import numpy as np
import pytest

from gpdsl.api import check_text
from gpdsl.errors import GpdslError
from gpdsl.results.method_output import MethodOutput, method_results

WITH = """
data { int N; vector[N] x; vector[N] y; }
parameters { real alpha ~ normal(0, 1); real beta ~ normal(0, 1); real<lower=0> rho ~ lognormal(0, 1); }
transformed parameters {
  real rho2 = rho^2;
  vector[N] mu = alpha + beta * x;
  vector[N] shifted = mu + rho2;
}
model {
  f ~ gp(x, rbf(lengthscale = rho2));
  y ~ normal(shifted + f, 0.5);
}
"""

WRITTEN_OUT = """
data { int N; vector[N] x; vector[N] y; }
parameters { real alpha ~ normal(0, 1); real beta ~ normal(0, 1); real<lower=0> rho ~ lognormal(0, 1); }
model {
  f ~ gp(x, rbf(lengthscale = rho^2));
  y ~ normal(alpha + beta * x + rho^2 + f, 0.5);
}
"""


def test_a_transformed_parameter_stands_in_for_its_value():
    model, warnings = check_text(WITH)
    written, _ = check_text(WRITTEN_OUT)
    assert model.statements == written.statements and not warnings
    assert list(model.transformed) == ["rho2", "mu", "shifted"]
    assert model.transformed["mu"].type.describe() == "vector[N]"


def test_results_report_the_draws_of_transformed_parameters():
    model, _ = check_text(WITH)
    rng = np.random.default_rng(2)
    N, chains, draws = 5, 2, 7
    data = {"N": N, "x": rng.normal(size=N), "y": rng.normal(size=N)}
    posterior = {"alpha": rng.normal(size=(chains, draws)), "beta": rng.normal(size=(chains, draws)),
                 "rho": rng.gamma(2.0, size=(chains, draws))}
    results = method_results(model, data, "nuts", "stan", {}, 1, MethodOutput(posterior))
    group = results.posterior
    np.testing.assert_allclose(group["rho2"].values, posterior["rho"] ** 2, rtol=1e-14)
    mu = posterior["alpha"][..., None] + posterior["beta"][..., None] * data["x"]
    np.testing.assert_allclose(group["mu"].values, mu, rtol=1e-14)
    np.testing.assert_allclose(group["shifted"].values, mu + posterior["rho"][..., None] ** 2, rtol=1e-14)
    assert group["mu"].dims == ("chain", "draw", "N")


@pytest.mark.parametrize("block, message", [
    ("transformed parameters { vector[N] rho2 = rho^2; }", r"'rho2' is declared vector\[N\] but its value is real"),
    ("transformed parameters { real rho2 = g; }", "'g' is not known here"),
    ("transformed parameters { real rho = 2; }", "'rho' is already declared"),
    ("transformed parameters { real later = rho3; real rho3 = rho; }", "'rho3' is not known here"),
])
def test_bad_definitions_are_refused(block, message):
    text = WRITTEN_OUT.replace("model {", block + "\nmodel {")
    with pytest.raises(GpdslError, match=message):
        check_text(text)


def test_the_block_goes_between_parameters_and_model():
    text = WRITTEN_OUT.replace("model {", "latent { vector[N] h; }\ntransformed parameters { real r = rho; }\nmodel {")
    with pytest.raises(GpdslError, match="the transformed parameters block must come before the latent block"):
        check_text(text)
