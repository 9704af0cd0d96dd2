"""Cox proportional hazards with a GP log hazard as Poisson counts: the piecewise-exponential expansion of
:func:`gpdsl.data.survival.piecewise_exponential_rows` gives, under ``poisson_log(log_exposure + eta)``, the
survival log likelihood of the piecewise-constant hazard at fixed ``f`` (up to the constant
``sum d log e``), with the cumulative hazard integrated by scipy.integrate.quad; and the documented model checks
and compiles."""

import re
from pathlib import Path

import jax.numpy as jnp

import numpy as np
import pytest
from scipy import integrate

import gpdsl.numerics.float64  # noqa: F401  (the reference is float64)
from gpdsl.api import check_text
from gpdsl.backends.stan.codegen import generate_stan
from gpdsl.backends.stan.stanc import check_program
from gpdsl.data.survival import piecewise_exponential_rows
from gpdsl.errors import DataError
from gpdsl.likelihoods import LIKELIHOODS

CUTS = np.array([0.5, 1.0, 2.0])


def survival_log_likelihood(time, event, f, log_baseline):
    """sum_i event_i log h_i(t_i) - int_0^t_i h_i(u) du for h_i(u) = exp(log_baseline[piece(u)] + f_i), pieces
    (s_{j-1}, s_j], the integral by quadrature."""
    edges = np.concatenate([[0.0], CUTS, [np.inf]])

    def log_hazard(u, i):
        return log_baseline[max(int(np.searchsorted(edges, u, side="left")) - 1, 0)] + f[i]

    total = 0.0
    for i, (t, happened) in enumerate(zip(time, event)):
        cumulative = integrate.quad(lambda u: np.exp(log_hazard(u, i)), 0.0, t, points=CUTS[CUTS < t], epsabs=0,
                                    epsrel=1e-13, limit=200)[0]
        total += happened * log_hazard(t, i) - cumulative
    return total


def test_the_expanded_poisson_likelihood_is_the_piecewise_exponential_survival_likelihood():
    rng = np.random.default_rng(7)
    n = 25
    time = rng.gamma(2.0, 0.8, n)
    event = (rng.uniform(size=n) < 0.7).astype(int)
    f = rng.normal(0.0, 0.8, n)
    log_baseline = rng.normal(-0.5, 0.5, CUTS.size + 1)
    rows = piecewise_exponential_rows(time, event, CUTS)
    np.testing.assert_allclose(np.bincount(rows["subject"] - 1, weights=rows["exposure"]), time, rtol=1e-14)
    assert np.array_equal(np.bincount(rows["subject"] - 1, weights=rows["event"]), event)
    eta = rows["log_exposure"] + log_baseline[rows["piece"] - 1] + f[rows["subject"] - 1]
    poisson = float(jnp.sum(LIKELIHOODS["poisson_log"].log_density(jnp.asarray(rows["event"], dtype=float),
                                                                   jnp.asarray(eta))))
    constant = float(np.sum(rows["event"] * rows["log_exposure"]))
    direct = survival_log_likelihood(time, event, f, log_baseline)
    assert poisson == pytest.approx(direct + constant, rel=1e-11, abs=1e-10)
    other = f + rng.normal(0.0, 0.5, n)  # the constant does not depend on f: the same difference elsewhere
    eta = rows["log_exposure"] + log_baseline[rows["piece"] - 1] + other[rows["subject"] - 1]
    assert float(jnp.sum(LIKELIHOODS["poisson_log"].log_density(jnp.asarray(rows["event"], dtype=float),
                                                                jnp.asarray(eta)))) == pytest.approx(
        survival_log_likelihood(time, event, other, log_baseline) + constant, rel=1e-11, abs=1e-10)


@pytest.mark.parametrize("time, event, cuts, message", [
    ([1.0, -2.0], [1, 0], CUTS, r"time must be positive and finite: time\[2\] = -2"),
    ([1.0, 2.0], [1, 3], CUTS, r"event must be 0 \(censored\) or 1: event\[2\] = 3"),
    ([1.0, 2.0], [1, 0], [1.0, 0.5], "cuts must increase from above 0"),
    ([1.0, 2.0], [1], CUTS, "time and event must be vectors of one length"),
])
def test_bad_survival_data_are_named(time, event, cuts, message):
    with pytest.raises(DataError, match=message):
        piecewise_exponential_rows(time, event, cuts)


def test_the_documented_cox_model_checks_and_compiles():
    text = Path("docs/language.md").read_text()
    section = text[text.index("### Survival models"):]
    model = re.search(r"```stan\n(data \{.*?)```", section, re.S).group(1)
    checked, _ = check_text(model)
    check_program(generate_stan(checked).code, "cox")
