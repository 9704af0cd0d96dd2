"""The ``svgp`` method: a sparse variational GP for a latent GP under any scalar likelihood, or GP regression
(Hensman, Matthews & Ghahramani 2015; :mod:`gpdsl.inference.variational.svgp_fit`).

The fit is stored like a one-draw posterior (``chain = 1``, ``draw = 1``): the hyperparameters (MAP where they have
a prior) and the inducing inputs as ``inducing_inputs`` (dims ``(M, <input dim>)``); ``sample_stats`` holds ``lp``
(the objective), ``bound`` (on the whole data at the end) and ``bound_trace`` (the mean estimate of each chunk of
steps); ``report.optimizer`` the schedule's outcome and ``report.variational`` the moments of ``q`` (of ``v = L^-1 u``
when whitened).

``log_likelihood`` holds each observed point's log predictive density under ``q``,
``log int p(y_n | f) q(f_n) df`` (the likelihood's tilted log normaliser), not the bound's ``E_q[log p(y_n | f_n)]``:
it is the quantity a sampler's pointwise log-likelihood averages to (``log mean_s p(y_n | f_s)``), so the sum is the
in-sample log predictive density of the fit, comparable across methods, while the expected log-likelihood is lower
by Jensen's gap, a penalty on ``q``'s variance. ``posterior_predictive`` holds one replicate of every outcome,
``f_n ~ q(f_n)`` then ``y_n ~ p(y_n | f_n)``, which at a missing (NaN) outcome imputes it (missing outcomes are left
out of the bound). With new inputs (``--predict``) the ``predictions`` group holds ``q(f*)``'s ``<f>_mean`` and
``<f>_variance`` (the GP's mean included), one draw of ``<f>_new`` and ``<y>_new`` (and ``<y>_prob`` where the
likelihood has class probabilities) from it, and under a normal likelihood with scalar scale ``<y>_mean`` and
``<y>_variance`` (noise included), as ``ml`` and ``sgpr``, dim ``<N>_new``.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from gpdsl.inference.progress import counted, stage
from gpdsl.likelihoods import LIKELIHOODS
from gpdsl.settings.fitting import SVGPSettings

_REPLICATE_STREAM, _PREDICTION_STREAM = 1, 2


def svgp_refusal(model, facts, settings: SVGPSettings) -> str | None:
    """Why ``svgp`` cannot run the latent-GP or GP-regression model of ``facts``, or None."""
    likelihood = LIKELIHOODS.get(facts.likelihood)
    if likelihood is None:
        return (f"needs a built-in likelihood (its expected log density by quadrature); this model's is "
                f"{facts.likelihood}: use --method gibbs")
    if likelihood.row_params:
        return (f"takes one latent value per observation; {facts.likelihood} reads a row of latent values per "
                "observation: use --method pm --approximation laplace or gibbs")
    if not facts.node.shifted:
        return (f"needs the latent argument of {facts.likelihood} to be '{facts.node.name}' plus terms free of it "
                f"(an offset): write the location as offset + {facts.node.name}, or use --method gibbs")
    return None


def run_svgp(model, data, settings: SVGPSettings, context):
    """Run ``svgp``; returns a one-draw :class:`~gpdsl.results.method_output.MethodOutput`."""
    import jax

    from gpdsl.inference.families.latent_gp import latent_gp_view
    from gpdsl.inference.variational.svgp_fit import SVGPData, fit_svgp

    problem = latent_gp_view(model, data, context.facts)
    settings = replace(settings, seed=context.seed)
    how = "natural-gradient steps for q(u), Adam" if settings.natural_gradient else "Adam"
    with stage(f"sparse variational GP: {how} on the bound", enabled=context.progress):
        fit = fit_svgp(SVGPData(problem), settings, progress=context.progress, checkpoint=context.checkpoint,
                       identity=context.checkpoint_identity)
    output = svgp_output(fit)
    key = jax.random.PRNGKey(context.seed)
    add_pointwise_groups(output, fit, jax.random.fold_in(key, _REPLICATE_STREAM))
    if context.new_inputs is not None:
        with stage(f"predictions at {counted(len(context.new_inputs), 'new input')}", enabled=context.progress):
            svgp_predictions(output, fit, context.new_inputs, jax.random.fold_in(key, _PREDICTION_STREAM))
    output.state = fit
    return output


def svgp_output(fit):
    """The :class:`~gpdsl.results.method_output.MethodOutput` of an SVGP fit (see the module docstring)."""
    from gpdsl.inference.methods.sgpr import inducing_dims
    from gpdsl.results.method_output import point_estimate

    variational = {"mean": fit.mean.tolist(), "covariance": fit.covariance.tolist(), "whitened": fit.whiten}
    return point_estimate({**fit.hyperparameters(), "inducing_inputs": fit.inducing},
                          {"lp": fit.objective, "bound": fit.bound, "bound_trace": fit.trace}, fit.report["seconds"],
                          {"optimizer": fit.report, "variational": variational},
                          "sparse variational GP (Hensman et al. 2015), inducing_inputs the fitted Z",
                          {"inducing_inputs": inducing_dims(fit.problem), "bound_trace": ["chunk"]})


def add_pointwise_groups(output, fit, key) -> None:
    """``log_likelihood`` (the observed points' log predictive densities) and ``posterior_predictive`` (a replicate of
    every outcome) of an SVGP fit."""
    import jax
    import jax.numpy as jnp

    from gpdsl.inference.predict.draws import latent_replicates

    data, theta = fit.data, jnp.asarray(fit.theta)
    mean, variance = fit.latent_moments(data.all_inputs(theta))
    rows = data.rows
    log_predictive = data.log_predictive(theta, mean[rows], variance[rows])
    target = fit.problem.node.likelihood.target.name
    output.log_likelihood = {target: np.asarray(log_predictive)[None, None]}
    latent_key, replicate_key = jax.random.split(key)
    f = mean + jnp.sqrt(variance) * jax.random.normal(latent_key, mean.shape)
    output.posterior_predictive = {target: latent_replicates(fit.problem, np.asarray(fit.theta)[None, None],
                                                             np.asarray(f)[None, None], replicate_key)}


def svgp_predictions(output, fit, new_inputs, key) -> None:
    """The ``predictions`` group of an SVGP fit at new inputs (see the module docstring)."""
    import jax.numpy as jnp

    from gpdsl.inference.predict.draw_groups import set_predictions
    from gpdsl.inference.predict.draws import latent_new_draws
    from gpdsl.inference.predict.latent_gp import check_new_inputs, mean_at_new_inputs

    problem = fit.problem
    X_new = check_new_inputs(problem, new_inputs)

    def moments(theta, X, full):
        mean, variance = _moments_at(fit, theta, X)
        return mean + mean_at_new_inputs(problem, theta, X), variance

    theta_draws = np.asarray(fit.theta)[None, None]
    values = latent_new_draws(problem, theta_draws, None, X_new, key, moments=moments)
    f_mean, f_variance = moments(jnp.asarray(fit.theta), jnp.asarray(X_new), False)
    values[f"{problem.name}_mean"] = np.asarray(f_mean)[None, None]
    values[f"{problem.name}_variance"] = np.asarray(f_variance)[None, None]
    target = problem.node.likelihood.target.name
    if problem.likelihood == "normal":
        scale = problem.likelihood_arguments(jnp.asarray(fit.theta))[0]
        if jnp.ndim(scale) == 0:
            values[f"{target}_mean"] = values[f"{problem.name}_mean"]
            values[f"{target}_variance"] = values[f"{problem.name}_variance"] + float(scale) ** 2
    set_predictions(output, problem, values)


def _moments_at(fit, theta, X):
    """``q(f)`` at ``X`` with the fit's ``q`` and inducing inputs and hyperparameters ``theta`` (traceable in
    ``theta``: the predictions map over the one draw)."""
    import jax.numpy as jnp

    from gpdsl.inference.variational.svgp import latent_marginals

    return latent_marginals(fit.data.kernel(theta), jnp.asarray(fit.inducing), X, jnp.asarray(fit.mean),
                            jnp.asarray(fit.covariance), whiten=fit.whiten, jitter=fit.jitter)


def svgp_report(results, model, settings: SVGPSettings):
    """The fit's report (:class:`~gpdsl.results.report.RunReport`): the steps, how they stopped, and the bound."""
    from gpdsl.results.report import RunReport, number, optimiser, point_estimates

    report = optimiser(results)
    how = "a natural-gradient step for q(u), then Adam" if report.get("natural_gradient") else "Adam"
    lines = (f"sparse variational GP (M = {report.get('num_inducing')}, batches of {report.get('batch_size')}): "
             f"{report.get('steps')} steps ({how}; {report.get('seconds', 0):.1f} s); stop: {report.get('message')}",
             f"bound {number(report, 'bound')} (at the start {number(report, 'start_bound')}), objective "
             f"{number(report, 'objective')}")
    return RunReport(lines, tuple(point_estimates(results)))
