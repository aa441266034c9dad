"""The translation track's report: a run's metrics.csv from its token metrics and decodes,
mukhoti2020 Table 3 and Fig 5 from fixture runs, and the §5.2 claims on fixture seeds."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from focalcal import paths
from focalcal.claims import evaluate_claim
from focalcal.claims.verdict import FAILS, HOLDS, INCONCLUSIVE, NOT_TESTABLE
from focalcal.files.artefacts import read_csv
from focalcal.pipeline import build_plan, validate_config
from focalcal.pipeline.calibrate import rows_to_csv
from focalcal.pipeline.translation import (
    CURVE_COLUMNS,
    calibrated_decodes,
    grid_decodes,
    translation_metrics,
)
from focalcal.report import figure_drawing, tables
from focalcal.report.claims_table import study_evidence
from focalcal.report.targets import report_plan

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"
STUDY = "test_translation"
LOSSES = {"ce": {"name": "cross_entropy"}, "ls01": {"name": "label_smoothing", "smoothing": 0.1},
          "fl1": {"name": "focal", "gamma": 1}}
SEEDS = (0, 1, 2)


def translation_config() -> dict:
    """config/test.yaml with one mukhoti2020 study of the stand-in: CE, LS-0.1, FL-1, three seeds."""
    config = yaml.safe_load((ROOT / "config" / "test.yaml").read_text())
    config["datasets"]["words"] = {"name": "synthetic-translation"}
    config["models"]["transformer_tiny"] = {"name": "transformer-small"}
    config["losses"].update(copy.deepcopy(LOSSES))
    config["calibrators"]["ts_ece"] = {"name": "temperature_scaling", "objective": "ece", "temperatures": "mukhoti",
                                       "n_bins": 15}
    config["studies"] = {STUDY: {
        "paper": "mukhoti2020", "mirrors": "§5.2 in miniature", "ece_bins": [15],
        "grids": [{"datasets": ["words"], "models": ["transformer_tiny"], "losses": list(LOSSES), "recipe": "tiny",
                   "seeds": list(SEEDS), "calibrators": ["uncalibrated", "ts_ece", "ts_nll"]}]}}
    return validate_config(config, str(SCHEMA))


DECODE_TEMPERATURES = tuple(translation_config()["decode_temperatures"])  # the schema's default grid


@pytest.fixture(scope="module")
def plan():
    return build_plan(translation_config())


# ------------------------------------------------------------------------ a run's metrics

def _write_decode(path: str, temperature: float, bleu: float) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps({"temperature": temperature, "bleu": bleu, "signature": "nrefs:1|..."}))


# BLEU per decode temperature of a fixture run: highest at T = 1.1
def _bleu_at(t: float, peak: float = 1.1, top: float = 30.0) -> float:
    return top - 10.0 * (t - peak) ** 2


def fixture_run(root: Path, plan, run, *, peak: float = 1.1, top: float = 30.0, ece_t: float = 1.2,
                ece: tuple[float, float] = (0.08, 0.03)) -> None:
    """What calibrate_tokens and the decodes write for ``run``: token metrics (ECE ``ece`` before and
    after, T by val ECE ``ece_t``), the token curve, and one decode JSON per temperature."""
    calibration = root / run.calibration_dir
    calibration.mkdir(parents=True, exist_ok=True)
    rows = []
    for key, temperature, value in (("uncalibrated", 1.0, ece[0]), ("ts_ece", ece_t, ece[1]), ("ts_nll", 1.3, ece[1] + 0.01)):
        rows += [{"calibrator": key, "metric": "error", "bins": "", "value": 0.4},
                 {"calibrator": key, "metric": "ece", "bins": 15, "value": value}]
        if key != "uncalibrated":
            rows.append({"calibrator": key, "metric": "temperature", "bins": "", "value": temperature})
    (calibration / paths.TOKEN_METRICS).write_text(rows_to_csv(rows))
    curve = [{"temperature": t, "bins": 15, "val_ece": 0.01 + 0.1 * abs(t - ece_t), "val_nll": 2.0, "test_ece": 0.02,
              "test_nll": 2.1} for t in DECODE_TEMPERATURES]
    (calibration / paths.TOKEN_CURVE).write_text(rows_to_csv(curve, header=CURVE_COLUMNS))
    for t, path in grid_decodes(run.path, DECODE_TEMPERATURES).items():
        _write_decode(str(root / path), t, _bleu_at(t, peak, top))
    for key, path in calibrated_decodes(plan, run).items():
        if path:
            _write_decode(str(root / path), ece_t, _bleu_at(ece_t, peak, top) - 0.5)
    translation_metrics(calibration / paths.TOKEN_METRICS, calibration / paths.TOKEN_CURVE,
                        {t: root / p for t, p in grid_decodes(run.path, DECODE_TEMPERATURES).items()},
                        {k: p and root / p for k, p in calibrated_decodes(plan, run).items()},
                        calibration / paths.METRICS, calibration / paths.TEMPERATURE_SWEEP)


def test_a_runs_metrics_join_token_metrics_and_the_bleu_of_each_temperature(tmp_path, plan):
    run = next(iter(plan.runs.values()))
    assert calibrated_decodes(plan, run) == {"uncalibrated": None,
                                             "ts_ece": paths.calibrated_decode(run.path, "ts_ece"),
                                             "ts_nll": paths.calibrated_decode(run.path, "ts_nll")}
    fixture_run(tmp_path, plan, run)
    metrics = read_csv(tmp_path / run.calibration_dir / paths.METRICS).set_index(["calibrator", "metric"])["value"]
    assert metrics["uncalibrated", "bleu"] == pytest.approx(_bleu_at(1.0))  # the T = 1 decode
    assert metrics["ts_ece", "bleu"] == pytest.approx(_bleu_at(1.2) - 0.5)  # its own decode at its T
    assert metrics["ts_nll", "bleu"] == pytest.approx(_bleu_at(1.2) - 0.5)
    assert metrics["ts_ece", "bleu_best_temperature"] == pytest.approx(1.1)
    assert (metrics["uncalibrated", "decode_grid_min"], metrics["uncalibrated", "decode_grid_max"]) == (0.8, 1.6)
    assert metrics["uncalibrated", "ece"] == pytest.approx(0.08)  # the token metrics kept as they were
    sweep = read_csv(tmp_path / run.calibration_dir / paths.TEMPERATURE_SWEEP)
    assert list(sweep["temperature"]) == pytest.approx(list(DECODE_TEMPERATURES))
    assert list(sweep["bleu"]) == pytest.approx([_bleu_at(t) for t in DECODE_TEMPERATURES])


def test_a_decode_grid_without_t1_or_a_curve_without_a_decode_temperature_is_refused(tmp_path, plan):
    run = next(iter(plan.runs.values()))
    fixture_run(tmp_path, plan, run)
    calibration = tmp_path / run.calibration_dir
    decodes = {t: tmp_path / p for t, p in grid_decodes(run.path, DECODE_TEMPERATURES).items()}
    calibrated = {k: p and tmp_path / p for k, p in calibrated_decodes(plan, run).items()}
    without_one = {t: p for t, p in decodes.items() if t != 1.0}
    with pytest.raises(ValueError, match="lacks T = 1"):
        translation_metrics(calibration / paths.TOKEN_METRICS, calibration / paths.TOKEN_CURVE, without_one, calibrated,
                            tmp_path / "m.csv", tmp_path / "s.csv")
    extra = {**decodes, 2.0: decodes[1.0]}
    with pytest.raises(ValueError, match=r"no token metrics at decode temperature\(s\) \[2.0\]"):
        translation_metrics(calibration / paths.TOKEN_METRICS, calibration / paths.TOKEN_CURVE, extra, calibrated,
                            tmp_path / "m.csv", tmp_path / "s.csv")


# ------------------------------------------------------------------------ the study's runs

# per loss: (BLEU peak T, BLEU at the peak, uncalibrated ECE) — focal loss best on both
HOLDING = {"ce": (1.1, 29.0, 0.10), "ls01": (1.0, 29.5, 0.05), "fl1": (1.2, 30.0, 0.02)}


def write_study(root: Path, plan, per_loss=HOLDING, spread: float = 0.1) -> pd.DataFrame:
    """Every run of the study as fixture files, and the study table from them (as rule study_table)."""
    from focalcal.pipeline.tables import write_study_table

    for run in plan.runs.values():
        peak, top, ece = per_loss[run.loss]
        jitter = spread * (run.seed - 1)
        fixture_run(root, plan, run, peak=peak, top=top + jitter, ece_t=peak, ece=(ece + jitter / 100, 0.02))
        info = root / run.run_dir / paths.RUN_INFO
        info.parent.mkdir(parents=True, exist_ok=True)
        info.write_text(json.dumps({"health": {"status": "trained", "reasons": []}}))
    return write_study_table(plan, STUDY, root / paths.study_table(STUDY), root)


def test_table3_puts_ours_beside_the_published_cells(tmp_path, plan):
    table = write_study(tmp_path, plan)
    report = report_plan(plan)
    artifact = report.artifact(STUDY, "mukhoti2020_table3", "table")
    assert artifact.inputs == [paths.study_table(STUDY)]
    built = tables.build(artifact, table).set_index(["loss", "metric", "stage"])
    assert built.loc[("fl1", "ece", "pre_t"), "ours_mean"] == pytest.approx(2.0)  # %, mean over the 3 seeds
    assert built.loc[("fl1", "ece", "pre_t"), "ours_std"] == pytest.approx(0.1)
    assert built.loc[("fl1", "ece", "post_t"), "ours_temperature"] == pytest.approx(1.2)
    assert built.loc[("fl1", "bleu", "pre_t"), "ours_mean"] == pytest.approx(_bleu_at(1.0, 1.2, 30.0))
    # the paper's Table 3: FL (gamma=1.0) 1.69/1.69/1.0, BLEU 26.39/26.39; CE's ECE 10.16/2.59 (T = 1.2)
    assert built.loc[("fl1", "ece", "pre_t"), "published"] == pytest.approx(1.69)
    assert built.loc[("ce", "ece", "post_t"), ["published", "published_temperature"]].tolist() == pytest.approx([2.59, 1.2])
    assert built.loc[("ls01", "bleu", "post_t"), "published"] == pytest.approx(26.33)
    assert set(built["n_seeds"]) == {3} and built["stand_in"].all()
    shown = tables.present(artifact.paper, artifact.builder, built.reset_index()).set_index("loss")
    assert shown.loc["fl1", "published ece post_t"] == "1.69 (1.00)"
    assert shown.loc["fl1", "ours ece post_t"] == "2.00 ± 0.00 (1.20)"


def test_table3s_page_says_what_bleu_is_and_that_the_papers_tokenisation_is_unknown(tmp_path, plan, monkeypatch):
    from focalcal.report import pages
    from focalcal.translation.bleu import corpus_bleu

    table = write_study(tmp_path, plan)
    artifact = report_plan(plan).artifact(STUDY, "mukhoti2020_table3", "table")
    built = tables.build(artifact, table)
    (tmp_path / artifact.path).parent.mkdir(parents=True, exist_ok=True)
    built.to_csv(tmp_path / artifact.path, index=False)
    shown = []
    monkeypatch.setattr(pages, "_display", lambda *objects: shown.extend(objects))
    pages.show_table(artifact.to_dict(), root=tmp_path)
    texts = [getattr(item, "data", "") for item in shown]
    signature = corpus_bleu(["a small cat"], ["a small cat"]).signature  # what the decodes record
    assert signature.startswith("nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:")
    assert (f"BLEU: sacreBLEU's corpus BLEU of the detokenised decodes against one reference each, signature "
            f"`{signature}`. The paper does not say how its BLEU was tokenised or computed, so its column and ours "
            "may differ by tokenisation alone.") in texts


def test_fig5_draws_one_panel_per_loss_from_the_runs_sweeps(tmp_path, plan):
    write_study(tmp_path, plan)
    artifact = report_plan(plan).artifact(STUDY, "mukhoti2020_fig5_bleu_ece_temperature", "figure")
    assert sorted(artifact.inputs) == sorted(f"{run.calibration_dir}/{paths.TEMPERATURE_SWEEP}"
                                             for run in plan.runs.values())
    figure = figure_drawing.draw(artifact, tmp_path)
    panels = [ax for ax in figure.axes if ax.get_xlabel() == "temperature T"]
    assert len(panels) == 3
    bleu = panels[2].get_lines()[0]  # FL-1: the mean over its seeds (their jitter averages out)
    assert list(bleu.get_xdata()) == pytest.approx(list(DECODE_TEMPERATURES))
    assert list(bleu.get_ydata()) == pytest.approx([_bleu_at(t, 1.2, 30.0) for t in DECODE_TEMPERATURES])


def test_a_translation_studys_header_names_the_published_setting_it_stands_in_for(plan):
    scale = report_plan(plan).studies[STUDY].scale
    assert scale["settings"] == ["WMT 2014 En-De, Transformer (ours is a small stand-in)"]


def test_a_translation_study_plans_no_classification_table_or_figure(plan):
    names = {a.name for a in report_plan(plan).studies[STUDY].artifacts}
    assert names == {"mukhoti2020_table3", "mukhoti2020_fig5_bleu_ece_temperature"}


# --------------------------------------------------------------------------------- claims

def _claim(key):
    from focalcal.claims import CLAIMS

    return next(c for c in CLAIMS["mukhoti2020"] if c.key == key)


def test_the_translation_claims_hold_on_seeds_where_focal_loss_is_best(tmp_path, plan):
    write_study(tmp_path, plan)
    evidence = study_evidence(plan, STUDY, tmp_path)
    ece = evaluate_claim(_claim("m20-mt-fl-lowest-ece"), evidence)
    assert ece.verdict == HOLDS and ece.n_pairs == 3
    assert ece.mean == pytest.approx(0.02 - 0.05)  # FL-1 against LS, the lower of its two baselines
    bleu = evaluate_claim(_claim("m20-mt-fl-highest-bleu"), evidence)
    assert bleu.verdict == HOLDS
    assert bleu.mean == pytest.approx(_bleu_at(1.0, 1.2, 30.0) - _bleu_at(1.0, 1.0, 29.5))
    near = evaluate_claim(_claim("m20-mt-bleu-near-low-ece"), evidence)
    assert near.verdict == HOLDS and near.n_pairs == 9 and near.mean == pytest.approx(0.0)


def test_the_translation_claims_fail_where_focal_loss_is_worst_and_bleu_peaks_far_away(tmp_path, plan):
    worst = {"ce": (1.1, 31.0, 0.01), "ls01": (1.0, 31.5, 0.02), "fl1": (1.2, 28.0, 0.09)}
    table = write_study(tmp_path, plan, worst)
    evidence = study_evidence(plan, STUDY, tmp_path)
    assert evaluate_claim(_claim("m20-mt-fl-lowest-ece"), evidence).verdict == FAILS
    assert evaluate_claim(_claim("m20-mt-fl-highest-bleu"), evidence).verdict == FAILS
    # BLEU peaks at the grid's top end, val ECE is lowest at its bottom end: 0.8 apart, beyond the 0.2 margin
    far = table.copy()
    far.loc[(far["metric"] == "temperature") & (far["calibrator"] == "ts_ece"), "value"] = 0.8
    far.loc[far["metric"] == "bleu_best_temperature", "value"] = 1.6
    outcome = evaluate_claim(_claim("m20-mt-bleu-near-low-ece"), _with_table(evidence, far))
    assert outcome.verdict == FAILS and outcome.n_pairs == 9 and outcome.mean == pytest.approx(0.8)


def _with_table(evidence, table):
    changed = copy.copy(evidence)
    changed.table = table
    return changed


@pytest.mark.parametrize("where", ["above", "below"])
def test_a_val_ece_temperature_off_the_decode_grid_makes_the_bleu_peak_claim_not_testable(tmp_path, plan, where):
    """The best BLEU is searched on the decode grid (0.8 to 1.6), the val-ECE T on the TS grid (0.1 to 10): a run
    whose T lies outside the decode grid cannot show the claim, whether its d would pass or fail."""
    table = write_study(tmp_path, plan)
    evidence = study_evidence(plan, STUDY, tmp_path)
    assert evaluate_claim(_claim("m20-mt-bleu-near-low-ece"), evidence).verdict == HOLDS  # every T on the grid
    run = "words/transformer_tiny/fl1/tiny/seed2"
    off = table.copy()
    t_off = 2.5 if where == "above" else 0.5
    one_run = ((off["loss"] == "fl1") & (off["seed"] == 2) & (off["metric"] == "temperature")
               & (off["calibrator"] == "ts_ece"))
    off.loc[one_run, "value"] = t_off
    off.loc[(off["loss"] == "fl1") & (off["seed"] == 2) & (off["metric"] == "bleu_best_temperature"), "value"] = (
        1.6 if where == "above" else 0.8)  # the grid's end nearest T: d = 0.9 or 0.3, a fail if it were a pair
    outcome = evaluate_claim(_claim("m20-mt-bleu-near-low-ece"), _with_table(evidence, off))
    assert outcome.verdict == NOT_TESTABLE and np.isnan(outcome.mean)
    assert f"run {run}: T = {t_off:g} by val ECE, decode grid 0.8 to 1.6" in outcome.reason
    assert outcome.reason.count("seed") == 1  # the runs on the grid are not named
    # the grid's ends are on the grid
    edge = table.copy()
    edge.loc[one_run, "value"] = 1.6
    assert evaluate_claim(_claim("m20-mt-bleu-near-low-ece"), _with_table(evidence, edge)).verdict != NOT_TESTABLE


@pytest.mark.parametrize("end", [0.8, 1.6])
def test_a_best_bleu_on_the_decode_grids_edge_makes_the_bleu_peak_claim_inconclusive(tmp_path, plan, end):
    """A best BLEU at the grid's lowest or highest temperature may peak beyond it: its d is a lower bound, which
    reads 0.15 <= 0.2 here (a hold if it were measured) but cannot show the claim holds."""
    table = write_study(tmp_path, plan)
    evidence = study_evidence(plan, STUDY, tmp_path)
    edge = table.copy()
    edge.loc[(edge["metric"] == "temperature") & (edge["calibrator"] == "ts_ece"), "value"] = round(end + (
        0.15 if end < 1 else -0.15), 6)
    edge.loc[edge["metric"] == "bleu_best_temperature", "value"] = end
    outcome = evaluate_claim(_claim("m20-mt-bleu-near-low-ece"), _with_table(evidence, edge))
    assert outcome.verdict == INCONCLUSIVE and outcome.n_pairs == 9 and outcome.mean == pytest.approx(0.15)
    name = "lowest" if end < 1 else "highest"
    assert (f"run words/transformer_tiny/fl1/tiny/seed2: best BLEU at T = {end:g}, the decode grid's {name} "
            "temperature (0.8 to 1.6)") in outcome.reason
    assert "only a lower bound" in outcome.reason
    # a best BLEU one step inside the grid is a measured peak: d = 0.05, and the claim holds
    inside = edge.copy()
    inside.loc[inside["metric"] == "bleu_best_temperature", "value"] = round(end + (0.1 if end < 1 else -0.1), 6)
    assert evaluate_claim(_claim("m20-mt-bleu-near-low-ece"), _with_table(evidence, inside)).verdict == HOLDS


def test_classification_studies_cannot_test_the_translation_claims():
    rows = [{"dataset": "digits", "model": "cnn", "loss": "fl1", "recipe": "r", "seed": s, "status": "trained",
             "calibrator": "uncalibrated", "metric": "ece", "bins": 15, "value": 0.1} for s in SEEDS]
    from focalcal.claims.evidence import StudyEvidence
    from focalcal.core.spec_facts import loss_info

    evidence = StudyEvidence("s", "mukhoti2020", pd.DataFrame(rows), {"fl1": loss_info(LOSSES["fl1"])},
                             {"uncalibrated": "raw"})
    for key in ("m20-mt-fl-lowest-ece", "m20-mt-fl-highest-bleu", "m20-mt-bleu-near-low-ece"):
        assert evaluate_claim(_claim(key), evidence).verdict == NOT_TESTABLE
    assert np.isnan(evaluate_claim(_claim("m20-mt-fl-lowest-ece"), evidence).mean)
