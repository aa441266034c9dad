"""focalcal.commands.allocator: with its settings, arrays freed and allocated again are not faulted in
again page by page (each case runs in its own interpreter, whose allocator it changes)."""

from __future__ import annotations

import subprocess
import sys

SCRIPT = """
import resource, sys
import numpy as np
from focalcal.commands.allocator import keep_freed_arrays
if sys.argv[1] == "kept":
    assert keep_freed_arrays()
def measure_once():  # five 16 MiB arrays alive at once, as the bootstrap's running sums are
    arrays = [np.ones(2 * 2**20) for _ in range(5)]
    del arrays
measure_once()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(10):
    measure_once()
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def _page_faults(mode: str) -> int:
    result = subprocess.run([sys.executable, "-c", SCRIPT, mode], capture_output=True, text=True, check=True)
    return int(result.stdout)


def test_freed_arrays_are_reused_without_faulting_their_pages_in_again():
    pages = 10 * 5 * 16 * 2**20 // 4096  # every page of every array of the ten rounds
    # by default glibc trims the freed heap top beyond twice the largest array freed, and faults the
    # pages in again (here ~10 % of them); kept, they are reused
    assert _page_faults("kept") < pages // 100 < _page_faults("default")
