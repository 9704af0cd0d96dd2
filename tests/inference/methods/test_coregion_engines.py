"""Multi-output GPs (the coregion kernel) in gpdsl's engines.

- ``ml`` (no priors: pure type-II maximum likelihood) on 200 heterotopic observations of two correlated outputs
  reaches the maximiser of an independent NumPy/SciPy log marginal likelihood over ``(ell, B, noise)``, and its
  ``B = W W' + diag(kappa)`` is within four asymptotic standard errors (the inverse observed information of
  that likelihood) of the ``B`` the data were drawn from;
- on held-out points of an output observed only on half of the input range, the coregionalised fit predicts
  better than a GP fitted to that output alone;
- ``sgpr`` with every point an inducing input reaches ``ml``'s estimates (slow tier);
- ``vem`` refuses a coregion kernel over a GPLVM's inputs and says why;
- ``gibbs`` and Stan's NUTS agree on a small two-output set within four combined Monte Carlo standard errors
  for ``B``'s entries, the length-scale and the noise (slow tier); ``W`` itself is identified only up to its
  sign, so its draws are compared through ``B``.
"""

import numpy as np
import pytest
import scipy.optimize
import xarray as xr

import gpdsl
from gpdsl.api import check_file, check_text, run
from gpdsl.results.arviz_compat import groups
from gpdsl.settings import GibbsSettings, NUTSSettings
from tests.inference.methods.test_pm_vs_nuts import disagreements

ML_MODEL = """
data { int N; int P; int R; vector[N] x; array[N] int<lower=1, upper=P> output; vector[N] y; }
parameters { real<lower=0> lengthscale; matrix[P, R] W; vector<lower=0>[P] kappa; real<lower=0> noise; }
model {
  f ~ gp((x, output), rbf(x, lengthscale = lengthscale) * coregion(output, W, kappa));
  y ~ normal(f, noise);
}
"""
TRUE_W, TRUE_KAPPA, TRUE_ELL, TRUE_NOISE = np.array([[1.0], [0.8]]), np.array([0.05, 0.1]), 0.5, 0.1


def rbf(a, b, ell):
    return np.exp(-0.5 * (a[:, None] - b[None]) ** 2 / ell**2)


def draw_outputs(rng, x, output, B, ell):
    K = rbf(x, x, ell) * B[np.ix_(output - 1, output - 1)]
    return np.linalg.cholesky(K + 1e-8 * np.eye(len(x))) @ rng.normal(size=len(x))


def two_outputs(seed, n_per, upper, B, ell=TRUE_ELL, noise=TRUE_NOISE):
    rng = np.random.default_rng(seed)
    x = rng.uniform(0, upper, 2 * n_per)
    output = np.repeat([1, 2], n_per)
    f = draw_outputs(rng, x, output, B, ell)
    return {"N": 2 * n_per, "P": 2, "R": 1, "x": x, "output": output, "y": f + noise * rng.normal(size=len(x))}


def log_marginal(theta, data):
    """log N(y | 0, K_x .* B[output, output] + noise^2 I); theta = (log ell, B11, B12, B22, log noise)."""
    ell, noise = np.exp(theta[0]), np.exp(theta[4])
    B = np.array([[theta[1], theta[2]], [theta[2], theta[3]]])
    index = data["output"] - 1
    K = rbf(data["x"], data["x"], ell) * B[np.ix_(index, index)] + (noise**2 + 1e-8) * np.eye(data["N"])
    try:
        L = np.linalg.cholesky(K)
    except np.linalg.LinAlgError:
        return -np.inf
    alpha = np.linalg.solve(L, data["y"])
    return -0.5 * alpha @ alpha - np.log(np.diag(L)).sum() - 0.5 * data["N"] * np.log(2 * np.pi)


def hessian(f, theta, eps=1e-4):
    n = len(theta)
    H = np.zeros((n, n))
    for i in range(n):
        for j in range(n):
            ei, ej = eps * np.eye(n)[i], eps * np.eye(n)[j]
            H[i, j] = (f(theta + ei + ej) - f(theta + ei - ej) - f(theta - ei + ej) + f(theta - ei - ej)) / (4 * eps**2)
    return H


def point(results, name):
    return np.asarray(groups(results)["posterior"][name]).reshape((-1,) + groups(results)["posterior"][name].shape[2:])[0]


def test_ml_recovers_the_output_covariance():
    B_true = TRUE_W @ TRUE_W.T + np.diag(TRUE_KAPPA)
    data = two_outputs(seed=3, n_per=100, upper=20, B=B_true)
    results = gpdsl.fit(check_text(ML_MODEL)[0], data, "ml", seed=1)
    W, kappa = point(results, "W"), point(results, "kappa")
    B_ml = W @ W.T + np.diag(kappa)
    theta_ml = np.r_[np.log(point(results, "lengthscale")), B_ml[0, 0], B_ml[0, 1], B_ml[1, 1],
                     np.log(point(results, "noise"))]

    start = np.r_[np.log(1.0), 1.0, 0.0, 1.0, np.log(0.5)]
    reference = scipy.optimize.minimize(lambda t: -log_marginal(t, data), start, method="Nelder-Mead",
                                        options={"maxiter": 20000, "xatol": 1e-8, "fatol": 1e-10})
    print(f"\nml:    {np.round(theta_ml, 4)}  log marginal {log_marginal(theta_ml, data):.4f}")
    print(f"scipy: {np.round(reference.x, 4)}  log marginal {-reference.fun:.4f}")
    assert log_marginal(theta_ml, data) >= -reference.fun - 1e-3
    np.testing.assert_allclose(theta_ml, reference.x, rtol=2e-2, atol=2e-3)

    covariance = np.linalg.inv(-hessian(lambda t: log_marginal(t, data), reference.x))
    truth = np.r_[np.log(TRUE_ELL), B_true[0, 0], B_true[0, 1], B_true[1, 1], np.log(TRUE_NOISE)]
    z = (theta_ml - truth) / np.sqrt(np.diag(covariance))
    print(f"truth: {np.round(truth, 4)}  z-scores {np.round(z, 2)}")
    assert np.all(np.abs(z) < 4), z


def test_coregionalisation_beats_independent_outputs_on_held_out_points():
    """Output 2 is seen only on x < 5; at x > 5 the correlated output 1 carries the information."""
    rng = np.random.default_rng(8)
    B = np.array([[1.0, 0.95], [0.95, 1.0]])
    x = np.r_[rng.uniform(0, 10, 60), rng.uniform(0, 5, 30), np.linspace(5.2, 9.8, 20)]
    output = np.r_[np.ones(60, int), 2 * np.ones(50, int)]
    f = draw_outputs(rng, x, output, B, ell=0.8)
    seen = np.arange(90)
    held_out = np.arange(90, 110)
    y = f[seen] + 0.1 * rng.normal(size=90)

    joint = {"N": 90, "P": 2, "R": 1, "x": x[seen], "output": output[seen], "y": y}
    results = gpdsl.fit(check_file("models/gp_multi_output.gpm")[0], joint, "ml", seed=1)
    W, kappa, ell, noise = (point(results, n) for n in ("W", "kappa", "lengthscale", "noise"))
    Bhat = W @ W.T + np.diag(kappa)
    K = rbf(x, x, ell) * Bhat[np.ix_(output - 1, output - 1)]
    coregional = K[np.ix_(held_out, seen)] @ np.linalg.solve(K[np.ix_(seen, seen)] + noise**2 * np.eye(90), y)

    alone = np.arange(60, 90)
    single = {"N": 30, "D": 1, "X": x[alone, None], "y": y[alone]}
    results = gpdsl.fit(check_file("models/gp_regression.gpm")[0], single, "ml", seed=1)
    variance, ell1, noise1 = (float(point(results, n).squeeze()) for n in ("variance", "lengthscale", "noise"))
    K1 = variance * rbf(x, x, ell1)
    independent = K1[np.ix_(held_out, alone)] @ np.linalg.solve(K1[np.ix_(alone, alone)] + noise1**2 * np.eye(30),
                                                                y[alone])
    errors = [np.sqrt(np.mean((p - f[held_out]) ** 2)) for p in (coregional, independent)]
    print(f"\nheld-out RMSE of output 2: coregionalised {errors[0]:.3f}, independent {errors[1]:.3f}")
    assert errors[0] < 0.5 * errors[1]


def output_covariance_draws(results) -> xr.Dataset:
    """Per draw: the entries of B (from W and kappa, or from L and sigma), the length-scale and the noise."""
    posterior = groups(results)["posterior"]
    if "W" in posterior:
        W, kappa = np.asarray(posterior["W"]), np.asarray(posterior["kappa"])
        B = np.einsum("cdir,cdjr->cdij", W, W) + kappa[..., :, None] * np.eye(2)
    else:
        L, sigma = np.asarray(posterior["L"]), np.asarray(posterior["sigma"])
        B = np.einsum("cdir,cdjr->cdij", L, L) * sigma[..., :, None] * sigma[..., None, :]
    entries = {name: (("chain", "draw"), B[..., i, j]) for name, (i, j) in
               {"B11": (0, 0), "B12": (0, 1), "B22": (1, 1)}.items()}
    return xr.Dataset({**entries, "lengthscale": posterior["lengthscale"], "noise": posterior["noise"]})


@pytest.mark.slow
@pytest.mark.parametrize("model_file", ["models/gp_multi_output.gpm", "models/gp_multi_output_lkj.gpm"])
def test_gibbs_agrees_with_nuts_on_two_outputs(model_file):
    model = check_file(model_file)[0]
    data = two_outputs(seed=5, n_per=12, upper=4, B=TRUE_W @ TRUE_W.T + np.diag(TRUE_KAPPA), ell=0.8, noise=0.2)
    data = {name: value for name, value in data.items() if name in model.data}
    ours = run(model, data, "gibbs", GibbsSettings(chains=4, warmup=1000, draws=4000), seed=5)
    nuts = run(model, data, "nuts", NUTSSettings(chains=4, warmup=1000, draws=1000), seed=6)
    names = ["B11", "B12", "B22", "lengthscale", "noise"]
    failures = disagreements(output_covariance_draws(ours), output_covariance_draws(nuts), names)
    assert not failures, f"posterior means differ by more than 4 combined MCSEs for {failures}"


GPLVM = """
data { int N; int P; int D; array[N] int<lower=1, upper=P> output; matrix[N, D] Y; }
parameters {
  matrix[P, 1] W ~ normal(0, 1);
  vector<lower=0>[P] kappa ~ gamma(2, 4);
  real<lower=0> noise ~ gamma(2, 4);
}
latent { matrix[N, 2] X; }
model {
  X ~ normal(0, 1);
  F ~ gp((X, output), rbf(X) * coregion(output, W, kappa));
  Y ~ normal(F, noise);
}
"""


def test_vem_refuses_a_coregion_over_latent_inputs_and_says_why():
    rng = np.random.default_rng(0)
    data = {"N": 6, "P": 2, "D": 3, "output": np.r_[1, 2, 1, 2, 1, 2], "Y": rng.normal(size=(6, 3))}
    with pytest.raises(gpdsl.errors.MethodError, match=r"the kernel of 'F' has coregion\(\.\.\.\) over an observed "
                                                      r"output index, and the Psi statistics of a GPLVM"):
        gpdsl.fit(check_text(GPLVM)[0], data, "vem", seed=1)


@pytest.mark.slow
def test_sgpr_with_every_point_inducing_reaches_ml():
    """With the inducing inputs held at all N points the collapsed bound is the exact log marginal likelihood."""
    model = check_file("models/gp_multi_output.gpm")[0]
    data = two_outputs(seed=4, n_per=25, upper=8, B=TRUE_W @ TRUE_W.T + np.diag(TRUE_KAPPA))
    ml = gpdsl.fit(model, data, "ml", seed=1)
    sgpr = gpdsl.fit(model, data, "sgpr", seed=1, num_inducing=50, inducing_init="random", fix_inducing=True)
    B_ml, B_sgpr = (point(r, "W") @ point(r, "W").T + np.diag(point(r, "kappa")) for r in (ml, sgpr))
    np.testing.assert_allclose(B_sgpr, B_ml, rtol=2e-3, atol=1e-4)
    for name in ("lengthscale", "noise"):
        np.testing.assert_allclose(point(sgpr, name), point(ml, name), rtol=2e-3)
