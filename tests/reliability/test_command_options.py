"""Options of the commands besides sample and fit (issue 40): summary, plot, compare, data, forecast, pm-variance,
check, methods and compile given unknown names, out-of-range numbers, mismatched counts or files of the wrong kind
refuse in one line naming what is wrong, or do what was asked; never an internal error."""

import json

import numpy as np
import pytest

from tests.reliability.helpers import no_internal_error, refused, write_json


@pytest.fixture(scope="module")
def work(fits):
    write_json(fits / "series.json", {"y": np.sin(np.arange(60) / 5) + 0.2 * np.random.default_rng(1).normal(size=60)})
    (fits / "labels.json").write_text(json.dumps({"labels": [0, 1, 2] * 10}))
    (fits / "short_labels.json").write_text(json.dumps({"labels": [0, 1]}))
    (fits / "two_labels.json").write_text(json.dumps({"a": [1], "b": [2]}))
    return fits


REFUSED = [
    (["summary", "{ml}", "--vars", "nope"], "no posterior variable named 'nope'"),
    (["summary", "{ml}", "--group", "predictions"], "results have no predictions group"),
    (["summary", "{ml}", "--group", "posterior_predictive"], "results have no posterior_predictive group"),
    (["summary", "{ml}", "--group", "sample_stats"], "argument --group: invalid choice"),
    (["summary", "{work}/reg.json"], "is not a readable NetCDF results file"),
    (["plot", "{ml}", "--kind", "predictions", "-o", "{png}"], "results have no predictions group"),
    (["plot", "{ml}", "--kind", "latent", "-o", "{png}"], "hold no variational fit of latent inputs to plot"),
    (["plot", "{vem}", "--kind", "latent", "--dims", 0, 5, "-o", "{png}"], "--dims 0 5: the latent dimensions are 1 to 2"),
    (["plot", "{vem}", "--kind", "latent", "--dims", 1, "-o", "{png}"], "argument --dims: expected 2 arguments"),
    (["plot", "{vem}", "--kind", "latent", "--labels", "{work}/short_labels.json", "-o", "{png}"],
     "labels must have one entry per latent point (30); got shape (2,)"),
    (["plot", "{vem}", "--kind", "latent", "--labels", "{work}/two_labels.json", "-o", "{png}"],
     "name the labels with"),
    (["plot", "{vem}", "--kind", "latent", "--labels", "{work}/labels.json:nope", "-o", "{png}"],
     "has no variable 'nope'"),
    (["plot", "{vem}", "--kind", "latent", "--labels", "{work}/missing.json", "-o", "{png}"], "does not exist"),
    (["plot", "{ml}", "--vars", "nope", "-o", "{png}"], "no posterior variable named 'nope'"),
    (["plot", "{ml}", "--kind", "forest", "-o", "{png}"], "argument --kind: invalid choice: 'forest'"),
    (["compare", "{ml}", "--labels", "a", "b"], "2 labels for 1 fits"),
    (["compare", "{ml}", "--reference", "{vem}"], "is not one of the compared fits"),
    (["compare", "{ml}", "--reference", "5"], "is not one of the compared fits"),
    (["compare", "{ml}", "--vars", "nope"], "no posterior variable named 'nope'"),
    (["compare", "{ml}", "-o", "{work}/t.md", "--plot", "{work}/t.md"], "it is an input of this run"),
    (["compare", "{ml}", "-o", "{ml}"], "it is an input of this run"),
    (["data", "pima_tr", "--rows", 10**12, "-o", "{new}"], "rows must be an integer in [1, 200]"),
    (["data", "pima_tr", "--offset", 10**12, "-o", "{new}"], "the offset must be an integer in [0, 200)"),
    (["data", "pima_tr", "--columns", "nope", "-o", "{new}"], "did you mean"),
    (["data", "pima_tr", "--as", "gplvm", "--inputs", "glu", "nope", "-o", "{new}"], "did you mean"),
    (["data", "nope", "-o", "{new}"], "unknown dataset 'nope'"),
    (["data", "tegner_sequential", "--steps", 0, "-o", "{new}"], "steps must be an integer >= 1"),
    (["data", "tegner_sequential", "--seed", -1, "-o", "{new}"], "seed must be an integer >= 0"),
    (["data", "pima_tr", "--steps", 3, "-o", "{new}"], "a table: --steps and --seed are for simulated datasets"),
    (["data", "tegner_sequential", "--as", "xy", "-o", "{new}"], "a simulated dataset: it takes --steps"),
    (["data", "pima_tr"], "give a dataset NAME and -o FILE.json"),
    (["pm-variance", "{work}/supervised_gplvm.gpm", "--data", "{work}/sup.json", "--from", "{ml}", "--draw", 1, 1],
     "holds a ml run, not pm-gplvm"),
    (["pm-variance", "{work}/gp_regression.gpm", "--data", "{work}/reg.json", "--seed", 1, "--replicates", 2],
     "pm-gplvm needs a GPLVM with GP-prior latents"),
    (["pm-variance", "{work}/supervised_gplvm.gpm", "--data", "{work}/sup.json", "--replicates", -1], "--replicates"),
    (["check", "{work}/reg.json"], "a block starts with its name"),
    (["compile", "{work}/reg.json"], "a block starts with its name"),
    (["compile", "{work}/gp_regression.gpm", "--target", "c"], "argument --target: invalid choice"),
    (["methods", "{work}/nope.gpm"], "no such model file"),
    (["forecast", "{work}/gp_classification.gpm", "--data", "{work}/series.json", "--lag", 3, "--out", "{out}"],
     "forecast needs GP regression"),
    (["forecast", "{work}/gp_narx.gpm", "--data", "{work}/reg.json", "--lag", 3, "--out", "{out}"],
     "name the series with --series NAME"),
    (["forecast", "{work}/gp_narx.gpm", "--data", "{work}/reg.json", "--series", "X", "--lag", 3, "--out", "{out}"],
     "the series 'X' must be a vector; it has shape (12, 2)"),
    (["forecast", "{work}/gp_narx.gpm", "--data", "{work}/reg.json", "--series", "nope", "--lag", 3, "--out", "{out}"],
     "has no variable 'nope'"),
    (["forecast", "{work}/gp_narx.gpm", "--data", "{work}/series.json", "--lag", 59, "--out", "{out}"],
     "cannot train on 1"),
    (["forecast", "{work}/gp_narx.gpm", "--data", "{work}/series.json", "--lag", 60, "--out", "{out}"],
     "has no lag vector of length 60"),
    (["forecast", "{work}/gp_narx.gpm", "--data", "{work}/series.json", "--lag", 3, "--train", 1, "--out", "{out}"],
     "cannot train on 1"),
    (["forecast", "{work}/gp_narx.gpm", "--data", "{work}/series.json", "--lag", 3, "--train", 58, "--out", "{out}"],
     "cannot train on 58"),
    (["forecast", "{work}/gp_narx.gpm", "--data", "{work}/series.json", "--lag", 30, "--psi", "gauss-hermite",
      "--gh-nodes", 10, "--out", "{out}"], "a Gauss-Hermite rule with 10 nodes in 30 dimensions"),
    (["forecast", "{work}/gp_narx.gpm", "--data", "{work}/series.json", "--lag", 3, "--training-variance", "x",
      "--out", "{out}"], "--training-variance takes 'noise' or a number"),
]


def filled(argv, work):
    names = {"work": work, "ml": work / "ml.nc", "vem": work / "vem.nc", "png": work / "option.png",
             "new": work / "new.json", "out": work / "option.nc"}
    return [part.format(**names) if isinstance(part, str) else part for part in argv]


@pytest.mark.parametrize("argv, culprit", REFUSED, ids=[" ".join(map(str, a[:4])) for a, _ in REFUSED])
def test_other_commands_refuse_what_they_cannot_do(work, capsys, argv, culprit):
    refused(filled(argv, work), capsys, culprit.format(work=work), work / "option.png")
    for name in ("option.nc", "new.json"):
        assert not (work / name).exists()


DONE = [
    ["summary", "{vem}", "--vars", "X"],
    ["summary", "{ml}", "--vars", "noise", "noise"],
    ["summary", "{ml}", "--standardized"],
    ["plot", "{ml}", "--kind", "pair", "-o", "{work}/pair.png"],
    ["plot", "{vem}", "--kind", "trace", "--dims", 1, 2, "-o", "{work}/trace.png"],
    ["compare", "{ml}", "{ml}"],
    ["compare", "{ml}", "{ml}", "--labels", "a", "a"],
    ["compare", "{ml}", "{vem}"],
    ["data", "pima_tr", "--columns", "glu", "glu", "-o", "{work}/twice.json"],
    ["data", "--list", "pima_tr"],
]


@pytest.mark.parametrize("argv", DONE, ids=[" ".join(map(str, a[:4])) for a in DONE])
def test_other_commands_do_what_was_asked(work, capsys, argv):
    no_internal_error(filled(argv, work), capsys, statuses=(0,))
