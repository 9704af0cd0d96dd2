"""Free simulation with uncertainty propagation: unscented (24 points) against Monte Carlo (4096 draws).

The 84 test months of AirPassengers (1954-01 to 1960-12) are free-simulated from the last training window
(1953-01 to 1953-12) by the GP-NARX fits of the souza2020_narx case study (lag 12, 48 training lag vectors,
type-II ML from the notebook's start), feeding back means and variances (eqs. 40-41). Per kernel and
training-input variance (the fitted noise variance, as in the thesis, and 1e-6, as in the code) the
unscented and Monte Carlo runs are timed in the same process, compiled (the first call of each, with the
compilation, is reported apart): UT as the median of 20 runs, MC(4096) as the mean of 3 seeds.

Targets: UT takes at most 1/100 of MC(4096)'s time; the two NLPDs are within 0.1. Both are checked at every
setting; a miss at v = noise is reported but does not fail the run. That setting is the thesis' text, but the
thesis' Table 3 comes out only with the code's v = 1e-6 (``case_studies/souza2020_narx/README.md``: every
deterministic row within 0.01 nats). Where the text and the table disagree, the table is the reproduction target.
At v = noise the training and window variances are large enough (0.02 to 0.05 per lag in 12 dimensions) that
24 sigma points no longer match 4096 draws, which is a property of the rule, not a cost to trade.

Run: ``python benchmarks/free_simulation.py``. Exit status 1 if a target is missed.

A benchmark of the engine's internals: the fits are the case study's (``fit_kernel``: ``gpdsl.run``'s ``ml``), the
series is ``gpdsl.datasets.air_passengers``, and the free simulations are timed by calling the engine's public
functions directly (:func:`gpdsl.inference.predict.free_simulation.free_simulation` with a
:class:`gpdsl.kernels.psi.PsiMethod`, and :mod:`gpdsl.inference.forecast`'s ``narx_data`` and
``forecast_metrics``).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import gpdsl  # noqa: E402,F401  (sets BLAS thread variables before numpy/jax load)

import numpy as np  # noqa: E402

from case_studies.souza2020_narx.paper_tables import PERIODIC, RBF_LINEAR  # noqa: E402
from case_studies.souza2020_narx.run import LAG, TRAIN, fit_kernel  # noqa: E402
from gpdsl.datasets import air_passengers  # noqa: E402
from gpdsl.inference.forecast import forecast_metrics, narx_data  # noqa: E402
from gpdsl.inference.predict.free_simulation import free_simulation  # noqa: E402
from gpdsl.kernels.psi import PsiMethod  # noqa: E402

STEPS = 84
MAX_TIME_RATIO = 1 / 100
MAX_NLPD_GAP = 0.1
UT_REPEATS, MC_SEEDS = 20, 3


def timed(function, repeats):
    """The first call's seconds (compilation included), then each compiled call's (seed ``i``) seconds and result."""
    started = time.perf_counter()
    function(0)
    first = time.perf_counter() - started
    seconds, results = [], []
    for i in range(repeats):
        started = time.perf_counter()
        results.append(function(i))
        seconds.append(time.perf_counter() - started)
    return first, np.asarray(seconds), np.asarray(results)


def main() -> int:
    series = air_passengers().y
    narx = narx_data(series, LAG, TRAIN)
    window = narx.X[TRAIN]  # (y[59], ..., y[48]): the last training window
    observed = series[LAG + TRAIN:LAG + TRAIN + STEPS]
    missed, informative = [], []
    print(f"AirPassengers, {STEPS}-step free simulation from the last training window, scored on the test months")
    print(f"{'kernel':15} {'v':>9} {'UT run (s)':>11} {'MC run (s)':>11} {'ratio':>9} {'UT NLPD':>8} "
          f"{'MC NLPD':>8} {'gap':>6}   first calls UT / MC (s)")
    for kernel in (RBF_LINEAR, PERIODIC):
        fit, _ = fit_kernel(kernel, narx)
        for label, variance in (("noise", fit.noise_variance()), ("1e-6", 1e-6)):
            def run(psi, fit=fit, variance=variance):
                def call(seed):
                    simulation = free_simulation(fit, window, STEPS, psi=psi, training_variance=variance, seed=seed)
                    mean = simulation.mean * narx.scale + narx.offset
                    return forecast_metrics(mean, simulation.variance * narx.scale ** 2, observed, 0)["nlpd"]
                return call

            ut_first, ut_seconds, ut_nlpds = timed(run(PsiMethod("unscented")), UT_REPEATS)
            mc_first, mc_seconds, mc_nlpds = timed(run(PsiMethod("monte_carlo", samples=4096)), MC_SEEDS)
            ut_nlpd = float(ut_nlpds[-1])
            ut_time, mc_time = float(np.median(ut_seconds)), float(np.mean(mc_seconds))
            ratio, gap = ut_time / mc_time, abs(ut_nlpd - float(np.mean(mc_nlpds)))
            print(f"{kernel:15} {label:>9} {ut_time:11.4f} {mc_time:11.3f} {'1/%.0f' % (1 / ratio):>9} "
                  f"{ut_nlpd:8.3f} {np.mean(mc_nlpds):8.3f} {gap:6.3f}   {ut_first:.2f} / {mc_first:.2f}")
            misses = missed if label == "1e-6" else informative
            if ratio > MAX_TIME_RATIO:
                misses.append(f"{kernel}, v = {label}: UT takes 1/{1 / ratio:.0f} of MC's time (target 1/100)")
            if gap > MAX_NLPD_GAP:
                misses.append(f"{kernel}, v = {label}: NLPDs {gap:.3f} apart (target {MAX_NLPD_GAP})")
    print("MC NLPD: mean over seeds 0 to 2; UT run: median of 20 compiled runs; MC run: mean of 3 compiled runs")
    for line in missed:
        print(f"MISSED: {line}")
    for line in informative:
        print(f"missed at the thesis' text setting (reported, not the reproduction target): {line}")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
