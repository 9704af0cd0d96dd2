"""q(X) under a Matérn time prior by state-space recursions (markov_q): the same family, moments, KL, bound and
fits as the dense GPPriorGaussian, for each Matérn order, with white noise, repeated times and sequences."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gpdsl.api import check_text, run
from gpdsl.data.io import load_data
from gpdsl.inference.families.gplvm import gplvm_problem
from gpdsl.settings import VEMSettings
from gpdsl.inference.predict.gp_prior_latents import forecast
from gpdsl.inference.variational.e_step import e_step
from gpdsl.inference.variational.gp_prior_q import GPPriorGaussian, GPPriorQParams
from gpdsl.inference.variational.markov_q import (
    MarkovGaussian,
    MarkovHyperparameters,
    transitions,
)
from gpdsl.inference.variational.site_updates import make_site_updates
from gpdsl.inference.variational.vem import fit_vem, initial_params, make_objective
from gpdsl.kernels.stationary import Matern12, Matern32, Matern52
from gpdsl.numerics import GP_JITTER

ORDERS = [(1, Matern12, "matern12"), (3, Matern32, "matern32"), (5, Matern52, "matern52")]


def orders_in_default_tier(name):
    """``ORDERS`` with every order but ``name`` in the slow tier (each costs 5-30 s of compilation)."""
    return [order if order[2] == name else pytest.param(*order, marks=pytest.mark.slow) for order in ORDERS]


TOL = 1e-8

MODEL = """
data {
  int N;
  int D;
  int Q;
  vector[N] t;
  array[N] int<lower=1> sequence;
  matrix[N, D] Y;
}
parameters {
  real<lower=0> ell ~ gamma(2, 2);
  real<lower=0> s2 ~ lognormal(0, 1);
  vector<lower=0>[Q] w ~ gamma(2, 2);
  real<lower=0> noise ~ inv_gamma(2, 0.1);
}
latent {
  matrix[N, Q] X;
}
model {
  X ~ gp(PRIOR_INPUTS, PRIOR_KERNEL);
  F ~ gp(X, rbf(variance = s2, inv_ls2 = w));
  Y ~ normal(F, sqrt(noise));
}
"""


def model_text(kernel="matern32(t, variance = 1.5, lengthscale = ell) * same(sequence) + white(1e-4)",
               inputs="(t, sequence)"):
    return MODEL.replace("PRIOR_INPUTS", inputs).replace("PRIOR_KERNEL", kernel)


def simulated(N=24, D=3, Q=2, sequences=2, seed=0, repeats=True):
    rng = np.random.default_rng(seed)
    t = np.round(rng.uniform(0, 2, N), 1 if repeats else 8)  # unsorted, with repeated times
    sequence = rng.integers(1, sequences + 1, N)
    X = np.stack([np.sin(3 * t + sequence), np.cos(2 * t)], axis=1)[:, :Q]
    Y = np.tanh(X @ rng.normal(size=(Q, D))) + 0.1 * rng.normal(size=(N, D))
    return {"N": N, "D": D, "Q": Q, "t": t, "sequence": sequence, "Y": Y}


def problem_of(text, values):
    model = check_text(text, "markov_test.gpm")[0]
    data, _ = load_data(values, model)
    return model, gplvm_problem(model, data)


def dense_of(problem):
    return GPPriorGaussian(problem.latent_prior_covariance, problem.latent_prior_blocks())


def random_params(rng, N, Q):
    return GPPriorQParams(jnp.asarray(rng.normal(size=(N, Q))), jnp.asarray(np.exp(2 * rng.normal(size=(N, Q)))))


# ---- the state-space form ----------------------------------------------------------------------------------
@pytest.mark.parametrize("two_nu,kernel,_", ORDERS)
def test_state_space_covariance_is_the_matern_kernel(two_nu, kernel, _):
    tau = np.array([0.0, 1e-3, 0.1, 0.5, 1.3, 4.0])
    A, Q, P_inf = transitions(two_nu, 1.7, 0.6, tau, np.zeros(tau.size, bool))
    k = kernel(variance=1.7, lengthscale=0.6)
    expected = [float(k.pair(jnp.array([0.0]), jnp.array([x]))) for x in tau]
    np.testing.assert_allclose((A @ P_inf)[:, 0, 0], expected, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(Q + A @ P_inf @ np.swapaxes(A, 1, 2), np.broadcast_to(P_inf, Q.shape), atol=1e-14)
    assert np.min(np.linalg.eigvalsh(np.asarray(Q))) > -1e-12


# ---- q(X) against the dense family -------------------------------------------------------------------------
def families(two_nu, kernel, method, white=1e-3, N=25, seed=0):
    rng = np.random.default_rng(seed)
    t = np.round(rng.uniform(0, 3, N), 1)  # unsorted and repeated
    g = rng.integers(0, 3, N)

    def hyperparameters(theta):
        return MarkovHyperparameters(jnp.exp(theta[0]), jnp.exp(theta[1]), jnp.asarray(white))

    def dense(theta):
        variance, lengthscale, _ = hyperparameters(theta)
        K = kernel(variance=variance, lengthscale=lengthscale)(jnp.asarray(t[:, None]))
        return K * (g[:, None] == g[None, :]) + (white + GP_JITTER) * jnp.eye(N)

    return GPPriorGaussian(dense), MarkovGaussian(dense, None, t, g, hyperparameters, two_nu, method)


@pytest.mark.parametrize("method", ["filters", pytest.param("blocked", marks=pytest.mark.slow),
                                    pytest.param("sequential", marks=pytest.mark.slow)])
@pytest.mark.parametrize("two_nu,kernel,_", orders_in_default_tier("matern32"))
def test_moments_kl_and_their_gradients_equal_the_dense_family(two_nu, kernel, _, method):
    dense, markov = families(two_nu, kernel, method)
    rng = np.random.default_rng(1)
    params, theta = random_params(rng, 25, 3), jnp.array([0.3, -0.4])
    expected, got = dense.moments(params, theta), markov.moments(params, theta)
    for a, b in zip(expected, got):
        np.testing.assert_allclose(b, a, rtol=TOL, atol=TOL)
    assert float(markov.kl(params, theta)) == pytest.approx(float(dense.kl(params, theta)), rel=TOL, abs=TOL)
    weights = rng.normal(size=(2, 25, 3))

    def objective(q):
        def f(params, theta):
            moments = q.moments(params, theta)
            return q.kl(params, theta, moments) + jnp.sum(weights[0] * moments.mean) + jnp.sum(
                weights[1] * moments.variance)
        return jax.grad(f, argnums=(0, 1))(params, theta)

    for a, b in zip(jax.tree_util.tree_leaves(objective(dense)), jax.tree_util.tree_leaves(objective(markov))):
        np.testing.assert_allclose(b, a, rtol=1e-7, atol=1e-7)


@pytest.mark.parametrize("two_nu,kernel,_", orders_in_default_tier("matern52"))
def test_the_hand_written_reverse_pass_equals_autodiff_through_the_element_scan(two_nu, kernel, _):
    # gradients in every input the family differentiates: sites, means, variance, length-scale and white noise
    rng = np.random.default_rng(4)
    t, g = np.round(rng.uniform(0, 3, 30), 1), rng.integers(0, 3, 30)

    def hyperparameters(theta):
        return MarkovHyperparameters(jnp.exp(theta[0]), jnp.exp(theta[1]), jnp.exp(theta[2]))

    params, theta = random_params(rng, 30, 2), jnp.array([0.2, -0.6, np.log(1e-3)])
    weights = rng.normal(size=(3, 30, 2))
    gradients = []
    for method in ("filters", "sequential"):
        q = MarkovGaussian(None, None, t, g, hyperparameters, two_nu, method)

        def f(params, theta):
            moments = q.moments(params, theta)
            return (q.kl(params, theta, moments) + jnp.sum(weights[0] * moments.mean ** 2)
                    + jnp.sum(weights[1] * jnp.sin(moments.variance)) + jnp.sum(weights[2] * moments.mean))

        gradients.append(jax.grad(f, argnums=(0, 1))(params, theta))
    for a, b in zip(jax.tree_util.tree_leaves(gradients[1]), jax.tree_util.tree_leaves(gradients[0])):
        np.testing.assert_allclose(b, a, rtol=1e-10, atol=1e-10)


@pytest.mark.slow
def test_parallel_scans_equal_the_sequential_scan():
    _, sequential = families(3, Matern32, "sequential", N=12)
    _, parallel = families(3, Matern32, "parallel", N=12)
    params, theta = random_params(np.random.default_rng(2), 12, 2), jnp.array([0.0, -1.0])
    for a, b in zip(sequential.moments(params, theta), parallel.moments(params, theta)):
        np.testing.assert_allclose(b, a, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("two_nu,kernel,_", orders_in_default_tier("matern12"))
def test_initial_sites_and_the_site_map_equal_the_dense_family(two_nu, kernel, _):
    dense, markov = families(two_nu, kernel, "blocked")
    rng = np.random.default_rng(3)
    theta, mean = jnp.array([0.1, -0.7]), rng.normal(size=(25, 2))
    expected, got = dense.initial(mean, theta), markov.initial(mean, theta)
    np.testing.assert_allclose(got.lam, expected.lam, rtol=1e-10)
    np.testing.assert_allclose(got.mu_bar, expected.mu_bar, rtol=TOL, atol=TOL)
    # sites (eta, lambda) -> mu_bar: the q with those sites has mean mu with eta = mu_bar + lambda mu
    params = random_params(rng, 25, 2)
    mu = dense.moments(params, theta).mean
    np.testing.assert_allclose(markov.mu_bar_from_sites(params.mu_bar + params.lam * mu, params.lam, theta),
                               params.mu_bar, rtol=1e-7, atol=1e-7)


# ---- the model view picks the family -----------------------------------------------------------------------
@pytest.mark.parametrize("kernel,markov", [
    ("matern32(t, variance = 1.5, lengthscale = ell) * same(sequence) + white(1e-4)", True),
    ("s2 * matern12(t, lengthscale = ell) + white(1e-6)", True),
    ("same(sequence) * matern52(t, lengthscale = ell)", True),
    ("rbf(t, lengthscale = ell) * same(sequence) + white(1e-6)", False),
    ("matern32(t, lengthscale = ell) + matern12(t, lengthscale = 0.3)", False),
    ("matern32(t, lengthscale = ell) * rbf(t, lengthscale = 2.0)", False),
    ("matern32(t, lengthscale = ell) + constant(0.5)", False),
    ("matern32(lengthscale = ell)", False),  # over both inputs
])
def test_latent_q_is_the_markov_family_exactly_for_matern_time_priors(kernel, markov):
    _, problem = problem_of(model_text(kernel), simulated())
    q = problem.latent_q()
    assert isinstance(q, GPPriorGaussian)
    assert isinstance(q, MarkovGaussian) == markov


def single_sequence_problem():
    values = simulated(sequences=1)
    del values["sequence"]
    text = model_text("matern32(lengthscale = ell) + white(1e-6)", "t").replace(
        "  array[N] int<lower=1> sequence;\n", "")
    return problem_of(text, values)[1]


def test_a_single_time_input_without_same_is_one_sequence():
    assert isinstance(single_sequence_problem().latent_q(), MarkovGaussian)


@pytest.mark.slow
def test_the_bound_of_a_single_time_input_equals_the_dense_familys():
    assert_bound_equals_dense(single_sequence_problem())


def assert_bound_equals_dense(problem, seed=0):
    settings = VEMSettings(num_inducing=6, seed=0)
    markov, dense = problem.latent_q(), dense_of(problem)
    params = initial_params(problem, settings, dense)
    rng = np.random.default_rng(seed)
    params = params._replace(latent=random_params(rng, problem.num_points, problem.latent_dim),
                             theta=params.theta + 0.1 * rng.normal(size=params.theta.shape))
    values = [jax.value_and_grad(make_objective(problem, settings, q))(params) for q in (dense, markov)]
    assert float(values[1][0]) == pytest.approx(float(values[0][0]), rel=TOL, abs=TOL)
    # gradients: 1e-6 (the dense Matérn's derivative at r = 0, repeated times, goes through safe_sqrt)
    for a, b in zip(jax.tree_util.tree_leaves(values[0][1]), jax.tree_util.tree_leaves(values[1][1])):
        np.testing.assert_allclose(b, a, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("name", ["matern32", pytest.param("matern12", marks=pytest.mark.slow),
                                  pytest.param("matern52", marks=pytest.mark.slow)])
def test_full_bound_and_gradient_equal_the_dense_family_with_sequences(name):
    _, problem = problem_of(model_text(f"s2 * {name}(t, lengthscale = ell) * same(sequence) + white(1e-4)"),
                            simulated(sequences=3))
    assert isinstance(problem.latent_q(), MarkovGaussian)
    assert_bound_equals_dense(problem)


# ---- fits, site updates and predictions --------------------------------------------------------------------
@pytest.fixture(scope="module")
def matern_problem():
    return problem_of(model_text("matern32(t, variance = 1.5, lengthscale = ell) + white(1e-6)", "t").replace(
        "  array[N] int<lower=1> sequence;\n", ""), {k: v for k, v in simulated(N=30, sequences=1, repeats=False).items()
                                                     if k != "sequence"})


def test_fit_vem_reaches_the_dense_fits_bound(matern_problem):
    _, problem = matern_problem
    settings = VEMSettings(num_inducing=6, max_iterations=300)
    markov = fit_vem(problem, settings)
    dense = fit_vem(problem, settings, latent_q=dense_of(problem))
    assert isinstance(markov.latent_q, MarkovGaussian)
    assert markov.trace[-1] > markov.trace[0] + 5
    # one objective to rounding, so one L-BFGS path until rounding differences grow (neither converges
    # in 300 iterations on this slow problem, so the end points differ by the optimiser's drift)
    np.testing.assert_allclose(markov.trace[:30], dense.trace[:30], rtol=1e-6)
    assert markov.bound == pytest.approx(dense.bound, rel=0.03)
    # the Markov fit's optimum, evaluated by the dense family, has the same bound
    assert float(make_objective(problem, settings, dense_of(problem))(markov.params)) == pytest.approx(
        markov.bound, rel=1e-10)


def test_gpdsl_fit_and_forecast_run_with_a_matern_time_prior(matern_problem):
    model, problem = matern_problem
    values = {k: v for k, v in simulated(N=30, sequences=1, repeats=False).items() if k != "sequence"}
    results, fit = run(model, values, "vem", VEMSettings(num_inducing=6, max_iterations=200), seed=1,
                       keep_state=True)
    assert isinstance(fit.latent_q, MarkovGaussian)
    projection = forecast(fit, np.array([2.1, 2.5]))  # dense fallback: kernel cross-covariances
    assert projection.mean.shape == (2, problem.latent_dim)
    assert np.all(np.isfinite(projection.mean)) and np.all(projection.variance > 0)


def test_site_updates_and_the_e_step_reach_the_dense_families_optimum(matern_problem):
    _, problem = matern_problem
    settings = VEMSettings(num_inducing=6)
    start = initial_params(problem, settings)
    results = [jax.jit(make_site_updates(problem, settings, q, max_iterations=300))(start.latent, start.inducing,
                                                                                    start.theta)
               for q in (problem.latent_q(), dense_of(problem))]
    assert float(results[0].bound) == pytest.approx(float(results[1].bound), rel=1e-8)
    np.testing.assert_allclose(results[0].latent.lam, results[1].latent.lam, rtol=1e-5, atol=1e-6)
    sites = e_step(problem, settings, start.theta, updates="sites", max_iterations=300)
    assert float(sites.bound) == pytest.approx(float(results[0].bound), rel=1e-6)
