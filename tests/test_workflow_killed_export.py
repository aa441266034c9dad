"""A restored file keeps its sidecar: an export killed with -9 at any point of its writes (before,
between and after the logits, run.json and their checksum sidecars) leaves the run verified
whole, with the old logits or the new ones, never a file paired with another's checksum."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
from conftest import RUN, SNAKEFILE, TEST_CONFIG, snakemake

from focalcal._io import atomic_savez, atomic_write_json, load_npz, read_json
from focalcal._sidecar import digest_file
from focalcal.pipeline.calibrate import LOGITS_SHA256

# Loaded by every Python process of the test's workflow; acts only in the one that replaces the
# run's logits.npz / run.json (or their sidecars): it sends itself SIGKILL just before (or after)
# the k-th such os.replace. Four replaces publish an export: logits, its sidecar, run.json, its sidecar.
KILLER = '''
import os, signal
_kill = os.environ.get("KILL_EXPORT_AT")
if _kill:
    _count, _real = [0], os.replace
    _at, _when = int(_kill.split(":")[0]), _kill.split(":")[1]
    def replace(src, dst, *args, **kwargs):
        if os.path.basename(str(dst)).startswith(("logits.npz", "run.json")) and "staged_export" not in str(dst):
            _count[0] += 1
            if _count[0] == _at and _when == "before":
                os.kill(os.getpid(), signal.SIGKILL)
            _real(src, dst, *args, **kwargs)
            if _count[0] == _at and _when == "after":
                os.kill(os.getpid(), signal.SIGKILL)
            return
        _real(src, dst, *args, **kwargs)
    os.replace = replace
'''
PHASES = ["1:before", "1:after", "2:before", "2:after", "3:before", "3:after", "4:before", "4:after"]


@pytest.fixture(scope="module")
def killer(tmp_path_factory):
    folder = tmp_path_factory.mktemp("killer")
    (folder / "sitecustomize.py").write_text(KILLER)
    return folder


def test_an_export_killed_at_every_phase_leaves_old_or_new_logits_verified(finished_copy, killer):
    run_dir = finished_copy / RUN
    new = load_npz(run_dir / "logits.npz")  # what re-dumping the checkpoint writes
    # a consistent but different pair, with its sidecars, and no staged copy: the export re-dumps
    old = {key: (value + 1 if key.endswith("logits") else value) for key, value in new.items()}
    atomic_savez(run_dir / "logits.npz", **old)
    old_sha256 = digest_file(run_dir / "logits.npz").sha256  # run.json and the calibration record it
    atomic_write_json({**read_json(run_dir / "run.json"), "marker": "old", "logits_sha256": old_sha256},
                      run_dir / "run.json")
    calibration = finished_copy / RUN.replace("results/runs/", "results/calibration/") / "calibration.json"
    atomic_write_json({**read_json(calibration), LOGITS_SHA256: old_sha256}, calibration)
    shutil.rmtree(run_dir / "staged_export")
    saved = {name: (run_dir / name).read_bytes() for name in
             ("logits.npz", "logits.npz.sha256", "run.json", "run.json.sha256")}
    env = {"PYTHONPATH": os.pathsep.join([str(killer), os.environ.get("PYTHONPATH", "")])}

    for phase in PHASES:
        for name, data in saved.items():  # every phase starts from the old pair
            (run_dir / name).write_bytes(data)
        killed = snakemake(finished_copy, "-f", f"{RUN}/logits.npz", "--cores", "1", "--configfile",
                           str(TEST_CONFIG), check=False, env={**env, "KILL_EXPORT_AT": phase})
        assert killed.returncode != 0, phase
        verified = subprocess.run([sys.executable, "-m", "focalcal", "verify", "--snakefile", str(SNAKEFILE),
                                   "--configfile", str(TEST_CONFIG)], cwd=finished_copy, capture_output=True,
                                  text=True, timeout=300, check=False)
        assert verified.returncode == 0 and verified.stdout.splitlines()[-1].endswith(" 0 damaged"), \
            (phase, verified.stdout[-2000:])
        logits, info = load_npz(run_dir / "logits.npz"), read_json(run_dir / "run.json")
        assert logits.keys() == old.keys()
        assert all(np.array_equal(logits[key], old[key]) for key in old), phase  # Snakemake put the old ones back
        assert info.get("marker") == "old", phase

    # and unkilled, the export publishes the new pair, verified
    snakemake(finished_copy, "-f", f"{RUN}/logits.npz", "--cores", "1", "--configfile", str(TEST_CONFIG), env=env)
    logits = load_npz(run_dir / "logits.npz")
    assert all(np.array_equal(logits[key], new[key]) for key in new)
    assert "marker" not in json.loads((run_dir / "run.json").read_text())
