"""gpdsl.results: build, NetCDF round trip, atomic writes, summary, warnings, plots."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
import xarray as xr

import gpdsl
from gpdsl.errors import DataError, GpdslError
from gpdsl.results.plots import POSTERIOR_KINDS
from gpdsl.results import (
    arviz_compat,
    build_results,
    format_summary,
    plot,
    read_netcdf,
    sampler_warnings,
    summarize,
    write_netcdf,
)

CHAINS, DRAWS = 4, 200
MU, TAU = 3.0, np.array([-1.0, 0.0, 2.0])
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _sample_stats(rng, chains=CHAINS, draws=DRAWS):
    return {
        "lp": rng.normal(-10, 1, (chains, draws)),
        "acceptance_rate": rng.uniform(0.7, 1.0, (chains, draws)),
        "diverging": np.zeros((chains, draws), dtype=bool),
        "tree_depth": np.full((chains, draws), 3, dtype=np.int64),
        "step_size": np.full((chains, draws), 0.4),
        "energy": rng.normal(10, 1, (chains, draws)),
        "n_steps": np.full((chains, draws), 7, dtype=np.int64),
    }


def _draws(seed=0):
    rng = np.random.default_rng(seed)
    return {
        "mu": rng.normal(MU, 1.0, (CHAINS, DRAWS)),
        "tau": TAU + rng.normal(0.0, 0.5, (CHAINS, DRAWS, 3)),
        "W": rng.normal(0.0, 1.0, (CHAINS, DRAWS, 3, 2)),
    }, _sample_stats(rng)


ATTRS = {
    "method": "nuts",
    "settings": json.dumps({"chains": CHAINS, "draws": DRAWS, "max_tree_depth": 10}),
    "seed": 1234,
    "wall_time": 1.5,
    "model_hash": "abc123",
}


@pytest.fixture
def results():
    posterior, stats = _draws()
    return build_results(
        posterior,
        dims={"tau": ["N"], "W": ["N", "Q"], "y": ["N"], "X": ["N", "D"]},
        sample_stats=stats,
        observed_data={"y": np.array([0.5, 1.5, -0.2])},
        constant_data={"X": np.arange(6.0).reshape(3, 2)},
        posterior_predictive={"y": np.zeros((CHAINS, DRAWS, 3))},
        attrs=ATTRS,
    )


# build ---------------------------------------------------------------------------------------


def test_build_returns_the_installed_arviz_container(results):
    assert isinstance(results, arviz_compat.Container)


def test_build_names_dims_after_size_symbols(results):
    groups = arviz_compat.groups(results)
    assert groups["posterior"]["tau"].dims == ("chain", "draw", "N")
    assert groups["posterior"]["W"].dims == ("chain", "draw", "N", "Q")
    assert groups["posterior"]["mu"].dims == ("chain", "draw")
    assert groups["observed_data"]["y"].dims == ("N",)
    assert groups["constant_data"]["X"].dims == ("N", "D")
    assert groups["sample_stats"]["diverging"].dims == ("chain", "draw")


def test_build_puts_attrs_on_root_and_every_group(results):
    for attrs in [arviz_compat.root_attrs(results)] + [
        ds.attrs for ds in arviz_compat.groups(results).values()
    ]:
        assert attrs["method"] == "nuts"
        assert attrs["model_hash"] == "abc123"
        assert attrs["gpdsl_version"] == gpdsl.__version__
        assert "created_at" in attrs


def test_element_coordinates_count_from_one_as_the_language_does(results, tmp_path):
    path = write_netcdf(results, tmp_path / "fit.nc")
    posterior = arviz_compat.groups(read_netcdf(path))["posterior"]
    assert list(posterior["N"].values) == [1, 2, 3] and list(posterior["Q"].values) == [1, 2]
    assert posterior["chain"].values[0] == 0 and posterior["draw"].values[0] == 0
    assert float(posterior["tau"].sel(N=1).mean()) == pytest.approx(float(posterior["tau"].isel(N=0).mean()))


def test_build_rejects_dims_that_disagree_in_length():
    with pytest.raises(DataError, match="'N'"):
        build_results(
            {"a": np.zeros((2, 5, 3)), "b": np.zeros((2, 5, 4))}, dims={"a": ["N"], "b": ["N"]}
        )


def test_build_rejects_wrong_number_of_dims():
    with pytest.raises(DataError, match="dims"):
        build_results({"a": np.zeros((2, 5, 3))}, dims={"a": ["N", "D"]})


def test_build_rejects_mismatched_chains():
    with pytest.raises(DataError, match="chains"):
        build_results({"a": np.zeros((2, 5))}, sample_stats={"lp": np.zeros((3, 5))})


def test_build_names_unnamed_dims_and_separates_repeated_dims():
    rng = np.random.default_rng(2)
    built = build_results(
        {"v": rng.normal(size=(2, 5, 4)), "K": rng.normal(size=(2, 5, 3, 3))},
        dims={"K": ["D", "D"]},
        coords={"D": ["a", "b", "c"]},
    )
    posterior = arviz_compat.groups(built)["posterior"]
    assert posterior["v"].dims == ("chain", "draw", "v_dim_0")
    assert posterior["K"].dims == ("chain", "draw", "D", "D__2")
    assert list(posterior["D__2"].values) == ["a", "b", "c"]
    assert "K[a, c]" in summarize(built).index


def test_build_rejects_repeated_dim_of_two_lengths():
    with pytest.raises(DataError, match="repeats dim 'D'"):
        build_results({"K": np.zeros((2, 5, 3, 4))}, dims={"K": ["D", "D"]})


def test_build_stores_awkward_attrs_as_netcdf_values(tmp_path):
    built = build_results(
        {"a": np.zeros((2, 5))}, attrs={"settings": {"x": 1}, "flag": True, "gone": None}
    )
    back = read_netcdf(write_netcdf(built, tmp_path / "r.nc"))
    attrs = arviz_compat.root_attrs(back)
    assert json.loads(attrs["settings"]) == {"x": 1}
    assert int(attrs["flag"]) == 1
    assert "gone" not in attrs


# storage -------------------------------------------------------------------------------------


def test_round_trip_preserves_values_dims_groups_and_attrs(results, tmp_path):
    path = write_netcdf(results, tmp_path / "fit.nc")
    back = read_netcdf(path)
    assert isinstance(back, arviz_compat.Container)
    before, after = arviz_compat.groups(results), arviz_compat.groups(back)
    assert set(after) == {
        "posterior",
        "sample_stats",
        "observed_data",
        "constant_data",
        "posterior_predictive",
    }
    for name, dataset in before.items():
        xr.testing.assert_identical(after[name], dataset)
    assert after["sample_stats"]["diverging"].dtype == bool
    root = arviz_compat.root_attrs(back)
    for key, value in ATTRS.items():
        assert root[key] == value
    assert root["gpdsl_version"] == gpdsl.__version__


def test_written_file_opens_with_plain_arviz_or_xarray(results, tmp_path):
    path = write_netcdf(results, tmp_path / "fit.nc")
    if arviz_compat.ARVIZ_MAJOR == 0:
        import arviz as az

        plain = az.from_netcdf(str(path))
        assert "posterior" in plain.groups()
        np.testing.assert_allclose(plain.posterior["mu"].values, _draws()[0]["mu"])
    else:
        with xr.open_datatree(path) as plain:
            assert "posterior" in plain.children
            np.testing.assert_allclose(plain["posterior"]["mu"].values, _draws()[0]["mu"])


def test_write_failure_leaves_no_partial_file(results, tmp_path, monkeypatch):
    def fail_midway(obj, path):
        with open(path, "wb") as stream:
            stream.write(b"\x89HDF\r\n\x1a\n partial")
        raise OSError("disk full")

    monkeypatch.setattr(arviz_compat, "to_netcdf", fail_midway)
    with pytest.raises(GpdslError, match="disk full"):
        write_netcdf(results, tmp_path / "fit.nc")
    assert list(tmp_path.iterdir()) == []


def test_write_failure_keeps_existing_file(results, tmp_path, monkeypatch):
    path = write_netcdf(results, tmp_path / "fit.nc")
    good = path.read_bytes()

    def fail_midway(obj, target):
        with open(target, "wb") as stream:
            stream.write(b"garbage")
        raise RuntimeError("writer crashed")

    monkeypatch.setattr(arviz_compat, "to_netcdf", fail_midway)
    with pytest.raises(RuntimeError, match="writer crashed"):
        write_netcdf(results, path)
    assert path.read_bytes() == good
    assert [p.name for p in tmp_path.iterdir()] == ["fit.nc"]
    read_netcdf(path)


def test_write_replaces_an_existing_file(results, tmp_path):
    path = tmp_path / "fit.nc"
    path.write_bytes(b"old")
    write_netcdf(results, path)
    assert "posterior" in arviz_compat.groups(read_netcdf(path))


def test_write_rejects_a_non_results_object(tmp_path):
    with pytest.raises(GpdslError, match="expected"):
        write_netcdf({"mu": 1}, tmp_path / "fit.nc")


def test_write_into_missing_directory_is_a_gpdsl_error(results, tmp_path):
    with pytest.raises(GpdslError, match="does not exist"):
        write_netcdf(results, tmp_path / "nowhere" / "fit.nc")


def test_read_missing_file(tmp_path):
    with pytest.raises(GpdslError, match="does not exist"):
        read_netcdf(tmp_path / "missing.nc")


def test_read_non_netcdf_file(tmp_path):
    path = tmp_path / "notes.nc"
    path.write_text("not a netcdf file\n")
    with pytest.raises(GpdslError, match="not a readable NetCDF"):
        read_netcdf(path)


def test_read_netcdf_not_written_by_gpdsl(tmp_path):
    path = tmp_path / "other.nc"
    xr.Dataset({"x": ("i", np.arange(3.0))}).to_netcdf(path, engine="netcdf4")
    with pytest.raises(GpdslError, match="not a gpdsl results file"):
        read_netcdf(path)


# summary -------------------------------------------------------------------------------------


def test_summary_has_one_row_per_element_and_the_columns(results):
    table = summarize(results)
    assert list(table.columns) == [
        "mean", "mcse_mean", "sd", "q5", "q50", "q95", "ess_bulk", "ess_tail", "r_hat"
    ]
    assert list(table.index[:4]) == ["mu", "tau[1]", "tau[2]", "tau[3]"]
    assert "W[3, 2]" in table.index and "W[0, 0]" not in table.index
    assert len(table) == 1 + 3 + 6


def test_summary_recovers_known_means_within_mcse(results):
    table = summarize(results, var_names=["mu", "tau"])
    expected = {"mu": MU, "tau[1]": TAU[0], "tau[2]": TAU[1], "tau[3]": TAU[2]}
    for label, mean in expected.items():
        row = table.loc[label]
        assert abs(row["mean"] - mean) < 4 * row["mcse_mean"]
        assert abs(row["r_hat"] - 1.0) < 0.02
        assert row["ess_bulk"] > 400
        assert row["q5"] < row["q50"] < row["q95"]
    assert table.loc["mu", "sd"] == pytest.approx(1.0, rel=0.1)
    assert table.loc["mu", "q95"] - table.loc["mu", "q5"] == pytest.approx(2 * 1.645, rel=0.1)


def test_summary_diagnostics_come_from_arviz(results):
    table = summarize(results, var_names=["tau"])
    reference = arviz_compat.summary(results, var_names=["tau"])
    for column in ["ess_bulk", "ess_tail", "r_hat", "mcse_mean"]:
        np.testing.assert_allclose(table[column].values, reference[column].values, rtol=1e-6)


def test_summary_unknown_variable(results):
    with pytest.raises(GpdslError, match="no posterior variable named 'nope'"):
        summarize(results, var_names=["nope"])


def test_separated_chains_give_high_rhat_and_a_warning():
    rng = np.random.default_rng(7)
    draws = rng.normal(0.0, 1.0, (2, 500))
    draws[1] += 10.0
    built = build_results({"theta": draws})
    table = summarize(built)
    assert table.loc["theta", "r_hat"] > 1.1
    warnings = sampler_warnings(built, table)
    assert any("r_hat" in w and "theta" in w for w in warnings)
    assert any("ess_bulk" in w for w in warnings)


def test_clean_run_has_no_sampler_warnings():
    rng = np.random.default_rng(3)
    built = build_results(
        {"mu": rng.normal(size=(4, 1000))}, sample_stats=_sample_stats(rng, 4, 1000)
    )
    assert sampler_warnings(built) == []


def test_warnings_report_divergences_tree_depth_and_low_ebfmi():
    rng = np.random.default_rng(11)
    stats = _sample_stats(rng)
    stats["diverging"][0, :5] = True
    stats["diverging"][2, 10:12] = True
    stats["tree_depth"][1, :3] = 6
    stats["energy"][3] = np.cumsum(rng.normal(0, 0.05, DRAWS))
    built = build_results(
        {"mu": rng.normal(size=(CHAINS, DRAWS))},
        sample_stats=stats,
        attrs={"settings": json.dumps({"max_tree_depth": 6})},
    )
    warnings = sampler_warnings(built)
    assert any(w.startswith("7 of 800 transitions") and "divergence" in w for w in warnings)
    assert any(w.startswith("3 of 800") and "tree depth of 6" in w for w in warnings)
    ebfmi = [w for w in warnings if "E-BFMI" in w]
    assert len(ebfmi) == 1 and "chain 3" in ebfmi[0] and "chain 0" not in ebfmi[0]


def test_tree_depth_defaults_to_ten():
    rng = np.random.default_rng(5)
    stats = _sample_stats(rng)
    stats["tree_depth"][0, :4] = 10
    built = build_results({"mu": rng.normal(size=(CHAINS, DRAWS))}, sample_stats=stats)
    assert any("4 of 800" in w and "tree depth of 10" in w for w in sampler_warnings(built))


def test_format_summary_aligns_rows_and_lists_warnings(results):
    table = summarize(results, var_names=["mu", "tau"])
    text = format_summary(table, ["2 of 800 transitions ended with a divergence"])
    lines = text.splitlines()
    assert lines[0].split() == list(table.columns)
    widths = {len(line) for line in lines[: len(table) + 1]}
    assert len(widths) == 1
    assert "Warnings:" in text and "  - 2 of 800 transitions" in text
    assert "No sampler warnings." in format_summary(table, [])


def test_a_one_draw_fit_is_summarised_as_its_estimates_without_nan(recwarn):
    fit = build_results({"mu": np.full((1, 1), 2.5), "tau": TAU.reshape(1, 1, 3)}, dims={"tau": ["N"]},
                        attrs={**ATTRS, "method": "ml"})
    table = summarize(fit)
    text = format_summary(table, sampler_warnings(fit, table))
    assert text.splitlines()[0].split() == ["estimate"]
    assert "NaN" not in text and "nan" not in text and "a point estimate (one draw)" in text
    assert "tau[3]" in text and "2.5" in text


def test_the_runs_own_warnings_are_listed_with_the_samplers(results):
    posterior, stats = _draws()
    report = {"stuck_chains": [2], "warnings": ["1 of 4 chains did not move in warmup: chain 2 (mu = 3.)"]}
    built = build_results(posterior, sample_stats=stats, attrs={**ATTRS, "report": json.dumps(report)})
    assert report["warnings"][0] in sampler_warnings(built)


def test_undefined_diagnostics_are_shown_as_dashes(results):
    table = summarize(results, var_names=["mu"])
    table.loc["mu", "r_hat"] = np.nan
    assert format_summary(table, []).splitlines()[1].split()[-1] == "-"


# plots ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", POSTERIOR_KINDS)
def test_each_plot_kind_writes_a_png(results, tmp_path, kind):
    path = plot(results, kind, tmp_path / f"{kind}.png")
    data = path.read_bytes()
    assert data.startswith(PNG_SIGNATURE)
    assert len(data) > 1000


def test_plot_selected_vector_variable(results, tmp_path):
    path = plot(results, "posterior", tmp_path / "tau.png", var_names=["tau"])
    assert path.read_bytes().startswith(PNG_SIGNATURE)


def test_plot_many_elements_is_limited(tmp_path):
    rng = np.random.default_rng(4)
    built = build_results({"f": rng.normal(size=(2, 50, 40))}, dims={"f": ["N"]})
    for kind in POSTERIOR_KINDS:
        assert plot(built, kind, tmp_path / f"{kind}.png").read_bytes().startswith(PNG_SIGNATURE)


def test_unknown_plot_kind_lists_valid_kinds(results, tmp_path):
    with pytest.raises(GpdslError, match="trace, pair, posterior"):
        plot(results, "forest", tmp_path / "x.png")
    assert not (tmp_path / "x.png").exists()


def test_plot_unknown_variable(results, tmp_path):
    with pytest.raises(GpdslError, match="no posterior variable"):
        plot(results, "trace", tmp_path / "x.png", var_names=["nope"])


def test_atomic_writes_give_files_the_usual_permissions(tmp_path):
    import os

    from gpdsl.storage.atomic import atomic_write_text

    umask = os.umask(0o022)
    try:
        path = atomic_write_text(tmp_path / "new.txt", "x")
        assert path.stat().st_mode & 0o777 == 0o644
        os.chmod(path, 0o600)
        atomic_write_text(path, "y")
        assert path.stat().st_mode & 0o777 == 0o600
    finally:
        os.umask(umask)


def test_the_trace_plot_numbers_chains_from_one_and_names_the_flag_that_chooses_elements():
    from gpdsl.results import arviz_compat, plots
    from gpdsl.results.elements import elements

    rng = np.random.default_rng(5)
    built = build_results({"f": rng.normal(size=(3, 20, 40))}, dims={"f": ["N"]})
    posterior = arviz_compat.groups(built)["posterior"]
    figure = plots._trace(posterior, list(elements(posterior, ["f"])))
    labels = [text.get_text() for text in figure.axes[0].get_legend().get_texts()]
    assert labels == ["chain 1", "chain 2", "chain 3"]
    assert "choose others with --vars" in figure._suptitle.get_text()


def test_the_diagnostics_of_one_chain_print_no_arviz_notice(capfd):
    from gpdsl.results import arviz_compat

    rng = np.random.default_rng(6)
    built = build_results({"a": rng.normal(size=(1, 50))})
    table = summarize(built)
    assert "Shape validation" not in capfd.readouterr().err
    assert np.isnan(table.loc["a", "r_hat"]) or table.loc["a", "r_hat"] > 0
    assert arviz_compat.groups(built)["posterior"].sizes["chain"] == 1


def test_loo_of_a_tail_without_spread_is_nan_with_its_warning_under_arviz_1():
    from gpdsl.results import arviz_compat

    rng = np.random.default_rng(0)
    values = rng.normal(size=(2, 50, 4))
    values[..., 0] = -1.0   # every draw of point 0 equal: its importance ratios' tail has no spread
    container = arviz_compat.make_container(
        {"posterior": xr.Dataset({"a": (("chain", "draw"), rng.normal(size=(2, 50)))}),
         "log_likelihood": xr.Dataset({"y": (("chain", "draw", "y_dim_0"), values)})}, {})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # ArviZ 0.x's Pareto k warning, which the flag carries
        loo = arviz_compat.loo(container)
    assert loo["warning"] == 1.0
    assert np.isnan(loo["elpd_loo"]) if arviz_compat.ARVIZ_MAJOR >= 1 else np.isfinite(loo["elpd_loo"])
