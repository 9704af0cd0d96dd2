"""The language catalog (used by the JAX-free checker) and the JAX kernel registry agree."""

import pytest

from gpdsl.kernels import KERNEL_SPECS
from gpdsl.semantics.catalog import KERNELS


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_kernel_parameters_agree(name):
    language = KERNELS[name]
    jax_spec = KERNEL_SPECS[name]
    assert [p.name for p in language.params] == list(jax_spec.params)
    for param in language.params:
        assert param.ard == jax_spec.params[param.name].ard_allowed, param.name


def test_same_kernel_names():
    assert set(KERNELS) == set(KERNEL_SPECS)
