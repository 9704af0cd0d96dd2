"""The simulation-based calibration of every exact engine: one :class:`SBCCase` per engine and setting, in
:data:`CASES`.

Each case says what to run (method, settings, model, fixed inputs, replicates, seed); :func:`run_case` runs it with
:func:`~gpdsl.testing.sbc.run_sbc`. ``tests/test_sbc.py`` runs every case (slow mark) and asserts that it passes
(:meth:`~gpdsl.testing.sbc.SBCResult.passes` at 0.001, Bonferroni over both tests of every element);
:mod:`gpdsl.testing.sbc_report` runs them and writes ``docs/validation``.

``mcmc-ep`` and ``ep-ml`` are approximate (EP's marginal likelihood stands in for the exact one), so they have no
case: their ranks are not expected to be uniform.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from gpdsl.ir.nodes import Model
from gpdsl.settings import (
    GibbsSettings,
    NUTSSettings,
    PMGPLVMSettings,
    PseudoMarginalSettings,
    SequentialSettings,
)
from gpdsl.testing.sbc import EngineFit, SBCResult, run_sbc
from gpdsl.testing.sbc_fits import GPLVMFit, RunFit

MODELS = Path(__file__).resolve().parents[2] / "models"
"""The example models of a source checkout."""

N_CLASSIFICATION = 20

LOGNORMAL_CLASSIFICATION = """
data { int N; matrix[N, 1] X; array[N] int<lower=0, upper=1> y; }
parameters {
  real<lower=0> sigma ~ lognormal(1.5, 0.8);
  real<lower=0> tau ~ lognormal(0, 0.75);
}
model {
  f ~ gp(X, sigma * rbf(lengthscale = tau));
  y ~ bernoulli_probit(f);
}
"""
"""Probit classification with lognormal priors: the z-space updates (SDSS, fixed-nu) need Gaussian priors on the
unconstrained scale."""

FIXED_SEQUENTIAL = """
data {
  int T;
  int N;
  vector[T] t;
  array[T] matrix[N, 2] X;
  vector<lower=0>[4] kappa;
  vector[2] alpha;
  array[T] vector[N] y;
}
model {
  f ~ gp((t, X), kappa[4]^2 * rbf(t, lengthscale = kappa[3]) * rbf(X, lengthscale = kappa[1:2]));
  for (i in 1:T) {
    y[i] ~ normal(f[i] + alpha[1], alpha[2]);
  }
}
"""
"""``models/sequential_latent_gp.gpm`` with its hyperparameters ``kappa`` and ``alpha`` given as data (held fixed)."""


@dataclass(frozen=True)
class ModelSetup:
    """A model and its fixed inputs for SBC.

    Attributes
    ----------
    label : str
        What the documentation calls it.
    source : str
        Model text, or a file name under ``models/``.
    data : callable
        ``data() -> dict``: sizes, inputs, fixed values and placeholders of the observed data.
    """

    label: str
    source: str
    data: Callable[[], dict]

    def load(self) -> Model:
        """The checked model."""
        from gpdsl.api import check_text, load_model

        if "{" in self.source:
            return check_text(self.source)[0]
        path = MODELS / self.source
        if not path.is_file():
            raise FileNotFoundError(f"{path}: the SBC cases read the example models of a source checkout")
        return load_model(path)


def classification_data(n: int = N_CLASSIFICATION, with_d: bool = True) -> dict:
    """``n`` evenly spaced inputs on ``[0, 1]`` and placeholder labels."""
    data = {"N": n, "X": np.linspace(0.0, 1.0, n)[:, None], "y": np.zeros(n, int)}
    return {**data, "D": 1} if with_d else data


def sequential_data(steps: int = 3, n: int = 4) -> dict:
    """``steps`` times on ``[0, 1]``, the same ``n`` uniform inputs on the unit square at each, and the paper's
    noise and mean with short length-scales (Tegner et al. 2018, Sec. 4.1, scaled down)."""
    X = np.random.default_rng(0).uniform(size=(n, 2))
    return {"T": steps, "N": n, "t": np.linspace(0.0, 1.0, steps), "X": np.tile(X, (steps, 1, 1)),
            "kappa": np.array([0.5, 0.5, 0.5, 1.0]), "alpha": np.array([0.5, 0.3]), "y": np.zeros((steps, n))}


def gplvm_data(n: int = 8, d: int = 2, q: int = 1) -> dict:
    """Times ``1..n`` and placeholder outputs ``(n, d)``, ``q`` latent dimensions."""
    return {"N": n, "D": d, "Q": q, "t": np.arange(1.0, n + 1), "Y": np.zeros((n, d))}


HSGP_POISSON = """
data { int N; vector[N] t; array[N] int<lower=0> y; }
parameters {
  real mu ~ normal(0, 1);
  real<lower=0> sigma ~ half_normal(1);
  real<lower=0> ell ~ inv_gamma(5, 5);
}
model {
  f ~ gp(t, square(sigma) * matern32(lengthscale = ell), mean = mu, approx = hsgp(m = 20, c = 1.5));
  y ~ poisson_log(f);
}
"""
"""Poisson counts on a Hilbert-space approximate GP (``models/gp_hsgp.gpm`` with 20 basis functions): gibbs samples
its weights by ESS, pm integrates them out by importance sampling from their Laplace approximation."""


def hsgp_data(n: int = 20) -> dict:
    """``n`` evenly spaced times on ``[0, 10]`` and placeholder counts."""
    return {"N": n, "t": np.linspace(0.0, 10.0, n), "y": np.zeros(n, int)}


STATE_SPACE_POISSON = """
data { int N; vector[N] t; array[N] int<lower=0> y; }
parameters {
  real mu ~ normal(0, 1);
  real<lower=0> sigma ~ half_normal(1);
  real<lower=0> ell ~ inv_gamma(5, 5);
}
model {
  f ~ gp(t, square(sigma) * matern32(lengthscale = ell), mean = mu, approx = state_space);
  y ~ poisson_log(f);
}
"""
"""Poisson counts on a latent state-space GP (Matern-3/2, sampled through its innovations ``f_z``): pm integrates
``f`` out by importance sampling from its Laplace approximation by Kalman smoothing."""


def state_space_data(n: int = 20) -> dict:
    """``n`` irregular times on ``[0, 10]`` (a fixed draw, one time twice) and placeholder counts."""
    t = np.sort(np.random.default_rng(1).uniform(0.0, 10.0, n))
    t[5] = t[4]
    return {"N": n, "t": t, "y": np.zeros(n, int)}


STATE_SPACE_GROUPS_POISSON = """
data { int N; vector[N] t; vector[N] series; array[N] int<lower=0> y; }
parameters {
  real mu ~ normal(0, 1);
  real<lower=0> sigma ~ half_normal(1);
  real<lower=0> ell ~ inv_gamma(5, 5);
}
model {
  f ~ gp((t, series), square(sigma) * matern32(t, lengthscale = ell) * same(series), mean = mu,
         approx = state_space);
  y ~ poisson_log(f);
}
"""
"""Poisson counts on independent series that share one latent state-space GP's kernel (``same(series)``): the state
restarts at each series' first time."""


def series_data(series: int = 2, n: int = 10) -> dict:
    """``series`` series of ``n`` irregular times each on ``[0, 10]`` (fixed draws) and placeholder counts."""
    rng = np.random.default_rng(2)
    t = np.concatenate([np.sort(rng.uniform(0.0, 10.0, n)) for _ in range(series)])
    return {"N": t.size, "t": t, "series": np.repeat(np.arange(1.0, series + 1.0), n), "y": np.zeros(t.size, int)}


def daily_data(n: int = 28) -> dict:
    """``n`` consecutive days and placeholder outputs (``models/gp_state_space.gpm``)."""
    return {"N": n, "t": np.arange(n, dtype=float), "y": np.zeros(n)}


def grid_data(times: int = 4, places: int = 5) -> dict:
    """A full ``times x places`` grid at unit spacing (rows time-major), no exposure, placeholder counts."""
    t, x = (a.ravel().astype(float) for a in np.meshgrid(np.arange(times), np.arange(places), indexing="ij"))
    return {"N": t.size, "t": t, "x": x, "log_exposure": np.zeros(t.size), "y": np.zeros(t.size, int)}


SETUPS = {
    "classification": ModelSetup(f"probit classification, `models/gp_classification.gpm`, N = {N_CLASSIFICATION}, "
                                 "D = 1 (gamma priors)", "gp_classification.gpm", classification_data),
    "classification-lognormal": ModelSetup(f"probit classification, N = {N_CLASSIFICATION}, D = 1, lognormal "
                                           "priors", LOGNORMAL_CLASSIFICATION,
                                           lambda: classification_data(with_d=False)),
    "sequential-fixed": ModelSetup("`models/sequential_latent_gp.gpm` with kappa, alpha given (fixed), T = 3, N = 4",
                                   FIXED_SEQUENTIAL, sequential_data),
    "hsgp-poisson": ModelSetup("Poisson counts on an HSGP (`models/gp_hsgp.gpm` with m = 20), N = 20",
                               HSGP_POISSON, hsgp_data),
    "state-space-poisson": ModelSetup("Poisson counts on a latent state-space GP (Matern-3/2, `approx = state_space`), "
                                      "N = 20 irregular times", STATE_SPACE_POISSON, state_space_data),
    "state-space-groups-poisson": ModelSetup("Poisson counts on two series of 10 irregular times sharing a latent "
                                             "state-space GP's kernel (Matern-3/2 `* same(series)`), N = 20",
                                             STATE_SPACE_GROUPS_POISSON, series_data),
    "state-space-normal": ModelSetup("a daily series on a state-space GP under a normal likelihood (trend + weekly, "
                                     "`models/gp_state_space.gpm`), N = 28 days", "gp_state_space.gpm", daily_data),
    "grid-poisson": ModelSetup("Poisson counts on a 4 x 5 space-time grid (`models/gp_grid_poisson.gpm`, "
                               "`rbf(t) * matern32(x)`), N = 20", "gp_grid_poisson.gpm", grid_data),
    "dynamical-gplvm": ModelSetup("`models/dynamical_gplvm.gpm`, N = 8, D = 2, Q = 1", "dynamical_gplvm.gpm",
                                  gplvm_data),
}


@dataclass(frozen=True)
class SBCCase:
    """One engine, its settings and a model, calibrated by :func:`~gpdsl.testing.sbc.run_sbc`.

    Attributes
    ----------
    name : str
        Identifier (test id, file names in ``docs/validation``).
    method : str
        The method (``gpdsl sample --method``).
    settings : dataclass
        Its settings, chains and their lengths included.
    setup : str
        Key of :data:`SETUPS`.
    replicates : int
        Simulated data sets.
    seed : int
        Seed of the simulations and the fits.
    fit : {"engine", "gplvm", "run"}
        How the replicates are fitted: :class:`~gpdsl.testing.sbc.EngineFit` (latent-GP chain methods, one compiled
        loop), :class:`~gpdsl.testing.sbc_fits.GPLVMFit` (``pm-gplvm``, one compiled loop) or
        :class:`~gpdsl.testing.sbc_fits.RunFit` (one :func:`gpdsl.api.run` per replicate).
    posterior_draws : int
        ``L``, the draws each truth is ranked among.
    parameters : tuple of str, optional
        Variables checked (default all parameters).
    fixed : dict, optional
        Values held fixed in the simulation (:func:`~gpdsl.testing.sbc.run_sbc`).
    note : str
        A line about the case, kept in its record (``docs/validation/NAME.json``).
    vectorise : bool
        An :class:`~gpdsl.testing.sbc.EngineFit` steps all chains at once (``vmap``; see its ``vectorise``).
    """

    name: str
    method: str
    settings: Any
    setup: str
    replicates: int
    seed: int
    fit: str = "engine"
    posterior_draws: int = 50
    parameters: tuple[str, ...] | None = None
    fixed: dict | None = None
    note: str = ""
    vectorise: bool = False

    def make_fit(self):
        """The ``fit`` of :func:`~gpdsl.testing.sbc.run_sbc`."""
        if self.fit == "run":
            return RunFit(self.method, self.settings)
        chains = {name: getattr(self.settings, name) for name in ("chains", "warmup", "draws")}
        if self.fit == "gplvm":
            return GPLVMFit(settings=self.settings, **chains)
        return EngineFit(self.method, self.settings, vectorise=self.vectorise, **chains)

    def settings_text(self) -> str:
        """The settings that name the engine (:data:`SHOWN`) or differ from the method's defaults, ``name=value``
        separated by commas."""
        default = type(self.settings)()
        shown = {f.name: getattr(self.settings, f.name) for f in dataclasses.fields(self.settings)
                 if f.name in SHOWN or getattr(self.settings, f.name) != getattr(default, f.name)}
        return ", ".join(f"{name}={value}" for name, value in shown.items())


SHOWN = ("chains", "warmup", "draws", "theta_update", "approximation", "proposal", "scheme", "states", "window")
"""Settings the documentation always shows."""


def _gibbs(update: str, warmup: int = 200, draws: int = 400, **options) -> GibbsSettings:
    return GibbsSettings(theta_update=update, repeat_f=5, repeat_theta=5, chains=2, warmup=warmup, draws=draws,
                         **options)


def _pm(approximation: str, warmup: int = 200, draws: int = 400) -> PseudoMarginalSettings:
    return PseudoMarginalSettings(approximation=approximation, num_importance=4, chains=2, warmup=warmup, draws=draws)


CASES = (
    SBCCase("gibbs-surr", "gibbs", _gibbs("surr"), "classification", 400, 11),
    SBCCase("pm-ep", "pm", _pm("ep"), "classification", 400, 12),
    SBCCase("pm-laplace", "pm", _pm("laplace"), "classification", 400, 13),
    SBCCase("gibbs-sa", "gibbs", _gibbs("sa", warmup=500, draws=4000), "classification", 400, 14,
            note="SA mixes slowly (the length-scale's ESS is about 3 per 1000 iterations), hence the long chains"),
    SBCCase("gibbs-aa", "gibbs", _gibbs("aa", draws=1500), "classification", 400, 15),
    SBCCase("gibbs-surr-slice", "gibbs", _gibbs("surr_slice"), "classification", 400, 16),
    SBCCase("gibbs-sdss", "gibbs", _gibbs("sdss"), "classification-lognormal", 400, 17),
    SBCCase("gibbs-fixed-nu", "gibbs", _gibbs("fixed_nu"), "classification-lognormal", 400, 18),
    SBCCase("sequential-fixed", "sequential",
            SequentialSettings(states=200, window=2, burn_in=200, thin=5, repeat_f=10, final_repeat_f=10),
            "sequential-fixed", 200, 19, fit="run", parameters=("f",),
            note="hyperparameters fixed (given as data); each f[t, n] checked, step t conditioning on y[1:t]"),
    SBCCase("pm-gplvm", "pm-gplvm",
            PMGPLVMSettings(num_importance=64, laplace_starts=2, g0=150, chains=2, warmup=300, draws=1000),
            "dynamical-gplvm", 200, 20, fit="gplvm", note="the hyperparameters' posterior (latent inputs integrated)"),
    SBCCase("gibbs-hsgp", "gibbs", _gibbs("surr", draws=1000), "hsgp-poisson", 200, 22,
            note="ESS on the basis weights of a Hilbert-space approximate GP"),
    SBCCase("pm-hsgp", "pm", _pm("laplace", warmup=300, draws=1000), "hsgp-poisson", 200, 23,
            note="importance sampling from the Laplace approximation of a Hilbert-space approximate GP's basis weights"),
    SBCCase("pm-hsgp-ep", "pm", _pm("ep", warmup=300, draws=1000), "hsgp-poisson", 200, 36,
            note="importance sampling from EP on a Hilbert-space approximate GP's basis weights"),
    SBCCase("pm-state-space", "pm", _pm("laplace", warmup=300, draws=1000), "state-space-poisson", 200, 31,
            note="importance sampling of a state-space GP's innovations from the Laplace approximation by Kalman "
                 "smoothing", vectorise=True),
    SBCCase("gibbs-state-space", "gibbs", _gibbs("surr", draws=1000), "state-space-poisson", 200, 32,
            note="ESS on a state-space GP's innovations, f by the state recursion"),
    SBCCase("pm-state-space-ep", "pm", _pm("ep", warmup=300, draws=1000), "state-space-poisson", 200, 37,
            note="importance sampling of a state-space GP's innovations from EP by Kalman smoothing", vectorise=True),
    SBCCase("gibbs-state-space-groups", "gibbs", _gibbs("surr", draws=1000), "state-space-groups-poisson", 200, 38,
            note="ESS on the innovations of independent series (same(series)), the state restarted per series"),
    SBCCase("pm-state-space-regression", "pm", _pm("laplace", warmup=300, draws=1000), "state-space-normal", 200, 35,
            note="adaptive Metropolis on the exact marginal likelihood by the Kalman filter (f integrated out)",
            vectorise=True),
    SBCCase("gibbs-grid", "gibbs", _gibbs("surr", draws=1000), "grid-poisson", 200, 33,
            note="ESS on the whitened grid vector of a separable kernel, SURR by the per-axis factors"),
    SBCCase("pm-grid", "pm", _pm("laplace", warmup=300, draws=1000), "grid-poisson", 200, 34,
            note="importance sampling of the whitened grid vector from its Kronecker Laplace approximation"),
    SBCCase("nuts", "nuts", NUTSSettings(chains=2, warmup=500, draws=500), "classification", 100, 21, fit="run"),
)
"""Every case, in the order of the documentation's table."""


def case(name: str) -> SBCCase:
    """The case called ``name``."""
    for entry in CASES:
        if entry.name == name:
            return entry
    raise KeyError(f"no SBC case '{name}'; the cases are {', '.join(c.name for c in CASES)}")


@cache
def _setup(key: str) -> tuple[Model, dict]:
    setup = SETUPS[key]
    return setup.load(), setup.data()


def run_case(entry: SBCCase, replicates: int | None = None) -> tuple[SBCResult, Any]:
    """Run one case (``replicates`` overrides its number, for a quick look).

    Returns
    -------
    result : SBCResult
    fit : object
        The fit it used (its ``timings`` or ``seconds``).
    """
    model, base_data = _setup(entry.setup)
    fit = entry.make_fit()
    result = run_sbc(model, base_data, fit, num_replicates=replicates or entry.replicates,
                     num_posterior_draws=entry.posterior_draws, seed=entry.seed,
                     parameters=list(entry.parameters) if entry.parameters else None, fixed=entry.fixed)
    return result, fit
