"""The files of a run directory, and publishing what its training job staged (torch-free).

A run's training job ends with the model, the data and the device in memory, so it writes
what the next job of the run would otherwise rebuild the model for right there, into
``staged_export/``, with ``run.json`` tagged with the checksum of the checkpoint it came from:
a classifier's val/test logits (for export_logits), a segmentation run's test-fold evaluation
(for evaluate_segmentation). Those jobs stay their own rules and targets, but publishing costs
them a copy: no torch import, no model rebuild. They redo the work from the checkpoint only
when the staged files are missing, damaged, made with other settings, or belong to another
checkpoint. ``run.json``'s ``staged`` record says what the staging cost the training job
(``cpu_s``), so benchmarks can count that CPU as evaluation, not training.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from focalcal import _sidecar
from focalcal._io import CorruptArtefactError, atomic_write, atomic_write_json, read_json, verified_bytes

CHECKPOINT = "checkpoint.pt"
HISTORY = "history.csv"
RELIABILITY = "train_reliability.csv"
GRADIENT_NORMS = "train_gradient_norms.csv"
LOGITS = "logits.npz"
RUN_INFO = "run.json"
SEGMENTATION_METRICS = "metrics.csv"
SEGMENTATION_SAMPLES = "samples.npz"
STAGED_EXPORT = "staged_export"  # what the training job wrote for the run's next job, before that job publishes it
STAGED_RECORD = "staged"  # run.json key: the staging's cost and settings


@dataclass
class RunPaths:
    root: Path

    @property
    def checkpoint(self) -> Path:
        return self.root / CHECKPOINT

    @property
    def history(self) -> Path:
        return self.root / HISTORY

    @property
    def reliability(self) -> Path:
        return self.root / RELIABILITY

    @property
    def gradient_norms(self) -> Path:
        return self.root / GRADIENT_NORMS

    @property
    def logits(self) -> Path:
        return self.root / LOGITS

    @property
    def info(self) -> Path:
        return self.root / RUN_INFO

    @property
    def staged_export(self) -> RunPaths:
        return RunPaths(self.root / STAGED_EXPORT)


def checkpoint_sha256(run_dir) -> str | None:
    """sha256 of the run's checkpoint as it is on disk now (None without one)."""
    path = RunPaths(Path(run_dir)).checkpoint
    return _sidecar.digest_file(path).sha256 if path.exists() else None


def record_staging(run_dir, cpu_s: float, **settings) -> None:
    """Add the ``staged`` record (the CPU seconds the staging took and the settings it used) to
    the staged ``run.json``; :func:`publish_staged` publishes only what matches its settings."""
    info_path = RunPaths(Path(run_dir)).staged_export.info
    info = read_json(info_path)
    info[STAGED_RECORD] = {"cpu_s": round(float(cpu_s), 3), **settings}
    atomic_write_json(info, info_path)


def publish_staged(run_dir, destinations: dict, **settings) -> str:
    """Copy staged files (file name in ``staged_export/`` -> destination path; ``run.json``
    among them) to their destinations, if they came from the checkpoint now in ``run_dir`` and
    were made with ``settings``. Returns "" when published, else why not (the caller redoes it)."""
    if RUN_INFO not in destinations:
        raise ValueError(f"destinations must include {RUN_INFO}: it says which checkpoint the files came from")
    paths = RunPaths(Path(run_dir))
    staged = paths.staged_export.root
    names = sorted(destinations)
    missing = [name for name in names if not (staged / name).exists()]
    missing += [] if paths.checkpoint.exists() else [CHECKPOINT]
    if missing:
        return f"no staged export ({', '.join(missing)} missing)"
    try:
        info = read_json(staged / RUN_INFO)
        contents = {name: verified_bytes(staged / name) for name in names if name != RUN_INFO}
    except CorruptArtefactError as error:
        return f"the staged export is damaged: {error}"
    if info.get("checkpoint_sha256") != checkpoint_sha256(run_dir):
        return "the staged export comes from another checkpoint"
    made_with = {key: info.get(STAGED_RECORD, {}).get(key) for key in settings}
    if made_with != settings:
        return f"the staged export was made with {made_with}, not {settings}"
    for name, data in contents.items():
        atomic_write(destinations[name], lambda handle, data=data: handle.write(data))
    atomic_write_json(info, destinations[RUN_INFO])
    return ""


def publish_staged_export(run_dir) -> str:
    """Publish the staged ``logits.npz`` and ``run.json`` into the run directory (:func:`publish_staged`)."""
    paths = RunPaths(Path(run_dir))
    return publish_staged(run_dir, {LOGITS: paths.logits, RUN_INFO: paths.info})


def publish_staged_segmentation(run_dir, metrics_path, samples_path, info_path, n_bins: int) -> str:
    """Publish a segmentation run's staged test-fold evaluation, if made with ``n_bins`` ECE bins."""
    return publish_staged(run_dir, {SEGMENTATION_METRICS: metrics_path, SEGMENTATION_SAMPLES: samples_path,
                                    RUN_INFO: info_path}, n_bins=int(n_bins))
