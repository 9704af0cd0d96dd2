"""The ``ml`` method: type-II maximum likelihood (MAP with priors) of GP regression, f integrated out.

The hyperparameters maximise the exact log marginal likelihood, plus the log prior of those that have
one (:mod:`gpdsl.inference.optimise.marginal_likelihood`). The estimate is stored like a one-draw
posterior (``chain = 1``, ``draw = 1``) with ``sample_stats.lp`` (the objective) and
``sample_stats.log_marginal``; the optimiser's report is under ``report.optimizer``. With new inputs
(``--predict``) the ``predictions`` group holds the exact predictive ``<y>_mean`` and ``<y>_variance``
(noise included) and ``<f>_variance`` (noise excluded), dim ``<N>_new``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpdsl.errors import MethodError
from gpdsl.settings import initial_values_from_cli, option, require_number, require_positive_int


@dataclass(frozen=True)
class MLSettings:
    """Settings of ``ml``.

    Attributes
    ----------
    initial_values : dict
        Constrained starting values of hyperparameters by name (the others start at 1, or inside their
        bounds).
    max_iterations : int
        L-BFGS iterations.
    max_evaluations : int
        Objective-and-gradient evaluations.
    ftol, gtol : float
        Relative-reduction and largest-gradient-component tolerances (SciPy's L-BFGS-B defaults).
    restarts : int
        Restarts from the end point after a stop short of ``gtol``, while the objective improves.
    """

    initial_values: dict = option({}, "initial value of a hyperparameter (repeatable; vectors as v1,v2,...)",
                                  flag="--init-value", metavar="NAME=VALUE", repeat=True,
                                  parse=initial_values_from_cli)
    max_iterations: int = option(1000, "L-BFGS iterations")
    max_evaluations: int = option(15000, "bound-and-gradient evaluations")
    ftol: float = option(2.220446049250313e-09, "L-BFGS relative-reduction tolerance")
    gtol: float = option(1e-5, "L-BFGS largest-gradient-component tolerance")
    restarts: int = option(5, "L-BFGS restarts after a stop short of gtol (while the bound improves)")

    def __post_init__(self):
        if not isinstance(self.initial_values, dict):
            raise MethodError(f"initial_values must be a dict of name to value; got {self.initial_values!r}")
        for name in ("max_iterations", "max_evaluations"):
            require_positive_int(name, getattr(self, name))
        require_positive_int("restarts", self.restarts, allow_zero=True)
        require_number("ftol", self.ftol, 0)
        require_number("gtol", self.gtol, 0)


def fit_gp_regression(model, data, settings: MLSettings, facts=None):
    """Fit the GP regression ``model`` to ``data`` (validated) by :func:`fit_marginal_likelihood`.

    Returns
    -------
    GPRegressionFit
    """
    from gpdsl.inference.families.gp_regression import gp_regression, gp_regression_view
    from gpdsl.inference.optimise.marginal_likelihood import fit_marginal_likelihood

    problem = gp_regression(model, data) if facts is None else gp_regression_view(model, data, facts)
    return fit_marginal_likelihood(problem, settings.initial_values, max_iterations=settings.max_iterations,
                                   max_evaluations=settings.max_evaluations, ftol=settings.ftol,
                                   gtol=settings.gtol, restarts=settings.restarts)


def run_ml(model, data, settings: MLSettings, context):
    """Run ``ml``; returns a one-draw :class:`~gpdsl.results.method_output.MethodOutput`."""
    fit = fit_gp_regression(model, data, settings, context.facts)
    output = ml_output(fit)
    if context.new_inputs is not None:
        output.predictions, dims = ml_predictions(fit, context.new_inputs)
        output.dims.update(dims)
    output.state = fit
    return output


def ml_output(fit):
    """The :class:`~gpdsl.results.method_output.MethodOutput` of a GP regression fit (see the module docstring)."""
    from gpdsl.results.method_output import point_estimate

    return point_estimate(fit.hyperparameters(), {"lp": fit.log_posterior, "log_marginal": fit.log_marginal},
                          fit.report["seconds"], {"optimizer": fit.report}, "type-II maximum likelihood / MAP")


def ml_predictions(fit, new_inputs) -> tuple[dict, dict]:
    """The predictions group of a fit at new inputs, and its dims."""
    from gpdsl.inference.predict.gp_regression import predict

    return regression_predictions(fit.problem, predict(fit, new_inputs), predict(fit, new_inputs, include_noise=False))


def regression_predictions(problem, y, f) -> tuple[dict, dict]:
    """The predictions group of a GP regression view from the predictive of ``y*`` and of ``f*``, and its dims:
    ``<y>_mean``, ``<y>_variance`` and ``<f>_variance``, dim ``<N>_new``."""
    from gpdsl.results.method_output import predictive_moments

    points = f"{problem.node.statement.inputs.index_shape[0]}_new"
    return predictive_moments(problem.target, problem.name, points, y.mean, y.variance, f.variance)
