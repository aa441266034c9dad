"""The counts and lists the guide states agree with what the workflow plans.

A page that says how many models the default run trains, how many jobs it has, how many
training jobs a study file implies, or which stages the rule files hold goes stale the moment
a config or a rule changes. Each figure here is read from the page's text and compared with
the library's plan (:func:`test_workflow.jobs_from_plan` counts a dry run's jobs from it
without running Snakemake; ``test_default_config_plans_every_stage`` holds that count to a
real dry run).
"""

from __future__ import annotations

import re

import pytest
from conftest import ROOT
from test_workflow import SCHEMA, STUDIES, jobs_from_plan

from focalcal import catalog
from focalcal.pipeline import build_plan, load_config_files, validate_config

DOCS = ROOT / "docs"


def number(text: str) -> int:
    return int(text.replace(",", ""))


def trained_runs(*configfiles):
    plan = build_plan(validate_config(load_config_files(configfiles), SCHEMA))
    return plan, [run for run in plan.runs.values() if not run.imported]


def model_task(plan, run) -> str:
    return catalog.MODELS[plan.config["models"][run.model]["name"]].task


@pytest.fixture(scope="module")
def default_jobs() -> dict[str, int]:
    return jobs_from_plan()


def test_the_default_run_page_states_the_planned_jobs_and_models(default_jobs):
    text = (DOCS / "default-run.md").read_text()
    stated = re.search(r"Its ([\d,]+) jobs train ([\d,]+) models: ([\d,]+) small classifiers, ([\d,]+)\s+small "
                       r"U-Nets \(3 folds × 6 losses\) and ([\d,]+) small Transformers", text)
    assert stated, "docs/default-run.md states the default run's jobs and models in one sentence"
    jobs, models, classifiers, unets, transformers = map(number, stated.groups())
    plan, runs = trained_runs(ROOT / "config" / "config.yaml")
    tasks = [model_task(plan, run) for run in runs]
    assert (jobs, models) == (default_jobs["total"], default_jobs["train"])
    assert classifiers == tasks.count("classification")
    assert unets == tasks.count("segmentation")
    assert transformers == tasks.count("translation")
    assert models == len(tasks)


def test_the_workflow_profile_states_no_job_count_but_the_plans(default_jobs):
    """Any "N jobs" in profiles/default/config.yaml's comments is the default run's job count."""
    text = (ROOT / "profiles" / "default" / "config.yaml").read_text()
    stated = [number(n) for n in re.findall(r"([\d,]+) jobs", text)]
    assert all(n == default_jobs["total"] for n in stated), (stated, default_jobs["total"])


def test_the_full_scale_pages_state_each_studys_training_jobs():
    plan, runs = trained_runs(STUDIES / "mukhoti2020.yaml")
    text = (DOCS / "full-scale.md").read_text()
    stated = re.search(r"Tree-LSTM on SST Binary \(App\. D\), ([\d,]+) of its ([\d,]+) training jobs", text)
    assert stated, "docs/full-scale.md states mukhoti2020's text runs among its training jobs"
    text_runs = [run for run in runs if catalog.dataset(plan.config["datasets"][run.dataset]["name"]).paper_name
                 in ("20 Newsgroups", "SST Binary")]
    assert (number(stated[1]), number(stated[2])) == (len(text_runs), len(runs))

    _, runs = trained_runs(STUDIES / "hossain2021.yaml")
    text = (DOCS / "segmentation.md").read_text()
    stated = re.search(r"(\d+) data sets × (\d+) architectures × (\d+) losses × (\d+) folds = ([\d,]+) training jobs",
                       text)
    assert stated, "docs/segmentation.md states hossain2021's training jobs"
    *factors, total = map(number, stated.groups())
    assert total == factors[0] * factors[1] * factors[2] * factors[3] == len(runs)


def test_the_layout_page_lists_every_rule_file_as_a_stage():
    text = (DOCS / "layout.md").read_text()
    stated = re.search(r"\| `workflow/rules/\*\.smk` \| one file per stage \(([^)]*)\)", text)
    assert stated, "docs/layout.md lists the rule files' stages"
    stages = [stage.strip() for stage in stated[1].split(",")]
    files = {path.stem for path in (ROOT / "workflow" / "rules").glob("*.smk")} - {"common"}
    assert sorted(stages) == sorted(files)
    assert len(stages) == len(set(stages))
