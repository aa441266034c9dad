"""Planning imported runs (models {name: logits_file, path}): their paths, the config checks."""

from __future__ import annotations

import copy

import pytest
from test_config_entries import ROOT, SCHEMA, problems_of

from focalcal.pipeline import ConfigError, build_plan, check_entries, load_config_file, validate_config
from focalcal.pipeline.plan import IMPORTED_RECIPE

EXAMPLE = ROOT / "config" / "examples" / "own_logits.yaml"


@pytest.fixture
def config() -> dict:
    return validate_config(load_config_file(EXAMPLE), SCHEMA)


def test_imported_runs_name_their_files_and_are_never_trained(config):
    plan = build_plan(config)
    imported = [run for run in plan.runs.values() if run.imported]
    assert len(imported) == 6 and {run.recipe for run in imported} == {IMPORTED_RECIPE}
    run = plan.runs["cifar10/my_model/focal3/imported/seed2"]
    assert plan.logits_source(run) == "own_logits/focal3_seed2.npz"
    assert plan.model_keys(imported=True) == ["my_model"] and plan.model_keys(imported=False) == ["cnn_small"]
    assert plan.run_identity(run)["recipe"] is None
    assert not any("my_model" in target for target in plan.training_targets())
    trained = plan.runs["digits/cnn_small/ce/tiny/seed0"]
    with pytest.raises(ValueError, match="is trained, not imported"):
        plan.logits_source(trained)


def test_only_a_grid_of_logits_files_may_omit_its_recipe(config):
    broken = copy.deepcopy(config)
    del broken["studies"]["own_logits"]["grids"][1]["recipe"]
    with pytest.raises(ConfigError, match=r"grids\[1\]\.recipe: missing; models \['cnn_small'\] are trained"):
        validate_config(broken, SCHEMA)


def test_logits_file_entries_are_checked(config):
    broken = copy.deepcopy(config)
    broken["models"]["my_model"] = {"name": "logits_file", "path": "own/{model}_{seed}.npz", "format": "npz"}
    broken["models"]["other"] = {"name": "logits_file"}
    broken["models"]["probs"] = {"name": "logits_file", "path": "own/{loss}.npz", "inputs": "probability"}
    text = problems_of(broken)
    assert "models.probs.inputs: 'probability' is not one of ['logits', 'probabilities']" in text
    assert "models.my_model.path: unknown placeholder(s) ['model']; a path may name {dataset}, {loss}, {seed}" in text
    assert "models.my_model.format: unknown option" in text
    assert "models.other.path: a logits_file model needs the path of its logits" in text
    check_entries(config)  # the example itself is fine


def test_logits_files_cannot_stand_for_segmentation_models(config):
    broken = copy.deepcopy(config)
    broken["datasets"]["seg"] = {"name": "synthetic_segmentation"}
    broken["studies"]["own_logits"]["grids"][0]["datasets"] = ["seg"]
    broken["studies"]["own_logits"]["grids"][0]["calibrators"] = []
    with pytest.raises(ConfigError, match=r"logits_file models \['my_model'\] give classification logits"):
        validate_config(broken, SCHEMA)
