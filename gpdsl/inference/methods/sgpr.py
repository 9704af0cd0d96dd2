"""The ``sgpr`` method: sparse GP regression by Titsias's (2009) collapsed variational bound.

The inducing inputs, kernel hyperparameters and noise maximise the bound (plus the log prior of the
hyperparameters that have one; :mod:`gpdsl.inference.variational.sgpr_fit`). The fit is stored like a
one-draw posterior (``chain = 1``, ``draw = 1``): the hyperparameters, and the inducing inputs as
``inducing_inputs`` (dims ``(M, <input dim>)``); ``sample_stats`` holds ``lp`` (the objective), ``bound``
and ``bound_trace`` (the objective after each iteration, dim ``iteration``); the optimiser's report is
under ``report.optimizer``. With new inputs (``--predict``) the ``predictions`` group holds the
predictive ``<y>_mean`` and ``<y>_variance`` (noise included) and ``<f>_variance`` (noise excluded), dim
``<N>_new``, as ``ml``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from gpdsl.settings import AdamScheduleSettings, option, require_choice, require_number, require_positive_int

OPTIMIZERS = ("lbfgs", "adam")
SCALINGS = ("blocks", "scalar")
INDUCING_INITS = ("kmeans", "random")


@dataclass(frozen=True)
class SGPRSettings(AdamScheduleSettings):
    """Settings of ``sgpr``.

    Attributes
    ----------
    num_inducing : int
        Inducing inputs ``M`` (at most the number of training points).
    inducing_init : {"kmeans", "random"}
        Initial inducing inputs: k-means centres of the training inputs (k-means++ start, seeded), or a
        random subset of them (:mod:`gpdsl.inference.variational.inducing_inputs`).
    fix_inducing : bool
        Hold the inducing inputs at their initial values.
    optimizer : {"lbfgs", "adam"}
        L-BFGS on the whole bound, or Adam with the two-phase schedule (``noise_fixed_steps`` with the
        noise held, then ``steps`` with everything free, fresh moments).
    scaling : {"blocks", "scalar"}
        L-BFGS's initial inverse Hessian: one scale per hyperparameter coordinate and per input column of the
        inducing inputs, or one for all (as L-BFGS-B). On the 10,000-point benchmark ``blocks`` reaches GPy's
        final bound in 48 iterations, ``scalar`` stops short of it after 370.
    max_iterations, max_evaluations : int
        L-BFGS iterations and bound-and-gradient evaluations.
    ftol, gtol : float
        L-BFGS's relative-reduction and largest-gradient-component tolerances.
    restarts : int
        L-BFGS restarts after a stop short of ``gtol`` (while the bound improves).
    noise_fixed_steps, steps, learning_rate, chunk, initial_values, seed
        As :class:`~gpdsl.settings.AdamScheduleSettings`: Adam's two phases (the parameters the likelihood's
        ``sigma`` reads held in the first), its step size; constrained starting values of hyperparameters by name
        (the others start at 1, or inside their bounds); the seed of the inducing-input initialisation.
    jitter : float
        Added to the diagonal of ``K(Z)``.
    """

    num_inducing: int = option(100, "inducing inputs", metavar="M")
    inducing_init: str = option("kmeans", "initial inducing inputs: k-means centres or a random subset of the "
                                          "training inputs (seeded)", choices=INDUCING_INITS)
    fix_inducing: bool = option(False, "hold the inducing inputs at their initial values")
    optimizer: str = option("lbfgs", "lbfgs on the whole bound, or adam with the schedule --noise-fixed-steps then "
                                     "--steps", choices=OPTIMIZERS)
    scaling: str = option("blocks", "L-BFGS's initial inverse Hessian: one scale per hyperparameter coordinate and "
                                    "per input column of the inducing inputs, or one for all (scalar, as L-BFGS-B)",
                          choices=SCALINGS)
    max_iterations: int = option(1000, "L-BFGS iterations")
    max_evaluations: int = option(15000, "bound-and-gradient evaluations")
    ftol: float = option(2.220446049250313e-09, "L-BFGS relative-reduction tolerance")
    gtol: float = option(1e-5, "L-BFGS largest-gradient-component tolerance")
    restarts: int = option(5, "L-BFGS restarts after a stop short of gtol (while the bound improves)")
    jitter: float = option(1e-8, "jitter added to the diagonal of K(Z)")

    def __post_init__(self):
        super().__post_init__()
        require_choice("optimizer", self.optimizer, OPTIMIZERS)
        require_choice("inducing-input initialisation", self.inducing_init, INDUCING_INITS)
        require_choice("L-BFGS scaling", self.scaling, SCALINGS)
        for name in ("num_inducing", "max_iterations", "max_evaluations"):
            require_positive_int(name, getattr(self, name))
        require_positive_int("restarts", self.restarts, allow_zero=True)
        require_number("ftol", self.ftol, 0)
        require_number("gtol", self.gtol, 0)
        require_number("jitter", self.jitter, 0)


def run_sgpr(model, data, settings: SGPRSettings, context):
    """Run ``sgpr``; returns a one-draw :class:`~gpdsl.results.method_output.MethodOutput`."""
    from gpdsl.inference.families.gp_regression import gp_regression_view
    from gpdsl.inference.variational.sgpr_fit import fit_sgpr

    problem = gp_regression_view(model, data, context.facts)
    fit = fit_sgpr(problem, replace(settings, seed=context.seed), progress=context.progress,
                   checkpoint=context.checkpoint, identity=context.checkpoint_identity)
    output = sgpr_output(fit)
    if context.new_inputs is not None:
        output.predictions, dims = sgpr_predictions(fit, context.new_inputs)
        output.dims.update(dims)
    output.state = fit
    return output


def inducing_dims(problem) -> list[str]:
    """Dimension names of the inducing inputs: ``M`` and the inputs' column dimension."""
    dim = problem.node.statement.inputs.dim
    return ["M", dim if isinstance(dim, str) and dim.isidentifier() else "input_dim"]


def sgpr_output(fit):
    """The :class:`~gpdsl.results.method_output.MethodOutput` of an SGPR fit (see the module docstring)."""
    from gpdsl.results.method_output import point_estimate

    return point_estimate({**fit.hyperparameters(), "inducing_inputs": fit.inducing},
                          {"lp": fit.objective, "bound": fit.bound, "bound_trace": fit.trace}, fit.report["seconds"],
                          {"optimizer": fit.report},
                          "sparse variational GP regression, Titsias's collapsed bound, inducing_inputs the fitted Z",
                          {"inducing_inputs": inducing_dims(fit.problem), "bound_trace": ["iteration"]})


def sgpr_predictions(fit, new_inputs) -> tuple[dict, dict]:
    """The predictions group of an SGPR fit at new inputs, and its dims (those of ``ml``)."""
    from gpdsl.inference.methods.ml import regression_predictions

    return regression_predictions(fit.problem, fit.predict(new_inputs), fit.predict(new_inputs, include_noise=False))
