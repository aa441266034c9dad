"""The training job stages a classifier's logits; export_logits publishes them (torch-free) or,
when they are missing, damaged or from another checkpoint, re-dumps them from the checkpoint."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
import torch

from focalcal._io import atomic_torch_save, load_npz
from focalcal.pipeline import jobs
from focalcal.training.checkpoint import load_checkpoint
from focalcal.training.run_files import RunPaths, checkpoint_sha256, publish_staged_export

IDENTITY = {
    "dataset": {"name": "synthetic1d", "n_samples": 900},
    "model": {"name": "mlp", "hidden": 16},
    "loss": {"name": "focal", "gamma": 2},
    "recipe": {"epochs": 3, "batch_size": 64, "optimizer": {"name": "sgd", "lr": 0.1, "momentum": 0.9}},
    "seed": 1,
}
EXECUTION = {"device": "cpu", "compile": False}


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
    message, imported_torch = export_in_subprocess(run_dir, data_root)
    assert imported_torch and (run_dir / "logits.npz").exists()
    np.testing.assert_array_equal(load_npz(run_dir / "logits.npz")["val_logits"],
                                  redumped(run_dir, data_root)["val_logits"])
