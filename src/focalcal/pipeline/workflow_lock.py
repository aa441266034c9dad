"""One workflow per results folder.

Two Snakemake processes on one ``results/`` (two checkouts sharing it through a symlink, or a
second terminal) each plan the jobs the other has not finished and delete each other's outputs
before re-running them. Snakemake's own lock lives in each checkout's ``.snakemake/``, so it does
not see the other. The Snakefile therefore takes :func:`hold_output_lock` at parse time of any run
that may write ``results/``: an exclusive ``flock`` on ``<results, symlinks resolved>/.workflow.lock``
held for the life of the process (the kernel drops it when the process dies, however it dies).
A second workflow stops there, before it plans anything, naming the holder. Runs that write
nothing (dry runs, ``--touch``, ``--report``, listings, ``focalcal verify``) take no lock.
Imports nothing of Snakemake: the caller passes its command line.
"""

from __future__ import annotations

import fcntl
import json
import os
import platform
import re
import time
from collections.abc import Sequence
from pathlib import Path

LOCK_FILE = ".workflow.lock"

# Snakemake options that make a run write nothing under results/ (--touch only sets times).
_READ_ONLY_OPTIONS = {
    "--dry-run", "--dryrun", "--touch", "--report", "--lint", "--unlock", "--summary", "--detailed-summary",
    "--list-rules", "--list", "--list-target-rules", "--list-changes", "--list-code-changes",
    "--list-input-changes", "--list-params-changes", "--list-untracked", "--list-conda-envs", "--cleanup-metadata",
    "--cm", "--dag", "--rulegraph", "--filegraph", "--d3dag", "--containerize", "--archive", "--print-compilation",
    "--export-cwl", "--generate-unit-tests", "--conda-create-envs-only", "--conda-cleanup-envs", "--cleanup-shadow",
    "--version", "--help",
}
_READ_ONLY_SHORT = set("ntSDlvh")  # -n, -t, -S, -D, -l, -v, -h, also inside clusters such as -np
_SHORT_CLUSTER = re.compile(r"-[A-Za-z]+")

_held: dict[str, object] = {}  # resolved results folder -> its open, locked file, for the life of the process


class ResultsInUseError(RuntimeError):
    """Another live workflow holds this results folder; the message names it."""


class ResultsNotWritableError(RuntimeError):
    """The results folder cannot be created or written (a read-only file system, no permission,
    a full disk); the message names it and what to do."""


def may_write_outputs(argv: Sequence[str]) -> bool:
    """Whether the Snakemake command line ``argv`` (without the program name) may write results/."""
    for token in argv:
        if token == "--":
            break
        option = token.split("=", 1)[0]
        if option in _READ_ONLY_OPTIONS:
            return False
        if _SHORT_CLUSTER.fullmatch(token) and _READ_ONLY_SHORT & set(token[1:]):
            return False
    return True


def hold_output_lock(results, checkout) -> Path:
    """Lock ``results`` (created if missing, symlinks resolved) for the rest of this process, or
    raise :class:`ResultsInUseError` naming the live holder: host, PID, checkout and start time,
    or :class:`ResultsNotWritableError` when it cannot be written."""
    folder = Path(os.path.realpath(results))
    if str(folder) in _held:
        return folder
    try:
        folder.mkdir(parents=True, exist_ok=True)
        handle = open(folder / LOCK_FILE, "a+")  # noqa: SIM115 - held open for the life of the process
    except OSError as error:
        from focalcal.files.artefacts import write_error_line

        error.filename = error.filename or str(folder)
        raise ResultsNotWritableError(write_error_line(error) or f"cannot write {error.filename}: {error.strerror}; "
                                      "make the results folder writable and run again") from None
    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        holder = describe_holder(handle.read())
        handle.close()
        shown = str(results) if os.path.abspath(results) == str(folder) else f"{results} (= {folder})"
        raise ResultsInUseError(
            f"{shown} is in use by another workflow: {holder}. Two workflows on one results folder delete each "
            "other's outputs, so this one stops before planning anything. Wait for that one to finish, or stop it "
            "first; dry runs (-n), --touch, --report and `focalcal verify` work meanwhile") from None
    handle.seek(0)
    handle.truncate()
    handle.write(json.dumps({"pid": os.getpid(), "host": platform.node(), "checkout": str(checkout),
                             "since": time.strftime("%Y-%m-%dT%H:%M:%S%z")}) + "\n")
    handle.flush()
    _held[str(folder)] = handle
    return folder


def describe_holder(text: str) -> str:
    try:
        holder = json.loads(text)
        return (f"PID {holder['pid']} on host {holder['host']}, checkout {holder['checkout']}, "
                f"since {holder['since']}")
    except (ValueError, KeyError, TypeError):
        return "holder unknown"
