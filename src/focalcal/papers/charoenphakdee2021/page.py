"""charoenphakdee2021 (focal loss and class posteriors): what a study of it shows — Fig 3 on a data set
with a known posterior (scores against x: raw, TS_NLL, Ψ^γ), Figs 4-6 (ECE-raw vs ECE-Ψ per
training paradigm: Standard, TS_FL, LS) — its tables and its figures.

Its report page; the parts every page has are described in :mod:`focalcal.papers`.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from focalcal import catalog, paths
from focalcal.files.artefacts import read_json
from focalcal.papers.charoenphakdee2021 import PAPER, figures
from focalcal.papers.charoenphakdee2021.labels import training_paradigm
from focalcal.plots.style import status_label
from focalcal.report.figure_inputs import (
    apply_stored,
    inputs_of_test_points,
    read_calibration,
    read_logits,
    run_status,
    stored_calibrator,
    study_table,
)
from focalcal.report.tables import (
    PaperTable,
    format_cell,
    health_mark,
    mean_std,
    metric_rows,
    row_marks,
    with_mark,
)
from focalcal.report.targets import Artifact, RunView, StudyView

# The calibrator roles its figures compare, as its catalog entry names them (catalog.PAPERS).
RAW, TS_NLL, PSI, TS_FL, TS_FL_PSI = (PAPER.roles[part][0] for part in (
    "uncalibrated", "temperature_nll", "psi_map", "focal_temperature", "focal_temperature_psi"))

# The top of its report page (notebooks/paper.ipynb): the paper, its claims, what the page shows.
SUMMARY = """\
# Charoenphakdee et al. 2021 — On focal loss for class-posterior probability estimation

**Claims.** The focal loss is classification-calibrated, but the minimiser q* of its risk is not the
class posterior η: q* is η-*underconfident* whenever max q* ≥ τ_uc(γ) and may be η-overconfident below
τ_oc(γ) (Thm 8, Fig 1; Fig 2 shows both for K = 2 and K = 1000). The closed-form transform Ψ^γ (Eq 11)
maps q* back to η, so applying Ψ^γ to a focal-loss model's softmax recovers calibrated posteriors —
on 1-D synthetic data with known η (Fig 3) and on image classifiers, alone or after temperature
scaling (TS_FL) or label smoothing (Figs 4-6).

**This page.** The theory figures are exact. The experiment figures come from the runs of the active
config (see each study's *scale*: the default config runs small stand-ins of the paper's data sets);
every score printed on a figure is read from the study's metrics table.
"""

PUBLISHED_SHOWN = ()  # published tables shown in full on the page (none: they sit beside ours)


# ----------------------------------------------------------------- charoenphakdee2021


def first_seed(views: list[RunView]) -> list[RunView]:
    """Keep the runs of the first (model, recipe) met and of its smallest seed."""
    if not views:
        return []
    model, recipe = views[0].run.model, views[0].run.recipe
    same = [v for v in views if v.run.model == model and v.run.recipe == recipe]
    seed = min(v.run.seed for v in same)
    return [v for v in same if v.run.seed == seed]


def focal_family(view: RunView) -> bool:
    return view.loss.gamma is not None


def plan(study: StudyView) -> tuple[list[Artifact], list[str]]:
    artifacts, notes = [], []
    posterior_sets = [d for d in dict.fromkeys(v.run.dataset for v in study.runs)
                      if catalog.dataset(study.dataset_name(d)).known_posterior]
    # Fig 3: raw scores, TS_NLL and Ψ^γ along x against the known posterior.
    for dataset in posterior_sets:
        views = first_seed([v for v in study.runs if v.run.dataset == dataset and focal_family(v)
                             and not v.loss.smoothing and RAW in v.roles])
        if not views:
            notes.append(f"Fig 3 on {dataset}: needs uncalibrated cross-entropy or focal runs")
            continue
        views.sort(key=lambda v: v.loss.gamma)
        panels = [{"run": v.path, "calibrator": v.roles[RAW], "label": v.loss.label} for v in views]
        for role, suffix in ((TS_NLL, "TS_NLL"), (PSI, "Ψ^γ")):
            panels += [{"run": v.path, "calibrator": v.roles[role], "label": f"{v.loss.label} + {suffix}"}
                       for v in views if v.loss.gamma > 0 and role in v.roles]
        runs = [{"path": v.path, "columns": v.run.columns(), "run_config": f"{v.run.run_dir}/{paths.RUN_CONFIG}",
                 "info": f"{v.run.run_dir}/{paths.RUN_INFO}"} for v in views]
        inputs = [study.table] + [study.logits(v) for v in views] + [study.calibration(v) for v in views]
        inputs += [r["run_config"] for r in runs] + [r["info"] for r in runs]
        params = {"dataset": dataset, "runs": runs, "panels": panels, "bins": study.ece_bins[0],
                  "data_root": study.plan.config.get("data_root", "data")}
        artifacts.append(study.artifact("figure", f"charoenphakdee2021_fig3_{dataset}",
                                        f"Fig 3: predicted scores against x on {dataset} (known posterior): raw, TS_NLL, Ψ^γ",
                                        synthetic_posterior, inputs, params))
        artifacts.append(study.artifact("table", f"charoenphakdee2021_fig3_{dataset}",
                                        f"Fig 3 numbers on {dataset}: ERR, KLD and ECE of each panel",
                                        synthetic_scores, [study.table], params))
    if not posterior_sets:
        notes.append("Fig 3 (scores against x): needs a data set with a known posterior (synthetic1d); this study has none")

    # Figs 4-6: the training paradigms on real data.
    real = [v for v in study.runs if focal_family(v) and not catalog.dataset(study.dataset_name(v.run.dataset)).known_posterior]
    standard = [v for v in real if training_paradigm(v.loss) == "Standard"]
    smoothed = [v for v in real if training_paradigm(v.loss) == "LS"]
    raw_psi = lambda v: {RAW, PSI} <= set(v.roles)
    paradigm_runs = {
        "Standard": [v for v in standard if raw_psi(v)],
        "TS_FL": [v for v in standard if {TS_FL, TS_FL_PSI} <= set(v.roles)],
        "LS": [v for v in smoothed if raw_psi(v)],
    }
    if not any(paradigm_runs.values()):
        notes.append("Figs 4-6 (ECE-raw vs ECE-Ψ): need focal/CE runs on real data with uncalibrated and Ψ^γ "
                     "(or TS_FL and TS_FL+Ψ^γ) among the calibrators; this study has none")
        return artifacts, notes

    for dataset in dict.fromkeys(v.run.dataset for views in paradigm_runs.values() for v in views):
        artifact = _c21_reliability(study, dataset, paradigm_runs)
        if artifact is not None:
            artifacts.append(artifact)

    comparisons = []  # (paradigm, loss keys, the role of the raw scores, that of Ψ^γ)
    if paradigm_runs["Standard"]:
        comparisons.append(("Standard", paradigm_runs["Standard"], RAW, PSI))
    if paradigm_runs["TS_FL"]:
        comparisons.append(("TS_FL", paradigm_runs["TS_FL"], TS_FL, TS_FL_PSI))
    if paradigm_runs["LS"]:
        comparisons.append(("LS", paradigm_runs["LS"], RAW, PSI))
    groups = [{"paradigm": paradigm, "losses": {v.run.loss: v.loss.gamma for v in views},
               "datasets": sorted({v.run.dataset for v in views}),
               "raw": study.role_key(raw, views), "psi": study.role_key(psi, views)}
              for paradigm, views, raw, psi in comparisons]
    params = {"groups": groups, "bins": study.ece_bins[0]}
    if paradigm_runs["Standard"]:
        artifacts.append(study.artifact("figure", "charoenphakdee2021_fig5_ece_boxplots",
                                        "Fig 5: ECE over seeds against γ, raw vs Ψ^γ (Standard training), per data set and model",
                                        ece_boxplots, [study.table], {**params, "paradigms": ["Standard"]}))
    else:
        notes.append("Fig 5 (Standard paradigm box plots): needs cross-entropy/focal runs with uncalibrated and Ψ^γ")
    later = [p for p in ("TS_FL", "LS") if paradigm_runs[p]]
    if later:
        artifacts.append(study.artifact("figure", "charoenphakdee2021_fig6_ece_boxplots",
                                        f"Fig 6: ECE over seeds against γ, raw vs Ψ^γ, for the {' and '.join(later)} paradigm(s)",
                                        ece_boxplots, [study.table], {**params, "paradigms": later}))
    else:
        notes.append("Fig 6 (TS_FL and LS paradigms): needs TS_FL and TS_FL+Ψ^γ calibrators, or label-smoothed focal runs")
    artifacts.append(study.artifact("table", "charoenphakdee2021_ece_summary",
                                    "ECE-raw and ECE-Ψ over seeds per paradigm, data set, model and γ (the numbers behind Figs 5-6)",
                                    ece_summary, [study.table], params))
    return artifacts, notes


def _c21_reliability(study: StudyView, dataset: str, paradigm_runs: dict) -> Artifact | None:
    """Fig 4 for one data set: reliability raw vs Ψ^γ per paradigm (rows) and γ (columns)."""
    on_dataset = {p: [v for v in views if v.run.dataset == dataset] for p, views in paradigm_runs.items()}
    models = list(dict.fromkeys(v.run.model for views in on_dataset.values() for v in views))
    coverage = {m: sum(any(v.run.model == m for v in views) for views in on_dataset.values()) for m in models}
    best = max(coverage.values())
    model = [m for m in models if coverage[m] == best][-1]  # ties: the last listed (grids list small to large)
    panels, inputs = [], []
    for paradigm, views in on_dataset.items():
        views = first_seed([v for v in views if v.run.model == model])
        for v in sorted(views, key=lambda v: v.loss.gamma):
            panel = {"paradigm": paradigm, "gamma": v.loss.gamma, "run": v.path, "temperature_from": None}
            inputs.append(study.logits(v))
            if paradigm == "TS_FL":
                panel["temperature_from"] = v.roles[TS_FL]
                inputs.append(study.calibration(v))
            panels.append(panel)
    if not panels:
        return None
    return study.artifact("figure", f"charoenphakdee2021_fig4_{dataset}",
                          f"Fig 4: reliability of raw vs Ψ^γ scores on {dataset} ({model}), per paradigm and γ",
                          raw_vs_psi_reliability, inputs, {"dataset": dataset, "model": model, "panels": panels,
                                                      "bins": study.ece_bins[0]})


# ------------------------------------------------------------------------ tables

def synthetic_scores(table: pd.DataFrame, params: dict) -> pd.DataFrame:
    """The ERR (%), KLD and ECE (%) printed on each panel of charoenphakdee2021 Fig 3."""
    runs = {run["path"]: run["columns"] for run in params["runs"]}
    rows = []
    for panel in params["panels"]:
        columns = runs[panel["run"]]
        mine = table
        for key, value in columns.items():
            mine = mine[mine[key].astype(str) == str(value)]
        mark = health_mark(mine)  # the panel's run
        for metric, shown, bins, scale in (("error", "ERR", None, 100.0), ("kl_posterior", "KLD", None, 1.0),
                                           ("ece", "ECE", params["bins"], 100.0)):
            hit = metric_rows(mine, panel["calibrator"], metric, bins)
            rows.append({**columns, "panel": panel["label"], "calibrator": panel["calibrator"], "metric": shown,
                         "bins": bins, "value": float(hit["value"].iloc[0]) * scale if len(hit) else np.nan,
                         "health": mark})
    return pd.DataFrame(rows)


def ece_frame(table: pd.DataFrame, groups: list[dict], paradigms, bins: int) -> pd.DataFrame:
    """ECE rows of the study table relabelled for charoenphakdee2021's comparisons: calibrator
    "raw" / "psi", with columns paradigm and gamma (TS_FL compares TS_FL with TS_FL + Ψ^γ)."""
    frames = []
    for group in groups:
        if group["paradigm"] not in paradigms:
            continue
        rows = table[(table["metric"] == "ece") & (table["bins"] == bins) & table["loss"].isin(list(group["losses"]))
                     & table["dataset"].isin(group["datasets"]) & table["calibrator"].isin([group["raw"], group["psi"]])]
        rows = rows.assign(calibrator=rows["calibrator"].map({group["raw"]: "raw", group["psi"]: "psi"}),
                           gamma=rows["loss"].map(group["losses"]).astype(float), paradigm=group["paradigm"])
        frames.append(rows)
    frame = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    if frame.empty:
        raise ValueError(f"study table has no ECE rows ({bins} bins) for paradigms {list(paradigms)}")
    return frame


def ece_summary(table: pd.DataFrame, params: dict) -> pd.DataFrame:
    """ECE-raw and ECE-Ψ (%) over seeds per paradigm, data set, model and γ (charoenphakdee2021 Figs 5-6)."""
    paradigms = [group["paradigm"] for group in params["groups"]]
    frame = ece_frame(table, params["groups"], paradigms, params["bins"])
    rows = []
    for (paradigm, dataset, model, gamma, calibrator), group in frame.groupby(["paradigm", "dataset", "model", "gamma", "calibrator"], sort=False):
        mean, std, n = mean_std(group["value"] * 100.0)
        rows.append({"paradigm": paradigm, "dataset": dataset, "model": model, "gamma": gamma,
                     "score": "ECE-raw" if calibrator == "raw" else "ECE-Ψ", "bins": params["bins"], "mean": mean, "std": std,
                     "n_seeds": n, "health": health_mark(group)})
    return pd.DataFrame(rows)


def present_synthetic_scores(table: pd.DataFrame) -> pd.DataFrame:
    """The built table shaped for reading: ours and published side by side, cells as text."""
    panels = [with_mark(panel, mark) for panel, mark in zip(table["panel"], row_marks(table))]
    return table.assign(panel=panels).pivot_table(index="panel", columns="metric", values="value",
                                                  sort=False).reset_index()


def present_ece_summary(table: pd.DataFrame) -> pd.DataFrame:
    """The built table shaped for reading: ours and published side by side, cells as text."""
    shown = table.assign(cell=[format_cell(m, s, mark=h) for m, s, h in zip(table["mean"], table["std"], row_marks(table))])
    return shown.pivot_table(index=["paradigm", "dataset", "model", "gamma"], columns="score", values="cell",
                             aggfunc="first", sort=False).reset_index()


# ------------------------------------------------------------------------ figures

def rows_of(table: pd.DataFrame, columns: dict) -> pd.DataFrame:
    mask = np.ones(len(table), dtype=bool)
    for column, value in columns.items():
        mask &= (table[column].astype(str) == str(value)).to_numpy()
    return table[mask]


def panel_scores(table: pd.DataFrame, columns: dict, calibrator: str, bins: int) -> dict[str, float]:
    """ERR, KLD and ECE of one run and calibrator, read from the study table."""
    rows = rows_of(table, columns)
    rows = rows[rows["calibrator"] == calibrator]
    values = {}
    for key, metric, binned in (("ERR", "error", False), ("KLD", "kl_posterior", False), ("ECE", "ece", True)):
        hit = rows[(rows["metric"] == metric) & ((rows["bins"] == bins) if binned else rows["bins"].isna())]
        if len(hit) != 1:
            raise ValueError(f"study table has {len(hit)} rows of {metric} for {columns} / {calibrator} (expected 1)")
        values[key] = float(hit["value"].iloc[0])
    return values


def synthetic_posterior(params: dict, root: Path, study: str):
    """C21 Fig 3: scores against x of each panel (run x stored calibrator), truth dashed."""
    table = study_table(root, study)
    runs = {run["path"]: run for run in params["runs"]}
    arrays = {path: read_logits(root / paths.run_file(path, paths.LOGITS)) for path in runs}
    stored = {path: read_calibration(root / paths.calibration_dir(path) / paths.CALIBRATION_PARAMS) for path in runs}
    first = next(iter(runs))
    for path, data in arrays.items():
        if "test_posterior" not in data:
            raise ValueError(f"{paths.run_file(path, paths.LOGITS)} has no test_posterior; Fig 3 needs a data set with a known posterior")
        if not np.array_equal(data["test_labels"], arrays[first]["test_labels"]):
            raise ValueError(f"runs {first} and {path} were tested on different points; Fig 3 needs one test set")
    x = inputs_of_test_points(root, runs[first], arrays[first], params["data_root"])
    if x.shape[1] != 1:
        raise ValueError(f"Fig 3 plots scores against a 1-D input; {first} has {x.shape[1]}-D inputs")
    order = np.argsort(x[:, 0], kind="stable")
    eta = arrays[first]["test_posterior"][order]
    predictions, scores = {}, {}
    for panel in params["panels"]:
        run = panel["run"]
        probs = apply_stored(stored[run], panel["calibrator"], arrays[run]["test_logits"], f"calibration.json of {run}")
        label = status_label(panel["label"], [run_status(root / paths.run_dir(run))])
        predictions[label] = probs[order]
        scores[label] = panel_scores(table, runs[run]["columns"], panel["calibrator"], params["bins"])
    density = None
    if _is_registered_synthetic(runs[first], root):  # its p(x) is known: draw panel (a) of the paper
        from focalcal.data.synthetic import THREE_CLASS

        density = THREE_CLASS.density(x[order, 0])
    return figures.synthetic_posterior_figure(x[order, 0], eta, predictions, density=density, scores=scores,
                                            n_bins=params["bins"])


def _is_registered_synthetic(run: dict, root: Path) -> bool:
    """True when the run trained on the registered 1-D mixture (its density is then known)."""
    config = read_json(root / run["run_config"])
    return config["dataset"]["name"] == "synthetic1d"


def raw_vs_psi_reliability(params: dict, root: Path, study: str):
    """C21 Fig 4: raw vs Ψ^γ reliability per paradigm and γ; TS_FL logits divided by the stored T."""
    panels, health = {}, {}
    for panel in params["panels"]:
        run = panel["run"]
        health[(panel["paradigm"], float(panel["gamma"]))] = run_status(root / paths.run_dir(run))
        data = read_logits(root / paths.run_file(run, paths.LOGITS))
        logits = data["test_logits"].astype(np.float64)
        if panel["temperature_from"]:
            calibration = read_calibration(root / paths.calibration_dir(run) / paths.CALIBRATION_PARAMS)
            calibrator, _ = stored_calibrator(calibration, panel["temperature_from"], f"calibration.json of {run}")
            logits = logits / calibrator.temperature_
        panels[(panel["paradigm"], float(panel["gamma"]))] = (logits, data["test_labels"])
    return figures.raw_vs_psi_reliability_figure(panels, n_bins=params["bins"], health=health,
                                               dataset=f"{params['dataset']} ({params['model']})")


def ece_boxplots(params: dict, root: Path, study: str):
    """C21 Figs 5 (Standard) and 6 (TS_FL, LS): ECE over seeds against γ, raw vs Ψ^γ (a γ whose
    runs did not all train is marked from the table's ``status`` column, when it has one)."""
    paradigms = params["paradigms"]
    frame = ece_frame(study_table(root, study), params["groups"], paradigms, params["bins"])
    frame["gamma"] = frame["gamma"].map(lambda gamma: f"{gamma:g}")  # box positions labelled 0, 1, 2, 3
    panel_by = ("dataset", "model") if paradigms == ["Standard"] else ("paradigm", "dataset", "model")
    figure_name = "Fig. 5" if paradigms == ["Standard"] else "Fig. 6"
    return figures.ece_box_plots(frame, metric="ece", panel_by=panel_by, reproduces=f"charoenphakdee2021 {figure_name}")


TABLE_BUILDERS = (PaperTable(synthetic_scores, present_synthetic_scores), PaperTable(ece_summary, present_ece_summary))
FIGURE_BUILDERS = (synthetic_posterior, raw_vs_psi_reliability, ece_boxplots)
