"""The Snakemake workflow, planned but not run: job counts of every config, lint, format, config errors."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from conftest import BIN, ROOT, SNAKEFILE, copy_checkout, planned_jobs, snakemake

from focalcal.pipeline import build_plan, load_config_files, validate_config
from focalcal.pipeline.translation import calibrated_decodes
from focalcal.report.targets import CLAIMS_INDEX, PAPER_TITLES, report_plan

STUDIES = ROOT / "config" / "studies"
SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"


def dry_run(tmp_path: Path, *configfiles: Path) -> dict[str, int]:
    args = ["-n"] + (["--configfile", *map(str, configfiles)] if configfiles else [])
    if not configfiles:
        shutil.copytree(ROOT / "config", tmp_path / "config")
    return planned_jobs(snakemake(tmp_path, *args))


def jobs_from_plan(*configfiles: Path) -> dict[str, int]:
    """The jobs a dry run must plan, counted from the library's plan (focalcal.pipeline.plan and
    focalcal.report.targets) rather than from Snakemake's DAG: one job per data set trained on,
    per trained run, per calibrated run's export and calibration, per translation run's token
    export, calibration, decodes and metrics, per segmentation run's evaluation, per study table, figure and table, per claims page and report notebook."""
    plan = build_plan(validate_config(load_config_files(configfiles or [ROOT / "config" / "config.yaml"]), SCHEMA))
    report = report_plan(plan)
    trained = [run for run in plan.runs.values() if not run.imported]
    words = [run for run in plan.calibrated_runs() if run.translation]
    counts = {
        "prepare_data": len({run.dataset for run in trained}),
        "train": len(trained),
        "export_logits": len([run for run in plan.calibrated_runs() if not run.imported and not run.translation]),
        "calibrate": len(plan.calibrated_runs()) - len(words),
        "export_token_logits": len(plan.translation_runs()),
        "calibrate_tokens": len(words),
        "decode": len(words),  # one job decodes a run's whole temperature grid
        "decode_calibrated": sum(path is not None for run in words for path in calibrated_decodes(plan, run).values()),
        "translation_metrics": len(words),
        "evaluate_segmentation": len(plan.segmentation_runs()),
        "study_table": len(plan.table_targets()),
        "theory_figure": len(report.theory),
        "study_figure": len([a for s in report.studies.values() for a in s.artifacts if a.kind == "figure"]),
        "paper_table": len(report.table_targets()),
        "claims_forest": len([*PAPER_TITLES, CLAIMS_INDEX]),
        "report_notebook": len(report.notebooks),
        "claims": 1, "report_manifest": 1, "run_inventory": 1, "report_index": 1, "all": 1,
    }
    counts = {rule: n for rule, n in counts.items() if n}
    return {**counts, "total": sum(counts.values())}


def stated_training_jobs(configfile: Path) -> int:
    """The training jobs a study file's header says it implies ("# Training jobs: N = ...")."""
    found = re.search(r"^# Training jobs: ([\d,]+)", configfile.read_text(), re.MULTILINE)
    assert found, f"{configfile} states its training jobs in its header"
    return int(found.group(1).replace(",", ""))


@pytest.fixture(scope="module")
def clone_dry_run(tmp_path_factory):
    """``snakemake -n --cores 1 [--configfile FILE]`` with no ``-s``, in the root of a copy of the
    checkout's workflow files (a clone): its output, run once per config file and test worker,
    for the tests that check what the default and the test config plan and that a clone finds
    workflow/Snakefile and its profile by itself."""
    checkout, results = copy_checkout(tmp_path_factory.mktemp("clone") / "checkout"), {}

    def run(configfile: str | None) -> subprocess.CompletedProcess:
        if configfile not in results:
            args = ["-n", "--cores", "1"] + (["--configfile", configfile] if configfile else [])
            results[configfile] = subprocess.run([str(BIN / "snakemake"), *args], cwd=checkout, capture_output=True,
                                                 text=True, timeout=300, check=False)
        return results[configfile]

    run.checkout = checkout
    return run


def test_default_config_plans_every_stage(clone_dry_run):
    counts = planned_jobs(clone_dry_run(None))
    assert counts == jobs_from_plan()
    # what config/config.yaml's header describes: 18 segmentation runs (3 folds x 6 losses), each
    # evaluated, and the miniature studies' classification runs, shared where two studies ask for one
    assert counts["evaluate_segmentation"] == 18
    assert counts["export_token_logits"] == 3  # mukhoti2020 §5.2's stand-in: CE, LS-0.1, FL-1
    # each calibrated per token and decoded at the 9 temperatures of decode_temperatures (one job
    # per run), and at the two fitted ones (TS by val ECE and by val NLL)
    assert (counts["calibrate_tokens"], counts["decode"], counts["decode_calibrated"]) == (3, 3, 6)
    assert counts["train"] == counts["calibrate"] + counts["evaluate_segmentation"] + counts["export_token_logits"]


def test_test_config_plans_a_handful_of_runs(clone_dry_run):
    counts = planned_jobs(clone_dry_run("config/test.yaml"))
    assert counts == jobs_from_plan(ROOT / "config" / "test.yaml")
    # 5 classification runs (one at lr 100, collapsed on purpose) and 4 segmentation runs (2 folds x 2 losses)
    assert (counts["calibrate"], counts["evaluate_segmentation"]) == (5, 4)
    assert counts["train"] == counts["calibrate"] + counts["evaluate_segmentation"]


@pytest.mark.parametrize("study", ["charoenphakdee2021", "mukhoti2020", "komisarenko2024", "hossain2021"])
def test_study_config_dry_runs_to_the_papers_training_jobs(tmp_path, study):
    configfile = STUDIES / f"{study}.yaml"
    counts = dry_run(tmp_path, configfile)
    assert counts == jobs_from_plan(configfile)
    trainings = stated_training_jobs(configfile)
    assert counts["train"] == trainings
    segmentation = study == "hossain2021"  # evaluated on the test fold, not calibrated
    translation = counts.get("export_token_logits", 0)  # mukhoti2020 §5.2: token logits, not calibrated
    assert translation == (3 if study == "mukhoti2020" else 0)
    assert counts.get("calibrate", 0) == (0 if segmentation else trainings - translation)
    assert counts.get("evaluate_segmentation", 0) == (trainings if segmentation else 0)


def test_all_studies_together_train_shared_runs_once(tmp_path):
    files = sorted(STUDIES.glob("*.yaml"))
    counts = dry_run(tmp_path, *files)
    assert counts == jobs_from_plan(*files)
    # mukhoti2020 and komisarenko2024 share seed 0 of 14 ResNet-50 runs
    assert counts["train"] == sum(map(stated_training_jobs, files)) - 14
    assert counts["study_table"] == 5  # one per study: the four papers' and mukhoti2020's translation study


def test_an_overlay_plans_its_base_config_with_more_replicates(tmp_path):
    shutil.copytree(ROOT / "config", tmp_path / "config")
    files = (ROOT / "config" / "config.yaml", ROOT / "config" / "examples" / "every_claim_3_seeds.yaml")
    counts = dry_run(tmp_path, *files)
    assert counts == jobs_from_plan(*files)
    assert counts["train"] > jobs_from_plan()["train"]


def test_bad_config_fails_before_any_job_naming_key_and_allowed_values(tmp_path):
    config = yaml.safe_load((ROOT / "config" / "test.yaml").read_text())
    config["losses"]["focal1"]["name"] = "focall"
    config["recipes"]["tiny"]["optimizer"]["name"] = "sgdd"
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(config))
    result = snakemake(tmp_path, "--cores", "1", "--configfile", str(path), check=False)
    assert result.returncode != 0
    output = result.stdout + result.stderr
    assert "losses.focal1.name: 'focall' is not allowed; allowed values: adafocal, brier, cross_entropy" in output
    assert "recipes.tiny.optimizer.name: 'sgdd' is not allowed; allowed values: sgd, adam" in output
    assert not (tmp_path / "results").exists() and not (tmp_path / "data").exists()


def test_config_files_that_disagree_on_a_key_fail(tmp_path):
    config = yaml.safe_load((ROOT / "config" / "test.yaml").read_text())
    other = {"recipes": {"tiny": dict(config["recipes"]["tiny"], epochs=4)}}
    path = tmp_path / "other.yaml"
    path.write_text(yaml.safe_dump(other))
    result = snakemake(tmp_path, "-n", "--configfile", str(ROOT / "config" / "test.yaml"), str(path), check=False)
    assert result.returncode != 0
    assert "recipes.tiny:" in result.stderr + result.stdout
    assert "define the same key differently" in result.stderr + result.stdout


@pytest.mark.parametrize("how", ["--configfile", "default configfile"])
def test_a_key_given_twice_in_a_config_file_fails_naming_both_lines(tmp_path, how):
    # Snakemake's own YAML loader keeps the last value silently; the Snakefile re-reads the file.
    name = "test.yaml" if how == "--configfile" else "config.yaml"
    lines = (ROOT / "config" / name).read_text().splitlines()
    first = lines.index("  focal1: {name: focal, gamma: 1}")
    lines.insert(first + 2, "  focal1: {name: focal, gamma: 5}")
    if how == "--configfile":
        path = tmp_path / "dup.yaml"
        args = ["--configfile", str(path)]
    else:
        shutil.copytree(ROOT / "config", tmp_path / "config")
        path, args = tmp_path / "config" / "config.yaml", []
    path.write_text("\n".join(lines) + "\n")
    result = snakemake(tmp_path, "-n", *args, check=False)
    assert result.returncode != 0
    output = result.stdout + result.stderr
    assert f"duplicate key 'focal1' at lines {first + 1} and {first + 3} (under losses)" in output
    assert "Job stats" not in output


def test_lint_is_clean(tmp_path):
    result = snakemake(tmp_path, "--lint", "--configfile", str(ROOT / "config" / "test.yaml"))
    assert "Congratulations, your workflow is in a good condition!" in result.stdout + result.stderr


def test_snakefmt_is_clean():
    files = [SNAKEFILE, *sorted((ROOT / "workflow" / "rules").glob("*.smk"))]
    result = subprocess.run([str(BIN / "snakefmt"), "--check", *map(str, files)], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("configfile", [None, "config/test.yaml"])
def test_snakemake_in_a_clone_finds_workflow_snakefile_by_itself(clone_dry_run, configfile):
    """``snakemake`` with no ``-s`` in the repository root runs workflow/Snakefile, with the
    default config or a --configfile, and its profile (profiles/default is the workflow's own)."""
    checkout = clone_dry_run.checkout
    assert not (checkout / "Snakefile").exists()
    result = clone_dry_run(configfile)
    assert result.returncode == 0, result.stderr[-3000:]
    assert planned_jobs(result)["total"] == jobs_from_plan(*([checkout / configfile] if configfile else []))["total"]
    assert "profiles/default" in result.stdout + result.stderr


def test_rules_name_their_files_through_focalcal_paths_only():
    """No rule file types a results/ path, a conda env outside workflow/envs, or edits sys.path."""
    files = [ROOT / "workflow" / "Snakefile", *sorted((ROOT / "workflow" / "rules").glob("*.smk"))]
    for path in files:
        code = "\n".join(line.split("#", 1)[0] for line in path.read_text().splitlines())
        assert "results" not in code, f"{path.name} names a results path; use focalcal.paths"
        assert "sys.path" not in code, path.name
        for env in re.findall(r"^    conda:\n        \"([^\"]+)\"", path.read_text(), flags=re.MULTILINE):
            assert (path.parent / env).resolve().parent == ROOT / "workflow" / "envs", f"{path.name}: {env}"
    for script in sorted((ROOT / "workflow" / "scripts").glob("*.py")):
        text = script.read_text()
        assert "sys.path" not in text and "scriptdir" not in text, f"{script.name} edits its import path"
        imported = re.findall(r"^(?:from|import) (\w+)", text, flags=re.MULTILINE)
        assert set(imported) <= {"focalcal", "copy", "json", "os"}, f"{script.name} imports {imported}"


def test_planning_the_report_leaves_the_drawing_libraries_unimported():
    """Snakemake plans the report (report_plan) on every invocation, a dry run included, and never
    draws there: seaborn (and through it scipy.stats) is imported only by a job that draws a box
    plot, so no plan pays for it."""
    code = (
        "import sys\n"
        "from focalcal.pipeline import build_plan, load_config_files, validate_config\n"
        "from focalcal.report.targets import report_plan\n"
        f"plan = build_plan(validate_config(load_config_files([{str(ROOT / 'config' / 'config.yaml')!r}]), {str(SCHEMA)!r}))\n"
        "report = report_plan(plan)\n"
        "assert report.studies, 'the default config plans no study'\n"
        "print(sorted(name for name in ('seaborn', 'scipy.stats') if name in sys.modules))\n"
    )
    result = subprocess.run([str(BIN / "python"), "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]", result.stdout
