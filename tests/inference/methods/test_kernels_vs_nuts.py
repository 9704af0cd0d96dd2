"""gibbs and Stan's NUTS agree on the hyperparameters of GP regressions with the rational quadratic, polynomial,
Gibbs (input-dependent length-scale) and warped-input kernels (issue 36's acceptance, slow tier).

Thirty noisy points drawn from each model's kernel at fixed hyperparameters, inputs in ``(0, 1)`` (``(-1, 1)``
for the polynomial trend). Both samplers target the same posterior: for each hyperparameter the posterior means
differ by less than four combined Monte Carlo standard errors, and both runs have converged (split R-hat below
1.01 and a bulk ESS of at least 400 for every hyperparameter, no NUTS divergence). gibbs updates the
hyperparameters by slice sampling with surrogate data (SURR-slice).
"""

import time

import numpy as np
import pytest

from gpdsl.api import check_text, run
from gpdsl.kernels import Gibbs, Matern52, Polynomial, RationalQuadratic, Warp
from gpdsl.results.arviz_compat import ess, groups, rhat
from gpdsl.settings import GibbsSettings, NUTSSettings
from tests.inference.methods.test_pm_vs_nuts import disagreements

N = 30
REGRESSION = """
data {{ int N; vector[N] x; vector[N] y; }}
parameters {{
  {parameters}
  real<lower=0> noise ~ half_normal(0.3);
}}
model {{
  f ~ gp(x, {kernel});
  y ~ normal(f, noise);
}}
"""
# a quadratic trend (polynomial of degree 2) plus rational-quadratic fluctuations
TREND_AND_FLUCTUATIONS = REGRESSION.format(
    parameters="real<lower=0> s ~ lognormal(-1, 0.5);\n  real<lower=0> ell ~ lognormal(-1.5, 0.5);\n"
               "  real<lower=0> alpha ~ lognormal(0, 0.5);\n  real<lower=0> v ~ lognormal(0, 0.5);\n"
               "  real<lower=0> bias ~ lognormal(0, 0.5);",
    kernel="s * rational_quadratic(lengthscale = ell, alpha = alpha) + polynomial(v, bias, 2)")
# a length-scale that grows along x: l(x) = ell exp(slope x)
GROWING_LENGTHSCALE = REGRESSION.format(
    parameters="real<lower=0> s ~ lognormal(0, 0.5);\n  real<lower=0> ell ~ lognormal(-2, 0.5);\n"
               "  real slope ~ normal(0, 1.5);",
    kernel="gibbs(s, ell, slope)")
# a Matérn-5/2 process on inputs warped by the Kumaraswamy CDF 1 - (1 - x^a)^b
WARPED_INPUT = REGRESSION.format(
    parameters="real<lower=0> s ~ lognormal(0, 0.5);\n  real<lower=0> ell ~ lognormal(-1, 0.5);\n"
               "  real<lower=0> a ~ lognormal(0, 0.5);\n  real<lower=0> b ~ lognormal(0, 0.5);",
    kernel="warp(s * matern52(lengthscale = ell), a, b)")

CASES = {
    "rational_quadratic_plus_polynomial": (
        TREND_AND_FLUCTUATIONS, (-1, 1), 0.4 * RationalQuadratic(1.0, 0.2, 1.0) + Polynomial(1.0, 1.0, 2),
        ["s", "ell", "alpha", "v", "bias", "noise"]),
    "gibbs": (GROWING_LENGTHSCALE, (0, 1), Gibbs(1.0, 0.1, 2.0), ["s", "ell", "slope", "noise"]),
    "warp": (WARPED_INPUT, (0, 1), Warp(Matern52(1.0, 0.3), 3.0, 1.0), ["s", "ell", "a", "b", "noise"]),
}
# SURR-slice with the surrogate noise at the data's noise variance: the default SURR (S = 1) mixes the kernel's
# hyperparameters of these low-noise regressions slowly (bulk ESS under 100 in 16000 draws for the gibbs case)
GIBBS = GibbsSettings(chains=4, warmup=1000, draws=6000, theta_update="surr_slice", surrogate_variance=0.01)


def kernel_data(kernel, interval, seed=7, noise=0.1):
    """``N`` inputs uniform on ``interval``, a draw of ``f`` from ``kernel`` there and noisy outputs."""
    rng = np.random.default_rng(seed)
    x = np.sort(rng.uniform(*interval, N))
    K = np.asarray(kernel(x)) + 1e-8 * np.eye(N)
    f = np.linalg.cholesky(K) @ rng.normal(size=N)
    return {"N": N, "x": x, "y": f + noise * rng.normal(size=N)}


def convergence_problems(results, names, who):
    """Each hyperparameter element with split R-hat of 1.01 or more, or a bulk ESS below 400."""
    posterior = groups(results)["posterior"]
    problems = []
    for name in names:
        worst_rhat = float(np.max(rhat(posterior, [name])[name].values))
        least_ess = float(np.min(ess(posterior, [name])[name].values))
        print(f"{who} {name:6} r_hat {worst_rhat:.4f} ess_bulk {least_ess:7.0f}")
        if not (worst_rhat < 1.01 and least_ess >= 400):
            problems.append(f"{who} {name}: r_hat {worst_rhat:.4f}, ess_bulk {least_ess:.0f}")
    return problems


@pytest.mark.slow
@pytest.mark.parametrize("case", list(CASES))
def test_gibbs_agrees_with_nuts_on_a_kernel(case):
    model_text, interval, kernel, names = CASES[case]
    model, _ = check_text(model_text)
    data = kernel_data(kernel, interval)
    start = time.perf_counter()
    gibbs = run(model, data, "gibbs", GIBBS, seed=5)
    middle = time.perf_counter()
    nuts = run(model, data, "nuts", NUTSSettings(chains=4, warmup=1000, draws=1000, adapt_delta=0.95), seed=6)
    print(f"\n{case}: gibbs {middle - start:.0f} s, NUTS {time.perf_counter() - middle:.0f} s")
    problems = convergence_problems(gibbs, names, "gibbs") + convergence_problems(nuts, names, "NUTS")
    divergent = int(np.sum(np.asarray(groups(nuts)["sample_stats"]["diverging"])))
    assert not problems and divergent == 0, f"not converged: {problems}, {divergent} NUTS divergences"
    failures = disagreements(gibbs, nuts, names)
    assert not failures, f"posterior means differ by more than 4 combined MCSEs for {failures}"
