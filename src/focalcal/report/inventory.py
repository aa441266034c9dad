"""What trained: one row per run with its epochs, training time, device and size.

Read from each run's ``run.json`` — in the run directory, written with the logits, or for a
segmentation run in ``results/segmentation/<run>/``, written with its test-fold scores — and,
for runs that have neither, from ``history.csv``; the Snakemake
benchmark of the training job adds its wall time (process start-up included) when present.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from focalcal._io import read_csv, read_json

COLUMNS = ["run", "dataset", "arch", "loss", "recipe", "seed", "epochs", "train_time_s", "job_wall_s", "device",
           "host", "parameters", "finished_at"]


def run_record(root: Path, run_path: str) -> dict:
    """One run's inventory row; ``run_path`` is ``<dataset>/<arch>/<loss>/<recipe>/seed<k>``."""
    root = Path(root)
    run_dir = root / "results/runs" / run_path
    dataset, arch, loss, recipe, seed = run_path.split("/")
    row = {"run": run_path, "dataset": dataset, "arch": arch, "loss": loss, "recipe": recipe,
           "seed": int(seed.removeprefix("seed"))}
    info_path = run_dir / "run.json"
    if not info_path.is_file():
        info_path = root / "results/segmentation" / run_path / "run.json"
    if info_path.is_file():
        info = read_json(info_path)
        row.update(epochs=info.get("epochs_done"), train_time_s=info.get("train_time_s"), device=info.get("device"),
                   host=info.get("host"), parameters=info.get("parameters"), finished_at=info.get("finished_at"))
    else:
        history_path = run_dir / "history.csv"
        if not history_path.is_file():
            raise ValueError(f"run {run_path} has neither run.json nor history.csv under {run_dir}; train it first")
        history = read_csv(history_path)
        row.update(epochs=int(history["epoch"].max()) if len(history) else 0,
                   train_time_s=float(history["wall_time_s"].iloc[-1]) if len(history) else 0.0)
    benchmark = root / "results/benchmarks/train" / f"{run_path}.tsv"
    if benchmark.is_file():
        row["job_wall_s"] = float(read_csv(benchmark, sep="\t")["s"].iloc[-1])  # Snakemake's: no sidecar
    return row


def run_inventory(root: Path, run_paths) -> pd.DataFrame:
    """The inventory of ``run_paths`` (the plan's runs), in the plan's order."""
    return pd.DataFrame([run_record(root, path) for path in run_paths], columns=COLUMNS)


def summary(inventory: pd.DataFrame) -> dict:
    """Totals for the index page: how many runs, how long they trained, on what."""
    devices = inventory["device"].dropna().astype(str)
    return {
        "runs": int(len(inventory)),
        "train_time_s": float(inventory["train_time_s"].fillna(0).sum()),
        "job_wall_s": float(inventory["job_wall_s"].fillna(0).sum()),
        "epochs": int(inventory["epochs"].fillna(0).sum()),
        "devices": sorted(devices.unique()),
        "hosts": sorted(inventory["host"].dropna().astype(str).unique()),
    }
