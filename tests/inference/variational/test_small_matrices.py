"""Nested-tuple small matrices (small_matrices): the symmetric storage the Markov scans carry against NumPy."""

import numpy as np
import pytest

from gpdsl.inference.variational.small_matrices import from_tuples, from_upper, symmetric_sandwich, to_tuples, upper


@pytest.mark.parametrize("d", [1, 2, 3])
def test_upper_keeps_the_entries_on_and_above_the_diagonal_and_from_upper_mirrors_them(d):
    rng = np.random.default_rng(d)
    root = rng.normal(size=(4, d, d))
    x = root @ np.swapaxes(root, -1, -2)
    entries = upper(to_tuples(x))
    assert len(entries) == d * (d + 1) // 2
    np.testing.assert_array_equal(np.stack(entries, -1), x[:, *np.triu_indices(d)])
    np.testing.assert_array_equal(np.asarray(from_tuples(from_upper(entries))), x)


@pytest.mark.parametrize("d", [1, 2, 3])
def test_symmetric_sandwich_is_b_x_b_transposed(d):
    rng = np.random.default_rng(10 + d)
    root, b = rng.normal(size=(4, d, d)), rng.normal(size=(4, d, d))
    x = root @ np.swapaxes(root, -1, -2)
    got = np.asarray(from_tuples(symmetric_sandwich(to_tuples(b), to_tuples(x))))
    np.testing.assert_allclose(got, b @ x @ np.swapaxes(b, -1, -2), rtol=1e-13, atol=1e-13)
    np.testing.assert_array_equal(got, np.swapaxes(got, -1, -2))
