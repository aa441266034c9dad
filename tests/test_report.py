"""focalcal.report: what each config plans, paper tables against hand-computed values and
the published numbers, stored calibrators applied without refitting, inventory, index."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from scipy.special import softmax

from focalcal import catalog
from focalcal.calibration import PsiCalibration, TemperatureScaling, psi
from focalcal.catalog import calibrator_role
from focalcal.core import spec_facts
from focalcal.papers.charoenphakdee2021.page import panel_scores
from focalcal.pipeline import build_plan, validate_config
from focalcal.report import published, tables
from focalcal.report.figure_inputs import apply_stored, inputs_of_test_points
from focalcal.report.index import build_index
from focalcal.report.inventory import run_inventory, summary
from focalcal.report.targets import THEORY_FIGURES, report_plan, study_artifacts

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = ROOT / "workflow/schemas/config.schema.yaml"


def load_config(*names: str) -> dict:
    config = {}
    for name in names:
        config.update(yaml.safe_load((ROOT / name).read_text()))
    validate_config(config, str(SCHEMA))
    return config


def names(report, study: str) -> set[str]:
    return {f"{a.kind}:{a.name}" for a in report.studies[study].artifacts}


# ------------------------------------------------------------------------------ naming


def test_loss_info_reads_gamma_and_label_and_each_paper_its_own_names():
    from focalcal.papers.charoenphakdee2021.labels import training_paradigm as paradigm
    from focalcal.papers.komisarenko2024.labels import approach
    from focalcal.papers.mukhoti2020.labels import mukhoti_name

    focal = spec_facts.loss_info({"name": "focal", "gamma": 3})
    assert (focal.gamma, paradigm(focal), focal.label, mukhoti_name(focal)) == (3.0, "Standard", "FL γ=3", "FL-3")
    assert approach(focal) == ("focal", 3.0)
    smoothed = spec_facts.loss_info({"name": "focal", "gamma": 2, "smoothing": 0.1})
    assert (paradigm(smoothed), mukhoti_name(smoothed), approach(smoothed)) == ("LS", None, None)
    ce = spec_facts.loss_info({"name": "cross_entropy"})
    assert (ce.gamma, mukhoti_name(ce), approach(ce)) == (0.0, "Cross-Entropy", ("cross_entropy", None))
    focal0 = spec_facts.loss_info({"name": "focal", "gamma": 0})
    assert (mukhoti_name(focal0), approach(focal0)) == ("Cross-Entropy", ("cross_entropy", None))
    assert mukhoti_name(spec_facts.loss_info({"name": "label_smoothing"})) == "LS-0.05"
    assert mukhoti_name(spec_facts.loss_info({"name": "brier"})) == "Brier Loss"
    assert approach(spec_facts.loss_info({"name": "flsd53"})) == ("flsd53", None)
    brier = spec_facts.loss_info({"name": "brier"})
    assert (brier.gamma, paradigm(brier), approach(brier)) == (None, None, None)
    with pytest.raises(ValueError, match="loss spec"):
        spec_facts.loss_info({"gamma": 2})


def test_every_calibrator_of_the_default_config_has_a_role():
    plan = build_plan(load_config("config/config.yaml"))
    roles = {key: calibrator_role(spec) for methods in plan.calibrators.values() for key, spec in methods.items()}
    assert roles == {"raw": "raw", "psi": "psi", "ts_nll": "ts_nll", "ts_ece": "ts_ece", "ts_focal": "ts_focal",
                     "ts_focal_psi": "ts_focal_psi", "ts_grid_ece": "ts_grid_ece", "ts_grid_nll": "ts_grid_nll",
                     "fts_ece": "fts_ece", "fts_nll": "fts_nll"}
    assert calibrator_role({"build": {"name": "isotonic"}}) == "other"
    with pytest.raises(ValueError, match="resolved calibrator"):
        calibrator_role({"name": "identity"})


def test_paper_setting_names_stand_ins_with_the_papers_reference_model():
    reference = catalog.paper("mukhoti2020").reference_model
    assert spec_facts.paper_setting({"name": "cifar10"}, {"name": "resnet110_bottleneck"}, reference).describe() == "CIFAR-10, ResNet 110"
    stand_in = spec_facts.paper_setting({"name": "mnist1d"}, {"name": "cnn1d"}, reference)
    assert (stand_in.dataset, stand_in.model, stand_in.stand_in) == ("CIFAR-10", "ResNet 50", True)
    alone = spec_facts.paper_setting({"name": "mnist1d"}, {"name": "cnn1d"}, None)  # a paper that names no reference model
    assert (alone.model, alone.describe()) == (None, "CIFAR-10 (ours is a small stand-in)")
    assert spec_facts.paper_setting({"name": "synthetic1d"}, {"name": "mlp"}, reference).dataset is None


# ----------------------------------------------------------------------------- planning


def test_default_config_plans_every_paper_figure_its_runs_support():
    report = report_plan(build_plan(load_config("config/config.yaml")))
    assert [a.name for a in report.theory] == list(THEORY_FIGURES)
    assert names(report, "charoenphakdee2021_posterior") == {"figure:charoenphakdee2021_fig3_synthetic1d",
                                                            "table:charoenphakdee2021_fig3_synthetic1d"}
    assert names(report, "charoenphakdee2021_paradigms") == {
        "figure:charoenphakdee2021_fig4_digits", "figure:charoenphakdee2021_fig4_mnist1d_1k_test10k",
        "figure:charoenphakdee2021_fig4_mnist1d_s", "figure:charoenphakdee2021_fig5_ece_boxplots",
        "figure:charoenphakdee2021_fig6_ece_boxplots", "table:charoenphakdee2021_ece_summary"}
    assert names(report, "mukhoti2020") == {f"table:mukhoti2020_table{n}" for n in (1, 2, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13)} | {
        "figure:mukhoti2020_fig1_training_reliability", "figure:mukhoti2020_fig2_training_curves",
        "figure:mukhoti2020_fig3_training_comparison", "figure:mukhoti2020_fig4bcd_gradient_norms",
        "figure:mukhoti2020_fig9_test_confidences", "figure:mukhoti2020_fig10_feature_norms"}
    fig9 = report.artifact("mukhoti2020", "mukhoti2020_fig9_test_confidences", "figure")
    assert [m["label"] for m in fig9.params["models"]] == ["CE", "Brier", "MMCE", "FLSD-53"]
    assert {m["post"] for m in fig9.params["models"]} == {"ts_ece"} and {m["raw"] for m in fig9.params["models"]} == {"raw"}
    assert len({m["logits"].split("/seed")[1] for m in fig9.params["models"]}) == 1  # one seed for all four
    fig4bcd = report.artifact("mukhoti2020", "mukhoti2020_fig4bcd_gradient_norms", "figure")
    assert list(fig4bcd.params["run_dirs"]) == ["CE", "FL γ=1", "FL γ=2", "FL γ=3"] and fig4bcd.params["epochs"] == [5, 20, 40]
    assert names(report, "komisarenko2024") == {"table:komisarenko2024_table1", "figure:komisarenko2024_fig8_optimal_temperature"}
    # Fig 4 on MNIST-1D: all three paradigms, on the model that has all three (cnn1d_32), seed 0
    fig4 = report.artifact("charoenphakdee2021_paradigms", "charoenphakdee2021_fig4_mnist1d_1k_test10k", "figure")
    assert fig4.params["model"] == "cnn1d_32"
    assert {(p["paradigm"], p["gamma"]) for p in fig4.params["panels"]} == {
        (paradigm, g) for paradigm in ("Standard", "TS_FL", "LS") for g in (0.0, 1.0, 2.0, 3.0)}
    assert all(p["run"].endswith("seed0") for p in fig4.params["panels"])
    # Fig 3 (synthetic): raw of CE, FL 1, FL 5, then TS_NLL and Ψ^γ of the focal runs
    fig3 = report.artifact("charoenphakdee2021_posterior", "charoenphakdee2021_fig3_synthetic1d", "figure")
    assert [p["label"] for p in fig3.params["panels"]] == [
        "CE", "FL γ=1", "FL γ=5", "FL γ=1 + TS_NLL", "FL γ=5 + TS_NLL", "FL γ=1 + Ψ^γ", "FL γ=5 + Ψ^γ"]
    # mukhoti2020 Table 1 holds the paper's Table 1 losses, Table 5 the focal variants, Table 9 all
    tables_of = {a.name: set(a.params["losses"]) for a in report.studies["mukhoti2020"].artifacts if a.kind == "table"}
    assert tables_of["mukhoti2020_table1"] == {"ce", "brier", "mmce", "ls0.05", "flsd53"}
    assert tables_of["mukhoti2020_table4"] == {"ce", "brier", "mmce", "ls0.05", "flsd53", "focal3", "flsc532"}
    assert tables_of["mukhoti2020_table5"] == {"focal1", "focal2", "focal3", "flsc531", "flsc532", "flsd53", "flsd532"}
    assert len(tables_of["mukhoti2020_table9"]) == 11
    # Fig 8 draws the CE and focal runs' stored ECE-chosen focal TS
    fig8 = report.artifact("komisarenko2024", "komisarenko2024_fig8_optimal_temperature", "figure")
    assert fig8.params["criterion"] == "ece" and {r["loss"] for r in fig8.params["runs"]} == {"CE", "FL γ=1", "FL γ=3", "FL γ=7"}
    assert len(fig8.inputs) == 4 * 3  # 4 losses x 3 seeds of calibration.json
    json.dumps(report.manifest({"x": 1}))  # the manifest is JSON


def test_what_a_config_cannot_support_is_not_planned_and_said():
    config = load_config("config/test.yaml")
    report = report_plan(build_plan(config))
    assert "figure:mukhoti2020_fig1_training_reliability" not in names(report, "test_digits")
    assert any("reliability_epochs" in note for note in report.studies["test_digits"].not_planned)
    # without Ψ^γ or temperature scaling, and without a cross-entropy run
    reduced = copy.deepcopy(config)
    reduced["studies"]["test_posterior"]["grids"][0]["calibrators"] = ["ts_nll"]
    reduced["studies"]["test_digits"]["grids"] = reduced["studies"]["test_digits"]["grids"][:1]  # no lr-100 CE run
    reduced["studies"]["test_digits"]["grids"][0]["losses"] = ["focal1"]
    reduced["studies"]["test_digits"]["grids"][0]["calibrators"] = ["ts_nll"]
    plan = build_plan(reduced)
    posterior = study_artifacts(plan, "test_posterior")
    assert posterior.artifacts == [] and any("uncalibrated" in note for note in posterior.not_planned)
    digits = study_artifacts(plan, "test_digits")
    assert digits.artifacts == []
    assert any("identity calibrator" in note for note in digits.not_planned)
    assert any("cross-entropy run" in note for note in digits.not_planned)
    with pytest.raises(ValueError, match="no study"):
        study_artifacts(plan, "missing")


def test_paper_scale_study_configs_plan_their_tables_and_refuse_a_study_named_theory():
    mukhoti = report_plan(build_plan(load_config("config/studies/mukhoti2020.yaml")))
    assert {a.name for a in mukhoti.studies["mukhoti2020"].artifacts if a.kind == "table"} == {
        f"mukhoti2020_table{n}" for n in (1, 2, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13)}
    hossain = study_artifacts(build_plan(load_config("config/studies/hossain2021.yaml")), "hossain2021")
    names = {a.name for a in hossain.artifacts}
    assert {"hossain2021_tables2_3", "hossain2021_scores_over_folds"} <= names
    assert {f"hossain2021_overlays_{d}_{m}" for d in ("prostate_mri", "prostate_trus", "camvid", "cityscapes")
            for m in ("deeplabv3plus", "vgg19_fcn")} <= names  # one per data set and architecture, fold 0
    table = next(a for a in hossain.artifacts if a.name == "hossain2021_tables2_3")
    assert table.params["settings"]["camvid/vgg19_fcn"] == {
        "dataset": "CamVid", "model": "VGG19 FCN", "stand_in": False, "table": 3, "describe": "CamVid, VGG19 FCN"}
    assert table.params["settings"]["prostate_trus/deeplabv3plus"]["dataset"] == "TRUS prostate"
    assert table.params["losses"]["focal1_alpha1"]["paper"] == "FL"
    config = load_config("config/test.yaml")
    config["studies"]["theory"] = config["studies"].pop("test_digits")
    with pytest.raises(ValueError, match="theory"):
        report_plan(build_plan(config))


# ------------------------------------------------------------------------------ tables


def tidy(study: str, rows: list[tuple]) -> pd.DataFrame:
    """A study table from (dataset, model, loss, seed, method, metric, bins, value) tuples."""
    frame = pd.DataFrame(rows, columns=["dataset", "model", "loss", "seed", "calibrator", "metric", "bins", "value"])
    frame = frame.assign(study=study, paper="p", mirrors="m", recipe="r")
    frame["bins"] = frame["bins"].astype("Float64")
    return frame


def test_mukhoti_table_averages_seeds_and_puts_the_published_cell_beside():
    report = report_plan(build_plan(load_config("config/studies/mukhoti2020.yaml")))
    artifact = report.artifact("mukhoti2020", "mukhoti2020_table1", "table")
    rows = []
    for seed, (pre, post, temperature) in enumerate([(0.04, 0.010, 2.4), (0.06, 0.014, 2.6)]):
        rows += [("cifar10", "resnet50", "ce", seed, "uncalibrated", "ece", 15, pre),
                 ("cifar10", "resnet50", "ce", seed, "uncalibrated", "ece", 10, 0.5),  # other bins: ignored
                 ("cifar10", "resnet50", "ce", seed, "ts_ece", "ece", 15, post),
                 ("cifar10", "resnet50", "ce", seed, "ts_ece", "temperature", None, temperature)]
    built = tables.build(artifact, tidy("mukhoti2020", rows)).set_index("stage")
    assert built.loc["pre_t", "ours_mean"] == pytest.approx(5.0)
    assert built.loc["pre_t", "ours_std"] == pytest.approx(np.std([4.0, 6.0], ddof=1))
    assert built.loc["post_t", "ours_mean"] == pytest.approx(1.2)
    assert built.loc["post_t", "ours_temperature"] == pytest.approx(2.5)
    # the paper's Table 1, CIFAR-10 / ResNet 50 / Cross-Entropy: 4.35 before, 1.35 (T = 2.5) after
    assert built.loc["pre_t", "published"] == pytest.approx(4.35)
    assert (built.loc["post_t", "published"], built.loc["post_t", "published_temperature"]) == (pytest.approx(1.35), pytest.approx(2.5))
    assert not built["stand_in"].any() and set(built["n_seeds"]) == {2}
    shown = tables.present(artifact.paper, artifact.builder, built.reset_index())
    assert shown.loc[0, "ours ece post_t"] == "1.20 ± 0.28 (2.50)"
    assert shown.loc[0, "published ece post_t"] == "1.35 (2.50)"


def test_mukhoti_table8_compares_top5_error_with_100_minus_published_accuracy():
    report = report_plan(build_plan(load_config("config/studies/mukhoti2020.yaml")))
    artifact = report.artifact("mukhoti2020", "mukhoti2020_table8", "table")
    built = tables.build(artifact, tidy("mukhoti2020", [("cifar100", "resnet50", "ce", 0, "uncalibrated", "top5_error", None, 0.07)]))
    row = built.iloc[0]
    assert row["ours_mean"] == pytest.approx(7.0) and row["published"] == pytest.approx(100 - 93.77)


def test_komisarenko_table_reads_chosen_t_and_gamma_and_the_published_row():
    report = report_plan(build_plan(load_config("config/studies/komisarenko2024.yaml")))
    artifact = report.artifact("komisarenko2024", "komisarenko2024_table1", "table")
    rows = []
    for seed, gamma_ev in enumerate([5.0, 5.0, 1.0]):
        for method, temperature, gamma in (("ts_grid_ece", 0.9, 0.0), ("ts_grid_nll", 0.95, 0.0),
                                           ("fts_ece", 1.2, gamma_ev), ("fts_nll", 1.1, 0.5)):
            rows += [("cifar10", "resnet50", "focal3", seed, method, "error", None, 0.05 + 0.01 * seed),
                     ("cifar10", "resnet50", "focal3", seed, method, "nll", None, 0.2),
                     ("cifar10", "resnet50", "focal3", seed, method, "adaece", 15, 0.01),
                     ("cifar10", "resnet50", "focal3", seed, method, "temperature", None, temperature),
                     ("cifar10", "resnet50", "focal3", seed, method, "gamma", None, gamma)]
    built = tables.build(artifact, tidy("komisarenko2024", rows)).set_index("calibration")
    fts = built.loc["focal_temperature_scaling"]
    assert fts["accuracy_mean"] == pytest.approx(94.0) and fts["accuracy_std"] == pytest.approx(1.0)
    assert (fts["ece_mean"], fts["ece_temperature"], fts["ece_gamma_eval"]) == (pytest.approx(1.0), pytest.approx(1.2), 5.0)
    assert (fts["logloss_mean"], fts["logloss_temperature"], fts["logloss_gamma_eval"]) == (pytest.approx(0.2), pytest.approx(1.1), 0.5)
    # the paper's CIFAR-10, focal γ_tr = 3 rows
    assert fts["published_gamma_eval"] == 5.0 and fts["paper_dataset"] == "CIFAR-10"
    reference = published.load("komisarenko2024_table1")
    expected = reference[(reference.dataset == "CIFAR-10") & (reference.approach == "focal") & (reference.gamma_train == 3)
                         & (reference.calibration == "temperature_scaling")].iloc[0]
    assert built.loc["temperature_scaling", "published_ece_mean"] == pytest.approx(expected["ece_mean"])
    assert built.loc["temperature_scaling", "ece_gamma_eval"] == 0.0


def test_published_tables_load_and_unknown_names_are_refused():
    assert len(published.available()) == 18 and "hossain2021_table2" in published.available()
    assert len(published.load("mukhoti2020_table1")) == 110
    assert "komisarenko2024_table1" in published.readme()
    with pytest.raises(ValueError, match="no published table"):
        published.load("mukhoti2020_table99")


# ------------------------------------------------------------------ stored calibrators


def test_stored_calibrators_reproduce_the_fitted_probabilities_without_refitting():
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 4, 400)
    logits = rng.normal(size=(400, 4)) * 3 + 4 * np.eye(4)[labels]
    scaling = TemperatureScaling(objective="focal", gamma=2.0).fit(logits, labels)
    stored = {
        "ts_focal": {"fitted": scaling.to_dict()},
        "ts_focal_psi": {"fitted": PsiCalibration(gamma=2.0).fit(logits, labels).to_dict(), "after": scaling.to_dict()},
    }
    test = rng.normal(size=(50, 4)) * 5
    np.testing.assert_allclose(apply_stored(stored, "ts_focal", test), scaling.transform(test), rtol=1e-12)
    # TS_FL + Ψ^γ: Ψ^2 of the temperature-scaled softmax, computed independently
    np.testing.assert_allclose(apply_stored(stored, "ts_focal_psi", test),
                               psi(softmax(test / scaling.temperature_, axis=1), 2.0), rtol=1e-9, atol=1e-12)
    with pytest.raises(ValueError, match="no calibrator 'missing'"):
        apply_stored(stored, "missing", test)


def test_panel_scores_read_one_row_per_metric():
    table = tidy("s", [("d", "a", "ce", 0, "raw", "error", None, 0.25), ("d", "a", "ce", 0, "raw", "kl_posterior", None, 0.1),
                       ("d", "a", "ce", 0, "raw", "ece", 10, 0.05), ("d", "a", "ce", 0, "raw", "ece", 15, 0.07)])
    assert panel_scores(table, {"dataset": "d", "model": "a", "loss": "ce", "seed": 0}, "raw", 10) == {
        "ERR": 0.25, "KLD": 0.1, "ECE": 0.05}
    with pytest.raises(ValueError, match="0 rows of error"):
        panel_scores(table, {"dataset": "d", "model": "a", "loss": "ce", "seed": 1}, "raw", 10)


def test_synthetic_test_inputs_come_from_logits_or_from_the_reloaded_split(tmp_path):
    from focalcal.data import load

    dataset = load("synthetic1d", root=str(tmp_path), n_samples=300)
    run_dir = tmp_path / "results/runs/synthetic1d/mlp/ce/r/seed0"
    run_dir.mkdir(parents=True)
    (run_dir / "run_config.json").write_text(json.dumps({
        "dataset": {"name": "synthetic1d", "n_samples": 300}, "model": {"name": "mlp"}, "loss": {"name": "cross_entropy"},
        "recipe": {"epochs": 1}, "seed": 0}))
    (run_dir / "run.json").write_text(json.dumps({"split_hash": dataset.split_hash}))
    run = {"path": "synthetic1d/mlp/ce/r/seed0", "run_config": str(run_dir.relative_to(tmp_path) / "run_config.json"),
           "info": str(run_dir.relative_to(tmp_path) / "run.json")}
    labels = dataset.test.y.numpy()
    reloaded = inputs_of_test_points(tmp_path, run, {"test_labels": labels}, "data")
    np.testing.assert_array_equal(reloaded[:, 0], dataset.test.x.numpy()[:, 0])
    dumped = inputs_of_test_points(tmp_path, run, {"test_labels": labels, "test_inputs": reloaded[:, 0] * 2}, "data")
    np.testing.assert_array_equal(dumped[:, 0], reloaded[:, 0] * 2)
    (run_dir / "run.json").write_text(json.dumps({"split_hash": "0" * 64}))
    with pytest.raises(ValueError, match="split"):
        inputs_of_test_points(tmp_path, run, {"test_labels": labels}, "data")


# ----------------------------------------------------------------- inventory and index


def test_inventory_reads_run_json_and_falls_back_to_history(tmp_path):
    done = tmp_path / "results/runs/d/a/ce/r/seed0"
    done.mkdir(parents=True)
    (done / "run.json").write_text(json.dumps({"epochs_done": 30, "train_time_s": 12.5, "device": "cpu (1 threads)",
                                               "host": "h", "parameters": 1000, "finished_at": "now"}))
    bench = tmp_path / "results/benchmarks/train/d/a/ce/r/seed0.tsv"
    bench.parent.mkdir(parents=True)
    bench.write_text("s\th:m:s\n20.5\t0:00:20\n")
    partial = tmp_path / "results/runs/d/a/focal1/r/seed1"
    partial.mkdir(parents=True)
    pd.DataFrame({"epoch": [1, 2, 3], "wall_time_s": [1.0, 2.0, 3.5]}).to_csv(partial / "history.csv", index=False)
    segmented = tmp_path / "results/runs/s/u/dfl/r/seed2"  # segmentation: run.json beside its scores
    segmented.mkdir(parents=True)
    pd.DataFrame({"epoch": [1, 2], "wall_time_s": [1.0, 2.0]}).to_csv(segmented / "history.csv", index=False)
    scored = tmp_path / "results/segmentation/s/u/dfl/r/seed2"
    scored.mkdir(parents=True)
    (scored / "run.json").write_text(json.dumps({"epochs_done": 2, "train_time_s": 2.0, "device": "cuda:0 (H100)"}))
    inventory = run_inventory(tmp_path, ["d/a/ce/r/seed0", "d/a/focal1/r/seed1", "s/u/dfl/r/seed2"])
    assert inventory["epochs"].tolist() == [30, 3, 2] and inventory["train_time_s"].tolist() == [12.5, 3.5, 2.0]
    assert inventory.loc[0, "job_wall_s"] == 20.5 and np.isnan(inventory.loc[1, "job_wall_s"])
    assert inventory["seed"].tolist() == [0, 1, 2]
    assert inventory["device"].tolist()[::2] == ["cpu (1 threads)", "cuda:0 (H100)"]
    totals = summary(inventory)
    assert (totals["runs"], totals["train_time_s"], totals["devices"]) == (3, 18.0, ["cpu (1 threads)", "cuda:0 (H100)"])
    with pytest.raises(ValueError, match="train it first"):
        run_inventory(tmp_path, ["d/a/ce/r/seed9"])


def test_index_links_every_page_artifact_and_shows_the_config():
    config = load_config("config/test.yaml")
    report = report_plan(build_plan(config))
    inventory = pd.DataFrame([{"run": "x", "epochs": 3, "train_time_s": 60.0, "job_wall_s": 70.0, "device": "cpu",
                               "host": "h", "parameters": 10, "finished_at": "t"}])
    page = build_index(report.manifest(config), inventory, "recipes: {tiny: {}}\n", ["config/test.yaml"])
    for notebook in report.notebooks:
        assert f'href="{notebook}.html"' in page
    for artifact in report.artifacts():
        assert f'href="../{artifact.path.removeprefix("results/")}"' in page
    assert "Fig 1: recipe &#x27;tiny&#x27; records no training reliability" in page
    assert "1 run(s), 3 epoch(s), 1.0 min of training" in page and "config/test.yaml" in page
    assert "No study of this paper in the active config" in page  # komisarenko2024 and hossain2021


def test_rule_helpers_constrain_wildcards_exactly_and_escape_captions():
    import re

    from docutils.core import publish_parts

    from focalcal.paths import one_of
    from focalcal.report.rules import rst_text

    pattern = re.compile(f"(?:{one_of(['fig3.synthetic1d', 'table1'])})$")
    assert pattern.match("fig3.synthetic1d") and pattern.match("table1")
    assert not pattern.match("fig3xsynthetic1d") and not pattern.match("table10")
    assert not re.compile(f"(?:{one_of([])})$").match("")
    text = "Table 13: |S99| of *TS_NLL* `x` \\ y_"
    rendered = publish_parts(rst_text(text), writer="html")["body"]
    assert "|S99| of *TS_NLL* `x` \\ y_" in rendered.replace("&lt;", "<")


def test_coarse_theory_grid_is_planned_from_the_config_and_draws_quickly():
    from focalcal.report.figure_drawing import draw

    config = load_config("config/test.yaml")
    assert config["report"]["theory_grid"] == "coarse"  # CI's config draws the quick grids
    config["report"] = {}
    assert {a.params["grid"] for a in report_plan(build_plan(config)).theory} == {"paper"}
    config["report"] = {"theory_grid": "coarse"}
    report = report_plan(build_plan(config))
    k2 = report.artifact(None, "komisarenko2024_fig2_closest_temperature_k2", "figure")
    assert k2.params == {"grid": "coarse"} and k2.title.endswith("[coarse grid: config report.theory_grid]")
    figure = draw(k2)
    fit = next(t.get_text() for ax in figure.axes for t in ax.texts if t.get_text().startswith("fit: 1/T"))
    slope, intercept = (float(v) for v in fit.split("≈")[1].split("\n")[0].replace("·γ", "").split("+"))
    assert abs(slope - 0.95) < 0.05 and abs(intercept - 0.85) < 0.05  # the paper's K = 2 line, on the coarse grid
    config["report"] = {"theory_grid": "rough"}
    with pytest.raises(ValueError, match="theory_grid"):
        report_plan(build_plan(config))


def test_index_scoreboard_shows_each_claim_verdict_interval_and_note():
    from test_claims import ece_table, evidence

    from focalcal.claims import claims_table

    config = load_config("config/test.yaml")
    config["report"]["claim_notes"] = {"m20-flsd53-ece-pre": "this config trains no FLSD-53"}
    report = report_plan(build_plan(config))
    holds = ece_table(lambda s: 0.10 + 0.01 * s, lambda s: 0.03 + 0.012 * s)
    claims = claims_table([evidence(holds)])
    inventory = pd.DataFrame([{"run": "x", "epochs": 3, "train_time_s": 60.0, "job_wall_s": 70.0, "device": "cpu",
                               "host": "h", "parameters": 10, "finished_at": "t"}])
    page = build_index(report.manifest(config), inventory, "", [], claims)
    assert page.index("Does each paper hold here?") < page.index("What was reproduced, per paper")
    row = page[page.index("m20-fl3-ece-pre"):]
    row = row[:row.index("</tr>")]
    fl3 = claims.set_index("claim").loc["m20-fl3-ece-pre"]
    assert f"{fl3['mean']:.3g} [{fl3['ci_low']:.3g}, {fl3['ci_high']:.3g}], n = 4" in row
    assert "background:#1a7f37" in row and ">holds<" in row
    untested = page[page.index("m20-flsd53-ece-pre"):]
    untested = untested[:untested.index("</tr>")]
    assert "not testable with this config" in untested and "this config trains no FLSD-53" in untested


def test_the_scoreboard_wraps_long_notes_inside_the_page_width(tmp_path):
    """The claims table has fixed column shares, so long statements and notes wrap instead of
    pushing the page past the window (a 780 px window, where unwrapped cells make the index 1,197 px wide)."""
    from test_claims import ece_table, evidence
    from test_report_browser import ensure_chromium

    from focalcal.claims import claims_table
    from focalcal.report.browser import inspect_page

    config = load_config("config/test.yaml")
    config["report"]["claim_notes"] = {"m20-flsd53-ece-pre": "a long note, " * 80 + "end"}
    report = report_plan(build_plan(config))
    claims = claims_table([evidence(ece_table(lambda s: 0.10 + 0.01 * s, lambda s: 0.03 + 0.012 * s))])
    inventory = pd.DataFrame([{"run": "x", "epochs": 3, "train_time_s": 60.0, "job_wall_s": 70.0, "device": "cpu",
                               "host": "h", "parameters": 10, "finished_at": "t"}])
    (tmp_path / "index.html").write_text(build_index(report.manifest(config), inventory, "", [], claims))
    info = inspect_page(tmp_path / "index.html", ensure_chromium())
    assert info["scroll_width"] <= info["viewport_width"], info


def forest_tables(n_claims: int, seed: int = 0):
    """A claims board of ``n_claims`` rows (cycling through the verdicts, not testable without
    pairs) and its pairs, as claims.csv and claims_pairs.csv hold them."""
    from focalcal.claims import VERDICTS
    from focalcal.claims.verdict import t_interval

    rng = np.random.default_rng(seed)
    rows, pairs = [], []
    for i in range(n_claims):
        verdict = VERDICTS[i % len(VERDICTS)]
        scale = 10.0 ** rng.integers(-3, 2)  # each claim in its own unit: ECE, temperature, px
        threshold = 0.01 * scale if i % 5 == 4 else 0.0
        row = {"paper": "mukhoti2020", "claim": f"claim-{i}", "study": "s", "direction": "<" if i % 2 else ">",
               "threshold": threshold, "verdict": verdict, "n_pairs": 0, "n_paper_way": 0, "mean": np.nan,
               "ci_low": np.nan, "ci_high": np.nan}
        if verdict != "not testable with this config":
            d = scale * (rng.normal(size=4 + i % 3) + (-1) ** i)
            mean, low, high = t_interval(d)
            row.update(n_pairs=len(d), n_paper_way=int(np.sum(d < threshold)), mean=mean, ci_low=low, ci_high=high)
            pairs += [{"claim": row["claim"], "study": "s", "difference": value} for value in d]
        rows.append(row)
    return pd.DataFrame(rows), pd.DataFrame(pairs, columns=["claim", "study", "difference"])


@pytest.mark.parametrize("n_claims", [1, 30])
def test_the_claims_forest_plots_render_one_row_per_claim_with_every_pair(n_claims, tmp_path):
    from matplotlib.image import imread

    from focalcal.claims.verdict import VERDICT_COLORS
    from focalcal.plots import save
    from focalcal.plots.claims_forest import claims_forest_compact, claims_forest_figure

    board, pairs = forest_tables(n_claims)
    figure = claims_forest_figure(board, pairs, "page")
    axes = [ax for ax in figure.axes if ax.get_title(loc="left")]
    assert len(axes) == n_claims
    for ax, row in zip(axes, board.itertuples()):
        low, high = ax.get_xlim()
        shown = pairs.loc[pairs["claim"] == row.claim, "difference"].to_list() + [row.threshold]
        assert low <= min(shown) and max(shown) <= high, row.claim  # every pair and the threshold are on the row
        dots = [point for collection in ax.collections for point in collection.get_offsets()[:, 0]]
        assert len(dots) >= len(shown) - 1, row.claim
        assert ax.get_title(loc="left").startswith(f"{row.claim} (s): {row.verdict}, {row.n_paper_way} of {row.n_pairs}")
    compact = claims_forest_compact(board, pairs, "index")
    assert [t.get_text() for t in compact.axes[0].get_yticklabels()] == [f"{c} (s)" for c in board["claim"]]
    for name, drawn in (("page", figure), ("index", compact)):
        height = drawn.get_size_inches()[1]
        path = save(drawn, tmp_path / f"{name}.png")
        image = imread(path)[..., :3]
        assert image.shape[0] > 50 and (n_claims == 1 or height > 5), (name, height)
        for verdict in set(board["verdict"]) - {"not testable with this config"}:  # every verdict's colour is drawn
            rgb = np.array([int(VERDICT_COLORS[verdict][k:k + 2], 16) / 255 for k in (1, 3, 5)])
            assert (np.abs(image - rgb).max(axis=-1) < 0.02).sum() > 20, (name, verdict)


def test_the_index_shows_the_forest_plot_and_every_pair_with_its_unit():
    from test_claims import ece_table, evidence

    from focalcal.claims import evaluate

    config = load_config("config/test.yaml")
    report = report_plan(build_plan(config))
    claims, pairs = evaluate([evidence(ece_table(lambda s: 0.10 + 0.01 * s, lambda s: 0.03 + 0.012 * s))])
    inventory = pd.DataFrame([{"run": "x", "epochs": 3, "train_time_s": 60.0, "job_wall_s": 70.0, "device": "cpu",
                               "host": "h", "parameters": 10, "finished_at": "t"}])
    page = build_index(report.manifest(config), inventory, "", [], claims, pairs)
    assert "<img src='../figures/claims/index.png'" in page
    row = page[page.index("m20-fl3-ece-pre"):]
    row = row[:row.index("</tr>")]
    assert "4 of 4 pair(s) point the paper's way (&lt; 0)" in row and "only values below 0" in row
    for seed in range(4):
        d = 0.03 + 0.012 * seed - 0.10 - 0.01 * seed
        assert f"mnist1d/cnn/r/seed{seed} — focal3 − ce: <strong>{d:+.4g}</strong>" in row
