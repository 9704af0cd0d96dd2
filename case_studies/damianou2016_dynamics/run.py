"""Reproduce the dynamical and uncertain-input experiments of Damianou, Titsias & Lawrence (2016) with gpdsl.

Parts:

* ``sequences`` (Sec. 3.3.2 and 4.2; simulated): a dynamical GPLVM over several independent sequences
  (``models``: ``dynamical_sequences.gpm``, ``same(sequence)``) fitted by variational EM, reconstructing
  held-out frames: a gap of whole frames (forecast from the times alone, Sec. 4.2) and frames with half
  their columns hidden (``q(X, X*)`` fitted jointly, App. D.1). Against the Bayesian GPLVM without
  dynamics, the training mean, and NUTS on the same model file at small N (rotation-invariant measures:
  reconstruction errors and Procrustes disparities of the latent means against the true trajectories).
* ``mackey-glass`` (Sec. 6.1.1, Table 4, Fig. 14): iterative one-step-ahead forecasting of the chaotic
  Mackey-Glass series from 72 training windows of 18 values, 30 inducing inputs: the variational GP-LVM
  (predictions with their variances fed back and added to the training set), Girard et al.'s
  uncertain-input GP (variances fed back, predictions discarded) and the naive autoregressive GP.
* ``supervised`` (the warped-GP view of Sec. 3.3.2; Gadd, Wade & Shah's sinusoid case 1): the supervised
  GPLVM ``models/supervised_gplvm.gpm`` at N = 30 by variational EM and by NUTS on the same file, compared
  by the predictive MAE of their eq. 12 and the error of the predictive mean (both rotation-invariant).
* ``missing-inputs`` (Sec. 6.2.1, Fig. 15; simulated as vargplvm's ``demRegressionVargplvm2``): GP
  regression whose training rows lose input entries at random (fractions 0.05 to 0.9, four seeds),
  the missing entries inferred (App. E), against the sparse GP on the fully observed rows, 1-NN,
  linear regression and the mean; test MAE and MSE.

Usage::

    python case_studies/damianou2016_dynamics/run.py --part sequences|missing-inputs|mackey-glass|supervised|all [--quick] [--fresh]

Outputs go to ``case_studies/damianou2016_dynamics/results/`` (``*_quick.*`` from ``--quick``), written
atomically; each fit's summary is cached in ``results/cache/`` (``--fresh`` ignores the cache).

The fits of a registered method go through the public API (``gpdsl.run``: ``vem`` with ``keep_state=True`` for the
variational fit, ``nuts``; ``gpdsl.settings``, ``gpdsl.results``, ``gpdsl.datasets.sinusoids``). Beyond it, with
no public equivalent: predictions from a kept variational fit at new inputs and outputs
(:func:`gpdsl.inference.predict.gp_prior_latents.predict_outputs`,
:func:`gpdsl.inference.predict.gplvm.predict_latent_function`), the fits with missing or known inputs of App. E
(:mod:`gpdsl.inference.variational.missing_inputs`, on the model's view
:func:`gpdsl.inference.families.gplvm.gplvm_problem`), and the iterative forecasts of Sec. 6.1.1
(:func:`gpdsl.inference.predict.augmented_forecast.augmented_forecast`,
:func:`gpdsl.inference.predict.free_simulation.lag_matrix`); outputs are written all or nothing
(:func:`gpdsl.storage.atomic.atomic_write_text`).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import gpdsl  # noqa: E402,F401  (sets BLAS thread variables before numpy/jax load)

import numpy as np  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from scipy.spatial import procrustes  # noqa: E402

from case_studies.damianou2016_dynamics import paper_tables  # noqa: E402
from case_studies.damianou2016_dynamics.simulate import (  # noqa: E402
    MissingInputs,
    Sequences,
    mackey_glass,
    simulate_missing_inputs,
    simulate_sequences,
)
from gpdsl import load_data, load_model, run  # noqa: E402
from gpdsl.storage.atomic import atomic_write_text  # noqa: E402
from gpdsl.datasets import sinusoids  # noqa: E402
from gpdsl.inference.families.gplvm import gplvm_problem  # noqa: E402
from gpdsl.inference.predict.augmented_forecast import augmented_forecast  # noqa: E402
from gpdsl.inference.predict.free_simulation import lag_matrix  # noqa: E402
from gpdsl.inference.predict.gp_prior_latents import predict_outputs  # noqa: E402
from gpdsl.inference.predict.gplvm import predict_latent_function  # noqa: E402
from gpdsl.inference.variational.missing_inputs import (  # noqa: E402
    fit_with_known_inputs,
    fit_with_missing_inputs,
)
from gpdsl.results import groups, save_png  # noqa: E402
from gpdsl.settings import VEMSettings  # noqa: E402

RESULTS = HERE / "results"
CACHE = RESULTS / "cache"
DYNAMICAL = HERE / "dynamical_sequences.gpm"
BAYESIAN = ROOT / "models" / "bayesian_gplvm.gpm"

CONFIG = {
    "full": {"sequences": {"data": {"sequences": 4, "frames": 60, "D": 10, "Q": 2, "gap": 6, "partial": 6, "seed": 0},
                           "Q": 2, "M": 20, "max_iterations": 3000,
                           "nuts_data": {"sequences": 2, "frames": 18, "D": 6, "Q": 2, "gap": 3, "partial": 0,
                                         "seed": 1},
                           "nuts": {"chains": 4, "warmup": 500, "draws": 500, "adapt_delta": 0.9, "seed": 1}},
             "missing_inputs": {"fractions": [0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9],
                                "seeds": [2, 3, 4, 5], "M": 30, "max_iterations": 2000, "init": "posterior"},
             "mackey_glass": {"delay_window": 18, "train_pairs": 72, "M": 30, "max_iterations": 2000,
                              "normalise_points": 594, "length": 1201},
             "supervised": {"N": 30, "Q": 2, "M": 30, "max_iterations": 3000, "test_points": 1000,
                            "nuts": {"chains": 4, "warmup": 500, "draws": 500, "adapt_delta": 0.9, "seed": 1}}},
    "quick": {"sequences": {"data": {"sequences": 3, "frames": 30, "D": 8, "Q": 2, "gap": 4, "partial": 4, "seed": 0},
                            "Q": 2, "M": 12, "max_iterations": 800,
                            "nuts_data": {"sequences": 2, "frames": 12, "D": 5, "Q": 2, "gap": 2, "partial": 0,
                                          "seed": 1},
                            "nuts": {"chains": 2, "warmup": 150, "draws": 150, "adapt_delta": 0.9, "seed": 1}},
              "missing_inputs": {"fractions": [0.1, 0.5, 0.9], "seeds": [2], "M": 20, "max_iterations": 300,
                                 "init": "posterior"},
              "mackey_glass": {"delay_window": 18, "train_pairs": 72, "M": 30, "max_iterations": 300,
                               "normalise_points": 594, "length": 400},
              "supervised": {"N": 20, "Q": 2, "M": 20, "max_iterations": 500, "test_points": 200,
                             "nuts": {"chains": 2, "warmup": 150, "draws": 150, "adapt_delta": 0.9, "seed": 1}}},
}


def write_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, text, "results")


def cached(key: str, compute, fresh: bool) -> dict:
    """The cached summary ``results/cache/<key>.json``, or ``compute()`` stored there."""
    path = CACHE / f"{key}.json"
    if path.exists() and not fresh:
        return json.loads(path.read_text())
    value = compute()
    write_text(path, json.dumps(value, indent=1, default=lambda v: np.asarray(v).tolist()) + "\n")
    return value


# ---- the sequences part -------------------------------------------------------------------------------
def frames_data(data: Sequences, rows, Q: int) -> dict:
    return {"N": len(rows), "D": data.Y.shape[1], "Q": Q, "t": data.t[rows], "sequence": data.sequence[rows],
            "Y": data.Y[rows]}


def hidden_columns(data: Sequences) -> slice:
    return slice(data.Y.shape[1] - data.Y.shape[1] // 2, None)


def partial_outputs(data: Sequences) -> np.ndarray:
    Y = data.Y[data.partial].copy()
    Y[:, hidden_columns(data)] = np.nan
    return Y


def errors(data: Sequences, gap_mean, partial_mean) -> dict:
    """Mean squared errors on the hidden entries: whole gap frames, and the hidden columns of partial frames."""
    out = {"gap_mse": float(np.mean((gap_mean - data.Y[data.gap]) ** 2))}
    if len(data.partial):
        hidden = hidden_columns(data)
        out["partial_mse"] = float(np.mean((partial_mean[:, hidden] - data.Y[data.partial][:, hidden]) ** 2))
    return out


def settings_of(part: dict) -> VEMSettings:
    return VEMSettings(psi="analytic", num_inducing=part["M"], max_iterations=part["max_iterations"], seed=0)


STARTS = 3
"""Starts of the variational fits (PCA means, then random means with seeds 1 and 2); the best bound is kept."""


def best_fit(model, values: dict, part: dict):
    """The fit of highest bound over :data:`STARTS` starts (``vem`` with ``starts``; the variational fit kept by
    ``keep_state``), and every start's bound."""
    _, fit = run(model, values, "vem", replace(settings_of(part), starts=STARTS), seed=0, keep_state=True)
    return fit, fit.report["start_bounds"]


def dynamical_run(data: Sequences, part: dict) -> dict:
    model = load_model(str(DYNAMICAL))
    values, _ = load_data(frames_data(data, data.train, part["Q"]), model)
    fit, bounds = best_fit(model, values, part)
    started = time.perf_counter()
    gap = predict_outputs(fit, {"t": data.t[data.gap], "sequence": data.sequence[data.gap]})
    partial = (predict_outputs(fit, {"t": data.t[data.partial], "sequence": data.sequence[data.partial]},
                               partial_outputs(data)) if len(data.partial) else None)
    return {**errors(data, gap.mean, partial.mean if partial else None),
            "gap_sd": np.sqrt(gap.variance).mean(), "bound": fit.bound, "start_bounds": bounds,
            "iterations": fit.report["iterations"],
            "message": fit.report["message"], "fit_seconds": fit.report["seconds"],
            "predict_seconds": time.perf_counter() - started,
            "procrustes_vs_truth": float(procrustes(data.X[data.train], fit.mean)[2]),
            "hyperparameters": {k: v.tolist() for k, v in fit.hyperparameters().items()},
            "gap_mean": gap.mean, "X": fit.mean}


def bayesian_run(data: Sequences, part: dict) -> dict:
    model = load_model(str(BAYESIAN))
    rows = data.train
    values, _ = load_data({"N": len(rows), "D": data.Y.shape[1], "Q": part["Q"], "Y": data.Y[rows]}, model)
    fit, bounds = best_fit(model, values, part)
    partial = predict_outputs(fit, None, partial_outputs(data)) if len(data.partial) else None
    gap_mean = np.broadcast_to(data.Y[rows].mean(axis=0), data.Y[data.gap].shape)
    return {**errors(data, gap_mean, partial.mean if partial else None), "bound": fit.bound, "start_bounds": bounds,
            "iterations": fit.report["iterations"], "message": fit.report["message"],
            "fit_seconds": fit.report["seconds"], "procrustes_vs_truth": float(procrustes(data.X[rows], fit.mean)[2])}


def mean_run(data: Sequences) -> dict:
    mean = data.Y[data.train].mean(axis=0)
    return errors(data, np.broadcast_to(mean, data.Y[data.gap].shape),
                  np.broadcast_to(mean, data.Y[data.partial].shape) if len(data.partial) else None)


def nuts_gap_predictions(data: Sequences, draws: dict, thin: int) -> np.ndarray:
    """Posterior-mean outputs at the gap frames from NUTS draws of (X, ell, s2, w, noise), per chain ``(C, n*, D)``.

    Per draw: ``x*`` is the GP-prior conditional mean given ``X`` (same sequence only), the outputs the GP
    regression mean of ``Y`` on ``X`` at ``x*``; averaged over the draws of each chain.
    """
    train, gap = data.train, data.gap
    t, s, Y = data.t[train], data.sequence[train], data.Y[train]
    t_new, s_new = data.t[data.gap], data.sequence[gap]
    same = s[:, None] == s[None, :]
    same_new = s_new[:, None] == s[None, :]
    chains = []
    for c in range(draws["X"].shape[0]):
        means = []
        for d in range(0, draws["X"].shape[1], thin):
            X, ell, s2, w, noise = (np.asarray(draws[n][c, d]) for n in ("X", "ell", "s2", "w", "noise"))
            K_t = np.exp(-0.5 * (t[:, None] - t[None]) ** 2 / ell ** 2) * same + (1e-6 + 1e-8) * np.eye(len(t))
            K_nt = np.exp(-0.5 * (t_new[:, None] - t[None]) ** 2 / ell ** 2) * same_new
            X_new = K_nt @ np.linalg.solve(K_t, X)
            K_f = s2 * np.exp(-0.5 * (((X[:, None] - X[None]) ** 2) * w).sum(-1)) + noise * np.eye(len(t))
            K_nf = s2 * np.exp(-0.5 * (((X_new[:, None] - X[None]) ** 2) * w).sum(-1))
            means.append(K_nf @ np.linalg.solve(K_f, Y))
        chains.append(np.mean(means, axis=0))
    return np.asarray(chains)


def nuts_comparison(part: dict, fresh: bool, mode: str) -> dict:
    """NUTS and variational EM on the same small data and model file."""
    from gpdsl.settings import NUTSSettings

    data = simulate_sequences(**part["nuts_data"])
    vem = cached(f"sequences_{mode}_nuts_data_vem", lambda: dynamical_run(data, part), fresh)

    def nuts_run() -> dict:
        model = load_model(str(DYNAMICAL))
        started = time.perf_counter()
        settings = NUTSSettings(chains=part["nuts"]["chains"], warmup=part["nuts"]["warmup"],
                                draws=part["nuts"]["draws"], adapt_delta=part["nuts"]["adapt_delta"])
        result = run(model, frames_data(data, data.train, part["Q"]), "nuts", settings, seed=part["nuts"]["seed"])
        wall = time.perf_counter() - started
        post, stats = groups(result)["posterior"], groups(result)["sample_stats"]
        draws = {n: np.asarray(post[n]) for n in ("X", "ell", "s2", "w", "noise")}
        predicted = nuts_gap_predictions(data, draws, thin=max(1, draws["X"].shape[1] // 100))
        chains = []
        for c in range(draws["X"].shape[0]):
            chains.append({"gap_mse": float(np.mean((predicted[c] - data.Y[data.gap]) ** 2)),
                           "procrustes_vs_truth": float(procrustes(data.X[data.train], draws["X"][c].mean(axis=0))[2]),
                           "posterior_mean_X": draws["X"][c].mean(axis=0),
                           "divergences": int(np.asarray(stats["diverging"])[c].sum()),
                           "hyperparameters": {n: draws[n][c].mean(axis=0).tolist() for n in ("ell", "s2", "w", "noise")}})
        return {"wall_seconds": wall, "chains": chains}

    nuts = cached(f"sequences_{mode}_nuts", nuts_run, fresh)
    for chain in nuts["chains"]:
        chain["procrustes_vs_vem"] = float(procrustes(np.asarray(vem["X"]), np.asarray(chain.pop("posterior_mean_X")))[2])
    return {"data": part["nuts_data"], "vem": {k: v for k, v in vem.items() if k not in ("X", "gap_mean")},
            "nuts": nuts, "mean": mean_run(data)}


def run_sequences(mode: str, fresh: bool) -> dict:
    part = CONFIG[mode]["sequences"]
    data = simulate_sequences(**part["data"])
    print(f"[sequences] {part['data']['sequences']} sequences x {part['data']['frames']} frames", flush=True)
    dynamical = cached(f"sequences_{mode}_dynamical", lambda: dynamical_run(data, part), fresh)
    bayesian = cached(f"sequences_{mode}_bayesian", lambda: bayesian_run(data, part), fresh)
    print("[sequences] NUTS at small N", flush=True)
    nuts = nuts_comparison(part, fresh, mode)
    summary = {"settings": part, "dynamical": {k: v for k, v in dynamical.items() if k not in ("X", "gap_mean")},
               "bayesian": bayesian, "mean": mean_run(data), "nuts": nuts}
    suffix = "" if mode == "full" else "_quick"
    write_text(RESULTS / f"sequences{suffix}.json", json.dumps(summary, indent=1) + "\n")
    write_text(RESULTS / f"sequences{suffix}.md", sequences_markdown(summary))
    plot_gap(data, np.asarray(dynamical["gap_mean"]), RESULTS / f"sequences{suffix}.png")
    return summary


def number(record: dict, key: str, spec: str) -> str:
    """``record[key]`` formatted, or a dash when it is absent."""
    return format(record[key], spec) if key in record else "-"


def sequences_markdown(s: dict) -> str:
    part, data = s["settings"], s["settings"]["data"]
    rows = [("dynamical GPLVM (VEM)", s["dynamical"]), ("Bayesian GPLVM, no dynamics (VEM)", s["bayesian"]),
            ("training mean", s["mean"])]
    lines = [f"Simulated: {data['sequences']} sequences x {data['frames']} frames, D = {data['D']}, true Q = "
             f"{data['Q']}; per sequence a gap of {data['gap']} whole frames and {data['partial']} frames with the last "
             f"{data['D'] // 2} columns hidden (seed {data['seed']}). Fits: Q = {part['Q']}, M = {part['M']}, analytic "
             f"Psi statistics, at most {part['max_iterations']} L-BFGS iterations from each of {STARTS} "
             "initialisations (PCA means; random means, seeds 1 and 2), the fit of highest bound kept (the bounds "
             "of every start are in the JSON). Gap frames: the dynamical model "
             "forecasts q(X*) from the times (Sec. 4.2); the model without dynamics has nothing to go on and predicts "
             "the training mean. Partial frames: q(X*) fitted to the visible columns (jointly with q(X) for the "
             "dynamical model, App. D.1), hidden columns predicted by eqs. 40-41.", "",
             "| method | MSE gap frames | MSE hidden columns | Procrustes vs true X | bound | iterations | fit s |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for name, r in rows:
        lines.append(f"| {name} | {r['gap_mse']:.4f} | {number(r, 'partial_mse', '.4f')} | "
                     f"{number(r, 'procrustes_vs_truth', '.3f')} | {number(r, 'bound', '.1f')} | "
                     f"{r.get('iterations', '-')} | {number(r, 'fit_seconds', '.1f')} |")
    n = s["nuts"]
    nd = n["data"]
    lines += ["", f"NUTS against VEM at small N: {nd['sequences']} sequences x {nd['frames']} frames, D = {nd['D']}, "
              f"gaps of {nd['gap']} frames; NUTS {part['nuts']['chains']} chains x ({part['nuts']['warmup']} warmup + "
              f"{part['nuts']['draws']} draws), adapt_delta {part['nuts']['adapt_delta']}, the same model file "
              "(X sampled with the hyperparameters, F integrated out). Compared by rotation-invariant measures only: "
              "the gap-frame MSE (per NUTS chain: outputs at the GP-prior conditional mean of x*, averaged over "
              "draws) and Procrustes disparities (0 = same shape, 1 = unrelated) of each chain's posterior-mean X.", "",
              "| method | MSE gap frames | Procrustes vs true X | Procrustes vs VEM | divergences | wall s |",
              "| --- | --- | --- | --- | --- | --- |",
              f"| VEM | {n['vem']['gap_mse']:.4f} | {n['vem']['procrustes_vs_truth']:.3f} | - | - | "
              f"{n['vem']['fit_seconds']:.1f} |"]
    for c, chain in enumerate(n["nuts"]["chains"]):
        wall = f"{n['nuts']['wall_seconds']:.0f} (all chains)" if c == 0 else ""
        lines.append(f"| NUTS chain {c} | {chain['gap_mse']:.4f} | {chain['procrustes_vs_truth']:.3f} | "
                     f"{chain['procrustes_vs_vem']:.3f} | {chain['divergences']} | {wall} |")
    lines.append(f"| training mean | {n['mean']['gap_mse']:.4f} | - | - | - | - |")
    return "\n".join(lines) + "\n"


def plot_gap(data: Sequences, gap_mean: np.ndarray, path: Path) -> Path:
    figure = Figure(figsize=(8, 3.2))
    ax = figure.add_subplot(1, 1, 1)
    first = data.sequence == 1
    ax.plot(data.t[first], data.Y[first, 0], "k.", label="data (sequence 1, column 1)")
    in_gap = data.sequence[data.gap] == 1
    ax.plot(data.t[data.gap][in_gap], gap_mean[in_gap, 0], "r-o", label="dynamical GPLVM forecast in the gap")
    ax.set_xlabel("t")
    ax.legend(loc="best", fontsize=8)
    return save_png(figure, path)


# ---- the missing-inputs part --------------------------------------------------------------------------
def regression_errors(prediction: np.ndarray, truth: np.ndarray) -> dict:
    return {"mae": float(np.mean(np.abs(prediction - truth))), "mse": float(np.mean((prediction - truth) ** 2))}


def baselines(data: MissingInputs) -> dict:
    """1-NN, linear regression and the mean, all from the fully observed training rows."""
    Z, Y, test = data.Z[data.observed], data.Y[data.observed], data.Z[data.test]
    nearest = np.argmin(((test[:, None] - Z[None]) ** 2).sum(-1), axis=1)
    design = np.column_stack([np.ones(len(Z)), Z])
    coefficients, *_ = np.linalg.lstsq(design, Y, rcond=None)
    truth = data.Y[data.test]
    return {"NN": regression_errors(Y[nearest], truth),
            "MLR": regression_errors(np.column_stack([np.ones(len(test)), test]) @ coefficients, truth),
            "mean": regression_errors(np.broadcast_to(Y.mean(axis=0), truth.shape), truth)}


def gplvm_problem_of(Y: np.ndarray, Q: int):
    model = load_model(str(BAYESIAN))
    values, _ = load_data({"N": Y.shape[0], "D": Y.shape[1], "Q": Q, "Y": Y}, model)
    return gplvm_problem(model, values)


def missing_inputs_run(data: MissingInputs, fraction: float, seed: int, part: dict) -> dict:
    settings = VEMSettings(psi="analytic", num_inducing=part["M"], max_iterations=part["max_iterations"], seed=0)
    inputs = data.with_missing(fraction, seed)
    started = time.perf_counter()
    result = fit_with_missing_inputs(gplvm_problem_of(data.train_outputs, inputs.shape[1]), inputs, settings,
                                     init=part["init"])
    mean, _ = predict_latent_function(result.fit, data.Z[data.test])
    return {**regression_errors(mean, data.Y[data.test]), "seconds": time.perf_counter() - started,
            "missing": float(np.isnan(inputs).mean()), "message": result.fit.report["message"]}


def standard_gp_run(data: MissingInputs, part: dict) -> dict:
    settings = VEMSettings(psi="analytic", num_inducing=part["M"], max_iterations=part["max_iterations"], seed=0)
    Z = data.Z[data.observed]
    fit = fit_with_known_inputs(gplvm_problem_of(data.Y[data.observed], Z.shape[1]), Z, settings)
    mean, _ = predict_latent_function(fit, data.Z[data.test])
    return regression_errors(mean, data.Y[data.test])


def run_missing_inputs(mode: str, fresh: bool) -> dict:
    part = CONFIG[mode]["missing_inputs"]
    records = {}
    for seed in part["seeds"]:
        data = simulate_missing_inputs(seed=seed)
        gp = cached(f"missing_{mode}_s{seed}_standard_gp", lambda: standard_gp_run(data, part), fresh)
        records[seed] = {"standard GP": gp, **baselines(data), "missing GP": {}}
        for fraction in part["fractions"]:
            print(f"[missing-inputs] seed {seed}, fraction {fraction}", flush=True)
            records[seed]["missing GP"][str(fraction)] = cached(
                f"missing_{mode}_s{seed}_p{fraction}", lambda: missing_inputs_run(data, fraction, seed, part), fresh)
    summary = {"settings": part, "records": {str(k): v for k, v in records.items()}}
    suffix = "" if mode == "full" else "_quick"
    write_text(RESULTS / f"missing_inputs{suffix}.json", json.dumps(summary, indent=1) + "\n")
    write_text(RESULTS / f"missing_inputs{suffix}.md", missing_inputs_markdown(summary))
    plot_missing_inputs(summary, RESULTS / f"missing_inputs{suffix}.png")
    return summary


def _over_seeds(summary: dict, method: str, metric: str, fraction: str | None = None) -> tuple[float, float]:
    values = [(r[method][fraction] if fraction else r[method])[metric] for r in summary["records"].values()]
    return float(np.mean(values)), float(np.std(values))


def missing_inputs_markdown(s: dict) -> str:
    part = s["settings"]
    seeds = ", ".join(s["records"])
    lines = [f"Simulated as vargplvm's demRegressionVargplvm2 (N = 200, 15 inputs drawn from a GP over time, 5 "
             "outputs from a GP over the inputs, noise variance 0.001; 40 fully observed training rows, 60 that "
             "lose each input entry with the given probability, 100 test rows; inputs and outputs standardised on "
             f"the training rows). Seeds {seeds}; mean ± sd over seeds. Missing-inputs GP: Bayesian GPLVM with "
             f"known entries fixed (variance 1e-9), rbf-ARD, M = {part['M']} inducing inputs, at most "
             f"{part['max_iterations']} L-BFGS iterations per fit, missing entries started by partial self-training "
             "(App. E). Standard GP: the same sparse GP on the 40 fully observed rows. NN, MLR, mean: from those "
             "rows. Errors on the test outputs, standardised scale (the paper's Fig. 15 is labelled MSE; its "
             "script computes the MAE: both are given).", "",
             "| missing fraction | missing-inputs GP MAE | MSE | standard GP MAE | NN MAE | MLR MAE | mean MAE | fit s |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for fraction in (str(f) for f in part["fractions"]):
        mae, mae_sd = _over_seeds(s, "missing GP", "mae", fraction)
        mse, mse_sd = _over_seeds(s, "missing GP", "mse", fraction)
        seconds = np.mean([r["missing GP"][fraction]["seconds"] for r in s["records"].values()])
        cells = [f"{m:.3f} ± {sd:.3f}" for m, sd in (_over_seeds(s, name, "mae") for name in
                                                     ("standard GP", "NN", "MLR", "mean"))]
        lines.append(f"| {fraction} | {mae:.3f} ± {mae_sd:.3f} | {mse:.3f} ± {mse_sd:.3f} | " + " | ".join(cells)
                     + f" | {seconds:.0f} |")
    return "\n".join(lines) + "\n"


def plot_missing_inputs(s: dict, path: Path) -> Path:
    fractions = [float(f) for f in s["settings"]["fractions"]]
    figure = Figure(figsize=(6, 4))
    ax = figure.add_subplot(1, 1, 1)
    means = [_over_seeds(s, "missing GP", "mae", str(f))[0] for f in fractions]
    ax.plot(fractions, means, "r-o", label="GP with missing inputs (App. E)")
    for name, style in (("standard GP", "b--"), ("NN", "g:"), ("MLR", "m-."), ("mean", "k-")):
        ax.plot(fractions, [_over_seeds(s, name, "mae")[0]] * len(fractions), style, label=name)
    ax.set_xlabel("fraction of missing input entries (partial rows)")
    ax.set_ylabel("test MAE (standardised outputs)")
    ax.legend(loc="best", fontsize=8)
    return save_png(figure, path)


# ---- the Mackey-Glass part ----------------------------------------------------------------------------
MG_METHODS = {"var. GP-LVM": {"augment": True, "propagate": True},
              "GP uncert (Girard et al. 2003)": {"augment": False, "propagate": True},
              "naive autoregressive GP": {"augment": True, "propagate": False}}


def mackey_glass_data(part: dict):
    """The normalised series, the training windows and targets, the starting window and the true continuation."""
    series = mackey_glass(part["length"])
    head = series[:part["normalise_points"]]
    series = (series - head.mean()) / head.std()
    lag, n = part["delay_window"], part["train_pairs"]
    X, y = lag_matrix(series, lag)                 # X[i] = (y[i+L-1], ..., y[i]), target y[i+L]
    return series, X[:n], y[:n], X[n], y[n:]


def mackey_glass_run(part: dict) -> dict:
    series, X, y, window, truth = mackey_glass_data(part)
    settings = VEMSettings(psi="analytic", num_inducing=part["M"], max_iterations=part["max_iterations"], seed=0)
    started = time.perf_counter()
    fit = fit_with_known_inputs(gplvm_problem_of(y[:, None], X.shape[1]), X, settings, epsilon=1e-10)
    fit_seconds = time.perf_counter() - started
    kernel, noise = fit.problem.kernel(fit.params.theta), float(fit.problem.noise_variance(fit.params.theta))
    out = {"fit_seconds": fit_seconds, "iterations": fit.report["iterations"], "message": fit.report["message"],
           "bound": fit.bound, "noise_variance": noise, "truth": truth, "methods": {}}
    for name, options in MG_METHODS.items():
        started = time.perf_counter()
        forecast = augmented_forecast(kernel, noise, np.asarray(fit.params.inducing), X, np.full_like(X, 1e-10), y,
                                      window, truth.size, **options)
        error = forecast.mean - truth
        nlpd = 0.5 * np.log(2 * np.pi) + 0.5 * (np.log(forecast.variance) + error ** 2 / forecast.variance)
        out["methods"][name] = {"mae": float(np.mean(np.abs(error))), "mse": float(np.mean(error ** 2)),
                                "mae_1110": float(np.mean(np.abs(error[:1110]))),
                                "mse_1110": float(np.mean(error[:1110] ** 2)), "nlpd": float(np.mean(nlpd)),
                                "seconds": time.perf_counter() - started, "mean": forecast.mean,
                                "variance": forecast.variance}
    return out


def run_mackey_glass(mode: str, fresh: bool) -> dict:
    part = CONFIG[mode]["mackey_glass"]
    print(f"[mackey-glass] {part['train_pairs']} training windows, forecasting {part['length'] - part['train_pairs'] - part['delay_window']} values", flush=True)
    result = cached(f"mackey_glass_{mode}", lambda: mackey_glass_run(part), fresh)
    suffix = "" if mode == "full" else "_quick"
    write_text(RESULTS / f"mackey_glass{suffix}.md", mackey_glass_markdown(result, part))
    plot_mackey_glass(result, RESULTS / f"mackey_glass{suffix}.png")
    return result


def mackey_glass_markdown(r: dict, part: dict) -> str:
    steps = len(r["truth"])
    lines = [f"Mackey-Glass (alpha 0.2, beta 0.1, delay 17, exponent 10; RK4 with step 0.1 from x(0) = 1.2, x(t < 0) = 0, "
             f"values at t = 0..{part['length'] - 1}, normalised by the first {part['normalise_points']}). Windows of "
             f"{part['delay_window']} values, the first {part['train_pairs']} as training pairs, {steps} values "
             f"forecast one step at a time. Model: sparse GP with rbf-ARD, {part['M']} inducing inputs, training "
             f"inputs known (variance 1e-10), fitted by variational EM ({r['iterations']} L-BFGS iterations, "
             f"{r['fit_seconds']:.0f} s; {r['message']}); noise variance {r['noise_variance']:.2g}. No "
             "re-optimisation during the forecast. MAE and MSE over all forecast values (and over the first 1110, "
             "the paper's count); NLPD per value in nats.", "",
             "| method | MAE | MSE | MAE (1110) | MSE (1110) | NLPD | paper MAE | paper MSE | paper NLPD | forecast s |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for name, m in r["methods"].items():
        paper = paper_tables.TABLE4[name]
        lines.append(f"| {name} | {m['mae']:.3f} | {m['mse']:.3f} | {m['mae_1110']:.3f} | {m['mse_1110']:.3f} | "
                     f"{m['nlpd']:.2f} | {paper['mae']:.3f} | {paper['mse']:.3f} | {paper_tables.TABLE4_NLPD[name]} | "
                     f"{m['seconds']:.1f} |")
    return "\n".join(lines) + "\n"


def plot_mackey_glass(r: dict, path: Path) -> Path:
    truth = np.asarray(r["truth"])
    steps = np.arange(1, truth.size + 1)
    figure = Figure(figsize=(9, 7))
    for i, (name, m) in enumerate(r["methods"].items()):
        ax = figure.add_subplot(3, 1, i + 1)
        mean, sd = np.asarray(m["mean"]), np.sqrt(np.asarray(m["variance"]))
        ax.plot(steps, truth, "k-", lw=0.8, label="series")
        ax.plot(steps, mean, "r-", lw=0.8, label="forecast mean")
        ax.fill_between(steps, mean - 2 * sd, mean + 2 * sd, color="r", alpha=0.2, label="± 2 sd")
        ax.set_title(name, fontsize=9)
        ax.set_xlim(1, truth.size)
        if i == 0:
            ax.legend(loc="upper right", fontsize=7)
    figure.axes[-1].set_xlabel("steps ahead")
    figure.tight_layout()
    return save_png(figure, path)


# ---- the supervised GPLVM: variational EM against NUTS ----------------------------------------------------
SUPERVISED = ROOT / "models" / "supervised_gplvm.gpm"


def predictive_mae(sample: np.ndarray, f_test: np.ndarray, rng: np.random.Generator) -> list[float]:
    """Eq. 12 of Gadd et al.: per output, the mean |y* - y~*| of a noisy truth and one predictive sample."""
    truth = f_test + 0.05 * rng.normal(size=f_test.shape)
    return np.mean(np.abs(truth - sample), axis=0).tolist()


def supervised_vem_run(x, Y, f, part: dict) -> dict:
    model = load_model(str(SUPERVISED))
    values, _ = load_data({"N": len(x), "Q": part["Q"], "D": Y.shape[1], "X": x[:, None], "Y": Y - Y.mean(0)}, model)
    fit, bounds = best_fit(model, values, part)
    x_test = np.linspace(0, 4 * np.pi, part["test_points"])
    prediction = predict_outputs(fit, {"X": x_test[:, None]})
    mean = prediction.mean + Y.mean(0)
    rng = np.random.default_rng(12)
    sample = mean + np.sqrt(prediction.variance) * rng.normal(size=mean.shape)
    return {"bound": fit.bound, "start_bounds": bounds, "iterations": fit.report["iterations"],
            "seconds": fit.report["seconds"], "mae": predictive_mae(sample, f(x_test), rng),
            "mean_rmse": float(np.sqrt(np.mean((mean - f(x_test)) ** 2))),
            "hyperparameters": {k: v.tolist() for k, v in fit.hyperparameters().items()}}


def nuts_supervised_predictions(x, Y, x_test, draws: dict, rng: np.random.Generator, mean_only: bool):
    """Per chain: one predictive sample per test point from a random retained draw (eqs. 7-8), or the
    predictive mean averaged over draws. ``z*`` from the GP conditional of ``Z`` given ``X``, ``y*`` from the GP
    regression of ``Y`` on ``Z`` at ``z*``."""
    out = []
    for c in range(draws["Z"].shape[0]):
        picks = rng.integers(0, draws["Z"].shape[1], size=x_test.size) if not mean_only else None
        rows = []
        for d in (np.unique(picks) if picks is not None else range(0, draws["Z"].shape[1], 5)):
            Z, s1, theta, theta_s, noise = (np.asarray(draws[n][c, d]) for n in ("Z", "s1", "theta", "theta_S", "noise"))
            idx = np.flatnonzero(picks == d) if picks is not None else np.arange(x_test.size)
            K_x = np.exp(-0.5 * s1 * (x[:, None] - x[None]) ** 2) + (1e-6 + 1e-8) * np.eye(x.size)
            K_sx = np.exp(-0.5 * s1 * (x_test[idx, None] - x[None]) ** 2)
            solve = np.linalg.solve(K_x, K_sx.T)
            z_mean = solve.T @ Z
            z_var = np.maximum(1.0 + 1e-6 - np.sum(K_sx * solve.T, axis=1), 0.0)
            z = z_mean if mean_only else z_mean + np.sqrt(z_var)[:, None] * rng.normal(size=z_mean.shape)
            K_f = theta_s * np.exp(-0.5 * (((Z[:, None] - Z[None]) ** 2) * theta).sum(-1)) + noise * np.eye(x.size)
            K_sf = theta_s * np.exp(-0.5 * (((z[:, None] - Z[None]) ** 2) * theta).sum(-1))
            alpha = np.linalg.solve(K_f, K_sf.T)
            y_mean = alpha.T @ Y
            y_var = np.maximum(theta_s - np.sum(K_sf * alpha.T, axis=1), 0.0) + noise
            y = y_mean if mean_only else y_mean + np.sqrt(y_var)[:, None] * rng.normal(size=y_mean.shape)
            rows.append((idx, y))
        if mean_only:
            out.append(np.mean([y for _, y in rows], axis=0))
        else:
            chain = np.zeros((x_test.size, Y.shape[1]))
            for idx, y in rows:
                chain[idx] = y
            out.append(chain)
    return out


def run_supervised(mode: str, fresh: bool) -> dict:
    from gpdsl import summarize
    from gpdsl.settings import NUTSSettings

    part = CONFIG[mode]["supervised"]
    x, Y, f = sinusoids(part["N"])
    print(f"[supervised] sinusoid case 1, N = {part['N']}", flush=True)
    vem = cached(f"supervised_{mode}_vem", lambda: supervised_vem_run(x, Y, f, part), fresh)

    def nuts_run() -> dict:
        model = load_model(str(SUPERVISED))
        settings = NUTSSettings(chains=part["nuts"]["chains"], warmup=part["nuts"]["warmup"],
                                draws=part["nuts"]["draws"], adapt_delta=part["nuts"]["adapt_delta"])
        started = time.perf_counter()
        centred = Y - Y.mean(0)
        result = run(model, {"N": len(x), "Q": part["Q"], "D": 6, "X": x[:, None], "Y": centred}, "nuts", settings,
                     seed=part["nuts"]["seed"])
        wall = time.perf_counter() - started
        post, stats = groups(result)["posterior"], groups(result)["sample_stats"]
        draws = {n: np.asarray(post[n]) for n in ("Z", "s1", "theta", "theta_S", "noise")}
        summary = summarize(result, var_names=["s1", "theta", "theta_S", "noise"])
        x_test = np.linspace(0, 4 * np.pi, part["test_points"])
        rng = np.random.default_rng(12)
        samples = nuts_supervised_predictions(x, centred, x_test, draws, rng, mean_only=False)
        means = nuts_supervised_predictions(x, centred, x_test, draws, rng, mean_only=True)
        chains = [{"mae": predictive_mae(sample + Y.mean(0), f(x_test), np.random.default_rng(12)),
                   "mean_rmse": float(np.sqrt(np.mean((mean + Y.mean(0) - f(x_test)) ** 2))),
                   "divergences": int(np.asarray(stats["diverging"])[c].sum())}
                  for c, (sample, mean) in enumerate(zip(samples, means))]
        return {"wall_seconds": wall, "chains": chains, "max_r_hat": float(np.nanmax(summary["r_hat"])),
                "min_ess_bulk": float(np.nanmin(summary["ess_bulk"]))}

    nuts = cached(f"supervised_{mode}_nuts", nuts_run, fresh)
    summary = {"settings": part, "vem": vem, "nuts": nuts}
    suffix = "" if mode == "full" else "_quick"
    write_text(RESULTS / f"supervised{suffix}.json", json.dumps(summary, indent=1) + "\n")
    write_text(RESULTS / f"supervised{suffix}.md", supervised_markdown(summary))
    return summary


def supervised_markdown(s: dict) -> str:
    part, nuts = s["settings"], s["nuts"]
    lines = [f"Sinusoid case 1 of Gadd, Wade & Shah (N = {part['N']} on [0, 4 pi], 6 outputs, noise sd 0.05, "
             f"outputs centred), `models/supervised_gplvm.gpm` with Q = {part['Q']}. VEM: M = {part['M']} inducing "
             f"inputs, analytic Psi statistics, best of {STARTS} starts (bounds "
             f"{', '.join(f'{b:.1f}' for b in s['vem']['start_bounds'])}), at most {part['max_iterations']} "
             f"iterations each. NUTS: {part['nuts']['chains']} chains x ({part['nuts']['warmup']} + "
             f"{part['nuts']['draws']}), adapt_delta {part['nuts']['adapt_delta']}, Z sampled with the "
             "hyperparameters, F integrated out. Rotation-invariant measures on "
             f"{part['test_points']} test inputs: the MAE of eq. 12 (a noisy truth against one predictive sample; "
             "a perfect predictive gives 0.056 +- 0.0014) and the RMSE of the predictive mean against the "
             "noise-free functions.", "",
             "| method | MAE y1 | y2 | y3 | y4 | y5 | y6 | RMSE of the mean | divergences |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
             "| VEM | " + " | ".join(f"{v:.3f}" for v in s["vem"]["mae"]) + f" | {s['vem']['mean_rmse']:.3f} | - |"]
    for c, chain in enumerate(nuts["chains"]):
        lines.append(f"| NUTS chain {c} | " + " | ".join(f"{v:.3f}" for v in chain["mae"])
                     + f" | {chain['mean_rmse']:.3f} | {chain['divergences']} |")
    lines += ["", f"NUTS: largest R-hat of the hyperparameters {nuts['max_r_hat']:.2f}, smallest bulk ESS "
              f"{nuts['min_ess_bulk']:.0f}, {nuts['wall_seconds']:.0f} s in all; VEM {s['vem']['seconds']:.0f} s for "
              "the kept start. Paper (Table 3, case 1): PM 0.052-0.057, VEM 0.067-0.087."]
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=("sequences", "missing-inputs", "mackey-glass", "supervised", "all"),
                        default="all")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--fresh", action="store_true")
    args = parser.parse_args(argv)
    mode = "quick" if args.quick else "full"
    if args.part in ("sequences", "all"):
        print(sequences_markdown(run_sequences(mode, args.fresh)))
    if args.part in ("mackey-glass", "all"):
        print(mackey_glass_markdown(run_mackey_glass(mode, args.fresh), CONFIG[mode]["mackey_glass"]))
    if args.part in ("supervised", "all"):
        print(supervised_markdown(run_supervised(mode, args.fresh)))
    if args.part in ("missing-inputs", "all"):
        print(missing_inputs_markdown(run_missing_inputs(mode, args.fresh)))


if __name__ == "__main__":
    main()
