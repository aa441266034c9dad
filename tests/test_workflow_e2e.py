"""The workflow run for real on config/test.yaml: tables, partial re-runs, resume, conflicts."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
TEST_CONFIG = ROOT / "config" / "test.yaml"
BIN = Path(sys.executable).parent
RUN = "results/runs/digits/cnn_small/ce/tiny/seed0"


def snakemake_command(workdir: Path, *args: str) -> list[str]:
    return [str(BIN / "snakemake"), "-s", str(ROOT / "Snakefile"), "--directory", str(workdir), *args]


def snakemake(workdir: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    env = dict(os.environ, OMP_NUM_THREADS="1")
    result = subprocess.run(snakemake_command(workdir, *args), capture_output=True, text=True, timeout=600, env=env)
    if check and result.returncode != 0:
        raise AssertionError(f"snakemake {' '.join(args)} failed:\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}")
    return result


def planned_rules(result: subprocess.CompletedProcess) -> dict[str, int]:
    text = result.stdout + result.stderr
    if "Job stats:" not in text:
        return {}
    counts = {}
    for line in text[text.index("Job stats:") :].splitlines()[3:]:
        match = re.fullmatch(r"(\w+)\s+(\d+)", line.strip())
        if not match:
            break
        counts[match.group(1)] = int(match.group(2))
    return counts


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Path:
    """A working directory in which config/test.yaml ran to the end."""
    workdir = tmp_path_factory.mktemp("workflow")
    snakemake(workdir, "--cores", "2", "--configfile", str(TEST_CONFIG))
    return workdir


def test_tables_hold_one_row_per_run_method_metric(finished):
    posterior = pd.read_csv(finished / "results/tables/test_posterior.csv")
    digits = pd.read_csv(finished / "results/tables/test_digits.csv")
    # synthetic1d (3 classes, known posterior): error, nll, brier, s99 x2, KL + 4 binned metrics at 10 bins = 10
    # per method, + the fitted temperature (ts_nll) or gamma (psi); 2 runs x 3 methods
    assert len(posterior) == 2 * (10 + 11 + 11)
    assert set(posterior.method) == {"uncalibrated", "ts_nll", "psi"}
    assert set(posterior.loss) == {"ce", "focal3"} and set(posterior.bins.dropna()) == {10}
    # digits (10 classes): error, nll, brier, top-5 error, s99 x2 + 4 binned at 15 bins, + temperature for ts_nll
    assert len(digits) == 2 * (10 + 11)
    assert set(digits.bins.dropna()) == {15}
    assert (digits.study == "test_digits").all() and (digits.paper == "mukhoti2020").all()
    for column in ("dataset", "arch", "loss", "recipe", "seed", "method", "metric"):
        assert digits[column].notna().all()
    # every value is a number; only S99 accuracy is NaN, when no prediction reaches 0.99 confidence
    assert digits[digits.metric != "s99_accuracy"].value.notna().all()
    # calibration changes nothing about the decisions of temperature scaling
    errors = digits[digits.metric == "error"].pivot(index="loss", columns="method", values="value")
    np.testing.assert_array_equal(errors["uncalibrated"], errors["ts_nll"])
    # Ψ^γ on the focal-loss run is measured against the known posterior
    kl = posterior[(posterior.metric == "kl_posterior")].set_index(["loss", "method"]).value
    assert np.isfinite(kl).all()


def test_every_job_left_a_log_and_a_benchmark(finished):
    for stage in ("prepare_data", "train", "export_logits", "calibrate", "study_table"):
        assert list((finished / "results/logs" / stage).rglob("*.log")), stage
        assert list((finished / "results/benchmarks" / stage).rglob("*.tsv")), stage
    run_dir = finished / RUN
    assert {p.name for p in run_dir.iterdir()} >= {"run_config.json", "history.csv", "checkpoint.pt", "logits.npz", "run.json"}
    assert len(pd.read_csv(run_dir / "history.csv")) == 3


def test_deleted_logits_are_re_dumped_without_retraining(finished):
    run_dir = finished / RUN
    before = dict(np.load(run_dir / "logits.npz"))
    stamps = {name: (run_dir / name).stat().st_mtime_ns for name in ("checkpoint.pt", "history.csv")}
    (run_dir / "logits.npz").unlink()
    plan = planned_rules(snakemake(finished, "-n", "--configfile", str(TEST_CONFIG)))
    # the logits are re-dumped from the checkpoint and everything downstream of them refreshed;
    # nothing is retrained
    assert "train" not in plan and "prepare_data" not in plan
    assert plan["export_logits"] == 1 and plan["calibrate"] == 1 and plan["study_table"] == 1
    snakemake(finished, "--cores", "2", "--configfile", str(TEST_CONFIG))
    after = dict(np.load(run_dir / "logits.npz"))
    assert before.keys() == after.keys()
    for key in before:
        np.testing.assert_array_equal(before[key], after[key])  # same checkpoint, same logits
    assert stamps == {name: (run_dir / name).stat().st_mtime_ns for name in stamps}


def test_one_table_is_remade_alone(finished):
    table = finished / "results/tables/test_digits.csv"
    table.unlink()
    plan = planned_rules(snakemake(finished, "-n", "results/tables/test_digits.csv", "--configfile", str(TEST_CONFIG)))
    assert plan == {"study_table": 1, "total": 1}


def test_changed_recipe_under_an_old_key_fails_loudly(finished, tmp_path):
    config = yaml.safe_load(TEST_CONFIG.read_text())
    config["recipes"]["tiny"]["epochs"] = 4
    changed = tmp_path / "changed.yaml"
    changed.write_text(yaml.safe_dump(config))
    result = snakemake(finished, "-n", "--configfile", str(changed), check=False)
    output = result.stdout + result.stderr
    assert result.returncode != 0
    assert "RunConflictError" in output
    assert f"{RUN}: recipe.epochs = 3 on disk, 4 in this config" in output


def test_killed_training_resumes_from_its_checkpoint(tmp_path):
    epochs = 40
    config = yaml.safe_load(TEST_CONFIG.read_text())
    config["recipes"]["tiny"]["epochs"] = epochs
    config["studies"] = {"resume": {
        "paper": "mukhoti2020", "mirrors": "resume test",
        "grids": [{"datasets": ["digits"], "models": ["cnn_small"], "losses": ["ce"], "recipe": "tiny", "seeds": [0],
                   "calibrators": ["uncalibrated"]}],
    }}
    path = tmp_path / "resume.yaml"
    path.write_text(yaml.safe_dump(config))
    workdir = tmp_path / "work"
    workdir.mkdir()
    history = workdir / RUN / "history.csv"
    env = dict(os.environ, OMP_NUM_THREADS="1")
    process = subprocess.Popen(snakemake_command(workdir, "--cores", "1", "--configfile", str(path)),
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True, env=env)
    try:
        deadline = time.monotonic() + 240
        while not (history.exists() and len(history.read_text().splitlines()) >= 3):  # header + 2 epochs
            assert process.poll() is None, "the workflow ended before it could be killed"
            assert time.monotonic() < deadline, "training never wrote a checkpoint"
            time.sleep(0.2)
    finally:
        os.killpg(process.pid, signal.SIGKILL)  # snakemake and its training job, mid-run
        process.wait()
    done_before_kill = len(pd.read_csv(history))
    assert done_before_kill < epochs

    snakemake(workdir, "--unlock", "--configfile", str(path))
    snakemake(workdir, "--cores", "1", "--configfile", str(path))  # profiles/default: rerun-incomplete
    log = (workdir / "results/logs/train/digits/cnn_small/ce/tiny/seed0.log").read_text()
    resumed_after = int(re.search(rf"resuming after epoch (\d+)/{epochs}", log).group(1))
    assert resumed_after >= done_before_kill - 1
    assert f"epoch {resumed_after}/{epochs} " not in log  # nothing before the checkpoint was trained again
    assert list(pd.read_csv(workdir / RUN / "history.csv").epoch) == list(range(1, epochs + 1))
    assert (workdir / "results/tables/resume.csv").exists()
