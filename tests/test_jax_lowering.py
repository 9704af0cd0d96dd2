"""The JAX lowering against direct computations: marginal likelihoods, parameterisations, bijectors."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from gpdsl.api import check_file, check_text
from gpdsl.backends.jax.lowering import lower
from gpdsl.errors import MethodError
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
