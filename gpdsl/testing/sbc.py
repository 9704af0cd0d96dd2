"""Simulation-based calibration (Talts, Betancourt, Simpson, Vehtari & Gelman 2018).

Each replicate draws "true" parameters from the prior and data given them (:func:`simulate`),
fits the model to the data with the sampler under test, and records the rank of the truth among
roughly independent posterior draws. If the sampler draws from the exact posterior, the rank of
each scalar parameter element is uniform on ``{0, ..., L}`` whatever the model, so non-uniform
ranks point at a bug in the sampler, the simulator or the model's lowering.

What the check sees and what it misses:

* it tests the posterior averaged over the prior predictive distribution; errors confined to rare
  data sets, or to parameter regions of little prior mass, pass unnoticed;
* only the marginal of each element is tested, not the joint posterior;
* a sampler that ignores the data and returns prior draws is calibrated too: SBC detects
  wrong posteriors, not uninformative ones;
* autocorrelated draws make ranks non-uniform even for a correct sampler (too many extreme
  ranks), so draws are thinned by the effective sample size, itself an estimate; chains that
  have not converged from their initial values fail the check as a bug would;
* with ``R`` replicates only deviations of order ``1 / sqrt(R)`` in the rank distribution are
  detectable; p-values are from chi-square (binned) and Kolmogorov-Smirnov tests of the
  normalised ranks, and the bound applied should be corrected for the number of tests.

Ranks are normalised as ``(rank + U) / (L + 1)`` with ``U ~ Uniform(0, 1)``, which is exactly
uniform on ``(0, 1)`` under calibration even when ``L`` varies between replicates (after thinning
by the ESS) or ties occur.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
import xarray as xr
from jax import lax
from scipy import stats

from gpdsl.backends.jax.lowering import lower
from gpdsl.backends.jax.simulate import simulate
from gpdsl.ir.nodes import Model
from gpdsl.results.arviz_compat import ess as arviz_ess
from gpdsl.results.arviz_compat import groups, is_container

THINNING = ("ess", "none")


@dataclass
class SBCResult:
    """Ranks of the true values among posterior draws, one row per replicate.

    Attributes
    ----------
    element_names : list of str
        Scalar parameter elements (``"sigma"``, ``"tau[1]"``, ... with 1-based indices).
    ranks : numpy.ndarray of int, shape (replicates, elements)
        Number of kept posterior draws below the truth (ties split at random).
    num_draws : numpy.ndarray of int, shape (replicates, elements)
        ``L``, the number of kept posterior draws (the rank lies in ``0..L``).
    normalised_ranks : numpy.ndarray, shape (replicates, elements)
        ``(rank + U) / (L + 1)``, uniform on ``(0, 1)`` under calibration.
    ess : numpy.ndarray, shape (replicates, elements)
        Bulk effective sample size of each element's posterior draws (NaN when not thinned by ESS).
    num_posterior_draws : int
        The requested ``L``.
    seconds : float
        Wall time of the whole run (simulation, fits and ranking).
    info : dict
        Anything else the run recorded (e.g. the fitting function's timings).
    """

    element_names: list[str]
    ranks: np.ndarray
    num_draws: np.ndarray
    normalised_ranks: np.ndarray
    ess: np.ndarray
    num_posterior_draws: int
    seconds: float = float("nan")
    info: dict = field(default_factory=dict)

    @property
    def num_replicates(self) -> int:
        """Number of replicates."""
        return int(self.ranks.shape[0])

    def default_bins(self) -> int:
        """Bins for the chi-square test: about 10 expected counts per bin, between 4 and 20."""
        return int(min(20, max(4, self.num_replicates // 10)))

    def uniformity(self, bins: int | None = None) -> pd.DataFrame:
        """Tests of uniformity of the normalised ranks, one row per element.

        Parameters
        ----------
        bins : int, optional
            Equal-width bins on ``(0, 1)`` for the chi-square test (default :meth:`default_bins`).

        Returns
        -------
        pandas.DataFrame
            Indexed by element, with ``chi2_pvalue`` (Pearson's test of the binned counts against
            equal expected counts), ``ks_pvalue`` (Kolmogorov-Smirnov against Uniform(0, 1)),
            ``mean_draws`` (mean ``L``) and ``low_ess_fraction`` (replicates with fewer kept draws
            than requested, because the ESS was lower).
        """
        bins = bins or self.default_bins()
        rows = {}
        for j, name in enumerate(self.element_names):
            u = self.normalised_ranks[:, j]
            counts = bin_counts(u, bins)
            rows[name] = {
                "chi2_pvalue": float(stats.chisquare(counts).pvalue),
                "ks_pvalue": float(stats.kstest(u, "uniform").pvalue),
                "mean_draws": float(np.mean(self.num_draws[:, j])),
                "low_ess_fraction": float(np.mean(self.num_draws[:, j] < self.num_posterior_draws)),
            }
        return pd.DataFrame.from_dict(rows, orient="index")

    def min_pvalue(self, bins: int | None = None) -> float:
        """The smallest p-value over elements and both tests."""
        table = self.uniformity(bins)
        return float(np.min(table[["chi2_pvalue", "ks_pvalue"]].to_numpy()))

    def corrected_level(self, alpha: float = 0.001) -> float:
        """``alpha`` divided by the number of tests (two per element, Bonferroni)."""
        return alpha / (2 * len(self.element_names))

    def passes(self, alpha: float = 0.001, bins: int | None = None) -> bool:
        """Whether no p-value is below the Bonferroni-corrected ``alpha``."""
        return self.min_pvalue(bins) >= self.corrected_level(alpha)

    def report(self, bins: int | None = None, width: int = 40) -> str:
        """Per-element p-values and ASCII histograms of the normalised ranks.

        Each histogram row is one bin: its range, a bar of ``#`` and its count. ``|`` marks the
        expected count under uniformity, and the header gives the central 99% binomial interval of a
        bin's count.
        """
        bins = bins or self.default_bins()
        table = self.uniformity(bins)
        expected = self.num_replicates / bins
        low, high = stats.binom.interval(0.99, self.num_replicates, 1 / bins)
        lines = [(f"SBC: {self.num_replicates} replicates, {self.num_posterior_draws} posterior draws requested, "
                 f"{bins} bins, Bonferroni level {self.corrected_level():.2e} (0.001 / {2 * len(self.element_names)})")]
        if math.isfinite(self.seconds):
            lines[0] += f", {self.seconds:.1f} s"
        for j, name in enumerate(self.element_names):
            row = table.loc[name]
            counts = bin_counts(self.normalised_ranks[:, j], bins)
            mean_ess = np.nanmean(self.ess[:, j]) if np.any(np.isfinite(self.ess[:, j])) else float("nan")
            lines.append("")
            lines.append(f"{name}: chi2 p = {row.chi2_pvalue:.3g}, KS p = {row.ks_pvalue:.3g}, mean L = "
                         f"{row.mean_draws:.1f}, mean ESS = {mean_ess:.0f}, low-ESS replicates = "
                         f"{100 * row.low_ess_fraction:.0f}%; expected {expected:.1f} per bin "
                         f"(99%: {low:.0f}-{high:.0f})")
            scale = width / max(counts.max(), high, 1)
            mark = round(expected * scale)
            for b, count in enumerate(counts):
                bar = list("#" * round(count * scale) + " " * (width + 1))[:width + 1]
                bar[mark] = "|" if bar[mark] == " " else "+"
                flag = " *" if count < low or count > high else ""
                lines.append(f"  [{b / bins:.2f}, {(b + 1) / bins:.2f}) {''.join(bar)} {count}{flag}")
        return "\n".join(lines)


def bin_counts(u: np.ndarray, bins: int) -> np.ndarray:
    """Counts of values in ``(0, 1)`` in ``bins`` equal-width bins."""
    index = np.minimum((np.asarray(u) * bins).astype(int), bins - 1)
    return np.bincount(index, minlength=bins)


def element_names(name: str, shape: tuple[int, ...]) -> list[str]:
    """Names of the scalar elements of a variable, row-major, with 1-based indices."""
    if not shape:
        return [name]
    return [f"{name}[{','.join(str(i + 1) for i in index)}]" for index in np.ndindex(*shape)]


def thin_draws(draws: np.ndarray, num_draws: int, ess: float | None = None) -> np.ndarray:
    """About ``num_draws`` roughly independent draws of one scalar, shaped ``(chain, draw)``.

    Each chain is thinned by the stride ``ceil(total / ess)`` (no thinning when ``ess`` is None),
    then at most ``num_draws`` of the pooled draws are kept, evenly spaced. Fewer are returned when
    the ESS is lower than ``num_draws``.
    """
    draws = np.atleast_2d(np.asarray(draws, dtype=float))
    stride = 1
    if ess is not None and np.isfinite(ess) and ess > 0:
        stride = max(1, math.ceil(draws.size / ess))
    pooled = np.concatenate([chain[stride - 1::stride] for chain in draws])
    if pooled.size > num_draws:
        pooled = pooled[np.round(np.linspace(0, pooled.size - 1, num_draws)).astype(int)]
    return pooled


def rank_of_truth(truth: float, draws: np.ndarray, rng: np.random.Generator) -> int:
    """Number of draws below ``truth``, ties split uniformly at random."""
    draws = np.asarray(draws)
    below = int(np.sum(draws < truth))
    equal = int(np.sum(draws == truth))
    return below + int(rng.integers(0, equal + 1))


def posterior_arrays(results: Any, names: Sequence[str]) -> dict[str, np.ndarray]:
    """Posterior draws by name, each shaped ``(chain, draw, ...)``, from results or a mapping."""
    if is_container(results):
        posterior = groups(results)["posterior"]
        return {name: np.asarray(posterior[name].transpose("chain", "draw", ...).values) for name in names}
    if isinstance(results, xr.Dataset):
        return {name: np.asarray(results[name].transpose("chain", "draw", ...).values) for name in names}
    if isinstance(results, Mapping):
        return {name: np.asarray(results[name]) for name in names}
    raise TypeError(f"cannot read posterior draws from {type(results).__name__}")


def simulate_replicates(model: Model, base_data: dict, num_replicates: int, seed: int = 0,
                        fixed: dict | None = None) -> list[tuple[dict, dict]]:
    """Truths and data sets drawn from the prior predictive distribution.

    Parameters
    ----------
    model : Model
        The checked model.
    base_data : dict
        Sizes, inputs and placeholders of the right shape for the observed data.
    num_replicates : int
        Number of draws.
    seed : int
        Random seed.
    fixed : dict, optional
        Values held fixed instead of drawn (passed to :func:`simulate`).

    Returns
    -------
    list of (truth, data)
        ``truth`` holds numpy arrays of the drawn parameters and latents; ``data`` is ``base_data``
        with the observed variables replaced by simulated values (in the placeholders' dtypes).
    """
    jax_model = lower(model, base_data)
    replicates = []
    for key in jax.random.split(jax.random.PRNGKey(seed), num_replicates):
        truth, observed = simulate(jax_model, key, fixed)
        data = dict(base_data)
        for name, value in observed.items():
            dtype = np.asarray(base_data[name]).dtype
            data[name] = np.asarray(value).astype(dtype)
        replicates.append(({k: np.asarray(v) for k, v in truth.items()}, data))
    return replicates


def run_sbc(model: Model, base_data: dict, fit: Callable, num_replicates: int = 100, num_posterior_draws: int = 50,
            seed: int = 0, parameters: Sequence[str] | None = None, thin: str = "ess",
            fixed: dict | None = None) -> SBCResult:
    """Simulation-based calibration of a sampler on a model.

    Parameters
    ----------
    model : Model
        The checked model.
    base_data : dict
        Fixed inputs (sizes, ``X``) and placeholders of the right shape and dtype for the observed data.
    fit : callable
        ``fit(model, data, seed) -> results``: results (ArviZ), a posterior ``xarray.Dataset``, or a
        mapping of name to draws shaped ``(chain, draw, ...)``. If ``fit`` also has a method
        ``fit_many(model, datasets, seed) -> list of results`` (as :class:`EngineFit`), all replicates
        are fitted in one call.
    num_replicates : int
        Number of simulated data sets.
    num_posterior_draws : int
        ``L``, the posterior draws kept per replicate and element to rank the truth among.
    seed : int
        Seed of the simulations, the fits (``seed + replicate``) and the tie-breaking.
    parameters : sequence of str, optional
        Variables to check (default all parameters of the model).
    thin : {"ess", "none"}
        ``"ess"`` thins each element's chains by its bulk ESS before keeping ``L`` evenly spaced
        draws; ``"none"`` keeps ``L`` evenly spaced draws (for independent draws).
    fixed : dict, optional
        Values held fixed in the simulation (the sampler must then hold them fixed too).

    Returns
    -------
    SBCResult
    """
    if thin not in THINNING:
        raise ValueError(f"thin must be one of {', '.join(THINNING)}, not {thin!r}")
    started = time.perf_counter()
    names = list(parameters) if parameters is not None else list(model.parameters)
    replicates = simulate_replicates(model, base_data, num_replicates, seed, fixed)
    datasets = [data for _, data in replicates]
    fit_seconds = time.perf_counter()
    if hasattr(fit, "fit_many"):
        fitted = fit.fit_many(model, datasets, seed)
    else:
        fitted = [fit(model, data, seed + i) for i, data in enumerate(datasets)]
    fit_seconds = time.perf_counter() - fit_seconds
    rng = np.random.default_rng(seed)
    labels, rows = None, []
    for (truth, _), results in zip(replicates, fitted):
        draws = posterior_arrays(results, names)
        row_labels, row = [], []
        ess = _element_ess(draws) if thin == "ess" else None
        for name in names:
            values = draws[name]
            flat_truth = np.ravel(truth[name])
            flat_draws = np.reshape(values, values.shape[:2] + (-1,))
            for k, label in enumerate(element_names(name, np.shape(truth[name]))):
                element_ess = None if ess is None else float(np.ravel(ess[name])[k])
                kept = thin_draws(flat_draws[..., k], num_posterior_draws, element_ess)
                rank = rank_of_truth(flat_truth[k], kept, rng)
                row_labels.append(label)
                row.append((rank, kept.size, np.nan if element_ess is None else element_ess))
        labels = labels or row_labels
        rows.append(row)
    table = np.asarray(rows, dtype=float)
    ranks, sizes = table[..., 0].astype(int), table[..., 1].astype(int)
    normalised = (ranks + rng.uniform(size=ranks.shape)) / (sizes + 1)
    return SBCResult(labels, ranks, sizes, normalised, table[..., 2], num_posterior_draws,
                     seconds=time.perf_counter() - started, info={"fit_seconds": fit_seconds})


def _element_ess(draws: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    variables = {name: (("chain", "draw") + tuple(f"{name}_dim_{i}" for i in range(v.ndim - 2)), v)
                 for name, v in draws.items()}
    table = arviz_ess(xr.Dataset(variables), list(draws))
    return {name: np.asarray(table[name].values) for name in draws}


@dataclass
class EngineFit:
    """A gpdsl engine as the ``fit`` of :func:`run_sbc`, compiled once for all replicates.

    Called on one data set it runs the method through :func:`gpdsl.api.run`. Its
    :meth:`fit_many` runs every replicate's chains in one compiled loop: the observed data travel in
    each chain's state, so the engine is traced and compiled once instead of once per data set (the
    inputs and sizes must be the same in every data set).

    Attributes
    ----------
    method : {"pm", "mcmc-ep", "gibbs"}
        The engine.
    settings : dataclass, optional
        The method's settings (its class in :mod:`gpdsl.registry`); its ``chains``, ``warmup`` and
        ``draws`` are replaced by the attributes below.
    chains, warmup, draws : int
        Chains per replicate, warmup and sampling iterations per chain.
    progress : bool
        Show a progress bar.
    vectorise : bool
        Step all chains at once with ``vmap`` (faster) instead of one after another with
        ``lax.map``. Off by default: batched Cholesky factorisations of many chains can deadlock
        XLA's CPU thread pool in jaxlib 0.10 (its LAPACK kernels wait on batch chunks queued to the
        pool they run on).
    timings : dict
        Set by :meth:`fit_many`: the sampling loop's timings (see
        :class:`~gpdsl.inference.driver.ChainResult`) and its ``total``.
    """

    method: str
    settings: Any = None
    chains: int = 2
    warmup: int = 200
    draws: int = 400
    progress: bool = False
    vectorise: bool = False
    timings: dict = field(default_factory=dict)

    def __call__(self, model: Model, data: dict, seed: int):
        from gpdsl.api import run

        return run(model, data, self.method, self._settings(), seed=seed, progress=self.progress)

    def _settings(self):
        from gpdsl.registry import get_method

        settings = self.settings or get_method(self.method).settings()
        return dataclasses.replace(settings, chains=self.chains, warmup=self.warmup, draws=self.draws)

    def fit_many(self, model: Model, datasets: Sequence[dict], seed: int) -> list[dict[str, np.ndarray]]:
        """Posterior draws of every data set, by parameter name, each ``(chain, draw, ...)``."""
        from gpdsl.inference.methods.latent_chains import prior_initial_thetas
        from gpdsl.registry import get_method

        settings = self._settings()
        chain_engine = get_method(self.method).chain_engine
        problem = engine_view(model, datasets[0], self.method)
        target = problem.node.likelihood.target.name
        require_same_inputs(datasets, target)
        ys = jnp.stack([jnp.asarray(data[target], dtype=float) for data in datasets])
        key_init, key_run = jax.random.split(jax.random.PRNGKey(seed))
        thetas = prior_initial_thetas(problem, key_init, len(datasets) * self.chains)

        def engine(y):
            init, step, extract = chain_engine(with_observations(problem, y), settings)
            return init, step, lambda state: extract(state)["theta"]

        theta, self.timings = batched_chains(engine, ys, thetas, key_run, self.chains, self.warmup, self.draws,
                                             self.vectorise, self.progress)
        return theta_draws(problem, theta, len(datasets), self.chains)


def batched_chains(engine: Callable, inputs, thetas, rng_key, chains: int, warmup: int, draws: int,
                   vectorise: bool = False, progress: bool = False) -> tuple[np.ndarray, dict]:
    """The chains of every replicate in one compiled loop, each replicate's data carried in its chains' states.

    Parameters
    ----------
    engine : callable
        ``engine(inputs_of_one_replicate) -> (init, step, extract)``: ``init(rng_key, theta)``,
        ``step(rng_key, state, adapting)`` and ``extract(state) -> theta`` of one chain, built on (possibly
        traced) data.
    inputs : pytree
        Each leaf with a leading replicate axis.
    thetas : jax.Array, shape (replicates * chains, d)
        Starting unconstrained hyperparameters, replicate-major.
    rng_key : jax.Array
        Key of the starts and the chains.
    chains, warmup, draws : int
        Chains per replicate, warmup and sampling iterations.
    vectorise : bool
        ``vmap`` the chains instead of ``lax.map`` (see :class:`EngineFit`).
    progress : bool
        Show a progress bar.

    Returns
    -------
    theta : numpy.ndarray, shape (replicates * chains, draws, d)
    timings : dict
        The driver's timings and their ``total``.
    """
    from gpdsl.inference.driver import run_chains

    started = time.perf_counter()
    inputs = jax.tree.map(lambda leaf: jnp.repeat(jnp.asarray(leaf), chains, axis=0), inputs)
    key_init, key_run = jax.random.split(rng_key)

    def init(key, theta, data):
        return data, engine(data)[0](key, theta)

    def step(key, state, adapting):
        data, inner = state
        inner, info = engine(data)[1](key, inner, adapting)
        return (data, inner), info

    def extract(state):
        return engine(state[0])[2](state[1])

    init_all = jax.vmap(init) if vectorise else (lambda *args: lax.map(lambda a: init(*a), args))
    states = jax.jit(init_all)(jax.random.split(key_init, thetas.shape[0]), thetas, inputs)
    result = run_chains(step, states, key_run, warmup, draws, extract=extract, progress=progress,
                        vectorised=vectorise)
    return np.asarray(result.draws), {**result.timings, "total": time.perf_counter() - started}


def theta_draws(problem, theta: np.ndarray, replicates: int, chains: int) -> list[dict[str, np.ndarray]]:
    """Constrained draws by name, ``(chain, draw, ...)`` per replicate, from :func:`batched_chains`'s ``theta``."""
    draws = theta.shape[1]
    values = jax.vmap(problem.theta_values)(jnp.reshape(jnp.asarray(theta), (-1, theta.shape[-1])))
    shaped = {name: np.reshape(np.asarray(v), (replicates, chains, draws) + np.shape(v)[1:])
              for name, v in values.items()}
    return [{name: v[r] for name, v in shaped.items()} for r in range(replicates)]


def engine_view(model: Model, data: dict, method: str):
    """The view a chain engine runs: over the basis weights for a Hilbert-space approximate GP, over the
    innovations for a latent state-space GP, the Kalman marginal of a state-space GP regression, over the whitened
    grid vector for a latent GP on a full grid with a separable kernel, else the latent GP (kept sampled under a
    normal likelihood for ``gibbs``)."""
    from gpdsl.inference.families.hsgp import hsgp_view
    from gpdsl.inference.families.latent_gp import latent_gp
    from gpdsl.inference.families.latent_grid import on_grid
    from gpdsl.inference.families.state_space_latent import state_space_latent_view
    from gpdsl.inference.families.gp_regression import gp_regression_view
    from gpdsl.ir.families import HSGP_LATENT_GP, STATE_SPACE_LATENT_GP, STATE_SPACE_REGRESSION, classify

    found = classify(model).facts
    for family, make_view in ((HSGP_LATENT_GP, hsgp_view), (STATE_SPACE_LATENT_GP, state_space_latent_view),
                              (STATE_SPACE_REGRESSION, gp_regression_view)):
        if family in found:
            return make_view(model, data, found[family])
    return on_grid(latent_gp(model, data, method, marginalise=method != "gibbs"))


def with_observations(problem, y):
    """A copy of a view (a :class:`~gpdsl.inference.families.latent_gp.LatentGP`, or a GP regression that reads its
    outputs from the data) with other (possibly traced) observations."""
    target = problem.node.likelihood.target.name
    jax_model = dataclasses.replace(problem.jax_model, data={**problem.jax_model.data, target: y})
    fields = {field.name for field in dataclasses.fields(problem)}
    return dataclasses.replace(problem, jax_model=jax_model, **({"y": y} if "y" in fields else {}))


def require_same_inputs(datasets: Sequence[dict], target: str) -> None:
    """Raise ValueError unless every data set has the first one's values of everything but ``target``."""
    first = datasets[0]
    for data in datasets[1:]:
        for name, value in first.items():
            if name != target and not np.array_equal(np.asarray(value), np.asarray(data[name])):
                raise ValueError(f"fit_many needs the same '{name}' in every data set; only '{target}' may differ")
