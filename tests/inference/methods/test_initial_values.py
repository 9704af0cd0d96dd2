"""Chains start inside every parameter's support: initial values are drawn from each prior restricted to the
declared bounds (``real<lower=0> alpha ~ normal(0, 2)`` is a half-normal), for every prior and constraint the
checker accepts, and the chain methods that start from prior draws start finite (issue 40)."""

import dataclasses

import jax
import numpy as np
import pytest
from scipy import stats

import gpdsl.numerics.float64  # noqa: F401
from gpdsl.api import check_text, run
from gpdsl.errors import ModelCheckError
from gpdsl.inference.families.latent_gp import latent_gp
from gpdsl.inference.methods.latent_chains import prior_initial_thetas
from gpdsl.priors import PRIORS
from gpdsl.registry import get_method
from tests.priors.test_priors import CASES, SCALAR_PRIORS, _frozen

NUM_CHAINS = 2000
KS_LEVEL = 1e-3  # a fixed seed; a draw that ignores a bound that cuts off 10% of the mass fails at this size

GP_PART = """
data { int N; matrix[N, 1] X; array[N] int<lower=0, upper=1> y; }
parameters { %s }
model { f ~ gp(X, rbf(lengthscale = 1.0)); y ~ bernoulli_probit(f); }
"""

HALF_PRIORS = """
data { int N; matrix[N, 1] X; array[N] int<lower=0, upper=1> y; }
parameters { real<lower=0> alpha ~ normal(0, 2); real<lower=0> ell ~ student_t(3, 0, 1); }
model { f ~ gp(X, alpha * rbf(lengthscale = ell)); y ~ bernoulli_probit(f); }
"""


def _constraint(lower, upper) -> str:
    bounds = [f"{end}={value!r}" for end, value in (("lower", lower), ("upper", upper)) if value is not None]
    return f"<{', '.join(bounds)}>" if bounds else ""


def _accepted_parameters() -> dict[str, tuple[str, str, tuple]]:
    """Every prior of the table with every constraint form (none, lower, upper, both) the checker accepts, by
    parameter name: its declaration, the prior and its arguments. Bounds lie at 0, at the prior's test points and
    at a bounded prior's own ends."""
    accepted = {}
    for index, (name, prior) in enumerate((name, PRIORS[name]) for name in SCALAR_PRIORS):
        args, points = CASES[name]
        ends = dict(zip(prior.params, args))
        lowers = sorted({0.0, points[1], ends.get("lower", 0.0)})
        uppers = sorted({points[1], points[2], ends.get("upper", points[2])})
        forms = ([(None, None)] + [(a, None) for a in lowers] + [(None, b) for b in uppers]
                 + [(a, b) for a in lowers for b in uppers if a < b])
        for form, (lower, upper) in enumerate(forms):
            parameter = f"p{index}_{form}"
            declaration = f"real{_constraint(lower, upper)} {parameter} ~ {name}({', '.join(map(repr, args))});"
            try:
                check_text(GP_PART % declaration)
            except ModelCheckError:
                continue
            accepted[parameter] = (declaration, name, args)
    return accepted


@pytest.fixture(scope="module")
def every_combination():
    accepted = _accepted_parameters()
    model, _ = check_text(GP_PART % " ".join(declaration for declaration, _, _ in accepted.values()))
    X = np.linspace(-1.0, 1.0, 3)[:, None]
    problem = latent_gp(model, {"N": 3, "X": X, "y": np.array([0, 1, 1])}, "pm")
    thetas = prior_initial_thetas(problem, jax.random.PRNGKey(0), NUM_CHAINS)
    values = jax.vmap(lambda theta: problem.constrain(theta)[0])(thetas)
    draws = {name: np.asarray(values[name]) for name in problem.theta_names}
    return model, problem, accepted, np.asarray(thetas), draws


def test_every_prior_and_constraint_form_is_covered(every_combination):
    model = every_combination[0]
    forms = {(statement.distribution.name, model.parameters[statement.target.name].type.lower is not None,
              model.parameters[statement.target.name].type.upper is not None)
             for statement in model.priors().values()}
    assert {name for name, _, _ in forms} == set(SCALAR_PRIORS)
    for name, prior in ((name, PRIORS[name]) for name in SCALAR_PRIORS):
        expected = ({(True, True)} if prior.support in ("bounded", "unit") else
                    {(True, False), (True, True)} if prior.support == "positive" else
                    {(False, False), (True, False), (False, True), (True, True)})
        assert {(lower, upper) for n, lower, upper in forms if n == name} == expected, name


def test_initial_values_follow_the_restricted_priors(every_combination):
    _, problem, accepted, thetas, values = every_combination
    assert np.isfinite(thetas).all()
    for block in problem.theta_blocks:
        draws = values[block.name]
        lower = -np.inf if block.lower is None else float(block.lower)
        upper = np.inf if block.upper is None else float(block.upper)
        assert np.all((draws > lower) & (draws < upper)), block.name
        _, name, args = accepted[block.name]
        _, cdf, _ = _frozen(name, args)
        assert stats.kstest(draws, _restricted(cdf, lower, upper)).pvalue > KS_LEVEL, (name, lower, upper)


def _restricted(cdf, lower, upper):
    """The CDF ``cdf`` restricted to ``(lower, upper)``."""
    low = cdf(lower) if lower > -np.inf else 0.0
    high = cdf(upper) if upper < np.inf else 1.0
    return lambda x: (cdf(x) - low) / (high - low)


def test_initial_cholesky_factors_are_lkj_draws():
    """The chains of a cholesky_factor_corr[3] start at draws of its LKJ prior: each correlation of L L' is
    2 Beta(b, b) - 1 with b = eta + 1/2."""
    model, _ = check_text(GP_PART % "cholesky_factor_corr[3] C ~ lkj_corr_cholesky(2);")
    X = np.linspace(-1.0, 1.0, 3)[:, None]
    problem = latent_gp(model, {"N": 3, "X": X, "y": np.array([0, 1, 1])}, "pm")
    thetas = prior_initial_thetas(problem, jax.random.PRNGKey(2), NUM_CHAINS)
    L = np.asarray(jax.vmap(lambda theta: problem.constrain(theta)[0]["C"])(thetas))
    R = np.einsum("nij,nkj->nik", L, L)
    for i, j in ((0, 1), (0, 2), (1, 2)):
        assert stats.kstest((1 + R[:, i, j]) / 2, stats.beta(2.5, 2.5).cdf).pvalue > KS_LEVEL, (i, j)


def test_initial_simplexes_are_dirichlet_draws():
    """The chains of a simplex[3] start at draws of its Dirichlet prior: entry k is Beta(alpha_k, sum - alpha_k)."""
    alpha = np.array([0.5, 2.0, 3.0])
    model, _ = check_text(GP_PART % "simplex[3] w ~ dirichlet([0.5, 2, 3]);")
    X = np.linspace(-1.0, 1.0, 3)[:, None]
    problem = latent_gp(model, {"N": 3, "X": X, "y": np.array([0, 1, 1])}, "pm")
    thetas = prior_initial_thetas(problem, jax.random.PRNGKey(4), NUM_CHAINS)
    w = np.asarray(jax.vmap(lambda theta: problem.constrain(theta)[0]["w"])(thetas))
    np.testing.assert_allclose(w.sum(axis=1), 1.0, rtol=1e-12)
    for k in range(3):
        assert stats.kstest(w[:, k], stats.beta(alpha[k], alpha.sum() - alpha[k]).cdf).pvalue > KS_LEVEL, k


def test_given_initial_values_win():
    model, _ = check_text(HALF_PRIORS)
    X = np.linspace(-1.0, 1.0, 3)[:, None]
    problem = latent_gp(model, {"N": 3, "X": X, "y": np.array([0, 1, 1])}, "pm")
    thetas = prior_initial_thetas(problem, jax.random.PRNGKey(1), 5, {"alpha": 0.25})
    values = jax.vmap(lambda theta: problem.constrain(theta)[0])(thetas)
    np.testing.assert_allclose(values["alpha"], 0.25, rtol=1e-12)
    assert np.all(np.asarray(values["ell"]) > 0) and np.unique(np.asarray(values["ell"])).size == 5


@pytest.mark.parametrize("method, seed", [("gibbs", 0), ("pm", 1), ("mcmc-ep", 2)])
def test_chains_on_half_priors_start_finite(method, seed):
    """16 chains from prior draws: before the fix about three quarters started at NaN (a negative draw of a
    parameter declared <lower=0>), so a run of 16 failed with any seed."""
    model, _ = check_text(HALF_PRIORS)
    X = np.linspace(-2.0, 2.0, 6)[:, None]
    data = {"N": 6, "X": X, "y": (X[:, 0] > 0).astype(int)}
    settings = dataclasses.replace(get_method(method).settings(), chains=16, warmup=1, draws=1)
    results = run(model, data, method, settings, seed=seed)
    for name in ("alpha", "ell"):
        draws = np.asarray(results["posterior"][name])
        assert draws.shape == (16, 1) and np.all(np.isfinite(draws)) and np.all(draws > 0)
