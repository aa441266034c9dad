"""A damaged artefact in a real workflow run: its consumer names it and the command that re-makes
it, and that command re-dumps the logits from the checkpoint without retraining."""

from __future__ import annotations

import os
import re
import subprocess
import sys

from conftest import RUN, SNAKEFILE, TEST_CONFIG, planned_jobs, run_as_printed, snakemake

from focalcal.files import sidecar
from focalcal.files.artefacts import load_npz

CALIBRATION = RUN.replace("results/runs/", "results/calibration/")
METRICS = f"{CALIBRATION}/metrics.csv"


def test_every_artefact_of_the_run_carries_its_checksum(finished):
    files = [f"{RUN}/{name}" for name in ("run_config.json", "history.csv", "checkpoint.pt", "logits.npz", "run.json")]
    files += [f"{CALIBRATION}/{name}" for name in ("calibration.json", "metrics.csv")] + ["data/ready/digits.json"]
    for name in files:
        assert sidecar.read(finished / name) == sidecar.digest_file(finished / name), name


def test_forcing_the_logits_re_dumps_them_alone(finished_copy):
    plan = planned_jobs(snakemake(finished_copy, "-n", "-f", f"{RUN}/logits.npz", "--configfile", str(TEST_CONFIG)))
    assert plan == {"export_logits": 1, "total": 1}


def test_truncated_logits_are_named_with_the_command_that_re_makes_them_without_retraining(finished_copy):
    run_dir = finished_copy / RUN
    logits = run_dir / "logits.npz"
    before = load_npz(logits)
    stamps = {name: (run_dir / name).stat().st_mtime_ns for name in ("checkpoint.pt", "history.csv")}
    logits.write_bytes(logits.read_bytes()[:1000])

    failed = snakemake(finished_copy, METRICS, "--cores", "1", "--configfile", str(TEST_CONFIG), check=False)
    assert failed.returncode != 0  # calibrate, newer input than output, re-ran and refused the file
    log = (finished_copy / "results/logs/calibrate" / f"{RUN.removeprefix('results/runs/')}.log").read_text()
    assert f"CorruptArtefactError: corrupt artefact {RUN}/logits.npz: it is 1000 bytes but was written as" in log
    command = re.search(r"Re-make it: (.*?)   \(", log).group(1)
    assert command == f"snakemake --cores 1 -s {SNAKEFILE} -f {RUN}/logits.npz --configfile {TEST_CONFIG}"

    ran = run_as_printed(command, finished_copy)  # as printed, from the workflow directory
    assert planned_jobs(ran) == {"export_logits": 1, "total": 1}
    after = load_npz(logits)
    assert before.keys() == after.keys() and all((before[k] == after[k]).all() for k in before)
    assert stamps == {name: (run_dir / name).stat().st_mtime_ns for name in stamps}  # nothing retrained
    snakemake(finished_copy, METRICS, "--cores", "1", "--configfile", str(TEST_CONFIG))


def test_a_damaged_staged_export_names_a_command_that_runs(finished_copy):
    staged = finished_copy / RUN / "staged_export" / "logits.npz"
    damaged = bytearray(staged.read_bytes())
    damaged[len(damaged) // 2] ^= 0x01
    staged.write_bytes(bytes(damaged))
    snakemake(finished_copy, "-f", f"{RUN}/logits.npz", "--cores", "1", "--configfile", str(TEST_CONFIG))
    log = (finished_copy / "results/logs/export_logits" / f"{RUN.removeprefix('results/runs/')}.log").read_text()
    command = re.search(r"Re-make it: (.*?)   \(", log).group(1)
    assert command == (f"rm -rf {RUN}/staged_export && snakemake --cores 1 -s {SNAKEFILE} -f {RUN}/logits.npz "
                       f"--configfile {TEST_CONFIG}")
    ran = run_as_printed(command, finished_copy)
    assert planned_jobs(ran) == {"export_logits": 1, "total": 1} and not staged.exists()


def test_verify_finds_one_flipped_byte_and_its_command_re_makes_it(finished_copy):
    metrics = finished_copy / METRICS
    stat = metrics.stat()
    data = bytearray(metrics.read_bytes())
    data[len(data) // 2] ^= 0x01
    metrics.write_bytes(bytes(data))
    os.utime(metrics, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # size and time kept: only the content tells

    def verify():
        return subprocess.run([sys.executable, "-m", "focalcal", "verify", "--snakefile", str(SNAKEFILE),
                               "--configfile", str(TEST_CONFIG)], cwd=finished_copy, capture_output=True, text=True,
                              timeout=300, check=False)

    found = verify()
    assert found.returncode == 1, found.stdout + found.stderr
    lines = found.stdout.splitlines()
    assert lines[-1].endswith(" artefacts checked, 1 damaged")
    damaged = [line for line in lines if line.startswith("damaged: ")]
    assert damaged == [f"damaged: {METRICS}: " + damaged[0].split(": ", 2)[2]] and "sha256" in damaged[0]
    command = re.search(r"re-make it: (.*?)   \(", found.stdout).group(1)
    assert command == f"snakemake --cores 1 -s {SNAKEFILE} -f {METRICS} --configfile {TEST_CONFIG}"
    run_as_printed(command, finished_copy)
    assert verify().returncode == 0


def test_a_target_left_damaged_fails_the_run_naming_it(finished_copy):
    metrics = finished_copy / METRICS
    data = bytearray(metrics.read_bytes())
    data[len(data) // 2] ^= 0x01
    metrics.write_bytes(bytes(data))
    touched = snakemake(finished_copy, "--touch", "-f", METRICS, "--cores", "1", "--configfile", str(TEST_CONFIG),
                        check=False)
    assert touched.returncode == 1
    assert f"1 of its targets are missing or damaged:\n  {METRICS}: its sha256" in touched.stderr


def test_the_command_verify_prints_for_a_deleted_run_config_runs_as_printed(finished_copy):
    # what a failed (disk-full) training job leaves: Snakemake deleted run_config.json, its sidecar stayed
    (finished_copy / RUN / "run_config.json").unlink()
    found = subprocess.run([sys.executable, "-m", "focalcal", "verify", "--snakefile", str(SNAKEFILE),
                            "--configfile", str(TEST_CONFIG)], cwd=finished_copy, capture_output=True, text=True,
                           timeout=300, check=False)
    assert f"damaged: {RUN}/run_config.json: it is missing" in found.stdout
    command = re.search(r"re-make it: (.*?)   \(", found.stdout).group(1)
    assert command.startswith(f"rm -f {RUN}/run_config.json && snakemake --cores 1")
    run_as_printed(command, finished_copy)
    assert sidecar.read(finished_copy / RUN / "run_config.json") == sidecar.digest_file(
        finished_copy / RUN / "run_config.json")


def test_one_printed_command_repairs_a_damaged_checkpoint_calibration_table_and_report(finished_copy):
    def flip(name):
        path = finished_copy / name
        stat, data = path.stat(), bytearray(path.read_bytes())
        data[len(data) // 2] ^= 0x01
        path.write_bytes(bytes(data))
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # size and time kept: only the content tells

    def verify():
        return subprocess.run([sys.executable, "-m", "focalcal", "verify", "--snakefile", str(SNAKEFILE),
                               "--configfile", str(TEST_CONFIG)], cwd=finished_copy, capture_output=True, text=True,
                              timeout=300, check=False)

    table = min((finished_copy / "results/tables").glob("*.csv")).relative_to(finished_copy).as_posix()
    damaged = [f"{RUN}/checkpoint.pt", f"{CALIBRATION}/calibration.json", table, "results/report/index.html"]
    overview = (finished_copy / "results/report/overview.html").read_bytes()
    for name in damaged:
        flip(name)
    found = verify()
    assert found.returncode == 1
    assert sorted(line.split(": ")[1] for line in found.stdout.splitlines() if line.startswith("damaged: ")) == \
        sorted(damaged)
    assert found.stdout.splitlines()[-1].endswith(" artefacts checked, 4 damaged")
    command = re.search(r"^repair: (.*)$", found.stdout, flags=re.MULTILINE).group(1)
    run_as_printed(command, finished_copy)  # once, exactly as printed
    again = verify()
    assert again.returncode == 0, again.stdout
    assert again.stdout.splitlines()[-1].endswith(" artefacts checked, 0 damaged")  # and none not of its run
    assert (finished_copy / "results/report/overview.html").stat().st_size > len(overview) // 2
    for name in damaged:
        assert sidecar.read(finished_copy / name) == sidecar.digest_file(finished_copy / name), name
