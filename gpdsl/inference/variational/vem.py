"""Variational EM for GPLVMs (Titsias & Lawrence 2010; Damianou, Titsias & Lawrence 2016).

The collapsed bound (:mod:`gpdsl.inference.variational.collapsed_bound`) with a family of ``q(X)``
(:mod:`gpdsl.inference.variational.latent_q`: its moments, its KL term against the prior and its
parameters: a factorised Gaussian against ``N(0, I)``, or the Opper-Archambeau form under a GP prior) and
``M`` inducing inputs is
maximised jointly over the parameters of ``q(X)``, the inducing inputs and the hyperparameters by
L-BFGS with JAX gradients. The Psi statistics come from :mod:`gpdsl.kernels.psi`: analytic where a
closed form is registered, else the unscented transform, Gauss-Hermite or Monte Carlo (fixed draws, so
the objective stays deterministic). Hyperparameters with a prior get MAP estimates, the others
type-II maximum likelihood ones.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from gpdsl.storage.compilation_cache import keeping_small_programs
from gpdsl.errors import MethodError, NumericalError
from gpdsl.inference.families.gplvm import GPLVMProblem
from gpdsl.settings import VEMSettings
from gpdsl.inference.optimise import lbfgs
from gpdsl.inference.progress import say
from gpdsl.inference.variational.collapsed_bound import (
    collapsed_bound,
    collapsed_bound_missing,
    missingness_groups,
    yy_factor,
)
from gpdsl.inference.variational.latent_q import (
    GaussianQParams,
    LatentQ,
    initial_means,
)
from gpdsl.inference.variational.softplus import inverse_softplus, log_softplus
from gpdsl.ir import nodes as ir
from gpdsl.kernels.psi import psi_statistics
from gpdsl.kernels.psi.hsgp import inducing_feature_statistics
from gpdsl.numerics import GP_JITTER

# XLA options for the fit's objective: LLVM at optimisation level 1 compiles it about 15% faster than the
# default level and runs it as fast (its time goes to matrix products and exponentials in library kernels).
COMPILER_OPTIONS = {"xla_backend_optimization_level": 1}


class _VariationalFields(NamedTuple):
    latent: Any
    inducing: jax.Array
    theta: jax.Array


class VariationalParams(_VariationalFields):
    """What the optimiser moves: the parameters of ``q(X)``, the inducing inputs and the hyperparameters.

    Attributes
    ----------
    latent : NamedTuple of jax.Array
        The parameters of the ``q(X)`` family (:class:`~gpdsl.inference.variational.latent_q.LatentQ`).
    inducing : jax.Array, shape (M, Q)
        Inducing inputs.
    theta : jax.Array
        Unconstrained hyperparameters.

    ``VariationalParams(mean, log_variance, inducing, theta)`` builds the parameters of the factorised
    Gaussian ``q(X)``, whose ``mean`` and ``log_variance`` are also attributes here.
    """

    __slots__ = ()

    def __new__(cls, *fields, **named):
        if len(fields) == 4:
            mean, log_variance, inducing, theta = fields
            fields = (GaussianQParams(mean, log_variance), inducing, theta)
        return super().__new__(cls, *fields, **named)

    @property
    def mean(self) -> jax.Array:
        """Means of a factorised Gaussian ``q(X)``."""
        return self.latent.mean

    @property
    def log_variance(self) -> jax.Array:
        """Log variances of a factorised Gaussian ``q(X)``."""
        return self.latent.log_variance


@dataclass
class VEMFit:
    """A fitted GPLVM.

    Attributes
    ----------
    problem : GPLVMProblem
        The model view.
    settings : VEMSettings
        The options used.
    params : VariationalParams
        The optimum.
    bound : float
        The objective at the optimum: the lower bound on ``log p(Y)`` (plus the log prior of the
        hyperparameters that have one).
    trace : numpy.ndarray
        The objective after each L-BFGS iteration (the first entry is the initial value; where the
        warm-up starts from a lowered noise variance, :func:`warmup_start`, the second can be below it).
    times : numpy.ndarray
        Seconds since the fit started at each entry of ``trace`` (compilation included).
    report : dict
        ``iterations``, ``evaluations``, ``bound``, ``gradient_norm``, ``converged``, ``message``
        (why the optimiser stopped) and ``seconds``.
    latent_q : LatentQ
        The family of ``q(X)``.
    """

    problem: GPLVMProblem
    settings: VEMSettings
    params: VariationalParams
    bound: float
    trace: np.ndarray
    report: dict
    times: np.ndarray | None = None
    latent_q: LatentQ | None = None

    def __post_init__(self):
        if self.latent_q is None:
            self.latent_q = self.problem.latent_q()

    @property
    def mean(self) -> np.ndarray:
        """Means of the latent points under ``q(X)``, shape ``(N, Q)``."""
        return np.asarray(self.latent_q.moments(self.params.latent, self.params.theta, np).mean)

    @property
    def variance(self) -> np.ndarray:
        """Variances of the latent points under ``q(X)``, shape ``(N, Q)``."""
        return np.asarray(self.latent_q.moments(self.params.latent, self.params.theta, np).variance)

    def hyperparameters(self) -> dict:
        """Constrained hyperparameters by name."""
        with keeping_small_programs():  # one cached program instead of a dozen single operations in every run
            values = jax.jit(self.problem.theta_values)(self.params.theta)
        return {k: np.asarray(v) for k, v in values.items()}


# ---- the objective ---------------------------------------------------------------------------------
def make_objective(problem: GPLVMProblem, settings: VEMSettings, latent_q: LatentQ | None = None):
    """The bound as a function of :class:`VariationalParams` (jit-able, differentiable).

    Parameters
    ----------
    problem : GPLVMProblem
        The model view.
    settings : VEMSettings
        Options (the Psi statistics and the seed of their Monte Carlo draws).
    latent_q : LatentQ, optional
        The family of ``q(X)``; by default the one that matches the model's prior (``problem.latent_q()``).

    Returns
    -------
    callable
        ``VariationalParams -> scalar``.
    """
    latent_q = latent_q or problem.latent_q()
    bound = gplvm_bound(problem, settings, latent_q.moments, latent_q.kl)

    def objective(params: VariationalParams):
        return bound(params.latent, params.inducing, params.theta)

    return objective


def gplvm_bound(problem: GPLVMProblem, settings: VEMSettings, moments, kl, hyperprior: bool = True):
    """The bound as a function of the parameters of ``q(X)``, the inducing inputs and ``theta``.

    ``moments(latent, theta)`` and ``kl(latent, theta, moments)`` are those of a :class:`LatentQ`, on its
    parameters or on the optimiser's coordinates. ``hyperprior`` adds the log prior of the
    hyperparameters (the fit's MAP objective); without it the value bounds ``log p(Y | theta)``.
    """
    method = settings.psi_method()
    key = jax.random.PRNGKey(settings.seed) if method.kind == "monte_carlo" else None
    observed = problem.observed

    def statistics(kernel, mean, variance, Z, row_weights=None):
        """The Psi statistics and ``Kuu``: of the inducing inputs ``Z``, or of the basis weights of an HSGP kernel
        (:func:`~gpdsl.kernels.psi.hsgp.inducing_feature_statistics`, ``Z`` empty)."""
        if problem.inducing_features:
            return inducing_feature_statistics(kernel, mean, variance, method, key=key, row_weights=row_weights)
        stats = psi_statistics(kernel, Z, mean, variance, method, key=key, row_weights=row_weights)
        return stats, kernel(Z) + GP_JITTER * np.eye(Z.shape[0])  # as GPy's VarDTC

    if observed.all():
        factor, output_dim = yy_factor(problem.Y)
        factor = jax.device_put(factor)  # a constant of the program (jnp.asarray would compile a copy program)

        def data_term(kernel, noise, mean, variance, Z):
            stats, Kmm = statistics(kernel, mean, variance, Z)
            return collapsed_bound(factor, stats.psi0, stats.psi1, stats.psi2, Kmm, noise, output_dim=output_dim)
    else:
        patterns, group_of_column = missingness_groups(observed)
        Y = jnp.asarray(problem.Y)
        weights = jnp.asarray(patterns, dtype=float)
        mask = jnp.asarray(observed)

        def data_term(kernel, noise, mean, variance, Z):
            stats, Kmm = statistics(kernel, mean, variance, Z, weights)
            return collapsed_bound_missing(Y, stats.psi0, stats.psi1, stats.psi2, group_of_column, Kmm, noise,
                                           mask)

    def bound(latent, Z, theta):
        q = moments(latent, theta)
        kernel = problem.kernel(theta)
        noise = problem.noise_variance(theta)
        data = data_term(kernel, noise, q.mean, q.variance, Z)
        value = data - kl(latent, theta, q)
        return value + problem.log_hyperprior(theta) if hyperprior else value

    return bound


# ---- initialisation ------------------------------------------------------------------------------
def initial_params(problem: GPLVMProblem, settings: VEMSettings, latent_q: LatentQ | None = None) -> VariationalParams:
    """The starting point of the fit.

    Initial latent means (:func:`~gpdsl.inference.variational.latent_q.initial_means`: PCA or random), a
    random subset of them as inducing inputs, heuristic hyperparameters (see :class:`VEMSettings`), and
    ``q(X)`` from :meth:`LatentQ.initial` of the family (``problem.latent_q()`` unless given).

    Raises
    ------
    MethodError
        ``num_inducing`` outside ``1..N``, or an initialisation the ``q(X)`` family refuses.
    """
    return jax.device_put(_initial_point(problem, settings, latent_q or problem.latent_q()))


def _initial_point(problem: GPLVMProblem, settings: VEMSettings, latent_q: LatentQ) -> VariationalParams:
    """:func:`initial_params` with the leaves as computed (NumPy where they are): :func:`fit_vem` takes them
    to the optimiser's coordinates in NumPy, and ``jnp.asarray`` of a NumPy array compiles a small program
    per shape in every new process."""
    mean, inducing = initial_points(problem, settings)
    with keeping_small_programs():  # compiled in every run otherwise
        theta = jax.jit(problem.unconstrain_theta)(initial_hyperparameters(problem, mean, settings))
    return VariationalParams(latent_q.initial(mean, theta, settings.init_variance), inducing, theta)


def initial_points(problem: GPLVMProblem, settings: VEMSettings) -> tuple[np.ndarray, np.ndarray]:
    """The initial latent means (PCA or random, seeded by ``settings.seed``) and a random subset of them as inducing inputs.

    Returns
    -------
    mean : numpy.ndarray, shape (N, Q)
    inducing : numpy.ndarray, shape (M, Q)

    Raises
    ------
    MethodError
        ``num_inducing`` outside ``1..N`` or an unknown ``init``.
    """
    rng = np.random.default_rng(settings.seed)
    N = problem.num_points
    if problem.inducing_features:  # the basis weights of the HSGP kernel are the inducing variables
        mean = initial_means(problem.Y, problem.latent_dim, rng, settings.init)
        return mean, np.zeros((0, problem.latent_dim))
    if settings.num_inducing < 1 or settings.num_inducing > N:
        raise MethodError(f"num_inducing must be between 1 and N = {N}; got {settings.num_inducing}")
    mean = initial_means(problem.Y, problem.latent_dim, rng, settings.init)
    return mean, mean[rng.permutation(N)[:settings.num_inducing]]


def initial_hyperparameters(problem: GPLVMProblem, mean: np.ndarray, settings: VEMSettings) -> dict:
    """Starting hyperparameters: user values, else the Sec. 5 heuristics, else 1 (inside the bounds).

    Heuristics apply to parameters used directly as a kernel argument or as the likelihood's noise:
    ``inv_ls2`` = 1 / range^2 and ``lengthscale`` = range of the initial means per dimension,
    ``variance`` = the outputs' mean column variance, noise variance = 1% of it.
    """
    model = problem.jax_model.model
    y_var = float(np.nanmean(np.nanvar(problem.Y, axis=0)))
    span = np.ptp(mean, axis=0)
    span = np.where(span > 0, span, 1.0)
    guesses: dict[str, np.ndarray] = {}
    if settings.ard_heuristic:
        for leaf in problem.node.statement.kernel.leaves():
            for arg, expr in leaf.params:
                if not (isinstance(expr, ir.Ref) and expr.name in model.parameters):
                    continue
                if arg == "inv_ls2":
                    guesses.setdefault(expr.name, 1.0 / span ** 2)
                elif arg == "lengthscale":
                    guesses.setdefault(expr.name, span)
                elif arg == "variance":
                    guesses.setdefault(expr.name, np.asarray(y_var))
    if settings.ard_heuristic and problem.latent_prior is not None:
        guesses = {**_prior_guesses(problem), **guesses}
    guesses.update(noise_guess(problem, 0.01 * y_var))
    values = {}
    for block in problem.theta_blocks:
        shape = block.shape
        if block.name in settings.initial_values:
            value = np.asarray(settings.initial_values[block.name], dtype=float)
        elif block.name in guesses:
            value = np.asarray(guesses[block.name], dtype=float)
            if shape == () and value.size > 1:
                value = np.exp(np.mean(np.log(value)))
        else:
            value = np.asarray(1.0)
        try:
            value = np.broadcast_to(value, shape).astype(float)
        except ValueError:
            raise MethodError(f"initial value of '{block.name}' has shape {np.shape(value)}; "
                              f"expected {shape}") from None
        values[block.name] = _inside(value, block.lower, block.upper)
    unknown = set(settings.initial_values) - set(problem.theta_names)
    if unknown:
        raise MethodError(f"initial values given for {', '.join(sorted(unknown))}, which "
                          f"{'is not a parameter' if len(unknown) == 1 else 'are not parameters'} "
                          f"of the model (parameters: {', '.join(problem.theta_names)})")
    return values


def _prior_guesses(problem: GPLVMProblem) -> dict:
    """Length-scales of the latent inputs' GP prior: a tenth of the range of its inputs (smooth latents)."""
    model = problem.jax_model.model
    inputs = problem.latent_prior_inputs()
    guesses = {}
    for leaf in problem.latent_prior.statement.kernel.leaves():
        active = leaf.active_columns(_component_offsets(problem))
        columns = inputs if active is None else inputs[:, active]
        span = np.ptp(columns, axis=0)
        span = np.where(span > 0, span, 1.0) / 10.0
        for arg, expr in leaf.params:
            if isinstance(expr, ir.Ref) and expr.name in model.parameters:
                if arg == "lengthscale":
                    guesses.setdefault(expr.name, span if span.size > 1 else span[0])
                elif arg == "inv_ls2":
                    guesses.setdefault(expr.name, 1.0 / span ** 2 if span.size > 1 else 1.0 / span[0] ** 2)
    return guesses


def _component_offsets(problem: GPLVMProblem) -> np.ndarray:
    return problem.jax_model.gp_input_offsets(problem.latent_prior.statement)


def noise_guess(problem, noise_variance: float) -> dict:
    """The value of the parameter behind the likelihood's ``sigma`` (by name) that gives ``noise_variance``: for
    ``sigma = s``, ``sqrt(s)``, ``inv_sqrt(s)`` or ``exp(s)`` with ``s`` a parameter; empty otherwise. ``problem`` is
    any view with ``observed_gp`` (:class:`~gpdsl.inference.families.hyperparameters.NormalObservations`)."""
    sigma = problem.observed_gp.likelihood.distribution.arg("sigma")
    params = problem.jax_model.model.parameters
    if isinstance(sigma, ir.Ref) and sigma.name in params:
        return {sigma.name: np.sqrt(noise_variance)}
    if isinstance(sigma, ir.Apply) and isinstance(sigma.args[0], ir.Ref) and sigma.args[0].name in params:
        inverse = {"sqrt": noise_variance, "inv_sqrt": 1.0 / noise_variance, "exp": 0.5 * np.log(noise_variance)}
        if sigma.function in inverse:
            return {sigma.args[0].name: inverse[sigma.function]}
    return {}


def _inside(value: np.ndarray, lower, upper) -> np.ndarray:
    if lower is not None and upper is not None:
        width = np.asarray(upper) - np.asarray(lower)
        return np.clip(value, lower + 1e-3 * width, upper - 1e-3 * width)
    if lower is not None:
        return np.maximum(value, np.asarray(lower) + 1e-6)
    if upper is not None:
        return np.minimum(value, np.asarray(upper) - 1e-6)
    return value


# ---- the fit ---------------------------------------------------------------------------------------
def fit_vem(problem: GPLVMProblem, settings: VEMSettings | None = None, *, initial: VariationalParams | None = None,
            progress: bool = False, latent_q: LatentQ | None = None) -> VEMFit:
    """Maximise the bound by L-BFGS (:mod:`gpdsl.inference.optimise.lbfgs`) and report how the optimisation ended.

    The first ``settings.warmup_iterations`` hold the noise and kernel variances (:func:`warmup_held`) at
    their initial values; then everything moves. L-BFGS runs in the coordinates of
    :func:`optimiser_space`, with one initial scale per block of :func:`scale_blocks` (``settings.scaling``),
    and is restarted from its end point when it stops short of ``gtol`` while the bound still improves.

    Parameters
    ----------
    problem : GPLVMProblem
        The model view (:func:`gpdsl.inference.families.gplvm.gplvm_problem`).
    settings : VEMSettings, optional
        Options.
    initial : VariationalParams, optional
        Starting point (default :func:`initial_params`).
    progress : bool
        Print the bound every 50 iterations on standard error.
    latent_q : LatentQ, optional
        The family of ``q(X)``; by default the one that matches the model's prior (``problem.latent_q()``).

    Raises
    ------
    NumericalError
        The bound is not finite at the starting point.
    """
    settings = settings or VEMSettings()
    latent_q = latent_q or problem.latent_q()
    started = time.perf_counter()
    initial = initial if initial is not None else _initial_point(problem, settings, latent_q)
    to_params, from_params = optimiser_space(problem, latent_q)
    raw = from_params(initial)
    pack, unpack = _flat_layout(raw)
    flat0 = pack(raw)
    # one compiled program for the whole fit: the warm-up masks its gradient, restarts reuse it
    lowered = objective_program(problem, settings, latent_q, to_params, unpack, flat0)
    with ThreadPoolExecutor(max_workers=1) as pool:
        # XLA compiles (or loads from the persistent cache) without the GIL, while this thread prepares the rest
        compiling = pool.submit(lowered.compile, COMPILER_OPTIONS)
        labels = scale_blocks(problem, raw) if settings.scaling == "blocks" else None
        held = pack(warmup_held(problem, raw)) > 0
        warm = settings.warmup_iterations and held.any()
        warm_x = pack(from_params(warmup_start(problem, initial))) if warm else None
        negative_and_gradient = compiling.result()
    value0 = float(np.asarray(negative_and_gradient(flat0))[0])
    if not np.isfinite(value0):
        _raise_not_finite(problem, initial)
    trace, times = [-value0], [time.perf_counter() - started]

    def fun(x):
        value_and_grad = np.asarray(negative_and_gradient(x))
        return value_and_grad[0], value_and_grad[1:]

    def callback(x, value):
        trace.append(-value)
        times.append(time.perf_counter() - started)
        if progress and len(trace) % 50 == 0:
            say(f"  iteration {len(trace) - 1}: bound {trace[-1]:.4f}")

    options = {"ftol": settings.ftol, "gtol": settings.gtol, "callback": callback, "scale_blocks": labels,
               "memory": settings.memory}
    x, previous, iterations, evaluations, restarts, warmup = flat0, value0, 0, 0, 0, 0
    if warm:
        x = warm_x

        def held_fun(point):
            value, gradient = fun(point)
            return value, np.where(held, 0.0, gradient)

        result = lbfgs.minimize(held_fun, x, max_iterations=min(settings.warmup_iterations, settings.max_iterations),
                                max_evaluations=settings.max_evaluations, **options)
        warmup = iterations = result.iterations
        evaluations, x, previous = result.evaluations, result.x, result.value
    while True:
        result = lbfgs.minimize(fun, x, max_iterations=settings.max_iterations - iterations,
                                max_evaluations=settings.max_evaluations - evaluations, **options)
        improvement, previous = previous - result.value, result.value
        iterations, evaluations, x = iterations + result.iterations, evaluations + result.evaluations, result.x
        stalled = result.stop in ("line_search", "reduction")
        if (not stalled or restarts >= settings.restarts or iterations >= settings.max_iterations
                or evaluations >= settings.max_evaluations
                or improvement <= settings.ftol * max(abs(result.value), 1.0)):
            break
        restarts += 1
    result = lbfgs.settled(result, improvement, settings.ftol, restarts > 0)
    params = jax.device_put(to_params(unpack(result.x), np))
    message = result.message
    report = {"iterations": iterations, "warmup_iterations": warmup, "restarts": restarts, "evaluations": evaluations,
              "bound": -result.value,
              "gradient_norm": float(np.linalg.norm(result.gradient)), "converged": result.converged,
              "stop": result.stop, "message": message, "seconds": time.perf_counter() - started}
    if result.stop == "line_search":
        report["hint"] = line_search_hint(problem)
    return VEMFit(problem, settings, params, -result.value, np.asarray(trace), report, np.asarray(times), latent_q)


def objective_program(problem: GPLVMProblem, settings: VEMSettings, latent_q: LatentQ, to_params, unpack, flat0):
    """The negative bound and its gradient, ``[-F, -dF/dx]``, as a function of the optimiser's flat coordinates,
    traced and lowered at ``flat0`` (``jax.stages.Lowered``; :func:`fit_vem` compiles it with
    :data:`COMPILER_OPTIONS`). ``to_params`` and ``unpack`` are those of :func:`optimiser_space` and
    :func:`_flat_layout`."""
    bound = gplvm_bound(problem, settings, latent_q.unconstrained_moments, latent_q.unconstrained_kl)

    def negative_bound(flat):
        point = unpack(flat)
        return -bound(point.latent, point.inducing, to_params(point).theta)

    def value_and_gradient(flat):
        value, grad = jax.value_and_grad(negative_bound)(flat)
        return jnp.concatenate([value[None], grad])

    return jax.jit(value_and_gradient).lower(flat0)


def fit_vem_starts(problem: GPLVMProblem, settings: VEMSettings, *, progress: bool = False) -> VEMFit:
    """The fit of highest bound among ``settings.starts`` independent fits (:func:`fit_vem`).

    The first starts from ``settings.init``, the others from random means with seeds ``settings.seed + 1``,
    ``settings.seed + 2``, ... With more than one start, ``report["start_bounds"]`` lists every start's bound.
    """
    starts = settings.starts
    fits = [fit_vem(problem, replace(settings, seed=(settings.seed + k) % 2**31,
                                     init=settings.init if k == 0 else "random"), progress=progress)
            for k in range(starts)]
    fit = max(fits, key=lambda f: f.bound if np.isfinite(f.bound) else -np.inf)
    if starts > 1:
        fit.report["start_bounds"] = [f.bound for f in fits]
    return fit


def line_search_hint(problem: GPLVMProblem) -> str:
    """What to try when the line search fails (the bound is ill-conditioned near the end point)."""
    return ("the line search failed, usually because the bound, computed in float64, has become too noisy to "
            "compare nearby points (a large kernel variance over noise variance with nearly coincident "
            "inducing inputs); the fit is usually close to where the optimiser could go. Try other initial "
            "values (--init-value), fewer inducing inputs or a larger init variance")


def optimiser_space(problem: GPLVMProblem, latent_q: LatentQ | None = None):
    """Maps between :class:`VariationalParams` and the coordinates L-BFGS moves in.

    ``q(X)`` maps its parameters itself (:meth:`LatentQ.unconstrain`). Hyperparameters bounded below by
    0 are optimised through a softplus, as GPy does (on the log scale the first quasi-Newton steps
    overshoot by orders of magnitude); other hyperparameters keep their unconstrained coordinates.
    Inverse squared length-scales (a parameter that is a kernel's ``inv_ls2``, :func:`length_scale_weights`)
    move as the softplus of the length-scale ``w^(-1/2)``, so a kernel written with weights follows
    the same path as the same kernel written with length-scales: the softplus of ``w`` acts like
    ``log w`` for small weights, which lets dimensions switch off in a few steps and the kernel variance
    climb the ridge ``s2 / ell^2 = const`` into a region where the bound, in float64, is too noisy for
    the line search.
    ``to_params`` works on JAX arrays (traced or not) or, with ``xp=numpy``, on NumPy arrays;
    ``from_params`` returns NumPy arrays (no JAX operation to compile).
    """
    latent_q = latent_q or problem.latent_q()
    weights = length_scale_weights(problem)
    positive = problem.theta_mask(_is_positive)
    inverse_square = problem.theta_mask(lambda block: _is_positive(block) and block.name in weights)

    def to_params(raw: VariationalParams, xp=jnp) -> VariationalParams:
        log_positive = log_softplus(raw.theta, xp)
        theta = xp.where(inverse_square, -2.0 * log_positive, xp.where(positive, log_positive, raw.theta))
        return VariationalParams(latent_q.constrain(raw.latent, xp), raw.inducing, theta)

    def from_params(params: VariationalParams) -> VariationalParams:
        theta = np.asarray(params.theta, dtype=float)
        with np.errstate(over="ignore"):
            raw = np.where(inverse_square, inverse_softplus(np.exp(-0.5 * theta)),
                           np.where(positive, inverse_softplus(np.exp(theta)), theta))
        return VariationalParams(latent_q.unconstrain(params.latent), np.asarray(params.inducing, dtype=float), raw)

    return to_params, from_params


def length_scale_weights(problem: GPLVMProblem) -> set[str]:
    """Hyperparameters that are a kernel's inverse squared length-scales (``inv_ls2 = w``) in the model's GPs."""
    nodes = [problem.node] + ([problem.latent_prior] if problem.latent_prior is not None else [])
    parameters = problem.jax_model.model.parameters
    return {expr.name for node in nodes for leaf in node.statement.kernel.leaves() for arg, expr in leaf.params
            if arg == "inv_ls2" and isinstance(expr, ir.Ref) and expr.name in parameters}


def warmup_held(problem: GPLVMProblem, raw: VariationalParams) -> VariationalParams:
    """Where the warm-up holds the optimiser's coordinates: the noise variance and the kernel's variances.

    These are the hyperparameters the Sec. 5 heuristics start at the outputs' variance (kernel
    ``variance`` arguments that are parameters) and 1% of it (the parameter of the likelihood's ``sigma``,
    as in :func:`noise_guess`), as vargplvm holds ``beta`` and ``sigma_f`` for its ``initVardistIters``.

    Returns
    -------
    VariationalParams
        Booleans shaped like ``raw`` (True: held).
    """
    parameters = problem.jax_model.model.parameters
    names = {expr.name for leaf in problem.node.statement.kernel.leaves() for arg, expr in leaf.params
             if arg == "variance" and isinstance(expr, ir.Ref) and expr.name in parameters}
    names |= set(noise_guess(problem, 1.0))
    theta = problem.theta_mask(names)
    return VariationalParams(jax.tree_util.tree_map(lambda leaf: np.zeros(np.shape(leaf), dtype=bool), raw.latent),
                             np.zeros(np.shape(raw.inducing), dtype=bool), theta)


def warmup_start(problem: GPLVMProblem, params: VariationalParams) -> VariationalParams:
    """``params`` with the noise variance lowered to 1% of the outputs' variance if it is above that.

    The warm-up is there to keep the data term's hold on ``q(X)`` while the latent points organise, which a
    large noise variance defeats: vargplvm holds it at 1% (``initSNR = 100``, the Sec. 5 start). From GPy's
    start (noise variance 1, five times the variance of the centred oil-flow outputs), held there for the
    warm-up, every latent dimension switches off and the fit ends at the trivial optimum.
    """
    ceiling = 0.01 * float(np.nanmean(np.nanvar(problem.Y, axis=0)))
    guess = noise_guess(problem, ceiling)
    theta = jax.device_put(params.theta)  # jnp.asarray of a NumPy array would compile a program of its own
    if not guess:
        return params
    # one small compiled function (evaluated eagerly, the expression compiles a dozen single operations), cached
    with keeping_small_programs():
        noise_variance = float(jax.jit(problem.noise_variance)(theta))
    if noise_variance <= ceiling:
        return params
    values = {name: np.asarray(value) for name, value in problem.theta_values(theta).items()}
    return params._replace(theta=problem.unconstrain_theta({**values, **guess}))


def scale_blocks(problem: GPLVMProblem, raw: VariationalParams) -> np.ndarray:
    """Block labels of the flat coordinates for L-BFGS's initial scales (``scale_blocks`` of :func:`lbfgs.minimize`).

    One block per latent dimension in each ``(N, Q)`` parameter of ``q(X)`` and in the inducing inputs,
    one per other parameter of ``q(X)``, and one per hyperparameter. The curvature of the bound in a
    latent mean grows with the relevance of its dimension (``D s2 / (noise ell_q^2)`` for a relevant
    dimension, about 1 from the KL term for a switched-off one), and each hyperparameter sums over all
    points: a single scale for all of them fits none of these groups.
    """
    Q = problem.latent_dim
    labels, count = [], 0
    for leaf in [*jax.tree_util.tree_leaves(raw.latent), raw.inducing]:
        shape = np.shape(leaf)
        if len(shape) == 2 and shape[1] == Q:
            labels.append(count + np.broadcast_to(np.arange(Q), shape).ravel())
            count += Q
        else:
            labels.append(np.full(int(np.prod(shape)), count))
            count += 1
    for block in problem.theta_blocks:
        labels.append(np.full(block.size, count))
        count += 1
    return np.concatenate(labels).astype(np.int64)


def _flat_layout(raw: VariationalParams):
    """``pack`` (NumPy leaves to one float64 vector) and ``unpack`` (a vector, NumPy or traced, to the pytree)."""
    leaves, tree = jax.tree_util.tree_flatten(raw)
    shapes = [np.shape(leaf) for leaf in leaves]
    ends = np.cumsum([int(np.prod(shape)) for shape in shapes])
    starts = ends - [int(np.prod(shape)) for shape in shapes]

    def pack(params: VariationalParams) -> np.ndarray:
        return np.concatenate([np.ravel(leaf) for leaf in jax.tree_util.tree_leaves(params)]).astype(float)

    def unpack(flat) -> VariationalParams:
        fields = [flat[a:b].reshape(shape) for a, b, shape in zip(starts, ends, shapes)]
        return jax.tree_util.tree_unflatten(tree, fields)

    return pack, unpack


def _is_positive(block) -> bool:
    return block.upper is None and block.lower is not None and bool(np.all(np.asarray(block.lower) == 0))


def _raise_not_finite(problem: GPLVMProblem, params: VariationalParams):
    values = {k: np.round(np.asarray(v), 6).tolist() for k, v in problem.theta_values(params.theta).items()}
    raise NumericalError(
        f"the variational bound is not finite at the starting point (hyperparameters {values})",
        hint="the inducing covariance may not be positive definite or the data badly scaled: standardise Y, "
             "give other initial values (initial_values / --init-value name=value) or use fewer inducing inputs")
