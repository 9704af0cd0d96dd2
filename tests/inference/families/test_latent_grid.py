"""A latent GP on a full grid with a separable kernel: the whitened Kronecker view (``gibbs``, ``pm``).

The references: the dense view of the same model (``K`` from the kernel over every pair of rows, its Cholesky
factor), Monte Carlo standard errors for the prior draws' covariance, and Gauss-Hermite quadrature for ``p(y |
theta)`` on a 2 x 2 grid, against which the Kronecker Laplace importance estimate is unbiased. The slow test runs
``gibbs`` and ``pm`` on an 8 x 8 Poisson grid and Stan's NUTS on the same model.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.special import gammaln, logsumexp

from gpdsl.api import check_file, check_text
from gpdsl.errors import MethodError
from gpdsl.inference.approximations import kronecker_laplace
from gpdsl.inference.families.latent_gp import latent_gp
from gpdsl.inference.families.latent_grid import GridLatent, on_grid
from gpdsl.inference.mcmc.gibbs import make_gibbs
from gpdsl.inference.mcmc.pseudo_marginal import make_latent_estimator

MODEL = "models/gp_grid_poisson.gpm"


def grid_data(rng, n_t=5, n_x=4, drop=0, rate=1.0):
    """Counts on a shuffled ``n_t x n_x`` grid of (t, x) (less ``drop`` rows) from a smooth log rate."""
    t, x = (m.ravel() for m in np.meshgrid(np.arange(n_t, dtype=float), np.linspace(0, 2, n_x), indexing="ij"))
    order = rng.permutation(t.size)[drop:]
    t, x = t[order], x[order]
    exposure = rng.normal(0, 0.2, t.size)
    y = rng.poisson(rate * np.exp(exposure + 0.5 * np.sin(t) * np.cos(x)))
    return {"N": t.size, "t": t, "x": x, "log_exposure": exposure, "y": y}


def views(data, model=MODEL):
    model = (check_text(model) if "\n" in model else check_file(model))[0]
    dense = latent_gp(model, data, "gibbs")
    return dense, on_grid(dense)


def whitened_map(grid, theta):
    """``A`` with ``f = A v`` (rows' order), column by column."""
    return np.asarray(jax.vmap(lambda e: grid.latent(theta, e))(jnp.eye(grid.n)).T)


THETAS = np.array([[0.0, 0.0, 0.0], [0.4, -0.3, 0.5], [-0.5, 0.6, -0.4]])


@pytest.mark.parametrize("theta", THETAS)
def test_the_whitened_map_implies_the_dense_covariance(theta):
    dense, grid = views(grid_data(np.random.default_rng(0)))
    assert isinstance(grid, GridLatent) and grid.shape == (5, 4)
    A = whitened_map(grid, jnp.asarray(theta))
    np.testing.assert_allclose(A @ A.T, dense.covariance(jnp.asarray(theta)), rtol=0, atol=1e-8)


def test_kronecker_prior_draws_have_the_dense_covariance_within_mcse():
    dense, grid = views(grid_data(np.random.default_rng(1), n_t=4, n_x=3))
    theta = jnp.asarray(THETAS[1])
    num = 40000
    draws = np.asarray(jax.vmap(lambda v: grid.latent(theta, v))(jax.random.normal(jax.random.PRNGKey(0),
                                                                                    (num, grid.n))))
    products = draws[:, :, None] * draws[:, None, :]
    estimate, error = products.mean(0), products.std(0) / np.sqrt(num)
    K = np.asarray(dense.covariance(theta))
    assert np.all(np.abs(estimate - K) < 5 * error + 1e-12), np.max(np.abs(estimate - K) / error)


def test_the_likelihood_of_a_whitened_vector_is_that_of_its_f_and_whitening_inverts_it():
    dense, grid = views(grid_data(np.random.default_rng(2)))
    theta = jnp.asarray(THETAS[2])
    v = jax.random.normal(jax.random.PRNGKey(3), (grid.n,))
    f = grid.latent(theta, v)
    assert float(grid.log_likelihood(v, theta)) == pytest.approx(float(dense.log_likelihood(f, theta)), rel=1e-12)
    np.testing.assert_allclose(grid.whiten(theta, f), v, atol=1e-9)


@pytest.mark.parametrize("kernel, drop", [
    ("sigma * rbf(t, lengthscale = lengthscale_t) * matern32(x, lengthscale = lengthscale_x)", 1),
    ("sigma * rbf(t, lengthscale = lengthscale_t) + matern32(x, lengthscale = lengthscale_x)", 0),
], ids=["partial grid", "sum"])
def test_no_grid_view_where_k_is_not_a_kronecker_product(kernel, drop):
    text = open(MODEL).read().replace(
        "sigma * rbf(t, lengthscale = lengthscale_t) * matern32(x, lengthscale = lengthscale_x)", kernel)
    dense, grid = views(grid_data(np.random.default_rng(4), drop=drop), text)
    assert grid is dense


def test_gibbs_updates_on_the_grid_factorise_nothing_of_size_n():
    _, grid = views(grid_data(np.random.default_rng(5)))
    for update in ("surr", "aa"):
        init, step = make_gibbs(grid, update)
        state, info = jax.jit(step)(jax.random.PRNGKey(0), init(None, jnp.asarray(THETAS[1])))
        assert state.latent.chol_K.shape == (grid.n,) and int(info.cubic_ops) == 0  # the identity's diagonal
        assert np.isfinite(float(state.latent.loglik))
    with pytest.raises(MethodError, match="whitened grid vector"):
        make_gibbs(grid, "sdss")


def gauss_hermite_log_marginal(A, offset, y, nodes=32):
    """``log p(y) = log integral N(v; 0, I) prod_i Poisson(y_i | exp(offset_i + (A v)_i)) dv`` by a tensor
    Gauss-Hermite rule centred and scaled at the integrand's mode and curvature (``v = m + C u``)."""

    def log_joint(v):
        eta = offset + v @ A.T
        return np.sum(y * eta - np.exp(eta) - gammaln(y + 1), axis=-1) - 0.5 * np.sum(v ** 2, axis=-1) \
            - 0.5 * A.shape[1] * np.log(2 * np.pi)

    m = np.zeros(A.shape[1])
    for _ in range(50):
        rate = np.exp(offset + A @ m)
        hessian = np.eye(m.size) + A.T @ (rate[:, None] * A)
        m = m + np.linalg.solve(hessian, A.T @ (y - rate) - m)
    C = np.linalg.cholesky(np.linalg.inv(np.eye(m.size) + A.T @ (np.exp(offset + A @ m)[:, None] * A)))
    x, w = np.polynomial.hermite_e.hermegauss(nodes)
    u = np.stack(np.meshgrid(*[x] * m.size, indexing="ij"), axis=-1).reshape(-1, m.size)
    log_w = np.sum(np.stack(np.meshgrid(*[np.log(w)] * m.size, indexing="ij"), axis=-1).reshape(-1, m.size), axis=1)
    # weights of exp(-u^2 / 2): the integral of h(u) du is sum_k w_k exp(u_k^2 / 2) h(u_k)
    return logsumexp(log_w + 0.5 * np.sum(u ** 2, axis=1) + log_joint(m + u @ C.T)) + np.sum(np.log(np.diag(C)))


def test_the_grid_importance_estimate_is_unbiased_against_quadrature():
    data = grid_data(np.random.default_rng(6), n_t=2, n_x=2, rate=3.0)
    dense, grid = views(data)
    theta = jnp.asarray([0.3, 0.2, -0.2])
    A = whitened_map(grid, theta)
    offset = np.asarray(dense.location_offset(theta))
    truth = gauss_hermite_log_marginal(A, offset, np.asarray(data["y"], float))
    assert truth == pytest.approx(gauss_hermite_log_marginal(A, offset, np.asarray(data["y"], float), 24),
                                  abs=1e-6)
    estimate = make_latent_estimator(grid, "laplace", num_importance=1)
    keys = jax.random.split(jax.random.PRNGKey(7), 4000)
    log_p_hat = np.asarray(jax.jit(jax.vmap(lambda k: estimate(k, theta).log_marginal))(keys))
    ratio = np.exp(log_p_hat - truth)
    error = ratio.std() / np.sqrt(ratio.size)
    assert abs(ratio.mean() - 1.0) < 4 * error, (ratio.mean(), error)


def test_the_proposal_mode_is_the_laplace_mode():
    data = grid_data(np.random.default_rng(8), n_t=4, n_x=3, rate=4.0)
    dense, grid = views(data)
    theta = jnp.asarray(THETAS[1])
    y, offset, args = grid.grid_likelihood_inputs(theta)
    approx = kronecker_laplace.grid_laplace(grid.roots(theta), y, "poisson_log", tol=1e-12, offset=offset)
    from gpdsl.inference.approximations.laplace import laplace
    reference = laplace(dense.covariance(theta), jnp.asarray(data["y"], float), likelihood="poisson_log",
                        tol=1e-12, offset=dense.location_offset(theta))
    assert bool(approx.converged)
    # each Newton system is solved by conjugate gradients to a relative residual of 1e-6
    np.testing.assert_allclose(grid.latent(theta, approx.mean), reference.mean, atol=1e-4)


def test_pm_with_ep_on_a_grid_is_refused_with_what_runs():
    _, grid = views(grid_data(np.random.default_rng(9)))
    with pytest.raises(MethodError, match="Kronecker Laplace"):
        make_latent_estimator(grid, "ep")


def test_predictions_on_a_grid_are_the_dense_gp_conditional_of_each_draw():
    """gibbs on the grid model, predicting at (t, x) rows: at training rows the draws of f themselves, at a new row
    the dense GP conditional of each draw's f (standardised residuals of mean 0 and sd 1)."""
    from gpdsl.api import run
    from gpdsl.settings import GibbsSettings

    data = grid_data(np.random.default_rng(0))
    X = np.column_stack([data["t"], data["x"]])
    new = np.vstack([X[:5], [[5.5, 1.0], [2.5, 0.3]]])
    results = run(check_file(MODEL)[0], data, "gibbs", GibbsSettings(chains=2, warmup=100, draws=100), seed=1,
                  new_inputs=new, predictive="marginal")
    f, f_new = results.posterior["f"].values, results.predictions["f_new"].values
    assert f_new.shape == (2, 100, 7)
    np.testing.assert_allclose(f_new[..., :5], f[..., :5], atol=5e-3)

    def kernel(A, B, draw):
        sigma, ell_t, ell_x = (results.posterior[n].values.ravel()[draw] for n in ("sigma", "lengthscale_t",
                                                                                   "lengthscale_x"))
        r = np.sqrt(3.0) * np.abs(A[:, None, 1] - B[None, :, 1]) / ell_x
        return sigma * np.exp(-0.5 * (A[:, None, 0] - B[None, :, 0]) ** 2 / ell_t ** 2) * (1 + r) * np.exp(-r)

    residuals = []
    for draw in range(200):
        K = kernel(X, X, draw) + 1e-6 * np.eye(len(X))
        k_star = kernel(X, new[5:], draw)
        mean = k_star.T @ np.linalg.solve(K, f.reshape(200, -1)[draw])
        variance = np.diag(kernel(new[5:], new[5:], draw)) - np.sum(k_star * np.linalg.solve(K, k_star), axis=0)
        residuals.append((f_new.reshape(200, -1)[draw, 5:] - mean) / np.sqrt(variance))
    residuals = np.asarray(residuals)  # independent N(0, 1) draws given each f: standard errors 1/sqrt(n), 1/sqrt(2n)
    assert abs(residuals.mean()) < 4 / np.sqrt(residuals.size)
    assert abs(residuals.std() - 1.0) < 4 / np.sqrt(2 * residuals.size)


def test_new_inputs_are_one_row_per_point_only_for_tuples_over_one_index():
    from gpdsl.ir.structure import gp_nodes, input_prediction_refusal

    assert input_prediction_refusal(gp_nodes(check_file(MODEL)[0])[0]) is None
    broadcast = check_text("""
data { int T; int N; vector[T] t; array[T] matrix[N, 1] X; array[T] vector[N] y; }
model {
  f ~ gp((t, X), rbf(t) * rbf(X));
  for (i in 1:T) { y[i] ~ normal(f[i], 1); }
}
""")[0]
    assert "over T x N" in input_prediction_refusal(gp_nodes(broadcast)[0])


def poisson_grid_8x8():
    rng = np.random.default_rng(11)
    t, x = (m.ravel() for m in np.meshgrid(np.arange(8.0), np.arange(8.0), indexing="ij"))
    order = rng.permutation(64)
    t, x = t[order], x[order]
    exposure = rng.normal(0, 0.1, 64)
    y = rng.poisson(np.exp(exposure + 0.5 + np.sin(t / 2) * np.cos(x / 3)))
    return {"N": 64, "t": t, "x": x, "log_exposure": exposure, "y": y}


@pytest.mark.slow
def test_gibbs_and_pm_on_a_poisson_grid_agree_with_nuts():
    from gpdsl.results.arviz_compat import groups
    from gpdsl.settings import GibbsSettings, NUTSSettings, PseudoMarginalSettings
    from gpdsl.api import run
    from tests.inference.methods.test_pm_vs_nuts import disagreements

    model, data = check_file(MODEL)[0], poisson_grid_8x8()
    names = ["sigma", "lengthscale_t", "lengthscale_x"]
    nuts = run(model, data, "nuts", NUTSSettings(chains=4, warmup=1000, draws=1000), seed=6)
    gibbs = run(model, data, "gibbs", GibbsSettings(chains=4, warmup=1000, draws=4000), seed=5)
    pm = run(model, data, "pm", PseudoMarginalSettings(chains=4, warmup=1000, draws=4000, approximation="laplace",
                                                       num_importance=8), seed=7)
    # the grid path ran: no n x n factorisation in any gibbs update, the pm estimates counted none either
    assert float(groups(gibbs)["sample_stats"]["cubic_ops"].max()) == 0
    assert float(groups(pm)["sample_stats"]["cubic_ops"].max()) == 0
    failures = {"gibbs": disagreements(gibbs, nuts, names), "pm": disagreements(pm, nuts, names)}
    assert not any(failures.values()), f"posterior means differ by more than 4 combined MCSEs for {failures}"


def test_surr_on_the_grid_has_the_dense_surrogate_density_and_conditional_mean():
    from gpdsl.inference.mcmc.grid_surrogate import GridSurrogateData
    from gpdsl.inference.mcmc.hyper_updates import SurrogateData, latent_position

    dense, grid = views(grid_data(np.random.default_rng(12), n_t=4, n_x=3))
    theta, s = jnp.asarray(THETAS[1]), 0.7
    position = latent_position(grid, theta, jax.random.normal(jax.random.PRNGKey(0), (grid.n,)))
    noise = jax.random.normal(jax.random.PRNGKey(1), (grid.n,))
    surrogate = GridSurrogateData(grid, s)
    g, eta, _ = surrogate.fix(noise, position)
    # the same g in the rows' order under the dense K + s I
    g_rows = np.asarray(g)[np.argsort(grid.layout.order)]
    K = np.asarray(dense.covariance(theta))
    dense_surrogate = SurrogateData(dense, s)
    chol_K = np.linalg.cholesky(K)
    _, expected = dense_surrogate.whitening(jnp.asarray(g_rows), jnp.asarray(chol_K),
                                            *dense_surrogate.factors(theta, jnp.asarray(chol_K)))
    _, log_density = surrogate.whitening(g, *surrogate.spectrum(theta))
    assert float(log_density) == pytest.approx(float(expected), rel=1e-7)
    # eta = 0 puts f at the conditional mean K (K + s I)^-1 g; the eta of the current point gives it back
    _, at_mean = surrogate.evaluate(theta, g, jnp.zeros_like(eta))
    np.testing.assert_allclose(grid.latent(theta, at_mean.f), K @ np.linalg.solve(K + s * np.eye(grid.n), g_rows),
                               atol=1e-6)
    _, back = surrogate.evaluate(theta, g, eta)
    np.testing.assert_allclose(back.f, position.f, atol=1e-8)
