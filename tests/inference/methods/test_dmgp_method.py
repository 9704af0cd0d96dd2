"""``gpdsl fit --method dmgp`` (issue 19, item 2): the model file runs end to end, the bound improves on its start,
predictions are written, and models that are not a deep Mahalanobis GP are refused at the statement."""

import numpy as np
import pytest

from gpdsl.api import check_text, run
from gpdsl.errors import MethodError
from gpdsl.settings import DMGPSettings

DVMGP = """
data {
  int N;
  int D;
  int Q;
  matrix[N, D] X;
  vector[N] y;
}
parameters {
  real<lower=0> sf2;
  vector<lower=0>[Q] s2;
  array[Q] vector<lower=0>[D] ell;
  real<lower=0> noise;
}
latent {
  array[Q] matrix[N, D] W;
}
model {
  for (q in 1:Q) {
    W[q] ~ gp(X, s2[q] * rbf(lengthscale = ell[q]));
  }
  f ~ gp(project(W, X), sf2 * rbf());
  y ~ normal(f, sqrt(noise));
}
"""
"""The two-layer deep Mahalanobis GP of de Souza (2020), Sec. 4.3.1, without priors (the thesis's DVMGP; the
shipped ``models/deep_mahalanobis_gp.gpm`` has priors for NUTS)."""

QUICK = DMGPSettings(num_inducing=8, num_inducing_fields=6, noise_fixed_steps=60, steps=60, chunk=30,
                     initial_values={"noise": 0.01})


def data(N=40, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N, 2))
    y = np.where(X[:, 0] < 0, X[:, 0] ** 2 + X[:, 0], X[:, 1] ** 2 + X[:, 1])
    return {"N": N, "D": 2, "Q": 2, "X": X, "y": (y - y.mean()) / y.std()}


def test_dmgp_fits_the_model_file_and_predicts():
    model, _ = check_text(DVMGP)
    fit = run(model, data(), "dmgp", QUICK, seed=3, new_inputs=np.zeros((4, 2)))
    assert fit.posterior["s2"].shape == (1, 1, 2) and fit.posterior["ell"].shape == (1, 1, 2, 2)
    assert fit.predictions["y_mean"].shape == (1, 1, 4)
    noise = float(np.asarray(fit.posterior["noise"]).ravel()[0])
    np.testing.assert_allclose(np.asarray(fit.predictions["y_variance"]) - np.asarray(fit.predictions["f_variance"]),
                               noise, rtol=1e-9)


def test_dmgp_raises_the_bound_above_its_start():
    from gpdsl.inference.families.deep_mahalanobis import deep_mahalanobis_view
    from gpdsl.inference.methods.dmgp import fit_dmgp

    model, _ = check_text(DVMGP)
    fit = fit_dmgp(deep_mahalanobis_view(model, data()), QUICK)
    assert np.isfinite(fit.report["start_bound"]) and fit.bound > fit.report["start_bound"] + 1.0


def test_a_deep_gp_that_is_not_a_mahalanobis_gp_is_refused_at_its_statement():
    model, _ = check_text("""
data { int N; int D; int Q; matrix[N, D] X; vector[N] y; }
latent { matrix[N, Q] H; }
model {
  H ~ gp(X, rbf());
  f ~ gp(H, rbf());
  y ~ normal(f, 0.1);
}
""")
    with pytest.raises(MethodError, match="dmgp needs a deep Mahalanobis GP.*the inputs of 'f' are not project") as caught:
        run(model, data(), "dmgp", DMGPSettings(num_inducing=8, num_inducing_fields=6))
    assert caught.value.span.line == 6
