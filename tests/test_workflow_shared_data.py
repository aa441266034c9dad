"""A pre-filled or shared data root is a supported set-up: a workflow on it plans, and runs, the
whole DAG (snakemake/snakemake#4166 once planned prepare_data alone and reported success), and a
run that leaves a target missing or damaged never exits 0."""

from __future__ import annotations

import os
import shutil
import time

import pytest
import yaml
from conftest import DEFAULT_CONFIG, RUN, TEST_CONFIG, copy_checkout, one_run_config, planned_jobs, snakemake

from focalcal.files import sidecar

# config/test.yaml's plan with every dataset but the ones named prepared already
REPORT = {"theory_figure": 15, "study_figure": 7, "paper_table": 14, "claims_forest": 5, "report_manifest": 1,
          "run_inventory": 1, "report_notebook": 5, "report_index": 1}
WHOLE = {"train": 9, "export_logits": 5, "calibrate": 5, "evaluate_segmentation": 4, "study_table": 3, "claims": 1,
         "all": 1, **REPORT}


def with_datasets(path, **datasets):
    """config/test.yaml with ``datasets`` changed, written to ``path``."""
    config = yaml.safe_load(TEST_CONFIG.read_text())
    config["datasets"].update(datasets)
    path.write_text(yaml.safe_dump(config))
    return path


def prepare(workdir, config, *datasets, data_root="data"):
    markers = [f"{data_root}/ready/{name}.json" for name in datasets]
    snakemake(workdir, "--cores", "1", *markers, "--configfile", str(config), "--config", f"data_root={data_root}")


@pytest.fixture(scope="module")
def test_data(tmp_path_factory):
    """A working directory whose data/ holds synthetic1d and digits prepared under config/test.yaml,
    made once for the tests that read it (they copy it, or plan on it, and never write to it)."""
    workdir = tmp_path_factory.mktemp("test_data")
    prepare(workdir, TEST_CONFIG, "synthetic1d", "digits")
    return workdir


def test_a_data_root_prepared_under_another_spec_plans_the_whole_workflow(tmp_path):
    # what two configs sharing one data root do: synthetic1d prepared under another spec, recorded by Snakemake
    workdir = tmp_path / "workdir"
    prepare(workdir, with_datasets(tmp_path / "other.yaml", synthetic1d={"name": "synthetic1d", "n_samples": 1200}),
            "synthetic1d")
    plan = planned_jobs(snakemake(workdir, "-n", "--configfile", str(TEST_CONFIG)))
    assert plan == {"prepare_data": 2, **WHOLE, "total": 2 + sum(WHOLE.values())}  # digits and tiny_seg


def test_a_copied_data_folder_and_a_data_root_elsewhere_plan_the_whole_workflow(test_data, tmp_path):
    shared = test_data
    copied = tmp_path / "copied"
    shutil.copytree(shared / "data", copied / "data")
    plan = planned_jobs(snakemake(copied, "-n", "--configfile", str(TEST_CONFIG)))
    assert plan == {"prepare_data": 1, **WHOLE, "total": 1 + sum(WHOLE.values())}  # tiny_seg only
    elsewhere = tmp_path / "elsewhere"
    plan = planned_jobs(snakemake(elsewhere, "-n", "--configfile", str(TEST_CONFIG),
                                  "--config", f"data_root={shared / 'data'}"))
    assert plan == {"prepare_data": 1, **WHOLE, "total": 1 + sum(WHOLE.values())}
    assert not (elsewhere / "data").exists()


def test_a_run_on_a_data_root_prepared_under_another_spec_ends_with_every_target(tmp_path):
    shared = tmp_path / "shared" / "data"
    workdir = tmp_path / "workdir"
    config = one_run_config(tmp_path / "one_run.yaml", "shared_data", epochs=2, gradient_norm_epochs=[1, 2])
    prepare(workdir, with_datasets(tmp_path / "other.yaml", digits={"name": "digits", "val_size": 0.25}),
            "digits", data_root=shared)
    ran = snakemake(workdir, "--cores", "2", "--configfile", str(config), "--config", f"data_root={shared}")
    assert planned_jobs(ran)["train"] == 1
    assert "targets are missing or damaged" not in ran.stderr
    assert planned_jobs(snakemake(workdir, "-n", "--configfile", str(config), "--config", f"data_root={shared}")) == {}
    table = workdir / "results/tables/shared_data.csv"
    assert sidecar.read(table) == sidecar.digest_file(table)


def fresh_clone(target):
    """The checkout's workflow files at ``target`` with the modification time a clone gives them:
    now, later than any data prepared before it."""
    copy_checkout(target)
    for path in target.rglob("*"):
        os.utime(path)
    return target


def test_a_data_folder_copied_into_a_fresh_clone_plans_everything_under_either_config(test_data, tmp_path):
    # data/ of the default config (synthetic1d and digits under config/config.yaml's specs) ...
    default_data = tmp_path / "default"
    default_specs = yaml.safe_load(DEFAULT_CONFIG.read_text())["datasets"]
    prepare(default_data, with_datasets(tmp_path / "default_specs.yaml", synthetic1d=default_specs["synthetic1d"],
                                        digits=default_specs["digits"]), "synthetic1d", "digits")
    # ... and of config/test.yaml (synthetic1d: 1,500 samples, not the default's): test_data
    time.sleep(1)  # the clone is made later than the data, as in life
    clone = fresh_clone(tmp_path / "clone")
    snakefile = clone / "workflow" / "Snakefile"
    empty = planned_jobs(snakemake(tmp_path / "empty", "-n", "--configfile", str(DEFAULT_CONFIG)))

    shutil.copytree(default_data / "data", clone / "data")  # copy2: the markers keep their old times
    plan = planned_jobs(snakemake(clone, "-n", "--configfile", str(TEST_CONFIG), snakefile=snakefile))
    assert plan == {"prepare_data": 1, **WHOLE, "total": 1 + sum(WHOLE.values())}  # tiny_seg only
    forced = planned_jobs(snakemake(clone, "-n", "-f", f"{RUN}/logits.npz", "--configfile", str(TEST_CONFIG),
                                    snakefile=snakefile))
    assert forced == {"train": 1, "export_logits": 1, "total": 2}  # the documented -f command makes the logits

    shutil.rmtree(clone / "data")
    shutil.copytree(test_data / "data", clone / "data")
    plan = planned_jobs(snakemake(clone, "-n", "--configfile", str(DEFAULT_CONFIG), snakefile=snakefile))
    assert plan == {**empty, "prepare_data": empty["prepare_data"] - 2, "total": empty["total"] - 2}
    assert not (clone / ".snakemake" / "metadata").exists() or not any((clone / ".snakemake" / "metadata").iterdir())
