"""Focal temperature scaling's (γ, T) grid kernel (``kernels/focal_grid.c``), built once as a plain
C library and loaded with ctypes, so that the fit imports no torch (whose import is most of a
`focalcal calibrate` second process's start; ``python -m bench calibrate_command``).

The build is keyed by the source's and flags' digest and the CPU's vector width (``avx2`` where the
CPU has AVX2 and FMA, else ``default``) and lives in the kernels' shared cache
(:func:`focalcal.core.kernels.cache_root`), so every checkout of the same source loads the same
``.so``; ``python -m focalcal build-kernels`` builds it with the fused loss kernels, and outside
workflow jobs (``FOCALCAL_KERNEL_BUILD=never``) a missing build is compiled on first use.
Where none can be had, :mod:`focalcal.calibration._focal_grid` runs its torch reference path.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import subprocess
import tempfile
import warnings
from pathlib import Path

import numpy as np

from focalcal.core import kernels

SOURCE = Path(__file__).with_name("kernels") / "focal_grid.c"
# -fno-math-errno lets the class loops call glibc's vector exp/log (libmvec); no -ffast-math, which
# would reassociate every sum and, linked into a library, switch the process to flush-to-zero.
FLAGS = ("-O3", "-fno-math-errno", "-fopenmp", "-fPIC", "-shared")
VECTOR_FLAGS = {"avx2": ("-mavx2", "-mfma"), "default": ()}
LIBRARIES = ("-lmvec", "-lm")

_library = None  # None: not tried yet; False: unavailable (warned once)
_threads: int | None = None


def capability() -> str:
    try:
        from numpy._core._multiarray_umath import __cpu_features__ as features
    except ImportError:  # numpy < 2 names its core numpy.core
        from numpy.core._multiarray_umath import __cpu_features__ as features

    return "avx2" if features.get("AVX2") and features.get("FMA3") else "default"


def library_path() -> Path:
    digest = hashlib.sha256(SOURCE.read_bytes())
    digest.update(" ".join((*FLAGS, *VECTOR_FLAGS[capability()], *LIBRARIES)).encode())
    name = f"focalcal_focal_grid_{capability()}_{digest.hexdigest()[:12]}"
    return kernels.cache_root() / name / "focal_grid.so"


def is_built() -> bool:
    return bool(_library) or library_path().exists()


def build() -> Path:
    """Compile the library if it is not built yet (into a temporary file renamed into place, so
    concurrent builders leave one whole build); its path. Raises where the compiler fails."""
    library = library_path()
    if library.exists():
        return library
    library.parent.mkdir(parents=True, exist_ok=True)
    compiler = os.environ.get("CC") or "gcc"
    with tempfile.NamedTemporaryFile(dir=library.parent, suffix=".so.tmp", delete=False) as handle:
        partial = Path(handle.name)
    command = [compiler, *FLAGS, *VECTOR_FLAGS[capability()], "-o", str(partial), str(SOURCE), *LIBRARIES]
    try:
        result = subprocess.run(command, check=False, capture_output=True, text=True)
        if result.returncode != 0:
            raise RuntimeError(f"{' '.join(command)} failed: {result.stderr.strip().splitlines()[-1:]}")
        os.replace(partial, library)
    finally:
        partial.unlink(missing_ok=True)
    return library


def build_or_warn() -> Path | None:
    """:func:`build`, or None after a warning where it cannot be built (the grid then runs on the
    torch path): for the workflow's start, which must not fail for want of a C compiler."""
    try:
        return build()
    except Exception as error:  # noqa: BLE001 — no compiler, no libmvec, read-only cache
        warnings.warn(f"focalcal: the focal TS grid kernel cannot be built, the torch path runs: {error}",
                      RuntimeWarning, stacklevel=2)
        return None


def library():
    """The loaded kernel, or None: switched off (``FOCALCAL_FUSED_KERNELS=0``), or no build and none
    may be compiled (warned once)."""
    global _library
    if not kernels.enabled():
        return None
    if _library is None:
        try:
            path = library_path()
            if not path.exists():
                if not kernels.may_build():
                    raise RuntimeError(f"no build at {path} and {kernels.BUILD_SWITCH}=never; "
                                       "run `python -m focalcal build-kernels` once")
                path = build()
            _library = ctypes.CDLL(str(path))
            _library.focal_grid.restype = ctypes.c_int
            _library.focal_grid.argtypes = [ctypes.c_void_p] * 4 + [ctypes.c_int64] * 2 + [
                ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p,
                ctypes.c_void_p, ctypes.c_int]
        except Exception as error:  # noqa: BLE001 — no compiler, no libmvec, read-only cache: the torch path runs
            warnings.warn(f"focalcal: the focal TS grid kernel is unavailable, using the torch path: {error}",
                          RuntimeWarning, stacklevel=2)
            _library = False
    return _library or None


def set_threads(threads: int | None) -> None:
    """Threads for the kernel (None: ``OMP_NUM_THREADS``, else the cores this process may use);
    the scores do not depend on it (threads split the samples, never a sample's sums)."""
    global _threads
    _threads = None if threads is None else max(1, int(threads))


def threads() -> int:
    if _threads is not None:
        return _threads
    if os.environ.get("OMP_NUM_THREADS", "").isdigit():
        return max(1, int(os.environ["OMP_NUM_THREADS"]))
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def focal_grid(centred: np.ndarray, second: np.ndarray, top: np.ndarray, labels: np.ndarray, gammas: np.ndarray,
               betas: np.ndarray, wanted: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Confidence and log Ψ_label, each (n_gamma, n_T, N) float32, of the centred logits ``centred``
    (N, K float32, z − z_top), ``second`` (N,: z_second − z_top), the top classes and labels, at
    every γ and inverse temperature β, or only at the pairs ``wanted`` (n_gamma, n_T) bool marks
    (NaN at the others; a wanted pair's values are the same either way, and a temperature's
    γ-free terms, most of the work, are computed once for all its wanted γ). The kernel must be
    available: :func:`library`."""
    centred = np.ascontiguousarray(centred, dtype=np.float32)
    second = np.ascontiguousarray(second, dtype=np.float32)
    top, labels = (np.ascontiguousarray(a, dtype=np.int64) for a in (top, labels))
    gammas, betas = (np.ascontiguousarray(a, dtype=np.float32) for a in (gammas, betas))
    (n, k), shape = centred.shape, (len(gammas), len(betas), centred.shape[0])
    if wanted is None:
        confidence, log_psi_label = np.empty(shape, np.float32), np.empty(shape, np.float32)
        mask = None
    else:
        if np.shape(wanted) != shape[:2]:
            raise ValueError(f"wanted must have shape (n_gamma, n_T) = {shape[:2]}, got {np.shape(wanted)}")
        confidence, log_psi_label = np.full(shape, np.nan, np.float32), np.full(shape, np.nan, np.float32)
        mask = np.ascontiguousarray(wanted, dtype=np.uint8)
    status = library().focal_grid(centred.ctypes.data, second.ctypes.data, top.ctypes.data, labels.ctypes.data, n, k,
                                  gammas.ctypes.data, len(gammas), betas.ctypes.data, len(betas),
                                  None if mask is None else mask.ctypes.data, confidence.ctypes.data,
                                  log_psi_label.ctypes.data, threads())
    if status != 0:
        raise MemoryError("focal_grid: a per-thread buffer of 4 K floats, or the temperatures' mask, could not be "
                          "allocated")
    return confidence, log_psi_label
