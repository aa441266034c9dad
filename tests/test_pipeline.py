"""focalcal.pipeline: config validation, the run plan, and the run-directory consistency check."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest
import yaml

from focalcal.pipeline import (
    ConfigError,
    RunConflictError,
    build_plan,
    check_config_files,
    check_configfile_conflicts,
    check_run_directories,
    load_config_file,
    validate_config,
)

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"
STUDIES = ROOT / "config" / "studies"


def load(path) -> dict:
    return yaml.safe_load(Path(path).read_text())


def validated(path) -> dict:
    return validate_config(load(path), SCHEMA)


@pytest.fixture
def ci_config() -> dict:
    return load(ROOT / "config" / "test.yaml")


# --------------------------------------------------------------------------- schema


def test_unknown_loss_name_names_the_key_and_the_allowed_values(ci_config):
    ci_config["losses"]["focal1"]["name"] = "focall"
    with pytest.raises(ConfigError) as error:
        validate_config(ci_config, SCHEMA)
    message = str(error.value)
    assert "losses.focal1.name" in message
    assert "'focall'" in message
    assert "focal_sample_dependent" in message and "cross_entropy" in message  # the allowed values


def test_unknown_recipe_key_lists_the_allowed_keys(ci_config):
    ci_config["recipes"]["tiny"]["epoch"] = 3
    with pytest.raises(ConfigError, match=r"recipes\.tiny: unknown key\(s\) \['epoch'\]; allowed keys: .*epochs"):
        validate_config(ci_config, SCHEMA)


def test_wrong_type_names_the_key(ci_config):
    ci_config["recipes"]["tiny"]["epochs"] = "three"
    with pytest.raises(ConfigError, match=r"recipes\.tiny\.epochs: 'three' is not of type 'integer'"):
        validate_config(ci_config, SCHEMA)


def test_study_referring_to_an_undefined_key_names_it(ci_config):
    ci_config["studies"]["test_digits"]["grids"][0]["losses"].append("focal9")
    with pytest.raises(ConfigError, match=r"studies\.test_digits\.grids\[0\]\.losses: unknown losses key 'focal9'"):
        validate_config(ci_config, SCHEMA)


def test_key_that_cannot_be_a_directory_name_is_rejected(ci_config):
    ci_config["losses"]["focal/1"] = {"name": "focal", "gamma": 1}
    with pytest.raises(ConfigError, match="directory names"):
        validate_config(ci_config, SCHEMA)


def test_study_bins_must_be_computed(ci_config):
    ci_config["studies"]["test_digits"]["ece_bins"] = [20]
    with pytest.raises(ConfigError, match=r"studies\.test_digits\.ece_bins: \[20\] not among the computed ece_bins"):
        validate_config(ci_config, SCHEMA)


def test_chained_calibrator_must_follow_a_temperature_scaling(ci_config):
    ci_config["calibrators"]["bad_chain"] = {"name": "psi", "gamma": 1.0, "after": "uncalibrated"}
    with pytest.raises(ConfigError, match=r"calibrators\.bad_chain\.after: 'uncalibrated' must be a temperature_scaling"):
        validate_config(ci_config, SCHEMA)


def test_defaults_are_filled_in(ci_config):
    for key in ("download", "compile", "device"):
        ci_config.pop(key, None)
    ci_config["training"] = {}
    config = validate_config(ci_config, SCHEMA)
    assert config["download"] is False and config["compile"] == "auto" and config["device"] == "auto"
    assert config["training"] == {"threads": 1, "numerics": "pinned", "mem_mb": 2000, "runtime": 30, "gpu": 0,
                                  "runs_per_gpu": 1, "retries": 1, "cuda_mps": False,
                                  "by_recipe": {}}


def test_every_recipe_of_every_config_is_a_valid_trainer_recipe():
    from focalcal.training import RunConfig

    for path in [ROOT / "config" / "config.yaml", ROOT / "config" / "test.yaml", *sorted(STUDIES.glob("*.yaml"))]:
        config = validated(path)
        plan = build_plan(config)
        for run in plan.runs.values():
            built = RunConfig.from_dict(plan.run_config(run))  # raises on anything the trainer rejects
            # the trainer gets the run's own entries, and its recipe as the config wrote it
            assert (built.dataset["name"], built.model["name"], built.loss, built.seed) == (
                config["datasets"][run.dataset]["name"], config["models"][run.model]["name"],
                config["losses"][run.loss], run.seed), run
            recipe = config["recipes"][run.recipe]
            assert all(getattr(built.recipe, key) == value for key, value in recipe.items() if key != "optimizer"), run
            assert built.recipe.optimizer.name == recipe["optimizer"]["name"], run


# --------------------------------------------------------------------------- plan


def test_runs_shared_between_studies_are_planned_once(ci_config):
    ci_config["studies"]["test_digits_again"] = copy.deepcopy(ci_config["studies"]["test_digits"])
    ci_config["studies"]["test_digits_again"]["grids"][0]["losses"] = ["ce", "focal3"]
    plan = build_plan(validate_config(ci_config, SCHEMA))
    digits_runs = [run for run in plan.runs.values() if run.dataset == "digits" and run.recipe == "tiny"]
    assert sorted(run.loss for run in digits_runs) == ["ce", "focal1", "focal3"]  # ce shared, not doubled
    # the posterior study's 2, these 3, the collapsed lr-100 run (shared too) and 4 segmentation runs
    assert len(plan.runs) == 2 + 3 + 1 + 4
    assert plan.runs["digits/cnn_small/ce/tiny/seed0"].run_dir == "results/runs/digits/cnn_small/ce/tiny/seed0"


def test_from_loss_takes_the_training_gamma(ci_config):
    plan = build_plan(validate_config(ci_config, SCHEMA))
    assert plan.calibrators["synthetic1d/mlp/focal3/tiny/seed0"]["psi"] == {"build": {"name": "psi", "gamma": 3.0}}
    assert plan.calibrators["synthetic1d/mlp/ce/tiny/seed0"]["psi"] == {"build": {"name": "psi", "gamma": 0.0}}


def test_from_loss_with_a_loss_without_single_gamma_fails(ci_config):
    ci_config["losses"]["flsd"] = {"name": "flsd53"}
    ci_config["studies"]["test_posterior"]["grids"][0]["losses"].append("flsd")
    with pytest.raises(ConfigError, match=r"calibrators\.psi\.gamma = 'from_loss' but losses\.flsd \('flsd53'\) has no single gamma"):
        build_plan(validate_config(ci_config, SCHEMA))


def test_chained_method_carries_the_temperature_scaling_it_follows():
    plan = build_plan(validated(ROOT / "config" / "config.yaml"))
    chained = plan.calibrators["mnist1d_1k_test10k/cnn1d_32/focal2/small_40/seed0"]["ts_focal_psi"]
    assert chained == {
        "build": {"name": "psi", "gamma": 2.0},
        "after": {"name": "temperature_scaling", "objective": "focal", "gamma": 2.0},
    }


def test_training_resources_default_and_per_recipe_override():
    plan = build_plan(validated(STUDIES / "mukhoti2020.yaml"))
    run = plan.runs["cifar10/resnet50/ce/cifar_350/seed0"]
    assert plan.train_resources(run) == {"threads": 8, "mem_mb": 32000, "runtime": 2880, "gpu": 1, "gpu_slots": 1,
                                         "gres": None}
    plan = build_plan(validated(ROOT / "config" / "test.yaml"))
    assert plan.train_resources(next(iter(plan.runs.values()))) == {"threads": 1, "mem_mb": 1000, "runtime": 10, "gpu": 0,
                                                                     "gpu_slots": 0, "gres": None}


def test_runs_sharing_a_gpu_ask_for_it_once_per_submission():
    """runs_per_gpu > 1: the GPU is asked for as a --gres string, which Snakemake does not sum over
    the parallel jobs of a group (an integer ``gpu`` it would: N runs, N GPUs)."""
    config = validated(STUDIES / "mukhoti2020.yaml")
    config["training"]["runs_per_gpu"] = 4
    plan = build_plan(config)
    gpu_run, cpu_run = plan.runs["cifar10/resnet50/ce/cifar_350/seed0"], plan.runs["sst/tree_lstm/ce/sst_adagrad_25/seed0"]
    assert plan.train_resources(gpu_run) == {"threads": 8, "mem_mb": 32000, "runtime": 2880, "gpu": 0, "gpu_slots": 1,
                                             "gres": "gpu:1"}
    assert plan.train_resources(cpu_run)["gres"] is None and plan.train_resources(cpu_run)["gpu_slots"] == 0


# Training jobs each paper's grid implies (see the comment at the top of each study file).
STUDY_RUNS = {"charoenphakdee2021": 353, "mukhoti2020": 124, "komisarenko2024": 110, "hossain2021": 480}


@pytest.mark.parametrize("study", sorted(STUDY_RUNS))
def test_study_configs_plan_the_papers_run_counts(study):
    plan = build_plan(validated(STUDIES / f"{study}.yaml"))
    assert len(plan.runs) == STUDY_RUNS[study]


def test_mukhoti_and_komisarenko_share_their_common_runs():
    merged = validated(STUDIES / "mukhoti2020.yaml")
    komisarenko = load(STUDIES / "komisarenko2024.yaml")
    for table in ("datasets", "models", "losses", "recipes", "calibrators", "studies"):
        merged[table].update(komisarenko[table])
    plan = build_plan(validate_config(merged, SCHEMA))
    # seed 0 of ResNet-50 x {CE, FL-1, FL-2, FL-3, FLSD-53} on CIFAR-10/100, and CE, FL-1, FL-3, FLSD-53 on Tiny-ImageNet
    assert len(plan.runs) == 124 + 110 - (2 * 5 + 4)


# --------------------------------------------------------------------------- consistency


def _write_run_config(tmp_path, plan, run, **changes):
    settings = plan.run_config(run)
    for dotted, value in changes.items():
        target = settings
        *parents, leaf = dotted.split(".")
        for parent in parents:
            target = target[parent]
        target[leaf] = value
    path = tmp_path / run.run_dir / "run_config.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(settings))


def test_run_directory_with_other_settings_fails_loudly(tmp_path, ci_config):
    plan = build_plan(validate_config(ci_config, SCHEMA))
    run = plan.runs["digits/cnn_small/ce/tiny/seed0"]
    _write_run_config(tmp_path, plan, run, **{"recipe.epochs": 5})
    with pytest.raises(RunConflictError) as error:
        check_run_directories(plan, tmp_path)
    message = str(error.value)
    assert "results/runs/digits/cnn_small/ce/tiny/seed0" in message
    assert "recipe.epochs = 5 on disk, 15 in this config" in message


def test_run_directory_with_the_same_settings_or_another_device_is_reused(tmp_path, ci_config):
    plan = build_plan(validate_config(ci_config, SCHEMA))
    _write_run_config(tmp_path, plan, plan.runs["digits/cnn_small/ce/tiny/seed0"], device="cuda", compile="cudagraphs")
    focal = plan.runs["digits/cnn_small/focal1/tiny/seed0"]
    _write_run_config(tmp_path, plan, focal)
    check_run_directories(plan, tmp_path)  # device and compile do not change a run's numbers
    # both directories were read: one changed setting in the second is refused, naming it alone
    _write_run_config(tmp_path, plan, focal, **{"recipe.epochs": 5})
    with pytest.raises(RunConflictError) as error:
        check_run_directories(plan, tmp_path)
    assert "focal1/tiny/seed0" in str(error.value) and "/ce/tiny/seed0" not in str(error.value)


def test_config_files_defining_a_key_differently_conflict(tmp_path):
    first = tmp_path / "a.yaml"
    second = tmp_path / "b.yaml"
    first.write_text(yaml.safe_dump({"recipes": {"short": {"epochs": 3}}, "losses": {"ce": {"name": "cross_entropy"}}}))
    second.write_text(yaml.safe_dump({"recipes": {"short": {"epochs": 5}}, "losses": {"ce": {"name": "cross_entropy"}}}))
    with pytest.raises(ConfigError) as error:
        check_configfile_conflicts([first, second])
    message = str(error.value)
    assert "recipes.short" in message and str(first) in message and str(second) in message
    assert "losses.ce" not in message  # identical definitions are fine


def test_the_study_configs_agree_on_what_they_share(tmp_path):
    paths = sorted(STUDIES.glob("*.yaml"))
    check_configfile_conflicts(paths)
    # what the check compared: recipes the studies share; one of them changed in a copy is refused
    recipes = [set(load(path).get("recipes", {})) for path in paths]
    shared = sorted({key for i, keys in enumerate(recipes) for other in recipes[i + 1:] for key in keys & other})
    assert shared, "the study configs share no recipe, so the check compared nothing"
    first, second = [path for path in paths if shared[0] in load(path).get("recipes", {})][:2]
    changed = load(second)
    changed["recipes"][shared[0]]["epochs"] += 1
    (tmp_path / second.name).write_text(yaml.safe_dump(changed))
    with pytest.raises(ConfigError, match=re.escape(f"recipes.{shared[0]}: {first} defines")):
        check_configfile_conflicts([first, tmp_path / second.name])


# --------------------------------------------------------------------------- duplicate keys


def _duplicate_error(tmp_path, text: str) -> str:
    path = tmp_path / "dup.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as error:
        load_config_file(path)
    return str(error.value)


def test_a_key_given_twice_in_a_table_names_the_key_both_lines_and_the_table(tmp_path):
    message = _duplicate_error(tmp_path, (
        "data_root: data\n"
        "losses:\n"
        "  ce: {name: cross_entropy}\n"
        "  focal1: {name: focal, gamma: 1}\n"
        "  focal2: {name: focal, gamma: 2}\n"
        "  focal1: {name: focal, gamma: 5}\n"
    ))
    assert "dup.yaml" in message
    assert "duplicate key 'focal1' at lines 4 and 6 (under losses)" in message


def test_a_key_given_twice_at_the_top_level_or_deeper_is_found_everywhere_at_once(tmp_path):
    message = _duplicate_error(tmp_path, (
        "device: cpu\n"
        "recipes:\n"
        "  tiny:\n"
        "    epochs: 3\n"
        "    optimizer: {name: sgd, lr: 0.1, lr: 0.2}\n"
        "studies:\n"
        "  s:\n"
        "    grids:\n"
        "      - recipe: tiny\n"
        "        recipe: other\n"
        "device: cuda\n"
    ))
    assert "duplicate key 'device' at lines 1 and 11 (at the top level)" in message
    assert "duplicate key 'lr' at lines 5 and 5 (under recipes.tiny.optimizer)" in message
    assert "duplicate key 'recipe' at lines 9 and 10 (under studies.s.grids[0])" in message


def test_keys_a_yaml_merge_brings_in_may_be_overridden(tmp_path):
    path = tmp_path / "merge.yaml"
    path.write_text("base: &base {epochs: 3, batch_size: 8}\nlonger:\n  <<: *base\n  epochs: 30\n")
    assert load_config_file(path)["longer"] == {"epochs": 30, "batch_size": 8}


def test_check_config_files_finds_duplicates_in_a_single_file(tmp_path):
    path = tmp_path / "dup.yaml"
    path.write_text("losses:\n  ce: {name: cross_entropy}\n  ce: {name: focal}\n")
    with pytest.raises(ConfigError, match=r"duplicate key 'ce' at lines 2 and 3 \(under losses\)"):
        check_config_files([path])


def test_the_shipped_config_and_schema_files_have_no_duplicate_keys():
    for path in [SCHEMA, *sorted((ROOT / "config").rglob("*.yaml"))]:
        assert load_config_file(path) == load(path)
