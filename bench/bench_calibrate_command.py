"""`focalcal calibrate` now against the same command at the branch's merge-base with main, side
by side in one run: the old code is checked out into a temporary ``git worktree`` and each
command runs in its own interpreter with its own ``src`` first on ``PYTHONPATH``, old and new
interleaved, on the same 10,000 test + 5,000 validation logits of 100 classes (the default
calibrators). Printed: each run's wall time, the best of each, the ratio old / new, and each
calibrator's fit and measure times from the last new run. Goal: <= 3 s.

``python -m bench calibrate_command [--quick]``; ``BENCH_BASE=<commit>`` picks another baseline.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from focalcal.logits_file import stand_in_logits

GOAL_S = 3.0
REPOSITORY = Path(__file__).resolve().parents[1]
PROGRESS = re.compile(r"^\[\d+/\d+\] (\w+): fitted in ([\d.]+) s, measured and drawn in ([\d.]+) s", re.MULTILINE)


def git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(REPOSITORY), *args], capture_output=True, text=True,
                          check=True).stdout.strip()


def run(src: Path, logits: Path, out: Path) -> tuple[float, str]:
    env = {**os.environ, "PYTHONPATH": str(src)}
    start = time.perf_counter()
    result = subprocess.run([sys.executable, "-m", "focalcal", "calibrate", str(logits), "--out", str(out)],
                            capture_output=True, text=True, check=True, env=env)
    return time.perf_counter() - start, result.stdout


def main(quick: bool = False) -> None:
    base = os.environ.get("BENCH_BASE") or git("merge-base", "HEAD", "main")
    n_test, n_val = (2000, 1000) if quick else (10_000, 5000)
    repeats = 1 if quick else 3
    with tempfile.TemporaryDirectory(prefix="bench_calibrate_") as tmp:
        tmp = Path(tmp)
        git("worktree", "add", "--detach", str(tmp / "base"), base)
        try:
            logits = tmp / "model.npz"
            np.savez(logits, **stand_in_logits(n_val, n_test, 100, temperature=2.5, scale=4.0))
            sources = {f"base {base[:7]}": tmp / "base" / "src", f"new {git('rev-parse', '--short', 'HEAD')}":
                       REPOSITORY / "src"}
            times = {name: [] for name in sources}
            stdout = ""
            for repeat in range(repeats):  # interleaved: both see the same machine load
                for name, src in sources.items():
                    seconds, stdout = run(src, logits, tmp / f"out{repeat}_{name.split()[0]}")
                    times[name].append(seconds)
        finally:
            git("worktree", "remove", "--force", str(tmp / "base"))
    print(f"focalcal calibrate, {n_test:,} test + {n_val:,} val samples x 100 classes, default calibrators")
    for name, values in times.items():
        print(f"{name:20s} {' '.join(f'{v:7.2f}' for v in values)} s   best {min(values):7.2f} s")
    (old_name, old), (new_name, new) = times.items()
    print(f"ratio {old_name} / {new_name}: {min(old) / min(new):.2f}x (best of each); goal <= {GOAL_S:.0f} s: "
          f"new best {min(new) / GOAL_S:.2f}x of it")
    print(f"{'calibrator':20s} {'fit s':>7s} {'measure+draw s':>15s}   (last new run)")
    for name, fit, measure in PROGRESS.findall(stdout):
        print(f"{name:20s} {float(fit):7.2f} {float(measure):15.2f}")
