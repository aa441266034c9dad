"""focalcal.pipeline.calibrate and .tables: one run's calibration job, one study's table."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from scipy.special import log_softmax, softmax

from focalcal.calibration import Calibrator, psi_from_logits
from focalcal.pipeline import build_plan, validate_config
from focalcal.pipeline.calibrate import calibrate_run
from focalcal.pipeline.tables import study_table

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"


def overconfident_logits(n, k, seed, scale=4.0):
    """Logits whose softmax is sharper than the labels' true distribution (labels drawn from softmax(z / scale))."""
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(n, k)) * 3.0
    labels = np.array([rng.choice(k, p=p) for p in softmax(z / scale, axis=1)])
    return z.astype(np.float32), labels.astype(np.int64), softmax(z.astype(np.float64) / scale, axis=1)


@pytest.fixture
def logits_file(tmp_path):
    val_logits, val_labels, _ = overconfident_logits(1500, 6, 0)
    test_logits, test_labels, test_posterior = overconfident_logits(1000, 6, 1)
    path = tmp_path / "logits.npz"
    np.savez(path, val_logits=val_logits, val_labels=val_labels, test_logits=test_logits, test_labels=test_labels,
             test_posterior=test_posterior)
    return path, test_logits, test_labels, test_posterior


METHODS = {
    "raw": {"build": {"name": "identity"}},
    "ts_nll": {"build": {"name": "temperature_scaling", "objective": "nll"}},
    "ts_focal_psi": {
        "build": {"name": "psi", "gamma": 2.0},
        "after": {"name": "temperature_scaling", "objective": "focal", "gamma": 2.0},
    },
}


def run_calibration(tmp_path, logits_path, methods=METHODS, bins=(10, 15)):
    calibrate_run(logits_path, methods, list(bins), tmp_path / "calibration.json", tmp_path / "metrics.csv")
    params = json.loads((tmp_path / "calibration.json").read_text())
    metrics = pd.read_csv(tmp_path / "metrics.csv")
    return params, metrics


def value(metrics, method, metric, bins=None):
    rows = metrics[(metrics.calibrator == method) & (metrics.metric == metric)]
    rows = rows[rows.bins.isna()] if bins is None else rows[rows.bins == bins]
    assert len(rows) == 1, (method, metric, bins)
    return float(rows.value.iloc[0])


def test_uncalibrated_metrics_agree_with_torchmetrics(tmp_path, logits_file):
    from torchmetrics.functional.classification import multiclass_calibration_error

    path, test_logits, test_labels, _ = logits_file
    _, metrics = run_calibration(tmp_path, path)
    probs = torch.from_numpy(softmax(test_logits.astype(np.float64), axis=1))
    labels = torch.from_numpy(test_labels)
    for bins in (10, 15):
        expected = multiclass_calibration_error(probs, labels, num_classes=6, n_bins=bins, norm="l1")
        assert value(metrics, "raw", "ece", bins) == pytest.approx(float(expected), abs=1e-6)  # torchmetrics bins in float32
        expected_mce = multiclass_calibration_error(probs, labels, num_classes=6, n_bins=bins, norm="max")
        assert value(metrics, "raw", "mce", bins) == pytest.approx(float(expected_mce), abs=1e-6)
    expected_nll = -np.mean(log_softmax(test_logits.astype(np.float64), axis=1)[np.arange(len(test_labels)), test_labels])
    assert value(metrics, "raw", "nll") == pytest.approx(expected_nll, rel=1e-9)
    top1 = np.argmax(test_logits, axis=1)
    assert value(metrics, "raw", "error") == pytest.approx(np.mean(top1 != test_labels))
    top5 = np.argsort(-test_logits, axis=1)[:, :5]
    assert value(metrics, "raw", "top5_error") == pytest.approx(np.mean(~(top5 == test_labels[:, None]).any(axis=1)))


def test_kl_to_the_known_posterior(tmp_path, logits_file):
    path, test_logits, _, posterior = logits_file
    _, metrics = run_calibration(tmp_path, path)
    q = softmax(test_logits.astype(np.float64), axis=1)
    expected = np.mean(np.sum(posterior * (np.log(posterior) - np.log(q)), axis=1))
    assert value(metrics, "raw", "kl_posterior") == pytest.approx(expected, rel=1e-9)
    # temperature scaling by NLL moves the overconfident model toward the posterior
    assert value(metrics, "ts_nll", "kl_posterior") < value(metrics, "raw", "kl_posterior")
    assert value(metrics, "ts_nll", "temperature") > 1.5


def test_chained_method_is_psi_of_the_temperature_scaled_logits(tmp_path, logits_file):
    path, test_logits, test_labels, _ = logits_file
    params, metrics = run_calibration(tmp_path, path)
    temperature = params["ts_focal_psi"]["after"]["fitted"]["temperature_"]
    assert value(metrics, "ts_focal_psi", "temperature") == pytest.approx(temperature)
    probs = psi_from_logits(test_logits.astype(np.float64) / temperature, 2.0)
    expected_nll = -np.mean(np.log(probs[np.arange(len(test_labels)), test_labels]))
    assert value(metrics, "ts_focal_psi", "nll") == pytest.approx(expected_nll, rel=1e-9)
    assert value(metrics, "ts_focal_psi", "gamma") == 2.0


def test_stored_parameters_rebuild_the_fitted_calibrator(tmp_path, logits_file):
    path, test_logits, test_labels, _ = logits_file
    params, metrics = run_calibration(tmp_path, path)
    rebuilt = Calibrator.from_dict(params["ts_nll"]["fitted"])
    probs = rebuilt.transform(test_logits)
    expected_nll = -np.mean(np.log(probs[np.arange(len(test_labels)), test_labels]))
    assert value(metrics, "ts_nll", "nll") == pytest.approx(expected_nll, rel=1e-12)
    assert params["ts_nll"]["spec"] == METHODS["ts_nll"]


def test_no_posterior_no_kl_and_few_classes_no_top5(tmp_path):
    logits, labels, _ = overconfident_logits(400, 3, 2)
    path = tmp_path / "logits.npz"
    np.savez(path, val_logits=logits, val_labels=labels, test_logits=logits, test_labels=labels)
    _, metrics = run_calibration(tmp_path, path, {"raw": METHODS["raw"]}, bins=(15,))
    assert set(metrics.metric) == {"error", "nll", "brier", "confidence_gap", "s99_share", "s99_accuracy", "ece", "adaece", "mce", "classwise_ece"}


def test_missing_arrays_are_named(tmp_path):
    path = tmp_path / "logits.npz"
    np.savez(path, val_logits=np.zeros((2, 2), np.float32), val_labels=np.zeros(2, np.int64))
    with pytest.raises(ValueError, match=r"lacks \['test_labels', 'test_logits'\]"):
        run_calibration(tmp_path, path)


def test_study_table_keeps_the_studys_methods_and_bins(tmp_path, logits_file):
    config = validate_config(__import__("yaml").safe_load((ROOT / "config" / "test.yaml").read_text()), SCHEMA)
    plan = build_plan(config)
    path = logits_file[0]
    for run in plan.runs.values():
        out = tmp_path / run.calibration_dir
        out.mkdir(parents=True)
        methods = {"uncalibrated": {"build": {"name": "identity"}}, "ts_nll": METHODS["ts_nll"]}
        calibrate_run(path, methods, [10, 15], out / "calibration.json", out / "metrics.csv")
        info = tmp_path / run.run_dir / "run.json"  # the run's health (tests/test_run_health.py)
        info.parent.mkdir(parents=True)
        info.write_text(json.dumps({"health": {"status": "trained", "reason": "", "measures": {}}}))
    table = study_table(plan, "test_digits", tmp_path)
    assert list(table.columns) == ["study", "paper", "mirrors", "dataset", "model", "loss", "recipe", "seed",
                                   "status", "calibrator", "metric", "bins", "value"]
    assert set(table.loss) == {"ce", "focal1"} and set(table.calibrator) == {"uncalibrated", "ts_nll"}
    assert set(table.bins.dropna()) == {15}  # the study reports 15 bins; 10 was computed for another study
    # 3 runs (ce and focal1 on tiny, ce on the collapsing tiny_lr100), each: 8 unbinned metrics (6 classes: top-5
    # error; posterior: KL) + 4 binned x 1 bin, + the fitted temperature
    assert set(zip(table.loss, table.recipe)) == {("ce", "tiny"), ("focal1", "tiny"), ("ce", "tiny_lr100")}
    assert len(table) == 3 * (12 + 13)
    with pytest.raises(ValueError, match=r"lacks calibrator\(s\) \['psi'\]"):
        study_table(plan, "test_posterior", tmp_path)


TORCH_FREE_METHODS = {
    **METHODS,
    "ts_ece": {"build": {"name": "temperature_scaling", "objective": "ece", "temperatures": "mukhoti", "n_bins": 15}},
    "psi": {"build": {"name": "psi", "gamma": 3.0}},
    "histogram": {"build": {"name": "histogram_binning"}},
    "isotonic": {"build": {"name": "isotonic"}},
}


@pytest.mark.parametrize(
    ("methods", "imports_torch"),
    [(TORCH_FREE_METHODS, False),
     ({"fts": {"build": {"name": "focal_temperature_scaling", "gammas": [0.0, 1.0], "temperatures": [0.5, 1.0, 2.0]}}},
      False),
     ({"vector": {"build": {"name": "vector_scaling"}}}, False),
     ({"matrix": {"build": {"name": "matrix_scaling"}}}, False)],
    ids=["numpy_calibrators", "focal_ts", "vector_scaling", "matrix_scaling"],
)
def test_a_calibration_job_imports_torch_only_for_calibrators_fitted_with_it(tmp_path, logits_file, methods,
                                                                             imports_torch):
    """A calibrate job pays torch's import (~2 s of CPU, as much as its work) only when one of
    its calibrators is fitted with torch: none is (focal TS's grid by its C kernel, built for the
    suite; vector and matrix scaling in numpy and scipy)."""
    import subprocess
    import sys

    code = ("import json, sys; from focalcal.pipeline.calibrate import calibrate_run; "
            f"calibrate_run({str(logits_file[0])!r}, json.loads(sys.argv[1]), [15], {str(tmp_path / 'c.json')!r}, "
            f"{str(tmp_path / 'm.csv')!r}); print('torch' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code, json.dumps(methods)], capture_output=True, text=True,
                            check=True, timeout=120)
    assert result.stdout.strip() == str(imports_torch)
    assert set(pd.read_csv(tmp_path / "m.csv").calibrator) == set(methods)
