"""Atomic file writes: a killed process leaves the old file or the new one, never half of one.

Torch-free at import (torch and numpy load only inside the writers that need them), so the
Snakefile and the report can use it without paying for a torch import.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any


def _atomic_replace(path: Path, write) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".part")
    try:
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600 files; outputs get the usual mode
        with os.fdopen(fd, "wb") as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_torch_save(obj: Any, path: Path) -> None:
    import torch

    _atomic_replace(path, lambda handle: torch.save(obj, handle))


def atomic_write_text(text: str, path: Path) -> None:
    _atomic_replace(path, lambda handle: handle.write(text.encode()))


def atomic_write_json(obj: Any, path: Path) -> None:
    atomic_write_text(json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n", path)


def atomic_savez(path: Path, **arrays) -> None:
    import numpy as np

    _atomic_replace(path, lambda handle: np.savez(handle, **arrays))
