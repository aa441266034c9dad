"""komisarenko2024 (focal calibration map, focal temperature scaling): Table 1 (TS vs focal TS, with
the published rows) and Fig 8 (optimal T against γ_ev).

Its report page; the parts every page has are described in :mod:`focalcal.papers`.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from focalcal import paths
from focalcal.calibration import KOMISARENKO_GAMMAS
from focalcal.core.spec_facts import loss_color_key
from focalcal.papers.komisarenko2024 import PAPER, figures
from focalcal.papers.komisarenko2024.labels import approach, dataset_name
from focalcal.plots.style import color_for, status_label
from focalcal.report import published
from focalcal.report.figure_inputs import read_calibration, run_status, stored_calibrator
from focalcal.report.tables import (
    SETTING_KEYS,
    PaperTable,
    format_cell,
    health_mark,
    mean_std,
    metric_rows,
    row_marks,
    setting_of,
    with_mark,
)
from focalcal.report.targets import Artifact, StudyView

# The top of its report page (notebooks/paper.ipynb): the paper, its claims, what the page shows.
SUMMARY = """\
# Komisarenko et al. 2024 — Relating focal loss, temperature scaling and properness

**Claims.** The focal loss is a proper loss composed with a confidence-raising *focal calibration map*
(Fig 1). That map is close to temperature scaling: the closest temperature follows 1/T ≈ 0.95γ + 0.85
for K = 2, 0.64γ + 0.91 for K = 3 and 0.47γ + 0.85 for K = 4 (Figs 2, 6), within the bounds of Prop 3
(Fig 3); on the 3-class simplex the two maps differ little (Figs 4, 5, 7). *Focal temperature scaling*
— the focal map with a free γ_ev composed with temperature scaling — improves on plain temperature
scaling after training with cross-entropy, focal loss, FLSD-53 or AdaFocal (Table 1, Fig 8).

**This page.** Theory figures are computed exactly at the paper's grids. Table 1 puts our mean ± std
over seeds beside the published numbers of the setting each run stands for.
"""

PUBLISHED_SHOWN = ()  # published tables shown in full on the page (none: they sit beside ours)


# ------------------------------------------------------------------------- komisarenko2024


def _role_key(study: StudyView, part: str) -> str | None:
    """The study's calibrator key of the first role of ``part`` (the paper's catalog entry) it has."""
    role = PAPER.first_role(part, study.role_key)
    return study.role_key(role) if role else None


def plan(study: StudyView) -> tuple[list[Artifact], list[str]]:
    artifacts, notes = [], []
    fts = {c: _role_key(study, f"fts_by_{c}") for c in ("ece", "nll")}
    ts = {c: _role_key(study, f"ts_by_{c}") for c in ("ece", "nll")}
    if not any(fts.values()):
        notes.append("Table 1 and Fig 8: need focal temperature scaling (focal_temperature_scaling over several γ_ev) "
                     "among the calibrators; this study has none")
        return artifacts, notes
    losses = {}
    for v in study.runs:
        listed = approach(v.loss)
        losses[v.run.loss] = {"label": v.loss.label, "approach": listed[0] if listed else None,
                              "gamma_train": listed[1] if listed else None}
    settings = {f"{v.run.dataset}/{v.run.model}": study.setting(v) for v in study.runs}
    params = {"ts": ts, "fts": fts, "losses": losses, "settings": settings, "bins": 15 if 15 in study.ece_bins else study.ece_bins[0]}
    artifacts.append(study.artifact("table", "komisarenko2024_table1",
                                    "Table 1: TS vs focal TS — accuracy, log-loss and ECE (15 equal-mass bins) with the chosen T and γ_ev, mean ± std over seeds",
                                    komisarenko_table, [study.table], params))
    criterion = "ece" if fts["ece"] else "nll"
    fts_role = PAPER.roles[f"fts_by_{criterion}"][0]
    views = [v for v in study.runs if approach(v.loss) and approach(v.loss)[0] in ("cross_entropy", "focal")
             and fts_role in v.roles]
    if views:
        runs = [{"path": v.path, "dataset": v.run.dataset, "loss": v.loss.label, "gamma_train": v.loss.gamma,
                 "color": list(loss_color_key(v.loss)),
                 "calibration": study.calibration(v), "calibrator": v.roles[fts_role]} for v in views]
        artifacts.append(study.artifact("figure", "komisarenko2024_fig8_optimal_temperature",
                                        f"Fig 8: optimal T of focal TS against γ_ev (chosen by val {criterion.upper()}), one line per γ_tr",
                                        optimal_temperature, [r["calibration"] for r in runs],
                                        {"runs": runs, "criterion": criterion}))
    else:
        notes.append("Fig 8: needs focal temperature scaling on cross-entropy or focal-loss runs")
    return artifacts, notes


# ------------------------------------------------------------------------ tables

def _mode(values: pd.Series) -> float:
    """The most frequently chosen value (ties: the smallest); NaN if none."""
    values = values.dropna().astype(float)
    if values.empty:
        return np.nan
    counts = values.value_counts()
    return float(min(counts[counts == counts.max()].index))


def komisarenko_table(table: pd.DataFrame, params: dict) -> pd.DataFrame:
    """komisarenko2024 Table 1: TS vs focal TS per loss; ECE-chosen and NLL-chosen (T, γ_ev)."""
    reference = published.load("komisarenko2024_table1")
    bins = params["bins"]
    rows = []
    for (dataset, model, loss), group in table.groupby(SETTING_KEYS, sort=False):
        setting = setting_of(params, dataset, model)
        about = params["losses"].get(loss, {})
        for calibration, keys in (("temperature_scaling", params["ts"]), ("focal_temperature_scaling", params["fts"])):
            if not any(keys.values()):
                continue
            by_ece, by_nll = keys.get("ece"), keys.get("nll")
            row = {"table": "komisarenko2024_table1", "dataset": dataset, "model": model, "loss": loss,
                   "approach": about.get("approach"), "gamma_train": about.get("gamma_train"), "calibration": calibration}
            accuracy = 100.0 * (1.0 - metric_rows(group, by_ece or by_nll, "error")["value"])
            row["accuracy_mean"], row["accuracy_std"], row["n_seeds"] = mean_std(accuracy)
            for column, key, metric, metric_bins, scale in (("logloss", by_nll, "nll", None, 1.0),
                                                             ("ece", by_ece, "adaece", bins, 100.0)):
                if key is None:
                    row.update({f"{column}_mean": np.nan, f"{column}_std": np.nan, f"{column}_temperature": np.nan,
                                f"{column}_gamma_eval": np.nan})
                    continue
                row[f"{column}_mean"], row[f"{column}_std"], _ = mean_std(metric_rows(group, key, metric, metric_bins)["value"] * scale)
                row[f"{column}_temperature"] = mean_std(metric_rows(group, key, "temperature")["value"])[0]
                row[f"{column}_gamma_eval"] = _mode(metric_rows(group, key, "gamma")["value"])
            row.update({"paper_dataset": dataset_name(setting["dataset"]), "stand_in": setting["stand_in"]})
            row.update(_komisarenko_published(reference, row))
            row["health"] = health_mark(group[group["calibrator"].isin([k for k in (by_ece, by_nll) if k])])
            rows.append(row)
    return pd.DataFrame(rows)


_K24_PUBLISHED = ("accuracy_mean", "accuracy_std", "logloss_mean", "logloss_std", "logloss_temperature", "ece_mean",
                  "ece_std", "ece_temperature", "gamma_eval")


def _komisarenko_published(reference: pd.DataFrame, row: dict) -> dict:
    empty = {f"published_{column}": np.nan for column in _K24_PUBLISHED}
    if row["paper_dataset"] is None or row["approach"] is None:
        return empty
    hit = reference[(reference["dataset"] == row["paper_dataset"]) & (reference["approach"] == row["approach"])
                    & (reference["calibration"] == row["calibration"])]
    if row["gamma_train"] is not None and row["approach"] == "focal":
        hit = hit[np.isclose(hit["gamma_train"].astype(float), float(row["gamma_train"]))]
    if hit.empty:
        return empty
    return {f"published_{column}": float(hit[column].iloc[0]) for column in _K24_PUBLISHED}


def present_komisarenko_table(table: pd.DataFrame) -> pd.DataFrame:
    """The built table shaped for reading: ours and published side by side, cells as text."""
    out = table[["dataset", "model", "loss", "calibration", "paper_dataset"]].copy()
    marks = row_marks(table)
    out["ours accuracy (%)"] = [format_cell(m, s, digits=1, mark=h) for m, s, h in zip(table["accuracy_mean"], table["accuracy_std"], marks)]
    out["published accuracy (%)"] = [format_cell(m, s, digits=1) for m, s in zip(table["published_accuracy_mean"], table["published_accuracy_std"])]
    out["ours log-loss (T)"] = [format_cell(m, s, t, mark=h) for m, s, t, h in zip(table["logloss_mean"], table["logloss_std"], table["logloss_temperature"], marks)]
    out["published log-loss (T)"] = [format_cell(m, s, t) for m, s, t in zip(table["published_logloss_mean"], table["published_logloss_std"], table["published_logloss_temperature"])]
    out["ours ECE % (T)"] = [format_cell(m, s, t, mark=h) for m, s, t, h in zip(table["ece_mean"], table["ece_std"], table["ece_temperature"], marks)]
    out["published ECE % (T)"] = [format_cell(m, s, t) for m, s, t in zip(table["published_ece_mean"], table["published_ece_std"], table["published_ece_temperature"])]
    out["ours γ_ev (ECE / NLL)"] = [with_mark(f"{format_cell(e)} / {format_cell(n)}", h) for e, n, h in zip(table["ece_gamma_eval"], table["logloss_gamma_eval"], marks)]
    out["published γ_ev"] = [format_cell(g) for g in table["published_gamma_eval"]]
    return out


# ------------------------------------------------------------------------ figures

def optimal_temperature(params: dict, root: Path, study: str):
    """K24 Fig 8: the stored best T per γ_ev of focal temperature scaling, one line per loss
    (its legend entry marked when some of the loss's runs did not train, from their run.json)."""
    rows, colors, statuses = [], {}, {}
    runs = sorted(params["runs"], key=lambda r: (r["dataset"], r["gamma_train"]))
    for run in runs:
        statuses.setdefault((run["dataset"], run["loss"]), []).append(run_status(root / paths.run_dir(run["path"])))
    for run in runs:
        calibration = read_calibration(root / run["calibration"])
        calibrator, _ = stored_calibrator(calibration, run["calibrator"], run["calibration"])
        gammas = KOMISARENKO_GAMMAS if calibrator.gammas is None else calibrator.gammas
        temperatures = np.asarray(calibrator.best_temperature_per_gamma_, dtype=np.float64)
        if len(temperatures) != len(gammas):
            raise ValueError(f"{run['calibration']}: {len(temperatures)} temperatures for {len(gammas)} γ_ev values")
        label = status_label(run["loss"], statuses[(run["dataset"], run["loss"])])
        rows += [{"dataset": run["dataset"], "loss": label, "gamma_ev": float(g), "temperature": float(t)}
                 for g, t in zip(gammas, temperatures)]
        colors[label] = color_for(*run["color"])
    return figures.optimal_temperature_figure(pd.DataFrame(rows), panel_by="dataset", colors=colors)


TABLE_BUILDERS = (PaperTable(komisarenko_table, present_komisarenko_table),)
FIGURE_BUILDERS = (optimal_temperature,)
