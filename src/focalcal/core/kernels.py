"""Where the project's compiled CPU kernels live and the switches that govern them, torch-free:
the fused loss kernels (:mod:`focalcal.losses._fused`, a torch extension) and focal temperature
scaling's grid kernel (:mod:`focalcal.calibration._grid_kernel`, plain C) read the same ones."""

from __future__ import annotations

import os
from pathlib import Path

ENV_SWITCH = "FOCALCAL_FUSED_KERNELS"  # "0": every compiled kernel off, the reference paths run
BUILD_SWITCH = "FOCALCAL_KERNEL_BUILD"  # "auto" (default): compile a missing build; "never": only load one


def enabled() -> bool:
    return os.environ.get(ENV_SWITCH, "1") != "0"


def may_build() -> bool:
    return os.environ.get(BUILD_SWITCH, "auto") != "never"


def cache_root() -> Path:
    """torch's extension cache (``TORCH_EXTENSIONS_DIR``, default ``~/.cache/torch_extensions``):
    the builds of every kernel, shared by every checkout."""
    return Path(os.environ.get("TORCH_EXTENSIONS_DIR") or Path.home() / ".cache" / "torch_extensions")
