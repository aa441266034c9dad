"""How each workflow artefact is re-made: the one map that error messages about damaged files quote.

Patterns are matched (``fnmatch``: ``*`` spans folders) against the path from the workflow
directory, the one holding ``results/``. A declared rule output is re-made by forcing that
one job, ``snakemake -f <path>``, which runs nothing upstream of it. The checkpoint is the
exception: it is not a declared output (Snakemake would delete it before a resumed job), so
it is deleted and its run's training job forced. A run's ``staged_export/`` is not a target
either: it is deleted, and the job that publishes it re-makes its files from the checkpoint.

Every printed command runs as printed: the Snakefile sets :data:`WORKFLOW_ENV` to its own
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

WORKFLOW_ENV = "FOCALCAL_WORKFLOW"  # {"snakefile": ..., "configfiles": [...]}, absolute paths; jobs inherit it

FORCE = "{snakemake} -f {path}{config}"
RECORDS = "rule train writes it back from the run's checkpoint; a finished run is not retrained"
RETRAIN = "rm {run}/checkpoint.pt && {snakemake} -f {run}/history.csv{config}"
STAGED = "the staged copy is deleted and re-made from the run's checkpoint; nothing is retrained"


@dataclass(frozen=True)
class Remake:
    pattern: str
    command: str  # {path}: the artefact, {dir}: its folder, {run}: its run directory, relative to the workflow directory
    why: str


REMAKE = (
    Remake("results/runs/*/staged_export/logits.npz", "rm -r {dir} && {snakemake} -f {run}/logits.npz{config}", STAGED),
    Remake("results/runs/*/staged_export/metrics.csv", "rm -r {dir} && {snakemake} -f {segmentation}{config}", STAGED),
    Remake("results/runs/*/staged_export/samples.npz", "rm -r {dir} && {snakemake} -f {segmentation}{config}", STAGED),
    Remake("results/runs/*/staged_export/*", "rm -r {dir} && {snakemake} -f {staged_target}{config}", STAGED),
    Remake("results/runs/*/checkpoint.pt", RETRAIN,
           "retrains the run from scratch; the next full snakemake run re-exports what depends on it"),
    Remake("results/runs/*/history.csv", FORCE, RECORDS),
    # read when the Snakefile is parsed, so it must go before Snakemake can plan anything
    Remake("results/runs/*/run_config.json", "rm {path} && {snakemake} -f {path}{config}", RECORDS),
    Remake("results/runs/*/train_reliability.csv", "{snakemake} -f {run}/history.csv{config}", RECORDS),
    Remake("results/runs/*/train_gradient_norms.csv", "{snakemake} -f {run}/history.csv{config}", RECORDS),
    Remake("results/runs/*/logits.npz", FORCE, "rule export_logits re-dumps it from the run's checkpoint; nothing is retrained"),
    Remake("results/runs/*/run.json", FORCE, "rule export_logits re-writes it from the run's checkpoint; nothing is retrained"),
    Remake("results/calibration/*", FORCE, "rule calibrate refits the run's calibrators on its logits.npz"),
    Remake("results/segmentation/*", FORCE, "rule evaluate_segmentation re-scores the run from its checkpoint; "
                                            "nothing is retrained"),
    Remake("results/tables/*/*.csv", FORCE, "rule paper_table rebuilds it from its study's tidy table"),
    Remake("results/tables/claims.csv", FORCE, "rule claims re-tests every paper's claims on the study tables"),
    Remake("results/tables/*.csv", FORCE, "rule study_table rebuilds it from the runs' metrics.csv files"),
    Remake("results/figures/*", FORCE, "its figure rule redraws it"),
    Remake("results/report/*", FORCE, "its report rule rebuilds it"),
    Remake("*/ready/*.json", FORCE, "rule prepare_data checks the dataset and re-writes its marker"),
    Remake("*/mnist1d/mnist1d_*.npz", "rm {path}", "a dataset cache: its next load regenerates it"),
    Remake("*/focalcal_*.npz", "rm {path}", "a dataset cache: its next load rebuilds it from the extracted images"),
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


def snakemake_command(*arguments: str, workdir=None) -> str:
    """``snakemake --cores 1 <arguments>`` with the running workflow's Snakefile and config files."""
    fields = _fields(None if workdir is None else Path(workdir), Path("results"))
    return f"{fields['snakemake']} {' '.join(shlex.quote(str(a)) for a in arguments)}{fields['config']}"


def _fields(workdir: Path | None, relative: Path) -> dict:
    recorded = json.loads(os.environ.get(WORKFLOW_ENV) or "{}")
    snakemake = "snakemake --cores 1"
    snakefile = recorded.get("snakefile")
    here = Path(os.path.abspath(workdir if workdir is not None else "."))
    if snakefile and Path(snakefile) != here / "Snakefile":
        snakemake += f" -s {shlex.quote(snakefile)}"
    configfiles = recorded.get("configfiles") or []
    config = (" --configfile " + " ".join(shlex.quote(path) for path in configfiles)) if configfiles else ""
    parts = relative.parts
    run = Path(*parts[:parts.index("staged_export")]) if "staged_export" in parts else relative.parent
    segmentation = Path("results/segmentation", *run.parts[2:], "metrics.csv")
    staged = (here / run / "staged_export")
    is_segmentation = (staged / "metrics.csv").exists() and not (staged / "logits.npz").exists()
    quote = lambda value: shlex.quote(Path(value).as_posix())  # noqa: E731
    return {"snakemake": snakemake, "config": config, "path": quote(relative), "dir": quote(relative.parent),
            "run": quote(run), "segmentation": quote(segmentation),
            "staged_target": quote(segmentation if is_segmentation else run / "logits.npz")}


def _split_workdir(path: Path) -> tuple[Path | None, Path]:
    """(workflow directory, unless it is the current one; path below it). Without a
    ``results`` folder in the path, (None, the path as given)."""
    parts = path.parts
    if "results" not in parts:
        return None, path
    cut = parts.index("results")
    workdir = Path(*parts[:cut]) if cut else Path(".")
    if os.path.abspath(workdir) == os.path.abspath("."):
        workdir = None
    return workdir, Path(*parts[cut:])
