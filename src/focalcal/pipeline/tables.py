"""One study's tidy table: a row per run x calibrator x metric, from the runs' metrics files.

Columns: study, paper, mirrors, dataset, model, loss, recipe, seed, status, calibrator, metric,
bins, value. Only the calibrators the study's grids list and the bin counts it reports are kept
(a shared run may carry more for other studies).

A segmentation study (hossain2021) has a row per run x metric x class instead, from the runs'
evaluations: study, paper, mirrors, dataset, model, loss, recipe, seed, status, fold, n_folds,
metric, class, value (fold and n_folds empty without cross-validation).

``status`` is the run's health (:mod:`focalcal.training.health`: trained, diverged, collapsed
or not converged), read from its ``run.json`` — a declared input of the table's rule
(``Plan.study_inputs``), so it is strict: a ``run.json`` without a health entry (written
before health checks) is refused with the command that re-writes it from the checkpoint.
"""

from __future__ import annotations

import pandas as pd

from focalcal import paths
from focalcal.files.artefacts import atomic_write_text, read_csv, read_json
from focalcal.pipeline.plan import Plan, Run
from focalcal.training.health import health_of

COLUMNS = ("study", "paper", "mirrors", "dataset", "model", "loss", "recipe", "seed", "status", "calibrator", "metric", "bins",
           "value")
SEGMENTATION_COLUMNS = ("study", "paper", "mirrors", "dataset", "model", "loss", "recipe", "seed", "status", "fold",
                        "n_folds", "metric", "class", "value")


def run_status(plan: Plan, run: Run, root=".") -> str:
    """The run's health status, from its ``run.json`` (refused without a health entry)."""
    path = f"{root}/{plan.run_info_path(run)}"
    return health_of(read_json(path), path)["status"]


def study_table(plan: Plan, study_key: str, root=".") -> pd.DataFrame:
    study = plan.studies[study_key]
    if any(run.segmentation for run in study.runs):
        return segmentation_table(plan, study_key, root)
    frames = []
    for run, calibrators in study.runs.items():
        if not calibrators:
            continue
        metrics = read_csv(f"{root}/{run.calibration_dir}/{paths.METRICS}", dtype={"calibrator": str, "metric": str})
        metrics = metrics[metrics["calibrator"].isin(calibrators)]
        binned = metrics["bins"].notna()
        metrics = metrics[~binned | metrics["bins"].isin(study.ece_bins)]
        missing = sorted(set(calibrators) - set(metrics["calibrator"]))
        if missing:
            raise ValueError(f"{run.calibration_dir}/metrics.csv lacks calibrator(s) {missing}; rerun its calibration")
        frames.append(metrics.assign(study=study.key, paper=study.paper, mirrors=study.grid_of[run],
                                     status=run_status(plan, run, root), **run.columns()))
    table = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=COLUMNS)
    table["bins"] = table["bins"].astype("Int64")
    return table.loc[:, list(COLUMNS)]


def segmentation_table(plan: Plan, study_key: str, root=".") -> pd.DataFrame:
    study = plan.studies[study_key]
    frames = []
    for run in study.runs:
        metrics = read_csv(f"{root}/{run.evaluation_dir}/{paths.METRICS}", dtype={"metric": str, "class": str})
        frames.append(metrics.assign(study=study.key, paper=study.paper, mirrors=study.grid_of[run],
                                     status=run_status(plan, run, root), fold=run.fold, n_folds=run.n_folds,
                                     **run.columns()))
    table = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=SEGMENTATION_COLUMNS)
    for column in ("fold", "n_folds"):
        table[column] = table[column].astype("Int64")
    return table.loc[:, list(SEGMENTATION_COLUMNS)]


def write_study_table(plan: Plan, study_key: str, path, root=".") -> pd.DataFrame:
    table = study_table(plan, study_key, root)
    atomic_write_text(table.to_csv(index=False), path)
    return table
