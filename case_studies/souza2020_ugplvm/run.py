"""Reproduce the dimensionality-reduction experiments of the Unscented GPLVM with gpdsl.

* de Souza (2020), MSc dissertation, Ch. 3 "Unscented Gaussian process latent variable model", Tables 1
  (oil flow) and 2 (USPS): Bayesian GPLVM by variational EM with analytic, unscented (UT),
  Gauss-Hermite (GH) and Monte Carlo (MC) Psi statistics, scored by 5-fold cross-validated 1-NN
  accuracy on the two most relevant latent dimensions.
* Damianou, Titsias & Lawrence (2016), Sec. 5.2, Figs. 5-6: the oil-flow embedding with Q = 10,
  its ARD weights and the number of 1-NN errors.
* An extra baseline: NUTS (Stan) on a small oil-flow subset against variational EM.

Usage::

    python case_studies/souza2020_ugplvm/run.py --quick                 # every part, CI size
    python case_studies/souza2020_ugplvm/run.py --table 1               # Table 1, full settings
    python case_studies/souza2020_ugplvm/run.py --table 1-oil100|2|visual|nuts|all [--fresh]
    python case_studies/souza2020_ugplvm/run.py --table 2 --render      # rebuild a table from cached fits only

Outputs go to ``case_studies/souza2020_ugplvm/results/`` (``*_quick.*`` from ``--quick``), written
atomically; each fit's summary is cached in ``results/cache/`` so an interrupted run resumes
(``--fresh`` ignores the cache). Tables are rewritten after every fit, so a run stopped half way
leaves a table of the fits that finished (the rest marked "not run").

Public API: ``gpdsl.run`` (NUTS), ``gpdsl.load_model``, ``gpdsl.settings``, ``gpdsl.datasets``, ``gpdsl.results``.
The variational fits are not ``gpdsl.run``'s ``vem``: :func:`fit_restarted` restarts L-BFGS from the end point,
so it calls the engine's :func:`gpdsl.inference.variational.vem.fit_vem` on the model's view
(:func:`gpdsl.inference.families.gplvm.gplvm_problem`) and writes the visual fit's results file as ``vem`` would
(:func:`gpdsl.inference.methods.vem.vem_output`, :func:`gpdsl.results.method_output.method_results`); the
latent dimensions are scored and drawn by :mod:`gpdsl.inference.predict.gplvm` and
:func:`gpdsl.results.latent_plot.plot_latent`; outputs are written all or nothing (:mod:`gpdsl.storage.atomic`).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import gpdsl  # noqa: E402,F401  (sets BLAS thread variables before numpy/jax load)



import numpy as np  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from scipy.spatial import procrustes  # noqa: E402

from case_studies.souza2020_ugplvm import paper_tables  # noqa: E402
from gpdsl import load_model, run  # noqa: E402
from gpdsl.storage.atomic import atomic_write_text  # noqa: E402
from gpdsl.datasets import oil_flow, usps  # noqa: E402
from gpdsl.inference.families.gplvm import gplvm_problem  # noqa: E402
from gpdsl.inference.methods.vem import vem_output  # noqa: E402
from gpdsl.inference.predict.gplvm import latent_relevance, latent_variance_grid, most_relevant_dims  # noqa: E402
from gpdsl.inference.variational.vem import fit_vem  # noqa: E402
from gpdsl.results import groups, results_json, save_png, write_netcdf  # noqa: E402
from gpdsl.results.latent_plot import plot_latent  # noqa: E402
from gpdsl.results.method_output import method_results  # noqa: E402
from gpdsl.settings import VEMSettings  # noqa: E402

RESULTS = HERE / "results"
CACHE = RESULTS / "cache"
MODELS = {
    "RBF": ROOT / "models" / "bayesian_gplvm.gpm",
    "Matern 3/2": HERE / "bgplvm_matern32.gpm",
    "MLP": HERE / "bgplvm_mlp.gpm",
    "RBF+priors": ROOT / "models" / "bayesian_gplvm_priors.gpm",
}
RESTARTS = 10
PSI_NAMES = {"analytic": "Analytic", "gauss_hermite": "Gauss-Hermite", "unscented": "Unscented",
             "monte_carlo": "Monte Carlo"}

# ----------------------------------------------------------------------------------------------
# Settings. "full" follows the papers except where stated (README: "what was reduced");
# "quick" is sized for CI on a shared 2-core machine.
# ----------------------------------------------------------------------------------------------
TABLE1_ROWS = [("analytic", None, "RBF"),
               ("gauss_hermite", 2, "Matern 3/2"), ("gauss_hermite", 2, "RBF"),
               ("unscented", None, "Matern 3/2"), ("unscented", None, "RBF"),
               ("monte_carlo", 10, "Matern 3/2"), ("monte_carlo", 10, "RBF"),
               ("monte_carlo", 32, "Matern 3/2"), ("monte_carlo", 32, "RBF"),
               ("monte_carlo", 200, "Matern 3/2"), ("monte_carlo", 200, "RBF")]
SETTINGS = {
    "full": {
        "table1": {"n": 1000, "Q": 5, "M": 20, "init_variance": 0.1,
                   "max_iterations": 1000, "mc_max_iterations": 300, "mc_seeds": [0, 1, 2],
                   "rows": TABLE1_ROWS},
        "table1_oil100": {"n": 100, "subset": "gpy_oil_100", "Q": 5, "M": 20, "init_variance": 0.1,
                          "max_iterations": 1000, "mc_max_iterations": 500, "mc_seeds": [0, 1, 2],
                          "rows": TABLE1_ROWS},
        "table2": {"per_class": 500, "Q": 5, "Q_mlp": 2, "M": 20, "init_variance": 0.1,
                   "max_iterations": 300, "mc_max_iterations": 100, "mc_seeds": [0, 1, 2],
                   "rows": [("analytic", None, "RBF"),
                            ("gauss_hermite", 2, "MLP"), ("gauss_hermite", 2, "RBF"),
                            ("unscented", None, "MLP"), ("unscented", None, "RBF"),
                            ("monte_carlo", 4, "MLP"), ("monte_carlo", 10, "RBF"),
                            ("monte_carlo", 32, "RBF"), ("monte_carlo", 200, "MLP"),
                            ("monte_carlo", 200, "RBF")]},
        "visual": {"n": 1000, "Q": 10, "M": 30, "init_variance": 0.5, "max_iterations": 3000,
                   "initial_values": {}},
        # N = 100 with 4 x (500 + 500) was stopped after 34 min (about 2 h projected on the shared machine)
        "nuts": {"n": 50, "Q": 2, "subset_seed": 0, "chains": 4, "warmup": 250, "draws": 250,
                 "adapt_delta": 0.9, "seed": 1, "vem_M": [20, 50], "init_variance": 0.1,
                 "max_iterations": 2000},
        "cv_folds": 5, "cv_seed": 0, "data_seed": 0,
    },
    "quick": {
        "table1": {"n": 200, "Q": 5, "M": 20, "init_variance": 0.1,
                   "max_iterations": 200, "mc_max_iterations": 100, "mc_seeds": [0, 1],
                   "rows": [("analytic", None, "RBF"), ("gauss_hermite", 2, "RBF"),
                            ("unscented", None, "Matern 3/2"), ("unscented", None, "RBF"),
                            ("monte_carlo", 10, "RBF")]},
        "table1_oil100": {"n": 100, "subset": "gpy_oil_100", "Q": 5, "M": 20, "init_variance": 0.1,
                          "max_iterations": 200, "mc_max_iterations": 100, "mc_seeds": [0, 1],
                          "rows": [("analytic", None, "RBF"), ("unscented", None, "Matern 3/2")]},
        "table2": {"per_class": 50, "Q": 5, "Q_mlp": 2, "M": 20, "init_variance": 0.1,
                   "max_iterations": 200, "mc_max_iterations": 100, "mc_seeds": [0],
                   "rows": [("analytic", None, "RBF"), ("unscented", None, "RBF"),
                            ("unscented", None, "MLP"), ("monte_carlo", 4, "MLP")]},
        "visual": {"n": 1000, "Q": 10, "M": 30, "init_variance": 0.5, "max_iterations": 300,
                   "initial_values": {}},
        "nuts": {"n": 40, "Q": 2, "subset_seed": 0, "chains": 2, "warmup": 200, "draws": 200,
                 "adapt_delta": 0.9, "seed": 1, "vem_M": [20], "init_variance": 0.1,
                 "max_iterations": 500},
        "cv_folds": 5, "cv_seed": 0, "data_seed": 0,
    },
}


# ----------------------------------------------------------------------------------------------
# Small utilities
# ----------------------------------------------------------------------------------------------
def atomic_write(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` all or nothing (:func:`gpdsl.storage.atomic.atomic_write_text`), creating its folder."""
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, text, "results table")


def write_json(path: Path, obj) -> None:
    """Write ``obj`` as indented JSON, atomically (numpy values become lists/floats)."""
    atomic_write(path, json.dumps(obj, indent=1, default=lambda v: np.asarray(v).tolist()) + "\n")


def cached(key: str, compute, fresh: bool) -> dict:
    """Return the cached summary ``results/cache/<key>.json`` or compute and store it."""
    path = CACHE / f"{key}.json"
    if path.exists() and not fresh:
        return json.loads(path.read_text())
    value = compute()
    write_json(path, value)
    return value


def pm(mean, sd=None, digits=1) -> str:
    """``"mean ± sd"`` (or just the mean) with ``digits`` decimals; a dash for missing values."""
    if mean is None or not np.isfinite(mean):
        return "-"
    return f"{mean:.{digits}f}" if sd is None else f"{mean:.{digits}f} ± {sd:.{digits}f}"


_MODELS: dict = {}


def model_of(kernel: str):
    """The checked model file for a kernel name of :data:`MODELS` (loaded once)."""
    if kernel not in _MODELS:
        _MODELS[kernel] = load_model(MODELS[kernel])
    return _MODELS[kernel]


# ----------------------------------------------------------------------------------------------
# Data
# ----------------------------------------------------------------------------------------------
def stratified_subset(labels: np.ndarray, total: int, seed: int) -> np.ndarray:
    """Sorted indices of ``total`` rows drawn without replacement, classes in proportion to their size."""
    labels = np.asarray(labels)
    if total >= len(labels):
        return np.arange(len(labels))
    rng = np.random.default_rng(seed)
    classes, counts = np.unique(labels, return_counts=True)
    quota = np.floor(total * counts / counts.sum()).astype(int)
    for i in np.argsort(-(total * counts / counts.sum() - quota))[: total - quota.sum()]:
        quota[i] += 1
    return np.sort(np.concatenate([rng.choice(np.flatnonzero(labels == c), q, replace=False)
                                   for c, q in zip(classes, quota)]))


def gpy_oil_100() -> np.ndarray:
    """Row indices of GPy's ``oil_100`` subset: ``np.random.seed(10000); np.random.permutation(1000)[:100]``.

    GPflow's ``three_phase_oil_flow.npz`` (100 points), which the thesis' GPflow code probably used, is
    presumably this subset; we cannot check that (see README).
    """
    return np.random.RandomState(10000).permutation(1000)[:100]


def oil_data(n: int, seed: int, subset: str = "stratified") -> tuple[np.ndarray, np.ndarray]:
    """Oil-flow training file (1000 x 12), a stratified subset of ``n`` rows or GPy's ``oil_100``; centred."""
    d = oil_flow("train")
    idx = gpy_oil_100() if subset == "gpy_oil_100" else stratified_subset(d.y, n, seed)
    Y = d.X[idx]
    return Y - Y.mean(axis=0), d.y[idx]


def usps_data(per_class: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``per_class`` random digits of each class 0-9 from ESL's ``zip.train``; outputs centred."""
    d = usps("train")
    rng = np.random.default_rng(seed)
    idx = np.sort(np.concatenate([rng.choice(np.flatnonzero(d.y == c), per_class, replace=False)
                                  for c in range(10)]))
    Y = d.X[idx]
    return Y - Y.mean(axis=0), d.y[idx]


def pca_scores(Y: np.ndarray, k: int = 2) -> np.ndarray:
    """Scores of the (centred) outputs on their first ``k`` principal components."""
    centred = Y - Y.mean(axis=0)
    _, _, vt = np.linalg.svd(centred, full_matrices=False)
    return centred @ vt[:k].T


# ----------------------------------------------------------------------------------------------
# 1-NN metrics (numpy)
# ----------------------------------------------------------------------------------------------
def nearest_labels(train: np.ndarray, train_labels: np.ndarray, test: np.ndarray,
                   exclude_self: bool = False) -> np.ndarray:
    """Label of each test point's Euclidean nearest training point (ties: the lower index).

    With ``exclude_self`` the test set is the training set and each point's own distance is ignored.
    """
    d2 = ((test[:, None, :] - train[None, :, :]) ** 2).sum(axis=-1)
    if exclude_self:
        np.fill_diagonal(d2, np.inf)
    return np.asarray(train_labels)[np.argmin(d2, axis=1)]


def stratified_folds(labels: np.ndarray, folds: int, seed: int) -> np.ndarray:
    """Fold number of each point: each class shuffled (fixed seed) and dealt round-robin to the folds."""
    rng = np.random.default_rng(seed)
    fold = np.empty(len(labels), dtype=int)
    offset = 0
    for c in np.unique(labels):
        members = rng.permutation(np.flatnonzero(labels == c))
        fold[members] = (offset + np.arange(len(members))) % folds
        offset += len(members)
    return fold


def cv_1nn_accuracy(points: np.ndarray, labels: np.ndarray, folds: int = 5, seed: int = 0) -> list[float]:
    """Stratified ``folds``-fold cross-validated 1-NN accuracy (%) of each fold.

    Each fold's points are classified by their nearest neighbour among the other folds' points.
    """
    points, labels = np.asarray(points, dtype=float), np.asarray(labels)
    fold = stratified_folds(labels, folds, seed)
    scores = []
    for k in range(folds):
        test = fold == k
        predicted = nearest_labels(points[~test], labels[~test], points[test])
        scores.append(100.0 * float(np.mean(predicted == labels[test])))
    return scores


def nn_errors(points: np.ndarray, labels: np.ndarray) -> int:
    """Number of points whose nearest other point has a different label (Damianou et al., Sec. 5.2)."""
    predicted = nearest_labels(points, labels, points, exclude_self=True)
    return int(np.sum(predicted != np.asarray(labels)))


# ----------------------------------------------------------------------------------------------
# One variational fit, summarised
# ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Config:
    """One row of Table 1 or 2: Psi rule, GH nodes per dimension or MC samples, kernel, latent dims."""

    psi: str
    param: int | None
    kernel: str
    Q: int

    @property
    def samples(self) -> int | None:
        """Evaluation points per latent point, as the paper counts them (None for analytic)."""
        return {"analytic": None, "unscented": 2 * self.Q, "gauss_hermite": (self.param or 2) ** self.Q,
                "monte_carlo": self.param}[self.psi]

    @property
    def method(self) -> str:
        return PSI_NAMES[self.psi]

    def key(self) -> str:
        kernel = self.kernel.replace(" ", "").replace("/", "")
        return f"{self.psi}{self.samples or ''}_{kernel}_Q{self.Q}"


def fit_restarted(problem, settings: VEMSettings, max_restarts: int = RESTARTS):
    """:func:`fit_vem`, restarted from its end point while L-BFGS stops early and the bound still moves.

    L-BFGS often stops long before the iteration cap with a "relative reduction" or ABNORMAL
    line-search message while the gradient is still large (the bound is not finite at some trial
    points of the line search). A restart from the end point with a fresh L-BFGS memory usually goes on.
    Restarts continue while the bound improves by more than 1e-6 relative, up to ``max_restarts``
    times and within ``settings.max_iterations`` iterations in total.

    Returns
    -------
    fit : VEMFit
        The last fit; its ``report`` counts the iterations, evaluations and seconds of all restarts and
        has ``restarts``.
    """
    started = time.perf_counter()
    fit = fit_vem(problem, settings)
    iterations, evaluations, restarts = fit.report["iterations"], fit.report["evaluations"], 0
    while (restarts < max_restarts and iterations < settings.max_iterations
           and fit.report["stop"] != "iterations"):
        remaining = replace(settings, max_iterations=settings.max_iterations - iterations)
        new = fit_vem(problem, remaining, initial=fit.params)
        restarts += 1
        iterations += new.report["iterations"]
        evaluations += new.report["evaluations"]
        improved = new.bound - fit.bound > 1e-6 * max(abs(fit.bound), 1.0)
        if new.bound >= fit.bound:
            fit = new
        if not improved:
            break
    fit.report.update(iterations=iterations, evaluations=evaluations, restarts=restarts,
                      seconds=time.perf_counter() - started)
    return fit


def vem_settings(config: Config, part: dict, seed: int) -> VEMSettings:
    """The options of one fit: PCA means, fixed initial variances, ``M`` inducing inputs."""
    mc = config.psi == "monte_carlo"
    return VEMSettings(psi=config.psi, gh_nodes=(config.param or 2) if config.psi == "gauss_hermite" else 2,
                       mc_samples=config.param if mc else 10, num_inducing=part["M"], init="pca",
                       init_variance=part["init_variance"],
                       max_iterations=part["mc_max_iterations"] if mc else part["max_iterations"], seed=seed)


def fit_and_score(Y: np.ndarray, labels: np.ndarray, config: Config, part: dict, seed: int, cfg: dict) -> dict:
    """Fit the Bayesian GPLVM of ``config`` and score its two most relevant latent dimensions.

    Returns
    -------
    dict
        ``fold_accuracy`` (%, per CV fold), ``accuracy``/``accuracy_sd`` (mean and sd over folds),
        ``nn_errors`` (in-sample 1-NN errors), the bound, the optimiser's report, wall seconds, the
        relevance of every latent dimension, the chosen dimensions, the hyperparameters and the 2-D
        projection itself.
    """
    data = {"N": Y.shape[0], "D": Y.shape[1], "Q": config.Q, "Y": Y}
    problem = gplvm_problem(model_of(config.kernel), data)
    settings = vem_settings(config, part, seed)
    fit = fit_restarted(problem, settings)
    dims = most_relevant_dims(fit, 2)
    points = np.asarray(fit.params.mean)[:, dims]
    folds = cv_1nn_accuracy(points, labels, cfg["cv_folds"], cfg["cv_seed"])
    return {"config": config.__dict__, "seed": seed, "settings": settings.__dict__, "fold_accuracy": folds,
            "accuracy": float(np.mean(folds)), "accuracy_sd": float(np.std(folds, ddof=1)),
            "nn_errors": nn_errors(points, labels), "bound": fit.bound, **{k: fit.report[k] for k in (
                "iterations", "evaluations", "restarts", "converged", "stop", "message", "seconds")},
            "relevance": latent_relevance(fit).tolist(), "dims": dims,
            "hyperparameters": {k: v.tolist() for k, v in fit.hyperparameters().items()},
            "points": points.tolist()}


# ----------------------------------------------------------------------------------------------
# Tables 1 and 2
# ----------------------------------------------------------------------------------------------
TABLES = {
    "1": {"name": "table1", "title": "Table 1 (oil flow)", "paper": paper_tables.TABLE1},
    "2": {"name": "table2", "title": "Table 2 (USPS)", "paper": paper_tables.TABLE2},
    "1-oil100": {"name": "table1_oil100", "title": "Table 1 on GPy's 100-point oil-flow subset",
                 "paper": paper_tables.TABLE1},
}


def table_data(which: str, cfg: dict) -> tuple[np.ndarray, np.ndarray, str]:
    """Outputs, labels and a description of the data set of Table ``which``."""
    part = cfg[TABLES[which]["name"]]
    if which.startswith("1"):
        subset = part.get("subset", "stratified")
        Y, labels = oil_data(part["n"], cfg["data_seed"], subset)
        desc = (f"oil flow, training file, {len(labels)} rows"
                + (f" ({subset.replace('_', ' ')} subset)" if part["n"] < 1000 else "") + f", D = {Y.shape[1]}")
    else:
        Y, labels = usps_data(part["per_class"], cfg["data_seed"])
        desc = f"USPS zip.train, {part['per_class']} digits per class ({len(labels)} rows), D = {Y.shape[1]}"
    return Y, labels, desc


def table_configs(which: str, cfg: dict) -> list[Config]:
    """The rows of Table ``which`` as :class:`Config` (MLP rows use ``Q_mlp`` latent dimensions)."""
    part = cfg[TABLES[which]["name"]]
    return [Config(psi, param, kernel, part.get("Q_mlp", part["Q"]) if kernel == "MLP" else part["Q"])
            for psi, param, kernel in part["rows"]]


def run_table(which: str, cfg: dict, mode: str, fresh: bool, render_only: bool = False) -> dict:
    """Run (or read from the cache) every fit of Table ``which``, rewriting the table after each fit.

    Every row is first fitted with the first seed; then the Monte Carlo rows get their further seeds,
    cheapest (fewest samples) first, so that a run stopped early still has one fit of each row.
    With ``render_only`` no fit is started: the table is rebuilt from the cached fits.
    """
    spec = TABLES[which]
    part = cfg[spec["name"]]
    suffix = "" if mode == "full" else f"_{mode}"
    Y, labels, desc = table_data(which, cfg)
    pca = cv_1nn_accuracy(pca_scores(Y), labels, cfg["cv_folds"], cfg["cv_seed"])
    configs = table_configs(which, cfg)
    runs: dict[Config, list[dict]] = {c: [] for c in configs}
    first, *extra = part["mc_seeds"]
    order = [(first, c) for c in configs] + sorted(
        ((seed, c) for c in configs if c.psi == "monte_carlo" for seed in extra),
        key=lambda sc: (sc[1].samples, sc[0]))
    started = time.perf_counter()
    for seed, config in order:
        print(f"[{spec['name']}] {config.method} {config.samples or ''} {config.kernel} Q={config.Q} "
              f"seed {seed}", flush=True)
        key = f"{spec['name']}_{mode}_{config.key()}_s{seed}"
        if render_only and not (CACHE / f"{key}.json").exists():
            continue
        runs[config].append(cached(key, lambda: fit_and_score(Y, labels, config, part, seed, cfg), fresh))
        out = {"settings": cfg[spec["name"]], "data": desc, "pca": pca, "wall_seconds": time.perf_counter() - started,
               "rows": [{"config": c.__dict__, "runs": [{k: v for k, v in r.items() if k != "points"}
                                                         for r in runs[c]]} for c in configs]}
        write_json(RESULTS / f"{spec['name']}{suffix}.json", out)
        atomic_write(RESULTS / f"{spec['name']}{suffix}.md", table_markdown(which, cfg, mode, desc, pca, configs,
                                                                               runs))
    return {"runs": runs, "labels": labels}


STOP_LABELS = {"gradient": "converged", "reduction": "relative reduction", "line_search": "ABNORMAL",
               "iterations": "max iterations", "evaluations": "max evaluations"}


def _stop_label(record: dict) -> str:
    """Why a stored fit stopped, in the table's words (records before gpdsl's own L-BFGS carry only
    SciPy L-BFGS-B's message)."""
    if "stop" in record:
        return STOP_LABELS[record["stop"]]
    if record["converged"]:
        return "converged"
    return "max iterations" if "ITERATIONS" in record["message"] else record["message"].split(":")[0]


def _stop_sentence(record: dict) -> str:
    """The optimiser's reason for stopping, as a sentence (SciPy's messages lack gpdsl's "stopped:")."""
    message = record["message"].strip()
    return message if "stop" in record else f"stopped: {message}"


def table_markdown(which: str, cfg: dict, mode: str, desc: str, pca: list[float], configs: list[Config],
                   runs: dict) -> str:
    """Markdown of Table ``which``: our accuracy, bound, iterations and wall time beside the paper's accuracy."""
    spec = TABLES[which]
    part = cfg[spec["name"]]
    lines = [f"# {spec['title']}, {mode} settings", "",
             f"Data: {desc}, outputs centred. Bayesian GPLVM, Q = {part['Q']}"
             + (f" (MLP: Q = {part['Q_mlp']})" if "Q_mlp" in part else "")
             + f", M = {part['M']} inducing inputs, PCA means, initial variances {part['init_variance']}, "
             f"L-BFGS for at most {part['max_iterations']} iterations (Monte Carlo: {part['mc_max_iterations']}). "
             f"Accuracy: stratified {cfg['cv_folds']}-fold cross-validated 1-NN accuracy (%) on the two latent "
             "dimensions of largest ARD relevance, mean ± sd over folds (sd with ddof = 1, which reproduces the "
             "paper's sds for folds of 20 points). Monte Carlo rows: "
             f"fixed draws per fit, seeds {part['mc_seeds']}; accuracy is the mean ± sd over seeds of each "
             "seed's CV mean, and the fold sd column is averaged over seeds. Bound, iterations and wall time: "
             "mean over seeds. 'paper': de Souza (2020), Table " + which[0] + ".", "",
             "| method | samples | kernel | Q | accuracy % (ours) | fold sd | seeds | 1-NN errors (in-sample) | "
             "bound | iterations (restarts) | evaluations | stopped | wall s | accuracy % (paper) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
             f"| PCA | - | - | - | {pm(np.mean(pca), np.std(pca, ddof=1))} | {np.std(pca, ddof=1):.1f} | - | - | - | - | - | - | - "
             f"| {spec['paper'].get(('PCA', None, None), '-')} |"]
    for c in configs:
        paper = spec["paper"].get((c.method, c.samples, c.kernel), "-")
        cells = [c.method, str(c.samples or "-"), c.kernel, str(c.Q)]
        done = runs.get(c, [])
        if not done:
            lines.append("| " + " | ".join(cells + ["not run"] + ["-"] * 8 + [paper]) + " |")
            continue
        acc = np.array([r["accuracy"] for r in done])
        fold_sd = [np.std(r["fold_accuracy"], ddof=1) for r in done]
        accuracy = pm(acc.mean(), acc.std(ddof=1) if len(done) > 1 else fold_sd[0])
        stopped = ", ".join(sorted({_stop_label(r) for r in done}))
        lines.append("| " + " | ".join(cells + [
            accuracy, pm(np.mean(fold_sd)), str(len(done)),
            pm(np.mean([r["nn_errors"] for r in done]), digits=0 if len(done) == 1 else 1),
            pm(np.mean([r["bound"] for r in done]), digits=1),
            f"{np.mean([r['iterations'] for r in done]):.0f} ({np.mean([r.get('restarts', 0) for r in done]):.0f})",
            pm(np.mean([r["evaluations"] for r in done]), digits=0), stopped,
            pm(np.mean([r["seconds"] for r in done]), digits=0), paper]) + " |")
    lines += ["", "'stopped': converged = the gradient test (SciPy's L-BFGS-B also counted its relative-reduction test); "
              "relative reduction = the bound stopped improving; max iterations = the iteration cap; ABNORMAL = the "
              "line search failed; the last restart's reason is shown. L-BFGS is restarted "
              f"from its end point (up to {RESTARTS} times) while it stops early and the bound improves "
              "(`fit_restarted`); iterations count all restarts. Wall seconds include "
              "XLA compilation; the machine was a shared 2-core one.", ""]
    return "\n".join(lines)


def plot_table_projections(result: dict, which: str, mode: str) -> Path:
    """One PNG with the 2-D projection of each row (seed 0), coloured by class (like the thesis' Fig. 2)."""
    runs, labels = result["runs"], result["labels"]
    configs = [c for c in runs if runs[c]]
    cols = 4
    rows = int(np.ceil(len(configs) / cols))
    figure = Figure(figsize=(4 * cols, 3.6 * rows), layout="constrained")
    axes = np.atleast_1d(figure.subplots(rows, cols)).ravel()
    for ax, c in zip(axes, configs):
        points = np.asarray(runs[c][0]["points"])
        for i, value in enumerate(np.unique(labels)):
            chosen = labels == value
            ax.scatter(points[chosen, 0], points[chosen, 1], s=4, color=f"C{i % 10}", label=str(value))
        ax.set_title(f"{c.method} {c.samples or ''} {c.kernel} (acc {runs[c][0]['accuracy']:.1f}%)", fontsize="small")
    for ax in axes[len(configs):]:
        ax.set_visible(False)
    if configs:
        axes[0].legend(fontsize="x-small", markerscale=2)
    suffix = "" if mode == "full" else f"_{mode}"
    return save_png(figure, RESULTS / f"{TABLES[which]['name']}{suffix}_projections.png")


# ----------------------------------------------------------------------------------------------
# Visualisation (Damianou et al. 2016, Sec. 5.2)
# ----------------------------------------------------------------------------------------------
def run_visual(cfg: dict, mode: str, fresh: bool) -> dict:
    """Oil flow with Q = 10, analytic RBF: latent picture, ARD weights and 1-NN errors.

    Writes ``visual[_quick].md``/``.json``, ``oil_latent[_quick].png`` (two dominant dimensions over the
    predictive variance), ``oil_ard[_quick].png`` (ARD weights) and the fit as ``oil_visual[_quick].nc``.
    The fit is not cached (it takes about a minute); the summary is.
    """
    part = cfg["visual"]
    suffix = "" if mode == "full" else f"_{mode}"
    Y, labels = oil_data(part["n"], cfg["data_seed"])
    data = {"N": Y.shape[0], "D": Y.shape[1], "Q": part["Q"], "Y": Y}
    key = f"visual_{mode}"
    if (CACHE / f"{key}.json").exists() and not fresh and (RESULTS / f"oil_latent{suffix}.png").exists():
        summary = json.loads((CACHE / f"{key}.json").read_text())
    else:
        print(f"[visual] oil flow Q={part['Q']} M={part['M']}", flush=True)
        settings = VEMSettings(psi="analytic", num_inducing=part["M"], init="pca",
                               init_variance=part["init_variance"], max_iterations=part["max_iterations"],
                               initial_values=part["initial_values"], seed=cfg["data_seed"])
        model = model_of("RBF")
        fit = fit_restarted(gplvm_problem(model, data), settings)
        write_netcdf(method_results(model, data, "vem", "gpdsl", settings, settings.seed, vem_output(model, fit)),
                     RESULTS / f"oil_visual{suffix}.nc")
        relevance = latent_relevance(fit)
        dims = most_relevant_dims(fit, 2)
        points = np.asarray(fit.params.mean)[:, dims]
        plot_latent(points, RESULTS / f"oil_latent{suffix}.png", labels=labels,
                    background=latent_variance_grid(fit, dims), dims=tuple(d + 1 for d in dims),
                    title=f"oil flow, variational GP-LVM (Q = {part['Q']}, M = {part['M']}): "
                          f"{nn_errors(points, labels)} 1-NN errors")
        figure = Figure(figsize=(6, 3.5), layout="constrained")
        ax = figure.subplots()
        ax.bar(np.arange(1, part["Q"] + 1), relevance, color="C0")
        ax.set_xlabel("latent dimension (1-based)")
        ax.set_ylabel("ARD weight (inverse squared length-scale)")
        ax.set_xticks(np.arange(1, part["Q"] + 1))
        save_png(figure, RESULTS / f"oil_ard{suffix}.png")
        pca_points = pca_scores(Y)
        summary = {"settings": part, "bound": fit.bound, **{k: fit.report[k] for k in (
                   "iterations", "evaluations", "restarts", "converged", "stop", "message", "seconds")},
                   "relevance": relevance.tolist(), "dims": dims, "nn_errors": nn_errors(points, labels),
                   "pca_nn_errors": nn_errors(pca_points, labels),
                   "cv_accuracy": cv_1nn_accuracy(points, labels, cfg["cv_folds"], cfg["cv_seed"]),
                   "hyperparameters": {k: v.tolist() for k, v in fit.hyperparameters().items()}}
        write_json(CACHE / f"{key}.json", summary)
    write_json(RESULTS / f"visual{suffix}.json", summary)
    atomic_write(RESULTS / f"visual{suffix}.md", visual_markdown(summary, mode, suffix))
    return summary


def visual_markdown(s: dict, mode: str, suffix: str) -> str:
    """Markdown summary of the visualisation run."""
    part = s["settings"]
    rel = np.asarray(s["relevance"])
    lines = [f"# Oil-flow visualisation (Damianou et al. 2016, Sec. 5.2), {mode} settings", "",
             f"Oil flow training file ({part['n']} x 12, outputs centred), Bayesian GPLVM with rbf-ARD, analytic Psi "
             f"statistics, Q = {part['Q']}, M = {part['M']} inducing inputs, PCA means, initial variances "
             f"{part['init_variance']}, "
             + (f"initial values {part['initial_values']}" if part["initial_values"] else
                "the Sec. 5 heuristics for the hyperparameters (gpdsl's default start)")
             + f", gpdsl's default optimiser (50-iteration warm-up, block scales), L-BFGS for at most "
             f"{part['max_iterations']} iterations in total, restarted while it stops early.", "",
             f"* final bound {s['bound']:.1f}; {s['iterations']} iterations ({s.get('restarts', 0)} restarts), "
             f"{s['evaluations']} evaluations, "
             f"{_stop_sentence(s)}; {s['seconds']:.0f} s",
             f"* dominant dimensions (from 1): {[d + 1 for d in s['dims']]}; ARD weights: "
             + ", ".join(f"{v:.3g}" for v in rel),
             f"* 1-NN errors in the 2-D projection (points whose nearest other point has another class): "
             f"**{s['nn_errors']}** of {part['n']} (Damianou et al.: 1 for the variational GP-LVM, 26 for the "
             f"sparse GP-LVM with q = 2, 8 / 2 for the full GP-LVM with ARD / EQ kernel); first two principal "
             f"components: {s['pca_nn_errors']}",
             f"* 5-fold CV 1-NN accuracy on the same projection: "
             f"{pm(np.mean(s['cv_accuracy']), np.std(s['cv_accuracy'], ddof=1))} %",
             "", f"![latent space](oil_latent{suffix}.png)", "", f"![ARD weights](oil_ard{suffix}.png)", ""]
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------------
# NUTS baseline
# ----------------------------------------------------------------------------------------------
def loo_1nn_accuracy(points: np.ndarray, labels: np.ndarray) -> float:
    """Leave-one-out 1-NN accuracy (%): each point classified by its nearest other point."""
    return 100.0 * (1.0 - nn_errors(points, labels) / len(labels))


def run_nuts(cfg: dict, mode: str, fresh: bool) -> dict:
    """NUTS (Stan) against variational EM on a stratified oil-flow subset with Q = 2.

    Compared with rotation-invariant quantities (see the README): leave-one-out 1-NN accuracy of each
    chain's posterior-mean X and averaged over single draws, and Procrustes disparities between each
    chain's posterior-mean X, the other chains' and the VEM means.
    """
    from gpdsl.settings import NUTSSettings

    part = cfg["nuts"]
    suffix = "" if mode == "full" else f"_{mode}"
    Y, labels = oil_data(part["n"], part["subset_seed"])
    data = {"N": Y.shape[0], "D": Y.shape[1], "Q": part["Q"], "Y": Y}
    model = model_of("RBF+priors")

    def vem_run(M: int) -> dict:
        settings = VEMSettings(psi="analytic", num_inducing=M, init="pca", init_variance=part["init_variance"],
                               max_iterations=part["max_iterations"], seed=cfg["data_seed"])
        fit = fit_restarted(gplvm_problem(model, data), settings)
        X = np.asarray(fit.params.mean)
        return {"M": M, "X": X.tolist(), "bound": fit.bound, "seconds": fit.report["seconds"],
                "iterations": fit.report["iterations"], "message": fit.report["message"],
                "loo_accuracy": loo_1nn_accuracy(X, labels),
                "hyperparameters": {k: v.tolist() for k, v in fit.hyperparameters().items()}}

    def nuts_run() -> dict:
        started = time.perf_counter()
        settings = NUTSSettings(chains=part["chains"], warmup=part["warmup"], draws=part["draws"],
                                adapt_delta=part["adapt_delta"])
        result = run(model, data, "nuts", settings, seed=part["seed"])
        wall = time.perf_counter() - started
        g = groups(result)
        post, stats = g["posterior"], g["sample_stats"]
        X = np.asarray(post["X"])                                   # (chain, draw, N, Q)
        timings = results_json(result, "timings")
        per_chain = []
        for c in range(X.shape[0]):
            draws_acc = [loo_1nn_accuracy(X[c, d], labels) for d in range(X.shape[1])]
            per_chain.append({
                "posterior_mean_X": X[c].mean(axis=0).tolist(),
                "loo_accuracy_mean_X": loo_1nn_accuracy(X[c].mean(axis=0), labels),
                "loo_accuracy_draws_mean": float(np.mean(draws_acc)), "loo_accuracy_draws_sd": float(np.std(draws_acc)),
                "divergences": int(np.asarray(stats["diverging"])[c].sum()),
                "accept_stat": float(np.asarray(stats["acceptance_rate"])[c].mean()),
                "hyperparameters": {n: np.asarray(post[n])[c].mean(axis=0).tolist() for n in ("s2", "w", "noise")}})
        # Stan's own wall time (build included) and its sampling call's (warmup and sampling)
        return {"wall_seconds": wall, "stan_wall_time": timings["total"],
                "sampling_time": timings["warmup"] + timings["sampling"], "chains": per_chain}

    vem = [cached(f"nuts_{mode}_n{part['n']}_vem_M{M}", lambda: vem_run(M), fresh) for M in part["vem_M"]]
    print(f"[nuts] NUTS on oil flow N={part['n']} Q={part['Q']}", flush=True)
    nuts = cached(f"nuts_{mode}_n{part['n']}_stan", nuts_run, fresh)
    means = [np.asarray(ch["posterior_mean_X"]) for ch in nuts["chains"]]
    for ch, Xc in zip(nuts["chains"], means):
        ch["procrustes_vs_vem"] = {str(v["M"]): float(procrustes(np.asarray(v["X"]), Xc)[2]) for v in vem}
    between = [float(procrustes(means[a], means[b])[2]) for a in range(len(means)) for b in range(a + 1, len(means))]
    summary = {"settings": part, "vem": [{k: v for k, v in r.items() if k != "X"} for r in vem],
               "nuts": {**{k: v for k, v in nuts.items() if k != "chains"},
                        "chains": [{k: v for k, v in ch.items() if k != "posterior_mean_X"} for ch in nuts["chains"]]},
               "procrustes_between_chains": between,
               "procrustes_vem_M": {f"{a['M']}-{b['M']}": float(procrustes(np.asarray(a["X"]), np.asarray(b["X"]))[2])
                                    for i, a in enumerate(vem) for b in vem[i + 1:]},
               "pca_loo_accuracy": loo_1nn_accuracy(pca_scores(Y), labels)}
    write_json(RESULTS / f"nuts{suffix}.json", summary)
    atomic_write(RESULTS / f"nuts{suffix}.md", nuts_markdown(summary, mode))
    plot_nuts(vem, means, labels, RESULTS / f"nuts{suffix}.png")
    return summary


def nuts_markdown(s: dict, mode: str) -> str:
    """Markdown of the NUTS-vs-VEM comparison."""
    p = s["settings"]
    lines = [f"# NUTS vs variational EM, oil-flow subset, {mode} settings", "",
             f"Stratified subset of {p['n']} oil-flow rows (seed {p['subset_seed']}), D = 12 (centred), Q = {p['Q']}, "
             "model `models/bayesian_gplvm_priors.gpm` (rbf-ARD; s2 ~ lognormal(0, 1), w ~ gamma(2, 2), "
             f"noise ~ inv_gamma(2, 0.1)). NUTS: PyStan, {p['chains']} chains x ({p['warmup']} warmup + "
             f"{p['draws']} draws), adapt_delta {p['adapt_delta']}, seed {p['seed']}; X sampled jointly with the "
             "hyperparameters, F integrated out analytically (Gaussian likelihood). VEM: analytic Psi statistics, "
             "the same model "
             "(hyperparameters at their MAP), PCA means, initial variances "
             f"{p['init_variance']}.", "",
             "Latent coordinates are identified only up to rotation/reflection/permutation, so only invariant "
             "quantities are compared: LOO 1-NN accuracy (each point classified by its nearest other point), "
             "and the Procrustes disparity (scipy.spatial.procrustes: both configurations centred and scaled to unit "
             "Frobenius norm, the sum of squared differences after the best rotation/reflection and scaling; 0 = "
             "identical shape, 1 = unrelated).", "",
             "| method | wall s | LOO 1-NN acc % (mean X) | LOO 1-NN acc % (single draws, mean ± sd) | Procrustes vs VEM "
             + " / ".join(f"M={v['M']}" for v in s["vem"]) + " | divergences | mean accept_stat | s2 | noise | w |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for v in s["vem"]:
        h = v["hyperparameters"]
        lines.append(f"| VEM M = {v['M']} ({v['iterations']} it., {v['message'].split(':')[0]}) | {v['seconds']:.1f} | "
                     f"{v['loo_accuracy']:.1f} | - | - | - | - | {np.ravel(h['s2'])[0]:.3g} | {np.ravel(h['noise'])[0]:.3g} | "
                     + ", ".join(f"{x:.3g}" for x in np.ravel(h["w"])) + " |")
    n = s["nuts"]
    for c, ch in enumerate(n["chains"]):
        h = ch["hyperparameters"]
        wall = f"{n['wall_seconds']:.0f} (all chains)" if c == 0 else ""
        lines.append(f"| NUTS chain {c} | {wall} | {ch['loo_accuracy_mean_X']:.1f} | "
                     f"{pm(ch['loo_accuracy_draws_mean'], ch['loo_accuracy_draws_sd'])} | "
                     + " / ".join(f"{ch['procrustes_vs_vem'][str(v['M'])]:.3f}" for v in s["vem"])
                     + f" | {ch['divergences']} | {ch['accept_stat']:.2f} | {np.ravel(h['s2'])[0]:.3g} | "
                       f"{np.ravel(h['noise'])[0]:.3g} | " + ", ".join(f"{x:.3g}" for x in np.ravel(h["w"])) + " |")
    lines += ["", f"* NUTS wall time {n['wall_seconds']:.0f} s in total (Stan's own: {n['stan_wall_time']:.0f} s, of "
              f"which sampling {n['sampling_time']:.0f} s; the rest is compilation, or loading the cached program)",
              "* Procrustes disparity between the chains' posterior-mean X (pairs): "
              + ", ".join(f"{d:.3f}" for d in s["procrustes_between_chains"]),
              "* between the VEM fits: " + (", ".join(f"{k}: {d:.3f}" for k, d in s["procrustes_vem_M"].items()) or "-"),
              f"* LOO 1-NN accuracy of the first two principal components: {s['pca_loo_accuracy']:.1f} %",
              "* hyperparameters of NUTS chains: posterior means per chain (w per latent dimension; the order of "
              "the dimensions is arbitrary)", ""]
    return "\n".join(lines)


def plot_nuts(vem: list[dict], means: list[np.ndarray], labels: np.ndarray, path: Path) -> Path:
    """Latent means of the VEM fits and of each NUTS chain, each Procrustes-aligned to the first VEM fit."""
    ref = np.asarray(vem[0]["X"])
    panels = [(f"VEM M = {v['M']}", np.asarray(v["X"])) for v in vem] + \
             [(f"NUTS chain {c} (posterior mean)", X) for c, X in enumerate(means)]
    figure = Figure(figsize=(3.2 * len(panels), 3.2), layout="constrained")
    axes = np.atleast_1d(figure.subplots(1, len(panels)))
    for ax, (title, X) in zip(axes, panels):
        aligned = procrustes(ref, X)[1]
        for i, value in enumerate(np.unique(labels)):
            chosen = labels == value
            ax.scatter(aligned[chosen, 0], aligned[chosen, 1], s=10, color=f"C{i}", label=str(value))
        ax.set_title(title, fontsize="small")
    axes[0].legend(fontsize="x-small")
    return save_png(figure, path)


# ----------------------------------------------------------------------------------------------
# Main
# ----------------------------------------------------------------------------------------------
def main(argv=None) -> None:
    """Parse the command line and produce the requested parts."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--table", default="all", choices=["1", "1-oil100", "2", "visual", "nuts", "all"])
    parser.add_argument("--quick", action="store_true", help="CI-sized settings (minutes)")
    parser.add_argument("--fresh", action="store_true", help="ignore cached fits in results/cache")
    parser.add_argument("--render", action="store_true",
                        help="Tables 1 and 2: only rebuild the tables and pictures from cached fits (no new fits)")
    args = parser.parse_args(argv)
    mode = "quick" if args.quick else "full"
    cfg = SETTINGS[mode]
    parts = ["1", "1-oil100", "visual", "nuts", "2"] if args.table == "all" else [args.table]
    timings = {}
    for part in parts:
        started = time.perf_counter()
        if part in TABLES:
            plot_table_projections(run_table(part, cfg, mode, args.fresh and not args.render, args.render), part, mode)
        elif part == "visual":
            run_visual(cfg, mode, args.fresh)
        else:
            run_nuts(cfg, mode, args.fresh)
        timings[part] = round(time.perf_counter() - started, 1)
        print(f"[{part}] done in {timings[part]} s", flush=True)
    print("wall times (s, this invocation; cached fits cost nothing):", timings, flush=True)


if __name__ == "__main__":
    main()
