"""hossain2021 (dual focal loss for segmentation): Tables 2-3 (IoU, Hausdorff distance over folds,
beside the published values) and the test-image overlays of Figs 3-6.

Its report page; the parts every page has are described in :mod:`focalcal.papers`.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from focalcal import paths
from focalcal.core.spec_facts import loss_color_key
from focalcal.files.artefacts import load_npz
from focalcal.papers.hossain2021 import figures
from focalcal.papers.hossain2021.labels import LOSS_NAMES, TABLE_OF_MODEL, hossain_setting
from focalcal.plots.style import color_for
from focalcal.report import published
from focalcal.report.figure_inputs import study_table
from focalcal.report.tables import SETTING_KEYS, PaperTable, format_cell, health_mark, mean_std, row_marks
from focalcal.report.targets import Artifact, StudyView

# The top of its report page (notebooks/paper.ipynb): the paper, its claims, what the page shows.
SUMMARY = """\
# Hossain et al. 2021 — Dual focal loss to address class imbalance in semantic segmentation

**Claims.** The dual focal loss adds to the focal loss a term that keeps a non-vanishing gradient for
the negative classes (Fig 1: derivatives of CE, DCE, FL and DFL with respect to the softmax output),
and on four imbalanced segmentation data sets it gives the best IoU and Hausdorff distance among CE,
WCE, DCE, FL, GDL and DFL with two architectures (Tables 2-3).

**This page.** Fig 1 is exact. Each segmentation study of the config trains every (data set,
architecture, loss) on k cross-validation folds and scores each run on its test fold (rule
`evaluate_segmentation`): Tables 2-3 give mean ± std over folds of each fold's mean IoU and mean
Hausdorff distance beside the published values (ours in pixels, the paper's in mm; a stand-in
data set or model is labelled as such), the box plots show every fold, and the overlays show
one fold's test images with each loss's prediction (Figs 3-6). The published tables follow in
full.
"""

# Its published tables, shown in full below the studies (the config may run only some settings).
PUBLISHED_SHOWN = (
    ("hossain2021_table2", "Table 2 — DeepLabV3+ (ResNet-18): IoU (%) and Hausdorff distance, 10-fold CV"),
    ("hossain2021_table3", "Table 3 — VGG19 FCN: IoU (%) and Hausdorff distance, 10-fold CV"),
)


# ------------------------------------------------------------------------ planning


def plan(study: StudyView) -> tuple[list[Artifact], list[str]]:
    views = [v for v in study.runs if v.run.segmentation]
    if not views:
        return [], ["Tables 2-3 and Figs 3-6: need segmentation runs (IoU and Hausdorff distance); this study has none"]
    config = study.plan.config
    settings = {}
    for v in views:
        setting = hossain_setting(config["datasets"][v.run.dataset], config["models"][v.run.model])
        settings[f"{v.run.dataset}/{v.run.model}"] = {
            "dataset": setting.dataset, "model": setting.model, "stand_in": setting.stand_in,
            "table": TABLE_OF_MODEL.get(setting.model), "describe": setting.describe()}
    losses = {v.run.loss: {"label": v.loss.label if v.loss.name != "focal" else "FL",
                           "paper": LOSS_NAMES.get(v.loss.name), "color": list(loss_color_key(v.loss))}
              for v in views}
    params = {"losses": losses, "settings": settings}
    artifacts = [
        study.artifact("table", "hossain2021_tables2_3",
                       "Tables 2-3: IoU (%) and Hausdorff distance (pixels; the paper's in mm) per data set, "
                       "architecture and loss, mean ± std over folds, beside the published values",
                       hossain_tables, [study.table], params),
        study.artifact("figure", "hossain2021_scores_over_folds",
                       "Tables 2-3 as box plots: mean IoU and Hausdorff distance of every fold, per loss",
                       segmentation_scores, [study.table], params),
    ]
    # Figs 3-6: one test fold's images with every loss's prediction, per data set and architecture.
    for dataset, model in dict.fromkeys((v.run.dataset, v.run.model) for v in views):
        same = [v for v in views if (v.run.dataset, v.run.model) == (dataset, model)]
        first = min(v.run.seed for v in same)
        chosen = [v for v in same if v.run.seed == first]
        runs = [{"loss": v.run.loss, "samples": f"{v.run.evaluation_dir}/{paths.SAMPLES}"} for v in chosen]
        where = f"fold {first}" if chosen[0].run.n_folds else f"seed {first}"
        artifacts.append(study.artifact("figure", f"hossain2021_overlays_{dataset}_{model}",
                                        f"Figs 3-6: test images of {dataset} ({model}, {where}) with each loss's "
                                        "predicted mask", segmentation_overlays, [r["samples"] for r in runs],
                                        {"runs": runs, "losses": losses}))
    return artifacts, []


# ------------------------------------------------------------------------ tables

# our metric -> (column stem, scale): IoU in %, as the paper; HD in pixels (the paper's mm need
# a pixel spacing our data sets do not have).
_HOSSAIN_METRICS = {"iou": ("iou", 100.0), "hausdorff": ("hd", 1.0), "pixel_accuracy": ("pixel_accuracy", 100.0),
                    "pixel_ece": ("pixel_ece", 100.0), "hausdorff_missed": ("hd_missed", 100.0)}


def hossain_tables(table: pd.DataFrame, params: dict) -> pd.DataFrame:
    """hossain2021 Tables 2-3: per (dataset, model, loss), mean ± std over folds of each fold's
    mean IoU and mean Hausdorff distance (plus pixel accuracy and ECE), published values beside."""
    summary = table[table["class"].isin(["mean", "all"])]
    references = {number: published.load(f"hossain2021_table{number}") for number in (2, 3)}
    rows = []
    for (dataset, model, loss), group in summary.groupby(SETTING_KEYS, sort=False):
        setting = params["settings"].get(f"{dataset}/{model}", {"dataset": None, "model": None, "stand_in": True,
                                                                "table": None, "describe": "no published counterpart"})
        info = params["losses"].get(loss, {"label": loss, "paper": None})
        row = {"dataset": dataset, "model": model, "loss": info["label"], "loss_key": loss,
               "n_folds": int(group["seed"].nunique()), "paper_setting": setting["describe"],
               "paper_table": setting["table"]}
        for metric, (stem, scale) in _HOSSAIN_METRICS.items():
            mean, std, _ = mean_std(group.loc[group["metric"] == metric, "value"] * scale)
            row[f"{stem}_mean"], row[f"{stem}_std"] = mean, std
        row.update(_hossain_published(references.get(setting["table"]), setting, info["paper"]))
        row["health"] = health_mark(group)
        rows.append(row)
    return pd.DataFrame(rows)


def _hossain_published(reference: pd.DataFrame | None, setting: dict, paper_loss: str | None) -> dict:
    empty = {f"published_{c}": np.nan for c in ("iou_mean", "iou_std", "hd_mean", "hd_std")}
    if reference is None or paper_loss is None:
        return {**empty, "published_provenance": None}
    hit = reference[(reference["model"] == setting["model"]) & (reference["dataset"] == setting["dataset"])
                    & (reference["loss"] == paper_loss)]
    if hit.empty:
        return {**empty, "published_provenance": None}
    return {**{f"published_{c}": float(hit[c].iloc[0]) for c in ("iou_mean", "iou_std", "hd_mean", "hd_std")},
            "published_provenance": hit["provenance"].iloc[0]}


def present_hossain_tables(table: pd.DataFrame) -> pd.DataFrame:
    """The built table shaped for reading: ours and published side by side, cells as text."""
    out = table[["dataset", "model", "loss", "n_folds", "paper_setting"]].copy()
    marks = row_marks(table)
    out["ours IoU (%)"] = [format_cell(m, s, mark=h) for m, s, h in zip(table["iou_mean"], table["iou_std"], marks)]
    out["published IoU (%)"] = [format_cell(m, s) for m, s in zip(table["published_iou_mean"], table["published_iou_std"])]
    out["ours HD (pixels)"] = [format_cell(m, s, mark=h) for m, s, h in zip(table["hd_mean"], table["hd_std"], marks)]
    out["published HD (mm)"] = [format_cell(m, s) for m, s in zip(table["published_hd_mean"], table["published_hd_std"])]
    out["ours missed regions (%)"] = [format_cell(m, s, digits=1, mark=h) for m, s, h in zip(table["hd_missed_mean"], table["hd_missed_std"], marks)]
    out["ours pixel ECE (%)"] = [format_cell(m, s, mark=h) for m, s, h in zip(table["pixel_ece_mean"], table["pixel_ece_std"], marks)]
    out["published from"] = [f"Table {int(t)} ({p})" if isinstance(p, str) else "—"
                             for t, p in zip(table["paper_table"].fillna(0), table["published_provenance"])]
    return out


# ------------------------------------------------------------------------ figures

def segmentation_scores(params: dict, root: Path, study: str):
    """H21 Tables 2-3 as box plots: each fold's mean IoU and mean Hausdorff distance per loss (a
    loss whose runs did not all train is marked from the table's ``status`` column, if any)."""
    table = study_table(root, study)
    rows = table[(table["class"] == "mean") & table["metric"].isin(["iou", "hausdorff"])]
    labels = {key: info["label"] for key, info in params["losses"].items()}
    rows = rows.assign(loss=rows["loss"].map(labels).fillna(rows["loss"]))
    colors = {info["label"]: color_for(*info["color"]) for info in params["losses"].values()}
    return figures.segmentation_scores_figure(rows, loss_order=list(colors), colors=colors)


def segmentation_overlays(params: dict, root: Path, study: str):
    """H21 Figs 3-6: stored test images and masks (samples.npz of each run's evaluation)."""
    samples, class_names = {}, None
    for run in params["runs"]:
        path = root / run["samples"]
        if not path.is_file():
            raise ValueError(f"no {str(path)!r}; run the workflow's evaluate_segmentation rule first")
        data = load_npz(path)
        samples[params["losses"][run["loss"]]["label"]] = data
        class_names = [str(name) for name in data["class_names"]]
    return figures.segmentation_overlays_figure(samples, class_names=class_names)


TABLE_BUILDERS = (PaperTable(hossain_tables, present_hossain_tables),)
FIGURE_BUILDERS = (segmentation_scores, segmentation_overlays)
