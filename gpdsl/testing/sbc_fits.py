"""The ``fit`` of :func:`~gpdsl.testing.sbc.run_sbc` for engines that :class:`~gpdsl.testing.sbc.EngineFit` does not
batch: any method run once per replicate (:class:`RunFit`), and ``pm-gplvm`` with every replicate in one compiled
loop (:class:`GPLVMFit`)."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from gpdsl.ir.nodes import Model
from gpdsl.testing.sbc import (
    EngineFit,
    batched_chains,
    require_same_inputs,
    theta_draws,
)


@dataclass
class RunFit:
    """A method run through :func:`gpdsl.api.run` on each replicate (compiled, or for NUTS started, every time).

    Attributes
    ----------
    method : str
        The method's name.
    settings : dataclass, optional
        Its settings (the registry's defaults when None).
    progress : bool
        Show the run's progress.
    seconds : list of float
        Set by each call: the wall time of each run.
    """

    method: str
    settings: Any = None
    progress: bool = False
    seconds: list = field(default_factory=list)

    def __call__(self, model: Model, data: dict, seed: int):
        from gpdsl.api import run

        started = time.perf_counter()
        results = run(model, data, self.method, self.settings, seed=seed, progress=self.progress)
        self.seconds.append(time.perf_counter() - started)
        return results


@dataclass
class _LaplaceStart:
    """What the Laplace proposal of ``pm-gplvm`` reads of its variational fit: the latent means its first mode search
    starts from, and ``settings.seed``, the seed of the fixed normals behind the other starts."""

    mean: Any
    seed: int

    @property
    def settings(self):
        return self


@dataclass
class GPLVMFit(EngineFit):
    """``pm-gplvm`` as the ``fit`` of :func:`~gpdsl.testing.sbc.run_sbc`, compiled once for all replicates.

    Called on one data set it runs the method through :func:`gpdsl.api.run`. :meth:`fit_many` runs the same chains
    (blocked pseudo-marginal MH, the Laplace importance proposal and its estimate,
    :func:`~gpdsl.inference.methods.gplvm_chains.make_log_terms`) with the outputs carried in each chain's state,
    so the engine compiles once. Two things differ from a run, neither of which changes the chain's target: each
    chain starts from a draw of the hyperparameters' prior instead of the variational estimate, and the first
    mode search of the Laplace proposal starts from the PCA means of the replicate's outputs instead of the
    variational means (no variational fit is made).

    Attributes are :class:`~gpdsl.testing.sbc.EngineFit`'s, with ``method`` ``"pm-gplvm"``; the settings'
    ``proposal`` must be ``"laplace"``, and their ``latent_sweeps`` are replaced by 0.
    """

    method: str = "pm-gplvm"

    def _settings(self):
        settings = super()._settings()
        if settings.proposal != "laplace":
            raise ValueError("GPLVMFit runs the Laplace proposal; the variational one needs a variational fit per "
                             "replicate")
        return dataclasses.replace(settings, latent_sweeps=0)

    def fit_many(self, model: Model, datasets: Sequence[dict], seed: int) -> list[dict[str, np.ndarray]]:
        """Posterior draws of the hyperparameters of every data set, by name, each ``(chain, draw, ...)``."""
        from gpdsl.inference.families.gplvm import gplvm_view
        from gpdsl.inference.mcmc.blocked_metropolis import make_blocked_metropolis
        from gpdsl.inference.methods.gplvm_chains import block_indices, make_log_terms
        from gpdsl.inference.methods.latent_chains import prior_initial_thetas
        from gpdsl.inference.methods.pm_gplvm import PM_GPLVM_FAMILIES
        from gpdsl.inference.variational.latent_q import initial_means
        from gpdsl.ir.families import classify

        settings = self._settings()
        _, facts = classify(model).require(PM_GPLVM_FAMILIES, "pm-gplvm")
        problem = gplvm_view(model, datasets[0], facts)
        require_same_inputs(datasets, problem.output)
        blocks, _ = block_indices(problem, settings.blocks)
        rng = np.random.default_rng(seed)
        Ys = np.stack([np.asarray(data[problem.output], dtype=float) for data in datasets])
        starts = np.stack([initial_means(Y, problem.latent_dim, rng) for Y in Ys])
        key_init, key_run = jax.random.split(jax.random.PRNGKey(seed))
        thetas = prior_initial_thetas(problem, key_init, len(datasets) * self.chains)

        def engine(inputs):
            Y, start = inputs
            view = _with_outputs(problem, Y)
            log_terms, screen = make_log_terms(view, settings, _LaplaceStart(start, seed))
            init, step = make_blocked_metropolis(
                log_terms, blocks, initial_covariance=settings.initial_covariance, g0=settings.g0,
                epsilon=settings.adapt_epsilon, adapt_after_warmup=settings.adapt_after_warmup,
                report=lambda estimate: estimate._replace(q=None, noise=None), screen=screen)
            return init, step, lambda state: state.position

        theta, self.timings = batched_chains(engine, (jnp.asarray(Ys), jnp.asarray(starts)), thetas, key_run,
                                             self.chains, self.warmup, self.draws, self.vectorise, self.progress)
        return theta_draws(problem, theta, len(datasets), self.chains)


def _with_outputs(problem, Y):
    """A copy of a :class:`~gpdsl.inference.families.gplvm.GPLVMProblem` with other (traced, fully observed) outputs."""
    from gpdsl.inference.families.gplvm import GPLVMProblem

    @dataclass
    class Observed(GPLVMProblem):
        @property
        def observed(self) -> np.ndarray:
            return np.ones(self.Y.shape, dtype=bool)

    values = {f.name: getattr(problem, f.name) for f in dataclasses.fields(problem)}
    jax_model = dataclasses.replace(problem.jax_model, data={**problem.jax_model.data, problem.output: Y})
    return Observed(**{**values, "Y": Y, "jax_model": jax_model})
