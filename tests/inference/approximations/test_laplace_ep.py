"""Laplace and EP approximations: GPy agreement, exact small cases, q's density, jit and vmap."""

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from gpdsl.api import check_file
from gpdsl.errors import MethodError
from gpdsl.inference.approximations.ep import ep, ep_for
from gpdsl.inference.approximations.gaussian import (
    log_density,
    posterior_mean_cov,
    predict,
    predict_latent,
    sample,
    sample_with_log_density,
)
from gpdsl.inference.approximations.laplace import laplace, laplace_for
from gpdsl.inference.families.latent_gp import latent_gp
from gpdsl.likelihoods import LIKELIHOODS

SIGMA, TAU = 2.0, 0.4
TIGHT = {"tol": 1e-20, "max_iter": 500}
TIGHT_EP = {"tol": 1e-24, "max_sweeps": 1000}


def rbf(A, B, sigma=SIGMA, tau=TAU):
    return sigma * np.exp(-0.5 * ((A[:, None] - B[None]) ** 2).sum(-1) / tau**2)


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(1)
    n = 30
    X = rng.uniform(size=(n, 2))
    K = rbf(X, X)
    f = np.linalg.cholesky(K + 1e-8 * np.eye(n)) @ rng.normal(size=n)
    y = (rng.uniform(size=n) < stats.norm.cdf(f)).astype(int)
    X_test = rng.uniform(size=(7, 2))
    return X, y, K, X_test


def gpy_model(X, y, inference):
    GPy = pytest.importorskip("GPy")
    kernel = GPy.kern.RBF(X.shape[1], variance=SIGMA, lengthscale=TAU)
    model = GPy.models.GPClassification(X, y[:, None].astype(float), kernel=kernel,
                                        likelihood=GPy.likelihoods.Bernoulli(), inference_method=inference)
    return model


def test_laplace_probit_matches_gpy(data):
    """gpdsl's Laplace (probit) against GPy's own Laplace, an independent implementation, to 1e-6.

    GPy's Newton loop (``Laplace.rasm_mode``) line-searches every step with ``scipy.optimize.brent``
    and stops once the objective changes by less than ``_mode_finding_tolerance``. A tolerance below
    the objective's rounding (about 4e-15 here) is never met by real progress: the loop goes on at
    the mode, where the line-search objective is flat to the last bit, until ``brent``'s default
    bracket search sees f(0) == f(1) == f(2.618). SciPy < 1.11 returned that invalid bracket silently
    (and the tie ended the loop); since SciPy 1.11 (scipy/scipy#17704, for gh-14858) ``bracket``
    raises ``BracketError``. Whether the tie happens depends on BLAS rounding (one thread or several).
    So GPy keeps a tolerance that Newton meets while steps still change the objective well above
    rounding (its quadratic convergence goes 2.7, 4e-3, 8e-8 and then ~1e-15 on these data), and the
    test checks GPy's own mode condition K^-1 f = d log p(y|f)/df, with GPy's likelihood, to 1e-7, so
    the 1e-6 agreement is against a converged reference (brent's 1e-4 step tolerance leaves ~1e-8).
    """
    GPy = pytest.importorskip("GPy")
    X, y, K, X_test = data
    inference = GPy.inference.latent_function_inference.Laplace()
    inference._mode_finding_tolerance = 1e-6  # GPy's default is 1e-4; see the docstring for why not 1e-15
    inference._mode_finding_max_iter = 200
    model = gpy_model(X, y, inference)
    K_inv_f = model.posterior.woodbury_vector
    gpy_grad = model.likelihood.dlogpdf_df(model.kern.K(model.X) @ K_inv_f, model.Y)
    assert np.max(np.abs(K_inv_f - gpy_grad)) < 1e-7 * np.max(np.abs(gpy_grad)), "GPy's mode is not converged"
    approx = laplace(K, y, "bernoulli_probit", **TIGHT)
    assert bool(approx.converged)
    assert float(approx.log_marginal) == pytest.approx(model.log_likelihood(), rel=1e-6)
    probabilities = predict(approx, rbf(X, X_test), np.full(len(X_test), SIGMA), "bernoulli_probit")
    np.testing.assert_allclose(probabilities, model.predict(X_test)[0][:, 0], rtol=1e-6)
    mean, var = predict_latent(approx, rbf(X, X_test), np.full(len(X_test), SIGMA))
    gpy_mean, gpy_var = model.predict_noiseless(X_test)
    np.testing.assert_allclose(mean, gpy_mean[:, 0], rtol=1e-6)
    np.testing.assert_allclose(var, gpy_var[:, 0], rtol=1e-6)


def test_ep_matches_gpy(data):
    GPy = pytest.importorskip("GPy")
    X, y, K, X_test = data
    # GPy's EP is sequential by default (parallel_updates=False) but visits sites in a random order, starts
    # from Sigma = K + 1e-7 I and stops when the mean squared change of the sites is below epsilon (1e-6).
    # With epsilon tiny all of these converge to the same fixed point; ep_mode="nested" reruns EP on every
    # inference call rather than reusing the first run (irrelevant here: hyperparameters are fixed).
    np.random.seed(0)
    inference = GPy.inference.latent_function_inference.EP(epsilon=1e-20, max_iters=1000, ep_mode="nested")
    model = gpy_model(X, y, inference)
    approx = ep(K, y, **TIGHT_EP)
    assert bool(approx.converged)
    assert float(approx.log_marginal) == pytest.approx(model.log_likelihood(), rel=1e-6)
    probabilities = predict(approx, rbf(X, X_test), np.full(len(X_test), SIGMA))
    np.testing.assert_allclose(probabilities, model.predict(X_test)[0][:, 0], rtol=1e-6)


def test_logit_laplace_is_at_the_mode_with_the_dense_log_marginal(data):
    _, y, K, X_test = data
    K = K + 1e-6 * np.eye(len(y))
    approx = laplace(K, y, "bernoulli_logit", **TIGHT)
    f_hat = np.asarray(approx.mean)
    derivatives = LIKELIHOODS["bernoulli_logit"].derivatives
    log_lik, grad, W = (np.asarray(v) for v in derivatives(jnp.asarray(y, dtype=float), jnp.asarray(f_hat)))
    K_inv_f = np.linalg.solve(K, f_hat)
    assert np.max(np.abs(grad - K_inv_f)) < 1e-8 * np.max(np.abs(grad))
    _, log_det = np.linalg.slogdet(np.eye(len(y)) + K @ np.diag(W))
    assert float(approx.log_marginal) == pytest.approx(log_lik - 0.5 * f_hat @ K_inv_f - 0.5 * log_det, rel=1e-8)
    probabilities = np.asarray(predict(approx, K[:, :3], np.diag(K)[:3], "bernoulli_logit"))
    mean, var = predict_latent(approx, K[:, :3], np.diag(K)[:3])
    draws = np.asarray(mean)[:, None] + np.sqrt(np.asarray(var))[:, None] * np.random.default_rng(0).normal(
        size=(3, 200_000))
    np.testing.assert_allclose(probabilities, (1 / (1 + np.exp(-draws))).mean(1), atol=5e-3)


def exact_log_marginal(K, y):
    """log p(y) for probit, by Gauss-Hermite quadrature over f ~ N(0, K) (n = 1 or 2)."""
    nodes, weights = np.polynomial.hermite.hermgauss(120)
    signs = 2.0 * np.asarray(y) - 1.0
    chol = np.linalg.cholesky(K)
    grids = np.meshgrid(*[nodes] * len(y), indexing="ij")
    z = np.sqrt(2.0) * np.stack([g.ravel() for g in grids])
    w = np.prod(np.stack([g.ravel() for g in np.meshgrid(*[weights] * len(y), indexing="ij")]), 0)
    f = chol @ z
    likelihood = np.prod(stats.norm.cdf(signs[:, None] * f), axis=0)
    return np.log(np.sum(w * likelihood) / np.pi ** (len(y) / 2))


@pytest.mark.parametrize("K, y", [
    (np.array([[1.5]]), [1]),
    (np.array([[2.0, 1.4], [1.4, 2.0]]), [1, 0]),
    (np.array([[3.0, 2.5], [2.5, 3.0]]), [1, 1]),
])
def test_small_cases_against_quadrature(K, y):
    exact = exact_log_marginal(K, y)
    if len(y) == 2:
        signs = 2.0 * np.array(y) - 1.0
        orthant = stats.multivariate_normal(np.zeros(2), np.outer(signs, signs) * K + np.eye(2)).cdf(np.zeros(2))
        assert exact == pytest.approx(np.log(orthant), abs=1e-4)
    assert float(ep(K, np.array(y), **TIGHT_EP).log_marginal) == pytest.approx(exact, abs=1e-2)
    laplace_value = float(laplace(K, np.array(y), **TIGHT).log_marginal)
    assert np.isfinite(laplace_value) and abs(laplace_value - exact) < 0.5


@pytest.mark.parametrize("method", ["laplace", "ep"])
def test_density_and_draws_of_q(data, method):
    _, y, K, _ = data
    K = K + 1e-6 * np.eye(len(y))
    approx = laplace(K, y) if method == "laplace" else ep(K, y)
    mean, cov = (np.asarray(v) for v in posterior_mean_cov(approx, K))
    reference = stats.multivariate_normal(mean, cov)
    points = reference.rvs(size=3, random_state=0)
    np.testing.assert_allclose(log_density(approx, K, points), reference.logpdf(points), rtol=1e-8)
    assert float(log_density(approx, K, points[0])) == pytest.approx(reference.logpdf(points[0]), rel=1e-8)
    draws, log_q = sample_with_log_density(approx, K, jax.random.PRNGKey(0), 20_000)
    np.testing.assert_allclose(log_q, reference.logpdf(np.asarray(draws)), rtol=1e-8)
    scale = np.sqrt(np.diag(cov))
    assert np.max(np.abs(np.asarray(draws).mean(0) - mean) / scale) < 0.05
    np.testing.assert_allclose(np.cov(np.asarray(draws).T), cov, atol=0.05 * np.max(np.diag(cov)))
    assert sample(approx, K, jax.random.PRNGKey(1), 4).shape == (4, len(y))


def test_convergence_flag_and_cost_counts(data):
    _, y, K, _ = data
    approx = laplace(K, y)
    assert bool(approx.converged) and int(approx.cubic_ops) == int(approx.iterations) >= 2
    capped = laplace(K, y, tol=1e-30, max_iter=2)
    assert not bool(capped.converged) and int(capped.iterations) == 2
    approx = ep(K, y)
    assert bool(approx.converged) and int(approx.cubic_ops) == 5 * int(approx.iterations)
    capped = ep(K, y, tol=1e-30, max_sweeps=1)
    assert not bool(capped.converged) and int(capped.cubic_ops) == 5
    approx = ep(K, y, schedule="parallel")
    assert bool(approx.converged) and int(approx.cubic_ops) == 2 * int(approx.iterations) - 1
    capped = ep(K, y, tol=1e-30, max_sweeps=1, schedule="parallel")
    assert not bool(capped.converged) and int(capped.iterations) == 1 and int(capped.cubic_ops) == 1
    with pytest.raises(MethodError, match="at least one sweep"):
        ep(K, y, max_sweeps=0)


@pytest.mark.parametrize("damping", [0.5, 1.0])
def test_parallel_ep_reaches_the_sequential_fixed_point(data, damping):
    X, y, K, X_test = data
    sequential = ep(K, y, **TIGHT_EP)
    parallel = ep(K, y, schedule="parallel", damping=damping, **TIGHT_EP)
    assert bool(parallel.converged)
    assert float(parallel.log_marginal) == pytest.approx(float(sequential.log_marginal), rel=1e-10)
    for field in ("mean", "alpha", "site_precision", "site_location"):
        np.testing.assert_allclose(getattr(parallel, field), getattr(sequential, field), rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(predict(parallel, rbf(X, X_test), np.full(len(X_test), SIGMA)),
                               predict(sequential, rbf(X, X_test), np.full(len(X_test), SIGMA)), rtol=1e-9)


def test_jit_and_vmap_over_covariances(data):
    _, y, K, _ = data
    scales = jnp.asarray([0.5, 1.0, 3.0])
    batch = scales[:, None, None] * jnp.asarray(K)
    for method in (partial(laplace, likelihood="bernoulli_logit"), ep, partial(ep, schedule="parallel")):
        single = [method(K_i, y) for K_i in batch]
        batched = jax.jit(jax.vmap(lambda K_i: method(K_i, y)))(batch)
        np.testing.assert_allclose(batched.log_marginal, [a.log_marginal for a in single], rtol=1e-10)
        np.testing.assert_allclose(batched.mean, np.stack([a.mean for a in single]), rtol=1e-8, atol=1e-10)
        np.testing.assert_array_equal(batched.iterations, [a.iterations for a in single])

        def draw(approx, K_i, key):
            return sample_with_log_density(approx, K_i + 1e-6 * jnp.eye(len(y)), key, 5)[1]

        keys = jax.random.split(jax.random.PRNGKey(0), 3)
        assert np.all(np.isfinite(jax.jit(jax.vmap(draw))(batched, batch, keys)))


def test_helpers_on_a_latent_gp():
    model, _ = check_file("models/gp_classification.gpm")
    rng = np.random.default_rng(3)
    X, y = rng.uniform(size=(12, 2)), rng.integers(0, 2, 12)
    problem = latent_gp(model, {"N": 12, "D": 2, "X": X, "y": y})
    theta = jnp.asarray([0.5, -0.5, -0.3])
    K = problem.covariance(theta)
    assert float(laplace_for(problem, theta, tol=1e-12).log_marginal) == pytest.approx(
        float(laplace(K, y, tol=1e-12).log_marginal), rel=1e-12)
    assert float(jax.jit(lambda t: ep_for(problem, t).log_marginal)(theta)) == pytest.approx(
        float(ep(K, y).log_marginal), rel=1e-12)
    problem.likelihood = "bernoulli_logit"  # EP by quadrature tilted moments
    assert float(ep_for(problem, theta, tol=1e-12).log_marginal) == pytest.approx(
        float(ep(K, y, likelihood="bernoulli_logit", tol=1e-12).log_marginal), rel=1e-12)
    assert np.isfinite(float(laplace_for(problem, theta).log_marginal))
    problem.likelihood = "normal"
    with pytest.raises(MethodError, match="Laplace approximation supports"):
        laplace_for(problem, theta)


def test_an_offset_shifts_the_likelihood_not_the_prior():
    """With ``offset``, Laplace's mode of ``f`` maximises ``log p(y | f + o) - f^T K^-1 f / 2`` (checked by its
    stationarity), and one EP site is exact: ``p(y) = Phi(s o / sqrt(1 + k))`` for probit."""
    rng = np.random.default_rng(3)
    n = 8
    x = np.linspace(0, 3, n)
    K = 1.3 * np.exp(-0.5 * (x[:, None] - x[None, :]) ** 2) + 1e-6 * np.eye(n)
    offset = rng.normal(0, 1, n)
    y = rng.poisson(np.exp(offset + np.sin(x)))
    approx = laplace(K, y, "poisson_log", offset=offset, **TIGHT)
    f_hat = np.asarray(approx.mean)
    _, grad, _ = LIKELIHOODS["poisson_log"].derivatives(jnp.asarray(y, dtype=float), jnp.asarray(f_hat + offset))
    np.testing.assert_allclose(np.asarray(grad), np.linalg.solve(K, f_hat), atol=1e-8 * np.max(np.abs(grad)))
    unshifted = laplace(K, y, "poisson_log", **TIGHT)
    assert np.max(np.abs(np.asarray(unshifted.mean) - f_hat)) > 0.1
    for label, o in [(1, 0.7), (0, 0.7), (1, -1.2)]:
        value = float(ep(np.array([[1.5]]), np.array([label]), offset=np.array([o]), **TIGHT_EP).log_marginal)
        assert value == pytest.approx(stats.norm.logcdf((2 * label - 1) * o / np.sqrt(2.5)), abs=1e-10)


OFFSET_MODEL = """
data { int N; vector[N] x; vector[N] log_exposure; array[N] int<lower=0> y; }
parameters { real<lower=0> s ~ lognormal(0, 1); real<lower=0> ell ~ lognormal(0, 1); real mu ~ normal(0, 2); }
latent { vector[N] f; }
model {
  f ~ gp(x, s * rbf(ell));
  y ~ poisson_log(LOCATION);
}
"""


def test_a_latent_gp_takes_its_offset_from_the_likelihood_location():
    from gpdsl.api import check_text
    from gpdsl.data.io import load_data

    model = check_text(OFFSET_MODEL.replace("LOCATION", "log_exposure + mu + f"))[0]
    data, _ = load_data({"N": 3, "x": [0.0, 1.0, 2.0], "log_exposure": [0.1, -0.2, 0.3], "y": [1, 0, 2]}, model)
    problem = latent_gp(model, data)
    theta = jnp.zeros(problem.theta_dim)
    mu = float(problem.theta_values(theta)["mu"])
    np.testing.assert_allclose(np.asarray(problem.location_offset(theta)), np.array([0.1, -0.2, 0.3]) + mu)
    assert laplace_for(problem, theta).converged
    mirrored = check_text(OFFSET_MODEL.replace("LOCATION", "log_exposure - f"))[0]
    with pytest.raises(MethodError, match="plus terms free of it"):
        laplace_for(latent_gp(mirrored, load_data(dict(data), mirrored)[0]), theta)


def test_predictions_at_new_inputs_take_a_shared_offset_and_leave_out_a_per_observation_one():
    from gpdsl.api import check_text
    from gpdsl.data.io import load_data
    from gpdsl.inference.predict.draws import latent_new_draws
    from gpdsl.inference.predict.latent_gp import approximate_moments

    source = """
data { int N; vector[N] x; vector[N] z; array[N] int<lower=0, upper=1> y; }
parameters { real<lower=0> s ~ lognormal(0, 1); real mu ~ normal(0, 1); }
latent { vector[N] f; }
model { f ~ gp(x, s * rbf(1.0)); y ~ bernoulli_probit(LOCATION); }
"""
    values = {"N": 4, "x": [0.0, 1.0, 2.0, 3.0], "z": [0.1, 0.2, -0.1, 0.0], "y": [1, 0, 1, 1]}
    theta_draws = np.array([[[0.1, 0.8], [-0.2, -0.5]]])
    X_new = np.array([[0.5], [2.5]])
    shared = check_text(source.replace("LOCATION", "mu + f"))[0]
    problem = latent_gp(shared, load_data(values, shared)[0])
    draws = latent_new_draws(problem, theta_draws, None, X_new, jax.random.PRNGKey(0))
    for d in range(2):
        theta = jnp.asarray(theta_draws[0, d])
        mean, var = approximate_moments(problem, theta, X_new)
        mu = float(problem.theta_values(theta)["mu"])
        np.testing.assert_allclose(draws["y_prob"][0, d], stats.norm.cdf((np.asarray(mean) + mu) / np.sqrt(1 + var)),
                                   rtol=1e-10)
    own = check_text(source.replace("LOCATION", "z + f"))[0]
    draws = latent_new_draws(latent_gp(own, load_data(values, own)[0]), theta_draws, None, X_new,
                             jax.random.PRNGKey(0))
    assert set(draws) == {"f_new"}
