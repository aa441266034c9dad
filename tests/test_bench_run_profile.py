"""bench.run_profile: a finished run's wall time, CPU per rule and idle cores, read from its logs."""

from __future__ import annotations

import sys
from pathlib import Path

from focalcal.pipeline.joblog import USAGE_LINE

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout's bench/ package
from bench.run_profile import profile, report


def _started(stamp: str, rule: str, jobid: int, log: str) -> str:
    return (f"[{stamp}]\nrule {rule}:\n    output: x\n    log: {log}\n    jobid: {jobid}\n"
            f"    resources: tmpdir=/tmp\nShell command: None\n")


def _finished(stamp: str, rule: str, jobid: int) -> str:
    return f"[{stamp}]\nFinished jobid: {jobid} (Rule: {rule})\n"


def test_a_runs_profile_sums_each_rules_whole_process_cpu_and_finds_the_idle_core(tmp_path):
    # two cores: train A 12:00:00-12:00:40 and train B 12:00:00-12:00:20 side by side, then decode
    # 12:00:40-12:00:50 alone (one core idle 20 s while A ran alone, 10 s while the decode did)
    text = ("SNAKEMAKE\n  Date: 2026-11-28 12:00:00\n"
            + _started("Sat Nov 28 12:00:00 2026", "train", 1, "results/logs/train/a.log")
            + _started("Sat Nov 28 12:00:00 2026", "train", 2, "results/logs/train/b.log")
            + _finished("Sat Nov 28 12:00:20 2026", "train", 2)
            + _finished("Sat Nov 28 12:00:40 2026", "train", 1)
            + _started("Sat Nov 28 12:00:40 2026", "decode", 3, "results/logs/decode/a.log")
            + _finished("Sat Nov 28 12:00:50 2026", "decode", 3)
            + "[Sat Nov 28 12:00:50 2026]\nlocalrule all:\n    jobid: 0\n"
            + _finished("Sat Nov 28 12:00:50 2026", "all", 0))
    log = tmp_path / ".snakemake/log/2026-11-28T120000.snakemake.log"
    log.parent.mkdir(parents=True)
    log.write_text(text)
    for name, cpu in (("train/a", 38.5), ("train/b", 19.25), ("decode/a", 9.0)):
        job_log = tmp_path / f"results/logs/{name}.log"
        job_log.parent.mkdir(parents=True, exist_ok=True)
        job_log.write_text("epoch 1/1\n" + USAGE_LINE.format(cpu=cpu) + "\n")

    result = profile(tmp_path, cores=2)
    assert result["wall"] == 50.0
    assert {rule: sorted(job.cpu for job in jobs) for rule, jobs in result["rules"].items()} == {
        "train": [19.25, 38.5], "decode": [9.0]}
    assert result["busy"] == 2 * 20 + 20 + 10  # core-seconds with a job on them
    assert [(round(a - result["started"]), round(b - result["started"]), [j.rule for j in running])
            for a, b, running in result["starved"]] == [(20, 40, ["train"]), (40, 50, ["decode"])]
    printed = report(result)
    assert "3 jobs in 50 s" in printed and "| train | 2 | 57.8 | 28.88 | 38.5 | 60 | 0 |" in printed
    assert "idle 30 core-s" in printed
