"""`focalcal calibrate` of this checkout against the same command at the branch's merge-base
with main, side by side in one run: the base's code is checked out into a temporary ``git
worktree`` and each command runs in its own interpreter with its own ``src`` first on
``PYTHONPATH``, base and checkout interleaved, on the same 10,000 test + 5,000 validation logits
of 100 classes (the default calibrators). Printed: each run's wall time and CPU time (user +
system of the command and its second process: on a machine shared with other jobs the wall
time follows their load, the CPU time much less), the best of each, the ratios base / checkout,
each calibrator's fit and measure times from the checkout's last run, which output files
differ between the two commands' first runs (none, where the results are equal), and which
calibrators' entries of calibration.json and metrics.csv differ. Goal: <= 3 s wall.

``python -m bench calibrate_command [--quick]``. ``BENCH_BASE=<commit>`` picks another baseline,
``BENCH_CALIBRATORS=raw,fts_ece`` a ``--calibrators`` subset, ``BENCH_REPEATS=n`` the runs
of each (default 3; 1 with ``--quick``).
"""

from __future__ import annotations

import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from focalcal.logits_file import stand_in_logits

GOAL_S = 3.0
REPOSITORY = Path(__file__).resolve().parents[1]
PROGRESS = re.compile(r"^\[\d+/\d+\] (\w+): fitted in ([\d.]+) s, measured(?: and drawn)? in ([\d.]+) s", re.MULTILINE)


def git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(REPOSITORY), *args], capture_output=True, text=True,
                          check=True).stdout.strip()


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run(src: Path, logits: Path, out: Path, calibrators: str | None) -> tuple[float, float, str]:
    """Wall and CPU seconds of one command (its second process included), and its output."""
    env = {**os.environ, "PYTHONPATH": str(src)}
    command = [sys.executable, "-m", "focalcal", "calibrate", str(logits), "--out", str(out)]
    if calibrators:
        command += ["--calibrators", calibrators]
    cpu, start = children_cpu(), time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True, check=True, env=env)
    return time.perf_counter() - start, children_cpu() - cpu, result.stdout


def _by_calibrator(path: Path) -> dict:
    """calibration.json's entries, or metrics.csv's rows, by calibrator (as text: equal means equal)."""
    import csv
    import json

    if path.suffix == ".json":
        return {key: json.dumps(value, sort_keys=True) for key, value in json.loads(path.read_text()).items()}
    rows: dict[str, list] = {}
    with open(path) as handle:
        for row in csv.DictReader(handle):
            rows.setdefault(row["calibrator"], []).append(row)
    return rows


def main(quick: bool = False) -> None:
    base = os.environ.get("BENCH_BASE") or git("merge-base", "HEAD", "main")
    calibrators = os.environ.get("BENCH_CALIBRATORS")
    n_test, n_val = (2000, 1000) if quick else (10_000, 5000)
    repeats = int(os.environ.get("BENCH_REPEATS") or (1 if quick else 3))
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="bench_calibrate_") as tmp:
        tmp = Path(tmp)
        git("worktree", "add", "--detach", str(tmp / "base"), base)
        try:
            logits = tmp / "model.npz"
            np.savez(logits, **stand_in_logits(n_val, n_test, 100, temperature=2.5, scale=4.0))
            sources = {f"base {base[:7]}": tmp / "base" / "src", f"checkout {git('rev-parse', '--short', 'HEAD')}":
                       REPOSITORY / "src"}
            walls = {name: [] for name in sources}
            cpus = {name: [] for name in sources}
            stdout, same = "", {}
            for repeat in range(repeats):  # interleaved: both see the same machine load
                for name, src in sources.items():
                    wall, cpu, stdout = run(src, logits, tmp / f"out{repeat}_{name.split()[0]}", calibrators)
                    walls[name].append(wall)
                    cpus[name].append(cpu)
            first = [tmp / f"out0_{name.split()[0]}" for name in sources]
            written = [{str(path.relative_to(folder)) for path in folder.rglob("*")
                        if path.is_file() and path.suffix != ".sha256"} for folder in first]
            only = {name: sorted(files - other) for name, files, other in
                    zip(sources, written, written[::-1], strict=True)}  # e.g. diagrams in another format
            same = {name: (first[0] / name).read_bytes() == (first[1] / name).read_bytes()
                    for name in sorted(written[0] & written[1])}
            entries = {}  # per calibrator: which results are equal
            for name in ("calibration.json", "metrics.csv"):
                base_entries, ours = (_by_calibrator(folder / name) for folder in first)
                entries[name] = (len(base_entries), sorted(k for k in base_entries if base_entries[k] != ours.get(k)))
        finally:
            git("worktree", "remove", "--force", str(tmp / "base"))
    print(f"focalcal calibrate, {n_test:,} test + {n_val:,} val samples x 100 classes, "
          f"{'--calibrators ' + calibrators if calibrators else 'default calibrators'}; load average at the start: "
          f"{load:.1f}")
    for name in sources:
        print(f"{name:18s} wall {' '.join(f'{v:6.2f}' for v in walls[name])} s (best {min(walls[name]):6.2f})   "
              f"cpu {' '.join(f'{v:6.2f}' for v in cpus[name])} s (best {min(cpus[name]):6.2f})")
    old, new = list(sources)
    print(f"ratio base / checkout (best of each): wall {min(walls[old]) / min(walls[new]):.2f}x, "
          f"cpu {min(cpus[old]) / min(cpus[new]):.2f}x; goal <= {GOAL_S:.0f} s wall: checkout best "
          f"{min(walls[new]) / GOAL_S:.2f}x of it")
    differ = [name for name, equal in same.items() if not equal]
    print(f"outputs of base and checkout: {len(same) - len(differ)} of the {len(same)} files both write byte for "
          "byte equal" + (f"; differ: {', '.join(differ)}" if differ else ""))
    for name, files in only.items():
        if files:
            print(f"  only the {name.split()[0]} writes: {', '.join(files)}")
    for name, (count, unequal) in entries.items():
        print(f"{name}: {count - len(unequal)} of {count} calibrators' entries equal"
              + (f"; differ: {', '.join(unequal)}" if unequal else ""))
    print(f"{'calibrator':20s} {'fit s':>7s} {'measure s':>15s}   (checkout's last run; measured includes its diagram)")
    for name, fit, measure in PROGRESS.findall(stdout):
        print(f"{name:20s} {float(fit):7.2f} {float(measure):15.2f}")
