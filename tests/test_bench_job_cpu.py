"""bench.job_cpu: a job's CPU from the last line of its log, its benchmark file's only without one."""

from __future__ import annotations

import sys
from pathlib import Path

from focalcal import paths
from focalcal.pipeline.joblog import USAGE_LINE

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout's bench/ package
from bench.job_cpu import job_cpu

TSV = "s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time\n{wall}\t0:00:44\t1\t1\t1\t1\t0\t0\t30\t{cpu}\n"


def _job(workdir, target, sampled_cpu, log_text=None):
    benchmark = workdir / paths.benchmark("train", target)
    benchmark.parent.mkdir(parents=True, exist_ok=True)
    benchmark.write_text(TSV.format(wall=44.0, cpu=sampled_cpu))
    if log_text is not None:
        log = workdir / paths.log("train", target)
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text(log_text)
    return benchmark


def test_a_job_counts_its_logs_whole_process_cpu_not_snakemakes_last_sample(tmp_path):
    run = "translation/transformer_small/ce/translation_standin/seed0"
    benchmark = _job(tmp_path, run, 15.63, "epoch 5/5\n" + USAGE_LINE.format(cpu=23.371) + "\n")
    assert job_cpu(tmp_path, benchmark) == (23.371, True)


def test_a_job_whose_log_has_no_usage_line_counts_its_benchmark_file(tmp_path):
    killed = _job(tmp_path, "digits/cnn_small/ce/tiny/seed0", 12.5, "epoch 1/40\n")
    assert job_cpu(tmp_path, killed) == (12.5, False)
    no_log = _job(tmp_path, "digits/cnn_small/ce/tiny/seed1", 7.25)
    assert job_cpu(tmp_path, no_log) == (7.25, False)
