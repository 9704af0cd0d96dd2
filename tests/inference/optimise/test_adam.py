"""Adam: the update rule, known optima (full batch and minibatches), held coordinates, checkpoints; lazy updates of
per-row parameters on batches drawn by epoch-wise shuffling."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gpdsl.storage.checkpoint import CheckpointError
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


@pytest.mark.parametrize("sampling", ["replacement", "epochs"])
def test_minibatches_reach_the_least_squares_solution(sampling):
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
                           data_size=n, batch_size=100, key=jax.random.PRNGKey(1), chunk=500, sampling=sampling)
    # the stationary spread of Adam's iterates is of the order of the learning rate
    np.testing.assert_allclose(result.x, solution, atol=0.03)


def whole_and_resumed(objective, x0, phases, path, **options):
    """The run uninterrupted, and the same run killed after 50 steps and resumed from its checkpoint at ``path``."""
    whole = adam.maximise(objective, x0, phases, **options)

    class Killed(Exception):
        pass

    def kill_after(steps, value):
        if steps == 50:
            raise Killed

    with pytest.raises(Killed):
        adam.maximise(objective, x0, phases, checkpoint=path, report=kill_after, **options)
    return whole, adam.maximise(objective, x0, phases, checkpoint=path, **options)


def test_a_resumed_run_continues_bit_for_bit(tmp_path):
    objective = quadratic([1.0, -2.0], [1.0, 4.0])

    def noisy(x, key, batch):
        return objective(x, key, batch) + 0.1 * jnp.sum(jax.random.normal(key, x.shape) * x)

    phases = [adam.Phase(40, np.array([False, True])), adam.Phase(60)]
    path = tmp_path / "adam.npz"
    whole, resumed = whole_and_resumed(noisy, np.zeros(2), phases, path, chunk=10, key=jax.random.PRNGKey(3))
    np.testing.assert_array_equal(resumed.x, whole.x)
    np.testing.assert_array_equal(resumed.trace, whole.trace)
    np.testing.assert_array_equal(resumed.gradient, whole.gradient)
    with pytest.raises(CheckpointError, match="another optimisation"):
        adam.maximise(noisy, np.zeros(2), [adam.Phase(10)], checkpoint=path)

def rows_problem(n=30, width=2, seed=0):
    """A nonlinear objective of 2 x 3 global coordinates and ``n`` rows of ``width`` per-row coordinates, and a
    start."""
    rng = np.random.default_rng(seed)
    Y = jnp.asarray(rng.normal(size=(n, 3)))

    def objective(x, rows, key, batch):
        predicted = jnp.tanh(rows @ x.reshape(width, 3))
        noise = 0.1 * jnp.sum(jax.random.normal(key, (n, width))[batch] * rows)  # a sample per row, as a row's own
        return (n / batch.shape[0]) * (-0.5 * jnp.sum((Y[batch] - predicted) ** 2) - 0.5 * jnp.sum(rows ** 2)
                                       + noise) - 0.1 * jnp.sum(x ** 2)

    return objective, rng.normal(size=width * 3), rng.normal(size=(n, width))


def test_lazy_rows_in_every_batch_follow_dense_adam():
    n, width = 30, 2
    objective, x0, local0 = rows_problem(n, width)
    held = np.r_[True, np.zeros(5, dtype=bool)]

    def dense(flat, key, batch):
        # the same objective with the rows in the flat vector, all of them in (permuted) order
        order = jax.random.permutation(jax.random.PRNGKey(7), n)
        return objective(flat[:6], flat[6:].reshape(n, width)[order], key, order)

    phases = [adam.Phase(30, held), adam.Phase(40)]
    lazy = adam.maximise(objective, x0, phases, local=local0, learning_rate=0.05, chunk=10)
    whole = adam.maximise(dense, np.r_[x0, local0.ravel()], [adam.Phase(30, np.r_[held, np.zeros(n * width, bool)]),
                                                             adam.Phase(40)], learning_rate=0.05, chunk=10)
    assert lazy.local.shape == (n, width) and lazy.local_gradient.shape == (n, width)
    assert np.abs(lazy.local - local0).min() > 1e-3
    np.testing.assert_allclose(lazy.x, whole.x[:6], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(lazy.local, whole.x[6:].reshape(n, width), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(lazy.trace, whole.trace, rtol=1e-12)


def test_batches_of_an_epoch_are_distinct_and_cover_the_rows_once():
    seed = np.asarray(jax.random.PRNGKey(5))
    batches = adam.epoch_batches(seed, 100, 10, 0, 25)
    assert batches.shape == (25, 10)
    for epoch in (batches[:10], batches[10:20]):
        np.testing.assert_array_equal(np.sort(epoch.ravel()), np.arange(100))
    assert not np.array_equal(batches[:10], batches[10:20])
    # the batches of a step depend on the step count alone
    np.testing.assert_array_equal(adam.epoch_batches(seed, 100, 10, 7, 9), batches[7:16])
    # when B does not divide N, an epoch is N // B batches of distinct rows
    uneven = adam.epoch_batches(seed, 103, 10, 0, 10).ravel()
    assert len(np.unique(uneven)) == 100 and uneven.max() < 103
    # through maximise: a constant gradient moves a row by the learning rate each time it is in a batch
    result = adam.maximise(lambda x, rows, key, batch: jnp.sum(rows) + jnp.sum(x), np.zeros(1), [adam.Phase(20)],
                           local=np.zeros((103, 1)), batch_size=10, local_learning_rate=0.01,
                           key=jax.random.PRNGKey(5), chunk=6)
    visits = np.bincount(adam.epoch_batches(seed, 103, 10, 0, 20).ravel(), minlength=103)
    assert visits.sum() == 200 and visits.max() == 2
    np.testing.assert_allclose(result.local[:, 0], 0.01 * visits, rtol=1e-6)


def test_per_row_parameters_need_batches_without_duplicates():
    objective, x0, local0 = rows_problem()
    with pytest.raises(ValueError, match="sampling='epochs'"):
        adam.maximise(objective, x0, [adam.Phase(5)], local=local0, batch_size=5, sampling="replacement")


def test_a_resumed_run_with_lazy_rows_continues_bit_for_bit(tmp_path):
    objective, x0, local0 = rows_problem()
    phases = [adam.Phase(40, np.r_[True, np.zeros(5, dtype=bool)]), adam.Phase(60)]
    options = {"local": local0, "batch_size": 7, "learning_rate": 0.05, "chunk": 10, "key": jax.random.PRNGKey(3)}
    path = tmp_path / "adam.npz"
    whole, resumed = whole_and_resumed(objective, x0, phases, path, **options)
    for name in ("x", "local", "trace", "gradient", "local_gradient"):
        np.testing.assert_array_equal(getattr(resumed, name), getattr(whole, name))
    with pytest.raises(CheckpointError, match="another optimisation"):
        adam.maximise(objective, x0, phases, checkpoint=path, **{**options, "local": local0[:20]})
