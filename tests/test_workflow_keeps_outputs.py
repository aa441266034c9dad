"""A failing job never costs a good output: a re-planned export that meets a damaged checkpoint
leaves the run its logits and run.json, and the ways out it prints run as printed; a failed
re-make of any rule's outputs leaves them, and their checksums, as they were."""

from __future__ import annotations

import re
import subprocess
import sys

from conftest import RUN, SNAKEFILE, TEST_CONFIG, copy_workdir, planned_jobs, run_as_printed, snakemake

from focalcal.files import sidecar

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
        assert sidecar.read(run_dir / name) == sidecar.digest_file(run_dir / name)
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


# A failed re-make of any kind keeps what it would have replaced. Each round forces jobs none of
# which is upstream of another (a job behind a failed one never starts), so that every job runs,
# and fails; the rounds together hold one job of each rule of config/test.yaml.
ROUNDS = [
    [f"{RUN.replace('/ce/', '/focal1/')}/run_config.json",  # train
     f"{RUN.replace('/tiny/', '/tiny_lr100/')}/logits.npz",  # export_logits
     f"{RUN.replace('results/runs/', 'results/calibration/')}/metrics.csv",  # calibrate, fails after writing
     "results/segmentation/tiny_seg/unet_tiny/ce/tiny_seg/seed0/metrics.csv",  # evaluate_segmentation
     "results/figures/theory/mukhoti2020_fig6_binary_optimum.png",  # theory_figure
     "results/report/manifest.json",  # report_manifest
     "results/tables/test_posterior.csv"],  # study_table (no run of its study forced in this round)
    ["results/figures/test_digits/mukhoti2020_fig2_training_curves.png",  # study_figure
     "results/tables/test_digits/mukhoti2020_table1.csv",  # paper_table
     "results/report/runs.csv",  # run_inventory
     "results/tables/claims.csv"],  # claims
    ["results/figures/claims/index.png",  # claims_forest
     "results/report/overview.html", "results/report/hossain2021.html"],  # report_notebook
    ["results/report/index.html"],  # report_index
]
# Loaded by every Python the workflow starts (PYTHONPATH): a job's script (Snakemake runs a copy
# named .snakemake/scripts/tmp<random>.<script>.py) exits 1 before it does anything, or, for the
# scripts named in FAIL_AFTER_WRITING, writes every text file with other bytes (and their
# sidecars) and exits 1 at its end.
FAILING_JOBS = '''
import atexit, os, sys
script = os.path.abspath(sys.argv[0]) if sys.argv and sys.argv[0] else ""
if f"{os.sep}.snakemake{os.sep}scripts{os.sep}" in script:
    if script.split(".")[-2] in os.environ.get("FAIL_AFTER_WRITING", "").split(","):
        import focalcal.files.artefacts
        write = focalcal.files.artefacts.atomic_write_text
        focalcal.files.artefacts.atomic_write_text = lambda text, path: write(text + "from the attempt that fails\\n", path)
        exit = os._exit
        os._exit = lambda status: exit(1)  # a job's script leaves through os._exit (pipeline.joblog)
        atexit.register(exit, 1)
    else:
        os._exit(1)
'''


def _results(workdir) -> dict[str, bytes]:
    """Every file under results/ but the logs, benchmarks and the workflow's lock file."""
    results = workdir / "results"
    return {path.relative_to(workdir).as_posix(): path.read_bytes() for path in sorted(results.rglob("*"))
            if path.is_file() and path.relative_to(results).parts[0] not in ("logs", "benchmarks", ".workflow.lock")}


def test_a_failed_re_make_of_any_rule_keeps_every_output_and_its_checksum(finished, tmp_path):
    (tmp_path / "failing").mkdir()
    (tmp_path / "failing" / "sitecustomize.py").write_text(FAILING_JOBS)
    env = {"PYTHONPATH": str(tmp_path / "failing"), "FAIL_AFTER_WRITING": "calibrate"}
    before = _results(finished)
    for number, targets in enumerate(ROUNDS):
        # each round in its own copy: a put-back file is newer than what was made from it, which
        # would plan the jobs behind it (and a job behind a failed one never starts)
        workdir = copy_workdir(finished, tmp_path / f"round{number}")
        assert all(f"{name}.sha256" in before for name in targets)
        failed = snakemake(workdir, "--cores", "1", "--keep-going", "-f", *targets, "--configfile", str(TEST_CONFIG),
                           check=False, env=env)
        after = _results(workdir)
        assert sorted(set(before) - set(after)) == []  # no output deleted
        assert sorted(set(after) - set(before)) == []  # no new file left
        assert [name for name in before if after[name] != before[name]] == []  # each one byte for byte
        assert failed.returncode == 1
        assert failed.stderr.count("Error in rule ") == len(targets), failed.stderr[-3000:]  # each job ran, and failed
        if number == 0:  # calibrate wrote both its files, and their sidecars, before it failed
            log = (workdir / "results/logs/calibrate" / f"{RUN.removeprefix('results/runs/')}.log").read_text()
            assert "job CPU" in log and "Traceback" not in log
            assert f"Restored previous version of {targets[2].replace('metrics.csv', 'calibration.json.sha256')}" \
                in failed.stderr
            # (the other rounds leave the finished run's files byte for byte too, which verify finds whole)
            found = subprocess.run([sys.executable, "-m", "focalcal", "verify", "--snakefile", str(SNAKEFILE),
                                    "--configfile", str(TEST_CONFIG)], cwd=workdir, capture_output=True, text=True,
                                   timeout=300, check=False)
            assert found.returncode == 0, found.stdout
            assert found.stdout.splitlines()[-1].endswith(" artefacts checked, 0 damaged")


def test_every_rule_that_re_makes_an_output_keeps_it_with_its_checksum_until_it_succeeds():
    # the declaration the test above exercises, for every rule, those of translation and imported runs too
    rules = {}
    for smk in sorted((SNAKEFILE.parent / "rules").glob("*.smk")):
        for match in re.finditer(r"^rule (\w+):\n(.*?)(?=^\S|\Z)", smk.read_text(), flags=re.MULTILINE | re.DOTALL):
            output = re.search(r"^    output:\n        (\S+)", match.group(2), flags=re.MULTILINE)
            rules[match.group(1)] = output and output.group(1)
    assert len(rules) > 20 and "decode_calibrated" in rules and "import_logits" in rules
    plain = {name for name, first in rules.items() if not (first or "").startswith("**kept(")}
    assert plain == {"prepare_data", "report_check"}, plain
