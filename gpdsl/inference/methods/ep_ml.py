"""The ``ep-ml`` method: type-II maximum likelihood of the hyperparameters on the EP marginal.

A point estimate, stored as one chain of one draw; the optimiser starts from ``starts`` draws of the
priors and keeps the best optimum.
"""

from __future__ import annotations


import numpy as np

from gpdsl.settings.fitting import EPMLSettings


def run_ep_ml(model, data, settings: EPMLSettings, context):
    """Run ``ep-ml``; returns a one-draw :class:`~gpdsl.results.method_output.MethodOutput`."""
    import time

    import jax

    from gpdsl.inference.methods.draw_groups import add_draw_groups
    from gpdsl.inference.methods.latent_chains import prior_initial_thetas, theta_output, view
    from gpdsl.inference.optimise.ep_ml import ep_type2_ml

    started = time.perf_counter()
    problem = view(model, data, context)
    key_init, _, _ = jax.random.split(jax.random.PRNGKey(context.seed), 3)
    starts = prior_initial_thetas(problem, key_init, settings.starts)
    theta, log_marginal, report = ep_type2_ml(problem, starts, tol=settings.tol)
    theta_draws = np.asarray(theta)[None, None, :]
    output = theta_output(problem, theta_draws, None, {"log_marginal": np.asarray([[log_marginal]])})
    output.report = {"optimizer": report}
    add_draw_groups(output, model, data, context, pointwise=False, approximation="ep", tol=settings.tol)
    output.timings = {"sampling": time.perf_counter() - started}
    return output
