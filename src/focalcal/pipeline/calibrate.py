"""Fit every calibrator of one run on its validation logits; measure each on the test logits.

Input is the run's ``logits.npz`` only (val/test logits and labels, and the known class
posterior where the dataset has one), so calibration never touches the model. Output:

* ``calibration.json`` — per calibrator key, its build dict and fitted parameters
  (``Calibrator.to_dict``), enough to rebuild it without refitting; and, under
  :data:`LOGITS_SHA256`, the sha256 of the ``logits.npz`` it was fitted on (``focalcal verify``
  names a calibration fitted on other logits);
* ``metrics.csv`` — tidy rows ``calibrator, metric, bins, value`` on the test split. The
  uncalibrated model is the calibrator ``identity``.

A calibrator with ``after`` is applied to the logits divided by that temperature scaling's
fitted temperature (charoenphakdee2021's TS_FL + Ψ^γ); the scaling is fitted once per run.
"""

from __future__ import annotations

import csv
import io
import json
import math

import numpy as np

from focalcal.files import sidecar
from focalcal.files.artefacts import CorruptArtefactError, atomic_write_text, load_npz

METRICS_HEADER = ("calibrator", "metric", "bins", "value")
# calibration.json's key for the logits' sha256: a calibrator key starts with a letter or digit
# (the config schema's key pattern), so "_" keeps the two apart.
LOGITS_SHA256 = "_logits_sha256"


def calibrate_run(logits_path, calibrators: dict[str, dict], ece_bins, params_path, metrics_path) -> list[dict]:
    """Fit ``calibrators`` (key -> resolved spec from the plan) and write params JSON and metrics CSV."""
    arrays = _load_logits(logits_path)
    logits_sha256 = sidecar.digest_file(logits_path).sha256
    fitted_scalings: dict[str, object] = {}
    params: dict[str, dict] = {}
    rows: list[dict] = []
    for key, spec in calibrators.items():
        calibrator, scaling = fit_calibrator(spec, arrays["val_logits"], arrays["val_labels"], fitted_scalings)
        test_logits = arrays["test_logits"] if scaling is None else arrays["test_logits"] / scaling.temperature_
        probs = calibrator.transform(test_logits)
        params[key] = {
            "spec": spec,
            "fitted": calibrator.to_dict(),
            **({"after": scaling.to_dict()} if scaling is not None else {}),
        }
        for metric, bins, value in test_metrics(probs, arrays["test_labels"], ece_bins, arrays.get("test_posterior")):
            rows.append({"calibrator": key, "metric": metric, "bins": bins, "value": float(value)})
        for metric, value in fitted_scalars(calibrator, scaling):
            rows.append({"calibrator": key, "metric": metric, "bins": "", "value": float(value)})
    params[LOGITS_SHA256] = logits_sha256
    atomic_write_text(json.dumps(params, indent=1, sort_keys=True) + "\n", params_path)
    atomic_write_text(rows_to_csv(rows), metrics_path)
    return rows


def fit_calibrator(spec: dict, val_logits: np.ndarray, val_labels: np.ndarray, fitted_scalings: dict):
    """The fitted calibrator of ``spec`` and, for a chained calibrator, the fitted temperature scaling."""
    from focalcal import calibration

    scaling = None
    logits = val_logits
    if "after" in spec:
        cache_key = json.dumps(spec["after"], sort_keys=True)
        if cache_key not in fitted_scalings:
            fitted_scalings[cache_key] = calibration.build(dict(spec["after"])).fit(val_logits, val_labels)
        scaling = fitted_scalings[cache_key]
        logits = val_logits / scaling.temperature_
    calibrator = calibration.build(dict(spec["build"])).fit(logits, val_labels)
    return calibrator, scaling


def test_metrics(probs: np.ndarray, labels: np.ndarray, ece_bins, posterior=None) -> list[tuple[str, object, float]]:
    """(metric, bins, value) rows: the papers' metrics of calibrated test probabilities."""
    from focalcal import metrics

    rows: list[tuple[str, object, float]] = [
        ("error", "", metrics.error(probs, labels)),
        ("nll", "", metrics.nll(probs, labels)),
        ("brier", "", metrics.brier(probs, labels)),
        ("confidence_gap", "", metrics.confidence_gap(probs, labels)),
    ]
    if probs.shape[1] >= 5:
        rows.append(("top5_error", "", metrics.top_k_error(probs, labels, k=5)))
    share, accuracy = metrics.s99(probs, labels)
    rows += [("s99_share", "", share), ("s99_accuracy", "", accuracy)]
    if posterior is not None:
        rows.append(("kl_posterior", "", metrics.kl_divergence(posterior, probs)))
    for bins in ece_bins:
        rows += [
            ("ece", bins, metrics.ece(probs, labels, n_bins=bins, binning="width")),
            ("adaece", bins, metrics.ece(probs, labels, n_bins=bins, binning="mass")),
            ("mce", bins, metrics.mce(probs, labels, n_bins=bins, binning="width")),
            ("classwise_ece", bins, metrics.classwise_ece(probs, labels, n_bins=bins, binning="width")),
        ]
    return rows


def fitted_scalars(calibrator, scaling=None) -> list[tuple[str, float]]:
    """The fitted temperature and focal gamma of a calibrator, as metric rows (papers print them)."""
    rows = []
    temperature = getattr(scaling if scaling is not None else calibrator, "temperature_", None)
    if temperature is not None:
        rows.append(("temperature", float(temperature)))
    gamma = getattr(calibrator, "gamma_", None)
    if gamma is None and getattr(calibrator, "name", "") == "psi":
        gamma = calibrator.gamma
    if gamma is not None:
        rows.append(("gamma", float(gamma)))
    return rows


def _load_logits(path) -> dict[str, np.ndarray]:
    arrays = load_npz(path)
    missing = {"val_logits", "val_labels", "test_logits", "test_labels"} - set(arrays)
    if missing:
        raise CorruptArtefactError(path, f"it lacks {sorted(missing)}")
    return arrays


def rows_to_csv(rows: list[dict], header=METRICS_HEADER) -> str:
    """Tidy CSV of metric rows: floats as their shortest exact repr ("nan" for NaN), the rest as given."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=header, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({key: _format(value) for key, value in row.items()})
    return buffer.getvalue()


def _format(value):
    if isinstance(value, (float, np.floating)):
        return "nan" if math.isnan(value) else repr(float(value))
    return value
