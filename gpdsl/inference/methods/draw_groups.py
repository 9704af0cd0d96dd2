"""The ``log_likelihood``, ``posterior_predictive`` and ``predictions`` groups of a sampler's output.

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
========================  ====================================  ==========================================

NUTS writes its pointwise groups from Stan's generated quantities (the same quantities,
:mod:`gpdsl.backends.stan.codegen`) and takes only the predictions from here.
"""

from __future__ import annotations

from gpdsl.ir.families import GP_REGRESSION, LATENT_GP, LATENT_GPS, classify
from gpdsl.likelihoods import LIKELIHOODS

PREDICTING_FAMILIES = (LATENT_GP, GP_REGRESSION)
"""The families whose predictions at new inputs are computed here, for any sampler's draws."""

_REPLICATE_STREAM, _PREDICTION_STREAM = 1, 2


def predicting_family(model, family: str, facts):
    """``(family, facts)`` of the model among :data:`PREDICTING_FAMILIES`, or ``(None, None)``.

    ``family`` and ``facts`` are those the method runs the model as; a method of any model (NUTS) gets the
    model's own latent-GP or GP-regression facts.
    """
    if family in PREDICTING_FAMILIES:
        return family, facts
    found = classify(model).facts
    family = next((f for f in PREDICTING_FAMILIES if f in found), None)
    return family, found.get(family)


def add_draw_groups(output, model, data, context, *, pointwise: bool = True, approximation: str = "ep",
                    tol=None) -> None:
    """Fill ``output.log_likelihood``, ``output.posterior_predictive`` and ``output.predictions``.

    Parameters
    ----------
    output : MethodOutput
        A sampler's output; its ``posterior`` holds the hyperparameters by name (and ``f`` if recorded).
    model, data
        The checked model and its validated data.
    context : RunContext
        Family, facts, seed and new inputs.
    pointwise : bool
        Compute the pointwise groups (False when the method wrote them itself, as NUTS does).
    approximation : {"ep", "laplace"}
        For predictions of latent-GP models without f draws.
    tol : float, optional
        The approximation's convergence tolerance.
    """
    import jax

    family, facts = predicting_family(model, context.family, context.facts)
    if context.family == LATENT_GPS:  # several latent GPs: pointwise groups, no predictions (refused up front)
        family, facts = LATENT_GPS, context.facts
    if family is None:
        return
    key = jax.random.PRNGKey(context.seed)
    if family == GP_REGRESSION:
        _gp_regression_groups(output, model, data, facts, key, pointwise, context.new_inputs)
    else:
        _latent_gp_groups(output, model, data, facts, key, pointwise, context.new_inputs, approximation, tol)


def _gp_regression_groups(output, model, data, facts, key, pointwise, new_inputs):
    import jax

    from gpdsl.inference.families.gp_regression import gp_regression_view
    from gpdsl.inference.predict import draws

    problem = gp_regression_view(model, data, facts)
    theta = draws.unconstrained_draws(problem, output.posterior)
    if pointwise:
        output.log_likelihood = {problem.target: draws.gp_regression_log_likelihood(problem, theta)}
        output.posterior_predictive = {
            problem.target: draws.gp_regression_replicates(problem, theta, jax.random.fold_in(key, _REPLICATE_STREAM))}
    if new_inputs is not None:
        values = draws.gp_regression_new_draws(problem, theta, new_inputs, jax.random.fold_in(key, _PREDICTION_STREAM))
        _set_predictions(output, problem, values)


def _latent_gp_groups(output, model, data, facts, key, pointwise, new_inputs, approximation, tol):
    import jax

    from gpdsl.inference.families.latent_gp import latent_gp_view
    from gpdsl.inference.predict import draws

    problem = latent_gp_view(model, data, facts)
    theta = draws.unconstrained_draws(problem, output.posterior)
    f = problem.stack(output.posterior) if all(n.name in output.posterior for n in problem.nodes) else None
    f = None if f is None else problem.without_mean(theta, f)
    target = problem.node.likelihood.target.name
    if pointwise and f is not None and problem.likelihood in LIKELIHOODS:
        output.log_likelihood = {target: draws.latent_log_likelihood(problem, theta, f)}
        output.posterior_predictive = {
            target: draws.latent_replicates(problem, theta, f, jax.random.fold_in(key, _REPLICATE_STREAM))}
    if new_inputs is not None:
        values = draws.latent_new_draws(problem, theta, f, new_inputs, jax.random.fold_in(key, _PREDICTION_STREAM),
                                        approximation, tol)
        _set_predictions(output, problem, values)


def _set_predictions(output, problem, values: dict) -> None:
    points = f"{problem.node.statement.inputs.index_shape[0]}_new"
    output.predictions = dict(values)
    output.dims.update({name: [points] for name in values})
