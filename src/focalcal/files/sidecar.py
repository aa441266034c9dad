"""Checksum sidecars: ``<name>.sha256`` beside an artefact records the size and sha256 it was written with.

A truncated or bit-flipped file is still "present" to Snakemake, so only its content can tell
that it is damaged. The sidecar is plain ``sha256sum`` format (a ``#`` line, which
``sha256sum`` ignores, holds the size), so ``cd <dir> && sha256sum -c <name>.sha256`` checks
it by hand too. Size is compared first: it catches truncation without reading the file.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from focalcal.paths import CHECKSUM as SUFFIX  # one spelling for the rules and the library

_CHUNK = 1 << 20
_HASH_LINE = re.compile(r"([0-9a-f]{64}) [ *](.+)")
_SIZE_LINE = re.compile(r"# size (\d+)")


@dataclass(frozen=True)
class Checksum:
    size: int
    sha256: str


class SidecarUnreadable(ValueError):
    """The sidecar itself is not a checksum file (edited by hand or damaged)."""


def sidecar_path(path) -> Path:
    path = Path(path)
    return path.with_name(path.name + SUFFIX)


def digest_stream(handle: BinaryIO) -> Checksum:
    """Size and sha256 of what is left to read in ``handle``."""
    sha, size = hashlib.sha256(), 0
    while chunk := handle.read(_CHUNK):
        sha.update(chunk)
        size += len(chunk)
    return Checksum(size, sha.hexdigest())


def digest_file(path) -> Checksum:
    with open(path, "rb") as handle:
        return digest_stream(handle)


def digest_bytes(data: bytes) -> Checksum:
    return Checksum(len(data), hashlib.sha256(data).hexdigest())


def render(name: str, checksum: Checksum) -> str:
    return f"# size {checksum.size}\n{checksum.sha256}  {name}\n"


def read(path) -> Checksum | None:
    """The checksum recorded for ``path``; None when it has no sidecar (written before sidecars, or by hand)."""
    try:
        text = sidecar_path(path).read_text(encoding="ascii")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as error:
        raise SidecarUnreadable(str(error)) from None
    lines = text.splitlines()
    size = _SIZE_LINE.fullmatch(lines[0]) if len(lines) == 2 else None
    digest = _HASH_LINE.fullmatch(lines[1]) if size else None
    if not digest or digest.group(2) != Path(path).name:
        raise SidecarUnreadable(f"expected '# size N' and '<sha256>  {Path(path).name}', got {text[:120]!r}")
    return Checksum(int(size.group(1)), digest.group(1))


def remove(path) -> None:
    """Drop ``path``'s sidecar before the file is replaced: a crash then leaves a file that is
    unverified, never one paired with the checksum of another version."""
    try:
        os.unlink(sidecar_path(path))
    except FileNotFoundError:
        pass
