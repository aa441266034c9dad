"""Snakemake workflow: dry-run time of every study config together, and the default run's overhead.

* Dry run: parsing + config validation + planning + DAG of all config/studies/*.yaml at
  once (thousands of jobs). Goal: <= 15 s on the 2-core development machine. Baseline in the
  same run: the dry run of config/test.yaml, i.e. Snakemake's fixed start-up cost; the ratio
  shows what the thousands of jobs add.
* End to end (skipped with quick=True): `snakemake --cores 2` on the default config in a
  fresh copy of the checkout (fused kernels already built, as after `make venv`). The
  goals, each a ratio against the run's own training:
  - overhead = wall time / (training jobs' CPU / cores) <= 1.3: everything that is not
    training (scheduling, the other jobs, idle cores) adds under 30 %;
  - CPU of every non-training job / training jobs' CPU <= 0.35, both summed from the run's
    jobs' logs (each ends with its whole process's CPU: :mod:`bench.job_cpu`; a job without that
    line counts its results/benchmarks/ file's cpu_time), and the bound that counts everything:
    the run's child CPU minus its training jobs';
  - Snakemake's own CPU: the run's child CPU minus its jobs' CPU;
  - kernel compiles during the run: must be 0 (the logs would say "Building extension");
  - the wall time against the default run's goal, 10 minutes on 2 cores, and where it went
    (:mod:`bench.run_profile`: whole-process CPU per rule, core-seconds with no job on them, the
    stretches where fewer jobs ran than cores).
  Training jobs also stage what the run's next job publishes (a classifier's logits, a
  segmentation run's evaluation); the CPU that took, from each published run.json's
  ``staged.cpu_s``, is moved from training to non-training before any ratio is taken.

Wall times depend on what else the machine runs; the ratios are the figures.
"""

from __future__ import annotations

import csv
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.job_cpu import job_cpu
from bench.run_profile import profile, report

ROOT = Path(__file__).resolve().parents[1]
SNAKEMAKE = str(Path(sys.executable).parent / "snakemake")
DRY_RUN_GOAL_S = 15.0
OVERHEAD_GOAL = 1.3
NON_TRAINING_CPU_GOAL = 0.35
CORES = 2
WALL_GOAL_S = 600.0  # the default run (make run) in 10 minutes on 2 cores


def _run(args: list[str], workdir: Path) -> tuple[float, float, str]:
    """(wall s, child CPU s, output) of one snakemake invocation."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    result = subprocess.run([SNAKEMAKE, "-s", str(ROOT / "workflow" / "Snakefile"), "--directory", str(workdir), *args],
                            capture_output=True, text=True, env=dict(os.environ, OMP_NUM_THREADS="1"), check=False)
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


def rule_families(workdir: Path) -> dict[str, tuple[int, float, float]]:
    """rule family -> (jobs, summed CPU s (:func:`bench.job_cpu.job_cpu`), summed wall s) from the run's benchmark files.
    Figures split into theory and study figures; every other family is its rule's folder."""
    families: dict[str, list[float]] = {}
    root = workdir / "results" / "benchmarks"
    for tsv in root.rglob("*.tsv"):
        parts = tsv.relative_to(root).parts
        family = parts[0] if parts[0] != "figures" else ("theory_figure" if parts[1] == "theory" else "study_figure")
        with open(tsv) as handle:
            row = list(csv.DictReader(handle, delimiter="\t"))[-1]  # its wall time
        totals = families.setdefault(family, [0, 0.0, 0.0])
        totals[0] += 1
        totals[1] += job_cpu(workdir, tsv)[0]
        totals[2] += float(row["s"])
    return {family: (int(n), cpu, wall) for family, (n, cpu, wall) in families.items()}


def staged_cpu(workdir: Path) -> tuple[int, float]:
    """(records, CPU s) the training jobs spent staging their runs' next jobs' outputs, from the
    published run.json files (``staged`` is absent where the next job redid the work itself)."""
    records = [json.loads(path.read_text()).get("staged") for folder in ("runs", "segmentation")
               for path in (workdir / "results" / folder).rglob("run.json") if "staged_export" not in path.parts]
    records = [record for record in records if record]
    return len(records), sum(record["cpu_s"] for record in records)


def kernel_compiles(workdir: Path) -> int:
    """Jobs whose log shows a compile of the fused kernels (focalcal.losses._fused prints this when it compiles)."""
    return sum("compiling the fused CPU loss kernels" in log.read_text(errors="replace")
               for log in (workdir / "results" / "logs").rglob("*.log"))


def end_to_end(workdir: Path) -> dict:
    from bench.bench_default_run import checkout_copy

    checkout_copy(workdir)
    subprocess.run([sys.executable, "-m", "focalcal", "build-kernels"], cwd=workdir, check=True,
                   capture_output=True)  # make venv's step: the run itself must not compile
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    result = subprocess.run([SNAKEMAKE, "--cores", str(CORES)], cwd=workdir, capture_output=True, text=True,
                            check=False, env=dict(os.environ, OMP_NUM_THREADS="1"))
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if result.returncode != 0:
        raise RuntimeError(f"snakemake failed:\n{result.stderr[-3000:]}")
    families = rule_families(workdir)
    return {"wall": wall, "profile": report(profile(workdir, CORES)),
            "child_cpu": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
            "jobs": len(re.findall(r"^Finished jobid", result.stdout + result.stderr, flags=re.MULTILINE)),
            "families": families, "staged": staged_cpu(workdir),
            "compiles": kernel_compiles(workdir) + ("compiling the fused CPU loss kernels" in result.stderr)}


def report_end_to_end(run: dict) -> None:
    families = run["families"]
    staged_records, staged = run["staged"]
    training = families["train"][1] - staged
    non_training = sum(cpu for family, (_, cpu, _) in families.items() if family != "train") + staged
    jobs_cpu = training + non_training
    overhead = run["wall"] / (training / CORES)
    print(f"\ndefault config end to end, --cores {CORES}: {run['jobs']} jobs, wall {run['wall']:.0f} s")
    print(f"{'rule family':18s} {'jobs':>5s} {'CPU s':>8s} {'CPU s/job':>10s} {'wall s':>8s}")
    for family, (n, cpu, wall) in sorted(families.items(), key=lambda item: -item[1][1]):
        print(f"{family:18s} {n:5d} {cpu:8.1f} {cpu / n:10.2f} {wall:8.1f}")
    print(f"training jobs' staging of {staged_records} runs' logits or evaluations: {staged:.1f} s, "
          f"counted below as non-training ({families['train'][1]:.0f} s of training jobs' CPU -> {training:.0f} s)")
    print(f"snakemake's own CPU (child CPU {run['child_cpu']:.0f} s minus jobs' {jobs_cpu:.0f} s): "
          f"{run['child_cpu'] - jobs_cpu:.0f} s")
    print(f"overhead: wall / (training CPU / {CORES} cores) = {run['wall']:.0f} / {training / CORES:.0f} = "
          f"{overhead:.2f} (goal <= {OVERHEAD_GOAL})")
    print(f"non-training jobs' CPU / training CPU = {non_training:.0f} / {training:.0f} = "
          f"{non_training / training:.2f} (goal <= {NON_TRAINING_CPU_GOAL})")
    everything_else = run["child_cpu"] - training
    print(f"all CPU but training (child CPU minus training jobs') / training CPU = {everything_else:.0f} / "
          f"{training:.0f} = {everything_else / training:.2f}: Snakemake samples a job's CPU every 0.5 s, so a "
          "short job's last fraction of a second is missing from its benchmark file; this counts it (and Snakemake)")
    print(f"kernel compiles during the run: {run['compiles']} (goal 0)")
    print(f"wall time against the goal: {run['wall']:.0f} s / {WALL_GOAL_S:.0f} s = {run['wall'] / WALL_GOAL_S:.2f}x")
    print()
    print(run["profile"])


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
        report_end_to_end(end_to_end(Path(tmp)))


if __name__ == "__main__":
    main()
