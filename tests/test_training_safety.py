"""What protects a run: a finished run re-written (never retrained), one trainer per run
directory, checkpoints that cannot run code, and jobs that stop when their Snakemake dies."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pandas as pd
import pytest
import torch
from test_training import make_config

from focalcal.files.artefacts import CorruptArtefactError, atomic_torch_save
from focalcal.files.sidecar import sidecar_path
from focalcal.training import Trainer, export_run_logits, train_run
from focalcal.training.checkpoint import UnreadableCheckpointError, UnsafeCheckpointError, load_checkpoint
from focalcal.training.lock import RunLock, RunLockedError

SRC = Path(__file__).resolve().parents[1] / "src"


@pytest.fixture(scope="module")
def data_root(tmp_path_factory):
    return tmp_path_factory.mktemp("data")


@pytest.fixture
def finished_run(tmp_path, data_root):
    run_dir = tmp_path / "run"
    train_run(make_config(), run_dir, data_root=data_root, progress=False)
    return run_dir


# ------------------------------------------------------------------ a finished run, trained again


def test_training_a_finished_run_rewrites_its_records_from_the_checkpoint(finished_run, data_root, capsys):
    history = (finished_run / "history.csv").read_text()
    reliability = (finished_run / "train_reliability.csv").read_text()
    checkpoint_stamp = (finished_run / "checkpoint.pt").stat().st_mtime_ns
    (finished_run / "history.csv").unlink()  # what Snakemake does before re-running the job
    (finished_run / "train_reliability.csv").unlink()
    trainer = Trainer(make_config(), finished_run, data_root=data_root, progress=False)
    trainer.fit()
    assert (finished_run / "history.csv").read_text() == history
    assert (finished_run / "train_reliability.csv").read_text() == reliability
    assert (finished_run / "checkpoint.pt").stat().st_mtime_ns == checkpoint_stamp  # nothing trained, nothing saved
    assert trainer.epochs_done == 4
    assert "epoch 1/4" not in capsys.readouterr().err


# ------------------------------------------------------------------ one trainer per run directory


def test_a_second_trainer_on_a_locked_run_is_refused_naming_the_holder(tmp_path, data_root):
    run_dir = tmp_path / "run"
    holder = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(f"""
            import sys, time
            sys.path.insert(0, {str(SRC)!r})
            from focalcal.training.lock import RunLock
            with RunLock({str(run_dir)!r}):
                print("locked", flush=True)
                time.sleep(120)
        """)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(RunLockedError, match=rf"{run_dir}.*another process \(PID {holder.pid} on host"):
            Trainer(make_config(), run_dir, data_root=data_root, progress=False).fit()
        assert not (run_dir / "checkpoint.pt").exists()
    finally:
        holder.kill()
        holder.wait()
    # the kernel dropped the dead holder's lock: training can start now
    Trainer(make_config(), run_dir, data_root=data_root, progress=False).fit(stop_after_epoch=1)
    assert len(pd.read_csv(run_dir / "history.csv")) == 1


def test_the_lock_is_exclusive_within_one_process_and_released_on_exit(tmp_path):
    with RunLock(tmp_path), pytest.raises(RunLockedError, match=f"PID {os.getpid()}"):
        RunLock(tmp_path).acquire()
    with RunLock(tmp_path):  # released by the first block
        pass


# ------------------------------------------------------------------ checkpoints never run code


class _Payload:
    """Pickles to a call that creates ``marker`` when unpickled with weights_only=False."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (self.marker,))


def test_a_checkpoint_carrying_a_pickle_payload_is_refused_without_running_it(finished_run, data_root, tmp_path):
    marker = tmp_path / "payload_ran"
    state = torch.load(finished_run / "checkpoint.pt", weights_only=True)
    state["history"].append(_Payload(marker))
    # written with a matching checksum sidecar: the checksum cannot tell, only the safe load can
    atomic_torch_save(state, finished_run / "checkpoint.pt")
    # the payload is real: an unsafe load runs it
    torch.load(finished_run / "checkpoint.pt", weights_only=False)
    assert marker.exists()
    marker.unlink()
    with pytest.raises(UnsafeCheckpointError, match=rf"refusing to load {finished_run / 'checkpoint.pt'}.*nothing in it was executed"):
        load_checkpoint(finished_run / "checkpoint.pt")
    for consumer in (lambda: export_run_logits(make_config(), finished_run, data_root=data_root),
                     lambda: Trainer(make_config(), finished_run, data_root=data_root, progress=False).fit()):
        with pytest.raises(UnsafeCheckpointError):
            consumer()
    assert not marker.exists()


def test_the_export_logits_command_refuses_a_payload(finished_run, data_root, tmp_path):
    marker = tmp_path / "payload_ran"
    state = torch.load(finished_run / "checkpoint.pt", weights_only=True)
    state["best"] = _Payload(marker)
    atomic_torch_save(state, finished_run / "checkpoint.pt")
    config = tmp_path / "run.json"
    config.write_text(json.dumps(make_config().to_dict()))
    result = subprocess.run(
        [sys.executable, "-m", "focalcal", "export-logits", "--config", str(config), "--run-dir", str(finished_run),
         "--data-root", str(data_root)], capture_output=True, text=True, timeout=300, cwd=tmp_path, check=False)
    assert result.returncode != 0
    assert "refusing to load" in result.stderr and "checkpoint.pt" in result.stderr
    assert not marker.exists()


def test_a_truncated_checkpoint_names_the_file_and_the_remedy(finished_run, data_root):
    path = finished_run / "checkpoint.pt"
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    with pytest.raises(CorruptArtefactError, match=rf"{path}.*truncated"):  # caught by its checksum sidecar
        Trainer(make_config(), finished_run, data_root=data_root, progress=False).fit()
    sidecar_path(path).unlink()  # a checkpoint from before checksums: caught when torch cannot read it
    with pytest.raises(UnreadableCheckpointError, match=rf"{path} is not a readable checkpoint.*Re-make it"):
        Trainer(make_config(), finished_run, data_root=data_root, progress=False).fit()


def test_trainer_checkpoints_load_safely_with_every_scheduler_and_early_stopping(tmp_path, data_root):
    config = make_config(recipe={**make_config().to_dict()["recipe"], "epochs": 2, "lr_step_every": 1, "lr_milestones": [],
                                 "early_stopping_patience": 5, "reliability_epochs": [1]})
    train_run(config, tmp_path, data_root=data_root, progress=False, export=False)
    state = load_checkpoint(tmp_path / "checkpoint.pt")
    assert state["epochs_done"] == 2 and state["best"]["model"] is not None


# ------------------------------------------------------------------ a job dies with its Snakemake


def _spawn_fake_snakemake(tmp_path: Path) -> tuple[subprocess.Popen, Path]:
    """A process named ``snakemake`` whose child job arms the watchdog and then works forever."""
    heartbeat = tmp_path / "heartbeat"
    job = textwrap.dedent(f"""
        import sys, time, pathlib
        sys.path.insert(0, {str(SRC)!r})
        from focalcal.training.orphan import exit_when_workflow_dies
        assert exit_when_workflow_dies(poll_seconds=0.1)
        while True:
            pathlib.Path({str(heartbeat)!r}).write_text(str(time.time()))
            time.sleep(0.05)
    """)
    launcher = tmp_path / "snakemake"
    launcher.write_text(f"#!{sys.executable}\nimport subprocess, sys, time\n"
                        f"job = subprocess.Popen([sys.executable, '-c', {job!r}])\n"
                        "print(job.pid, flush=True)\ntime.sleep(300)\n")
    launcher.chmod(0o755)
    return subprocess.Popen([str(launcher)], stdout=subprocess.PIPE, text=True), heartbeat


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_a_job_stops_when_its_snakemake_is_killed(tmp_path):
    parent, heartbeat = _spawn_fake_snakemake(tmp_path)
    job_pid = int(parent.stdout.readline())
    deadline = time.monotonic() + 30
    while not heartbeat.exists():
        assert time.monotonic() < deadline, "the job never started"
        time.sleep(0.05)
    assert _alive(job_pid)
    parent.kill()  # SIGKILL: Snakemake gets no chance to stop its jobs
    parent.wait()
    deadline = time.monotonic() + 10
    while _alive(job_pid):
        assert time.monotonic() < deadline, "the job outlived its Snakemake"
        time.sleep(0.05)


def test_the_watchdog_stays_off_outside_snakemake():
    result = subprocess.run(
        [sys.executable, "-c", (f"import sys; sys.path.insert(0, {str(SRC)!r}); "
         "from focalcal.training.orphan import exit_when_workflow_dies; print(exit_when_workflow_dies())")],
        capture_output=True, text=True, timeout=60, check=False)
    assert result.stdout.strip() == "[]"

