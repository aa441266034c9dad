"""`focalcal calibrate` has bounds: each calibrator's cost in N and K is stated, those that grow
as K² are skipped by default above a stated K (with a line saying so), and many classes finish."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np

from focalcal.commands import calibrate_command as command
from focalcal.commands import calibrator_choice as choice
from focalcal.logits_file import check_logits


def logits_set(n, k, seed=0):
    rng = np.random.default_rng(seed)
    arrays = {}
    for split in ("val", "test"):
        arrays[f"{split}_logits"] = (rng.normal(size=(n, k)) * 3).astype(np.float32)
        arrays[f"{split}_labels"] = rng.integers(0, k, n)
    return arrays


def test_every_calibrator_states_its_cost():
    assert set(choice.COSTS) == set(choice.CALIBRATORS)
    for key in choice.QUADRATIC_IN_K:
        assert "K²" in choice.COSTS[key]


def test_quadratic_calibrators_are_skipped_above_the_bound_unless_named(tmp_path, monkeypatch):
    monkeypatch.setattr(choice, "MAX_CLASSES_QUADRATIC", 4)
    logits = check_logits(logits_set(60, 6), source="six.npz")
    lines = []
    command.compare_calibrators(logits, tmp_path / "default", n_resamples=10, smooth=False, progress=lines.append)
    assert lines[0] == ("skipping vector_scaling: its cost grows as K² (" + choice.COSTS["vector_scaling"] + ") and "
                        "six.npz has 6 classes, more than 4; name it in --calibrators to fit it anyway")
    fitted = json.loads((tmp_path / "default/calibration.json").read_text())
    assert "vector_scaling" not in fitted and "isotonic" in fitted

    lines = []
    command.compare_calibrators(logits, tmp_path / "named", ["raw", "vector_scaling", "dirichlet"], n_resamples=10,
                                smooth=False, progress=lines.append)
    assert not any(line.startswith("skipping") for line in lines)
    assert set(json.loads((tmp_path / "named/calibration.json").read_text())) == {"raw", "vector_scaling", "dirichlet"}

    lines = []
    monkeypatch.setattr(choice, "MAX_CLASSES_QUADRATIC", 6)  # the bound itself is within it
    command.compare_calibrators(logits, tmp_path / "at_bound", ["raw"], n_resamples=10, smooth=False,
                                progress=lines.append)
    assert not any(line.startswith("skipping") for line in lines)


def test_100_rows_of_3000_classes_go_through_the_command(tmp_path):
    """The default calibrators on many classes: vector scaling is skipped, the rest finish (the
    timeout is the bound; bench/RESULTS.md has the time for 100 x 10,000)."""
    path = tmp_path / "wide.npz"
    np.savez(path, **logits_set(100, 3000))
    result = subprocess.run([sys.executable, "-m", "focalcal", "calibrate", str(path), "--gamma", "2", "--out",
                             str(tmp_path / "out"), "--resamples", "50"], capture_output=True, text=True, timeout=240, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "skipping vector_scaling: its cost grows as K²" in result.stdout
    fitted = json.loads((tmp_path / "out/calibration.json").read_text())
    assert set(fitted) == set(choice.DEFAULT_CALIBRATORS) - {"vector_scaling"}
    rows = (tmp_path / "out/metrics.csv").read_text().splitlines()
    assert len(rows) > 1 and all("nan" not in row for row in rows if ",ece," in row)
