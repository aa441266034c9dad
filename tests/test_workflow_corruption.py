"""A damaged artefact in a real workflow run: its consumer names it and the command that re-makes
it, and that command re-dumps the logits from the checkpoint without retraining."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from focalcal import _sidecar
from focalcal._io import load_npz
from test_workflow_e2e import RUN, TEST_CONFIG, planned_rules, snakemake

CALIBRATION = RUN.replace("results/runs/", "results/calibration/")
METRICS = f"{CALIBRATION}/metrics.csv"


@pytest.fixture(scope="module")
def calibrated(tmp_path_factory) -> Path:
    """A working directory in which one run of config/test.yaml was trained, exported and calibrated."""
    workdir = tmp_path_factory.mktemp("corruption")
    snakemake(workdir, METRICS, "--cores", "2", "--configfile", str(TEST_CONFIG))  # targets first: --configfile takes several
    return workdir


def test_every_artefact_of_the_run_carries_its_checksum(calibrated):
    files = [f"{RUN}/{name}" for name in ("run_config.json", "history.csv", "checkpoint.pt", "logits.npz", "run.json")]
    files += [f"{CALIBRATION}/{name}" for name in ("calibration.json", "metrics.csv")] + ["data/ready/digits.json"]
    for name in files:
        assert _sidecar.read(calibrated / name) == _sidecar.digest_file(calibrated / name), name


def test_forcing_the_logits_re_dumps_them_alone(calibrated):
    plan = planned_rules(snakemake(calibrated, "-n", "-f", f"{RUN}/logits.npz", "--configfile", str(TEST_CONFIG)))
    assert plan == {"export_logits": 1, "total": 1}


def test_truncated_logits_are_named_with_the_command_that_re_makes_them_without_retraining(calibrated):
    run_dir = calibrated / RUN
    logits = run_dir / "logits.npz"
    before = load_npz(logits)
    stamps = {name: (run_dir / name).stat().st_mtime_ns for name in ("checkpoint.pt", "history.csv")}
    logits.write_bytes(logits.read_bytes()[:1000])

    failed = snakemake(calibrated, METRICS, "--cores", "1", "--configfile", str(TEST_CONFIG), check=False)
    assert failed.returncode != 0  # calibrate, newer input than output, re-ran and refused the file
    log = (calibrated / "results/logs/calibrate" / f"{RUN.removeprefix('results/runs/')}.log").read_text()
    assert f"CorruptArtefactError: corrupt artefact {RUN}/logits.npz: it is 1000 bytes but was written as" in log
    command = re.search(r"Re-make it: (.*?)   \(", log).group(1)
    assert command == f"snakemake --cores 1 -f {RUN}/logits.npz"

    arguments = shlex.split(command)[1:]  # run it as printed (the helper adds -s and --directory)
    ran = snakemake(calibrated, *arguments, "--configfile", str(TEST_CONFIG))
    assert planned_rules(ran) == {"export_logits": 1, "total": 1}
    after = load_npz(logits)
    assert before.keys() == after.keys() and all((before[k] == after[k]).all() for k in before)
    assert stamps == {name: (run_dir / name).stat().st_mtime_ns for name in stamps}  # nothing retrained
    snakemake(calibrated, METRICS, "--cores", "1", "--configfile", str(TEST_CONFIG))
