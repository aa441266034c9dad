"""One workflow per results folder: a second workflow on the same results/ (another checkout,
through a symlink) is refused before it plans anything, naming the holder, and the first
finishes untouched; runs that write nothing still go through."""

from __future__ import annotations

import os
import platform
import subprocess
import time

import pandas as pd
import pytest
from conftest import ROOT, RUN, TEST_CONFIG, one_run_config, planned_jobs, snakemake, snakemake_command

from focalcal.files import sidecar
from focalcal.pipeline.workflow_lock import may_write_outputs

TABLE = "results/tables/one_workflow.csv"


EPOCHS = 400  # long enough that the first is still training when the second has been refused
LOG = "results/logs/train/digits/cnn_small/ce/tiny/seed0.log"


def test_a_second_workflow_on_a_symlinked_results_folder_is_refused_at_once_and_the_live_run_loses_nothing(tmp_path):
    """One live workflow, one refused: a second checkout (results/ and data/ symlinked to the
    first's) is refused within seconds, naming the holder, while the first trains; dry runs and
    ``focalcal verify`` go through meanwhile; the live run ends with every epoch, its log and its
    table whole, and the second then runs."""
    config = one_run_config(tmp_path / "one_run.yaml", "one_workflow", EPOCHS, gradient_norm_epochs=[2])
    first, second = tmp_path / "first", tmp_path / "second"
    second.mkdir()
    (first / "results").mkdir(parents=True)
    os.symlink(first / "results", second / "results")
    (second / "data").symlink_to(first / "data", target_is_directory=True)
    history = first / RUN / "history.csv"
    running = subprocess.Popen(snakemake_command(first, "--cores", "1", TABLE, "--configfile", str(config)), cwd=ROOT,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               env={**os.environ, "OMP_NUM_THREADS": "1"})
    try:
        lock = first / "results" / ".workflow.lock"
        deadline = time.monotonic() + 300
        while not (lock.exists() and f'"pid": {running.pid}' in lock.read_text()
                   and history.exists() and len(history.read_text().splitlines()) >= 3):  # header + 2 epochs
            assert running.poll() is None, f"the first workflow ended early:\n{running.stdout.read()[-3000:]}"
            assert time.monotonic() < deadline, "the first workflow never took its lock and trained"
            time.sleep(0.2)
        live_log = (first / LOG).stat().st_ino

        started = time.monotonic()
        refused = snakemake(second, "--cores", "1", TABLE, "--configfile", str(config), check=False)
        took = time.monotonic() - started
        assert refused.returncode == 1
        message = refused.stdout + refused.stderr
        assert f"results (= {first / 'results'}) is in use by another workflow: PID {running.pid} on host " \
               f"{platform.node()}, checkout {ROOT}, since " in message
        assert "stops before planning anything" in message
        assert "Building DAG of jobs" not in message and "Job stats" not in message  # nothing planned
        assert took < 30, took  # at parse time: no DAG, no job
        assert running.poll() is None and len(pd.read_csv(history)) < EPOCHS  # refused while the first still trained
        for name in ("run_config.json", "history.csv"):
            assert (first / RUN / name).exists(), name
        assert (first / LOG).stat().st_ino == live_log  # the live job's log is the file it writes

        # what writes nothing goes through meanwhile
        dry = snakemake(second, "-n", TABLE, "--configfile", str(config))
        assert planned_jobs(dry)["total"] > 0 and "is in use by another workflow" not in dry.stdout + dry.stderr
        verified = subprocess.run([str(ROOT / ".venv/bin/focalcal"), "verify"], cwd=second, capture_output=True,
                                  text=True, check=False)
        assert "artefacts checked" in verified.stdout, verified.stdout + verified.stderr
        output, _ = running.communicate(timeout=900)
    finally:
        if running.poll() is None:
            running.kill()
            running.wait()
    assert running.returncode == 0, output[-4000:]
    assert "is in use by another workflow" not in output
    log = (first / LOG).read_text()
    assert f"epoch {EPOCHS}/{EPOCHS} " in log and "Traceback" not in log
    assert list(pd.read_csv(history).epoch) == list(range(1, EPOCHS + 1))
    attempts = list((first / LOG.removesuffix(".log")).with_suffix(".attempts").iterdir())
    assert len(attempts) == 1 and attempts[0].read_text() == log  # one attempt ran, with its own log
    table = first / TABLE
    assert sidecar.read(table) == sidecar.digest_file(table)
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
