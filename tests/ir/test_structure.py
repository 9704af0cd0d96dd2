"""Structural facts engines rely on: latent GP nodes, marginalisation, likelihood factorisation."""

import pytest

from gpdsl.api import check_file, check_text
from gpdsl.ir import nodes as ir
from gpdsl.ir.structure import gp_nodes, parameter_bounds, statement_refs, sub_expressions

EXPECTED = {
    "gp_classification": {"f": (False, True)},
    "gp_regression": {"f": (True, True)},
    "bayesian_gplvm": {"F": (True, True)},
    "supervised_gplvm": {"Z": (False, False), "F": (True, True)},
    "dynamical_gplvm": {"X": (False, False), "F": (True, True)},
    "deep_mahalanobis_gp": {"W": (False, False), "f": (True, True)},
    "sequential_latent_gp": {"f": (False, True)},
    "local_volatility": {"f": (False, False)},
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_gp_nodes_of_shipped_models(name):
    model, _ = check_file(f"models/{name}.gpm")
    found = {n.name: (n.marginalised, n.elementwise) for n in gp_nodes(model)}
    assert found == EXPECTED[name]


def test_gp_node_reports_kernel_inputs_and_likelihood():
    model, _ = check_file("models/gp_classification.gpm")
    (node,) = gp_nodes(model)
    assert node.statement.inputs.names == ("X",)
    assert [leaf.name for leaf in node.statement.kernel.leaves()] == ["rbf"]
    assert node.likelihood.distribution.name == "bernoulli_probit"


def test_normal_likelihood_with_vector_noise_is_not_marginalised():
    model, _ = check_text("""
    data { int N; vector[N] x; vector[N] y; vector<lower=0>[N] s; }
    parameters { real<lower=0> ell ~ gamma(2, 2); }
    model { f ~ gp(x, rbf(lengthscale = ell)); y ~ normal(f, s); }""")
    (node,) = gp_nodes(model)
    assert not node.marginalised and node.elementwise


def test_latent_used_twice_is_not_marginalised():
    model, _ = check_text("""
    data { int N; vector[N] x; vector[N] y; array[N] int<lower=0, upper=1> b; }
    parameters { real<lower=0> ell ~ gamma(2, 2); }
    model { f ~ gp(x, rbf(lengthscale = ell)); y ~ normal(f, 1); b ~ bernoulli_logit(f); }""")
    (node,) = gp_nodes(model)
    assert not node.marginalised


def test_vector_bounds_from_bounded_prior():
    model, _ = check_file("models/sequential_latent_gp.gpm")
    assert parameter_bounds(model, "kappa") == ([0.0], [3.16, 3.16, 3.16, 2.0])


@pytest.mark.parametrize("location, elementwise, shifted", [
    ("f", True, True),
    ("mu + f", True, True),
    ("log_exposure + mu + f", True, True),
    ("f + beta * x", True, True),
    ("mu - f", True, False),
    ("exp(f)", True, False),
    ("f + f", False, False),
])
def test_offsets_in_the_likelihood_location(location, elementwise, shifted):
    model, _ = check_text(f"""
data {{ int N; vector[N] x; vector[N] log_exposure; array[N] int<lower=0> y; }}
parameters {{
  real<lower=0> s ~ lognormal(0, 1); real mu ~ normal(0, 1); real beta ~ normal(0, 1);
}}
latent {{ vector[N] f; }}
model {{
  f ~ gp(x, s * rbf(1.0));
  y ~ poisson_log({location});
}}
""")
    (node,) = gp_nodes(model)
    assert (node.elementwise, node.shifted) == (elementwise, shifted)


@pytest.mark.parametrize("data, statements, whole", [
    ("vector[N] y;", "f ~ gp(x, rbf(1.0)); y ~ normal(m + f, s);", True),
    ("matrix[N, 3] y;", "f ~ gp(x, rbf(1.0)); y ~ normal(f, s);", True),
    ("vector[N] y;", "f ~ gp(x, rbf(1.0)); for (i in 1:1) { y ~ normal(f, s); }", False),
    ("array[N] real y;", "f ~ gp(x, rbf(1.0)); y ~ normal(f, s);", False),
    ("vector[T] t; array[T] vector[N] y;", "f ~ gp((t, X), rbf(1.0)); y ~ normal(f, s);", False),
])
def test_marginalised_whole_is_one_multivariate_normal(data, statements, whole):
    inputs = "array[T] matrix[N, 2] X;" if "(t, X)" in statements else "vector[N] x;"
    model, _ = check_text(f"""
data {{ int T; int N; {inputs} {data} }}
parameters {{ real m ~ normal(0, 1); real<lower=0> s ~ lognormal(0, 1); }}
model {{ {statements} }}
""")
    (node,) = gp_nodes(model)
    assert node.marginalised and node.marginalised_whole == whole


def test_one_walker_reads_every_reference():
    model, _ = check_text("""
data { int N; int K; vector[N] x; vector[N] y; vector[K] w; }
parameters { real a ~ normal(0, 1); real<lower=0> s ~ lognormal(0, 1); }
model { f ~ gp(x, rbf(lengthscale = exp(-a))); y ~ normal(f + w[K] * a, s); }
""")
    gp, likelihood = [s for s, _ in model.walk() if not isinstance(s, ir.PriorStatement)]
    assert statement_refs(gp) == {"x", "a"}
    assert statement_refs(likelihood) == {"f", "w", "K", "s", "a"}
    assert [type(e).__name__ for e in sub_expressions(likelihood.distribution.arg("mu"))] == [
        "Binary", "Ref", "Binary", "Index", "Ref", "Ref", "Ref"]
