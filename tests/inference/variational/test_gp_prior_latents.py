"""GP-prior latents (dynamical and supervised GPLVMs): q(X) in the Opper-Archambeau form, its KL and bound,
the E-step alone, and `gpdsl fit` on both model files."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.flatten_util import ravel_pytree
from scipy.optimize import minimize

from gpdsl.api import load_model, run
from gpdsl.data.io import load_data
from gpdsl.inference.families.gplvm import gplvm_problem
from gpdsl.inference.methods.vem import VEMSettings, fit_from_results
from gpdsl.inference.optimise import traced_lbfgs
from gpdsl.inference.variational.collapsed_bound import collapsed_bound
from gpdsl.inference.variational.e_step import e_step
from gpdsl.inference.variational.gp_prior_q import (
    GPPriorGaussian,
    GPPriorQParams,
    calibrated_precision,
)
from gpdsl.inference.variational.latent_q import FactorisedGaussian, GaussianQParams
from gpdsl.inference.variational.vem import (
    VariationalParams,
    initial_points,
    make_objective,
)
from gpdsl.kernels.psi import psi_statistics
from gpdsl.numerics import GP_JITTER
from gpdsl.results.io import read_netcdf

MODELS = "models"


def rbf_gram(t, lengthscale, jitter=1e-6):
    K = np.exp(-0.5 * (t[:, None] - t[None, :]) ** 2 / lengthscale ** 2)
    return K + jitter * np.eye(len(t))


def dense_kl(mean, S, K):
    """KL(N(mean, S) || N(0, K)) for one latent dimension, by dense inverses and determinants."""
    Kinv = np.linalg.inv(K)
    N = len(mean)
    return 0.5 * (np.trace(Kinv @ S) + mean @ Kinv @ mean + np.linalg.slogdet(K)[1] - np.linalg.slogdet(S)[1] - N)


def dense_moments(K, mu_bar, lam):
    """Means and full covariances of q by the definition S = (K^-1 + diag(lam))^-1, mu = K mu_bar."""
    covariances = [np.linalg.inv(np.linalg.inv(K) + np.diag(lam[:, q])) for q in range(lam.shape[1])]
    return K @ mu_bar, covariances


def simulated(kind, N=30, D=4, Q=2, noise_sd=0.1, seed=1):
    """Latent inputs drawn from their GP prior over t (or an observed input), outputs from a GP over them."""
    rng = np.random.default_rng(seed)
    t = np.linspace(0.0, 1.0, N)
    X = np.linalg.cholesky(rbf_gram(t, 0.25, 1e-8)) @ rng.normal(size=(N, Q))
    Kx = np.exp(-0.5 * ((X[:, None] - X[None]) ** 2).sum(-1)) + 1e-8 * np.eye(N)
    Y = np.linalg.cholesky(Kx) @ rng.normal(size=(N, D)) + noise_sd * rng.normal(size=(N, D))
    if kind == "dynamical":
        return {"N": N, "D": D, "Q": Q, "t": t, "Y": Y}
    return {"N": N, "D": D, "Q": Q, "X": t[:, None], "Y": Y}


def problem_of(kind, **options):
    model = load_model(f"{MODELS}/{kind}_gplvm.gpm")
    data, _ = load_data(simulated(kind, **options), model)
    return model, gplvm_problem(model, data)


# ---- q(X) under a GP prior -------------------------------------------------------------------------
def test_moments_and_kl_equal_the_dense_computation():
    rng = np.random.default_rng(0)
    N, Q = 9, 2
    K = rbf_gram(np.sort(rng.uniform(0, 3, N)), 0.8)
    mu_bar, lam = rng.normal(size=(N, Q)), rng.uniform(0.01, 5.0, size=(N, Q))
    q = GPPriorGaussian(lambda theta: jnp.asarray(K))
    params = GPPriorQParams(jnp.asarray(mu_bar), jnp.asarray(lam))
    moments = q.moments(params, None)
    mean, covariances = dense_moments(K, mu_bar, lam)
    np.testing.assert_allclose(moments.mean, mean, rtol=1e-10)
    np.testing.assert_allclose(moments.variance, np.column_stack([np.diag(S) for S in covariances]), rtol=1e-8)
    expected = sum(dense_kl(mean[:, j], covariances[j], K) for j in range(Q))
    assert abs(float(q.kl(params, None)) - expected) < 1e-8 * abs(expected)
    coordinates = q.unconstrain(params)
    assert abs(float(q.unconstrained_kl(coordinates, None, q.unconstrained_moments(coordinates, None)))
               - expected) < 1e-8 * abs(expected)


def test_bound_equals_dense_data_term_minus_dense_kl():
    model, problem = problem_of("dynamical", N=12)
    rng = np.random.default_rng(2)
    N, Q = problem.num_points, problem.latent_dim
    theta = problem.unconstrain_theta({"ell": 0.3, "s2": 1.2, "w": np.array([0.7, 1.4]), "noise": 0.05})
    mu_bar, lam = rng.normal(size=(N, Q)), rng.uniform(0.1, 3.0, size=(N, Q))
    Z = rng.normal(size=(5, Q))
    ours = float(make_objective(problem, VEMSettings())(
        VariationalParams(GPPriorQParams(jnp.asarray(mu_bar), jnp.asarray(lam)), jnp.asarray(Z), theta)))
    K = np.asarray(problem.latent_prior_covariance(theta))
    mean, covariances = dense_moments(K, mu_bar, lam)
    variance = np.column_stack([np.diag(S) for S in covariances])
    kernel = problem.kernel(theta)
    stats = psi_statistics(kernel, jnp.asarray(Z), jnp.asarray(mean), jnp.asarray(variance))
    Kmm = np.asarray(kernel(jnp.asarray(Z))) + GP_JITTER * np.eye(5)
    data_term = float(collapsed_bound(problem.Y, stats.psi0, stats.psi1, stats.psi2, Kmm,
                                      problem.noise_variance(theta)))
    expected = (data_term - sum(dense_kl(mean[:, j], covariances[j], K) for j in range(Q))
                + float(problem.log_hyperprior(theta)))
    assert abs(ours - expected) < 1e-8 * abs(expected)


def test_with_an_identity_prior_covariance_the_kl_is_the_bayesian_gplvm_kl():
    rng = np.random.default_rng(4)
    N, Q = 10, 3
    mean, variance = rng.normal(size=(N, Q)), rng.uniform(0.05, 0.95, size=(N, Q))
    dynamical = GPPriorGaussian(lambda theta: jnp.eye(N))
    params = GPPriorQParams(jnp.asarray(mean), jnp.asarray(1.0 / variance - 1.0))  # K = I: S = 1 / (1 + lam)
    moments = dynamical.moments(params, None)
    np.testing.assert_allclose(moments.mean, mean, rtol=1e-14)
    np.testing.assert_allclose(moments.variance, variance, rtol=1e-12)
    standard = FactorisedGaussian().kl(GaussianQParams(jnp.asarray(mean), jnp.log(jnp.asarray(variance))), None)
    assert abs(float(dynamical.kl(params, None)) - float(standard)) < 1e-12 * abs(float(standard))


def test_with_a_white_noise_time_kernel_the_dynamical_bound_is_the_bayesian_gplvm_bound():
    white = load_model(f"{MODELS}/dynamical_gplvm.gpm").source.text.replace(
        "X ~ gp(t, rbf(lengthscale = ell) + white(1e-6));", "X ~ gp(t, white(1));")
    white = load_model(white.replace("real<lower=0> ell ~ gamma(2, 0.5);", ""))
    standard = load_model(f"{MODELS}/bayesian_gplvm_priors.gpm")
    values = simulated("dynamical", N=15)
    dynamical_problem = gplvm_problem(white, load_data(values, white)[0])
    standard_problem = gplvm_problem(standard, load_data({k: v for k, v in values.items() if k != "t"}, standard)[0])
    assert standard_problem.theta_names == dynamical_problem.theta_names == ["s2", "w", "noise"]
    rng = np.random.default_rng(5)
    theta = standard_problem.unconstrain_theta({"s2": 1.1, "w": np.array([0.6, 1.5]), "noise": 0.04})
    mean, variance = rng.normal(size=(15, 2)), rng.uniform(0.05, 0.9, size=(15, 2))
    Z = jnp.asarray(rng.normal(size=(6, 2)))
    c = 1.0 + GP_JITTER  # the prior covariance is c I: lambda = 1/variance - 1/c and mu_bar = mean / c give (mean, variance)
    ours = make_objective(dynamical_problem, VEMSettings())(
        VariationalParams(GPPriorQParams(jnp.asarray(mean / c), jnp.asarray(1.0 / variance - 1.0 / c)), Z, theta))
    reference = make_objective(standard_problem, VEMSettings())(
        VariationalParams(jnp.asarray(mean), jnp.log(jnp.asarray(variance)), Z, theta))
    # they differ only by the jitter in the prior: KL terms 0.5 (S/c + m^2/c + log c) against 0.5 (S + m^2)
    jitter_effect = 0.5 * np.sum(-(variance + mean ** 2) * GP_JITTER + GP_JITTER)
    assert abs(float(ours) - float(reference) + jitter_effect) < 1e-9 * abs(float(reference))


def test_autodiff_gradients_equal_the_papers_appendix_c_gradients():
    rng = np.random.default_rng(6)
    N = 8
    K = rbf_gram(np.sort(rng.uniform(0, 2, N)), 0.7)
    q = GPPriorGaussian(lambda theta: jnp.asarray(K))
    a, b = rng.normal(size=(N, 1)), rng.uniform(0.5, 2.0, size=(N, 1))

    def data_term(mean, variance):  # any smooth F-hat of the marginals
        return jnp.sum(a * jnp.sin(mean)) - jnp.sum(b * variance ** 2)

    def bound(mu_bar, lam):
        params = GPPriorQParams(mu_bar, lam)
        moments = q.moments(params, None)
        return data_term(moments.mean, moments.variance) - q.kl(params, None, moments)

    mu_bar, lam = jnp.asarray(rng.normal(size=(N, 1))), jnp.asarray(rng.uniform(0.2, 2.0, size=(N, 1)))
    d_mu_bar, d_lam = jax.grad(bound, argnums=(0, 1))(mu_bar, lam)
    mean, (S,) = dense_moments(K, np.asarray(mu_bar), np.asarray(lam))
    d_mean, d_variance = jax.grad(data_term, argnums=(0, 1))(jnp.asarray(mean), jnp.asarray(np.diag(S)[:, None]))
    np.testing.assert_allclose(d_mu_bar, K @ (np.asarray(d_mean) - np.asarray(mu_bar)), rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(d_lam, -(S * S) @ (np.asarray(d_variance) + 0.5 * np.asarray(lam)),
                               rtol=1e-7, atol=1e-10)


def test_opper_archambeau_optimum_equals_the_full_covariance_optimum():
    """The data term sees only the marginals, so the best Gaussian q has the (mu_bar, lambda) form."""
    model, problem = problem_of("dynamical", N=8, D=3, Q=1, noise_sd=0.2)
    theta = problem.unconstrain_theta({"ell": 0.3, "s2": 1.0, "w": np.array([1.0]), "noise": 0.05})
    Z = jnp.asarray(np.linspace(-1.5, 1.5, 4)[:, None])
    K = problem.latent_prior_covariance(theta)
    kernel, noise = problem.kernel(theta), problem.noise_variance(theta)
    Kmm = kernel(Z) + GP_JITTER * jnp.eye(4)
    Y = jnp.asarray(problem.Y)
    N = problem.num_points
    tril = np.tril_indices(N)

    def data_term(mean, variance):
        stats = psi_statistics(kernel, Z, mean, variance)
        return collapsed_bound(Y, stats.psi0, stats.psi1, stats.psi2, Kmm, noise)

    def full_covariance(x):
        mean, entries = x[:N], x[N:]
        L = jnp.zeros((N, N)).at[tril].set(entries)
        L = L - jnp.diag(jnp.diag(L)) + jnp.diag(jnp.exp(jnp.diag(L)))
        S = L @ L.T
        chol_k = jnp.linalg.cholesky(K)
        whitened = jax.scipy.linalg.solve_triangular(chol_k, L, lower=True)
        m = jax.scipy.linalg.solve_triangular(chol_k, mean, lower=True)
        kl = 0.5 * (jnp.sum(whitened ** 2) + m @ m - N + 2 * jnp.sum(jnp.log(jnp.diag(chol_k)))
                    - 2 * jnp.sum(jnp.log(jnp.diag(L))))
        return data_term(mean[:, None], jnp.diag(S)[:, None]) - kl

    q = GPPriorGaussian(lambda theta: K)

    def opper_archambeau(x):
        params = GPPriorQParams(x[:N, None], jnp.exp(x[N:, None]))
        moments = q.moments(params, None)
        return data_term(moments.mean, moments.variance) - q.kl(params, None, moments)

    def maximise(f, x0):
        value_and_grad = jax.jit(jax.value_and_grad(lambda x: -f(x)))
        result = minimize(lambda x: tuple(np.asarray(v) for v in value_and_grad(x)), x0, jac=True,
                          method="L-BFGS-B", options={"maxiter": 20000, "gtol": 1e-10, "ftol": 1e-15})
        return -result.fun, result.x

    diagonal = np.zeros(len(tril[0]))
    diagonal[tril[0] == tril[1]] = np.log(0.3)
    full_value, full_x = maximise(full_covariance, np.concatenate([np.zeros(N), diagonal]))
    oa_value, oa_x = maximise(opper_archambeau, np.concatenate([np.zeros(N), np.zeros(N)]))
    assert abs(full_value - oa_value) < 1e-7 * abs(full_value)
    oa_moments = q.moments(GPPriorQParams(oa_x[:N, None], np.exp(oa_x[N:, None])), None)
    sign = np.sign(oa_moments.mean[:, 0] @ full_x[:N])  # both start at the symmetric point x = 0: either mirror image
    np.testing.assert_allclose(sign * oa_moments.mean[:, 0], full_x[:N], atol=1e-4)
    L = np.zeros((N, N))
    L[tril] = full_x[N:]
    L = L - np.diag(np.diag(L)) + np.diag(np.exp(np.diag(L)))
    np.testing.assert_allclose(oa_moments.variance[:, 0], np.diag(L @ L.T), rtol=1e-4)


def test_initial_precision_gives_the_asked_median_variance():
    K = rbf_gram(np.linspace(0, 10, 50), 1.0)
    lam = float(calibrated_precision(jnp.asarray(K), 0.18))
    variance = np.diag(np.linalg.inv(np.linalg.inv(K) + lam * np.eye(50)))
    assert abs(np.median(variance) - 0.18) < 1e-9


# ---- the fit and the E-step alone ----------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["dynamical", "supervised"])
def test_gpdsl_fit_runs_gp_prior_gplvms_and_results_rebuild_the_fit(kind, tmp_path):
    model = load_model(f"{MODELS}/{kind}_gplvm.gpm")
    out = tmp_path / "fit.nc"
    results, fit = run(model, simulated(kind), "vem", VEMSettings(num_inducing=10, max_iterations=300), seed=3,
                       out=out, keep_state=True)
    assert isinstance(fit.latent_q, GPPriorGaussian)
    assert fit.trace[-1] > fit.trace[0] + 10
    rebuilt_model, rebuilt = fit_from_results(read_netcdf(out))
    # a small bound made of large cancelling terms, evaluated by two compiled programs: rounding, not relative
    assert float(make_objective(rebuilt.problem, rebuilt.settings)(rebuilt.params)) == pytest.approx(fit.bound,
                                                                                                  abs=1e-7)
    np.testing.assert_allclose(rebuilt.mean, fit.mean, rtol=1e-12)
    latent = fit.problem.latent
    assert results.posterior[f"{latent}_lambda"].dims[-2:] == results.posterior[latent].dims[-2:]


@pytest.mark.parametrize("psi", ["unscented", "gauss_hermite", "monte_carlo"])
def test_every_psi_method_fits_the_dynamical_gplvm_near_the_analytic_fit(psi):
    model, problem = problem_of("dynamical", N=25, D=3)
    from gpdsl.inference.variational.vem import fit_vem

    analytic = fit_vem(problem, VEMSettings(num_inducing=8, max_iterations=150))
    other = fit_vem(problem, VEMSettings(num_inducing=8, max_iterations=150, psi=psi, gh_nodes=10, mc_samples=200))
    assert other.report["iterations"] > 20
    # both objectives bound the same evidence: the quadrature fit must land near the analytic one
    assert abs(other.bound - analytic.bound) < 0.05 * abs(analytic.bound) + 5.0


def test_e_step_is_deterministic_vectorised_and_improves_the_bound():
    model, problem = problem_of("supervised", N=20, D=3, Q=1, noise_sd=0.3)
    settings = VEMSettings(num_inducing=4)
    base = problem.unconstrain_theta({"s1": 1.0, "theta": np.array([1.0]), "theta_S": 1.0, "noise": 0.1})
    thetas = jnp.stack([base, base + 0.2, base - 0.3])
    batch = e_step(problem, settings, thetas, max_iterations=3000)
    assert batch.bound.shape == (3,) and batch.inducing.shape == (3, 4, 1)
    assert bool(jnp.all(batch.converged))
    q = problem.latent_q()
    mean, inducing = initial_points(problem, settings)
    objective = make_objective(problem, settings)
    for k in range(3):
        single = e_step(problem, settings, thetas[k], max_iterations=3000)
        # vmap changes the floating-point path of a slowly converging optimisation: close, not equal
        assert float(single.bound) == pytest.approx(float(batch.bound[k]), rel=1e-3)
        start = VariationalParams(q.initial(mean, thetas[k]), jnp.asarray(inducing), thetas[k])
        assert float(single.bound) > float(objective(start) - problem.log_hyperprior(thetas[k])) + 1.0
        optimum = VariationalParams(single.latent, single.inducing, thetas[k])
        assert float(objective(optimum) - problem.log_hyperprior(thetas[k])) == pytest.approx(float(single.bound),
                                                                                           rel=1e-12)
    again = e_step(problem, settings, thetas, max_iterations=3000)
    assert np.array_equal(np.asarray(again.bound), np.asarray(batch.bound))


def test_traced_lbfgs_minimises_the_rosenbrock_function_under_vmap():
    def rosenbrock(x):
        return jnp.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2)

    starts = jnp.asarray(np.random.default_rng(0).normal(size=(4, 5)))
    result = jax.jit(jax.vmap(lambda x0: traced_lbfgs.minimize(rosenbrock, x0, max_iterations=2000, gtol=1e-9)))(starts)
    np.testing.assert_allclose(result.x, 1.0, atol=1e-6)
    assert bool(jnp.all(result.converged))
    flat, _ = ravel_pytree(result.x)
    assert np.all(np.isfinite(np.asarray(flat)))
