"""The Snakemake workflow, planned but not run: job counts of every config, lint, format, config errors."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from conftest import BIN, ROOT, SNAKEFILE, planned_jobs, snakemake

STUDIES = ROOT / "config" / "studies"


def dry_run(tmp_path: Path, *configfiles: Path) -> dict[str, int]:
    args = ["-n"] + (["--configfile", *map(str, configfiles)] if configfiles else [])
    if not configfiles:
        shutil.copytree(ROOT / "config", tmp_path / "config")
    return planned_jobs(snakemake(tmp_path, *args))


def test_default_config_plans_every_stage(tmp_path):
    counts = dry_run(tmp_path)
    # 68 classification runs (the four miniature studies ask for 92; 24 of mukhoti2020's 27 MNIST-1D runs
    # are komisarenko2024's and charoenphakdee2021's too, see config/config.yaml; 6 are its text stand-in runs) and
    # 18 segmentation runs (3 folds x 6 losses), each evaluated; hossain2021 adds a table and two figures (scores
    # over folds, overlays)
    # the claims' forest plots: one per paper page and the index's
    report = {"theory_figure": 15, "study_figure": 15, "paper_table": 16, "claims_forest": 5, "report_manifest": 1,
              "run_inventory": 1, "report_notebook": 5, "report_index": 1}
    assert counts == {"prepare_data": 7, "train": 86, "export_logits": 68, "calibrate": 68, "evaluate_segmentation": 18,
                      "study_table": 5, "claims": 1, "all": 1, **report, "total": 313}


def test_test_config_plans_a_handful_of_runs(tmp_path):
    counts = dry_run(tmp_path, ROOT / "config" / "test.yaml")
    # 4 classification runs and one at lr 100 (collapsed on purpose), 4 segmentation runs (2 folds x 2 losses)
    report = {"theory_figure": 15, "study_figure": 7, "paper_table": 14, "claims_forest": 5, "report_manifest": 1,
              "run_inventory": 1, "report_notebook": 5, "report_index": 1}
    assert counts == {"prepare_data": 3, "train": 9, "export_logits": 5, "calibrate": 5, "evaluate_segmentation": 4,
                      "study_table": 3, "claims": 1, "all": 1, **report, "total": 80}


# Training jobs each paper implies; the comment atop each study file derives them.
@pytest.mark.parametrize(
    ("study", "trainings"),
    [("charoenphakdee2021", 353), ("mukhoti2020", 121), ("komisarenko2024", 110), ("hossain2021", 480)],
)
def test_study_config_dry_runs_to_the_papers_training_jobs(tmp_path, study, trainings):
    counts = dry_run(tmp_path, STUDIES / f"{study}.yaml")
    assert counts["train"] == trainings
    segmentation = study == "hossain2021"  # evaluated on the test fold, not calibrated
    assert counts.get("calibrate", 0) == (0 if segmentation else trainings)
    assert counts.get("evaluate_segmentation", 0) == (trainings if segmentation else 0)


def test_all_studies_together_train_shared_runs_once(tmp_path):
    counts = dry_run(tmp_path, *sorted(STUDIES.glob("*.yaml")))
    # mukhoti2020 and komisarenko2024 share seed 0 of 14 ResNet-50 runs
    assert counts["train"] == 353 + 121 + 110 + 480 - 14
    assert counts["study_table"] == 4  # hossain2021's from its runs' evaluations


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
def test_snakemake_in_a_clone_finds_workflow_snakefile_by_itself(workflow_checkout, configfile):
    """``snakemake`` with no ``-s`` in the repository root runs workflow/Snakefile, with the
    default config or a --configfile, and its profile (profiles/default is the workflow's own)."""
    checkout = workflow_checkout
    assert not (checkout / "Snakefile").exists()
    args = ["-n", "--cores", "1"] + (["--configfile", configfile] if configfile else [])
    result = subprocess.run([str(BIN / "snakemake"), *args], cwd=checkout, capture_output=True, text=True,
                            timeout=300, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    assert planned_jobs(result)["total"] == (80 if configfile else 313)  # the counts of the two tests above
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
