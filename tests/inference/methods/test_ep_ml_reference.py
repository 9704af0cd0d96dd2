"""``ep-ml``'s optimum against two independent references: a grid of the EP marginal, and GPy's EP type-II ML.

What ``ep-ml`` computes
-----------------------
:func:`gpdsl.inference.optimise.ep_ml.ep_type2_ml` maximises ``log Z_EP(theta)``, the EP approximation of
``log p(y | theta)`` for the probit likelihood ``p(y_i = 1 | f_i) = Phi(f_i)``, by Nelder-Mead over the
unconstrained hyperparameters (here ``theta = (log sigma, log tau)`` of ``models/gp_classification.gpm``, with
``K = sigma exp(-|x - x'|^2 / (2 tau^2)) + 1e-8 I``: ``sigma`` is the marginal variance, ``tau`` the
length-scale). The priors only draw the starting points: no log prior and no Jacobian enter the objective,
so the optimum is the type-II maximum likelihood estimate, the same point in any parameterisation. Each
objective value runs EP to ``||mu_new - mu_old||^2 < n / 1e4`` (the default ``tol``), not to its fixed
point; ``e(theta)`` below is that value minus the converged marginal. The data: 50 inputs uniform on
``[0, 6]``, labels drawn from the model at ``sigma = 4, tau = 1``; the optimum is interior (about
``sigma = 1.43, tau = 0.78``), with curvatures 1.1 and 6.5 on the log scale.

Reference 1: a grid
-------------------
The converged EP marginal (``tol = 1e-16``, gpdsl's EP at fixed hyperparameters with ``K`` built here in
NumPy, not through the model or ep-ml's optimiser) is evaluated on three nested grids in
``(log sigma, log tau)``: spacing 0.25 over a wide box, then 0.05 and 0.01 (21 x 21 points each) around the
previous grid's maximum; each maximum must lie inside its grid. ``A``, the negative Hessian at the finest
grid's maximiser ``theta_g``, comes from central differences on that grid. If the marginal is quadratic
near its optimum ``theta*``, the grid point nearest ``theta*`` is within ``h sqrt(d) / 2`` of it, so the grid
maximiser is within ``r_grid = h sqrt(d lambda_max(A)) / 2`` of ``theta*`` in the norm
``||v||_A = sqrt(v' A v)``, and its value within ``r_grid^2 / 2`` of the maximum. ``ep-ml`` maximises its
own objective, which is off by ``e``; if it reaches that maximum, its point ``theta_e`` is at most
``|e(theta_e)| + |e(theta_g)|`` below the best grid value, so within
``r_ep = sqrt(2 (|e(theta_e)| + |e(theta_g)|))`` of ``theta*`` in ``||.||_A``. The tests require
``||theta_e - theta_g||_A <= r_grid + r_ep``, the converged marginal at ``theta_e`` to be no more than
``|e(theta_e)| + |e(theta_g)|`` below the best grid value and no more than ``r_grid^2 / 2`` above it, the
stored ``log_marginal`` to be EP's at ``theta_e`` with ep-ml's tolerance (to rounding) and ``|e(theta_e)|``
to be below the grid's resolution ``r_grid^2 / 2``.

Reference 2: GPy
----------------
``GPy.core.GP`` with ``GPy.likelihoods.Bernoulli()`` (probit link), ``RBF(variance, lengthscale)`` plus a
fixed ``White(1e-8)`` (gpdsl's jitter, so both build the same covariance matrix) and
``GPy.inference.latent_function_inference.EP``. GPy's EP is sequential (``parallel_updates=False``), visits
the sites in a random order, starts from ``Sigma = K + 1e-7 I`` and stops once the mean squared change of
the site parameters between sweeps is below ``epsilon`` (1e-6 by default; 1e-20 here), so both EPs stop at
the same fixed point and their ``log Z_EP`` must agree to ``1e-12`` relative (rounding is what is left).
``ep_mode="nested"`` reruns EP at every hyperparameter value (warm-started from the last sites); GPy's
default ``"alternated"`` keeps the sites of the first run fixed during an optimisation and so does not
maximise ``log Z_EP``. At a converged fixed point ``log Z_EP`` is stationary in the sites, so GPy's ``dL_dK``
gives its exact gradient and L-BFGS-B (``pgtol = 1e-8``, from ``sigma = tau = 1``) finds the type-II optimum
``theta_G``; its remaining gradient ``g`` (on the log scale) puts it within ``r_G = sqrt(g' A^-1 g)`` of
``theta*``. The tests require ``||theta_e - theta_G||_A <= r_G + r_ep``, with the converged marginals at the
two optima within ``(r_G + r_ep)^2 / 2`` of each other. With ``tol = 1e-16`` ep-ml's objective is GPy's
(``e`` vanishes) and the bound is ``r_G`` plus ``sqrt(2 fatol)``, the distance that Nelder-Mead's value
precision (``fatol = 1e-8``) allows.
"""

import time
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from gpdsl.api import run
from gpdsl.inference.approximations.ep import ep
from gpdsl.inference.methods.ep_ml import EPMLSettings
from gpdsl.numerics import GP_JITTER

MODEL = Path(__file__).resolve().parents[3] / "models" / "gp_classification.gpm"
N = 50
TIGHT_TOL = 1e-16     # ||mu_new - mu_old||^2: mu to ~1e-8; log Z_EP, stationary in the sites, to ~1e-16
DEFAULT_TOL = N / 1e4  # ep-ml's default EP tolerance (EPMLSettings.tol = None)
GRIDS = (  # (spacing, half-width in steps) of the grids around the previous maximum, on the log scale
    (0.05, 10),
    (0.01, 10),
)
COARSE = (np.arange(-2.0, 4.0001, 0.25), np.arange(-2.5, 2.0001, 0.25))  # log sigma, log tau
GPY_REL = 1e-12  # the same fixed point on both sides: what is left is rounding (measured ~3e-16)
NELDER_MEAD_FATOL = 1e-8  # ep_type2_ml's options={"fatol": 1e-8}


@pytest.fixture(scope="module")
def data():
    """Labels from the model at sigma = 4, tau = 1 (32 of 50 are ones); the optimum is interior."""
    rng = np.random.default_rng(2)
    X = np.sort(rng.uniform(0, 6, size=(N, 1)), axis=0)
    K = 4.0 * np.exp(-0.5 * (X - X.T) ** 2)
    f = np.linalg.cholesky(K + 1e-8 * np.eye(N)) @ rng.normal(size=N)
    y = (rng.uniform(size=N) < stats.norm.cdf(f)).astype(int)
    return {"N": N, "D": 1, "X": X, "y": y}


def covariance(X, log_sigma, log_tau):
    """``sigma exp(-|x - x'|^2 / (2 tau^2)) + GP_JITTER I``, built here (not through the model)."""
    squared = (X - X.T) ** 2
    return np.exp(log_sigma) * np.exp(-0.5 * squared / np.exp(2.0 * log_tau)) + GP_JITTER * np.eye(len(X))


def ep_marginal(data, theta, tol=TIGHT_TOL):
    approx = ep(covariance(data["X"], *theta), data["y"], tol=tol, max_sweeps=500)
    assert bool(approx.converged)
    return float(approx.log_marginal)


def grid_values(data, axes):
    return np.array([[ep_marginal(data, (a, b)) for b in axes[1]] for a in axes[0]])


def interior_argmax(values):
    i, j = np.unravel_index(np.argmax(values), values.shape)
    assert 0 < i < values.shape[0] - 1 and 0 < j < values.shape[1] - 1, "the grid's maximum is on its edge"
    return i, j


@pytest.fixture(scope="module")
def reference(data):
    """The finest grid's maximiser ``theta_g``, its value, the spacing and ``A`` (the negative Hessian there)."""
    axes = COARSE
    values = grid_values(data, axes)
    i, j = interior_argmax(values)
    for h, steps in GRIDS:
        offsets = h * np.arange(-steps, steps + 1)
        axes = (axes[0][i] + offsets, axes[1][j] + offsets)
        values = grid_values(data, axes)
        i, j = interior_argmax(values)
    v = values
    A = -np.array([
        [(v[i + 1, j] - 2 * v[i, j] + v[i - 1, j]) / h**2,
         (v[i + 1, j + 1] - v[i + 1, j - 1] - v[i - 1, j + 1] + v[i - 1, j - 1]) / (4 * h**2)],
        [0.0, (v[i, j + 1] - 2 * v[i, j] + v[i, j - 1]) / h**2]])
    A[1, 0] = A[0, 1]
    assert np.all(np.linalg.eigvalsh(A) > 0), "the grid maximum is not a strict local maximum"
    theta_g = np.array([axes[0][i], axes[1][j]])
    r_grid = h * np.sqrt(len(theta_g) * np.linalg.eigvalsh(A).max()) / 2
    return {"theta": theta_g, "value": v[i, j], "h": h, "A": A, "r_grid": r_grid,
            "e": ep_marginal(data, theta_g, DEFAULT_TOL) - v[i, j]}


def fit_ep_ml(data, settings):
    started = time.perf_counter()
    fit = run(MODEL, data, "ep-ml", settings, seed=0)
    seconds = time.perf_counter() - started
    sigma = float(fit.posterior["sigma"].values.ravel()[0])
    tau = float(fit.posterior["tau"].values.ravel()[0])
    theta = np.log([sigma, tau])
    reported = float(fit.sample_stats["log_marginal"].values.ravel()[0])
    tight = ep_marginal(data, theta)
    return {"theta": theta, "reported": reported, "tight": tight, "e": reported - tight, "seconds": seconds}


@pytest.fixture(scope="module")
def ep_ml_fit(data):
    """ep-ml as a user runs it (default settings: four starts, EP to ``n / 1e4``)."""
    return fit_ep_ml(data, EPMLSettings())


def a_norm(A, v):
    return float(np.sqrt(v @ A @ v))


def r_ep(ep_ml_fit, reference):
    return np.sqrt(2 * (abs(ep_ml_fit["e"]) + abs(reference["e"])))


def test_ep_ml_optimum_is_the_grid_maximum(ep_ml_fit, reference):
    theta_e, theta_g, A = ep_ml_fit["theta"], reference["theta"], reference["A"]
    distance = a_norm(A, theta_e - theta_g)
    bound = reference["r_grid"] + r_ep(ep_ml_fit, reference)
    print(f"\nep-ml: sigma={np.exp(theta_e[0]):.5f} tau={np.exp(theta_e[1]):.5f} log Z={ep_ml_fit['tight']:.8f}"
          f" ({ep_ml_fit['seconds']:.1f} s); grid: sigma={np.exp(theta_g[0]):.5f} tau={np.exp(theta_g[1]):.5f}"
          f" log Z={reference['value']:.8f}; eig(A)={np.linalg.eigvalsh(A)}; ||theta_e - theta_g||_A={distance:.4g}"
          f" <= {bound:.4g}; e(theta_e)={ep_ml_fit['e']:.3g}, e(theta_g)={reference['e']:.3g}")
    assert distance <= bound
    slack = abs(ep_ml_fit["e"]) + abs(reference["e"])
    assert ep_ml_fit["tight"] >= reference["value"] - slack, "ep-ml stopped below the best grid point"
    assert ep_ml_fit["tight"] <= reference["value"] + reference["r_grid"] ** 2 / 2


def test_reported_log_marginal_is_the_ep_marginal_at_the_optimum(data, ep_ml_fit, reference):
    """The stored ``log_marginal`` is EP's at the returned hyperparameters with ep-ml's tolerance (to
    rounding), and the converged marginal there within the grid's value resolution."""
    at_default = ep_marginal(data, ep_ml_fit["theta"], DEFAULT_TOL)
    print(f"\nreported {ep_ml_fit['reported']:.12f}, EP at tol n/1e4 {at_default:.12f},"
          f" converged {ep_ml_fit['tight']:.12f}"
          f" (|e| {abs(ep_ml_fit['e']):.3g} <= {reference['r_grid'] ** 2 / 2:.3g})")
    assert ep_ml_fit["reported"] == pytest.approx(at_default, rel=1e-12, abs=0)
    assert abs(ep_ml_fit["e"]) <= reference["r_grid"] ** 2 / 2


def gpy_classifier(GPy, data, log_sigma, log_tau):
    kernel = GPy.kern.RBF(1, variance=np.exp(log_sigma), lengthscale=np.exp(log_tau)) + GPy.kern.White(
        1, variance=GP_JITTER)
    kernel.white.variance.fix()
    inference = GPy.inference.latent_function_inference.EP(epsilon=1e-20, max_iters=1000, ep_mode="nested")
    return GPy.core.GP(data["X"], data["y"][:, None].astype(float), kernel=kernel,
                       likelihood=GPy.likelihoods.Bernoulli(), inference_method=inference)


def test_ep_marginal_matches_gpy_at_fixed_hyperparameters(data, reference):
    GPy = pytest.importorskip("GPy")
    np.random.seed(0)  # GPy's site order
    for theta in (reference["theta"], np.log([4.0, 1.0])):
        model = gpy_classifier(GPy, data, *theta)
        ours = ep_marginal(data, theta)
        print(f"\ntheta={np.exp(theta)}: gpdsl {ours:.12f}, GPy {model.log_likelihood():.12f}, "
              f"rel diff {abs(ours / model.log_likelihood() - 1):.2g}")
        assert ours == pytest.approx(model.log_likelihood(), rel=GPY_REL, abs=0)


@pytest.fixture(scope="module")
def gpy_optimum(data, reference):
    """GPy's type-II optimum from sigma = tau = 1, its log Z, and ``r_G`` (its distance to the optimum that
    its remaining gradient implies, in ``||.||_A``)."""
    GPy = pytest.importorskip("GPy")
    np.random.seed(0)
    model = gpy_classifier(GPy, data, 0.0, 0.0)
    started = time.perf_counter()
    model.optimize("lbfgsb", max_iters=1000, gtol=1e-8, bfgs_factor=10.0)
    seconds = time.perf_counter() - started
    rbf = model.kern.rbf
    values = np.array([rbf.variance.values[0], rbf.lengthscale.values[0]])
    gradient = values * np.array([rbf.variance.gradient[0], rbf.lengthscale.gradient[0]])  # d log Z / d log(.)
    r_G = float(np.sqrt(gradient @ np.linalg.solve(reference["A"], gradient)))
    print(f"\nGPy: sigma={values[0]:.6f} tau={values[1]:.6f} log Z={model.log_likelihood():.10f}, gradient {gradient},"
          f" r_G={r_G:.3g} ({seconds:.1f} s)")
    return {"theta": np.log(values), "value": float(model.log_likelihood()), "r_G": r_G}


def test_ep_ml_optimum_matches_gpys_type2_optimum(data, ep_ml_fit, reference, gpy_optimum):
    theta_G, A = gpy_optimum["theta"], reference["A"]
    bound = gpy_optimum["r_G"] + r_ep(ep_ml_fit, reference)
    distance = a_norm(A, ep_ml_fit["theta"] - theta_G)
    at_gpy = ep_marginal(data, theta_G)
    print(f"\ngpdsl at GPy's optimum {at_gpy:.10f}; ep-ml log Z {ep_ml_fit['tight']:.10f};"
          f" ||theta_e - theta_G||_A={distance:.4g} <= {bound:.4g}")
    assert at_gpy == pytest.approx(gpy_optimum["value"], rel=GPY_REL, abs=0)
    assert distance <= bound
    assert abs(at_gpy - ep_ml_fit["tight"]) <= bound**2 / 2


def test_ep_ml_with_converged_ep_finds_gpys_optimum(data, reference, gpy_optimum):
    """With EP run to its fixed point (``tol=1e-16``) the objective is GPy's: ``e`` vanishes, and what is left
    is the precision Nelder-Mead is asked for (``fatol = 1e-8``, a distance ``sqrt(2e-8)`` in ``||.||_A``)."""
    fit = fit_ep_ml(data, EPMLSettings(starts=1, tol=TIGHT_TOL))
    bound = gpy_optimum["r_G"] + np.sqrt(2 * NELDER_MEAD_FATOL)
    distance = a_norm(reference["A"], fit["theta"] - gpy_optimum["theta"])
    print(f"\nep-ml (tol {TIGHT_TOL:g}): sigma={np.exp(fit['theta'][0]):.6f} tau={np.exp(fit['theta'][1]):.6f}"
          f" log Z={fit['reported']:.10f} ({fit['seconds']:.1f} s);"
          f" ||theta_e - theta_G||_A={distance:.3g} <= {bound:.3g}")
    assert fit["reported"] == pytest.approx(fit["tight"], rel=1e-12, abs=0)
    assert distance <= bound
    assert abs(fit["reported"] - gpy_optimum["value"]) <= bound**2 / 2
