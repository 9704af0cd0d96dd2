"""What a method says after a run: one :class:`RunReport` object, built by the method's registry entry
(``Method.report``) from the results it wrote, and printed by the command line.

Samplers report the posterior summary (:func:`draws_report`); fitting methods their optimiser's outcome
(:func:`optimiser_report`) with their own heading and final values.
"""

from __future__ import annotations

from dataclasses import dataclass
import numpy as np

from gpdsl.results.arviz_compat import groups, root_attrs
from gpdsl.results.method_output import not_converged, results_json


@dataclass(frozen=True)
class RunReport:
    """A method's report on a finished run.

    Attributes
    ----------
    lines : tuple of str
        Always shown (standard output).
    details : tuple of str
        Shown unless the run was quiet (standard output).
    warnings : tuple of str
        Shown on standard error as ``warning: ...``.
    converged : bool
        False when the run did not converge: the command then exits with its not-converged status.
    """

    lines: tuple[str, ...] = ()
    details: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    converged: bool = True

    def text(self, verbose: bool) -> str:
        """The standard-output part: ``lines``, then ``details`` when ``verbose``."""
        return "\n".join([*self.lines, *(self.details if verbose else ())])


def draws_report(results, model) -> RunReport:
    """A sampler's report: the summary table of the model's parameters with the sampler's warnings, and the
    reasons the chains did not converge."""
    from gpdsl.results.summary import format_summary, sampler_warnings, summarize

    summary = format_summary(summarize(results, var_names=list(model.parameters)), sampler_warnings(results))
    reasons = tuple(not_converged(results))
    return RunReport(details=(summary,), warnings=reasons, converged=not reasons)


def optimiser_report(results, heading: str, final: str) -> RunReport:
    """An L-BFGS fit's report: ``heading``, whether the optimiser converged after how many iterations (with its
    evaluations, time and message), the ``final`` values and the gradient norm, its hint, then each point
    estimate."""
    report = optimiser(results)
    stopped_short = bool(not_converged(results))
    lines = [f"{heading}: {'NOT converged' if stopped_short else 'converged'} after {report.get('iterations')} "
             f"iterations ({report.get('evaluations')} evaluations, {report.get('seconds', 0):.1f} s): "
             f"{report.get('message')}",
             f"{final}, gradient norm {number(report, 'gradient_norm', '.3g')}"]
    if "hint" in report:
        lines.append(f"hint: {report['hint']}")
    return RunReport(tuple(lines), tuple(point_estimates(results)), converged=not stopped_short)


def adam_report(results, heading: str) -> RunReport:
    """An Adam fit's report (a fixed number of steps: no convergence test): ``heading``, the steps and time, the
    bound at the start and at the end, then each point estimate."""
    report = optimiser(results)
    lines = [f"{heading}: {report.get('steps')} Adam steps ({report.get('seconds', 0):.1f} s)",
             f"bound {number(report, 'bound')} (at the start {number(report, 'start_bound')})"]
    return RunReport(tuple(lines), tuple(point_estimates(results)))


def optimiser(results) -> dict:
    """The optimiser's part of a fit's ``report`` attribute."""
    return results_json(results, "report").get("optimizer", {})


def number(report: dict, key: str, spec: str = ".6g") -> str:
    """``report[key]`` formatted, or ``nan`` when the report lacks it."""
    return format(report.get(key, float("nan")), spec)


SHOWN_ELEMENTS = 10
"""A point estimate with more elements than this is shown by its shape, mean and range, not in full."""


def point_estimates(results) -> list[str]:
    """``name = value`` of each variable of a one-draw posterior, without the latent inputs' moments and the
    inducing inputs; a large array as its shape, mean and range."""
    latent = root_attrs(results).get("latent")
    skip = {latent, f"{latent}_variance", "inducing_inputs"}
    posterior = groups(results)["posterior"]
    return [f"  {name} = {shown(np.asarray(posterior[name])[0, 0])}" for name in posterior.data_vars
            if name not in skip]


def shown(value: np.ndarray) -> str:
    """A value in full, or (more than :data:`SHOWN_ELEMENTS` elements) its shape, mean and range."""
    if value.size <= SHOWN_ELEMENTS:
        return np.array2string(value, precision=4)
    return (f"array of shape {value.shape}: mean {np.nanmean(value):.4g}, range [{np.nanmin(value):.4g}, "
            f"{np.nanmax(value):.4g}]")
