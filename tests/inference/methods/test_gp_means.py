"""``gp(inputs, kernel, mean = m)`` (issue 15, item 1): the JAX lowering's densities, gibbs on the centred latent with
the mean added back, the mean in the Laplace/EP location, predictions with the mean at new inputs, and refusals."""

import jax.numpy as jnp
import numpy as np
import pytest
from scipy.stats import multivariate_normal

from gpdsl.api import check_text, run
from gpdsl.backends.jax.lowering import lower
from gpdsl.errors import MethodError
from gpdsl.inference.families.latent_gp import latent_gp
from gpdsl.settings import GibbsSettings
from gpdsl.numerics import GP_JITTER

LINEAR_MEAN = """
data { int N; vector[N] x; vector[N] y; }
parameters { real mu ~ normal(0, 1); real beta ~ normal(0, 1); real<lower=0> noise ~ lognormal(-1, 0.5); }
model {
  f ~ gp(x, rbf(lengthscale = 0.8), mean = mu + beta * x);
  y ~ normal(f, noise);
}
"""

FIXED = """
data { int N; vector[N] x; vector[N] y; }
model {
  f ~ gp(x, 0.5 * rbf(lengthscale = 0.8), mean = 1.5 - 0.7 * x);
  y ~ student_t(1000000, f, 0.3);
}
"""


def rbf(a, b, lengthscale, variance=1.0):
    return variance * np.exp(-0.5 * (a[:, None] - b[None, :]) ** 2 / lengthscale ** 2)


def data(N=10, seed=0):
    rng = np.random.default_rng(seed)
    x = np.sort(rng.uniform(0, 3, N))
    return {"N": N, "x": x, "y": 1.5 - 0.7 * x + np.sin(2 * x) + 0.3 * rng.normal(size=N)}


def test_integrated_out_gp_with_a_mean_is_the_normal_marginal_around_it():
    model, _ = check_text(LINEAR_MEAN)
    d = data()
    jax_model = lower(model, d)
    assert [b.name for b in jax_model.blocks] == ["mu", "beta", "noise"]
    values = {"mu": 0.3, "beta": -0.5, "noise": 0.4}
    z = jax_model.unconstrain_values(values)
    K = rbf(d["x"], d["x"], 0.8) + (GP_JITTER + 0.16) * np.eye(d["N"])
    expected = multivariate_normal(0.3 - 0.5 * d["x"], K).logpdf(d["y"])
    expected += multivariate_normal(0, 1).logpdf(0.3) + multivariate_normal(0, 1).logpdf(-0.5)
    noise_prior = -np.log(0.4) - 0.5 * np.log(2 * np.pi * 0.25) - (np.log(0.4) + 1) ** 2 / (2 * 0.25)
    jacobian = np.log(0.4)
    assert float(jax_model.log_density(z)) == pytest.approx(expected + noise_prior + jacobian, rel=1e-10)


@pytest.mark.parametrize("parameterisation", ["centred", "whitened"])
def test_sampled_gp_with_a_mean_has_the_normal_prior_around_it(parameterisation):
    model, _ = check_text(FIXED)
    d = data()
    jax_model = lower(model, d, parameterisation, marginalise=False)
    K = rbf(d["x"], d["x"], 0.8, 0.5) + GP_JITTER * np.eye(d["N"])
    u = np.random.default_rng(1).normal(size=d["N"])
    z = jnp.asarray(u if parameterisation == "whitened" else 1.5 - 0.7 * d["x"] + np.linalg.cholesky(K) @ u)
    f = np.asarray(jax_model.constrained(z)["f"])
    prior = multivariate_normal(1.5 - 0.7 * d["x"], K).logpdf(f)
    env = jax_model.environment(jax_model.constrain_free(z)[0])
    likelihood = float(jax_model.log_terms(env, ("likelihood",)))
    if parameterisation == "centred":
        # K carries only the jitter on its diagonal: SciPy's eigendecomposition and our Cholesky factor round the
        # quadratic form differently, by about 2e-9 on some CPUs
        assert float(jax_model.log_density(z)) == pytest.approx(prior + likelihood, rel=1e-10, abs=1e-8)
    else:  # f = m + L z: the mean is added to the whitened draw
        L = np.linalg.cholesky(K)
        np.testing.assert_allclose(f, 1.5 - 0.7 * d["x"] + L @ np.asarray(z), rtol=1e-10)


def test_the_mean_enters_the_laplace_location_and_the_reported_draws():
    model, _ = check_text(FIXED.replace("student_t(1000000, f, 0.3)", "poisson_log(f)").replace(
        "vector[N] y;", "array[N] int<lower=0> y;"))
    d = data()
    d["y"] = np.random.default_rng(2).poisson(2.0, d["N"])
    problem = latent_gp(model, d, "pm")
    theta = jnp.zeros(0)
    np.testing.assert_allclose(problem.location_offset(theta), 1.5 - 0.7 * d["x"], rtol=1e-12)
    g = np.random.default_rng(3).normal(size=(1, 2, d["N"]))
    reported = problem.with_mean(np.zeros((1, 2, 0)), g)
    np.testing.assert_allclose(reported - g, np.broadcast_to(1.5 - 0.7 * d["x"], g.shape), rtol=1e-12)
    np.testing.assert_allclose(problem.without_mean(np.zeros((1, 2, 0)), reported), g, rtol=1e-12)


def test_gibbs_with_a_mean_matches_the_exact_posterior_and_predictive_means():
    """A (numerically) Gaussian likelihood that is not integrated out: E[f | y] = m + K (K + s^2 I)^-1 (y - m), and
    at new inputs m* + K*^T (K + s^2 I)^-1 (y - m)."""
    import arviz as az

    model, _ = check_text(FIXED)
    d = data()
    x_new = np.array([0.25, 1.5, 2.75])
    fit = run(model, d, "gibbs", GibbsSettings(chains=4, warmup=300, draws=2500), seed=4, new_inputs=x_new[:, None])
    x, y, N = d["x"], d["y"], d["N"]
    m, m_new = 1.5 - 0.7 * x, 1.5 - 0.7 * x_new
    C = rbf(x, x, 0.8, 0.5) + 0.09 * np.eye(N)
    for draws, exact in ((fit.posterior["f"].values, m + rbf(x, x, 0.8, 0.5) @ np.linalg.solve(C, y - m)),
                         (fit.predictions["f_new"].values, m_new + rbf(x_new, x, 0.8, 0.5) @ np.linalg.solve(C, y - m))):
        ess = az.ess(az.convert_to_dataset({"v": draws}))["v"].values
        flat = draws.reshape(-1, draws.shape[-1])
        z = (flat.mean(0) - exact) / (flat.std(0) / np.sqrt(ess))
        assert np.all(np.abs(z) < 4.5), z


def test_predictions_are_refused_before_the_run_when_the_mean_reads_other_data():
    model, _ = check_text(LINEAR_MEAN.replace("vector[N] y; }", "vector[N] y; vector[N] w; }").replace(
        "mean = mu + beta * x", "mean = mu + beta * w"))
    d = data()
    d["w"] = d["x"] ** 2
    with pytest.raises(MethodError, match="uses w, which has no values at new inputs"):
        run(model, d, "gibbs", GibbsSettings(chains=1, warmup=10, draws=10), new_inputs=np.zeros((2, 1)))


def test_ml_fits_a_gp_with_a_mean_on_the_normal_marginal_around_it():
    from gpdsl.kernels import RBF
    from gpdsl.settings import MLSettings

    model, _ = check_text(LINEAR_MEAN)
    d = data(N=25)
    x_new = np.array([0.5, 2.9])
    results = run(model, d, "ml", MLSettings(), new_inputs=x_new[:, None])
    mu, beta, noise = (float(results.posterior[name].values.ravel()[0]) for name in ("mu", "beta", "noise"))
    K = np.asarray(RBF(1.0, lengthscale=0.8)(np.concatenate([d["x"], x_new])[:, None])) + GP_JITTER * np.eye(27)
    C = K[:25, :25] + noise ** 2 * np.eye(25)
    expected = multivariate_normal(mu + beta * d["x"], C).logpdf(d["y"])
    assert float(results.sample_stats["log_marginal"].values.ravel()[0]) == pytest.approx(expected, abs=1e-8)
    mean_new = mu + beta * x_new + K[25:, :25] @ np.linalg.solve(C, d["y"] - mu - beta * d["x"])
    np.testing.assert_allclose(results.predictions["y_mean"].values.ravel(), mean_new, rtol=1e-7)


def test_a_mean_of_tuple_inputs_is_evaluated_at_each_new_rows_columns():
    """``gp((x, z), ..., mean = 1.5 - 0.7 * x + 0.4 * z)`` with a kernel of x alone: the predictive mean at new (x, z)
    rows is ``m* + K*^T (K + s^2 I)^-1 (y - m)``, the mean read from each row's own x and z."""
    import arviz as az

    model, _ = check_text(FIXED.replace("vector[N] y; }", "vector[N] z; vector[N] y; }").replace(
        "f ~ gp(x, 0.5 * rbf(lengthscale = 0.8), mean = 1.5 - 0.7 * x);",
        "f ~ gp((x, z), 0.5 * rbf(x, lengthscale = 0.8), mean = 1.5 - 0.7 * x + 0.4 * z);"))
    d = data()
    d["z"] = np.linspace(-1.0, 1.0, d["N"])
    new = np.array([[0.25, 2.0], [1.5, -3.0], [2.75, 0.5]])
    fit = run(model, d, "gibbs", GibbsSettings(chains=4, warmup=300, draws=1500), seed=4, new_inputs=new)
    x, y, N = d["x"], d["y"], d["N"]
    m, m_new = 1.5 - 0.7 * x + 0.4 * d["z"], 1.5 - 0.7 * new[:, 0] + 0.4 * new[:, 1]
    C = rbf(x, x, 0.8, 0.5) + 0.09 * np.eye(N)
    exact = m_new + rbf(new[:, 0], x, 0.8, 0.5) @ np.linalg.solve(C, y - m)
    draws = fit.predictions["f_new"].values
    ess = az.ess(az.convert_to_dataset({"v": draws}))["v"].values
    flat = draws.reshape(-1, draws.shape[-1])
    z = (flat.mean(0) - exact) / (flat.std(0) / np.sqrt(ess))
    assert np.all(np.abs(z) < 4.5), z
