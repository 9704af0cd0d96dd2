"""The ``ep-ml`` method: type-II maximum likelihood of the hyperparameters on the EP marginal.

A point estimate, stored as one chain of one draw; the optimiser starts from ``starts`` draws of the
priors and keeps the best optimum.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpdsl.settings import option, require_number, require_positive_int


@dataclass(frozen=True)
class EPMLSettings:
    """Settings of ``ep-ml``.

    Attributes
    ----------
    starts : int
        Starting points drawn from the priors (the best optimum is kept).
    tol : float or None
        EP convergence tolerance (default ``n / 1e4``).
    """

    starts: int = option(4, "starting points drawn from the priors (the best optimum is kept)")
    tol: float | None = option(None, "Laplace/EP convergence: change in squared norm of f (default n/1e4)")

    def __post_init__(self):
        require_positive_int("starts", self.starts)
        require_number("tol", self.tol, 0, open_low=True, optional=True)


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
