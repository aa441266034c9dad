"""Paper tables from a study's tidy table, with the published value beside ours: the shared
helpers, and :func:`build` / :func:`present`, which dispatch to each paper's builders
(the ``page`` of each paper package, :mod:`focalcal.papers`).

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

from collections.abc import Callable
from typing import NamedTuple

import numpy as np
import pandas as pd

from focalcal import catalog
from focalcal.files.artefacts import read_csv
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


def mean_std(values: pd.Series) -> tuple[float, float, int]:
    values = values.dropna().astype(float)
    if values.empty:
        return np.nan, np.nan, 0
    return float(values.mean()), float(values.std(ddof=1)) if len(values) > 1 else np.nan, len(values)


def metric_rows(table: pd.DataFrame, calibrator: str, metric: str, bins=None) -> pd.DataFrame:
    """Rows of one calibrator and metric (bins None: an unbinned metric)."""
    rows = table[(table["calibrator"] == calibrator) & (table["metric"] == metric)]
    return rows[rows["bins"].isna()] if bins is None else rows[rows["bins"] == bins]


def setting_of(params: dict, dataset: str, model: str) -> dict:
    return params["settings"].get(f"{dataset}/{model}", {"dataset": None, "model": None, "stand_in": True,
                                                         "describe": "no published counterpart"})


class PaperTable(NamedTuple):
    """A paper table's two steps: ``build(study_table, params)`` -> tidy CSV rows with ours and
    published side by side; ``present(built)`` -> the same shaped for reading, cells as text."""

    build: Callable[[pd.DataFrame, dict], pd.DataFrame]
    present: Callable[[pd.DataFrame], pd.DataFrame]


def build(artifact, study_table: pd.DataFrame) -> pd.DataFrame:
    """The table of a planned table artifact from its study's tidy table."""
    if artifact.kind != "table":
        raise ValueError(f"{artifact.name!r} is not a planned table (builder {artifact.builder!r})")
    return catalog.paper(artifact.paper).table_builder(artifact.builder).build(study_table, artifact.params)


def read_study_table(path) -> pd.DataFrame:
    return read_csv(path, dtype={"calibrator": str, "metric": str, "loss": str, "model": str, "dataset": str,
                                    "class": str})


# --------------------------------------------------------------------------- reading


def format_cell(mean, std=np.nan, temperature=np.nan, digits: int = 2, mark="") -> str:
    """"mean ± std (T)", and the run-health mark (:func:`health_mark`) after it when there is one."""
    if mean is None or (isinstance(mean, float) and np.isnan(mean)):
        text = "—"
    else:
        text = f"{mean:.{digits}f}"
        if std is not None and not (isinstance(std, float) and np.isnan(std)):
            text += f" ± {std:.{digits}f}"
        if temperature is not None and not (isinstance(temperature, float) and np.isnan(temperature)):
            text += f" ({temperature:.2f})"
    return with_mark(text, mark)


def with_mark(text: str, mark) -> str:
    """``text`` with the run-health mark after it, if there is one."""
    return f"{text} {mark}" if isinstance(mark, str) and mark else text


def row_marks(table: pd.DataFrame) -> list:
    """Each row's health mark ("" where none; a table read back from CSV has NaN there)."""
    return table["health"].astype(object).fillna("").tolist() if "health" in table.columns else [""] * len(table)


def present(paper: str, builder: str, table: pd.DataFrame) -> pd.DataFrame:
    """A built table shaped for reading: ours and published side by side, cells as text."""
    return table if table.empty else catalog.paper(paper).table_builder(builder).present(table)
