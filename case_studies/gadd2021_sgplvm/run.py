"""Reproduce Sec. 5 of Gadd, Wade & Shah (2021) with gpdsl: the supervised GPLVM by PM-MCMC, VEM and NUTS.

The model is X -> Z ~ GP -> Y ~ GP; the methods are the pseudo-marginal sampler ``pm-gplvm``, variational EM
and NUTS on the same model files.

Parts:

* ``sinusoid`` (Sec. 5.1, Tables 2-3): the sinusoid cases 1-3 (N = 30 on [0, 4 pi], 6 outputs, noise sd 0.05,
  amplitudes drawn once with a fixed seed), the MAE of eq. 12 per output for VEM, VEM with k_z = 6, VEM with
  N = 60, NUTS on the same model files, and the pseudo-marginal sampler (``pm-gplvm``) when it is available;
  a sensitivity check of the priors (Table 1 read as H1 and H2) by VEM; Fig. 1-style hyperparameter pairs.
* ``airquality`` (Sec. 5.2): New York air quality (116 days with ozone), k_z = 1, ARD over (day, Month):
  hyperparameters of VEM, NUTS (and PM when available), latent and output predictive bands with empirical
  coverage, posterior predictive checks of the autocovariance and cross-covariance (Figs. 6-10).

The model files (priors as data, Table 1 as decided in ``../shared/specs/sgplvm.md``) sit beside this script.

Usage::

    python case_studies/gadd2021_sgplvm/run.py --part sinusoid|airquality|all [--quick] [--fresh] [--pm auto|skip]
    python case_studies/gadd2021_sgplvm/run.py --part airquality --paper   # PM at the paper's 4 x 5000, Q = 1000

``--device auto|cpu|gpu`` (default auto: a GPU where JAX sees one) says where gpdsl's JAX engines run (VEM and
PM; NUTS runs in Stan on the CPU); it is said on standard error and recorded in each PM row.

Outputs go to ``case_studies/gadd2021_sgplvm/results/`` (``*_quick.*`` from ``--quick``, ``*_paper.*`` from
``--paper``), written atomically;
each fit's summary is cached in ``results/cache/`` (``--fresh`` ignores the cache). The pseudo-marginal rows
come from :func:`pm_run` (the PM hook): it runs ``pm-gplvm`` when the method is registered and records
"not run" with the reason otherwise.

The fits go through the public API (``gpdsl.run``: ``vem`` with ``keep_state=True`` for the variational fit,
``nuts``, ``pm-gplvm``; ``gpdsl.settings``, ``gpdsl.results``, ``gpdsl.summarize``, ``gpdsl.datasets``). Beyond
it, with no public equivalent: predictions at new inputs from a kept variational fit
(:func:`gpdsl.inference.predict.gp_prior_latents.predict_outputs`) and from the sampler's states
(:mod:`gpdsl.inference.predict.supervised_gplvm`, on the model's view
:func:`gpdsl.inference.families.gplvm.gplvm_problem`), Fig. 4's replicate estimates at one state
(:func:`gpdsl.inference.methods.gplvm_chains.estimate_spread_at`, drawn by
:func:`gpdsl.results.plots.plot_estimate_spread`), whether ``pm-gplvm`` is registered
(:func:`gpdsl.registry.methods`); outputs are written all or nothing (:func:`gpdsl.storage.atomic.atomic_write_text`).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import gpdsl  # noqa: F401  (sets BLAS thread variables before numpy/jax load)

# isort: split
import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import LogFormatter, NullFormatter

from case_studies.damianou2016_dynamics.run import (
    nuts_supervised_predictions,
    predictive_mae,
)
from case_studies.gadd2021_sgplvm import paper_tables
from gpdsl import load_data, load_model, run
from gpdsl.storage.atomic import atomic_write_text
from gpdsl.datasets import sinusoids
from gpdsl.numerics.devices import DeviceError, resolve_device, running_on
from gpdsl.inference.families.gplvm import gplvm_problem
from gpdsl.inference.predict.gp_prior_latents import predict_outputs
from gpdsl.results import groups, save_png
from gpdsl.settings import VEMSettings

RESULTS = HERE / "results"
CACHE = RESULTS / "cache"

MODELS = {1: HERE / "sgplvm_case1.gpm", 2: HERE / "sgplvm_case23_h3.gpm", 3: HERE / "sgplvm_case23_h3.gpm"}
"""The model file of each sinusoid case (Table 1 under reading H3: cases 2 and 3 share their priors)."""
SENSITIVITY = {2: {"H1": HERE / "sgplvm_case2_h1.gpm", "H2": HERE / "sgplvm_case2_h2.gpm"},
               3: {"H1": HERE / "sgplvm_case3_h1.gpm", "H2": HERE / "sgplvm_case3_h2.gpm"}}
"""The other readings of Table 1 (spec sec. 1.2), fitted by VEM as the paper's prior-sensitivity check."""
AIRQUALITY_MODEL = HERE / "sgplvm_airquality.gpm"

HYPERPARAMETERS = ("s1", "theta", "theta_S", "noise")
BLOCKS = [["s1", "theta"], ["theta_S", "noise"]]
"""Alg. 1's blocks xi_1 = (sigma, theta) and xi_2 = (theta_S, 1 / beta), in both experiments."""

AMPLITUDE_SEED = 0
"""Seed of the amplitudes zeta_d ~ U(0, 1), drawn once and shared by every case and N."""
NOISE_SEED = 0
"""Seed of the training noise (sd 0.05)."""
EVAL_SEED = 12
"""Seed of the noisy test truth y* of eq. 12: the same draw for every method and case."""
PREDICTIVE_SEED = 13
"""Seed of the one predictive sample per test input of eq. 12."""
LATENT_JITTER = 1e-6
"""The white term epsilon of k_z (spec decision 11); the model files state it too."""

CONFIG = {
    # PM draws the latent inputs from the Laplace approximation at each xi, with correlation 0.99 and delayed
    # acceptance, in both studies (README, "What differs from the paper").
    "full": {
        "sinusoid": {"N": 30, "N_large": 60, "test_points": 1000, "vem": {"max_iterations": 1000, "starts": 3},
                     "nuts": {"chains": 4, "warmup": 1000, "draws": 1000, "adapt_delta": 0.9, "seed": 1},
                     "pm": {"chains": 4, "warmup": 1000, "draws": 4000, "num_importance": 1000, "g0": 200,
                            "e_step_iterations": 1000, "latent_sweeps": 20, "seed": 2, "thin": 10,
                            "spread_state": 820, "spread_replicates": 5000, "correlation": 0.99,
                            "delayed_acceptance": True, "proposal": "laplace"}},
        "airquality": {"vem": {"max_iterations": 1000, "starts": 3}, "Q": 1, "replicates": 200,
                       "nuts": {"chains": 2, "warmup": 100, "draws": 100, "adapt_delta": 0.9, "seed": 1},
                       "pm": {"chains": 4, "warmup": 300, "draws": 1200, "num_importance": 200, "g0": 100,
                              "e_step_iterations": 1000, "latent_sweeps": 20, "seed": 2, "thin": 6,
                              "spread_state": 820, "spread_replicates": 500, "correlation": 0.99,
                              "delayed_acceptance": True, "proposal": "laplace"}},
    },
    "quick": {
        "sinusoid": {"N": 30, "N_large": 60, "test_points": 1000, "vem": {"max_iterations": 500, "starts": 2},
                     "nuts": {"chains": 2, "warmup": 150, "draws": 150, "adapt_delta": 0.9, "seed": 1},
                     "pm": {"chains": 2, "warmup": 100, "draws": 200, "num_importance": 200, "g0": 50,
                            "e_step_iterations": 200, "latent_sweeps": 20, "seed": 2, "thin": 2,
                            "spread_state": 100, "spread_replicates": 200, "correlation": 0.99,
                            "delayed_acceptance": True, "proposal": "laplace"}},
        "airquality": {"vem": {"max_iterations": 500, "starts": 2}, "Q": 1, "replicates": 100,
                       "nuts": {"chains": 2, "warmup": 100, "draws": 100, "adapt_delta": 0.9, "seed": 1},
                       "pm": {"chains": 2, "warmup": 50, "draws": 100, "num_importance": 100, "g0": 25,
                              "e_step_iterations": 200, "latent_sweeps": 20, "seed": 2, "thin": 2,
                              "spread_state": 50, "spread_replicates": 100, "correlation": 0.99,
                              "delayed_acceptance": True, "proposal": "laplace"}},
    },
}
CONFIG["paper"] = {"airquality": {**CONFIG["full"]["airquality"],
                                  "pm": {**CONFIG["full"]["airquality"]["pm"], "warmup": 1000, "draws": 4000,
                                         "num_importance": 1000, "g0": 200, "thin": 20, "laplace_gtol": 1e-2}}}
"""Air quality's PM at the paper's length (4 chains x 5000 iterations, burn-in 1000, Q = 1000, g0 = 200); the
bands and checks use every 20th kept state (800, of which 200 evenly spaced as in ``full``). The Laplace mode
searches stop at a largest gradient component of 1e-2 (not 1e-5), which takes a quarter off each proposal and
moves the Laplace evidence by at most 0.01 nats (README, "At the paper's size")."""
DEVICE = {"device": "auto"}
"""The ``device`` of every VEM and PM run (``--device``, set by :func:`main`)."""


def write_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, text, "results")


def to_json(value) -> str:
    return json.dumps(value, indent=1, default=lambda v: np.asarray(v).tolist()) + "\n"


def cached(key: str, compute, fresh: bool) -> dict:
    """The cached summary ``results/cache/<key>.json``, or ``compute()`` stored there."""
    path = CACHE / f"{key}.json"
    if path.exists() and not fresh:
        return json.loads(path.read_text())
    value = compute()
    write_text(path, to_json(value))
    return json.loads(path.read_text())


def model_data(model, **values) -> dict:
    """The values the model declares (the H1 files fix k_z = 2 and have no ``Q``)."""
    return {name: value for name, value in values.items() if name in model.data}


# ---- fitting: variational EM, NUTS, and the PM hook ------------------------------------------------------
def vem_fit(model_path: Path, data: dict, vem: dict):
    """Variational EM (hyperparameters and q(Z) jointly), M = min(N, 50) inducing inputs (spec decision 4): the
    variational fit of ``vem`` (``keep_state``)."""
    model = load_model(str(model_path))
    values, _ = load_data(model_data(model, **data), model)
    settings = VEMSettings(psi="analytic", num_inducing=min(data["N"], 50), max_iterations=vem["max_iterations"],
                           starts=vem["starts"], seed=0)
    _, fit = run(model, values, "vem", settings, seed=0, keep_state=True, **DEVICE)
    return fit


def fit_record(fit) -> dict:
    return {"bound": fit.bound, "start_bounds": fit.report.get("start_bounds", [fit.bound]),
            "iterations": fit.report["iterations"], "message": fit.report["message"],
            "seconds": fit.report["seconds"], "num_inducing": int(np.asarray(fit.params.inducing).shape[0]),
            "hyperparameters": {k: np.asarray(v).tolist() for k, v in fit.hyperparameters().items()}}


def nuts_fit(model_path: Path, data: dict, nuts: dict):
    """NUTS (PyStan or CmdStan, in a subprocess) on the same model file; returns the results and the wall time."""
    from gpdsl.settings import NUTSSettings

    model = load_model(str(model_path))
    settings = NUTSSettings(chains=nuts["chains"], warmup=nuts["warmup"], draws=nuts["draws"],
                            adapt_delta=nuts["adapt_delta"])
    started = time.perf_counter()
    result = run(model, model_data(model, **data), "nuts", settings, seed=nuts["seed"])
    return result, time.perf_counter() - started


def chain_diagnostics(result) -> dict:
    """Largest R-hat and smallest bulk and tail ESS over the hyperparameters, and the hyperparameter draws."""
    from gpdsl import summarize

    post = groups(result)["posterior"]
    summary = summarize(result, var_names=list(HYPERPARAMETERS))
    out = {"max_r_hat": float(np.nanmax(summary["r_hat"])), "min_ess_bulk": float(np.nanmin(summary["ess_bulk"])),
           "min_ess_tail": float(np.nanmin(summary["ess_tail"])),
           "summary": {str(k): {c: float(v) for c, v in row.items() if c in ("mean", "sd", "r_hat", "ess_bulk")}
                       for k, row in summary.iterrows()},
           "draws": {n: np.asarray(post[n]) for n in HYPERPARAMETERS}}
    stats = groups(result).get("sample_stats")
    if stats is not None and "diverging" in stats:
        out["divergences"] = int(np.asarray(stats["diverging"]).sum())
    return out


def pm_status() -> str | None:
    """None when the ``pm-gplvm`` method can run, else why it cannot."""
    try:
        from gpdsl.settings import PMGPLVMSettings  # noqa: F401
        from gpdsl.registry import methods
    except ImportError as error:
        return f"pm-gplvm is not available ({error})"
    if "pm-gplvm" not in methods():
        return "pm-gplvm is not registered"
    return None


def pm_settings(pm: dict):
    """The ``pm-gplvm`` settings of a CONFIG entry (Alg. 1 with the blocks of Sec. 5, Z by 20 ESS sweeps per kept
    draw, Alg. 2 and spec decision 8).

    Two settings depart from the paper's Alg. 1 and keep the chain exact: ``correlation`` 0.99 correlates the
    importance draws' normals of a proposal with the current state's (correlated pseudo-marginal, Deligiannidis
    et al. 2018; the paper's fresh draws are correlation 0), and ``delayed_acceptance`` screens each proposal by
    the E-step's bound before the importance estimate is paid for (about twice as fast on case 1, benchmark P5).
    ``proposal`` "laplace" draws the latent inputs from the Laplace approximation of their exact posterior at each
    ``xi`` instead of the E-step's ``q`` (the paper's "variational"): see the README on cases 2-3.
    """
    from gpdsl.settings import PMGPLVMSettings

    return PMGPLVMSettings(chains=pm["chains"], warmup=pm["warmup"], draws=pm["draws"],
                           num_importance=pm["num_importance"], blocks=BLOCKS, g0=pm["g0"],
                           e_step_iterations=pm["e_step_iterations"], latent_sweeps=pm["latent_sweeps"],
                           correlation=pm["correlation"], delayed_acceptance=pm["delayed_acceptance"],
                           proposal=pm["proposal"],
                           **{name: pm[name] for name in ("laplace_gtol",) if name in pm})


def unconstrained(problem, draws: dict) -> np.ndarray:
    """Unconstrained hyperparameters ``(chains, draws, P)`` of constrained draws by name."""
    import jax

    values = {n: np.asarray(draws[n], dtype=float) for n in problem.theta_names}
    chains, count = values[problem.theta_names[0]].shape[:2]
    flat = {n: v.reshape((chains * count,) + v.shape[2:]) for n, v in values.items()}
    theta = jax.jit(jax.vmap(problem.unconstrain_theta))(flat)
    return np.asarray(theta).reshape(chains, count, -1)


def pm_run(model_path: Path, data: dict, pm: dict, mode: str, checkpoint: Path | None = None) -> dict:
    """PM HOOK: the pseudo-marginal sampler (Alg. 1) through ``gpdsl.run(model, data, "pm-gplvm", ...)``.

    Returns ``{"status": "not run", "reason": ...}`` when ``mode`` is "skip" or the method is missing, else the
    wall time, R-hat and ESS of the hyperparameters, the acceptance rate per block (kept draws, overall and
    per chain), the hyperparameter draws, and the states thinned by ``pm["thin"]`` (spec decision 8) with their
    latent inputs Z (``latent_sweeps`` elliptical slice steps per kept draw, warm-started along each chain).
    With ``checkpoint``, the chains are written there after every segment and an interrupted run resumes from it;
    the file is removed once the run has finished.
    """
    reason = "skipped (--pm skip)" if mode == "skip" else pm_status()
    if reason is not None:
        return {"status": "not run", "reason": reason}
    from gpdsl.results import results_json

    model = load_model(str(model_path))
    started = time.perf_counter()
    if checkpoint is not None:
        checkpoint.parent.mkdir(parents=True, exist_ok=True)
    result = run(model, model_data(model, **data), "pm-gplvm", pm_settings(pm), seed=pm["seed"],
                 checkpoint=checkpoint, progress=True, **DEVICE)
    if checkpoint is not None:
        checkpoint.unlink(missing_ok=True)
    out = {"status": "run", "wall_seconds": time.perf_counter() - started, "pm_settings": pm,
           "device": result.attrs.get("device"), "device_name": result.attrs.get("device_name"),
           **chain_diagnostics(result)}
    stats = groups(result)["sample_stats"]
    report = results_json(result, "report")
    accepted = np.asarray(stats["block_accepted"], dtype=float)
    out.update({"blocks": report.get("blocks", BLOCKS), "acceptance": accepted.mean(axis=(0, 1)).tolist(),
                "acceptance_per_chain": accepted.mean(axis=1).tolist(),
                "acceptance_with_warmup": report.get("block_acceptance"),
                "timings": results_json(result, "timings"), "variational_start": report.get("variational_start"),
                "latent_seconds": report.get("latent_seconds"),
                "log_marginal_sd": float(np.std(np.asarray(stats["log_marginal"]))),
                "effective_draws_median": float(np.nanmedian(np.asarray(stats["effective_draws"])))})
    posterior = groups(result)["posterior"]
    thin = pm["thin"]
    out["Z"] = np.asarray(posterior["Z"])[:, ::thin]
    out["draws_thinned"] = {n: np.asarray(v)[:, ::thin] for n, v in out["draws"].items()}
    out["latent_note"] = (f"Z from the pm-gplvm posterior ({pm['latent_sweeps']} ESS sweeps per kept draw), "
                          f"states thinned by {thin}")
    return out


def pm_spread(model_path: Path, data: dict, pm: dict, draws: dict) -> dict:
    """Fig. 4 (spec sec. 3.1.4): ``spread_replicates`` independent estimates of log p(Y | X, xi), each from
    ``num_importance`` draws, at kept state ``spread_state`` (from 1) of chain 1, with the run's variational
    fit and E-step (:func:`gpdsl.inference.methods.gplvm_chains.estimate_spread_at`)."""
    from gpdsl.inference.methods.gplvm_chains import estimate_spread_at

    model = load_model(str(model_path))
    values, _ = load_data(model_data(model, **data), model)
    state = min(pm["spread_state"], pm["draws"]) - 1
    at = {n: np.asarray(v)[0, state] for n, v in draws.items()}
    started = time.perf_counter()
    spread, where = estimate_spread_at(model, values, pm_settings(pm), pm["seed"], at, pm["spread_replicates"])
    return {"chain": 1, "state": state + 1, "replicates": pm["spread_replicates"], "hyperparameters": where,
            "seconds": time.perf_counter() - started, **{k: np.asarray(v) for k, v in spread._asdict().items()},
            "variance_at_Q": float(spread.variance[-1]), "num_importance": int(spread.draws[-1])}


def plot_spread(spread: dict, path: Path) -> Path:
    """Fig. 4: :func:`gpdsl.results.plots.plot_estimate_spread` of a cached spread."""
    from gpdsl.inference.mcmc.estimate_variance import EstimateSpread
    from gpdsl.results.plots import plot_estimate_spread

    return plot_estimate_spread(EstimateSpread(**{k: np.asarray(spread[k]) for k in EstimateSpread._fields}), path)


def pm_cached(key: str, compute, pm_mode: str, fresh: bool) -> dict:
    """A PM row: cached when it ran; "not run" (skipped, missing) and "failed" rows are never cached."""
    if pm_mode == "skip" or pm_status() is not None:
        return compute()
    try:
        return cached(key, compute, fresh)
    except Exception as error:  # noqa: BLE001  (the method is new: a failure is reported in the tables)
        return {"status": "failed", "reason": f"pm-gplvm failed: {type(error).__name__}: {error}"}


# ---- the sinusoid part ------------------------------------------------------------------------------------
def amplitudes(f) -> list[float]:
    """zeta_d, read back from the generating function: cos at x = 0, sin at x = pi / (2 F_d)."""
    zeta = list(f(np.zeros(1))[0, :3])
    return zeta + [float(np.max(np.abs(f(np.linspace(0, 4 * np.pi, 20001))[:, d]))) for d in range(3, 6)]


def sinusoid_data(case: int, N: int):
    return sinusoids(N, paper_tables.FREQUENCIES[case], noise_sd=paper_tables.NOISE_SD, seed=NOISE_SEED,
                     amplitude_seed=AMPLITUDE_SEED)


def x_test(part: dict) -> np.ndarray:
    return np.linspace(0.0, 4 * np.pi, part["test_points"])


def vem_sinusoid(model_path: Path, case: int, N: int, Q: int, part: dict) -> dict:
    """A VEM row of Table 3: fit on centred outputs (spec decision 10), one sample of eq. 19 per test input."""
    x, Y, f = sinusoid_data(case, N)
    fit = vem_fit(model_path, {"N": N, "Q": Q, "D": 6, "X": x[:, None], "Y": Y - Y.mean(0)}, part["vem"])
    xs = x_test(part)
    prediction = predict_outputs(fit, {"X": xs[:, None]})
    mean = prediction.mean + Y.mean(0)
    sd = np.sqrt(prediction.variance)
    sample = mean + sd * np.random.default_rng(PREDICTIVE_SEED).normal(size=mean.shape)
    return {**fit_record(fit), "N": N, "Q": Q, "model": model_path.name,
            "mae": predictive_mae(sample, f(xs), np.random.default_rng(EVAL_SEED)),
            "mean_rmse": float(np.sqrt(np.mean((mean - f(xs)) ** 2))), "predictive_sd": sd.mean(axis=0).tolist(),
            "band": {"mean": mean[:, 0], "sd": sd[:, 0]}}


def sampled_mae(x, Y, f, xs, draws: dict) -> dict:
    """Eq. 12 for a sampler: one draw of eq. 8 per test input (a random retained state of all chains pooled,
    z* from eq. 7, y* from the output GP), and the same per chain."""
    centred = Y - Y.mean(0)
    pooled = {n: v.reshape((1, -1) + v.shape[2:]) for n, v in draws.items()}
    sample = nuts_supervised_predictions(x, centred, xs, pooled, np.random.default_rng(PREDICTIVE_SEED),
                                         mean_only=False)[0] + Y.mean(0)
    chains = nuts_supervised_predictions(x, centred, xs, draws, np.random.default_rng(PREDICTIVE_SEED),
                                         mean_only=False)
    grid = np.linspace(0.0, 4 * np.pi, BAND_POINTS)
    lower, upper = band_of_samples(x, centred, grid, pooled)
    return {"mae": predictive_mae(sample, f(xs), np.random.default_rng(EVAL_SEED)),
            "chain_mae": [predictive_mae(c + Y.mean(0), f(xs), np.random.default_rng(EVAL_SEED)) for c in chains],
            "band": {"lower": lower + Y.mean(0)[0], "upper": upper + Y.mean(0)[0]}}


BAND_POINTS = 200
"""Inputs of the plotted predictive bands."""


def band_of_samples(x, centred, xs, pooled: dict, repeats: int = 100) -> tuple[np.ndarray, np.ndarray]:
    """The 2.5 and 97.5 % quantiles of the predictive of output 1 at ``xs`` (``repeats`` samples per input)."""
    samples = [nuts_supervised_predictions(x, centred, xs, pooled, np.random.default_rng(100 + r),
                                           mean_only=False)[0][:, 0] for r in range(repeats)]
    return np.quantile(samples, 0.025, axis=0), np.quantile(samples, 0.975, axis=0)


def nuts_sinusoid(case: int, part: dict) -> dict:
    x, Y, f = sinusoid_data(case, part["N"])
    data = {"N": part["N"], "Q": 2, "D": 6, "X": x[:, None], "Y": Y - Y.mean(0)}
    result, wall = nuts_fit(MODELS[case], data, part["nuts"])
    out = {"wall_seconds": wall, **chain_diagnostics(result)}
    post = groups(result)["posterior"]
    draws = {n: np.asarray(post[n]) for n in ("Z",) + HYPERPARAMETERS}
    return {**out, **sampled_mae(x, Y, f, x_test(part), draws)}


def pm_sinusoid(case: int, part: dict, pm_mode: str, checkpoint: Path | None = None) -> dict:
    """The PM row: the run, and eq. 12 from its thinned states (:func:`pm_predictive_mae`)."""
    x, Y, f = sinusoid_data(case, part["N"])
    data = {"N": part["N"], "Q": 2, "D": 6, "X": x[:, None], "Y": Y - Y.mean(0)}
    out = pm_run(MODELS[case], data, part["pm"], pm_mode, checkpoint)
    if "Z" in out:
        draws = {"Z": np.asarray(out.pop("Z")), **{n: np.asarray(v) for n, v in out.pop("draws_thinned").items()}}
        out.update(pm_predictive_mae(MODELS[case], data, Y.mean(0), f, x_test(part), draws))
    return out


def pm_predictive_mae(model_path: Path, data: dict, centre, f, xs, draws: dict) -> dict:
    """Eq. 12 for PM (spec sec. 3.1.2): eqs. 6-8 at the test inputs for every thinned state
    (:func:`gpdsl.inference.predict.supervised_gplvm.predict`: z* from the latent GP conditional, y* from the
    output GP), then per test input the sample of a state picked at random from all chains pooled (seed
    PREDICTIVE_SEED), against the same noisy truth as every other row (seed EVAL_SEED). Also per chain, the
    95 % band of y1 from all states, and the log predictive density of the truth draw (eq. 8)."""
    import jax

    from gpdsl.inference.predict.supervised_gplvm import (
        log_predictive_density,
        predict,
    )

    model = load_model(str(model_path))
    values, _ = load_data(model_data(model, **data), model)
    problem = gplvm_problem(model, values)
    theta = unconstrained(problem, draws)
    prediction = predict(problem, theta, draws["Z"], {"X": xs[:, None]}, jax.random.PRNGKey(PREDICTIVE_SEED))
    samples = prediction.sample + centre  # (chains, states, n*, D)
    chains, states = samples.shape[:2]
    rng = np.random.default_rng(PREDICTIVE_SEED)
    points = np.arange(xs.size)
    pooled = samples.reshape(chains * states, xs.size, -1)
    picks = rng.integers(0, chains * states, size=xs.size)
    truth = f(xs)
    chain_mae = [predictive_mae(samples[c, rng.integers(0, states, size=xs.size), points], truth,
                                np.random.default_rng(EVAL_SEED)) for c in range(chains)]
    noisy = truth + paper_tables.NOISE_SD * np.random.default_rng(EVAL_SEED).normal(size=truth.shape)
    lpd = log_predictive_density(prediction, noisy - centre, per_output=True)
    return {"mae": predictive_mae(pooled[picks, points], truth, np.random.default_rng(EVAL_SEED)),
            "chain_mae": chain_mae, "states": int(chains * states), "mean_lpd": lpd.mean(axis=0).tolist(),
            "mean_rmse": float(np.sqrt(np.mean((prediction.mixture_mean + centre - truth) ** 2))),
            "band": {"x": xs, "lower": np.quantile(pooled[:, :, 0], 0.025, axis=0),
                     "upper": np.quantile(pooled[:, :, 0], 0.975, axis=0)}}


def pm_spread_cached(key: str, model_path: Path, data: dict, pm: dict, row: dict, fresh: bool) -> dict | None:
    """Fig. 4 at state ``spread_state`` of chain 1 of a PM row that ran (cached apart from the run)."""
    if "draws" not in row:
        return None
    try:
        return cached(key, lambda: pm_spread(model_path, data, pm, row["draws"]), fresh)
    except Exception as error:  # noqa: BLE001  (reported in the tables)
        return {"status": "failed", "reason": f"estimate_spread_at failed: {type(error).__name__}: {error}"}


def sinusoid_case(case: int, part: dict, mode: str, fresh: bool, pm_mode: str) -> dict:
    """The rows of one case: VEM (and its variants and the other prior readings), NUTS and PM."""
    rows = {}
    print(f"[sinusoid] case {case}: VEM, VEM k_z=6, VEM N=60", flush=True)
    rows["VEM"] = cached(f"sinusoid_{mode}_case{case}_vem",
                         lambda: vem_sinusoid(MODELS[case], case, part["N"], 2, part), fresh)
    rows["VEM_kz6"] = cached(f"sinusoid_{mode}_case{case}_vem_kz6",
                             lambda: vem_sinusoid(MODELS[case], case, part["N"], 6, part), fresh)
    rows["VEM_N60"] = cached(f"sinusoid_{mode}_case{case}_vem_n60",
                             lambda: vem_sinusoid(MODELS[case], case, part["N_large"], 2, part), fresh)
    for reading, path in SENSITIVITY.get(case, {}).items():
        rows[f"VEM_{reading}"] = cached(f"sinusoid_{mode}_case{case}_vem_{reading.lower()}",
                                        lambda path=path: vem_sinusoid(path, case, part["N"], 2, part), fresh)
    print(f"[sinusoid] case {case}: NUTS", flush=True)
    rows["NUTS"] = cached(f"sinusoid_{mode}_case{case}_nuts", lambda: nuts_sinusoid(case, part), fresh)
    print(f"[sinusoid] case {case}: PM", flush=True)
    rows["PM"] = pm_cached(f"sinusoid_{mode}_case{case}_pm",
                           lambda: pm_sinusoid(case, part, pm_mode, CACHE / f"sinusoid_{mode}_case{case}_pm.npz"),
                           pm_mode, fresh)
    x, Y, _ = sinusoid_data(case, part["N"])
    data = {"N": part["N"], "Q": 2, "D": 6, "X": x[:, None], "Y": Y - Y.mean(0)}
    print(f"[sinusoid] case {case}: Fig. 4 spread", flush=True)
    spread = pm_spread_cached(f"sinusoid_{mode}_case{case}_pm_spread", MODELS[case], data, part["pm"], rows["PM"],
                              fresh)
    if spread is not None:
        rows["PM"]["spread"] = spread
    return rows


def run_sinusoid(mode: str, fresh: bool, pm_mode: str) -> dict:
    part = CONFIG[mode]["sinusoid"]
    cases = {}
    for case in (1, 2, 3):
        cases[case] = sinusoid_case(case, part, mode, fresh, pm_mode)
    _, _, f = sinusoid_data(1, part["N"])
    for case, rows in cases.items():
        rows["oracle"] = oracle_mae(case, part)
    summary = {"settings": {**part, "amplitude_seed": AMPLITUDE_SEED, "noise_seed": NOISE_SEED,
                            "eval_seed": EVAL_SEED, "predictive_seed": PREDICTIVE_SEED, "blocks": BLOCKS},
               "amplitudes": amplitudes(f), "frequencies": paper_tables.FREQUENCIES,
               "floor": {"mae": paper_tables.MAE_FLOOR, "se": paper_tables.MAE_FLOOR_SE},
               "cases": {str(c): {name: slim(row) for name, row in rows.items()} for c, rows in cases.items()}}
    suffix = "" if mode == "full" else "_quick"
    write_text(RESULTS / f"sinusoid{suffix}.json", to_json(summary))
    write_text(RESULTS / f"sinusoid{suffix}.md", sinusoid_markdown(summary))
    plot_hyperparameters(cases, RESULTS / f"sinusoid_hyperparameters{suffix}.png")
    if any("draws" in rows.get("PM", {}) for rows in cases.values()):
        plot_hyperparameters(cases, RESULTS / f"sinusoid_pm_hyperparameters{suffix}.png", methods=("PM",))
    for case, rows in cases.items():
        spread = rows.get("PM", {}).get("spread", {})
        if "variance" in spread:
            plot_spread(spread, RESULTS / f"sinusoid_case{case}_pm_spread{suffix}.png")
    plot_case3_predictive(cases[3], part, RESULTS / f"sinusoid_case3_y1{suffix}.png")
    return summary


def oracle_mae(case: int, part: dict) -> dict:
    """Eq. 12 for the true predictive N(f(x), 0.05^2) with the same seeds: the floor this truth draw gives."""
    _, _, f = sinusoid_data(case, part["N"])
    truth = f(x_test(part))
    sample = truth + paper_tables.NOISE_SD * np.random.default_rng(PREDICTIVE_SEED).normal(size=truth.shape)
    return {"mae": predictive_mae(sample, truth, np.random.default_rng(EVAL_SEED))}


SPREAD_AT = (1, 10, 100, 200, 500, 1000)
"""The numbers of importance draws at which the tables give the spread of the log estimate."""


def slim(row: dict) -> dict:
    """A row without its draws and bands (they stay in the cache); the spread of Fig. 4 at a few q only."""
    out = {k: v for k, v in row.items() if k not in ("draws", "band", "Z", "draws_thinned", "spread")}
    spread = row.get("spread")
    if spread is not None:
        out["spread"] = {k: v for k, v in spread.items() if k not in EstimateSpreadFields}
        if "variance" in spread:
            q = [n for n in SPREAD_AT if n <= len(spread["variance"])]
            out["spread"]["at_q"] = {str(n): {"mean": spread["mean"][n - 1], "sd": spread["sd"][n - 1],
                                              "variance": spread["variance"][n - 1]} for n in q}
    return out


EstimateSpreadFields = ("draws", "mean", "sd", "variance", "p10", "median", "p90")


METHOD_ROWS = (("PM", "PM"), ("VEM", "VEM"), ("VEM_kz6", "VEM_{k_z=6}"), ("VEM_N60", "VEM_{N=60}"),
               ("NUTS", "NUTS (added)"), ("oracle", "true predictive (floor, same seeds)"))


def cells(values) -> str:
    return " | ".join(f"{v:.3f}" for v in values)


def sinusoid_markdown(s: dict) -> str:
    part = s["settings"]
    zeta = ", ".join(f"{z:.3f}" for z in s["amplitudes"])
    lines = [(f"Sinusoid cases 1-3 of Gadd, Wade & Shah (2021), Table 3: N = {part['N']} inputs on [0, 4 pi], 6 outputs, "
             f"noise sd 0.05 (seed {part['noise_seed']}), amplitudes zeta = ({zeta}) (U(0, 1), seed "
             f"{part['amplitude_seed']}), frequencies of Table 2; outputs centred. Eq. 12: one predictive sample "
             f"per test input against a noisy truth at {part['test_points']} inputs on [0, 4 pi] (truth seed "
             f"{part['eval_seed']}, predictive seed {part['predictive_seed']}, the same for every method). A perfect "
             f"predictive gives {s['floor']['mae']:.5f} +- {s['floor']['se']:.5f} (one s.e.) per output."), "",
             "| case | method | y1 | y2 | y3 | y4 | y5 | y6 | paper y1..y6 |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for case, rows in s["cases"].items():
        paper = paper_tables.TABLE3[int(case)]
        for key, label in METHOD_ROWS:
            row = rows.get(key, {})
            ours = cells(row["mae"]) if "mae" in row else " | ".join(["-"] * 6)
            if "mae" not in row:
                label = f"{label} ({row.get('reason') or row.get('latent_note') or 'not run'})"
            theirs = ", ".join(f"{v:.3f}" for v in paper[key]) if key in paper else "-"
            lines.append(f"| {case} | {label} | {ours} | {theirs} |")
    lines += ["", "Prior sensitivity (Table 1 read as H1 / H2 instead of H3, spec sec. 1.2), VEM at N = 30, k_z = 2:", "",
              "| case | reading | y1 | y2 | y3 | y4 | y5 | y6 | noise variance | bound |",
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for case, rows in s["cases"].items():
        for reading in ("VEM", "VEM_H1", "VEM_H2"):
            if reading in rows and case != "1":
                row = rows[reading]
                name = "H3" if reading == "VEM" else reading[4:]
                lines.append(f"| {case} | {name} | {cells(row['mae'])} | {row['hyperparameters']['noise']:.4f} | "
                             f"{row['bound']:.1f} |")
    lines += ["", ("Fits (VEM: L-BFGS in place of SCG, spec decision 12; M = min(N, 50) inducing inputs; best bound of "
              f"{part['vem']['starts']} starts, at most {part['vem']['max_iterations']} iterations each. NUTS: "
              f"{part['nuts']['chains']} chains x ({part['nuts']['warmup']} + {part['nuts']['draws']}), adapt_delta "
              f"{part['nuts']['adapt_delta']}, Z sampled with the hyperparameters, F integrated out):"), "",
              "| case | method | noise variance (true 0.0025) | theta_S | s1 | theta | bound / R-hat, ESS bulk | seconds |",
              "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for case, rows in s["cases"].items():
        for key in ("VEM", "VEM_kz6", "VEM_N60"):
            r = rows[key]
            h = r["hyperparameters"]
            lines.append(f"| {case} | {key} | {h['noise']:.4f} | {h['theta_S']:.3f} | {h['s1']:.3f} | "
                         + ", ".join(f"{t:.2g}" for t in np.atleast_1d(h["theta"]))
                         + f" | {r['bound']:.1f} | {r['seconds']:.0f} |")
        for key in ("NUTS", "PM"):
            r = rows.get(key, {})
            if "summary" not in r:
                continue
            m = {k: v["mean"] for k, v in r["summary"].items()}
            theta = ", ".join(f"{v:.2g}" for k, v in m.items() if k.startswith("theta[") or k == "theta")
            lines.append(f"| {case} | {key} (posterior mean) | {m['noise']:.4f} | {m['theta_S']:.3f} | {m['s1']:.3f} | "
                         f"{theta} | R-hat {r['max_r_hat']:.2f}, ESS {r['min_ess_bulk']:.0f}"
                         + (f", {r['divergences']} divergences" if "divergences" in r else "")
                         + f" | {r['wall_seconds']:.0f} |")
    lines += pm_diagnostics_markdown({f"{case}": rows.get("PM", {}) for case, rows in s["cases"].items()}, "case")
    return "\n".join(lines) + "\n"


def pm_diagnostics_markdown(rows: dict, what: str) -> list[str]:
    """The PM runs: settings, R-hat, ESS, acceptance per block, the spread of the log estimate (Fig. 4), times."""
    ran = {k: r for k, r in rows.items() if r.get("status") == "run"}
    if not ran:
        return []
    some = next(iter(ran.values()))
    blocks = " / ".join("(" + ", ".join(b) + ")" for b in some["blocks"])
    lines = ["", ("PM (`pm-gplvm`): largest R-hat and smallest bulk / tail ESS over the hyperparameters, acceptance "
                  f"rate of the blocks {blocks} over the kept draws, the variance of log p_hat(Y | X, xi) over "
                  "independent replicate estimates at one kept state of chain 1 (Fig. 4; Q importance draws each), "
                  "and the wall time of `gpdsl.run` (variational start, compilation, chains, ESS of Z):"), "",
             (f"| {what} | R-hat | ESS bulk / tail | acceptance per block | Var[log p_hat] (Q; state, replicates) "
              "| wall time | of which ESS of Z |"),
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for key, r in ran.items():
        spread = r.get("spread", {})
        if "variance_at_Q" in spread:
            q = spread["num_importance"]
            var = f"{spread['variance_at_Q']:.2f} (Q = {q}; state {spread['state']}, {spread['replicates']})"
        else:
            var = spread.get("reason", "-")
        lines.append(f"| {key} | {r['max_r_hat']:.3f} | {r['min_ess_bulk']:.0f} / {r['min_ess_tail']:.0f} | "
                     + ", ".join(f"{a:.2f}" for a in r["acceptance"]) + f" | {var} | {r['wall_seconds']:.0f} s | "
                     + f"{r.get('latent_seconds') or 0:.0f} s |")
    return lines


PAIRS = (("s1", "noise", r"$\sigma_1$", r"$\beta^{-1}$"), ("theta[1]", "theta[2]", r"$\theta_1$", r"$\theta_2$"),
         ("theta_S", "noise", r"$\theta_S$", r"$\beta^{-1}$"))


def component(values, name: str) -> np.ndarray:
    """``s1`` or ``theta[k]`` of a draws dict or a hyperparameter dict (k from 1, as in the model and results)."""
    base, _, index = name.partition("[")
    value = np.asarray(values[base], dtype=float)
    if index:
        return value[..., int(index[:-1]) - 1]
    return value.reshape(value.shape[:2]) if value.ndim > 2 else value


def plot_hyperparameters(cases: dict, path: Path, pairs=PAIRS, methods=("NUTS", "PM")) -> Path:
    """Fig. 1 / Fig. 6 style: sampler draws of pairs of hyperparameters (at most 4000 per method), the VEM point
    as a red dot (and PM's own variational start, where PM ran, as a black cross)."""
    figure = Figure(figsize=(11, 3.2 * len(cases)))
    for i, (case, rows) in enumerate(cases.items()):
        for j, (a, b, la, lb) in enumerate(pairs):
            ax = figure.add_subplot(len(cases), len(pairs), i * len(pairs) + j + 1)
            for key, colour in (("NUTS", "tab:blue"), ("PM", "tab:green")):
                draws = rows.get(key, {}).get("draws")
                if draws and key in methods:
                    xa, xb = component(draws, a).ravel(), component(draws, b).ravel()
                    every = max(1, xa.size // 4000)
                    ax.scatter(xa[::every], xb[::every], s=3, alpha=0.3, color=colour, label=key)
            h = rows["VEM"]["hyperparameters"]
            ax.plot(component(h, a), component(h, b), "o", color="red", label="VEM")
            start = (rows.get("PM", {}).get("variational_start") or {}).get("hyperparameters")
            if start and "PM" in methods:
                ax.plot(component(start, a), component(start, b), "kx", label="PM's VEM start")
            ax.set_xscale("log")
            ax.set_yscale("log")
            for axis, (low, high) in ((ax.xaxis, ax.get_xlim()), (ax.yaxis, ax.get_ylim())):
                # minor labels only where no power of ten may be in view; wider axes crowd them
                short = np.log10(high / low) < 1.0
                axis.set_minor_formatter(LogFormatter(minor_thresholds=(1, 0.4)) if short else NullFormatter())
            ax.tick_params(which="minor", labelsize=7)
            ax.set_xlabel(la)
            ax.set_ylabel(lb)
            ax.set_title(f"case {case}" if isinstance(case, int) else str(case), fontsize=9)
            if i == 0 and j == 0:
                ax.legend(fontsize=7, loc="best")
    figure.tight_layout()
    return save_png(figure, path)


def plot_case3_predictive(rows: dict, part: dict, path: Path) -> Path:
    """Fig. 5 style: the predictive of y1 in case 3, VEM (mean +- 2 sd) and the sampler's 95 % band."""
    x, Y, f = sinusoid_data(3, part["N"])
    xs = x_test(part)
    figure = Figure(figsize=(8, 4))
    ax = figure.add_subplot(1, 1, 1)
    vem = rows["VEM"]["band"]
    mean, sd = np.asarray(vem["mean"]), np.asarray(vem["sd"])
    ax.fill_between(xs, mean - 2 * sd, mean + 2 * sd, color="tab:red", alpha=0.2, label="VEM +- 2 sd")
    for key, colour in (("NUTS", "tab:blue"), ("PM", "tab:green")):
        band = rows.get(key, {}).get("band")
        if band:
            ax.fill_between(band.get("x", np.linspace(0.0, 4 * np.pi, BAND_POINTS)), band["lower"], band["upper"],
                            color=colour, alpha=0.25, label=f"{key} 95 %")
    ax.plot(xs, f(xs)[:, 0], "k-", lw=1, label="f_1")
    ax.plot(x, Y[:, 0], "k.", label="training data")
    ax.set_xlabel("x")
    ax.set_ylabel("y1")
    ax.legend(fontsize=7, loc="best")
    figure.tight_layout()
    return save_png(figure, path)


# ---- the air-quality part ---------------------------------------------------------------------------------
def data_mirror() -> str | None:
    """``GPDSL_DATA_MIRROR``, else ``../shared/data`` when it exists (the loader falls back to its own source)."""
    if os.environ.get("GPDSL_DATA_MIRROR"):
        return os.environ["GPDSL_DATA_MIRROR"]
    shared = ROOT.parent / "shared" / "data"
    return str(shared) if shared.is_dir() else None


def airquality_data() -> dict:
    """The 153 days: inputs (day 0..152, Month) raw, outputs (log Ozone, Temp) standardised over the 116
    days with ozone (spec sec. 3.2 and decision 10); ``keep`` marks those days."""
    from gpdsl.datasets import airquality

    table = airquality(mirror=data_mirror())
    month = table.X[:, list(table.feature_names).index("Month")]
    temp = table.X[:, list(table.feature_names).index("Temp")]
    keep = ~np.isnan(table.y)
    X = np.column_stack([np.arange(len(month), dtype=float), month])
    raw = np.column_stack([np.log(np.where(keep, table.y, 1.0)), temp])
    centre, scale = raw[keep].mean(axis=0), raw[keep].std(axis=0)
    return {"X": X, "Y_all": (raw - centre) / scale, "keep": keep, "centre": centre, "scale": scale}


def rbf(a: np.ndarray, b: np.ndarray, weights, variance: float = 1.0) -> np.ndarray:
    """``variance exp(-1/2 sum_d w_d (a_d - b_d)^2)`` (inverse squared length-scales ``w``)."""
    w = np.broadcast_to(np.asarray(weights, dtype=float), (a.shape[1],))
    return variance * np.exp(-0.5 * (((a[:, None, :] - b[None, :, :]) ** 2) * w).sum(-1))


def draw_predictive(X, Y, X_new, Z, s1, theta, theta_S, noise, rng):
    """Eqs. 7-8 at one retained state: z* sampled from the noise-free latent GP given Z, then the output
    GP's mean and variance at z*. Returns ``z* (n*, k_z)``, ``mean (n*, D)``, ``variance (n*,)``."""
    K_x = rbf(X, X, s1) + (LATENT_JITTER + 1e-8) * np.eye(len(X))
    K_sx = rbf(X_new, X, s1)
    solve = np.linalg.solve(K_x, K_sx.T)
    z_var = np.maximum(1.0 + LATENT_JITTER - np.sum(K_sx * solve.T, axis=1), 0.0)
    z = solve.T @ Z + np.sqrt(z_var)[:, None] * rng.normal(size=(len(X_new), Z.shape[1]))
    K_f = rbf(Z, Z, theta, theta_S) + noise * np.eye(len(Z))
    K_sf = rbf(z, Z, theta, theta_S)
    alpha = np.linalg.solve(K_f, K_sf.T)
    return z, alpha.T @ Y, np.maximum(theta_S - np.sum(K_sf * alpha.T, axis=1), 0.0) + noise


def replicate_training(X, Y, Z, theta, theta_S, noise, rng) -> np.ndarray:
    """One replicate of the training outputs at one state: F from p(F | Y, Z) jointly, plus noise."""
    K = rbf(Z, Z, theta, theta_S)
    K_y = K + noise * np.eye(len(Z))
    solve = np.linalg.solve(K_y, K)
    mean, cov = solve.T @ Y, K - K @ solve
    L = np.linalg.cholesky(0.5 * (cov + cov.T) + 1e-8 * np.eye(len(Z)))
    return mean + L @ rng.normal(size=Y.shape) + np.sqrt(noise) * rng.normal(size=Y.shape)


LAGS = 15


def autocovariance(y: np.ndarray, lags: int = LAGS) -> np.ndarray:
    y = y - y.mean()
    return np.array([np.mean(y[:len(y) - k] * y[k:]) for k in range(lags + 1)])


def cross_covariance(a: np.ndarray, b: np.ndarray, lags: int = LAGS) -> np.ndarray:
    a, b = a - a.mean(), b - b.mean()
    n = len(a)
    return np.array([np.mean(a[max(0, -k):n - max(0, k)] * b[max(0, k):n - max(0, -k)]) for k in range(-lags, lags + 1)])


def ppc(Y: np.ndarray, replicates: np.ndarray) -> dict:
    """Posterior predictive checks (Figs. 9-10): the autocovariance of each output over the day-ordered
    training rows and the cross-covariance between the outputs, observed against the replicates' 95 % band;
    ``inside`` is the fraction of lags where the observed value lies in the band."""
    out = {}
    stats = {"autocov_1": lambda y: autocovariance(y[:, 0]), "autocov_2": lambda y: autocovariance(y[:, 1]),
             "crosscov": lambda y: cross_covariance(y[:, 0], y[:, 1])}
    for name, stat in stats.items():
        observed = stat(Y)
        values = np.array([stat(r) for r in replicates])
        lower, upper = np.quantile(values, 0.025, axis=0), np.quantile(values, 0.975, axis=0)
        out[name] = {"observed": observed, "lower": lower, "upper": upper,
                     "inside": float(np.mean((observed >= lower) & (observed <= upper)))}
    return out


def coverage(Y_all, keep, mean, lower, upper) -> dict:
    """Empirical coverage of 95 % bands: both outputs on the 116 training days, temperature on the 37 days
    without ozone (held out: their rows are not in the training set), and the mean band width."""
    inside = (Y_all >= lower) & (Y_all <= upper)
    return {"train": inside[keep].mean(axis=0).tolist(), "heldout_temp": float(inside[~keep, 1].mean()),
            "width": (upper - lower)[keep].mean(axis=0).tolist(),
            "train_rmse": np.sqrt(np.mean((mean[keep] - Y_all[keep]) ** 2, axis=0)).tolist()}


def vem_airquality(part: dict) -> dict:
    d = airquality_data()
    keep = d["keep"]
    data = {"N": int(keep.sum()), "Q": part["Q"], "D": 2, "X": d["X"][keep], "Y": d["Y_all"][keep]}
    fit = vem_fit(AIRQUALITY_MODEL, data, part["vem"])
    prediction = predict_outputs(fit, {"X": d["X"]})
    mean, sd = prediction.mean, np.sqrt(prediction.variance)
    rng = np.random.default_rng(PREDICTIVE_SEED)
    replicates = mean[keep] + sd[keep] * rng.normal(size=(part["replicates"],) + mean[keep].shape)
    return {**fit_record(fit), "N": data["N"], "Q": part["Q"],
            "coverage": coverage(d["Y_all"], keep, mean, mean - 1.96 * sd, mean + 1.96 * sd),
            "ppc": ppc(d["Y_all"][keep], replicates),
            "band": {"latent_mean": prediction.latent.mean[:, 0], "latent_sd": np.sqrt(prediction.latent.variance[:, 0]),
                     "mean": mean, "lower": mean - 1.96 * sd, "upper": mean + 1.96 * sd}}


def sampled_airquality(draws: dict, part: dict) -> dict:
    """Predictive bands, coverage and PPCs from sampler states (pooled over chains, at most 200 states)."""
    d = airquality_data()
    keep, X_all = d["keep"], d["X"]
    X, Y = X_all[keep], d["Y_all"][keep]
    total = draws["Z"].shape[0] * draws["Z"].shape[1]
    flat = {n: np.asarray(v).reshape((total,) + np.asarray(v).shape[2:]) for n, v in draws.items()}
    picks = np.linspace(0, total - 1, min(total, 200)).astype(int)
    rng = np.random.default_rng(PREDICTIVE_SEED)
    latents, outputs, replicates = [], [], []
    for i in picks:
        state = {n: flat[n][i] for n in flat}
        z, mean, var = draw_predictive(X, Y, X_all, state["Z"], state["s1"], state["theta"], state["theta_S"],
                                       state["noise"], rng)
        latents.append(z[:, 0])
        outputs.append(mean + np.sqrt(var)[:, None] * rng.normal(size=mean.shape))
        if len(replicates) < part["replicates"]:
            replicates.append(replicate_training(X, Y, state["Z"], state["theta"], state["theta_S"], state["noise"], rng))
    outputs, latents = np.asarray(outputs), np.asarray(latents)
    lower, upper = np.quantile(outputs, 0.025, axis=0), np.quantile(outputs, 0.975, axis=0)
    mean = outputs.mean(axis=0)
    return {"coverage": coverage(d["Y_all"], keep, mean, lower, upper), "ppc": ppc(Y, np.asarray(replicates)),
            "band": {"latent_lower": np.quantile(latents, 0.025, axis=0),
                     "latent_upper": np.quantile(latents, 0.975, axis=0),
                     "latent_samples": latents[::max(1, len(latents) // 50)], "mean": mean, "lower": lower,
                     "upper": upper}}


def nuts_airquality(part: dict) -> dict:
    d = airquality_data()
    keep = d["keep"]
    data = {"N": int(keep.sum()), "Q": part["Q"], "D": 2, "X": d["X"][keep], "Y": d["Y_all"][keep]}
    result, wall = nuts_fit(AIRQUALITY_MODEL, data, part["nuts"])
    out = {"wall_seconds": wall, **chain_diagnostics(result)}
    post = groups(result)["posterior"]
    draws = {n: np.asarray(post[n]) for n in ("Z",) + HYPERPARAMETERS}
    return {**out, **sampled_airquality(draws, part)}


def airquality_fit_data(part: dict) -> dict:
    d = airquality_data()
    keep = d["keep"]
    return {"N": int(keep.sum()), "Q": part["Q"], "D": 2, "X": d["X"][keep], "Y": d["Y_all"][keep]}


def pm_airquality(part: dict, pm_mode: str, checkpoint: Path | None = None) -> dict:
    out = pm_run(AIRQUALITY_MODEL, airquality_fit_data(part), part["pm"], pm_mode, checkpoint)
    if "Z" in out:
        draws = {"Z": np.asarray(out.pop("Z")), **{n: np.asarray(v) for n, v in out.pop("draws_thinned").items()}}
        out.update(sampled_airquality(draws, part))
        out["latent_sign"] = latent_sign(draws["Z"])
    return out


def latent_sign(Z: np.ndarray) -> dict:
    """The sign mode of each thinned state's Z (k_z = 1): the sign of its inner product with the first state of
    chain 1. The latent posterior is symmetric about 0 (k_z's sign symmetry); a chain that visits both modes
    has fractions away from 0 and 1 (Fig. 7's bimodality)."""
    Z = np.asarray(Z)[..., 0]
    sign = np.einsum("csn,n->cs", Z, Z[0, 0]) > 0
    return {"positive_per_chain": sign.mean(axis=1).tolist(), "positive": float(sign.mean()),
            "switches_per_chain": np.abs(np.diff(sign.astype(int), axis=1)).sum(axis=1).tolist()}


def run_airquality(mode: str, fresh: bool, pm_mode: str) -> dict:
    part = CONFIG[mode]["airquality"]
    d = airquality_data()
    print(f"[airquality] {int(d['keep'].sum())} days with ozone: VEM", flush=True)
    rows = {"VEM": cached(f"airquality_{mode}_vem", lambda: vem_airquality(part), fresh)}
    print("[airquality] NUTS", flush=True)
    rows["NUTS"] = cached(f"airquality_{mode}_nuts", lambda: nuts_airquality(part), fresh)
    print("[airquality] PM", flush=True)
    rows["PM"] = pm_cached(f"airquality_{mode}_pm",
                           lambda: pm_airquality(part, pm_mode, CACHE / f"airquality_{mode}_pm.npz"), pm_mode, fresh)
    print("[airquality] PM: Fig. 4 spread", flush=True)
    spread = pm_spread_cached(f"airquality_{mode}_pm_spread", AIRQUALITY_MODEL, airquality_fit_data(part),
                              part["pm"], rows["PM"], fresh)
    if spread is not None:
        rows["PM"]["spread"] = spread
    summary = {"settings": {**part, "blocks": BLOCKS, "predictive_seed": PREDICTIVE_SEED, "mirror": data_mirror()},
               "data": {"days": len(d["keep"]), "rows": int(d["keep"].sum()), "output_centre": d["centre"],
                        "output_scale": d["scale"]},
               "methods": {name: slim(row) for name, row in rows.items()}}
    suffix = "" if mode == "full" else f"_{mode}"
    write_text(RESULTS / f"airquality{suffix}.json", to_json(summary))
    write_text(RESULTS / f"airquality{suffix}.md", airquality_markdown(summary))
    aq_pairs = (("s1[1]", "s1[2]", r"$\sigma_1$ (day)", r"$\sigma_2$ (month)"),
                ("theta", "noise", r"$\theta_1$", r"$\beta^{-1}$"), ("theta_S", "noise", r"$\theta_S$", r"$\beta^{-1}$"))
    plot_hyperparameters({"air quality": rows}, RESULTS / f"airquality_hyperparameters{suffix}.png", aq_pairs)
    if "draws" in rows["PM"]:
        plot_hyperparameters({"air quality": rows}, RESULTS / f"airquality_pm_hyperparameters{suffix}.png", aq_pairs,
                             methods=("PM",))
    if "variance" in rows["PM"].get("spread", {}):
        plot_spread(rows["PM"]["spread"], RESULTS / f"airquality_pm_spread{suffix}.png")
    plot_airquality(rows, d, RESULTS / f"airquality_predictive{suffix}.png")
    plot_ppc(rows, RESULTS / f"airquality_ppc{suffix}.png")
    return summary


def airquality_markdown(s: dict) -> str:
    part, methods = s["settings"], s["methods"]
    lines = [(f"New York air quality (R datasets::airquality), {s['data']['rows']} of {s['data']['days']} days with "
             "ozone; outputs log(Ozone) and Temp standardised over those days; inputs day 0..152 and Month, raw; "
             f"k_z = {part['Q']}, ARD over the two inputs (`sgplvm_airquality.gpm`). VEM: M = 50 inducing inputs, best "
             f"bound of {part['vem']['starts']} starts, at most {part['vem']['max_iterations']} L-BFGS iterations. "
             f"NUTS: {part['nuts']['chains']} chains x ({part['nuts']['warmup']} + {part['nuts']['draws']}), "
             f"adapt_delta {part['nuts']['adapt_delta']}. The paper reports figures only (Figs. 6-10)."), "",
             "| method | s1 (day) | s2 (month) | theta_1 | theta_S | noise variance | R-hat / ESS bulk | seconds |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for name, r in methods.items():
        if "hyperparameters" in r:
            h = r["hyperparameters"]
            s1, theta = np.atleast_1d(h["s1"]), np.atleast_1d(h["theta"])
            lines.append(f"| {name} | {s1[0]:.3g} | {s1[1]:.3g} | {theta[0]:.3g} | {h['theta_S']:.3g} | "
                         f"{h['noise']:.3g} | bound {r['bound']:.1f} | {r['seconds']:.0f} |")
        elif "summary" in r:
            m = {k: v["mean"] for k, v in r["summary"].items()}
            s1 = [v for k, v in m.items() if k.startswith("s1")]
            theta = [v for k, v in m.items() if k.startswith("theta") and not k.startswith("theta_S")]
            lines.append(f"| {name} (posterior mean) | {s1[0]:.3g} | {s1[1]:.3g} | {theta[0]:.3g} | {m['theta_S']:.3g} | "
                         f"{m['noise']:.3g} | {r['max_r_hat']:.2f} / {r['min_ess_bulk']:.0f}"
                         + (f", {r['divergences']} divergences" if "divergences" in r else "")
                         + f" | {r['wall_seconds']:.0f} |")
        else:
            lines.append(f"| {name} | {r.get('reason') or r.get('latent_note')} | | | | | | |")
    lines += ["", ("Predictive 95 % bands: empirical coverage on the training days (log ozone, temp), on the 37 days "
              "without ozone (temperature, held out), mean band width (standardised units); posterior predictive "
              f"checks over lags 0..{LAGS} (autocovariance) and -{LAGS}..{LAGS} (cross-covariance): the fraction of "
              "lags where the observed statistic lies in the replicates' 95 % band (VEM replicates: independent "
              "draws from eq. 19's marginal moments; samplers: F | Y, Z jointly per state, plus noise)."), "",
              ("| method | coverage log ozone | coverage temp | held-out temp | width log ozone | width temp | "
              "PPC autocov ozone | PPC autocov temp | PPC cross-cov |"),
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for name, r in methods.items():
        if "coverage" not in r:
            continue
        c, p = r["coverage"], r["ppc"]
        lines.append(f"| {name} | {c['train'][0]:.2f} | {c['train'][1]:.2f} | {c['heldout_temp']:.2f} | "
                     f"{c['width'][0]:.2f} | {c['width'][1]:.2f} | {p['autocov_1']['inside']:.2f} | "
                     f"{p['autocov_2']['inside']:.2f} | {p['crosscov']['inside']:.2f} |")
    pm = methods.get("PM", {})
    if pm.get("status") == "run":
        c = pm["pm_settings"]
        lines += pm_diagnostics_markdown({"air quality": pm}, "data")
        lines += ["", (f"PM settings: {c['chains']} chains x ({c['warmup']} warmup + {c['draws']} draws), Q = "
                       f"{c['num_importance']}, g0 = {c['g0']}, at most {c['e_step_iterations']} E-step iterations, "
                       f"{c['latent_sweeps']} ESS sweeps of Z per kept draw, states thinned by {c['thin']} for the "
                       "bands and checks.")]
        if "latent_sign" in pm:
            sign = pm["latent_sign"]
            lines += ["", ("Sign of the latent curve (Fig. 7's bimodality): fraction of thinned states whose Z points "
                           "the way of chain 1's first state, per chain "
                           + ", ".join(f"{v:.2f}" for v in sign["positive_per_chain"])
                           + f" (pooled {sign['positive']:.2f}); sign switches per chain "
                           + ", ".join(str(int(v)) for v in sign["switches_per_chain"]) + ".")]
    return "\n".join(lines) + "\n"


def plot_airquality(rows: dict, d: dict, path: Path) -> Path:
    """Figs. 7-8 style: the latent predictive and the output predictive bands over the days, per method."""
    days, keep, Y = d["X"][:, 0], d["keep"], d["Y_all"]
    methods = [m for m in ("PM", "NUTS", "VEM") if "band" in rows.get(m, {})]
    figure = Figure(figsize=(12, 3 * len(methods)))
    boundaries = days[np.flatnonzero(np.diff(d["X"][:, 1])) + 1]
    for i, name in enumerate(methods):
        band = {k: np.asarray(v) for k, v in rows[name]["band"].items()}
        ax = figure.add_subplot(len(methods), 3, 3 * i + 1)
        if "latent_mean" in band:
            m, s = band["latent_mean"], band["latent_sd"]
            ax.fill_between(days, m - 1.96 * s, m + 1.96 * s, color="tab:red", alpha=0.3)
            ax.plot(days, m, "r-", lw=0.8)
        else:
            for sample in band["latent_samples"]:
                ax.plot(days, sample, "-", color="tab:blue", lw=0.3, alpha=0.4)
        ax.set_title(f"{name}: latent z*", fontsize=9)
        for j, label in enumerate(("log ozone (std.)", "temp (std.)")):
            ax = figure.add_subplot(len(methods), 3, 3 * i + 2 + j)
            ax.fill_between(days, band["lower"][:, j], band["upper"][:, j], color="tab:gray", alpha=0.4)
            ax.plot(days, band["mean"][:, j], "k-", lw=0.8)
            ax.plot(days[keep], Y[keep, j], "b.", ms=3)
            if j == 1:
                ax.plot(days[~keep], Y[~keep, 1], "rx", ms=3)
            ax.set_title(f"{name}: {label}", fontsize=9)
        for ax in figure.axes[-3:]:
            for b in boundaries:
                ax.axvline(b, color="k", lw=0.5)
    figure.axes[-1].set_xlabel("day since 1 May 1973")
    figure.tight_layout()
    return save_png(figure, path)


def plot_ppc(rows: dict, path: Path) -> Path:
    """Figs. 9-10 style: observed autocovariances and cross-covariance against the replicates' 95 % bands."""
    methods = [m for m in ("PM", "NUTS", "VEM") if "ppc" in rows.get(m, {})]
    figure = Figure(figsize=(11, 3 * len(methods)))
    for i, name in enumerate(methods):
        for j, (stat, title) in enumerate((("autocov_1", "autocovariance, log ozone"),
                                           ("autocov_2", "autocovariance, temp"), ("crosscov", "cross-covariance"))):
            p = {k: np.asarray(v) for k, v in rows[name]["ppc"][stat].items() if k != "inside"}
            lags = np.arange(len(p["observed"])) - (LAGS if stat == "crosscov" else 0)
            ax = figure.add_subplot(len(methods), 3, 3 * i + j + 1)
            ax.fill_between(lags, p["lower"], p["upper"], color="tab:gray", alpha=0.4, label="replicates 95 %")
            ax.plot(lags, p["observed"], "k.-", label="observed")
            ax.set_title(f"{name}: {title}", fontsize=9)
            if i == 0 and j == 0:
                ax.legend(fontsize=7)
    figure.tight_layout()
    return save_png(figure, path)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=("sinusoid", "airquality", "all"), default="all")
    parser.add_argument("--quick", action="store_true", help="reduced settings (see CONFIG['quick'])")
    parser.add_argument("--fresh", action="store_true", help="ignore the cached fits in results/cache")
    parser.add_argument("--pm", choices=("auto", "skip"), default="auto",
                        help="auto: run pm-gplvm when it is registered (else 'not run'); skip: do not run it")
    parser.add_argument("--paper", action="store_true",
                        help="airquality only: PM at the paper's length (CONFIG['paper']: 4 x 5000, Q = 1000)")
    parser.add_argument("--device", choices=("auto", "cpu", "gpu"), default="auto",
                        help="where gpdsl's JAX engines (VEM, PM) run (default: a GPU where JAX sees one)")
    args = parser.parse_args(argv)
    if args.paper and (args.quick or args.part != "airquality"):
        parser.error("--paper is for --part airquality, without --quick")
    try:
        platform = resolve_device(args.device)
    except DeviceError as error:
        parser.error(error.render())
    DEVICE["device"] = args.device
    mode = "paper" if args.paper else "quick" if args.quick else "full"
    with running_on(platform):
        if args.part in ("sinusoid", "all"):
            print(sinusoid_markdown(run_sinusoid(mode, args.fresh, args.pm)))
        if args.part in ("airquality", "all"):
            print(airquality_markdown(run_airquality(mode, args.fresh, args.pm)))


if __name__ == "__main__":
    main()
