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
