"""Adam: the update rule, known optima (full batch and minibatches), held coordinates, checkpoints."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gpdsl.checkpoint import CheckpointError
from gpdsl.inference.optimise import adam


def test_update_follows_kingma_and_ba():
    gradients = np.array([[1.0, -2.0], [0.5, 0.1], [-0.3, 4.0]])
    state, x = adam.init(np.zeros(2)), np.zeros(2)
    m = v = np.zeros(2)
    expected = np.zeros(2)
    for t, g in enumerate(gradients, start=1):
        increment, state = adam.update(jnp.asarray(g), state, 0.01)
        x = x + np.asarray(increment)
        m, v = 0.9 * m + 0.1 * g, 0.999 * v + 0.001 * g ** 2
        expected = expected + 0.01 * (m / (1 - 0.9 ** t)) / (np.sqrt(v / (1 - 0.999 ** t)) + 1e-8)
    np.testing.assert_allclose(x, expected, rtol=1e-14)
    assert int(state.step) == 3


def quadratic(centre, scales):
    centre, scales = jnp.asarray(centre), jnp.asarray(scales)
    return lambda x, key, batch: -0.5 * jnp.sum(scales * (x - centre) ** 2)


def test_reaches_the_maximum_of_a_quadratic_and_holds_what_a_phase_holds():
    centre = np.array([1.0, -2.0, 0.5])
    objective = quadratic(centre, [1.0, 10.0, 0.1])
    held = np.array([False, False, True])
    seen = []
    result = adam.maximise(objective, np.zeros(3), [adam.Phase(300, held), adam.Phase(3000)], learning_rate=0.05,
                           chunk=100, report=lambda steps, value: seen.append(steps))
    assert seen == list(range(100, 3301, 100))
    np.testing.assert_allclose(result.x, centre, atol=1e-3)
    assert result.steps == 3300 and len(result.trace) == 33 and result.trace[-1] > result.trace[0]
    first = adam.maximise(objective, np.zeros(3), [adam.Phase(300, held)], learning_rate=0.05)
    assert first.x[2] == 0.0 and abs(first.x[0] - 1.0) < 0.05


def test_minibatches_reach_the_least_squares_solution():
    rng = np.random.default_rng(0)
    n = 2000
    A = rng.normal(size=(n, 3))
    y = A @ np.array([0.5, -1.0, 2.0]) + 0.3 * rng.normal(size=n)
    solution = np.linalg.lstsq(A, y, rcond=None)[0]
    A_, y_ = jnp.asarray(A), jnp.asarray(y)

    def objective(x, key, batch):
        residual = y_[batch] - A_[batch] @ x
        return -0.5 * (n / batch.shape[0]) * jnp.sum(residual ** 2) / n

    result = adam.maximise(objective, np.zeros(3), [adam.Phase(1500), adam.Phase(1500)], learning_rate=0.01,
                           data_size=n, batch_size=100, key=jax.random.PRNGKey(1), chunk=500)
    # the stationary spread of Adam's iterates is of the order of the learning rate
    np.testing.assert_allclose(result.x, solution, atol=0.03)


def test_a_resumed_run_continues_bit_for_bit(tmp_path):
    objective = quadratic([1.0, -2.0], [1.0, 4.0])

    def noisy(x, key, batch):
        return objective(x, key, batch) + 0.1 * jnp.sum(jax.random.normal(key, x.shape) * x)

    phases = [adam.Phase(40, np.array([False, True])), adam.Phase(60)]
    whole = adam.maximise(noisy, np.zeros(2), phases, chunk=10, key=jax.random.PRNGKey(3))

    class Killed(Exception):
        pass

    def kill_after(steps, value):
        if steps == 50:
            raise Killed

    path = tmp_path / "adam.npz"
    with pytest.raises(Killed):
        adam.maximise(noisy, np.zeros(2), phases, chunk=10, key=jax.random.PRNGKey(3), checkpoint=path,
                      report=kill_after)
    resumed = adam.maximise(noisy, np.zeros(2), phases, chunk=10, key=jax.random.PRNGKey(3), checkpoint=path)
    np.testing.assert_array_equal(resumed.x, whole.x)
    np.testing.assert_array_equal(resumed.trace, whole.trace)
    np.testing.assert_array_equal(resumed.gradient, whole.gradient)
    with pytest.raises(CheckpointError, match="another optimisation"):
        adam.maximise(noisy, np.zeros(2), [adam.Phase(10)], checkpoint=path)
