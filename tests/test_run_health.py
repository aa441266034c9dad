"""Run health: every run is trained / diverged / collapsed / not converged, recorded
in its run.json, shown in the study tables, the paper tables, the run inventory and the index,
and warned about when the workflow ends."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from focalcal.papers.charoenphakdee2021 import page as charoenphakdee2021
from focalcal.papers.hossain2021 import page as hossain2021
from focalcal.pipeline import build_plan, validate_config
from focalcal.pipeline.tables import COLUMNS, SEGMENTATION_COLUMNS, study_table
from focalcal.report import tables
from focalcal.report.index import build_index
from focalcal.report.inventory import health_warnings, run_inventory, summary
from focalcal.report.targets import report_plan
from focalcal.training.health import (
    COLLAPSE_MARGIN,
    HEALTH_STATUSES,
    NOT_ASSESSED,
    MissingHealthError,
    assess_health,
    assess_health_from_confusion,
    health_of,
)

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = ROOT / "workflow/schemas/config.schema.yaml"


def history(errors, losses=None) -> list[dict]:
    losses = losses if losses is not None else [1.0] * len(errors)
    return [{"epoch": e + 1, "train_loss": loss, "train_error": err} for e, (loss, err) in enumerate(zip(losses, errors))]


FLAT = history([0.5, 0.2, 0.1, 0.1, 0.1])  # converged: flat over the last 2 epochs


def balanced(n_correct: int, n: int = 1000, k: int = 10):
    """Balanced labels over k classes and predictions with exactly n_correct right."""
    labels = np.arange(n) % k
    predictions = labels.copy()
    predictions[n_correct:] = (labels[n_correct:] + 1) % k
    return labels, predictions


# ------------------------------------------------------------------------- assess_health


def test_statuses_are_the_four_of_the_issue():
    assert HEALTH_STATUSES == ("trained", "diverged", "collapsed", "not converged")


def test_a_good_run_is_trained_and_its_record_is_plain_json():
    labels, predictions = balanced(900)
    health = assess_health(FLAT, labels, predictions, 10)
    assert health["status"] == "trained"
    assert health["measures"]["test_accuracy"] == pytest.approx(0.9)
    assert health["measures"]["chance"] == pytest.approx(0.1)
    assert "90.0 %" in health["reason"]
    json.dumps(health, allow_nan=False)  # run.json holds it as is


def test_collapse_boundary_is_two_points_above_chance():
    labels, predictions = balanced(120)  # 12.0 %: chance 10 % + 2 points
    assert COLLAPSE_MARGIN == 0.02
    health = assess_health(FLAT, labels, predictions, 10)
    assert health["status"] == "collapsed"
    assert health["measures"]["collapse_threshold"] == pytest.approx(0.12)
    assert "12.0 %" in health["reason"] and "10 classes" in health["reason"]
    assert assess_health(FLAT, *balanced(121), 10)["status"] == "trained"  # 12.1 %


def test_always_predicting_the_majority_class_is_collapsed_though_far_above_chance():
    labels = np.array([0] * 800 + [1] * 200)
    health = assess_health(FLAT, labels, np.zeros(1000, int), 2)
    assert health["status"] == "collapsed"  # 80 % accuracy, chance 50 %, majority share 80 %
    assert health["measures"]["majority_share"] == pytest.approx(0.8) and health["measures"]["majority_class"] == 0
    at_margin = np.zeros(1000, int)
    at_margin[800:820] = 1  # 82 %: majority + 2 points
    assert assess_health(FLAT, labels, at_margin, 2)["status"] == "collapsed"
    above = np.zeros(1000, int)
    above[800:830] = 1  # 83 %
    assert assess_health(FLAT, labels, above, 2)["status"] == "trained"


def test_ignored_labels_do_not_count():
    labels = np.array([[0, 1, 255, 255], [1, 0, 255, 255]])
    predictions = np.array([[0, 1, 0, 0], [1, 0, 0, 0]])
    health = assess_health(FLAT, labels, predictions, 2, ignore_index=255)
    assert health["measures"]["test_samples"] == 4 and health["measures"]["test_accuracy"] == 1.0


def test_non_finite_loss_or_logits_is_diverged_before_anything_else():
    labels, predictions = balanced(100)  # also collapsed
    nan_loss = history([0.9, 0.9, 0.9], losses=[1.0, float("nan"), float("inf")])
    health = assess_health(nan_loss, labels, predictions, 10)
    assert health["status"] == "diverged"
    assert health["measures"]["non_finite_loss_epochs"] == [2, 3] and "epoch(s) 2, 3" in health["reason"]
    logits = assess_health(FLAT, *balanced(900), 10, logits_finite=False)
    assert logits["status"] == "diverged" and "test logits are not all finite" in logits["reason"]


def test_still_falling_train_error_is_not_converged():
    # 10 epochs: window k = max(2, ceil(1.0)) = 2; 30 % -> 20 % is 5 points per epoch, 33 % relative
    falling = history([0.9, 0.8, 0.7, 0.6, 0.5, 0.45, 0.4, 0.3, 0.25, 0.2])
    health = assess_health(falling, *balanced(900), 10)
    assert health["status"] == "not converged"
    m = health["measures"]
    assert m["convergence_window"] == 2 and m["train_error_window_start"] == 0.3 and m["train_error_last"] == 0.2
    assert m["train_error_drop_per_epoch"] == pytest.approx(0.05) and m["train_error_relative_drop"] == pytest.approx(1 / 3)
    assert "from 30.0 % to 20.0 % over the last 2 of 10 epochs" in health["reason"]
    # 30 epochs: k = 3, measured from epoch 27 to 30
    thirty = history([0.5] * 26 + [0.30, 0.26, 0.23, 0.20])
    assert assess_health(thirty, *balanced(900), 10)["measures"]["convergence_window"] == 3
    assert assess_health(thirty, *balanced(900), 10)["status"] == "not converged"


def test_convergence_needs_both_a_fast_and_a_relatively_large_fall():
    exactly_one_point = history([0.5, 0.4, 0.22, 0.21, 0.20])  # 1 point per epoch: not more than 1
    assert assess_health(exactly_one_point, *balanced(900), 10)["status"] == "trained"
    slow_relative = history([0.9, 0.7, 0.60, 0.585, 0.57])  # 1.5 points/epoch but 5 % relative
    assert assess_health(slow_relative, *balanced(900), 10)["status"] == "trained"
    both = history([0.9, 0.7, 0.20, 0.18, 0.16])  # 2 points/epoch and 20 % relative
    assert assess_health(both, *balanced(900), 10)["status"] == "not converged"


def test_too_few_epochs_or_early_stopping_leave_convergence_unjudged():
    steep = history([0.9, 0.3])
    health = assess_health(steep, *balanced(900), 10)
    assert health["status"] == "trained" and not health["measures"]["convergence_judged"]
    assert "too few" in health["reason"]
    falling = history([0.9, 0.6, 0.4, 0.2])
    assert assess_health(falling, *balanced(900), 10)["status"] == "not converged"
    stopped = assess_health(falling, *balanced(900), 10, stopped_early=True)
    assert stopped["status"] == "trained" and "early stopping" in stopped["reason"]


def test_collapsed_takes_precedence_over_not_converged():
    falling = history([0.9, 0.6, 0.4, 0.2])
    assert assess_health(falling, *balanced(100), 10)["status"] == "collapsed"


def test_without_test_predictions_only_the_history_can_flag_a_run():
    assert assess_health(FLAT)["status"] == NOT_ASSESSED
    assert "collapse is not judged" in assess_health(FLAT)["reason"]
    assert assess_health(history([0.9, 0.6, 0.4, 0.2]))["status"] == "not converged"
    assert assess_health(pd.DataFrame(history([0.9, float("nan")], [1.0, float("nan")])))["status"] == "diverged"


def test_segmentation_collapse_is_judged_on_mean_iou_from_the_confusion_matrix():
    rng = np.random.default_rng(0)
    labels = rng.choice(3, size=(4, 16, 16), p=[0.9, 0.05, 0.05]).ravel()  # background-heavy, as in segmentation
    share = np.bincount(labels, minlength=3) / labels.size

    def confusion_of(predictions):
        confusion = np.zeros((3, 3), int)
        np.add.at(confusion, (labels, predictions), 1)
        return confusion

    background = assess_health_from_confusion(FLAT, confusion_of(np.zeros_like(labels)))
    assert background["status"] == "collapsed" and "mean IoU" in background["reason"]
    # all background: IoU(background) = its share, 0 for the two others
    assert background["measures"]["test_score"] == pytest.approx(share[0] / 3)
    assert background["measures"]["majority_score"] == pytest.approx(share[0] / 3)
    chance = np.mean([(s / 3) / (s + 1 / 3 - s / 3) for s in share])  # uniform guessing, independent of the truth
    assert background["measures"]["chance_score"] == pytest.approx(chance)
    # finds 60 % of each foreground class: pixel accuracy 96 %, barely above the 90 % background, yet it learnt
    predictions = np.where((labels > 0) & (rng.random(labels.size) < 0.6), labels, 0)
    found = assess_health_from_confusion(FLAT, confusion_of(predictions))
    assert found["status"] == "trained" and found["measures"]["test_score"] > 0.6
    assert found["measures"]["majority_share"] == pytest.approx(share[0])


def test_a_run_json_without_health_is_refused_with_the_re_write_command(tmp_path):
    path = tmp_path / "results/runs/d/a/l/r/seed0/run.json"
    with pytest.raises(MissingHealthError, match=r"no run health entry.*snakemake --cores 1 -f .*run\.json"):
        health_of({"epochs_done": 3}, path)
    assert health_of({"health": {"status": "collapsed", "reason": "x"}}, path)["status"] == "collapsed"


# ---------------------------------------------------------------- study tables, inventory


def write_run_json(path: Path, status: str | None, reason: str = "because") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    info = {"epochs_done": 3, "train_time_s": 1.0, "device": "cpu"}
    if status is not None:
        info["health"] = {"status": status, "reason": reason, "measures": {}}
    path.write_text(json.dumps(info))


@pytest.fixture
def ci_plan():
    return build_plan(validate_config(yaml.safe_load((ROOT / "config/test.yaml").read_text()), SCHEMA))


def test_study_table_has_each_runs_status_after_the_seed(tmp_path, ci_plan):
    study = ci_plan.studies["test_digits"]
    runs = list(study.runs)
    for run in runs:
        out = tmp_path / run.calibration_dir
        out.mkdir(parents=True)
        pd.DataFrame({"calibrator": ["uncalibrated", "uncalibrated", "ts_nll"], "metric": ["ece", "error", "ece"],
                      "bins": [15, None, 15], "value": [0.1, 0.2, 0.05]}).to_csv(out / "metrics.csv", index=False)
    assert ci_plan.study_inputs("test_digits") == [
        path for run in runs for path in (f"{run.calibration_dir}/metrics.csv", f"{run.run_dir}/run.json")]
    for run in runs[2:]:  # the config's lr-100 run
        write_run_json(tmp_path / run.run_dir / "run.json", "collapsed")
    write_run_json(tmp_path / runs[0].run_dir / "run.json", "trained")
    write_run_json(tmp_path / runs[1].run_dir / "run.json", None)  # written before health checks
    with pytest.raises(ValueError, match=rf"{runs[1].run_dir}/run.json has no run health entry.*-f"):
        study_table(ci_plan, "test_digits", tmp_path)
    write_run_json(tmp_path / runs[1].run_dir / "run.json", "collapsed")
    table = study_table(ci_plan, "test_digits", tmp_path)
    assert tuple(table.columns) == COLUMNS and COLUMNS[COLUMNS.index("seed") + 1] == "status"
    statuses = table.groupby(["loss", "recipe"])["status"].unique().map(list).to_dict()
    assert statuses == {(runs[0].loss, runs[0].recipe): ["trained"], (runs[1].loss, runs[1].recipe): ["collapsed"],
                        **{(run.loss, run.recipe): ["collapsed"] for run in runs[2:]}}


def test_segmentation_table_reads_the_status_beside_the_scores(tmp_path, ci_plan):
    runs = list(ci_plan.studies["test_segmentation"].runs)
    for index, run in enumerate(runs):
        out = tmp_path / run.evaluation_dir
        out.mkdir(parents=True)
        pd.DataFrame({"metric": ["iou"], "class": ["mean"], "value": [0.5]}).to_csv(out / "metrics.csv", index=False)
        write_run_json(out / "run.json", "not converged" if index == 0 else "trained")
    assert f"{runs[0].evaluation_dir}/run.json" in ci_plan.study_inputs("test_segmentation")
    table = study_table(ci_plan, "test_segmentation", tmp_path)
    assert tuple(table.columns) == SEGMENTATION_COLUMNS and SEGMENTATION_COLUMNS[8] == "status"
    assert table["status"].tolist() == ["not converged"] + ["trained"] * (len(runs) - 1)


def test_inventory_says_each_runs_status_and_why_and_counts_the_unhealthy(tmp_path):
    write_run_json(tmp_path / "results/runs/d/a/ce/r/seed0/run.json", "collapsed", "Test accuracy 10.0 % is low.")
    write_run_json(tmp_path / "results/runs/d/a/ce/r/seed1/run.json", "trained")
    write_run_json(tmp_path / "results/runs/d/a/ce/r/seed2/run.json", None)  # old record
    only_history = tmp_path / "results/runs/d/a/ce/r/seed3"
    only_history.mkdir(parents=True)
    pd.DataFrame(history([0.9, 0.6, 0.4, 0.2])).assign(wall_time_s=1.0).to_csv(only_history / "history.csv", index=False)
    write_run_json(tmp_path / "results/segmentation/s/u/dfl/r/seed0/run.json", "diverged")
    paths = [f"d/a/ce/r/seed{k}" for k in range(4)] + ["s/u/dfl/r/seed0"]
    (tmp_path / "results/runs/s/u/dfl/r/seed0").mkdir(parents=True)
    inventory = run_inventory(tmp_path, paths)
    assert list(inventory.columns[6:8]) == ["status", "status_reason"]
    assert inventory["status"].tolist() == ["collapsed", "trained", NOT_ASSESSED, "not converged", "diverged"]
    assert inventory.loc[0, "status_reason"] == "Test accuracy 10.0 % is low."
    assert "re-write it" in inventory.loc[2, "status_reason"]
    totals = summary(inventory)
    assert totals["unhealthy"] == {"diverged": 1, "collapsed": 1, "not converged": 1} and totals["not_assessed"] == 1
    warnings = health_warnings(tmp_path, paths + ["d/a/ce/r/seed9"])  # a run not trained yet: nothing to say
    assert warnings == [
        "focalcal: WARNING run d/a/ce/r/seed0 collapsed: Test accuracy 10.0 % is low.",
        f"focalcal: WARNING run d/a/ce/r/seed3 not converged: {inventory.loc[3, 'status_reason']}",
        "focalcal: WARNING run s/u/dfl/r/seed0 diverged: because",
    ]


def test_index_lists_unhealthy_runs_and_colours_their_status():
    config = validate_config(yaml.safe_load((ROOT / "config/test.yaml").read_text()), SCHEMA)
    report = report_plan(build_plan(config))
    inventory = pd.DataFrame([
        {"run": "d/a/ce/r/seed0", "status": "collapsed", "status_reason": "Test accuracy <10 %.", "epochs": 3,
         "train_time_s": 1.0, "job_wall_s": 2.0, "device": "cpu", "host": "h", "parameters": 10, "finished_at": "t"},
        {"run": "d/a/ce/r/seed1", "status": "trained", "status_reason": "Fine.", "epochs": 3,
         "train_time_s": 1.0, "job_wall_s": 2.0, "device": "cpu", "host": "h", "parameters": 10, "finished_at": "t"},
    ])
    page = build_index(report.manifest(config), inventory, "x: 1\n")
    assert "1 unhealthy run(s) (1 collapsed)" in page
    assert "<span class='unhealthy' title='Test accuracy &lt;10 %.'>collapsed</span>" in page
    assert "<span class='healthy' title='Fine.'>trained</span>" in page


# -------------------------------------------------------------------------- paper tables


def test_health_mark_names_the_unhealthy_share_of_the_runs_behind_a_number():
    rows = pd.DataFrame({"dataset": "d", "model": "a", "loss": "ce", "recipe": "r", "seed": [0, 0, 1, 2],
                         "status": ["collapsed", "collapsed", "trained", "not converged"]})
    assert tables.health_mark(rows) == "⚠ 1/3 collapsed, 1/3 not converged"
    assert tables.health_mark(rows.iloc[:1]) == "⚠ collapsed"
    assert tables.health_mark(rows.iloc[2:3]) == ""
    assert tables.health_mark(rows.drop(columns="status")) == ""


def test_paper_table_cells_from_an_unhealthy_seed_are_marked():
    config = validate_config(yaml.safe_load((ROOT / "config/studies/mukhoti2020.yaml").read_text()), SCHEMA)
    artifact = report_plan(build_plan(config)).artifact("mukhoti2020", "mukhoti2020_table1", "table")
    rows = []
    for seed, (pre, post, temperature, status) in enumerate([(0.04, 0.010, 2.4, "collapsed"),
                                                             (0.06, 0.014, 2.6, "trained")]):
        rows += [("cifar10", "resnet50", "ce", seed, status, "uncalibrated", "ece", 15, pre),
                 ("cifar10", "resnet50", "ce", seed, status, "ts_ece", "ece", 15, post),
                 ("cifar10", "resnet50", "ce", seed, status, "ts_ece", "temperature", None, temperature)]
    table = pd.DataFrame(rows, columns=["dataset", "model", "loss", "seed", "status", "calibrator", "metric", "bins",
                                        "value"]).assign(recipe="r")
    built = tables.build(artifact, table)
    assert set(built["health"]) == {"⚠ 1/2 collapsed"} and built["ours_mean"].notna().all()
    shown = tables.present(artifact.paper, artifact.builder, built)
    assert shown.loc[0, "ours ece post_t"] == "1.20 ± 0.28 (2.50) ⚠ 1/2 collapsed"
    assert shown.loc[0, "published ece post_t"] == "1.35 (2.50)"  # the paper's number is not ours: unmarked
    healthy = tables.build(artifact, table.assign(status="trained"))
    assert set(healthy["health"]) == {""}
    assert tables.present(artifact.paper, artifact.builder, healthy).loc[0, "ours ece post_t"] == "1.20 ± 0.28 (2.50)"


def test_segmentation_and_synthetic_tables_mark_their_unhealthy_runs():
    rows = [(fold, metric, cls, value, "collapsed" if fold == 0 else "trained")
            for fold in range(3) for metric, cls, value in (("iou", "mean", 0.5), ("hausdorff", "mean", 4.0))]
    table = pd.DataFrame(rows, columns=["seed", "metric", "class", "value", "status"]).assign(
        dataset="d", model="a", loss="ce", recipe="r")
    built = hossain2021.hossain_tables(table, {"settings": {}, "losses": {}})
    shown = tables.present("hossain2021", "hossain_tables", built)
    assert shown.loc[0, "ours IoU (%)"] == "50.00 ± 0.00 ⚠ 1/3 collapsed"
    panel = pd.DataFrame({"dataset": "d", "model": "a", "loss": "ce", "recipe": "r", "seed": 0, "status": "diverged",
                          "calibrator": "raw", "metric": ["error", "kl_posterior", "ece"], "bins": [None, None, 10],
                          "value": [0.5, 0.1, 0.2]})
    params = {"runs": [{"path": "p", "columns": {"dataset": "d", "model": "a", "loss": "ce", "seed": 0}}],
              "panels": [{"run": "p", "label": "CE", "calibrator": "raw"}], "bins": 10}
    scores = tables.present("charoenphakdee2021", "synthetic_scores", charoenphakdee2021.synthetic_scores(panel, params))
    assert scores["panel"].tolist() == ["CE ⚠ diverged"]


# ------------------------------------------------------------ a real run that collapses


def test_a_run_trained_with_lr_100_is_flagged_collapsed_in_its_run_json_and_the_inventory(tmp_path):
    """digits, a small CNN, SGD at lr 100: the weights blow up (the loss stays finite) and the
    model predicts one class on every test image — 10 % accuracy on 10 balanced classes."""
    from focalcal.training import RunConfig, train_run

    run_path = "digits/cnn_small/ce/lr100/seed0"
    run_dir = tmp_path / "results/runs" / run_path
    config = RunConfig.from_dict({
        "dataset": {"name": "digits"}, "model": {"name": "cnn_small", "width": 4}, "loss": {"name": "cross_entropy"},
        "recipe": {"epochs": 3, "batch_size": 64, "augmentation": "none", "optimizer": {"name": "sgd", "lr": 100.0}},
        "seed": 0, "device": "cpu",
    })
    train_run(config, run_dir, data_root=str(tmp_path / "data"), progress=False)
    info = json.loads((run_dir / "run.json").read_text())
    health = info["health"]
    assert health["status"] == "collapsed", health
    assert health["measures"]["test_accuracy"] <= health["measures"]["collapse_threshold"]
    assert all(math.isfinite(row["train_loss"]) for row in pd.read_csv(run_dir / "history.csv").to_dict("records"))
    assert {"config", "fingerprint", "epochs_done", "split_hash", "device", "versions"} <= set(info)  # kept
    inventory = run_inventory(tmp_path, [run_path])
    assert inventory.loc[0, "status"] == "collapsed"
    assert inventory.loc[0, "status_reason"].startswith("Test accuracy")
    assert health_warnings(tmp_path, [run_path]) == [f"focalcal: WARNING run {run_path} collapsed: {health['reason']}"]
