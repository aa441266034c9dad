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

import shlex
from dataclasses import dataclass
from pathlib import Path

from focalcal.files import sidecar
from focalcal.files.artefacts import (
    CorruptArtefactError,
    atomic_write,
    atomic_write_json,
    check_against_sidecar,
    read_json,
    verified_bytes,
)
from focalcal.paths import (
    CHECKPOINT,
    GRADIENT_NORMS,
    HISTORY,
    LOGITS,
    RELIABILITY,
    RUN_INFO,
    STAGED_EXPORT,
    TOKEN_LOGITS,
)
from focalcal.paths import METRICS as SEGMENTATION_METRICS
from focalcal.paths import SAMPLES as SEGMENTATION_SAMPLES

STAGED_RECORD = "staged"  # run.json key: the staging's cost and settings
CHECKPOINT_SHA256 = "checkpoint_sha256"  # run.json key: the checkpoint its files were made from
LOGITS_SHA256 = "logits_sha256"  # run.json key: the logits.npz written with it (focalcal verify pairs them)
TOKEN_LOGITS_SHA256 = "token_logits_sha256"  # run.json key of a translation run: its token_logits.npz


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
    def token_logits(self) -> Path:
        return self.root / TOKEN_LOGITS

    @property
    def info(self) -> Path:
        return self.root / RUN_INFO

    @property
    def staged_export(self) -> RunPaths:
        return RunPaths(self.root / STAGED_EXPORT)


def checkpoint_sha256(run_dir) -> str | None:
    """sha256 of the run's checkpoint as it is on disk now (None without one)."""
    path = RunPaths(Path(run_dir)).checkpoint
    return sidecar.digest_file(path).sha256 if path.exists() else None


def logits_record(logits_path) -> dict:
    """``run.json``'s record of the ``logits.npz`` written with it, so that a logits file from
    another run (or another checkpoint of this one) is told apart."""
    return {LOGITS_SHA256: sidecar.digest_file(logits_path).sha256}


def token_logits_record(path) -> dict:
    """``run.json``'s record of a translation run's ``token_logits.npz``, as :func:`logits_record`."""
    return {TOKEN_LOGITS_SHA256: sidecar.digest_file(path).sha256}


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
    if info.get(CHECKPOINT_SHA256) != checkpoint_sha256(run_dir):
        return "the staged export comes from another checkpoint"
    made_with = {key: info.get(STAGED_RECORD, {}).get(key) for key in settings}
    if made_with != settings:
        return f"the staged export was made with {made_with}, not {settings}"
    for name, data in contents.items():
        atomic_write(destinations[name], lambda handle, data=data: handle.write(data))
    atomic_write_json(info, destinations[RUN_INFO])
    return ""


class DamagedCheckpointError(RuntimeError):
    """A finished run's checkpoint cannot be read, so what it would re-make cannot be; the
    message says what the run keeps and the ways out."""


def damaged_checkpoint_message(run_dir, problem: str) -> str:
    """Why ``run_dir``'s logits cannot be re-dumped (``problem``: what is wrong with its checkpoint),
    what the run keeps, and the ways out: the staged copy, if it is byte-identical to the logits
    the run published (its sha256 is the one recorded in ``logits.npz.sha256``), or retraining."""
    from focalcal.files.remake import remake_command, snakemake_command

    paths = RunPaths(Path(run_dir))
    kept = {name: _state(paths.root / name) for name in (LOGITS, RUN_INFO)}
    lines = [(f"{paths.checkpoint} cannot be read ({problem}), so the logits cannot be re-dumped from it. "
             f"The run keeps its outputs: {LOGITS} {kept[LOGITS]}, {RUN_INFO} {kept[RUN_INFO]} (Snakemake puts "
             "them back after this failure, and the jobs after this one go on with them). Ways out:")]
    staged = paths.staged_export
    recorded = _recorded(paths.logits)
    if recorded is not None and staged.logits.exists() and sidecar.digest_file(staged.logits) == recorded:
        names = [staged.root / name for name in (LOGITS, LOGITS + sidecar.SUFFIX, RUN_INFO, RUN_INFO + sidecar.SUFFIX)]
        restore = (f"cp -p {' '.join(shlex.quote(str(name)) for name in names)} {shlex.quote(str(paths.root))}/ && "
                   + snakemake_command("--touch", paths.logits, paths.info))
        lines.append(f"  - the staged copy {staged.logits} is these logits: its sha256 is the one recorded for "
                     f"{paths.logits} when it was published. If {LOGITS} is lost or damaged, put the copy back "
                     f"(and mark it up to date): {restore}")
    else:
        lines.append(f"  - no staged copy matches the checksum recorded for {paths.logits}")
    lines.append(f"  - retrain the run: {remake_command(paths.checkpoint)[0]}")
    return "\n".join(lines)


def _recorded(path: Path) -> sidecar.Checksum | None:
    """The checksum recorded for ``path``; None without a readable one."""
    try:
        return sidecar.read(path)
    except sidecar.SidecarUnreadable:
        return None


def _state(path: Path) -> str:
    if not path.exists():
        return "is missing"
    if _recorded(path) is None:
        return "is there (no readable checksum recorded)"
    return "matches its recorded checksum" if check_against_sidecar(path) is None else "is damaged"


def publish_staged_export(run_dir) -> str:
    """Publish the staged ``logits.npz`` and ``run.json`` into the run directory (:func:`publish_staged`)."""
    paths = RunPaths(Path(run_dir))
    return publish_staged(run_dir, {LOGITS: paths.logits, RUN_INFO: paths.info})


def publish_staged_token_logits(run_dir) -> str:
    """Publish a translation run's staged ``token_logits.npz`` and ``run.json`` (:func:`publish_staged`)."""
    paths = RunPaths(Path(run_dir))
    return publish_staged(run_dir, {TOKEN_LOGITS: paths.token_logits, RUN_INFO: paths.info})


def publish_staged_segmentation(run_dir, metrics_path, samples_path, info_path, n_bins: int) -> str:
    """Publish a segmentation run's staged test-fold evaluation, if made with ``n_bins`` ECE bins."""
    return publish_staged(run_dir, {SEGMENTATION_METRICS: metrics_path, SEGMENTATION_SAMPLES: samples_path,
                                    RUN_INFO: info_path}, n_bins=int(n_bins))
