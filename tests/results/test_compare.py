"""gpdsl compare: statistics per fit, ESS per second and its ratio, z-scores, LOO, point estimates, the CLI."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

import gpdsl
from gpdsl.api import check_file
from gpdsl.settings import NUTSSettings
from gpdsl.cli import main
from gpdsl.errors import GpdslError
from gpdsl.settings import PseudoMarginalSettings
from gpdsl.settings import VEMSettings
from gpdsl.results import arviz_compat
from gpdsl.results.compare import Z_FLAG
from gpdsl.results.io import write_netcdf
from gpdsl.results.method_output import MethodOutput, method_results

ROOT = Path(__file__).resolve().parents[2]
MODEL = ROOT / "models" / "gp_classification.gpm"
N, D = 6, 2
X = np.linspace(-1, 1, N * D).reshape(N, D)
Y = np.array([0, 1, 0, 1, 1, 0])
CHAINS, DRAWS = 4, 1000
SIGMA, TAU = 2.0, np.array([0.5, 1.5])


def _fit(tmp_path, name, method, settings, timings, shift=0.0, seed=0, log_likelihood=None, y=Y, point=False):
    model, _ = check_file(MODEL)
    rng = np.random.default_rng(seed)
    shape = (1, 1) if point else (CHAINS, DRAWS)
    posterior = {"sigma": SIGMA + shift + 0.3 * rng.standard_normal(shape),
                 "tau": TAU + 0.1 * rng.standard_normal((*shape, D))}
    output = MethodOutput(posterior, timings=timings, log_likelihood=log_likelihood)
    data = {"N": N, "D": D, "X": X, "y": y}
    engine = "stan" if method == "nuts" else "gpdsl"
    results = method_results(model, data, method, engine, settings, seed, output)
    return write_netcdf(results, tmp_path / f"{name}.nc")


@pytest.fixture
def nuts_and_pm(tmp_path):
    nuts = _fit(tmp_path, "nuts", "nuts", NUTSSettings(), {"compile": 40.0, "warmup": 6.0, "sampling": 4.0}, seed=1)
    pm = _fit(tmp_path, "pm", "pm", PseudoMarginalSettings(approximation="ep", num_importance=16),
              {"compile": 3.0, "warmup": 0.5, "sampling": 1.5}, seed=2)
    return nuts, pm


def _min_ess(path):
    posterior = arviz_compat.groups(gpdsl.results.read_netcdf(path))["posterior"]
    ess = arviz_compat.ess(posterior, ["sigma", "tau"], method="bulk")
    return min(float(ess["sigma"]), *map(float, ess["tau"].values))


def test_ratio_is_min_ess_over_warmup_plus_sampling_against_the_reference(nuts_and_pm):
    nuts, pm = nuts_and_pm
    comparison = gpdsl.compare(pm, nuts, reference=nuts)
    assert comparison.reference == "nuts" and list(comparison.fits.index) == ["nuts", "pm"]
    expected_pm, expected_nuts = _min_ess(pm) / 2.0, _min_ess(nuts) / 10.0
    assert comparison.fits.loc["pm", "min_ess_per_s"] == pytest.approx(expected_pm, rel=1e-12)
    assert comparison.fits.loc["pm", "ratio_to_reference"] == pytest.approx(expected_pm / expected_nuts, rel=1e-12)
    assert comparison.fits.loc["nuts", "ratio_to_reference"] == 1.0
    assert comparison.fits.loc["nuts", "compile_s"] == 40.0 and comparison.fits.loc["pm", "sampling_s"] == 1.5
    assert "importance draws" in comparison.fits.loc["pm", "method"]


def test_statistics_per_element_with_one_based_labels(nuts_and_pm):
    nuts, pm = nuts_and_pm
    comparison = gpdsl.compare(nuts, pm)
    table = comparison.parameters
    assert list(dict.fromkeys(table.index.get_level_values("element"))) == ["sigma", "tau[1]", "tau[2]"]
    posterior = arviz_compat.groups(gpdsl.results.read_netcdf(pm))["posterior"]
    row = table.loc[("tau[2]", "pm")]
    assert row["mean"] == pytest.approx(float(posterior["tau"].sel(D=2).mean()))
    assert row["sd"] == pytest.approx(float(posterior["tau"].sel(D=2).std(ddof=1)))
    # independent draws: MCSE near sd / sqrt(n), bulk ESS near n, R-hat near 1
    n = CHAINS * DRAWS
    assert row["mcse_mean"] == pytest.approx(row["sd"] / math.sqrt(n), rel=0.15)
    assert 0.8 * n < row["ess_bulk"] < 1.2 * n and 0.8 * n < row["ess_tail"] < 1.2 * n
    assert abs(row["r_hat"] - 1) < 0.01
    by_label = gpdsl.compare({"baseline": gpdsl.read_results(nuts), "engine": pm}, reference="baseline")
    assert list(by_label.fits.index) == ["baseline", "engine"]
    assert by_label.parameters.loc[("tau[2]", "engine"), "mean"] == row["mean"]


def test_z_scores_flag_a_shift_beyond_monte_carlo_error(tmp_path, nuts_and_pm):
    nuts, pm = nuts_and_pm
    agreeing = gpdsl.compare(nuts, pm)
    assert not agreeing.differences["flagged"].any()
    assert (agreeing.differences["z"].abs() < Z_FLAG).all()
    # sigma shifted by 0.1 = a third of its sd: z about 0.1 / (0.3 * sqrt(2 / 4000)) = 15
    shifted = _fit(tmp_path, "shifted", "pm", PseudoMarginalSettings(), {"warmup": 1.0, "sampling": 1.0},
                   shift=0.1, seed=3)
    comparison = gpdsl.compare(nuts, shifted)
    row = comparison.differences.loc[("sigma", "shifted")]
    means = comparison.parameters["mean"]
    mcse = comparison.parameters["mcse_mean"]
    expected = (means[("sigma", "shifted")] - means[("sigma", "nuts")]) / math.hypot(
        mcse[("sigma", "shifted")], mcse[("sigma", "nuts")])
    assert row["z"] == pytest.approx(expected) and row["z"] > Z_FLAG and row["flagged"]
    assert list(comparison.flagged().index) == [("sigma", "shifted")]
    assert "**(!)**" in comparison.to_markdown()


def test_elpd_loo_with_its_se_from_the_log_likelihood_group(tmp_path, nuts_and_pm):
    nuts, _ = nuts_and_pm
    rng = np.random.default_rng(5)
    pointwise = np.log(np.array([0.2, 0.5, 0.7, 0.4, 0.9, 0.6]))
    log_lik = pointwise + 1e-3 * rng.standard_normal((CHAINS, DRAWS, N))
    with_loo = _fit(tmp_path, "loo", "pm", PseudoMarginalSettings(), {"warmup": 1.0, "sampling": 1.0},
                    log_likelihood={"y": log_lik})
    comparison = gpdsl.compare(nuts, with_loo)
    row = comparison.fits.loc["loo"]
    # a near-constant log-likelihood: elpd_loo is its sum and se sqrt(n) times its spread over the points (the
    # population sd under ArviZ 0.x, the sample sd under ArviZ 1.x, as R's loo)
    ddof = 0 if arviz_compat.ARVIZ_MAJOR == 0 else 1
    assert row["elpd_loo"] == pytest.approx(pointwise.sum(), abs=1e-2)
    assert row["elpd_loo_se"] == pytest.approx(math.sqrt(N) * pointwise.std(ddof=ddof), rel=1e-2)
    assert math.isnan(comparison.fits.loc["nuts", "elpd_loo"])
    assert f"{pointwise.sum():.2f}" in comparison.to_markdown()


def test_a_point_estimate_is_compared_on_its_value(tmp_path, nuts_and_pm):
    nuts, _ = nuts_and_pm
    point = _fit(tmp_path, "vem", "vem", VEMSettings(), {"sampling": 2.0}, point=True, seed=4)
    comparison = gpdsl.compare(nuts, point)
    row = comparison.fits.loc["vem"]
    assert row["kind"] == "point estimate" and math.isnan(row["min_ess_per_s"])
    value = float(arviz_compat.groups(gpdsl.results.read_netcdf(point))["posterior"]["sigma"].values.ravel()[0])
    assert comparison.parameters.loc[("sigma", "vem"), "mean"] == value
    difference = comparison.differences.loc[("sigma", "vem")]
    reference = comparison.parameters.loc[("sigma", "nuts")]
    assert math.isnan(difference["z"]) and not difference["flagged"]
    assert difference["in_reference_sd"] == pytest.approx((value - reference["mean"]) / reference["sd"])


def test_fits_to_different_data_are_refused(tmp_path, nuts_and_pm):
    nuts, _ = nuts_and_pm
    other = _fit(tmp_path, "other", "pm", PseudoMarginalSettings(), {}, y=1 - Y)
    with pytest.raises(GpdslError, match="different data"):
        gpdsl.compare(nuts, other)


def test_cli_writes_the_table_and_the_forest_plot(tmp_path, nuts_and_pm, capsys):
    nuts, pm = nuts_and_pm
    table, png = tmp_path / "table.md", tmp_path / "forest.png"
    status = main(["compare", str(pm), str(nuts), "--reference", str(nuts), "-o", str(table), "--plot", str(png)])
    assert status == 0
    out = capsys.readouterr().out
    text = table.read_text()
    for fragment in ("## Fits (reference: nuts)", "| pm | pm (ep, 16 importance draws) | 4 x 1000 |", "tau[2]",
                     "min ESS/s", "ratio to reference", "compile s", "warmup s", "sampling s", "mcse", "ess_tail"):
        assert fragment in text
    assert text.strip() in out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_cli_refuses_an_unknown_reference(tmp_path, nuts_and_pm, capsys):
    nuts, pm = nuts_and_pm
    assert main(["compare", str(pm), str(nuts), "--reference", str(tmp_path / "nope.nc")]) == 1
    assert "not one of the compared fits" in capsys.readouterr().err


def min_ess_per_second(path) -> tuple[float, float]:
    """The filippone2014 benchmark's measure, from a results file through the public API: the smallest bulk ESS of
    the hyperparameters, and it over the seconds of warmup plus sampling the file records."""
    results = gpdsl.read_results(path)
    bulk = gpdsl.results.ess(gpdsl.results.groups(results)["posterior"], ["sigma", "tau"], method="bulk")
    min_ess = min(float(np.min(np.asarray(bulk[name].values, dtype=float))) for name in ("sigma", "tau"))
    timings = gpdsl.results.results_json(results, "timings")
    return min_ess, min_ess / (timings["warmup"] + timings["sampling"])


def test_compare_gives_the_benchmark_ratio_from_the_same_files(nuts_and_pm):
    nuts, pm = nuts_and_pm
    (pm_ess, pm_rate), (_, nuts_rate) = min_ess_per_second(pm), min_ess_per_second(nuts)
    comparison = gpdsl.compare(nuts, pm)
    assert comparison.fits.loc["pm", "ratio_to_reference"] == pytest.approx(pm_rate / nuts_rate, rel=1e-12)
    assert comparison.fits.loc["pm", "min_ess_bulk"] == pytest.approx(pm_ess, rel=1e-12)


# On two short pm runs of the demo's model (real files, as the CLI writes them)


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("runs")
    data = folder / "pima.json"
    assert main(["data", "pima_tr", "--rows", "30", "--columns", "glu", "bmi", "--standardize", "-o", str(data)]) == 0
    paths = []
    for seed in (1, 2):
        path = folder / f"pm{seed}.nc"
        assert main(["sample", str(MODEL), "--data", str(data), "--method", "pm", "--approximation", "ep",
                     "--chains", "2", "--warmup", "100", "--draws", "200", "--seed", str(seed), "--quiet",
                     "--out", str(path)]) == 0
        paths.append(path)
    return paths


def test_two_runs_side_by_side_with_the_times_every_run_records(two_runs, capsys):
    assert main(["compare", *map(str, two_runs), "--labels", "first", "second"]) == 0
    out = capsys.readouterr().out
    for fragment in ("| sigma | first |", "| tau[1] | first |", "| tau[2] | first |", "|  | second |",
                     "first: max r_hat", "second: max r_hat",
                     "second: no ESS-per-second ratio to first is concluded: second and first not converged (!)"):
        assert fragment in out
    fits = gpdsl.compare(*two_runs).fits
    for label in ("pm1", "pm2"):
        row = fits.loc[label]
        assert 0 < row["sampling_s"] and 0 < row["compile_s"]
        assert row["compile_s"] + row["warmup_s"] + row["sampling_s"] <= row["total_s"]


def test_missing_files_and_unknown_variables_are_named(two_runs, tmp_path, capsys):
    assert main(["compare", str(two_runs[0]), str(tmp_path / "none.nc")]) == 1
    assert "does not exist" in capsys.readouterr().err
    assert main(["compare", *map(str, two_runs), "--vars", "rho"]) == 1
    assert "no posterior variable named 'rho'" in capsys.readouterr().err


def _unmixed(tmp_path, name, seed):
    """A fit whose chains sit apart: each chain's draws shifted by its own offset (r_hat far above 1.01)."""
    model, _ = check_file(MODEL)
    rng = np.random.default_rng(seed)
    offsets = np.arange(CHAINS)[:, None]
    posterior = {"sigma": SIGMA + offsets + 0.1 * rng.standard_normal((CHAINS, DRAWS)),
                 "tau": TAU + 0.1 * rng.standard_normal((CHAINS, DRAWS, D))}
    diverging = np.zeros((CHAINS, DRAWS), dtype=bool)
    diverging[0, :3] = True
    output = MethodOutput(posterior, sample_stats={"diverging": diverging},
                          timings={"compile": 1.0, "warmup": 1.0, "sampling": 1.0})
    results = method_results(model, {"N": N, "D": D, "X": X, "y": Y}, "pm", "gpdsl",
                             PseudoMarginalSettings(), seed, output)
    return write_netcdf(results, tmp_path / f"{name}.nc")


def test_an_unconverged_fit_is_flagged_and_gets_no_agreement_nor_ratio(tmp_path, nuts_and_pm, capsys):
    nuts, _ = nuts_and_pm
    unmixed = _unmixed(tmp_path, "unmixed", seed=3)
    comparison = gpdsl.compare(nuts, unmixed)
    assert comparison.fits.loc["nuts", "converged"] == 1
    assert comparison.fits.loc["unmixed", "converged"] == 0
    assert comparison.fits.loc["unmixed", "divergences"] == 3
    assert main(["compare", str(nuts), str(unmixed)]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith("| unmixed | pm"))
    assert row.split(" | ")[-3:-1] == ["3", "NO (!)"] and " (!) |" in row
    assert "agree within Monte Carlo error" not in out
    assert "times the minimum ESS per second" not in out
    assert "no conclusion on agreement: unmixed has not converged" in out
    assert "unmixed: no ESS-per-second ratio to nuts is concluded: unmixed not converged (!)" in out
    assert "divergences: NOT converged (!)" in out


def test_converged_fits_get_the_agreement_and_the_ratio(nuts_and_pm, capsys):
    assert main(["compare", *map(str, nuts_and_pm)]) == 0
    out = capsys.readouterr().out
    assert "the posteriors agree within Monte Carlo error" in out
    assert "pm: " in out and "times the minimum ESS per second of nuts" in out
    assert out.count(": converged") == 2 and "nuts: max r_hat" in out
