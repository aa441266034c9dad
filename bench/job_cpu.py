"""A workflow job's CPU, as the benchmarks count it.

Each job's log ends with its whole process's CPU (:data:`focalcal.pipeline.joblog.USAGE_LINE`).
Snakemake's ``benchmark:`` file keeps its last sample of the job's CPU, taken every 0.5 s for
the first 15 s and every 30 s after: it reads a 44 s training job at 15 s. So the log's line is
the figure; the benchmark file's ``cpu_time`` serves only a job whose log has no such line.
"""

from __future__ import annotations

import csv
from pathlib import Path

from focalcal import paths
from focalcal.pipeline.joblog import job_cpu_seconds


def job_cpu(workdir: Path, benchmark: Path) -> tuple[float, bool]:
    """(CPU s, whether it is the log's whole-process figure) of the job whose benchmark file is
    ``benchmark`` (``results/benchmarks/<rule>/<target>.tsv``; its log: ``results/logs/<rule>/<target>.log``)."""
    relative = benchmark.relative_to(workdir / paths.BENCHMARKS).with_suffix(".log")
    logged = job_cpu_seconds(workdir / paths.LOGS / relative)
    if logged is not None:
        return logged, True
    with benchmark.open() as handle:
        return float(list(csv.DictReader(handle, delimiter="\t"))[-1]["cpu_time"]), False
