"""The HSGP diagnostics against the paper's rule computed by hand (Riutort-Mayol et al. 2023, section 4.3): an rbf
basis of m functions with boundary factor c over inputs of half range S represents length-scales down to
1.75 c S / m, and needs c >= max(1.2, 3.2 l / S); Matérn-3/2's constants are 3.42 and 4.5."""

import numpy as np

from gpdsl.api import check_text
from gpdsl.inference.hsgp_diagnostics import hsgp_warnings

ONE_D = """
data { int N; vector[N] t; array[N] int<lower=0> y; }
parameters { real<lower=0> ell ~ inv_gamma(5, 5); }
model {
  f ~ gp(t, rbf(lengthscale = ell) + matern32(lengthscale = 1.5), approx = hsgp(m = 20, c = 1.5));
  y ~ poisson_log(f);
}
"""

TWO_D = """
data { int N; matrix[N, 2] X; vector[N] y; }
parameters { vector<lower=0>[2] ell ~ inv_gamma(5, 5); }
model {
  f ~ gp(X, matern32(lengthscale = ell), approx = hsgp(m = [30, 20], c = 2));
  y ~ normal(f, 0.5);
}
"""


def data_1d():
    return {"N": 3, "t": np.array([0.0, 4.0, 10.0]), "y": np.array([1, 2, 3])}  # half range 5


def test_no_warning_when_the_draws_are_above_the_rule():
    model, _ = check_text(ONE_D)
    shortest = 1.75 * 1.5 * 5.0 / 20  # 0.656; matern32: 1.28 <= 1.5, and c >= 4.5 * 1.5 / 5 = 1.35
    draws = {"ell": np.full((2, 50), shortest * 1.2)}
    assert hsgp_warnings(model, data_1d(), draws) == []


def test_short_length_scale_draws_are_named_with_the_m_they_need():
    model, _ = check_text(ONE_D)
    shortest = 1.75 * 1.5 * 5.0 / 20
    ell = np.r_[np.full(90, 1.0), np.full(10, 0.3)]  # 10% below
    warnings = hsgp_warnings(model, data_1d(), {"ell": ell.reshape(1, -1)})
    assert len(warnings) == 1
    assert "10% of the rbf length-scale draws lie below 0.656" in warnings[0]
    assert f"raise m to about {int(np.ceil(1.75 * 1.5 * 5.0 / np.quantile(ell, 0.05)))}" in warnings[0]
    assert shortest > 0.3


def test_long_length_scales_need_a_larger_boundary_factor():
    model, _ = check_text(ONE_D)
    warnings = hsgp_warnings(model, data_1d(), {"ell": np.full((1, 20), 4.0)})  # needs c >= 3.2 * 4 / 5 = 2.56
    assert len(warnings) == 1 and "needs a boundary factor c of at least 2.56" in warnings[0]


def test_constant_length_scale_is_judged_too():
    model, _ = check_text(ONE_D.replace("matern32(lengthscale = 1.5)", "matern32(lengthscale = 0.5)"))
    warnings = hsgp_warnings(model, data_1d(), {"ell": np.full((1, 20), 1.0)})
    assert len(warnings) == 1  # 3.42 * 1.5 * 5 / 20 = 1.28 > 0.5
    assert "the matern32 length-scale, 0.5, lies below 1.28" in warnings[0]


def test_ard_length_scales_are_judged_per_input_column():
    model, _ = check_text(TWO_D)
    X = np.array([[0.0, 0.0], [2.0, 10.0], [1.0, 5.0]])  # half ranges 1 and 5
    # column 1: 3.42 * 2 * 1 / 30 = 0.228; column 2: 3.42 * 2 * 5 / 20 = 1.71, and c >= 4.5 l / 5 up to l = 2.22
    data = {"N": 3, "X": X, "y": np.zeros(3)}
    warnings = hsgp_warnings(model, data, {"ell": np.tile([0.3, 1.0], (40, 1))[None]})
    assert len(warnings) == 1 and "(input column 2)" in warnings[0] and "below 1.71" in warnings[0]
    assert hsgp_warnings(model, data, {"ell": np.tile([0.3, 2.0], (40, 1))[None]}) == []


def test_inputs_without_spread_are_refused_before_the_run():
    import pytest

    from gpdsl.api import prepare
    from gpdsl.errors import DataError
    from gpdsl.registry import methods

    model, _ = check_text(ONE_D)
    data = {"N": 3, "t": np.full(3, 2.0), "y": np.array([1, 2, 3])}
    with pytest.raises(DataError, match=r"data 't' \(the inputs of the hsgp 'f'\): column 1 has the same value at "
                                        r"every point"):
        prepare(model, data, "nuts", methods()["nuts"].settings(), seed=1)
