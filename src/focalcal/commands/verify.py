"""``focalcal verify``: check every artefact under ``results/`` against its checksum sidecar,
and that each run's files belong together.

A file damaged on disk (a flipped bit, a truncation that kept its modification time) is
otherwise found only when a job reads it. This walks the tree, hashes every file that has a
``<name>.sha256`` sidecar (:mod:`focalcal.files.sidecar`) and lists each damaged or missing one with
the command that re-makes it (:mod:`focalcal.files.remake`).

A file copied in from another run, with its sidecar, is intact, so the sidecars cannot tell.
Each run's files are chained instead: the checkpoint's fingerprint must be that of the run's
``run_config.json`` (the check that resuming and exporting make); ``run.json`` records the
sha256 of the checkpoint and of the ``logits.npz`` (a translation run's ``token_logits.npz``)
it was written with; ``calibration.json`` the sha256 of the logits it was fitted on; a
translation run's decodes the sha256 of the checkpoint they beam-searched with. Each broken
link names the file that is not of its run, with its re-make command. Only the checkpoints need torch, imported when there is one.

A run's files and its calibration's are always written with sidecars: one found without its
sidecar (a write cut off between the file and its checksum) is listed as unverified, never
skipped. The ``.part`` files that killed writes left (:func:`focalcal.files.artefacts.remove_stale_parts`)
are deleted and named (:func:`remove_leftovers`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from focalcal.files import sidecar
from focalcal.files.artefacts import check_against_sidecar, remove_stale_parts
from focalcal.files.remake import remake_hint
from focalcal.paths import (
    CALIBRATION,
    CALIBRATION_PARAMS,
    CHECKPOINT,
    DECODE,
    GRADIENT_NORMS,
    HISTORY,
    LOGITS,
    METRICS,
    RELIABILITY,
    RESULTS,
    RUN_CONFIG,
    RUN_INFO,
    RUNS,
    SEGMENTATION,
    TOKEN_LOGITS,
)
from focalcal.pipeline.calibrate import LOGITS_SHA256 as CALIBRATION_LOGITS
from focalcal.training.run_files import CHECKPOINT_SHA256, LOGITS_SHA256, TOKEN_LOGITS_SHA256, RunPaths

DAMAGED = "damaged"
MISMATCHED = "mismatched"  # intact, but not of its run (copied from another run, or left from an earlier one)
UNVERIFIED = "unverified"  # present, but its sidecar is missing: its content cannot be checked
# The files of a run directory, and of its calibration folder, that are always written with a sidecar.
RUN_FILES = (RUN_CONFIG, CHECKPOINT, HISTORY, RELIABILITY, GRADIENT_NORMS, LOGITS, TOKEN_LOGITS, RUN_INFO)
CALIBRATION_FILES = (CALIBRATION_PARAMS, METRICS)


@dataclass(frozen=True)
class Damage:
    path: Path
    problem: str
    remake: str
    kind: str = DAMAGED


def sidecared_files(results: Path) -> Iterator[Path]:
    """Every artefact under ``results`` that has a sidecar, in a stable order."""
    for folder, _, names in sorted(os.walk(results)):
        for name in sorted(names):
            if name.endswith(sidecar.SUFFIX) and not name.startswith("."):
                yield Path(folder) / name.removesuffix(sidecar.SUFFIX)


def verify_tree(workdir=".", progress: Callable[[str], None] | None = None) -> tuple[int, list[Damage]]:
    """(artefacts checked, the damaged ones, then those not of their run) under ``<workdir>/results``."""
    results = Path(workdir) / RESULTS
    if not results.is_dir():
        raise FileNotFoundError(f"no results folder in {workdir}: pass the workflow directory that holds results/")
    checked, damaged = 0, []
    for path in sidecared_files(results):
        checked += 1
        try:
            problem = "it is missing" if not path.exists() else check_against_sidecar(path)
        except sidecar.SidecarUnreadable as error:
            problem = f"its checksum file {sidecar.sidecar_path(path).name} is unreadable ({error})"
        except OSError as error:
            problem = f"it cannot be read ({error})"
        if problem is not None:
            damaged.append(Damage(path, problem, remake_hint(path)))
        if progress is not None and checked % 500 == 0:
            progress(f"checked {checked} artefacts, {len(damaged)} damaged so far")
    # A file without its sidecar is still compared with its run; one found damaged or mismatched
    # there is named as that (the same re-make), not also as unverified.
    unverified = without_sidecar(results)
    bad = {damage.path for damage in damaged}
    found_in_runs = [problem for run in run_dirs(results) for problem in check_run(results, run, bad)]
    named = {problem.path for problem in found_in_runs}
    return (checked + len(unverified),
            damaged + [damage for damage in unverified if damage.path not in named] + found_in_runs)


def without_sidecar(results: Path) -> list[Damage]:
    """The run files (:data:`RUN_FILES`, :data:`CALIBRATION_FILES`) present without their sidecar."""
    found = []
    for run_dir in run_dirs(results):
        calibration = results / _below_results(CALIBRATION) / run_dir.relative_to(results / _below_results(RUNS))
        for path in [run_dir / name for name in RUN_FILES] + [calibration / name for name in CALIBRATION_FILES]:
            if path.is_file() and not sidecar.sidecar_path(path).exists():
                found.append(Damage(path, f"its checksum file {sidecar.sidecar_path(path).name} is missing, so its "
                                          "content cannot be checked (a write cut off between the file and its "
                                          "checksum, or a file put there by hand)", remake_hint(path), UNVERIFIED))
    return found


def remove_leftovers(workdir=".") -> list[Path]:
    """Delete the ``.part`` files under ``<workdir>/results`` that no writer holds (what killed
    writes left); return them."""
    results = Path(workdir) / RESULTS
    return [part for folder, _, _ in sorted(os.walk(results)) for part in remove_stale_parts(folder)]


def run_dirs(results: Path) -> Iterator[Path]:
    """Every run directory under ``results`` (one holding a ``run_config.json``), in a stable order."""
    for folder, _, names in sorted(os.walk(results / _below_results(RUNS))):
        if RUN_CONFIG in names:
            yield Path(folder)


def check_run(results: Path, run_dir: Path, bad=frozenset()) -> list[Damage]:
    """The files of one run that are not of it: a checkpoint of other settings than its
    ``run_config.json``, logits (with their ``run.json``) dumped from another checkpoint, a
    ``logits.npz`` other than the one ``run.json`` was written with, a calibration fitted on
    other logits, a segmentation evaluation or a decode of another checkpoint. Files in ``bad`` (damaged or
    missing) are not compared: they are named already."""
    paths = RunPaths(run_dir)
    run = run_dir.relative_to(results / _below_results(RUNS))
    usable = lambda path: path not in bad and path.is_file()
    found: list[Damage] = []
    mismatch = lambda path, problem: found.append(Damage(path, problem, remake_hint(path), MISMATCHED))
    if usable(paths.checkpoint) and usable(paths.root / RUN_CONFIG):
        found += _checkpoint_against_config(paths)
    checkpoint = _sha256(paths.checkpoint) if usable(paths.checkpoint) else None
    # a translation run dumps token_logits.npz (run.json records it under its own key) in place of logits.npz
    dump, dump_key = ((paths.token_logits, TOKEN_LOGITS_SHA256) if paths.token_logits.exists()
                      else (paths.logits, LOGITS_SHA256))
    logits = _sha256(dump) if usable(dump) else None
    info = _json(paths.info) if usable(paths.info) else {}
    dumped_from, written_with = info.get(CHECKPOINT_SHA256), info.get(dump_key)
    if checkpoint and logits and dumped_from and dumped_from != checkpoint:
        mismatch(dump, f"it and its {RUN_INFO} were dumped from another checkpoint ({RUN_INFO} records "
                       f"sha256 {_short(dumped_from)}, {CHECKPOINT} is {_short(checkpoint)})")
    elif logits and written_with and written_with != logits:
        mismatch(dump, f"it is not the file its {RUN_INFO} was dumped with ({RUN_INFO} records "
                       f"sha256 {_short(written_with)}, it is {_short(logits)})")
    params = results / _below_results(CALIBRATION) / run / CALIBRATION_PARAMS
    fitted_on = _json(params).get(CALIBRATION_LOGITS) if logits and usable(params) else None
    if fitted_on and fitted_on != logits:
        mismatch(params, f"it was fitted on other logits (it records sha256 {_short(fitted_on)}, "
                         f"{dump} is {_short(logits)})")
    evaluation = results / _below_results(SEGMENTATION) / run
    scored = (_json(evaluation / RUN_INFO).get(CHECKPOINT_SHA256)
              if checkpoint and usable(evaluation / RUN_INFO) and usable(evaluation / METRICS) else None)
    if scored and scored != checkpoint:
        mismatch(evaluation / METRICS, f"it scores another checkpoint (the {RUN_INFO} beside it records sha256 "
                                       f"{_short(scored)}, {paths.checkpoint} is {_short(checkpoint)})")
    decodes = [*sorted((paths.root / DECODE).glob("*.json")),
               *sorted((results / _below_results(CALIBRATION) / run / DECODE).glob("*.json"))]
    for decode in decodes if checkpoint else ():
        decoded = _json(decode).get(CHECKPOINT_SHA256) if usable(decode) else None
        if decoded and decoded != checkpoint:
            mismatch(decode, f"it was decoded from another checkpoint (it records sha256 {_short(decoded)}, "
                             f"{paths.checkpoint} is {_short(checkpoint)})")
    return found


def _checkpoint_against_config(paths: RunPaths) -> list[Damage]:
    """The checkpoint, when it is not of the run's ``run_config.json`` (the fingerprint check
    that resuming and exporting make), or either file when it cannot be read. Imports torch."""
    import pickle

    from focalcal.files.artefacts import read_json
    from focalcal.training.checkpoint import foreign_checkpoint, load_checkpoint
    from focalcal.training.config import RunConfig

    run_config = paths.root / RUN_CONFIG
    try:
        config = RunConfig.from_dict(read_json(run_config))
    except (ValueError, TypeError, OSError) as error:
        return [Damage(run_config, f"it is not a run config ({error})", remake_hint(run_config))]
    try:
        state = load_checkpoint(paths.checkpoint)
    except (ValueError, OSError, pickle.UnpicklingError) as error:  # its message ends with the re-make command
        return [Damage(paths.checkpoint, str(error).split(". Re-make it")[0], remake_hint(paths.checkpoint))]
    foreign = foreign_checkpoint(state, config)
    problem = foreign and f"it {foreign} than its {RUN_CONFIG}"
    return [Damage(paths.checkpoint, problem, remake_hint(paths.checkpoint), MISMATCHED)] if problem else []


def _below_results(path: str) -> Path:
    return Path(path).relative_to(RESULTS)


def _sha256(path: Path) -> str:
    """sha256 of an intact file: the one its sidecar records (it was just checked), else hashed."""
    recorded = sidecar.read(path)
    return recorded.sha256 if recorded is not None else sidecar.digest_file(path).sha256


def _json(path: Path) -> dict:
    try:
        value = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return {}  # unreadable: nothing recorded to compare
    return value if isinstance(value, dict) else {}


def _short(sha256: str) -> str:
    return f"{sha256[:12]}..."
