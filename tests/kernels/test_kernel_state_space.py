"""The state-space form of a kernel (gpdsl.kernels.state_space): each half-integer Matérn is the covariance of its
linear SDE, whose stationary covariance solves the Lyapunov equation; kernels without the form refuse it."""

import jax
import numpy as np
import pytest
import scipy.linalg

from gpdsl.errors import MethodError
from gpdsl.kernels import RBF, Kernel, Matern12, Matern32, Matern52, Periodic, White

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


@pytest.mark.parametrize("kernel", [RBF(1.0, lengthscale=0.5), Periodic(1.0, 0.5, 2.0), White(0.1),
                                    Matern32(1.0, 0.5) + White(0.1), 2.0 * Matern12(1.0, 0.5)])
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
