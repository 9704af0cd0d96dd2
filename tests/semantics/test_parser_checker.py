"""Positive tests of parsing and checking: the AST, inferred latent shapes, kernels, priors, warnings.

Error messages are covered by ``test_golden_errors.py``; robustness by ``test_fuzz_checker.py``.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from gpdsl.api import check_file, check_text
from gpdsl.ir import nodes as ir
from gpdsl.ir.types import VarType
from gpdsl.syntax import ast
from gpdsl.syntax.parser import parse

REPO = Path(__file__).resolve().parents[2]
MODELS = sorted((REPO / "models").glob("*.gpm"))

REGRESSION = """\
// GP regression
data {
  int N;
  int D;
  matrix[N, D] X;   /* inputs,
                       one row per point */
  vector[N] y;
}
parameters {
  real<lower=0> variance ~ lognormal(0, 1);
  vector<lower=0>[D] ell ~ inv_gamma(5, 5);
  real<lower=0> noise ~ half_normal(1);
}
model {
  f ~ gp(X, variance * rbf(lengthscale = ell) + white(1e-6));
  y ~ normal(f, noise);
}
"""


def check(text: str):
    return check_text(text, "test.gpm")


def messages(warnings) -> list[str]:
    return [w.message for w in warnings]


# ---- parsing -------------------------------------------------------------------------------------
def test_parse_blocks_declarations_and_priors():
    program = parse(REGRESSION, "r.gpm")
    assert [b.kind for b in program.blocks] == ["data", "parameters", "model"]
    data = program.blocks[0]
    assert [d.name for d in data.declarations] == ["N", "D", "X", "y"]
    x = data.declarations[2]
    assert x.type.base == "matrix" and [e.name for e in x.type.dims] == ["N", "D"]
    assert x.prior is None
    ell = program.blocks[1].declarations[1]
    assert ell.type.base == "vector" and isinstance(ell.type.lower, ast.Number) and ell.type.upper is None
    assert ell.prior.function == "inv_gamma" and [a.value for a in ell.prior.args] == [5, 5]
    model = program.blocks[2]
    assert [s.target.name for s in model.statements] == ["f", "y"]
    gp = model.statements[0].distribution
    assert gp.function == "gp" and isinstance(gp.args[1], ast.BinaryOp) and gp.args[1].op == "+"


def test_parse_spans_point_at_names():
    program = parse(REGRESSION, "r.gpm")
    y = program.blocks[0].declarations[3]
    assert (y.name_span.line, y.name_span.column) == (7, 13)
    assert y.name_span.location() == "r.gpm:7:13"


def test_parse_arrays_loops_slices_tuples_keywords():
    program = parse("""
data {
  int T;
  int N;
  vector[T] t;
  array[T] matrix[N, 2] X;
  array[T] vector[N] y;
}
parameters {
  vector[4] kappa ~ scaled_sigmoid_normal(lower = 0, upper = [3.16, 3.16, 3.16, 2]);
}
model {
  f ~ gp((t, X), kappa[4]^2 * rbf(t, lengthscale = kappa[3]) * rbf(X, lengthscale = kappa[1:2]));
  for (i in 1:T) {
    y[i] ~ normal(f[i], 1e-1);
  }
}
""")
    decl = program.blocks[0].declarations[3]
    assert decl.type.base == "matrix" and [d.name for d in decl.type.array_dims] == ["T"]
    assert [d.value for d in decl.type.dims[1:]] == [2]
    kappa = program.blocks[1].declarations[0]
    assert [kw.name for kw in kappa.prior.kwargs] == ["lower", "upper"]
    assert isinstance(kappa.prior.kwargs[1].value, ast.VectorLiteral)
    gp, loop = program.blocks[2].statements
    assert isinstance(gp.distribution.args[0], ast.Tuple)
    assert isinstance(loop, ast.For) and loop.variable == "i"
    assert loop.body[0].target.name == "y" and isinstance(loop.body[0].target.indices[0], ast.Name)


def test_parse_numbers_int_and_real():
    program = parse("data { vector[3] y; } model { y ~ normal(2, 0.5); y ~ normal(1e-3, .5); }")
    first, second = program.blocks[1].statements
    assert [(a.value, a.is_int) for a in first.distribution.args] == [(2, True), (0.5, False)]
    assert [(a.value, a.is_int) for a in second.distribution.args] == [(1e-3, False), (0.5, False)]


def test_comments_are_ignored():
    plain = check("data { int N; vector[N] y; } model { y ~ normal(0, 1); }")[0]
    commented = check("// c\ndata { /* b\nb */ int N; // n\n vector[N] y; } model { y ~ normal(0, 1); } // end")[0]
    assert plain.data.keys() == commented.data.keys()
    assert [v.type for v in plain.data.values()] == [v.type for v in commented.data.values()]


# ---- the shipped models --------------------------------------------------------------------------
@pytest.mark.parametrize("path", MODELS, ids=[p.stem for p in MODELS])
def test_models_check(path):
    model, warnings = check_file(path)
    assert model.likelihoods()
    assert model.gp_statements() or model.student_t_processes()
    assert model.name == path.stem


EXPECTED_LATENTS = {
    "bayesian_gplvm": {"X": "matrix[N, Q]", "F": "matrix[N, D]"},
    "deep_mahalanobis_gp": {"W": "array[Q] matrix[N, D]", "f": "vector[N]"},
    "dynamical_gplvm": {"X": "matrix[N, Q]", "F": "matrix[N, D]"},
    "gp_classification": {"f": "vector[N]"},
    "gp_regression": {"f": "vector[N]"},
    "gplvm_hsgp": {"X": "matrix[N, 2]", "F": "matrix[N, D]"},
    "local_volatility": {"f": "array[T] vector[N]"},
    "sequential_latent_gp": {"f": "array[T] vector[N]"},
    "supervised_gplvm": {"Z": "matrix[N, Q]", "F": "matrix[N, D]"},
}


@pytest.mark.parametrize("stem", sorted(EXPECTED_LATENTS))
def test_model_latent_shapes(stem):
    model, _ = check_file(REPO / "models" / f"{stem}.gpm")
    assert {n: v.type.describe() for n, v in model.latents.items()} == EXPECTED_LATENTS[stem]


def test_only_the_unpriored_models_warn():
    unpriored = {"bayesian_gplvm": ["s2", "w", "noise"], "gplvm_hsgp": ["s2", "ell", "noise"],
                 "gp_narx": ["rbf_variance", "rbf_lengthscale", "linear_variance", "noise"]}  # for `fit`
    for path in MODELS:
        model, warnings = check_file(path)
        if path.stem in unpriored:
            assert model.unpriored_parameters() == unpriored[path.stem]
            assert len(warnings) == len(unpriored[path.stem])
            assert all("has no prior" in m for m in messages(warnings))
        else:
            assert warnings == [], (path.stem, messages(warnings))


# ---- latent shape inference ----------------------------------------------------------------------
def test_latent_over_matrix_inputs_is_a_vector():
    model, _ = check(REGRESSION)
    f = model.latents["f"]
    assert f.type == VarType("real", "vector", ("N",)) and f.declared is False


def test_latent_takes_the_matrix_shape_of_its_data():
    model, _ = check("""
data { int N; int D; int Q; matrix[N, Q] X; matrix[N, D] Y; }
model { F ~ gp(X, rbf()); Y ~ normal(F, 0.1); }
""")
    assert model.latents["F"].type == VarType("real", "matrix", ("N", "D"))


def test_latent_over_tuple_inputs_is_an_array_of_vectors():
    model, _ = check("""
data { int T; int N; vector[T] t; array[T] matrix[N, 3] X; array[T] vector[N] y; }
model {
  f ~ gp((t, X), rbf(t) * rbf(X));
  for (i in 1:T) { y[i] ~ normal(f[i], 1); }
}
""")
    assert model.latents["f"].type == VarType("real", "vector", ("N",), ("T",))
    gp = model.gp_statements()[0]
    assert gp.inputs.index_shape == ("T", "N") and gp.inputs.dims == (1, 3) and gp.inputs.dim == 4
    assert gp.inputs.names == ("t", "X")


def test_declared_latent_keeps_its_declaration():
    model, _ = check("""
data { int N; vector[N] t; int Q; matrix[N, Q] Y; }
latent { matrix[N, Q] X; }
model { X ~ gp(t, rbf()); Y ~ normal(X, 1); }
""")
    assert model.latents["X"].declared is True
    assert model.latents["X"].type.describe() == "matrix[N, Q]"


def test_latent_with_a_normal_prior():
    model, _ = check("""
data { int N; int Q; int D; matrix[N, D] Y; }
latent { matrix[N, Q] X; }
model { X ~ normal(0, 1); F ~ gp(X, rbf()); Y ~ normal(F, 1); }
""")
    prior = model.priors()["X"]
    assert prior.target.role == "latent" and prior.distribution.name == "normal"


def test_literal_sizes():
    model, _ = check("data { vector[3] y; matrix[3, 2] X; } model { f ~ gp(X, rbf()); y ~ normal(f, 1); }")
    assert model.latents["f"].type == VarType("real", "vector", (3,))
    assert model.sizes == ()
    assert model.latents["f"].type.dim_names("f") == ("f_dim_0",)


def test_sizes_in_order_of_use():
    model, _ = check(REGRESSION)
    assert model.sizes == ("N", "D")


# ---- kernels -------------------------------------------------------------------------------------
def test_kernel_structure_and_input_dims():
    model, _ = check(REGRESSION)
    kernel = model.gp_statements()[0].kernel
    assert isinstance(kernel, ir.KernelSum)
    assert isinstance(kernel.left, ir.KernelScale) and isinstance(kernel.right, ir.KernelLeaf)
    leaves = list(kernel.leaves())
    assert [(k.name, k.input_dim, k.component) for k in leaves] == [("rbf", "D", None), ("white", "D", None)]
    rbf, white = leaves
    assert rbf.param("lengthscale").name == "ell"
    assert rbf.param("variance").value == 1.0          # default filled in; the scale is separate
    assert white.param("variance").value == pytest.approx(1e-6)


def test_kernel_defaults_and_exclusive_parameters():
    model, _ = check("""
data { int N; vector[N] x; vector[N] y; }
model { f ~ gp(x, rbf(inv_ls2 = 2) + matern32() + linear() + periodic(period = 3)); y ~ normal(f, 1); }
""")
    leaves = {k.name: k for k in model.gp_statements()[0].kernel.leaves()}
    assert [n for n, _ in leaves["rbf"].params] == ["variance", "inv_ls2"]   # no lengthscale default
    assert [n for n, _ in leaves["matern32"].params] == ["variance", "lengthscale"]
    assert [n for n, _ in leaves["periodic"].params] == ["variance", "lengthscale", "period"]
    assert leaves["periodic"].param("period").value == 3
    assert all(k.input_dim == 1 for k in leaves.values())


def test_kernel_positional_hyperparameters():
    model, _ = check("data { int N; vector[N] x; vector[N] y; } model { f ~ gp(x, rbf(2, 0.5)); y ~ normal(f, 1); }")
    leaf = next(model.gp_statements()[0].kernel.leaves())
    assert leaf.param("variance").value == 2 and leaf.param("lengthscale").value == 0.5


def test_ard_lengthscale_matching_inputs():
    model, _ = check("""
data { int N; matrix[N, 3] X; vector[N] y; }
parameters { vector<lower=0>[3] ell ~ gamma(2, 2); }
model { f ~ gp(X, rbf(lengthscale = ell)); y ~ normal(f, 1); }
""")
    leaf = next(model.gp_statements()[0].kernel.leaves())
    assert leaf.input_dim == 3 and leaf.param("lengthscale").type.shape == (3,)


def test_kernel_bound_to_input_component():
    model, _ = check_file(REPO / "models" / "sequential_latent_gp.gpm")
    leaves = list(model.gp_statements()[0].kernel.leaves())
    assert [(k.component, k.input_dim) for k in leaves] == [(0, 1), (1, 2)]


def test_projected_inputs():
    model, _ = check_file(REPO / "models" / "deep_mahalanobis_gp.gpm")
    outer = model.gp_statements()[-1]
    assert isinstance(outer.inputs.components[0], ir.Project)
    assert outer.inputs.dims == ("Q",) and outer.inputs.index_shape == ("N",)


def test_gp_in_a_loop_over_an_array_latent():
    model, _ = check_file(REPO / "models" / "deep_mahalanobis_gp.gpm")
    (gp, loops), = [(s, l) for s, l in model.walk() if isinstance(s, ir.GPStatement) and s.target.name == "W"]
    assert [loop.variable for loop in loops] == ["q"]
    assert gp.target.indices[0].name == "q" and gp.target.type.describe() == "matrix[N, D]"


# ---- priors and bounds ---------------------------------------------------------------------------
def test_declared_priors_come_first():
    model, _ = check(REGRESSION)
    kinds = [type(s).__name__ for s in model.statements]
    assert kinds == ["PriorStatement"] * 3 + ["GPStatement", "LikelihoodStatement"]
    assert [s.target.name for s in model.statements[:3]] == ["variance", "ell", "noise"]
    assert model.priors()["ell"].distribution.arg("shape").value == 5


def test_priors_in_the_model_block():
    model, warnings = check("""
data { int N; vector[N] y; }
parameters { real mu; real<lower=0> s; }
model { mu ~ normal(0, 10); s ~ gamma(2, 1); y ~ normal(mu, s); }
""")
    assert warnings == []
    assert set(model.priors()) == {"mu", "s"}
    assert model.priors()["s"].distribution.arg("rate").value == 1


def test_distribution_keyword_arguments_and_defaults():
    model, _ = check("""
data { int N; vector[N] y; }
parameters { real<lower=0> s ~ gamma(rate = 3, shape = 2); vector[2] k ~ scaled_sigmoid_normal(0, 1); }
model { y ~ normal(k[1], s); }
""")
    gamma = model.priors()["s"].distribution
    assert [n for n, _ in gamma.args] == ["shape", "rate"] and gamma.arg("shape").value == 2
    ssn = model.priors()["k"].distribution
    assert ssn.arg("mu").value == 0.0 and ssn.arg("sigma").value == 1.5


@pytest.mark.parametrize("prior, lower, upper", [
    ("uniform(0, 1)", 0.0, 1.0),
    ("uniform(-2, 3)", -2.0, 3.0),
    ("scaled_sigmoid_normal(lower = 0, upper = 2)", 0.0, 2.0),
])
def test_bounded_priors_imply_bounds(prior, lower, upper):
    model, _ = check(f"data {{ vector[3] y; }} parameters {{ real a ~ {prior}; }} model {{ y ~ normal(a, 1); }}")
    t = model.parameters["a"].type
    assert (t.lower, t.upper) == (lower, upper)


def test_bounded_prior_with_equal_declared_bounds():
    model, _ = check("data { vector[3] y; } parameters { real<lower=0, upper=1> a ~ uniform(0, 1); } "
                     "model { y ~ normal(a, 1); }")
    assert (model.parameters["a"].type.lower, model.parameters["a"].type.upper) == (0, 1)


def test_vector_bounds_of_differing_values_are_not_a_single_bound():
    model, _ = check_file(REPO / "models" / "sequential_latent_gp.gpm")
    kappa = model.parameters["kappa"].type
    assert kappa.lower == 0 and kappa.upper is None     # upper = [3.16, 3.16, 3.16, 2]


def test_constant_bounds_are_folded():
    model, _ = check("""
data { vector[3] y; }
parameters { real<lower=-pi, upper=2 * pi> a; real<lower=sqrt(4) - 1, upper=exp(0) + 2^2> b; }
model { a ~ normal(0, 1); b ~ normal(0, 1); y ~ normal(a + b, 1); }
""")
    a, b = model.parameters["a"].type, model.parameters["b"].type
    assert (a.lower, a.upper) == pytest.approx((-math.pi, 2 * math.pi))
    assert (b.lower, b.upper) == pytest.approx((1.0, 5.0))
    assert b.describe() == "real<lower=1, upper=5>"


def test_positive_priors_accept_lower_zero_vectors_and_arrays():
    model, warnings = check_file(REPO / "models" / "deep_mahalanobis_gp.gpm")
    assert model.parameters["ell"].type.describe() == "array[Q] vector<lower=0>[D]"
    assert model.priors()["ell"].distribution.name == "gamma"


# ---- likelihoods ---------------------------------------------------------------------------------
def test_likelihood_kinds():
    model, _ = check_file(REPO / "models" / "gp_classification.gpm")
    (lik,) = model.likelihoods()
    assert isinstance(lik, ir.LikelihoodStatement) and lik.distribution.name == "bernoulli_probit"
    assert model.data["y"].type.describe() == "array[N] int<lower=0, upper=1>"
    model, _ = check_file(REPO / "models" / "local_volatility.gpm")
    (lik,) = model.likelihoods()
    assert isinstance(lik, ir.ExternalLikelihood)
    assert lik.function == "mypkg.pricing:dupire_call_prices" and len(lik.args) == 2


def test_poisson_on_int_data():
    model, warnings = check("data { int N; vector[N] x; array[N] int<lower=0> c; } "
                            "model { f ~ gp(x, rbf()); c ~ poisson_log(f); }")
    assert warnings == [] and model.likelihoods()[0].distribution.name == "poisson_log"


def test_indexed_likelihood_in_a_loop():
    model, _ = check_file(REPO / "models" / "sequential_latent_gp.gpm")
    ((lik, loops),) = [(s, l) for s, l in model.walk() if isinstance(s, ir.LikelihoodStatement)]
    assert loops[0].variable == "i" and lik.target.type.describe() == "vector[N]"
    mu = lik.distribution.arg("mu")
    assert isinstance(mu, ir.Binary) and mu.type.shape == ("N",)


# ---- warnings ------------------------------------------------------------------------------------
def test_warning_for_unused_data():
    _, warnings = check("data { int N; vector[N] y; vector[N] unused; } model { y ~ normal(0, 1); }")
    assert messages(warnings) == ["data 'unused' is declared but never used"]
    assert warnings[0].span.line == 1 and warnings[0].render().startswith("test.gpm:1:")


def test_sizes_count_as_used():
    _, warnings = check("data { int N; vector[N] y; } model { y ~ normal(0, 1); }")
    assert warnings == []


def test_warning_for_parameter_without_prior():
    _, warnings = check("data { vector[3] y; } parameters { real mu; } model { y ~ normal(mu, 1); }")
    assert messages(warnings) == ["parameter 'mu' has no prior: methods that optimise point-estimate it, "
                                  "samplers refuse it"]


def test_warning_for_unused_parameter():
    _, warnings = check("data { vector[3] y; } parameters { real a ~ normal(0, 1); } model { y ~ normal(0, 1); }")
    assert messages(warnings) == ["parameter 'a' is never used"]


def test_warnings_render_with_location_and_caret():
    _, warnings = check("data {\n  vector[3] y;\n  real z;\n}\nmodel {\n  y ~ normal(0, 1);\n}\n")
    (warning,) = warnings
    assert warning.render() == ("test.gpm:3:8: warning: data 'z' is declared but never used\n"
                                "   3 |   real z;\n"
                                "     |        ^")


@pytest.mark.parametrize("a, b, distance", [
    ("matern23", "matern32", 1), ("matern23", "matern52", 2), ("rbff", "rbf", 1), ("", "abc", 3),
    ("sigam", "sigma", 1), ("gamma", "gamma", 0), ("ca", "abc", 3),
])
def test_edit_distance_counts_a_transposition_as_one_edit(a, b, distance):
    from gpdsl.suggest import edit_distance

    assert edit_distance(a, b) == distance == edit_distance(b, a)


@pytest.mark.parametrize("name, expected", [
    ("matern23", "matern32"), ("matern25", "matern52"), ("rbff", "rbf"), ("Rbf", "rbf"),
    ("periodc", "periodic"), ("lnear", "linear"), ("gama", "gamma"), ("zzzzzz", None),
])
def test_closest_kernel_or_distribution(name, expected):
    from gpdsl.semantics import catalog
    from gpdsl.suggest import closest

    assert closest(name, catalog.known_callables()) == expected


def test_closest_breaks_ties_by_similarity_then_order():
    from gpdsl.suggest import closest

    assert closest("abd", ["abc", "abdx"]) == "abdx"
    assert closest("xy", ["xa", "xb"]) == "xa"


def test_every_argument_support_is_a_known_support_of_a_parameter():
    from gpdsl.likelihoods import LIKELIHOODS
    from gpdsl.semantics import catalog
    from gpdsl.semantics.support import SUPPORTS

    for spec in catalog.DISTRIBUTIONS.values():
        assert set(spec.arg_support) <= set(spec.params), spec.name
        assert set(spec.arg_support.values()) <= set(SUPPORTS), spec.name
        assert spec.ordered is None or set(spec.ordered) <= set(spec.params)
    for name, likelihood in LIKELIHOODS.items():
        assert catalog.DISTRIBUTIONS[name].arg_support == dict(likelihood.param_support), name


@pytest.mark.parametrize("x, inside", [(-1, False), (0, False), (1e-300, True), (math.inf, False)])
def test_positive_support_excludes_zero(x, inside):
    from gpdsl.semantics.support import SUPPORTS

    assert SUPPORTS["positive"].contains(x) is inside


def test_intervals_describe_compare_and_overlap():
    from gpdsl.semantics.support import SUPPORTS, Interval, declared_interval

    assert SUPPORTS["positive"].describe() == "(0, inf)"
    assert SUPPORTS["unit"].describe() == "[0, 1]" and SUPPORTS["unit"].contains(1)
    assert declared_interval(0, None).describe() == "[0, inf)"
    assert declared_interval(0, None).within(SUPPORTS["positive"])
    assert not declared_interval(-1, None).within(SUPPORTS["positive"])
    assert not declared_interval(None, 0).overlaps(SUPPORTS["positive"])
    assert Interval(-2, -1).overlaps(declared_interval(None, -1.5))


@pytest.mark.parametrize("declaration", ["real a ~ normal(0, 2)", "real<lower=0> a ~ gamma(2, 1 / sqrt(4))",
                                         "real a ~ student_t(3, -1, 0.5)", "real a ~ normal(-1, exp(-3))",
                                         "real a ~ uniform(-2, -1 + 0.5)", "real<lower=0> a ~ half_normal(0.1)"])
def test_arguments_inside_their_support_check(declaration):
    model, _ = check_text("data { int N; vector[N] y; }\n"
                          f"parameters {{ {declaration}; }}\n"
                          "model { y ~ normal(a, 1); }\n")
    assert "a" in model.parameters


@pytest.mark.parametrize("declaration, truncated", [
    ("real<lower=0> s ~ normal(0.5, 1)", "[0, inf)"), ("real<lower=0.5> s ~ gamma(2, 1)", "[0.5, inf)"),
    ("real<lower=0> s ~ cauchy(1, 1)", "[0, inf)"), ("real<upper=0> s ~ normal(1, 1)", "(-inf, 0]"),
    ("real<lower=0, upper=1> s ~ student_t(3, 0, 1)", "[0, 1]"),
])
def test_a_constraint_inside_the_support_truncates_the_prior_with_a_warning(declaration, truncated):
    import gpdsl

    model, warnings = gpdsl.check(f"data {{ vector[3] y; }}\nparameters {{ {declaration}; }}\n"
                                  "model { y ~ normal(s, 1); }\n")
    (warning,) = warnings
    assert warning.message.endswith(f"the prior is truncated to {truncated}")
    assert warning.span.line == 2 and "s" in model.parameters


@pytest.mark.parametrize("declaration", ["real<lower=0> s ~ cauchy(0, 2.5)", "real<lower=0> s ~ normal(0, 1)",
                                         "real<upper=1> s ~ student_t(3, 1, 2)", "real<lower=-1> s ~ normal(-1, 2)"])
def test_a_bound_at_the_centre_of_a_symmetric_prior_gives_its_half_without_a_warning(declaration):
    import gpdsl

    _, warnings = gpdsl.check(f"data {{ vector[3] y; }}\nparameters {{ {declaration}; }}\n"
                              "model { y ~ normal(s, 1); }\n")
    assert warnings == []


@pytest.mark.parametrize("declaration", ["real<lower=0> s ~ lognormal(0, 1)", "real<lower=0> s ~ gamma(2, 1)",
                                         "real s ~ normal(0, 1)", "real<lower=0> s ~ half_normal(1)"])
def test_a_constraint_equal_to_the_support_does_not_warn(declaration):
    _, warnings = check(f"data {{ vector[3] y; }} parameters {{ {declaration}; }} model {{ y ~ normal(s, 1); }}")
    assert warnings == []


def test_an_indexed_latent_may_use_its_other_elements():
    model, _ = check("data { int T; vector[T] y; }\nlatent { vector[T] x; }\n"
                     "model {\n  x[1] ~ normal(0, 1);\n  for (i in 2:T) x[i] ~ normal(x[i - 1], 1);\n"
                     "  y ~ normal(x, 1);\n}\n")
    assert "x" in model.latents


def test_a_chain_of_latents_is_not_a_cycle_in_any_order():
    model, _ = check("data { int N; int Q; matrix[N, 1] t; matrix[N, 4] Y; }\nlatent { matrix[N, Q] X; }\n"
                     "model {\n  F ~ gp(X, rbf());\n  X ~ gp(t, rbf());\n  Z ~ gp(X, rbf());\n"
                     "  Y ~ normal(F, 0.1);\n}\n")
    assert set(model.latents) == {"X", "F", "Z"}


def test_references_in_source_order():
    call = parse("data { vector[3] y; } model { y ~ normal(a * b[c], d(e = f)); }", "t.gpm").blocks[1] \
        .statements[0].distribution
    assert [ref.name for ref in ast.references(call)] == ["a", "b", "c", "f"]


def test_a_size_declared_after_other_declarations_but_before_its_use_checks():
    model, _ = check("data { int D; int N; matrix[N, D] X; vector[N] y; }\n"
                     "model { f ~ gp(X, rbf()); y ~ normal(f, 1); }\n")
    assert model.sizes == ("N", "D")


def test_closest_without_fallback_keeps_to_the_edit_distance():
    from gpdsl.suggest import closest

    assert closest("rbf_var", ["rbf"]) == "rbf"
    assert closest("rbf_var", ["rbf"], fallback=False) is None


def test_a_parameter_scale_bounded_by_a_later_prior_does_not_warn():
    _, warnings = check("data { int N; matrix[N, 2] X; vector[N] y; }\nparameters { vector[2] alpha; }\n"
                        "model {\n  f ~ gp(X, rbf());\n  y ~ normal(f + alpha[1], alpha[2]);\n"
                        "  alpha ~ scaled_sigmoid_normal(lower = 0, upper = [1, 1]);\n}\n")
    assert warnings == []
