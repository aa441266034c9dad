"""An output folder owned by one command while it is written, and replaced whole.

:class:`OutputFolder` checks the folder before any work (one ``ValueError`` line when it is a
file, holds files the command does not write, or cannot be written), takes an exclusive
``fcntl`` lock on a sibling lock file (a second command on the same folder stops, naming the
first), hands out a temporary sibling folder to write into, and on :meth:`OutputFolder.commit`
renames that sibling into place. A reader therefore sees the folder before or after the
command, never a mix of two commands' files.

The lock file goes when its holder ends, whether the command succeeded or was refused; a lock
file nobody holds (its holder was killed) is taken and removed by the next command on the
folder, with the staging folders a killed command left. Torch-free.
"""

from __future__ import annotations

import contextlib
import datetime
import fcntl
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Self

from focalcal.files.sidecar import sidecar_path


class OutputFolder:
    """``with OutputFolder(path, own=...) as folder:`` write under ``folder.staging``, then
    ``folder.commit()``; leaving the block without committing discards the staging folder."""

    def __init__(self, path, own: Iterable[str], command: str = "focalcal calibrate"):
        self.path = Path(path).absolute()
        self.own = frozenset(own)  # the top-level names the command writes (their sidecars too)
        self.command = command
        self.staging: Path | None = None
        self._lock = None

    def __enter__(self) -> Self:
        self._check()
        self._take_lock()
        self._remove_leftovers()
        try:
            self.staging = Path(tempfile.mkdtemp(dir=self.path.parent, prefix=f".{self.path.name}.",
                                                 suffix=".partial"))
        except OSError as error:
            self._release()
            raise ValueError(f"--out {self.path}: cannot write beside it ({error.strerror})") from None
        return self

    def commit(self) -> None:
        """Put the staging folder in place of ``path`` (the previous output, if any, goes whole)."""
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(self.staging, 0o777 & ~umask)  # mkdtemp's 0700 would hide the report from others
        previous = None
        if self.path.exists():
            previous = Path(tempfile.mkdtemp(dir=self.path.parent, prefix=f".{self.path.name}.", suffix=".old"))
            os.rename(self.path, previous / "folder")
        os.rename(self.staging, self.path)
        self.staging = None
        if previous is not None:
            shutil.rmtree(previous)

    def __exit__(self, *exc_info) -> bool:
        try:
            if self.staging is not None:
                shutil.rmtree(self.staging, ignore_errors=True)
        finally:
            self._release()
        return False

    def _check(self) -> None:
        path = self.path
        if path.exists() and not path.is_dir():
            raise ValueError(f"--out {path}: is a file, not a folder; name a folder (new or a previous report)")
        parent = path.parent
        if not parent.is_dir():
            try:
                parent.mkdir(parents=True, exist_ok=True)
            except OSError as error:
                raise ValueError(f"--out {path}: cannot create its parent folder ({error.strerror})") from None
        if path.is_dir():
            foreign = sorted(entry.name for entry in path.iterdir() if not self._is_own(entry.name))
            if foreign:
                raise ValueError(f"--out {path}: holds {foreign[0]!r} ({len(foreign)} foreign entries in all), which "
                                 f"{self.command} does not write; it replaces the whole folder, so name a new "
                                 "folder or a previous report")

    def _is_own(self, name: str) -> bool:
        return name in self.own or any(name == sidecar_path(Path(own)).name for own in self.own)

    @property
    def lock_path(self) -> Path:
        return self.path.parent / f".{self.path.name}.lock"

    def _take_lock(self) -> None:
        while True:
            try:
                handle = open(self.lock_path, "a+")  # noqa: SIM115 (held until __exit__)
            except OSError as error:
                raise ValueError(f"--out {self.path}: cannot write there ({error.strerror})") from None
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                handle.seek(0)
                holder = handle.read().strip() or "another command"
                handle.close()
                raise ValueError(f"--out {self.path}: is being written by {holder}; wait for it or name "
                                 "another folder") from None
            if self._still_the_lock_file(handle):
                break
            handle.close()  # its holder removed it as we opened it: take the new one
        handle.seek(0)
        handle.truncate()
        started = datetime.datetime.now().isoformat(timespec="seconds")
        handle.write(f"{self.command} (pid {os.getpid()}, started {started}: {' '.join(sys.argv)})\n")
        handle.flush()
        self._lock = handle

    def _still_the_lock_file(self, handle) -> bool:
        try:
            return os.stat(self.lock_path).st_ino == os.fstat(handle.fileno()).st_ino
        except FileNotFoundError:
            return False

    def _remove_leftovers(self) -> None:
        """The staging folders (``.partial``) and replaced outputs (``.old``) of a killed command:
        with the lock held, no live command writes them."""
        ours = re.compile(rf"\.{re.escape(self.path.name)}\.[a-z0-9_]{{8}}\.(partial|old)")  # mkdtemp's names
        for leftover in self.path.parent.iterdir():
            if ours.fullmatch(leftover.name) and leftover.is_dir():
                shutil.rmtree(leftover, ignore_errors=True)

    def _release(self) -> None:
        if self._lock is not None:
            with contextlib.suppress(OSError):
                os.unlink(self.lock_path)  # before the flock goes, so that no one takes a lock being removed
            self._lock.close()  # closing the file releases its flock
            self._lock = None
