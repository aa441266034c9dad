"""focalcal.paths: where the workflow's files live, and the job log every rule script opens."""

from __future__ import annotations

import subprocess
import sys

import pytest

from focalcal import paths
from focalcal.pipeline.joblog import job_cpu_seconds, logged
from focalcal.pipeline.plan import Run

RUN = Run("digits", "cnn_small", "focal1", "tiny", 3)


def test_a_run_path_and_the_rules_wildcard_pattern_are_one_fact():
    assert RUN.path == "digits/cnn_small/focal1/tiny/seed3"
    assert paths.RUN_PATTERN.format(**RUN.columns()) == RUN.path
    assert paths.run_file(RUN.path, paths.LOGITS) == "results/runs/digits/cnn_small/focal1/tiny/seed3/logits.npz"
    assert paths.run_file(paths.RUN_PATTERN, paths.HISTORY) == (
        "results/runs/{dataset}/{model}/{loss}/{recipe}/seed{seed}/history.csv")
    assert RUN.run_dir == paths.run_dir(RUN.path)
    assert RUN.calibration_dir == "results/calibration/digits/cnn_small/focal1/tiny/seed3"
    assert RUN.evaluation_dir == "results/segmentation/digits/cnn_small/focal1/tiny/seed3"


def test_logs_benchmarks_tables_figures_and_report_pages():
    assert paths.log("train", RUN.path) == f"results/logs/train/{RUN.path}.log"
    assert paths.benchmark("figures/theory", "{name}") == "results/benchmarks/figures/theory/{name}.tsv"
    assert paths.study_table("mukhoti2020") == "results/tables/mukhoti2020.csv"
    assert paths.paper_table() == "results/tables/{study}/{name}.csv"
    assert paths.figure(paths.THEORY, "phi") == "results/figures/theory/phi.png"
    assert paths.figure(paths.CLAIMS, "index") == "results/figures/claims/index.png"
    assert (paths.CLAIMS_TABLE, paths.CLAIMS_PAIRS) == ("results/tables/claims.csv", "results/tables/claims_pairs.csv")
    assert paths.report_page("overview") == "results/report/overview.html"
    assert paths.executed_notebook("overview") == "results/report/notebooks/overview.ipynb"


def test_the_data_root_is_read_back_from_a_ready_marker():
    marker = paths.ready_marker("/scratch/data", "digits")
    assert marker == "/scratch/data/ready/digits.json"
    assert paths.data_root_from_marker(marker) == "/scratch/data"
    assert paths.data_root_from_marker(paths.ready_marker("data")) == "data"


def test_own_snakefile_is_the_one_snakemake_picks_in_the_workdir(tmp_path):
    (tmp_path / "workflow").mkdir()
    template = tmp_path / "workflow" / "Snakefile"
    template.write_text("")
    assert paths.is_own_snakefile(template, tmp_path)
    assert paths.is_own_snakefile(template, tmp_path / "workflow")  # there it is the first choice, "Snakefile"
    assert not paths.is_own_snakefile("/elsewhere/workflow/Snakefile", tmp_path)
    (tmp_path / "Snakefile").write_text("")  # a root Snakefile comes first in Snakemake's order
    assert not paths.is_own_snakefile(template, tmp_path)
    assert paths.is_own_snakefile(tmp_path / "Snakefile", tmp_path)
    assert paths.is_own_snakefile(tmp_path / "nowhere" / "Snakefile", tmp_path / "nowhere")  # none exists: the first


def test_the_re_make_command_names_the_snakefile_only_when_snakemake_would_not_find_it(tmp_path, monkeypatch):
    from focalcal.files.remake import remake_command, set_workflow

    monkeypatch.chdir(tmp_path)
    (tmp_path / "workflow").mkdir()
    (tmp_path / "workflow" / "Snakefile").write_text("")
    monkeypatch.setenv("FOCALCAL_WORKFLOW", "{}")
    set_workflow(tmp_path / "workflow" / "Snakefile", [])
    run = paths.run_dir(RUN.path)
    assert remake_command(f"{run}/logits.npz")[0] == f"snakemake --cores 1 -f {run}/logits.npz"
    set_workflow("/repo/workflow/Snakefile", [])
    assert remake_command(f"{run}/logits.npz")[0] == f"snakemake --cores 1 -s /repo/workflow/Snakefile -f {run}/logits.npz"


def test_a_job_log_holds_its_output_and_its_traceback(tmp_path):
    log = tmp_path / "job.log"
    with pytest.raises(ValueError, match="bad input"), logged(str(log)):
        print("reading the run")
        raise ValueError("bad input")
    text = log.read_text()
    assert text.startswith("reading the run\n") and "Traceback" in text and "ValueError: bad input" in text
    assert text.splitlines()[-1].startswith("job CPU: ")  # after the traceback
    assert job_cpu_seconds(log) > 0


def test_a_job_log_ends_with_its_whole_process_cpu(tmp_path):
    """The line counts the process from its start (interpreter and imports), as a job costs,
    where Snakemake's benchmark file would keep a sample taken up to 30 s before the end."""
    log = tmp_path / "job.log"
    script = (f"import time\nfrom focalcal.pipeline.joblog import job_cpu_seconds, logged\nwith logged({str(log)!r}):\n"
              "    start = time.process_time()\n    while time.process_time() - start < 0.3: pass\n"
              "    print('cpu so far', time.process_time())\n")
    subprocess.run([sys.executable, "-c", script], check=True)
    so_far = float(log.read_text().splitlines()[0].split()[-1])
    assert so_far > 0.3  # the import of focalcal and the loop
    # getrusage truncates user and system time to whole microseconds each, process_time counts
    # nanoseconds: the line, read later, may sit below the printed figure by those truncations
    assert so_far - 2e-6 <= job_cpu_seconds(log) < so_far + 0.2


def test_a_job_process_ends_without_teardown_once_its_threads_and_outputs_are_done(tmp_path):
    """A succeeding job script leaves by os._exit after the log's CPU line: atexit handlers (Python's
    teardown) do not run, a non-daemon thread's write finishes first, and the exit status is 0."""
    log, written = tmp_path / "job.log", tmp_path / "written.txt"
    script = ("import atexit, sys, threading, time\nfrom focalcal.pipeline.joblog import job_process\n"
              "atexit.register(lambda: print('teardown ran', file=sys.stderr))\n"
              f"def write():\n    time.sleep(0.3)\n    open({str(written)!r}, 'w').write('whole')\n"
              f"with job_process({str(log)!r}):\n    threading.Thread(target=write).start()\n    print('trained')\n"
              "print('after the block', file=sys.stderr)\n")
    ended = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=False)
    assert ended.returncode == 0 and ended.stderr == "" and ended.stdout == ""
    assert written.read_text() == "whole"
    assert log.read_text().splitlines()[0] == "trained" and job_cpu_seconds(log) > 0

    # a failing job ends as Python ends it: its traceback in the log, status 1, teardown run
    failing = script.replace("print('trained')", "raise ValueError('bad input')")
    ended = subprocess.run([sys.executable, "-c", failing], capture_output=True, text=True, check=False)
    assert ended.returncode == 1 and "ValueError: bad input" in log.read_text()
    assert "teardown ran" in ended.stderr and "after the block" not in ended.stderr


def test_a_log_without_the_line_reads_none(tmp_path):
    killed = tmp_path / "killed.log"
    killed.write_text("epoch 3/6\n")
    assert job_cpu_seconds(killed) is None
    assert job_cpu_seconds(tmp_path / "never_ran.log") is None


def test_a_kept_attempt_survives_the_next_attempt_deleting_the_declared_log(tmp_path, capsys, monkeypatch):
    log = tmp_path / "train" / "run.log"
    log.parent.mkdir()
    for pid, attempt in [(101, "first"), (102, "second")]:  # each attempt is its own process
        monkeypatch.setattr("os.getpid", lambda pid=pid: pid)
        if log.exists():
            log.unlink()  # what Snakemake does before it runs the job again
        with logged(str(log), keep_attempt=True):
            print(f"{attempt} attempt")
    def output(path):
        return [line for line in path.read_text().splitlines() if not line.startswith("job CPU: ")]

    assert output(log) == ["second attempt"]
    kept = sorted((tmp_path / "train" / "run.attempts").iterdir())
    assert sorted(output(path) for path in kept) == [["first attempt"], ["second attempt"]]
    assert capsys.readouterr().out == ""  # the job's output goes to its logs only
