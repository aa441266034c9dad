"""``focalcal verify``: check every artefact under ``results/`` against its checksum sidecar.

A file damaged on disk (a flipped bit, a truncation that kept its modification time) is
otherwise found only when a job reads it. This walks the tree, hashes every file that has a
``<name>.sha256`` sidecar (:mod:`focalcal._sidecar`) and lists each damaged or missing one with
the command that re-makes it (:mod:`focalcal._remake`). Torch-free.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from focalcal import _sidecar
from focalcal._io import check_against_sidecar
from focalcal._remake import remake_hint
from focalcal.paths import RESULTS


@dataclass(frozen=True)
class Damage:
    path: Path
    problem: str
    remake: str


def sidecared_files(results: Path) -> Iterator[Path]:
    """Every artefact under ``results`` that has a sidecar, in a stable order."""
    for folder, _, names in sorted(os.walk(results)):
        for name in sorted(names):
            if name.endswith(_sidecar.SUFFIX) and not name.startswith("."):
                yield Path(folder) / name.removesuffix(_sidecar.SUFFIX)


def verify_tree(workdir=".", progress: Callable[[str], None] | None = None) -> tuple[int, list[Damage]]:
    """(artefacts checked, the damaged ones) under ``<workdir>/results``."""
    results = Path(workdir) / RESULTS
    if not results.is_dir():
        raise FileNotFoundError(f"no results folder in {workdir}: pass the workflow directory that holds results/")
    checked, damaged = 0, []
    for path in sidecared_files(results):
        checked += 1
        try:
            problem = "it is missing" if not path.exists() else check_against_sidecar(path)
        except _sidecar.SidecarUnreadable as error:
            problem = f"its checksum file {_sidecar.sidecar_path(path).name} is unreadable ({error})"
        except OSError as error:
            problem = f"it cannot be read ({error})"
        if problem is not None:
            damaged.append(Damage(path, problem, remake_hint(path)))
        if progress is not None and checked % 500 == 0:
            progress(f"checked {checked} artefacts, {len(damaged)} damaged so far")
    return checked, damaged
