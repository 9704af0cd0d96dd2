"""Kernels: closed forms, composition, white-noise semantics, JAX transforms, GPy agreement."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.special import gamma as gamma_function
from scipy.special import kv

from gpdsl.errors import ModelCheckError
from gpdsl.kernels import (
    KERNEL_SPECS,
    KERNELS,
    MLP,
    RBF,
    Changepoint,
    Constant,
    Cosine,
    Gibbs,
    Kernel,
    Linear,
    Matern,
    Matern12,
    Matern32,
    Matern52,
    Periodic,
    Polynomial,
    Product,
    RationalQuadratic,
    Scale,
    SpectralMixture,
    Sum,
    Warp,
    White,
    build_kernel,
    kernel_spec,
)

ARD_LS = np.array([0.7, 1.3, 2.1])
ARD_PERIOD = np.array([1.1, 0.6, 2.5])
ARD_W = np.array([0.4, 1.7, 0.9])


@pytest.fixture
def X():
    return np.random.default_rng(0).normal(size=(12, 3))


@pytest.fixture
def X2():
    return np.random.default_rng(1).normal(size=(7, 3))


def all_kernels():
    return {
        "rbf_iso": RBF(1.7, lengthscale=0.8),
        "rbf_ard": RBF(1.7, lengthscale=ARD_LS),
        "rbf_inv": RBF(0.6, inv_ls2=1.0 / ARD_LS**2),
        "matern12": Matern12(1.3, lengthscale=ARD_LS),
        "matern32": Matern32(0.9, lengthscale=0.5),
        "matern52": Matern52(2.2, lengthscale=ARD_LS),
        "periodic": Periodic(1.4, lengthscale=ARD_LS, period=ARD_PERIOD),
        "linear": Linear(ARD_W),
        "white": White(0.3),
        "constant": Constant(0.8),
        "mlp": MLP(1.2, weight_variance=ARD_W, bias_variance=0.5),
        "sum": RBF(1.0, lengthscale=0.9) + Linear(0.3) + White(1e-3),
        "product": Matern32(1.1, lengthscale=ARD_LS) * Periodic(1.0, 0.7, 1.5),
        "scaled": 2.5 * Matern52(lengthscale=1.2) + 0.1,
        "rational_quadratic": RationalQuadratic(1.1, lengthscale=ARD_LS, alpha=0.7),
        "cosine": Cosine(0.9, period=ARD_PERIOD),
        "polynomial": Polynomial(ARD_W, 0.5, 3),
        "spectral_mixture": SpectralMixture([0.5, 1.2], [0.3, 1.1], [0.2, 0.6], active_dims=(0,)),
        "matern_7_2": Matern(3.5, 1.2, lengthscale=ARD_LS),
        "matern_13_2": Matern(6.5, 0.8, lengthscale=0.9),
        "gibbs": Gibbs(1.3, 0.6, 0.8, active_dims=(1,)),
        "changepoint": Changepoint(RBF(1.0, lengthscale=0.5, active_dims=(0,)),
                                   Matern32(2.0, lengthscale=ARD_LS) + White(0.1), 0.2, 3.0, active_dims=(0,)),
    }


# ---------------------------------------------------------------- closed forms


def test_rbf_at_zero_distance_equals_variance(X):
    k = RBF(2.7, lengthscale=ARD_LS)
    np.testing.assert_allclose(k.evaluate(X[0], X[0]), 2.7, rtol=0)
    np.testing.assert_allclose(k.diag(X), 2.7, rtol=0)


def test_rbf_matches_formula(X, X2):
    k = RBF(1.5, lengthscale=ARD_LS)
    r2 = (((X[:, None, :] - X2[None, :, :]) / ARD_LS) ** 2).sum(-1)
    np.testing.assert_allclose(k(X, X2), 1.5 * np.exp(-0.5 * r2), rtol=1e-13)


def test_inv_ls2_equivalent_to_lengthscale(X, X2):
    a = RBF(1.3, lengthscale=ARD_LS)
    b = RBF(1.3, inv_ls2=1.0 / ARD_LS**2)
    np.testing.assert_allclose(a(X, X2), b(X, X2), rtol=1e-13)
    np.testing.assert_allclose(RBF(lengthscale=2.0)(X), RBF(inv_ls2=0.25)(X), rtol=1e-13)


def test_rbf_requires_exactly_one_scale():
    with pytest.raises(ModelCheckError):
        RBF(1.0)
    with pytest.raises(ModelCheckError):
        RBF(1.0, lengthscale=1.0, inv_ls2=1.0)


def test_matern_limits(X, X2):
    ls = 0.9
    r = np.sqrt((((X[:, None, :] - X2[None, :, :]) / ls) ** 2).sum(-1))
    np.testing.assert_allclose(Matern12(2.0, lengthscale=ls)(X, X2), 2.0 * np.exp(-r), rtol=1e-13)
    for k in (Matern12(2.0, lengthscale=ls), Matern32(2.0, lengthscale=ls), Matern52(2.0, lengthscale=ls)):
        np.testing.assert_allclose(k.diag(X), 2.0, rtol=0)
    zero = np.zeros(3)
    far = np.full(3, 1e3)
    for cls in (Matern12, Matern32, Matern52):
        assert float(cls(lengthscale=ls).evaluate(zero, far)) < 1e-300
    huge = 1e6
    rbf = RBF(lengthscale=huge * ls)(X, X2)
    m52 = Matern52(lengthscale=huge * ls)(X, X2)
    np.testing.assert_allclose(m52, 1.0, atol=1e-10)
    np.testing.assert_allclose(rbf, 1.0, atol=1e-10)
    # Matern52 is closer to RBF than Matern32, which is closer than Matern12.
    target = RBF(lengthscale=ls)(X, X2)
    gaps = [np.abs(cls(lengthscale=ls)(X, X2) - target).max() for cls in (Matern12, Matern32, Matern52)]
    assert gaps[0] > gaps[1] > gaps[2]


def test_periodic_is_periodic():
    k = Periodic(1.0, lengthscale=0.8, period=1.7)
    x = jnp.array([0.3])
    np.testing.assert_allclose(k.evaluate(x, x + 3 * 1.7), 1.0, rtol=1e-12)
    expected = np.exp(-0.5 * np.sin(np.pi * 0.4 / 1.7) ** 2 / 0.8**2)
    np.testing.assert_allclose(k.evaluate(x, x + 0.4), expected, rtol=1e-13)


def test_linear_and_mlp_formulas(X, X2):
    np.testing.assert_allclose(Linear(ARD_W)(X, X2), (X * ARD_W) @ X2.T, rtol=1e-13)
    w, b = ARD_W, 0.5
    p12 = (X * w) @ X2.T + b
    p1 = ((X**2) * w).sum(1) + b
    p2 = ((X2**2) * w).sum(1) + b
    expected = 1.2 * 2 / np.pi * np.arcsin(p12 / np.sqrt(np.outer(p1 + 1, p2 + 1)))
    np.testing.assert_allclose(MLP(1.2, w, b)(X, X2), expected, rtol=1e-13)


def _differences(X, X2):
    return X[:, None, :] - X2[None, :, :]


NUMPY_FORMULAS = {
    "rational_quadratic_ard": (
        RationalQuadratic(1.1, lengthscale=ARD_LS, alpha=0.7),
        lambda X, X2: 1.1 * (1 + ((_differences(X, X2) / ARD_LS) ** 2).sum(-1) / (2 * 0.7)) ** -0.7),
    "rational_quadratic_iso": (
        RationalQuadratic(0.6, lengthscale=0.9, alpha=2.5),
        lambda X, X2: 0.6 * (1 + (_differences(X, X2) ** 2).sum(-1) / 0.9**2 / 5.0) ** -2.5),
    "cosine_ard": (Cosine(0.9, period=ARD_PERIOD),
                   lambda X, X2: 0.9 * np.cos(2 * np.pi * (_differences(X, X2) / ARD_PERIOD).sum(-1))),
    "cosine_1d": (Cosine(1.3, period=0.8, active_dims=(1,)),
                  lambda X, X2: 1.3 * np.cos(2 * np.pi * _differences(X, X2)[..., 1] / 0.8)),
    "polynomial_ard": (Polynomial(ARD_W, 0.5, 3), lambda X, X2: ((X * ARD_W) @ X2.T + 0.5) ** 3),
    "polynomial_iso": (Polynomial(0.7, 0.0, 2), lambda X, X2: (0.7 * X @ X2.T) ** 2),
    "spectral_mixture": (
        SpectralMixture([0.5, 1.2], [0.3, 1.1], [0.2, 0.6], active_dims=(2,)),
        lambda X, X2: sum(w * np.exp(-2 * np.pi**2 * s**2 * _differences(X, X2)[..., 2] ** 2)
                          * np.cos(2 * np.pi * m * _differences(X, X2)[..., 2])
                          for w, m, s in [(0.5, 0.3, 0.2), (1.2, 1.1, 0.6)])),
    "spectral_mixture_shared_scale": (
        SpectralMixture([0.5, 1.2], [0.3, 1.1], 0.4, active_dims=(0,)),
        lambda X, X2: sum(w * np.exp(-2 * np.pi**2 * 0.4**2 * _differences(X, X2)[..., 0] ** 2)
                          * np.cos(2 * np.pi * m * _differences(X, X2)[..., 0])
                          for w, m in [(0.5, 0.3), (1.2, 1.1)])),
}


@pytest.mark.parametrize("name", list(NUMPY_FORMULAS))
def test_matches_numpy_formula(name, X, X2):
    kernel, formula = NUMPY_FORMULAS[name]
    np.testing.assert_allclose(kernel(X, X2), formula(X, X2), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(kernel(X), formula(X, X), rtol=1e-12, atol=1e-14)


def test_limits_and_special_cases_of_the_new_kernels(X, X2):
    np.testing.assert_allclose(RationalQuadratic(1.4, lengthscale=ARD_LS, alpha=1e8)(X, X2),
                               RBF(1.4, lengthscale=ARD_LS)(X, X2), rtol=1e-6)
    np.testing.assert_allclose(Polynomial(ARD_W, 0.0, 1)(X, X2), Linear(ARD_W)(X, X2), rtol=1e-13)
    w, m, s = 0.8, 0.7, 0.3
    component = w * RBF(lengthscale=1 / (2 * np.pi * s), active_dims=(0,)) * Cosine(period=1 / m, active_dims=(0,))
    np.testing.assert_allclose(SpectralMixture(w, m, s, active_dims=(0,))(X, X2), component(X, X2), rtol=1e-12)
    x = jnp.array([0.3])
    np.testing.assert_allclose(Cosine(1.0, period=1.7).evaluate(x, x + 3 * 1.7), 1.0, rtol=1e-12)


def _matern_bessel(nu, variance, r):
    """The Matérn covariance of any order from the modified Bessel function (Rasmussen & Williams eq. 4.14)."""
    s = np.sqrt(2 * nu) * r
    with np.errstate(invalid="ignore"):
        value = variance * 2 ** (1 - nu) / gamma_function(nu) * s ** nu * kv(nu, s)
    return np.where(r == 0, variance, value)


@pytest.mark.parametrize("nu", [0.5, 1.5, 2.5, 3.5, 4.5, 7.5, 10.5])
def test_half_integer_matern_matches_the_bessel_form(nu, X, X2):
    kernel = Matern(nu, 1.4, lengthscale=ARD_LS)
    for A, B in ((X, X2), (X, X)):
        r = np.sqrt((_differences(A, B) ** 2 / ARD_LS**2).sum(-1))
        np.testing.assert_allclose(kernel(A, B), _matern_bessel(nu, 1.4, r), rtol=1e-10, atol=1e-14)


def test_matern_of_order_1_2_3_2_5_2_is_the_named_kernel(X, X2):
    for nu, named in ((0.5, Matern12), (1.5, Matern32), (2.5, Matern52)):
        np.testing.assert_allclose(Matern(nu, 1.1, ARD_LS)(X, X2), named(1.1, ARD_LS)(X, X2), rtol=1e-13)
    np.testing.assert_allclose(Matern(40.5, 1.1, 0.8)(X, X2), RBF(1.1, lengthscale=0.8)(X, X2), rtol=0, atol=0.02)


def _gibbs_numpy(variance, lengthscale, slope, a, b):
    la, lb = lengthscale * np.exp(slope * a)[:, None], lengthscale * np.exp(slope * b)[None, :]
    total = la**2 + lb**2
    return variance * np.sqrt(2 * la * lb / total) * np.exp(-((a[:, None] - b[None, :]) ** 2) / total)


def test_gibbs_matches_numpy_and_is_rbf_without_slope(X, X2):
    kernel = Gibbs(1.3, 0.6, 0.8, active_dims=(1,))
    np.testing.assert_allclose(kernel(X, X2), _gibbs_numpy(1.3, 0.6, 0.8, X[:, 1], X2[:, 1]), rtol=1e-12)
    np.testing.assert_allclose(kernel(X), _gibbs_numpy(1.3, 0.6, 0.8, X[:, 1], X[:, 1]), rtol=1e-12)
    np.testing.assert_allclose(Gibbs(1.3, 0.6, 0.0, active_dims=(2,))(X, X2),
                               RBF(1.3, lengthscale=0.6, active_dims=(2,))(X, X2), rtol=1e-13)


def test_changepoint_matches_numpy_and_its_limits(X, X2):
    before, after = RBF(1.0, lengthscale=0.5, active_dims=(0,)), Matern32(2.0, lengthscale=ARD_LS) + White(0.1)
    kernel = Changepoint(before, after, 0.2, 3.0, active_dims=(0,))
    s1, s2 = 1 / (1 + np.exp(-3.0 * (X[:, 0] - 0.2))), 1 / (1 + np.exp(-3.0 * (X2[:, 0] - 0.2)))
    expected = (np.outer(1 - s1, 1 - s2) * np.asarray(before(X, X2)) + np.outer(s1, s2) * np.asarray(after(X, X2)))
    np.testing.assert_allclose(kernel(X, X2), expected, rtol=1e-13)
    same = np.outer(1 - s1, 1 - s1) * np.asarray(before(X)) + np.outer(s1, s1) * np.asarray(after(X))
    np.testing.assert_allclose(kernel(X), same, rtol=1e-13)
    steep = Changepoint(before, after, 0.0, 1e4, active_dims=(0,))
    left, right = X[:, 0] < -0.01, X[:, 0] > 0.01
    np.testing.assert_allclose(np.asarray(steep(X))[np.ix_(left, left)], np.asarray(before(X))[np.ix_(left, left)],
                               atol=1e-12)
    np.testing.assert_allclose(np.asarray(steep(X))[np.ix_(right, right)],
                               np.asarray(after(X))[np.ix_(right, right)], atol=1e-12)
    np.testing.assert_allclose(np.asarray(steep(X))[np.ix_(left, right)], 0.0, atol=1e-12)


@pytest.fixture
def U():
    return np.random.default_rng(3).uniform(size=(12, 3))


def _kumaraswamy(x, a, b):
    return 1 - (1 - x**a) ** b


def test_warp_matches_numpy_on_the_warped_columns(U):
    inner = Matern52(1.2, lengthscale=ARD_LS)
    warped = U.copy()
    warped[:, 1:] = _kumaraswamy(U[:, 1:], np.array([2.0, 0.5]), np.array([1.5, 3.0]))
    kernel = Warp(inner, [2.0, 0.5], [1.5, 3.0], active_dims=(1, 2))
    np.testing.assert_allclose(kernel(U, U[::-1]), inner(warped, warped[::-1]), rtol=1e-13)
    every = Warp(RBF(lengthscale=0.4), 0.7, 2.0)
    np.testing.assert_allclose(every(U), RBF(lengthscale=0.4)(_kumaraswamy(U, 0.7, 2.0)), rtol=1e-13)
    np.testing.assert_allclose(Warp(inner, 1.0, 1.0)(U), inner(U), rtol=1e-14)
    outside, ends = np.array([[0.3, -0.5, 1.5]]), np.array([[0.3, 0.0, 1.0]])
    np.testing.assert_allclose(kernel(outside, U), kernel(ends, U), rtol=1e-14)
    K = np.asarray(kernel(U))
    assert np.linalg.eigvalsh(K).min() >= -1e-10


def test_warp_gradients_match_finite_differences_also_at_the_ends_of_the_interval(U):
    points = np.vstack([U, [[0.0, 1.0, 0.5], [1.0, 0.0, 0.0]]])
    weights = np.random.default_rng(4).normal(size=(14, 14))

    def objective(t):
        warped = Warp(RBF(lengthscale=t[0]), t[1:3], t[3], active_dims=(0, 2)) * Warp(Linear(1.0), 0.5, 2.0)
        return jnp.sum(weights * warped(points))

    theta = np.array([0.8, 1.7, 0.6, 2.2])
    grad = jax.grad(objective)(jnp.asarray(theta))
    assert np.all(np.isfinite(grad))
    np.testing.assert_allclose(grad, _finite_difference(lambda t: float(objective(t)), theta), rtol=1e-6, atol=1e-8)


def test_kernel_arguments_and_orders_are_checked(X):
    with pytest.raises(ModelCheckError, match="'nu' must be one of 1/2, 3/2, 5/2, ..., got 2"):
        Matern(2.0, lengthscale=1.0)
    with pytest.raises(ModelCheckError, match="missing required parameter 'nu'"):
        Matern(lengthscale=1.0)
    with pytest.raises(ModelCheckError, match="argument 'after' must be a kernel, got float"):
        Changepoint(RBF(lengthscale=1.0), 1.0, 0.5)
    with pytest.raises(ModelCheckError, match="one input column, got 3"):
        Changepoint(RBF(lengthscale=1.0), RBF(lengthscale=2.0), 0.0)(X)
    with pytest.raises(ModelCheckError, match="one input column, got 3"):
        Gibbs(1.0, 0.5)(X)
    with pytest.raises(ModelCheckError, match="'a' has 2 values"):
        Warp(RBF(lengthscale=1.0), [1.0, 2.0])(X)


def test_new_kernels_refuse_bad_hyperparameters(X):
    with pytest.raises(ModelCheckError, match="'degree' must be a whole number of at least 1, got 2.5"):
        Polynomial(1.0, 1.0, 2.5)
    with pytest.raises(ModelCheckError, match="missing required parameter 'degree'"):
        Polynomial(1.0, 1.0)
    with pytest.raises(ModelCheckError, match="one entry per component"):
        SpectralMixture([1.0, 2.0], [0.1, 0.2, 0.3], 0.1)
    with pytest.raises(ModelCheckError, match="one input column, got 3"):
        SpectralMixture(1.0, 0.5, 0.1)(X)
    with pytest.raises(ModelCheckError, match="'period' has 2 values"):
        Cosine(period=[1.0, 2.0])(X)


@pytest.mark.parametrize("name", list(all_kernels()))
def test_gram_symmetric_psd(name, X):
    K = np.asarray(all_kernels()[name](X))
    assert K.shape == (12, 12)
    np.testing.assert_allclose(K, K.T, rtol=0, atol=1e-14)
    assert np.linalg.eigvalsh(K).min() >= -1e-10


@pytest.mark.parametrize("name", list(all_kernels()))
def test_diag_matches_gram(name, X):
    k = all_kernels()[name]
    np.testing.assert_allclose(k.diag(X), np.diag(k(X)), rtol=1e-14)


# ---------------------------------------------------------------- white noise


def test_white_gram_versus_cross(X):
    w = White(0.3)
    np.testing.assert_array_equal(w(X), 0.3 * np.eye(12))
    np.testing.assert_array_equal(w(X, X), np.zeros((12, 12)))
    duplicated = np.vstack([X[:3], X[:3]])
    np.testing.assert_array_equal(w(duplicated), 0.3 * np.eye(6))


def test_white_propagates_through_sums_and_products(X, X2):
    rbf = RBF(2.0, lengthscale=1.1)
    np.testing.assert_allclose((rbf + White(0.3))(X), rbf(X) + 0.3 * np.eye(12), rtol=1e-14)
    np.testing.assert_allclose((rbf + White(0.3))(X, X2), rbf(X, X2), rtol=1e-14)
    np.testing.assert_allclose((rbf * White(0.3))(X), 2.0 * 0.3 * np.eye(12), rtol=1e-14, atol=0)
    scaled = 4.0 * (rbf + White(0.5))
    np.testing.assert_allclose(scaled(X), 4.0 * (rbf(X) + 0.5 * np.eye(12)), rtol=1e-14)


def test_sigma_times_rbf_plus_white(X):
    sigma, tau = 1.7, 0.6
    k = sigma * RBF(lengthscale=tau) + White(1e-6)
    assert isinstance(k, Sum) and isinstance(k.k1, Scale)
    np.testing.assert_allclose(k(X), sigma * RBF(lengthscale=tau)(X) + 1e-6 * np.eye(12), rtol=1e-14)
    assert isinstance(np.float64(2.0) * RBF(lengthscale=1.0), Scale)
    assert isinstance(np.array(2.0) * RBF(lengthscale=1.0), Scale)
    assert isinstance(jnp.array(2.0) * RBF(lengthscale=1.0), Scale)
    assert isinstance(RBF(lengthscale=1.0) * 2.0, Scale)


def test_scale_rejects_vectors():
    with pytest.raises(ModelCheckError):
        jnp.ones(3) * RBF(lengthscale=1.0)


# ---------------------------------------------------------------- active_dims


def test_active_dims_separable_product(X, X2):
    lt, lx = 0.7, np.array([1.2, 0.5])
    k = RBF(lengthscale=lt, active_dims=(0,)) * RBF(lengthscale=lx, active_dims=(1, 2))
    assert isinstance(k, Product)
    manual = RBF(lengthscale=lt)(X[:, :1], X2[:, :1]) * RBF(lengthscale=lx)(X[:, 1:], X2[:, 1:])
    np.testing.assert_allclose(k(X, X2), manual, rtol=1e-14)
    sliced = RBF(lengthscale=lt, active_dims=slice(0, 1)) * RBF(lengthscale=lx, active_dims=slice(1, None))
    np.testing.assert_allclose(sliced(X, X2), manual, rtol=1e-14)


def test_ard_length_must_match_active_dims(X):
    with pytest.raises(ModelCheckError):
        RBF(lengthscale=ARD_LS, active_dims=(0, 1))(X)
    with pytest.raises(ModelCheckError):
        RBF(lengthscale=1.0, active_dims=(5,))(X)


def test_one_dimensional_inputs_are_columns():
    t = np.linspace(0, 1, 5)
    np.testing.assert_allclose(RBF(lengthscale=0.3)(t), RBF(lengthscale=0.3)(t[:, None]))


# ---------------------------------------------------------------- JAX transforms


@pytest.mark.parametrize("name", list(all_kernels()))
def test_kernel_is_a_pytree_through_jit(name, X, X2):
    k = all_kernels()[name]
    leaves, tree = jax.tree_util.tree_flatten(k)
    rebuilt = jax.tree_util.tree_unflatten(tree, leaves)
    np.testing.assert_allclose(rebuilt(X), k(X), rtol=0)
    gram = jax.jit(lambda kern, A: kern(A))
    cross = jax.jit(lambda kern, A, B: kern(A, B))
    np.testing.assert_allclose(gram(k, X), k(X), rtol=1e-13)
    np.testing.assert_allclose(cross(k, X, X2), k(X, X2), rtol=1e-13)


def _finite_difference(f, theta, eps=1e-6):
    theta = np.asarray(theta, dtype=float)
    grad = np.zeros_like(theta)
    for i in np.ndindex(theta.shape):
        step = np.zeros_like(theta)
        step[i] = eps
        grad[i] = (f(theta + step) - f(theta - step)) / (2 * eps)
    return grad


BUILDERS = {
    "rbf": (lambda t: RBF(t[0], lengthscale=t[1:]), [1.3, 0.7, 1.1, 0.9]),
    "rbf_inv": (lambda t: RBF(t[0], inv_ls2=t[1:]), [1.3, 0.7, 1.1, 0.9]),
    "matern12": (lambda t: Matern12(t[0], lengthscale=t[1:]), [1.3, 0.7, 1.1, 0.9]),
    "matern32": (lambda t: Matern32(t[0], lengthscale=t[1]), [1.3, 0.7]),
    "matern52": (lambda t: Matern52(t[0], lengthscale=t[1:]), [1.3, 0.7, 1.1, 0.9]),
    "periodic": (lambda t: Periodic(t[0], t[1], t[2]), [1.3, 0.7, 1.9]),
    "linear": (lambda t: Linear(t), [0.3, 0.7, 1.1]),
    "mlp": (lambda t: MLP(t[0], t[1:4], t[4]), [1.3, 0.7, 1.1, 0.9, 0.4]),
    "rational_quadratic": (lambda t: RationalQuadratic(t[0], t[1:4], t[4]), [1.3, 0.7, 1.1, 0.9, 0.6]),
    "cosine": (lambda t: Cosine(t[0], t[1:]), [1.3, 2.7, 3.1, 4.9]),
    "polynomial": (lambda t: Polynomial(t[:3], t[3], 3), [0.3, 0.7, 1.1, 0.4]),
    "spectral_mixture": (lambda t: SpectralMixture(t[:2], t[2:4], t[4:], active_dims=(1,)),
                         [0.5, 1.2, 0.3, 1.1, 0.2, 0.6]),
    "matern_9_2": (lambda t: Matern(4.5, t[0], t[1:]), [1.3, 0.7, 1.1, 0.9]),
    "gibbs": (lambda t: Gibbs(t[0], t[1], t[2], active_dims=(2,)), [1.3, 0.7, -0.4]),
    "changepoint": (lambda t: Changepoint(RBF(t[0], lengthscale=t[1]), Matern32(t[2], lengthscale=0.8), t[3], t[4],
                                          active_dims=(1,)), [1.3, 0.7, 0.5, 0.2, 2.5]),
    "composite": (
        lambda t: t[0] * RBF(lengthscale=t[1], active_dims=(0,)) * Matern32(lengthscale=t[2], active_dims=(1, 2))
        + White(t[3]),
        [1.3, 0.7, 1.1, 0.05],
    ),
}


@pytest.mark.parametrize("name", list(BUILDERS))
def test_grad_wrt_hyperparameters_matches_finite_differences(name, X):
    build, theta = BUILDERS[name]
    weights = np.random.default_rng(2).normal(size=(12, 12))

    def objective(t):
        return jnp.sum(weights * build(t)(X))

    grad = jax.jit(jax.grad(objective))(jnp.asarray(theta))
    assert np.all(np.isfinite(grad))
    np.testing.assert_allclose(grad, _finite_difference(lambda t: float(objective(t)), theta), rtol=1e-6, atol=1e-8)


def test_grad_through_duplicate_points_is_finite():
    X = np.array([[0.0, 1.0], [0.0, 1.0], [2.0, 0.5]])
    for cls in (Matern12, Matern32, Matern52):
        g = jax.grad(lambda ls: jnp.sum(cls(lengthscale=ls)(X, X)))(jnp.array([0.5, 1.5]))
        assert np.all(np.isfinite(g))


def test_vmap_over_hyperparameters(X):
    lengthscales = jnp.array([0.5, 1.0, 2.0])
    grams = jax.vmap(lambda ls: RBF(lengthscale=ls)(X))(lengthscales)
    for i, ls in enumerate(lengthscales):
        np.testing.assert_allclose(grams[i], RBF(lengthscale=ls)(X), rtol=1e-14)


# ---------------------------------------------------------------- registry


def test_registry_covers_all_kernels():
    assert set(KERNELS) == {
        "rbf", "matern12", "matern32", "matern52", "periodic", "linear", "white", "constant", "same", "mlp",
        "rational_quadratic", "cosine", "polynomial", "spectral_mixture", "matern", "changepoint", "warp", "gibbs",
        "coregion", "coregion_corr",
    }
    for name, cls in KERNELS.items():
        assert issubclass(cls, Kernel)
        assert KERNEL_SPECS[name] is cls.spec and cls.spec.name == name


def test_spec_describes_parameters():
    rbf = kernel_spec("rbf")
    assert set(rbf.positional) == {"variance", "lengthscale", "inv_ls2"}
    assert rbf.exclusive == (("lengthscale", "inv_ls2"),)
    assert rbf.param("lengthscale").ard_allowed and not rbf.param("variance").ard_allowed
    assert rbf.param("variance").default == 1.0
    assert kernel_spec("periodic").required == {"lengthscale", "period"}
    assert kernel_spec("matern32").required == {"lengthscale"}
    assert kernel_spec("white").positional == ("variance",)


def test_spec_bind_checks_calls():
    assert kernel_spec("rbf").bind(0, ["lengthscale"]) == ("lengthscale",)
    assert kernel_spec("white").bind(1, []) == ("variance",)
    with pytest.raises(ModelCheckError, match="exactly one of lengthscale, inv_ls2"):
        kernel_spec("rbf").bind(0, ["variance"])
    with pytest.raises(ModelCheckError, match="exactly one"):
        kernel_spec("rbf").bind(0, ["lengthscale", "inv_ls2"])
    with pytest.raises(ModelCheckError, match="no parameter 'lenghtscale'") as info:
        kernel_spec("matern52").bind(0, ["lenghtscale"])
    assert "lengthscale" in info.value.hint
    with pytest.raises(ModelCheckError, match="missing required parameter 'period'"):
        kernel_spec("periodic").bind(0, ["lengthscale"])
    with pytest.raises(ModelCheckError, match="more than once"):
        kernel_spec("white").bind(1, ["variance"])
    with pytest.raises(ModelCheckError, match="at most 1 positional"):
        kernel_spec("white").bind(2, [])
    with pytest.raises(ModelCheckError, match="unknown kernel 'rbff'"):
        kernel_spec("rbff")


def test_build_kernel(X):
    np.testing.assert_allclose(build_kernel("rbf", lengthscale=0.5)(X), RBF(lengthscale=0.5)(X))
    with pytest.raises(ModelCheckError):
        build_kernel("rbf", 1.0)


# ---------------------------------------------------------------- GPy agreement


def _gpy_kernels(GPy):
    d = 3
    return {
        "rbf_iso": (GPy.kern.RBF(d, variance=1.7, lengthscale=0.8), RBF(1.7, lengthscale=0.8)),
        "rbf_ard": (GPy.kern.RBF(d, 1.7, ARD_LS, ARD=True), RBF(1.7, lengthscale=ARD_LS)),
        "rbf_inv": (GPy.kern.RBF(d, 0.6, ARD_LS, ARD=True), RBF(0.6, inv_ls2=1 / ARD_LS**2)),
        "exponential_ard": (GPy.kern.Exponential(d, 1.3, ARD_LS, ARD=True), Matern12(1.3, lengthscale=ARD_LS)),
        "exponential_iso": (GPy.kern.Exponential(d, 1.3, 0.6), Matern12(1.3, lengthscale=0.6)),
        "matern32_ard": (GPy.kern.Matern32(d, 0.9, ARD_LS, ARD=True), Matern32(0.9, lengthscale=ARD_LS)),
        "matern32_iso": (GPy.kern.Matern32(d, 0.9, 0.5), Matern32(0.9, lengthscale=0.5)),
        "matern52_ard": (GPy.kern.Matern52(d, 2.2, ARD_LS, ARD=True), Matern52(2.2, lengthscale=ARD_LS)),
        "matern52_iso": (GPy.kern.Matern52(d, 2.2, 1.4), Matern52(2.2, lengthscale=1.4)),
        "periodic_ard": (
            GPy.kern.StdPeriodic(d, 1.4, period=ARD_PERIOD, lengthscale=ARD_LS, ARD1=True, ARD2=True),
            Periodic(1.4, lengthscale=ARD_LS, period=ARD_PERIOD),
        ),
        "periodic_iso": (
            GPy.kern.StdPeriodic(d, 1.4, period=1.3, lengthscale=0.9),
            Periodic(1.4, lengthscale=0.9, period=1.3),
        ),
        "linear_ard": (GPy.kern.Linear(d, ARD_W, ARD=True), Linear(ARD_W)),
        "linear_iso": (GPy.kern.Linear(d, 0.7), Linear(0.7)),
        "white": (GPy.kern.White(d, 0.3), White(0.3)),
        "bias": (GPy.kern.Bias(d, 0.8), Constant(0.8)),
        "mlp_ard": (GPy.kern.MLP(d, 1.2, ARD_W, 0.5, ARD=True), MLP(1.2, ARD_W, 0.5)),
        "mlp_iso": (GPy.kern.MLP(d, 1.2, 0.8, 0.5), MLP(1.2, 0.8, 0.5)),
        "sum": (
            GPy.kern.RBF(d, 1.0, 0.9) + GPy.kern.Linear(d, 0.3) + GPy.kern.White(d, 1e-3),
            RBF(1.0, lengthscale=0.9) + Linear(0.3) + White(1e-3),
        ),
        "product": (
            GPy.kern.Matern32(d, 1.1, ARD_LS, ARD=True) * GPy.kern.StdPeriodic(d, 1.0, 1.5, 0.7),
            Matern32(1.1, lengthscale=ARD_LS) * Periodic(1.0, 0.7, 1.5),
        ),
        "product_with_white": (
            GPy.kern.RBF(d, 2.0, 1.1) * GPy.kern.White(d, 0.3) + GPy.kern.MLP(d, 0.5),
            RBF(2.0, lengthscale=1.1) * White(0.3) + MLP(0.5),
        ),
        "cosine_1d": (GPy.kern.Cosine(1, 1.3, 0.8 / (2 * np.pi), active_dims=[1]),
                      Cosine(1.3, period=0.8, active_dims=(1,))),
        "poly": (GPy.kern.Poly(d, variance=1.0, scale=0.7, bias=0.5, order=3), Polynomial(0.7, 0.5, 3)),
        "separable": (
            GPy.kern.RBF(1, 1.5, 0.7, active_dims=[0]) * GPy.kern.Matern52(2, 1.0, [1.2, 0.5], ARD=True, active_dims=[1, 2]),
            RBF(1.5, lengthscale=0.7, active_dims=(0,)) * Matern52(lengthscale=np.array([1.2, 0.5]), active_dims=(1, 2)),
        ),
    }


GPY_CASES = [
    "rbf_iso", "rbf_ard", "rbf_inv", "exponential_ard", "exponential_iso", "matern32_ard", "matern32_iso",
    "matern52_ard", "matern52_iso", "periodic_ard", "periodic_iso", "linear_ard", "linear_iso", "white",
    "bias", "mlp_ard", "mlp_iso", "sum", "product", "product_with_white", "separable", "cosine_1d", "poly",
]


@pytest.mark.parametrize("case", GPY_CASES)
def test_matches_gpy(case, X, X2):
    GPy = pytest.importorskip("GPy")
    reference, ours = _gpy_kernels(GPy)[case]
    np.testing.assert_allclose(ours(X), reference.K(X), rtol=1e-10, atol=1e-300)
    np.testing.assert_allclose(ours(X, X2), reference.K(X, X2), rtol=1e-10, atol=1e-300)
    np.testing.assert_allclose(ours.diag(X), reference.Kdiag(X), rtol=1e-10, atol=1e-300)
