"""Air quality: the log posterior of the day weight, where PM's chains disagree (R-hat 1.77).

Along the day weight s1[1], with the other hyperparameters (month weight, theta_1, theta_S, the noise) held at a
point of the 4 x 1500 PM run, PM's own importance estimate of ``log p(Y | X, xi)`` (Q = 1000, several replicates)
plus the log prior, beside the Laplace evidence of each latent mode the proposal's searches find. It shows how
the latent inputs' posterior, itself multimodal, makes the hyperparameters' posterior so.

Usage::

    python case_studies/gadd2021_sgplvm/modes.py [--device cpu|gpu|auto]

Writes ``results/airquality_modes.{json,png}``.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import gpdsl  # noqa: F401,E402  (sets BLAS thread variables before numpy/jax load)
import numpy as np  # noqa: E402

from case_studies.gadd2021_sgplvm import run as study  # noqa: E402
from gpdsl.numerics.devices import DeviceError, device_attributes, resolve_device, running_on  # noqa: E402
from gpdsl.storage.atomic import atomic_write_text  # noqa: E402

BASES = {
    "PM state 820": {"s1": [0.027, 0.88], "theta": [0.21], "theta_S": 1.0, "noise": 0.39},
    "PM's posterior means": {"s1": [0.041, 0.93], "theta": [0.136], "theta_S": 1.76, "noise": 0.371},
}
"""The other hyperparameters of each slice, from the 4 x 1500 PM run (``results/airquality.json``): chain 1's kept
state 820 (Fig. 4's), and the means over the chains."""
DAY_WEIGHTS = np.geomspace(0.004, 0.25, 25)
REPLICATES = 8
SEED = 2


class Posterior:
    """``log p(xi | Y, X)`` up to a constant in unconstrained ``xi``: PM's importance estimate of the marginal
    likelihood plus the log prior and the Jacobian, with the proposal and variational start of the paper-size PM
    run (``CONFIG["paper"]``), and the Laplace fit of the latent inputs that proposal is built from."""

    def __init__(self, seed: int = SEED):
        import jax

        from gpdsl import load_data, load_model
        from gpdsl.inference.families.gplvm import gplvm_view
        from gpdsl.inference.mcmc.gplvm_estimate import make_estimate
        from gpdsl.inference.methods.gplvm_chains import make_pm_proposal, variational_settings
        from gpdsl.inference.methods.pm_gplvm import PM_GPLVM_FAMILIES
        from gpdsl.inference.variational.vem import fit_vem_starts
        from gpdsl.ir.families import classify

        part = study.CONFIG["paper"]["airquality"]
        self.settings = study.pm_settings(part["pm"])
        model = load_model(str(study.AIRQUALITY_MODEL))
        values, _ = load_data(study.model_data(model, **study.airquality_fit_data(part)), model)
        _, facts = classify(model).require(PM_GPLVM_FAMILIES, "pm-gplvm")
        self.problem = problem = gplvm_view(model, values, facts)
        proposal = make_pm_proposal(problem, self.settings, fit_vem_starts(problem, variational_settings(
            problem, self.settings, seed)))
        estimate = make_estimate(problem, proposal, self.settings.num_importance)

        def log_prior(theta):
            _, log_jacobian = problem.constrain(theta)
            return problem.log_hyperprior(theta) + log_jacobian

        def estimates(keys, theta, fitted):
            return jax.lax.map(lambda key: estimate(key, theta, fitted=fitted).log_marginal, keys)

        self.fit = jax.jit(proposal.fit)
        self._estimates = jax.jit(estimates)
        self._log_prior = jax.jit(log_prior)

    def unconstrain(self, values: dict) -> np.ndarray:
        return np.asarray(self.problem.unconstrain_theta({n: np.asarray(values[n], dtype=float)
                                                          for n in self.problem.theta_names}))

    def log_prior(self, theta) -> float:
        return float(self._log_prior(np.asarray(theta, dtype=float)))

    @staticmethod
    def latent_modes(fitted) -> list[float]:
        """The Laplace evidence of each distinct latent mode of a fit (mirror images and repeats counted once),
        best first."""
        modes = np.asarray(fitted.mode).reshape(len(fitted.log_evidence), -1)
        kept = []
        for k in np.argsort(-np.asarray(fitted.log_evidence)):
            if not np.isfinite(fitted.log_evidence[k]):
                continue
            if all(min(np.max(np.abs(modes[k] - modes[j])), np.max(np.abs(modes[k] + modes[j]))) > 1e-3
                   for j in kept):
                kept.append(int(k))
        return [float(fitted.log_evidence[k]) for k in kept]

    def estimates(self, theta, fitted, seed: int, replicates: int) -> np.ndarray:
        """``replicates`` estimates of ``log p(Y | X, xi)`` from the proposal ``fitted`` at ``theta``."""
        import jax

        keys = jax.random.split(jax.random.PRNGKey(seed), replicates)
        return np.asarray(self._estimates(keys, np.asarray(theta, dtype=float), fitted))


def slice_along_day_weight(posterior: Posterior, base: dict, seed: int) -> dict:
    """The log posterior along the day weight with the other hyperparameters at ``base``: PM's estimate (the log
    mean of ``REPLICATES`` estimates of Q = 1000 draws each, and their spread), the surrogate of delayed acceptance
    (the best latent mode's Laplace evidence), and the Laplace evidence of each latent mode the searches found
    (mirror images counted once); all plus the log prior but the modes'."""
    rows = {"day_weight": DAY_WEIGHTS.tolist(), "log_posterior": [], "estimates": [], "surrogate": [],
            "latent_modes": [], "log_prior": []}
    for k, day in enumerate(DAY_WEIGHTS):
        theta = posterior.unconstrain({**base, "s1": [float(day), base["s1"][1]]})
        fitted = posterior.fit(theta)
        log_prior = posterior.log_prior(theta)
        estimates = posterior.estimates(theta, fitted, seed + k, REPLICATES) + log_prior
        modes = posterior.latent_modes(fitted)
        rows["estimates"].append(estimates.tolist())
        rows["log_posterior"].append(float(np.logaddexp.reduce(estimates) - math.log(estimates.size)))
        rows["surrogate"].append(modes[0] + log_prior)
        rows["log_prior"].append(log_prior)
        rows["latent_modes"].append(modes)
    return rows


def figure(out: dict, path: Path) -> Path:
    """One panel per base point: PM's estimate of the log posterior along the day weight (dots: replicates),
    and the Laplace evidence (+ log prior) of each latent mode found (grey)."""
    from matplotlib.figure import Figure

    from gpdsl.results import save_png

    fig = Figure(figsize=(5 * len(out["slices"]), 3.8), layout="constrained")
    for n, (name, rows) in enumerate(out["slices"].items()):
        axis = fig.add_subplot(1, len(out["slices"]), n + 1)
        day = np.asarray(rows["day_weight"])
        prior = np.asarray(rows["log_prior"])
        for k, modes in enumerate(rows["latent_modes"]):
            axis.plot([day[k]] * len(modes), np.asarray(modes) + prior[k], "_", color="grey", ms=8,
                      label="Laplace evidence of a latent mode" if k == 0 else None)
        estimates = np.asarray(rows["estimates"])
        axis.plot(np.repeat(day, estimates.shape[1]), estimates.ravel(), ".", color="C1", ms=3,
                  label=f"PM's estimate, Q = 1000 ({estimates.shape[1]} replicates)")
        axis.plot(day, rows["log_posterior"], "-", color="C0", label="their log mean")
        axis.plot(day, np.median(estimates, axis=1), "--", color="C0", lw=1, label="their median")
        axis.set_xscale("log")
        axis.set_xlabel("day weight s1[1]")
        axis.set_ylabel("log p(Y | X, xi) + log p(xi) (unnormalised)")
        axis.set_title(f"others at {name}", fontsize=9)
        top = np.max(rows["log_posterior"])
        axis.set_ylim(top - 15, top + 3)
        axis.legend(fontsize=7)
    return save_png(fig, path)


def day_weight_slices(posterior: Posterior) -> dict:
    started = time.perf_counter()
    out = {"bases": BASES, "replicates": REPLICATES, "num_importance": posterior.settings.num_importance,
           "slices": {}}
    for n, (name, base) in enumerate(BASES.items()):
        out["slices"][name] = slice_along_day_weight(posterior, base, SEED + 1000 * n)
        best = int(np.argmax(out["slices"][name]["log_posterior"]))
        print(f"[modes] {name}: highest at day weight {DAY_WEIGHTS[best]:.4f}", flush=True)
    out["seconds"] = time.perf_counter() - started
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("auto", "cpu", "gpu"), default="auto")
    args = parser.parse_args(argv)
    try:
        platform = resolve_device(args.device)
    except DeviceError as error:
        parser.error(error.render())
    with running_on(platform):
        out = day_weight_slices(Posterior())
    out.update(device_attributes(platform))
    study.RESULTS.mkdir(exist_ok=True)
    atomic_write_text(study.RESULTS / "airquality_modes.json", json.dumps(out, indent=1))
    figure(out, study.RESULTS / "airquality_modes.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
