"""The JAX lowering against direct computations: marginal likelihoods, parameterisations, bijectors."""

import re
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from gpdsl.api import check_file, check_text
from gpdsl.backends.jax.lowering import lower
from gpdsl.errors import DataError, MethodError
from gpdsl.numerics import GP_JITTER

MODELS = "models"


def rbf(X1, X2, variance, lengthscale):
    d2 = (((X1[:, None, :] - X2[None, :, :]) / lengthscale) ** 2).sum(-1)
    return variance * np.exp(-0.5 * d2)


def test_classification_layout_and_bounds():
    model, _ = check_file(f"{MODELS}/gp_classification.gpm")
    rng = np.random.default_rng(1)
    jm = lower(model, {"N": 7, "D": 3, "X": rng.normal(size=(7, 3)), "y": rng.integers(0, 2, 7)})
    assert [(b.name, b.shape, b.role) for b in jm.blocks] == [
        ("sigma", (), "parameter"), ("tau", (3,), "parameter"), ("f_raw", (7,), "latent_raw")]
    assert jm.dim == 11
    values = jm.constrained(jnp.zeros(jm.dim))
    assert float(values["sigma"]) == pytest.approx(1.0)
    np.testing.assert_allclose(values["f"], 0.0)


def test_classification_log_density_by_hand():
    model, _ = check_file(f"{MODELS}/gp_classification.gpm")
    rng = np.random.default_rng(2)
    N, D = 9, 2
    X, y = rng.uniform(size=(N, D)), rng.integers(0, 2, N)
    jm = lower(model, {"N": N, "D": D, "X": X, "y": y})
    z = rng.normal(size=jm.dim)
    sigma, tau, raw = np.exp(z[0]), np.exp(z[1:3]), z[3:]
    K = rbf(X, X, sigma, tau) + GP_JITTER * np.eye(N)
    f = np.linalg.cholesky(K) @ raw
    expected = (stats.gamma.logpdf(sigma, 1.2, scale=1 / 0.2) + stats.gamma.logpdf(tau, 1, scale=np.sqrt(D)).sum()
                + stats.norm.logpdf(raw).sum() + stats.norm.logcdf((2 * y - 1) * f).sum() + z[0] + z[1:3].sum())
    assert float(jm.log_density(jnp.asarray(z))) == pytest.approx(expected, rel=1e-10)


def test_whitened_and_centred_differ_by_the_log_determinant():
    model, _ = check_file(f"{MODELS}/gp_classification.gpm")
    rng = np.random.default_rng(3)
    data = {"N": 8, "D": 2, "X": rng.uniform(size=(8, 2)), "y": rng.integers(0, 2, 8)}
    white, centred = lower(model, data, "whitened"), lower(model, data, "centred")
    z = rng.normal(size=white.dim)
    values = white.constrained(jnp.asarray(z))
    zc = centred.unconstrain_values({"sigma": values["sigma"], "tau": values["tau"], "f": values["f"]})
    K = rbf(data["X"], data["X"], float(values["sigma"]), np.asarray(values["tau"])) + GP_JITTER * np.eye(8)
    log_det_L = np.log(np.diag(np.linalg.cholesky(K))).sum()
    assert float(white.log_density(jnp.asarray(z))) == pytest.approx(
        float(centred.log_density(zc)) + log_det_L, rel=1e-9)


def test_regression_marginal_likelihood_matches_scipy():
    model, _ = check_file(f"{MODELS}/gp_regression.gpm")
    rng = np.random.default_rng(4)
    N, D = 12, 2
    X, y = rng.normal(size=(N, D)), rng.normal(size=N)
    jm = lower(model, {"N": N, "D": D, "X": X, "y": y})
    assert [b.name for b in jm.blocks] == ["variance", "lengthscale", "noise"]
    params = {"variance": 1.3, "lengthscale": np.array([0.7, 1.9]), "noise": 0.4}
    r = np.sqrt(5) * np.sqrt((((X[:, None] - X[None]) / params["lengthscale"]) ** 2).sum(-1))
    K = params["variance"] * (1 + r + r ** 2 / 3) * np.exp(-r) + (GP_JITTER + 0.4 ** 2) * np.eye(N)
    marginal = stats.multivariate_normal(np.zeros(N), K).logpdf(y)
    priors = (stats.lognorm.logpdf(1.3, 1.0) + stats.invgamma.logpdf(params["lengthscale"], 5, scale=5).sum()
              + stats.halfnorm.logpdf(0.4))
    assert float(jm.log_joint({k: jnp.asarray(v) for k, v in params.items()})) == pytest.approx(
        marginal + priors, rel=1e-10)


def test_gplvm_columns_are_independent_given_x():
    model, _ = check_file(f"{MODELS}/bayesian_gplvm_priors.gpm")
    rng = np.random.default_rng(5)
    N, D, Q = 6, 3, 2
    Y = rng.normal(size=(N, D))
    jm = lower(model, {"N": N, "D": D, "Q": Q, "Y": Y})
    free = {"s2": 0.8, "w": np.array([1.5, 0.3]), "noise": 0.2, "X": rng.normal(size=(N, Q))}
    K = 0.8 * np.exp(-0.5 * (((free["X"][:, None] - free["X"][None]) ** 2) * free["w"]).sum(-1))
    K += (GP_JITTER + 0.2) * np.eye(N)
    marginal = sum(stats.multivariate_normal(np.zeros(N), K).logpdf(Y[:, j]) for j in range(D))
    priors = (stats.lognorm.logpdf(0.8, 1.0) + stats.gamma.logpdf(free["w"], 2, scale=0.5).sum()
              + stats.invgamma.logpdf(0.2, 2, scale=0.1) + stats.norm.logpdf(free["X"]).sum())
    assert float(jm.log_joint({k: jnp.asarray(v) for k, v in free.items()})) == pytest.approx(
        marginal + priors, rel=1e-10)


def test_sequential_model_tuple_inputs_and_vector_bounds():
    model, _ = check_file(f"{MODELS}/sequential_latent_gp.gpm")
    rng = np.random.default_rng(6)
    T, N = 3, 4
    data = {"T": T, "N": N, "t": np.arange(T, dtype=float), "X": rng.normal(size=(T, N, 2)),
            "y": rng.normal(size=(T, N))}
    jm = lower(model, data)
    kappa_block = jm.block("kappa")
    np.testing.assert_allclose(kappa_block.upper, [3.16, 3.16, 3.16, 2])
    z = rng.normal(size=jm.dim)
    values = jm.constrained(jnp.asarray(z))
    assert values["f"].shape == (T, N)
    kappa, alpha = np.asarray(values["kappa"]), np.asarray(values["alpha"])
    points = np.concatenate([np.repeat(data["t"][:, None, None], N, axis=1), data["X"]], axis=-1).reshape(-1, 3)
    K = kappa[3] ** 2 * rbf(points[:, :1], points[:, :1], 1.0, kappa[2]) * rbf(points[:, 1:], points[:, 1:], 1.0,
                                                                                kappa[:2])
    f = (np.linalg.cholesky(K + GP_JITTER * np.eye(T * N)) @ z[6:]).reshape(T, N)
    np.testing.assert_allclose(values["f"], f, rtol=1e-8)
    loglik = stats.norm.logpdf(data["y"], f + alpha[0], alpha[1]).sum()
    lo, hi = 0.0, np.array([3.16, 3.16, 3.16, 2, 1, 1])
    x = np.concatenate([kappa, alpha])
    zz = np.log((x - lo) / (hi - x))
    prior = (stats.norm.logpdf(zz, 0, 1.5) + np.log(hi - lo) - np.log(x - lo) - np.log(hi - x)).sum()
    jac = (np.log(hi - lo) + np.log((x - lo) / (hi - lo)) + np.log((hi - x) / (hi - lo))).sum()
    expected = loglik + prior + jac + stats.norm.logpdf(z[6:]).sum()
    assert float(jm.log_density(jnp.asarray(z))) == pytest.approx(expected, rel=1e-9)


def test_deep_mahalanobis_projection():
    model, _ = check_file(f"{MODELS}/deep_mahalanobis_gp.gpm")
    rng = np.random.default_rng(7)
    N, D, Q = 5, 3, 2
    data = {"N": N, "D": D, "Q": Q, "X": rng.normal(size=(N, D)), "y": rng.normal(size=N)}
    jm = lower(model, data)
    z = rng.normal(size=jm.dim) * 0.3
    values = jm.constrained(jnp.asarray(z))
    raw = z[-Q * N * D:].reshape(Q, N, D)
    for q in range(Q):
        K = rbf(data["X"], data["X"], float(values["s2"][q]), np.asarray(values["ell"][q])) + GP_JITTER * np.eye(N)
        np.testing.assert_allclose(values["W"][q], np.linalg.cholesky(K) @ raw[q], rtol=1e-8)
    assert np.isfinite(float(jm.log_density(jnp.asarray(z))))
    assert np.all(np.isfinite(np.asarray(jax.grad(jm.log_density)(jnp.asarray(z)))))


def test_external_likelihood_is_refused_unless_allowed():
    model, _ = check_file(f"{MODELS}/local_volatility.gpm")
    rng = np.random.default_rng(8)
    data = {"T": 2, "N": 3, "t": np.arange(2.0), "K": rng.normal(size=(2, 3, 1)), "c": rng.normal(size=(2, 3)),
            "mu": 0.1}
    jm = lower(model, data)
    with pytest.raises(MethodError, match="external likelihood"):
        jm.log_density(jnp.zeros(jm.dim))


def test_logit_and_poisson_likelihoods():
    text = """
    data { int N; vector[N] x; array[N] int<lower=0> k; array[N] int<lower=0, upper=1> b; }
    parameters { real<lower=0> ell ~ gamma(2, 2); }
    model {
      f ~ gp(x, rbf(lengthscale = ell));
      g ~ gp(x, rbf(lengthscale = ell));
      k ~ poisson_log(f);
      b ~ bernoulli_logit(g);
    }"""
    model, _ = check_text(text)
    rng = np.random.default_rng(9)
    N = 6
    data = {"N": N, "x": rng.normal(size=N), "k": rng.poisson(2, N), "b": rng.integers(0, 2, N)}
    jm = lower(model, data, "centred")
    f, g = rng.normal(size=N), rng.normal(size=N)
    free = {"ell": jnp.asarray(0.9), "f": jnp.asarray(f), "g": jnp.asarray(g)}
    K = rbf(data["x"][:, None], data["x"][:, None], 1.0, 0.9) + GP_JITTER * np.eye(N)
    expected = (stats.gamma.logpdf(0.9, 2, scale=0.5) + 2 * 0
                + stats.multivariate_normal(np.zeros(N), K).logpdf(f)
                + stats.multivariate_normal(np.zeros(N), K).logpdf(g)
                + stats.poisson.logpmf(data["k"], np.exp(f)).sum()
                + (data["b"] * g - np.log1p(np.exp(g))).sum())
    assert float(jm.log_joint(free)) == pytest.approx(expected, rel=1e-10)


GROUPED_HEAD = """
data {
  int N; int G; int D;
  vector[N] x; vector[N] y; vector[N] z; matrix[N, D] Y;
  array[N] int<lower=1, upper=G> group;
}
parameters {
  real<lower=0> tau ~ gamma(2, 1);
  vector[G] u;
  real<lower=0> noise ~ gamma(2, 1);
}
latent { vector[N] a; matrix[N, D] F; }
model {
  f ~ gp(x, rbf(lengthscale = 0.5));
  F ~ gp(x, rbf());
"""

# (loop form, vectorised form): every loop form docs/language.md shows, with what it stands for
LOOP_FORMS = {
    "likelihood with a gathered offset": (
        "for (i in 1:N) y[i] ~ normal(f[i] + u[group[i]], noise);", "y ~ normal(f + u[group], noise);"),
    "prior element by element": (
        "for (g in 1:G) u[g] ~ normal(0, tau);", "u ~ normal(0, tau);"),
    "block body": (
        "for (i in 1:N) { y[i] ~ normal(f[i], noise); z[i] ~ normal(u[group[i]], noise); }",
        "y ~ normal(f, noise); z ~ normal(u[group], noise);"),
    "nested loops over a matrix": (
        "for (i in 1:N) { for (d in 1:D) { Y[i, d] ~ normal(F[i, d], noise); } }", "Y ~ normal(F, noise);"),
    "loop bounds from an expression": (
        "for (i in 2:N - 1) y[i] ~ normal(f[i], noise); y[1] ~ normal(f[1], noise); y[N] ~ normal(f[N], noise);",
        "y ~ normal(f, noise);"),
}
FILLERS = {"u": "u ~ normal(0, tau);", "y": "y ~ normal(f, noise);", "z": "z ~ normal(u[group], noise);",
           "Y": "Y ~ normal(F, noise);"}


def _grouped(statements: str):
    """The grouped model with ``statements``, and a plain statement for each variable they leave out."""
    rest = " ".join(v for k, v in FILLERS.items() if not re.search(rf"\b{k}(\[[^\]]*\])?\s*~", statements))
    model, _ = check_text(GROUPED_HEAD + statements + " a ~ normal(0, 1); " + rest + "\n}\n")
    return model


def grouped_data(rng):
    N, G, D = 9, 3, 2
    return {"N": N, "G": G, "D": D, "x": rng.normal(size=N), "y": rng.normal(size=N), "z": rng.normal(size=N),
            "Y": rng.normal(size=(N, D)), "group": np.r_[1, 2, 3, rng.integers(1, G + 1, N - 3)]}


@pytest.mark.parametrize("form", LOOP_FORMS)
def test_a_loop_lowers_like_its_vectorised_form(form):
    loop, vectorised = LOOP_FORMS[form]
    rng = np.random.default_rng(5)
    data = grouped_data(rng)
    looped, whole = (lower(_grouped(s), data, marginalise=False) for s in (loop, vectorised))
    assert [(b.name, b.shape) for b in looped.blocks] == [(b.name, b.shape) for b in whole.blocks]
    density = jax.jit(looped.log_density)
    for z in rng.normal(size=(4, looped.dim)):
        assert float(density(jnp.asarray(z))) == pytest.approx(float(whole.log_density(jnp.asarray(z))), rel=1e-12)


def test_a_gathered_offset_by_hand():
    rng = np.random.default_rng(6)
    data = grouped_data(rng)
    jm = lower(_grouped("y ~ normal(f + u[group], noise);"), data, marginalise=False)
    z = rng.normal(size=jm.dim)
    env = jm.environment(jm.constrain_free(jnp.asarray(z))[0])
    u, f, noise = (np.asarray(env[k]) for k in ("u", "f", "noise"))
    expected = stats.norm.logpdf(data["y"], f + u[data["group"] - 1], noise).sum()
    assert float(jm.log_terms(env, ("likelihood",), targets={"y"})) == pytest.approx(expected, rel=1e-12)


def test_a_loop_over_an_indexed_target_uses_earlier_elements():
    text = """
data { int N; vector[N] y; }
latent { vector[N] x; }
model {
  x[1] ~ normal(0, 1);
  for (i in 2:N) x[i] ~ normal(x[i - 1], 1);
  y ~ normal(x, 0.5);
}
"""
    model, _ = check_text(text)
    rng = np.random.default_rng(7)
    jm = lower(model, {"N": 6, "y": rng.normal(size=6)})
    z = rng.normal(size=jm.dim)
    x = np.asarray(jm.constrained(jnp.asarray(z))["x"])
    expected = (stats.norm.logpdf(x[0]) + stats.norm.logpdf(x[1:], x[:-1], 1).sum()
                + stats.norm.logpdf(jm.data["y"], x, 0.5).sum())
    assert float(jax.jit(jm.log_density)(jnp.asarray(z))) == pytest.approx(expected, rel=1e-12)


def test_gps_in_a_loop_lower_like_the_unrolled_statements():
    head = """
data { int N; int D; matrix[N, D] X; vector[N] y; }
parameters { vector<lower=0>[2] s2 ~ lognormal(0, 1); }
latent { array[2] matrix[N, D] W; }
model {
"""
    tail = "  f ~ gp(project(W, X), rbf());\n  y ~ normal(f, 0.3);\n}\n"
    loop = "  for (q in 1:2) W[q] ~ gp(X, s2[q] * rbf());\n"
    unrolled = "  W[1] ~ gp(X, s2[1] * rbf());\n  W[2] ~ gp(X, s2[2] * rbf());\n"
    rng = np.random.default_rng(8)
    data = {"N": 5, "D": 2, "X": rng.normal(size=(5, 2)), "y": rng.normal(size=5)}
    looped, whole = (lower(check_text(head + body + tail)[0], data) for body in (loop, unrolled))
    for z in rng.normal(size=(3, looped.dim)):
        assert float(jax.jit(looped.log_density)(jnp.asarray(z))) == pytest.approx(
            float(whole.log_density(jnp.asarray(z))), rel=1e-12)


def test_an_index_outside_its_vector_is_a_data_error():
    rng = np.random.default_rng(9)
    data = grouped_data(rng)
    model = _grouped("y ~ normal(f + u[group], noise);")
    bad = dict(data, G=2, group=np.r_[1, 2, 1, 2, 1, 2, 1, 2, 2])
    lower(model, bad)
    text = GROUPED_HEAD.replace("vector[G] u;", "vector[2] u;") + \
        " y ~ normal(f + u[group], noise); a ~ normal(0, 1); u ~ normal(0, tau); z ~ normal(0, noise); " \
        "Y ~ normal(F, noise);\n}\n"
    jm = lower(check_text(text)[0], data | {"group": np.r_[1, 2, 3, 1, 1, 1, 1, 1, 1]}, marginalise=False)
    with pytest.raises(DataError, match=r"index group\[3\] = 3 is outside 1\.\.2"):
        jm.log_density(jnp.zeros(jm.dim))


def matern52(x1, x2, variance, lengthscale):
    r = np.abs(x1[:, None] - x2[None, :]) / lengthscale
    return variance * (1 + np.sqrt(5) * r + 5 * r ** 2 / 3) * np.exp(-np.sqrt(5) * r)


def periodic(x1, x2, variance, lengthscale, period):
    return variance * np.exp(-0.5 * np.sin(np.pi * (x1[:, None] - x2[None, :]) / period) ** 2 / lengthscale ** 2)


COLUMN_KERNELS = """
data { int N; matrix[N, 3] X; vector[N] y; }
parameters {
  real<lower=0> s ~ lognormal(0, 1);
  real<lower=0> p ~ lognormal(0, 0.5);
  vector<lower=0>[2] ell ~ gamma(2, 2);
  real<lower=0> noise ~ half_normal(1);
}
model {
  f ~ gp(X, matern52(X[:, 1], variance = s, lengthscale = 0.7) + periodic(X[:, 2], lengthscale = 0.8, period = p)
            + rbf(X[:, 2:3], lengthscale = ell));
  y ~ normal(f, noise);
}
"""


def test_kernels_on_columns_add_the_one_column_kernels():
    model, _ = check_text(COLUMN_KERNELS)
    rng = np.random.default_rng(10)
    X = rng.normal(size=(6, 3))
    jm = lower(model, {"N": 6, "X": X, "y": rng.normal(size=6)})
    env = jm.environment(jm.constrain_free(jnp.asarray(rng.normal(size=jm.dim)))[0])
    s, p, ell = (np.asarray(env[k]) for k in ("s", "p", "ell"))
    expected = (matern52(X[:, 0], X[:, 0], s, 0.7) + periodic(X[:, 1], X[:, 1], 1.0, 0.8, p)
                + rbf(X[:, 1:3], X[:, 1:3], 1.0, ell) + GP_JITTER * np.eye(6))
    np.testing.assert_allclose(jm.gp_covariance(model.statements[-2], env), expected, rtol=1e-12)


def test_kernels_on_columns_of_latent_inputs():
    text = """
data { int N; int D; matrix[N, D] Y; }
parameters { real<lower=0> p ~ lognormal(0, 0.5); real<lower=0> noise ~ half_normal(1); }
latent { matrix[N, 2] X; }
model {
  X ~ normal(0, 1);
  F ~ gp(X, matern52(X[:, 1]) + periodic(X[:, 2], period = p));
  Y ~ normal(F, noise);
}
"""
    model, _ = check_text(text)
    rng = np.random.default_rng(12)
    jm = lower(model, {"N": 5, "D": 2, "Y": rng.normal(size=(5, 2))})
    env = jm.environment(jm.constrain_free(jnp.asarray(rng.normal(size=jm.dim)))[0])
    X, p = np.asarray(env["X"]), float(env["p"])
    expected = matern52(X[:, 0], X[:, 0], 1.0, 1.0) + periodic(X[:, 1], X[:, 1], 1.0, 1.0, p) + GP_JITTER * np.eye(5)
    gp = next(s for s in model.statements if type(s).__name__ == "GPStatement")
    np.testing.assert_allclose(jm.gp_covariance(gp, env), expected, rtol=1e-12)


def test_a_column_beyond_a_symbolic_width_is_a_data_error():
    text = COLUMN_KERNELS.replace("matrix[N, 3] X; vector[N] y;", "int D; matrix[N, D] X; vector[N] y;")
    model, _ = check_text(text)
    rng = np.random.default_rng(13)
    jm = lower(model, {"N": 4, "D": 2, "X": rng.normal(size=(4, 2)), "y": rng.normal(size=4)})
    with pytest.raises(DataError, match=r"rbf selects columns 2:3 of an input with 2 column\(s\)"):
        jm.log_density(jnp.zeros(jm.dim))


def test_a_polynomial_degree_stays_a_constant_under_jit():
    model, _ = check_text("""
data { int N; matrix[N, 2] X; vector[N] y; }
parameters { vector<lower=0>[2] v ~ gamma(2, 2); real<lower=0> noise ~ half_normal(1); }
model {
  f ~ gp(X, polynomial(v, 0.5, 1 + 2));
  y ~ normal(f, noise);
}
""")
    rng = np.random.default_rng(12)
    X = rng.normal(size=(6, 2))
    jm = lower(model, {"N": 6, "X": X, "y": rng.normal(size=6)})
    z = jnp.asarray(rng.normal(size=jm.dim))

    @jax.jit
    def covariance(z):
        return jm.gp_covariance(model.statements[-2], jm.environment(jm.constrain_free(z)[0]))

    v = np.asarray(jm.environment(jm.constrain_free(z)[0])["v"])
    np.testing.assert_allclose(covariance(z), ((X * v) @ X.T + 0.5) ** 3 + GP_JITTER * np.eye(6), rtol=1e-12)
    assert np.isfinite(float(jax.jit(jax.grad(jm.log_density))(z)[0]))
