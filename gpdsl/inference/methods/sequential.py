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
from pathlib import Path

import numpy as np

from gpdsl.errors import GpdslError, MethodError
from gpdsl.inference.progress import counted, say, stage
from gpdsl.settings.sampling import SequentialSettings
from gpdsl.storage.checkpoint import elapsed_before

CHECKPOINT_VERSION = 1


def run_sequential(model, data, settings: SequentialSettings, context):
    """Run ``sequential``; returns a :class:`~gpdsl.results.method_output.MethodOutput` (module docstring)."""
    import jax

    from gpdsl.inference.families.sequential import sequential_view
    from gpdsl.inference.mcmc.z_space import split, z_prior

    if context.chain_groups is not None:
        raise MethodError("sequential runs one chain threaded through its states; it has no chain groups")
    view = sequential_view(model, data, context.facts, allow_external=context.allow_external)
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
                thetas, fs = step_chain(view, t, settings, step_key, prior, context.progress)
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
            kept = f"steps 1..{t - 1} are {'in the checkpoint' if context.checkpoint else 'lost'}" if t > 1 else \
                "no step had finished"
            raise MethodError(f"step {t} of {view.steps} failed ({cause}); {kept}",
                              hint=None if context.checkpoint or t == 1 else "run with --checkpoint to keep finished "
                                                                             "steps") from error
        record.add(thetas, fs, time.perf_counter() - started)
        record.save(context)
        say(f"sequential: step {t}/{view.steps} in {record.seconds[-1]:.1f} s", enabled=context.progress)
    output = _output(view, record, settings)
    if context.new_inputs is not None:
        from gpdsl.inference.predict.sequential import predict_steps

        with stage(f"predictions at {counted(new_inputs.shape[1], 'new input')} of every step", total=view.steps,
                   unit="step", enabled=context.progress):
            draws = predict_steps(view, settings.window, record.thetas, record.fs, new_inputs,
                                  jax.random.fold_in(key, 0))
        output.predictions = {f"{view.name}_new": draws[None]}
        output.dims[f"{view.name}_new"] = [view.time_size, f"{view.node.statement.inputs.index_shape[1]}_new"]
    return output


def step_chain(view, steps, settings, key, prior, progress=False, on_segment=None):
    """The chain of step 1 on ``f_1:steps``: what ``sequential`` runs at step 1, and at every step of the full
    baseline (``scheme="full"``).

    ``settings.initial_repeat_f`` ESS updates of ``f_1:steps``, SDSS of ``kappa`` and ESS of ``alpha`` in z-space
    per iteration; ``settings.burn_in`` iterations dropped, then every ``settings.thin``-th of
    ``settings.thin * settings.states`` kept. Public for benchmarks that time a step (``benchmarks/sequential.py``).

    Parameters
    ----------
    view : SequentialGP
        The model's sequential view (:func:`gpdsl.inference.families.sequential.sequential_view`).
    steps : int
        Run on the first ``steps`` steps (from 1).
    settings : SequentialSettings
        The method's settings.
    key : jax.Array
        PRNG key of the chain.
    prior : ZPrior
        The hyperparameters' z-space prior (:func:`gpdsl.inference.mcmc.z_space.z_prior`).
    progress : bool
        Show progress.
    on_segment : callable, optional
        ``on_segment(iteration, phase)``, called after each compiled segment of the chain.

    Returns
    -------
    thetas : numpy.ndarray, shape (states, d)
        The kept unconstrained hyperparameters.
    fs : numpy.ndarray, shape (states, n)
        The kept ``f_steps``.
    """
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
        self.earlier, self.started = 0.0, time.perf_counter()

    def add(self, thetas, fs, seconds):
        self.thetas.append(np.asarray(thetas))
        self.fs.append(np.asarray(fs))
        self.seconds.append(float(seconds))

    def save(self, context):
        if context.checkpoint is None:
            return
        from gpdsl.storage.atomic import atomic_target

        meta = {"version": CHECKPOINT_VERSION, "steps_done": len(self.thetas), "seconds": self.seconds,
                "elapsed": self.earlier + time.perf_counter() - self.started, **({"identity": context.checkpoint_identity} if context.checkpoint_identity else {})}
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
        record.earlier = elapsed_before(context.checkpoint)
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
