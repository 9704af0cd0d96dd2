"""The Dirichlet prior on simplexes and Stan's stick-breaking simplex bijector.

- the density equals SciPy's ``dirichlet.logpdf``, normaliser included, for vector and scalar ``alpha``;
- the log-Jacobian equals log |det| of a finite-difference Jacobian of the map from the ``K - 1`` free
  coordinates to the first ``K - 1`` entries, and ``z = 0`` is the uniform simplex (Stan's centring);
- draws have the Dirichlet's means and variances;
- the Stan form is ``dirichlet_lpdf(w | alpha)`` on a ``simplex[K]`` parameter, which stanc accepts;
- the checker puts ``simplex[K]`` and ``dirichlet`` together only (golden cases in tests/golden/bad/);
- gibbs on a small model with a simplex runs and reports the simplex in its constrained form.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

import gpdsl.numerics.float64  # noqa: F401
from gpdsl.api import check_text
from gpdsl.backends.jax.bijectors import simplex_constrain, simplex_unconstrain
from gpdsl.backends.stan.codegen import generate_stan
from gpdsl.backends.stan.stanc import check_program
from gpdsl.errors import ModelCheckError
from gpdsl.priors import PRIORS

DIRICHLET = PRIORS["dirichlet"]


@pytest.mark.parametrize("alpha", [[0.6, 1.0, 2.5], [1.0, 1.0, 1.0, 1.0], [3.0, 0.4]])
def test_density_is_scipys_dirichlet(alpha):
    rng = np.random.default_rng(1)
    for x in rng.dirichlet(np.ones(len(alpha)), size=5):
        np.testing.assert_allclose(DIRICHLET.log_density(jnp.asarray(x), jnp.asarray(alpha)),
                                   stats.dirichlet.logpdf(x, alpha), rtol=1e-12, atol=1e-12)


def test_scalar_alpha_is_the_symmetric_dirichlet():
    x = np.array([0.2, 0.3, 0.5])
    np.testing.assert_allclose(DIRICHLET.log_density(jnp.asarray(x), 1.7), stats.dirichlet.logpdf(x, [1.7] * 3),
                               rtol=1e-12)


@pytest.mark.parametrize("K", [2, 3, 5])
def test_log_jacobian_matches_a_finite_difference_jacobian(K):
    eps = 1e-6
    rng = np.random.default_rng(K)
    for _ in range(3):
        z = rng.normal(size=K - 1)
        x, log_jacobian = simplex_constrain(jnp.asarray(z))
        columns = [(np.asarray(simplex_constrain(jnp.asarray(z + eps * e))[0][:-1])
                    - np.asarray(simplex_constrain(jnp.asarray(z - eps * e))[0][:-1])) / (2 * eps)
                   for e in np.eye(K - 1)]
        np.testing.assert_allclose(log_jacobian, np.linalg.slogdet(np.column_stack(columns))[1], rtol=1e-7)
        x = np.asarray(x)
        assert np.all(x > 0) and abs(np.sum(x) - 1.0) < 1e-14
        np.testing.assert_allclose(simplex_unconstrain(x), z, rtol=1e-9, atol=1e-10)
    np.testing.assert_allclose(simplex_constrain(jnp.zeros(K - 1))[0], np.full(K, 1.0 / K), rtol=1e-14)


def test_draws_have_the_dirichlet_moments():
    alpha, draws = np.array([0.5, 2.0, 4.0]), 40_000
    x = np.asarray(DIRICHLET.sample(jax.random.PRNGKey(0), (draws, 3), jnp.asarray(alpha)))
    np.testing.assert_allclose(np.sum(x, axis=1), 1.0, rtol=1e-12)
    mean, var = stats.dirichlet.mean(alpha), stats.dirichlet.var(alpha)
    assert np.all(np.abs(x.mean(axis=0) - mean) < 5 * np.sqrt(var / draws)), (x.mean(axis=0), mean)
    np.testing.assert_allclose(x.var(axis=0), var, rtol=0.05)


def test_stan_form_on_a_simplex_parameter():
    model, _ = check_text("""
    data { int N; int K; matrix[N, K] X; vector<lower=0>[K] a; vector[N] y; }
    parameters { simplex[K] w ~ dirichlet(a); simplex[3] v ~ dirichlet(2); real<lower=0> s ~ half_normal(1); }
    model { y ~ normal(X * w + v[1], s); }
    """)
    code = generate_stan(model).code
    assert "simplex[K] w;" in code and "simplex[3] v;" in code
    assert "target += dirichlet_lpdf(w | a);" in code
    assert "target += dirichlet_lpdf(v | rep_vector(2, 3));" in code
    check_program(code)


@pytest.mark.parametrize("source, message", [
    ("simplex[3] w ~ dirichlet([1, 2]);", "argument 'alpha' of dirichlet has shape [2] but 'w' has shape [3]"),
    ("simplex[3] w ~ dirichlet([1, -2, 1]);", "argument 'alpha' of dirichlet must be in (0, inf), got -2"),
    ("vector[3] w ~ dirichlet([1, 2, 1]);", "dirichlet is a prior of a simplex parameter; 'w' is vector[3]"),
    ("simplex[3] w ~ normal(0, 1);", "'w' is declared simplex[3], whose prior is dirichlet(alpha), not normal"),
    ("simplex[3] w ~ lkj_corr_cholesky(2);", "'w' is declared simplex[3], whose prior is dirichlet(alpha)"),
])
def test_checker_keeps_dirichlet_and_simplex_together(source, message):
    with pytest.raises(ModelCheckError, match=None) as error:
        check_text(f"""
        data {{ int N; matrix[N, 3] X; vector[N] y; }}
        parameters {{ {source} real<lower=0> s ~ half_normal(1); }}
        model {{ y ~ normal(X * w, s); }}
        """)
    assert message in str(error.value)
