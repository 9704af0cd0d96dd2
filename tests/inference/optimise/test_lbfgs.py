"""gpdsl's L-BFGS: minima of known functions, stopping reasons, and agreement with SciPy's L-BFGS-B."""

from collections import deque

import numpy as np
import pytest
import scipy.optimize

from gpdsl.inference.optimise import lbfgs


def quadratic(n=40, condition=1e4, seed=0):
    rng = np.random.default_rng(seed)
    basis, _ = np.linalg.qr(rng.normal(size=(n, n)))
    A = basis @ np.diag(np.geomspace(1.0, condition, n)) @ basis.T
    b = rng.normal(size=n)
    return (lambda x: (0.5 * x @ A @ x - b @ x, A @ x - b)), np.linalg.solve(A, b)


def rosenbrock(x):
    return scipy.optimize.rosen(x), scipy.optimize.rosen_der(x)


def test_ill_conditioned_quadratic_reaches_its_minimiser():
    fun, minimiser = quadratic()
    result = lbfgs.minimize(fun, np.zeros_like(minimiser), gtol=1e-5, ftol=0.0, max_iterations=2000)
    assert result.stop == "gradient" and result.converged
    np.testing.assert_allclose(result.x, minimiser, rtol=0, atol=1e-5)
    assert result.evaluations >= result.iterations


def test_rosenbrock_minimum_in_about_as_many_evaluations_as_scipy():
    x0 = np.tile([-1.2, 1.0], 5)
    ours = lbfgs.minimize(rosenbrock, x0, gtol=1e-8, ftol=0.0, max_iterations=5000)
    theirs = scipy.optimize.minimize(rosenbrock, x0, jac=True, method="L-BFGS-B",
                                     options={"gtol": 1e-8, "ftol": 0.0, "maxiter": 5000})
    assert ours.converged, ours.message
    np.testing.assert_allclose(ours.x, np.ones(10), atol=1e-6)
    assert ours.evaluations <= 1.5 * theirs.nfev


def test_first_iterates_follow_scipys_lbfgsb_on_a_quadratic():
    fun, minimiser = quadratic(n=10, condition=50.0, seed=3)
    ours, theirs = [], []

    def record(intermediate_result):
        theirs.append(intermediate_result.fun)

    lbfgs.minimize(fun, np.ones(10), max_iterations=6, gtol=0.0, ftol=0.0, callback=lambda x, v: ours.append(v))
    scipy.optimize.minimize(fun, np.ones(10), jac=True, method="L-BFGS-B", callback=record,
                            options={"maxiter": 6, "gtol": 0.0, "ftol": 0.0})
    np.testing.assert_allclose(ours, theirs[:len(ours)], rtol=1e-6)


def test_stops_at_the_limits_and_says_so():
    fun, _ = quadratic()
    by_iterations = lbfgs.minimize(fun, np.zeros(40), max_iterations=3, gtol=0.0)
    assert (by_iterations.stop, by_iterations.iterations) == ("iterations", 3)
    assert "iteration limit" in by_iterations.message
    by_evaluations = lbfgs.minimize(fun, np.zeros(40), max_evaluations=5, gtol=0.0)
    assert by_evaluations.stop == "evaluations" and by_evaluations.evaluations <= 5


def test_relative_reduction_stop():
    fun, _ = quadratic()
    result = lbfgs.minimize(fun, np.zeros(40), ftol=1e-3, gtol=0.0, max_iterations=1000)
    assert result.stop == "reduction" and result.iterations < 1000


def test_non_finite_trial_points_are_stepped_back_from():
    def fun(x):  # a log barrier: infinite outside x > 0, minimum at x = 1
        if np.any(x <= 0):
            return np.inf, np.full_like(x, np.nan)
        return float(np.sum(x - np.log(x))), 1.0 - 1.0 / x

    result = lbfgs.minimize(fun, np.full(3, 5.0), gtol=1e-8, ftol=0.0)
    assert result.converged, result.message
    np.testing.assert_allclose(result.x, 1.0, atol=1e-6)


def test_a_function_that_never_decreases_fails_the_line_search():
    result = lbfgs.minimize(lambda x: (float(x @ x), -np.ones_like(x)), np.zeros(2))
    assert result.stop == "line_search" and "ABNORMAL" in result.message
    np.testing.assert_array_equal(result.x, np.zeros(2))


@pytest.mark.parametrize("memory", [1, 3, 10])
def test_two_loop_recursion_equals_the_bfgs_inverse_hessian(memory):
    rng = np.random.default_rng(memory)
    n = 6
    pairs = []
    for _ in range(memory):
        s = rng.normal(size=n)
        y = s + 0.1 * rng.normal(size=n)
        pairs.append((s, y, 1.0 / (s @ y)))
    s, y, rho = pairs[-1]
    H = (s @ y) / (y @ y) * np.eye(n)
    for s, y, rho in pairs:
        V = np.eye(n) - rho * np.outer(y, s)
        H = V.T @ H @ V + rho * np.outer(s, s)
    g = rng.normal(size=n)
    np.testing.assert_allclose(lbfgs._direction(g, deque(pairs)), -H @ g, rtol=1e-10)


def _rounded_rosenbrock(x):
    """Rosenbrock's function rounded to 1e-9: near the minimum the objective is flat while its exact gradient
    still points downhill, so the line search ends ABNORMAL (as a bound summed in floating point does)."""
    from scipy.optimize import rosen, rosen_der

    return float(np.round(rosen(x), 9)), rosen_der(x)


def test_a_restart_that_finds_no_lower_point_on_a_flat_optimum_is_converged():
    run = lbfgs.minimize_restarting(_rounded_rosenbrock, np.zeros(5), restarts=3, gtol=1e-14, ftol=1e-12)
    assert run.result.stop == "flat" and run.result.converged and run.restarts >= 1, run.result.message
    assert "flat optimum" in run.result.message
    np.testing.assert_allclose(run.result.x, 1.0, atol=1e-4)


def test_a_failed_line_search_without_a_restart_or_at_the_start_stays_a_failure():
    once = lbfgs.minimize_restarting(_rounded_rosenbrock, np.zeros(5), restarts=0, gtol=1e-14, ftol=1e-12)
    assert once.result.stop == "line_search" and not once.result.converged
    never = lbfgs.minimize_restarting(lambda x: (float(x @ x), -np.ones_like(x)), np.zeros(2), restarts=3)
    assert never.result.stop == "line_search" and not never.result.converged
