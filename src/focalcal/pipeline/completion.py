"""Whether a workflow that says it succeeded left what it was asked for.

Snakemake reports success when every job it planned succeeded, which is not the same as every
target existing: a DAG that planned too little (snakemake/snakemake#4166, an ancient() input
behind a re-run job) "succeeds" with nothing made. The Snakefile's ``onsuccess`` passes the
files of the requested targets (``rule all``'s inputs when none were named) here and fails the
run when any is missing or differs from its checksum sidecar. Torch-free.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from focalcal.files import sidecar
from focalcal.files.artefacts import check_against_sidecar

SHOWN = 20  # the missing targets listed by name; the rest are counted


def unfinished_targets(files: Iterable, workdir=".") -> list[tuple[str, str]]:
    """(path, what is wrong) for each of ``files`` (relative to ``workdir``) that is missing or damaged."""
    problems = []
    for name in dict.fromkeys(str(file) for file in files):
        path = Path(workdir) / name
        try:
            problem = "missing" if not path.exists() else (None if path.is_dir() else check_against_sidecar(path))
        except sidecar.SidecarUnreadable as error:
            problem = f"its checksum file is unreadable ({error})"
        except OSError as error:
            problem = f"unreadable ({error})"
        if problem is not None:
            problems.append((name, problem))
    return problems


def unfinished_report(problems: list[tuple[str, str]], rerun: str) -> str:
    """The lines the workflow prints before it exits non-zero; ``rerun``: the command to run next."""
    lines = [f"The workflow finished its jobs but {len(problems)} of its targets are missing or damaged:"]
    lines += [f"  {path}: {problem}" for path, problem in problems[:SHOWN]]
    if len(problems) > SHOWN:
        lines.append(f"  ... and {len(problems) - SHOWN} more")
    lines.append(f"Make them: {rerun}   (`focalcal verify` lists damaged artefacts with their re-make commands)")
    return "\n".join(lines)
