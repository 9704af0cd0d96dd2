"""The Stan program of a Hilbert-space approximate GP: brms's form (basis in transformed data, spectral densities as
template functions, std_normal weights, f in transformed parameters), accepted by stanc for every spectral density,
sums, scalings, ARD length-scales, per-dimension m and 1 to 3 input columns; over latent inputs, the log density of
the basis weights against NumPy's."""

import itertools
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from gpdsl.api import check_file, check_text
from gpdsl.backends.stan.codegen import generate_stan
from gpdsl.backends.stan.runners import log_prob_pystan, unconstrain_pystan
from gpdsl.backends.stan.stanc import check_program
from tests.stan_available import needs_pystan

ROOT = Path(__file__).resolve().parents[2]

EVERY_SPECTRAL_DENSITY = """
data { int N; vector[N] t; matrix[N, 3] X; matrix[N, 2] Z; vector[N] y; array[N] int<lower=0, upper=1> b; }
parameters {
  real<lower=0> s ~ lognormal(0, 1);
  real<lower=0> ell ~ gamma(2, 2);
  vector<lower=0>[3] ard ~ gamma(2, 2);
  real<lower=0> noise ~ half_normal(1);
}
model {
  f ~ gp(t, s * rbf(lengthscale = ell) + matern12(1, ell) + rbf(inv_ls2 = ell), approx = hsgp(m = 25));
  g ~ gp(X, matern52(lengthscale = ard) + 0.5 * matern(7/2, s, ard), approx = hsgp(m = [6, 5, 4], c = 2.2));
  h ~ gp(Z, square(s) * matern32(lengthscale = ell), mean = 1.5, approx = hsgp(m = 8, c = 1.2));
  y ~ normal(f + h, noise);
  b ~ bernoulli_logit(g);
}
"""


def test_model_file_is_the_brms_form_and_passes_stanc():
    model, _ = check_file(ROOT / "models" / "gp_hsgp.gpm")
    program = generate_stan(model)
    check_program(program.code, "gp_hsgp")
    code = program.code
    assert program.parameter_names == ("mu", "sigma", "ell", "f_z")
    assert program.variables["f"].kind == "hsgp" and program.variables["f"].block == "transformed parameters"
    assert "vector[40] f_z;" in code and "target += std_normal_lpdf(f_z);" in code
    for line in ("array[40, 1] int f_hsgp_indices = hsgp_indices({40});",
                 "vector[1] f_hsgp_L = hsgp_half_widths(t_points, f_hsgp_centre, 1.5);",
                 "matrix[N, 40] f_hsgp_phi = hsgp_eigenfunctions(t_points, f_hsgp_centre, f_hsgp_L, f_hsgp_omega);",
                 "f = f_hsgp_phi * (sqrt(square(sigma) * matern32_spd(f_hsgp_omega, 1.0, rep_vector(ell, 1))) .* f_z)"
                 " + mu;"):
        assert line in code, line
    assert "matern32_kernel" not in code and "cholesky_decompose" not in code


def test_every_spectral_density_passes_stanc_and_nothing_is_integrated_out():
    model, _ = check_text(EVERY_SPECTRAL_DENSITY)
    program = generate_stan(model)
    check_program(program.code)
    code = program.code
    for function in ("rbf_spd", "rbf_inv_ls2_spd", "matern12_spd", "matern52_spd", "matern_spd", "matern32_spd"):
        assert f"{function}(" in code, function
    assert "array[120, 3] int g_hsgp_indices = hsgp_indices({6, 5, 4});" in code
    assert "matrix[64, 2] h_hsgp_omega" in code and "+ 1.5;" in code
    assert {program.variables[name].kind for name in "fgh"} == {"hsgp"}
    assert "multi_normal" not in code and "target += normal_lpdf(y | f + h, noise);" in code


def test_four_input_columns_need_max_columns_and_then_pass_stanc():
    """Past 3 input columns the checker refuses an HSGP unless ``max_columns`` allows them (the golden file
    ``hsgp_four_dimensions`` holds the refusal); allowed, the 3^4 tensor-product basis passes stanc."""
    from gpdsl.errors import ModelCheckError

    text = """
data { int N; matrix[N, 4] X; array[N] int<lower=0, upper=1> y; }
parameters { real<lower=0> ell ~ gamma(2, 2); }
model {
  f ~ gp(X, rbf(lengthscale = ell), approx = hsgp(m = 3APPROX));
  y ~ bernoulli_logit(f);
}
"""
    with pytest.raises(ModelCheckError, match="at most 3 columns; these have 4"):
        check_text(text.replace("APPROX", ""))
    model, _ = check_text(text.replace("APPROX", ", max_columns = 4"))
    program = generate_stan(model)
    check_program(program.code)
    assert "array[81, 4] int f_hsgp_indices = hsgp_indices({3, 3, 3, 3});" in program.code


PERIODIC_TERMS = """
data { int N; vector[N] t; vector[N] y; }
parameters { real<lower=0> s ~ lognormal(0, 1); real<lower=0> ell ~ gamma(2, 2); real<lower=0> noise ~ half_normal(1); }
model {
  f ~ gp(t, square(s) * matern32(lengthscale = 30 * ell) + 0.5 * periodic(lengthscale = ell, period = 365.25)
            + periodic(s, 0.6, 7), approx = hsgp(m = 10));
  g ~ gp(t, periodic(lengthscale = ell, period = 7), approx = hsgp(m = 3));
  y ~ normal(f + g, noise);
}
"""


def test_periodic_terms_are_cosine_series_beside_the_laplacian_basis_and_pass_stanc():
    model, _ = check_text(PERIODIC_TERMS)
    program = generate_stan(model)
    check_program(program.code)
    code = program.code
    assert "vector[52] f_z;" in code and "vector[7] g_z;" in code  # 10 + 2 * 21, and 2 * 3 + 1
    for line in ("matrix[N, 21] f_hsgp_series_phi = hsgp_periodic_basis(t_points, 365.25, 10);",
                 "matrix[N, 21] f_hsgp_series_phi_ = hsgp_periodic_basis(t_points, 7, 10);",
                 "matrix[N, 52] f_hsgp_basis = append_col(append_col(f_hsgp_phi, f_hsgp_series_phi), "
                 "f_hsgp_series_phi_);",
                 "matrix[N, 7] g_hsgp_basis = g_hsgp_series_phi;",
                 "g = g_hsgp_basis * (sqrt(hsgp_periodic_variances(3, 1.0, rep_vector(ell, 1))) .* g_z);"):
        assert line in code, line
    assert ("append_row(append_row(square(s) * matern32_spd(f_hsgp_omega, 1.0, rep_vector(30 * ell, 1)), "
            "0.5 * hsgp_periodic_variances(10, 1.0, rep_vector(ell, 1))), hsgp_periodic_variances(10, s, "
            "rep_vector(0.6, 1)))") in code
    assert "cholesky_decompose" not in code and {program.variables[name].kind for name in "fg"} == {"hsgp"}


WITHOUT_CONSTANT = """
data { int N; vector[N] t; vector[N] y; }
parameters { real mu ~ normal(0, 1); real<lower=0> ell ~ gamma(2, 2); real<lower=0> noise ~ half_normal(1); }
model {
  g ~ gp(t, matern32(lengthscale = 30 * ell) + 0.5 * periodic(lengthscale = ell, period = 7),
         approx = hsgp(m = 3, constant = 0));
  y ~ normal(mu + g, noise);
}
"""


def test_a_series_without_its_constant_drops_its_first_column_and_variance_and_passes_stanc():
    model, _ = check_text(WITHOUT_CONSTANT)
    program = generate_stan(model)
    check_program(program.code)
    code = program.code
    assert "vector[9] g_z;" in code  # 3 Laplacian + 2 * 3 harmonics
    for line in ("matrix[N, 6] g_hsgp_series_phi = block(hsgp_periodic_basis(t_points, 7, 3), 1, 2, N, 6);",
                 "tail(0.5 * hsgp_periodic_variances(3, 1.0, rep_vector(ell, 1)), 6)"):
        assert line in code, line


PERIOD_AS_DATA = """
data { int N; vector[N] t; vector[N] y; real<lower=0> days_per_week; }
parameters { real<lower=0> ell ~ gamma(2, 2); real<lower=0> noise ~ half_normal(1); }
model {
  g ~ gp(t, periodic(lengthscale = ell, period = days_per_week)
            + periodic(lengthscale = ell, period = 2 * days_per_week), approx = hsgp(m = 3));
  y ~ normal(g, noise);
}
"""


def test_a_period_given_as_data_builds_its_series_in_transformed_data_and_passes_stanc():
    model, _ = check_text(PERIOD_AS_DATA)
    program = generate_stan(model)
    check_program(program.code)
    for line in ("matrix[N, 7] g_hsgp_series_phi = hsgp_periodic_basis(t_points, days_per_week, 3);",
                 "matrix[N, 7] g_hsgp_series_phi_ = hsgp_periodic_basis(t_points, 2 * days_per_week, 3);"):
        assert line in program.code, line
    assert program.code.index("hsgp_periodic_basis(t_points, days_per_week") > program.code.index("transformed data {")


LATENT_INPUTS_POISSON = """
data { int N; array[N] int<lower=0> y; }
parameters { real<lower=0> s2 ~ lognormal(0, 1); vector<lower=0>[2] ell ~ lognormal(0, 1); }
latent { matrix[N, 2] X; }
model {
  X ~ normal(0.5, 2);
  f ~ gp(X, rbf(variance = s2, lengthscale = ell), approx = hsgp(m = [4, 3], c = 1.5));
  y ~ poisson_log(f);
}
"""


def latent_poisson_log_joint(values, y):
    """The model's log density in NumPy: the box centre 0.5 and half-width 1.5 * 3 * 2 = 9 from the prior of X, the
    sine eigenfunctions over the index pairs (last column fastest), the rbf spectral density as weight variances."""
    X, z, s2, ell = values["X"], values["f_z"], values["s2"], values["ell"]
    centre, L = 0.5, 9.0
    pairs = np.array(list(itertools.product(range(1, 5), range(1, 4))))
    omega = pairs * np.pi / (2 * L)
    phi = np.prod(np.sin(omega[None, :, :] * (X[:, None, :] - centre + L)) / np.sqrt(L), axis=2)
    density = s2 * 2 * np.pi * np.prod(ell) * np.exp(-0.5 * np.sum(ell ** 2 * omega ** 2, axis=1))
    f = phi @ (np.sqrt(density) * z)
    return (stats.lognorm(1).logpdf(s2) + stats.lognorm(1).logpdf(ell).sum() + stats.norm(0.5, 2).logpdf(X).sum()
            + stats.norm().logpdf(z).sum() + stats.poisson(np.exp(f)).logpmf(y).sum())


@pytest.mark.slow
@needs_pystan
def test_over_latent_inputs_under_a_poisson_likelihood_stan_samples_the_basis_weights():
    model, _ = check_text(LATENT_INPUTS_POISSON)
    program = generate_stan(model)
    assert program.variables["f"].kind == "hsgp" and "vector[12] f_z;" in program.code
    rng = np.random.default_rng(3)
    data = {"N": 9, "y": rng.poisson(2.0, 9)}
    stan_data = program.stan_data(model, data)
    points = [{"s2": rng.lognormal(0, 0.5), "ell": rng.lognormal(0, 0.5, 2), "X": rng.normal(0.5, 2, (9, 2)),
               "f_z": rng.normal(size=12)} for _ in range(4)]
    unconstrained = np.array([unconstrain_pystan(program.code, stan_data, p) for p in points])
    theirs = log_prob_pystan(program.code, stan_data, unconstrained, jacobian=False)
    ours = np.array([latent_poisson_log_joint(p, data["y"]) for p in points])
    np.testing.assert_allclose(theirs, ours, rtol=1e-10)


@pytest.mark.slow
@needs_pystan
def test_the_centred_program_is_the_non_centred_one_under_the_change_of_variables():
    """``hsgp(..., centred = 1)`` samples the basis coefficients ``w = sqrt(S) .* z`` with prior ``normal(0,
    sqrt(S))``: at ``w = s z`` its log density is the non-centred program's at ``z`` less ``sum(log s)`` (the
    change of variables), and ``f_z`` is given back as a transformed parameter."""
    from gpdsl.backends.jax.hsgp import hsgp_basis
    from gpdsl.kernels.stationary import Matern32

    text = (ROOT / "models" / "gp_hsgp.gpm").read_text()
    centred_text = text.replace("approx = hsgp(m = 40, c = 1.5)", "approx = hsgp(m = 40, c = 1.5, centred = 1)")
    assert centred_text != text
    (plain, _), (centred, _) = check_text(text), check_text(centred_text)
    plain_program, centred_program = generate_stan(plain), generate_stan(centred)
    assert centred_program.parameter_names == ("mu", "sigma", "ell", "f_w")
    assert "vector[40] f_z;" in centred_program.code and "target += normal_lpdf(f_w | 0, sqrt(" in centred_program.code
    rng = np.random.default_rng(4)
    t = np.sort(rng.uniform(0, 10, 30))
    data = {"N": 30, "t": t, "y": rng.poisson(2.0, 30)}
    basis = hsgp_basis(plain.gp_statements()[0], t[:, None])
    for _ in range(3):
        mu, sigma, ell, z = rng.normal(), rng.lognormal(0, 0.3), rng.lognormal(0, 0.3), rng.normal(size=40)
        s = np.sqrt(np.asarray(basis.weight_variances(Matern32(sigma ** 2, ell))))
        theirs = []
        for program, weights in ((plain_program, {"f_z": z}), (centred_program, {"f_w": s * z})):
            stan_data = program.stan_data(plain, data)
            point = unconstrain_pystan(program.code, stan_data, {"mu": mu, "sigma": sigma, "ell": ell, **weights})
            theirs.append(log_prob_pystan(program.code, stan_data, point[None], jacobian=False)[0])
        np.testing.assert_allclose(theirs[1], theirs[0] - np.sum(np.log(s)), rtol=1e-10)


def test_the_centred_program_samples_the_coefficients_and_gives_back_the_weights():
    text = (ROOT / "models" / "gp_hsgp.gpm").read_text().replace("approx = hsgp(m = 40, c = 1.5)",
                                                                 "approx = hsgp(m = 40, c = 1.5, centred = 1)")
    program = generate_stan(check_text(text)[0])
    check_program(program.code)
    assert program.parameter_names == ("mu", "sigma", "ell", "f_w") and program.variables["f"].weights == "f_z"
    for line in ("f_z = f_w ./ sqrt(square(sigma) * matern32_spd(f_hsgp_omega, 1.0, rep_vector(ell, 1)));",
                 "f = f_hsgp_phi * f_w + mu;",
                 "target += normal_lpdf(f_w | 0, sqrt(square(sigma) * matern32_spd(f_hsgp_omega, 1.0, "
                 "rep_vector(ell, 1))));"):
        assert line in program.code, line
    assert "std_normal_lpdf(f_z)" not in program.code


def test_centred_weights_over_latent_inputs_are_refused():
    from gpdsl.errors import ModelCheckError

    with pytest.raises(ModelCheckError, match=r"hsgp\(centred = 1\) samples the basis coefficients of data inputs"):
        check_text(LATENT_INPUTS_POISSON.replace("approx = hsgp(m = ", "approx = hsgp(centred = 1, m = "))
