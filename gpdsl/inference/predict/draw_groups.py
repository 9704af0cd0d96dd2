"""The ``log_likelihood``, ``posterior_predictive`` and ``predictions`` groups of a sampler's output, per family.

One path for every method on the latent-GP and GP-regression families, NUTS included: from the named,
constrained draws in a :class:`~gpdsl.results.method_output.MethodOutput` (the hyperparameters, and ``f``
where the method records it) the groups are computed draw by draw (:mod:`gpdsl.inference.predict.draws`).

========================  ====================================  ==========================================
family                    log_likelihood and posterior_predictive  predictions (``--predict``)
========================  ====================================  ==========================================
latent GP, f recorded     ``log p(y_i | f_i, theta)``; y_rep       f* from the GP conditional given f, y*
latent GP, theta only     not written (needs f draws)           f* from the Gaussian approximation, y*
GP regression             exact LOO ``log p(y_i | y_-i, theta)``;  the exact predictive at each theta
                          y_rep from the exact conditional
Student-t process         from Stan's generated quantities      the conditional MVT at each theta
                          (NUTS, the only sampler of it)
HSGP latent GP            ``log p(y_i | f_i, theta)``; y_rep,   f* = phi(X*) (sqrt(S) .* z) at each draw
                          f from the weights z (NUTS: Stan's)   (theta, z), y*; theta only (pm): z from the
                                                                weights' Laplace or EP q at theta
state-space latent GP     ``log p(y_i | f_i, theta)``; y_rep,   f* from the state-space prior conditioned on
                          f from the innovations z              each draw's f (pathwise, Kalman smoother), y*
========================  ====================================  ==========================================

A ``matrix[N, K]`` latent of independent GP columns (``categorical_logit``) is predicted column by column, or from
the multiclass Laplace approximation without ``f`` draws (:mod:`gpdsl.inference.predict.multiclass`), its
``<f>_new`` and ``<y>_prob`` with a class dim after ``<N>_new``.
``f*`` is drawn jointly over the new points or point by point as ``context.predictive`` says
(:mod:`gpdsl.inference.predict.joint`). NUTS writes its pointwise groups from Stan's generated quantities (the same quantities,
:mod:`gpdsl.backends.stan.codegen`) and takes only the predictions from here.
"""

from __future__ import annotations

from gpdsl.inference.progress import counted, draw_stage
from gpdsl.likelihoods import LIKELIHOODS

_REPLICATE_STREAM, _PREDICTION_STREAM, _WEIGHTS_STREAM = 1, 2, 3


def gp_regression_groups(output, model, data, facts, context, pointwise: bool = True, **_) -> None:
    """The groups of GP regression: the exact leave-one-out densities, replicates from the exact conditional, and
    the exact predictive at each draw's hyperparameters (see the module docstring)."""
    import jax

    from gpdsl.inference.families.gp_regression import gp_regression_view
    from gpdsl.inference.predict import draws

    key, new_inputs = jax.random.PRNGKey(context.seed), context.new_inputs
    problem = gp_regression_view(model, data, facts)
    theta = draws.unconstrained_draws(problem, output.posterior)
    if pointwise:
        with draw_stage("pointwise log-likelihood", theta, context.progress):
            output.log_likelihood = {problem.target: draws.gp_regression_log_likelihood(problem, theta)}
        with draw_stage("posterior predictive replicates", theta, context.progress):
            output.posterior_predictive = {problem.target: draws.gp_regression_replicates(
                problem, theta, jax.random.fold_in(key, _REPLICATE_STREAM))}
    if new_inputs is not None:
        with draw_stage(f"predictions at {counted(len(new_inputs), 'new input')}", theta, context.progress):
            values = draws.gp_regression_new_draws(problem, theta, new_inputs,
                                                   jax.random.fold_in(key, _PREDICTION_STREAM),
                                                   joint=context.predictive == "joint")
        set_predictions(output, problem, values)


def student_t_process_groups(output, model, data, facts, context, pointwise: bool = False, **_) -> None:
    """The predictions of Student-t process regression at each draw's hyperparameters (the conditional MVT); its
    pointwise groups come from Stan's generated quantities (NUTS is its only sampler), so ``pointwise`` is refused."""
    import jax

    from gpdsl.errors import MethodError
    from gpdsl.inference.families.student_t_process import student_t_process_view
    from gpdsl.inference.predict import draws

    if pointwise:
        raise MethodError("the pointwise groups of Student-t process regression come from Stan's generated quantities")
    new_inputs = context.new_inputs
    if new_inputs is None:
        return
    problem = student_t_process_view(model, data, facts)
    theta = draws.unconstrained_draws(problem, output.posterior)
    with draw_stage(f"predictions at {counted(len(new_inputs), 'new input')}", theta, context.progress):
        values = draws.student_t_process_new_draws(problem, theta, new_inputs,
                                                   jax.random.fold_in(jax.random.PRNGKey(context.seed),
                                                                      _PREDICTION_STREAM),
                                                   joint=context.predictive == "joint")
    set_predictions(output, problem, values)


def latent_gp_groups(output, model, data, facts, context, pointwise: bool = True, approximation: str = "ep",
                     tol=None) -> None:
    """The groups of latent-GP models: ``log p(y_i | f_i, theta)`` and replicates where ``f`` was recorded, and
    ``f*`` at new inputs (from the GP conditional given ``f``, or from ``approximation`` at ``theta``)."""
    import jax

    from gpdsl.inference.families.latent_gp import latent_gp_view
    from gpdsl.inference.predict import draws

    key, new_inputs = jax.random.PRNGKey(context.seed), context.new_inputs
    problem = latent_gp_view(model, data, facts)
    theta = draws.unconstrained_draws(problem, output.posterior)
    f = problem.stack(output.posterior) if all(n.name in output.posterior for n in problem.nodes) else None
    f = None if f is None else problem.without_mean(theta, f)
    target = problem.node.likelihood.target.name
    if pointwise and f is not None and problem.likelihood in LIKELIHOODS:
        with draw_stage("pointwise log-likelihood", theta, context.progress):
            output.log_likelihood = {target: draws.latent_log_likelihood(problem, theta, f)}
        with draw_stage("posterior predictive replicates", theta, context.progress):
            output.posterior_predictive = {
                target: draws.latent_replicates(problem, theta, f, jax.random.fold_in(key, _REPLICATE_STREAM))}
    if new_inputs is not None:
        how = "" if f is not None else f" ({approximation} at each draw)"
        with draw_stage(f"predictions at {counted(len(new_inputs), 'new input')}{how}", theta, context.progress):
            prediction_key, joint = jax.random.fold_in(key, _PREDICTION_STREAM), context.predictive == "joint"
            if problem.columns > 1:
                from gpdsl.inference.predict.multiclass import multiclass_new_draws

                values = multiclass_new_draws(problem, theta, f, new_inputs, prediction_key, tol, joint=joint)
            else:
                values = draws.latent_new_draws(problem, theta, f, new_inputs, prediction_key, approximation, tol,
                                                joint=joint)
        set_predictions(output, problem, values)


def hsgp_groups(output, model, data, facts, context, pointwise: bool = True, approximation: str = "ep", tol=None,
                **_) -> None:
    """The groups of a Hilbert-space approximate latent GP from each draw of its hyperparameters and weights
    (:mod:`gpdsl.inference.predict.hsgp`): ``log p(y_i | f_i, theta)`` and replicates (NUTS writes them from Stan's
    generated quantities), and ``f*`` and ``y*`` at new inputs; with the pointwise groups, the paper's diagnostics of
    the length-scale draws in the run's report (:mod:`gpdsl.inference.hsgp_diagnostics`). Where the draws hold the
    hyperparameters alone (``pm`` without ``--sample-latent``) the pointwise groups are not written and predictions
    take one draw of the weights' Gaussian ``approximation`` (Laplace or EP) at each draw (``tol`` its convergence
    threshold)."""
    import jax

    from gpdsl.inference.families.hsgp import hsgp_view
    from gpdsl.inference.predict.hsgp import approximate_weight_draws, hsgp_new_draws, hsgp_pointwise

    key, new_inputs = jax.random.PRNGKey(context.seed), context.new_inputs
    if not pointwise and new_inputs is None:
        return
    problem = hsgp_view(model, data, facts)
    first = next(iter(output.posterior.values()))
    if pointwise:  # a gpdsl sampler (NUTS writes these groups and the diagnostics itself)
        from gpdsl.inference.hsgp_diagnostics import hsgp_warnings

        warnings = hsgp_warnings(model, data, output.posterior)
        if warnings:
            output.report.setdefault("warnings", []).extend(warnings)
    posterior = output.posterior
    if problem.weights not in posterior:  # pm without --sample-latent: theta alone
        if new_inputs is None:
            return
        with draw_stage(f"weights from {approximation} at each draw", first, context.progress):
            posterior = approximate_weight_draws(problem, posterior, jax.random.fold_in(key, _WEIGHTS_STREAM),
                                                 approximation, tol)
    elif pointwise:
        with draw_stage("pointwise log-likelihood and replicates", first, context.progress):
            log_likelihood, replicates = hsgp_pointwise(problem, output.posterior,
                                                        jax.random.fold_in(key, _REPLICATE_STREAM))
        output.log_likelihood = {problem.facts.target: log_likelihood}
        output.posterior_predictive = {problem.facts.target: replicates}
    if new_inputs is not None:
        with draw_stage(f"predictions at {counted(len(new_inputs), 'new input')}", first, context.progress):
            values = hsgp_new_draws(problem, posterior, new_inputs,
                                    jax.random.fold_in(key, _PREDICTION_STREAM))
        set_predictions(output, problem, values)


def state_space_latent_groups(output, model, data, facts, context, pointwise: bool = True, approximation: str = "ep",
                              tol=None, **_) -> None:
    """The groups of a latent state-space GP from each draw of its hyperparameters and innovations
    (:mod:`gpdsl.inference.predict.state_space_latent`): ``log p(y_i | f_i, theta)`` and replicates (NUTS writes them
    from Stan's generated quantities), and ``f*`` and ``y*`` at new times, ``f*`` from the state-space prior
    conditioned on each draw's ``f``. Where the draws hold the hyperparameters alone (``pm`` without
    ``--sample-latent``) the pointwise groups are not written and predictions take one draw of the innovations from
    ``approximation`` at each draw (:func:`~gpdsl.inference.mcmc.state_space_pm.approximate_innovation_draws`)."""
    import jax

    from gpdsl.inference.families.state_space_latent import state_space_latent_view
    from gpdsl.inference.predict.state_space_latent import state_space_new_draws, state_space_pointwise

    key, new_inputs = jax.random.PRNGKey(context.seed), context.new_inputs
    if not pointwise and new_inputs is None:
        return
    problem = state_space_latent_view(model, data, facts)
    first = next(iter(output.posterior.values()))
    posterior = output.posterior
    if problem.weights not in posterior:  # pm without --sample-latent: theta alone
        if new_inputs is None:
            return
        from gpdsl.inference.mcmc.state_space_pm import approximate_innovation_draws

        with draw_stage(f"innovations from {approximation} at each draw", first, context.progress):
            posterior = approximate_innovation_draws(problem, posterior, jax.random.fold_in(key, _WEIGHTS_STREAM),
                                                     approximation, tol)
    elif pointwise:
        with draw_stage("pointwise log-likelihood and replicates", first, context.progress):
            log_likelihood, replicates = state_space_pointwise(problem, output.posterior,
                                                               jax.random.fold_in(key, _REPLICATE_STREAM))
        output.log_likelihood = {problem.facts.target: log_likelihood}
        output.posterior_predictive = {problem.facts.target: replicates}
    if new_inputs is not None:
        with draw_stage(f"predictions at {counted(len(new_inputs), 'new input')}", first, context.progress):
            values = state_space_new_draws(problem, posterior, new_inputs,
                                           jax.random.fold_in(key, _PREDICTION_STREAM))
        set_predictions(output, problem, values)


def set_predictions(output, problem, values: dict) -> None:
    """Put ``values`` (each ``(chain, draw, new point[, class])``) in ``output.predictions`` with their dims."""
    points = f"{problem.node.statement.inputs.index_shape[0]}_new"
    output.predictions = dict(values)
    output.dims.update({name: [points] for name in values})
    if getattr(problem, "columns", 1) > 1:  # a matrix latent: (chain, draw, new point, class)
        classes = problem.jax_model.model.latents[problem.name].type.dim_names(problem.name)[-1]
        output.dims.update({name: [points, classes] for name, value in values.items() if value.ndim == 4})
