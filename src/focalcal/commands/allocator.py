"""glibc's allocator told to keep freed arrays for reuse, in a short command that owns its process.

By default glibc hands an array of more than 128 KiB back to the system when it is freed (its
threshold then rises to the largest array freed, at most 32 MiB) and trims the heap's free top
beyond twice that; the next array of that size is faulted in again, page by page, in system time.
`focalcal calibrate` allocates and frees 8-16 MiB arrays for every calibrator it measures (the
bootstrap's running sums): left to the defaults, a share of its CPU goes to those page faults
(``python -m bench calibrate_command`` measures it; bench/RESULTS.md). Called by the command's process only: a library call
from a notebook leaves that process's allocator as it was.
"""

from __future__ import annotations

import ctypes
import sys

#: mallopt's parameters (glibc's malloc.h).
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
#: Arrays up to this size come from the heap (glibc's largest allowed value).
MMAP_THRESHOLD = 32 * 2**20
#: Free heap top kept rather than trimmed.
TRIM_THRESHOLD = 2**30


def keep_freed_arrays() -> bool:
    """Serve arrays up to :data:`MMAP_THRESHOLD` from the heap and keep up to :data:`TRIM_THRESHOLD`
    of freed heap for reuse. Returns whether the allocator took both settings (False off glibc,
    e.g. on macOS or musl, where nothing changes)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))
