"""The files of a run directory, and publishing the logits its training job staged (torch-free).

A classification run's training job ends with the model, the data and the device in memory,
so it dumps the run's val/test logits and ``run.json`` right there, into ``staged_export/``,
tagged with the checksum of the checkpoint they came from. The export_logits job stays its
own rule and target, but publishing costs it a copy: no torch import, no model rebuild. It
re-dumps from the checkpoint only when the staged files are missing, damaged, or belong to
another checkpoint.
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
STAGED_EXPORT = "staged_export"  # the training job's logits and run.json, before export_logits publishes them


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


def publish_staged_export(run_dir) -> str:
    """Copy the staged ``logits.npz`` and ``run.json`` into the run directory, if they came from
    the checkpoint now there. Returns "" when published, else why not (the caller re-dumps)."""
    paths = RunPaths(Path(run_dir))
    staged = paths.staged_export
    missing = [path.name for path in (staged.logits, staged.info, paths.checkpoint) if not path.exists()]
    if missing:
        return f"no staged export ({', '.join(missing)} missing)"
    try:
        info = read_json(staged.info)
        logits = verified_bytes(staged.logits)
    except CorruptArtefactError as error:
        return f"the staged export is damaged: {error}"
    if info.get("checkpoint_sha256") != checkpoint_sha256(run_dir):
        return "the staged export comes from another checkpoint"
    atomic_write(paths.logits, lambda handle: handle.write(logits))
    atomic_write_json(info, paths.info)
    return ""
