"""What trained: one row per run with its epochs, training time, device, size and health.

Read from each run's ``run.json`` — in the run directory, written with the logits, or for a
segmentation run in ``results/segmentation/<run>/``, written with its test-fold scores — and,
for runs that have neither, from ``history.csv``; the Snakemake
benchmark of the training job adds its wall time (process start-up included) when present.

``status`` and ``status_reason`` are the run's health (:mod:`focalcal.training.health`): from
``run.json``; for a run with only a history, judged on the history alone (diverged, not
converged or else "not assessed": without test predictions nothing clears it of collapse);
"not assessed" too for a ``run.json`` written before health checks, whose reason says how
to re-write it. :func:`health_warnings` turns the unhealthy ones into the one-line warnings
the workflow prints when it ends.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from focalcal import paths
from focalcal.files.artefacts import read_csv, read_json
from focalcal.training.health import NOT_ASSESSED, UNHEALTHY, MissingHealthError, assess_health, health_of

COLUMNS = ["run", "dataset", "model", "loss", "recipe", "seed", "status", "status_reason", "epochs", "train_time_s",
           "job_wall_s", "device", "host", "parameters", "finished_at"]


def _info_path(root: Path, run_path: str) -> Path:
    """The run's ``run.json``: beside its logits, else beside its segmentation scores (may not exist)."""
    path = root / paths.run_file(run_path, paths.RUN_INFO)
    return path if path.is_file() else root / paths.evaluation_dir(run_path) / paths.RUN_INFO


def run_health(root, run_path: str) -> dict | None:
    """The run's health (``status``, ``reason``): from its ``run.json``, else judged on its
    ``history.csv`` alone; None when it has neither."""
    root = Path(root)
    info_path = _info_path(root, run_path)
    if info_path.is_file():
        try:
            return health_of(read_json(info_path), info_path)
        except MissingHealthError as error:  # written before health checks: the reason says how to re-write it
            return {"status": NOT_ASSESSED, "reason": str(error)}
    history_path = root / paths.run_file(run_path, paths.HISTORY)
    return assess_health(read_csv(history_path)) if history_path.is_file() else None


def run_record(root: Path, run_path: str) -> dict:
    """One run's inventory row; ``run_path`` is ``<dataset>/<model>/<loss>/<recipe>/seed<k>``."""
    root = Path(root)
    run_dir = root / paths.run_dir(run_path)
    dataset, model, loss, recipe, seed = run_path.split("/")
    row = {"run": run_path, "dataset": dataset, "model": model, "loss": loss, "recipe": recipe,
           "seed": int(seed.removeprefix("seed"))}
    info_path = _info_path(root, run_path)
    if info_path.is_file():
        info = read_json(info_path)
        row.update(epochs=info.get("epochs_done"), train_time_s=info.get("train_time_s"), device=info.get("device"),
                   host=info.get("host"), parameters=info.get("parameters"), finished_at=info.get("finished_at"))
    else:
        history_path = run_dir / paths.HISTORY
        if not history_path.is_file():
            raise ValueError(f"run {run_path} has neither run.json nor history.csv under {run_dir}; train it first")
        history = read_csv(history_path)
        row.update(epochs=int(history["epoch"].max()) if len(history) else 0,
                   train_time_s=float(history["wall_time_s"].iloc[-1]) if len(history) else 0.0)
    health = run_health(root, run_path)
    row.update(status=health["status"], status_reason=health["reason"])
    benchmark = root / paths.benchmark("train", run_path)
    if benchmark.is_file():
        row["job_wall_s"] = float(read_csv(benchmark, sep="\t")["s"].iloc[-1])  # Snakemake's: no sidecar
    return row


def run_inventory(root: Path, run_paths) -> pd.DataFrame:
    """The inventory of ``run_paths`` (the plan's runs), in the plan's order."""
    return pd.DataFrame([run_record(root, path) for path in run_paths], columns=COLUMNS)


def summary(inventory: pd.DataFrame) -> dict:
    """Totals for the index page: how many runs, how long they trained, on what, and how many
    are unhealthy (``unhealthy``: status -> count, only statuses that occur) or not assessed."""
    devices = inventory["device"].dropna().astype(str)
    statuses = inventory["status"].value_counts() if "status" in inventory else pd.Series(dtype=int)
    return {
        "runs": len(inventory),
        "unhealthy": {status: int(statuses[status]) for status in UNHEALTHY if status in statuses},
        "not_assessed": int(statuses.get(NOT_ASSESSED, 0)),
        "train_time_s": float(inventory["train_time_s"].fillna(0).sum()),
        "job_wall_s": float(inventory["job_wall_s"].fillna(0).sum()),
        "epochs": int(inventory["epochs"].fillna(0).sum()),
        "devices": sorted(devices.unique()),
        "hosts": sorted(inventory["host"].dropna().astype(str).unique()),
    }


def health_warnings(root, run_paths) -> list[str]:
    """One line per unhealthy run among ``run_paths`` whose record exists (``run.json``, else
    ``history.csv``), for the end of a workflow run: ``focalcal: WARNING run <path> <status>: <reason>``."""
    lines = []
    for run_path in run_paths:
        try:
            health = run_health(root, run_path)
        except ValueError as error:  # a damaged record: say so, and go on with the other runs
            lines.append(f"focalcal: WARNING run {run_path}: its record could not be read: {error}")
            continue
        if health is not None and health["status"] in UNHEALTHY:
            lines.append(f"focalcal: WARNING run {run_path} {health['status']}: {health['reason']}")
    return lines
