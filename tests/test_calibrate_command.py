"""`focalcal calibrate LOGITS`: a model's own logits in, the comparison table with bootstrap
intervals, fitted calibrators, reliability diagrams and one self-contained page out."""

from __future__ import annotations

import csv
import json
import re
import subprocess
import sys

import numpy as np
import pytest
from scipy.special import softmax
from test_report_browser import ensure_chromium

from focalcal import metrics
from focalcal.calibration import Calibrator
from focalcal.commands.calibrator_choice import DEFAULT_CALIBRATORS, resolve_calibrators
from focalcal.report.browser import inspect_page

CHOSEN = ["raw", "ts_nll", "fts_ece", "psi", "histogram_binning", "dirichlet", "fts_nll", "ets"]  # fts: a second process


def read_rows(path) -> list[dict]:
    with open(path) as handle:
        return list(csv.DictReader(handle))


def model_logits(n, k=6, seed=0):
    """An overconfident model: labels drawn from softmax(z / 2), logits z."""
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=(n, k)) * 3
    labels = (rng.uniform(size=(n, 1)) > softmax(logits / 2, axis=1).cumsum(axis=1)).sum(axis=1)
    return logits.astype(np.float32), labels


def run_command(*args, cwd):
    return subprocess.run([sys.executable, "-m", "focalcal", "calibrate", *map(str, args)], capture_output=True,
                          text=True, cwd=cwd, timeout=600, check=False)


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    folder = tmp_path_factory.mktemp("own")
    (val_logits, val_labels), (test_logits, test_labels) = model_logits(600), model_logits(800, seed=1)
    np.savez(folder / "model.npz", val_logits=val_logits, val_labels=val_labels, test_logits=test_logits,
             test_labels=test_labels, class_names=np.array([f"c{k}" for k in range(6)]))
    result = run_command(folder / "model.npz", "--calibrators", ",".join(CHOSEN), "--gamma", 1, "--out",
                         folder / "out", "--resamples", 100, cwd=folder)
    assert result.returncode == 0, result.stderr
    return folder, result.stdout, (test_logits, test_labels), result.stderr


def test_every_file_is_written_with_a_progress_line_per_calibrator(report):
    folder, stdout, _, _ = report
    out = folder / "out"
    written = sorted(p.name for p in out.iterdir() if p.suffix != ".sha256")  # each file has its checksum sidecar
    assert written == ["calibration.json", "index.html", "metrics.csv", "reliability"]
    diagrams = sorted(p.name for p in (out / "reliability").iterdir() if p.suffix != ".sha256")
    assert diagrams == sorted(f"{key}.svg" for key in CHOSEN)
    # a line per calibrator as it finishes, in whichever process; the files keep the order asked for
    counted = re.findall(r"^\[(\d+)/(\d+)\] (\w+): fitted in", stdout, flags=re.MULTILINE)
    assert [(int(done), int(total)) for done, total, _ in counted] == [(i, len(CHOSEN)) for i in range(1, len(CHOSEN) + 1)]
    assert sorted(key for _, _, key in counted) == sorted(CHOSEN)
    assert list(dict.fromkeys(row["calibrator"] for row in read_rows(out / "metrics.csv"))) == CHOSEN


def test_the_command_writes_nothing_to_stderr(report):
    """No torch "No CUDA runtime is found" warning (the fused kernels are CPU-only and no GPU is
    asked for), no kernel build, no other warning: stderr is for errors."""
    _, stdout, _, stderr = report
    assert "CUDA" not in stderr and stderr == ""
    assert "compiling" not in stdout


def test_probabilities_are_refused_as_logits_and_match_their_logs_when_declared(tmp_path):
    (val_logits, val_labels), (test_logits, test_labels) = model_logits(300), model_logits(400, seed=1)
    val_probs, test_probs = softmax(val_logits.astype(np.float64), axis=1), softmax(test_logits.astype(np.float64), axis=1)
    np.savez(tmp_path / "probs.npz", val_logits=val_probs, val_labels=val_labels, test_logits=test_probs,
             test_labels=test_labels)
    np.savez(tmp_path / "logs.npz", val_logits=np.log(val_probs), val_labels=val_labels,
             test_logits=np.log(test_probs), test_labels=test_labels)
    options = ["--calibrators", "raw,ts_nll,histogram_binning", "--no-smooth", "--resamples", 20]
    refused = run_command(tmp_path / "probs.npz", *options, "--out", tmp_path / "refused", cwd=tmp_path)
    assert refused.returncode == 2
    assert "probs.npz [val_logits]: looks like probabilities, not logits" in refused.stderr
    assert "--inputs probabilities" in refused.stderr and not (tmp_path / "refused").exists()
    declared = run_command(tmp_path / "probs.npz", *options, "--inputs", "probabilities", "--out", tmp_path / "p",
                           cwd=tmp_path)
    assert declared.returncode == 0, declared.stderr
    as_logits = run_command(tmp_path / "logs.npz", *options, "--out", tmp_path / "l", cwd=tmp_path)
    assert as_logits.returncode == 0, as_logits.stderr
    assert read_rows(tmp_path / "p" / "metrics.csv") == read_rows(tmp_path / "l" / "metrics.csv")
    raw_ece = next(float(row["value"]) for row in read_rows(tmp_path / "p" / "metrics.csv")
                   if row["calibrator"] == "raw" and row["metric"] == "ece")
    assert raw_ece == pytest.approx(metrics.ece(test_probs, test_labels, n_bins=15), abs=1e-12)


def test_focal_ts_fitted_in_the_second_process_is_the_one_fitted_here(report):
    from focalcal.pipeline.calibrate import fit_calibrator

    folder, _, _, _ = report
    stored = json.loads((folder / "out" / "calibration.json").read_text())
    with np.load(folder / "model.npz") as arrays:
        val_logits, val_labels = arrays["val_logits"], arrays["val_labels"]
    for key in ("fts_ece", "fts_nll"):
        here, _ = fit_calibrator(stored[key]["spec"], val_logits, val_labels, {})
        assert stored[key]["fitted"] == json.loads(json.dumps(here.to_dict())), key


def test_metrics_are_the_library_metrics_with_intervals_around_them(report):
    folder, _, (test_logits, test_labels), _ = report
    rows = read_rows(folder / "out" / "metrics.csv")
    value = {(r["calibrator"], r["metric"]): r for r in rows}
    raw_probs = softmax(test_logits.astype(np.float64), axis=1)
    assert float(value["raw", "ece"]["value"]) == pytest.approx(metrics.ece(raw_probs, test_labels, 15), rel=1e-12)
    assert float(value["raw", "nll"]["value"]) == pytest.approx(metrics.nll(raw_probs, test_labels), rel=1e-12)
    assert float(value["raw", "smooth_ece"]["value"]) == pytest.approx(metrics.smooth_ece(raw_probs, test_labels))
    for key in CHOSEN:
        for metric in ("ece", "adaece", "mce", "classwise_ece", "nll", "brier", "error", "top5_error"):
            row = value[key, metric]
            assert float(row["ci_low"]) <= float(row["ci_high"]), (key, metric)
    # temperature scaling fixes this overconfident model: its whole interval lies below raw's
    assert float(value["ts_nll", "ece"]["ci_high"]) < float(value["raw", "ece"]["ci_low"])


def test_stored_calibrators_rebuild_the_measured_probabilities(report):
    folder, _, (test_logits, test_labels), _ = report
    stored = json.loads((folder / "out" / "calibration.json").read_text())
    assert set(stored) == set(CHOSEN) and stored["psi"]["spec"]["build"] == {"name": "psi", "gamma": 1.0}
    rows = {(r["calibrator"], r["metric"]): float(r["value"]) for r in read_rows(folder / "out" /
                                                                                          "metrics.csv")}
    for key in CHOSEN:
        probs = Calibrator.from_dict(stored[key]["fitted"]).transform(test_logits)
        assert rows[key, "brier"] == pytest.approx(metrics.brier(probs, test_labels), rel=1e-12), key


def test_the_page_opens_in_chromium_with_every_diagram_drawn(report):
    folder, _, _, _ = report
    chromium = ensure_chromium()
    page = inspect_page(folder / "out" / "index.html", chromium)
    assert page["errors"] == []
    assert len(page["svgs"]) == len(CHOSEN)  # every diagram inlined, drawn at its page width with its labels
    assert all(svg["width"] > 200 and svg["height"] > 200 and svg["texts"] > 20 for svg in page["svgs"])
    text = (folder / "out" / "index.html").read_text()
    assert "src=\"reliability/" not in text  # inlined: the page stands alone
    assert "Dirichlet (ODIR)" in text and "95 % percentile bootstrap interval" in text


def test_bad_input_fails_before_anything_is_written(tmp_path):
    (val_logits, val_labels), (test_logits, test_labels) = model_logits(50), model_logits(50, seed=1)
    val_logits[3, 2] = np.nan
    np.savez(tmp_path / "bad.npz", val_logits=val_logits, val_labels=val_labels, test_logits=test_logits,
             test_labels=test_labels)
    result = run_command(tmp_path / "bad.npz", "--out", tmp_path / "out", cwd=tmp_path)
    assert result.returncode == 2
    assert "bad.npz [val_logits]: 1 non-finite value(s); the first is NaN at row 3, column 2" in result.stderr
    assert not (tmp_path / "out").exists()
    result = run_command(tmp_path / "bad.npz", "--calibrators", "raw,platt", cwd=tmp_path)
    assert result.returncode == 2 and "unknown calibrator(s) ['platt']; available: raw, psi, ts_nll" in result.stderr


def test_calibrator_choice():
    assert list(resolve_calibrators()) == [key for key in DEFAULT_CALIBRATORS if key != "psi"]
    assert list(resolve_calibrators(gamma=2.0)) == list(DEFAULT_CALIBRATORS)
    with pytest.raises(ValueError, match="psi needs the model's training focal γ"):
        resolve_calibrators(["raw", "psi"])
    with pytest.raises(ValueError, match=r"focalcal calibrate: gamma must be a real number in \[0, inf\) or None, "
                                         r"got -1.0"):
        resolve_calibrators(gamma=-1.0)


def test_beta_calibration_takes_binary_logits_and_refuses_more_classes_before_writing(tmp_path):
    from focalcal.commands.calibrate_command import compare_calibrators
    from focalcal.logits_file import check_logits

    (val_logits, val_labels), (test_logits, test_labels) = model_logits(400, k=2), model_logits(400, k=2, seed=1)
    binary = check_logits({"val_logits": val_logits, "val_labels": val_labels, "test_logits": test_logits,
                           "test_labels": test_labels}, source="binary.npz")
    rows = compare_calibrators(binary, tmp_path / "binary", ["raw", "beta"], n_resamples=20, smooth=False,
                               progress=lambda line: None)
    ece = {row["calibrator"]: row["value"] for row in rows if row["metric"] == "ece"}
    assert ece["beta"] < ece["raw"]  # the model is overconfident (labels from softmax(z / 2))
    (val_logits, val_labels), (test_logits, test_labels) = model_logits(60), model_logits(60, seed=1)
    six = check_logits({"val_logits": val_logits, "val_labels": val_labels, "test_logits": test_logits,
                        "test_labels": test_labels}, source="six.npz")
    with pytest.raises(ValueError, match="calibrator beta is for binary classifiers; six.npz has 6 classes"):
        compare_calibrators(six, tmp_path / "six", ["raw", "beta"], progress=lambda line: None)
    assert not (tmp_path / "six").exists()


def test_an_interrupted_comparison_leaves_no_second_process(tmp_path):
    """The grid's process is stopped, not waited for, when the comparison fails or is interrupted."""
    import multiprocessing

    from focalcal.commands.calibrate_command import compare_calibrators
    from focalcal.logits_file import check_logits

    (val_logits, val_labels), (test_logits, test_labels) = model_logits(300), model_logits(300, seed=1)
    arrays = check_logits({"val_logits": val_logits, "val_labels": val_labels, "test_logits": test_logits,
                           "test_labels": test_labels}, source="model.npz")

    def interrupt(line):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        compare_calibrators(arrays, tmp_path / "out", ["raw", "fts_ece"], n_resamples=10, smooth=False,
                            progress=interrupt)
    assert multiprocessing.active_children() == []
    assert not (tmp_path / "out" / "index.html").exists()
