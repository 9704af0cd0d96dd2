"""PyStan under a Python its bundled pybind11 cannot serve (3.13 with httpstan 4.17's pybind11 2.9): refused
before a build, with the reason, rather than PyStan's unreadable reply."""

from __future__ import annotations

import pytest

from gpdsl.backends.stan.pystan_support import bundled_pybind11, pybind11_reason
from gpdsl.backends.stan.runners import sample_pystan
from gpdsl.errors import BackendError
from tests.stan_available import PYSTAN_UNAVAILABLE


@pytest.mark.parametrize(
    "python, pybind11, refused",
    [((3, 11), (2, 9), False), ((3, 12), (2, 9), False), ((3, 13), (2, 9), True), ((3, 14), (2, 11), True),
     ((3, 13), (2, 12), False), ((3, 14), (3, 0), False)],
)
def test_pybind11_older_than_2_12_is_refused_from_python_3_13(python, pybind11, refused):
    reason = pybind11_reason(python, pybind11, "4.17.0")
    assert (reason is not None) == refused
    if refused:
        assert f"Python {python[0]}.{python[1]}" in reason and "httpstan 4.17.0" in reason
        assert f"pybind11 {pybind11[0]}.{pybind11[1]}" in reason and "_PyThreadState_UncheckedGet" in reason


def test_the_bundled_pybind11_version_is_read_from_its_header(tmp_path):
    header = tmp_path / "include" / "pybind11" / "detail" / "common.h"
    header.parent.mkdir(parents=True)
    header.write_text("#define PYBIND11_VERSION_MAJOR 2\n#define PYBIND11_VERSION_MINOR 9\n#define PYBIND11_VERSION_PATCH 2\n")
    assert bundled_pybind11(tmp_path) == (2, 9)
    assert bundled_pybind11(tmp_path / "elsewhere") is None


@pytest.mark.skipif(PYSTAN_UNAVAILABLE is None, reason="PyStan builds models on this Python")
def test_pystan_is_refused_before_its_worker_starts_with_the_reason():
    with pytest.raises(BackendError) as caught:
        sample_pystan("parameters { real mu; } model { mu ~ normal(0, 1); }", {}, chains=1, warmup=10, draws=10,
                      progress=False)
    assert caught.value.message == PYSTAN_UNAVAILABLE
