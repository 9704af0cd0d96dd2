"""The state-space approximation (``approx = state_space``): the kernel table names a state-space form exactly for the
kernel classes that have one, and the checker fills in and records its setting."""

import pytest

from gpdsl.api import check_text
from gpdsl.kernel_table import KERNEL_SPECS, PERIODIC_ORDER
from gpdsl.kernels import KERNELS
from gpdsl.semantics.approximations import state_space_kernels


@pytest.mark.parametrize("name", sorted(KERNEL_SPECS))
def test_table_names_a_state_space_form_for_the_classes_that_have_one(name):
    cls = KERNELS.get(name)
    has_form = cls is not None and cls.has_state_space is True
    assert (KERNEL_SPECS[name].state_space is not None) == has_form, name


@pytest.mark.parametrize("name", ["matern12", "matern32", "matern52", "periodic", "constant"])
@pytest.mark.parametrize("order", [1, 4])
def test_table_state_dimension_is_the_classes(name, order):
    params = {"variance": 1.3, "lengthscale": 0.7, "period": 2.0}
    kernel = KERNELS[name](**{p.name: params[p.name] for p in KERNEL_SPECS[name].params})
    assert KERNEL_SPECS[name].state_dimension(order) == kernel.state_space(order).F.shape[0]


def test_state_space_kernels():
    assert set(state_space_kernels()) == {"matern12", "matern32", "matern52", "periodic", "constant"}


def _statement(approx: str):
    model, _ = check_text("data { int N; vector[N] t; vector[N] y; }\n"
                       "parameters { real<lower=0> s ~ half_normal(1); }\n"
                       f"model {{ f ~ gp(t, matern32(lengthscale = 1) * periodic(lengthscale = 1, period = 2), "
                       f"approx = {approx}); y ~ normal(f, s); }}", "m.gpm")
    return model.gp_statements()[0]


def test_order_defaults_to_the_kernels_periodic_order():
    assert _statement("state_space").approximation.value("order") == PERIODIC_ORDER
    assert _statement("state_space(order = 12)").approximation.value("order") == 12
    assert _statement("state_space(3)").approximated_by("state_space")
