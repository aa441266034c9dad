"""``focalcal verify`` checks that a run's files belong together: a checkpoint, logits or a
calibration copied in from another run (with its sidecar, so intact) is named with its re-make
command, and a consistent run passes."""

from __future__ import annotations

import json
import shutil

import pytest
import torch

from focalcal.commands import verify
from focalcal.commands.cli import main
from focalcal.files import remake
from focalcal.files.sidecar import SUFFIX, digest_file
from focalcal.pipeline import jobs
from focalcal.pipeline.calibrate import LOGITS_SHA256, calibrate_run

RECIPE = {"epochs": 2, "batch_size": 64, "optimizer": {"name": "sgd", "lr": 0.1, "momentum": 0.9}}
RUNS = {seed: f"results/runs/synthetic1d/mlp/focal/short/seed{seed}" for seed in (1, 2)}
CALIBRATIONS = {seed: run.replace("results/runs/", "results/calibration/") for seed, run in RUNS.items()}


@pytest.fixture(autouse=True)
def no_workflow_recorded(monkeypatch):
    monkeypatch.setenv(remake.WORKFLOW_ENV, "{}")


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    """Two finished runs (seeds 1 and 2: other fingerprints, other weights), exported and calibrated."""
    workdir = tmp_path_factory.mktemp("workdir")
    threads = torch.get_num_threads()
    try:
        for seed, run in RUNS.items():
            identity = {"dataset": {"name": "synthetic1d", "n_samples": 600}, "model": {"name": "mlp", "hidden": 8},
                        "loss": {"name": "focal", "gamma": 2}, "recipe": RECIPE, "seed": seed}
            jobs.train(identity, {"device": "cpu", "compile": "none"}, workdir / run, workdir / "data", threads=1)
            jobs.export_logits(workdir / run, workdir / "data", threads=1)
            calibration = workdir / CALIBRATIONS[seed]
            calibrate_run(workdir / run / "logits.npz", {"raw": {"build": {"name": "identity"}}}, [15],
                          calibration / "calibration.json", calibration / "metrics.csv")
    finally:
        torch.set_num_threads(threads)
    return workdir


@pytest.fixture
def workdir(two_runs, tmp_path):
    return shutil.copytree(two_runs, tmp_path / "w", symlinks=True)


def copy_in(workdir, name: str, source: str, target: str) -> None:
    """``name`` and its sidecar from ``source``'s folder into ``target``'s: intact, of another run."""
    for suffix in ("", SUFFIX):
        shutil.copy2(workdir / source / (name + suffix), workdir / target / (name + suffix))


def verified(workdir, capsys) -> tuple[int, list[str]]:
    status = main(["verify", str(workdir)])
    return status, capsys.readouterr().out.splitlines()


def test_the_runs_record_what_they_were_made_from(two_runs):
    run = two_runs / RUNS[1]
    info = json.loads((run / "run.json").read_text())
    assert info["logits_sha256"] == digest_file(run / "logits.npz").sha256
    assert info["checkpoint_sha256"] == digest_file(run / "checkpoint.pt").sha256
    fitted = json.loads((two_runs / CALIBRATIONS[1] / "calibration.json").read_text())
    assert fitted[LOGITS_SHA256] == info["logits_sha256"] and set(fitted) == {"raw", LOGITS_SHA256}


def test_consistent_runs_pass(workdir, capsys):
    status, out = verified(workdir, capsys)
    assert status == 0 and out == ["focalcal verify: 18 artefacts checked, 0 damaged"]


def test_a_checkpoint_from_another_run_is_named(workdir, capsys):
    copy_in(workdir, "checkpoint.pt", RUNS[2], RUNS[1])
    status, out = verified(workdir, capsys)
    assert status == 1
    assert out[0].startswith(f"mismatched: {workdir / RUNS[1] / 'checkpoint.pt'}: it belongs to a run with different "
                             "settings (fingerprint ")
    assert out[0].endswith(") than its run_config.json")
    assert out[1] == (f"  re-make it: cd {workdir} && rm -f {RUNS[1]}/checkpoint.pt && snakemake --cores 1 -f "
                      f"{RUNS[1]}/history.csv   (retrains the run from scratch; the next full snakemake run "
                      "re-exports what depends on it)")
    # the logits were not dumped from the checkpoint now there either
    assert out[2].startswith(f"mismatched: {workdir / RUNS[1] / 'logits.npz'}: it and its run.json were dumped from "
                             "another checkpoint")
    assert out[-1] == "focalcal verify: 18 artefacts checked, 0 damaged, 2 not of their run"


def test_without_the_run_check_the_sidecars_pass_a_copied_checkpoint(workdir, capsys, monkeypatch):
    """What the run check adds: every copied file matches its own sidecar."""
    copy_in(workdir, "checkpoint.pt", RUNS[2], RUNS[1])
    monkeypatch.setattr(verify, "check_run", lambda *args: [])
    assert verified(workdir, capsys) == (0, ["focalcal verify: 18 artefacts checked, 0 damaged"])


def test_logits_from_another_checkpoint_are_named(workdir, capsys):
    copy_in(workdir, "logits.npz", RUNS[2], RUNS[1])
    status, out = verified(workdir, capsys)
    assert status == 1
    assert out[0].startswith(f"mismatched: {workdir / RUNS[1] / 'logits.npz'}: it is not the file its run.json was "
                             "dumped with (run.json records sha256 ")
    assert out[1] == (f"  re-make it: cd {workdir} && snakemake --cores 1 -f {RUNS[1]}/logits.npz   (rule "
                      "export_logits re-dumps it from the run's checkpoint; nothing is retrained)")
    # and the calibration, fitted on the run's own logits, is not of these
    assert out[2].startswith(f"mismatched: {workdir / CALIBRATIONS[1] / 'calibration.json'}: it was fitted on "
                             "other logits")
    assert out[-1].endswith(", 2 not of their run")


def test_logits_and_run_json_from_another_run_are_named(workdir, capsys):
    copy_in(workdir, "logits.npz", RUNS[2], RUNS[1])
    copy_in(workdir, "run.json", RUNS[2], RUNS[1])
    status, out = verified(workdir, capsys)
    assert status == 1
    checkpoint = digest_file(workdir / RUNS[1] / "checkpoint.pt").sha256
    dumped_from = digest_file(workdir / RUNS[2] / "checkpoint.pt").sha256
    assert out[0] == (f"mismatched: {workdir / RUNS[1] / 'logits.npz'}: it and its run.json were dumped from another "
                      f"checkpoint (run.json records sha256 {dumped_from[:12]}..., checkpoint.pt is "
                      f"{checkpoint[:12]}...)")


def test_a_calibration_fitted_on_other_logits_is_named(workdir, capsys):
    copy_in(workdir, "calibration.json", CALIBRATIONS[2], CALIBRATIONS[1])
    status, out = verified(workdir, capsys)
    assert status == 1
    logits = digest_file(workdir / RUNS[1] / "logits.npz").sha256
    fitted_on = digest_file(workdir / RUNS[2] / "logits.npz").sha256
    assert out == [
        (f"mismatched: {workdir / CALIBRATIONS[1] / 'calibration.json'}: it was fitted on other logits (it records "
        f"sha256 {fitted_on[:12]}..., {workdir / RUNS[1] / 'logits.npz'} is {logits[:12]}...)"),
        (f"  re-make it: cd {workdir} && snakemake --cores 1 -f {CALIBRATIONS[1]}/calibration.json   (rule calibrate "
        "(calibrate_tokens for a translation run) refits the run's calibrators on its logits.npz (token_logits.npz))"),
        ("To re-make every file above, and what depends on each, in dependency order, run this one command (in "
         "place of the ones above):"),
        (f"repair: cd {workdir} && snakemake --cores 1 all {CALIBRATIONS[1]}/calibration.json --forcerun "
         f"{CALIBRATIONS[1]}/calibration.json"),
        "focalcal verify: 18 artefacts checked, 0 damaged, 1 not of their run",
    ]


def test_a_damaged_file_is_named_once(workdir, capsys):
    """A damaged checkpoint is damaged, not also "not of its run"."""
    checkpoint = workdir / RUNS[1] / "checkpoint.pt"
    checkpoint.write_bytes(checkpoint.read_bytes()[:100])
    status, out = verified(workdir, capsys)
    assert status == 1 and out[0].startswith(f"damaged: {checkpoint}: it is 100 bytes")
    assert out[-1] == "focalcal verify: 18 artefacts checked, 1 damaged"


def test_an_unreadable_checkpoint_without_a_sidecar_is_named_as_damaged(workdir, capsys):
    """No sidecar to check it against: loading it for the fingerprint finds it unreadable."""
    checkpoint = workdir / RUNS[1] / "checkpoint.pt"
    checkpoint.write_bytes(b"not a checkpoint")
    (workdir / RUNS[1] / ("checkpoint.pt" + SUFFIX)).unlink()
    status, out = verified(workdir, capsys)
    assert status == 1
    assert out[0].startswith(f"damaged: {checkpoint}: refusing to load {checkpoint}: it asks to build Python objects "
                             "that a focalcal checkpoint never holds")
    assert out[1].startswith(f"  re-make it: cd {workdir} && rm -f {RUNS[1]}/checkpoint.pt && ")


def test_a_decode_from_another_checkpoint_is_named(workdir, capsys):
    """A translation run's decodes record the checkpoint they beam-searched with (a retrained run's old decodes)."""
    from focalcal.pipeline.translation import beam_settings, write_decode
    from focalcal.training.run_files import CHECKPOINT_SHA256
    from focalcal.translation.bleu import corpus_bleu

    own, other = (digest_file(workdir / RUNS[seed] / "checkpoint.pt").sha256 for seed in (1, 2))
    run, calibration = workdir / RUNS[1], workdir / CALIBRATIONS[1]
    score = corpus_bleu(["das Haus ist klein ."], ["das Haus ist klein ."])
    for folder, name, made_from in ((run, "T1.00", own), (run, "T1.20", other), (calibration, "ts_ece", other)):
        (folder / "decode").mkdir(exist_ok=True)
        write_decode(folder / "decode" / f"{name}.json", folder / "decode" / f"{name}.txt", ["das Haus ist klein ."],
                     score, 1.0, beam_settings(), **{CHECKPOINT_SHA256: made_from})
    status, out = verified(workdir, capsys)
    assert status == 1
    recorded = f"it was decoded from another checkpoint (it records sha256 {other[:12]}..., {run / 'checkpoint.pt'} " \
               f"is {own[:12]}...)"
    assert out == [
        f"mismatched: {run / 'decode/T1.20.json'}: {recorded}",
        (f"  re-make it: cd {workdir} && snakemake --cores 1 -f {RUNS[1]}/decode/T1.20.json   (rule decode "
         "beam-searches the test set again at every temperature of the grid, from the run's checkpoint; nothing is "
         "retrained)"),
        f"mismatched: {calibration / 'decode/ts_ece.json'}: {recorded}",
        (f"  re-make it: cd {workdir} && snakemake --cores 1 -f {CALIBRATIONS[1]}/decode/ts_ece.json   (rule "
         "decode_calibrated beam-searches the test set again at the calibrator's fitted temperature; nothing is "
         "retrained)"),
        ("To re-make every file above, and what depends on each, in dependency order, run this one command (in "
         "place of the ones above):"),
        (f"repair: cd {workdir} && snakemake --cores 1 all {RUNS[1]}/decode/T1.20.json "
         f"{CALIBRATIONS[1]}/decode/ts_ece.json --forcerun {RUNS[1]}/decode/T1.20.json "
         f"{CALIBRATIONS[1]}/decode/ts_ece.json"),
        "focalcal verify: 24 artefacts checked, 0 damaged, 2 not of their run",  # 18 and each decode's two files
    ]
