"""The training job stages a classifier's logits (a segmentation run's test-fold evaluation);
export_logits (evaluate_segmentation) publishes them torch-free or, when they are missing,
damaged, made with other settings or from another checkpoint, redoes them from the checkpoint."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
import torch

from focalcal.files.artefacts import atomic_torch_save, load_npz
from focalcal.pipeline import jobs
from focalcal.training.checkpoint import load_checkpoint
from focalcal.training.run_files import RunPaths, checkpoint_sha256, publish_staged_export, publish_staged_segmentation

IDENTITY = {
    "dataset": {"name": "synthetic1d", "n_samples": 900},
    "model": {"name": "mlp", "hidden": 16},
    "loss": {"name": "focal", "gamma": 2},
    "recipe": {"epochs": 3, "batch_size": 64, "optimizer": {"name": "sgd", "lr": 0.1, "momentum": 0.9}},
    "seed": 1,
}
EXECUTION = {"device": "cpu", "compile": "none"}


@pytest.fixture
def trained_run(tmp_path_factory):
    run_dir, data_root = tmp_path_factory.mktemp("run"), tmp_path_factory.mktemp("data")
    threads = torch.get_num_threads()
    try:
        jobs.train(IDENTITY, EXECUTION, run_dir, data_root, threads=1)
    finally:
        torch.set_num_threads(threads)
    return run_dir, data_root


def export_in_subprocess(run_dir, data_root) -> tuple[str, bool]:
    """(the job's message, whether it imported torch), as the export rule runs it."""
    code = ("import sys; from focalcal.pipeline import jobs; "
            f"jobs.export_logits({str(run_dir)!r}, {str(data_root)!r}, 1); print('torch' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=300)
    *message, imported = result.stdout.strip().splitlines()
    return " ".join(message), imported == "True"


def redumped(run_dir, data_root) -> dict:
    """The logits an export from the checkpoint writes, beside the published ones."""
    from focalcal.training import RunConfig, load_finished_run

    config = RunConfig.from_dict(json.loads((run_dir / "run_config.json").read_text()))
    trainer = load_finished_run(config, run_dir, data_root=str(data_root))
    trainer.export_logits(to=RunPaths(run_dir / "redump"))
    return load_npz(run_dir / "redump" / "logits.npz")


def test_training_stages_and_export_publishes_without_torch(trained_run):
    run_dir, data_root = trained_run
    assert not (run_dir / "logits.npz").exists()  # staged, not published: the export rule owns logits.npz
    message, imported_torch = export_in_subprocess(run_dir, data_root)
    assert "published the logits the training job staged" in message and not imported_torch
    published = load_npz(run_dir / "logits.npz")
    expected = redumped(run_dir, data_root)
    assert set(published) == set(expected)
    for key in expected:
        np.testing.assert_array_equal(published[key], expected[key], err_msg=key)
    info = json.loads((run_dir / "run.json").read_text())
    assert info["checkpoint_sha256"] == checkpoint_sha256(run_dir)
    assert info["health"] == json.loads((run_dir / "redump" / "run.json").read_text())["health"]


def test_a_deleted_logits_file_is_published_again_without_training(trained_run):
    run_dir, data_root = trained_run
    export_in_subprocess(run_dir, data_root)
    first = (run_dir / "logits.npz").read_bytes()
    (run_dir / "logits.npz").unlink()
    message, imported_torch = export_in_subprocess(run_dir, data_root)
    assert "published" in message and not imported_torch and (run_dir / "logits.npz").read_bytes() == first


def test_logits_staged_from_another_checkpoint_are_not_published(trained_run):
    run_dir, data_root = trained_run
    checkpoint = RunPaths(run_dir).checkpoint
    state = load_checkpoint(checkpoint, torch.device("cpu"))
    state["model"] = {name: value + 0.5 for name, value in state["model"].items()}  # other weights, same run
    atomic_torch_save(state, checkpoint)
    assert publish_staged_export(run_dir) == "the staged export comes from another checkpoint"
    message, imported_torch = export_in_subprocess(run_dir, data_root)
    assert "another checkpoint; dumping the logits from the checkpoint" in message and imported_torch
    published, expected = load_npz(run_dir / "logits.npz"), redumped(run_dir, data_root)
    np.testing.assert_array_equal(published["test_logits"], expected["test_logits"])
    staged = load_npz(RunPaths(run_dir).staged_export.logits)
    assert not np.array_equal(staged["test_logits"], published["test_logits"])


def test_damaged_or_missing_staged_logits_are_re_dumped(trained_run):
    run_dir, data_root = trained_run
    staged = RunPaths(run_dir).staged_export.logits
    damaged = bytearray(staged.read_bytes())
    damaged[len(damaged) // 2] ^= 0xFF
    staged.write_bytes(bytes(damaged))
    why_not = publish_staged_export(run_dir)
    assert why_not.startswith("the staged export is damaged") and "logits.npz" in why_not
    staged.unlink()
    assert publish_staged_export(run_dir) == "no staged export (logits.npz missing)"
    _message, imported_torch = export_in_subprocess(run_dir, data_root)
    assert imported_torch and (run_dir / "logits.npz").exists()
    np.testing.assert_array_equal(load_npz(run_dir / "logits.npz")["val_logits"],
                                  redumped(run_dir, data_root)["val_logits"])


def test_staging_records_its_cpu_and_the_published_record_keeps_it(trained_run):
    run_dir, data_root = trained_run
    staged = json.loads(RunPaths(run_dir).staged_export.info.read_text())["staged"]
    assert set(staged) == {"cpu_s"} and 0 < staged["cpu_s"] < 60
    export_in_subprocess(run_dir, data_root)
    assert json.loads((run_dir / "run.json").read_text())["staged"] == staged


SEGMENTATION = {
    "dataset": {"name": "synthetic_segmentation", "n_samples": 48, "size": 16, "n_folds": 3, "fold": 2},
    "model": {"name": "unet_small", "base_channels": 4, "depth": 2},
    "loss": {"name": "dual_focal"},
    "recipe": {"epochs": 2, "batch_size": 8, "eval_batch_size": 5, "augmentation": "none",
               "optimizer": {"name": "adam", "lr": 0.003}},
    "seed": 2,
}


@pytest.fixture
def trained_segmentation_run(tmp_path_factory):
    run_dir, data_root = tmp_path_factory.mktemp("segrun"), tmp_path_factory.mktemp("segdata")
    threads = torch.get_num_threads()
    try:
        jobs.train(SEGMENTATION, EXECUTION, run_dir, data_root, threads=1, segmentation_bins=10)
    finally:
        torch.set_num_threads(threads)
    return run_dir, data_root


def evaluate_in_subprocess(run_dir, data_root, out, n_bins: int) -> tuple[str, bool]:
    """(the job's message, whether it imported torch), as the evaluate_segmentation rule runs it."""
    paths = [str(out / name) for name in ("metrics.csv", "samples.npz", "run.json")]
    code = ("import sys; from focalcal.pipeline import jobs; "
            f"jobs.evaluate_segmentation({str(run_dir)!r}, {str(data_root)!r}, 1, {paths[0]!r}, {paths[1]!r}, "
            f"{n_bins}, {paths[2]!r}); print('torch' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=300)
    *message, imported = result.stdout.strip().splitlines()
    return " ".join(message), imported == "True"


def test_segmentation_evaluation_is_staged_and_published_without_torch(trained_segmentation_run, tmp_path):
    run_dir, data_root = trained_segmentation_run
    staged_info = json.loads(RunPaths(run_dir).staged_export.info.read_text())
    assert staged_info["staged"]["n_bins"] == 10 and staged_info["staged"]["cpu_s"] > 0
    message, imported_torch = evaluate_in_subprocess(run_dir, data_root, tmp_path / "published", n_bins=10)
    assert "published the evaluation the training job staged" in message and not imported_torch
    # the same files as an evaluation from the checkpoint with the same bins
    jobs.evaluate_segmentation(run_dir, data_root, 1, tmp_path / "fresh.csv", tmp_path / "fresh.npz", 10)
    assert (tmp_path / "published" / "metrics.csv").read_text() == (tmp_path / "fresh.csv").read_text()
    published, fresh = load_npz(tmp_path / "published" / "samples.npz"), load_npz(tmp_path / "fresh.npz")
    assert set(published) == set(fresh) == {"class_names", "images", "true_masks", "predicted_masks"}
    for key in fresh:
        np.testing.assert_array_equal(published[key], fresh[key], err_msg=key)
    info = json.loads((tmp_path / "published" / "run.json").read_text())
    assert info["checkpoint_sha256"] == checkpoint_sha256(run_dir) and info["health"]["status"]


def test_segmentation_evaluation_with_other_bins_or_weights_is_redone(trained_segmentation_run, tmp_path):
    run_dir, data_root = trained_segmentation_run
    out = tmp_path / "out"
    why_not = publish_staged_segmentation(run_dir, out / "m.csv", out / "s.npz", out / "run.json", n_bins=15)
    assert why_not == "the staged export was made with {'n_bins': 10}, not {'n_bins': 15}"
    message, imported_torch = evaluate_in_subprocess(run_dir, data_root, out, n_bins=15)
    assert "evaluating from the checkpoint" in message and imported_torch
    assert "staged" not in json.loads((out / "run.json").read_text())  # this job's CPU is its own benchmark's
    checkpoint = RunPaths(run_dir).checkpoint
    state = load_checkpoint(checkpoint, torch.device("cpu"))
    state["model"] = {name: value + 0.5 for name, value in state["model"].items()}
    atomic_torch_save(state, checkpoint)
    assert publish_staged_segmentation(run_dir, out / "m.csv", out / "s.npz", out / "run.json", n_bins=10) == (
        "the staged export comes from another checkpoint")


def test_finished_at_is_when_training_ended_not_when_the_records_were_rewritten(trained_run):
    import time

    run_dir, data_root = trained_run
    staged_info = run_dir / "staged_export" / "run.json"
    finished_at = json.loads(staged_info.read_text())["finished_at"]
    assert finished_at == load_checkpoint(run_dir / "checkpoint.pt")["finished_at"]
    while time.strftime("%Y-%m-%dT%H:%M:%S%z") == finished_at:  # the timestamps count seconds: a rewrite now would differ
        time.sleep(0.05)
    threads = torch.get_num_threads()
    try:
        jobs.train(IDENTITY, EXECUTION, run_dir, data_root, threads=1)  # a re-planned job on the finished run
    finally:
        torch.set_num_threads(threads)
    assert json.loads(staged_info.read_text())["finished_at"] == finished_at
    export_in_subprocess(run_dir, data_root)
    assert json.loads((run_dir / "run.json").read_text())["finished_at"] == finished_at
