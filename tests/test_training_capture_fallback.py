"""A step that cannot be captured in a CUDA graph falls back to eager, says why once, and the run
finishes with the same numbers as an eager run; run.json records what happened."""

from __future__ import annotations

import contextlib
import json

import numpy as np
import pytest

from focalcal.training import RunConfig, Trainer
from focalcal.training.step import CompilePlan, TrainStep

CAPTURE_ERROR = "operation not permitted when stream is capturing"


def run_config(compile_mode: str) -> RunConfig:
    return RunConfig.from_dict({
        "dataset": {"name": "synthetic1d", "n_samples": 600}, "model": {"name": "mlp", "hidden": 8},
        "loss": {"name": "focal", "gamma": 3},
        "recipe": {"epochs": 2, "batch_size": 64, "optimizer": {"name": "sgd", "lr": 0.05, "momentum": 0.9}},
        "seed": 1, "device": "cpu", "compile": compile_mode})


def test_a_failed_capture_falls_back_to_eager_and_run_json_records_it(tmp_path, monkeypatch, capsys):
    attempts = []

    def refuse_capture(self, step):
        attempts.append(1)
        raise RuntimeError(f"CUDA error: {CAPTURE_ERROR}\nmore detail")

    monkeypatch.setattr(TrainStep, "_side_stream", lambda self: contextlib.nullcontext())
    monkeypatch.setattr(TrainStep, "_record", refuse_capture)
    eager = Trainer(run_config("none"), tmp_path / "eager", data_root=tmp_path / "data", progress=False)
    eager.fit()
    eager.export_logits()

    graphed = Trainer(run_config("cudagraphs"), tmp_path / "graphed", data_root=tmp_path / "data", progress=False)
    graphed.step.plan = graphed.compile_plan = CompilePlan("cudagraphs", "cudagraphs")  # as on CUDA
    graphed.fit()
    graphed.export_logits()

    assert len(attempts) == 1  # tried once; the second epoch never re-captures
    lines = [line for line in capsys.readouterr().err.splitlines() if "capture failed" in line]
    assert len(lines) == 1 and CAPTURE_ERROR in lines[0]
    info = json.loads((tmp_path / "graphed" / "run.json").read_text())
    assert info["compile"] == {"requested": "cudagraphs", "mode": "none",
                               "reason": f"capture failed (RuntimeError: CUDA error: {CAPTURE_ERROR}); "
                                         "the step ran eagerly from then on"}
    assert info["epochs_done"] == 2
    eager_logits = np.load(tmp_path / "eager" / "logits.npz")["test_logits"]
    np.testing.assert_array_equal(np.load(tmp_path / "graphed" / "logits.npz")["test_logits"], eager_logits)


def test_a_fault_that_is_not_about_capture_still_stops_the_run(tmp_path, monkeypatch):
    """The fallback retries the batch eagerly, so a real error in the step is raised, not hidden."""
    monkeypatch.setattr(TrainStep, "_side_stream", lambda self: contextlib.nullcontext())
    monkeypatch.setattr(TrainStep, "_record", lambda self, step: step())
    trainer = Trainer(run_config("cudagraphs"), tmp_path / "run", data_root=tmp_path / "data", progress=False)
    trainer.step.plan = CompilePlan("cudagraphs", "cudagraphs")
    calls = []

    def failing_loss(logits, targets):
        calls.append(1)
        if len(calls) > 3:  # the warm-up steps pass, the capture's step fails
            raise ValueError("a broken loss")
        return logits.logsumexp(1).mean()

    trainer.loss_fn = failing_loss
    with pytest.raises(ValueError, match="a broken loss"):
        trainer.fit()
