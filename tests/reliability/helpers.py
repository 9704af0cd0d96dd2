"""What the reliability tests share: the command line run in-process, the check of a clean refusal, and small
valid inputs to break one thing in."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import numpy as np

from tests.command_line import run_in_process

REPO = Path(__file__).resolve().parents[2]
WARNING = re.compile(r"^(\S+:\d+:\d+: )?warning: |^ +\d* \|")
"""A line of a warning printed before an error (the warning, or its excerpt), which ``one_line`` leaves out."""
QUICK = 5.0
"""Seconds a refusal may take (model check and data load included; a compile or a run takes far longer)."""
MODELS = ("gp_regression", "gp_classification", "bayesian_gplvm", "supervised_gplvm", "gp_narx", "deep_mahalanobis_gp",
          "deep_gp", "sequential_latent_gp")


def write_json(path, values):
    """Write ``values`` (arrays as nested lists) as a JSON data file; returns ``path``."""
    path.write_text(json.dumps({k: np.asarray(v).tolist() if not np.isscalar(v) else v for k, v in values.items()}))
    return path


def regression_file(folder: Path) -> Path:
    """A small GP regression data file (20 points of a noisy sine) for models/gp_regression.gpm."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(20, 1))
    path = folder / "reg.json"
    path.write_text(json.dumps({"N": 20, "D": 1, "X": X.tolist(),
                                "y": (np.sin(2 * X[:, 0]) + 0.1 * rng.normal(size=20)).tolist()}))
    return path


def make_work(root: Path) -> Path:
    """Model copies and valid data in ``root``: a regression, a classification, a GPLVM, a supervised GPLVM, a deep
    GP and a sequential model (``reg.json``, ``cls.json``, ``lvm.json``, ``sup.json``, ``deep.json``,
    ``seq.json``)."""
    for name in MODELS:
        shutil.copy(REPO / "models" / f"{name}.gpm", root / f"{name}.gpm")
    rng = np.random.default_rng(0)
    X = rng.normal(size=(12, 2))
    write_json(root / "reg.json", {"N": 12, "D": 2, "X": X, "y": rng.normal(size=12)})
    write_json(root / "cls.json", {"N": 12, "D": 2, "X": X, "y": [0, 1] * 6})
    write_json(root / "lvm.json", {"N": 30, "D": 3, "Q": 2, "Y": rng.normal(size=(30, 3))})
    write_json(root / "sup.json", {"N": 12, "Q": 1, "D": 2, "X": X[:, :1], "Y": rng.normal(size=(12, 2))})
    write_json(root / "deep.json", {"N": 12, "D": 2, "Q": 2, "X": X, "y": rng.normal(size=12)})
    write_json(root / "seq.json", {"T": 3, "N": 4, "t": [0.0, 1.0, 2.0], "X": rng.normal(size=(3, 4, 2)),
                                   "y": rng.normal(size=(3, 4))})
    return root


def cli(argv, capsys):
    """``(status, stderr, seconds)`` of the command line run in-process."""
    status, _, err, seconds = run_in_process(argv, capsys)
    return status, err, seconds


def refused(argv, capsys, culprit, out=None, quick: float = QUICK, one_line: bool = False):
    """Assert a quick, clean refusal (status 1) naming ``culprit`` that wrote nothing to ``out``; returns stderr.

    With ``one_line``, the message is one line (and an optional ``hint:`` line), after any warnings.
    """
    existed = out is not None and os.path.lexists(out)
    before = Path(out).read_bytes() if existed and Path(out).is_file() else None
    status, err, seconds = cli(argv, capsys)
    assert status == 1, err
    assert "Traceback" not in err and "internal error" not in err
    assert culprit in err, err
    assert seconds < quick, f"the refusal took {seconds:.1f} s"
    if one_line:
        lines = [line for line in err.strip().splitlines() if not WARNING.match(line) and not line.startswith("  hint:")]
        assert len(lines) == 1, err
    if out is not None:
        if existed:
            assert before is None or Path(out).read_bytes() == before
        else:
            assert not os.path.lexists(out)
    return err


def no_internal_error(argv, capsys, statuses=(0, 1, 3)):
    """Run ``argv``; assert its status is one of ``statuses`` (never 2) with no traceback; returns
    ``(status, stderr)``."""
    status, err, _ = cli(argv, capsys)
    assert status in statuses, err
    assert "Traceback" not in err and "internal error" not in err, err
    return status, err
