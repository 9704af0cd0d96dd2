"""The Hilbert-space approximation's pieces against direct computations: each kernel's spectral density against the
kernel by quadrature of its Fourier integral, the approximate covariance ``PHI diag(S) PHI^T`` converging to the
exact kernel on the box as ``m`` grows (1-D rbf and Matérn-3/2, a 2-D ARD rbf), and the paper's rule for ``m``."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import integrate

from gpdsl.errors import DataError
from gpdsl.kernels import build_kernel
from gpdsl.numerics.hsgp import (basis_indices, eigenfunctions, frequencies, hsgp_box, shortest_lengthscale,
                                 smallest_boundary_factor)

jax.config.update("jax_enable_x64", True)

KERNELS_1D = [("rbf", {"variance": 1.3, "lengthscale": 0.7}), ("matern12", {"variance": 1.3, "lengthscale": 0.7}),
              ("matern32", {"variance": 1.3, "lengthscale": 0.7}), ("matern52", {"variance": 0.8, "lengthscale": 1.9}),
              ("matern", {"nu": 3.5, "variance": 0.8, "lengthscale": 1.1})]


@pytest.mark.parametrize("name, params", KERNELS_1D, ids=[k for k, _ in KERNELS_1D])
def test_spectral_density_is_the_fourier_transform_of_the_kernel(name, params):
    kernel = build_kernel(name, **params)

    def density(w):
        return float(kernel.spectral_density(jnp.array([[w]]))[0])

    for tau in (0.0, 0.4, 1.5):
        # k(tau) = (1 / pi) int_0^inf S(w) cos(w tau) dw for an even S
        value = (integrate.quad(density, 0, np.inf)[0] if tau == 0.0
                 else integrate.quad(density, 0, np.inf, weight="cos", wvar=tau)[0]) / np.pi
        exact = float(kernel(jnp.array([[0.0]]), jnp.array([[tau]]))[0, 0])
        assert value == pytest.approx(exact, rel=1e-6, abs=1e-9)


@pytest.mark.parametrize("name", ["rbf", "matern32"])
def test_spectral_density_in_two_dimensions_with_ard(name):
    kernel = build_kernel(name, variance=1.1, lengthscale=jnp.array([0.6, 1.4]))
    step, width = 0.08, 60.0
    grid = np.arange(-width, width + step / 2, step)
    w1, w2 = np.meshgrid(grid, grid, indexing="ij")
    density = np.asarray(kernel.spectral_density(jnp.stack([w1.ravel(), w2.ravel()], axis=1))).reshape(w1.shape)
    for tau in (np.array([0.0, 0.0]), np.array([0.3, -0.5])):
        value = np.sum(density * np.cos(w1 * tau[0] + w2 * tau[1])) * step ** 2 / (2 * np.pi) ** 2
        exact = float(kernel(jnp.zeros((1, 2)), jnp.asarray(tau)[None])[0, 0])
        assert value == pytest.approx(exact, abs=2e-3)


def test_sums_and_scalings_add_and_scale_densities():
    a = build_kernel("rbf", variance=1.0, lengthscale=0.5)
    b = build_kernel("matern52", variance=2.0, lengthscale=1.5)
    omega = jnp.linspace(0, 5, 7)[:, None]
    np.testing.assert_allclose((3.0 * a + b).spectral_density(omega),
                               3.0 * a.spectral_density(omega) + b.spectral_density(omega))
    rbf_inv = build_kernel("rbf", variance=1.0, inv_ls2=4.0)
    np.testing.assert_allclose(rbf_inv.spectral_density(omega), a.spectral_density(omega))


def approximate_covariance(kernel, X, m, c):
    centre, L = hsgp_box(X, c)
    indices = basis_indices(m)
    phi = eigenfunctions(X, centre, L, indices)
    spd = np.asarray(kernel.spectral_density(frequencies(indices, L)))
    return phi @ np.diag(spd) @ phi.T


def max_error(kernel, X, m, c):
    return np.max(np.abs(approximate_covariance(kernel, X, m, c) - np.asarray(kernel(jnp.asarray(X)))))


@pytest.mark.parametrize("name, floor", [("rbf", 1e-8), ("matern32", 1e-2)])
def test_approximate_covariance_converges_to_the_kernel_in_one_dimension(name, floor):
    kernel = build_kernel(name, variance=1.0, lengthscale=0.3)
    X = np.linspace(-1.0, 1.0, 60)[:, None]
    errors = [max_error(kernel, X, (m,), 3.0) for m in (10, 20, 40)]
    assert errors[0] > errors[1] > errors[2]
    # rbf's error falls exponentially in m (to the boundary's, ~1e-15 at c = 3), Matérn-3/2's algebraically
    assert errors[-1] < floor < errors[0]


def test_boundary_factor_matters_in_one_dimension():
    kernel = build_kernel("rbf", variance=1.0, lengthscale=0.5)
    X = np.linspace(-1.0, 1.0, 40)[:, None]
    errors = [max_error(kernel, X, (200,), c) for c in (1.2, 2.0, 3.0)]
    assert errors[0] > errors[1] > errors[2]


def test_approximate_covariance_converges_in_two_dimensions_with_ard():
    kernel = build_kernel("rbf", variance=1.0, lengthscale=jnp.array([0.4, 0.8]))
    rng = np.random.default_rng(3)
    X = rng.uniform([-1.0, 0.0], [1.0, 3.0], size=(50, 2))
    errors = [max_error(kernel, X, (m, m), 2.5) for m in (6, 12, 24)]
    assert errors[0] > errors[1] > errors[2]
    assert errors[-1] < 1e-3


def test_basis_indices_are_the_tensor_product():
    np.testing.assert_array_equal(basis_indices((2, 3)), [[1, 1], [1, 2], [1, 3], [2, 1], [2, 2], [2, 3]])
    assert basis_indices((5,)).shape == (5, 1)


def test_box_needs_spread_inputs():
    centre, L = hsgp_box(np.array([[0.0, 1.0], [4.0, 1.5]]), 1.5)
    np.testing.assert_allclose(centre, [2.0, 1.25])
    np.testing.assert_allclose(L, [3.0, 0.375])
    with pytest.raises(DataError, match="column 2 has the same value"):
        hsgp_box(np.array([[0.0, 1.0], [4.0, 1.0]]), 1.5, "X")


@pytest.mark.parametrize("name", ["rbf", "matern32", "matern52"])
def test_paper_rule_for_m_reaches_the_error_the_boundary_allows(name):
    # with the smallest c the rule admits, the rule's m is as good as twice as many basis functions (the error left
    # is the boundary's), while a third of it is much worse
    X = np.linspace(-1.0, 1.0, 50)[:, None]
    lengthscale = 0.2
    c = smallest_boundary_factor(name, lengthscale, 1.0)
    m = int(np.ceil(shortest_lengthscale(name, 1, c, 1.0) / lengthscale))
    assert shortest_lengthscale(name, m, c, 1.0) <= lengthscale < shortest_lengthscale(name, m - 1, c, 1.0)
    kernel = build_kernel(name, variance=1.0, lengthscale=lengthscale)
    floor = max_error(kernel, X, (2 * m,), c)
    assert max_error(kernel, X, (m,), c) <= 1.1 * floor
    assert max_error(kernel, X, (m // 3,), c) > 1.5 * floor


def test_paper_rule_has_no_constants_for_other_kernels():
    assert shortest_lengthscale("matern12", 10, 1.5, 1.0) is None
    assert smallest_boundary_factor("rbf", 0.1, 1.0) == 1.2
    assert smallest_boundary_factor("rbf", 1.0, 1.0) == pytest.approx(3.2)


@pytest.mark.parametrize("lengthscale, order", [(1.2, 6), (0.5, 10), (0.3, 16)])
def test_periodic_series_covariance_is_the_kernel_to_its_truncation_error(lengthscale, order):
    """``approx = hsgp(m = J)`` on ``s * periodic``: ``PHI diag(variances) PHI^T`` against the exact kernel, off by at
    most the dropped coefficients' sum (reached at whole periods) and by less than the series with ``J - 2``
    harmonics."""
    from gpdsl.api import check_text
    from gpdsl.backends.jax.hsgp import hsgp_basis, PeriodicSeriesBasis, TermBases

    model, _ = check_text(f"""
data {{ int N; vector[N] t; vector[N] y; }}
model {{
  f ~ gp(t, 1.7 * periodic(lengthscale = {lengthscale}, period = 7), approx = hsgp(m = {order}));
  y ~ normal(f, 1);
}}
""")
    statement = model.gp_statements()[0]
    t = np.concatenate([np.linspace(-3.0, 25.0, 40), [0.0, 7.0, 14.0]])
    basis = hsgp_basis(statement, t[:, None])
    assert isinstance(basis, TermBases) and isinstance(basis.parts[0][1], PeriodicSeriesBasis)
    assert basis.phi.shape == (len(t), 2 * order + 1)
    periodic = build_kernel("periodic", variance=1.0, lengthscale=lengthscale, period=7.0)
    kernel = 1.7 * periodic
    approximate = basis.phi @ np.diag(np.asarray(basis.weight_variances(kernel))) @ basis.phi.T
    exact = np.asarray(kernel(jnp.asarray(t[:, None]), jnp.asarray(t[:, None])))
    bound = 1.7 * float(periodic.truncation_error(order))
    error = np.abs(approximate - exact)
    assert error.max() <= bound * (1 + 1e-8) + 1e-12
    assert error.max() == pytest.approx(bound, rel=1e-6, abs=1e-13)  # reached at tau = 0
    coarser = 1.7 * float(periodic.truncation_error(order - 2))
    assert error.max() < coarser or coarser < 1e-13
    np.testing.assert_allclose(basis.at(t[:5, None]), basis.phi[:5])


def test_a_series_without_its_constant_is_the_kernel_less_its_constant_coefficient():
    """``hsgp(m = J, constant = 0)``: the basis loses its column of ones (``2 J`` columns) and the covariance is the
    kernel's series less ``c_0``, the variance an intercept carries instead, within the same truncation error."""
    from gpdsl.api import check_text
    from gpdsl.backends.jax.hsgp import basis_size, hsgp_basis

    order, lengthscale = 6, 0.9
    model, _ = check_text(f"""
data {{ int N; vector[N] t; vector[N] y; }}
model {{
  f ~ gp(t, 1.7 * periodic(lengthscale = {lengthscale}, period = 7), approx = hsgp(m = {order}, constant = 0));
  y ~ normal(f, 1);
}}
""")
    statement = model.gp_statements()[0]
    t = np.linspace(-3.0, 25.0, 30)
    basis = hsgp_basis(statement, t[:, None])
    assert basis.phi.shape == (len(t), 2 * order) == (len(t), basis_size(statement))
    assert not np.any(np.all(basis.phi == 1.0, axis=0))
    periodic = build_kernel("periodic", variance=1.0, lengthscale=lengthscale, period=7.0)
    kernel = 1.7 * periodic
    c0 = 1.7 * float(periodic.series_coefficients(order)[0][0])
    approximate = basis.phi @ np.diag(np.asarray(basis.weight_variances(kernel))) @ basis.phi.T
    exact = np.asarray(kernel(jnp.asarray(t[:, None]), jnp.asarray(t[:, None]))) - c0
    assert np.abs(approximate - exact).max() <= 1.7 * float(periodic.truncation_error(order)) * (1 + 1e-8) + 1e-12
    np.testing.assert_allclose(basis.at(t[:4, None]), basis.phi[:4])


def test_sum_with_periodic_terms_puts_the_bases_side_by_side():
    """``matern32 + periodic + s * periodic`` under one ``hsgp(m = 12)``: the Laplacian basis of the Matérn term and a
    cosine series per periodic term, so the approximate covariance is the Matérn term's HSGP covariance (the same
    basis in a statement of its own) plus each periodic term's series, and within their errors of the exact sum."""
    from gpdsl.api import check_text
    from gpdsl.backends.jax.hsgp import basis_size, hsgp_basis, TermBases

    def statement(kernel):
        model, _ = check_text(f"""
data {{ int N; vector[N] t; vector[N] y; }}
model {{ f ~ gp(t, {kernel}, approx = hsgp(m = 12, c = 1.6)); y ~ normal(f, 1); }}
""")
        return model.gp_statements()[0]

    t = np.linspace(0.0, 20.0, 35)[:, None]
    matern = build_kernel("matern32", variance=1.4, lengthscale=4.0)
    weekly = build_kernel("periodic", variance=1.0, lengthscale=0.6, period=7.0)
    yearly = build_kernel("periodic", variance=0.8, lengthscale=0.9, period=11.0)
    both = statement("matern32(1.4, 4) + periodic(lengthscale = 0.6, period = 7) + 0.8 * periodic(1, 0.9, 11)")
    basis = hsgp_basis(both, t)
    assert isinstance(basis, TermBases) and basis.size == basis_size(both) == 12 + 2 * 25
    approximate = basis.phi @ np.diag(np.asarray(basis.weight_variances(matern + weekly + 0.8 * yearly))) @ basis.phi.T
    alone = hsgp_basis(statement("matern32(1.4, 4)"), t)
    matern_part = alone.phi @ np.diag(np.asarray(alone.weight_variances(matern))) @ alone.phi.T
    series = [hsgp_basis(statement(k), t) for k in ("periodic(lengthscale = 0.6, period = 7)", "periodic(1, 0.9, 11)")]
    periodic_parts = sum(b.phi @ np.diag(np.asarray(b.weight_variances(k))) @ b.phi.T
                         for b, k in zip(series, (weekly, 0.8 * yearly)))
    np.testing.assert_allclose(approximate, matern_part + periodic_parts, atol=1e-12)
    X = jnp.asarray(t)
    exact = np.asarray((matern + weekly + 0.8 * yearly)(X, X))
    laplacian_error = np.abs(matern_part - np.asarray(matern(X, X))).max()
    bound = laplacian_error + float(weekly.truncation_error(12)) + 0.8 * float(yearly.truncation_error(12))
    assert np.abs(approximate - exact).max() <= bound * (1 + 1e-9)
    np.testing.assert_allclose(basis.at(t[:4]), basis.phi[:4], atol=1e-12)
