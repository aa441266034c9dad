"""The segmentation track as workflow stages: folds in the plan, the test-fold evaluation, and
hossain2021's Tables 2-3 with the published values beside ours."""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
import torch.nn.functional as F
import yaml

from focalcal import metrics
from focalcal.papers.hossain2021.page import hossain_tables
from focalcal.pipeline import ConfigError, build_plan, validate_config
from focalcal.training import RunConfig, evaluate_segmentation, load_finished_run, train_run

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"


@pytest.fixture
def config() -> dict:
    return yaml.safe_load((ROOT / "config" / "test.yaml").read_text())


def test_folds_expand_to_one_run_per_fold_tested_on_that_fold(config):
    plan = build_plan(validate_config(config, SCHEMA))
    runs = sorted((r for r in plan.runs.values() if r.segmentation), key=lambda r: (r.loss, r.seed))
    assert [(r.loss, r.seed, r.fold, r.n_folds) for r in runs] == [
        ("ce", 0, 0, 2), ("ce", 1, 1, 2), ("dfl", 0, 0, 2), ("dfl", 1, 1, 2)]
    run_config = plan.run_config(runs[1])
    assert run_config["dataset"] == {"name": "synthetic_segmentation", "n_samples": 60, "size": 16, "n_folds": 2, "fold": 1}
    assert run_config["seed"] == 1
    assert not plan.calibrators[runs[0].path]  # evaluated, not calibrated
    assert plan.study_inputs("test_segmentation") == [f"results/segmentation/{r.path}/{name}" for r in (
        plan.runs[p] for p in plan.runs if plan.runs[p].segmentation) for name in ("metrics.csv", "run.json")]
    assert "results/tables/test_segmentation.csv" in plan.table_targets()
    assert len(plan.evaluation_targets()) == 8  # metrics.csv and samples.npz of 4 runs
    assert not plan.training_targets()


def test_fold_and_study_mistakes_name_the_key(config):
    grid = config["studies"]["test_segmentation"]["grids"][0]
    both = copy.deepcopy(config)
    both["studies"]["test_segmentation"]["grids"][0]["seeds"] = [0]
    with pytest.raises(ConfigError, match=r"test_segmentation\.grids\[0\]: give exactly one of 'seeds' or 'folds'"):
        validate_config(both, SCHEMA)
    calibrated = copy.deepcopy(config)
    calibrated["studies"]["test_segmentation"]["grids"][0]["calibrators"] = ["ts_nll"]
    with pytest.raises(ConfigError, match=r"grids\[0\]\.calibrators: segmentation datasets \['tiny_seg'\]"):
        validate_config(calibrated, SCHEMA)
    mixed = copy.deepcopy(config)
    mixed["studies"]["test_segmentation"]["grids"].append({**copy.deepcopy(grid), "datasets": ["digits"],
                                                           "models": ["cnn_small"]})
    with pytest.raises(ConfigError, match="test_segmentation mixes segmentation, translation or classification runs"):
        build_plan(validate_config(mixed, SCHEMA))
    twice = copy.deepcopy(config)
    twice["studies"]["again"] = copy.deepcopy(twice["studies"]["test_segmentation"])
    twice["studies"]["again"]["grids"][0]["folds"] = 3
    with pytest.raises(ConfigError, match="planned both with n_folds=2 and n_folds=3"):
        build_plan(validate_config(twice, SCHEMA))


@pytest.fixture(scope="module")
def finished_segmentation_run(tmp_path_factory):
    run_dir, data_root = tmp_path_factory.mktemp("run"), tmp_path_factory.mktemp("data")
    config = RunConfig.from_dict({
        "dataset": {"name": "synthetic_segmentation", "n_samples": 48, "size": 16, "n_folds": 3, "fold": 2},
        "model": {"name": "unet_small", "base_channels": 4, "depth": 2},
        "loss": {"name": "dual_focal"},
        "recipe": {"epochs": 2, "batch_size": 8, "eval_batch_size": 5, "augmentation": "none",
                   "optimizer": {"name": "adam", "lr": 0.003}},
        "seed": 2, "device": "cpu",
    })
    train_run(config, run_dir, data_root=str(data_root), progress=False, export=False)
    return load_finished_run(config, run_dir, str(data_root))


def test_evaluation_equals_the_metrics_on_the_whole_test_fold(finished_segmentation_run):
    """Accumulated over batches of 5 images, the numbers are those of the metrics on all test
    images at once."""
    trainer = finished_segmentation_run
    table, samples = evaluate_segmentation(trainer, n_bins=15, n_samples=3)
    value = {(m, c): v for m, c, v in table.itertuples(index=False)}
    inputs, labels = trainer.eval_splits["test"]
    assert labels.shape[0] == 16  # fold 2 of 3 folds of 48 images
    logits = trainer.predict(inputs).double()
    pred, target = logits.argmax(1).numpy(), labels.numpy()
    scores = metrics.iou(pred, target, 4)
    assert value[("iou", "mean")] == pytest.approx(scores.mean, abs=1e-12)
    for k in range(4):
        assert value[("iou", str(k))] == pytest.approx(scores.per_class[k], abs=1e-12, nan_ok=True)
    assert value[("pixel_accuracy", "all")] == pytest.approx(metrics.pixel_accuracy(pred, target), abs=1e-12)
    # the run's health is judged on the same pixels; the majority share is the background's
    assert trainer.health["measures"]["test_accuracy"] == pytest.approx(value[("pixel_accuracy", "all")], abs=1e-12)
    assert trainer.health["measures"]["majority_share"] == pytest.approx((target == 0).mean())
    assert value[("pixel_ece", "all")] == pytest.approx(metrics.pixel_ece(logits.numpy(), target, 15, from_logits=True),
                                                        abs=1e-9)
    assert value[("nll", "all")] == pytest.approx(float(F.cross_entropy(logits, labels)), rel=1e-9)
    distances = metrics.hausdorff_distance(pred, target, 4)
    finite = np.where(np.isfinite(distances), distances, np.nan)
    for k in range(4):
        expected = np.nanmean(finite[:, k]) if np.any(np.isfinite(finite[:, k])) else np.nan
        assert value[("hausdorff", str(k))] == pytest.approx(expected, abs=1e-12, nan_ok=True)
    assert value[("hausdorff_missed", "all")] == pytest.approx(np.isinf(distances).sum() / (~np.isnan(distances)).sum())
    assert samples["images"].shape == (3, 3, 16, 16)
    assert np.array_equal(samples["true_masks"], target[:3])
    assert np.array_equal(samples["predicted_masks"], pred[:3])
    assert np.array_equal(samples["images"], trainer.dataset.test.x[:3].numpy())  # as stored, not normalised


def test_evaluation_refuses_a_classification_run(tmp_path):
    config = RunConfig.from_dict({"dataset": {"name": "synthetic1d", "n_samples": 300}, "model": {"name": "mlp"},
                                  "loss": {"name": "cross_entropy"}, "seed": 0, "device": "cpu",
                                  "recipe": {"epochs": 1, "batch_size": 64, "optimizer": {"name": "sgd", "lr": 0.1}}})
    train_run(config, tmp_path, data_root=str(tmp_path), progress=False, export=False)
    with pytest.raises(ValueError, match="not a segmentation run"):
        evaluate_segmentation(load_finished_run(config, tmp_path, str(tmp_path)))


def test_tables_2_3_average_folds_and_put_the_published_values_beside():
    rows = []
    for loss, ious in (("dfl", [0.60, 0.70, 0.80]), ("ce", [0.50, 0.52, 0.54])):
        for fold, iou in enumerate(ious):
            for metric, cls, value in (("iou", "mean", iou), ("iou", "1", iou - 0.1), ("hausdorff", "mean", 4.0 + fold),
                                       ("hausdorff_missed", "all", 0.0), ("pixel_accuracy", "all", 0.9),
                                       ("pixel_ece", "all", 0.05)):
                rows.append((loss, fold, metric, cls, value))
    table = pd.DataFrame(rows, columns=["loss", "seed", "metric", "class", "value"]).assign(
        dataset="camvid", model="deeplabv3plus", recipe="r", fold=lambda d: d["seed"], n_folds=3)
    params = {"settings": {"camvid/deeplabv3plus": {"dataset": "CamVid", "model": "DeepLabV3+", "stand_in": False,
                                                    "table": 2, "describe": "CamVid, DeepLabV3+"}},
              "losses": {"dfl": {"label": "DFL", "paper": "DFL"}, "ce": {"label": "CE", "paper": "CE"}}}
    out = hossain_tables(table, params).set_index("loss")
    assert out.loc["DFL", "iou_mean"] == pytest.approx(70.0)
    assert out.loc["DFL", "iou_std"] == pytest.approx(10.0)  # sample std over the 3 folds
    assert out.loc["CE", "hd_mean"] == pytest.approx(5.0) and out.loc["CE", "n_folds"] == 3
    assert out.loc["DFL", "published_iou_mean"] == 64.99 and out.loc["DFL", "published_hd_std"] == 2.11
    assert out.loc["CE", "published_iou_mean"] == 61.64 and out.loc["CE", "paper_table"] == 2


def test_dual_focal_and_every_loss_of_the_study_train_a_segmentation_batch_with_finite_gradients():
    torch.manual_seed(0)
    logits = torch.randn(2, 4, 16, 16, requires_grad=True)
    target = torch.randint(0, 4, (2, 16, 16))
    from focalcal import losses

    for spec in ({"name": "cross_entropy"}, {"name": "weighted_cross_entropy", "weights": [0.3, 1, 1, 1]},
                 {"name": "dual_cross_entropy"}, {"name": "focal", "gamma": 1}, {"name": "generalized_dice"},
                 {"name": "dual_focal"}):
        loss = losses.build(spec)(logits, target)
        grad, = torch.autograd.grad(loss, logits)
        assert torch.isfinite(loss) and torch.isfinite(grad).all() and grad.abs().sum() > 0, spec
