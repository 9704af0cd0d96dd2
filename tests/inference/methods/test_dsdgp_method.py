"""``gpdsl fit --method dsdgp`` (issue 19, item 3): a deep GP written as a chain of GPs runs end to end on
minibatches, its bound rises, predictions are written; chains the method cannot run are refused at the statement."""

import numpy as np
import pytest

from gpdsl.api import check_text, run
from gpdsl.errors import MethodError
from gpdsl.settings import DSDGPSettings

DSDGP = """
data {
  int N;
  int D;
  matrix[N, D] X;
  vector[N] y;
}
parameters {
  real<lower=0> s1;
  vector<lower=0>[D] ell1;
  real<lower=0> sf2;
  vector<lower=0>[D] ell2;
  real<lower=0> noise;
}
latent {
  matrix[N, D] H;
}
model {
  H ~ gp(X, s1 * rbf(lengthscale = ell1), mean = X);
  f ~ gp(H, sf2 * rbf(lengthscale = ell2));
  y ~ normal(f, sqrt(noise));
}
"""
"""The two-layer doubly-stochastic deep GP, DS-DGP(2), of de Souza's (2020) thesis: a hidden layer of D GPs with the
identity mean and the output GP over it, without priors (``models/deep_gp.gpm`` has them, for NUTS)."""

QUICK = DSDGPSettings(num_inducing=8, noise_fixed_steps=100, steps=200, chunk=50, batch_size=20,
                      predict_samples=50, initial_values={"noise": 0.01})


def data(N=40, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N, 2))
    y = np.where(X[:, 0] < 0, X[:, 0] ** 2 + X[:, 0], X[:, 1] ** 2 + X[:, 1])
    return {"N": N, "D": 2, "X": X, "y": (y - y.mean()) / y.std()}


def test_dsdgp_fits_a_chain_of_gps_on_minibatches_and_predicts():
    model, _ = check_text(DSDGP)
    fit = run(model, data(), "dsdgp", QUICK, seed=2, new_inputs=np.zeros((3, 2)))
    report = fit.attrs["report"]
    import json

    trace = (json.loads(report) if isinstance(report, str) else report)["optimizer"]["trace"]
    assert np.mean(trace[-2:]) > trace[0] + 1.0
    assert fit.predictions["y_mean"].shape == (1, 1, 3)
    assert np.all(np.asarray(fit.predictions["y_variance"]) > 0)


def test_a_hidden_layer_whose_mean_is_not_its_inputs_is_refused_at_the_mean():
    model, _ = check_text("""
data { int N; int D; matrix[N, D] X; vector[N] y; matrix[N, D] Z; }
latent { matrix[N, D] H; }
model {
  H ~ gp(X, rbf(), mean = Z);
  f ~ gp(H, rbf());
  y ~ normal(f, 0.1);
}
""")
    d = {**data(), "Z": np.zeros((40, 2))}
    with pytest.raises(MethodError, match="the mean of 'H' must be its own inputs") as caught:
        run(model, d, "dsdgp", DSDGPSettings(num_inducing=8))
    assert (caught.value.span.line, caught.value.span.column) == (5, 27)
