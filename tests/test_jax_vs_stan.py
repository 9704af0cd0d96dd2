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


LIKELIHOODS = """
data {
  int N; matrix[N, 1] X;
  vector[N] y_t; array[N] int<lower=0> y_nb; array[N] int<lower=0> trials; array[N] int<lower=0> y_bin;
  array[N] int<lower=1, upper=4> y_ord; vector<lower=0>[N] y_g;
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
}
model {
  f ~ gp(X, rbf(lengthscale = ell));
  y_t ~ student_t(nu, f, sigma);
  y_nb ~ neg_binomial_2_log(f, phi);
  y_bin ~ binomial_logit(trials, f);
  y_ord ~ ordered_logistic(f, [c1, c1 + d2, c1 + d2 + d3]);
  y_g ~ gamma_log(f, alpha);
}
"""

INDEXING = """
data {
  int N; int G; matrix[N, 3] X; vector[N] y; vector[N] z; vector[N] w;
  array[N] int<lower=1, upper=G> group;
}
parameters {
  real<lower=0> tau ~ gamma(2, 1);
  vector[G] u ~ normal(0, tau);
  real<lower=0> noise ~ gamma(2, 1);
  real<lower=0> s ~ lognormal(0, 1);
  real<lower=0> p ~ lognormal(0, 0.5);
  vector<lower=0>[2] ell ~ gamma(2, 2);
}
model {
  f ~ gp(X[:, 1], rbf(lengthscale = 0.5));
  y ~ normal(f + u[group], noise);
  for (i in 1:N) z[i] ~ normal(2 * u[group[i]], noise);
  g ~ gp(X, matern52(X[:, 1], variance = s, lengthscale = 0.7) + periodic(X[:, 2], lengthscale = 0.8, period = p)
            + rbf(X[:, 2:3], lengthscale = ell));
  w ~ normal(g, noise);
}
"""


def stan_vector(jax_model, z):
    """Our unconstrained vector reordered to Stan's (column-major within each block)."""
    parts = jax_model.unflatten(jnp.asarray(z))
    return np.concatenate([np.ravel(np.asarray(parts[b.name]), order="F") for b in jax_model.blocks])


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
    return {"N": N, "X": rng.uniform(size=(N, 1)), "y_t": rng.standard_t(3, N), "y_nb": rng.poisson(4.0, N),
            "trials": trials, "y_bin": rng.binomial(trials, 0.3), "y_ord": rng.integers(1, 5, N),
            "y_g": rng.gamma(2.0, 1.0, N)}


def indexing_data(rng):
    N, G = 11, 3
    return {"N": N, "G": G, "X": rng.normal(size=(N, 3)), "y": rng.normal(size=N), "z": rng.normal(size=N),
            "w": rng.normal(size=N), "group": np.r_[1, 2, 3, rng.integers(1, G + 1, N - 3)]}


@pytest.mark.parametrize("model_file, make_data, scale", [
    ("models/gp_classification.gpm", classification_data, 1.0),
    ("models/bayesian_gplvm_priors.gpm", gplvm_data, 0.7),
    (ALL_KERNELS, regression_data, 0.5),
    (LIKELIHOODS, likelihoods_data, 0.7),
    (INDEXING, indexing_data, 0.7),
])
def test_log_density_agrees_with_stan_up_to_a_constant(model_file, make_data, scale):
    rng = np.random.default_rng(11)
    model, _ = check_text(model_file) if "\n" in model_file else check_file(model_file)
    data = make_data(rng)
    jax_model = lower(model, data)
    program = generate_stan(model)
    stan_data = program.stan_data(model, data)
    points = rng.normal(size=(N_POINTS, jax_model.dim)) * scale

    free, _ = jax_model.constrain_free(jnp.asarray(points[0]))
    from_stan = unconstrain_pystan(program.code, stan_data, {k: np.asarray(v).tolist() for k, v in free.items()})
    np.testing.assert_allclose(from_stan, stan_vector(jax_model, points[0]), rtol=1e-10, atol=1e-10)

    ours = np.array([float(jax_model.log_density(jnp.asarray(z))) for z in points])
    theirs = log_prob_pystan(program.code, stan_data, np.array([stan_vector(jax_model, z) for z in points]),
                             jacobian=True)
    difference = ours - theirs
    assert np.all(np.isfinite(difference))
    assert np.ptp(difference) < 1e-8, difference
