"""A restored file keeps its sidecar: an export killed with -9 at any point of its writes (before,
between and after the logits, run.json and their checksum sidecars) leaves the run verified
whole, with the old logits or the new ones, never a file paired with another's checksum.

Each phase kills the export of its own run of config/test.yaml (five classification runs), so one
Snakemake invocation (``--keep-going``) and one ``focalcal verify`` cover up to five phases: two
rounds for the eight, each run checked afterwards as a phase run alone would be."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
from conftest import RUN, SNAKEFILE, TEST_CONFIG, snakemake

from focalcal.files.artefacts import atomic_savez, atomic_write_json, load_npz, read_json
from focalcal.files.sidecar import digest_file
from focalcal.pipeline.calibrate import LOGITS_SHA256

# Loaded by every Python process of the test's workflow; acts only in one that replaces a run's
# logits.npz / run.json (or their sidecars) in a run directory KILL_EXPORT_AT names
# ("<run dir>=<k>:<before|after>" entries, ";"-separated): it sends itself SIGKILL just before (or
# after) the k-th such os.replace. Four replaces publish an export: logits, its sidecar, run.json, its sidecar.
KILLER = '''
import os, signal
_kill = os.environ.get("KILL_EXPORT_AT")
if _kill:
    _phases = dict(entry.split("=") for entry in _kill.split(";"))
    _count, _real = [0], os.replace
    def replace(src, dst, *args, **kwargs):
        phase = next((p for run, p in _phases.items() if os.path.dirname(str(dst)).endswith(run)), None)
        if phase and os.path.basename(str(dst)).startswith(("logits.npz", "run.json")) and "staged_export" not in str(dst):
            _at, _when = int(phase.split(":")[0]), phase.split(":")[1]
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
# config/test.yaml's classification runs (RUN first), each exported once per round at its own phase
RUNS = [RUN, "results/runs/digits/cnn_small/focal1/tiny/seed0", "results/runs/digits/cnn_small/ce/tiny_lr100/seed0",
        "results/runs/synthetic1d/mlp/ce/tiny/seed0", "results/runs/synthetic1d/mlp/focal3/tiny/seed0"]


@pytest.fixture(scope="module")
def killer(tmp_path_factory):
    folder = tmp_path_factory.mktemp("killer")
    (folder / "sitecustomize.py").write_text(KILLER)
    return folder


def _old_pair(workdir, run):
    """Make ``run``'s logits a consistent but different pair (with run.json, the sidecars and the
    calibration recording them) and remove its staged copy, so that an export re-dumps; return
    (the logits re-dumping writes, the old ones, the old files' bytes)."""
    run_dir = workdir / run
    new = load_npz(run_dir / "logits.npz")  # what re-dumping the checkpoint writes
    old = {key: (value + 1 if key.endswith("logits") else value) for key, value in new.items()}
    atomic_savez(run_dir / "logits.npz", **old)
    old_sha256 = digest_file(run_dir / "logits.npz").sha256  # run.json and the calibration record it
    atomic_write_json({**read_json(run_dir / "run.json"), "marker": "old", "logits_sha256": old_sha256},
                      run_dir / "run.json")
    calibration = workdir / run.replace("results/runs/", "results/calibration/") / "calibration.json"
    atomic_write_json({**read_json(calibration), LOGITS_SHA256: old_sha256}, calibration)
    shutil.rmtree(run_dir / "staged_export")
    saved = {name: (run_dir / name).read_bytes() for name in
             ("logits.npz", "logits.npz.sha256", "run.json", "run.json.sha256")}
    return new, old, saved


def test_an_export_killed_at_every_phase_leaves_old_or_new_logits_verified(finished_copy, killer):
    pairs = {run: _old_pair(finished_copy, run) for run in RUNS}
    env = {"PYTHONPATH": os.pathsep.join([str(killer), os.environ.get("PYTHONPATH", "")])}

    rounds = [PHASES[:len(RUNS)], PHASES[len(RUNS):]]
    for phases in rounds:
        killed_runs = dict(zip(RUNS, phases))
        for run in killed_runs:
            for name, data in pairs[run][2].items():  # every phase starts from the old pair
                (finished_copy / run / name).write_bytes(data)
        killed = snakemake(finished_copy, "-f", *(f"{run}/logits.npz" for run in killed_runs), "--keep-going",
                           "--cores", "2", "--configfile", str(TEST_CONFIG), check=False,
                           env={**env, "KILL_EXPORT_AT": ";".join(f"{run}={phase}" for run, phase in killed_runs.items())})
        assert killed.returncode != 0, phases
        verified = subprocess.run([sys.executable, "-m", "focalcal", "verify", "--snakefile", str(SNAKEFILE),
                                   "--configfile", str(TEST_CONFIG)], cwd=finished_copy, capture_output=True,
                                  text=True, timeout=300, check=False)
        assert verified.returncode == 0 and verified.stdout.splitlines()[-1].endswith(" 0 damaged"), \
            (phases, verified.stdout[-2000:])
        for run, phase in killed_runs.items():
            _new, old, _saved = pairs[run]
            logits, info = load_npz(finished_copy / run / "logits.npz"), read_json(finished_copy / run / "run.json")
            assert logits.keys() == old.keys(), (run, phase)
            assert all(np.array_equal(logits[key], old[key]) for key in old), (run, phase)  # Snakemake put the old ones back
            assert info.get("marker") == "old", (run, phase)  # killed: an unkilled export publishes the new pair

    # and unkilled, the export publishes the new pair, verified
    run_dir, (new, _old, _saved) = finished_copy / RUN, pairs[RUN]
    snakemake(finished_copy, "-f", f"{RUN}/logits.npz", "--cores", "1", "--configfile", str(TEST_CONFIG), env=env)
    logits = load_npz(run_dir / "logits.npz")
    assert all(np.array_equal(logits[key], new[key]) for key in new)
    assert "marker" not in json.loads((run_dir / "run.json").read_text())
