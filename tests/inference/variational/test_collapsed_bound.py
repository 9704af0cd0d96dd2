"""The collapsed Bayesian GPLVM bound and the latent KL term, against GPy and direct formulas."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gpdsl.errors import MethodError
from gpdsl.inference.variational.collapsed_bound import (
    collapsed_bound,
    collapsed_bound_missing,
    grouped_psi2,
    missingness_groups,
    yy_factor,
)
from gpdsl.inference.variational.latent_q import (
    FactorisedGaussian,
    GaussianQParams,
    LatentMoments,
    initial_means,
    kl_standard_normal,
)

GPY_JITTER = 1e-8  # GPy.inference.latent_function_inference.var_dtc.VarDTC.const_jitter
N, D, Q, M = 15, 6, 3, 7


def rbf_psi(variance, lengthscale, Z, mu, S):
    """Analytic RBF-ARD Psi statistics: psi0 (N,), psi1 (N, M), per-point psi2 (N, M, M)."""
    l2 = lengthscale ** 2
    psi0 = jnp.full(mu.shape[0], variance)
    diff = mu[:, None, :] - Z[None, :, :]
    psi1 = variance * jnp.prod(jnp.exp(-0.5 * diff ** 2 / (l2 + S[:, None, :]))
                               / jnp.sqrt(1.0 + S[:, None, :] / l2), axis=-1)
    zdiff = Z[:, None, :] - Z[None, :, :]
    zbar = 0.5 * (Z[:, None, :] + Z[None, :, :])
    centred = mu[:, None, None, :] - zbar[None]
    S4 = S[:, None, None, :]
    psi2n = variance ** 2 * jnp.prod(
        jnp.exp(-0.25 * zdiff[None] ** 2 / l2 - centred ** 2 / (l2 + 2.0 * S4)) / jnp.sqrt(1.0 + 2.0 * S4 / l2),
        axis=-1)
    return psi0, psi1, psi2n


def rbf_K(variance, lengthscale, Z):
    d = (Z[:, None, :] - Z[None, :, :]) / lengthscale
    return variance * jnp.exp(-0.5 * jnp.sum(d ** 2, axis=-1))


@pytest.fixture
def problem():
    rng = np.random.default_rng(3)
    return dict(Y=rng.normal(size=(N, D)), mu=rng.normal(size=(N, Q)), S=rng.uniform(0.05, 0.6, (N, Q)),
                Z=rng.normal(size=(M, Q)), variance=1.4, lengthscale=np.array([0.9, 1.3, 2.0]), noise=0.15)


def rbf_stats(p):
    psi0, psi1, psi2n = rbf_psi(p["variance"], p["lengthscale"], p["Z"], p["mu"], p["S"])
    Kmm = rbf_K(p["variance"], p["lengthscale"], p["Z"]) + 1e-6 * jnp.eye(M)
    return psi0, psi1, psi2n, Kmm


def gpy_log_likelihood(m):
    return float(np.asarray(m.log_likelihood()).reshape(()))


def rel(a, b):
    return abs(float(a) - float(b)) / abs(float(b))


# ---- GPy cross-checks ------------------------------------------------------------------------------
def _gpy_kernels(GPy):
    return {
        "rbf": lambda: GPy.kern.RBF(Q, ARD=True, variance=1.4, lengthscale=[0.9, 1.3, 2.0]),
        "linear": lambda: GPy.kern.Linear(Q, ARD=True, variances=[0.7, 1.2, 0.3]),
        "rbf+linear": lambda: (GPy.kern.RBF(2, ARD=True, variance=0.8, lengthscale=[0.7, 1.5], active_dims=[0, 1])
                               + GPy.kern.Linear(1, variances=0.5, active_dims=[2])),
    }


def _ours_from_gpy(m, Y):
    k, Z, qX = m.kern, np.asarray(m.Z), m.X
    psi0 = k.psi0(Z, qX)
    assert psi0.shape == (Y.shape[0],)
    Kmm = k.K(Z) + GPY_JITTER * np.eye(Z.shape[0])
    noise = float(m.likelihood.variance[0])
    return psi0, k.psi1(Z, qX), k.psi2(Z, qX), k.psi2n(Z, qX), Kmm, noise


@pytest.mark.parametrize("name", ["rbf", "linear", "rbf+linear"])
def test_matches_gpy_bayesian_gplvm(problem, name):
    GPy = pytest.importorskip("GPy")
    p = problem
    kern = _gpy_kernels(GPy)[name]()
    m = GPy.models.BayesianGPLVM(p["Y"], Q, X=p["mu"], X_variance=p["S"], Z=p["Z"], kernel=kern, num_inducing=M)
    m.likelihood.variance = p["noise"]
    expected = gpy_log_likelihood(m)
    psi0, psi1, psi2, _, Kmm, noise = _ours_from_gpy(m, p["Y"])
    ours = collapsed_bound(p["Y"], psi0, psi1, psi2, Kmm, noise) - kl_standard_normal(p["mu"], p["S"])
    assert rel(ours, expected) < 1e-9


def test_matches_gpy_missing_data(problem):
    GPy = pytest.importorskip("GPy")
    from GPy.models.bayesian_gplvm_minibatch import BayesianGPLVMMiniBatch
    p = problem
    rng = np.random.default_rng(7)
    observed = rng.uniform(size=(N, D)) > 0.3
    observed[:, 1] = observed[:, 4]            # two columns share a pattern
    Y = np.where(observed, p["Y"], np.nan)
    kern = _gpy_kernels(GPy)["rbf"]()
    m = BayesianGPLVMMiniBatch(Y, Q, X=p["mu"], X_variance=p["S"], Z=p["Z"], kernel=kern, num_inducing=M,
                               missing_data=True)
    m.likelihood.variance = p["noise"]
    expected = gpy_log_likelihood(m)
    psi0, psi1, _, psi2n, Kmm, noise = _ours_from_gpy(m, p["Y"])
    patterns, group_of_column = missingness_groups(observed)
    assert patterns.shape[1] == D - 1
    ours = collapsed_bound_missing(Y, psi0, psi1, grouped_psi2(psi2n, patterns), group_of_column, Kmm, noise,
                                   observed) - kl_standard_normal(p["mu"], p["S"])
    assert rel(ours, expected) < 1e-9


def test_kl_matches_direct_sum_and_gpy(problem):
    mu, S = problem["mu"], problem["S"]
    direct = 0.5 * np.sum(S + mu ** 2 - 1.0 - np.log(S))
    assert rel(kl_standard_normal(mu, S), direct) < 1e-13
    GPy = pytest.importorskip("GPy")
    from GPy.core.parameterization.variational import NormalPosterior, NormalPrior
    assert rel(kl_standard_normal(mu, S), NormalPrior().KL_divergence(NormalPosterior(mu, S))) < 1e-12


def test_factorised_gaussian_family_gives_the_old_moments_and_kl(problem):
    """The q(X) interface reproduces, bit for bit, what the bound computed before it existed."""
    mu, log_S = jnp.asarray(problem["mu"]), jnp.log(jnp.asarray(problem["S"]))
    q, params, theta = FactorisedGaussian(), GaussianQParams(mu, log_S), jnp.zeros(3)
    moments = q.moments(params, theta)
    assert isinstance(moments, LatentMoments)
    assert np.array_equal(moments.mean, mu) and np.array_equal(moments.variance, jnp.exp(log_S))
    assert np.array_equal(q.kl(params, theta), kl_standard_normal(mu, jnp.exp(log_S)))
    assert np.array_equal(q.kl(params, theta, moments), q.kl(params, theta))
    as_numpy = q.moments(params, theta, np)
    assert isinstance(as_numpy.variance, np.ndarray)
    assert np.array_equal(as_numpy.variance, np.exp(np.asarray(log_S)))

    coordinates = q.unconstrain(params)
    raw = coordinates.softplus_variance
    direct = q.unconstrained_moments(coordinates, theta)
    assert np.array_equal(direct.mean, mu) and np.array_equal(direct.variance, jax.nn.softplus(raw))
    assert np.array_equal(q.unconstrained_kl(coordinates, theta, direct),
                          kl_standard_normal(mu, jax.nn.softplus(raw)))
    np.testing.assert_allclose(direct.variance, problem["S"], rtol=1e-13)
    back = q.constrain(coordinates)
    np.testing.assert_allclose(back.log_variance, log_S, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(q.constrain(coordinates, np).log_variance, log_S, rtol=1e-13, atol=1e-15)


def test_factorised_gaussian_initialisation():
    rng = np.random.default_rng(3)
    Y = rng.normal(size=(12, 4))
    mean = initial_means(Y, 2, np.random.default_rng(0), init="pca")
    assert mean.shape == (12, 2)
    params = FactorisedGaussian().initial(mean, None, init_variance=0.2)
    assert np.array_equal(params.mean, mean)
    np.testing.assert_allclose(np.exp(params.log_variance), 0.2)
    np.testing.assert_allclose(np.exp(FactorisedGaussian().initial(mean, None).log_variance), 0.5)
    mean = initial_means(Y, 2, np.random.default_rng(0), init="random")
    assert np.array_equal(mean, np.random.default_rng(0).standard_normal((12, 2)))
    with pytest.raises(MethodError, match="init_variance"):
        FactorisedGaussian().initial(mean, None, init_variance=0.0)
    with pytest.raises(MethodError, match="'pca' or 'random'"):
        initial_means(Y, 2, rng, init="ica")


# ---- YY^T factor -----------------------------------------------------------------------------------
def test_yy_factor_form_equals_direct_form():
    rng = np.random.default_rng(11)
    n, d = 8, 40
    mu, S, Z = rng.normal(size=(n, Q)), rng.uniform(0.1, 0.5, (n, Q)), rng.normal(size=(M, Q))
    Y = rng.normal(size=(n, d)) @ np.diag(rng.uniform(0.5, 2.0, d))
    psi0, psi1, psi2n = rbf_psi(1.1, np.array([1.0, 0.8, 1.5]), Z, mu, S)
    Kmm = rbf_K(1.1, np.array([1.0, 0.8, 1.5]), Z) + 1e-6 * jnp.eye(M)
    R, output_dim = yy_factor(Y)
    assert output_dim == d and R.shape[0] == n and R.shape[1] <= n
    np.testing.assert_allclose(R @ R.T, Y @ Y.T, rtol=1e-10, atol=1e-10)
    direct = collapsed_bound(Y, psi0, psi1, psi2n.sum(0), Kmm, 0.3)
    factored = collapsed_bound(R, psi0, psi1, psi2n.sum(0), Kmm, 0.3, output_dim=output_dim)
    assert rel(factored, direct) < 1e-10
    same, dim = yy_factor(Y[:, :5])
    assert dim == 5 and np.array_equal(same, Y[:, :5])


def test_yy_factor_drops_null_directions():
    rng = np.random.default_rng(2)
    Y = rng.normal(size=(10, 3)) @ rng.normal(size=(3, 30))
    R, d = yy_factor(Y)
    assert R.shape == (10, 3) and d == 30


# ---- missing data ----------------------------------------------------------------------------------
def test_missing_all_observed_equals_full_bound(problem):
    psi0, psi1, psi2n, Kmm = rbf_stats(problem)
    observed = np.ones((N, D), dtype=bool)
    patterns, group_of_column = missingness_groups(observed)
    assert patterns.shape == (N, 1) and np.all(group_of_column == 0)
    full = collapsed_bound(problem["Y"], psi0, psi1, psi2n.sum(0), Kmm, problem["noise"])
    missing = collapsed_bound_missing(problem["Y"], psi0, psi1, grouped_psi2(psi2n, patterns), group_of_column,
                                      Kmm, problem["noise"], observed)
    assert rel(missing, full) < 1e-12


def _column_by_column(Y, observed, psi0, psi1, psi2n, Kmm, noise):
    total = 0.0
    for d in range(Y.shape[1]):
        rows = observed[:, d]
        total += collapsed_bound(Y[rows, d:d + 1], psi0[rows], psi1[rows], psi2n[rows].sum(0), Kmm, noise)
    return total


def test_missing_equals_sum_over_columns_of_dropped_rows(problem):
    psi0, psi1, psi2n, Kmm = rbf_stats(problem)
    rng = np.random.default_rng(5)
    observed = rng.uniform(size=(N, D)) > 0.35
    observed[:, 2] = observed[:, 0]
    observed[:, 3] = False                      # a column with no observation
    Y = np.where(observed, problem["Y"], np.nan)
    patterns, group_of_column = missingness_groups(observed)
    assert patterns.shape[1] == D - 1
    assert np.array_equal(patterns[:, group_of_column], observed)
    ours = collapsed_bound_missing(Y, psi0, psi1, grouped_psi2(psi2n, patterns), group_of_column, Kmm,
                                   problem["noise"], observed)
    expected = _column_by_column(Y, observed, psi0, psi1, psi2n, Kmm, problem["noise"])
    assert np.isfinite(float(ours))
    assert rel(ours, expected) < 1e-11


def test_missingness_groups_order_of_first_appearance():
    observed = np.array([[1, 0, 1, 0], [1, 1, 1, 1], [0, 1, 0, 1]], dtype=bool)
    patterns, group_of_column = missingness_groups(observed)
    assert group_of_column.tolist() == [0, 1, 0, 1]
    assert np.array_equal(patterns, observed[:, :2])


# ---- gradients ---------------------------------------------------------------------------------------
def _check_grad(f, args, grads, position, direction, rtol=1e-5):
    assert np.all(np.isfinite(np.asarray(grads[position])))
    h = 1e-5

    def shifted(step):
        moved = list(args)
        moved[position] = args[position] + step * direction
        return float(f(*moved))

    numeric = (shifted(h) - shifted(-h)) / (2 * h)
    analytic = float(jnp.sum(grads[position] * direction))
    assert abs(analytic - numeric) <= rtol * max(abs(numeric), 1e-3)


def _unit(shape, index, symmetric=False):
    e = np.zeros(shape)
    e[index] = 1.0
    if symmetric:
        e[index[::-1]] = 1.0
    return jnp.asarray(e)


@pytest.mark.parametrize("missing", [False, True])
def test_gradients_match_finite_differences(problem, missing):
    psi0, psi1, psi2n, Kmm = rbf_stats(problem)
    noise = problem["noise"]
    if missing:
        rng = np.random.default_rng(9)
        observed = rng.uniform(size=(N, D)) > 0.3
        Y = np.where(observed, problem["Y"], np.nan)
        patterns, group_of_column = missingness_groups(observed)
        psi2 = grouped_psi2(psi2n, patterns)

        def bound(psi0, psi1, psi2, Kmm, noise):
            return collapsed_bound_missing(Y, psi0, psi1, psi2, group_of_column, Kmm, noise, observed)
        psi2_direction = _unit(psi2.shape, (1, 2, 4), symmetric=False) + _unit(psi2.shape, (1, 4, 2))
    else:
        Y, psi2 = problem["Y"], psi2n.sum(0)

        def bound(psi0, psi1, psi2, Kmm, noise):
            return collapsed_bound(Y, psi0, psi1, psi2, Kmm, noise)
        psi2_direction = _unit(psi2.shape, (2, 4), symmetric=True)
    args = (psi0, psi1, psi2, Kmm, jnp.asarray(noise))
    grads = jax.jit(jax.grad(bound, argnums=(0, 1, 2, 3, 4)))(*args)
    bound = jax.jit(bound)
    _check_grad(bound, args, grads, 0, _unit(psi0.shape, (3,)))
    _check_grad(bound, args, grads, 1, _unit(psi1.shape, (4, 2)))
    _check_grad(bound, args, grads, 2, psi2_direction)
    _check_grad(bound, args, grads, 3, _unit(Kmm.shape, (1, 5), symmetric=True))
    _check_grad(bound, args, grads, 4, jnp.asarray(1.0))


def test_gradients_through_rbf_psi_match_gpy(problem):
    """End to end: d(bound - KL)/d(means, variances, Z) against GPy's analytic gradients."""
    GPy = pytest.importorskip("GPy")
    p = problem
    kern = GPy.kern.RBF(Q, ARD=True, variance=p["variance"], lengthscale=p["lengthscale"])
    m = GPy.models.BayesianGPLVM(p["Y"], Q, X=p["mu"], X_variance=p["S"], Z=p["Z"], kernel=kern, num_inducing=M)
    m.likelihood.variance = p["noise"]
    m.optimizer_array = m.optimizer_array   # refresh the gradients as GPy's optimiser does

    def objective(mu, S, Z, noise):
        psi0, psi1, psi2n = rbf_psi(p["variance"], p["lengthscale"], Z, mu, S)
        Kmm = rbf_K(p["variance"], p["lengthscale"], Z) + GPY_JITTER * jnp.eye(M)
        return collapsed_bound(p["Y"], psi0, psi1, psi2n.sum(0), Kmm, noise) - kl_standard_normal(mu, S)

    value, grads = jax.jit(jax.value_and_grad(objective, argnums=(0, 1, 2, 3)))(
        jnp.asarray(p["mu"]), jnp.asarray(p["S"]), jnp.asarray(p["Z"]), jnp.asarray(p["noise"]))
    assert rel(value, gpy_log_likelihood(m)) < 1e-9
    for ours, theirs in zip(grads, (m.X.mean.gradient, m.X.variance.gradient, m.Z.gradient,
                                    m.likelihood.variance.gradient)):
        np.testing.assert_allclose(np.asarray(ours).ravel(), np.asarray(theirs).ravel(), rtol=1e-6, atol=1e-8)


def test_non_pd_kmm_gives_nan_not_error(problem):
    psi0, psi1, psi2n, _ = rbf_stats(problem)
    bad = -jnp.eye(M)
    assert np.isnan(float(jax.jit(collapsed_bound)(problem["Y"], psi0, psi1, psi2n.sum(0), bad, 0.1)))
