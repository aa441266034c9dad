"""Reading and writing workflow artefacts so that damage is caught and explained.

Writes are atomic (a killed process leaves the old file or the new one, never half of one)
and leave a checksum sidecar (:mod:`focalcal.files.sidecar`). Reads check the file against its
sidecar before parsing: a truncated or bit-flipped file is still "present" to Snakemake, and
without the check its consumer dies with ``BadZipFile`` or ``JSONDecodeError`` naming neither
the file nor the remedy. Every failure, a checksum mismatch or content that does not parse, is
one :class:`CorruptArtefactError` naming the file, what is wrong and the command that re-makes
it (:mod:`focalcal.files.remake`). A file without a sidecar (written before sidecars, or by hand)
is read unverified.

A write goes to a hidden ``.<name>.<random>.part`` file beside its target, which its writer
holds an ``flock`` on until the file is in place. A ``.part`` file nobody holds is what a
killed writer left: the next write of the same target deletes it (:func:`remove_stale_parts`),
and so does ``focalcal verify``, naming it. A write that fails for lack of space or permission
raises an ``OSError`` naming the file; :func:`write_error_line` says it in one line with what
to do.

Torch-free at import (numpy and pandas load only inside the functions that need them), so the
Snakefile and the report can use it without paying for a torch import.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import functools
import json
import os
import tempfile
import zipfile
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

from focalcal.files import sidecar


class CorruptArtefactError(ValueError):
    """An artefact is damaged or unreadable; the message says which, what is wrong and how to re-make it."""

    def __init__(self, path, problem: str):
        from focalcal.files.remake import remake_hint

        self.path, self.problem, self.remake = Path(path), problem, remake_hint(path)
        super().__init__(f"corrupt artefact {self.path}: {problem}. Re-make it: {self.remake}")

    def __reduce__(self):  # pickles (multiprocessing, pytest-xdist) with both arguments
        return type(self), (self.path, self.problem)


# --------------------------------------------------------------------------- writing


def atomic_write(path, write: Callable[[BinaryIO], Any]) -> None:
    """Call ``write(handle)`` on a temporary file, then put it at ``path`` with its checksum sidecar."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_parts(path.parent, path.name)
    with _temporary_beside(path, write) as tmp:
        checksum = sidecar.digest_file(tmp)  # of the bytes on disk, whatever ``write`` did with seeks
        sidecar.remove(path)
        os.replace(tmp, path)
    _write_sidecar(path, checksum)


@contextlib.contextmanager
def written_in_place(path) -> Iterator[Path]:
    """For a file another program writes at ``path`` itself (papermill, Chromium): drop the old
    sidecar first, so the file is never paired with a stale checksum, and record the new one after."""
    path = Path(path)
    sidecar.remove(path)
    yield path
    _write_sidecar(path, sidecar.digest_file(path))


def atomic_torch_save(obj: Any, path) -> None:
    import torch

    atomic_write(path, lambda handle: torch.save(obj, handle))


def atomic_write_text(text: str, path) -> None:
    atomic_write(path, lambda handle: handle.write(text.encode()))


def atomic_write_json(obj: Any, path) -> None:
    atomic_write_text(json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n", path)


def atomic_savez(path, **arrays) -> None:
    import numpy as np

    atomic_write(path, lambda handle: np.savez(handle, **arrays))


def _write_sidecar(path: Path, checksum: sidecar.Checksum) -> None:
    side = sidecar.sidecar_path(path)
    text = sidecar.render(path.name, checksum).encode("ascii")
    with _temporary_beside(side, lambda handle: handle.write(text)) as tmp:
        os.replace(tmp, side)


@contextlib.contextmanager
def _temporary_beside(path: Path, write: Callable[[BinaryIO], Any]) -> Iterator[str]:
    """A temporary file in ``path``'s folder, filled by ``write`` and synced to disk, with the
    usual file mode; the block moves it into place, and it is deleted if the block does not.
    The file is ``flock``-ed until the block ends, so :func:`remove_stale_parts` leaves it alone.
    An ``OSError`` that names no file (a full disk) is raised again naming ``path``."""
    try:
        handle, tmp = _locked_part(path)
    except OSError as error:
        _raise_naming(error, path.parent)
    with handle:
        try:
            os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600 files; outputs get the usual mode
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
            yield tmp
        except OSError as error:
            _raise_naming(error, path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)


def _locked_part(path: Path) -> tuple[BinaryIO, str]:
    """A new ``.<name>.<random>.part`` file beside ``path``, open and ``flock``-ed. A sweeper that
    deleted it between its creation and the lock (it looked stale) is seen, and a new one made."""
    while True:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=PART_SUFFIX)
        handle = os.fdopen(fd, "wb")
        fcntl.flock(fd, fcntl.LOCK_EX)  # waits only while a sweeper holds it, about to delete it
        try:
            if os.stat(tmp).st_ino == os.fstat(fd).st_ino:
                return handle, tmp
        except FileNotFoundError:
            pass
        handle.close()


def _raise_naming(error: OSError, path: Path):
    """Raise ``error`` itself when it names a file other than a temporary one, else the same error naming ``path``."""
    if error.filename is not None and not str(error.filename).endswith(PART_SUFFIX):
        raise error
    raise OSError(error.errno, error.strerror or str(error), str(path)) from error


PART_SUFFIX = ".part"


def remove_stale_parts(folder, name: str | None = None) -> list[Path]:
    """Delete the ``.part`` files in ``folder`` (those of target ``name`` only, when given) that
    no writer holds: what a killed write left. Returns those deleted."""
    prefix = "." if name is None else f".{name}."
    try:
        entries = [entry for entry in os.scandir(folder)
                   if entry.name.startswith(prefix) and entry.name.endswith(PART_SUFFIX) and entry.is_file()]
    except OSError:
        return []
    removed = []
    for entry in entries:
        try:
            fd = os.open(entry.path, os.O_RDONLY)
        except OSError:
            continue  # gone meanwhile, or not ours to open
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            os.unlink(entry.path)
            removed.append(Path(entry.path))
        except OSError:
            pass  # held: a live write
        finally:
            os.close(fd)
    return removed


_WRITE_ADVICE = {
    errno.ENOSPC: "free space on that disk (the files already there are kept) and run the command again",
    errno.EDQUOT: "free space within your disk quota (the files already there are kept) and run the command again",
    errno.EROFS: "that file system is mounted read-only: remount it writable, or make results/ a symlink to a "
                 "writable disk, and run the command again",
    errno.EACCES: "you may not write there: make the folder writable for you (chmod/chown), or work in a copy you "
                  "own, and run the command again",
    errno.EPERM: "you may not write there: make the folder writable for you (chmod/chown), or work in a copy you "
                 "own, and run the command again",
}


def write_error_line(error: BaseException) -> str | None:
    """One line for an ``OSError`` of a full disk, a read-only file system or a missing
    permission: the file, what is wrong and what to do; None for any other error."""
    if not isinstance(error, OSError) or error.errno not in _WRITE_ADVICE:
        return None
    where = f"{error.filename}: " if error.filename is not None else ""
    return f"cannot write {where}{error.strerror or os.strerror(error.errno)}; {_WRITE_ADVICE[error.errno]}"


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


# --------------------------------------------------------------------------- reading


def verified_bytes(path) -> bytes:
    """The whole file, after its size and sha256 matched its sidecar (for ``torch.load(io.BytesIO(...))``)."""
    return _read_checked(Path(path))[0]


def read_text(path) -> str:
    path = Path(path)
    data, verified = _read_checked(path)
    with _parse_errors(path, verified, "UTF-8 text"):
        return data.decode("utf-8")


def read_json(path, *, verify: bool = True) -> Any:
    """The parsed JSON file; ``verify=False`` skips the checksum (Snakefile parse time reads many files)."""
    path = Path(path)
    data, verified = _read_checked(path) if verify else (path.read_bytes(), None)
    with _parse_errors(path, verified, "JSON"):
        return json.loads(data.decode("utf-8"))


def load_npz(path) -> dict:
    """Every array of an ``.npz`` file, read eagerly (so a damaged member fails here, named),
    each array header checked against its member's size before anything is allocated."""
    from focalcal.files.npz import read_npz

    path = Path(path)
    handle, verified = _open_checked(path)
    with handle, _parse_errors(path, verified, "an .npz archive"):
        return read_npz(handle, str(path))


def read_csv(path, **options):
    """``pandas.read_csv`` of a checked file; ``options`` go to pandas."""
    import pandas as pd

    path = Path(path)
    handle, verified = _open_checked(path)
    with handle, _parse_errors(path, verified, "CSV"):
        return pd.read_csv(handle, **options)


# zipfile, npy headers, JSON, CSV and UTF-8 decoding report bad content with these.
_PARSE_ERRORS = (ValueError, OSError, EOFError, zipfile.BadZipFile, zlib.error)


@contextlib.contextmanager
def _parse_errors(path: Path, verified: bool | None, kind: str):
    """Report content that does not parse like a checksum mismatch; ``verified`` None: not checked."""
    try:
        yield
    except CorruptArtefactError:
        raise
    except _PARSE_ERRORS as error:
        detail = (str(error).strip().splitlines() or [type(error).__name__])[0]
        if verified:
            problem = f"it matches its checksum but is not valid {kind} ({detail}): it was written wrong"
        elif verified is None:
            problem = f"it is not valid {kind} ({detail})"
        else:
            problem = (f"it is not valid {kind} ({detail}); it has no checksum sidecar, so it was written before "
                       "checksums or by something else")
        raise CorruptArtefactError(path, problem) from error


def _open_checked(path: Path) -> tuple[BinaryIO, bool]:
    """(handle at offset 0, whether a sidecar vouched for it). The hash is read through the
    handle the parser then gets, so a file replaced in between cannot slip through unchecked."""
    for attempt in range(2):
        expected = _expected(path)
        with contextlib.ExitStack() as on_failure:
            handle = on_failure.enter_context(open(path, "rb"))  # closed unless handed to the caller
            if expected is None:
                on_failure.pop_all()
                return handle, False
            problem = _mismatch(expected, os.fstat(handle.fileno()).st_size,
                                functools.partial(sidecar.digest_stream, handle))
            if problem is None:
                handle.seek(0)
                on_failure.pop_all()
                return handle, True
            rewritten = _rewritten_since(path, handle, expected)
        if not (attempt == 0 and rewritten):
            raise CorruptArtefactError(path, problem)
    raise CorruptArtefactError(path, "it keeps changing while it is read")


def _read_checked(path: Path) -> tuple[bytes, bool]:
    """(the file's bytes, whether a sidecar vouched for them)."""
    for attempt in range(2):
        expected = _expected(path)
        with open(path, "rb") as handle:
            data = handle.read()
            if expected is None:
                return data, False
            problem = _mismatch(expected, len(data), functools.partial(sidecar.digest_bytes, data))
            if problem is None:
                return data, True
            if not (attempt == 0 and _rewritten_since(path, handle, expected)):
                raise CorruptArtefactError(path, problem)
    raise CorruptArtefactError(path, "it keeps changing while it is read")


def check_against_sidecar(path) -> str | None:
    """What is wrong with ``path`` by its sidecar (None: it matches, or it has none)."""
    path = Path(path)
    expected = sidecar.read(path)
    if expected is None:
        return None
    with open(path, "rb") as handle:
        return _mismatch(expected, os.fstat(handle.fileno()).st_size, lambda: sidecar.digest_stream(handle))


def _rewritten_since(path: Path, handle, expected: sidecar.Checksum) -> bool:
    """Whether a writer replaced the file or its sidecar while we read (writers drop the sidecar,
    swap the file, then write the new sidecar): a mismatch is then a race, worth one more look."""
    try:
        if os.stat(path).st_ino != os.fstat(handle.fileno()).st_ino:
            return True
        return sidecar.read(path) != expected
    except (OSError, sidecar.SidecarUnreadable):
        return True


def _expected(path: Path) -> sidecar.Checksum | None:
    try:
        return sidecar.read(path)
    except sidecar.SidecarUnreadable as error:
        raise CorruptArtefactError(path, f"its checksum file {sidecar.sidecar_path(path).name} is unreadable "
                                         f"({error})") from None


def _mismatch(expected: sidecar.Checksum, size: int, digest: Callable[[], sidecar.Checksum]) -> str | None:
    if size != expected.size:
        shorter = "truncated" if size < expected.size else "overwritten or appended to"
        return f"it is {size} bytes but was written as {expected.size} bytes: {shorter}"
    actual = digest()
    if actual.sha256 != expected.sha256:
        return (f"its sha256 {actual.sha256[:12]}… differs from the {expected.sha256[:12]}… it was written with: "
                "its content changed after it was written (if you changed it on purpose, delete its .sha256 "
                "file to accept it unverified)")
    return None
