"""How each workflow artefact is re-made: the one map that error messages about damaged files quote.

Patterns are matched (``fnmatch``: ``*`` spans folders) against the path from the workflow
directory, the one holding ``results/``. A declared rule output is re-made by forcing that
one job, ``snakemake -f <path>``, which runs nothing upstream of it. The checkpoint is the
exception: it is not a declared output (Snakemake would delete it before a resumed job), so
it is deleted and its run's training job forced.
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass
from fnmatch import fnmatch
from pathlib import Path

FORCE = "snakemake --cores 1 -f {path}"
RECORDS = "rule train writes it back from the run's checkpoint; a finished run is not retrained"


@dataclass(frozen=True)
class Remake:
    pattern: str
    command: str  # {path}: the artefact, {dir}: its folder, both relative to the workflow directory
    why: str


REMAKE = (
    Remake("results/runs/*/checkpoint.pt", "rm {path} && snakemake --cores 1 -f {dir}/history.csv",
           "retrains the run from scratch; the next full snakemake run re-exports what depends on it"),
    Remake("results/runs/*/history.csv", FORCE, RECORDS),
    # read when the Snakefile is parsed, so it must go before Snakemake can plan anything
    Remake("results/runs/*/run_config.json", "rm {path} && snakemake --cores 1 -f {path}", RECORDS),
    Remake("results/runs/*/train_reliability.csv", "snakemake --cores 1 -f {dir}/history.csv", RECORDS),
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


def remake_hint(path) -> str:
    """The shell command that re-makes ``path``, and what it does."""
    workdir, relative = _split_workdir(Path(path))
    for entry in REMAKE:
        if fnmatch(relative.as_posix(), entry.pattern):
            command = entry.command.format(path=shlex.quote(relative.as_posix()),
                                           dir=shlex.quote(relative.parent.as_posix()))
            if workdir is not None:
                command = f"cd {shlex.quote(str(workdir))} && {command}"
            return f"{command}   ({entry.why})"
    return f"delete {path} and re-run what wrote it"


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
