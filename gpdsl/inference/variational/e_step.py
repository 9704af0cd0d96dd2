"""The E-step alone: ``q(X)`` and the inducing inputs optimised at fixed hyperparameters.

The pseudo-marginal sampler of the supervised GPLVM (Gadd, Wade & Shah 2021) proposes latent values
from the variational posterior found at each proposed ``theta``. For its estimate to stay unbiased the
optimisation must depend on ``theta`` alone, never on the chain's state: :func:`e_step` starts from a
point that is a function of ``theta`` only (the fit's initialisation at that ``theta``, or a fixed
``start``), runs L-BFGS inside JAX (:mod:`gpdsl.inference.optimise.traced_lbfgs`), and is
deterministic, so a batch of hyperparameter values runs as one vectorised call.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from jax.flatten_util import ravel_pytree

from gpdsl.inference.families.gplvm import GPLVMProblem
from gpdsl.settings import VEMSettings
from gpdsl.errors import MethodError
from gpdsl.inference.optimise.traced_lbfgs import minimize
from gpdsl.inference.variational.gp_prior_q import GPPriorGaussian
from gpdsl.inference.variational.site_updates import make_site_updates
from gpdsl.inference.variational.vem import gplvm_bound, initial_points


class EStepResult(NamedTuple):
    """The optimum of the bound over ``q(X)`` and the inducing inputs at fixed ``theta``.

    Attributes
    ----------
    latent : NamedTuple of jax.Array
        The parameters of ``q(X)`` (:class:`~gpdsl.inference.variational.latent_q.LatentQ`).
    inducing : jax.Array, shape (M, Q)
        Inducing inputs.
    bound : jax.Array
        The lower bound on ``log p(Y | theta)`` there (no hyperprior term).
    iterations : jax.Array
        L-BFGS iterations used.
    converged : jax.Array
        Whether L-BFGS met its tolerances within ``max_iterations``.
    """

    latent: Any
    inducing: jax.Array
    bound: jax.Array
    iterations: jax.Array
    converged: jax.Array


def e_step(problem: GPLVMProblem, settings: VEMSettings, theta, *, start=None, max_iterations: int = 1000,
           gtol: float = 1e-5, updates: str = "lbfgs", tol: float = 1e-9) -> EStepResult:
    """Maximise the bound over ``q(X)`` and the inducing inputs at hyperparameters ``theta``.

    Parameters
    ----------
    problem : GPLVMProblem
        The model view.
    settings : VEMSettings
        The Psi statistics, the number of inducing inputs, the initialisation and its seed.
    theta : array_like, shape (P,) or (B, P)
        Unconstrained hyperparameters; a batch of ``B`` values is optimised in one vectorised call.
    start : tuple, optional
        ``(latent, inducing)``: a fixed starting point (e.g. a fit's optimum). By default the fit's
        initialisation at ``theta`` (:func:`~gpdsl.inference.variational.vem.initial_params`), which
        depends on ``theta`` and the seed only.
    max_iterations : int
        L-BFGS iterations at most (the paper's budget is 1000).
    gtol : float
        L-BFGS stops when the largest gradient component falls below this.
    updates : {"lbfgs", "sites"}
        ``"lbfgs"``: ``q(X)`` and the inducing inputs by L-BFGS. ``"sites"`` (latent inputs with a GP prior
        only): ``q(X)`` alone by natural-gradient site updates
        (:mod:`~gpdsl.inference.variational.site_updates`), the inducing inputs held at the start's;
        unaffected by the conditioning of ``K`` that makes L-BFGS crawl, and deterministic too.
    tol : float
        Site updates stop when a step raises the bound by less than ``tol * (1 + |bound|)``.

    Returns
    -------
    EStepResult
        With a leading batch axis when ``theta`` is a batch.
    """
    return make_e_step(problem, settings, start=start, max_iterations=max_iterations, gtol=gtol,
                       updates=updates, tol=tol)(theta)


def make_e_step(problem: GPLVMProblem, settings: VEMSettings, *, start=None, max_iterations: int = 1000,
                gtol: float = 1e-5, updates: str = "lbfgs", tol: float = 1e-9, accelerate: bool = False):
    """:func:`e_step` as one compiled function ``theta -> EStepResult``, for callers that run it many times.

    The arguments are those of :func:`e_step`, and ``accelerate``: squared extrapolation of the site updates
    (:func:`~gpdsl.inference.variational.site_updates.make_site_updates`). The function compiles once per shape
    of ``theta``. It also takes
    ``run(theta, start)``: a starting ``(latent, inducing)`` given at the call, which replaces the fixed one.

    Raises
    ------
    MethodError
        An unknown ``updates``, or ``"sites"`` for latent inputs without a GP prior.
    """
    latent_q = problem.latent_q()
    if updates not in ("lbfgs", "sites"):
        raise MethodError(f"updates must be 'lbfgs' or 'sites'; got {updates!r}")
    if updates == "sites" and not isinstance(latent_q, GPPriorGaussian):
        raise MethodError(f"site updates need latent inputs with a GP prior; '{problem.latent}' has none")
    bound = gplvm_bound(problem, settings, latent_q.unconstrained_moments, latent_q.unconstrained_kl, hyperprior=False)
    sites = make_site_updates(problem, settings, latent_q, max_iterations=max_iterations, tol=tol,
                              accelerate=accelerate) if updates == "sites" else None
    mean, inducing = initial_points(problem, settings)

    def optimise(theta, given=None):
        if given is not None:
            latent, Z = given
        else:
            latent, Z = start if start is not None else (latent_q.initial(mean, theta, settings.init_variance),
                                                         inducing)
        if updates == "sites":
            result = sites(latent, jnp.asarray(Z, dtype=float), theta)
            return EStepResult(result.latent, jnp.asarray(Z, dtype=float), result.bound, result.iterations,
                               result.converged)
        flat, unravel = ravel_pytree((latent_q.unconstrain(latent, jnp), jnp.asarray(Z, dtype=float)))

        def negative_bound(x):
            coordinates, Z = unravel(x)
            return -bound(coordinates, Z, theta)

        result = minimize(negative_bound, flat, max_iterations=max_iterations, gtol=gtol)
        coordinates, Z = unravel(result.x)
        return EStepResult(latent_q.constrain(coordinates), Z, -result.value, result.iterations, result.converged)

    @jax.jit
    def run(theta, given=None):
        theta = jnp.asarray(theta, dtype=float)
        return jax.vmap(optimise)(theta, given) if theta.ndim == 2 else optimise(theta, given)

    return run
