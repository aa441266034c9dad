"""What every paper's figures read: run files, calibration.json, study tables.

A figure never recalibrates what it can read: calibrated probabilities come from the fitted
calibrators stored in ``calibration.json`` (``Calibrator.from_dict``), applied to the run's
``logits.npz``; metric values printed on a figure come from the study's tidy table. The
figure builders live with their paper (``page`` of :mod:`focalcal.papers`); each takes the
artifact's ``params``, the working directory and the study key, and returns a matplotlib
Figure.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from focalcal import paths
from focalcal.calibration import Calibrator
from focalcal.files.artefacts import load_npz, read_json
from focalcal.report.tables import read_study_table

# --------------------------------------------------------------------------- run files


def read_logits(path: Path) -> dict[str, np.ndarray]:
    if not path.is_file():
        raise ValueError(f"no logits file {str(path)!r}; run the workflow's export_logits rule first")
    return load_npz(path)


def read_calibration(path: Path) -> dict:
    if not path.is_file():
        raise ValueError(f"no calibration file {str(path)!r}; run the workflow's calibrate rule first")
    return read_json(path)


def stored_calibrator(calibration: dict, key: str, where: str = paths.CALIBRATION_PARAMS):
    """The fitted calibrator ``key`` and, for a chained one, the temperature it follows."""
    if key not in calibration:
        raise ValueError(f"{where} has no calibrator {key!r}; it has {sorted(k for k in calibration if k[:1] != '_')}")
    entry = calibration[key]
    calibrator = Calibrator.from_dict(entry["fitted"])
    before = Calibrator.from_dict(entry["after"]).temperature_ if "after" in entry else None
    return calibrator, before


def apply_stored(calibration: dict, key: str, logits: np.ndarray, where: str = paths.CALIBRATION_PARAMS) -> np.ndarray:
    """Probabilities of a stored (already fitted) calibrator on ``logits`` — no refitting."""
    calibrator, before = stored_calibrator(calibration, key, where)
    return calibrator.transform(logits if before is None else logits / before)


def run_status(run_dir: Path) -> str | None:
    """The health status ("trained", "diverged", "collapsed", "not converged") a run's
    ``run.json`` records under "health", or None (no run.json, or one written before runs
    recorded their health). Figures mark a run that did not train with
    :func:`focalcal.plots.style.status_label`."""
    path = Path(run_dir) / paths.RUN_INFO
    if not path.is_file():
        return None
    health = read_json(path).get("health")
    return health.get("status") if isinstance(health, dict) else None


def study_table(root: Path, study: str) -> pd.DataFrame:
    path = root / paths.study_table(study)
    if not path.is_file():
        raise ValueError(f"no study table {str(path)!r}; run the workflow's study_table rule first")
    return read_study_table(path)


def inputs_of_test_points(root: Path, run: dict, arrays: dict, data_root: str) -> np.ndarray:
    """x of a run's test points: ``test_inputs`` from logits.npz, else the data set reloaded.

    Reloading uses the run's own ``run_config.json`` and checks the split against the hash
    its ``run.json`` recorded, so the x belong to exactly the logits on disk.
    """
    if "test_inputs" in arrays:
        return np.asarray(arrays["test_inputs"], dtype=np.float64).reshape(len(arrays["test_labels"]), -1)
    from focalcal.data import verify_split
    from focalcal.training.config import RunConfig
    from focalcal.training.factories import load_dataset

    config = RunConfig.from_dict(read_json(root / run["run_config"]))
    dataset = load_dataset(config, root / data_root)
    verify_split(dataset, read_json(root / run["info"])["split_hash"])
    labels = dataset.test.y.numpy()
    if not np.array_equal(labels, arrays["test_labels"]):
        raise ValueError(f"reloaded test labels of {run['path']} differ from its logits.npz; re-export the logits")
    return dataset.test.x.numpy().astype(np.float64).reshape(len(labels), -1)
