"""Extending gpdsl (docs/extending.md): a kernel with closed-form psi statistics, a likelihood, a prior, a method
and a model family, each a toy registered through its table's public call, used end to end through the public
paths, and unregistered afterwards."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from importlib import metadata
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gpdsl
from gpdsl import cli, registry
from gpdsl.backends.jax.lowering import lower
from gpdsl.backends.jax.simulate import simulate
from gpdsl.backends.stan.codegen import generate_stan
from gpdsl.backends.stan.stanc import check_program
from gpdsl.errors import MethodError, ModelCheckError
from gpdsl.inference.families.gp_regression import GPRegression, gp_regression_view
from gpdsl.inference.methods.ml import ml_output, ml_report
from gpdsl.inference.optimise.marginal_likelihood import fit_marginal_likelihood
from gpdsl.ir import nodes as ir
from gpdsl.ir.families import FAMILIES, Family, Refusal, register_family, unregister_family
from gpdsl.ir.family_forms import gp_regression_form
from gpdsl.kernel_table import KERNEL_SPECS, KernelParam, KernelSpec, StanCall
from gpdsl.kernels import KERNELS, Constant, Kernel, White, register_kernel, unregister_kernel
from gpdsl.kernels.params import sum_over_inputs
from gpdsl.kernels.psi import (PsiMethod, analytic_supported, full_dims, psi_statistics, register_cross, register_term,
                               unregister_closed_form)
from gpdsl.likelihoods import LIKELIHOODS, Likelihood, register_likelihood, unregister_likelihood
from gpdsl.priors import PRIORS, Prior, register_prior, unregister_prior
from gpdsl.priors.base import stan_lpdf
from gpdsl.registry import Method, methods, register, unregister
from gpdsl.results import arviz_compat
from gpdsl.results.method_output import MethodOutput, results_json
from gpdsl.semantics import catalog
from gpdsl.settings import MLSettings, option, require_positive_int

Z_LIMIT = 5.0
"""Standard errors within which a Monte Carlo mean must fall (a false alarm has probability ~6e-7 per mean)."""


def _check(text: str):
    model, _ = gpdsl.check(text)
    return model


def _statement(model, kind):
    return next(statement for statement, _ in model.walk() if isinstance(statement, kind))


# --- a kernel with closed-form psi statistics ---------------------------------------------------------------------

TOY_AFFINE_STAN = """
/**
 * toy_affine: variance * (x . x' + bias).
 *
 * @param variance  scale of the inner product
 * @param bias      constant added to the inner product
 */
matrix toy_affine_kernel(array[] vector x1, array[] vector x2, real variance, real bias) {
  matrix[size(x1), size(x2)] K;
  for (i in 1:size(x1)) {
    for (j in 1:size(x2)) {
      K[i, j] = variance * (dot_product(x1[i], x2[j]) + bias);
    }
  }
  return K;
}
"""


class ToyAffine(Kernel):
    """``variance * (sum_d x_d x'_d + bias)``."""

    spec = KernelSpec("toy_affine", (KernelParam("variance", default=1.0), KernelParam("bias", default=1.0)),
                      stan=(StanCall("toy_affine_kernel", ("variance", "bias"), code=TOY_AFFINE_STAN),),
                      doc="variance * (sum_d x_d x'_d + bias)")

    def __init__(self, variance=1.0, bias=1.0, *, active_dims=None):
        self._set_hyperparameters(active_dims, variance=variance, bias=bias)

    def evaluate(self, x1, x2):
        return self.variance * (sum_over_inputs(x1 * x2) + self.bias)


class ToyAffineTerm(NamedTuple):
    """A toy_affine kernel over all ``Q`` latent dimensions (``seen``: 1 on the dimensions it sees, else 0)."""

    variance: jax.Array
    bias: jax.Array
    seen: jax.Array

    @classmethod
    def from_kernel(cls, kernel, Q):
        return cls(kernel.variance, kernel.bias, full_dims(jnp.ones(()), kernel, "variance", Q))

    def psi0(self, mean, variance):
        return self.variance * ((jnp.square(mean) + variance) @ self.seen + self.bias)

    def psi1(self, Z, mean, variance):
        return self.variance * ((mean * self.seen) @ Z.T + self.bias)


def toy_affine_cross(t1, t2, psi1_1, psi1_2, inputs, symmetric):
    """``sum_n W[n, g] E[(x.z + c1)(x.z' + c2)]`` from the weighted first and second moments of the points."""
    Z, mean, variance, W = inputs
    second = jnp.einsum("ng,nq,nr->gqr", W, mean, mean) + jax.vmap(jnp.diag)(W.T @ variance)
    Z1, Z2, first = Z * t1.seen, Z * t2.seen, W.T @ mean
    return t1.variance * t2.variance * (jnp.einsum("mq,gqr,kr->gmk", Z1, second, Z2)
                                        + t2.bias * (first @ Z1.T)[:, :, None]
                                        + t1.bias * (first @ Z2.T)[:, None, :]
                                        + t1.bias * t2.bias * jnp.sum(W, 0)[:, None, None])


REGRESSION_WITH_TOY_KERNEL = """
data { int N; int D; matrix[N, D] X; vector[N] y; }
parameters {
  real<lower=0> v ~ gamma(2, 2);
  real<lower=0> s ~ gamma(2, 4);
}
model {
  f ~ gp(X, toy_affine(variance = v, bias = 0.5));
  y ~ normal(f, s);
}
"""

GPLVM_WITH_TOY_KERNEL = """
data { int N; int D; int Q; matrix[N, D] Y; }
parameters { real<lower=0> v; real<lower=0> noise; }
latent { matrix[N, Q] X; }
model {
  X ~ normal(0, 1);
  F ~ gp(X, toy_affine(variance = v, bias = 0.5));
  Y ~ normal(F, sqrt(noise));
}
"""


@pytest.fixture
def toy_kernel():
    register_kernel(ToyAffine)
    register_term(ToyAffine)(ToyAffineTerm)
    register_cross(ToyAffineTerm, ToyAffineTerm)(toy_affine_cross)
    yield ToyAffine
    unregister_closed_form(ToyAffine)
    unregister_kernel("toy_affine")


def test_kernel_registered_with_closed_form_psi(toy_kernel):
    model = _check(REGRESSION_WITH_TOY_KERNEL)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(7, 2))
    data, _ = gpdsl.load_data({"N": 7, "D": 2, "X": X, "y": rng.normal(size=7)}, model)
    jax_model = lower(model, data)
    env = jax_model.environment({"v": jnp.asarray(0.7), "s": jnp.asarray(0.3)})
    gp = _statement(model, ir.GPStatement)
    kernel = jax_model.gp_kernel(gp, env)
    assert type(kernel) is ToyAffine
    np.testing.assert_allclose(kernel(X), 0.7 * (X @ X.T + 0.5), rtol=1e-14)

    Z, mean, variance = rng.normal(size=(4, 2)), rng.normal(size=(9, 2)), rng.uniform(0.1, 0.5, size=(9, 2))
    weights = rng.uniform(0.5, 1.5, size=(9, 3))
    samples = 4000
    for tree in (kernel, 1.5 * ToyAffine(0.8, 0.2, active_dims=(1,)) + ToyAffine(0.3) + Constant(0.4) + White(0.1)):
        assert analytic_supported(tree)
        closed = psi_statistics(tree, Z, mean, variance, row_weights=weights)
        for rule in (PsiMethod("gauss_hermite", nodes=3), PsiMethod("unscented")):  # both exact for quadratics
            for a, b in zip(closed, psi_statistics(tree, Z, mean, variance, rule, row_weights=weights)):
                np.testing.assert_allclose(a, b, rtol=1e-11, atol=1e-12)
        psi1 = np.asarray(closed.psi1)
        per_point = np.asarray(psi_statistics(tree, Z, mean, variance, row_weights=np.eye(9)).psi2)
        sd = np.sqrt(np.diagonal(per_point, axis1=1, axis2=2) - psi1 ** 2)  # of k(x_n, z_m) under q(x_n)
        drawn = psi_statistics(tree, Z, mean, variance, PsiMethod("monte_carlo", samples=samples),
                               key=jax.random.key(1))
        assert np.all(np.abs(np.asarray(drawn.psi1) - psi1) < Z_LIMIT * sd / np.sqrt(samples))

    program = generate_stan(model)
    assert program.code.count("matrix toy_affine_kernel(") == 1
    assert "toy_affine_kernel(X_points, X_points, v, 0.5)" in program.code
    check_program(program.code, "toy_affine")


def test_kernel_closed_form_runs_variational_em(toy_kernel):
    rng = np.random.default_rng(2)
    Y = rng.normal(size=(20, 2)) @ rng.normal(size=(2, 3)) + 0.1 * rng.normal(size=(20, 3))
    data = {"N": 20, "D": 3, "Q": 2, "Y": Y - Y.mean(0)}
    model = _check(GPLVM_WITH_TOY_KERNEL)
    bounds = {}
    for psi in ("analytic", "gauss-hermite"):
        results = gpdsl.fit(model, data, "vem", num_inducing=5, psi=psi, seed=0)
        bounds[psi] = float(arviz_compat.groups(results)["sample_stats"]["lp"].values.ravel()[0])
    assert np.isfinite(bounds["analytic"])
    assert abs(bounds["analytic"] - bounds["gauss-hermite"]) < 1e-3


def test_kernel_unknown_when_not_registered():
    with pytest.raises(ModelCheckError, match="unknown kernel 'toy_affine'"):
        _check(REGRESSION_WITH_TOY_KERNEL)
    assert "toy_affine" not in KERNELS and not analytic_supported(ToyAffine(0.5))
    with pytest.raises(ModelCheckError, match="already registered"):
        register_kernel(type("Clash", (ToyAffine,), {"spec": KERNEL_SPECS["rbf"]}))


# --- a likelihood -------------------------------------------------------------------------------------------------

def _laplace_log_density(y, mu, b):
    return -jnp.log(2.0 * b) - jnp.abs(y - mu) / b


def _laplace_sample(key, shape, mu, b):
    return mu + b * jax.random.laplace(key, shape)


def _laplace_stan(y, args, vectorised):
    return f"double_exponential_lpdf({y} | {args['mu'][0]}, {args['b'][0]})"


def _laplace_stan_rng(args):
    return f"double_exponential_rng({args['mu'][0]}, {args['b'][0]})"


TOY_LAPLACE = Likelihood("toy_laplace", ("mu", "b"), "real", "exp(-|y - mu| / b) / (2 b)",
                         log_density=_laplace_log_density, stan=_laplace_stan, stan_rng=_laplace_stan_rng,
                         sample=_laplace_sample, param_support={"b": "positive"})

LAPLACE_MODEL = """
data { int N; vector[N] x; vector[N] y; }
parameters {
  real<lower=0> b ~ gamma(2, 2);
  real<lower=0> ell ~ gamma(2, 2);
}
model {
  f ~ gp(x, rbf(lengthscale = ell));
  y ~ toy_laplace(f, b);
}
"""


@pytest.fixture
def toy_likelihood():
    register_likelihood(TOY_LAPLACE)
    yield TOY_LAPLACE
    unregister_likelihood("toy_laplace")


def test_likelihood_registered(toy_likelihood):
    spec = catalog.DISTRIBUTIONS["toy_laplace"]
    assert spec.likelihood and not spec.prior and spec.argument_support("b") == "positive"
    model = _check(LAPLACE_MODEL)
    with pytest.raises(ModelCheckError, match=r"argument 'b' of toy_laplace must be in \(0, inf\), got -1"):
        _check(LAPLACE_MODEL.replace("toy_laplace(f, b)", "toy_laplace(f, -1)"))

    N = 4000
    rng = np.random.default_rng(3)
    x = np.linspace(0.0, 1.0, N)
    f = np.sin(6 * x)
    y = f + rng.laplace(scale=0.4, size=N)
    data, _ = gpdsl.load_data({"N": N, "x": x, "y": y}, model)
    jax_model = lower(model, data, parameterisation="centred")
    env = jax_model.environment({"b": jnp.asarray(0.4), "ell": jnp.asarray(0.2), "f": jnp.asarray(f)})
    expected = np.sum(-np.log(0.8) - np.abs(y - f) / 0.4)
    np.testing.assert_allclose(jax_model.log_terms(env, ("likelihood",)), expected, rtol=1e-12)

    _, observed = simulate(jax_model, jax.random.key(4), fixed={"b": 0.4, "ell": 0.2, "f": f})
    residual = np.asarray(observed["y"]) - f
    assert abs(residual.mean()) < Z_LIMIT * 0.4 * np.sqrt(2.0 / N)  # Laplace(0, b): mean 0, sd b sqrt(2)
    assert abs(np.abs(residual).mean() - 0.4) < Z_LIMIT * 0.4 / np.sqrt(N)  # |Laplace(0, b)|: mean b, sd b

    code = generate_stan(model).code
    assert "target += double_exponential_lpdf(y | f, b);" in code
    assert "double_exponential_rng(f[" in code
    check_program(code, "toy_laplace")


def test_likelihood_unknown_when_not_registered():
    assert "toy_laplace" not in catalog.DISTRIBUTIONS
    with pytest.raises(ModelCheckError, match="unknown distribution 'toy_laplace'"):
        _check(LAPLACE_MODEL)
    with pytest.raises(ModelCheckError, match="already registered"):
        register_likelihood(LIKELIHOODS["normal"])
    with pytest.raises(ModelCheckError, match="reserved"):
        register_likelihood(Likelihood("external", ("mu",), "real", "", log_density=_laplace_log_density))


# --- a prior ------------------------------------------------------------------------------------------------------

def _exponential_log_density(x, rate):
    return jnp.log(rate) - rate * x


def _exponential_sample(key, shape, rate):
    return jax.random.exponential(key, shape) / rate


TOY_EXPONENTIAL = Prior("toy_exponential", ("rate",), "rate exp(-rate x); mean 1/rate",
                        log_density=_exponential_log_density, sample=_exponential_sample,
                        stan=stan_lpdf("exponential", ("rate",)), defaults={"rate": 1.0}, support="positive",
                        arg_support={"rate": "positive"})

EXPONENTIAL_MODEL = """
data { int N; int K; vector[N] x; vector[N] y; }
parameters {
  real<lower=0> s ~ toy_exponential(2);
  vector<lower=0>[K] w ~ toy_exponential(3);
  real<lower=0> ell ~ toy_exponential();
}
model {
  f ~ gp(x, rbf(lengthscale = ell));
  y ~ normal(f, s);
}
"""


@pytest.fixture
def toy_prior():
    register_prior(TOY_EXPONENTIAL)
    yield TOY_EXPONENTIAL
    unregister_prior("toy_exponential")


def test_prior_registered(toy_prior):
    spec = catalog.DISTRIBUTIONS["toy_exponential"]
    assert spec.prior and not spec.likelihood and spec.support == "positive"
    model = _check(EXPONENTIAL_MODEL)
    with pytest.raises(ModelCheckError, match=r"toy_exponential has support \(0, inf\) but 's' is declared real"):
        _check(EXPONENTIAL_MODEL.replace("real<lower=0> s", "real s"))  # a positive prior on an unbounded one

    K = 4000
    data, _ = gpdsl.load_data({"N": 3, "K": K, "x": [0.0, 0.5, 1.0], "y": [0.1, -0.2, 0.3]}, model)
    jax_model = lower(model, data)
    w = np.random.default_rng(5).uniform(0.1, 2.0, size=K)
    env = jax_model.environment({"s": jnp.asarray(0.4), "w": jnp.asarray(w), "ell": jnp.asarray(0.7)})
    expected = (np.log(2) - 2 * 0.4) + np.sum(np.log(3) - 3 * w) + (0.0 - 0.7)
    np.testing.assert_allclose(jax_model.log_terms(env, ("prior",)), expected, rtol=1e-12)

    truth, _ = simulate(jax_model, jax.random.key(6), observe=False)
    draws = np.asarray(truth["w"])
    assert draws.shape == (K,) and np.all(draws > 0)
    assert abs(draws.mean() - 1 / 3) < Z_LIMIT * (1 / 3) / np.sqrt(K)  # exponential(3): mean and sd 1/3

    code = generate_stan(model).code
    assert "target += exponential_lpdf(w | 3);" in code and "target += exponential_lpdf(ell | 1.0);" in code
    check_program(code, "toy_exponential")


def test_prior_unknown_when_not_registered():
    assert "toy_exponential" not in catalog.DISTRIBUTIONS
    with pytest.raises(ModelCheckError, match="unknown distribution 'toy_exponential'"):
        _check(EXPONENTIAL_MODEL)
    with pytest.raises(ModelCheckError, match="already registered"):
        register_prior(PRIORS["gamma"])


# --- a method -----------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class PriorDrawSettings:
    """Settings of ``toy-prior``: how many draws."""

    draws: int = option(100, "draws from the prior")

    def __post_init__(self):
        require_positive_int("draws", self.draws)


def run_prior_draws(model, data, settings, context):
    """Draw every parameter from its prior (one chain); returns a :class:`MethodOutput`."""
    started = time.perf_counter()
    jax_model = lower(model, data)
    keys = jax.random.split(jax.random.key(context.seed), settings.draws)
    draws = [simulate(jax_model, key, observe=False)[0] for key in keys]
    posterior = {name: np.stack([np.asarray(draw[name]) for draw in draws])[None] for name in model.parameters}
    return MethodOutput(posterior, timings={"sampling": time.perf_counter() - started},
                        report={"draws": settings.draws}, attrs={"inference": "draws from the prior"},
                        versions={"jax": jax.__version__})


TOY_METHOD = Method("toy-prior", "draws from the priors (a test method)", ("any",), PriorDrawSettings,
                    run_prior_draws)

REGRESSION = "models/gp_regression.gpm"


@pytest.fixture
def regression_data(tmp_path):
    rng = np.random.default_rng(7)
    X = rng.normal(size=(10, 2))
    path = tmp_path / "regression.json"
    path.write_text(json.dumps({"N": 10, "D": 2, "X": X.tolist(), "y": np.sin(X[:, 0]).tolist()}))
    return path


@pytest.fixture
def toy_method():
    register(TOY_METHOD)
    yield TOY_METHOD
    unregister("toy-prior")


def test_method_registered_runs_from_python_and_cli(toy_method, regression_data, tmp_path, capsys):
    results = gpdsl.run(REGRESSION, regression_data, "toy-prior", PriorDrawSettings(draws=400), seed=8)
    posterior = arviz_compat.groups(results)["posterior"]
    assert posterior["lengthscale"].dims == ("chain", "draw", "D") and posterior["variance"].shape == (1, 400)
    variance = posterior["variance"].values.ravel()  # lognormal(0, 1): mean exp(1/2), sd sqrt((e - 1) e)
    assert abs(variance.mean() - np.exp(0.5)) < Z_LIMIT * np.sqrt((np.e - 1) * np.e / 400)

    out = tmp_path / "prior.nc"
    assert cli.main(["sample", REGRESSION, "--data", str(regression_data), "--method", "toy-prior", "--draws", "20",
                     "--seed", "8", "--out", str(out), "--quiet"]) == 0
    written = gpdsl.read_results(out)
    attrs = arviz_compat.root_attrs(written)
    assert attrs["method"] == "toy-prior" and attrs["seed"] == 8
    assert results_json(written, "settings") == {"draws": 20} and results_json(written, "report") == {"draws": 20}
    again = gpdsl.run(REGRESSION, regression_data, "toy-prior", PriorDrawSettings(draws=20), seed=8)
    np.testing.assert_array_equal(arviz_compat.groups(written)["posterior"]["variance"].values,
                                  arviz_compat.groups(again)["posterior"]["variance"].values)

    capsys.readouterr()
    assert cli.main(["methods", REGRESSION]) == 0
    assert "yes  toy-prior" in capsys.readouterr().out
    assert cli.main(["sample", REGRESSION, "--data", str(regression_data), "--method", "toy-prior", "--draws", "0",
                     "--out", str(tmp_path / "x.nc")]) == 1
    assert "--draws must be an integer >= 1" in capsys.readouterr().err


def test_the_guide_s_commands_are_the_ones_run_here():
    from pathlib import Path

    from tests.test_readme_pipelines import command_blocks

    guide = (Path(__file__).resolve().parents[1] / "docs" / "extending.md").read_text()
    assert command_blocks(guide) == [
        ["methods", "models/gp_regression.gpm"],
        ["sample", "models/gp_regression.gpm", "--data", "d.json", "--method", "toy-prior", "--draws", "20", "--seed",
         "8", "--out", "prior.nc"],
    ]


def toy_entry_point():
    """What a plugin's ``gpdsl.methods`` entry point names: a callable returning its methods."""
    return [TOY_METHOD]


def test_method_from_an_entry_point(monkeypatch):
    point = metadata.EntryPoint("toy", f"{__name__}:toy_entry_point", registry.ENTRY_POINT_GROUP)
    monkeypatch.setattr(registry.metadata, "entry_points",
                        lambda group: [point] if group == registry.ENTRY_POINT_GROUP else [])
    monkeypatch.setattr(registry, "_plugins_loaded", False)
    try:
        assert methods()["toy-prior"] is TOY_METHOD
    finally:
        unregister("toy-prior")
    assert "toy-prior" not in methods()


# --- a model family -----------------------------------------------------------------------------------------------

ONE_INPUT = "gp_regression_1d"
ONE_INPUT_NEEDS = "{method} needs GP regression over one input column: f ~ gp(x, k) with vector x, y ~ normal(f, s)"


def one_input_form(model, nodes):
    """GP regression whose inputs have one column: its :class:`LatentGPFacts`, or a :class:`Refusal`."""
    facts = gp_regression_form(model, nodes)
    if isinstance(facts, Refusal):
        return Refusal(ONE_INPUT_NEEDS, facts.detail, facts.span)
    columns = facts.node.statement.inputs.dim
    if columns != 1:
        return Refusal(ONE_INPUT_NEEDS, f"the inputs of '{facts.name}' have {columns} columns")
    return facts


@dataclass
class OneInputRegression:
    """What the family's engines receive: the GP regression view and its one input column."""

    problem: GPRegression
    x: np.ndarray


def one_input_view(model, data, facts):
    problem = gp_regression_view(model, data, facts)
    points = problem.jax_model.gp_inputs(problem.node.statement, problem.jax_model.data)
    return OneInputRegression(problem, np.asarray(points).reshape(-1))


def run_one_input_ml(model, data, settings, context):
    """Type-II maximum likelihood on the family's view."""
    view = FAMILIES[context.family].view(model, data, context.facts)
    fit = fit_marginal_likelihood(view.problem, settings.initial_values, max_iterations=settings.max_iterations,
                                  max_evaluations=settings.max_evaluations, ftol=settings.ftol, gtol=settings.gtol,
                                  restarts=settings.restarts)
    output = ml_output(fit)
    output.report["points"] = len(view.x)
    output.state = view
    return output


ONE_INPUT_MODEL = """
data { int N; vector[N] x; vector[N] y; }
parameters {
  real<lower=0> ell ~ lognormal(0, 1);
  real<lower=0> noise ~ half_normal(1);
}
model {
  f ~ gp(x, rbf(lengthscale = ell));
  y ~ normal(f, noise);
}
"""


@pytest.fixture
def toy_family():
    family = register_family(Family(ONE_INPUT, "GP regression over one input column", one_input_form,
                                    f"{__name__}:one_input_view"))
    method = register(Method("toy-1d-ml", "type-II ML of GP regression over one input column (a test method)",
                             (ONE_INPUT,), MLSettings, run_one_input_ml, command="fit", requires_priors=False,
                             report=ml_report))
    yield family, method
    unregister("toy-1d-ml")
    unregister_family(ONE_INPUT)


def test_family_registered_with_a_method_that_names_it(toy_family, tmp_path, capsys):
    model_file = tmp_path / "one_input.gpm"
    model_file.write_text(ONE_INPUT_MODEL)
    assert cli.main(["methods", str(model_file), REGRESSION, "models/gp_classification.gpm"]) == 0
    verdicts = [line for line in capsys.readouterr().out.splitlines() if line.startswith(("  yes  toy-1d-ml",
                                                                                           "  no   toy-1d-ml"))]
    width = max(len(name) for name in methods())
    assert verdicts == [
        f"  yes  {'toy-1d-ml':<{width}} gpdsl fit --method toy-1d-ml: type-II ML of GP regression over one input "
        "column (a test method)",
        f"  no   {'toy-1d-ml':<{width}} needs GP regression over one input column: the inputs of 'f' have D columns",
        f"  no   {'toy-1d-ml':<{width}} needs GP regression over one input column: this model has no single GP "
        "integrated out under a normal likelihood"]

    x = np.linspace(0.0, 3.0, 12)
    data = {"N": 12, "x": x, "y": np.sin(x) + 0.1 * np.cos(7 * x)}
    model = _check(ONE_INPUT_MODEL)
    view = FAMILIES[ONE_INPUT].view(model, data, FAMILIES[ONE_INPUT].facts(model))
    np.testing.assert_array_equal(view.x, x)
    assert view.problem.target == "y" and view.problem.name == "f"

    results, state = gpdsl.run(model, data, "toy-1d-ml", seed=1, keep_state=True)
    assert isinstance(state, OneInputRegression) and results_json(results, "report")["points"] == 12
    reference = gpdsl.run(model, data, "ml", seed=1)
    for name in ("ell", "noise"):
        ours = arviz_compat.groups(results)["posterior"][name].values
        theirs = arviz_compat.groups(reference)["posterior"][name].values
        np.testing.assert_allclose(ours, theirs, rtol=1e-10)


def test_family_unknown_when_not_registered():
    assert ONE_INPUT not in FAMILIES
    with pytest.raises(MethodError, match="no model family named gp_regression_1d"):
        register(Method("toy-1d-ml", "", (ONE_INPUT,), MLSettings, run_one_input_ml, command="fit",
                        report=ml_report))
    assert "toy-1d-ml" not in methods()
