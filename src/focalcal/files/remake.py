"""How each workflow artefact is re-made: the one map that error messages about damaged files quote.

Patterns are matched (``fnmatch``: ``*`` spans folders) against the path from the workflow
directory, the one holding ``results/``. A declared rule output is re-made by forcing that
one job, ``snakemake -f <path>``, which runs nothing upstream of it. The checkpoint is the
exception: it is not a declared output (Snakemake would delete it before a resumed job), so
it is deleted and its run's training job forced. A run's ``staged_export/`` is not a target
either: it is deleted, and the job that publishes it re-makes its files from the checkpoint.

Every printed command runs as printed, from the state that printed it (``rm -f``, ``rm -rf``:
Snakemake may already have deleted a failed job's outputs). The Snakefile sets :data:`WORKFLOW_ENV` to its own
path and the config files in use, which every command then names (``-s`` when the Snakefile
is not the workflow directory's own, ``--configfile`` after the targets, since it takes
several values). Outside a workflow (``focalcal verify --configfile ...``) the caller sets them.
"""

from __future__ import annotations

import json
import os
import shlex
from dataclasses import dataclass
from fnmatch import fnmatch
from pathlib import Path

from focalcal.paths import (
    CALIBRATION,
    CHECKPOINT,
    CLAIMS_TABLE,
    DECODE,
    FIGURES,
    GRADIENT_NORMS,
    HISTORY,
    LOGITS,
    METRICS,
    READY,
    RELIABILITY,
    REPORT,
    RESULTS,
    RUN_CONFIG,
    RUN_INFO,
    RUNS,
    SAMPLES,
    SEGMENTATION,
    STAGED_EXPORT,
    TABLES,
    TOKEN_LOGITS,
    is_own_snakefile,
)

ALL = "all"  # the Snakefile's default target: every output of the config
WORKFLOW_ENV = "FOCALCAL_WORKFLOW"  # {"snakefile": ..., "configfiles": [...]}, absolute paths; jobs inherit it

FORCE = "{snakemake} -f {path}{config}"
RECORDS = "rule train writes it back from the run's checkpoint; a finished run is not retrained"
RETRAIN = f"rm -f {{run}}/{CHECKPOINT} && {{snakemake}} -f {{run}}/{HISTORY}{{config}}"
STAGED = "the staged copy is deleted and re-made from the run's checkpoint; nothing is retrained"


@dataclass(frozen=True)
class Remake:
    pattern: str
    command: str  # {path}: the artefact, {dir}: its folder, {run}: its run directory, relative to the workflow directory
    why: str


REMAKE = (
    Remake(f"{RUNS}/*/{STAGED_EXPORT}/{LOGITS}", f"rm -rf {{dir}} && {{snakemake}} -f {{run}}/{LOGITS}{{config}}", STAGED),
    Remake(f"{RUNS}/*/{STAGED_EXPORT}/{METRICS}", "rm -rf {dir} && {snakemake} -f {segmentation}{config}", STAGED),
    Remake(f"{RUNS}/*/{STAGED_EXPORT}/{SAMPLES}", "rm -rf {dir} && {snakemake} -f {segmentation}{config}", STAGED),
    Remake(f"{RUNS}/*/{STAGED_EXPORT}/*", "rm -rf {dir} && {snakemake} -f {staged_target}{config}", STAGED),
    Remake(f"{RUNS}/*/{CHECKPOINT}", RETRAIN,
           "retrains the run from scratch; the next full snakemake run re-exports what depends on it"),
    Remake(f"{RUNS}/*/{HISTORY}", FORCE, RECORDS),
    # read when the Snakefile is parsed, so it must go before Snakemake can plan anything
    Remake(f"{RUNS}/*/{RUN_CONFIG}", "rm -f {path} && {snakemake} -f {path}{config}", RECORDS),
    Remake(f"{RUNS}/*/{RELIABILITY}", f"{{snakemake}} -f {{run}}/{HISTORY}{{config}}", RECORDS),
    Remake(f"{RUNS}/*/{GRADIENT_NORMS}", f"{{snakemake}} -f {{run}}/{HISTORY}{{config}}", RECORDS),
    Remake(f"{RUNS}/*/{TOKEN_LOGITS}", FORCE, "rule export_token_logits re-dumps it from the run's checkpoint; "
                                              "nothing is retrained"),
    Remake(f"{RUNS}/*/{LOGITS}", FORCE, "rule export_logits re-dumps it from the run's checkpoint; nothing is retrained"),
    Remake(f"{RUNS}/*/{RUN_INFO}", FORCE, "rule export_logits re-writes it from the run's checkpoint; nothing is retrained"),
    Remake(f"{RUNS}/*/{DECODE}/*", FORCE, "rule decode beam-searches the test set again at every temperature of "
                                     "the grid, from the run's checkpoint; nothing is retrained"),
    Remake(f"{CALIBRATION}/*/{DECODE}/*", FORCE, "rule decode_calibrated beam-searches the test set again at the "
                                               "calibrator's fitted temperature; nothing is retrained"),
    Remake(f"{CALIBRATION}/*", FORCE, "rule calibrate (calibrate_tokens for a translation run) refits the run's "
                                      "calibrators on its logits.npz (token_logits.npz)"),
    Remake(f"{SEGMENTATION}/*", FORCE, "rule evaluate_segmentation re-scores the run from its checkpoint; "
                                       "nothing is retrained"),
    Remake(f"{TABLES}/*/*.csv", FORCE, "rule paper_table rebuilds it from its study's tidy table"),
    Remake(CLAIMS_TABLE, FORCE, "rule claims re-tests every paper's claims on the study tables"),
    Remake(f"{TABLES}/*.csv", FORCE, "rule study_table rebuilds it from the runs' metrics.csv files"),
    Remake(f"{FIGURES}/*", FORCE, "its figure rule redraws it"),
    Remake(f"{REPORT}/*", FORCE, "its report rule rebuilds it"),
    Remake(f"*/{READY}/*.json", FORCE, "rule prepare_data checks the dataset and re-writes its marker"),
    Remake("*/mnist1d/mnist1d_*.npz", "rm -f {path}", "a dataset cache: its next load regenerates it"),
    Remake("*/focalcal_*.npz", "rm -f {path}", "a dataset cache: its next load rebuilds it from the extracted images"),
)


def set_workflow(snakefile, configfiles) -> None:
    """Record the running workflow's Snakefile (None: the workflow directory's own) and config
    files, made absolute, for the commands this process and its jobs print."""
    os.environ[WORKFLOW_ENV] = json.dumps({"snakefile": snakefile and os.path.abspath(snakefile),
                                           "configfiles": [os.path.abspath(path) for path in configfiles]})


def remake_hint(path) -> str:
    """The shell command that re-makes ``path``, and what it does."""
    command, why = remake_command(path)
    return f"{command}   ({why})" if why else command


def remake_command(path) -> tuple[str, str]:
    """(the shell command that re-makes ``path``, what it does); ("delete ...", "") when no rule makes it."""
    workdir, relative = _split_workdir(Path(path))
    for entry in REMAKE:
        if fnmatch(relative.as_posix(), entry.pattern):
            command = entry.command.format(**_fields(workdir, relative))
            if workdir is not None:
                command = f"cd {shlex.quote(str(workdir))} && {command}"
            return command, entry.why
    return f"delete {path} and re-run what wrote it", ""


_SNAKEMAKE = "\0snakemake"  # the {snakemake} of a command, as repair_command reads it apart


def repair_command(paths) -> str | None:
    """One shell command that re-makes every file of ``paths`` (under one workflow directory) and
    everything that depends on them, in dependency order; None when no rule makes any of them.

    Each file's own command (:data:`REMAKE`) is read apart into what it deletes first (a damaged
    checkpoint, a staged export) and the target it forces. The deletions run first; then one
    Snakemake forces every target (``--forcerun``) and makes ``all`` besides them, so it orders
    the jobs itself, and every job downstream of a re-made file (a retrained run's logits,
    calibration, tables, figures and report) runs again after it. A job whose inputs are still
    being re-made waits for them, so none fails on a damaged input that another would repair."""
    removals: list[str] = []
    targets: list[str] = []
    workdir = None
    for path in paths:
        below, relative = _split_workdir(Path(path))
        workdir = workdir or below  # one workflow directory; a data cache's path does not say it
        entry = next((entry for entry in REMAKE if fnmatch(relative.as_posix(), entry.pattern)), None)
        if entry is None:
            continue
        command = entry.command.format(**{**_fields(below, relative), "snakemake": _SNAKEMAKE, "config": ""})
        for step in command.split(" && "):
            forced = step.removeprefix(f"{_SNAKEMAKE} -f ")
            chosen = removals if forced == step else targets
            if forced not in chosen:
                chosen.append(forced)
    if not removals and not targets:
        return None
    fields = _fields(workdir, Path(RESULTS))
    if targets:
        listed = " ".join(targets)
        removals.append(f"{fields['snakemake']} {ALL} {listed} --forcerun {listed}{fields['config']}")
    command = " && ".join(removals)
    return command if workdir is None else f"cd {shlex.quote(str(workdir))} && {command}"


def snakemake_command(*arguments: str, workdir=None) -> str:
    """``snakemake --cores 1 <arguments>`` with the running workflow's Snakefile and config files."""
    fields = _fields(None if workdir is None else Path(workdir), Path(RESULTS))
    return " ".join([fields["snakemake"], *(shlex.quote(str(a)) for a in arguments)]) + fields["config"]


def _fields(workdir: Path | None, relative: Path) -> dict:
    recorded = json.loads(os.environ.get(WORKFLOW_ENV) or "{}")
    snakemake = "snakemake --cores 1"
    snakefile = recorded.get("snakefile")
    here = Path(os.path.abspath(workdir if workdir is not None else "."))
    if snakefile and not is_own_snakefile(snakefile, here):
        snakemake += f" -s {shlex.quote(snakefile)}"
    configfiles = recorded.get("configfiles") or []
    config = (" --configfile " + " ".join(shlex.quote(path) for path in configfiles)) if configfiles else ""
    parts = relative.parts
    run = Path(*parts[:parts.index(STAGED_EXPORT)]) if STAGED_EXPORT in parts else relative.parent
    segmentation = Path(SEGMENTATION, *run.parts[len(Path(RUNS).parts):], METRICS)
    staged = (here / run / STAGED_EXPORT)
    is_segmentation = (staged / METRICS).exists() and not (staged / LOGITS).exists()
    quote = lambda value: shlex.quote(Path(value).as_posix())
    return {"snakemake": snakemake, "config": config, "path": quote(relative), "dir": quote(relative.parent),
            "run": quote(run), "segmentation": quote(segmentation),
            "staged_target": quote(segmentation if is_segmentation else run / LOGITS)}


def _split_workdir(path: Path) -> tuple[Path | None, Path]:
    """(workflow directory, unless it is the current one; path below it). Without a
    ``results`` folder in the path, (None, the path as given)."""
    parts = path.parts
    if RESULTS not in parts:
        return None, path
    cut = parts.index(RESULTS)
    workdir = Path(*parts[:cut]) if cut else Path(".")
    if os.path.abspath(workdir) == os.path.abspath("."):
        workdir = None
    return workdir, Path(*parts[cut:])
