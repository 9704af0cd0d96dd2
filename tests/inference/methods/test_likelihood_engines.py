"""The likelihoods of issue 15 in the engines: data checks at the boundary, the Laplace approximation with a
likelihood's own parameters against a direct Newton solve, Gibbs on Student-t GP regression, and ``pm`` with
Laplace proposals against Gibbs on Poisson and negative-binomial GP models (posterior means within four
combined Monte Carlo standard errors; slow tier)."""

import arviz as az
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gpdsl
from gpdsl.api import check_text
from gpdsl.data.validation import validate_data
from gpdsl.errors import DataError, MethodError
from gpdsl.inference.approximations.laplace import laplace
from gpdsl.likelihoods import LIKELIHOODS

ALL = """
data {
  int N; matrix[N, 1] X;
  vector[N] y_t; array[N] int<lower=0> y_nb; array[N] int trials; array[N] int y_bin;
  array[N] int y_ord; vector[N] y_g; array[N] int y_p;
}
parameters {
  real<lower=0> nu ~ gamma(2, 0.1);
  real<lower=0> sigma ~ half_normal(1);
  real<lower=0> phi ~ gamma(2, 1);
  real c1 ~ normal(0, 2);
  real<lower=0> d2 ~ gamma(2, 2);
  real<lower=0> alpha ~ gamma(2, 1);
}
model {
  f ~ gp(X, rbf(lengthscale = 0.5));
  y_t ~ student_t(nu, f, sigma);
  y_nb ~ neg_binomial_2_log(f, phi);
  y_bin ~ binomial_logit(trials, f);
  y_ord ~ ordered_logistic(f, [c1, c1 + d2]);
  y_g ~ gamma_log(f, alpha);
  y_p ~ poisson_log(f);
}
"""


def all_data(n=6):
    rng = np.random.default_rng(0)
    return {"N": n, "X": rng.normal(size=(n, 1)), "y_t": rng.normal(size=n), "y_nb": np.arange(n),
            "trials": np.full(n, 5), "y_bin": np.arange(n) % 5, "y_ord": np.arange(n) % 3 + 1,
            "y_g": np.ones(n), "y_p": np.arange(n)}


@pytest.mark.parametrize("name, values, message", [
    ("y_bin", [0, 1, 7, 2, 3, 4], r"data 'y_bin' must hold a count from 0 to trials for binomial_logit: "
                                  r"y_bin\[3\] = 7 \(trials\[3\] = 5\)"),
    ("y_bin", [0, -1, 0, 2, 3, 4], r"y_bin\[2\] = -1 \(trials\[2\] = 5\)"),
    ("y_ord", [1, 2, 3, 4, 1, 1], r"data 'y_ord' must hold a label from 1 to 3 \(one more than the cutpoints\) "
                                  r"for ordered_logistic: y_ord\[4\] = 4"),
    ("y_ord", [1, 0, 3, 2, 1, 1], r"y_ord\[2\] = 0"),
    ("y_g", [1.0, 2.0, 1.0, 1.0, 1.0, -0.5], r"data 'y_g' must hold a positive value for gamma_log: y_g\[6\] = -0.5"),
    ("y_p", [0, 1, 2, -3, 0, 0], r"data 'y_p' must hold a non-negative count for poisson_log: y_p\[4\] = -3"),
])
def test_observations_outside_the_support_are_named_by_entry(name, values, message):
    model, _ = check_text(ALL)
    validate_data(model, all_data())
    with pytest.raises(DataError, match=message):
        validate_data(model, {**all_data(), name: np.array(values)})


CENSORED_AND_BETA = """
data {
  int N; matrix[N, 1] X;
  vector<lower=0>[N] t; array[N] int cens; vector[N] t_up; vector[N] p;
}
parameters {
  real<lower=0> k ~ gamma(2, 1);
  real<lower=0> phi ~ gamma(2, 0.1);
}
model {
  f ~ gp(X, rbf(lengthscale = 0.5));
  t ~ weibull_censored(f, k, cens, t_up);
  p ~ beta_logit(f, phi);
}
"""


def censored_and_beta_data(n=6):
    return {"N": n, "X": np.linspace(0, 1, n)[:, None], "t": np.arange(1.0, n + 1), "cens": np.array([0, 1, -1, 2, 0, 0]),
            "t_up": np.arange(1.0, n + 1) + 0.5, "p": np.linspace(0.1, 0.9, n)}


@pytest.mark.parametrize("name, values, message", [
    ("cens", [0, 1, 3, 2, 0, 0], r"data 't' must hold entries whose censoring code cens is 0 \(observed\), 1 \(right\), "
                                 r"-1 \(left\) or 2 \(interval, up to upper\) for weibull_censored: t\[3\] = 3 "
                                 r"\(cens\[3\] = 3, upper\[3\] = 3.5\)"),
    ("t_up", [1.5, 2.5, 3.5, 3.0, 5.5, 6.5], r"data 't' must hold a lower end below its upper bound where cens = 2 "
                                             r"\(interval-censored\) for weibull_censored: t\[4\] = 4 "
                                             r"\(cens\[4\] = 2, upper\[4\] = 3\)"),
    ("t", [1.0, 2.0, 0.0, 4.0, 5.0, 6.0], r"data 't' must hold a positive value for weibull_censored: t\[3\] = 0"),
    ("p", [0.1, 0.5, 1.0, 0.2, 0.3, 0.4], r"data 'p' must hold a proportion strictly between 0 and 1 for beta_logit: "
                                          r"p\[3\] = 1"),
    ("p", [0.1, 0.0, 0.5, 0.2, 0.3, 0.4], r"p\[2\] = 0"),
])
def test_censoring_codes_intervals_and_proportions_are_checked_by_entry(name, values, message):
    model, _ = check_text(CENSORED_AND_BETA)
    validate_data(model, censored_and_beta_data())
    with pytest.raises(DataError, match=message):
        validate_data(model, {**censored_and_beta_data(), name: np.array(values)})


def newton_mode(K, log_lik, n):
    """The mode of ``log_lik(f) - f' K^-1 f / 2`` by plain Newton steps with dense autodiff Hessians."""
    K_inv = np.linalg.inv(K)
    objective = lambda f: log_lik(f) - 0.5 * f @ K_inv @ f  # noqa: E731
    grad, hess = jax.jit(jax.grad(objective)), jax.jit(jax.hessian(objective))
    f = np.zeros(n)
    for _ in range(100):
        step = np.linalg.solve(np.asarray(hess(f)), np.asarray(grad(f)))
        f = f - step
        if np.max(np.abs(step)) < 1e-13:
            break
    return f, objective


LAPLACE_CASES = {
    "poisson_log": (lambda rng, n: rng.poisson(2.0, n), {}),
    "neg_binomial_2_log": (lambda rng, n: rng.poisson(rng.gamma(2.0, 1.5, n)), {"phi": 1.7}),
    "binomial_logit": (lambda rng, n: rng.binomial(9, 0.3, n), {"trials": np.full(10, 9.0)}),
    "ordered_logistic": (lambda rng, n: rng.integers(1, 4, n), {"c": np.array([-0.4, 0.9])}),
    "gamma_log": (lambda rng, n: rng.gamma(2.0, 1.0, n), {"shape": 2.5}),
    "hurdle_poisson_log": (lambda rng, n: rng.poisson(1.5, n), {"hu": 0.3}),  # zeros give W = 0
    # every censoring code, the interval ones up to 30 (above every draw)
    "normal_censored": (lambda rng, n: rng.normal(1.0, 1.0, n), {"sigma": 0.8, "cens": np.resize([0, 1, -1, 2], 10),
                                                                 "upper": np.full(10, 30.0)}),
    "lognormal_censored": (lambda rng, n: rng.lognormal(0.5, 0.7, n), {"sigma": 0.7, "cens": np.resize([0, 1, -1, 2], 10),
                                                                       "upper": np.full(10, 30.0)}),
    "weibull_censored": (lambda rng, n: 2.0 * rng.weibull(1.5, n), {"shape": 1.5, "cens": np.resize([0, 1, -1, 2], 10),
                                                                    "upper": np.full(10, 30.0)}),
}


@pytest.mark.parametrize("name", list(LAPLACE_CASES))
def test_laplace_mode_and_hessian_match_a_direct_newton_solve(name):
    n = 10
    rng = np.random.default_rng(4)
    x = np.linspace(0.0, 3.0, n)
    K = 1.3 * np.exp(-0.5 * (x[:, None] - x[None, :]) ** 2 / 0.8 ** 2) + 1e-6 * np.eye(n)
    draw, others = LAPLACE_CASES[name]
    y = np.asarray(draw(rng, n), dtype=float)
    likelihood = LIKELIHOODS[name]
    args = tuple(jnp.asarray(others[p]) for p in likelihood.other_params)

    def log_lik(f):
        values = {**others, likelihood.latent_param: f}
        return jnp.sum(likelihood.log_density(jnp.asarray(y), *(jnp.asarray(values[p]) for p in likelihood.params)))

    mode, objective = newton_mode(K, log_lik, n)
    approx = laplace(K, y, likelihood=name, tol=1e-20, args=args)
    assert bool(approx.converged)
    np.testing.assert_allclose(approx.mean, mode, rtol=1e-8, atol=1e-10)
    W = -np.diag(np.asarray(jax.hessian(log_lik)(jnp.asarray(mode))))
    np.testing.assert_allclose(approx.site_precision, W, rtol=1e-7, atol=1e-12)
    sign, log_det = np.linalg.slogdet(np.eye(n) + K * W[None, :])
    assert sign > 0
    assert float(approx.log_marginal) == pytest.approx(float(objective(mode)) - 0.5 * log_det, rel=1e-9)


STUDENT_T = """
data { int N; matrix[N, 1] X; vector[N] y; }
parameters {
  real<lower=0> ell ~ lognormal(0, 0.5);
  real<lower=0> nu ~ gamma(2, 0.1);
  real<lower=0> sigma ~ half_normal(1);
}
model {
  f ~ gp(X, rbf(lengthscale = ell));
  y ~ student_t(nu, f, sigma);
}
"""


def test_gibbs_runs_student_t_regression_and_pm_laplace_refuses_it():
    rng = np.random.default_rng(2)
    n = 15
    X = np.linspace(0.0, 3.0, n)[:, None]
    data = {"N": n, "X": X, "y": np.sin(2 * X[:, 0]) + 0.2 * rng.standard_t(2, n)}
    fit = gpdsl.sample(STUDENT_T, data, "gibbs", seed=3, chains=2, warmup=100, draws=100)
    for name in ("ell", "nu", "sigma"):
        values = np.asarray(fit.posterior[name])
        assert values.shape == (2, 100) and np.all(np.isfinite(values)) and np.all(values > 0)
        assert np.unique(values).size > 10  # the MH updates of the likelihood's own parameters move
    with pytest.raises(MethodError, match="not .* use --method gibbs"):
        gpdsl.sample(STUDENT_T, data, "pm", seed=3, chains=1, warmup=5, draws=5, approximation="laplace")


COUNTS = """
data {{ int N; matrix[N, 1] X; array[N] int<lower=0> y; }}
parameters {{
  real<lower=0> ell ~ lognormal(0, 0.5);
  real<lower=0> s ~ lognormal(0, 0.5);
  {extra}
}}
model {{
  f ~ gp(X, s * rbf(lengthscale = ell));
  y ~ {likelihood};
}}
"""


def count_data(n=20):
    rng = np.random.default_rng(8)
    X = np.linspace(0.0, 4.0, n)[:, None]
    mean = np.exp(np.sin(1.5 * X[:, 0]) + 0.8)
    return {"N": n, "X": X, "y": rng.negative_binomial(3.0, 3.0 / (3.0 + mean))}


@pytest.mark.slow
@pytest.mark.parametrize("likelihood, extra, names", [
    ("poisson_log(f)", "", ("ell", "s")),
    ("neg_binomial_2_log(f, phi)", "real<lower=0> phi ~ gamma(4, 1);", ("ell", "s", "phi")),
])
def test_pm_laplace_agrees_with_gibbs(likelihood, extra, names):
    model = COUNTS.format(likelihood=likelihood, extra=extra)
    data = count_data()
    pm = gpdsl.sample(model, data, "pm", seed=11, chains=4, warmup=500, draws=2500, approximation="laplace")
    gibbs = gpdsl.sample(model, data, "gibbs", seed=12, chains=4, warmup=500, draws=2500)
    for name in names:
        a, b = pm.posterior[name], gibbs.posterior[name]
        se = np.hypot(float(az.mcse(a.to_dataset(), method="mean")[name]),
                      float(az.mcse(b.to_dataset(), method="mean")[name]))
        z = (float(a.mean()) - float(b.mean())) / se
        print(f"{likelihood} {name}: pm {float(a.mean()):.4f} gibbs {float(b.mean()):.4f} z {z:+.2f}")
        assert abs(z) < 4, (name, z)


BINOMIAL = """
data { int N; matrix[N, 1] X; array[N] int<lower=0> trials; array[N] int<lower=0> y; }
parameters { real<lower=0> ell ~ lognormal(0, 0.5); }
model { f ~ gp(X, rbf(lengthscale = ell)); y ~ binomial_logit(trials, f); }
"""


def test_predictions_leave_out_observations_whose_likelihood_needs_per_observation_data():
    from gpdsl.inference.families.latent_gp import latent_gp
    from gpdsl.inference.predict.draws import latent_new_draws

    model, _ = check_text(BINOMIAL)
    X = np.linspace(0.0, 1.0, 6)[:, None]
    problem = latent_gp(model, {"N": 6, "X": X, "trials": np.full(6, 4), "y": np.arange(6) % 5})
    theta, f = np.zeros((1, 2, 1)), np.zeros((1, 2, 6))
    values = latent_new_draws(problem, theta, f, X[:2], jax.random.PRNGKey(0))
    assert set(values) == {"f_new"}
    model, _ = check_text(BINOMIAL.replace("binomial_logit(trials, f)", "binomial_logit(4, f)"))
    problem = latent_gp(model, {"N": 6, "X": X, "trials": np.full(6, 4), "y": np.arange(6) % 5})
    values = latent_new_draws(problem, theta, f, X[:2], jax.random.PRNGKey(0))
    assert set(values) == {"f_new", "y_new"} and np.all((values["y_new"] >= 0) & (values["y_new"] <= 4))


def test_simulation_draws_every_new_likelihood_inside_its_support():
    from gpdsl.backends.jax.lowering import lower
    from gpdsl.backends.jax.simulate import simulate

    model, _ = check_text(ALL)
    data = all_data(n=40)
    _, observed = simulate(lower(model, data), jax.random.PRNGKey(3))
    assert np.all(np.isfinite(observed["y_t"]))
    assert np.all(np.asarray(observed["y_nb"]) >= 0) and np.all(np.asarray(observed["y_p"]) >= 0)
    assert np.all((np.asarray(observed["y_bin"]) >= 0) & (np.asarray(observed["y_bin"]) <= data["trials"]))
    assert set(np.unique(observed["y_ord"])) <= {1, 2, 3}
    assert np.all(np.asarray(observed["y_g"]) > 0)
    validate_data(model, {**data, **{k: np.asarray(v) for k, v in observed.items()}})
