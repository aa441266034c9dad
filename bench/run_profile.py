"""Where a finished workflow run's minutes went: wall time, whole-process CPU per rule, idle cores.

``python -m bench.run_profile [WORKDIR] [--cores N]`` reads what a finished ``snakemake`` run in
WORKDIR (default: this checkout) left behind, and runs nothing:

* Snakemake's own log (the newest ``.snakemake/log/*.snakemake.log``): each job's rule, log file,
  start and end (Snakemake stamps both to the second), and the run's start and end;
* each job's log, whose last line is its whole process's CPU (:mod:`bench.job_cpu`).

It prints the run's wall time, CPU per rule (jobs, sum, mean, the largest job), and how busy the
cores were: core-seconds with a job on them against ``cores × wall``, and the stretches where
fewer jobs ran than there were cores (the DAG waiting on a long job), with the jobs that ran then.
"""

from __future__ import annotations

import argparse
import datetime
import itertools
import re
from dataclasses import dataclass
from pathlib import Path

from focalcal.pipeline.joblog import job_cpu_seconds

STAMP = re.compile(r"^\[(\w{3} \w{3} +\d+ \d\d:\d\d:\d\d \d{4})\]$")
RULE = re.compile(r"^(?:local)?rule (\w+):$")
JOBID = re.compile(r"^\s+jobid: (\d+)$")
LOG = re.compile(r"^\s+log: (\S+)")
FINISHED = re.compile(r"^Finished jobid: (\d+) \(Rule: (\w+)\)$")
STARTED = re.compile(r"^\s+Date: (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)$")


@dataclass
class Job:
    rule: str
    start: float
    end: float | None = None
    log: str | None = None
    cpu: float | None = None

    @property
    def wall(self) -> float:
        return (self.end or self.start) - self.start


def _seconds(stamp: str) -> float:
    return datetime.datetime.strptime(" ".join(stamp.split()), "%a %b %d %H:%M:%S %Y").timestamp()


def newest_log(workdir: Path) -> Path:
    logs = sorted((workdir / ".snakemake" / "log").glob("*.snakemake.log"))
    if not logs:
        raise FileNotFoundError(f"{workdir}/.snakemake/log holds no Snakemake log; run the workflow there first")
    return logs[-1]


def read_jobs(log: Path) -> tuple[dict[int, Job], float, float]:
    """(jobs by id, the run's start, its last stamp) from one Snakemake log."""
    jobs: dict[int, Job] = {}
    now = started = None
    pending: Job | None = None
    for line in log.read_text().splitlines():
        if match := STARTED.match(line):
            started = datetime.datetime.strptime(match.group(1), "%Y-%m-%d %H:%M:%S").timestamp()
        elif match := STAMP.match(line):
            now = _seconds(match.group(1))
        elif match := RULE.match(line):
            pending = Job(match.group(1), now)
        elif pending is not None and (match := LOG.match(line)):
            pending.log = match.group(1).split(",")[0]
        elif pending is not None and (match := JOBID.match(line)):
            jobs[int(match.group(1))] = pending
        elif match := FINISHED.match(line):
            job = jobs.get(int(match.group(1)))
            if job is not None:
                job.end = now
    if started is None or now is None:
        raise ValueError(f"{log} is not a Snakemake run's log (no start date or no stamped line)")
    return jobs, started, now


def busy_profile(jobs: list[Job], start: float, end: float, cores: int) -> tuple[float, list[tuple[float, float, list[Job]]]]:
    """(core-seconds with a job on them, the stretches with fewer jobs than cores: (from, to, jobs running))."""
    edges = sorted({start, end, *(j.start for j in jobs), *(j.end for j in jobs if j.end)})
    busy, starved = 0.0, []
    for left, right in itertools.pairwise(edges):
        running = [j for j in jobs if j.start <= left and (j.end or end) >= right]
        busy += min(len(running), cores) * (right - left)
        if len(running) < cores:
            if starved and starved[-1][1] == left and {id(j) for j in starved[-1][2]} == {id(j) for j in running}:
                starved[-1] = (starved[-1][0], right, running)
            else:
                starved.append((left, right, running))
    return busy, starved


def profile(workdir: Path, cores: int = 2, log: Path | None = None) -> dict:
    log = log or newest_log(workdir)
    jobs, started, ended = read_jobs(log)
    for job in jobs.values():
        if job.log:
            job.cpu = job_cpu_seconds(workdir / job.log)
    real = [j for j in jobs.values() if j.rule != "all"]
    busy, starved = busy_profile(real, started, ended, cores)
    rules: dict[str, list[Job]] = {}
    for job in real:
        rules.setdefault(job.rule, []).append(job)
    return {"log": log, "wall": ended - started, "started": started, "jobs": real, "rules": rules,
            "busy": busy, "starved": starved, "cores": cores}


def report(result: dict, tail: int = 12) -> str:
    wall, cores = result["wall"], result["cores"]
    lines = [f"{result['log']}: {len(result['jobs'])} jobs in {wall:.0f} s ({wall / 60:.1f} min) of wall time"]
    total = sum(j.cpu or 0.0 for j in result["jobs"])
    lines.append(f"jobs' whole-process CPU: {total:.0f} s; cores busy {result['busy']:.0f} of {cores} x {wall:.0f} = "
                 f"{cores * wall:.0f} core-s ({result['busy'] / (cores * wall):.0%}); idle {cores * wall - result['busy']:.0f} core-s")
    lines.append("")
    lines.append("| rule | jobs | CPU s | CPU s / job | largest job s | wall s (sum) | jobs without a CPU line |")
    lines.append("|---|---|---|---|---|---|---|")
    for rule, jobs in sorted(result["rules"].items(), key=lambda item: -sum(j.cpu or 0 for j in item[1])):
        cpus = [j.cpu for j in jobs if j.cpu is not None]
        lines.append(f"| {rule} | {len(jobs)} | {sum(cpus):.1f} | {sum(cpus) / max(len(cpus), 1):.2f} | "
                     f"{max(cpus, default=0):.1f} | {sum(j.wall for j in jobs):.0f} | {len(jobs) - len(cpus)} |")
    lines.append(f"| **all** | {len(result['jobs'])} | {total:.1f} | | | | |")
    stretches = sorted(result["starved"], key=lambda s: s[0] - s[1])[:tail]
    if stretches:
        lines.append("")
        lines.append(f"Longest stretches with fewer than {cores} jobs running (s after the start):")
        for left, right, running in sorted(stretches):
            names = ", ".join(f"{j.rule} {Path(j.log).stem if j.log else ''}".strip() for j in running) or "nothing"
            lines.append(f"  {left - result['started']:6.0f}-{right - result['started']:6.0f} ({right - left:4.0f} s): {names}")
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.run_profile", description=__doc__.split("\n\n")[0])
    parser.add_argument("workdir", nargs="?", default=str(Path(__file__).resolve().parents[1]))
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--log", help="the Snakemake log to read (default: the newest in WORKDIR/.snakemake/log)")
    args = parser.parse_args(argv)
    print(report(profile(Path(args.workdir), args.cores, Path(args.log) if args.log else None)))


if __name__ == "__main__":
    main()
