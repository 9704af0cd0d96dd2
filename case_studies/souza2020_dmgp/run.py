"""Reproduce de Souza (2020), Sec. 4.4 with gpdsl: the deep Mahalanobis GP (``dmgp``) beside SGPR (``sgpr``) and the
doubly-stochastic two-layer deep GP (``dsdgp``).

Parts:

* ``synthetic`` (Sec. 4.4.1, Table 4, Figs. 6 and 8): the two-cluster set (``data.two_clusters``), 250 training and
  250 test points standardised with the training statistics; NLPD, MRAE and RMSE on that scale; the predictive means
  over the input plane and the relevances (the field kernels' variances relative to the largest).
* ``nuts``: Stan's NUTS on the DMGP with priors (``models/deep_mahalanobis_gp.gpm``) on 50 of the synthetic training
  points, beside ``dmgp`` on the same points (``nuts_column.py``).
* ``uci`` (Sec. 4.4.2, Table 5): boston, concrete, energy and wine-quality-red, five folds (``data.five_folds``),
  NLPD and MRAE in original units, mean and sd over folds.
* ``relevances`` (Fig. 10): DVMGP's and DS-DGP(2)'s latent relevances on fold 1's training part of each data set.

All models use the thesis's schedule (Adam, learning rate 0.01, 2000 steps with the noise held at 0.01, then 5000
with everything free), 50 inducing inputs, and for the DMGP 25 pseudo-inputs of the projection fields and Q = D.
The DS-DGP(2) follows the spec sheet's decisions (the thesis gives no settings): hidden width D with the identity
mean, zero mean at the output, inner ``q(u)`` scaled by 1e-5, one sample per step on the whole training set, 200
samples moment-matched at prediction.

Usage::

    python case_studies/souza2020_dmgp/run.py --part synthetic|nuts|uci|relevances|all [--quick] [--datasets NAME ...]

Outputs go to ``case_studies/souza2020_dmgp/results/`` (``*_quick.*`` from ``--quick``, which runs 200 + 300 steps
and one UCI fold), written atomically (:func:`gpdsl.storage.atomic.atomic_write_text`). Everything else goes through the
public API: ``gpdsl.run`` (``dmgp``, ``dsdgp``, ``sgpr``, ``nuts``), ``gpdsl.settings``, ``gpdsl.datasets``.
"""

from __future__ import annotations

import argparse
import json
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

from case_studies.souza2020_dmgp.data import five_folds, standardise, two_clusters
from gpdsl import load_model, run
from gpdsl.storage.atomic import atomic_write_text
from gpdsl.settings import DMGPSettings, DSDGPSettings

RESULTS = HERE / "results"
NUTS_POINTS = 50
PAPER_TABLE4 = {"SGPR": (0.041, 0.188, 0.215), "DS-DGP(2)": (-0.181, 0.318, 0.297), "DVMGP": (-1.883, 0.040, 0.129)}
PAPER_TABLE5 = {
    "boston": {"DS-DGP(2)": ((2.508, 0.249), (0.108, 0.018)), "DVMGP": ((2.444, 0.169), (0.109, 0.017)),
               "SGPR": ((2.563, 0.074), (0.112, 0.014))},
    "concrete": {"DS-DGP(2)": ((3.040, 0.036), (0.124, 0.010)), "DVMGP": ((3.070, 0.054), (0.127, 0.007)),
                 "SGPR": ((3.255, 0.025), (0.167, 0.013))},
    "energy": {"DS-DGP(2)": ((0.692, 0.108), (0.016, 0.001)), "DVMGP": ((0.735, 0.073), (0.017, 0.002)),
               "SGPR": ((1.945, 0.019), (0.067, 0.005))},
    "wine_quality_red": {"DS-DGP(2)": ((0.957, 0.063), (0.090, 0.008)), "DVMGP": ((0.963, 0.065), (0.090, 0.008)),
                         "SGPR": ((0.959, 0.061), (0.090, 0.008))},
}


def metrics(y, mean, variance) -> dict:
    """NLPD, MRAE and RMSE of a Gaussian predictive (spec sheet C, Sec. 3.2; ``variance`` includes the noise)."""
    nlpd = 0.5 * np.log(2 * np.pi) + 0.5 * np.mean(np.log(variance) + (y - mean) ** 2 / variance)
    return {"NLPD": float(nlpd), "MRAE": float(np.mean(np.abs(y - mean) / np.abs(y))),
            "RMSE": float(np.sqrt(np.mean((y - mean) ** 2)))}


def fit_and_predict(name, X, y, X_test, quick):
    """Fit ``name`` (``"DVMGP"``, ``"DS-DGP(2)"`` or ``"SGPR"``) by the thesis's schedule; predictive mean and
    variance (noise included), the fit, and its wall time."""
    N, D = X.shape
    steps = {"noise_fixed_steps": 200, "steps": 300} if quick else {"noise_fixed_steps": 2000, "steps": 5000}
    started = time.perf_counter()
    if name == "DVMGP":
        model = load_model(HERE / "dvmgp.gpm")
        data = {"N": N, "D": D, "Q": D, "X": X, "y": y}
        settings = DMGPSettings(num_inducing=min(50, N), num_inducing_fields=min(25, N),
                                initial_values={"noise": 0.01}, **steps)
    elif name == "DS-DGP(2)":
        model = load_model(HERE / "dsdgp.gpm")
        data = {"N": N, "D": D, "X": X, "y": y}
        settings = DSDGPSettings(num_inducing=min(50, N), initial_values={"noise": 0.01}, **steps)
    else:
        from gpdsl.settings import SGPRSettings

        model = load_model(HERE / "sgpr.gpm")
        data = {"N": N, "D": D, "X": X, "y": y}
        settings = SGPRSettings(num_inducing=min(50, N), optimizer="adam", initial_values={"noise": 0.01}, **steps)
    method = {"DVMGP": "dmgp", "DS-DGP(2)": "dsdgp", "SGPR": "sgpr"}[name]
    fit, state = run(model, data, method, settings, seed=19960111, new_inputs=X_test, keep_state=True)
    seconds = time.perf_counter() - started
    return (np.asarray(fit.predictions["y_mean"]).ravel(), np.asarray(fit.predictions["y_variance"]).ravel(),
            (fit, state), seconds)


def synthetic(quick: bool) -> dict:
    X_raw, y_raw, X_test_raw, y_test_raw = two_clusters()
    X, X_test, _, _ = standardise(X_raw, X_test_raw)
    y, y_test, _, _ = standardise(y_raw, y_test_raw)
    rows, fits = {}, {}
    for name in ("SGPR", "DS-DGP(2)", "DVMGP"):
        mean, variance, fit, seconds = fit_and_predict(name, X, y, X_test, quick)
        rows[name] = {**metrics(y_test, mean, variance), "seconds": seconds,
                      "noise_variance": float(np.asarray(fit[0].posterior["noise"]).ravel()[0])}
        fits[name] = fit
        print(f"synthetic {name}: {rows[name]}", flush=True)
    figure_path = RESULTS / f"synthetic_fig6_fig8{'_quick' if quick else ''}.png"
    plot_synthetic(fits, X, figure_path)
    return {"rows": rows, "figure": figure_path.name}


def plot_synthetic(fits, X, path: Path) -> None:
    """Fig. 6 (predictive means over the input plane) and Fig. 8 (the DMGP's relevances)."""
    grid = np.linspace(-3, 3, 60)
    G = np.array([[a, b] for b in grid for a in grid])
    figure = Figure(figsize=(16, 4))
    for k, name in enumerate(("SGPR", "DS-DGP(2)", "DVMGP")):
        ax = figure.add_subplot(1, 4, k + 1)
        state = fits[name][1]
        mean = np.asarray(state.predict(G)[0] if name != "SGPR" else state.predict(G).mean)
        image = ax.contourf(grid, grid, np.reshape(mean, (60, 60)), levels=20)
        ax.scatter(X[:, 0], X[:, 1], s=4, c="k")
        ax.set_title(f"{name}: predictive mean")
        figure.colorbar(image, ax=ax)
    ax = figure.add_subplot(1, 4, 4)
    relevance = np.asarray(fits["DVMGP"][0].posterior["s2"]).ravel()
    ax.bar(np.arange(1, relevance.size + 1), relevance / relevance.max())
    ax.set_xlabel("latent dimension q")
    ax.set_title("DVMGP relevance (field variance / largest)")
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)


def nuts_column(quick: bool) -> dict:
    """NUTS and ``dmgp`` on the first ``NUTS_POINTS`` of the (shuffled) synthetic training set, the same test set."""
    from case_studies.souza2020_dmgp.nuts_column import nuts_predictive
    from gpdsl.settings import NUTSSettings

    X_raw, y_raw, X_test_raw, y_test_raw = two_clusters()
    X_all, X_test, _, _ = standardise(X_raw, X_test_raw)
    y_all, y_test, _, _ = standardise(y_raw, y_test_raw)
    keep = np.sort(np.random.default_rng(0).permutation(len(y_all))[:NUTS_POINTS])
    X, y = X_all[keep], y_all[keep]
    rows = {}
    started = time.perf_counter()
    model = load_model(ROOT / "models" / "deep_mahalanobis_gp.gpm")
    settings = NUTSSettings(chains=2, warmup=200, draws=200) if quick else NUTSSettings(chains=4, warmup=1000,
                                                                                         draws=1000)
    fit = run(model, {"N": len(y), "D": 2, "Q": 2, "X": X, "y": y}, "nuts", settings, seed=19960111)
    mean, variance = nuts_predictive(fit, X, y, X_test, num_draws=50 if quick else 400)
    import arviz as az

    rhat = az.rhat(fit.posterior[["sf2", "s2", "ell", "noise"]])
    summary = {"max_rhat": float(max(np.nanmax(np.asarray(rhat[name])) for name in rhat.data_vars))}
    rows["NUTS"] = {**metrics(y_test, mean, variance), "seconds": time.perf_counter() - started, **summary}
    mean, variance, _, seconds = fit_and_predict("DVMGP", X, y, X_test, quick)
    rows["DVMGP"] = {**metrics(y_test, mean, variance), "seconds": seconds}
    for name, row in rows.items():
        print(f"NUTS column, {NUTS_POINTS} training points, {name}: {row}", flush=True)
    return {"points": NUTS_POINTS, "rows": rows}


def uci(quick: bool, datasets=tuple(PAPER_TABLE5), store=None, done=None) -> dict:
    """Table 5's folds. ``done`` holds the folds of an earlier run (``{dataset: {model: [fold, ...]}}``, in fold
    order), which are kept and not fitted again; ``store(table)`` is called after each fold, so a long run that
    stops resumes where it stopped."""
    from gpdsl.datasets import uci_regression

    table = {dataset: {name: list(folds) for name, folds in per_model.items()}
             for dataset, per_model in (done or {}).items()}
    for dataset in datasets:
        loaded = uci_regression(dataset)
        X_all, y_all = np.asarray(loaded.X, dtype=float), np.asarray(loaded.y, dtype=float).ravel()
        folds = five_folds(len(y_all))[: 1 if quick else 5]
        per_model = table.setdefault(dataset, {})
        for name in ("SGPR", "DS-DGP(2)", "DVMGP"):
            per_model.setdefault(name, [])
        for index, fold in enumerate(folds):
            train = np.setdiff1d(np.arange(len(y_all)), fold)
            X, X_test, _, _ = standardise(X_all[train], X_all[fold])
            y, _, y_mean, y_scale = standardise(y_all[train], y_all[fold])
            for name, finished in per_model.items():
                if len(finished) > index:
                    continue
                mean, variance, _, seconds = fit_and_predict(name, X, y, X_test, quick)
                scores = metrics(y_all[fold], mean * y_scale + y_mean, variance * y_scale ** 2)
                finished.append({**scores, "seconds": seconds})
                print(f"{dataset} fold {index + 1} {name}: {scores}, {seconds:.0f} s", flush=True)
                if store is not None:
                    store(table)
    return table


def relevances(quick: bool, datasets=tuple(PAPER_TABLE5)) -> dict:
    """Fig. 10: the latent relevances of DVMGP (the field variances ``s2``) and DS-DGP(2) (the output layer's
    inverse squared length-scales ``1 / ell2^2`` over the hidden dimensions), each relative to its largest, from
    the fits on the training part of fold 1 of each data set."""
    from gpdsl.datasets import uci_regression

    rows = {}
    for dataset in datasets:
        loaded = uci_regression(dataset)
        X_all, y_all = np.asarray(loaded.X, dtype=float), np.asarray(loaded.y, dtype=float).ravel()
        fold = five_folds(len(y_all))[0]
        train = np.setdiff1d(np.arange(len(y_all)), fold)
        X, X_test, _, _ = standardise(X_all[train], X_all[fold])
        y, _, _, _ = standardise(y_all[train], y_all[fold])
        rows[dataset] = {}
        for name, read in (("DVMGP", lambda post: np.asarray(post["s2"]).ravel()),
                           ("DS-DGP(2)", lambda post: 1.0 / np.asarray(post["ell2"]).ravel() ** 2)):
            _, _, (fit, _), seconds = fit_and_predict(name, X, y, X_test, quick)
            values = read(fit.posterior)
            rows[dataset][name] = {"relevance": (values / values.max()).tolist(), "seconds": seconds}
            print(f"{dataset} {name} relevance: {np.round(values / values.max(), 3).tolist()}", flush=True)
    return rows


def plot_relevances(rows: dict, path: Path) -> None:
    """Fig. 10: one panel per data set, the two models' relevances side by side, sorted by DVMGP's."""
    figure = Figure(figsize=(4 * len(rows), 3.2))
    for k, (dataset, models) in enumerate(rows.items()):
        ax = figure.add_subplot(1, len(rows), k + 1)
        for offset, (name, row) in zip((-0.2, 0.2), models.items()):
            values = np.sort(np.asarray(row["relevance"]))[::-1]
            ax.bar(np.arange(1, values.size + 1) + offset, values, width=0.4, label=name)
        ax.set_title(dataset)
        ax.set_xlabel("latent dimension (sorted)")
        ax.legend(fontsize=7)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)


def report(results: dict, quick: bool) -> str:
    lines = ["# de Souza (2020), Sec. 4.4: gpdsl beside the thesis", ""]
    if "synthetic" in results:
        lines += ["## Table 4: synthetic two-cluster set (train-standardised scale)", "",
                  "| model | NLPD (ours) | NLPD (thesis) | MRAE (ours) | MRAE (thesis) | RMSE (ours) | RMSE (thesis) "
                  "| fit seconds |", "|---|---|---|---|---|---|---|---|"]
        for name, row in results["synthetic"]["rows"].items():
            paper = PAPER_TABLE4[name]
            lines.append(f"| {name} | {row['NLPD']:.3f} | {paper[0]:.3f} | {row['MRAE']:.3f} | {paper[1]:.3f} | "
                         f"{row['RMSE']:.3f} | {paper[2]:.3f} | {row['seconds']:.0f} |")
        lines.append("")
    if "nuts" in results:
        lines += [f"## NUTS beside DVMGP on {results['nuts']['points']} training points of the synthetic set", "",
                  "| method | NLPD | MRAE | RMSE | seconds | largest R-hat |", "|---|---|---|---|---|---|"]
        for name, row in results["nuts"]["rows"].items():
            rhat = f"{row['max_rhat']:.3f}" if "max_rhat" in row else ""
            lines.append(f"| {name} | {row['NLPD']:.3f} | {row['MRAE']:.3f} | {row['RMSE']:.3f} | {row['seconds']:.0f} | "
                         f"{rhat} |")
        lines.append("")
    if "uci" in results:
        lines += ["## Table 5: UCI, five folds, original units (mean ± sd over folds)", "",
                  "| dataset | model | NLPD (ours) | NLPD (thesis) | MRAE (ours) | MRAE (thesis) | RMSE (ours) | folds "
                  "| fit seconds per fold |", "|---|---|---|---|---|---|---|---|---|"]
        for dataset, per_model in results["uci"].items():
            for name, folds in per_model.items():
                if not folds:
                    continue
                values = {k: np.array([f[k] for f in folds]) for k in ("NLPD", "MRAE", "RMSE")}
                (nlpd, nlpd_sd), (mrae, mrae_sd) = PAPER_TABLE5[dataset][name]
                lines.append(f"| {dataset} | {name} | {values['NLPD'].mean():.3f} ± {values['NLPD'].std(ddof=1) if len(folds) > 1 else 0:.3f}"
                             f" | {nlpd:.3f} ± {nlpd_sd:.3f} | {values['MRAE'].mean():.3f} ± "
                             f"{values['MRAE'].std(ddof=1) if len(folds) > 1 else 0:.3f} | {mrae:.3f} ± {mrae_sd:.3f} | "
                             f"{values['RMSE'].mean():.3f} | {len(folds)} | "
                             f"{np.mean([f['seconds'] for f in folds]):.0f} |")
        lines.append("")
    if "relevances" in results:
        lines += ["## Fig. 10: latent relevances relative to the largest (fold 1's training part), sorted", "",
                  "| dataset | model | relevances | dimensions above 0.05 | fit seconds |", "|---|---|---|---|---|"]
        for dataset, per_model in results["relevances"].items():
            for name, row in per_model.items():
                values = np.sort(np.asarray(row["relevance"]))[::-1]
                lines.append(f"| {dataset} | {name} | {', '.join(f'{v:.3f}' for v in values)} | "
                             f"{int(np.sum(values > 0.05))} | {row['seconds']:.0f} |")
        lines.append("")
    if quick:
        lines.insert(1, "(quick run: 200 + 300 steps, one fold; not the thesis's settings)")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=("synthetic", "nuts", "uci", "relevances", "all"), default="all")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--datasets", nargs="+", choices=tuple(PAPER_TABLE5), default=tuple(PAPER_TABLE5))
    parser.add_argument("--fresh", action="store_true", help="refit the UCI folds already in results/")
    args = parser.parse_args(argv)
    suffix = "_quick" if args.quick else ""
    RESULTS.mkdir(parents=True, exist_ok=True)
    results = {}

    def store(part, value):
        results[part] = value
        atomic_write_text(RESULTS / f"results_{args.part}{suffix}.json", json.dumps(results, indent=1, default=str))
        atomic_write_text(RESULTS / f"tables_{args.part}{suffix}.md", report(results, args.quick))

    if args.part in ("synthetic", "all"):
        store("synthetic", synthetic(args.quick))
    if args.part in ("nuts", "all"):
        store("nuts", nuts_column(args.quick))
    if args.part in ("uci", "all"):
        earlier = RESULTS / f"results_{args.part}{suffix}.json"
        done = json.loads(earlier.read_text()).get("uci") if earlier.exists() and not args.fresh else None
        uci(args.quick, args.datasets, store=lambda table: store("uci", dict(table)), done=done)
    if args.part in ("relevances", "all"):
        rows = relevances(args.quick, args.datasets)
        plot_relevances(rows, RESULTS / f"uci_fig10_relevances{suffix}.png")
        store("relevances", rows)
    print(report(results, args.quick))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
