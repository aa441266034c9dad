"""Stop a workflow job whose Snakemake is gone.

A job started by Snakemake is a child of it (through a ``snakemake --mode subprocess``
process and sometimes a shell). When the main Snakemake is killed hard, nothing kills the
job: a trainer would go on writing into a run directory that a new Snakemake, after
``--unlock``, may already have handed to another trainer. :func:`exit_when_workflow_dies`
watches the job's Snakemake ancestors (and its direct parent) from a daemon thread and ends
the process with SIGTERM as soon as one of them is gone. The trainer's writes are atomic and
its run lock is dropped by the kernel, so stopping at any instant loses at most the epoch
in progress.

Ancestors that are not Snakemake (the user's login shell, tmux, slurmstepd) are not watched:
a workflow started with ``nohup`` must outlive the shell that started it.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from pathlib import Path

POLL_SECONDS = 1.0


def exit_when_workflow_dies(poll_seconds: float = POLL_SECONDS) -> list[int]:
    """Start the watchdog; returns the PIDs it watches (empty when not under Snakemake)."""
    ancestors = _ancestors()
    snakemakes = {pid: start for pid, start in ancestors if _is_snakemake(pid)}
    if not snakemakes:
        return []
    watched = dict(ancestors[:1]) | snakemakes  # the direct parent too (a shell between, say)
    thread = threading.Thread(target=_watch, args=(watched, poll_seconds), name="workflow-watchdog", daemon=True)
    thread.start()
    return sorted(watched)


def _watch(watched: dict[int, str], poll_seconds: float) -> None:
    while True:
        time.sleep(poll_seconds)
        for pid, start in watched.items():
            if _start_time(pid) != start:  # gone, or its PID reused by another process
                print(f"[focalcal] parent process {pid} (Snakemake) is gone; stopping this job "
                      "(its last checkpoint is kept)", file=sys.stderr, flush=True)
                os.kill(os.getpid(), signal.SIGTERM)
                return


def _ancestors() -> list[tuple[int, str]]:
    """(pid, start time) of every ancestor up to, not including, init."""
    chain, pid = [], os.getppid()
    while pid > 1:
        start = _start_time(pid)
        if start is None:
            break
        chain.append((pid, start))
        pid = _parent(pid)
    return chain


def _stat_fields(pid: int) -> list[str] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2:].split()  # the command name may hold spaces and parentheses


def _start_time(pid: int) -> str | None:
    fields = _stat_fields(pid)
    return fields[19] if fields else None  # field 22 of proc(5): start time in clock ticks


def _parent(pid: int) -> int:
    fields = _stat_fields(pid)
    return int(fields[1]) if fields else 0


def _is_snakemake(pid: int) -> bool:
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    # `snakemake ...`, `python .../bin/snakemake ...` or `python -m snakemake ...`
    return any(os.path.basename(arg) == b"snakemake" for arg in argv[:3])
