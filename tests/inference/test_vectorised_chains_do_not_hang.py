"""Regression: vmapped chains over n = 200 covariance matrices used to wedge XLA's CPU thread pool.

jaxlib's batched LAPACK kernels (Cholesky, triangular solves) fan a batch out into the thread pool
they run on; with chains vmapped this hung at 0% CPU (PM with Laplace, n = 200, 4 chains). gpdsl's
linear algebra works through batches one matrix at a time; this runs that case in a subprocess and
fails if it does not finish in time.
"""

import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent("""
    import gpdsl
    from gpdsl.settings import PseudoMarginalSettings
    from gpdsl.testing.simulated_data import simulate_classification
    model = gpdsl.load_model("models/gp_classification.gpm")
    data, _ = simulate_classification(model, 200, 2, seed=0)
    for approximation, num_importance in (("laplace", 1), ("ep", 4)):
        gpdsl.run(model, data, "pm", PseudoMarginalSettings(chains=4, warmup=100, draws=100,
                                                            approximation=approximation,
                                                            num_importance=num_importance), seed=1)
    print("finished")
""")


@pytest.mark.slow
def test_pseudo_marginal_chains_on_200_points_finish():
    try:
        done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=900)
    except subprocess.TimeoutExpired:
        pytest.fail("4 vmapped PM chains on n = 200 did not finish in 900 s (the thread-pool hang is back?)")
    assert done.returncode == 0, done.stderr
    assert "finished" in done.stdout
