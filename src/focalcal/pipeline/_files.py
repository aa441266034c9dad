"""Atomic writes for the workflow's small text outputs (no torch import, unlike training.io)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def atomic_write_text(text: str, path) -> None:
    """Write ``text`` to ``path`` via a temporary file and a rename: a killed job leaves no half file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".part")
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
