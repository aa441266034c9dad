"""mukhoti2020 (calibrating with focal loss): Tables 1-13 beside the published numbers, the training
diagnostics of Figs 1-4 and 10, Fig 9's test confidences, and the translation track's Table 3 and
Fig 5 (:mod:`.translation`).

Its report page; the parts every page has are described in :mod:`focalcal.papers`.
"""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import pandas as pd

from focalcal import paths
from focalcal.catalog import ROLE_LABELS
from focalcal.core.spec_facts import LossInfo, loss_color_key
from focalcal.files.artefacts import read_csv
from focalcal.papers.mukhoti2020 import calibration_stages, confidences, figures, translation
from focalcal.papers.mukhoti2020.labels import mukhoti_name
from focalcal.plots.style import color_for, status_label
from focalcal.report import published
from focalcal.report.figure_inputs import apply_stored, inputs_of_test_points, read_calibration, read_logits, run_status
from focalcal.report.tables import (
    SETTING_KEYS,
    PaperTable,
    format_cell,
    health_mark,
    mean_std,
    metric_rows,
    row_marks,
    setting_of,
)
from focalcal.report.targets import Artifact, RunView, StudyView

# The top of its report page (notebooks/paper.ipynb): the paper, its claims, what the page shows.
SUMMARY = """\
# Mukhoti et al. 2020 — Calibrating deep neural networks using focal loss

**Claims.** Networks trained with cross-entropy become overconfident late in training as the NLL of
misclassified samples grows and the last layer's weights grow (Figs 1-3). Focal loss upper-bounds a KL
divergence minus γ times the entropy of the prediction; its gradient is that of cross-entropy scaled
by g(p, γ), which falls below 1 once the true-class probability p exceeds a threshold p0, and γ*(p0)
follows from the Lambert W function (Fig 4a, Prop 2), motivating the sample-dependent FLSD-53. Focal-loss models are better calibrated (ECE, AdaECE, MCE, NLL) before
and after temperature scaling, at equal accuracy (Tables 1-12), and keep confident correct predictions
after scaling (Table 13). In machine translation (§5.2: Transformers on WMT 2014 En-De with cross-entropy,
label smoothing α = 0.1 and focal loss γ = 1), focal loss gives both the lowest token ECE and the highest
BLEU, and BLEU peaks near the temperatures of lowest validation ECE (Table 3, Fig 5).

**This page.** Tables show ours (mean over seeds, the chosen temperature in brackets) beside the
published value of the setting each run stands for; a dash means the paper has no such cell.
"""

PUBLISHED_SHOWN = ()  # published tables shown in full on the page (none: they sit beside ours)


# ---------------------------------------------------------------------------- mukhoti2020

# table -> (metric, stages, which losses, title). Losses: "main" = the paper's Tables 1-2
# columns (everything but fixed-γ focal and the FLSc/FLSD-532 variants, plus FLSD-53),
# "focal" = its appendix Tables 5-7 (the focal variants), "all" = every loss.
MUKHOTI_TABLES = {
    1: ("ece", ("pre_t", "post_t"), "main", "Table 1: ECE (%, 15 bins) before and after temperature scaling"),
    2: ("adaece", ("pre_t", "post_t"), "main", "Table 2: AdaECE (%, 15 equal-mass bins) before and after temperature scaling"),
    4: ("error", ("none",), "main", "Table 4: test error (%)"),
    5: ("ece", ("pre_t", "post_t"), "focal", "Table 5: ECE (%) of the focal-loss variants, before and after TS"),
    6: ("adaece", ("pre_t", "post_t"), "focal", "Table 6: AdaECE (%) of the focal-loss variants, before and after TS"),
    7: ("error", ("none",), "focal", "Table 7: test error (%) of the focal-loss variants"),
    8: ("top5_error", ("none",), "main", "Table 8: top-5 error (%); the paper prints top-1 and top-5 accuracy"),
    9: ("nll", ("pre_t",), "all", "Table 9: NLL (×100) before temperature scaling"),
    10: ("nll", ("post_t",), "all", "Table 10: NLL (×100) after temperature scaling"),
    11: ("mce", ("pre_t",), "all", "Table 11: MCE (%) before temperature scaling"),
    12: ("mce", ("post_t",), "all", "Table 12: MCE (%) after temperature scaling"),
    13: ("s99", ("pre_t", "post_t"), "all", "Table 13: |S99| (% of test samples with confidence ≥ 0.99) and accuracy on S99"),
}
_FOCAL_VARIANTS = ("flsc531", "flsc532", "flsd53", "flsd532")
_MAIN_EXTRAS = {4: ("FL-3", "FLSc-532")}  # Table 4 also prints these two focal variants


def _in_table(table: int, info: LossInfo) -> bool:
    group = MUKHOTI_TABLES[table][2]
    focal_variant = (info.name == "focal" and not info.smoothing and (info.gamma or 0) > 0) or info.name in _FOCAL_VARIANTS
    if group == "all":
        return True
    if group == "focal":
        return focal_variant
    return not focal_variant or info.name == "flsd53" or mukhoti_name(info) in _MAIN_EXTRAS.get(table, ())


def plan(study: StudyView) -> tuple[list[Artifact], list[str]]:
    """Tables 1-13 and Figs 1-4, 9, 10 from the study's classification runs; Table 3 and Fig 5
    (§5.2) from its translation runs."""
    words = [v for v in study.runs if v.run.translation]
    others = [v for v in study.runs if v not in words]
    artifacts, notes = [], []
    if others:
        artifacts, notes = _classification_plan(_with_runs(study, others))
    if words:
        more, more_notes = translation.plan(_with_runs(study, words), words)
        artifacts, notes = artifacts + more, notes + more_notes
    return artifacts, notes


def _with_runs(study: StudyView, views: list[RunView]) -> StudyView:
    """The study seen through some of its runs only."""
    part = copy.copy(study)
    part.runs = list(views)
    return part


def _classification_plan(study: StudyView) -> tuple[list[Artifact], list[str]]:
    artifacts, notes = [], []
    pre, post, post_role = calibration_stages(study)
    if pre is None:
        notes.append("Tables 1-13: need the uncalibrated model (an identity calibrator); this study has none")
    else:
        for number, (metric, stages, _, title) in MUKHOTI_TABLES.items():
            if "post_t" in stages and post is None and "pre_t" not in stages:
                notes.append(f"Table {number}: needs temperature scaling (by val ECE or NLL) among the calibrators")
                continue
            losses = {v.run.loss: mukhoti_name(v.loss) for v in study.runs if _in_table(number, v.loss)}
            if not losses:
                notes.append(f"Table {number}: none of this study's losses is in that table")
                continue
            settings = {f"{v.run.dataset}/{v.run.model}": study.setting(v) for v in study.runs}
            params = {"table": number, "metric": metric, "stages": [s for s in stages if s != "post_t" or post],
                      "pre": pre, "post": post, "post_label": ROLE_LABELS.get(post_role, ""), "losses": losses,
                      "settings": settings, "bins": 15 if 15 in study.ece_bins else study.ece_bins[0]}
            if post is None and "post_t" in stages:
                title += " (no temperature scaling in this study: before only)"
            artifacts.append(study.artifact("table", f"mukhoti2020_table{number}", title, mukhoti_table, [study.table], params))
    # Figs 1-3: per-epoch diagnostics of one cross-entropy run and its focal companions.
    ce = [v for v in study.runs if v.loss.gamma == 0 and not v.loss.smoothing]
    if not ce:
        notes.append("Figs 1-3 (training diagnostics): need a cross-entropy run; this study has none")
        return artifacts, notes
    anchor = ce[0].run
    same_setting = lambda v: (v.run.dataset, v.run.model, v.run.recipe, v.run.seed) == (
        anchor.dataset, anchor.model, anchor.recipe, anchor.seed)
    where = f"{anchor.dataset}, {anchor.model}, seed {anchor.seed}"
    recipe = study.plan.config["recipes"][anchor.recipe]
    if recipe.get("reliability_epochs"):
        artifacts.append(study.artifact("figure", "mukhoti2020_fig1_training_reliability",
                                        f"Fig 1: training-set reliability at several epochs (cross-entropy, {where})",
                                        training_reliability, [study.history(ce[0])],
                                        {"run_dir": anchor.run_dir, "epochs": list(recipe["reliability_epochs"])}))
    else:
        notes.append(f"Fig 1: recipe {anchor.recipe!r} records no training reliability (set reliability_epochs)")
    artifacts.append(study.artifact("figure", "mukhoti2020_fig2_training_curves",
                                    f"Fig 2: NLL, entropy, error and ECE per epoch (cross-entropy, {where})",
                                    training_curves, [study.history(ce[0])], {"history": study.history(ce[0])}))
    focal = [v for v in study.runs if same_setting(v) and v.loss.name == "focal" and not v.loss.smoothing and v.loss.gamma]
    if focal:
        companions = [ce[0]] + sorted(focal, key=lambda v: v.loss.gamma)
        histories = {v.loss.label: study.history(v) for v in companions}
        colors = {v.loss.label: list(loss_color_key(v.loss)) for v in companions}
        artifacts.append(study.artifact("figure", "mukhoti2020_fig3_training_comparison",
                                        f"Fig 3: per-epoch diagnostics of cross-entropy vs focal loss ({where})",
                                        training_comparison, list(histories.values()),
                                        {"histories": histories, "colors": colors}))
    else:
        notes.append(f"Fig 3: needs focal-loss runs beside the cross-entropy run ({where})")
    companions = [ce[0]] + sorted(focal, key=lambda v: v.loss.gamma)
    colors = {v.loss.label: list(loss_color_key(v.loss)) for v in companions}
    if focal and recipe.get("gradient_norm_epochs"):
        epochs = list(recipe["gradient_norm_epochs"])
        artifacts.append(study.artifact(
            "figure", "mukhoti2020_fig4bcd_gradient_norms",
            f"Fig 4b-d: per-sample gradient norms of the last linear layer over the training set at epochs "
            f"{', '.join(map(str, epochs))} (cross-entropy vs focal loss, {where})",
            gradient_norms, [study.history(v) for v in companions],
            {"run_dirs": {v.loss.label: v.run.run_dir for v in companions}, "epochs": epochs, "colors": colors}))
    elif focal:
        notes.append(f"Fig 4b-d: recipe {anchor.recipe!r} records no per-sample gradient norms (set gradient_norm_epochs)")
    if focal:
        artifacts.append(study.artifact(
            "figure", "mukhoti2020_fig10_feature_norms",
            f"Fig 10: L2 norm of the last block's features, mean over the training set, per epoch ({where})",
            feature_norms, [study.history(v) for v in companions],
            {"histories": {v.loss.label: study.history(v) for v in companions}, "colors": colors}))
    artifacts += _m20_fig9(study, [v for v in study.runs if same_setting(v)], where, notes)
    return artifacts, notes


# M20 Fig 9's four models, by loss name (cross-entropy: γ = 0 without smoothing).
_FIG9_LOSSES = ("cross_entropy", "brier", "mmce", "flsd53")


def _m20_fig9(study: StudyView, views: list[RunView], where: str, notes: list[str]) -> list[Artifact]:
    """Fig 9: a few test inputs every model classifies correctly / wrongly, with each model's
    prediction and confidence before and after temperature scaling."""
    by_loss = {}
    for v in views:
        name = "cross_entropy" if v.loss.gamma == 0 and not v.loss.smoothing else v.loss.name
        by_loss.setdefault(name, v)
    missing = [name for name in _FIG9_LOSSES if name not in by_loss]
    chosen = [by_loss[name] for name in _FIG9_LOSSES if name in by_loss]
    uncalibrated = [v.loss.label for v in chosen if None in calibration_stages(study, [v])[:2]]
    if missing or uncalibrated:
        lacks = (f"runs with {', '.join(missing)}" if missing else
                 f"the uncalibrated model and temperature scaling of {', '.join(uncalibrated)}")
        notes.append(f"Fig 9: needs {lacks} beside the cross-entropy run ({where})")
        return []
    models = [{"label": v.loss.label, "color": list(loss_color_key(v.loss)), "logits": study.logits(v),
               "calibration": study.calibration(v), "raw": calibration_stages(study, [v])[0], "post": calibration_stages(study, [v])[1],
               "run_dir": v.run.run_dir} for v in chosen]
    anchor = chosen[0]
    run = {"path": anchor.path, "run_config": f"{anchor.run.run_dir}/{paths.RUN_CONFIG}",
           "info": f"{anchor.run.run_dir}/{paths.RUN_INFO}"}
    inputs = [m["logits"] for m in models] + [m["calibration"] for m in models] + [run["run_config"], run["info"]]
    params = {"models": models, "run": run, "data_root": study.plan.config.get("data_root", "data")}
    return [study.artifact("figure", "mukhoti2020_fig9_test_confidences",
                           f"Fig 9: test inputs all four models classify correctly (top) or wrongly (bottom), with each "
                           f"model's prediction and confidence before and after temperature scaling ({where})",
                           sample_confidences, inputs, params)]


# ------------------------------------------------------------------------ tables

# our metric -> (paper metric, scale to the paper's unit)
_MUKHOTI_METRICS = {
    "ece": [("ece", "ece", 100.0)],
    "adaece": [("adaece", "adaece", 100.0)],
    "mce": [("mce", "mce", 100.0)],
    "error": [("error", "error", 100.0)],
    "nll": [("nll", "nll", 100.0)],
    "top5_error": [("top5_error", "top5_accuracy", 100.0)],
    "s99": [("s99_share", "s99_pct", 100.0), ("s99_accuracy", "s99_accuracy", 100.0)],
}
_BINNED = {"ece", "adaece", "mce"}
# Table 13 prints "Focal Loss" with T = 1.1, the temperature of FLSD-53 in Table 1.
_TABLE13_NAMES = {"FLSD-53": "Focal Loss"}


def mukhoti_table(table: pd.DataFrame, params: dict) -> pd.DataFrame:
    """mukhoti2020 Table ``params["table"]``: our values pre/post temperature scaling and the paper's."""
    number = params["table"]
    reference = published.load(f"mukhoti2020_table{number}")
    rows = []
    for (dataset, model, loss), group in table[table["loss"].isin(list(params["losses"]))].groupby(SETTING_KEYS, sort=False):
        setting = setting_of(params, dataset, model)
        paper_loss = params["losses"][loss]
        for stage in params["stages"]:
            calibrator = params["post"] if stage == "post_t" else params["pre"]
            temperature = np.nan
            if stage == "post_t":
                temperature = mean_std(metric_rows(group, calibrator, "temperature")["value"])[0]
            for ours, paper_metric, scale in _MUKHOTI_METRICS[params["metric"]]:
                bins = params["bins"] if ours in _BINNED else None
                cell_rows = metric_rows(group, calibrator, ours, bins)
                mean, std, n = mean_std(cell_rows["value"] * scale)
                if n == 0 and ours == "top5_error":
                    continue  # fewer than 5 classes: top-5 error is not defined
                published_value, published_temperature, note = _mukhoti_published(
                    reference, number, setting, paper_loss, paper_metric, stage)
                rows.append({
                    "table": f"mukhoti2020_table{number}", "dataset": dataset, "model": model, "loss": loss,
                    "paper_loss": paper_loss, "stage": stage, "metric": paper_metric if ours != "top5_error" else ours,
                    "bins": bins, "calibrator": calibrator, "ours_mean": mean, "ours_std": std, "n_seeds": n,
                    "ours_temperature": temperature, "paper_dataset": setting["dataset"], "paper_model": setting["model"],
                    "stand_in": setting["stand_in"], "published": published_value,
                    "published_temperature": published_temperature, "published_note": note,
                    "health": health_mark(cell_rows),
                })
    columns = ["table", "dataset", "model", "loss", "paper_loss", "stage", "metric", "bins", "calibrator", "ours_mean",
               "ours_std", "n_seeds", "ours_temperature", "paper_dataset", "paper_model", "stand_in", "published",
               "published_temperature", "published_note", "health"]
    return pd.DataFrame(rows, columns=columns)


def _mukhoti_published(reference: pd.DataFrame, number: int, setting: dict, paper_loss, paper_metric: str, stage: str):
    """(value, temperature, note) of the paper's cell for this setting, NaN when it has none."""
    if paper_loss is None or setting["dataset"] is None:
        return np.nan, np.nan, ""
    name = _TABLE13_NAMES.get(paper_loss, paper_loss) if number == 13 else paper_loss
    hit = reference[(reference["dataset"] == setting["dataset"]) & (reference["model"] == setting["model"])
                    & (reference["method"] == name) & (reference["metric"] == paper_metric) & (reference["stage"] == stage)]
    if hit.empty:
        return np.nan, np.nan, ""
    value, temperature = float(hit["value"].iloc[0]), float(hit["temperature"].iloc[0])
    note = ""
    if paper_metric == "top5_accuracy":
        value, note = 100.0 - value, "100 − the paper's top-5 accuracy"
    if name != paper_loss:
        note = f"the paper's {name!r} row (its T = 1.1 is FLSD-53's in Table 1)"
    return value, temperature, note


def present_mukhoti_table(table: pd.DataFrame) -> pd.DataFrame:
    """The built table shaped for reading: ours and published side by side, cells as text."""
    shown = table.assign(
        setting=table["dataset"] + " / " + table["model"],
        ours=[format_cell(m, s, t, mark=h) for m, s, t, h in zip(table["ours_mean"], table["ours_std"],
                                                          table["ours_temperature"], row_marks(table))],
        published_cell=[format_cell(m, np.nan, t) for m, t in zip(table["published"], table["published_temperature"])],
        paper_setting=(table["paper_dataset"].fillna("—") + ", " + table["paper_model"].fillna("—")),
    )
    wide = shown.pivot_table(index=["setting", "loss", "paper_loss", "paper_setting"],
                             columns=["metric", "stage"], values=["ours", "published_cell"], aggfunc="first",
                             sort=False)
    wide.columns = [f"{'ours' if who == 'ours' else 'published'} {metric} {stage}".replace(" none", "")
                    for who, metric, stage in wide.columns]
    return wide.reset_index()


# ------------------------------------------------------------------------ figures

def training_reliability(params: dict, root: Path, study: str):
    """M20 Fig 1 from the run's train_reliability.csv (written when the recipe asks for it)."""
    path = root / params["run_dir"] / paths.RELIABILITY
    if not path.is_file():
        raise ValueError(f"no {str(path)!r}: the run's recipe must set reliability_epochs (retrain to record it)")
    table = read_csv(path)
    epochs = [e for e in params["epochs"] if e in set(table["epoch"])] or None
    return figures.training_reliability_figure(table, epochs=epochs, status=run_status(root / params["run_dir"]))


def training_curves(params: dict, root: Path, study: str):
    history = root / params["history"]
    return figures.training_curves_figure(read_csv(history), status=run_status(history.parent))


def training_comparison(params: dict, root: Path, study: str):
    """M20 Fig 3: one line per run; a run that did not train is marked in the legend (its run.json)."""
    labels = {label: status_label(label, [run_status((root / path).parent)]) for label, path in params["histories"].items()}
    histories = {labels[label]: read_csv(root / path) for label, path in params["histories"].items()}
    colors = {labels[label]: color_for(name, gamma) for label, (name, gamma) in params["colors"].items()}
    return figures.training_comparison_figure(histories, colors=colors)


def gradient_norms(params: dict, root: Path, study: str):
    """M20 Fig 4b-d from each run's train_gradient_norms.csv (written when the recipe asks)."""
    tables = {}
    for label, run_dir in params["run_dirs"].items():
        path = root / run_dir / paths.GRADIENT_NORMS
        if not path.is_file():
            raise ValueError(f"no {str(path)!r}: the run's recipe must set gradient_norm_epochs (retrain to record it)")
        tables[status_label(label, [run_status(root / run_dir)])] = read_csv(path)
    colors = {status_label(label, [run_status(root / params["run_dirs"][label])]): color_for(name, gamma)
              for label, (name, gamma) in params["colors"].items()}
    return figures.gradient_norm_histograms_figure(tables, epochs=params["epochs"], colors=colors)


def feature_norms(params: dict, root: Path, study: str):
    """M20 Fig 10 from the runs' history.csv (column train_feature_norm)."""
    labels = {label: status_label(label, [run_status((root / path).parent)]) for label, path in params["histories"].items()}
    histories = {}
    for label, path in params["histories"].items():
        history = read_csv(root / path)
        if "train_feature_norm" not in history.columns:
            raise ValueError(f"{path} has no train_feature_norm column: the run was trained before feature norms "
                             "were logged; retrain it")
        histories[labels[label]] = history
    colors = {labels[label]: color_for(name, gamma) for label, (name, gamma) in params["colors"].items()}
    return figures.feature_norms_figure(histories, colors=colors)


def sample_confidences(params: dict, root: Path, study: str):
    """M20 Fig 9: the same test inputs for every model; confidences from each run's stored
    uncalibrated and temperature-scaled calibrators (no refitting)."""
    models = params["models"]
    arrays = {m["label"]: read_logits(root / m["logits"]) for m in models}
    labels = arrays[models[0]["label"]]["test_labels"]
    for m in models:
        if not np.array_equal(arrays[m["label"]]["test_labels"], labels):
            raise ValueError(f"{m['logits']} has other test labels than {models[0]['logits']}: Fig 9 compares one test set")
    panels, predictions = {}, {}
    for m in models:
        calibration = read_calibration(root / m["calibration"])
        logits = arrays[m["label"]]["test_logits"]
        pre = apply_stored(calibration, m["raw"], logits, m["calibration"])
        post = apply_stored(calibration, m["post"], logits, m["calibration"])
        label = status_label(m["label"], [run_status(root / m["run_dir"])])
        panels[label] = {"predicted": pre.argmax(1), "confidence_pre": pre.max(1), "confidence_post": post.max(1)}  # TS keeps the argmax
        predictions[label] = pre.argmax(1)
    correct, wrong = confidences.choose_samples(labels, predictions, n_per_row=4)
    chosen = np.concatenate([correct, wrong])
    signals = inputs_of_test_points(root, params["run"], arrays[models[0]["label"]], params["data_root"])[chosen]
    panels = {label: {key: values[chosen] for key, values in panel.items()} for label, panel in panels.items()}
    colors = {status_label(m["label"], [run_status(root / m["run_dir"])]): color_for(*m["color"]) for m in models}
    return confidences.sample_confidences_figure(signals, labels[chosen], panels, colors=colors)


TABLE_BUILDERS = (PaperTable(mukhoti_table, present_mukhoti_table),
                  PaperTable(translation.table3, translation.present_table3))
FIGURE_BUILDERS = (training_reliability, training_curves, training_comparison, gradient_norms, feature_norms,
                   sample_confidences, translation.temperature_sweep)
