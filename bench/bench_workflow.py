"""Snakemake workflow: dry-run time of every study config together, and the default config end to end.

* Dry run: parsing + config validation + planning + DAG of all config/studies/*.yaml at
  once (thousands of jobs). Goal: <= 15 s on the 2-core development machine. Baseline in the
  same run: the dry run of config/test.yaml (66 jobs), i.e. Snakemake's fixed start-up cost;
  the ratio shows what the thousands of jobs add.
* End to end (skipped with quick=True): `snakemake --cores 2` on the default config in a
  fresh directory. Goal: <= 15 minutes including figures and report. Printed beside it: the
  sum of the jobs' own wall times per stage (from their benchmark files), and how much of
  it is process start-up (a job's time minus its training epochs).

Wall times depend on what else the machine runs; child CPU time is printed too.
"""

from __future__ import annotations

import csv
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SNAKEMAKE = str(Path(sys.executable).parent / "snakemake")
DRY_RUN_GOAL_S = 15.0
END_TO_END_GOAL_S = 15 * 60.0


def _run(args: list[str], workdir: Path) -> tuple[float, float, str]:
    """(wall s, child CPU s, output) of one snakemake invocation."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    result = subprocess.run([SNAKEMAKE, "-s", str(ROOT / "Snakefile"), "--directory", str(workdir), *args],
                            capture_output=True, text=True, env=dict(os.environ, OMP_NUM_THREADS="1"))
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if result.returncode != 0:
        raise RuntimeError(f"snakemake {' '.join(args)} failed:\n{result.stderr[-3000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, result.stdout + result.stderr


def _jobs(output: str) -> int:
    match = re.search(r"^total\s+(\d+)$", output, flags=re.MULTILINE)
    return int(match.group(1)) if match else 0


def dry_runs(workdir: Path, repeats: int) -> list[tuple[str, int, float, float]]:
    studies = [str(p) for p in sorted((ROOT / "config" / "studies").glob("*.yaml"))]
    rows = []
    for name, configfiles in (("config/test.yaml (baseline)", [str(ROOT / "config" / "test.yaml")]),
                              (f"all {len(studies)} study configs", studies)):
        best_wall, best_cpu, jobs = float("inf"), float("inf"), 0
        for _ in range(repeats):
            wall, cpu, output = _run(["-n", "--quiet", "rules", "--configfile", *configfiles], workdir)
            best_wall, best_cpu, jobs = min(best_wall, wall), min(best_cpu, cpu), _jobs(output)
        rows.append((name, jobs, best_wall, best_cpu))
    return rows


def stage_seconds(workdir: Path) -> dict[str, float]:
    """Sum of the benchmark wall times (s) per rule."""
    totals: dict[str, float] = {}
    for tsv in (workdir / "results" / "benchmarks").rglob("*.tsv"):
        stage = tsv.relative_to(workdir / "results" / "benchmarks").parts[0]
        with open(tsv) as handle:
            row = next(csv.DictReader(handle, delimiter="\t"))
        totals[stage] = totals.get(stage, 0.0) + float(row["s"])
    return totals


def end_to_end(workdir: Path, cores: int = 2) -> tuple[float, float, int, dict[str, float]]:
    shutil.copytree(ROOT / "config", workdir / "config")
    wall, cpu, output = _run(["--cores", str(cores)], workdir)
    jobs = len(re.findall(r"^Finished jobid", output, flags=re.MULTILINE))
    return wall, cpu, jobs, stage_seconds(workdir)


def main(quick: bool = False) -> None:
    with tempfile.TemporaryDirectory(prefix="bench_workflow_") as tmp:
        rows = dry_runs(Path(tmp) / "dry", repeats=1 if quick else 3)
    print(f"{'dry run':34s} {'jobs':>6s} {'wall s':>8s} {'CPU s':>8s} {'vs baseline':>12s} {'vs goal':>8s}")
    baseline = rows[0][2]
    for name, jobs, wall, cpu in rows:
        print(f"{name:34s} {jobs:6d} {wall:8.2f} {cpu:8.2f} {wall / baseline:11.1f}x {wall / DRY_RUN_GOAL_S:7.2f}x")
    print(f"(goal: all studies <= {DRY_RUN_GOAL_S:.0f} s)")
    if quick:
        return
    with tempfile.TemporaryDirectory(prefix="bench_workflow_e2e_") as tmp:
        wall, cpu, jobs, stages = end_to_end(Path(tmp))
    print(f"\ndefault config end to end, --cores 2: {jobs} jobs, wall {wall / 60:.1f} min "
          f"({wall / END_TO_END_GOAL_S:.2f}x the 15-min goal), child CPU {cpu / 60:.1f} min")
    print(f"{'stage':16s} {'sum of job wall s':>18s}")
    for stage, seconds in sorted(stages.items(), key=lambda item: -item[1]):
        print(f"{stage:16s} {seconds:18.1f}")


if __name__ == "__main__":
    main()
