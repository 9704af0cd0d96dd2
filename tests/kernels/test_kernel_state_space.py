"""The state-space form of a kernel (gpdsl.kernels.state_space): each half-integer Matérn, the periodic kernel's
truncated cosine series, a constant, and sums, products and scalings of them are the covariance of their linear SDE,
whose stationary covariance solves the Lyapunov equation; kernels without the form refuse it."""

import jax
import numpy as np
import pytest
import scipy.linalg
import scipy.special

from gpdsl.errors import MethodError
from gpdsl.kernels import RBF, Constant, Kernel, Matern12, Matern32, Matern52, Periodic, White

MATERNS = [Matern12, Matern32, Matern52]
TAU = np.array([0.0, 1e-3, 0.1, 0.5, 1.3, 4.0])
HYPERPARAMETERS = [(1.7, 0.6), (0.3, 2.5)]


def state_space(kernel):
    return [np.asarray(part) for part in kernel.state_space()]


@pytest.mark.parametrize("variance,lengthscale", HYPERPARAMETERS)
@pytest.mark.parametrize("cls", MATERNS)
def test_the_stationary_state_gives_back_the_kernel(cls, variance, lengthscale):
    kernel = cls(variance, lengthscale)
    F, L, Qc, H, P_inf = state_space(kernel)
    d = F.shape[0]
    assert (d, L.shape, Qc.shape, H.shape, P_inf.shape) == (int(cls.two_nu + 1) // 2, (d, 1), (1, 1), (1, d), (d, d))
    covariance = [(H @ scipy.linalg.expm(F * tau) @ P_inf @ H.T)[0, 0] for tau in TAU]
    expected = np.asarray(kernel(np.zeros((1, 1)), TAU[:, None]))[0]
    np.testing.assert_allclose(covariance, expected, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("variance,lengthscale", HYPERPARAMETERS)
@pytest.mark.parametrize("cls", MATERNS)
def test_the_stationary_covariance_solves_the_lyapunov_equation(cls, variance, lengthscale):
    F, L, Qc, _, P_inf = state_space(cls(variance, lengthscale))
    noise = L @ Qc @ L.T
    np.testing.assert_allclose(F @ P_inf + P_inf @ F.T + noise, 0.0, atol=1e-10 * np.abs(noise).max())
    np.testing.assert_array_equal(P_inf, P_inf.T)
    assert np.linalg.eigvalsh(P_inf).min() > 0


@pytest.mark.parametrize("cls", MATERNS)
def test_the_closed_form_transitions_are_the_matrix_exponential(cls):
    kernel = cls(1.7, 0.6)
    F, *_, P_inf = state_space(kernel)
    dt = np.stack([TAU, 2 * TAU])
    A, P = kernel.discretise(dt)
    assert A.shape == dt.shape + F.shape
    np.testing.assert_array_equal(P, P_inf)
    expected = np.array([[scipy.linalg.expm(F * t) for t in row] for row in dt])
    np.testing.assert_allclose(A, expected, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(Kernel.discretise(kernel, dt)[0], expected, rtol=1e-12, atol=1e-14)  # the default


def test_the_state_space_form_is_traceable():
    def covariance(kernel):
        A, P_inf = kernel.discretise(0.4)
        return (A @ P_inf)[0, 0]

    kernel = Matern32(1.7, 0.6)
    expected = float(kernel(np.zeros((1, 1)), np.full((1, 1), 0.4))[0, 0])
    assert float(jax.jit(covariance)(kernel)) == pytest.approx(expected)
    assert jax.grad(lambda v: covariance(Matern52(v, 0.6)))(1.7) == pytest.approx(covariance(Matern52(1.0, 0.6)))


COMPOSITES = {
    "matern32 + periodic": Matern32(1.3, 0.8) + Periodic(0.6, 0.7, 1.9),
    "quasi-periodic": Matern52(1.1, 2.5) * Periodic(1.0, 0.6, 1.3),
    "scaled": 2.7 * Matern32(1.0, 0.4),
    "constant + matern12": 0.4 + Matern12(0.9, 1.2),
    "scaled sum of products": 0.5 * (Matern12(1.0, 3.0) * Matern32(1.0, 0.9) + Matern52(0.3, 0.2)),
}
EXACT_ORDER = 20  # harmonics past which a periodic kernel of these length-scales has no coefficient above 1e-17


def covariance_of(form, tau):
    F, _, _, H, P_inf = [np.asarray(part) for part in form]
    return np.array([(H @ scipy.linalg.expm(F * t) @ P_inf @ H.T)[0, 0] for t in tau])


def kernel_at(kernel, tau):
    return np.asarray(kernel(np.zeros((1, 1)), np.asarray(tau)[:, None]))[0]


@pytest.mark.parametrize("name", COMPOSITES)
def test_composites_give_back_their_kernel(name):
    kernel = COMPOSITES[name]
    assert kernel.has_state_space
    np.testing.assert_allclose(covariance_of(kernel.state_space(EXACT_ORDER), TAU), kernel_at(kernel, TAU),
                               rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name", COMPOSITES)
def test_composites_solve_the_lyapunov_equation_and_discretise_exactly(name):
    kernel = COMPOSITES[name]
    F, L, Qc, _, P_inf = [np.asarray(part) for part in kernel.state_space(5)]
    noise = L @ Qc @ L.T
    np.testing.assert_allclose(F @ P_inf + P_inf @ F.T + noise, 0.0, atol=1e-10 * np.abs(P_inf).max())
    A, P = kernel.discretise(TAU, 5)
    np.testing.assert_allclose(P, P_inf, rtol=1e-14)
    np.testing.assert_allclose(A, [scipy.linalg.expm(F * t) for t in TAU], rtol=1e-10, atol=1e-12)


def test_the_periodic_series_is_the_bessel_expansion():
    variance, lengthscale, period, order = 1.4, 0.45, 2.2, 6
    kernel = Periodic(variance, lengthscale, period)
    z = 0.25 / lengthscale ** 2
    weights = scipy.special.ive(np.arange(order + 1), z) * np.r_[1.0, np.full(order, 2.0)]
    tau = np.linspace(0.0, 2 * period, 41)
    series = variance * np.cos(np.outer(tau, np.arange(order + 1)) * 2 * np.pi / period) @ weights
    form = kernel.state_space(order)
    assert form.F.shape == (2 * order + 1, 2 * order + 1)
    np.testing.assert_allclose(covariance_of(form, tau), series, rtol=1e-12, atol=1e-14)
    A, P_inf = kernel.discretise(tau, order)
    np.testing.assert_allclose(A, [scipy.linalg.expm(np.asarray(form.F) * t) for t in tau], atol=1e-12)
    np.testing.assert_allclose(np.asarray(form.L @ form.Qc @ form.L.T), 0.0)  # undamped resonators, no noise


@pytest.mark.parametrize("lengthscale", [0.3, 0.6, 1.5])
def test_the_periodic_truncation_error_is_the_dropped_mass_and_bounds_the_error(lengthscale):
    kernel = Periodic(1.4, lengthscale, 2.2)
    tau = np.linspace(0.0, 4.4, 201)
    exact = kernel_at(kernel, tau)
    errors = []
    for order in (2, 4, 7):
        bound = float(kernel.truncation_error(order))
        error = np.abs(covariance_of(kernel.state_space(order), tau) - exact)
        assert error.max() <= bound * (1 + 1e-9) + 1e-15
        assert error[0] == pytest.approx(bound, rel=1e-8, abs=1e-15)  # reached at tau = 0
        errors.append(bound)
    assert errors[0] > errors[1] > errors[2]


def test_which_kernels_have_the_form():
    assert Periodic.has_state_space and Constant.has_state_space and Matern32.has_state_space
    assert (Matern32(1.0, 0.5) * (Periodic(1.0, 0.5, 2.0) + 1.0)).has_state_space
    assert not (Matern32(1.0, 0.5) + RBF(1.0, lengthscale=0.5)).has_state_space
    assert not (RBF(1.0, lengthscale=0.5) * Matern32(1.0, 0.5)).has_state_space
    assert not (3.0 * White(0.1)).has_state_space


@pytest.mark.parametrize("kernel", [RBF(1.0, lengthscale=0.5), White(0.1), Matern32(1.0, 0.5) + White(0.1),
                                    2.0 * RBF(1.0, lengthscale=0.5), Periodic(1.0, 0.5, 2.0) * White(0.2)])
def test_kernels_without_a_state_space_form_refuse_it(kernel):
    assert not kernel.has_state_space
    with pytest.raises(MethodError, match="has no state-space form"):
        kernel.state_space()
    with pytest.raises(MethodError, match="has no state-space form"):
        kernel.discretise(0.5)


def test_a_state_space_needs_a_single_lengthscale():
    assert Matern52(1.0, np.array([0.5])).state_space().F.shape == (3, 3)
    with pytest.raises(MethodError, match="over one input only"):
        Matern52(1.0, np.array([0.5, 2.0])).state_space()


def test_a_periodic_state_space_needs_a_single_input():
    with pytest.raises(MethodError, match="over one input only"):
        Periodic(1.0, np.array([0.5, 0.7]), 2.0).state_space()
