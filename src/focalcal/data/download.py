"""Fetching, checking and unpacking dataset files.

Every write is atomic: a download goes to ``<file>.part`` and is renamed only after its
checksum matches, an archive is unpacked into a scratch folder and renamed into place when
complete. So an interrupted run never leaves a half-written file under a final name, and a
file under a final name has been checked. A failed checksum names the file and both
digests and deletes nothing. A file's checksum is its sha256 where one is recorded (the
text archives publish only sha256s), else its md5 (see :class:`~focalcal.data.sources.RemoteFile`).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tarfile
import urllib.error
import urllib.request
import zipfile
from pathlib import Path

from .sources import RemoteFile

_CHUNK = 1 << 20
ALGORITHMS = ("md5", "sha256")


class DatasetNotFoundError(FileNotFoundError):
    """A dataset's files are not on disk and cannot be downloaded; the message says where to put them."""


class ChecksumError(ValueError):
    """A file's checksum (md5 or sha256) differs from the expected one."""


def file_digest(path: str | os.PathLike, algorithm: str = "md5") -> str:
    """Hex digest (``algorithm``: "md5" or "sha256") of the file at ``path``, read in chunks."""
    if algorithm not in ALGORITHMS:
        raise ValueError(f"algorithm must be one of {ALGORITHMS}, got {algorithm!r}")
    digest = hashlib.new(algorithm)
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def md5sum(path: str | os.PathLike) -> str:
    """Hex md5 of the file at ``path``, read in chunks."""
    return file_digest(path, "md5")


def sha256sum(path: str | os.PathLike) -> str:
    """Hex sha256 of the file at ``path``, read in chunks."""
    return file_digest(path, "sha256")


def verify_checksum(path: str | os.PathLike, algorithm: str, expected: str) -> None:
    """Raise ChecksumError naming ``path``, the expected and the actual digest when they differ."""
    actual = file_digest(path, algorithm)
    if actual != expected.lower():
        raise ChecksumError(
            f"checksum mismatch for {path}: expected {algorithm} {expected}, got {actual}. The file is "
            f"corrupt or a different version; nothing was deleted. Replace it with the original "
            f"(or delete it and load with download=True)."
        )


def verify_md5(path: str | os.PathLike, expected: str) -> None:
    """Raise ChecksumError naming ``path``, the expected and the actual md5 when they differ."""
    verify_checksum(path, "md5", expected)


def _required_checksum(remote: RemoteFile) -> tuple[str, str]:
    checksum = remote.checksum
    if checksum is None:
        raise ValueError(f"no checksum is known for {remote.url}, so a file for it cannot be verified")
    return checksum


def _describe_checksum(remote: RemoteFile) -> str:
    checksum = remote.checksum
    return "no checksum known" if checksum is None else f"{checksum[0]} {checksum[1]}"


def manual_download_hint(files: list[tuple[RemoteFile, Path]]) -> str:
    """Lines telling a user which URL (and checksum) to save at which path."""
    return "\n".join(f"  {remote.url}\n    ({_describe_checksum(remote)}) -> save as {target}" for remote, target in files)


def _open_url(url: str):
    """The one place that touches the network (tests replace it or use file:// URLs)."""
    return urllib.request.urlopen(url, timeout=60)


def fetch(remote: RemoteFile, target: str | os.PathLike, *, dataset: str) -> Path:
    """Download ``remote`` to ``target`` unless already there, verifying its checksum either way.

    The bytes go to ``target.part`` first; only a file whose checksum (sha256 if recorded,
    else md5) matches is renamed to ``target``. A mismatching download stays at
    ``target.part`` for inspection.
    """
    target = Path(target)
    algorithm, expected = _required_checksum(remote)
    if target.exists():
        verify_checksum(target, algorithm, expected)
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".part")
    digest = hashlib.new(algorithm)
    try:
        with _open_url(remote.url) as response, open(partial, "wb") as out:
            for chunk in iter(lambda: response.read(_CHUNK), b""):
                digest.update(chunk)
                out.write(chunk)
    except (urllib.error.URLError, OSError) as error:
        raise DatasetNotFoundError(
            f"could not download dataset {dataset!r} ({error}). Without network, download by hand:\n"
            + manual_download_hint([(remote, target)])
        ) from error
    actual = digest.hexdigest()
    if actual != expected.lower():
        raise ChecksumError(
            f"checksum mismatch for the download of {remote.url}: expected {algorithm} {expected}, got "
            f"{actual}. The bytes were kept at {partial} and {target} was not created; nothing "
            f"else was touched."
        )
    os.replace(partial, target)
    return target


def extract(archive: str | os.PathLike, root: str | os.PathLike, folder: str) -> Path:
    """Unpack ``archive`` (tar.* or zip) and move its top-level ``folder`` to ``root/folder``.

    Unpacking happens in a scratch folder under ``root`` so ``root/folder`` appears only
    complete. Tar members that would escape the scratch folder are refused (tarfile's
    "data" filter); zipfile strips such paths itself.
    """
    archive, root = Path(archive), Path(root)
    destination = root / folder
    scratch = root / f".{folder}.extracting"
    if scratch.exists():
        shutil.rmtree(scratch)
    scratch.mkdir(parents=True)
    try:
        if zipfile.is_zipfile(archive):
            with zipfile.ZipFile(archive) as bundle:
                bundle.extractall(scratch)
        elif tarfile.is_tarfile(archive):
            with tarfile.open(archive) as bundle:
                bundle.extractall(scratch, filter="data")
        else:
            raise ValueError(f"{archive} is neither a zip nor a tar archive")
        unpacked = scratch / folder
        if not unpacked.is_dir():
            found = sorted(p.name for p in scratch.iterdir())
            raise ValueError(f"archive {archive} does not contain the folder {folder!r} (top level: {found})")
        os.replace(unpacked, destination)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return destination


def ensure_archive_folder(source, root: Path, *, download: bool, dataset: str) -> Path:
    """``root/source.folder``, extracting ``root/<archive>`` (downloaded if allowed) when absent.

    ``source`` is a :class:`~focalcal.data.sources.RemoteArchive`. Member md5s in
    ``source.files`` are checked on every call, before any of them is read.
    """
    folder = root / source.folder
    archive_path = root / source.archive.filename
    if not folder.is_dir():
        if not archive_path.exists() and not download:
            expected = ", ".join(source.files) if source.files else "the extracted archive"
            raise DatasetNotFoundError(
                f"dataset {dataset!r} not found: expected the folder {folder} ({expected}). "
                f"Load with download=True, or download the archive by hand and it is unpacked on "
                f"the next load:\n" + manual_download_hint([(source.archive, archive_path)])
            )
        fetch(source.archive, archive_path, dataset=dataset)
        extract(archive_path, root, source.folder)
    missing = [name for name in source.files if not (folder / name).is_file()]
    if missing:
        raise DatasetNotFoundError(
            f"dataset {dataset!r}: the folder {folder} lacks {missing}. Delete the folder and load "
            f"again (with download=True, or with the archive saved as described):\n"
            + manual_download_hint([(source.archive, archive_path)])
        )
    for name, md5 in source.files.items():
        verify_md5(folder / name, md5)
    return folder
