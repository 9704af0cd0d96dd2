"""The Bayesian GPLVM by stochastic variational inference: the uncollapsed bound on minibatches, maximised by Adam.

``q(X)`` is factorised Gaussian per point (its prior ``N(0, I)``), ``q(u)`` explicit
(:mod:`gpdsl.inference.variational.uncollapsed_bound`), and each Adam step sees ``batch_size`` rows: their Psi
statistics, outputs and ``KL(q(x_n) || p(x_n))`` scaled by ``N / B``, so the cost of a step does not grow with
``N`` (Hensman, Fusi & Lawrence 2013): only the batch's rows of ``q(X)`` are read and updated (lazy Adam on
per-row parameters, :func:`gpdsl.inference.optimise.adam.maximise`). The starting point is variational EM's
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
from gpdsl.inference.variational.uncollapsed_bound import (InducingQ, expected_log_likelihood, inducing_kl,
                                                             optimal_inducing_q)
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


def minibatch_objective(problem, to_params, unravel, unravel_rows):
    """The minibatch estimate of the bound (plus log hyperprior) and its parts (traceable).

    Parameters
    ----------
    problem : GPLVMProblem
    to_params : callable
        From the optimiser's coordinates to :class:`VariationalParams` (:func:`optimiser_space`).
    unravel : callable
        From the flat global vector to ``{"raw": coordinates without q(X), "q_mean", "q_chol"}``.
    unravel_rows : callable
        From rows of the ``(N, 2 Q)`` array of ``q(X)``'s coordinates to those coordinates
        (:func:`gpdsl.inference.optimise.adam.ravel_rows`).

    Returns
    -------
    objective : callable
        ``objective(flat, rows, key, batch)``: ``N / B`` times the batch's sum of expected log-likelihoods
        minus ``KL(q(x_n) || p(x_n))``, minus ``KL(q(u) || p(u))``, plus the log hyperprior, from the
        batch's indices ``batch`` (B,) and their rows ``rows`` of ``q(X)``'s coordinates: nothing of size
        ``N`` is built.
    parts : callable
        ``parts(flat, rows, batch) -> (rows_term, global_term)``: the batch's unscaled sum and the rest, whose
        sum over a partition of the rows is the whole-data bound (:func:`whole_data_bound`).
    """
    Y = jax.device_put(np.nan_to_num(np.asarray(problem.Y, dtype=float)))
    complete = bool(problem.observed.all())
    observed = None if complete else jax.device_put(problem.observed)
    N = Y.shape[0]
    latent_q = FactorisedGaussian()

    def parts(flat, rows, batch):
        point = unravel(flat)
        params = to_params(point["raw"]._replace(latent=unravel_rows(rows)))
        moments = latent_q.moments(params.latent, params.theta)
        kernel = problem.kernel(params.theta)
        Z = params.inducing
        seen = None if complete else observed[batch]
        stats = psi_statistics(kernel, Z, moments.mean, moments.variance, row_weights=seen)
        Kmm = kernel(Z) + GP_JITTER * jnp.eye(Z.shape[0])
        q = InducingQ(point["q_mean"], point["q_chol"])
        rows_term = (expected_log_likelihood(Y[batch], stats.psi0, stats.psi1, stats.psi2, Kmm,
                                             problem.noise_variance(params.theta), q, seen)
                     - kl_standard_normal(moments.mean, moments.variance))
        return rows_term, problem.log_hyperprior(params.theta) - inducing_kl(Kmm, q)

    def objective(flat, rows, key, batch):
        rows_term, global_term = parts(flat, rows, batch)
        return N / batch.shape[0] * rows_term + global_term

    return objective, parts


def whole_data_bound(parts, flat, local, rows_per_chunk: int = 10_000) -> float:
    """The whole-data bound (plus log hyperprior) from :func:`minibatch_objective`'s ``parts``, over chunks of rows.

    Parameters
    ----------
    parts : callable
        ``parts(flat, rows, batch)``.
    flat : array_like
        The global parameters.
    local : array_like, shape (N, P)
        The rows of ``q(X)``'s coordinates.
    rows_per_chunk : int
        Rows whose statistics are formed at once (memory ``O(rows_per_chunk M^2)``).

    Returns
    -------
    float
    """
    evaluate = jax.jit(parts)
    flat, local = jnp.asarray(flat), jnp.asarray(local)
    total, global_term = 0.0, 0.0
    for start in range(0, local.shape[0], rows_per_chunk):
        batch = jnp.arange(start, min(start + rows_per_chunk, local.shape[0]))
        rows_term, global_term = evaluate(flat, local[batch], batch)
        total += float(rows_term)
    return total + float(global_term)


def fit_minibatch_gplvm(problem, vem_settings, *, batch_size: int, noise_fixed_steps: int = 2000,
                        steps: int = 5000, learning_rate: float = 0.01, chunk: int = 100, seed: int = 0,
                        progress: bool = False, checkpoint=None, identity: dict | None = None,
                        report=None) -> MinibatchFit:
    """Fit a Bayesian GPLVM (``X ~ normal(0, 1)``) by Adam on minibatches; missing outputs (NaN) are left out of
    the expected log-likelihood (each output column's ``Psi2`` sums over its observed rows of the batch).

    ``q(X)`` is an ``(N, 2 Q)`` array of per-row parameters updated lazily (only the batch's rows, see
    :func:`gpdsl.inference.optimise.adam.maximise`), the batches drawn by epoch-wise shuffling; ``theta``, the
    inducing inputs and ``q(u)`` are a flat vector updated by dense Adam. A step costs ``O(B)``.

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
        A GP prior on the latent inputs.
    """
    if problem.latent_prior is not None:
        raise MethodError("the minibatch GPLVM fits the Bayesian GPLVM (X ~ normal(0, 1))")
    started = time.perf_counter()
    latent_q = FactorisedGaussian()
    initial = warmup_start(problem, initial_params(problem, vem_settings, latent_q))
    to_params, from_params = optimiser_space(problem, latent_q)
    q0 = _optimal_start(problem, initial, latent_q)
    raw = from_params(initial)
    local0, unravel_rows = adam.ravel_rows(raw.latent)
    global_tree = {"raw": raw._replace(latent=None), "q_mean": q0.mean, "q_chol": q0.chol}
    flat0, unravel = ravel_pytree(global_tree)
    objective, parts = minibatch_objective(problem, to_params, unravel, unravel_rows)
    held_tree = jax.tree_util.tree_map(lambda leaf: np.zeros(np.shape(leaf), dtype=bool), global_tree)
    held_tree["raw"] = held_tree["raw"]._replace(theta=problem.theta_mask(problem.noise_names))
    noise_held = np.asarray(ravel_pytree(held_tree)[0], dtype=bool)
    result = adam.maximise(objective, flat0, [adam.Phase(noise_fixed_steps, noise_held), adam.Phase(steps)],
                           local=local0, batch_size=min(batch_size, problem.num_points),
                           learning_rate=learning_rate, key=jax.random.PRNGKey(seed), chunk=chunk,
                           progress=progress, checkpoint=checkpoint, identity=identity, report=report)
    point = unravel(jnp.asarray(result.x))
    bound = whole_data_bound(parts, result.x, result.local)
    params = to_params(point["raw"]._replace(latent=unravel_rows(jnp.asarray(result.local))))
    gradient_norm = float(np.sqrt(np.sum(result.gradient ** 2) + np.sum(result.local_gradient ** 2)))
    return MinibatchFit(params, InducingQ(point["q_mean"], jnp.tril(point["q_chol"])), bound,
                        result.trace, time.perf_counter() - started, result.steps, gradient_norm)


def _optimal_start(problem, initial: VariationalParams, latent_q) -> InducingQ:
    """The ``q(u)`` optimal for the whole data at the starting point."""
    moments = latent_q.moments(initial.latent, initial.theta)
    kernel = problem.kernel(initial.theta)
    observed = None if problem.observed.all() else problem.observed
    stats = psi_statistics(kernel, initial.inducing, moments.mean, moments.variance, row_weights=observed)
    Kmm = kernel(initial.inducing) + GP_JITTER * jnp.eye(initial.inducing.shape[0])
    return optimal_inducing_q(np.nan_to_num(problem.Y), stats.psi1, stats.psi2, Kmm,
                              problem.noise_variance(initial.theta), observed)


def as_vem_fit(problem, vem_settings, fit: MinibatchFit, learning_rate: float, batch_size: int) -> VEMFit:
    """The fit as a :class:`~gpdsl.inference.variational.vem.VEMFit`, for variational EM's results and predictions
    (which take ``q(u)`` optimal given the fitted ``q(X)``)."""
    report = {"optimizer": "adam", "iterations": fit.steps, "evaluations": fit.steps, "bound": fit.bound,
              "gradient_norm": fit.gradient_norm, "converged": True, "stop": "steps",
              "message": f"ran {fit.steps} Adam steps at learning rate {learning_rate}, {batch_size} rows each",
              "seconds": fit.seconds}
    return VEMFit(problem, vem_settings, fit.params, fit.bound, np.asarray(fit.trace), report,
                  latent_q=FactorisedGaussian())
