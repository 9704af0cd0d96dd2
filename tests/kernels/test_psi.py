"""Psi statistics: closed forms against GPy and quadrature, quadrature rules, row weights, registry, errors."""

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gpdsl.errors import MethodError
from gpdsl.kernels import (
    MLP,
    RBF,
    Changepoint,
    Constant,
    Cosine,
    Gibbs,
    Kernel,
    Linear,
    Matern,
    Matern32,
    Periodic,
    Polynomial,
    RationalQuadratic,
    SpectralMixture,
    White,
)
from gpdsl.kernels.psi import (
    PsiMethod,
    analytic_supported,
    psi_statistics,
    quadrature_points,
    register_cross,
    register_term,
)

N, M, Q = 7, 4, 3
ANALYTIC = PsiMethod()
UNSCENTED = PsiMethod("unscented")


def latent(seed=0, n=N, m=M, q=Q, scale=0.3):
    rng = np.random.default_rng(seed)
    mean = rng.normal(size=(n, q))
    variance = rng.uniform(0.2, 1.0, size=(n, q)) * scale
    Z = rng.normal(size=(m, q))
    return jnp.asarray(Z), jnp.asarray(mean), jnp.asarray(variance)


def rel_err(a, b):
    return float(jnp.max(jnp.abs(jnp.asarray(a) - jnp.asarray(b))) / jnp.max(jnp.abs(jnp.asarray(b))))


def direct_rbf(variance_k, w, Z, mean, variance):
    """Per-point RBF psi1 and psi2 straight from the formulas, in numpy."""
    Z, mu, S = map(np.asarray, (Z, mean, variance))
    d1 = 1 + w * S
    psi1 = variance_k * np.prod(d1[:, None] ** -0.5 * np.exp(-0.5 * w * (mu[:, None] - Z) ** 2 / d1[:, None]), -1)
    d2 = (1 + 2 * w * S)[:, None, None]
    zbar = (Z[:, None] + Z[None]) / 2
    terms = d2 ** -0.5 * np.exp(-w * (Z[:, None] - Z[None]) ** 2 / 4 - w * (mu[:, None, None] - zbar) ** 2 / d2)
    return psi1, variance_k**2 * np.prod(terms, -1)


# --- GPy cross-check -----------------------------------------------------------------------------

def _gpy_pairs():
    GPy = pytest.importorskip("GPy")
    ls = np.array([0.8, 1.5, 0.6])
    a = np.array([0.5, 1.3, 2.0])
    return {
        "rbf_ard_lengthscale": (RBF(1.3, lengthscale=ls), GPy.kern.RBF(Q, 1.3, ls, ARD=True)),
        "rbf_ard_inv_ls2": (RBF(1.3, inv_ls2=1 / ls**2), GPy.kern.RBF(Q, 1.3, ls, ARD=True)),
        "rbf_iso": (RBF(0.7, lengthscale=1.1), GPy.kern.RBF(Q, 0.7, 1.1)),
        "linear_ard": (Linear(a), GPy.kern.Linear(Q, variances=a, ARD=True)),
        "rbf_plus_linear_disjoint": (
            RBF(1.3, lengthscale=ls[[0, 2]], active_dims=(0, 2)) + Linear(a[1], active_dims=(1,)),
            GPy.kern.RBF(2, 1.3, ls[[0, 2]], ARD=True, active_dims=[0, 2])
            + GPy.kern.Linear(1, variances=a[1], active_dims=[1]),
        ),
        "rbf_plus_bias": (
            RBF(1.3, lengthscale=ls) + Constant(0.4),
            GPy.kern.RBF(Q, 1.3, ls, ARD=True) + GPy.kern.Bias(Q, 0.4),
        ),
    }


@pytest.mark.parametrize("name", ["rbf_ard_lengthscale", "rbf_ard_inv_ls2", "rbf_iso", "linear_ard",
                                  "rbf_plus_linear_disjoint", "rbf_plus_bias"])
def test_matches_gpy(name):
    from GPy.core.parameterization.variational import NormalPosterior

    ours, theirs = _gpy_pairs()[name]
    if name == "rbf_plus_linear_disjoint":
        theirs._exact_psicomp = True  # GPy 1.15 otherwise uses its approximate quadrature fallback here
    Z, mean, variance = latent(1, scale=1.0)
    qX = NormalPosterior(np.asarray(mean), np.asarray(variance))
    Zn = np.asarray(Z)
    per_point = psi_statistics(ours, Z, mean, variance, row_weights=jnp.eye(N))
    assert rel_err(jnp.sum(per_point.psi0), np.sum(theirs.psi0(Zn, qX))) < 1e-10
    assert rel_err(per_point.psi1, theirs.psi1(Zn, qX)) < 1e-10
    assert rel_err(jnp.sum(per_point.psi2, axis=0), theirs.psi2(Zn, qX)) < 1e-10
    assert rel_err(per_point.psi2, theirs.psi2n(Zn, qX)) < 1e-10


# --- closed forms --------------------------------------------------------------------------------

@pytest.mark.parametrize("offset", [0.0, 300.0])
def test_rbf_matches_direct_formulas(offset):
    Z, mean, variance = latent(2, n=9, m=5, q=4, scale=2.0)
    Z, mean = Z * 3 + offset, mean * 3 + offset
    w = np.array([0.3, 1.0, 2.0, 0.05])
    psi1, psi2n = direct_rbf(1.7, w, Z, mean, variance)
    stats = psi_statistics(RBF(1.7, inv_ls2=w), Z, mean, variance, row_weights=jnp.eye(9))
    assert rel_err(stats.psi1, psi1) < 1e-10
    assert rel_err(stats.psi2, psi2n) < 1e-10


OVERLAPPING = {
    "rbf+linear_partial": RBF(1.2, lengthscale=1.3, active_dims=(1,)) + Linear([0.7, 1.4]),
    "rbf+rbf": RBF(1.2, lengthscale=[1.1, 1.6]) + RBF(0.5, inv_ls2=0.4, active_dims=(1,)),
    "rbf+rbf_full": RBF(1.2, lengthscale=[1.1, 1.6]) + RBF(0.5, lengthscale=[2.0, 1.2]),
    "linear+linear": Linear([0.7, 1.4]) + Linear(0.9, active_dims=(1,)),
    "constant+rbf": Constant(0.6) + RBF(1.2, lengthscale=[1.1, 1.6]) + White(0.2),
    "scale_in_sum": 0.7 * (RBF(1.2, lengthscale=[1.1, 1.6]) + Linear(0.5))
    + (Constant(0.3) + 2.0 * Linear(0.2, active_dims=(0,))),
    "constant_product": Constant(1.5) * RBF(1.0, lengthscale=1.4) + White(0.1) + Linear([0.3, 0.6]),
}


@pytest.mark.parametrize("name", sorted(OVERLAPPING))
def test_overlapping_cross_terms_match_gauss_hermite(name):
    Z, mean, variance = latent(3, q=2, scale=0.3)
    kernel = OVERLAPPING[name]
    exact = psi_statistics(kernel, Z, mean, variance)
    quad = psi_statistics(kernel, Z, mean, variance, PsiMethod("gauss_hermite", nodes=20))
    for a, b in zip(exact, quad):
        assert rel_err(a, b) < 1e-8


def test_analytic_gradients_match_finite_differences():
    Z, mean, variance = latent(4, q=2)
    kernel = 0.7 * (RBF(1.2, lengthscale=[1.1, 1.6]) + Linear(0.5, active_dims=(1,)))
    kernel = kernel + RBF(0.5, inv_ls2=0.9, active_dims=(0,))

    @jax.jit
    @partial(jax.value_and_grad, argnums=(0, 1, 2))
    def objective(Z, mean, variance):
        stats = psi_statistics(kernel, Z, mean, variance, row_weights=jnp.linspace(0.5, 1.5, N))
        return jnp.sum(stats.psi0) + jnp.sum(jnp.sin(stats.psi1)) + jnp.sum(jnp.cos(stats.psi2))

    args = (Z, mean, variance)
    _, grads = objective(*args)
    rng = np.random.default_rng(0)
    for _ in range(2):
        direction = [jnp.asarray(rng.normal(size=a.shape)) for a in args]
        h = 1e-5
        up = objective(*[a + h * d for a, d in zip(args, direction)])[0]
        down = objective(*[a - h * d for a, d in zip(args, direction)])[0]
        analytic = sum(jnp.sum(g * d) for g, d in zip(grads, direction))
        assert abs((up - down) / (2 * h) - analytic) < 1e-6 * max(1.0, abs(analytic))


# --- quadrature rules ----------------------------------------------------------------------------

def test_unscented_points_reproduce_mean_and_variance():
    _, mean, variance = latent(5)
    points, weights = quadrature_points(mean, variance, UNSCENTED)
    assert points.shape == (2 * Q, N, Q) and jnp.allclose(jnp.sum(weights), 1.0)
    centred = points - mean
    assert jnp.allclose(jnp.einsum("p,pnq->nq", weights, points), mean, atol=1e-14)
    covariance = jnp.einsum("p,pnq,pnr->nqr", weights, centred, centred)
    assert jnp.allclose(covariance, jax.vmap(jnp.diag)(variance), atol=1e-14)


@pytest.mark.parametrize("kernel", [Linear([0.5, 1.3, 2.0]), Linear(0.8, active_dims=(0, 2))])
def test_unscented_exact_for_linear(kernel):
    Z, mean, variance = latent(6, scale=2.0)
    exact = psi_statistics(kernel, Z, mean, variance)
    unscented = psi_statistics(kernel, Z, mean, variance, UNSCENTED)
    for a, b in zip(unscented, exact):
        assert rel_err(a, b) < 1e-12


def test_unscented_close_to_analytic_for_rbf_at_small_variance():
    Z, mean, variance = latent(7, scale=1e-3)
    kernel = RBF(1.3, lengthscale=[0.8, 1.5, 0.6])
    exact = psi_statistics(kernel, Z, mean, variance)
    unscented = psi_statistics(kernel, Z, mean, variance, UNSCENTED)
    for a, b in zip(unscented, exact):
        assert rel_err(a, b) < 1e-4


def test_gauss_hermite_converges_for_rbf():
    Z, mean, variance = latent(8, q=2, scale=0.5)
    kernel = RBF(1.3, lengthscale=[0.9, 1.4])
    exact = psi_statistics(kernel, Z, mean, variance)
    errors = []
    for nodes in (2, 4, 8, 20):
        quad = psi_statistics(kernel, Z, mean, variance, PsiMethod("gauss_hermite", nodes=nodes))
        errors.append(max(rel_err(quad.psi1, exact.psi1), rel_err(quad.psi2, exact.psi2)))
    assert all(later < earlier for earlier, later in zip(errors, errors[1:]))
    assert errors[-1] < 1e-8


def test_monte_carlo_is_unbiased():
    Z, mean, variance = latent(9, scale=1.0)
    kernel = RBF(1.3, lengthscale=[0.8, 1.5, 0.6])
    exact = psi_statistics(kernel, Z, mean, variance)
    keys = jax.random.split(jax.random.key(0), 200)
    draws = jax.vmap(lambda key: psi_statistics(kernel, Z, mean, variance, PsiMethod("monte_carlo", samples=10),
                                                key=key))(keys)
    for name in ("psi1", "psi2"):
        values = getattr(draws, name)
        standard_error = jnp.std(values, axis=0) / jnp.sqrt(values.shape[0])
        assert jnp.all(jnp.abs(jnp.mean(values, axis=0) - getattr(exact, name)) < 4 * standard_error + 1e-12)


def test_monte_carlo_is_deterministic_given_key():
    Z, mean, variance = latent(9)
    method = PsiMethod("monte_carlo", samples=5)
    first = psi_statistics(RBF(1.0, lengthscale=1.0), Z, mean, variance, method, key=jax.random.key(3))
    second = psi_statistics(RBF(1.0, lengthscale=1.0), Z, mean, variance, method, key=jax.random.key(3))
    assert all(jnp.array_equal(a, b) for a, b in zip(first, second))


# --- row weights ---------------------------------------------------------------------------------

@pytest.mark.parametrize("method", [ANALYTIC, UNSCENTED], ids=["analytic", "unscented"])
def test_row_weights(method):
    Z, mean, variance = latent(10)
    kernel = RBF(1.2, lengthscale=[1.1, 1.6, 0.9]) + Linear([0.7, 1.4, 0.3])
    W = jnp.asarray(np.random.default_rng(0).integers(0, 2, size=(N, 3)), dtype=jnp.float64)
    grouped = psi_statistics(kernel, Z, mean, variance, method, row_weights=W).psi2
    assert grouped.shape == (3, M, M)
    for g in range(3):
        single = psi_statistics(kernel, Z, mean, variance, method, row_weights=W[:, g]).psi2
        assert single.shape == (M, M)
        assert rel_err(grouped[g], single) < 1e-12
    one_group = psi_statistics(kernel, Z, mean, variance, method, row_weights=W[:, :1]).psi2
    assert rel_err(one_group[0], psi_statistics(kernel, Z, mean, variance, method, row_weights=W[:, 0]).psi2) < 1e-12


# --- any kernel by quadrature --------------------------------------------------------------------

ANY_KERNELS = {
    "matern32": Matern32(1.1, lengthscale=[0.8, 1.2, 1.5]),
    "periodic": Periodic(0.9, lengthscale=1.1, period=2.0),
    "mlp": MLP(1.2, weight_variance=[0.5, 1.0, 1.5], bias_variance=0.3),
    "rbf*linear": RBF(1.0, lengthscale=1.3) * Linear([0.5, 1.0, 0.7]),
    "matern32+linear": Matern32(1.1, lengthscale=0.9) + Linear(0.4) + White(0.01),
    "rational_quadratic": RationalQuadratic(0.9, lengthscale=[0.8, 1.2, 1.5], alpha=0.7),
    "cosine": Cosine(0.8, period=[2.0, 3.0, 4.0]),
    "polynomial": Polynomial([0.5, 1.0, 0.7], 0.3, 2),
    "spectral_mixture": SpectralMixture([0.5, 1.2], [0.2, 0.5], [0.1, 0.2], active_dims=(1,)),
    "matern": Matern(3.5, 1.1, lengthscale=[0.9, 1.3, 1.6]),
    "gibbs": Gibbs(0.9, 1.2, 0.3, active_dims=(0,)),
    "changepoint": Changepoint(RBF(1.0, lengthscale=1.5), Cosine(0.7, period=4.0), 0.1, 2.0, active_dims=(2,)),
}
NO_CLOSED_FORM = ("rational_quadratic", "cosine", "polynomial", "spectral_mixture", "matern", "gibbs", "changepoint")
QUADRATURES = {"unscented": UNSCENTED, "gauss_hermite": PsiMethod("gauss_hermite", nodes=3),
               "monte_carlo": PsiMethod("monte_carlo", samples=4)}
ANY_CASES = [(name, "unscented") for name in sorted(ANY_KERNELS)] + [
    ("matern32+linear", "gauss_hermite"), ("rbf*linear", "monte_carlo")]


@pytest.mark.parametrize(("name", "kind"), ANY_CASES)
def test_any_kernel_by_quadrature_with_gradients(name, kind):
    Z, mean, variance = latent(11)
    method = QUADRATURES[kind]

    @jax.jit
    @partial(jax.value_and_grad, argnums=(0, 1, 2, 3))
    def objective(kernel, Z, mean, variance):
        stats = psi_statistics(kernel, Z, mean, variance, method, key=jax.random.key(1))
        return jnp.sum(stats.psi0) + jnp.sum(stats.psi1**2) + jnp.sum(stats.psi2)

    value, grads = objective(ANY_KERNELS[name], Z, mean, variance)
    assert jnp.isfinite(value)
    leaves = jax.tree_util.tree_leaves(grads)
    assert len(leaves) >= 4 and all(bool(jnp.all(jnp.isfinite(leaf))) for leaf in leaves)


@pytest.mark.parametrize("name", NO_CLOSED_FORM)
def test_kernels_without_closed_form_converge_by_gauss_hermite_and_refuse_analytic(name):
    Z, mean, variance = latent(14, scale=0.1)
    kernel = ANY_KERNELS[name]
    fine = psi_statistics(kernel, Z, mean, variance, PsiMethod("gauss_hermite", nodes=14))
    coarse = psi_statistics(kernel, Z, mean, variance, PsiMethod("gauss_hermite", nodes=10))
    for a, b in zip(fine, coarse):
        assert rel_err(b, a) < 1e-5
    assert not analytic_supported(kernel)
    with pytest.raises(MethodError, match=type(kernel).__name__):
        psi_statistics(kernel, Z, mean, variance, ANALYTIC)


def test_cosine_psi1_by_quadrature_is_the_gaussian_characteristic_function():
    Z, mean, variance = latent(15, scale=0.3)
    period = np.array([2.0, 3.0, 4.0])
    frequency = 2 * np.pi / period
    stats = psi_statistics(Cosine(0.8, period=period), Z, mean, variance, PsiMethod("gauss_hermite", nodes=12))
    phase = ((np.asarray(mean)[:, None, :] - np.asarray(Z)[None, :, :]) * frequency).sum(-1)
    damping = np.exp(-0.5 * (np.asarray(variance) * frequency**2).sum(-1))
    np.testing.assert_allclose(stats.psi1, 0.8 * np.cos(phase) * damping[:, None], rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(stats.psi0, 0.8, rtol=1e-12)


def test_quadrature_psi0_uses_same_index_values():
    Z, mean, variance = latent(12)
    stats = psi_statistics(Matern32(1.1, lengthscale=0.9) + White(0.25), Z, mean, variance, UNSCENTED)
    assert jnp.allclose(stats.psi0, 1.35)


# --- errors --------------------------------------------------------------------------------------

def test_analytic_supported():
    assert analytic_supported(RBF(1.0, lengthscale=1.0) + 2.0 * (Linear(1.0) + White(0.1)))
    assert analytic_supported(Constant(2.0) * RBF(1.0, lengthscale=1.0))
    assert not analytic_supported(Matern32(1.0, lengthscale=1.0))
    assert not analytic_supported(RBF(1.0, lengthscale=1.0) * Linear(1.0))
    assert not analytic_supported(Linear(1.0) + 0.5 * Periodic(1.0, lengthscale=1.0, period=1.0))


def test_errors():
    Z, mean, variance = latent(13)
    with pytest.raises(MethodError, match="unscented") as info:
        psi_statistics(Linear(1.0) + Matern32(1.0, lengthscale=1.0), Z, mean, variance)
    assert "Matern32" in str(info.value)
    with pytest.raises(MethodError, match="key"):
        psi_statistics(RBF(1.0, lengthscale=1.0), Z, mean, variance, PsiMethod("monte_carlo"))
    with pytest.raises(MethodError, match="foo"):
        PsiMethod(kind="foo")
    with pytest.raises(MethodError, match="nodes"):
        PsiMethod("gauss_hermite", nodes=0)
    with pytest.raises(MethodError, match="samples"):
        PsiMethod("monte_carlo", samples=0)
    with pytest.raises(MethodError, match="points"):
        quadrature_points(jnp.zeros((2, 30)), jnp.ones((2, 30)), PsiMethod("gauss_hermite", nodes=2))


# --- the registry of closed forms ----------------------------------------------------------------

class Affine(Kernel):
    """A toy kernel ``v (x . x' + 1)`` whose closed form is registered below."""

    def __init__(self, variance):
        self._set_params({"variance": jnp.asarray(variance, dtype=jnp.float64)})

    def evaluate(self, x1, x2):
        return self.variance * (jnp.dot(x1, x2) + 1.0)


class UnregisteredAffine(Affine):
    """The same function; a subclass does not inherit its parent's closed form."""


RULES_USED = []


@register_term(Affine)
class AffineTerm(NamedTuple):
    variance: jax.Array

    @classmethod
    def from_kernel(cls, kernel, Q):
        return cls(kernel.variance)

    def psi0(self, mean, variance):
        return self.variance * (jnp.sum(jnp.square(mean) + variance, 1) + 1.0)

    def psi1(self, Z, mean, variance):
        return self.variance * (mean @ Z.T + 1.0)


@register_cross(AffineTerm, AffineTerm)
def _affine_affine(t1, t2, psi1_1, psi1_2, inputs, symmetric):
    """``E[(x.z + 1)(x.z' + 1)] = z^T E[x x^T] z' + E[x].z + E[x].z' + 1``, weighted over points."""
    RULES_USED.append(symmetric)
    Z, mean, variance, W = inputs
    second = jnp.einsum("ng,nq,nr->gqr", W, mean, mean) + jax.vmap(jnp.diag)(W.T @ variance)
    first = (W.T @ mean) @ Z.T
    expectation = (jnp.einsum("mq,gqr,kr->gmk", Z, second, Z) + first[:, :, None] + first[:, None, :]
                   + jnp.sum(W, 0)[:, None, None])
    return t1.variance * t2.variance * expectation


@pytest.mark.parametrize("name", ["alone", "scaled_with_constant_and_white", "with_its_copy"])
def test_a_registered_closed_form_is_used_by_analytic(name):
    kernel = {"alone": Affine(0.8),
              "scaled_with_constant_and_white": 1.5 * Affine(0.8) + Constant(0.3) + White(0.1),
              "with_its_copy": Affine(0.8) + Affine(0.4)}[name]
    assert analytic_supported(kernel)
    Z, mean, variance = latent(14)
    RULES_USED.clear()
    exact = psi_statistics(kernel, Z, mean, variance, row_weights=jnp.linspace(0.5, 1.5, N))
    assert RULES_USED and RULES_USED[0] is True
    quad = psi_statistics(kernel, Z, mean, variance, PsiMethod("gauss_hermite", nodes=3),
                          row_weights=jnp.linspace(0.5, 1.5, N))  # exact for a quadratic integrand
    for a, b in zip(exact, quad):
        assert rel_err(a, b) < 1e-12


def test_a_kernel_without_registered_closed_form_falls_back_to_quadrature_only_when_asked():
    Z, mean, variance = latent(15)
    unregistered = UnregisteredAffine(0.8)
    assert not analytic_supported(unregistered)
    with pytest.raises(MethodError, match="kernel UnregisteredAffine has no closed-form psi statistics") as info:
        psi_statistics(unregistered, Z, mean, variance)
    assert all(kind in str(info.value) for kind in ("unscented", "gauss_hermite", "monte_carlo"))
    quad = psi_statistics(unregistered, Z, mean, variance, PsiMethod("gauss_hermite", nodes=3))
    exact = psi_statistics(Affine(0.8), Z, mean, variance)
    for a, b in zip(quad, exact):
        assert rel_err(a, b) < 1e-12


def test_a_missing_cross_term_is_named():
    Z, mean, variance = latent(16)
    kernel = Affine(0.8) + RBF(1.0, lengthscale=1.0)
    assert not analytic_supported(kernel)
    with pytest.raises(MethodError, match="cross term of kernels Affine and RBF .*'unscented'"):
        psi_statistics(kernel, Z, mean, variance)
    assert jnp.isfinite(psi_statistics(kernel, Z, mean, variance, UNSCENTED).psi2).all()
