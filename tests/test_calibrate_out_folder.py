"""`focalcal calibrate --out`: checked before the logits are read, locked while written, and
replaced whole, so a folder is always one command's complete output."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy.special import softmax

from focalcal.commands.calibrate_command import compare_calibrators, output_folder
from focalcal.logits_file import check_logits


def logits_set(n_val=200, n_test=300, k=6, seed=0):
    rng = np.random.default_rng(seed)
    arrays = {}
    for split, n in (("val", n_val), ("test", n_test)):
        logits = rng.normal(size=(n, k)) * 3
        arrays[f"{split}_logits"] = logits
        arrays[f"{split}_labels"] = (rng.uniform(size=(n, 1)) > softmax(logits / 2, axis=1).cumsum(axis=1)).sum(1)
    return check_logits(arrays, source="model.npz")


def diagrams(folder):
    return sorted(p.name for p in (folder / "reliability").iterdir() if p.suffix == ".svg")


def run_calibrate(*args, cwd):
    return subprocess.run([sys.executable, "-m", "focalcal", "calibrate", *map(str, args)], capture_output=True,
                          text=True, cwd=cwd, timeout=600, check=False)


def test_an_out_that_is_a_file_or_unwritable_is_refused_before_the_logits_are_read(tmp_path):
    (tmp_path / "taken").write_text("a file")
    absent = tmp_path / "absent.npz"  # were the logits read first, this would be the error
    result = run_calibrate(absent, "--out", tmp_path / "taken", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr == f"focalcal calibrate: --out {tmp_path / 'taken'}: is a file, not a folder; name a folder " \
                            "(new or a previous report)\n"
    result = run_calibrate(absent, "--out", "/proc/focalcal-report", cwd=tmp_path)  # procfs takes no new files
    assert result.returncode == 2
    assert result.stderr.startswith("focalcal calibrate: --out /proc/focalcal-report: cannot write there (")
    assert result.stderr.count("\n") == 1


def test_a_second_command_on_a_locked_folder_stops_naming_the_first(tmp_path):
    np.savez(tmp_path / "model.npz", **{key: getattr(logits_set(), key) for key in
                                        ("val_logits", "val_labels", "test_logits", "test_labels")})
    with output_folder(tmp_path / "report"):
        result = run_calibrate(tmp_path / "model.npz", "--out", tmp_path / "report", "--calibrators", "raw",
                               cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.startswith(f"focalcal calibrate: --out {tmp_path / 'report'}: is being written by "
                                    f"focalcal calibrate (pid {os.getpid()}, started ")
    assert result.stderr.count("\n") == 1
    assert not (tmp_path / "report").exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".partial")] == []
    result = run_calibrate(tmp_path / "model.npz", "--out", tmp_path / "report", "--calibrators", "raw",
                           "--resamples", 20, "--no-smooth", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert diagrams(tmp_path / "report") == ["raw.svg"]


def test_a_report_is_replaced_whole_and_a_failed_run_leaves_the_previous_one(tmp_path):
    logits, out = logits_set(), tmp_path / "report"
    compare_calibrators(logits, out, ["raw", "ts_nll"], n_resamples=20, smooth=False, progress=lambda line: None)
    assert diagrams(out) == ["raw.svg", "ts_nll.svg"]
    compare_calibrators(logits, out, ["ts_ece"], n_resamples=20, smooth=False, progress=lambda line: None)
    assert diagrams(out) == ["ts_ece.svg"]  # no stale raw.svg
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}

    def interrupt(line):
        if line.startswith("[1/2]"):
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        compare_calibrators(logits, out, ["raw", "ts_nll"], n_resamples=20, smooth=False, progress=interrupt)
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report"]  # the lock file goes with its holder


def test_a_folder_holding_other_files_is_refused(tmp_path):
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "draft.txt").write_text("mine")
    with pytest.raises(ValueError, match=r"--out .*notes: holds 'draft.txt' \(1 foreign entries in all\), which "
                                         r"focalcal calibrate does not write"):
        compare_calibrators(logits_set(), tmp_path / "notes", ["raw"], n_resamples=20, smooth=False,
                            progress=lambda line: None)
    assert (tmp_path / "notes" / "draft.txt").read_text() == "mine"


def test_a_calibrator_with_more_parameters_than_samples_is_warned_about(tmp_path):
    lines = []
    compare_calibrators(logits_set(n_val=5, k=6), tmp_path / "report", ["raw", "ts_nll", "ets", "dirichlet"],
                        n_resamples=20, smooth=False, progress=lines.append)
    warnings = [line for line in lines if line.startswith("warning:")]
    assert warnings == [("warning: dirichlet has 42 parameters but model.npz has only 5 validation samples to fit "
                         "them on; its fit is not determined by the data")]


def grid_users(builders: dict[str, str]) -> tuple[str, ...]:
    """The calibrators (name -> builder ``"module:attribute"``) whose module imports the focal grid."""
    import ast
    import importlib.util

    users = []
    for name, builder in builders.items():
        tree = ast.parse(Path(importlib.util.find_spec(builder.partition(":")[0]).origin).read_text())
        imported = [name for node in ast.walk(tree) if isinstance(node, ast.Import | ast.ImportFrom)
                    for name in [getattr(node, "module", None) or "", *(alias.name for alias in node.names)]]
        if any(name.endswith("_focal_grid") for name in imported):
            users.append(name)
    return tuple(users)


def test_the_fused_kernel_fits_named_without_torch_are_the_calibrators_that_import_the_grid():
    from focalcal import catalog
    from focalcal.commands.shared_work import FUSED_KERNEL_FITS

    builders = {name: entry.builder for name, entry in catalog.CALIBRATORS.items()}
    assert grid_users(builders) == tuple(FUSED_KERNEL_FITS) == ("focal_temperature_scaling",)
    assert grid_users({**builders, "ts": "focalcal.calibration.temperature:TemperatureScaling"}) == FUSED_KERNEL_FITS


def test_the_main_process_never_imports_torch_when_the_grid_is_fitted_beside_it(tmp_path):
    """Only the second process, which fits focal TS's grid, imports torch; this one measures and draws."""
    script = ("import sys\n"
              "from focalcal.commands.calibrate_command import compare_calibrators\n"
              "from focalcal.logits_file import read_logits\n"
              f"compare_calibrators(read_logits({str(tmp_path / 'model.npz')!r}), {str(tmp_path / 'out')!r}, "
              "['raw', 'fts_ece'], n_resamples=20, smooth=False, progress=lambda line: None)\n"
              "print('torch' in sys.modules)\n")
    np.savez(tmp_path / "model.npz", **{key: getattr(logits_set(), key) for key in
                                        ("val_logits", "val_labels", "test_logits", "test_labels")})
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600,
                            check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "False"
    assert diagrams(tmp_path / "out") == ["fts_ece.svg", "raw.svg"]
