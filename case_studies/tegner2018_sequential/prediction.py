"""The prediction experiment of Tegner et al. (2018, Fig. 2): predictive log likelihood of held-out data at t = T.

The inputs of step T are split into training points (first input coordinate at most 0.5) and test points.
The sequential scheme runs steps 1..T-1 on all their data, then step T on its training points only (one pass
of Alg. 1 over the M states of S_{T-1}, the step functions below standing in for the model's); the baseline
("initial" scheme, no history) is the step-1 chain on step T's training points alone. For each state i,
``ll*(i) = log N(y*; m*(i) + mu_f(i), K*(i) + sigma_y(i)^2 I)`` with ``m*, K*`` the GP conditional of f at the
test points given the state's f (and, for the sequential scheme, its f_{T-1}: spec decision 15); the figure
is the running mean of ``ll*`` over i.

The runs go through :func:`gpdsl.run`; the held-out step has no public equivalent (it replaces the model's step
functions by :class:`HeldOutStep`), so it uses the engine's public functions directly: the sequential view
(:func:`gpdsl.inference.families.sequential.sequential_view`), one pass of Alg. 1
(:func:`gpdsl.inference.mcmc.sequential.make_step_pass`, ``moment_match``) and the z-space blocks
(:func:`gpdsl.inference.mcmc.z_space.split`), with gpdsl's Cholesky and jitter.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

import gpdsl
from gpdsl.numerics.linalg import cholesky, solve_triangular
from gpdsl.numerics import GP_JITTER


class HeldOutStep:
    """The conditional prior and likelihood of step T's training points given f_{T-1} (``make_step_pass``'s
    interface), and the predictive density of the test points; the kernel is the model's (separable SE)."""

    def __init__(self, view, t_previous, X_previous, t_now, X_train, y_train, X_test, y_test):
        self.view = view
        self.previous = np.column_stack([np.full(len(X_previous), t_previous), X_previous])
        self.train = np.column_stack([np.full(len(X_train), t_now), X_train])
        self.test = np.column_stack([np.full(len(X_test), t_now), X_test])
        self.y_train, self.y_test = jnp.asarray(y_train), jnp.asarray(y_test)

    def kernel(self, theta, A, B):
        values, _ = self.view.constrain(theta)
        kappa = values["kappa"]
        scales = jnp.stack([kappa[2], kappa[0], kappa[1]])
        distance = (((A[:, None, :] - B[None]) / scales) ** 2).sum(-1)
        return kappa[3] ** 2 * jnp.exp(-0.5 * distance)

    def _conditional(self, theta, given_points, given_values, new_points):
        K = self.kernel(theta, given_points, given_points) + GP_JITTER * jnp.eye(len(given_points))
        chol = cholesky(K)
        a = solve_triangular(chol, self.kernel(theta, given_points, new_points), lower=True)
        mean = a.T @ solve_triangular(chol, given_values, lower=True)
        cov = self.kernel(theta, new_points, new_points) - a.T @ a + GP_JITTER * jnp.eye(len(new_points))
        return mean, cov

    def prior(self, theta, data, previous):
        mean, cov = self._conditional(theta, jnp.asarray(self.previous), previous, jnp.asarray(self.train))
        return mean, cholesky(cov)

    def log_likelihood(self, f, theta, data, previous):
        values, _ = self.view.constrain(theta)
        mu, sigma = values["alpha"][0], values["alpha"][1]
        return jnp.sum(jax.scipy.stats.norm.logpdf(self.y_train, f + mu, sigma))

    def predictive(self, theta, f_given, with_previous):
        """``log N(y*; m* + mu_f, K* + sigma_y^2 I)`` given the training f (and f_{T-1} first, if ``with_previous``)."""
        points = np.concatenate([self.previous, self.train]) if with_previous else self.train
        mean, cov = self._conditional(theta, jnp.asarray(points), f_given, jnp.asarray(self.test))
        values, _ = self.view.constrain(theta)
        cov = cov + values["alpha"][1] ** 2 * jnp.eye(len(self.test))
        return jax.scipy.stats.multivariate_normal.logpdf(self.y_test, mean + values["alpha"][0], cov)


def prediction_experiment(model, data, settings, seed, device="auto"):
    """Running means of ``ll*`` for the sequential scheme and the no-history baseline (arrays of length M); the
    runs on ``device`` (the held-out step runs on JAX's default device: ``run.py`` makes it the run's)."""
    from gpdsl.inference.families.sequential import sequential_view
    from gpdsl.inference.mcmc.sequential import make_step_pass, moment_match
    from gpdsl.inference.mcmc.z_space import split
    from gpdsl.ir.families import SEQUENTIAL_LATENT_GP, classify

    steps = data["T"]
    last = steps - 1
    train = data["X"][last][:, 0] <= 0.5
    earlier = {**data, "T": steps - 1, "t": data["t"][:last], "X": data["X"][:last], "y": data["y"][:last]}
    with tempfile.TemporaryDirectory() as directory:
        checkpoint = Path(directory) / "steps.npz"
        gpdsl.run(model, earlier, "sequential", settings, seed=seed, checkpoint=checkpoint, device=device)
        with np.load(checkpoint) as stored:
            thetas, fs = stored["thetas"][-1], stored["fs"][-1]
    checked, _ = gpdsl.check(model)
    view = sequential_view(checked, data, classify(checked).facts[SEQUENTIAL_LATENT_GP])
    step = HeldOutStep(view, data["t"][last - 1], data["X"][last - 1], data["t"][last], data["X"][last][train],
                       data["y"][last][train], data["X"][last][~train], data["y"][last][~train])
    run = make_step_pass(step, split(view), settings.repeat_f, settings.final_repeat_f)
    new_thetas, new_fs, _ = run(jax.random.PRNGKey(seed), jnp.asarray(thetas[-1:]), jnp.asarray(fs), {},
                                moment_match(thetas))
    sequential = jax.jit(jax.vmap(lambda th, fp, f: step.predictive(th, jnp.concatenate([fp, f]), True)))(
        new_thetas, jnp.asarray(fs), new_fs)
    alone = {"T": 1, "N": int(train.sum()), "t": data["t"][last:], "X": data["X"][last][train][None],
             "y": data["y"][last][train][None]}
    baseline_fit = gpdsl.run(model, alone, "sequential", settings, seed=seed, device=device)
    base_thetas = jax.vmap(lambda v: view.unconstrain_theta(v))(
        {name: jnp.asarray(baseline_fit.posterior[name].values[0, :, 0]) for name in view.theta_names})
    base_fs = jnp.asarray(baseline_fit.posterior["f"].values[0, :, 0])
    baseline = jax.jit(jax.vmap(lambda th, f: step.predictive(th, f, False)))(base_thetas, base_fs)
    running = lambda values: np.cumsum(np.asarray(values)) / np.arange(1, len(values) + 1)  # noqa: E731
    return {"train_points": int(train.sum()), "test_points": int((~train).sum()),
            "sequential_running_mean": running(sequential).tolist(), "baseline_running_mean": running(baseline).tolist(),
            "sequential_final": float(np.mean(sequential)), "baseline_final": float(np.mean(baseline))}
