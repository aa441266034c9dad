"""Paper tables from a study's tidy table, with the published value beside ours.

Each builder turns the study table (one row per run x calibrator x metric) into the paper's
table as a tidy CSV: one row per (setting, loss, [stage or calibration]), our mean and
standard deviation over seeds, and the published number of the paper's setting in
``published_*`` columns, with ``paper_dataset``/``paper_model`` naming that setting (and
``stand_in`` saying when our data set or model only stands in for it). Units follow the
paper: percentages for ECE/AdaECE/MCE/error, NLL ×100 in mukhoti2020, raw log-loss in
komisarenko2024. :func:`present` shapes a built table for reading (notebooks, index).

Run health: every built table has a ``health`` column, :func:`health_mark` of the study-table
rows (the study table's ``status`` column) its numbers come from — empty when every run behind
them trained normally, else e.g. "⚠ collapsed" (one run) or "⚠ 1/3 collapsed" (averaged over
seeds or folds) — and :func:`present` appends it to each of our cells, so that no number from
an unhealthy run reads as a normal one. The numbers themselves keep every run.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from focalcal._io import read_csv
from focalcal.report import published
from focalcal.report.naming import komisarenko_dataset
from focalcal.training.health import UNHEALTHY

RUN_KEYS = ["dataset", "model", "loss", "recipe", "seed"]
SETTING_KEYS = ["dataset", "model", "loss"]


def health_mark(rows: pd.DataFrame) -> str:
    """The mark of a number computed from ``rows`` of a study table: "" when every run behind them
    is healthy (or the table has no ``status`` column), else "⚠ " and the unhealthy statuses —
    "⚠ collapsed" for a single run, "⚠ 1/3 collapsed, 1/3 not converged" over several."""
    if "status" not in rows.columns or rows.empty:
        return ""
    runs = rows.drop_duplicates([key for key in RUN_KEYS if key in rows.columns])
    n = len(runs)
    counts = runs["status"].value_counts()
    parts = [status if n == 1 else f"{int(counts[status])}/{n} {status}" for status in UNHEALTHY if status in counts]
    return "⚠ " + ", ".join(parts) if parts else ""


def _mean_std(values: pd.Series) -> tuple[float, float, int]:
    values = values.dropna().astype(float)
    if values.empty:
        return np.nan, np.nan, 0
    return float(values.mean()), float(values.std(ddof=1)) if len(values) > 1 else np.nan, int(len(values))


def _metric(table: pd.DataFrame, calibrator: str, metric: str, bins=None) -> pd.DataFrame:
    """Rows of one calibrator and metric (bins None: an unbinned metric)."""
    rows = table[(table["calibrator"] == calibrator) & (table["metric"] == metric)]
    return rows[rows["bins"].isna()] if bins is None else rows[rows["bins"] == bins]


def _setting(params: dict, dataset: str, model: str) -> dict:
    return params["settings"].get(f"{dataset}/{model}", {"dataset": None, "model": None, "stand_in": True,
                                                         "describe": "no published counterpart"})


# ------------------------------------------------------------------------ mukhoti2020

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
        setting = _setting(params, dataset, model)
        paper_loss = params["losses"][loss]
        for stage in params["stages"]:
            calibrator = params["post"] if stage == "post_t" else params["pre"]
            temperature = np.nan
            if stage == "post_t":
                temperature = _mean_std(_metric(group, calibrator, "temperature")["value"])[0]
            for ours, paper_metric, scale in _MUKHOTI_METRICS[params["metric"]]:
                bins = params["bins"] if ours in _BINNED else None
                cell_rows = _metric(group, calibrator, ours, bins)
                mean, std, n = _mean_std(cell_rows["value"] * scale)
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


# ---------------------------------------------------------------------- komisarenko2024


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
        setting = _setting(params, dataset, model)
        about = params["losses"].get(loss, {})
        for calibration, keys in (("temperature_scaling", params["ts"]), ("focal_temperature_scaling", params["fts"])):
            if not any(keys.values()):
                continue
            by_ece, by_nll = keys.get("ece"), keys.get("nll")
            row = {"table": "komisarenko2024_table1", "dataset": dataset, "model": model, "loss": loss,
                   "approach": about.get("approach"), "gamma_train": about.get("gamma_train"), "calibration": calibration}
            accuracy = 100.0 * (1.0 - _metric(group, by_ece or by_nll, "error")["value"])
            row["accuracy_mean"], row["accuracy_std"], row["n_seeds"] = _mean_std(accuracy)
            for column, key, metric, metric_bins, scale in (("logloss", by_nll, "nll", None, 1.0),
                                                             ("ece", by_ece, "adaece", bins, 100.0)):
                if key is None:
                    row.update({f"{column}_mean": np.nan, f"{column}_std": np.nan, f"{column}_temperature": np.nan,
                                f"{column}_gamma_eval": np.nan})
                    continue
                row[f"{column}_mean"], row[f"{column}_std"], _ = _mean_std(_metric(group, key, metric, metric_bins)["value"] * scale)
                row[f"{column}_temperature"] = _mean_std(_metric(group, key, "temperature")["value"])[0]
                row[f"{column}_gamma_eval"] = _mode(_metric(group, key, "gamma")["value"])
            row.update({"paper_dataset": komisarenko_dataset(setting["dataset"]), "stand_in": setting["stand_in"]})
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


# ----------------------------------------------------------------- charoenphakdee2021


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
            hit = _metric(mine, panel["calibrator"], metric, bins)
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
        mean, std, n = _mean_std(group["value"] * 100.0)
        rows.append({"paradigm": paradigm, "dataset": dataset, "model": model, "gamma": gamma,
                     "score": "ECE-raw" if calibrator == "raw" else "ECE-Ψ", "bins": params["bins"], "mean": mean, "std": std,
                     "n_seeds": n, "health": health_mark(group)})
    return pd.DataFrame(rows)


# ------------------------------------------------------------------------ hossain2021

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
            mean, std, _ = _mean_std(group.loc[group["metric"] == metric, "value"] * scale)
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


BUILDERS = {
    "h21_tables": hossain_tables,
    "m20_table": mukhoti_table,
    "k24_table1": komisarenko_table,
    "c21_synthetic_scores": synthetic_scores,
    "c21_ece_summary": ece_summary,
}


def build(artifact, study_table: pd.DataFrame) -> pd.DataFrame:
    """The table of a planned table artifact from its study's tidy table."""
    if artifact.kind != "table" or artifact.builder not in BUILDERS:
        raise ValueError(f"{artifact.name!r} is not a planned table (builder {artifact.builder!r})")
    return BUILDERS[artifact.builder](study_table, artifact.params)


def read_study_table(path) -> pd.DataFrame:
    return read_csv(path, dtype={"calibrator": str, "metric": str, "loss": str, "model": str, "dataset": str,
                                    "class": str})


# --------------------------------------------------------------------------- reading


def _cell(mean, std=np.nan, temperature=np.nan, digits: int = 2, mark="") -> str:
    """"mean ± std (T)", and the run-health mark (:func:`health_mark`) after it when there is one."""
    if mean is None or (isinstance(mean, float) and np.isnan(mean)):
        text = "—"
    else:
        text = f"{mean:.{digits}f}"
        if std is not None and not (isinstance(std, float) and np.isnan(std)):
            text += f" ± {std:.{digits}f}"
        if temperature is not None and not (isinstance(temperature, float) and np.isnan(temperature)):
            text += f" ({temperature:.2f})"
    return _marked(text, mark)


def _marked(text: str, mark) -> str:
    """``text`` with the run-health mark after it, if there is one."""
    return f"{text} {mark}" if isinstance(mark, str) and mark else text


def _marks(table: pd.DataFrame) -> list:
    """Each row's health mark ("" where none; a table read back from CSV has NaN there)."""
    return table["health"].fillna("").tolist() if "health" in table.columns else [""] * len(table)


def present(builder: str, table: pd.DataFrame) -> pd.DataFrame:
    """A built table shaped for reading: ours and published side by side, cells as text."""
    if table.empty:
        return table
    if builder == "m20_table":
        shown = table.assign(
            setting=table["dataset"] + " / " + table["model"],
            ours=[_cell(m, s, t, mark=h) for m, s, t, h in zip(table["ours_mean"], table["ours_std"],
                                                              table["ours_temperature"], _marks(table))],
            published_cell=[_cell(m, np.nan, t) for m, t in zip(table["published"], table["published_temperature"])],
            paper_setting=(table["paper_dataset"].fillna("—") + ", " + table["paper_model"].fillna("—")),
        )
        wide = shown.pivot_table(index=["setting", "loss", "paper_loss", "paper_setting"],
                                 columns=["metric", "stage"], values=["ours", "published_cell"], aggfunc="first",
                                 sort=False)
        wide.columns = [f"{'ours' if who == 'ours' else 'published'} {metric} {stage}".replace(" none", "")
                        for who, metric, stage in wide.columns]
        return wide.reset_index()
    if builder == "k24_table1":
        out = table[["dataset", "model", "loss", "calibration", "paper_dataset"]].copy()
        marks = _marks(table)
        out["ours accuracy (%)"] = [_cell(m, s, digits=1, mark=h) for m, s, h in zip(table["accuracy_mean"], table["accuracy_std"], marks)]
        out["published accuracy (%)"] = [_cell(m, s, digits=1) for m, s in zip(table["published_accuracy_mean"], table["published_accuracy_std"])]
        out["ours log-loss (T)"] = [_cell(m, s, t, mark=h) for m, s, t, h in zip(table["logloss_mean"], table["logloss_std"], table["logloss_temperature"], marks)]
        out["published log-loss (T)"] = [_cell(m, s, t) for m, s, t in zip(table["published_logloss_mean"], table["published_logloss_std"], table["published_logloss_temperature"])]
        out["ours ECE % (T)"] = [_cell(m, s, t, mark=h) for m, s, t, h in zip(table["ece_mean"], table["ece_std"], table["ece_temperature"], marks)]
        out["published ECE % (T)"] = [_cell(m, s, t) for m, s, t in zip(table["published_ece_mean"], table["published_ece_std"], table["published_ece_temperature"])]
        out["ours γ_ev (ECE / NLL)"] = [_marked(f"{_cell(e)} / {_cell(n)}", h) for e, n, h in zip(table["ece_gamma_eval"], table["logloss_gamma_eval"], marks)]
        out["published γ_ev"] = [_cell(g) for g in table["published_gamma_eval"]]
        return out
    if builder == "h21_tables":
        out = table[["dataset", "model", "loss", "n_folds", "paper_setting"]].copy()
        marks = _marks(table)
        out["ours IoU (%)"] = [_cell(m, s, mark=h) for m, s, h in zip(table["iou_mean"], table["iou_std"], marks)]
        out["published IoU (%)"] = [_cell(m, s) for m, s in zip(table["published_iou_mean"], table["published_iou_std"])]
        out["ours HD (pixels)"] = [_cell(m, s, mark=h) for m, s, h in zip(table["hd_mean"], table["hd_std"], marks)]
        out["published HD (mm)"] = [_cell(m, s) for m, s in zip(table["published_hd_mean"], table["published_hd_std"])]
        out["ours missed regions (%)"] = [_cell(m, s, digits=1, mark=h) for m, s, h in zip(table["hd_missed_mean"], table["hd_missed_std"], marks)]
        out["ours pixel ECE (%)"] = [_cell(m, s, mark=h) for m, s, h in zip(table["pixel_ece_mean"], table["pixel_ece_std"], marks)]
        out["published from"] = [f"Table {int(t)} ({p})" if isinstance(p, str) else "—"
                                 for t, p in zip(table["paper_table"].fillna(0), table["published_provenance"])]
        return out
    if builder == "c21_synthetic_scores":  # one run per panel: the mark goes on the panel's label
        panels = [_marked(panel, mark) for panel, mark in zip(table["panel"], _marks(table))]
        return table.assign(panel=panels).pivot_table(index="panel", columns="metric", values="value",
                                                      sort=False).reset_index()
    if builder == "c21_ece_summary":
        shown = table.assign(cell=[_cell(m, s, mark=h) for m, s, h in zip(table["mean"], table["std"], _marks(table))])
        return shown.pivot_table(index=["paradigm", "dataset", "model", "gamma"], columns="score", values="cell",
                                 aggfunc="first", sort=False).reset_index()
    raise ValueError(f"no presentation for table builder {builder!r}")
