"""Experiments of Tegner, Bloem-Reddy & Roberts (2018) with gpdsl's sequential sampler.

Usage::

    python case_studies/tegner2018_sequential/run.py coverage [--quick]   # Sec. 4.1, Fig. 1
    python case_studies/tegner2018_sequential/run.py prediction [--quick] # Fig. 2: held-out predictive density
    python case_studies/tegner2018_sequential/run.py full [--quick | --reduced] [--full-steps K]  # Fig. 3
    python case_studies/tegner2018_sequential/run.py pricing [--quick | --pricing-size reduced] [--pricer numpy]
                                                          # Sec. 4.2, Figs. 4-5

Every experiment takes ``--device auto|cpu|gpu`` (default auto: a GPU where JAX sees one), said on standard error and
recorded in the JSON.

Each prints its figures and writes ``results/<experiment>[_quick].json`` and a ``.png`` beside it
(``pricing_<size>[_numpy]`` for the pricing experiment; the committed ones are the runs the README quotes). The paper's settings are the defaults; ``--quick`` shrinks T, N and M to check the
pipeline in minutes. The data come from ``gpdsl.datasets.tegner_sequential`` (Sec. 4.1, seeded) and ``option_data.py``
(Sec. 4.2); the pricing likelihood is an external plug-in, ``gpdsl.testing.local_volatility.call_price_log_likelihood``
(JAX, compiled with the sampler; ``local_volatility.gpm``) or, with ``--pricer numpy``,
``gpdsl.testing.external_likelihoods.call_price_log_likelihood`` (NumPy through a host callback;
``local_volatility_numpy.gpm``). The runs go through the public API (``gpdsl.run``, ``gpdsl.settings``, ``gpdsl.results``); the
held-out step of ``prediction.py`` and Fig. 3's full baseline, run one step at a time so that each finished step is
kept (:func:`full_baseline`), use engine functions, and the outputs are written by
``gpdsl.storage.atomic.atomic_write_text`` (all or nothing).
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

import numpy as np  # noqa: E402

import gpdsl  # noqa: E402
from gpdsl.datasets import tegner_sequential as simulate  # noqa: E402
from gpdsl.datasets.synthetic import TEGNER_SIGMA_Y as SIGMA_Y  # noqa: E402
from gpdsl.numerics.devices import DeviceError, device_attributes, resolve_device, running_on  # noqa: E402
from gpdsl.storage.atomic import atomic_write_text  # noqa: E402
from gpdsl.settings import SequentialSettings  # noqa: E402

RESULTS = HERE / "results"
MODEL = ROOT / "models" / "sequential_latent_gp.gpm"
PRICING_MODELS = {"jax": HERE / "local_volatility.gpm", "numpy": HERE / "local_volatility_numpy.gpm"}
DEVICE = {"device": "auto"}
"""The ``--device`` every ``gpdsl.run`` of this script passes (set by :func:`main`)."""


def paper_settings(quick: bool, **changes) -> SequentialSettings:
    """Sec. 4.1: step-1 chain of 6000 (burn-in 1000, every 5th: M = 1000), 3 ESS of f per iteration, tau = 1,
    5 + 5 ESS of f_t per state."""
    values = dict(states=1000, burn_in=1000, thin=5, initial_repeat_f=3, repeat_f=5, window=1,
                  surrogate_variance=SIGMA_Y ** 2)
    if quick:
        values.update(states=200, burn_in=200, thin=1)
    return SequentialSettings(**{**values, **changes})


def coverage(quick: bool, seed: int) -> dict:
    """Fig. 1: coverage of the true f_t (+ mu_f) by the +-2 sd band of S_t, and observations outside the +-2 sd
    predictive interval of y_t, at t = 1 and t = T."""
    steps, n = (5, 100) if quick else (20, 200)
    data, truth = simulate(steps, n, seed)
    started = time.perf_counter()
    fit = gpdsl.run(MODEL, data, "sequential", paper_settings(quick), seed=seed, **DEVICE)
    seconds = json.loads(fit.attrs["report"])["seconds_per_step"]
    f = fit.posterior["f"].values[0]                      # (M, T, N)
    mu = fit.posterior["alpha"].values[0, :, :, 0]         # (M, T)
    noise = fit.posterior["alpha"].values[0, :, :, 1]
    shifted = f + mu[..., None]
    rows = {}
    for t in (1, steps):
        band_mean, band_sd = shifted[:, t - 1].mean(0), shifted[:, t - 1].std(0)
        true = truth["f"][t - 1] + truth["mu_f"]
        predictive_sd = np.sqrt(band_sd ** 2 + np.mean(noise[:, t - 1] ** 2))
        rows[t] = {"f_covered": float(np.mean(np.abs(true - band_mean) <= 2 * band_sd)),
                   "y_outside": int(np.sum(np.abs(data["y"][t - 1] - band_mean) > 2 * predictive_sd)),
                   "kappa_mean": fit.posterior["kappa"].values[0, :, t - 1].mean(0).tolist(),
                   "alpha_mean": fit.posterior["alpha"].values[0, :, t - 1].mean(0).tolist()}
    _figure_coverage(shifted, truth, steps, f"coverage{'_quick' if quick else ''}.png")
    return {"T": steps, "N": n, "M": f.shape[0], "seed": seed, "true_lengthscales": truth["lengthscales"].tolist(),
            "seconds_step_1": seconds[0], "seconds_steps_2_T": float(sum(seconds[1:])),
            "seconds_total": time.perf_counter() - started, "steps": rows,
            "paper": {"1": {"f_covered": 0.85, "y_outside": 8}, "20": {"f_covered": 1.0, "y_outside": 9},
                      "seconds_step_1": "< 240 (2.8 GHz quad-core i7)", "seconds_steps_2_T": 35 * 60}}


def prediction(quick: bool, seed: int) -> dict:
    """Fig. 2: running mean of the predictive log likelihood of held-out data at t = T, sequential against the
    no-history scheme (``prediction.py``)."""
    from case_studies.tegner2018_sequential.prediction import prediction_experiment

    steps, n = (5, 100) if quick else (20, 200)
    data, _ = simulate(steps, n, seed)
    result = prediction_experiment(MODEL, data, paper_settings(quick), seed, **DEVICE)
    from matplotlib.figure import Figure

    from gpdsl.results import save_png

    figure = Figure(figsize=(5, 3.5))
    axis = figure.add_subplot(1, 1, 1)
    axis.plot(result["sequential_running_mean"], label="sequential (S_{T-1} carried over)")
    axis.plot(result["baseline_running_mean"], label="no history (step T alone)")
    axis.set_xlabel("state i")
    axis.set_ylabel("running mean of ll*")
    axis.legend(fontsize=7)
    RESULTS.mkdir(exist_ok=True)
    save_png(figure, RESULTS / f"prediction{'_quick' if quick else ''}.png")
    summary = {key: value for key, value in result.items() if not key.endswith("running_mean")}
    return {"T": steps, "N": n, "seed": seed, **summary, "paper": "sequential higher (figure only, no numbers)"}


FULL_REDUCED = {"states": 200, "burn_in": 200, "thin": 1}
"""``run.py full --reduced``: chains of 200 + 200 iterations (M = 200) at every step of both schemes, so that the
full baseline (cubic in t) fits in well under an hour; the paper's chains are 1000 + 5 x 1000."""


def full_baseline(data: dict, settings, seed: int, steps: int, cache: Path) -> dict:
    """The full baseline (``scheme="full"``) through step ``steps``, one step at a time: step t's chain on
    ``f_1:t`` alone (:func:`gpdsl.inference.methods.sequential.step_chain` on the model's sequential view), from the
    key ``gpdsl.run`` gives it (the seed folded with t), so its draws are those of ``gpdsl.run(..., scheme="full")``.
    Each finished step's seconds and variances are written to ``cache`` (one JSON per step, atomically), so a run
    to a later step extends an earlier one and an interrupted run keeps its finished steps."""
    import jax
    import jax.numpy as jnp

    from gpdsl.backends.jax.lowering import constrain_blocks
    from gpdsl.inference.families.sequential import sequential_view
    from gpdsl.inference.mcmc.z_space import z_prior
    from gpdsl.inference.methods.sequential import step_chain
    from gpdsl.ir.families import SEQUENTIAL_LATENT_GP, classify

    model, _ = gpdsl.check(MODEL)
    values, _ = gpdsl.load_data(data, model)
    view = sequential_view(model, values, classify(model).facts[SEQUENTIAL_LATENT_GP])
    prior = z_prior(view, "sequential")
    cache.mkdir(parents=True, exist_ok=True)
    rows = []
    for t in range(1, steps + 1):
        path = cache / f"step_{t}.json"
        if not path.exists():
            started = time.perf_counter()
            thetas, _ = step_chain(view, t, settings, jax.random.fold_in(jax.random.PRNGKey(seed), t), prior,
                                   progress=True)
            seconds = time.perf_counter() - started
            constrained = jax.vmap(lambda theta: constrain_blocks(theta, view.theta_blocks)[0])(jnp.asarray(thetas))
            row = {"t": t, "seconds": seconds,
                   "variance": {name: np.asarray(constrained[name]).var(axis=0).tolist() for name in ("kappa", "alpha")}}
            atomic_write_text(path, json.dumps(row))
            print(f"full baseline: step {t}/{steps} in {seconds:.1f} s", file=sys.stderr, flush=True)
        rows.append(json.loads(path.read_text()))
    return {"seconds_per_step": [row["seconds"] for row in rows],
            "variance_per_step": {name: [row["variance"][name] for row in rows] for name in ("kappa", "alpha")}}


def full_against_sequential(quick: bool, seed: int, reduced: bool = False, full_steps: int | None = None) -> dict:
    """Fig. 3: per step, the wall time and the variance of the hyperparameter samples, full baseline against
    sequential, at N = 100, T = 10 (the same number of states). The sequential run writes a checkpoint in
    ``results/cache`` after each step and resumes from it; the full baseline keeps each finished step there
    (:func:`full_baseline`). ``full_steps`` stops the full baseline, whose cost grows cubically in t, after that
    many steps; a later run with more steps starts where it stopped."""
    steps, n = (4, 40) if quick else (10, 100)
    full_steps = steps if full_steps is None else min(full_steps, steps)
    label = "_quick" if quick else "_reduced" if reduced else ""
    data, _ = simulate(steps, n, seed)
    out = {"T": steps, "N": n, "seed": seed, "reduced": reduced, "full_steps": full_steps}
    settings = paper_settings(quick, scheme="sequential", **(FULL_REDUCED if reduced else {}))
    out["settings"] = {"states": settings.states, "burn_in": settings.burn_in, "thin": settings.thin}
    checkpoint = RESULTS / "cache" / f"full_sequential{label}.npz"
    checkpoint.parent.mkdir(parents=True, exist_ok=True)
    fit = gpdsl.run(MODEL, data, "sequential", settings, seed=seed, checkpoint=checkpoint, progress=True, **DEVICE)
    checkpoint.unlink(missing_ok=True)
    out["sequential"] = {"seconds_per_step": json.loads(fit.attrs["report"])["seconds_per_step"],
                         "variance_per_step": {name: fit.posterior[name].values[0].var(axis=0).tolist()
                                               for name in ("kappa", "alpha")}}
    out["full"] = full_baseline(data, paper_settings(quick, scheme="full", **(FULL_REDUCED if reduced else {})), seed,
                                full_steps, RESULTS / "cache" / f"full_baseline{label}_seed{seed}")
    out["paper"] = {"full": "1 min at t = 1 to 11 h at t = 10", "sequential": "3 min in all"}
    _figure_full(out, f"full{label}.png")
    return out


def _figure_full(out: dict, name: str) -> None:
    """Fig. 3: seconds per step (log scale) and the variance of each hyperparameter's draws per step, full
    baseline (dashed) against sequential (solid)."""
    from matplotlib.figure import Figure

    from gpdsl.results import save_png

    figure = Figure(figsize=(10, 3.8), layout="constrained")
    steps = {scheme: np.arange(1, len(out[scheme]["seconds_per_step"]) + 1) for scheme in ("sequential", "full")}
    axis = figure.add_subplot(1, 2, 1)
    for scheme, style in (("sequential", "-o"), ("full", "--s")):
        axis.semilogy(steps[scheme], out[scheme]["seconds_per_step"], style, ms=3, label=scheme)
    axis.set_xlabel("step t")
    axis.set_ylabel("seconds")
    axis.set_title("wall time per step")
    axis.legend(fontsize=7)
    axis = figure.add_subplot(1, 2, 2)
    for block in ("kappa", "alpha"):
        variances = {scheme: np.asarray(out[scheme]["variance_per_step"][block]).reshape(len(steps[scheme]), -1)
                     for scheme in ("sequential", "full")}
        for j in range(variances["sequential"].shape[1]):
            line, = axis.semilogy(steps["sequential"], variances["sequential"][:, j], "-", lw=1,
                                  label=f"{block}[{j + 1}]")
            axis.semilogy(steps["full"], variances["full"][:, j], "--", lw=1, color=line.get_color())
    axis.set_xlabel("step t")
    axis.set_title("variance of the draws (solid: sequential, dashed: full)")
    axis.legend(fontsize=6, ncol=2)
    RESULTS.mkdir(exist_ok=True)
    save_png(figure, RESULTS / name)


PRICING_SIZES = {
    "quick": {"steps": 2, "states": 20, "burn_in": 20, "thin": 1, "initial_repeat_f": 1, "repeat_f": 1},
    "reduced": {"steps": 12, "states": 100, "burn_in": 300, "thin": 3, "initial_repeat_f": 2, "repeat_f": 2},
    "paper": {"steps": 12, "states": 1000, "burn_in": 2000, "thin": 18, "initial_repeat_f": 3, "repeat_f": 5},
}
"""Sec. 4.2's settings (``paper``: a 20000-iteration step-1 chain, 10 % burn-in, M = 1000, 5 + 5 ESS updates)
and two smaller ones: ``quick`` checks the pipeline, ``reduced`` is the whole T = 12 with M = 100."""


def pricing(quick: bool, seed: int, size: str | None = None, pricer: str = "jax") -> dict:
    """Sec. 4.2: the posterior of the local volatility at the last date against the truth (Fig. 4), and the
    prices of the posterior-mean volatility against the observed ones (Fig. 5). SDSS's S is the inverse
    curvature of the pricing likelihood (spec decision 14). Each finished step is written to a checkpoint in
    ``results/cache`` and an interrupted run resumes from it."""
    from case_studies.tegner2018_sequential.option_data import simulate_options

    size = size or ("quick" if quick else "paper")
    config = dict(PRICING_SIZES[size])
    steps = config.pop("steps")
    data, truth = simulate_options(steps, seed)
    settings = SequentialSettings(window=1, surrogate="curvature", **config)
    started = time.perf_counter()
    checkpoint = RESULTS / "cache" / f"pricing_{size}_{pricer}.npz"
    checkpoint.parent.mkdir(parents=True, exist_ok=True)
    fit = gpdsl.run(PRICING_MODELS[pricer], data, "sequential", settings, seed=seed, allow_external=True,
                    checkpoint=checkpoint, progress=True, **DEVICE)
    checkpoint.unlink(missing_ok=True)
    seconds = json.loads(fit.attrs["report"])["seconds_per_step"]
    f = fit.posterior["f"].values[0, :, -1]
    mu = fit.posterior["alpha"].values[0, :, -1, 0]
    volatility = np.log1p(np.exp(f + mu[:, None]))
    true_vol = truth["volatility"][-1]
    low, high = np.quantile(volatility, [0.025, 0.975], axis=0)
    fitted_prices = _prices(volatility.mean(axis=0), data, steps - 1)
    suffix = f"_{size}" + ("" if pricer == "jax" else f"_{pricer}")
    _figure_pricing(volatility, true_vol, data["c"][-1], fitted_prices, f"pricing{suffix}.png")
    observed = data["c"][-1]
    return {"T": steps, "seed": seed, "size": size, "pricer": pricer, "settings": {"steps": steps, **config},
            "seconds_per_step": seconds, "seconds_total": time.perf_counter() - started,
            "volatility_covered_95": float(np.mean((true_vol >= low) & (true_vol <= high))),
            "volatility_abs_error_of_mean": float(np.mean(np.abs(volatility.mean(0) - true_vol))),
            "price_rmse_of_mean_volatility": float(np.sqrt(np.mean((fitted_prices - observed) ** 2))),
            "price_rmse_per_state": _state_price_rmse(volatility, true_vol, data, steps - 1),
            "paper": {"seconds_step_1": 18 * 60, "seconds_steps_2_T": 24 * 60}}


def _state_price_rmse(volatility, true_vol, data, step) -> dict:
    """How closely each state's volatility prices the last date's options (the JAX pricer, 45 steps between
    maturities): the RMSE of its prices against the observed ones, quantiles over the states, beside the true
    volatility's (the noise's s.d. is 0.05)."""
    import jax
    import jax.numpy as jnp

    from gpdsl.testing.local_volatility import call_price_log_likelihood

    observed, count = jnp.asarray(data["c"][step]), data["c"][step].size
    spot, strikes, maturities = float(data["spot"][step]), jnp.asarray(data["strikes"][step]), data["maturities"]
    log_2pi = float(np.log(2 * np.pi))

    def rmse(vol):  # from log N(c; C(vol), I): the sum of squares is -2 (log likelihood + n/2 log 2 pi)
        log_likelihood = call_price_log_likelihood(observed, vol, 1.0, spot, strikes, jnp.asarray(maturities))
        return jnp.sqrt(-2.0 * (log_likelihood + 0.5 * count * log_2pi) / count)

    per_state = np.asarray(jax.jit(jax.lax.map, static_argnums=0)(rmse, jnp.asarray(volatility)))
    low, median, high = np.quantile(per_state, [0.05, 0.5, 0.95])
    return {"median": float(median), "q05": float(low), "q95": float(high), "true_volatility": float(rmse(true_vol))}


def _prices(volatility, data, step) -> np.ndarray:
    """Call prices of one date's volatility at its options (the likelihood's pricer)."""
    from gpdsl.testing.external_likelihoods import dupire_call_prices, surface

    strikes, maturities = data["strike"][step], data["maturity"][step]
    grid_strikes, grid_maturities = np.unique(strikes), np.unique(maturities)
    rows, columns = np.searchsorted(grid_maturities, maturities), np.searchsorted(grid_strikes, strikes)
    values = np.empty((grid_maturities.size, grid_strikes.size))
    values[rows, columns] = volatility
    spot = float(data["spot"][step])
    model = dupire_call_prices(surface(grid_maturities, grid_strikes, values), spot, grid_strikes, grid_maturities,
                               concentration=spot / 20)
    return model[rows, columns]


def _figure_pricing(volatility, true_vol, observed, fitted, name):
    """Fig. 4 (the volatility at the last date: posterior mean and 95 % band against the truth, by input index,
    groups of five with a common strike, strikes descending) and Fig. 5 (prices, log scale)."""
    from matplotlib.figure import Figure

    from gpdsl.results import save_png

    figure = Figure(figsize=(10, 3.8), layout="constrained")
    index = np.arange(1, true_vol.size + 1)
    axis = figure.add_subplot(1, 2, 1)
    low, high = np.quantile(volatility, [0.025, 0.975], axis=0)
    axis.fill_between(index, low, high, alpha=0.3, label="95 % band")
    axis.plot(index, volatility.mean(axis=0), lw=1, label="posterior mean")
    axis.plot(index, true_vol, ".", ms=4, color="k", label="true")
    axis.set_xlabel("input (maturity fastest, strikes descending)")
    axis.set_title("Fig. 4: local volatility at the last date")
    axis.legend(fontsize=7)
    axis = figure.add_subplot(1, 2, 2)
    axis.semilogy(index, np.maximum(observed, 1e-3), ".", ms=4, color="k", label="observed")
    axis.semilogy(index, np.maximum(fitted, 1e-3), lw=1, label="priced at the posterior mean")
    axis.set_xlabel("input")
    axis.set_title("Fig. 5: call prices")
    axis.legend(fontsize=7)
    RESULTS.mkdir(exist_ok=True)
    save_png(figure, RESULTS / name)


def _figure_coverage(shifted, truth, steps, name):
    from matplotlib.figure import Figure

    from gpdsl.results import save_png

    figure = Figure(figsize=(10, 3.5))
    centre = shifted[:, 0].mean()
    for column, t in enumerate((1, steps)):
        axis = figure.add_subplot(1, 2, column + 1)
        true = truth["f"][t - 1] + truth["mu_f"] - centre
        order = np.argsort(true)
        mean, sd = shifted[:, t - 1].mean(0)[order] - centre, shifted[:, t - 1].std(0)[order]
        index = np.arange(true.size)
        axis.fill_between(index, mean - 2 * sd, mean + 2 * sd, alpha=0.3, label="+-2 sd of S_t")
        axis.plot(index, mean, lw=1, label="posterior mean")
        axis.plot(index, true[order], ".", ms=3, color="k", label="true f + mu_f")
        axis.set_title(f"t = {t}")
        axis.set_xlabel("input (sorted by the true value)")
    axis.legend(fontsize=7)
    RESULTS.mkdir(exist_ok=True)
    save_png(figure, RESULTS / name)


EXPERIMENTS = {"coverage": coverage, "prediction": prediction, "full": full_against_sequential, "pricing": pricing}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("experiment", choices=sorted(EXPERIMENTS))
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--seed", type=int, default=2018)
    parser.add_argument("--pricing-size", choices=sorted(PRICING_SIZES), default=None,
                        help="pricing only: the settings of PRICING_SIZES (default: paper, or quick with --quick)")
    parser.add_argument("--pricer", choices=sorted(PRICING_MODELS), default="jax",
                        help="pricing only: the Dupire pricer in JAX (compiled, batched) or NumPy (host callback)")
    parser.add_argument("--reduced", action="store_true", help="full only: the chains of FULL_REDUCED")
    parser.add_argument("--full-steps", type=int, default=None, metavar="K",
                        help="full only: run the full baseline through step K alone (its cost grows cubically in t)")
    parser.add_argument("--device", choices=("auto", "cpu", "gpu"), default="auto",
                        help="where gpdsl's JAX engines run (default: a GPU where JAX sees one)")
    args = parser.parse_args(argv)
    DEVICE["device"] = args.device
    try:
        platform = resolve_device(args.device)
    except DeviceError as error:
        parser.error(error.render())
    if (args.pricing_size is not None or args.pricer != "jax") and args.experiment != "pricing":
        parser.error("--pricing-size and --pricer are for the pricing experiment")
    if (args.reduced or args.full_steps is not None) and args.experiment != "full":
        parser.error("--reduced and --full-steps are for the full experiment")
    if args.full_steps is not None and args.full_steps < 1:
        parser.error(f"--full-steps must be at least 1, not {args.full_steps}")
    with running_on(platform):
        if args.experiment == "pricing":
            size = args.pricing_size or ("quick" if args.quick else "paper")
            result = pricing(args.quick, args.seed, size, args.pricer)
            suffix = f"_{size}" + ("" if args.pricer == "jax" else f"_{args.pricer}")
        elif args.experiment == "full":
            result = full_against_sequential(args.quick, args.seed, reduced=args.reduced, full_steps=args.full_steps)
            suffix = "_quick" if args.quick else "_reduced" if args.reduced else ""
        else:
            result = EXPERIMENTS[args.experiment](args.quick, args.seed)
            suffix = "_quick" if args.quick else ""
    RESULTS.mkdir(exist_ok=True)
    result = {**result, **device_attributes(platform)}
    atomic_write_text(RESULTS / f"{args.experiment}{suffix}.json", json.dumps(result, indent=1))
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
