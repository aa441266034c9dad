"""`focalcal calibrate` on a model's own logits: 10,000 validation and 10,000 test samples of
100 classes of an overconfident stand-in model (the goal: the whole command in <= 10 s on a 2-core machine).

Baseline in the same run: the command with only the uncalibrated model (``--calibrators
raw``): interpreter and imports, reading and checking the logits, the bootstrap metrics, one
diagram and the page. Printed: wall time of each, the ratio to the baseline and to the goal,
and each calibrator's fit and measure times from the command's progress lines.

Then many classes: 100 validation and 100 test samples of 10,000 classes (the default
calibrators skip vector scaling there), against the 10,000 × 100 run above: the same number
of logits per split.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from focalcal.logits_file import stand_in_logits

GOAL_S = 10.0
PROGRESS = re.compile(r"^\[\d+/\d+\] (\w+): fitted in ([\d.]+) s, measured(?: and drawn)? in ([\d.]+) s", re.MULTILINE)


def run(logits: Path, out: Path, *extra: str) -> tuple[float, str]:
    start = time.perf_counter()
    result = subprocess.run([sys.executable, "-m", "focalcal", "calibrate", str(logits), "--out", str(out), *extra],
                            capture_output=True, text=True, check=True)
    return time.perf_counter() - start, result.stdout


def main(quick: bool = False) -> None:
    n_samples = 2000 if quick else 10_000
    with tempfile.TemporaryDirectory(prefix="bench_compare_") as tmp:
        logits = Path(tmp) / "model.npz"
        np.savez(logits, **stand_in_logits(n_samples, n_samples, 100, temperature=2.5, scale=4.0))
        baseline, _ = run(logits, Path(tmp) / "baseline", "--calibrators", "raw")
        wall, stdout = run(logits, Path(tmp) / "all", "--gamma", "2")
        n_classes = 2000 if quick else 10_000
        wide_logits = Path(tmp) / "wide.npz"
        np.savez(wide_logits, **stand_in_logits(100, 100, n_classes, temperature=2.5, scale=4.0))
        wide, wide_stdout = run(wide_logits, Path(tmp) / "wide", "--gamma", "2")
    print(f"{n_samples:,} val + {n_samples:,} test samples, 100 classes")
    print(f"{'command':44s} {'wall s':>8s} {'vs baseline':>12s} {'vs goal':>8s}")
    print(f"{'--calibrators raw (baseline)':44s} {baseline:8.2f} {1.0:11.1f}x {baseline / GOAL_S:7.2f}x")
    print(f"{'default calibrators + psi (--gamma 2)':44s} {wall:8.2f} {wall / baseline:11.1f}x {wall / GOAL_S:7.2f}x")
    print(f"(goal: <= {GOAL_S:.0f} s for the default calibrators)")
    print(f"{'calibrator':20s} {'fit s':>7s} {'measure s':>15s}")
    for name, fit, measure in PROGRESS.findall(stdout):
        print(f"{name:20s} {float(fit):7.2f} {float(measure):15.2f}")
    print(f"\n100 val + 100 test samples, {n_classes:,} classes, default calibrators + psi: {wide:.2f} s, "
          f"{wide / wall:.2f}x the {n_samples:,} x 100 run")
    for name, fit, measure in PROGRESS.findall(wide_stdout):
        print(f"{name:20s} {float(fit):7.2f} {float(measure):15.2f}")


if __name__ == "__main__":
    main()
