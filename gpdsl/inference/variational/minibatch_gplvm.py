"""The Bayesian GPLVM by stochastic variational inference: the uncollapsed bound on minibatches, maximised by Adam.

``q(X)`` is factorised Gaussian per point (its prior ``N(0, I)``), ``q(u)`` explicit
(:mod:`gpdsl.inference.variational.uncollapsed_bound`), and each Adam step sees ``batch_size`` rows: their Psi
statistics, outputs and ``KL(q(x_n) || p(x_n))`` scaled by ``N / B``, so the cost of a step does not grow with
``N`` (Hensman, Fusi & Lawrence 2013). The starting point is variational EM's
(:func:`~gpdsl.inference.variational.vem.initial_params`: PCA means, a random subset of them as inducing
inputs, the heuristic hyperparameters, the noise variance at most 1% of the outputs' variance as its
warm-up starts it) with the optimal ``q(u)`` there. Adam runs the two phases of
:mod:`gpdsl.inference.optimise.adam`: the noise variance held, then everything free.
"""

from __future__ import annotations

import time
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

from gpdsl.errors import MethodError
from gpdsl.inference.optimise import adam
from gpdsl.inference.variational.latent_q import FactorisedGaussian, kl_standard_normal
from gpdsl.inference.variational.uncollapsed_bound import InducingQ, optimal_inducing_q, uncollapsed_bound
from gpdsl.inference.variational.vem import (VariationalParams, VEMFit, initial_params,
                                             optimiser_space, warmup_start)
from gpdsl.kernels.psi import psi_statistics
from gpdsl.numerics import GP_JITTER


class MinibatchFit(NamedTuple):
    """A minibatch fit of a Bayesian GPLVM.

    Attributes
    ----------
    params : VariationalParams
        ``q(X)``, the inducing inputs and ``theta`` at the end.
    inducing_q : InducingQ
        ``q(u)`` at the end.
    bound : float
        The whole-data uncollapsed bound there (plus the log hyperprior).
    trace : numpy.ndarray
        The mean minibatch estimate of each chunk of steps.
    seconds : float
    steps : int
    gradient_norm : float
        Of the last step's minibatch gradient.
    """

    params: VariationalParams
    inducing_q: InducingQ
    bound: float
    trace: np.ndarray
    seconds: float
    steps: int
    gradient_norm: float


def minibatch_objective(problem, to_params, unravel, batch_size: int | None):
    """``objective(flat, key, batch)``: the minibatch estimate of the bound (plus log hyperprior) (traceable)."""
    Y = jax.device_put(np.asarray(problem.Y, dtype=float))
    N = Y.shape[0]
    latent_q = FactorisedGaussian()

    def objective(flat, key, batch):
        point = unravel(flat)
        rows = jnp.arange(N) if batch is None else batch
        raw = point["raw"]
        # only the batch's rows of q(X) are transformed: a step's cost stays that of its batch
        params = to_params(raw._replace(latent=jax.tree_util.tree_map(lambda leaf: leaf[rows], raw.latent)))
        moments = latent_q.moments(params.latent, params.theta)
        mean, variance = moments.mean, moments.variance
        kernel = problem.kernel(params.theta)
        Z = params.inducing
        stats = psi_statistics(kernel, Z, mean, variance)
        Kmm = kernel(Z) + GP_JITTER * jnp.eye(Z.shape[0])
        scale = N / rows.shape[0]
        q = InducingQ(point["q_mean"], point["q_chol"])
        data = uncollapsed_bound(Y[rows], stats.psi0, stats.psi1, stats.psi2, Kmm,
                                 problem.noise_variance(params.theta), q, scale=scale)
        return data - scale * kl_standard_normal(mean, variance) + problem.log_hyperprior(params.theta)

    return objective


def fit_minibatch_gplvm(problem, vem_settings, *, batch_size: int, noise_fixed_steps: int = 2000,
                        steps: int = 5000, learning_rate: float = 0.01, chunk: int = 100, seed: int = 0,
                        progress: bool = False, checkpoint=None, identity: dict | None = None,
                        report=None) -> MinibatchFit:
    """Fit a Bayesian GPLVM (``X ~ normal(0, 1)``, fully observed outputs) by Adam on minibatches.

    Parameters
    ----------
    problem : GPLVMProblem
        The model view (:func:`gpdsl.inference.families.gplvm.gplvm_problem`).
    vem_settings : VEMSettings
        For the starting point (``num_inducing``, ``init``, ``init_variance``, ``initial_values``, ``seed``).
    batch_size : int
        Rows per step (``N`` or more: the whole data).
    noise_fixed_steps, steps, learning_rate, chunk, progress, checkpoint, identity, report
        As :func:`gpdsl.inference.optimise.adam.maximise`'s schedule and options.
    seed : int
        Seed of the minibatches.

    Returns
    -------
    MinibatchFit

    Raises
    ------
    MethodError
        A GP prior on the latent inputs, or missing outputs.
    """
    if problem.latent_prior is not None or not problem.observed.all():
        raise MethodError("the minibatch GPLVM fits the Bayesian GPLVM (X ~ normal(0, 1)) with fully observed "
                          "outputs")
    started = time.perf_counter()
    latent_q = FactorisedGaussian()
    initial = warmup_start(problem, initial_params(problem, vem_settings, latent_q))
    to_params, from_params = optimiser_space(problem, latent_q)
    moments = latent_q.moments(initial.latent, initial.theta)
    kernel = problem.kernel(initial.theta)
    stats = psi_statistics(kernel, initial.inducing, moments.mean, moments.variance)
    Kmm = kernel(initial.inducing) + GP_JITTER * jnp.eye(initial.inducing.shape[0])
    q0 = optimal_inducing_q(problem.Y, stats.psi1, stats.psi2, Kmm, problem.noise_variance(initial.theta))
    flat0, unravel = ravel_pytree({"raw": from_params(initial), "q_mean": q0.mean, "q_chol": q0.chol})
    objective = minibatch_objective(problem, to_params, unravel, batch_size)
    held_tree = jax.tree_util.tree_map(lambda leaf: np.zeros(np.shape(leaf), dtype=bool),
                                       {"raw": from_params(initial), "q_mean": q0.mean, "q_chol": q0.chol})
    held_tree["raw"] = held_tree["raw"]._replace(theta=problem.theta_mask(problem.noise_names))
    noise_held = np.asarray(ravel_pytree(held_tree)[0], dtype=bool)
    N = problem.num_points
    minibatch = {} if batch_size >= N else {"data_size": N, "batch_size": batch_size}
    result = adam.maximise(objective, flat0, [adam.Phase(noise_fixed_steps, noise_held), adam.Phase(steps)],
                           learning_rate=learning_rate, key=jax.random.PRNGKey(seed), chunk=chunk,
                           progress=progress, checkpoint=checkpoint, identity=identity, report=report,
                           **minibatch)
    point = unravel(jnp.asarray(result.x))
    bound = float(jax.jit(objective)(jnp.asarray(result.x), None, None))
    return MinibatchFit(to_params(point["raw"]), InducingQ(point["q_mean"], jnp.tril(point["q_chol"])), bound,
                        result.trace, time.perf_counter() - started, result.steps,
                        float(np.linalg.norm(result.gradient)))


def as_vem_fit(problem, vem_settings, fit: MinibatchFit, learning_rate: float, batch_size: int) -> VEMFit:
    """The fit as a :class:`~gpdsl.inference.variational.vem.VEMFit`, for variational EM's results and predictions
    (which take ``q(u)`` optimal given the fitted ``q(X)``)."""
    report = {"optimizer": "adam", "iterations": fit.steps, "evaluations": fit.steps, "bound": fit.bound,
              "gradient_norm": fit.gradient_norm, "converged": True, "stop": "steps",
              "message": f"ran {fit.steps} Adam steps at learning rate {learning_rate}, {batch_size} rows each",
              "seconds": fit.seconds}
    return VEMFit(problem, vem_settings, fit.params, fit.bound, np.asarray(fit.trace), report,
                  latent_q=FactorisedGaussian())
