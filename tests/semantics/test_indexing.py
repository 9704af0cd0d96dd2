"""Size symbols in bounds, multi-indexing by integer data arrays and column selections: checker, data
validation and generated Stan (checked by stanc)."""

import numpy as np
import pytest

from gpdsl.api import check_text
from gpdsl.backends.stan.codegen import generate_stan
from gpdsl.backends.stan.stanc import check_program
from gpdsl.data.validation import validate_data
from gpdsl.errors import DataError, GpdslError

GROUPED = """
data {
  int N; int G;
  vector[N] y;
  array[N] int<lower=1, upper=G> group;
}
parameters { real<lower=0> tau ~ gamma(2, 1); real<lower=0> noise ~ gamma(2, 1); }
model {
  y ~ normal(0, noise);
}
"""


def test_a_bound_may_name_a_size():
    model, _ = check_text(GROUPED)
    assert model.data["group"].type.describe() == "array[N] int<lower=1, upper=G>"
    assert "G" in model.sizes


def test_data_outside_a_size_bound_names_the_entry():
    model, _ = check_text(GROUPED)
    group = np.array([1, 2, 3, 1, 2, 3, 0, 1])
    with pytest.raises(DataError, match=r"lower bound 1 \(declared array\[N\] int<lower=1, upper=G>\): "
                                        r"group\[7\] = 0"):
        validate_data(model, {"N": 8, "G": 3, "y": np.zeros(8), "group": group})
    group[6] = 4
    with pytest.raises(DataError, match=r"upper bound 3 .*group\[7\] = 4"):
        validate_data(model, {"N": 8, "G": 3, "y": np.zeros(8), "group": group})
    group[6] = 3
    values, _ = validate_data(model, {"N": 8, "G": 3, "y": np.zeros(8), "group": group})
    np.testing.assert_array_equal(values["group"], group)


def test_a_size_bound_is_emitted_to_stan():
    model, _ = check_text(GROUPED)
    code = generate_stan(model).code
    assert "array[N] int<lower=1, upper=G> group;" in code
    check_program(code)


@pytest.mark.parametrize("declaration, message", [
    ("array[N] int<lower=1, upper=K> group", "size 'K' is not declared"),
    ("array[N] int<lower=1, upper=y> group", "size 'y' is vector[N]; a size must be a single int"),
])
def test_a_bound_must_name_a_declared_size(declaration, message):
    with pytest.raises(GpdslError, match=message.replace("[", r"\[").replace("]", r"\]")):
        check_text(GROUPED.replace("array[N] int<lower=1, upper=G> group", declaration))


def test_a_parameter_bound_cannot_name_a_size():
    with pytest.raises(GpdslError, match="a bound of a parameter must be a constant number"):
        check_text(GROUPED.replace("real<lower=0> tau", "real<lower=0, upper=G> tau"))


GROUP_EFFECT = GROUPED.replace("real<lower=0> tau ~ gamma(2, 1);",
                               "real<lower=0> tau ~ gamma(2, 1); vector[G] u ~ normal(0, tau);") \
    .replace("vector[N] y;", "vector[N] y; vector[N] x; matrix[G, 2] Z;") \
    .replace("y ~ normal(0, noise);", "f ~ gp(x, rbf());\n  y ~ normal(f + u[group], noise);")


def _index_type(expression: str) -> str:
    model, _ = check_text(GROUP_EFFECT.replace("y ~ normal(f + u[group], noise);",
                                               f"y ~ normal(f + u[group], noise);\n  y ~ normal({expression}, 1);"))
    likelihood = [s for s in model.statements if type(s).__name__ == "LikelihoodStatement"][-1]
    return likelihood.distribution.arg("mu").type.describe()


@pytest.mark.parametrize("expression, described", [
    ("u[group]", "vector[N]"),
    ("u[group[2]]", "real"),
    ("Z[group, 1]", "vector[N]"),
    ("Z[group, group]", "vector[N]"),   # the entries at the pairs (group[n], group[n])
])
def test_an_int_array_index_keeps_its_dimension_at_the_array_length(expression, described):
    assert _index_type(expression) == described


def test_an_int_array_selects_matrix_rows():
    with pytest.raises(GpdslError, match=r"argument 'mu' of normal has shape \[N, 2\]"):
        _index_type("Z[group]")


@pytest.mark.parametrize("expression, message", [
    ("u[x]", r"an index must be an integer or a one-dimensional int array, got vector\[N\]"),
    ("Z[group, group[1:2]]", "the int arrays of G\\[a, b\\] must have the same length, got N and 2"),
])
def test_bad_multi_indices_are_refused(expression, message):
    with pytest.raises(GpdslError, match=message):
        _index_type(expression)


def test_multi_indexing_is_emitted_to_stan():
    model, _ = check_text(GROUP_EFFECT)
    code = generate_stan(model).code
    assert "multi_normal_cholesky_lpdf(y | rep_vector(0, N) + (u[group])," in code  # f integrated out around u[group]
    check_program(code)


def test_gibbs_runs_a_group_effect_and_refuses_it_in_a_loop_at_the_statement():
    from gpdsl.api import sample
    from gpdsl.errors import MethodError
    rng = np.random.default_rng(3)
    data = {"N": 6, "G": 2, "y": rng.normal(size=6), "x": rng.normal(size=6), "Z": np.zeros((2, 2)),
            "group": np.array([1, 2, 1, 2, 1, 2])}
    looped = GROUP_EFFECT.replace("y ~ normal(f + u[group], noise);",
                                  "for (i in 1:N) y[i] ~ normal(f[i] + u[group[i]], noise * i);")
    with pytest.raises(MethodError, match="sits in a loop") as caught:
        sample(looped, data, "gibbs", seed=1)
    assert (caught.value.span.line, caught.value.span.column) == (looped.splitlines().index(
        next(line for line in looped.splitlines() if "y" in line and "~ normal(f" in line)) + 1, 18)
    # vectorised, the group effect is an offset of f: gibbs samples u with the other hyperparameters
    fit = sample(GROUP_EFFECT, data, "gibbs", seed=1, chains=2, warmup=20, draws=20)
    assert fit.posterior["u"].shape == (2, 20, 2) and np.isfinite(fit.posterior["u"].values).all()


COLUMNS = """
data { int N; matrix[N, 2] X; vector[N] y; vector[N] t; }
parameters { real<lower=0> noise ~ half_normal(1); }
model {
  f ~ gp(X, KERNEL);
  y ~ normal(f, noise);
}
"""


def _columns(kernel: str):
    model, _ = check_text(COLUMNS.replace("KERNEL", kernel))
    return [(leaf.name, leaf.component, leaf.columns, leaf.input_dim) for leaf in model.statements[-2].kernel.leaves()]


def test_a_full_slice_and_ranges_parse_as_indices():
    model, _ = check_text(COLUMNS.replace("KERNEL", "rbf()").replace("y ~ normal(f, noise);",
                                                                      "y ~ normal(f + X[:, 1] - X[1:N, 2], noise);"))
    likelihood = model.statements[-1]
    assert likelihood.distribution.arg("mu").type.describe() == "vector[N]"


def test_kernels_bind_to_columns():
    assert _columns("matern52(X[:, 1]) + periodic(X[:, 2], period = 2)") == [
        ("matern52", 0, (0, 1), 1), ("periodic", 0, (1, 2), 1)]
    assert _columns("rbf(X[:, 1:2], lengthscale = [1, 2])") == [("rbf", 0, (0, 2), 2)]
    assert _columns("rbf(X)") == [("rbf", 0, None, 2)]


@pytest.mark.parametrize("kernel, message", [
    ("matern52(X[1:N, 1], lengthscale = 1)", r"a kernel binds to whole columns of a matrix input: write X\[:, j\]"),
    ("matern52(X[:, 3])", r"column 3 is out of range 1\.\.2"),
    ("matern52(X[:, 2:3])", r"column range 2:3 is out of range 1\.\.2"),
    ("rbf(X[:, 1], lengthscale = [1, 2])", "has length 2 but the kernel acts on 1 input dimension"),
    ("matern52(t)", "'t' is not one of this GP's inputs"),
])
def test_bad_column_bindings_say_what_is_wrong(kernel, message):
    with pytest.raises(GpdslError, match=message):
        check_text(COLUMNS.replace("KERNEL", kernel))


def test_column_kernels_are_emitted_to_stan():
    model, _ = check_text(COLUMNS.replace("KERNEL", "matern52(X[:, 1]) + periodic(X[:, 2], period = 2)"))
    code = generate_stan(model).code
    assert "rows_as_points(X[:, 1:1])" in code and "rows_as_points(X[:, 2:2])" in code
    check_program(code)
