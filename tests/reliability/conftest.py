"""The reliability suite's shared fixture: small results files, made once per session (they take a compile)."""

import pytest

from tests.reliability.helpers import make_work

SMALL = {"ml": ["fit", "gp_regression.gpm", "reg.json", "--max-iterations", 2],
         "vem": ["fit", "bayesian_gplvm.gpm", "lvm.json", "--max-iterations", 2, "--num-inducing", 4]}


@pytest.fixture(scope="session")
def fits(tmp_path_factory):
    """An ``ml`` and a ``vem`` results file of a few iterations (fits: they compile in seconds), and the folder they
    are in."""
    from gpdsl.cli import main

    work = make_work(tmp_path_factory.mktemp("results_files"))
    for method, (command, model, data, *flags) in SMALL.items():
        status = main([command, str(work / model), "--data", str(work / data), "--method", method, "--seed", "1",
                       "--quiet", "--out", str(work / f"{method}.nc"), *map(str, flags)])
        assert status in (0, 3)
    return work
