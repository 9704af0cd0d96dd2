"""The ``sequential`` method: sequential sampling of a latent GP over time (Tegner et al. 2018, Alg. 1).

Step 1 is the exact posterior of ``f_1`` and the hyperparameters under their priors: one long chain
(``initial_repeat_f`` ESS updates of ``f_1``, SDSS of ``kappa`` and ESS of ``alpha`` in z-space per
iteration; ``burn_in`` iterations dropped, then every ``thin``-th of ``thin * states`` kept), giving
the M ``states`` of ``S_1``. Each later step moment-matches the hyperparameters of ``S_{t-1}`` in z-space
(eq. 8) and makes one pass over its M states (:mod:`gpdsl.inference.mcmc.sequential`), conditioning
``f_t`` on the ``window`` previous steps of the same state's trajectory (eq. 6).

``scheme="full"`` is the full-sampling baseline (eqs. 2-4): for each t the chain of step 1 is run on
``f_1:t`` and the data of steps 1..t (cost O(t^3 N^3) per evaluation), and its hyperparameters and
``f_t`` are kept.

Results: every hyperparameter gets the model's time dimension first (``kappa`` of ``vector[4]`` is stored
as ``(chain, draw, T, 4)``: its M states at each step), and ``f`` keeps its declared ``array[T] vector[N]``
shape: draw i of step t is the i-th state of ``S_t`` (one chain). A checkpoint (``--checkpoint``) is
written after each finished step; the same command run again resumes at the next step, with the same
draws as an uninterrupted run.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from gpdsl.errors import GpdslError, MethodError
from gpdsl.settings import option, require_choice, require_number, require_positive_int

SCHEMES = ("sequential", "full")
KAPPA_UPDATES = ("fixed_nu", "sdss")
SURROGATES = ("fixed", "curvature")
CHECKPOINT_VERSION = 1


@dataclass(frozen=True)
class SequentialSettings:
    """Settings of ``sequential``.

    Attributes
    ----------
    states : int
        M, the states kept at every step.
    window : int
        tau, the earlier steps ``f_t``'s conditional prior is given (eq. 6).
    burn_in, thin : int
        The chain of step 1 (and of every step of the full scheme): ``burn_in + thin * states`` iterations,
        the first ``burn_in`` dropped, then every ``thin``-th kept.
    initial_repeat_f : int
        ESS updates of ``f`` per iteration of that chain.
    repeat_f : int
        ESS updates of ``f_t`` before Update 2 and again before Update 3 (steps t >= 2).
    final_repeat_f : int
        ESS updates of ``f_t`` after Update 3.
    surrogate_variance : float
        S of SDSS in the chain of step 1 (the noise variance for a Gaussian likelihood).
    surrogate : {"fixed", "curvature"}
        ``fixed``: S is ``surrogate_variance`` everywhere. ``curvature`` (spec decision 14, for a non-Gaussian
        likelihood): S's diagonal is the inverse curvature of ``-log p(y | f)``
        (:mod:`gpdsl.inference.mcmc.surrogate_curvature`), fixed for a whole chain or pass: for the chain of
        step 1 (and of every step of the full scheme) at ``f`` = its prior mean and the hyperparameters' prior
        mean; for a step t >= 2 with ``step_kappa_update = "sdss"`` at the mean of step ``t - 1``'s states and
        of their moment-matched hyperparameters.
    scheme : {"sequential", "full"}
        Alg. 1, or the full-sampling baseline.
    step_kappa_update : {"fixed_nu", "sdss"}
        Update 2 at steps t >= 2: fixed-nu ESS (Alg. 1) or SDSS (S as ``surrogate`` says), in z-space.
    pass_chains : int
        Chains threaded through the states of a step t >= 2, each through ``states / pass_chains`` consecutive
        ones, run in parallel over the host devices; chain g starts at the hyperparameters of state
        ``(g + 1) states / pass_chains`` of the step before. 1 (the default) is the paper's single chain.
    """

    states: int = option(1000, "M: the states kept at each step")
    window: int = option(1, "tau: the earlier steps f_t is conditioned on")
    burn_in: int = option(1000, "iterations of the step-1 chain dropped before thinning")
    thin: int = option(5, "keep every thin-th iteration of the step-1 chain")
    initial_repeat_f: int = option(3, "ESS updates of f per iteration of the step-1 chain")
    repeat_f: int = option(5, "ESS updates of f_t before the kappa update and again before the alpha update")
    final_repeat_f: int = option(0, "ESS updates of f_t after the alpha update")
    surrogate_variance: float = option(1.0, "SURR: the surrogate data's noise variance S")
    surrogate: str = option("fixed", "S of SDSS: fixed (the surrogate variance) or curvature (the inverse "
                                     "curvature of -log p(y | f), per element)", choices=SURROGATES)
    scheme: str = option("sequential", "sequential (Alg. 1) or full (Gibbs on f_1:t at every t)", choices=SCHEMES)
    step_kappa_update: str = option("fixed_nu", "the kappa update at steps t >= 2: fixed-nu ESS or SDSS",
                                    choices=KAPPA_UPDATES)
    pass_chains: int = option(1, "chains threaded in parallel through the states of each step t >= 2, each "
                                 "through states / pass-chains of them (1: the paper's single chain)")

    def __post_init__(self):
        require_positive_int("states", self.states)
        if self.states < 2:
            raise MethodError("states must be at least 2 (step t moment-matches the states of step t - 1)")
        require_positive_int("window", self.window)
        require_positive_int("burn_in", self.burn_in, allow_zero=True)
        require_positive_int("thin", self.thin)
        require_positive_int("initial_repeat_f", self.initial_repeat_f)
        require_positive_int("repeat_f", self.repeat_f)
        require_positive_int("final_repeat_f", self.final_repeat_f, allow_zero=True)
        require_number("surrogate_variance", self.surrogate_variance, 0, open_low=True)
        require_choice("surrogate", self.surrogate, SURROGATES)
        require_choice("scheme", self.scheme, SCHEMES)
        require_choice("step kappa update", self.step_kappa_update, KAPPA_UPDATES)
        require_positive_int("pass_chains", self.pass_chains)
        if self.states % self.pass_chains:
            raise MethodError(f"pass_chains = {self.pass_chains} does not divide states = {self.states}",
                              hint="choose a number of pass chains that divides the states")

    @property
    def chains(self) -> int:
        """One chain, threaded through the states of every step."""
        return 1


def run_sequential(model, data, settings: SequentialSettings, context):
    """Run ``sequential``; returns a :class:`~gpdsl.results.method_output.MethodOutput` (module docstring)."""
    import jax

    from gpdsl.inference.families.sequential import sequential_view
    from gpdsl.inference.mcmc.z_space import split, z_prior

    if context.chain_groups is not None:
        raise MethodError("sequential runs one chain threaded through its states; it has no chain groups")
    view = sequential_view(model, data, context.facts, "sequential", context.allow_external)
    if context.new_inputs is not None:
        from gpdsl.inference.predict.sequential import check_step_inputs

        if settings.scheme == "full":
            raise MethodError("sequential --scheme full keeps only f_t of each step's chain, and predictions need the "
                              "f of the window's earlier steps from the same state", hint="predict with --scheme "
                              "sequential")
        new_inputs = check_step_inputs(view, context.new_inputs)
    prior = z_prior(view, "sequential")
    blocks = split(view)
    key = jax.random.PRNGKey(context.seed)
    record = _Record.resume(context, view.steps)
    passes = {}
    for t in range(len(record.thetas) + 1, view.steps + 1):
        started = time.perf_counter()
        step_key = jax.random.fold_in(key, t)
        try:
            if t == 1 or settings.scheme == "full":
                thetas, fs = _chain(view, t, settings, step_key, prior, context.progress)
            else:
                window = min(settings.window, t - 1)
                if window not in passes:
                    from gpdsl.inference.mcmc.sequential import make_step_pass

                    passes[window] = make_step_pass(view.functions(window), blocks, settings.repeat_f,
                                                    settings.final_repeat_f, settings.step_kappa_update,
                                                    settings.surrogate_variance, settings.pass_chains)
                thetas, fs = _pass(passes[window], view, t, window, record, step_key, settings)
        except GpdslError as error:
            error.message = f"step {t} of {view.steps}: {error.message}"
            raise
        except Exception as error:  # noqa: BLE001 - a failure inside the step (e.g. external code), named
            from gpdsl.externals import pending_failure

            failure = pending_failure()
            cause = failure.message if failure is not None else f"{type(error).__name__}: {error}"
            raise MethodError(f"step {t} of {view.steps} failed ({cause}); steps "
                              f"1..{t - 1} are {'in the checkpoint' if context.checkpoint else 'lost'}",
                              hint=None if context.checkpoint else "run with --checkpoint to keep finished steps") \
                from error
        record.add(thetas, fs, time.perf_counter() - started)
        record.save(context)
        if context.progress:
            import sys

            print(f"sequential: step {t}/{view.steps} in {record.seconds[-1]:.1f} s", file=sys.stderr)
    output = _output(view, record, settings)
    if context.new_inputs is not None:
        from gpdsl.inference.predict.sequential import predict_steps

        draws = predict_steps(view, settings.window, record.thetas, record.fs, new_inputs, jax.random.fold_in(key, 0))
        output.predictions = {f"{view.name}_new": draws[None]}
        output.dims[f"{view.name}_new"] = [view.time_size, f"{view.node.statement.inputs.index_shape[1]}_new"]
    return output


def _chain(view, steps, settings, key, prior, progress, on_segment=None):
    """The chain of step 1 on ``f_1:steps`` (SDSS for kappa): thinned hyperparameters and ``f_steps``.
    ``on_segment(iteration, phase)`` is called after each compiled segment of the chain."""
    import jax

    from gpdsl.inference.driver import run_chains
    from gpdsl.inference.mcmc.gibbs import make_gibbs

    problem = view.latent_gp(steps)
    surrogate = settings.surrogate_variance
    if settings.surrogate == "curvature":
        from gpdsl.inference.mcmc.surrogate_curvature import curvature_surrogate_variance

        surrogate = curvature_surrogate_variance(lambda f: problem.log_likelihood(f, prior.mean), np.zeros(problem.n))
    init, step = make_gibbs(problem, "sdss", repeat_f=settings.initial_repeat_f, repeat_theta=1,
                            surrogate_variance=surrogate)
    key_init, key_run = jax.random.split(key)
    states = jax.vmap(init)(key_init[None], prior.mean[None])
    n = view.n

    def extract(state):
        return {"theta": state.latent.theta, "f": state.latent.f[-n:]}

    result = run_chains(step, states, key_run, settings.burn_in, settings.thin * settings.states, extract=extract,
                        progress=progress, segment_size=max(100, settings.thin * settings.states // 10),
                        on_segment=on_segment)
    keep = slice(settings.thin - 1, None, settings.thin)
    return np.asarray(result.draws["theta"][0, keep]), np.asarray(result.draws["f"][0, keep])


def _pass(run, view, t, window, record, key, settings):
    """Step ``t`` (from 1) by ``settings.pass_chains`` passes of Alg. 1 over the states of step ``t - 1``."""
    import jax.numpy as jnp

    from gpdsl.inference.mcmc.sequential import moment_match

    chains = settings.pass_chains
    previous = np.concatenate([record.fs[s] for s in range(t - 1 - window, t - 1)], axis=1)
    q = moment_match(record.thetas[-1])
    data = {name: jnp.asarray(value) for name, value in view.window(t - 1 - window, t).items()}
    surrogate = None
    if settings.surrogate == "curvature" and settings.step_kappa_update == "sdss":
        from gpdsl.inference.mcmc.surrogate_curvature import curvature_surrogate_variance

        likelihood = view.functions(window).log_likelihood
        surrogate = jnp.asarray(curvature_surrogate_variance(
            lambda f: likelihood(f, q.mean, data, jnp.asarray(previous.mean(axis=0))), record.fs[-1].mean(axis=0)))
    starts = record.thetas[-1][len(record.thetas[-1]) // chains - 1::len(record.thetas[-1]) // chains]
    thetas, fs, _ = run(key, jnp.asarray(starts), jnp.asarray(previous), data, q, surrogate)
    thetas, fs = np.asarray(thetas), np.asarray(fs)
    if not (np.isfinite(thetas).all() and np.isfinite(fs).all()):
        raise MethodError("the states are not finite (a likelihood or kernel matrix gave NaN)")
    return thetas, fs


class _Record:
    """The finished steps: unconstrained hyperparameters ``(M, d)`` and ``f_t`` ``(M, n)`` per step, and their
    checkpoint."""

    def __init__(self, identity=None):
        self.thetas, self.fs, self.seconds = [], [], []
        self.identity = identity

    def add(self, thetas, fs, seconds):
        self.thetas.append(np.asarray(thetas))
        self.fs.append(np.asarray(fs))
        self.seconds.append(float(seconds))

    def save(self, context):
        if context.checkpoint is None:
            return
        from gpdsl.atomic import atomic_target

        meta = {"version": CHECKPOINT_VERSION, "steps_done": len(self.thetas), "seconds": self.seconds,
                **({"identity": context.checkpoint_identity} if context.checkpoint_identity else {})}
        with atomic_target(context.checkpoint, "checkpoint") as temporary:
            with open(temporary, "wb") as stream:
                np.savez(stream, meta=np.asarray(json.dumps(meta)), thetas=np.stack(self.thetas), fs=np.stack(self.fs))

    @classmethod
    def resume(cls, context, steps: int) -> "_Record":
        record = cls()
        if context.checkpoint is None or not Path(context.checkpoint).exists():
            return record
        with np.load(context.checkpoint) as stored:
            meta = json.loads(str(stored["meta"]))
            if meta.get("version") != CHECKPOINT_VERSION or "thetas" not in stored:
                raise GpdslError(f"checkpoint {context.checkpoint} was not written by the sequential method",
                                 hint="delete it to start afresh")
            for thetas, fs, seconds in zip(stored["thetas"], stored["fs"], meta["seconds"]):
                record.add(thetas, fs, seconds)
        return record


def _output(view, record, settings):
    import jax
    import jax.numpy as jnp

    from gpdsl.results.method_output import MethodOutput

    thetas = np.stack(record.thetas, axis=1)  # (M, T, d)
    states, steps = thetas.shape[:2]
    values = jax.vmap(lambda t: view.constrain(t)[0])(jnp.asarray(thetas.reshape(states * steps, -1)))
    posterior, dims = {}, {}
    for block in view.theta_blocks:
        posterior[block.name] = np.asarray(values[block.name]).reshape((1, states, steps) + block.shape)
        declared = view.model.parameters[block.name].type.dim_names(block.name)
        dims[block.name] = [view.time_size, *declared]
    posterior[view.name] = np.stack(record.fs, axis=1)[None]
    report = {"scheme": settings.scheme, "window": settings.window, "states": settings.states,
              "seconds_per_step": record.seconds}
    return MethodOutput(posterior, timings={"sampling": float(sum(record.seconds))}, report=report, dims=dims,
                        versions={"jax": jax.__version__})
