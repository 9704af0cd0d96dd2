"""The expected log density E[log p(y | f)] under f ~ N(m, v) of every scalar likelihood (the SVGP bound's data
term): Gauss-Hermite against SciPy's adaptive quadrature, and the closed forms against Gauss-Hermite."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import integrate, stats

from gpdsl.likelihoods import LIKELIHOODS
from gpdsl.likelihoods.quadrature import quadrature_expected_log_density
from tests.likelihoods.test_likelihoods import random_point

DEFAULT_TIER = ("bernoulli_logit", "poisson_log")
SCALAR = [pytest.param(name, marks=() if name in DEFAULT_TIER else pytest.mark.slow)
          for name, likelihood in LIKELIHOODS.items() if not likelihood.row_params]
MOMENTS = [(0.0, 1.0), (-2.0, 0.1), (1.5, 3.0), (0.7, 1e-6)]


def expected_by_scipy(likelihood, y, mean, var, others, log_density):
    """E[log p(y | f, others)] by scipy.integrate.quad over mean +- 12 sd; ``log_density(y, f, others)`` jitted."""
    scale = np.sqrt(var)
    others = [jnp.asarray(o) for o in others]
    integrand = lambda f: float(log_density(y, f, others)) * stats.norm.pdf(f, mean, scale)  # noqa: E731
    return integrate.quad(integrand, mean - 12 * scale, mean + 12 * scale, epsabs=1e-12, epsrel=1e-11, limit=400,
                          points=[mean])[0]


def latent_log_density(likelihood):
    """``log_density(y, f, others)``, jitted once."""
    latent = likelihood.params.index(likelihood.latent_param)
    return jax.jit(lambda y, f, others: likelihood.log_density(y, *others[:latent], f, *others[latent:]))


@pytest.mark.parametrize("name", SCALAR)
def test_expected_log_density_matches_scipy_quad(name):
    """Three random observations and parameters per likelihood at four moments, a nearly degenerate one included;
    the censoring step and the zero-inflation wall are the least smooth integrands (relative error about 1e-4 there,
    below 1e-8 elsewhere). The sweep over the likelihoods other than Bernoulli and Poisson is slow-marked."""
    likelihood = LIKELIHOODS[name]
    rng = np.random.default_rng(11)
    y, args = random_point(name, rng, 3)
    args = {p: np.clip(v, 0.05, 0.95) if p in ("zi", "hu") else v for p, v in args.items()}  # no impossible y
    expected, log_density = jax.jit(likelihood.expected_log_density), latent_log_density(likelihood)
    smooth = not any(word in name for word in ("censored", "zero_inflated", "hurdle"))
    for i in range(3):
        others = [args[p] if p in likelihood.own_shape else args[p][i] for p in likelihood.other_params]
        for mean, var in MOMENTS:
            ours = float(expected(jnp.asarray(y[i]), mean, var, *(jnp.asarray(o) for o in others)))
            reference = expected_by_scipy(likelihood, y[i], mean, var, others, log_density)
            assert ours == pytest.approx(reference, rel=1e-8 if smooth else 1.5e-4, abs=1e-9), (name, i, mean, var)


@pytest.mark.parametrize("name, y, others", [("normal", 0.7, (0.3,)), ("normal", -3.0, (2.0,)),
                                             ("poisson_log", 0.0, ()), ("poisson_log", 7.0, ())])
@pytest.mark.parametrize("mean, var", MOMENTS)
def test_closed_form_expected_log_density_equals_quadrature(name, y, others, mean, var):
    likelihood = LIKELIHOODS[name]
    assert not getattr(likelihood.expected_log_density, "by_quadrature", False)
    closed = likelihood.expected_log_density(jnp.asarray(y), mean, var, *others)
    by_quadrature = quadrature_expected_log_density(likelihood)(jnp.asarray(y), mean, var, *others)
    assert float(closed) == pytest.approx(float(by_quadrature), rel=1e-10)


def test_expected_log_density_is_elementwise_with_shared_cutpoints():
    """Vectors of observations with the ordered-logistic cutpoints shared by every element (``own_shape``)."""
    likelihood = LIKELIHOODS["ordered_logistic"]
    y, mean, var = jnp.asarray([1.0, 3.0, 4.0]), jnp.asarray([0.2, -0.4, 1.1]), jnp.asarray([0.5, 2.0, 0.1])
    cutpoints = jnp.asarray([-0.5, 0.7, 1.5])
    expected = jax.jit(likelihood.expected_log_density)
    together = expected(y, mean, var, cutpoints)
    one_by_one = [expected(y[i], mean[i], var[i], cutpoints) for i in range(3)]
    np.testing.assert_allclose(np.asarray(together), np.asarray(one_by_one), rtol=1e-12)
