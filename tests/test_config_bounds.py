"""Bounded configs: a YAML alias bomb or an oversized file is refused before validation in one
line naming the file, schema errors quote the start of a value only, and values nobody means
(epochs, seeds, batch sizes, grid sizes) are refused naming their key and why."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time

import pytest
import yaml
from conftest import BIN, ROOT, TEST_CONFIG

from focalcal.pipeline import ConfigError, load_config_file, validate_config

SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"
# Runs a command and prints its wall time and peak memory (its own and its children's, in kB).
MEASURED = ("import resource, subprocess, sys, time; started = time.monotonic(); "
            "done = subprocess.run(sys.argv[1:], capture_output=True, text=True); "
            "print(done.returncode, time.monotonic() - started, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss); "
            "print(done.stdout + done.stderr)")


def alias_bomb(levels: int = 10, width: int = 9) -> str:
    """ece_bins as a "billion laughs": ``width ** levels`` values (9**10: 3.5 billion) in a few hundred bytes."""
    lines = ["ece_bins:", "  - &x0 [" + ", ".join(["10"] * width) + "]"]
    lines += [f"  - &x{level} [" + ", ".join([f"*x{level - 1}"] * width) + "]" for level in range(1, levels)]
    return "\n".join(lines) + "\n"


def measured_dry_run(workdir, config) -> tuple[int, float, int, str]:
    """(exit status, wall seconds, peak kB, output) of a Snakemake dry run on ``config``."""
    measured = subprocess.run([sys.executable, "-c", MEASURED, str(BIN / "snakemake"), "-s",
                               str(ROOT / "workflow" / "Snakefile"), "--directory", str(workdir), "-n",
                               "--configfile", str(config)], capture_output=True, text=True, timeout=300, check=True)
    head, output = measured.stdout.split("\n", 1)
    returncode, seconds, peak_kb = head.split()
    return int(returncode), float(seconds), int(peak_kb), output


def test_an_alias_bomb_is_refused_by_snakemake_in_one_line_fast_and_small(tmp_path):
    bomb, unknown_key = tmp_path / "bomb.yaml", tmp_path / "unknown_key.yaml"
    bomb.write_text(TEST_CONFIG.read_text().replace("ece_bins: [10, 15]\n", alias_bomb()))
    unknown_key.write_text(TEST_CONFIG.read_text() + "unknown_key: 1\n")
    assert bomb.stat().st_size < 5000
    # Snakemake's own start-up (and its load of the file) is the baseline: a config refused by the schema
    _, baseline, _, _ = measured_dry_run(tmp_path, unknown_key)
    returncode, seconds, peak_kb, output = measured_dry_run(tmp_path, bomb)
    assert returncode == 1
    refused = [line for line in output.splitlines() if "values through its YAML aliases" in line]
    assert len(refused) == 1 and refused[0].count(str(bomb)) == 1, output[-2000:]
    assert seconds < baseline + 5, (seconds, baseline)
    assert peak_kb < 500_000, peak_kb


REPORT_LINE = "report: {theory_grid: coarse}   # quick theory figures: CI checks the plumbing, not the grids\n"


def report_bomb(merged: bool) -> str:
    """``report:`` holding nine levels of 10-key mappings, each level ten aliases of the one before
    (10**9 values), as anchors (``k: *x``) or merges (``k: {<<: *x}``)."""
    keys = [f"k{index}" for index in range(10)]
    lines = ["report:", "  theory_grid: coarse", "  x0: &x0 {" + ", ".join(f"{key}: 1" for key in keys) + "}"]
    for level in range(1, 9):
        alias = f"{{<<: *x{level - 1}}}" if merged else f"*x{level - 1}"
        lines.append(f"  x{level}: &x{level} {{" + ", ".join(f"{key}: {alias}" for key in keys) + "}")
    return "\n".join(lines) + "\n"


def timed_refusal(command: list[str], cwd) -> tuple[int, float, str]:
    """(exit status, wall seconds, output) of ``command``, killed after 60 s (a hang is a failure)."""
    started = time.monotonic()
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=60, check=False,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
    return done.returncode, time.monotonic() - started, done.stdout + done.stderr


@pytest.mark.parametrize("shape", ["mapping", "merge", "list"])
def test_every_documented_entry_point_refuses_an_alias_bomb_of_any_shape_in_seconds(tmp_path, shape):
    bomb = tmp_path / f"{shape}_bomb.yaml"
    text = TEST_CONFIG.read_text()
    bomb.write_text(text.replace("ece_bins: [10, 15]\n", alias_bomb()) if shape == "list"
                    else text.replace(REPORT_LINE, report_bomb(merged=shape == "merge")))
    assert bomb.stat().st_size < 5000 and bomb.read_text() != text
    snakemake = str(BIN / "snakemake")
    # the docs' lines (README, docs/*.md) and the SLURM profile's, each as a dry run
    for extra in ([], ["--cores", "2"], ["--profile", "profiles/slurm"]):
        returncode, seconds, output = timed_refusal([snakemake, "-n", *extra, "--configfile", str(bomb)], ROOT)
        refused = [line for line in output.splitlines() if "values through its YAML aliases" in line]
        assert returncode == 1 and len(refused) == 1 and refused[0].count(str(bomb)) == 1, (extra, output[-2000:])
        assert seconds < 30, (extra, seconds)


def test_the_snakemake_check_leaves_other_workflows_in_the_same_environment_alone(tmp_path):
    # a key given twice: focalcal's loader refuses it, Snakemake's accepts it (the later value wins)
    config = tmp_path / "config.yaml"
    config.write_text("greeting: hello\ngreeting: again\n")
    (tmp_path / "Snakefile").write_text('rule all:\n    run:\n        print("said", config["greeting"])\n')
    snakemake = str(BIN / "snakemake")
    returncode, _, output = timed_refusal([snakemake, "--cores", "1", "--configfile", str(config)], tmp_path)
    assert returncode == 0 and "said again" in output, output[-2000:]
    # the same file given to focalcal's workflow is refused, naming the key
    returncode, _, output = timed_refusal([snakemake, "-n", "-s", str(ROOT / "workflow" / "Snakefile"),
                                           "--configfile", str(config)], tmp_path)
    assert returncode == 1 and "greeting" in output and str(config) in output, output[-2000:]


def test_make_run_refuses_a_bombed_default_config_in_seconds(workflow_checkout):
    # `make run` runs the checkout's default config (no --configfile): the Snakefile checks it before reading it
    (workflow_checkout / "config" / "config.yaml").write_text(report_bomb(merged=False))
    returncode, seconds, output = timed_refusal(
        [str(BIN / "snakemake"), "-n", "--cores", "2", "--profile", "profiles/default"], workflow_checkout)
    refused = [line for line in output.splitlines() if "values through its YAML aliases" in line]
    assert returncode == 1 and len(refused) == 1 and "config/config.yaml" in refused[0], output[-2000:]
    assert seconds < 30, seconds


def test_the_alias_check_itself_takes_milliseconds(tmp_path):
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(alias_bomb())
    program = ("import time, tracemalloc\n"
               "from focalcal.pipeline import load_config_file\n"
               f"tracemalloc.start()\nstarted = time.monotonic()\ntry:\n    load_config_file({str(bomb)!r})\n"
               "except ValueError as error:\n    print(error)\n"
               "print(time.monotonic() - started, tracemalloc.get_traced_memory()[1] / 1000)")
    measured = subprocess.run([sys.executable, "-c", program],
                              capture_output=True, text=True, timeout=60, check=True)
    message, numbers = measured.stdout.strip().rsplit("\n", 1)
    # ece_bins: 1 + the ten lists, the k-th holding 1 + 9 x the (k-1)-th (10 at k = 0); plus the mapping and its key
    assert message == (f"{bomb}: expands to 4,412,961,508 values through its YAML aliases (*name); a workflow config "
                       "has at most 200,000: refused before validation")
    seconds, peak_kb = map(float, numbers.split())  # peak: what the check allocated
    assert seconds < 1 and peak_kb < 5_000, (seconds, peak_kb)


def test_an_oversized_file_is_refused_before_it_is_parsed(tmp_path):
    big = tmp_path / "big.yaml"
    big.write_text(TEST_CONFIG.read_text() + "junk: [" + "0, " * 2_500_000 + "0]\n")
    with pytest.raises(ConfigError, match=r"big.yaml: 7,50\d,\d+ bytes; a workflow config is at most 1,048,576"):
        load_config_file(big)


def test_the_shipped_configs_are_within_the_limits():
    for path in [ROOT / "config" / "config.yaml", *sorted((ROOT / "config").rglob("*.yaml"))]:
        load_config_file(path)


@pytest.fixture
def config():
    return yaml.safe_load(TEST_CONFIG.read_text())


def refusal(config) -> str:
    with pytest.raises(ConfigError) as refused:
        validate_config(config, SCHEMA)
    return str(refused.value)


def test_a_schema_error_quotes_only_the_start_of_a_value(config):
    config["ece_bins"] = "x" * 100_000
    config["studies"]["test_digits"]["ece_bins"] = [list(range(1000))] * 1000
    message = refusal(config)
    assert len(message) < 1000, len(message)
    line = next(line for line in message.splitlines() if line.startswith("  ece_bins: "))
    assert re.fullmatch(r"  ece_bins: 'x+\.\.\.x+' is not of type 'array'", line) and len(line) < 100, line
    assert "studies.test_digits.ece_bins[0]: [0, 1, 2, 3, 4, 5, 6, 7, ...] is not of type 'integer'" in message


@pytest.mark.parametrize(("where", "value", "key", "reason"), [
    (("recipes", "tiny", "epochs"), 1_000_000_000, "recipes.tiny.epochs", "the papers train for at most"),
    (("recipes", "tiny", "batch_size"), 10**9, "recipes.tiny.batch_size", "no data set of the catalog"),
    (("recipes", "tiny", "eval_batch_size"), 10**9, "recipes.tiny.eval_batch_size", "no data set of the catalog"),
])
def test_values_nobody_means_are_refused_by_key(config, where, value, key, reason):
    *parents, name = where
    entry = config
    for part in parents:
        entry = entry[part]
    entry[name] = value
    message = refusal(config)
    assert f"{key}: {value} is over the limit (the value at most " in message and reason in message


def test_a_seed_beyond_what_run_paths_allow_is_refused_by_key(config):
    config["studies"]["test_posterior"]["grids"][0]["seeds"] = [99999999999999999999]
    message = refusal(config)
    assert ("studies.test_posterior.grids[0].seeds[0]: 99999999999999999999 is over the limit (the value at most "
            "4294967295): numpy seeds take 32 bits") in message
    assert "PeriodicWildcardError" in message


def test_a_grid_of_more_runs_than_every_paper_is_refused_by_key(config):
    config["losses"].update({f"focal_{g}": {"name": "focal", "gamma": g} for g in range(10)})
    grid = config["studies"]["test_posterior"]["grids"][0]
    grid["losses"] = [f"focal_{g}" for g in range(10)] + ["ce"]
    grid["seeds"] = list(range(1000))
    message = refusal(config)
    assert "studies.test_posterior.grids[0]: 11,000 runs (datasets x models x losses x seeds or folds); a grid " \
           "has at most 10,000" in message


def test_the_bounds_leave_the_shipped_configs_alone():
    for path in sorted((ROOT / "config" / "studies").glob("*.yaml")):
        validate_config(json.loads(json.dumps(load_config_file(path))), SCHEMA)
