"""Every refusal is one line naming the culprit, and leaves nothing behind: `focalcal calibrate`'s
numeric options are checked before any work; a full disk in `calibrate` or in a workflow job, and a
read-only results/, are said in one line naming the path and what to do (the files already there
are kept); a config that fails validation leaves no results/."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml
from conftest import one_run_config, snakemake

from focalcal.commands.cli import main
from focalcal.files import artefacts
from focalcal.files.artefacts import atomic_savez, load_npz
from focalcal.pipeline import joblog
from focalcal.pipeline.workflow_lock import ResultsNotWritableError, hold_output_lock


def write_logits(path: Path, n: int = 120, k: int = 4) -> Path:
    rng = np.random.default_rng(0)
    np.savez(path, val_logits=rng.normal(size=(n, k)) * 3, val_labels=rng.integers(0, k, n),
             test_logits=rng.normal(size=(n, k)) * 3, test_labels=rng.integers(0, k, n))
    return path


def run_calibrate(*args, cwd):
    return subprocess.run([sys.executable, "-m", "focalcal", "calibrate", *map(str, args)], capture_output=True,
                          text=True, cwd=cwd, timeout=600, check=False)


@pytest.mark.parametrize(("option", "value", "allowed"), [
    ("--bins", "0", "an integer in [1, inf)"),
    ("--resamples", "-5", "an integer in [2, inf)"),
    ("--seed", "-1", "an integer in [0, inf)"),
])
def test_calibrates_numeric_options_are_refused_in_one_line_before_any_work(tmp_path, option, value, allowed):
    logits = write_logits(tmp_path / "model.npz")
    result = run_calibrate(logits, "--out", tmp_path / "report", option, value, cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr == f"focalcal calibrate: {option} must be {allowed}, got {value}\n"
    assert result.stdout == ""  # not even the logits were read
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.npz"]  # no report, no lock file


def full_disk(monkeypatch, after: int = 0):
    """Make the ``after``+1-th file sync of an atomic write fail as a full disk does (no file named)."""
    calls, real = [0], os.fsync

    def fsync(fd):
        calls[0] += 1
        if calls[0] > after:
            raise OSError(errno.ENOSPC, "No space left on device")
        real(fd)

    monkeypatch.setattr(artefacts.os, "fsync", fsync)


def test_a_full_disk_in_calibrate_is_one_line_naming_the_file_and_keeps_the_previous_report(tmp_path, capsys,
                                                                                          monkeypatch):
    logits, out = write_logits(tmp_path / "model.npz"), tmp_path / "report"
    args = ["calibrate", str(logits), "--out", str(out), "--calibrators", "raw", "--resamples", "20", "--no-smooth"]
    assert main(args) == 0
    before = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    capsys.readouterr()
    full_disk(monkeypatch)
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err == (f"focalcal calibrate: cannot write {out / 'reliability' / 'raw.svg'}: No space left on device; "
                   "free space on that disk (the files already there are kept) and run the command again\n")
    assert {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.npz", "report"]  # no staging folder, no lock


def test_a_full_disk_in_a_workflow_job_is_one_line_naming_the_file_and_keeps_the_old_one(tmp_path, monkeypatch):
    """What the export job runs: its write through job_process, the log and the exit both one line."""
    logits, log = tmp_path / "run" / "logits.npz", tmp_path / "export.log"
    atomic_savez(logits, val_logits=np.ones((2, 3)))
    full_disk(monkeypatch, after=0)
    with pytest.raises(SystemExit) as exit_, joblog.job_process(str(log)):
        atomic_savez(logits, val_logits=np.zeros((2, 3)))
    line = (f"cannot write {logits}: No space left on device; free space on that disk (the files already there are "
            "kept) and run the command again")
    assert exit_.value.code == line
    assert log.read_text().splitlines()[0] == line and "Traceback" not in log.read_text()
    assert load_npz(logits)["val_logits"].tolist() == [[1.0] * 3] * 2
    assert sorted(p.name for p in logits.parent.iterdir()) == ["logits.npz", "logits.npz.sha256"]


@pytest.mark.parametrize(("code", "advice"), [
    (errno.EROFS, ("Read-only file system; that file system is mounted read-only: remount it writable, or make "
                  "results/ a symlink to a writable disk, and run the command again")),
    (errno.EACCES, ("Permission denied; you may not write there: make the folder writable for you (chmod/chown), or "
                   "work in a copy you own, and run the command again")),
])
def test_a_results_folder_that_cannot_be_written_is_refused_in_one_line(tmp_path, monkeypatch, code, advice):
    results = tmp_path / "results"

    def refuse(self, *args, **kwargs):
        raise OSError(code, os.strerror(code), str(self))

    monkeypatch.setattr(Path, "mkdir", refuse)
    with pytest.raises(ResultsNotWritableError) as error:
        hold_output_lock(results, tmp_path)
    assert str(error.value) == f"cannot write {results}: {advice}"


def test_a_config_refused_by_its_entries_leaves_no_results_folder(tmp_path):
    config = one_run_config(tmp_path / "bad_gamma.yaml", "bad_gamma", epochs=1)
    data = yaml.safe_load(config.read_text())
    data["losses"]["ce"] = {"name": "focal", "gamma": -2}
    config.write_text(yaml.safe_dump(data))
    workdir = tmp_path / "work"
    workdir.mkdir()
    result = snakemake(workdir, "--cores", "1", "--configfile", str(config), check=False)
    assert result.returncode != 0
    assert "FocalLoss: gamma must be a real number in [0, inf), got -2" in result.stdout + result.stderr
    assert not (workdir / "results").exists()
