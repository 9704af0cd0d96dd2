"""Size symbols in bounds, multi-indexing by integer data arrays and column selections: checker, data
validation and generated Stan (checked by stanc)."""

import numpy as np
import pytest

from gpdsl.api import check_text
from gpdsl.backends.stan.codegen import generate_stan
from gpdsl.backends.stan.stanc import check_program
from gpdsl.data_validation import validate_data
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
