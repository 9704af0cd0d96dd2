"""Numerical corners (issue 40): a model with no parameter leaves the methods that sample or fit hyperparameters alone
nothing to run; it is refused before the run, naming the method, where it was an internal error (ep-ml's
StopIteration, ml's empty reduction) or a failure after a minute (nuts) or a misleading one (pm: chains that cannot
start). The methods that sample f, or fit inducing inputs, run it."""

import pytest

from tests.reliability.helpers import make_work, no_internal_error, refused

REGRESSION = """data { int N; int D; matrix[N, D] X; vector[N] y; }
model { f ~ gp(X, 1.0 * rbf(lengthscale = 1.0)); y ~ normal(f, 0.5); }
"""
CLASSIFICATION = """data { int N; int D; matrix[N, D] X; array[N] int<lower=0, upper=1> y; }
model { f ~ gp(X, 1.0 * rbf(lengthscale = 1.0)); y ~ bernoulli_probit(f); }
"""
NOTHING = [("ml", "fit", "regression"), ("nuts", "sample", "regression"), ("pm", "sample", "regression"),
           ("pm", "sample", "classification"),
           ("mcmc-ep", "sample", "classification"), ("ep-ml", "sample", "classification")]


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    root = make_work(tmp_path_factory.mktemp("numerics"))
    (root / "regression.gpm").write_text(REGRESSION)
    (root / "classification.gpm").write_text(CLASSIFICATION)
    return root


def data_of(work, model):
    return work / ("reg.json" if model == "regression" else "cls.json")


@pytest.mark.parametrize("method, command, model", NOTHING, ids=[f"{n[0]}-{n[2]}" for n in NOTHING])
def test_a_model_without_parameters_is_refused_by_a_method_that_has_nothing_to_run(work, capsys, method, command,
                                                                                   model):
    out = work / "nothing.nc"
    refused([command, work / f"{model}.gpm", "--data", data_of(work, model), "--method", method, "--seed", 1, "--out",
             out], capsys, f"{method} needs a parameter", out, one_line=True)


@pytest.mark.parametrize("model", ["regression", "classification"])
def test_the_listing_says_which_methods_have_nothing_to_run(work, capsys, model):
    no_internal_error(["methods", work / f"{model}.gpm"], capsys, statuses=(0,))
    from gpdsl.api import check_file
    from gpdsl.registry import methods

    checked, _ = check_file(work / f"{model}.gpm")
    refusing = {m.name for m in methods().values() if m.parameters_refusal(checked)}
    assert refusing == {name for name, _, kind in NOTHING if kind == model}
    assert "gibbs" not in refusing


@pytest.mark.slow
@pytest.mark.parametrize("method, command, model", [("gibbs", "sample", "classification"),
                                                     ("gibbs", "sample", "regression"), ("sgpr", "fit", "regression")])
def test_the_methods_that_sample_f_or_fit_inducing_inputs_run_a_model_without_parameters(work, capsys, method, command,
                                                                                         model):
    flags = ["--chains", 2, "--warmup", 5, "--draws", 5] if method == "gibbs" else ["--num-inducing", 3]
    no_internal_error([command, work / f"{model}.gpm", "--data", data_of(work, model), "--method", method, "--seed", 1,
                       "--quiet", "--out", work / f"{method}_{model}.nc", *flags], capsys)
    assert (work / f"{method}_{model}.nc").is_file()
