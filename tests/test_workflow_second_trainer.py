"""Two Snakemakes on one results/ (a second checkout sharing it through a symlink) while a run
trains: the second is refused before it plans anything (the results folder's workflow lock;
the run's own train lock backs it for trainers outside a workflow), and the live run loses nothing."""

from __future__ import annotations

import os
import subprocess
import time

import pandas as pd
from conftest import RUN, one_run_config, snakemake, snakemake_command

EPOCHS = 400  # long enough that the first is still training when the second has parsed its config
LOG = "results/logs/train/digits/cnn_small/ce/tiny/seed0.log"


def test_a_second_snakemake_on_a_shared_results_folder_leaves_the_live_run_alone(tmp_path):
    config = one_run_config(tmp_path / "live.yaml", "live", EPOCHS, gradient_norm_epochs=[2])
    live, second = tmp_path / "live", tmp_path / "second"
    live.mkdir()
    second.mkdir()
    (live / "results").mkdir()
    (second / "results").symlink_to(live / "results")
    (second / "data").symlink_to(live / "data", target_is_directory=True)
    history = live / RUN / "history.csv"
    env = dict(os.environ, OMP_NUM_THREADS="1")
    first = subprocess.Popen(snakemake_command(live, f"{RUN}/logits.npz", "--cores", "1", "--configfile", str(config)),
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    try:
        deadline = time.monotonic() + 300
        while not (history.exists() and len(history.read_text().splitlines()) >= 3):  # header + 2 epochs
            assert first.poll() is None, f"the first workflow ended early:\n{first.stdout.read()[-3000:]}"
            assert time.monotonic() < deadline, "the first workflow never trained"
            time.sleep(0.2)
        live_log = (live / LOG).stat().st_ino

        refused = snakemake(second, f"{RUN}/logits.npz", "--cores", "1", "--configfile", str(config), check=False)
        assert refused.returncode != 0
        output = refused.stdout + refused.stderr
        assert f"is in use by another workflow: PID {first.pid} on host " in output
        assert "stops before planning anything" in output and "Building DAG of jobs" not in output
        assert first.poll() is None and len(pd.read_csv(history)) < EPOCHS  # refused while the first still trained
        for name in ("run_config.json", "history.csv"):
            assert (live / RUN / name).exists(), name
        assert (live / LOG).stat().st_ino == live_log  # the live job's log is the file it writes

        output, _ = first.communicate(timeout=900)
        assert first.returncode == 0, output[-4000:]
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    log = (live / LOG).read_text()
    assert f"epoch {EPOCHS}/{EPOCHS} " in log and "Traceback" not in log
    assert list(pd.read_csv(history).epoch) == list(range(1, EPOCHS + 1))
    attempts = list((live / LOG.removesuffix(".log")).with_suffix(".attempts").iterdir())
    assert len(attempts) == 1 and attempts[0].read_text() == log  # one attempt ran, with its own log
