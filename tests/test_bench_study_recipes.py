"""bench.bench_study_recipes on the CPU: the study runs come from the project's plan and a run
trains its short epoch and says PASS with the mode that ran (the GPU figures need a GPU)."""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout's bench/ package
from bench import bench_study_recipes


def test_every_study_is_planned_without_the_schema():
    labels = [run.label for run in bench_study_recipes.study_runs()]
    assert len(labels) == len(set(labels)) > 200
    for part in ("hossain_adam", "newsgroups_adam_50", "sst_adagrad_25", "cifar_350"):
        assert any(part in label for label in labels), part


def test_a_text_run_and_the_eager_tree_run_train_on_the_cpu(tmp_path, capsys):
    out = tmp_path / "results.json"
    for match in ("20newsgroups/global_pooling_cnn/ce/", "sst/tree_lstm/ce/"):
        code = bench_study_recipes.main(argv=["--device", "cpu", "--batches", "5", "--batch", "2", "--match", match,
                                              "--out", str(out)])
        assert code == 0
        row = json.loads(out.read_text())["runs"][0]
        assert row["passed"] and row["mode"] == "none" and row["loss"] > 0
    assert capsys.readouterr().out.count("PASS  ") == 2


def test_the_epoch_ends_with_its_partial_batch_and_a_fallen_back_step_fails(monkeypatch):
    """Full batches, then one of half the size; a step whose plan changed (a failed capture) is a FAIL."""
    import torch

    from focalcal.training.step import CompilePlan, TrainStep

    original, sizes = TrainStep.step, []

    def recorded(self, inputs, targets):
        sizes.append(inputs.shape[0])
        original(self, inputs, targets)

    monkeypatch.setattr(TrainStep, "step", recorded)
    run = next(r for r in bench_study_recipes.study_runs() if r.label.startswith("synthetic1d/mlp/ce/"))
    row = bench_study_recipes.train_one(run.run_config, torch.device("cpu"), 5, 8)
    assert sizes == [8, 8, 8, 8, 8, 4] and row["partial_batch"] == 4 and row["passed"] and row["mode"] == "none"

    def falls_back(self, inputs, targets):
        original(self, inputs, targets)
        self.plan = CompilePlan(self.plan.requested, "eager", "capture failed (RuntimeError: boom)")

    monkeypatch.setattr(TrainStep, "step", falls_back)
    row = bench_study_recipes.train_one(run.run_config, torch.device("cpu"), 5, 8)
    assert not row["passed"] and row["reason"] == "capture failed (RuntimeError: boom)" and row["loss"] > 0
