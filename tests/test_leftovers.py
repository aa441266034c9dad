"""Nothing left, nothing silent: the ``.part`` file of a write killed with -9 is deleted by the
next write of that file and by `focalcal verify` (which names it), never while a live writer
holds it; `focalcal calibrate` leaves no lock file, refused or not, and a later command removes
what a killed one left; a run file without its checksum sidecar is listed by `verify`, not skipped."""

from __future__ import annotations

import fcntl
import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from focalcal.commands.calibrate_command import compare_calibrators
from focalcal.commands.cli import main
from focalcal.files import remake
from focalcal.files.artefacts import atomic_savez, atomic_write_json, atomic_write_text, load_npz
from focalcal.logits_file import check_logits

RUN = "results/runs/digits/cnn_small/ce/tiny/seed0"


@pytest.fixture(autouse=True)
def no_workflow_recorded(monkeypatch):
    monkeypatch.setenv(remake.WORKFLOW_ENV, "{}")


def killed_write(path, name="logits.npz") -> list:
    """Start an atomic write of ``path`` in a process that kills itself (SIGKILL) halfway through
    it; return the hidden files it left beside ``path``."""
    script = textwrap.dedent(f"""
        import os, signal
        from focalcal.files.artefacts import atomic_write
        def write(handle):
            handle.write(b"half of it")
            handle.flush()
            os.kill(os.getpid(), signal.SIGKILL)
        atomic_write({str(path)!r}, write)
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=120, check=False)
    assert result.returncode == -9, result.stderr
    return sorted(p.name for p in path.parent.iterdir() if p.name.startswith(f".{name}."))


def test_the_next_write_of_a_file_deletes_the_part_file_a_killed_write_left(tmp_path):
    logits = tmp_path / "run" / "logits.npz"
    atomic_savez(logits, val_logits=np.ones((2, 3)))
    left = killed_write(logits)
    assert len(left) == 1 and left[0].endswith(".part")
    other = killed_write(tmp_path / "run" / "run.json", "run.json")  # another file's leftover: not this write's
    atomic_savez(logits, val_logits=np.zeros((2, 3)))
    assert sorted(p.name for p in logits.parent.iterdir()) == sorted(
        ["logits.npz", "logits.npz.sha256", *other])
    assert load_npz(logits)["val_logits"].tolist() == [[0.0] * 3] * 2


def test_a_part_file_a_live_writer_holds_is_left_alone(tmp_path):
    logits = tmp_path / "logits.npz"
    live = tmp_path / ".logits.npz.abcdefgh.part"
    with open(live, "wb") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        atomic_savez(logits, val_logits=np.ones(2))
        assert live.exists()
    atomic_savez(logits, val_logits=np.ones(2))  # released: now a leftover
    assert not live.exists()


def run_tree(workdir):
    run = workdir / RUN
    atomic_write_json({"dataset": "digits"}, run / "run_config.json")
    atomic_savez(run / "logits.npz", val_logits=np.arange(12.0).reshape(4, 3))
    atomic_write_json({"note": "no checkpoint here"}, run / "run.json")
    atomic_write_text("calibrator,metric\nraw,ece\n",
                      workdir / RUN.replace("results/runs", "results/calibration") / "metrics.csv")
    return run


def test_verify_deletes_and_names_the_part_files_of_killed_writes(tmp_path, capsys):
    run = run_tree(tmp_path)
    left = killed_write(run / "run.json", "run.json")
    assert main(["verify", str(tmp_path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == [f"removed: {run / left[0]}: a partial write that a killed process left",
                   "focalcal verify: 4 artefacts checked, 0 damaged"]
    assert not (run / left[0]).exists()


def test_verify_lists_a_run_file_without_its_sidecar(tmp_path, capsys):
    run = run_tree(tmp_path)
    (run / "run.json.sha256").unlink()  # what a workflow killed between the file and its sidecar leaves
    assert main(["verify", str(tmp_path)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0] == (f"unverified: {run / 'run.json'}: its checksum file run.json.sha256 is missing, so its content "
                      "cannot be checked (a write cut off between the file and its checksum, or a file put there by "
                      "hand)")
    assert out[1].startswith(f"  re-make it: cd {tmp_path} && snakemake --cores 1 -f {RUN}/run.json")
    assert out[-1] == "focalcal verify: 4 artefacts checked, 0 damaged, 1 without their checksum file"


def logits_set(n=120, k=4):
    rng = np.random.default_rng(0)
    return check_logits({"val_logits": rng.normal(size=(n, k)), "val_labels": rng.integers(0, k, n),
                         "test_logits": rng.normal(size=(n, k)), "test_labels": rng.integers(0, k, n)},
                        source="model.npz")


def test_calibrate_leaves_no_lock_file_refused_or_not_and_clears_a_killed_ones_leftovers(tmp_path):
    out, quiet = tmp_path / "report", {"n_resamples": 20, "smooth": False, "progress": lambda line: None}
    compare_calibrators(logits_set(), out, ["raw"], **quiet)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report"]
    with pytest.raises(ValueError, match="unknown calibrator"):
        compare_calibrators(logits_set(), out, ["no_such"], **quiet)
    # refused once the folder is locked: the logits file is read after the lock is taken
    assert main(["calibrate", str(tmp_path / "absent.npz"), "--out", str(out), "--calibrators", "raw"]) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report"]
    # a command killed while it wrote: its lock file and staging folder stay, until the next command on the folder
    (tmp_path / ".report.lock").write_text("focalcal calibrate (pid 1, killed)\n")
    (tmp_path / ".report.k1ll3d_x.partial").mkdir()
    (tmp_path / ".report.k1ll3d_x.partial" / "metrics.csv").write_text("half")
    (tmp_path / ".report-notes.k1ll3d_x.partial").mkdir()  # another folder's: kept
    compare_calibrators(logits_set(), out, ["raw"], **quiet)
    assert sorted(p.name for p in tmp_path.iterdir()) == [".report-notes.k1ll3d_x.partial", "report"]
    assert json.loads((out / "calibration.json").read_text()).keys() == {"raw"}
