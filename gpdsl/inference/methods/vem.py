"""The ``vem`` method: variational EM on a GPLVM, with results in the common format.

A variational fit is stored like a one-draw posterior (``chain = 1``, ``draw = 1``) so that every
results tool reads it: the ``posterior`` group holds the variational means of the latent inputs under
their own name (``X``, dims ``(N, Q)``), their variances as ``X_variance``, the inducing inputs as
``inducing_inputs`` (dims ``(M, Q)``) and the point estimates of the hyperparameters; with a GP prior on the
latent inputs also the parameters of ``q(X)``, ``X_mu_bar`` and ``X_lambda`` (Opper-Archambeau form). ``sample_stats``
holds ``lp`` (the final bound) and ``bound_trace`` (the bound after each optimiser iteration, dim
``iteration``). The root attrs carry ``method = "vem"``, the settings, the optimiser's report (under
``report.optimizer``) and the model source, from which :func:`fit_from_results` rebuilds the fit for
predictions and plots.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace

import numpy as np

from gpdsl.errors import GpdslError, MethodError
from gpdsl.settings import initial_values_from_cli, option, require_choice, require_number, require_positive_int

INDUCING_DIMS = ["M"]
PSI_METHODS = ("analytic", "unscented", "gauss_hermite", "monte_carlo")
INITIALISATIONS = ("pca", "random")
SCALINGS = ("blocks", "scalar")


@dataclass(frozen=True)
class VEMSettings:
    """Settings of variational EM.

    Attributes
    ----------
    psi : {"analytic", "unscented", "gauss_hermite", "monte_carlo"}
        How the Psi statistics are computed.
    gh_nodes : int
        Gauss-Hermite nodes per latent dimension (``gh_nodes ** Q`` points).
    mc_samples : int
        Monte Carlo draws per point (drawn once per fit).
    num_inducing : int
        Inducing inputs ``M`` (at most ``N``).
    init : {"pca", "random"}
        Initial variational means: PCA of the outputs scaled to unit variance, or standard normal draws.
    init_variance : float, optional
        Initial variational variances: 0.5 by default (Damianou et al.; de Souza uses 0.1). With a GP
        prior on the latent inputs, the median initial variance, 0.18 by default (vargplvm).
    ard_heuristic : bool
        Initialise ARD inverse squared length-scales to ``1 / (max - min)^2`` of the initial means per
        dimension (length-scales to ``max - min``), as in Sec. 5 of Damianou et al.
    initial_values : dict
        Initial values of hyperparameters by name (override the heuristics).
    warmup_iterations : int
        The first iterations hold the likelihood's noise variance and the kernel's variances at their
        initial values while ``q(X)``, the inducing inputs and the other hyperparameters move (vargplvm's
        ``initVardistIters``): left free from the start, the noise variance rises tenfold in the first
        iterations and the weakest latent dimensions collapse onto the prior for good. 0: none.
        Counted in ``max_iterations``.
    scaling : {"blocks", "scalar"}
        L-BFGS's initial inverse Hessian: one scale per block of coordinates (the means, the variances
        and the inducing inputs of each latent dimension, and each hyperparameter), or one scale for
        all coordinates as L-BFGS-B (:func:`gpdsl.inference.optimise.lbfgs.minimize`).
    memory : int
        L-BFGS's correction pairs. 50 by default, where L-BFGS-B keeps 10: on oil flow (N = 1000, Q = 10, M =
        30) the fit ends about 500 nats higher (8511 against 8004), reaching GPy's optimum as soon, although
        each iteration's two-loop recursion then costs about as much as the bound's evaluation
        (``case_studies/souza2020_ugplvm/bench_results.md``).
    max_iterations : int
        L-BFGS iterations.
    max_evaluations : int
        Bound-and-gradient evaluations.
    ftol, gtol : float
        L-BFGS's relative-reduction and largest-gradient-component tolerances (as in SciPy's L-BFGS-B).
    restarts : int
        When L-BFGS stops before ``max_iterations`` without meeting ``gtol`` (a failed line search or
        a stalled reduction), restart it from its end point with a fresh memory, at most this many
        times and only while the bound improves by more than ``ftol`` (relative).
    starts : int
        Independent fits from different initialisations, the one of highest bound kept: the first from
        ``init``, the others from random means with seeds ``seed + 1``, ``seed + 2``, ... The bound is
        multimodal (latent inputs with a GP prior especially), and different starts can end far apart.
    seed : int
        Seed of the inducing-input subset, random initialisation and Monte Carlo draws (the run's seed
        replaces it).
    """

    psi: str = option("analytic", "Psi statistics: analytic (rbf, linear, sums), or the unscented transform, "
                                  "Gauss-Hermite or Monte Carlo for any kernel", choices=PSI_METHODS)
    gh_nodes: int = option(2, "Gauss-Hermite nodes per latent dimension")
    mc_samples: int = option(10, "Monte Carlo draws per point (fixed per fit)")
    num_inducing: int = option(20, "inducing inputs", metavar="M")
    init: str = option("pca", "initial latent means", choices=INITIALISATIONS)
    init_variance: float | None = option(None, "initial latent variances (default 0.5; with a GP prior on the "
                                                "latents, their median, default 0.18)")
    ard_heuristic: bool = option(True, "do not initialise ARD weights from the spread of the initial means",
                                 negate="--no-ard-heuristic")
    initial_values: dict = option({}, "initial value of a hyperparameter (repeatable; vectors as v1,v2,...)",
                                  flag="--init-value", metavar="NAME=VALUE", repeat=True,
                                  parse=initial_values_from_cli)
    warmup_iterations: int = option(50, "first iterations with the noise and kernel variances held at their "
                                        "initial values (vargplvm's initVardistIters; 0: none)")
    scaling: str = option("blocks", "L-BFGS's initial inverse Hessian: one scale per block of coordinates "
                                    "(each latent dimension's means, variances, inducing inputs; each "
                                    "hyperparameter) or one for all (scalar, as L-BFGS-B)", choices=SCALINGS)
    memory: int = option(50, "L-BFGS correction pairs kept")
    max_iterations: int = option(1000, "L-BFGS iterations")
    max_evaluations: int = option(15000, "bound-and-gradient evaluations")
    ftol: float = option(1e-10, "L-BFGS relative-reduction tolerance")
    gtol: float = option(1e-6, "L-BFGS largest-gradient-component tolerance")
    restarts: int = option(5, "L-BFGS restarts after a stop short of gtol (while the bound improves)")
    starts: int = option(1, "independent fits (the first from --init, the others from random means), the one of "
                            "highest bound kept")
    seed: int = option(0, "seed (replaced by the run's)", cli=False)

    def __post_init__(self):
        require_choice("Psi-statistic method", self.psi, PSI_METHODS)
        require_choice("initialisation", self.init, INITIALISATIONS)
        require_choice("L-BFGS scaling", self.scaling, SCALINGS)
        for name in ("gh_nodes", "mc_samples", "num_inducing", "memory", "max_iterations", "max_evaluations", "starts"):
            require_positive_int(name, getattr(self, name))
        require_positive_int("restarts", self.restarts, allow_zero=True)
        require_positive_int("warmup_iterations", self.warmup_iterations, allow_zero=True)
        if self.init_variance is not None:
            require_number("init_variance", self.init_variance, 0, open_low=True)
        require_number("ftol", self.ftol, 0)
        require_number("gtol", self.gtol, 0)

    def psi_method(self):
        """The Psi-statistic rule these settings name."""
        from gpdsl.kernels.psi import PsiMethod

        return PsiMethod(self.psi, nodes=self.gh_nodes, samples=self.mc_samples)


def run_vem(model, data, settings: VEMSettings, context):
    """Fit the GPLVM the registry classified (``context.facts``) by variational EM."""
    from gpdsl.inference.families.gplvm import gplvm_view
    from gpdsl.inference.variational.vem import fit_vem_starts

    problem = gplvm_view(model, data, context.facts)
    fit = fit_vem_starts(problem, replace(settings, seed=context.seed), progress=context.progress)
    output = vem_output(model, fit)
    if context.new_inputs is not None:
        output.predictions, prediction_dims = vem_predictions(model, fit, context.new_inputs)
        output.dims.update(prediction_dims)
    output.state = fit
    return output


def vem_predictions(model, fit, new) -> tuple[dict, dict]:
    """The predictions group of a variational fit at new points, and its dimension names.

    ``new`` maps names to values: the new inputs of the latent inputs' GP prior (by the names the model
    gives them) and, optionally, new outputs under the output's name with NaN where unobserved (required
    for a Bayesian GPLVM, whose ``q(X*)`` is fitted to them); an array is the prior's new input points.
    Stored: ``<Y>_new`` and ``<Y>_new_variance`` (the predictive mean and variance of every output column,
    noise included), ``<X>_new`` and ``<X>_new_variance`` (``q(X*)``) and, when ``q(X*)`` was fitted to new
    outputs, ``log_density`` (eq. 36).
    """
    from collections.abc import Mapping

    from gpdsl.inference.predict.gp_prior_latents import predict_outputs

    problem = fit.problem
    output, latent = problem.output, problem.latent
    if isinstance(new, Mapping):
        names = [name for name in (problem.latent_prior.statement.inputs.names if problem.latent_prior else ())
                 if name]
        inputs = {name: new[name] for name in names if name in new} or None
        Y_new = new.get(output)
    else:
        inputs, Y_new = new, None
    prediction = predict_outputs(fit, inputs, Y_new)
    point = f"{model.data[output].type.dim_names(output)[0]}_new"
    output_dims = [point, model.data[output].type.dim_names(output)[1]]
    latent_dims = [point, model.latents[latent].type.dim_names(latent)[1]]
    values = {f"{output}_new": prediction.mean, f"{output}_new_variance": prediction.variance,
              f"{latent}_new": prediction.latent.mean, f"{latent}_new_variance": prediction.latent.variance}
    dims = {f"{output}_new": output_dims, f"{output}_new_variance": output_dims, f"{latent}_new": latent_dims,
            f"{latent}_new_variance": latent_dims}
    if np.isfinite(prediction.latent.log_density):
        values["log_density"] = np.asarray(prediction.latent.log_density)
        dims["log_density"] = []
    return {name: np.asarray(value)[None, None] for name, value in values.items()}, dims


def vem_output(model, fit):
    """The :class:`~gpdsl.results.method_output.MethodOutput` of a variational fit (see the module docstring)."""
    import jax

    from gpdsl.results.method_output import MethodOutput

    latent = fit.problem.latent
    latent_dims = list(model.latents[latent].type.dim_names(latent))
    posterior = {latent: fit.mean[None, None],
                 f"{latent}_variance": fit.variance[None, None],
                 "inducing_inputs": np.asarray(fit.params.inducing)[None, None]}
    dims = {f"{latent}_variance": latent_dims, "inducing_inputs": INDUCING_DIMS + latent_dims[1:],
            "bound_trace": ["iteration"]}
    if fit.problem.latent_prior is not None:
        for name, value in zip(("mu_bar", "lambda"), fit.params.latent):
            posterior[f"{latent}_{name}"] = np.asarray(value)[None, None]
            dims[f"{latent}_{name}"] = latent_dims
    for name, value in fit.hyperparameters().items():
        posterior[name] = np.asarray(value)[None, None]
    stats = {"lp": np.asarray([[fit.bound]]), "bound_trace": np.asarray(fit.trace)[None, None]}
    return MethodOutput(posterior, stats, timings={"sampling": fit.report["seconds"]},
                        report={"optimizer": fit.report}, dims=dims,
                        attrs={"latent": latent, "inference": "variational (one draw: the fitted q(X) and point "
                                                             "estimates)"},
                        versions={"jax": jax.__version__})


def fit_from_results(results):
    """Rebuild the model and the :class:`~gpdsl.inference.variational.vem.VEMFit` of a ``vem`` results file.

    Returns
    -------
    model : Model
    fit : VEMFit

    Raises
    ------
    GpdslError
        The results are not a variational fit of gpdsl.
    """
    import jax.numpy as jnp

    from gpdsl.api import check_text
    from gpdsl.data_io import load_data
    from gpdsl.inference.families.gplvm import gplvm_problem
    from gpdsl.inference.variational.gp_prior_q import GPPriorQParams
    from gpdsl.inference.variational.latent_q import GaussianQParams
    from gpdsl.inference.variational.vem import VariationalParams, VEMFit
    from gpdsl.results.arviz_compat import groups, root_attrs

    attrs = root_attrs(results)
    if attrs.get("method") != "vem" or not isinstance(attrs.get("model_source"), str):
        raise GpdslError("these results are not a variational fit (gpdsl fit); latent-space plots and "
                         "GPLVM predictions need one")
    model, _ = check_text(attrs["model_source"], f"<model_source of the results, {attrs.get('model_name', 'model')}>")
    parts = groups(results)
    values = {}
    for group in ("observed_data", "constant_data"):
        if group in parts:
            values.update({name: np.asarray(parts[group][name]) for name in parts[group].data_vars})
    values.update(json.loads(attrs.get("sizes", "{}")))
    missing = [n for n, v in values.items() if np.issubdtype(np.asarray(v).dtype, np.floating) and np.isnan(v).any()]
    data, _ = load_data(values, model, allow_missing=missing)
    problem = gplvm_problem(model, data, "vem")
    settings = VEMSettings(**json.loads(attrs["settings"]))
    posterior = parts["posterior"]
    latent = attrs["latent"]

    def value(name):
        return jnp.asarray(np.asarray(posterior[name])[0, 0])

    if problem.latent_prior is None:
        q = GaussianQParams(value(latent), jnp.log(value(f"{latent}_variance")))
    else:
        q = GPPriorQParams(value(f"{latent}_mu_bar"), value(f"{latent}_lambda"))
    theta = problem.unconstrain_theta({name: np.asarray(posterior[name])[0, 0] for name in problem.theta_names})
    params = VariationalParams(q, value("inducing_inputs"), theta)
    sample_stats = parts["sample_stats"]
    fit = VEMFit(problem, settings, params, float(np.asarray(sample_stats["lp"])[0, 0]),
                 np.asarray(sample_stats["bound_trace"])[0, 0], json.loads(attrs["report"])["optimizer"])
    return model, fit
