"""Student-t process regression, ``f ~ student_t_process(nu, X, k); y ~ normal(f, s)``: the noise inside the
process's kernel, ``y ~ MVT(nu, 0, K + s^2 I)`` with that covariance (Shah, Wilson & Ghahramani 2014).

Every answer is checked against an independent one: the marginal against SciPy's ``multivariate_t`` (scale matrix
``(nu - 2) / nu`` times the covariance), and against the GP marginal as ``nu`` grows; the predictive against the
conditional of SciPy's joint MVT over training and new points, its kernel computed here in NumPy; ``ml`` against
``scipy.optimize`` on the same objective; NUTS against quadrature of the exact posterior (slow).
"""

import numpy as np
import pytest
import scipy.optimize
import scipy.stats
from scipy.stats import multivariate_normal, multivariate_t

from gpdsl.api import check_file, check_text, run
from gpdsl.errors import DataError
from gpdsl.ir.families import FAMILIES, STUDENT_T_PROCESS, classify

MODEL = "models/student_t_process.gpm"

DATA_NU = """
data { int N; matrix[N, 1] X; vector[N] y; real<lower=2> nu; }
parameters { real<lower=0> variance; real<lower=0> ell; real<lower=0> noise; }
model {
  f ~ student_t_process(nu, X, variance * rbf(lengthscale = ell));
  y ~ normal(f, noise);
}
"""

MAP_MODEL = """
data { int N; matrix[N, 1] X; vector[N] y; }
parameters { real<lower=2> nu ~ gamma(2, 0.1); real<lower=0> variance; real<lower=0> ell; real<lower=0> noise; }
model {
  f ~ student_t_process(nu, X, variance * rbf(lengthscale = ell));
  y ~ normal(f, noise);
}
"""


def matern52(X1, X2, variance, lengthscale):
    r = np.sqrt(np.sum(((X1[:, None, :] - X2[None, :, :]) / lengthscale) ** 2, axis=-1))
    return variance * (1 + np.sqrt(5) * r + 5 * r ** 2 / 3) * np.exp(-np.sqrt(5) * r)


def rbf(X1, X2, variance, lengthscale):
    return variance * np.exp(-0.5 * np.sum(((X1[:, None, :] - X2[None, :, :]) / lengthscale) ** 2, axis=-1))


def mvt_logpdf(y, covariance, nu):
    """SciPy's MVT with covariance ``covariance`` (its scale matrix times nu / (nu - 2))."""
    return multivariate_t.logpdf(y, np.zeros(len(y)), covariance * (nu - 2) / nu, df=nu)


def tp_draw(rng, N, nu=4.0, variance=1.0, lengthscale=0.8, noise=0.3):
    """Inputs in (0, 4) and one draw of y ~ MVT(nu, 0, K + s^2 I) (an RBF kernel), as a normal scale mixture."""
    X = np.sort(rng.uniform(0, 4, N))[:, None]
    C = rbf(X, X, variance, lengthscale) + noise ** 2 * np.eye(N)
    w = (nu - 2) / rng.chisquare(nu)
    return X, np.sqrt(w) * np.linalg.cholesky(C + 1e-10 * np.eye(N)) @ rng.normal(size=N)


def view_of(model, data):
    facts = classify(model).facts[STUDENT_T_PROCESS]
    return FAMILIES[STUDENT_T_PROCESS].view(model, data, facts)


VALUES = [{"nu": 4.5, "variance": 1.3, "lengthscale": np.array([0.7]), "noise": 0.4},
          {"nu": 2.3, "variance": 0.4, "lengthscale": np.array([2.1]), "noise": 0.1},
          {"nu": 60.0, "variance": 2.0, "lengthscale": np.array([0.3]), "noise": 1.2}]


@pytest.fixture(scope="module")
def regression():
    model, warnings = check_file(MODEL)
    assert warnings == []
    rng = np.random.default_rng(3)
    X, y = tp_draw(rng, 9)
    return model, {"N": 9, "D": 1, "X": X, "y": y}


def test_the_family_and_its_methods(regression):
    from gpdsl.registry import methods

    model, _ = regression
    classification = classify(model)
    assert classification.families == [STUDENT_T_PROCESS, "any"]
    runs = [name for name, method in methods().items() if set(method.families) & set(classification.families)]
    assert sorted(runs) == ["ml", "nuts"]


@pytest.mark.parametrize("values", VALUES)
def test_the_marginal_is_scipys_multivariate_t(regression, values):
    model, data = regression
    view = view_of(model, data)
    theta = view.unconstrain_theta(values)
    X, y = data["X"], data["y"]
    covariance = matern52(X, X, values["variance"], values["lengthscale"]) + (values["noise"] ** 2 + 1e-8) * np.eye(9)
    expected = mvt_logpdf(y, covariance, values["nu"])
    assert float(view.log_marginal(theta)) == pytest.approx(expected, rel=1e-10)
    jax_model = view.jax_model
    env = jax_model.environment({k: np.asarray(v) for k, v in values.items()})
    assert float(jax_model.log_terms(env, ("likelihood",))) == pytest.approx(expected, rel=1e-10)


def test_large_nu_recovers_the_gp_marginal():
    model, _ = check_text(DATA_NU)
    rng = np.random.default_rng(4)
    X, y = tp_draw(rng, 8)
    values = {"variance": 0.8, "ell": 0.6, "noise": 0.25}
    covariance = rbf(X, X, 0.8, 0.6) + (0.25 ** 2 + 1e-8) * np.eye(8)
    gp = multivariate_normal.logpdf(y, np.zeros(8), covariance)
    gaps = []
    for nu in (1e2, 1e4, 1e6, 1e8):
        view = view_of(model, {"N": 8, "X": X, "y": y, "nu": nu})
        gaps.append(abs(float(view.log_marginal(view.unconstrain_theta(values))) - gp))
    assert gaps[0] > gaps[1] > gaps[2] > gaps[3] and gaps[3] < 1e-5, gaps  # the gap falls as 1 / nu


def test_degrees_of_freedom_given_as_data_must_exceed_two():
    model, _ = check_text(DATA_NU)
    X, y = tp_draw(np.random.default_rng(0), 5)
    with pytest.raises(DataError, match="'nu' = 2 is the degrees of freedom"):
        view_of(model, {"N": 5, "X": X, "y": y, "nu": 2.0})


@pytest.mark.parametrize("joint", [False, True])
def test_the_predictive_is_the_conditional_of_the_joint_mvt(regression, joint):
    from gpdsl.inference.predict.student_t_process import student_t_process_moments

    model, data = regression
    values = VALUES[0]
    view = view_of(model, data)
    theta = view.unconstrain_theta(values)
    X, y, nu, s2 = data["X"], data["y"], values["nu"], values["noise"] ** 2
    X_new = np.array([[0.5], [2.2], [5.0]])
    mean, f_cov, noise, dof = (np.asarray(a) for a in student_t_process_moments(view, theta, X_new, full=joint))
    f_var = np.diag(f_cov) if joint else f_cov
    assert float(dof) == nu + 9
    both = np.vstack([X, X_new])
    K = matern52(both, both, values["variance"], values["lengthscale"])
    train = K[:9, :9] + (s2 + 1e-8) * np.eye(9)  # the lowering's jitter on the training points
    for j in range(3):
        for noisy, variance in ((False, f_var[j]), (True, f_var[j] + noise)):
            index = [*range(9), 9 + j]
            joint_cov = K[np.ix_(index, index)].copy()
            joint_cov[:9, :9] = train
            if noisy:
                joint_cov[9, 9] += s2
            for t in (mean[j] - 1.3, mean[j], mean[j] + 0.4):
                conditional = mvt_logpdf(np.r_[y, t], joint_cov, nu) - mvt_logpdf(y, train, nu)
                ours = scipy.stats.t.logpdf(t, df=dof, loc=mean[j], scale=np.sqrt(variance * (dof - 2) / dof))
                assert ours == pytest.approx(conditional, abs=1e-8)
    if joint:  # the f* covariance: Shah et al.'s (nu + beta - 2) / (nu + n - 2) times the GP's, in NumPy
        solve = np.linalg.solve(train, K[:9, 9:])
        beta = y @ np.linalg.solve(train, y)
        expected = (nu + beta - 2) / (nu + 9 - 2) * (K[9:, 9:] - K[9:, :9] @ solve)
        np.testing.assert_allclose(f_cov, expected, rtol=1e-7, atol=1e-10)


def test_ml_predictions_and_their_draws(regression):
    model, data = regression
    X_new = np.linspace(0, 4, 400)[:, None]
    results = run(model, data, "ml", seed=2, new_inputs=X_new, predictive="marginal")
    from gpdsl.results.arviz_compat import groups

    predictions, posterior = groups(results)["predictions"], groups(results)["posterior"]
    assert np.allclose(predictions["y_dof"].values, float(posterior["nu"].values.ravel()[0]) + 9)
    draws, mean, variance = (predictions[name].values.ravel() for name in ("y_new", "y_mean", "y_variance"))
    standardised = (draws - mean) / np.sqrt(variance * (predictions["y_dof"].values.ravel() - 2)
                                            / predictions["y_dof"].values.ravel())
    dof = float(predictions["y_dof"].values.ravel()[0])
    assert scipy.stats.kstest(standardised, scipy.stats.t(df=dof).cdf).pvalue > 1e-3


def test_ml_is_scipys_optimum():
    model, _ = check_text(MAP_MODEL)
    rng = np.random.default_rng(7)
    X, y = tp_draw(rng, 30)
    data = {"N": 30, "X": X, "y": y}
    results = run(model, data, "ml", seed=1)
    from gpdsl.results.arviz_compat import groups

    posterior = groups(results)["posterior"]
    ours = {name: float(posterior[name].values.ravel()[0]) for name in ("nu", "variance", "ell", "noise")}

    def negative(u):
        nu, variance, ell, noise = 2 + np.exp(u[0]), *np.exp(u[1:])
        covariance = rbf(X, X, variance, ell) + (noise ** 2 + 1e-8) * np.eye(30)
        return -(mvt_logpdf(y, covariance, nu) + scipy.stats.gamma.logpdf(nu, 2, scale=10))

    best = min((scipy.optimize.minimize(negative, start, method="Nelder-Mead",
                                        options={"xatol": 1e-9, "fatol": 1e-11, "maxiter": 20000})
                for start in ([1.0, 0.0, 0.0, -1.0], [2.5, 0.5, -0.5, -2.0], [0.0, -0.5, 0.5, 0.0])),
               key=lambda r: r.fun)
    theirs = dict(zip(("nu", "variance", "ell", "noise"), (2 + np.exp(best.x[0]), *np.exp(best.x[1:]))))
    print(ours, theirs)
    assert negative([np.log(ours["nu"] - 2), *np.log([ours["variance"], ours["ell"], ours["noise"]])]) \
        == pytest.approx(best.fun, abs=1e-6)
    for name in ours:
        assert ours[name] == pytest.approx(theirs[name], rel=2e-3), name


def test_simulated_outputs_are_the_marginal_mvt(regression):
    """With ``C = K + s^2 I``, ``y' C^-1 y nu / ((nu - 2) n)`` of ``y ~ MVT(nu, 0, C)`` (covariance C) is F(n, nu)."""
    import jax

    from gpdsl.backends.jax.lowering import lower
    from gpdsl.backends.jax.simulate import simulate

    model, data = regression
    values = VALUES[0]
    jax_model = lower(model, data)
    X = data["X"]
    C = matern52(X, X, values["variance"], values["lengthscale"]) + (values["noise"] ** 2 + 1e-8) * np.eye(9)
    statistics = []
    for key in jax.random.split(jax.random.PRNGKey(0), 1000):
        _, observed = simulate(jax_model, key, fixed=values)
        y = np.asarray(observed["y"])
        statistics.append(y @ np.linalg.solve(C, y) * values["nu"] / ((values["nu"] - 2) * 9))
    assert scipy.stats.kstest(statistics, scipy.stats.f(9, values["nu"]).cdf).pvalue > 1e-3


def test_a_predict_file_names_the_process_inputs(tmp_path, regression):
    import json

    from gpdsl.api import new_inputs_from_file

    model, _ = regression
    path = tmp_path / "new.json"
    path.write_text(json.dumps({"X": [[0.5], [1.5]]}))
    np.testing.assert_array_equal(np.asarray(new_inputs_from_file(path, model, "ml")), [[0.5], [1.5]])
    path.write_text(json.dumps({"Z": [[0.5]]}))
    with pytest.raises(DataError, match=r"under the model's input name \(X\)"):
        new_inputs_from_file(path, model, "ml")


NUTS_MODEL = """
data { int N; matrix[N, 1] X; vector[N] y; }
parameters { real<lower=2> nu ~ gamma(2, 0.1); real<lower=0> variance ~ lognormal(0, 1); }
model {
  f ~ student_t_process(nu, X, variance * rbf(lengthscale = 0.8));
  y ~ normal(f, 0.3);
}
"""


def quadrature_posterior(X, y):
    """Posterior means of ``nu`` and ``variance`` of NUTS_MODEL by quadrature on a grid of ``(log(nu - 2),
    log(variance))``, the MVT marginal from the eigendecomposition of the RBF Gram matrix (checked against SciPy's
    multivariate_t at a few points)."""
    n, noise = len(y), 0.3 ** 2 + 1e-8
    eigenvalues, vectors = np.linalg.eigh(rbf(X, X, 1.0, 0.8))
    projected = (vectors.T @ y) ** 2
    u, w = np.meshgrid(np.linspace(-16, 9, 1201), np.linspace(-7, 6, 651), indexing="ij")
    nu, variance = 2 + np.exp(u), np.exp(w)
    spectrum = variance[..., None] * eigenvalues + noise
    beta = np.sum(projected / spectrum, axis=-1)
    log_marginal = (scipy.special.gammaln((nu + n) / 2) - scipy.special.gammaln(nu / 2) - n / 2 * np.log((nu - 2) * np.pi)
                    - 0.5 * np.sum(np.log(spectrum), axis=-1) - (nu + n) / 2 * np.log1p(beta / (nu - 2)))
    for i, j in ((500, 200), (800, 300), (1100, 500)):
        covariance = variance[i, j] * rbf(X, X, 1.0, 0.8) + noise * np.eye(n)
        assert log_marginal[i, j] == pytest.approx(mvt_logpdf(y, covariance, nu[i, j]), rel=1e-9)
    log_posterior = (log_marginal + scipy.stats.gamma.logpdf(nu, 2, scale=10)
                     + scipy.stats.lognorm.logpdf(variance, 1.0) + u + w)  # the Jacobian of the grid's coordinates
    weights = np.exp(log_posterior - log_posterior.max())
    assert max(weights[0].max(), weights[-1].max(), weights[:, 0].max(), weights[:, -1].max()) < 1e-10  # it holds it
    return {"nu": np.sum(weights * nu) / weights.sum(), "variance": np.sum(weights * variance) / weights.sum()}


@pytest.mark.slow
def test_nuts_agrees_with_quadrature_of_the_exact_posterior():
    """NUTS on the MVT marginal (Stan's multi_student_t_lpdf) against the posterior means by quadrature, within
    four MCSEs; Stan's leave-one-out densities against SciPy's ``log MVT(y) - log MVT(y_-i)`` at some draws."""
    from gpdsl.results.arviz_compat import groups
    from gpdsl.settings import NUTSSettings
    from tests.inference.methods.test_pm_vs_nuts import means_and_mcse

    model, _ = check_text(NUTS_MODEL)
    rng = np.random.default_rng(12)
    X, y = tp_draw(rng, 20, nu=4.0, variance=1.0, lengthscale=0.8, noise=0.3)
    exact = quadrature_posterior(X, y)
    X_new = np.array([[0.7], [4.5]])
    results = run(model, {"N": 20, "X": X, "y": y}, "nuts", NUTSSettings(chains=4, warmup=1000, draws=1000), seed=3,
                  new_inputs=X_new)
    table = means_and_mcse(results, ["nu", "variance"])
    for name, (mean, error) in table.items():
        print(f"{name}: NUTS {mean:.4f} (MCSE {error:.4f}), quadrature {exact[name]:.4f}")
        assert abs(mean - exact[name]) < 4 * error, name
    posterior, log_likelihood = groups(results)["posterior"], groups(results)["log_likelihood"]
    for chain, draw in ((0, 0), (1, 500), (3, 999)):
        nu, variance = (float(posterior[name].values[chain, draw]) for name in ("nu", "variance"))
        covariance = variance * rbf(X, X, 1.0, 0.8) + (0.09 + 1e-8) * np.eye(20)
        full = mvt_logpdf(y, covariance, nu)
        for i in (0, 7, 19):
            rest = np.delete(np.arange(20), i)
            loo = full - mvt_logpdf(y[rest], covariance[np.ix_(rest, rest)], nu)
            assert float(log_likelihood["y"].values[chain, draw, i]) == pytest.approx(loo, abs=1e-6)
    predictions = groups(results)["predictions"]
    for chain, draw in ((0, 3), (2, 700)):  # Shah et al.'s conditional MVT at the draw, in NumPy
        nu, variance = (float(posterior[name].values[chain, draw]) for name in ("nu", "variance"))
        train = variance * rbf(X, X, 1.0, 0.8) + (0.09 + 1e-8) * np.eye(20)
        cross = variance * rbf(X_new, X, 1.0, 0.8)
        factor = (nu + y @ np.linalg.solve(train, y) - 2) / (nu + 20 - 2)
        f_variance = factor * (variance - np.sum(cross * np.linalg.solve(train, cross.T).T, axis=1))
        expected = {"y_mean": cross @ np.linalg.solve(train, y), "f_variance": f_variance,
                    "y_variance": f_variance + factor * 0.09, "y_dof": np.full(2, nu + 20)}
        for name, value in expected.items():
            np.testing.assert_allclose(predictions[name].values[chain, draw], value, rtol=1e-6, err_msg=name)
    replicates = groups(results)["posterior_predictive"]["y"].transpose("chain", "draw", ...).values
    assert not replicate_disagreements(X, y, posterior["nu"].values, posterior["variance"].values, replicates)


def replicate_disagreements(X, y, nu, variance, replicates):
    """Observations whose replicates' mean or squared deviation from the conditional mean, less the conditional MVT's
    (mean ``y - s^2 C^-1 y``, covariance ``(nu + beta - 2) / (nu + n - 2) s^2 (2 I - s^2 C^-1)``) at each draw,
    averages further than four MCSEs from zero."""
    import arviz as az

    n, s2 = len(y), 0.09
    K = rbf(X, X, 1.0, 0.8)
    means, variances = np.empty(replicates.shape), np.empty(replicates.shape)
    for index in np.ndindex(nu.shape):
        precision = np.linalg.inv(variance[index] * K + (s2 + 1e-8) * np.eye(n))
        beta = y @ precision @ y
        means[index] = y - s2 * precision @ y
        variances[index] = (nu[index] + beta - 2) / (nu[index] + n - 2) * s2 * (2 - s2 * np.diag(precision))
    failures = []
    for what, gap in (("mean", replicates - means), ("variance", (replicates - means) ** 2 - variances)):
        errors = az.mcse(az.convert_to_dataset({"gap": gap}))["gap"].values
        averages = gap.mean(axis=(0, 1))
        print(what, np.round(averages / errors, 2))
        failures += [(what, i) for i in range(n) if not abs(averages[i]) < 4 * errors[i]]
    return failures
