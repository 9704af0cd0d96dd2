"""Run Stan programs with NUTS (PyStan or CmdStanPy) and evaluate Stan's log density with PyStan.

Every sampler returns a :class:`StanFit` whose arrays are shaped ``(chain, draw, ...)`` and whose
sample statistics carry ArviZ names.
"""

from __future__ import annotations

import dataclasses
import re
import time
from typing import Any, Literal

import numpy as np

from gpdsl.backends.stan.initialization import initialization_failure
from gpdsl.backends.stan.pystan_process import Progress, run_worker
from gpdsl.backends.stan.stanc import check_program, stanc_version
from gpdsl.errors import BackendError

ARVIZ_SAMPLE_STAT_NAMES = {
    "lp__": "lp",
    "accept_stat__": "acceptance_rate",
    "stepsize__": "step_size",
    "treedepth__": "tree_depth",
    "n_leapfrog__": "n_steps",
    "divergent__": "diverging",
    "energy__": "energy",
}
SAMPLE_STAT_DTYPES = {"diverging": bool, "tree_depth": np.int64, "n_steps": np.int64}


@dataclasses.dataclass
class StanFit:
    """Draws from a Stan NUTS run.

    Attributes
    ----------
    draws : dict of str to ndarray
        Every Stan variable (parameters, transformed parameters, generated quantities), shaped
        ``(chain, draw, *stan_shape)``; ``M[i, j]`` of a ``matrix[N, D] M`` is ``draws["M"][c, d, i-1, j-1]``.
    sample_stats : dict of str to ndarray
        ``lp``, ``acceptance_rate``, ``step_size``, ``tree_depth``, ``n_steps``, ``diverging`` (bool)
        and ``energy``, each shaped ``(chain, draw)``.
    settings : dict
        The sampler settings used: chains, warmup, draws, seed, adapt_delta, max_depth, init, thin.
    wall_time : float
        Seconds for the whole call, compilation included.
    backend : str
        ``"pystan"`` or ``"cmdstanpy"``.
    versions : dict of str to str
        ``stanc`` and the backend's packages (``pystan``/``httpstan`` or ``cmdstanpy``/``cmdstan``).
    sampling_time : float, optional
        Seconds spent sampling, compilation excluded.
    warmup_share : float, optional
        The share of ``sampling_time`` spent in warmup, from the elapsed times Stan's chains report.
    """

    draws: dict[str, np.ndarray]
    sample_stats: dict[str, np.ndarray]
    settings: dict[str, Any]
    wall_time: float
    backend: str
    versions: dict[str, str]
    sampling_time: float | None = None
    warmup_share: float | None = None

    @property
    def num_chains(self) -> int:
        """The number of chains."""
        return self.sample_stats["lp"].shape[0]

    @property
    def num_draws(self) -> int:
        """The number of post-warmup draws per chain."""
        return self.sample_stats["lp"].shape[1]


@dataclasses.dataclass(frozen=True)
class StanParameterLayout:
    """How PyStan names a program's variables.

    Attributes
    ----------
    names : tuple of str
        Parameters, then transformed parameters, then generated quantities, in declaration order.
    dims : tuple of tuple of int
        The shape of each name.
    constrained_names : tuple of str
        The flat constrained names (``"M.2.1"``), column-major within each variable.
    """

    names: tuple[str, ...]
    dims: tuple[tuple[int, ...], ...]
    constrained_names: tuple[str, ...]


def arviz_sample_stats(stan_stats: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Rename Stan's sampler columns (``lp__``, ``accept_stat__``, ...) to ArviZ names and dtypes."""
    renamed = {}
    for stan_name, values in stan_stats.items():
        name = ARVIZ_SAMPLE_STAT_NAMES.get(stan_name, stan_name.removesuffix("__"))
        renamed[name] = np.asarray(values).astype(SAMPLE_STAT_DTYPES.get(name, np.float64))
    return renamed


def sampler_settings(
    chains: int = 4,
    warmup: int = 1000,
    draws: int = 1000,
    seed: int | None = None,
    adapt_delta: float = 0.8,
    max_depth: int = 10,
    init: dict | list[dict] | None = None,
    thin: int = 1,
) -> dict[str, Any]:
    """The NUTS settings every Stan sampler takes, with their defaults, validated.

    Parameters
    ----------
    chains, warmup, draws : int
        Number of chains, warmup iterations and kept draws per chain.
    seed : int, optional
        Random seed.
    adapt_delta : float
        Target acceptance rate of step-size adaptation.
    max_depth : int
        Maximum tree depth.
    init : dict or list of dict, optional
        Initial values: one dict for every chain, or one dict per chain.
    thin : int
        Keep every ``thin``-th iteration after warmup: ``draws * thin`` iterations run.

    Returns
    -------
    dict
        The settings as recorded in :attr:`StanFit.settings`.

    Raises
    ------
    BackendError
        For a count that is not a positive integer (``warmup`` may be 0), ``adapt_delta`` outside
        (0, 1), or a list of ``init`` values that does not have one per chain.
    """
    for name, value in {"chains": chains, "warmup": warmup, "draws": draws, "max_depth": max_depth,
                        "thin": thin}.items():
        if int(value) != value or value < (0 if name == "warmup" else 1):
            raise BackendError(f"{name} must be a positive integer, got {value!r}")
    if not 0 < adapt_delta < 1:
        raise BackendError(f"adapt_delta must lie strictly between 0 and 1, got {adapt_delta!r}")
    if isinstance(init, (list, tuple)) and len(init) != chains:
        raise BackendError(f"init has {len(init)} entries but there are {chains} chains")
    return dict(
        chains=int(chains), warmup=int(warmup), draws=int(draws), seed=seed,
        adapt_delta=float(adapt_delta), max_depth=int(max_depth), init=init, thin=int(thin),
    )


def sample_pystan(program_code: str, data: dict, *args, progress: Progress = True, **options) -> StanFit:
    """Sample a Stan program with PyStan's NUTS (diagonal metric) in a subprocess.

    The first build of a program compiles C++ (about 50 s, 2.3 GB of memory); httpstan caches the
    build by program text under ``$XDG_CACHE_HOME/httpstan``. With a seed httpstan also caches the
    fit, so an identical call is replayed.

    Parameters
    ----------
    program_code : str
        The Stan program.
    data : dict
        Values for the ``data`` block; NumPy arrays are accepted.
    *args, **options
        The settings of :func:`sampler_settings`, by position or name: ``chains``, ``warmup``,
        ``draws``, ``seed``, ``adapt_delta``, ``max_depth`` and ``init`` (4 chains of 1000 warmup
        iterations and 1000 draws by default).
    progress : bool or callable
        ``True`` prints the worker's progress lines on stderr, ``False`` hides them, and a callable
        receives each line.

    Returns
    -------
    StanFit

    Raises
    ------
    BackendError
        If the settings are invalid, stanc rejects the program, the build fails or sampling fails; an
        initialization failure names Stan's reasons in a few lines.
    """
    started = time.perf_counter()
    settings = sampler_settings(*args, **options)
    check_program(program_code)
    worker_options = dict(settings, init=_per_chain_init(settings["init"], settings["chains"]))
    try:
        metadata, arrays = run_worker("sample", program_code, data, worker_options, seed=settings["seed"],
                                      progress=progress)
    except BackendError as error:
        raise initialization_failure(error.message, settings["init"]) or error from None
    draws_by_name = {name: arrays[f"draw.{name}"] for name in metadata["param_names"]}
    stats = arviz_sample_stats({name: arrays[f"stat.{name}"] for name in metadata["sample_stat_names"]})
    return StanFit(
        draws=draws_by_name,
        sample_stats=stats,
        settings=settings,
        wall_time=time.perf_counter() - started,
        backend="pystan",
        versions={"stanc": stanc_version(), **metadata["versions"]},
        sampling_time=metadata["sampling_seconds"],
        warmup_share=warmup_share(metadata.get("stan_messages", [])),
    )


def log_prob_pystan(
    program_code: str,
    data: dict,
    unconstrained_points: np.ndarray,
    jacobian: bool = True,
    progress: Progress = False,
) -> np.ndarray:
    """Stan's log density at points of the unconstrained space (``log_prob`` of the model).

    Parameters
    ----------
    program_code : str
        The Stan program.
    data : dict
        Values for the ``data`` block.
    unconstrained_points : ndarray, shape (K, P)
        K points in Stan's unconstrained parameter order.
    jacobian : bool
        Include the log Jacobian of the constraining transforms.
    progress : bool or callable
        As in :func:`sample_pystan`.

    Returns
    -------
    ndarray, shape (K,)
        The log density, including every constant of ``target +=`` statements and none dropped by
        ``~`` statements.
    """
    values, _ = _log_prob_request(program_code, data, unconstrained_points, jacobian, False, progress)
    return values


def log_prob_grad_pystan(
    program_code: str,
    data: dict,
    unconstrained_points: np.ndarray,
    jacobian: bool = True,
    progress: Progress = False,
) -> tuple[np.ndarray, np.ndarray]:
    """Stan's log density and its gradient at unconstrained points.

    Parameters are those of :func:`log_prob_pystan`.

    Returns
    -------
    log_prob : ndarray, shape (K,)
    gradient : ndarray, shape (K, P)
    """
    return _log_prob_request(program_code, data, unconstrained_points, jacobian, True, progress)


def unconstrain_pystan(
    program_code: str,
    data: dict,
    constrained_params: dict,
    progress: Progress = False,
) -> np.ndarray:
    """Map constrained parameter values to Stan's unconstrained vector (``transform_inits``).

    Parameters
    ----------
    program_code, data
        As in :func:`log_prob_pystan`.
    constrained_params : dict
        A value for every parameter of the ``parameters`` block, by name.
    progress : bool or callable
        As in :func:`sample_pystan`.

    Returns
    -------
    ndarray, shape (P,)
    """
    check_program(program_code)
    options = {"constrained_params": constrained_params}
    _, arrays = run_worker("unconstrain", program_code, data, options, progress=progress)
    return arrays["unconstrained"]


def parameter_layout_pystan(program_code: str, data: dict, progress: Progress = False) -> StanParameterLayout:
    """The names and shapes PyStan reports for a program's variables.

    Parameters
    ----------
    program_code : str
        The Stan program.
    data : dict
        Values for the ``data`` block (they can fix the shapes).
    progress : bool or callable
        As in :func:`sample_pystan`.

    Returns
    -------
    StanParameterLayout
    """
    check_program(program_code)
    metadata, _ = run_worker("layout", program_code, data, {}, progress=progress)
    return StanParameterLayout(
        names=tuple(metadata["param_names"]),
        dims=tuple(tuple(dims) for dims in metadata["dims"]),
        constrained_names=tuple(metadata["constrained_param_names"]),
    )


def sample_stan(
    program_code: str,
    data: dict,
    *args,
    backend: Literal["auto", "pystan", "cmdstanpy"] = "auto",
    **options,
) -> StanFit:
    """Sample with CmdStanPy when CmdStan is installed, else PyStan (or the ``backend`` named).

    Parameters are those of :func:`sample_pystan`, plus ``backend``.

    Returns
    -------
    StanFit
    """
    from gpdsl.backends.stan.cmdstan_runner import find_cmdstan, sample_cmdstanpy

    if backend not in ("auto", "pystan", "cmdstanpy"):
        raise BackendError(f"unknown Stan backend {backend!r}; use 'auto', 'pystan' or 'cmdstanpy'")
    if backend == "auto":
        backend = "cmdstanpy" if find_cmdstan() is not None else "pystan"
    runner = sample_cmdstanpy if backend == "cmdstanpy" else sample_pystan
    return runner(program_code, data, *args, **options)


def _per_chain_init(init, chains: int) -> list[dict] | None:
    if init is None:
        return None
    if isinstance(init, dict):
        return [init] * chains
    return list(init)


def _log_prob_request(program_code, data, unconstrained_points, jacobian, gradient, progress):
    points = np.asarray(unconstrained_points, dtype=float)
    if points.ndim != 2:
        raise BackendError(f"unconstrained_points must have shape (K, P), got shape {points.shape}")
    check_program(program_code)
    options = {"points": points, "jacobian": bool(jacobian), "gradient": gradient}
    _, arrays = run_worker("log_prob", program_code, data, options, progress=progress)
    return arrays["log_prob"], arrays.get("gradient")


_ELAPSED = re.compile(r"([0-9.eE+-]+) seconds \((Warm-up|Sampling)\)")


def warmup_share(messages) -> float | None:
    """The share of warmup in the elapsed times Stan's chains print (``Elapsed Time: ... (Warm-up)``).

    Parameters
    ----------
    messages : iterable of str
        Lines of Stan's output (any prefix).

    Returns
    -------
    float or None
        Summed warmup seconds over summed warmup and sampling seconds; None when Stan printed none.
    """
    totals = {"Warm-up": 0.0, "Sampling": 0.0}
    for line in messages:
        for value, part in _ELAPSED.findall(line):
            totals[part] += float(value)
    spent = totals["Warm-up"] + totals["Sampling"]
    return totals["Warm-up"] / spent if spent > 0 else None
