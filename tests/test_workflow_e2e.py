"""The workflow run for real on config/test.yaml: tables, partial re-runs, resume, conflicts."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from conftest import ROOT, RUN, SNAKEFILE, TEST_CONFIG, one_run_config, planned_jobs, snakemake, snakemake_command


def test_tables_hold_one_row_per_run_method_metric(finished):
    posterior = pd.read_csv(finished / "results/tables/test_posterior.csv")
    digits = pd.read_csv(finished / "results/tables/test_digits.csv")
    # synthetic1d (3 classes, known posterior): error, nll, brier, confidence gap, s99 x2, KL + 4 binned metrics at
    # 10 bins = 11 per method, + the fitted temperature (ts_nll) or gamma (psi); 2 runs x 3 methods
    assert len(posterior) == 2 * (11 + 12 + 12)
    assert set(posterior.calibrator) == {"uncalibrated", "ts_nll", "psi"}
    assert set(posterior.loss) == {"ce", "focal3"} and set(posterior.bins.dropna()) == {10}
    # digits (10 classes): error, nll, brier, confidence gap, top-5 error, s99 x2 + 4 binned at 15 bins, + temperature
    # for ts_nll; 3 runs (ce and focal1 on tiny, ce on the collapsing tiny_lr100)
    assert len(digits) == 3 * (11 + 12)
    assert set(digits.bins.dropna()) == {15}
    assert (digits.study == "test_digits").all() and (digits.paper == "mukhoti2020").all()
    for column in ("dataset", "model", "loss", "recipe", "seed", "calibrator", "metric"):
        assert digits[column].notna().all()
    # every value is a number; only S99 accuracy is NaN, when no prediction reaches 0.99 confidence
    assert digits[digits.metric != "s99_accuracy"].value.notna().all()
    # calibration changes nothing about the decisions of temperature scaling
    errors = digits[digits.metric == "error"].pivot(index=["loss", "recipe"], columns="calibrator", values="value")
    np.testing.assert_array_equal(errors["uncalibrated"], errors["ts_nll"])
    # Ψ^γ on the focal-loss run is measured against the known posterior
    kl = posterior[(posterior.metric == "kl_posterior")].set_index(["loss", "calibrator"]).value
    assert np.isfinite(kl).all()


def test_every_job_left_a_log_and_a_benchmark(finished):
    for stage in ("prepare_data", "train", "export_logits", "calibrate", "study_table"):
        assert list((finished / "results/logs" / stage).rglob("*.log")), stage
        assert list((finished / "results/benchmarks" / stage).rglob("*.tsv")), stage
    run_dir = finished / RUN
    assert {p.name for p in run_dir.iterdir()} >= {"run_config.json", "history.csv", "checkpoint.pt", "logits.npz", "run.json"}
    assert len(pd.read_csv(run_dir / "history.csv")) == 15


def test_deleted_logits_are_re_dumped_without_retraining(finished_copy):
    run_dir = finished_copy / RUN
    before = dict(np.load(run_dir / "logits.npz"))
    stamps = {name: (run_dir / name).stat().st_mtime_ns for name in ("checkpoint.pt", "history.csv")}
    (run_dir / "logits.npz").unlink()
    plan = planned_jobs(snakemake(finished_copy, "-n", "--configfile", str(TEST_CONFIG)))
    # the logits are re-dumped from the checkpoint and everything downstream of them refreshed;
    # nothing is retrained
    assert "train" not in plan and "prepare_data" not in plan
    assert plan["export_logits"] == 1 and plan["calibrate"] == 1 and plan["study_table"] == 1
    # the logits and the study's table made: the export, its calibration and the table, no training
    ran = planned_jobs(snakemake(finished_copy, "--cores", "2", f"{RUN}/logits.npz", "results/tables/test_digits.csv",
                                 "--configfile", str(TEST_CONFIG)))
    assert "train" not in ran and ran["export_logits"] == 1 and ran["calibrate"] == 1 and ran["study_table"] == 1
    after = dict(np.load(run_dir / "logits.npz"))
    assert before.keys() == after.keys()
    for key, value in before.items():
        np.testing.assert_array_equal(value, after[key])  # same checkpoint, same logits
    assert stamps == {name: (run_dir / name).stat().st_mtime_ns for name in stamps}


def test_one_table_is_remade_alone(finished_copy):
    table = finished_copy / "results/tables/test_digits.csv"
    table.unlink()
    plan = planned_jobs(snakemake(finished_copy, "-n", "results/tables/test_digits.csv",
                                  "--configfile", str(TEST_CONFIG)))
    assert plan == {"study_table": 1, "total": 1}


def test_changed_recipe_under_an_old_key_fails_loudly(finished_copy, tmp_path):
    config = yaml.safe_load(TEST_CONFIG.read_text())
    config["recipes"]["tiny"]["epochs"] = 16
    changed = tmp_path / "changed.yaml"
    changed.write_text(yaml.safe_dump(config))
    result = snakemake(finished_copy, "-n", "--configfile", str(changed), check=False)
    output = result.stdout + result.stderr
    assert result.returncode != 0
    assert "RunConflictError" in output
    assert f"{RUN}: recipe.epochs = 15 on disk, 16 in this config" in output


def _live_members(group: int) -> list[int]:
    """PIDs of the process group's members that are alive (not zombies)."""
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == group and fields[0] != "Z":
            members.append(int(stat.parent.name))
    return members


def test_killed_training_resumes_from_its_checkpoint(tmp_path):
    epochs = 40
    path = one_run_config(tmp_path / "resume.yaml", "resume", epochs)
    workdir = tmp_path / "work"
    workdir.mkdir()
    history = workdir / RUN / "history.csv"
    env = dict(os.environ, OMP_NUM_THREADS="1")
    # the study's table, not rule all: what resuming decides is the run's, not the report's (no figures, no notebooks)
    table = "results/tables/resume.csv"
    process = subprocess.Popen(snakemake_command(workdir, table, "--cores", "1", "--configfile", str(path)),
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True, env=env)
    try:
        deadline = time.monotonic() + 240
        while not (history.exists() and len(history.read_text().splitlines()) >= 3):  # header + 2 epochs
            assert process.poll() is None, "the workflow ended before it could be killed"
            assert time.monotonic() < deadline, "training never wrote a checkpoint"
            time.sleep(0.2)
        os.kill(process.pid, signal.SIGKILL)  # Snakemake alone, mid-run: its training job must stop by itself
        process.wait()
        deadline = time.monotonic() + 20
        while _live_members(process.pid):
            assert time.monotonic() < deadline, f"the training job outlived its Snakemake: {_live_members(process.pid)}"
            time.sleep(0.1)
    finally:
        if _live_members(process.pid):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    done_before_kill = len(pd.read_csv(history))
    assert done_before_kill < epochs

    snakemake(workdir, "--unlock", "--configfile", str(path))
    snakemake(workdir, table, "--cores", "1", "--configfile", str(path))  # profiles/default: rerun-incomplete
    log = (workdir / "results/logs/train/digits/cnn_small/ce/tiny/seed0.log").read_text()
    resumed_after = int(re.search(rf"resuming after epoch (\d+)/{epochs}", log).group(1))
    assert resumed_after >= done_before_kill - 1
    assert f"epoch {resumed_after}/{epochs} " not in log  # nothing before the checkpoint was trained again
    assert list(pd.read_csv(workdir / RUN / "history.csv").epoch) == list(range(1, epochs + 1))
    assert (workdir / table).exists()


# ------------------------------------------------------------------ a finished run survives any re-run
RUN_OUTPUTS = ("run_config.json", "history.csv")


def _run_state(workdir: Path) -> dict:
    run_dir = workdir / RUN
    return {"history": (run_dir / "history.csv").read_text(),
            "identity": {k: v for k, v in json.loads((run_dir / "run_config.json").read_text()).items()
                         if k not in ("device", "compile")},
            "checkpoint": (run_dir / "checkpoint.pt").stat().st_mtime_ns}


def _assert_rewritten_not_retrained(workdir: Path, before: dict) -> None:
    assert _run_state(workdir) == before  # same records back, checkpoint untouched
    log = (workdir / "results/logs/train/digits/cnn_small/ce/tiny/seed0.log").read_text()
    assert "already trained (15 epochs); records re-written from the checkpoint" in log
    assert "epoch 1/15" not in log


@pytest.mark.parametrize("setting", ["device: auto", "compile: cudagraphs"])
def test_execution_settings_do_not_replan_finished_runs(finished_copy, tmp_path, setting):
    changed = tmp_path / "changed.yaml"
    changed.write_text(re.sub(r"^device: cpu$", setting, TEST_CONFIG.read_text(), flags=re.MULTILINE))
    assert setting in changed.read_text()
    result = snakemake(finished_copy, "-n", f"{RUN}/history.csv", f"{RUN}/logits.npz", "--configfile", str(changed))
    assert planned_jobs(result) == {}, result.stdout


def test_forced_training_of_a_finished_run_rewrites_its_outputs(finished_copy):
    before = _run_state(finished_copy)
    snakemake(finished_copy, "--cores", "1", "-f", f"{RUN}/history.csv", "--configfile", str(TEST_CONFIG))
    _assert_rewritten_not_retrained(finished_copy, before)
    # and again: the job is idempotent
    snakemake(finished_copy, "--cores", "1", "-f", f"{RUN}/history.csv", "--configfile", str(TEST_CONFIG))
    _assert_rewritten_not_retrained(finished_copy, before)


def test_changed_training_code_reruns_a_finished_run_without_retraining(finished_copy, workflow_checkout):
    checkout = workflow_checkout  # the workflow as it would be after `git pull` changed the train script
    script = checkout / "workflow/scripts/train.py"
    script.write_text(script.read_text() + "# a changed line\n")
    before = _run_state(finished_copy)
    args = [f"{RUN}/history.csv", "--configfile", str(TEST_CONFIG)]
    changed = checkout / SNAKEFILE.relative_to(ROOT)
    dry = snakemake(finished_copy, *args, "-n", snakefile=changed)
    assert planned_jobs(dry).get("train") == 1 and "Code has changed" in dry.stdout + dry.stderr
    snakemake(finished_copy, *args, "--cores", "1", snakefile=changed)
    _assert_rewritten_not_retrained(finished_copy, before)


def test_snakemake_killed_after_the_last_epoch_resumes_to_complete_outputs(finished_copy):
    before = _run_state(finished_copy)
    incomplete = finished_copy / ".snakemake/incomplete"
    markers = set(incomplete.rglob("*")) if incomplete.exists() else set()
    env = dict(os.environ, OMP_NUM_THREADS="1")
    process = subprocess.Popen(
        snakemake_command(finished_copy, "--cores", "1", "-f", f"{RUN}/history.csv", "--configfile", str(TEST_CONFIG)),
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True, env=env)
    try:
        deadline = time.monotonic() + 120
        while not (incomplete.exists() and set(incomplete.rglob("*")) - markers):  # the job has started
            assert process.poll() is None and time.monotonic() < deadline, "the train job never started"
            time.sleep(0.02)
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    # kept() outputs: the killed job's finished history stays in place, whole, until a job replaces it
    assert (finished_copy / RUN / "history.csv").read_text() == before["history"]
    snakemake(finished_copy, "--unlock", "--configfile", str(TEST_CONFIG))
    dry = snakemake(finished_copy, "-n", f"{RUN}/history.csv", "--configfile", str(TEST_CONFIG))
    assert "train" in planned_jobs(dry)
    snakemake(finished_copy, "--cores", "1", f"{RUN}/history.csv", "--configfile", str(TEST_CONFIG))
    _assert_rewritten_not_retrained(finished_copy, before)
