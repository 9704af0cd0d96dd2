"""The ``vem`` method's run: its stages and the optimiser's iterations on standard error with progress."""

import numpy as np

import gpdsl


def test_progress_shows_the_fit_its_iterations_and_the_predictions_on_standard_error(capsys):
    rng = np.random.default_rng(2)
    t = np.linspace(0.0, 3.0, 12)
    Y = np.stack([np.sin(t), np.cos(t)], axis=1) + 0.05 * rng.normal(size=(12, 2))
    data = {"N": 12, "D": 2, "Q": 1, "Y": Y - Y.mean(0), "t": t}
    capsys.readouterr()
    gpdsl.fit("models/dynamical_gplvm.gpm", data, "vem", seed=0, progress=True, num_inducing=5, max_iterations=60,
              new_inputs={"t": [3.5, 4.0]})
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert lines[0].startswith("device: cpu (") and lines[1] == "variational EM: L-BFGS on the bound, 1 start ..."
    assert "  iteration 49: bound " in "\n".join(lines)
    for stage in ("the means and variances of q(X)", "predictions at 2 new points"):
        assert f"{stage} ..." in lines and any(line.startswith(f"{stage}: done in ") for line in lines), stage
