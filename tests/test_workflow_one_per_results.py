"""One workflow per results folder: a second workflow on the same results/ (another checkout,
through a symlink) is refused before it plans anything, naming the holder, and the first
finishes untouched; runs that write nothing still go through."""

from __future__ import annotations

import os
import platform
import subprocess
import time

import pytest
from conftest import ROOT, TEST_CONFIG, one_run_config, planned_jobs, snakemake, snakemake_command

from focalcal import _sidecar
from focalcal.pipeline.workflow_lock import may_write_outputs

TABLE = "results/tables/one_workflow.csv"


def test_a_second_workflow_on_a_symlinked_results_folder_is_refused_at_once(tmp_path):
    config = one_run_config(tmp_path / "one_run.yaml", "one_workflow", epochs=15)
    first, second = tmp_path / "first", tmp_path / "second"
    second.mkdir()
    (first / "results").mkdir(parents=True)
    os.symlink(first / "results", second / "results")
    running = subprocess.Popen(snakemake_command(first, "--cores", "1", TABLE, "--configfile", str(config)), cwd=ROOT,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               env={**os.environ, "OMP_NUM_THREADS": "1"})
    try:
        lock = first / "results" / ".workflow.lock"
        deadline = time.monotonic() + 120
        while not (lock.exists() and f'"pid": {running.pid}' in lock.read_text()):
            assert running.poll() is None and time.monotonic() < deadline, "the first workflow never took its lock"
            time.sleep(0.2)

        started = time.monotonic()
        refused = snakemake(second, "--cores", "1", TABLE, "--configfile", str(config), check=False)
        took = time.monotonic() - started
        assert refused.returncode == 1
        message = refused.stdout + refused.stderr
        assert f"results (= {first / 'results'}) is in use by another workflow: PID {running.pid} on host " \
               f"{platform.node()}, checkout {ROOT}, since " in message
        assert "Building DAG of jobs" not in message and "Job stats" not in message  # nothing planned
        assert took < 30, took  # at parse time: no DAG, no job

        # what writes nothing goes through meanwhile
        assert planned_jobs(snakemake(second, "-n", TABLE, "--configfile", str(config)))["train"] >= 0
        verified = subprocess.run([str(ROOT / ".venv/bin/focalcal"), "verify"], cwd=second, capture_output=True,
                                  text=True, check=False)
        assert "artefacts checked" in verified.stdout, verified.stdout + verified.stderr
    finally:
        output, _ = running.communicate(timeout=900)
    assert running.returncode == 0, output[-3000:]
    table = first / TABLE
    assert _sidecar.read(table) == _sidecar.digest_file(table)
    assert "is in use by another workflow" not in output
    # the lock went with the process: the second checkout now runs (nothing left to do)
    assert snakemake(second, "--cores", "1", TABLE, "--configfile", str(config)).returncode == 0


@pytest.mark.parametrize(("argv", "writes"), [
    (["--cores", "2", "--configfile", str(TEST_CONFIG)], True),
    (["-s", "Snakefile", "-f", "results/x", "-c", "1"], True),
    (["-n", "--cores", "2"], False), (["-np"], False), (["--dry-run"], False), (["--touch", "-f", "x"], False),
    (["--report", "report.html"], False), (["--unlock"], False), (["--lint"], False), (["--summary"], False),
])
def test_only_runs_that_may_write_take_the_lock(argv, writes):
    assert may_write_outputs(argv) is writes
