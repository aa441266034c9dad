"""One trainer per run directory.

``snakemake --unlock`` (or a second checkout pointed at the same ``results/``) can start a
second trainer on a run whose first trainer is still alive; both would then write the same
checkpoint. :class:`RunLock` holds an exclusive ``flock`` on ``<run>/train.lock`` for as long
as the trainer runs. The kernel drops the lock when the process dies, however it dies, so a
stale lock file never blocks anyone; the file only says who held it last. ``flock`` is also
honoured across nodes on NFS (Linux emulates it with POSIX byte-range locks there).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import platform
import time
from pathlib import Path
from typing import Self

LOCK_FILE = "train.lock"


class RunLockedError(RuntimeError):
    """Another live process is training this run; the message names its PID and host."""


class RunLock:
    """``with RunLock(run_dir):`` — exclusive for the duration of the block, across processes."""

    def __init__(self, run_dir):
        self.path = Path(run_dir) / LOCK_FILE
        self._handle = None

    def acquire(self) -> Self:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.ExitStack() as on_failure:
            handle = on_failure.enter_context(open(self.path, "a+"))  # held open while the lock is held
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                handle.seek(0)
                holder = _describe_holder(handle.read())
                raise RunLockedError(
                    f"{self.path.parent} is being trained by another process ({holder}); "
                    "a second trainer would overwrite its checkpoint. Wait for it, or stop that process first"
                ) from None
            handle.seek(0)
            handle.truncate()
            handle.write(json.dumps({"pid": os.getpid(), "host": platform.node(),
                                     "since": time.strftime("%Y-%m-%dT%H:%M:%S%z")}) + "\n")
            handle.flush()
            on_failure.pop_all()
        self._handle = handle
        return self

    def release(self) -> None:
        if self._handle is not None:
            fcntl.flock(self._handle.fileno(), fcntl.LOCK_UN)
            self._handle.close()
            self._handle = None

    def __enter__(self) -> Self:
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()


def live_holder(run_dir) -> str | None:
    """Who holds ``run_dir``'s lock now (PID, host, since when), or None when nobody does.
    Creates nothing and takes nothing: the Snakefile asks this of the runs it plans to train,
    and a training job before it writes anything."""
    path = Path(run_dir) / LOCK_FILE
    try:
        with open(path) as handle:
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                return _describe_holder(handle.read())
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
            return None
    except FileNotFoundError:
        return None


def refuse_if_trained_elsewhere(run_dir, consequence: str) -> None:
    """Raise :class:`RunLockedError` naming the holder when another process trains ``run_dir``."""
    holder = live_holder(run_dir)
    if holder is not None:
        raise RunLockedError(f"{run_dir} is being trained by another process ({holder}): {consequence}. Nothing "
                             "was changed; wait for it to finish, or stop that process first")


def _describe_holder(text: str) -> str:
    try:
        holder = json.loads(text)
        return f"PID {holder['pid']} on host {holder['host']}, since {holder['since']}"
    except (ValueError, KeyError, TypeError):
        return "holder unknown"
