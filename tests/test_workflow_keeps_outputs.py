"""A failing job never costs a good output: a re-planned export that meets a damaged checkpoint
leaves the run its logits and run.json, and the ways out it prints run as printed."""

from __future__ import annotations

import re

from conftest import RUN, TEST_CONFIG, planned_jobs, run_as_printed, snakemake

from focalcal import _sidecar

LOGITS, INFO = f"{RUN}/logits.npz", f"{RUN}/run.json"


def test_a_damaged_checkpoint_keeps_the_logits_and_names_the_ways_out(finished_copy):
    run_dir = finished_copy / RUN
    before = {name: (run_dir / name).read_bytes() for name in ("logits.npz", "run.json")}
    checkpoint = run_dir / "checkpoint.pt"
    checkpoint.write_bytes(checkpoint.read_bytes()[:2000])

    failed = snakemake(finished_copy, "-f", LOGITS, "--cores", "1", "--configfile", str(TEST_CONFIG), check=False)
    assert failed.returncode != 0
    assert {name: (run_dir / name).read_bytes() for name in before} == before  # kept, byte for byte
    for name in before:
        assert _sidecar.read(run_dir / name) == _sidecar.digest_file(run_dir / name)
    log = (finished_copy / "results/logs/export_logits" / f"{RUN.removeprefix('results/runs/')}.log").read_text()
    assert "DamagedCheckpointError" in log and "it is 2000 bytes but was written as" in log
    assert "logits.npz matches its recorded checksum, run.json matches its recorded checksum" in log
    assert f"the staged copy {RUN}/staged_export/logits.npz is these logits" in log

    # the kept logits carry on: the next plain run plans no export
    assert "export_logits" not in planned_jobs(snakemake(finished_copy, LOGITS, "-n", "--configfile", str(TEST_CONFIG)))

    # way out 1, as printed: the logits are lost; the staged copy goes back, verified, and is marked up to date
    restore = re.search(r"put the copy back \(and mark it up to date\): (.*)", log).group(1)
    (run_dir / "logits.npz").unlink()
    (run_dir / "run.json").unlink()
    run_as_printed(restore, finished_copy)
    assert {name: (run_dir / name).read_bytes() for name in before} == before
    assert "export_logits" not in planned_jobs(snakemake(finished_copy, LOGITS, "-n", "--configfile", str(TEST_CONFIG)))

    # way out 2, as printed: retrain; the export then works again
    retrain = re.search(r"retrain the run: (.*)", log).group(1)
    assert "--configfile" in retrain
    run_as_printed(retrain, finished_copy)
    snakemake(finished_copy, "-f", LOGITS, "--cores", "1", "--configfile", str(TEST_CONFIG))
