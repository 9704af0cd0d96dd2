"""Cross-backend check: the JAX log density and Stan's ``log_prob`` differ by one constant.

Stan drops normalising constants in ``~`` statements, so the two agree up to an additive constant that
must be the same at every point. Points are random on the unconstrained space; Stan's unconstrained
vector is ours with each block flattened column-major (checked against PyStan's ``unconstrain_pars``).
"""

import jax.numpy as jnp
import numpy as np
import pytest

from gpdsl.api import check_file, check_text
from gpdsl.backends.jax.lowering import lower
from gpdsl.backends.stan.codegen import generate_stan
from gpdsl.backends.stan.runners import log_prob_pystan, unconstrain_pystan
from tests.stan_available import needs_pystan

N_POINTS = 20

ALL_KERNELS = """
data { int N; int D; matrix[N, D] X; vector[N] y; }
parameters {
  real<lower=0> s ~ lognormal(0, 1);
  vector<lower=0>[D] ell ~ gamma(2, 2);
  real<lower=0> p ~ lognormal(0, 0.5);
  real<lower=0> noise ~ half_normal(1);
}
model {
  f ~ gp(X, s * rbf(lengthscale = ell) + matern12(0.5, ell) + matern32(lengthscale = 1.3)
            + matern52(variance = 0.7, lengthscale = ell) * periodic(lengthscale = 0.8, period = p)
            + linear(ell) + constant(0.3) + mlp(1.1, ell, 0.4) + rbf(inv_ls2 = ell) + white(0.01));
  y ~ normal(f, noise);
}
"""

NEW_KERNELS = """
data { int N; int D; matrix[N, D] X; vector[N] y; }
parameters {
  real<lower=0> s ~ lognormal(0, 1);
  vector<lower=0>[D] ell ~ gamma(2, 2);
  real<lower=0> alpha ~ gamma(2, 1);
  vector<lower=0>[2] w ~ lognormal(0, 1);
  vector[2] m ~ normal(0, 1);
  real<lower=0> sc ~ lognormal(-1, 1);
  real<lower=0> noise ~ half_normal(1);
}
model {
  f ~ gp(X, s * rational_quadratic(lengthscale = ell, alpha = alpha) + cosine(0.5, ell) + polynomial(ell, 0.5, 3)
            + spectral_mixture(X[:, 2], w, m, sc));
  y ~ normal(f, noise);
}
"""

KERNEL_ARGUMENTS = """
data { int N; int D; matrix[N, D] X; vector[N] y; }
parameters {
  real<lower=0> s ~ lognormal(0, 1);
  vector<lower=0>[D] ell ~ gamma(2, 2);
  real loc ~ normal(0.5, 0.3);
  real<lower=0> steep ~ lognormal(2, 0.5);
  vector<lower=0>[D] a ~ lognormal(0, 0.5);
  real<lower=0> b ~ lognormal(0, 0.5);
  real slope ~ normal(0, 1);
  real<lower=0> noise ~ half_normal(1);
}
model {
  f ~ gp(X, s * matern(9/2, lengthscale = ell)
            + changepoint(X[:, 1], rbf(lengthscale = ell), matern(3/2, s, 0.4) + white(0.01), loc, steep)
            + warp(X, matern52(lengthscale = ell), a, b)
            + warp(X[:, 2], changepoint(rbf(0.5), linear(1), location = loc), 2, b)
            + gibbs(X[:, 2], 0.8, 0.3, slope));
  y ~ normal(f, noise);
}
"""


def unit_interval_data(rng):
    N, D = 10, 2
    return {"N": N, "D": D, "X": rng.uniform(size=(N, D)), "y": rng.normal(size=N)}

COREGION = """
data { int N; int P; vector[N] x; array[N] int<lower=1, upper=P> output; array[N] int<lower=0> c; }
parameters {
  real<lower=0> ell ~ gamma(2, 2);
  matrix[P, 2] W ~ normal(0, 1);
  vector<lower=0>[P] kappa ~ gamma(2, 4);
  matrix[P, 1] V ~ normal(0, 1);
}
model {
  f ~ gp((x, output), rbf(x, lengthscale = ell) * coregion(output, W, kappa)
                      + matern32(x, lengthscale = 2) * coregion(output, V, 0.1));
  c ~ poisson_log(f);
}
"""

COREGION_CORR = """
data { int N; int P; vector[N] x; array[N] int<lower=1, upper=P> output; array[N] int<lower=0> c; }
parameters {
  real<lower=0> ell ~ gamma(2, 2);
  cholesky_factor_corr[P] L ~ lkj_corr_cholesky(1.5);
  vector<lower=0>[P] sigma ~ half_normal(1);
}
model {
  f ~ gp((x, output), rbf(x, lengthscale = ell) * coregion_corr(output, L, sigma));
  c ~ poisson_log(f);
}
"""


SIMPLEX = """
data { int N; int D; matrix[N, D] X; vector[N] y; vector<lower=0>[3] a; }
parameters {
  real<lower=0> ell ~ gamma(2, 2);
  real<lower=0> noise ~ half_normal(1);
  simplex[D] w ~ dirichlet(1.5);
  simplex[3] v ~ dirichlet(a);
  simplex[4] u;
}
model {
  f ~ gp(X, v[1] * rbf(lengthscale = ell) + v[2] * matern32(lengthscale = ell) + v[3] * linear(u[4]));
  y ~ normal(X * w + u[1] + f, noise);
}
"""


def simplex_data(rng):
    return {**regression_data(rng), "a": np.array([0.7, 2.0, 3.5])}


STUDENT_T_PROCESS_INTEGER_NU = """
data { int N; int D; matrix[N, D] X; vector[N] y; }
parameters { real<lower=0> ell ~ inv_gamma(5, 5); real<lower=0> noise ~ half_normal(1); }
model {
  f ~ student_t_process(4, X, rbf(lengthscale = ell) + linear(0.5));
  y ~ normal(f, noise);
}
"""

LIKELIHOODS = """
data {
  int N; matrix[N, 1] X;
  vector[N] y_t; array[N] int<lower=0> y_nb; array[N] int<lower=0> trials; array[N] int<lower=0> y_bin;
  array[N] int<lower=1, upper=4> y_ord; vector<lower=0>[N] y_g; array[N] int<lower=0> y_zinb;
  array[N] int<lower=0> y_hu; vector<lower=0, upper=1>[N] y_beta; vector<lower=0>[N] t;
  array[N] int<lower=-1, upper=2> cens; vector<lower=0>[N] t_up; vector[N] y_c; vector[N] y_c_up;
}
parameters {
  real<lower=0> ell ~ lognormal(0, 0.5);
  real<lower=0> nu ~ gamma(2, 0.1);
  real<lower=0> sigma ~ half_normal(1);
  real<lower=0> phi ~ gamma(2, 1);
  real c1 ~ normal(0, 2);
  real<lower=0> d2 ~ gamma(2, 2);
  real<lower=0> d3 ~ gamma(2, 2);
  real<lower=0> alpha ~ gamma(2, 1);
  real<lower=0, upper=1> zi ~ uniform(0, 1);
  real<lower=0, upper=1> hu ~ uniform(0, 1);
}
model {
  f ~ gp(X, rbf(lengthscale = ell));
  y_t ~ student_t(nu, f, sigma);
  y_nb ~ neg_binomial_2_log(f, phi);
  y_bin ~ binomial_logit(trials, f);
  y_ord ~ ordered_logistic(f, [c1, c1 + d2, c1 + d2 + d3]);
  y_g ~ gamma_log(f, alpha);
  y_zinb ~ zero_inflated_neg_binomial_2_log(f, phi, zi);
  y_hu ~ hurdle_poisson_log(f, hu);
  y_beta ~ beta_logit(f, phi);
  t ~ weibull_censored(f, alpha, cens, t_up);
  t ~ lognormal_censored(f, sigma, cens, t_up);
  y_c ~ normal_censored(f, sigma, cens, y_c_up);
}
"""

INDEXING = """
data {
  int N; int G; matrix[N, 3] X; vector[N] y; vector[N] z; vector[N] w; vector[N] v; vector[N] log_e;
  array[N] int<lower=0> c; array[N] int<lower=1, upper=G> group;
}
parameters {
  real<lower=0> tau ~ gamma(2, 1);
  vector[G] u ~ normal(0, tau);
  real<lower=0> noise ~ gamma(2, 1);
  real<lower=0> s ~ lognormal(0, 1);
  real<lower=0> p ~ lognormal(0, 0.5);
  vector<lower=0>[2] ell ~ gamma(2, 2);
  real mu ~ normal(0, 1);
  real beta ~ normal(0, 1);
}
model {
  h ~ gp(X[:, 3], s * rbf(lengthscale = 0.6), mean = beta * X[:, 3]);
  v ~ normal(mu + beta * X[:, 2] + h, noise);
  e ~ gp(X[:, 2], rbf(lengthscale = 0.9), mean = mu);
  c ~ poisson_log(log_e + e);
  f ~ gp(X[:, 1], rbf(lengthscale = 0.5));
  y ~ normal(f + u[group], noise);
  for (i in 1:N) z[i] ~ normal(2 * u[group[i]], noise);
  g ~ gp(X, matern52(X[:, 1], variance = s, lengthscale = 0.7) + periodic(X[:, 2], lengthscale = 0.8, period = p)
            + rbf(X[:, 2:3], lengthscale = ell));
  w ~ normal(g, noise);
}
"""

CONSTRUCTS = """
data {
  int N; int G; int K; vector[N] t; vector[N] y; array[N] int<lower=0> c; matrix[N, K] PHI;
  array[N] int<lower=1, upper=G> group; array[N] int<lower=1, upper=K> year;
}
parameters {
  real<lower=0> tau ~ cauchy(0, 1);
  real<lower=0> scale ~ cauchy(0.5, 2);
  vector<lower=0, upper=1>[2] share ~ beta(2, 3);
  vector[K] b ~ normal(0, 1);
  vector[G] z ~ normal(0, 1);
  matrix[G, K] E ~ normal(0, 0.5);
  real<lower=0> noise ~ half_normal(1);
}
transformed parameters {
  vector[G] u = tau * z;
  vector[N] mu = PHI * b + mean(u) - sum(z) / G + dot_product(b, b) * share[1];
  real ell = inv_logit(share[2]) + exp(log(scale));
}
model {
  f ~ gp(t, rbf(lengthscale = ell));
  for (n in 1:N) y[n] ~ normal(mu[n] + f[n] + u[group[n]] + E[group[n], year[n]], noise);
  g ~ gp(t, rbf(lengthscale = 0.7));
  for (n in 1:N) c[n] ~ poisson_log(g[n] + E[group[n], year[n]] * share[2]);
}
"""


def stan_vector(jax_model, z):
    """Our unconstrained vector reordered to Stan's: arrays row-major, each vector or matrix column-major; the
    raw values of a GP over two-level inputs (``f ~ gp((t, X), k)``, one Stan vector) row-major."""
    parts = jax_model.unflatten(jnp.asarray(z))
    model = jax_model.model
    flattened = {node.name for node in jax_model.gp_nodes if len(node.statement.inputs.index_shape) == 2}
    pieces = []
    for block in jax_model.blocks:
        value = np.asarray(parts[block.name])
        if block.role in ("hsgp_weights", "state_space_innovations"):  # basis weights or innovations: one Stan vector
            pieces.append(value)
            continue
        name = block.name.removesuffix("_raw") if block.role == "latent_raw" else block.name
        if block.role == "latent_raw" and name in flattened:
            pieces.append(np.ravel(value))
            continue
        variable = model.parameters.get(name) or model.latents[name]
        leading = value.shape[:len(variable.type.array_dims)]
        pieces.extend(np.ravel(value[index], order="F") for index in np.ndindex(leading))
    return np.concatenate(pieces)


def stan_values(program, jax_model, free):
    """Constrained values by Stan name (the raw values of a GP over two-level inputs as one vector)."""
    flattened = {node.name + "_raw" for node in jax_model.gp_nodes if len(node.statement.inputs.index_shape) == 2}
    return {k: (np.ravel(np.asarray(v)) if k in flattened else np.asarray(v)).tolist() for k, v in free.items()}


def classification_data(rng):
    N, D = 15, 2
    X = rng.uniform(size=(N, D))
    return {"N": N, "D": D, "X": X, "y": (X[:, 0] + 0.3 * rng.normal(size=N) > 0.5).astype(int)}


def regression_data(rng):
    N, D = 10, 2
    return {"N": N, "D": D, "X": rng.normal(size=(N, D)), "y": rng.normal(size=N)}


def gplvm_data(rng):
    N, D, Q = 8, 3, 2
    return {"N": N, "D": D, "Q": Q, "Y": rng.normal(size=(N, D))}


def likelihoods_data(rng):
    N = 12
    trials = rng.integers(0, 15, N)
    t, y_c = rng.gamma(2.0, 1.0, N), rng.normal(size=N)
    return {"N": N, "X": rng.uniform(size=(N, 1)), "y_t": rng.standard_t(3, N), "y_nb": rng.poisson(4.0, N),
            "trials": trials, "y_bin": rng.binomial(trials, 0.3), "y_ord": rng.integers(1, 5, N),
            "y_g": rng.gamma(2.0, 1.0, N), "y_zinb": rng.poisson(2.0, N) * (rng.uniform(size=N) > 0.3),
            "y_hu": rng.poisson(2.0, N), "y_beta": rng.beta(2.0, 3.0, N), "t": t, "cens": np.resize([0, 1, -1, 2], N),
            "t_up": t + rng.uniform(0.1, 2.0, N), "y_c": y_c, "y_c_up": y_c + rng.uniform(0.1, 2.0, N)}


def constructs_data(rng):
    N, G, K = 9, 3, 2
    return {"N": N, "G": G, "K": K, "t": rng.normal(size=N), "y": rng.normal(size=N), "c": rng.poisson(2.0, N),
            "PHI": rng.normal(size=(N, K)), "group": np.r_[1, 2, 3, rng.integers(1, G + 1, N - 3)],
            "year": rng.integers(1, K + 1, N)}


def coregion_data(rng):
    N, P = 12, 3
    return {"N": N, "P": P, "x": rng.uniform(0, 3, N), "output": np.r_[1, 2, 3, rng.integers(1, P + 1, N - 3)],
            "c": rng.poisson(2.0, N)}


def isotopic_data(rng):
    """Both outputs at the same 6 points, output-major: the Stan program takes its Kronecker branch."""
    x = rng.uniform(0, 3, 6)
    return {"N": 12, "P": 2, "R": 1, "x": np.r_[x, x], "output": np.repeat([1, 2], 6), "y": rng.normal(size=12)}


def indexing_data(rng):
    N, G = 11, 3
    return {"N": N, "G": G, "X": rng.normal(size=(N, 3)), "y": rng.normal(size=N), "z": rng.normal(size=N),
            "w": rng.normal(size=N), "v": rng.normal(size=N), "log_e": rng.normal(size=N), "c": rng.poisson(2.0, N),
            "group": np.r_[1, 2, 3, rng.integers(1, G + 1, N - 3)]}


CATEGORICAL = """
data { int N; int K; matrix[N, 2] X; array[N] int<lower=1, upper=K> y; array[N] int<lower=1, upper=K> z; }
parameters {
  real<lower=0> s ~ lognormal(0, 1);
  real<lower=0> ell ~ gamma(2, 2);
  real m ~ normal(0, 1);
  real b ~ normal(0, 1);
}
latent { matrix[N, K] f; }
model {
  f ~ gp(X, s * rbf(lengthscale = ell), mean = m);
  y ~ categorical_logit(f);
  z ~ categorical_logit(b + f);
}
"""


def categorical_data(rng):
    N, K = 8, 3
    return {"N": N, "K": K, "X": rng.normal(size=(N, 2)), "y": rng.integers(1, K + 1, N),
            "z": rng.integers(1, K + 1, N)}


HSGP_SPECTRAL = """
data { int N; vector[N] t; array[N] int<lower=0> y; vector[N] z; matrix[N, 2] X; vector[N] w; }
parameters {
  real<lower=0> s ~ lognormal(0, 1);
  real<lower=0> ell ~ gamma(2, 2);
  vector<lower=0>[2] ard ~ gamma(2, 2);
  real mu ~ normal(0, 1);
  real<lower=0> noise ~ half_normal(1);
}
model {
  f ~ gp(t, square(s) * matern32(lengthscale = ell) + rbf(0.5, 2) + matern12(lengthscale = ell), mean = mu,
         approx = hsgp(m = 12, c = 1.8));
  g ~ gp(z, matern52(s, ell) + matern(7/2, 0.3, ell) + rbf(inv_ls2 = ell), approx = hsgp(9));
  h ~ gp(X, s * rbf(lengthscale = ard) + matern32(0.4, ard), approx = hsgp(m = [5, 4], c = 2.5));
  y ~ poisson_log(f + g);
  w ~ normal(h, noise);
}
"""


def hsgp_data(rng):
    N = 14
    return {"N": N, "t": rng.uniform(0, 10, N), "y": rng.poisson(2.0, N), "z": rng.normal(size=N),
            "X": rng.normal(size=(N, 2)), "w": rng.normal(size=N)}


HSGP_PERIODIC = """
data { int N; vector[N] t; vector[N] y; }
parameters {
  real<lower=0> s ~ lognormal(0, 1);
  real<lower=0> ell ~ gamma(2, 2);
  real<lower=0> noise ~ half_normal(1);
}
model {
  f ~ gp(t, square(s) * periodic(lengthscale = ell, period = 3.5), approx = hsgp(m = 8));
  g ~ gp(t, periodic(0.7, 0.4, 7), approx = hsgp(5, constant = 0));
  h ~ gp(t, matern32(s, 4 * ell) + 0.5 * periodic(lengthscale = ell, period = 2.5) + rbf(0.3, 2 * ell)
            + periodic(s, 1.3, 6), approx = hsgp(m = 7, c = 1.8));
  y ~ normal(f + g + h, noise);
}
"""


def hsgp_periodic_data(rng):
    N = 12
    return {"N": N, "t": rng.uniform(0, 20, N), "y": rng.normal(size=N)}


STATE_SPACE = """
data { int N; vector[N] t; vector[N] y; }
parameters {
  real<lower=0> s ~ lognormal(0, 1);
  real<lower=0> ell ~ gamma(2, 2);
  real mu ~ normal(0, 1);
  real<lower=0> noise ~ half_normal(1);
}
model {
  f ~ gp(t, square(s) * matern32(lengthscale = ell) * periodic(lengthscale = 1.2, period = 3) + matern12(0.5, ell)
            + matern52(lengthscale = 2 * ell) + constant(0.3), mean = mu, approx = state_space(order = 4));
  y ~ normal(f, noise);
}
"""


def state_space_data(rng):
    N = 15
    t = rng.uniform(0, 10, N)
    t[4] = t[11]  # a repeated time
    y = rng.normal(size=N)
    y[6] = np.nan  # a missing outcome: a point without a site
    return {"N": N, "t": t, "y": y}


STATE_SPACE_POISSON = """
data { int N; vector[N] t; array[N] int<lower=0> y; }
parameters {
  real<lower=0> s ~ lognormal(0, 1);
  real<lower=0> ell ~ gamma(2, 2);
  real mu ~ normal(0, 1);
}
model {
  f ~ gp(t, square(s) * matern32(lengthscale = ell) * periodic(lengthscale = 1.2, period = 3) + matern12(0.5, ell)
            + matern52(lengthscale = 2 * ell) + constant(0.3), mean = mu, approx = state_space(order = 3));
  y ~ poisson_log(f);
}
"""


def state_space_poisson_data(rng):
    N = 15
    t = rng.uniform(0, 10, N)
    t[4] = t[11]  # a repeated time: a step of zero
    return {"N": N, "t": t, "y": rng.poisson(2.0, N)}


GROUPED_STATE_SPACE = """
data { int N; vector[N] t; vector[N] g; vector[N] y; }
parameters {
  real<lower=0> ell ~ gamma(2, 2);
  real<lower=0> noise ~ half_normal(1);
}
model {
  f ~ gp((t, g), (matern32(t, lengthscale = ell) + 0.5 * periodic(t, lengthscale = 1.2, period = 3)) * same(g),
         approx = state_space(order = 3));
  y ~ normal(f, noise);
}
"""
GROUPED_STATE_SPACE_POISSON = """
data { int N; vector[N] t; vector[N] g; array[N] int<lower=0> y; }
parameters { real<lower=0> ell ~ gamma(2, 2); }
model {
  f ~ gp((g, t), same(g) * matern52(t, lengthscale = ell), approx = state_space);
  y ~ poisson_log(f);
}
"""


def grouped_series_data(rng, counts=False):
    """Three series interleaved in the data's order, one of a single point, a repeated time within a series and the
    same time in two series; a missing outcome where the outcomes are real."""
    N = 16
    t = rng.uniform(0, 10, N)
    g = np.array([2, 0, 1, 0, 2, 0, 1, 1, 0, 2, 0, 1, 2, 0, 1, 5], dtype=float)
    t[3], t[6] = t[1], t[1]
    if counts:
        return {"N": N, "t": t, "g": g, "y": rng.poisson(2.0, N)}
    y = rng.normal(size=N)
    y[9] = np.nan
    return {"N": N, "t": t, "g": g, "y": y}


@pytest.mark.parametrize("model_file, make_data, scale", [
    pytest.param(STATE_SPACE_POISSON, state_space_poisson_data, 0.7, marks=pytest.mark.slow,
                 id="state_space_latent"),  # f from innovations: the state recursion in both
    pytest.param(GROUPED_STATE_SPACE, grouped_series_data, 0.7, marks=pytest.mark.slow, id="state_space_groups"),
    pytest.param(GROUPED_STATE_SPACE_POISSON, lambda rng: grouped_series_data(rng, counts=True), 0.7,
                 marks=pytest.mark.slow, id="state_space_latent_groups"),  # restarts in the recursion of both
    ("models/gp_classification.gpm", classification_data, 1.0),
    pytest.param(STATE_SPACE, state_space_data, 0.7, marks=pytest.mark.slow, id="state_space"),  # every form
    pytest.param(HSGP_SPECTRAL, hsgp_data, 0.7, marks=pytest.mark.slow, id="hsgp"),  # every spectral density
    pytest.param(HSGP_PERIODIC, hsgp_periodic_data, 0.7, marks=pytest.mark.slow, id="hsgp_periodic"),  # cosine series
    pytest.param(CATEGORICAL, categorical_data, 0.7, marks=pytest.mark.slow, id="categorical_logit"),
    pytest.param("models/bayesian_gplvm_priors.gpm", gplvm_data, 0.7, marks=pytest.mark.slow),  # also in the sweep
    pytest.param(ALL_KERNELS, regression_data, 0.5, marks=pytest.mark.slow),
    pytest.param(NEW_KERNELS, regression_data, 0.5, marks=pytest.mark.slow, id="new_kernels"),
    pytest.param(KERNEL_ARGUMENTS, unit_interval_data, 0.5, marks=pytest.mark.slow, id="kernel_arguments"),
    (LIKELIHOODS, likelihoods_data, 0.7),
    (INDEXING, indexing_data, 0.7),
    pytest.param(CONSTRUCTS, constructs_data, 0.7, marks=pytest.mark.slow, id="constructs"),
    pytest.param(COREGION, coregion_data, 0.7, marks=pytest.mark.slow, id="coregion"),
    pytest.param(COREGION_CORR, coregion_data, 0.7, marks=pytest.mark.slow, id="coregion_corr"),
    pytest.param("models/gp_multi_output.gpm", isotopic_data, 0.7, marks=pytest.mark.slow, id="coregion_kronecker"),
    pytest.param("models/student_t_process.gpm", regression_data, 0.7, marks=pytest.mark.slow,
                 id="student_t_process"),  # multi_student_t_lpdf against the JAX MVT marginal
    pytest.param(SIMPLEX, simplex_data, 0.7, marks=pytest.mark.slow, id="simplex"),  # Stan 2.35's stick-breaking
    pytest.param(STUDENT_T_PROCESS_INTEGER_NU, regression_data, 0.7, marks=pytest.mark.slow,
                 id="student_t_process_integer_nu"),  # (4 - 2.0) / 4, never Stan's integer division
])
@needs_pystan
def test_log_density_agrees_with_stan_up_to_a_constant(model_file, make_data, scale):
    rng = np.random.default_rng(11)
    model, _ = check_text(model_file) if "\n" in model_file else check_file(model_file)
    assert_agrees_with_stan(model, make_data(rng), np.full((N_POINTS, 1), scale), rng)


def assert_agrees_with_stan(model, data, scales, rng):
    """Stan's unconstrained layout is ours reordered, and the log densities differ by one constant at random points
    (standard normal times ``scales``, one per point), to 1e-8 or 1e-10 of the log density, whichever is larger (the
    last bits of special functions differ between CPUs: AVX-512 hosts give 1.0e-8 at log densities near -300)."""
    jax_model = lower(model, data)
    program = generate_stan(model, missing=tuple(jax_model.observed))  # outcomes with missing entries (NaN)
    stan_data = program.stan_data(model, data)
    points = rng.normal(size=(len(scales), jax_model.dim)) * scales

    free, _ = jax_model.constrain_free(jnp.asarray(points[0]))
    from_stan = unconstrain_pystan(program.code, stan_data, stan_values(program, jax_model, free))
    np.testing.assert_allclose(from_stan, stan_vector(jax_model, points[0]), rtol=1e-10, atol=1e-10)

    ours = np.array([float(jax_model.log_density(jnp.asarray(z))) for z in points])
    theirs = log_prob_pystan(program.code, stan_data, np.array([stan_vector(jax_model, z) for z in points]),
                             jacobian=True)
    difference = ours - theirs
    assert np.all(np.isfinite(difference)), difference
    assert np.ptp(difference) < max(1e-8, 1e-10 * np.abs(ours).max()), difference  # rounding grows with the sum


SWEEP_SIZES = {"N": 7, "D": 2, "Q": 2, "L": 2, "T": 3, "G": 3, "P": 2, "R": 2, "K": 3}
SWEEP_EXCLUDED = {"models/local_volatility.gpm": ("its likelihood is an external Python function, which Stan "
                                                    "cannot call", "external")}
"""Model files the Stan backend refuses: why, and the words its refusal must contain."""


def random_data(model, rng):
    """Data of the declared types: sizes from SWEEP_SIZES, integers within their bounds, reals standard normal."""
    data = {}
    for name, variable in model.data.items():
        if name in model.sizes:
            data[name] = SWEEP_SIZES[name]
    for name, variable in model.data.items():
        if name in model.sizes:
            continue
        vtype = variable.type.concrete_bounds(data)
        shape = vtype.concrete_shape(data)
        if vtype.base == "int":
            low = 0 if vtype.lower is None else int(vtype.lower)
            high = low + 5 if vtype.upper is None else int(vtype.upper)
            data[name] = rng.integers(low, high + 1, shape) if shape else int(rng.integers(low, high + 1))
        else:
            value = rng.normal(size=shape)
            if vtype.lower is not None:
                value = vtype.lower + np.abs(value)
            data[name] = value if shape else float(value)
    return data


def sweep_files():
    from pathlib import Path

    return sorted(str(p) for p in Path("models").glob("*.gpm"))


@pytest.mark.slow
@needs_pystan
@pytest.mark.parametrize("model_file", sweep_files())
def test_every_model_file_agrees_with_stan(model_file):
    if model_file in SWEEP_EXCLUDED:
        model, _ = check_file(model_file)
        with pytest.raises(Exception, match=SWEEP_EXCLUDED[model_file][1]):
            generate_stan(model)
        return
    rng = np.random.default_rng(5)
    model, _ = check_file(model_file)
    assert_agrees_with_stan(model, random_data(model, rng), np.full((8, 1), 0.5), rng)
