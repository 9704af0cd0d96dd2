"""Predictions of a supervised GPLVM from retained draws ``(theta_g, Z_g)`` (Gadd, Wade & Shah 2021, Sec. 4.3).

For ``Z ~ gp(X, k_z); F ~ gp(Z, k_f); Y ~ normal(F, s)`` with hyperparameter draws (e.g. the pseudo-marginal
sampler's) and latent inputs drawn given each of them
(:func:`~gpdsl.inference.mcmc.latent_inputs_ess.sample_latent_inputs`):

* :func:`predict`: per draw, ``z*`` sampled from the noise-free GP conditional of ``Z`` at new inputs
  (eq. 7), then the GP predictive of ``y*`` given ``(Z_g, Y)`` at ``z*`` with mean ``K_f*^T (K_f + s^2 I)^-1 Y``
  (the paper prints it without the inverse) and variance ``S + s^2``;
* :func:`log_predictive_density`: eq. (8), the log of the average over draws of those Gaussian densities;
* :func:`predictive_mae`: eq. (12);
* :func:`replicate_outputs`: replicates of the training outputs for posterior predictive checks;
* :func:`log_likelihood`: pointwise log-likelihood draws for PSIS-LOO.

Every function takes draws with a leading ``(chains, draws)`` layout; draw ``(c, g)`` uses the key
``jax.random.split(rng_key, chains * draws)[c * draws + g]``. The outputs are those of the model (centre
them beforehand as the model expects).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.scipy.special import logsumexp

from gpdsl.errors import DataError
from gpdsl.inference import progress
from gpdsl.inference.families.gplvm import GPLVMProblem
from gpdsl.inference.mcmc.gplvm_estimate import require_observed
from gpdsl.inference.predict.gp_prior_latents import prior_points
from gpdsl.inference.predict.gp_regression import exact_moments, exact_posterior
from gpdsl.numerics.linalg import cholesky, cholesky_with_jitter, solve_triangular
from gpdsl.numerics import GP_JITTER

BATCH = 64
CHUNK = 4 * BATCH


class DrawPredictions(NamedTuple):
    """Per-draw predictions at ``n*`` new inputs; every array has leading axes ``(chains, draws)``.

    Attributes
    ----------
    latent_mean : numpy.ndarray, shape (chains, draws, n*, Q)
        Mean of ``p(z* | x*, X, Z_g, sigma_g)`` (eq. 7).
    latent_variance : numpy.ndarray, shape (chains, draws, n*)
        Its variance ``s*`` (the same for every latent dimension).
    latent_sample : numpy.ndarray, shape (chains, draws, n*, Q)
        The ``z*`` drawn from it, each new point independently (its marginal, as eq. 8 needs).
    mean : numpy.ndarray, shape (chains, draws, n*, D)
        ``K_f*^T (K_f + s^2 I)^-1 Y`` at ``z*``.
    variance : numpy.ndarray, shape (chains, draws, n*)
        ``k_f(z*, z*) - K_f*^T (K_f + s^2 I)^-1 K_f* + s^2``, shared by the outputs.
    sample : numpy.ndarray, shape (chains, draws, n*, D)
        One ``y*`` from ``N(mean, variance)``.
    """

    latent_mean: np.ndarray
    latent_variance: np.ndarray
    latent_sample: np.ndarray
    mean: np.ndarray
    variance: np.ndarray
    sample: np.ndarray

    @property
    def mixture_mean(self) -> np.ndarray:
        """Mean of the mixture (8) over the draws, shape ``(n*, D)``."""
        return self.mean.mean(axis=(0, 1))

    @property
    def mixture_variance(self) -> np.ndarray:
        """Variance of the mixture (8) over the draws, shape ``(n*, D)``."""
        second = (self.variance[..., None] + self.mean**2).mean(axis=(0, 1))
        return second - self.mixture_mean**2


def predict(problem: GPLVMProblem, theta_draws, Z_draws, new_inputs, rng_key) -> DrawPredictions:
    """Eqs. (6)-(8): ``z*`` and ``y*`` at new inputs of the latent GP for every draw ``(theta_g, Z_g)``.

    Parameters
    ----------
    problem : GPLVMProblem
        A GPLVM whose latent inputs have a GP prior; outputs fully observed.
    theta_draws : array_like, shape (chains, draws, P)
        Unconstrained hyperparameters.
    Z_draws : array_like, shape (chains, draws, N, Q)
        Latent inputs drawn given them.
    new_inputs : array_like or mapping
        New inputs of the latent GP (:func:`~gpdsl.inference.predict.gp_prior_latents.prior_points`).
    rng_key : jax.Array
        PRNG key (see the module docstring for its use).

    Returns
    -------
    DrawPredictions
    """
    require_observed(problem, "predictions of a supervised GPLVM")
    points = jnp.asarray(prior_points(problem, new_inputs))
    T = jnp.asarray(problem.latent_prior_inputs())
    Y = jnp.asarray(problem.Y)
    n_new, Q = points.shape[0], problem.latent_dim

    def one(theta, Z, key):
        latent_key, output_key = jax.random.split(key)
        kernel_z = problem.latent_prior_kernel(theta)
        z_mean, z_variance = exact_moments(exact_posterior(kernel_z, T, Z, 0.0), kernel_z, T, points, False)
        z_variance = jnp.maximum(z_variance, 0.0)
        z = z_mean + jnp.sqrt(z_variance)[:, None] * jax.random.normal(latent_key, (n_new, Q))
        kernel_f, noise = problem.kernel(theta), problem.noise_variance(theta)
        y_mean, y_variance = exact_moments(exact_posterior(kernel_f, Z, Y, noise), kernel_f, Z, z)
        y = y_mean + jnp.sqrt(y_variance)[:, None] * jax.random.normal(output_key, y_mean.shape)
        return z_mean, z_variance, z, y_mean, y_variance, y

    return DrawPredictions(*_over_draws(one, problem, theta_draws, Z_draws, rng_key))


def log_predictive_density(prediction: DrawPredictions, Y_test, per_output: bool = False) -> np.ndarray:
    """Eq. (8): ``log (1/G) sum_g p(y* | z*_g, Z_g, Y, theta_g)`` at each test point, by log-sum-exp over all draws.

    Parameters
    ----------
    prediction : DrawPredictions
        From :func:`predict` at the test inputs.
    Y_test : array_like, shape (n*, D)
        Test outputs; NaN entries are left out (marginalised).
    per_output : bool
        If True, the mixture density of each output on its own, shape ``(n*, D)``; otherwise that of the
        whole row (the outputs are independent given a draw), shape ``(n*,)``.

    Returns
    -------
    numpy.ndarray
    """
    Y_test = np.asarray(Y_test, dtype=float)
    if Y_test.shape != prediction.mean.shape[2:]:
        raise DataError(f"test outputs must have shape {prediction.mean.shape[2:]}; got {Y_test.shape}")
    variance = prediction.variance[..., None]
    terms = -0.5 * (np.log(2 * math.pi * variance) + (Y_test - prediction.mean) ** 2 / variance)
    terms = np.where(np.isnan(Y_test), 0.0, terms)
    if not per_output:
        terms = terms.sum(axis=-1)
    draws = terms.shape[0] * terms.shape[1]
    return np.asarray(logsumexp(jnp.asarray(terms), axis=(0, 1))) - math.log(draws)


def predictive_mae(prediction: DrawPredictions, f_test, noise_sd: float, rng_key) -> np.ndarray:
    """Eq. (12): per output, the mean ``|y* - y~*|`` of a noisy truth and one predictive sample per test point.

    The truth is ``y* = f + noise_sd * e``; ``y~*`` at each test point is the sample of a draw chosen at
    random (independently per point), i.e. ``z*`` from eq. (7), then ``y*`` from the output predictive.

    Parameters
    ----------
    prediction : DrawPredictions
        From :func:`predict` at the test inputs.
    f_test : array_like, shape (n*, D)
        Noise-free truth.
    noise_sd : float
        Standard deviation of the noise added to it (0.05 in Sec. 5.1).
    rng_key : jax.Array
        PRNG key for the choice of draws and the noise.

    Returns
    -------
    numpy.ndarray, shape (D,)
    """
    f_test = np.asarray(f_test, dtype=float)
    samples = prediction.sample.reshape(-1, *prediction.sample.shape[2:])
    if f_test.shape != samples.shape[1:]:
        raise DataError(f"the noise-free truth must have shape {samples.shape[1:]}; got {f_test.shape}")
    pick_key, noise_key = jax.random.split(rng_key)
    picks = np.asarray(jax.random.randint(pick_key, (f_test.shape[0],), 0, samples.shape[0]))
    truth = f_test + noise_sd * np.asarray(jax.random.normal(noise_key, f_test.shape))
    return np.mean(np.abs(truth - samples[picks, np.arange(f_test.shape[0])]), axis=0)


def function_posterior(problem: GPLVMProblem, theta, Z):
    """``p(F | Y, Z, theta)``: each output column ``N(m_d, S)`` with ``m = K_f C^-1 Y``, ``S = K_f - K_f C^-1 K_f``.

    ``C = K_f + s^2 I`` (with the jitter of the collapsed likelihood). Traceable.

    Returns
    -------
    mean : jax.Array, shape (N, D)
    covariance : jax.Array, shape (N, N)
    noise_variance : jax.Array
    """
    kernel, noise = problem.kernel(theta), problem.noise_variance(theta)
    K = kernel(Z)
    posterior = exact_posterior(kernel, Z, jnp.asarray(problem.Y), noise)
    W = solve_triangular(posterior.chol, K, lower=True)
    covariance = K - W.T @ W
    return K @ posterior.alpha, 0.5 * (covariance + covariance.T), noise


def sample_latent_functions(problem: GPLVMProblem, theta, Z, rng_key) -> jax.Array:
    """One draw of ``F ~ p(F | Y, Z, theta)`` (:func:`function_posterior`), shape ``(N, D)``. Traceable.

    The covariance is singular up to rounding when ``K_f`` is (smooth kernels); its factor takes the
    smallest relative jitter that works (:func:`~gpdsl.numerics.linalg.cholesky_with_jitter`).
    """
    mean, covariance, _ = function_posterior(problem, theta, Z)
    L, _ = cholesky_with_jitter(covariance)
    return mean + L @ jax.random.normal(rng_key, mean.shape)


def replicate_outputs(problem: GPLVMProblem, theta_draws, Z_draws, rng_key, *, given_outputs: bool = True) -> np.ndarray:
    """Replicates of the training outputs, one per draw, for posterior predictive checks (Figs. 9-10).

    With ``given_outputs`` (default) each column is drawn from the posterior predictive at the training
    inputs, ``y_rep ~ N(m_d, S + s^2 I)`` with ``(m, S)`` of :func:`function_posterior`: that is,
    ``F ~ p(F | Y, Z_g, theta_g)`` plus fresh noise, the joint predictive given the training inputs that
    the paper samples (Sec. 5.2: "sampled from the joint predictive posterior distribution ... given each
    of the training inputs"; ``z*`` at a training input is ``Z_g`` up to the jitter). Without it, fresh
    data from the model at the sampled latent inputs, ``y_rep ~ N(0, K_f(Z_g) + s^2 I)``, which ignores
    ``Y`` given ``(theta_g, Z_g)``.

    Parameters
    ----------
    problem : GPLVMProblem
        The model view; outputs fully observed.
    theta_draws : array_like, shape (chains, draws, P)
    Z_draws : array_like, shape (chains, draws, N, Q)
    rng_key : jax.Array
    given_outputs : bool
        See above.

    Returns
    -------
    numpy.ndarray, shape (chains, draws, N, D)
    """
    require_observed(problem, "replicates of a supervised GPLVM's outputs")
    shape = problem.Y.shape

    def one(theta, Z, key):
        if given_outputs:
            mean, covariance, noise = function_posterior(problem, theta, Z)
        else:
            mean, covariance, noise = jnp.zeros(shape), problem.kernel(theta)(Z), problem.noise_variance(theta)
        L = cholesky(covariance + (noise + GP_JITTER) * jnp.eye(shape[0]))
        return (mean + L @ jax.random.normal(key, shape),)

    return _over_draws(one, problem, theta_draws, Z_draws, rng_key)[0]


def log_likelihood(problem: GPLVMProblem, theta_draws, Z_draws, rng_key, *, per_output: bool = False) -> np.ndarray:
    """Pointwise log-likelihood draws for PSIS-LOO: ``sum_d log N(y_nd | f_nd, s^2)`` with ``F ~ p(F | Y, Z_g, theta_g)``.

    As for any latent GP, the likelihood of a point is conditional on the latent function values, here
    one draw of ``F`` per ``(theta_g, Z_g)`` (:func:`sample_latent_functions` with the draw's key), so that
    the draws ``(theta, Z, F)`` are from the joint posterior. Row ``n`` of ``Y`` is one observation, or with
    ``per_output`` each entry ``y_nd`` (the terms are independent given ``F``).

    Parameters
    ----------
    problem : GPLVMProblem
        The model view; outputs fully observed.
    theta_draws : array_like, shape (chains, draws, P)
    Z_draws : array_like, shape (chains, draws, N, Q)
    rng_key : jax.Array
    per_output : bool
        One value per entry of ``Y`` instead of per row.

    Returns
    -------
    numpy.ndarray, shape (chains, draws, N) or (chains, draws, N, D)
    """
    require_observed(problem, "the pointwise log-likelihood of a supervised GPLVM")
    Y = jnp.asarray(problem.Y)

    def one(theta, Z, key):
        F = sample_latent_functions(problem, theta, Z, key)
        noise = problem.noise_variance(theta)
        entries = -0.5 * (jnp.log(2 * math.pi * noise) + (Y - F) ** 2 / noise)
        return (entries if per_output else jnp.sum(entries, axis=1),)

    return _over_draws(one, problem, theta_draws, Z_draws, rng_key)[0]


def _over_draws(one, problem: GPLVMProblem, theta_draws, Z_draws, rng_key) -> tuple[np.ndarray, ...]:
    """``one(theta, Z, key) -> tuple of arrays`` over all draws, each ``(chains, draws, ...)``: compiled, vmapped over
    batches of :data:`BATCH` draws, run :data:`CHUNK` draws at a time, each chunk moving the bar of the
    :func:`~gpdsl.inference.progress.stage` it runs in (a chunk holds whole batches, so the batches are those of one
    run over all draws)."""
    theta_draws = jnp.asarray(theta_draws, dtype=jnp.float64)
    Z_draws = jnp.asarray(Z_draws, dtype=jnp.float64)
    chains, draws = theta_draws.shape[:2]
    expected = (chains, draws, problem.num_points, problem.latent_dim)
    if theta_draws.ndim != 3 or theta_draws.shape[2] != problem.theta_dim or Z_draws.shape != expected:
        raise DataError(f"draws must have shapes (chains, draws, {problem.theta_dim}) and {expected}; got "
                        f"{theta_draws.shape} and {Z_draws.shape}")
    flat = (theta_draws.reshape(chains * draws, -1), Z_draws.reshape(chains * draws, *expected[2:]),
            jax.random.split(rng_key, chains * draws))
    program = jax.jit(lambda xs: lax.map(lambda x: one(*x), xs, batch_size=BATCH))
    parts = []
    for start in range(0, max(chains * draws, 1), CHUNK):
        parts.append([np.asarray(o) for o in program(tuple(x[start:start + CHUNK] for x in flat))])
        progress.advance(len(parts[-1][0]))
    return tuple(np.concatenate(o).reshape(chains, draws, *o[0].shape[1:]) for o in zip(*parts))
