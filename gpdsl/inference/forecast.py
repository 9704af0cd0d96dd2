"""Forecasting a series with a GP-NARX model file: embed, standardise, fit, free-simulate, score.

The model is GP regression over a lag matrix (``matrix[N, L] X; vector[N] y; f ~ gp(X, k);
y ~ normal(f, s)``, e.g. ``models/gp_narx.gpm``). :func:`forecast` builds ``X`` and ``y`` from a series
(:func:`~gpdsl.inference.predict.free_simulation.lag_matrix`) over the first ``train`` lag vectors,
standardises them with the mean and standard deviation of the training targets (applied to every lag,
as scikit-learn's ``StandardScaler`` on the targets in de Souza's protocol), fits the hyperparameters by
the ``ml`` method and runs :func:`~gpdsl.inference.predict.free_simulation.free_simulation` from the
first lag vector, with no teacher forcing. Predictions are returned in the series' units, scored
(RMSE, NLPD) on the targets after the training ones that the series holds.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from typing import NamedTuple

import numpy as np

from gpdsl.errors import DataError, MethodError
from gpdsl.ir import nodes as ir
from gpdsl.settings import LARGEST_INT, option, require_choice, require_positive_int

FEEDBACKS = ("mean", "gaussian")
PSI_KINDS = ("analytic", "unscented", "gauss_hermite", "monte_carlo")
MAX_STEPS = 1_000_000
"""The most steps of one free simulation (a simulation that is not finite stops at once, naming its step)."""


def training_variance_from_cli(text) -> str | float:
    """``--training-variance noise`` or a number."""
    if isinstance(text, str) and text.strip() == "noise":
        return "noise"
    try:
        return float(text)
    except (TypeError, ValueError):
        raise MethodError(f"--training-variance takes 'noise' or a number; got '{text}'") from None


@dataclass(frozen=True)
class ForecastSettings:
    """How a series is embedded, simulated and scored.

    Attributes
    ----------
    lag : int
        Window length ``L`` (required).
    train : int, optional
        Training lag vectors (the first ones); all by default.
    steps : int, optional
        Predictions, from the first lag vector on; by default up to the end of the series.
    feedback : {"mean", "gaussian"}
        Feed back predictive means (GP-NARX) or means and variances (uncertainty propagation).
    psi : {"analytic", "unscented", "gauss_hermite", "monte_carlo"}
        Psi statistics for ``"gaussian"``.
    gh_nodes : int
        Gauss-Hermite nodes per lag (``gh_nodes ** L`` points).
    mc_samples : int
        Monte Carlo draws per step.
    resample_training : bool
        Monte Carlo: redraw the training statistics at every step.
    training_variance : "noise" or float
        Variance of ``q(X)`` around the training inputs: the fitted noise variance, or a number.
    standardise : bool
        Standardise by the training targets' mean and standard deviation.
    series : str, optional
        The series' variable in the data file (needed when it holds several).
    """

    lag: int | None = option(None, "window length L (required)")
    train: int | None = option(None, "training lag vectors, the first ones (default all)")
    steps: int | None = option(None, "predictions from the first window on, at most 1,000,000 (default to the end "
                                     "of the series)")
    feedback: str = option("gaussian", "feed back the predictive mean only, or mean and variance",
                           choices=FEEDBACKS)
    psi: str = option("unscented", "Psi statistics with gaussian feedback", choices=PSI_KINDS)
    gh_nodes: int = option(2, "Gauss-Hermite nodes per lag")
    mc_samples: int = option(24, "Monte Carlo draws per step")
    resample_training: bool = option(False, "Monte Carlo: redraw the training statistics at every step")
    training_variance: str | float = option("noise", "variance of q(X) around the training inputs: 'noise' "
                                                     "(the fitted noise variance) or a number",
                                            metavar="noise|V", parse=training_variance_from_cli)
    standardise: bool = option(True, "do not standardise by the training targets", negate="--no-standardize",
                              aliases=("--no-standardise",))
    series: str | None = option(None, "the series' variable in the data file", metavar="NAME")

    def __post_init__(self):
        if self.lag is None:
            raise MethodError("the lag (--lag) is required")
        require_positive_int("lag", self.lag)
        for name in ("train", "steps"):
            if getattr(self, name) is not None:
                require_positive_int(name, getattr(self, name), high=MAX_STEPS if name == "steps" else LARGEST_INT)
        require_choice("feedback", self.feedback, FEEDBACKS)
        require_choice("Psi-statistic method", self.psi, PSI_KINDS)
        require_positive_int("gh_nodes", self.gh_nodes)
        require_positive_int("mc_samples", self.mc_samples)
        if self.training_variance != "noise" and (
                isinstance(self.training_variance, bool) or not isinstance(self.training_variance, (int, float))
                or not math.isfinite(self.training_variance) or self.training_variance < 0):
            raise MethodError(f"training_variance must be 'noise' or a finite number >= 0; got "
                              f"{self.training_variance!r}")

    def psi_method(self):
        """The Psi-statistic rule these settings name."""
        from gpdsl.kernels.psi import PsiMethod

        return PsiMethod(self.psi, nodes=self.gh_nodes, samples=self.mc_samples)


class NARXData(NamedTuple):
    """A series embedded for GP-NARX.

    Attributes
    ----------
    X : numpy.ndarray, shape (n - L, L)
        Every lag vector, standardised.
    y : numpy.ndarray, shape (n - L,)
        Every next value, standardised.
    train : int
        The first ``train`` rows are the training data.
    offset, scale : float
        ``standardised = (value - offset) / scale``.
    series : numpy.ndarray, shape (n,)
        The series.
    """

    X: np.ndarray
    y: np.ndarray
    train: int
    offset: float
    scale: float
    series: np.ndarray


class Forecast(NamedTuple):
    """A free simulation in the series' units.

    Attributes
    ----------
    mean, variance : numpy.ndarray, shape (steps,)
        Predictive moments of ``series[index]``.
    index : numpy.ndarray, shape (steps,)
        Position of each prediction in the series (beyond its end for a forecast past the data).
    observed : numpy.ndarray, shape (steps,)
        The series there (NaN past its end).
    metrics : dict
        ``rmse``, ``nlpd`` and ``count`` over the predictions of held-out values (after the training
        targets), when there are any.
    """

    mean: np.ndarray
    variance: np.ndarray
    index: np.ndarray
    observed: np.ndarray
    metrics: dict


def narx_data(series, lag: int, train: int | None = None, standardise: bool = True) -> NARXData:
    """Embed and standardise a series (see the module docstring).

    Raises
    ------
    DataError
        The series is too short for ``lag`` and ``train``, or its training targets are constant.
    """
    from gpdsl.inference.predict.free_simulation import lag_matrix

    series = np.asarray(series, dtype=float)
    if series.ndim == 2 and 1 in series.shape:
        series = series.reshape(-1)
    X, y = lag_matrix(series, lag)
    train = y.size if train is None else train
    if train > y.size or train < 2:
        raise DataError(f"a series of {series.size} values has {y.size} lag vectors of length {lag}; "
                        f"cannot train on {train}")
    offset, scale = (float(np.mean(y[:train])), float(np.std(y[:train]))) if standardise else (0.0, 1.0)
    if scale == 0:
        raise DataError("the training targets are constant; they cannot be standardised")
    return NARXData((X - offset) / scale, (y - offset) / scale, train, offset, scale, series)


def narx_names(model: ir.Model) -> dict:
    """The names a GP-NARX model file uses: ``points`` and ``lag`` size symbols, ``inputs`` and ``target``.

    Raises
    ------
    MethodError
        The model is not GP regression on one data matrix ``matrix[N, L]`` with outputs ``vector[N]`` and no
        other data.
    """
    from gpdsl.ir.families import GP_REGRESSION, classify

    _, facts = classify(model).require((GP_REGRESSION,), "forecast")
    components = facts.node.statement.inputs.components
    needs = "forecast needs GP regression on a lag matrix: data matrix[N, L] X; vector[N] y; f ~ gp(X, k)"
    if facts.node.has_location:
        raise MethodError(f"{needs}; '{facts.name}' has a mean or terms added to it")
    if len(components) != 1 or not isinstance(components[0], ir.Ref) or components[0].name not in model.data:
        raise MethodError(f"{needs}; the inputs of '{facts.name}' are not one data variable")
    inputs, target = components[0].name, facts.target
    shape = model.data[inputs].type.shape
    if model.data[inputs].type.container != "matrix" or not all(isinstance(d, str) for d in shape):
        raise MethodError(f"{needs}; '{inputs}' is {model.data[inputs].type.describe()}")
    points, lag = shape
    others = sorted(set(model.data) - {inputs, target, points, lag})
    if others:
        raise MethodError(f"{needs}; this model also reads {', '.join(others)}, which a series does not give")
    return {"points": points, "lag": lag, "inputs": inputs, "target": target}


def narx_model_data(model: ir.Model, narx: NARXData) -> dict:
    """The model's data (unvalidated) for the training rows of ``narx``."""
    names = narx_names(model)
    return {names["points"]: narx.train, names["lag"]: narx.X.shape[1],
            names["inputs"]: narx.X[:narx.train], names["target"]: narx.y[:narx.train]}


def simulate_forecast(fit, narx: NARXData, settings: ForecastSettings, seed: int = 0) -> Forecast:
    """Free-simulate a fit on ``narx`` from its first lag vector and score it (see :class:`Forecast`)."""
    from gpdsl.inference.predict.free_simulation import free_simulation

    steps = settings.steps or narx.y.size
    variance = fit.noise_variance() if settings.training_variance == "noise" else settings.training_variance
    run = free_simulation(fit, narx.X[0], steps, feedback=settings.feedback, psi=settings.psi_method(),
                          training_variance=variance, seed=seed, resample_training=settings.resample_training)
    lag = narx.X.shape[1]
    index = np.arange(lag, lag + steps)
    observed = np.where(index < narx.series.size, narx.series[np.minimum(index, narx.series.size - 1)], np.nan)
    mean = run.mean * narx.scale + narx.offset
    variance = run.variance * narx.scale ** 2
    return Forecast(mean, variance, index, observed, forecast_metrics(mean, variance, observed, narx.train))


def forecast_metrics(mean, variance, observed, train: int) -> dict:
    """RMSE and NLPD (nats per value) over the held-out predictions: after the first ``train``, where observed."""
    held_out = np.arange(mean.size) >= train
    held_out &= ~np.isnan(observed)
    if not held_out.any():
        return {"count": 0}
    error = observed[held_out] - mean[held_out]
    var = variance[held_out]
    return {"count": int(held_out.sum()), "rmse": float(np.sqrt(np.mean(error ** 2))),
            "nlpd": float(0.5 * np.log(2 * np.pi) + 0.5 * np.mean(np.log(var) + error ** 2 / var))}


def forecast(model: ir.Model, series, settings: ForecastSettings, ml_settings=None, *, seed: int = 0):
    """Fit a GP-NARX model file to a series and free-simulate it (see the module docstring).

    Parameters
    ----------
    model : Model
        A checked GP-NARX model (:func:`narx_names`).
    series : array_like, shape (n,)
    settings : ForecastSettings
    ml_settings : MLSettings, optional
        Settings of the hyperparameter fit.
    seed : int
        Seed of the Monte Carlo draws, recorded in the results.

    Returns
    -------
    results : arviz.InferenceData or xarray.DataTree
        The ``ml`` fit's results plus a ``predictions`` group (``<y>_mean``, ``<y>_variance``,
        ``<y>_observed`` and ``series_index``, dim ``step``, in the series' units), the forecast settings
        in the ``forecast`` attribute and the metrics in ``report.forecast``.
    forecast : Forecast
    fit : GPRegressionFit
    """
    from gpdsl.data.io import load_data
    from gpdsl.inference.methods.ml import MLSettings, fit_gp_regression, ml_output
    from gpdsl.results.method_output import method_results

    ml_settings = ml_settings or MLSettings()
    names = narx_names(model)
    narx = narx_data(series, settings.lag, settings.train, settings.standardise)
    data, _ = load_data(narx_model_data(model, narx), model)
    fit = fit_gp_regression(model, data, ml_settings)
    result = simulate_forecast(fit, narx, settings, seed)
    output = ml_output(fit)
    target = names["target"]
    values = {f"{target}_mean": result.mean, f"{target}_variance": result.variance,
              f"{target}_observed": result.observed, "series_index": result.index}
    output.predictions = {name: np.asarray(value)[None, None] for name, value in values.items()}
    output.dims.update({name: ["step"] for name in values})
    output.report["forecast"] = result.metrics
    output.attrs["forecast"] = json.dumps({**asdict(settings), "offset": narx.offset, "scale": narx.scale})
    results = method_results(model, data, "ml", "gpdsl", ml_settings, seed, output)
    return results, result, fit
